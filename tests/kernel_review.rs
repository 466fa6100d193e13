//! The review example (`examples/review/`) under the kernel: a replayed review episode whose
//! `ast_grep` and `git_log` calls run as `bee __tool` in the episode's scope, and whose
//! search outside the workspace is denied by the kernel and answered as not searched.
//!
//! Built only with `--features kernel-tests,sec,astgrep-rust` and run in the VM matrix by
//! `cargo xtask test` (`cargo xtask vm test -p bee --test kernel_review --features
//! kernel-tests,sec,astgrep-rust,astgrep-python`); on a host whose kernel cannot run BPF LSM
//! programs it fails, it never skips.
mod support;

use std::process::Command;

use support::{assert_review_results, code, review_example, text, transcript_events};

#[test]
fn a_review_episode_uses_every_review_tool_in_a_kernel_scope() {
    let dir = tempfile::tempdir().unwrap();
    review_example(dir.path());
    let records = dir.path().join("records");
    let o = Command::new(env!("CARGO_BIN_EXE_bee"))
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
    assert_eq!(code(&o), 0, "{}\n{}", text(&o.stdout), text(&o.stderr));
    let events = transcript_events(&records);
    assert_eq!(events[0]["event"], "episode_started");
    assert_eq!(
        events[0]["policy"]["enforcement"], "kernel",
        "{}",
        events[0]
    );
    assert_review_results(&events);

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
