//! bee's enforcement backend.
