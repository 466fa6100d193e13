//! bee's enforcement backend.

pub mod audit;
pub mod cgroup;
pub mod launch;
pub mod plan;
pub mod scope;
pub mod support;
