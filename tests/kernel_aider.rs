//! Aider under the BPF LSM, in the VM matrix: its virtual environment (made with Debian's
//! CPython from PyPI at the pinned version on the host by `cargo xtask test`, copied into one
//! guest at the same path with the interpreter and its standard library) in learn mode, from
//! a base that writes the workspace and reaches a scripted OpenAI Chat Completions server on
//! loopback and nothing else, applying the scripted model's fix (an edit of `app.py` in its
//! reply) with `--yes-always`. What it used beyond its shipped profile (`agent-aider`, as
//! version 3) is a reviewed list, and the learned policy validates. (`landlock_aider` runs it
//! natively under the profile and the Landlock engine.) Needs the BPF LSM; fails, never
//! skips, without it (feature `kernel-tests`).

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::agent_run;
use support::aider;
use support::scripted::{self, Seen};

/// What learn mode found Aider using beyond its profile in the guest, reviewed —
/// (capability, rule) as `bee policy diff --json` names them, with the test's directory as
/// `$DIR`, the directories above it as `$ABOVE` and the agents' cache as `$AGENTS`. Each is
/// refused under the profile, where Aider does the same work (natively, `landlock_aider`):
const REVIEWED: &[(&str, &str)] = &[
    // The environment's reads, which learn mode widened above it into the agents' cache
    // (which holds only agents' builds); the policy grants the environment.
    ("fs_read", "$AGENTS/**"),
    // The interpreter read as a file (Python's `platform.libc_ver()` scans the running
    // executable for the C library's version; running it needs no read grant), the listing
    // of `/etc` (where a platform probe looks for `*-release` files), and the system's CPU
    // times: Aider reports what it runs on and carries on without them. Of /proc the profile
    // grants the process's own entries only.
    ("fs_read", "/usr/bin/python3.*"),
    ("fs_read", "/etc"),
    ("fs_read", "/proc/stat"),
    // The base writes the whole workspace; the profile keeps Aider's project configuration
    // in it (`.aider.conf.yml`, `.env`) and the repository's hooks read-only.
    ("fs_write", "$DIR/ws/**"),
];

/// Names in the learned policy that depend on the host the environment was made on: Debian's
/// interpreter (`/usr/bin/python3.11` on bookworm).
const RENAMED: &[(&str, &str)] = &[("/usr/bin/python3.", "/usr/bin/python3.*")];

#[test]
fn aider_in_learn_mode_needs_nothing_beyond_its_profile_but_what_was_reviewed() {
    let (venv, exe) = aider::aider();
    let (dir, _other) = agent_run::learn_scratch("aider");
    let replies = vec![format!(
        "{}\n\n{}\n\n{}",
        aider::step(0),
        aider::ANSWER,
        aider::edit("app.py", "    return a - b\n", "    return a + b\n").trim_end()
    )];
    let seen: Seen = Arc::default();
    let port = scripted::server(Arc::clone(&seen), aider::model(replies.clone()));
    let (ws, home, metadata) = aider::aider_state(dir.path(), &[]);
    let profile = agent_run::profile_in_guest(dir.path(), "agent-aider", &venv, port);
    let base = agent_run::learn_base(dir.path(), port);
    let learned = dir.path().join("learned.toml");
    let mut exec = agent_run::bee_learn(&learned, &base, &ws, &home);
    let mut child = aider::run(&mut exec, &exe, port, &metadata)
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap_or_else(|| unreachable!());
        stdin
            .write_all(format!("{}\n", agent_run::PROMPT).as_bytes())
            .unwrap_or_else(|e| unreachable!("{e}"));
    }
    let (out, err, seen) = agent_run::ended_under(
        child,
        Duration::from_secs(900),
        &seen,
        "POST /v1/chat/completions",
    );
    assert!(out.contains(aider::ANSWER), "{out}{err}");
    assert_eq!(seen.len(), replies.len(), "{seen:?}");
    // Aider applied the fix.
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).ok().as_deref(),
        Some(agent_run::FIXED),
        "{out}{err}"
    );
    let learned_text = agent_run::held_to_review(
        &profile,
        &learned,
        (dir.path(), &ws, &home),
        REVIEWED,
        RENAMED,
    );
    // Learn mode ran, and saw Aider keep the chat's history in the workspace.
    assert!(
        learned_text.contains(".aider") && err.contains("bee: LEARN MODE ended"),
        "{learned_text}\n{err}"
    );
}
