//! Gemini CLI under the BPF LSM, in the VM matrix: its package (installed from npm at the
//! pinned version on the host by `cargo xtask test`, copied into the guest at the same path,
//! run by the guest's `node`) in learn mode, from a base that writes the workspace and reaches
//! a scripted Gemini API server on loopback and nothing else, fixing a bug with its own shell
//! tool (`gemini -p PROMPT --yolo`). What it used beyond its shipped profile (`agent-gemini`,
//! as version 3) is a reviewed list, and the learned policy validates. (`landlock_gemini` runs
//! it natively under the profile and the Landlock engine.) Needs the BPF LSM; fails, never
//! skips, without it (feature `kernel-tests`).

mod support;

use std::time::Duration;

use support::agent_run;
use support::gemini;
use support::scripted::{self, Seen};

/// What learn mode found Gemini CLI using beyond its profile in the guests, reviewed —
/// (capability, rule) as `bee policy diff --json` names them, with the test's directory as
/// `$DIR`, the directories above it as `$ABOVE` and the agents' cache as `$AGENTS`. Each is
/// refused under the profile, where Gemini CLI does the same work (natively,
/// `landlock_gemini`):
const REVIEWED: &[(&str, &str)] = &[
    // The package's reads, which learn mode widened above it into the agents' cache (which
    // holds only agents' builds); the profile grants the package.
    ("fs_read", "$AGENTS/**"),
    // The kernel's version, and the memory size Node.js reads (`os.totalmem()`: Gemini CLI
    // sizes its heap by it as it starts and runs with Node.js's default without it): of /proc
    // the profile grants the process's own entries and `overcommit_memory` only.
    ("fs_read", "/proc/version"),
    ("fs_read", "/proc/meminfo"),
    // The runtime and the shell its shell tool runs commands with, read as files (the
    // policy lets both run; running a program needs no read grant of it).
    ("fs_read", "/usr/bin/node"),
    ("fs_read", "/usr/bin/bash"),
    // The directories above the workspace, where it looks for project files up to the root.
    ("fs_read", "$ABOVE"),
    // Its own settings, which it writes back as it runs. They name the MCP servers it starts
    // and its hooks, outside any sandbox of its own: the profile keeps them read-only, and
    // Gemini CLI runs on without the write (`landlock_gemini` checks the file unchanged).
    ("fs_write", "$DIR/home/.gemini/settings.json"),
    // The base writes the whole workspace; the profile keeps Gemini CLI's project settings in
    // it (`.gemini/`) read-only.
    ("fs_write", "$DIR/ws/**"),
];

#[test]
fn gemini_cli_in_learn_mode_needs_nothing_beyond_its_profile_but_what_was_reviewed() {
    let (package, script) = gemini::gemini();
    let (dir, _other) = agent_run::learn_scratch("gemini");
    let commands = vec!["sed -i 's/a - b/a + b/' app.py".to_owned()];
    let seen = Seen::default();
    let port = scripted::server(seen.clone(), gemini::model(commands.clone()));
    let (ws, home, _) = gemini::gemini_state(dir.path());
    let profile = agent_run::profile_in_guest(dir.path(), "agent-gemini", &package, port);
    let base = agent_run::learn_base(dir.path(), port);
    let learned = dir.path().join("learned.toml");
    let mut exec = agent_run::bee_learn(&learned, &base, &ws, &home);
    // As under the profile natively (`landlock_gemini`, `docs/profiles.md`).
    let child = gemini::run(&mut exec, "/usr/bin/node", &script, &home, port)
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err, seen) = agent_run::ended_under(
        child,
        Duration::from_secs(600),
        &seen,
        "POST /v1beta/models/",
    );
    assert!(out.contains(gemini::ANSWER), "{out}{err}");
    let chat: Vec<(String, String)> = seen
        .iter()
        .filter(|(r, _)| r.contains(":streamGenerateContent?alt=sse"))
        .cloned()
        .collect();
    // Its shell tool ran the fix, and the fix landed.
    let outputs = agent_run::turns(&chat, gemini::is_turn, commands.len(), gemini::tool_outputs);
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).ok().as_deref(),
        Some(agent_run::FIXED),
        "{outputs:?}\n{err}"
    );
    let learned_text =
        agent_run::held_to_review(&profile, &learned, (dir.path(), &ws, &home), REVIEWED, &[]);
    // Learn mode ran, and saw Gemini CLI keep its chat in its state directory.
    assert!(
        learned_text.contains(".gemini") && err.contains("bee: LEARN MODE ended"),
        "{learned_text}\n{err}"
    );
}
