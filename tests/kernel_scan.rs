//! The `scan` tool under the BPF LSM, in the VM matrix: a replayed episode runs the real Semgrep
//! CLI (the pinned release from PyPI, which `cargo xtask test` installs on the host and copies
//! into the guests with its Python) in the episode's scope, through the guest's `bee serve`,
//! and records its results in the findings ledger; every attempt of the episode to forge the
//! ledger under a version 1 policy that writes the whole workspace is refused by the kernel
//! (`support::scan`; `landlock_scan` runs the same natively under the Landlock engine).
//!
//! Features `kernel-tests` and `semgrep-tests`; needs the BPF LSM, and fails (never skips)
//! without it.

mod support;

use support::agent_run::Engine;

#[test]
fn a_scan_runs_under_the_bpf_lsm_and_the_ledger_cannot_be_forged() {
    support::scan::runs_and_the_ledger_cannot_be_forged(Engine::BpfLsm);
}
