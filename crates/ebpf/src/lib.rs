//! bee's kernel programs.
