//! bee's enforcement backend.

pub mod support;
pub mod plan;
pub mod cgroup;
pub mod audit;
