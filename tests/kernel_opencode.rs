//! opencode under the BPF LSM, in the VM matrix: its native build (installed from npm at the
//! pinned version on the host by `cargo xtask test`, copied into the guest at the same path)
//! in learn mode, from a base that writes the workspace and reaches a scripted OpenAI Chat
//! Completions server on loopback and nothing else, fixing a bug with its own `bash` tool
//! (`opencode run`). What it used beyond its shipped profile (`agent-opencode`, as version 3)
//! is a reviewed list, and the learned policy validates. (`landlock_opencode` runs it natively
//! under the profile and the Landlock engine.) Needs the BPF LSM; fails, never skips, without
//! it (feature `kernel-tests`).

mod support;

use std::time::Duration;

use support::agent_run;
use support::opencode;
use support::scripted::{self, Seen};

/// What learn mode found opencode using beyond its profile in the guests, reviewed —
/// (capability, rule) as `bee policy diff --json` names them, with the test's directory as
/// `$DIR`, the directories above it as `$ABOVE` and the agents' cache as `$AGENTS`. Each is
/// refused under the profile, where opencode does the same work (natively,
/// `landlock_opencode`):
const REVIEWED: &[(&str, &str)] = &[
    // The package's reads, which learn mode widened above it into the agents' cache (which
    // holds only agents' builds); the profile grants the package.
    ("fs_read", "$AGENTS/**"),
    // The kernel's version, the shell binary it runs its commands with (the policy lets it
    // run) and a kernel tunable its runtime (Bun) reads as it starts: of /proc the profile
    // grants the process's own entries and `overcommit_memory` only.
    ("fs_read", "/proc/version"),
    ("fs_read", "/usr/bin/bash"),
    ("fs_read", "/proc/sys/vm/mmap_min_addr"),
    // The trust anchors, which it reads as it starts: the guests' `/etc/ssl` holds only the
    // bundle (`certs/ca-certificates.crt`, copied in for `kernel_scan`), and learn mode widened
    // that read to the directory; the profile grants `/etc/ssl/certs/**`, where the bundle is.
    ("fs_read", "/etc/ssl/**"),
    // The directories above the workspace, where it looks for configuration up to the root,
    // and the listing of /tmp itself.
    ("fs_read", "$ABOVE"),
    ("fs_read", "$DIR"),
    ("fs_read", "/tmp"),
    // Two native libraries its runtime (Bun) unpacks from the executable into /tmp and loads
    // (`.HASH-0000000N.so`, `.node`): a file finder with a file watcher (`fff`) and
    // `@parcel/watcher`. The profile grants no write in /tmp, and no file there to run or
    // map executable: a grant to would let whatever runs in the scope run code it wrote
    // there. `opencode run` works without them.
    ("fs_read", "/tmp/.*"),
    ("fs_write", "/tmp/.*"),
    ("exec", "/tmp/.*"),
    // Its temporary directory, `/tmp/opencode`, which it makes as it starts and leaves
    // empty.
    ("fs_read", "/tmp/opencode"),
    ("fs_write", "/tmp/opencode"),
    // Learn mode widened its state (`~/.local/state/opencode/`, which the profile writes) to
    // the directory above, which holds nothing else in the test's home.
    ("fs_read", "$DIR/home/.local/state/**"),
    ("fs_write", "$DIR/home/.local/state/**"),
    // Name lookups through the guest's resolver on loopback. Under the profile bee steers
    // DNS to its own resolver, which answers the profile's host names and no other.
    ("net_ip", "udp 127.0.0.1/32 port 53"),
    // The base writes the whole workspace; the profile keeps opencode's project
    // configuration in it (`opencode.json`, `opencode.jsonc`, `.opencode/`) read-only.
    ("fs_write", "$DIR/ws/**"),
];

/// Names in the learned policy that change from run to run: the native libraries unpacked
/// into /tmp (`/tmp/.HASH-0000000N.so`).
const RENAMED: &[(&str, &str)] = &[("/tmp/.", "/tmp/.*")];

#[test]
fn opencode_in_learn_mode_needs_nothing_beyond_its_profile_but_what_was_reviewed() {
    let (package, exe) = opencode::opencode();
    let (dir, _other) = agent_run::learn_scratch("opencode");
    let commands = vec!["sed -i 's/a - b/a + b/' app.py".to_owned()];
    let seen = Seen::default();
    let port = scripted::server(seen.clone(), opencode::model(commands.clone()));
    let (ws, home, _) = opencode::state(dir.path(), port);
    let profile = agent_run::profile_in_guest(dir.path(), "agent-opencode", &package, port);
    let base = agent_run::learn_base(dir.path(), port);
    let learned = dir.path().join("learned.toml");
    let child = opencode::run(&mut agent_run::bee_learn(&learned, &base, &ws, &home), &exe)
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err, seen) = agent_run::ended_under(
        child,
        Duration::from_secs(600),
        &seen,
        "POST /v1/chat/completions",
    );
    assert!(out.contains(opencode::ANSWER), "{out}{err}");
    // Its bash tool ran the fix, and the fix landed.
    let outputs = agent_run::turns(
        &seen,
        opencode::is_turn,
        commands.len(),
        opencode::tool_outputs,
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).ok().as_deref(),
        Some(agent_run::FIXED),
        "{outputs:?}\n{err}"
    );
    let learned_text = agent_run::held_to_review(
        &profile,
        &learned,
        (dir.path(), &ws, &home),
        REVIEWED,
        RENAMED,
    );
    // Learn mode ran, and saw opencode keep its session in its database.
    assert!(
        learned_text.contains("opencode.db") && err.contains("bee: LEARN MODE ended"),
        "{learned_text}\n{err}"
    );
}
