//! The Landlock engine: a policy enforced where the BPF LSM is not active, exactly or not at
//! all.
//!
//! Where the kernel runs Landlock (Linux 5.13+) but not bee's LSM programs (Ubuntu's and
//! WSL2's kernels leave `bpf` out of `CONFIG_LSM`; many virtual machines list it and still
//! refuse its programs), a scope is confined by four kernel mechanisms that need no BPF:
//!
//! | layer | decides | module |
//! |---|---|---|
//! | a Landlock ruleset (ABI 1–7) | opens, creation, removal, renames and links, `execve`, TCP connect and bind (ABI 4) | [`plan`], [`confine`], [`walk`] |
//! | private mounts (mount namespace) | attribute changes, executable mappings: everything read-only and `noexec` but what write and exec grants name | [`confine`] |
//! | PID and IPC namespaces, a `subset=pid` `/proc` | which processes the scope can see, signal and trace; System V IPC of its own | [`confine`] |
//! | a seccomp filter | the gates the LSM programs hold: `bpf`, mounts, user namespaces, keyrings, sockets other than TCP, … | [`seccomp`] |
//!
//! [`LandlockPlan::new`] decides, rule by rule, whether that stack enforces the policy exactly;
//! what it would enforce more widely is refused ([`LandlockRefusal`]), what it enforces more
//! strictly is named ([`LandlockPlan::narrowings`]). The engine needs `CAP_SYS_ADMIN` for the
//! namespaces (bee as root, as the BPF engine needs). Denials that Landlock decides are reported
//! from the kernel's audit records on ABI 7 ([`audit`]); the seccomp filter's refusals are
//! answered and reported by the engine itself ([`seccomp::notify`]); those the mounts decide
//! are not: the call sees `EROFS` or `EACCES`.

pub mod audit;
pub mod confine;
pub mod engine;
pub mod gate;
pub mod plan;
pub mod seccomp;
pub mod walk;

pub use confine::{Confinement, abi_version};
pub use engine::LandlockEngine;
pub use plan::{GateSupport, LandlockAbi, LandlockPlan, LandlockRefusal};
