//! hookd: a small daemon that runs a project's hooks on request.

pub mod config;
pub mod hooks;
