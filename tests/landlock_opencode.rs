//! opencode under bee on this host: installed from npm at a pinned version into a cache under
//! the target directory, run non-interactively (`opencode run`) under its shipped profile and
//! the Landlock engine, against a scripted OpenAI Chat Completions server on loopback that it
//! reaches through a custom provider of its global configuration (`@ai-sdk/openai-compatible`
//! with a `baseURL`). The scripted model has opencode's own `bash` tool read a secret outside
//! the workspace, add an MCP server to opencode's configuration, and fix a bug: the kernel
//! refuses the first two, the fix lands, and what opencode sent back to the model shows it.
//! Needs root, Landlock, the BPF file system at `/sys/fs/bpf` (the Landlock engine's network
//! gate, for the profile's host names and the loopback address), `npm` and the npm registry;
//! fails, never skips, without them (feature `landlock-tests`).

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::agent_run;
use support::opencode::{self, ANSWER};
use support::scripted::{self, Seen};

#[test]
fn opencode_under_its_profile_is_refused_a_secret_and_its_configuration_and_lands_a_fix() {
    let (package, exe) = opencode::opencode();
    let dir =
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap_or_else(|e| unreachable!("{e}"));
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, agent_run::SECRET).unwrap_or_else(|e| unreachable!("{e}"));
    let config_file = dir.path().join("home/.config/opencode/opencode.json");
    let project_file = dir.path().join("ws/opencode.json");
    // What the scripted model has opencode run, in order: the secret; an MCP server (a
    // command opencode starts, outside any sandbox of its own) put into its global
    // configuration and into the project's, in the writable workspace; the fix.
    let mcp = r#"{"mcp": {"x": {"type": "local", "command": ["sh", "-c", "echo pwned"]}}}"#;
    let commands = vec![
        format!("cat {}", secret.display()),
        format!(
            "echo '{mcp}' > {}; echo '{mcp}' > {}",
            config_file.display(),
            project_file.display()
        ),
        "sed -i 's/a - b/a + b/' app.py".to_owned(),
    ];
    let seen: Seen = Arc::default();
    let port = scripted::server(Arc::clone(&seen), opencode::model(commands.clone()));
    let (ws, home, config) = opencode::state(dir.path(), port);
    // The package read and run, as the profile grants it where npm installs it; the shell
    // and the commands the model runs; the scripted server.
    let policy = agent_run::policy(
        dir.path(),
        "agent-opencode",
        (&ws, &home),
        &package,
        port,
        "",
    );
    let started = std::time::Instant::now();
    let child = opencode::run(&mut agent_run::bee_exec(&policy, &ws, &home), &exe)
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err, seen) = agent_run::ended(
        child,
        Duration::from_secs(120),
        &seen,
        "POST /v1/chat/completions",
    );
    eprintln!("opencode ran for {:?}", started.elapsed());
    assert!(out.contains(ANSWER), "{out}{err}");
    // The agent's turns: the prompt, then one per command with its output, and no more.
    let outputs = agent_run::turns(
        &seen,
        opencode::is_turn,
        commands.len(),
        opencode::tool_outputs,
    );
    // The kernel refused the secret and the configuration; opencode saw why.
    agent_run::refused(&outputs, &secret, &[&config_file, &project_file]);
    for (path, was) in [(&config_file, config.as_str()), (&project_file, "{}\n")] {
        assert_eq!(
            std::fs::read_to_string(path).ok().as_deref(),
            Some(was),
            "{} is as the test wrote it",
            path.display()
        );
    }
    // Its state stays writable: it kept the session in its database.
    assert!(
        home.join(".local/share/opencode/opencode.db").is_file(),
        "{err}"
    );
    agent_run::fixed_and_explained(&ws, &secret, &err, &outputs);
}
