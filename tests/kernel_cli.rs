//! The `bee` command line on a kernel that enforces: `bee check`, `bee exec` and an agent
//! episode through `bee run`, with every tool call confined by the kernel.
//!
//! Built only with `--features kernel-tests` and run in the VM matrix
//! (`cargo xtask vm test -p bee --test kernel_cli --bin target/debug/bee`): on a host whose
//! kernel cannot run BPF LSM programs these tests fail, they never skip.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions fail the test the same way"
)]

mod support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{Fixture, code, text};

fn bee(args: &[impl AsRef<OsStr>], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bee"))
        .args(args)
        .current_dir(cwd)
        .env("HOME", "/root")
        .output()
        .expect("run bee")
}

#[test]
fn check_reports_enforcement_supported() {
    let o = bee(&["check"], Path::new("/"));
    assert_eq!(code(&o), 0, "{}{}", text(&o.stdout), text(&o.stderr));
    assert!(
        text(&o.stdout).contains("pass lsm-probe"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn exec_runs_allowed_work_and_denies_the_rest_with_explanations() {
    let f = Fixture::new();
    let policy = f.policy.display().to_string();
    let notes = f.workspace.join("notes.txt").display().to_string();
    let o = bee(
        &["exec", "--policy", &policy, "--", "/bin/cat", &notes],
        &f.root,
    );
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "hello from the workspace\n");

    let audit = f.root.join("audit.jsonl");
    let o = bee(&f.read_secret_args(&audit), &f.root);
    let record = f.assert_secret_read_denied(&o, &audit);
    assert_eq!(record["grant"], "fs.read");

    // Outside any scope the same file is readable: only the scope is confined.
    assert_eq!(std::fs::read_to_string(&f.secret).unwrap(), "s3cret\n");
}

#[test]
fn exec_of_an_ungranted_program_is_refused_by_the_kernel() {
    let f = Fixture::new();
    let copy = f.workspace.join("cat-copy");
    std::fs::copy("/bin/busybox", &copy).unwrap();
    let policy = f.policy.display().to_string();
    let o = bee(
        &[
            "exec",
            "--policy",
            &policy,
            "--",
            &copy.display().to_string(),
            "cat",
        ],
        &f.root,
    );
    assert_eq!(code(&o), 126, "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("no exec.allow rule covers it"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn an_agent_episode_runs_its_tools_in_a_scope_and_gets_kernel_denials() {
    let f = Fixture::new();
    let secret = f.secret.display().to_string();
    let recording = f.root.join("recording.jsonl");
    let turns = [
        serde_json::json!({"text": "Reading the notes.", "tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}]}),
        serde_json::json!({"text": "Reading the secret.", "tool_calls": [
            {"id": "c2", "name": "read_file", "arguments": {"path": secret}}]}),
        serde_json::json!({"text": "Trying the shell.", "tool_calls": [
            {"id": "c3", "name": "shell", "arguments": {"command": format!("cat {secret}")}}]}),
        serde_json::json!({"text": "Writing a summary.", "tool_calls": [
            {"id": "c4", "name": "write_file", "arguments": {"path": "summary.txt", "content": "done\n"}}]}),
        serde_json::json!({"text": "Finished."}),
    ];
    let lines: Vec<String> = turns.iter().map(|t| t.to_string()).collect();
    std::fs::write(&recording, lines.join("\n") + "\n").unwrap();
    std::fs::write(
        f.root.join("provider.toml"),
        "kind = \"replay\"\nfile = \"recording.jsonl\"\nmodel = \"kernel-test\"\n",
    )
    .unwrap();
    std::fs::write(
        f.root.join("scenario.toml"),
        format!(
            "name = \"kernel-episode\"\nprompt = \"Summarise the notes.\"\nworkspace = \"{}\"\n\
             workspace_mode = \"in-place\"\npolicy = \"policy.toml\"\n\
             [success_check]\ncommand = \"test -f summary.txt\"\n",
            f.workspace.display()
        ),
    )
    .unwrap();
    let records = f.root.join("records");
    let o = bee(
        &[
            "run",
            "--scenario",
            "scenario.toml",
            "--provider",
            "provider.toml",
            "--records",
            &records.display().to_string(),
            "--json",
        ],
        &f.root,
    );
    assert_eq!(code(&o), 0, "{}\n{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("summary.txt")).unwrap(),
        "done\n"
    );

    let transcript = find_transcript(&records);
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["event"], "episode_started");
    assert_eq!(
        events[0]["policy"]["enforcement"], "kernel",
        "{}",
        events[0]
    );
    let denials: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["event"] == "denial").collect();
    assert!(
        denials.iter().any(|d| d["call_id"] == "c2"
            && d["explanation"]
                .as_str()
                .unwrap_or_default()
                .contains(&secret)),
        "{denials:?}"
    );
    assert!(denials.iter().any(|d| d["call_id"] == "c3"), "{denials:?}");
    let result_c2 = events
        .iter()
        .find(|e| e["event"] == "tool_result" && e["call_id"] == "c2")
        .expect("a result for c2");
    assert!(
        result_c2["output"]
            .as_str()
            .unwrap_or_default()
            .contains("no fs.read grant covers it"),
        "{result_c2}"
    );
    let last = events.last().unwrap();
    assert_eq!(last["event"], "episode_finished");
    assert_eq!(last["outcome"], "passed", "{last}");
}

/// `bee repl` as a person uses it, under the kernel: a pseudo-terminal, a conversation whose
/// tool calls run in a scope, a denial shown and explained, `/policy`, and the records.
#[test]
fn the_repl_chats_with_tools_in_a_scope_and_shows_kernel_denials() {
    use expectrl::{ControlCode, Expect, Session};
    let f = Fixture::new();
    let secret = f.secret.display().to_string();
    let turns = [
        serde_json::json!({"text": "Reading the notes.", "tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}]}),
        serde_json::json!({"text": "Now the secret.", "tool_calls": [
            {"id": "c2", "name": "read_file", "arguments": {"path": secret}}]}),
        serde_json::json!({"text": "The policy **refused** that read."}),
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
    .env("TERM", "xterm");
    let mut s = Session::spawn(cmd).expect("spawn bee repl in a pty");
    // Loading bee's programs in an emulated guest can take minutes on a busy host: only a
    // hang should fail the wait for the banner.
    s.set_expect_timeout(Some(std::time::Duration::from_secs(600)));
    s.expect("kernel-enforced").unwrap();
    s.set_expect_timeout(Some(std::time::Duration::from_secs(120)));
    s.expect("› ").unwrap();
    s.send_line("/policy").unwrap();
    s.expect("enforced by the kernel").unwrap();
    s.expect("› ").unwrap();
    s.send_line("read my notes, then the secret").unwrap();
    s.expect("hello from the workspace").unwrap();
    s.expect("denied").unwrap();
    s.expect(secret.as_str()).unwrap();
    s.expect("fs.read").unwrap();
    s.expect("refused").unwrap();
    s.expect("› ").unwrap();
    s.send(ControlCode::EndOfTransmission).unwrap();
    s.expect("session ended").unwrap();
    let exit = support::pty_exit_code(s.get_process(), std::time::Duration::from_secs(60));
    assert_eq!(exit, 0, "bee repl's exit code");

    let transcript = find_transcript(&records);
    let events = std::fs::read_to_string(&transcript).unwrap();
    assert!(events.contains(r#""enforcement":"kernel""#), "{events}");
    // The transcript records the policy as requested and as installed (with the runner's
    // grant).
    let started: serde_json::Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    assert!(started["policy"]["requested"].is_object(), "{started}");
    assert!(
        started["policy"]["installed"]
            .to_string()
            .contains("(bee tool runner)"),
        "{started}"
    );
    assert!(
        !started["policy"]["requested"]
            .to_string()
            .contains("(bee tool runner)")
    );
    assert!(events.contains(r#""event":"denial""#), "{events}");
    assert!(events.contains(r#""outcome":"ended""#), "{events}");
    let o = bee(
        &[
            "metrics",
            "--records",
            &records.display().to_string(),
            "--json",
        ],
        &f.root,
    );
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["total"]["model"]["calls"], 3);
    assert!(v["total"]["tools"]["denials"].as_u64().unwrap() >= 1, "{v}");
}

fn find_transcript(records: &Path) -> PathBuf {
    for run in std::fs::read_dir(records).unwrap() {
        let run = run.unwrap().path();
        if !run.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&run).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "jsonl") {
                return f;
            }
        }
    }
    panic!("no transcript under {}", records.display());
}

/// A pinned program in the writable workspace cannot be rewritten in place from inside the
/// scope (the policy protects it; here the BPF LSM programs refuse the writes).
#[test]
fn a_pinned_program_in_a_writable_tree_cannot_be_rewritten_from_inside() {
    let dir = tempfile::tempdir().unwrap();
    support::pin::a_pinned_program_cannot_be_rewritten_from_inside(
        dir.path(),
        "bpf-lsm",
        "/bin/sh",
        r#""/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache""#,
    );
}
