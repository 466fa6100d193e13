//! Claude Code under the BPF LSM, in the VM matrix: its native build (installed from npm at
//! the pinned version on the host by `cargo xtask test`, copied into the guest at the same
//! path) in learn mode, from a base that writes the workspace and reaches a scripted Anthropic
//! Messages server on loopback and nothing else, fixing a bug with its own Bash tool in print
//! mode. What it used beyond its shipped profile (`agent-claude-code`, as version 3) is a
//! reviewed list, and the learned policy validates. (`landlock_agents` runs it natively under
//! the profile and the Landlock engine.) Needs the BPF LSM; fails, never skips, without it
//! (feature `kernel-tests`).

mod support;

use std::time::Duration;

use support::agent_run;
use support::claude;
use support::scripted::{self, Seen};

/// What learn mode found Claude Code using beyond its profile in the guests, reviewed —
/// (capability, rule) as `bee policy diff --json` names them, with the test's directory as
/// `$DIR`, the directories above it as `$ABOVE`, the agents' cache as `$AGENTS` and a
/// process's number as `N`. Each is refused
/// under the profile, where Claude Code does the same work (natively, `landlock_agents`; and
/// once by hand there with its temporary directory left in /tmp, as here):
const REVIEWED: &[(&str, &str)] = &[
    // The package's reads, which learn mode widened above it into the agents' cache (which
    // holds only agents' builds); the profile grants the package.
    ("fs_read", "$AGENTS/**"),
    // The kernel's version, the shell binary it runs its commands with (the policy lets it
    // run), a kernel tunable its runtime (Bun) reads as it starts, and the `stat` of the
    // shell it started: of /proc the profile grants the process's own entries and
    // `overcommit_memory` only.
    ("fs_read", "/proc/version"),
    ("fs_read", "/usr/bin/bash"),
    ("fs_read", "/proc/sys/vm/mmap_min_addr"),
    ("fs_read", "/proc/N/stat"),
    // The machine's memory, which its runtime reads now and then (not in every run).
    ("fs_read", "/proc/meminfo"),
    // `~/.claude.json`, where it keeps its start-up bookkeeping, saved through a lock and a
    // temporary file beside it: the file also holds the user's MCP servers, commands Claude
    // Code starts, so the profile protects it (and writes nothing else in the home itself).
    ("fs_write", "$DIR/home/.claude.json"),
    ("fs_read", "$DIR/home/.claude.json.lock"),
    ("fs_write", "$DIR/home/.claude.json.lock"),
    ("fs_read", "$DIR/home/.claude.json.tmp.*"),
    ("fs_write", "$DIR/home/.claude.json.tmp.*"),
    // The trust anchors, which it reads as it starts: the guests' `/etc/ssl` holds only the
    // bundle (`certs/ca-certificates.crt`, copied in for `kernel_scan`), and learn mode widened
    // that read to the directory; the profile grants `/etc/ssl/certs/**`, where the bundle is.
    ("fs_read", "/etc/ssl/**"),
    // The listing of /tmp itself (the names of everyone's temporary files; not in every run),
    // named `$ABOVE` where the test's directory is below /tmp.
    ("fs_read", "/tmp"),
    ("fs_read", "$ABOVE"),
    // Its socket for messages between Claude Code sessions (`uds-messaging`:
    // `/tmp/cc-socks/PID.sock`, or under `$XDG_RUNTIME_DIR`), which it makes as it starts:
    // the directory is every session's of the user, and a grant to write there is one to
    // connect to the others' sockets, sessions outside the sandbox included.
    ("fs_read", "/tmp/cc-socks"),
    ("fs_write", "/tmp/cc-socks"),
    ("fs_read", "/tmp/cc-socks/*"),
    ("fs_write", "/tmp/cc-socks/*"),
    // The base writes the whole workspace; the profile keeps Claude Code's project settings
    // and MCP servers in it (`.claude/`, `.mcp.json`) read-only.
    ("fs_write", "$DIR/ws/**"),
    // The store of a built-in plugin (`plugins/store/cc-plugin-…json`): the profile protects
    // `~/.claude/plugins/`, from which Claude Code loads plugins, code it runs.
    ("fs_write", "$DIR/home/.claude/plugins/**"),
];

/// Names in the learned policy that change from run to run: the temporary files Claude Code
/// saves `~/.claude.json` through (`.claude.json.tmp.PID.HEX`) and its socket
/// (`/tmp/cc-socks/PID.sock`).
const RENAMED: &[(&str, &str)] = &[
    (
        "$DIR/home/.claude.json.tmp.",
        "$DIR/home/.claude.json.tmp.*",
    ),
    ("/tmp/cc-socks/", "/tmp/cc-socks/*"),
];

#[test]
fn claude_code_in_learn_mode_needs_nothing_beyond_its_profile_but_what_was_reviewed() {
    let claude = claude::claude_code();
    let (dir, _other) = agent_run::learn_scratch("claude");
    let (ws, home, _) = claude::state(dir.path());
    std::fs::write(ws.join("app.py"), agent_run::BUGGY).unwrap_or_else(|e| unreachable!("{e}"));
    let fix = "sed -i 's/a - b/a + b/' app.py";
    let seen = Seen::default();
    let port = scripted::server(seen.clone(), claude::bash(vec![fix.to_owned()]));
    let profile =
        agent_run::profile_in_guest(dir.path(), "agent-claude-code", &claude.package, port);
    let base = agent_run::learn_base(dir.path(), port);
    let learned = dir.path().join("learned.toml");
    let mut exec = agent_run::bee_learn(&learned, &base, &ws, &home);
    let child = claude::own_environment(&mut exec)
        .args(claude::environment(port))
        .arg("SHELL=/usr/bin/bash")
        .arg(&claude.exe)
        .args(["-p", agent_run::PROMPT, "--allowedTools", "Bash"])
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err, seen) =
        agent_run::ended_under(child, Duration::from_secs(600), &seen, "POST /v1/messages");
    assert_eq!(out.trim(), claude::ANSWER, "{err}");
    // Its Bash tool ran the fix, and the fix landed.
    let results = claude::tool_results(&claude::last_offering(&seen, "Bash"));
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).ok().as_deref(),
        Some(agent_run::FIXED),
        "{results:?}\n{err}"
    );
    let learned_text = agent_run::held_to_review(
        &profile,
        &learned,
        (dir.path(), &ws, &home),
        REVIEWED,
        RENAMED,
    );
    // Learn mode ran, and saw Claude Code keep its session.
    assert!(
        learned_text.contains("/.claude/") && err.contains("bee: LEARN MODE ended"),
        "{learned_text}\n{err}"
    );
}
