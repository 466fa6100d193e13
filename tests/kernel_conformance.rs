//! The peer conformance suite under the BPF LSM engine: cases re-expressed from the Linux
//! kernel's Landlock selftests (`tests/conformance/*.toml`, each naming the selftest case it
//! comes from), run with `bee exec` and the static `bee-probe` (`tests/conformance/probe.c`)
//! in every kernel of the matrix. Each case lays out the selftests' `layout1` in a fresh
//! directory, writes a bee policy, runs one operation, and expects its outcome: allowed (exit
//! 0) or denied (`EPERM`, exit 1). Where bee and Landlock differ, the case says why
//! (`docs/conformance.md`). `tests/landlock_conformance.rs` runs the same cases under the
//! Landlock engine on the host.
//!
//! Built only with `--features kernel-tests`; `cargo xtask vm test -p bee` and `cargo xtask
//! test` build the probe (`cc -static`) and copy it into the guest.
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
fn bee_decides_every_case_as_reviewed() {
    suite::run_suite(suite::Engine::BpfLsm, &suite::xtask_probe());
}
