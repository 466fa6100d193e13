//! bee's enforcement backend.

pub mod plan;
pub mod support;
