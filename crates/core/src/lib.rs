//! bee's policy language.
pub mod glob;
