//! Subagents under the kernel: the delegation example (`examples/delegation`) run with
//! `bee run`, each subagent in a scope of its own whose policy the kernel enforces, a widened
//! role refused before any model call, `bee metrics --by agent`; Ctrl-C in the middle of a
//! subagent's command, which must leave no scope, pin or process behind (SIGTERM takes the
//! same path: `tests/run_cli.rs` sends it in host mode); and a per-tool scope.
//!
//! Built only with `--features kernel-tests` and run in the VM matrix (`cargo xtask test`):
//! on a host whose kernel cannot run BPF LSM programs these tests fail, they never skip.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions fail the test the same way"
)]

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Fixture, code, processes_with, text};

/// The example's files, built into the test (the guest has no checkout).
const EXAMPLE: &[(&str, &str)] = &[
    (
        "scenario.toml",
        include_str!("../examples/delegation/scenario.toml"),
    ),
    (
        ".bee/config.toml",
        include_str!("../examples/delegation/.bee/config.toml"),
    ),
    (
        ".bee/agents/reviewer.toml",
        include_str!("../examples/delegation/.bee/agents/reviewer.toml"),
    ),
    (
        ".bee/agents/keeper.toml",
        include_str!("../examples/delegation/.bee/agents/keeper.toml"),
    ),
    (
        ".bee/agents/widener.toml",
        include_str!("../examples/delegation/.bee/agents/widener.toml"),
    ),
    (
        "policies/parent.toml",
        include_str!("../examples/delegation/policies/parent.toml"),
    ),
    (
        "policies/reviewer.toml",
        include_str!("../examples/delegation/policies/reviewer.toml"),
    ),
    (
        "policies/keeper.toml",
        include_str!("../examples/delegation/policies/keeper.toml"),
    ),
    (
        "policies/widener.toml",
        include_str!("../examples/delegation/policies/widener.toml"),
    ),
    (
        "project/src/lib.rs",
        include_str!("../examples/delegation/project/src/lib.rs"),
    ),
    (
        "project/secret/token.txt",
        include_str!("../examples/delegation/project/secret/token.txt"),
    ),
    (
        "recordings/parent.toml",
        include_str!("../examples/delegation/recordings/parent.toml"),
    ),
    (
        "recordings/parent.jsonl",
        include_str!("../examples/delegation/recordings/parent.jsonl"),
    ),
    (
        "recordings/reviewer.toml",
        include_str!("../examples/delegation/recordings/reviewer.toml"),
    ),
    (
        "recordings/reviewer.jsonl",
        include_str!("../examples/delegation/recordings/reviewer.jsonl"),
    ),
    (
        "recordings/keeper.toml",
        include_str!("../examples/delegation/recordings/keeper.toml"),
    ),
    (
        "recordings/keeper.jsonl",
        include_str!("../examples/delegation/recordings/keeper.jsonl"),
    ),
    (
        "recordings/widener.toml",
        include_str!("../examples/delegation/recordings/widener.toml"),
    ),
    (
        "recordings/widener.jsonl",
        include_str!("../examples/delegation/recordings/widener.jsonl"),
    ),
];

const CGROUP_PARENT: &str = "/sys/fs/cgroup/bee";
const PIN_ROOT: &str = "/sys/fs/bpf/bee";

fn bee(args: &[&str], cwd: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bee"))
        .args(args)
        .current_dir(cwd)
        .env("HOME", "/root")
        .output()
        .expect("run bee")
}

/// A session's transcript, as JSON values.
fn events(run_dir: &Path, session: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run_dir.join(format!("{session}.jsonl")))
        .unwrap_or_else(|e| panic!("{session}: {e}"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn only_run(records: &Path) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(records)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

fn denials<'a>(events: &'a [serde_json::Value], call: &str) -> Vec<&'a serde_json::Value> {
    events
        .iter()
        .filter(|e| e["event"] == "denial" && e["call_id"] == call)
        .collect()
}

fn result<'a>(events: &'a [serde_json::Value], call: &str) -> &'a serde_json::Value {
    events
        .iter()
        .find(|e| e["event"] == "tool_result" && e["call_id"] == call)
        .unwrap_or_else(|| panic!("no result for {call}"))
}

#[test]
fn the_delegation_example_confines_each_subagent_to_its_own_policy() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("delegation");
    for (path, body) in EXAMPLE {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    let records = root.join("records");
    let o = bee(
        &["run", "--scenario", "scenario.toml", "--records", "records"],
        &root,
    );
    assert_eq!(code(&o), 0, "{}\n{}", text(&o.stdout), text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("1 of 1 episode(s) passed; 2 subagent(s), 1 delegation(s) refused"),
        "{out}"
    );
    let run = only_run(&records);
    let parent = events(&run, "delegated-review");
    assert_eq!(parent[0]["policy"]["enforcement"], "kernel");

    // The two subagents start side by side, so which is numbered first varies: find each
    // one's transcript through its caller's `subagent` record.
    let session_of = |call: &str| {
        parent
            .iter()
            .find(|e| e["event"] == "subagent" && e["call_id"] == call)
            .and_then(|e| e["session_id"].as_str())
            .unwrap_or_else(|| panic!("no subagent for {call}"))
            .to_owned()
    };
    // The reviewer read src/ and was denied secret/ by the kernel, in its own transcript.
    let reviewer = events(&run, &session_of("d1"));
    assert_eq!(reviewer[0]["policy"]["enforcement"], "kernel");
    assert_eq!(reviewer[0]["parent"]["call_id"], "d1");
    assert!(
        result(&reviewer, "r1")["output"]
            .as_str()
            .unwrap()
            .contains("v.len() - n"),
        "{reviewer:?}"
    );
    let denied = denials(&reviewer, "r2");
    assert!(
        denied
            .iter()
            .any(|d| d["hook"] == "file_open"
                && d["target"].to_string().contains("secret/token.txt")),
        "{reviewer:?}"
    );
    // The keeper is the other way round: its grants are not the reviewer's.
    let keeper = events(&run, &session_of("d2"));
    assert!(
        result(&keeper, "k1")["output"]
            .as_str()
            .unwrap()
            .contains("0123456789abcdef"),
        "{keeper:?}"
    );
    assert!(
        denials(&keeper, "k2")
            .iter()
            .any(|d| d["target"].to_string().contains("src/lib.rs")),
        "{keeper:?}"
    );
    // The parent never saw a denial: each subagent's are its own.
    assert!(parent.iter().all(|e| e["event"] != "denial"));

    // The widener was refused before any model call, with the counterexample.
    let refused = result(&parent, "d3");
    assert_eq!(refused["state"], "could_not_run");
    let words = refused["output"].as_str().unwrap();
    assert!(
        words.contains("refused: role `widener`") && words.contains("`/etc/**`"),
        "{words}"
    );
    let sessions = std::fs::read_dir(&run)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        })
        .count();
    assert_eq!(
        sessions, 3,
        "the parent and two subagents; the widener never started"
    );

    let o = bee(
        &["metrics", "--records", "records", "--by", "agent", "--json"],
        &root,
    );
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let group = |k: &str| {
        v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["key"] == k)
            .unwrap_or_else(|| panic!("no group {k}: {v}"))
            .clone()
    };
    assert_eq!(group("reviewer")["delegations"]["started"], 1);
    assert!(group("reviewer")["tools"]["denials"].as_u64().unwrap() >= 1);
    assert!(group("keeper")["tools"]["denials"].as_u64().unwrap() >= 1);
    assert_eq!(group("widener")["delegations"]["refused"], 1);
    assert_eq!(group("(main)")["tools"]["denials"], 0);
}

/// Scope cgroups below the bee parent and instance directories under the pin root.
fn leftovers() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (root, dirs_only) in [(CGROUP_PARENT, true), (PIN_ROOT, false)] {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if dirs_only && !p.is_dir() {
                continue;
            }
            found.insert(p.display().to_string());
        }
    }
    found
}

/// A parent delegates to a role whose shell runs `marker` (a long `sleep`); `signal` arrives
/// while it runs. Everything stops in order: both transcripts end, and no scope, pin or process is
/// left.
fn cancel_during_a_subagent(signal: i32, marker: &str) {
    let f = Fixture::new();
    let before = leftovers();
    std::fs::create_dir_all(f.root.join(".bee/agents")).unwrap();
    let line = |v: serde_json::Value| v.to_string() + "\n";
    std::fs::write(
        f.root.join("parent.jsonl"),
        line(
            serde_json::json!({"tool_calls": [{"id": "c1", "name": "agent",
            "arguments": {"role": "sleeper", "task": "wait"}}]}),
        ),
    )
    .unwrap();
    std::fs::write(
        f.root.join("sleeper.jsonl"),
        line(
            serde_json::json!({"tool_calls": [{"id": "s1", "name": "shell",
            "arguments": {"command": marker}}]}),
        ),
    )
    .unwrap();
    for who in ["parent", "sleeper"] {
        std::fs::write(
            f.root.join(format!("{who}.toml")),
            format!("kind = \"replay\"\nfile = \"{who}.jsonl\"\nmodel = \"kernel-test\"\n"),
        )
        .unwrap();
    }
    std::fs::write(
        f.root.join(".bee/agents/sleeper.toml"),
        "description = \"Waits.\"\npolicy = \"../../policy.toml\"\ntools = [\"shell\"]\n\
         provider = \"../../sleeper.toml\"\n",
    )
    .unwrap();
    std::fs::write(
        f.root.join("scenario.toml"),
        format!(
            "name = \"cancel\"\nprompt = \"go\"\nworkspace = \"{}\"\nworkspace_mode = \
             \"in-place\"\npolicy = \"policy.toml\"\n",
            f.workspace.display()
        ),
    )
    .unwrap();
    let records = f.root.join("records");
    let child = Command::new(env!("CARGO_BIN_EXE_bee"))
        .args([
            "run",
            "--scenario",
            "scenario.toml",
            "--provider",
            "parent.toml",
        ])
        .arg("--records")
        .arg(&records)
        .current_dir(&f.root)
        .env("HOME", "/root")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while processes_with(marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the subagent's command never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid with a standard signal.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 130, "{}\n{}", text(&o.stdout), text(&o.stderr));
    assert!(start.elapsed() < Duration::from_secs(120));
    assert_eq!(processes_with(marker), Vec::<String>::new());
    assert_eq!(leftovers(), before, "a scope or pin was left behind");
    let run = only_run(&records);
    for session in ["cancel", "cancel.sleeper-1"] {
        let ev = events(&run, session);
        let last = ev.last().unwrap();
        assert_eq!(last["event"], "episode_finished", "{session}: {last}");
        assert_eq!(last["outcome"], "interrupted", "{session}: {last}");
    }
}

#[test]
fn ctrl_c_during_a_subagent_tears_everything_down() {
    cancel_during_a_subagent(libc::SIGINT, "sleep 601");
}

/// `[tools.shell] policy`: the shell runs in a scope of its own under a policy narrower than
/// the session's, so the kernel refuses it a file the session's `read_file` may read.
#[test]
fn a_tool_with_a_narrower_policy_runs_in_a_scope_under_it() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root.join(".bee")).unwrap();
    std::fs::write(
        f.root.join("shell.toml"),
        "version = 1\n[fs]\nread = [\"/bin/**\"]\nwrite = [\"/dev/null\"]\n\
         [exec]\nallow = [\"/bin/busybox\"]\n",
    )
    .unwrap();
    std::fs::write(
        f.root.join(".bee/config.toml"),
        "[tools.shell]\npolicy = \"../shell.toml\"\n",
    )
    .unwrap();
    let line = |v: serde_json::Value| v.to_string();
    std::fs::write(
        f.root.join("recording.jsonl"),
        [
            line(serde_json::json!({"tool_calls": [
                {"id": "s1", "name": "shell", "arguments": {"command": "cat notes.txt"}},
                {"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}]})),
            line(serde_json::json!({"text": "done"})),
        ]
        .join("\n"),
    )
    .unwrap();
    std::fs::write(
        f.root.join("provider.toml"),
        "kind = \"replay\"\nfile = \"recording.jsonl\"\nmodel = \"kernel-test\"\n",
    )
    .unwrap();
    std::fs::write(
        f.root.join("scenario.toml"),
        format!(
            "name = \"scoped\"\nprompt = \"go\"\nworkspace = \"{}\"\nworkspace_mode = \
             \"in-place\"\npolicy = \"policy.toml\"\n",
            f.workspace.display()
        ),
    )
    .unwrap();
    let o = bee(
        &[
            "run",
            "--scenario",
            "scenario.toml",
            "--provider",
            "provider.toml",
            "--records",
            "records",
        ],
        &f.root,
    );
    assert_eq!(code(&o), 0, "{}\n{}", text(&o.stdout), text(&o.stderr));
    let run = only_run(&f.root.join("records"));
    let ev = events(&run, "scoped");
    assert!(
        ev[0]["policy"]["tools"]["shell"]
            .as_str()
            .unwrap()
            .ends_with("shell.toml")
    );
    assert!(
        denials(&ev, "s1")
            .iter()
            .any(|d| d["hook"] == "file_open" && d["target"].to_string().contains("notes.txt")),
        "{ev:?}"
    );
    assert!(
        result(&ev, "r1")["output"]
            .as_str()
            .unwrap()
            .contains("hello from the workspace"),
        "{ev:?}"
    );
    assert!(denials(&ev, "r1").is_empty(), "{ev:?}");
}
