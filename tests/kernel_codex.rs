//! OpenAI's Codex CLI under the BPF LSM, in the VM matrix: its native build (installed from
//! npm at the pinned version on the host by `cargo xtask test`, copied into the guest at the
//! same path) run non-interactively under its shipped profile *as written* — version 3, every
//! protected name at any depth — against a scripted OpenAI Responses server on loopback. The
//! scripted model has Codex's own shell tool read a secret outside the workspace, write
//! Codex's configuration and a git hook (which only version 3's built-in protected set covers
//! here: the policy names no `.git` rule), and fix a bug: the kernel refuses the first three,
//! the fix lands, and what Codex sent back to the model shows it. (`landlock_codex` runs the
//! same scenario natively under the Landlock engine, which needs the profile made version 1.)
//! And Codex itself unconfined with `bee mcp --engine bpf-lsm` as its tools: the kernel
//! refuses bee's `read_file` of the secret, and Codex hands bee's explanation to the model.
//! And Codex in learn mode from a base that writes the workspace only: what it used beyond its
//! profile is a reviewed list, and the learned policy validates.
//! Needs the BPF LSM; fails, never skips, without it (features `kernel-tests` and `mcp`).

mod support;

use std::time::Duration;

use support::agent_run::{self, Engine};
use support::codex;
use support::scripted::{self, Seen};

#[test]
fn codex_under_its_profile_as_written_is_refused_a_secret_its_configuration_and_a_hook() {
    let codex = codex::codex();
    let dir = codex::scratch();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, agent_run::SECRET).unwrap_or_else(|e| unreachable!("{e}"));
    let (ws, home) = (dir.path().join("ws"), dir.path().join("home"));
    let config_file = home.join(".codex/config.toml");
    let hook = ws.join(".git/hooks/pre-commit");
    let commands = codex::commands(&secret, &config_file, &hook);
    let seen = Seen::default();
    let port = scripted::server(seen.clone(), codex::model(commands.clone()));
    let (ws, home, config) = codex::state(dir.path(), port);
    let policy = agent_run::profile_in_guest(dir.path(), "agent-codex", &codex.package, port);
    let mut exec = agent_run::bee_exec_under(Engine::BpfLsm, &policy, &ws, &home);
    let child = codex::own_environment(&mut exec)
        .args([
            "OPENAI_API_KEY=sk-test",
            "SHELL=/usr/bin/bash",
            "CODEX_MANAGED_BY_NPM=1",
        ])
        .arg(&codex.native)
        .args(codex::ARGS)
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err, seen) =
        agent_run::ended_under(child, Duration::from_secs(600), &seen, "POST /v1/responses");
    let files = codex::Files {
        secret: &secret,
        config: (&config_file, &config),
        hook: &hook,
        ws: &ws,
        home: &home,
    };
    codex::ran_as_scripted(Engine::BpfLsm, &files, (&out, &err), &seen, commands.len());
}

#[test]
fn codex_with_bee_mcp_as_its_tools_is_refused_a_secret_and_lands_a_fix() {
    codex::with_bee_mcp(Engine::BpfLsm);
}

/// What learn mode found Codex using beyond its profile in the guests, reviewed — (capability,
/// rule) as `bee policy diff --json` names them, with the test's directory as `$DIR`, the
/// agents' cache as `$AGENTS` and an unlinked file's inode number as `N`. Each is refused
/// under the profile, and Codex does its work without it (the first test):
const REVIEWED: &[(&str, &str)] = &[
    // The package's reads, which learn mode widened above it into the agents' cache (which
    // holds only agents' builds); the profile grants the package.
    ("fs_read", "$AGENTS/**"),
    // The trust anchors, which Codex reads as it starts: the guests' `/etc/ssl` holds only the
    // bundle (`certs/ca-certificates.crt`, copied in for `kernel_scan`), and learn mode widened
    // that read to the directory; the profile grants `/etc/ssl/certs/**`, where the bundle is.
    ("fs_read", "/etc/ssl/**"),
    // Codex's watches (inotify) on /etc and on the home directory.
    ("fs_read", "/etc"),
    ("fs_read", "$DIR/home"),
    // The kernel's version, and the shell binary Codex runs its commands with (it runs it).
    ("fs_read", "/proc/version"),
    ("fs_read", "/usr/bin/bash"),
    // Unlinked temporary files in /tmp.
    ("fs_read", "/tmp/#N"),
    ("fs_write", "/tmp/#N"),
    // The base writes the whole workspace; the profile keeps Codex's project configuration
    // in it (`.codex/`) read-only.
    ("fs_write", "$DIR/ws/**"),
    // Codex refreshes its bundled skills (`skills/.system/`); the profile protects
    // `~/.codex/skills/`, since a skill is instructions to the model.
    ("fs_write", "$DIR/home/.codex/skills/**"),
];

#[test]
fn codex_in_learn_mode_needs_nothing_beyond_its_profile_but_what_was_reviewed() {
    let codex = codex::codex();
    let dir = codex::scratch();
    let commands = vec!["sed -i 's/a - b/a + b/' app.py".to_owned()];
    let seen = Seen::default();
    let port = scripted::server(seen.clone(), codex::model(commands.clone()));
    let (ws, home, _) = codex::state(dir.path(), port);
    let profile = agent_run::profile_in_guest(dir.path(), "agent-codex", &codex.package, port);
    // The base: the workspace written and the scripted server, nothing else.
    let base = agent_run::learn_base(dir.path(), port);
    let learned = dir.path().join("learned.toml");
    let mut exec = agent_run::bee_learn(&learned, &base, &ws, &home);
    let child = codex::own_environment(&mut exec)
        .args(["OPENAI_API_KEY=sk-test", "SHELL=/usr/bin/bash"])
        .arg(&codex.native)
        .args(codex::ARGS)
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err, _) =
        agent_run::ended_under(child, Duration::from_secs(600), &seen, "POST /v1/responses");
    assert_eq!(out.trim(), codex::ANSWER, "{err}");
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).ok().as_deref(),
        Some(agent_run::FIXED),
        "{err}"
    );
    let learned_text =
        agent_run::held_to_review(&profile, &learned, (dir.path(), &ws, &home), REVIEWED, &[]);
    // Learn mode ran.
    assert!(
        learned_text.contains("thread_history_1.sqlite") && err.contains("bee: LEARN MODE ended"),
        "{learned_text}\n{err}"
    );
}
