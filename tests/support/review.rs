//! The review example's episode in a kernel scope, for `kernel_review` (the BPF LSM, in the VM
//! matrix) and `landlock_review` (the Landlock engine, natively): a replayed review whose
//! `ast_grep` and `git_log` calls run as `bee __tool` in the episode's scope, and whose search
//! outside the workspace the kernel denies and the result answers as not searched.

/// Runs the review example with `bee run` (the engine `auto` picks on this kernel) and checks
/// that `engine` (`bpf-lsm`, `landlock`) enforced it, that every review tool answered what the
/// recording's review relies on, and that the one search outside the workspace (call `r5`, of
/// `/bin`) was denied by the kernel, explained, and answered as failed, with no other call
/// denied.
#[expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test helper: a missing event or a failed spawn fails the test"
)]
pub fn a_review_episode_uses_every_review_tool_in_a_kernel_scope(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    super::review_example(dir.path());
    let records = dir.path().join("records");
    let o = std::process::Command::new(super::bee_exe())
        .args([
            "run",
            "--scenario",
            "scenario.toml",
            "--provider",
            "provider.toml",
        ])
        .args(["--records-dir", &records.display().to_string()])
        .current_dir(dir.path())
        .env("HOME", "/root")
        .output()
        .expect("run bee");
    assert_eq!(
        super::code(&o),
        0,
        "{}\n{}",
        super::text(&o.stdout),
        super::text(&o.stderr)
    );
    let events = super::transcript_events(&records);
    assert_eq!(events[0]["event"], "episode_started");
    assert_eq!(
        events[0]["policy"]["enforcement"], "kernel",
        "{}",
        events[0]
    );
    assert_eq!(events[0]["policy"]["engine"], engine, "{}", events[0]);
    super::assert_review_results(&events);

    // The search of /bin was stopped by the kernel, and the result says why.
    let denials: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["event"] == "denial").collect();
    assert!(
        denials.iter().any(|d| d["call_id"] == "r5"
            && d["explanation"]
                .as_str()
                .unwrap_or_default()
                .contains("no fs.read grant covers it")),
        "{denials:?}"
    );
    let r5 = events
        .iter()
        .find(|e| e["event"] == "tool_result" && e["call_id"] == "r5")
        .unwrap();
    assert_eq!(r5["state"], "failed", "{r5}");
    assert!(
        r5["output"]
            .as_str()
            .unwrap_or_default()
            .starts_with("denied by policy:"),
        "{r5}"
    );
    // The review tools needed nothing outside the workspace: no other call was denied.
    assert!(denials.iter().all(|d| d["call_id"] == "r5"), "{denials:?}");
    let last = events.last().unwrap();
    assert_eq!(last["event"], "episode_finished");
    assert_eq!(last["outcome"], "passed", "{last}");
}
