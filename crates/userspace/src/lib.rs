//! bee's enforcement backend.

pub mod plan;
