//! bee's enforcement backend.

pub mod support;
