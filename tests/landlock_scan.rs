//! The `scan` tool under the kernel, natively (the Landlock engine): a replayed episode runs the
//! real Semgrep CLI in the episode's scope and records its results in the findings ledger, and
//! every attempt of the episode to forge the ledger fails (`support::scan`; `kernel_scan` runs
//! the same under the BPF LSM in the VM matrix).
//!
//! Features `semgrep-tests` and `landlock-tests`; needs root and Landlock, and fails (never
//! skips) without them. Semgrep is the one `BEE_SEMGREP` names, or the pinned release installed
//! from PyPI on first use (`support::semgrep_exe`).

mod support;

use support::agent_run::Engine;

#[test]
fn a_scan_runs_under_landlock_and_the_ledger_cannot_be_forged() {
    support::scan::runs_and_the_ledger_cannot_be_forged(Engine::Landlock);
}
