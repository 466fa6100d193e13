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
