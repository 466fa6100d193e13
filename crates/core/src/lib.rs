//! bee's policy language: TOML policies parsed, normalised and lowered into a backend-neutral
//! [`CompiledPolicy`], and the attenuation proof that a child policy grants nothing its
//! parent does not.
//!
//! The crate needs no async runtime and touches the file system only to read a policy and to
//! resolve the inodes of pinned executables.

pub mod attenuate;
pub mod compiled;
pub mod glob;
pub mod net;

pub use compiled::CompiledPolicy;
