//! bee: the harness library.
