//! bee: run AI coding agents whose every tool call is confined by eBPF LSM programs.
//!
//! This package is the application and the harness library it drives. The policy language
//! lives in `bee-core`, the kernel-facing backend in `bee-userspace`, the shared map layouts
//! in `bee-common` and the kernel programs in `bee-ebpf`.

pub mod agents;
pub mod allow;
pub mod app;
pub mod config;
pub mod episode;
#[cfg(feature = "findings")]
pub mod findings;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod panels;
pub mod policies;
pub mod provider;
pub mod records;
pub mod render;
pub mod sandbox;
pub mod scenario;
pub mod serve;
pub mod session;
pub mod skills;
pub mod tools;
pub mod vocab;
