//! `/allow` in `bee repl` under the kernel: after a denial, the narrowest rule that would have
//! allowed it and the prover's diff are shown; "no" changes nothing, "yes" switches the live
//! scope to the widened policy (atomically: `crates/userspace/tests/kernel_replace.rs`), the
//! agent's retry succeeds, and the change is recorded in the transcript and in
//! `policy-changes.jsonl`.
//!
//! Built only with `--features kernel-tests` and run in the VM matrix
//! (`cargo xtask vm test -p bee --test kernel_allow --bin target/debug/bee`).
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions fail the test the same way"
)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use expectrl::{ControlCode, Expect, Session};
use support::Fixture;

fn run_dir(records: &Path) -> PathBuf {
    for run in std::fs::read_dir(records).unwrap() {
        let run = run.unwrap().path();
        if run.is_dir() {
            return run;
        }
    }
    panic!("no run directory under {}", records.display());
}

/// Waits for `what` on the screen; on a timeout, fails with what the screen showed instead.
fn see<S: Expect + std::io::Read>(s: &mut S, what: &str) {
    if let Err(e) = s.expect(what) {
        let mut buf = vec![0u8; 1 << 16];
        let n = s.read(&mut buf).unwrap_or(0);
        panic!(
            "waiting for {what:?}: {e}; the screen had: {}",
            String::from_utf8_lossy(&buf[..n])
        );
    }
}

#[test]
fn allow_proposes_proves_asks_and_applies_the_narrowest_rule_live() {
    let f = Fixture::new();
    let secret = f.secret.display().to_string();
    let turns = [
        serde_json::json!({"text": "Reading the secret.", "tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"path": secret}}]}),
        serde_json::json!({"text": "The policy refused that read."}),
        serde_json::json!({"text": "Trying again.", "tool_calls": [
            {"id": "c2", "name": "read_file", "arguments": {"path": secret}}]}),
        serde_json::json!({"text": "Read it this time."}),
    ];
    let lines: Vec<String> = turns.iter().map(|t| t.to_string()).collect();
    std::fs::write(f.root.join("recording.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::write(
        f.root.join("provider.toml"),
        "kind = \"replay\"\nfile = \"recording.jsonl\"\nmodel = \"kernel-test\"\n",
    )
    .unwrap();
    let records = f.root.join("records");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bee"));
    cmd.args([
        "repl",
        "--policy",
        "policy.toml",
        "--provider",
        "provider.toml",
    ])
    .arg("--workspace")
    .arg(&f.workspace)
    .arg("--records-dir")
    .arg(&records)
    .current_dir(&f.root)
    .env("HOME", &f.root)
    .env("XDG_STATE_HOME", f.root.join("state"))
    .env("NO_COLOR", "1")
    .env("COLUMNS", "200")
    .env("TERM", "xterm");
    let mut s = Session::spawn(cmd).unwrap();
    s.set_expect_timeout(Some(Duration::from_secs(120)));
    see(&mut s, "kernel-enforced");
    see(&mut s, "› ");
    // Nothing to answer yet.
    s.send_line("/allow").unwrap();
    see(&mut s, "no denial yet");
    see(&mut s, "› ");
    s.send_line("read the secret").unwrap();
    see(&mut s, "denied");
    see(&mut s, "refused that read");
    see(&mut s, "› ");
    // A denial that does not exist.
    s.send_line("/allow 7").unwrap();
    see(&mut s, "no denial 7");
    see(&mut s, "› ");
    // The proposal, its proof, the question; "no" changes nothing.
    s.send_line("/allow").unwrap();
    see(&mut s, &format!("fs.read += \"{secret}\""));
    see(&mut s, "the narrowest");
    see(&mut s, &format!("grants read of `{secret}`"));
    see(&mut s, "apply this change");
    s.send_line("n").unwrap();
    see(&mut s, "not applied");
    see(&mut s, "› ");
    s.send_line("/policy").unwrap();
    see(&mut s, "enforced by the kernel");
    see(&mut s, "› ");
    // "yes" applies it to the running scope.
    s.send_line("/allow 1").unwrap();
    see(&mut s, "apply this change");
    s.send_line("y").unwrap();
    see(&mut s, "applied");
    see(&mut s, "in force in the running scope");
    see(&mut s, "› ");
    s.send_line("/policy").unwrap();
    see(&mut s, &secret);
    see(&mut s, "› ");
    // The agent's retry now reads it.
    s.send_line("try again").unwrap();
    see(&mut s, "Trying again");
    see(&mut s, "✓");
    see(&mut s, "Read it this time");
    see(&mut s, "› ");
    s.send(ControlCode::EndOfTransmission).unwrap();
    see(&mut s, "session ended");
    let exit = support::pty_exit_code(s.get_process(), Duration::from_secs(60));
    assert_eq!(exit, 0, "bee repl's exit code");

    let run = run_dir(&records);
    let changes = std::fs::read_to_string(run.join("policy-changes.jsonl")).unwrap();
    let change: serde_json::Value = serde_json::from_str(changes.lines().next().unwrap()).unwrap();
    assert_eq!(
        change["rule"],
        format!("fs.read += \"{secret}\""),
        "{change}"
    );
    assert_eq!(change["denial"]["path"], secret.as_str(), "{change}");
    assert_eq!(
        changes.lines().count(),
        1,
        "the declined proposal is not recorded"
    );
    let transcript = std::fs::read_to_string(run.join("repl.jsonl")).unwrap();
    assert!(
        transcript.contains("the user allowed `fs.read += "),
        "the transcript records the change: {transcript}"
    );
    // The retry read the file (only an allowed read puts its content in the transcript) …
    assert!(transcript.contains("s3cret"), "{transcript}");
    // … and there was one denial, the first read's.
    assert_eq!(
        transcript.matches(r#""event":"denial""#).count(),
        1,
        "{transcript}"
    );
}
