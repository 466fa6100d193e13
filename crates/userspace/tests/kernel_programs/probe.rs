//! Kernel tests: support detection. Run on a kernel that runs BPF LSM programs, as root — in
//! the VM matrix via `cargo xtask vm test`. Elsewhere they fail: a test that cannot prove
//! enforcement does not pass.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

use bee_userspace::support::{GateId, SupportReport};

use crate::kernel_support::{TestResult, assert_expected_kernel};

#[test]
fn support_probe_passes() -> TestResult {
    let report = SupportReport::detect();
    println!("{report}");
    assert_expected_kernel(&report.kernel_release);
    let probe = report.gate(GateId::LsmProbe).ok_or("no probe gate")?;
    assert!(probe.passed, "LSM probe failed: {}", probe.reason);
    let programs = report.gate(GateId::Programs).ok_or("no programs gate")?;
    if !programs.passed {
        // The gate shows the end of the verifier's log; the whole log says where.
        if let Err(e) = bee_userspace::engine::Engine::verify(&Default::default()) {
            println!("{e}");
        }
    }
    assert!(
        programs.passed,
        "bee's programs refused: {}",
        programs.reason
    );
    assert!(
        !programs.reason.contains("directory cache compiled out"),
        "{}",
        programs.reason
    );
    assert!(report.is_supported(), "not supported:\n{report}");
    assert!(report.lsms.iter().any(|l| l == "bpf"));
    Ok(())
}

/// The verifier's work for a load stays bounded: every in-process `bee` command and `bee check`
/// pays it, and under TCG a load of 2.3 million verified instructions took about 38 s of one
/// CPU. The count is the kernel's own (`verified_insns`), the same on every run of one kernel,
/// so this is no timed test. The bounds are about twice what the programs need on 6.12 and 7.x;
/// there the object before `resolve_loop` and `walk_path` became global functions fails both
/// (428,344 for `bee_path_rename`, 2,324,445 in all: `docs/enforcement.md`, "Verification
/// cost").
#[test]
fn the_verifiers_work_for_a_load_is_bounded() -> TestResult {
    const PROGRAM_MAX: u32 = 100_000;
    const TOTAL_MAX: u64 = 1_100_000;
    let verification = bee_userspace::engine::Engine::verify(&Default::default())?;
    assert_eq!(verification.dircache_refused, None);
    assert_eq!(verification.verified_insns.len(), verification.programs);
    let uncounted: Vec<_> = verification
        .verified_insns
        .iter()
        .filter(|&&(_, n)| n == 0)
        .collect();
    assert!(
        uncounted.is_empty(),
        "the kernel gave no verified_insns for {uncounted:?}"
    );
    let (costliest, most) = verification.costliest().ok_or("no program")?;
    let total = verification.total_insns();
    println!("{total} instructions verified; the most, {most}, for {costliest}");
    assert!(
        most <= PROGRAM_MAX,
        "{costliest}: {most} instructions verified, more than {PROGRAM_MAX}"
    );
    assert!(
        total <= TOTAL_MAX,
        "{total} instructions verified over every program, more than {TOTAL_MAX}"
    );
    Ok(())
}
