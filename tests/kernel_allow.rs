//! `/allow` in `bee repl` under the kernel: after a denial, the narrowest rule that would have
//! allowed it and the prover's diff are shown; "no" changes nothing, "yes" switches the live
//! scope to the widened policy (atomically: `crates/userspace/tests/kernel_programs/replace.rs`), the
//! agent's retry succeeds, and the change is recorded in the transcript and in
//! `policy-changes.jsonl`; a process of the scope opening files meanwhile never sees a torn
//! policy.
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

/// Starts `bee repl` on the fixture's policy with a replay provider answering `turns`, and
/// waits for its kernel-enforced banner and first prompt; returns the session and its records
/// directory. `in_process` keeps it from the service that `$BEE_SOCKET` may name (the VM
/// runner starts one per boot), so that its scopes are its own.
fn start_repl(
    f: &Fixture,
    turns: &[serde_json::Value],
    in_process: bool,
) -> (expectrl::session::OsSession, PathBuf) {
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
    if in_process {
        cmd.env_remove("BEE_SOCKET");
    }
    let mut s = Session::spawn(cmd).unwrap();
    // Loading and attaching bee's programs in an emulated guest can take minutes when the
    // host is busy (the banner's second line waits for it); only a hang should fail here.
    s.set_expect_timeout(Some(Duration::from_secs(600)));
    see(&mut s, "kernel-enforced");
    s.set_expect_timeout(Some(Duration::from_secs(120)));
    see(&mut s, "› ");
    (s, records)
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
    let (mut s, records) = start_repl(&f, &turns, false);
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

/// The scope cgroup of the `bee repl` whose pid is `pid`: bee names its scopes
/// `<pid>-<starttime>-<sequence>` below `/sys/fs/cgroup/bee`, and this session has one.
fn scope_of(pid: i32) -> PathBuf {
    let prefix = format!("{pid}-");
    let scopes: Vec<PathBuf> = std::fs::read_dir("/sys/fs/cgroup/bee")
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    assert_eq!(scopes.len(), 1, "the session's scopes: {scopes:?}");
    scopes.into_iter().next().unwrap()
}

/// One round of the loop below: its number, then `ok`/`FAIL` for the file granted all along
/// and `ok`/`denied` for the one `/allow` grants.
fn rounds(log: &Path) -> Vec<(u64, bool, bool)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            match f[..] {
                [n, g @ ("ok" | "FAIL"), s @ ("ok" | "denied")] => {
                    Some((n.parse().ok()?, g == "ok", s == "ok"))
                }
                _ => None,
            }
        })
        .collect()
}

/// Waits (up to two minutes) until `log` holds at least `n` rounds.
fn wait_rounds(log: &Path, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while rounds(log).len() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "the loop wrote {} rounds, not {n}",
            rounds(log).len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A process of the scope that opens files in a loop: stopped and reaped however the test
/// ends.
struct Opener(std::process::Child, PathBuf);

impl Drop for Opener {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.1, "");
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Opens the file granted all along (`$1`) and the one `/allow` grants (`$2`) with the shell's
/// own redirections (no fork per open), one round per line of `$3`, until `$4` exists. The
/// shell's error for a refused open goes to the log too.
const OPEN_LOOP: &str = r#"i=0
while [ ! -e "$4" ]; do
  i=$((i+1))
  if read -r l < "$1"; then g=ok; else g=FAIL; fi
  if read -r l < "$2"; then s=ok; else s=denied; fi
  echo "$i $g $s"
done >> "$3" 2>&1"#;

/// `/allow` switches the scope while another of its processes opens files: every check sees
/// the old policy whole or the new one whole. A tool call's processes never outlive the call
/// (`docs/tools.md`), so the looping process is started by the test and joins the session's
/// scope itself, before its exec; it finds the scope by the session's pid, so the session
/// enforces in its own process.
#[test]
fn a_live_allow_is_seen_whole_by_a_process_of_the_scope_opening_files_meanwhile() {
    let f = Fixture::new();
    let secret = f.secret.display().to_string();
    let notes = f.workspace.join("notes.txt");
    let log = f.workspace.join("opens.log");
    let stop = f.workspace.join("stop");
    let turns = [
        serde_json::json!({"text": "Reading the secret.", "tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"path": secret}}]}),
        serde_json::json!({"text": "The policy refused that read."}),
        serde_json::json!({"text": "Listing the workspace.", "tool_calls": [
            {"id": "c2", "name": "list_dir", "arguments": {"path": "."}}]}),
        serde_json::json!({"text": "Listed the workspace."}),
        serde_json::json!({"text": "Trying again.", "tool_calls": [
            {"id": "c3", "name": "read_file", "arguments": {"path": secret}}]}),
        serde_json::json!({"text": "Read it this time."}),
    ];
    let (mut s, records) = start_repl(&f, &turns, true);
    s.send_line("read the secret").unwrap();
    see(&mut s, "denied");
    see(&mut s, "refused that read");
    see(&mut s, "› ");

    // Another process joins the session's scope (before its exec, which is checked there)
    // and opens both files in a tight loop while the change is asked for and applied.
    let scope = scope_of(s.get_process().pid().as_raw());
    let child = Command::new("/bin/busybox")
        .args([
            "sh",
            "-c",
            r#"echo 0 > "$1/cgroup.procs" && shift && exec /bin/busybox sh -c "$@""#,
            "sh",
        ])
        .arg(&scope)
        .arg(OPEN_LOOP)
        .arg("sh")
        .args([&notes, &f.secret, &log, &stop])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut opener = Opener(child, stop.clone());
    wait_rounds(&log, 50);
    s.send_line("/allow 1").unwrap();
    see(&mut s, &format!("fs.read += \"{secret}\""));
    see(&mut s, "apply this change");
    s.send_line("y").unwrap();
    see(&mut s, "applied");
    see(&mut s, "in force in the running scope");
    // A round that starts after the one in progress now starts after the change was reported.
    let reported = rounds(&log).len();
    wait_rounds(&log, reported + 100);
    std::fs::write(&stop, "").unwrap();
    let status = opener.0.wait().unwrap();
    assert!(status.success(), "the loop: {status}");
    see(&mut s, "› ");

    let text = std::fs::read_to_string(&log).unwrap();
    let all = rounds(&log);
    let numbers: Vec<u64> = all.iter().map(|r| r.0).collect();
    assert_eq!(
        numbers,
        (1..=all.len() as u64).collect::<Vec<_>>(),
        "every round logged once, in order"
    );
    // The file granted before and after opened in every round: no check saw a torn policy.
    let failed: Vec<_> = all.iter().filter(|r| !r.1).collect();
    assert!(
        failed.is_empty(),
        "the granted file failed to open: {failed:?}"
    );
    // The new file: refused until the switch, then opened in every round.
    let first = all
        .iter()
        .position(|r| r.2)
        .expect("the new file never opened");
    assert!(
        first >= 50,
        "opened before the change was asked for: round {first}"
    );
    assert!(
        first <= reported + 1,
        "refused after the change was reported: first success in round {}, {reported} rounds before the report",
        first + 1
    );
    let after: Vec<_> = all[first..].iter().filter(|r| !r.2).collect();
    assert!(
        after.is_empty(),
        "refused again after its first success: {after:?}"
    );
    eprintln!(
        "{} rounds; the new file refused in rounds 1-{first}, opened from round {}; {reported} rounds logged when the change was reported",
        all.len(),
        first + 1
    );
    // Each refusal was the kernel's EPERM, reported by the shell for the new file.
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| !l.ends_with(" ok") && !l.ends_with(" denied"))
        .collect();
    assert_eq!(
        errors.len(),
        first,
        "one error per refused round: {errors:?}"
    );
    for e in errors {
        assert!(
            e.contains(&secret) && e.contains("Operation not permitted"),
            "{e}"
        );
    }

    // The session goes on: the next call drains the loop's denials, the retry reads the file.
    s.send_line("look around").unwrap();
    see(&mut s, "Listed the workspace");
    see(&mut s, "› ");
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
    let events: Vec<serde_json::Value> = std::fs::read_to_string(run.join("repl.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let denials = |call: &str| -> Vec<&serde_json::Value> {
        events
            .iter()
            .filter(|e| e["event"] == "denial" && e["call_id"] == call)
            .collect()
    };
    assert_eq!(denials("c1").len(), 1, "the first read's denial");
    let drained = denials("c2");
    assert!(
        !drained.is_empty(),
        "the loop's denials reach the scope's records"
    );
    for d in drained {
        assert_eq!(d["target"]["path"], secret.as_str(), "{d}");
    }
    assert!(denials("c3").is_empty(), "the retry was not refused");
    let changes = std::fs::read_to_string(run.join("policy-changes.jsonl")).unwrap();
    assert_eq!(changes.lines().count(), 1, "{changes}");
}
