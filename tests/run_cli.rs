//! The `bee run` executable: refusals happen before any model call, with the documented
//! statuses. (This host's kernel lists `bpf` yet refuses LSM programs, so a well-formed run
//! with a policy stops at 69; `tests/run_episodes.rs` covers the runs themselves with a
//! scripted sandbox, and `tests/kernel_caps.rs` the 77 of missing privileges.)

mod support;

use std::path::Path;

use support::{bee_in, stderr};

fn demo(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/demo")
        .join(file)
        .display()
        .to_string()
}

#[test]
fn the_demo_without_enforcement_exits_69_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let o = bee_in(
        dir.path(),
        &[
            "run",
            "--scenario",
            &demo("scenario.toml"),
            "--provider",
            &demo("provider.toml"),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(69), "{err}");
    assert!(
        err.starts_with(
            "bee run: this kernel cannot enforce the policy; no episode was started, no model \
             was called\n"
        ),
        "{err}"
    );
    // Every failed gate with its fix; here the probe's EPERM, though root holds every
    // capability (so this is the kernel's refusal, not a missing privilege).
    assert!(err.contains("bee run: lsm-probe failed: "), "{err}");
    assert!(err.contains("Operation not permitted"), "{err}");
    assert!(err.contains("         fix: "), "{err}");
    assert!(!err.contains("capabilities failed"), "{err}");
    assert!(!dir.path().join(".bee/records").exists());
}

#[test]
fn host_and_a_policy_together_exit_64() {
    let dir = tempfile::tempdir().unwrap();
    let o = bee_in(
        dir.path(),
        &[
            "run",
            "--scenario",
            &demo("scenario.toml"),
            "--provider",
            &demo("provider.toml"),
            "--host",
        ],
    );
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
}

#[test]
fn missing_arguments_and_files_exit_64_and_66() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(bee_in(dir.path(), &["run"]).status.code(), Some(64));
    assert_eq!(
        bee_in(
            dir.path(),
            &["run", "--scenario", "s.toml", "--concurrency", "0"]
        )
        .status
        .code(),
        Some(64)
    );
    let o = bee_in(
        dir.path(),
        &[
            "run",
            "--scenario",
            "missing.toml",
            "--provider",
            &demo("provider.toml"),
        ],
    );
    assert_eq!(o.status.code(), Some(66), "{}", stderr(&o));
}

#[test]
fn help_lists_the_run_flags() {
    let dir = tempfile::tempdir().unwrap();
    let o = bee_in(dir.path(), &["run", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--scenario",
        "--provider",
        "--policy",
        "--host",
        "--concurrency",
        "--json",
        "--config",
        "--records",
        "--max-turns",
        "--max-cost-usd",
    ] {
        assert!(help.contains(flag), "{flag} missing from\n{help}");
    }
}
