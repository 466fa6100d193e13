//! bee's policy language: TOML policies parsed, normalised and lowered into a backend-neutral
//! [`CompiledPolicy`], and the attenuation proof that a child policy grants nothing its
//! parent does not.
//!
//! The crate needs no async runtime and touches the file system only to read a policy and to
//! resolve the inodes of pinned executables.
//!
//! ```no_run
//! use bee_core::compile::{compile_file, CompileOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let options = CompileOptions { base: "/work/repo".into(), home: Some("/home/u".into()) };
//! let compiled = compile_file("policies/cargo-test.toml".as_ref(), &options)?;
//! println!("{}", compiled.policy.to_json()?);
//! # Ok(()) }
//! ```

pub mod attenuate;
pub mod compile;
pub mod compiled;
pub mod error;
pub mod glob;
pub mod host;
pub mod learn;
pub mod net;
pub mod path;
pub mod protected;
mod raw;
pub mod source_file;

pub use attenuate::{AttenuationReport, PolicyDiff, attenuate, diff};
pub use compile::{CompileOptions, Compiled, compile_file, compile_str};
pub use compiled::CompiledPolicy;
pub use error::{PolicyDiagnostic, PolicyDiagnostics, PolicyError, PolicyWarning};
