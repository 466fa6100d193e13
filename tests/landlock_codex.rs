//! OpenAI's Codex CLI under bee on this host: installed from npm at a pinned version into a
//! cache under the target directory, run non-interactively (`codex exec`, its own sandbox and
//! prompts off) under its shipped profile and the Landlock engine, against a scripted OpenAI
//! Responses server on loopback that it reaches through a model provider of its configuration.
//! The scripted model has Codex's own shell tool read a secret outside the workspace, write
//! Codex's configuration and a git hook, and fix a bug: the kernel refuses the first two, the
//! fix lands, and what Codex sent back to the model shows it. And Codex itself unconfined with
//! `bee mcp` as its tools for files and commands (its own shell tool off): the kernel refuses bee's `read_file`
//! of the secret, Codex hands bee's explanation to the model, bee's `edit_file` lands the fix.
//! Needs root, Landlock, the BPF file system at `/sys/fs/bpf` (the Landlock engine's network
//! gate, for the profile's host names and the loopback address), `npm` and the npm registry;
//! fails, never skips, without them (features `landlock-tests` and `mcp`).

mod support;

use std::time::Duration;

use support::scripted::{self, Seen};
use support::{agent_run, codex};

#[test]
fn codex_under_its_profile_is_refused_a_secret_its_configuration_and_a_hook_and_lands_a_fix() {
    let codex::Codex {
        package, launcher, ..
    } = codex::codex();
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
    // The package read and run, as the profile grants it where npm installs it; the shell
    // and the commands the model runs; the scripted server.
    let policy = agent_run::policy(
        dir.path(),
        "agent-codex",
        (&ws, &home),
        &package,
        port,
        "protect = [\"./.git/**\"]\n",
    );
    let mut exec = agent_run::bee_exec(&policy, &ws, &home);
    let child = codex::own_environment(&mut exec)
        .args(["OPENAI_API_KEY=sk-test", "SHELL=/usr/bin/bash"])
        .arg(&launcher)
        .args(codex::ARGS)
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err, seen) =
        agent_run::ended(child, Duration::from_secs(180), &seen, "POST /v1/responses");
    let files = codex::Files {
        secret: &secret,
        config: (&config_file, &config),
        hook: &hook,
        ws: &ws,
        home: &home,
    };
    codex::ran_as_scripted(
        agent_run::Engine::Landlock,
        &files,
        (&out, &err),
        &seen,
        commands.len(),
    );
}

#[test]
fn codex_with_bee_mcp_as_its_tools_is_refused_a_secret_and_lands_a_fix() {
    codex::with_bee_mcp(agent_run::Engine::Landlock);
}
