//! Kernel tests of bee's programs, hook by hook. Run on a kernel that runs BPF LSM programs,
//! as root — in the VM matrix via `cargo xtask vm test --test kernel_programs` (a module alone:
//! `-- stress::`). Elsewhere they fail: a test that cannot prove enforcement does not pass.
//!
//! One test binary, one engine: under the emulated guests loading bee's programs (the
//! verifier's work) costs about 20 s per kernel, paid once here rather than once per module.
//! Tests run one at a time (`--test-threads=1` in the VM), each in its own cgroup.
//! `kernel_names` and `kernel_dns_attack` are binaries of their own: they drive a
//! [`bee_userspace::engine::SharedEngine`] with name servers of their own, and a process has
//! one engine.

#[path = "../kernel_support/mod.rs"]
mod kernel_support;

mod attack;
mod cache;
mod carve;
mod dns;
mod exec;
mod fs;
mod net;
mod probe;
mod replace;
mod scope;
mod stress;

helper_entry!();
