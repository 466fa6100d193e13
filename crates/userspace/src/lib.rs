//! bee's enforcement backend.

pub mod engine;
pub mod plan;
pub mod support;
