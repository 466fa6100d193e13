//! bee's enforcement backend.

pub mod engine;
pub mod support;
pub mod plan;
