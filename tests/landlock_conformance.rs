//! The peer conformance suite under the Landlock engine, on this host (no VM): the cases of
//! `tests/conformance/*.toml` (`tests/kernel_conformance.rs` runs them under the BPF LSM
//! engine in the VM kernels), each run by one `bee exec --engine landlock` of `bee-probe
//! batch`. A case gives `expect_landlock` and `why_landlock` where the Landlock engine decides
//! otherwise than the BPF LSM engine (`docs/conformance.md`).
//!
//! The static probe is built here, in the test's set-up (`cc -static`, as xtask builds it for
//! the VM). Needs root, Landlock and a C compiler with a static libc; fails, never skips,
//! without them (feature `landlock-tests`; `cargo xtask test` turns it on).
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions fail the test the same way"
)]

mod support;

#[path = "conformance/suite.rs"]
mod suite;

#[test]
fn every_case_names_its_selftest_and_every_difference_its_reason() {
    suite::check_case_files();
}

#[test]
fn the_landlock_engine_decides_every_case_as_reviewed() {
    let dir = tempfile::tempdir().unwrap();
    let probe = suite::build_probe(dir.path());
    suite::run_suite(suite::Engine::Landlock, &probe);
}
