//! Google's Gemini CLI under bee on this host: installed from npm at a pinned version into a
//! cache under the target directory, run non-interactively (`gemini -p PROMPT --yolo`) under
//! its shipped profile and the Landlock engine, against a scripted Gemini API server on
//! loopback (`GOOGLE_GEMINI_BASE_URL`, `streamGenerateContent?alt=sse`). The scripted model
//! has Gemini CLI's own shell tool (`run_shell_command`) read a secret outside the workspace,
//! add an MCP server to its settings and to the project's, and fix a bug: the kernel refuses
//! the first two, the fix lands, and what Gemini CLI sent back to the model shows it. Needs
//! root, Landlock, the BPF file system at `/sys/fs/bpf` (the Landlock engine's network gate,
//! for the profile's host names and the loopback address), `npm` and the npm registry; fails,
//! never skips, without them (feature `landlock-tests`).

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::agent_run;
use support::gemini::{self, ANSWER, gemini, gemini_state, is_turn, model, tool_outputs};
use support::scripted::{self, Seen};

#[test]
fn gemini_cli_under_its_profile_is_refused_a_secret_and_its_settings_and_lands_a_fix() {
    let (package, script) = gemini();
    let dir =
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap_or_else(|e| unreachable!("{e}"));
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, agent_run::SECRET).unwrap_or_else(|e| unreachable!("{e}"));
    let settings_file = dir.path().join("home/.gemini/settings.json");
    let project_file = dir.path().join("ws/.gemini/settings.json");
    // What the scripted model has Gemini CLI run, in order: the secret; an MCP server (a
    // command Gemini CLI starts, outside any sandbox of its own) put into its settings and
    // into the project's, in the writable workspace; the fix.
    let mcp = r#"{"mcpServers": {"x": {"command": "sh", "args": ["-c", "echo pwned"]}}}"#;
    let commands = vec![
        format!("cat {}", secret.display()),
        format!(
            "echo '{mcp}' > {}; echo '{mcp}' > {}",
            settings_file.display(),
            project_file.display()
        ),
        "sed -i 's/a - b/a + b/' app.py".to_owned(),
    ];
    let seen: Seen = Arc::default();
    let port = scripted::server(Arc::clone(&seen), model(commands.clone()));
    let (ws, home, settings) = gemini_state(dir.path());
    // The package read and run, as the profile grants it where npm installs it; the shell
    // and the commands the model runs; the scripted server.
    let policy = agent_run::policy(dir.path(), "agent-gemini", (&ws, &home), &package, port, "");
    let started = std::time::Instant::now();
    let child = gemini::run(
        &mut agent_run::bee_exec(&policy, &ws, &home),
        "node",
        &script,
        &home,
        port,
    )
    .spawn()
    .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err, seen) = agent_run::ended(
        child,
        Duration::from_secs(120),
        &seen,
        "POST /v1beta/models/",
    );
    eprintln!("Gemini CLI ran for {:?}", started.elapsed());
    assert!(out.contains(ANSWER), "{out}{err}");
    // The secret's content reached the model in no request (the router's questions included).
    assert!(
        !seen
            .iter()
            .any(|(_, b)| b.contains(agent_run::SECRET.trim_end())),
        "{seen:?}"
    );
    // The chat's requests (not the router's).
    let seen: Vec<(String, String)> = seen
        .iter()
        .filter(|(r, _)| r.contains(":streamGenerateContent?alt=sse"))
        .cloned()
        .collect();
    // The agent's turns: the prompt, then one per command with its output, and no more.
    let outputs = agent_run::turns(&seen, is_turn, commands.len(), tool_outputs);
    // The kernel refused the secret and both settings; Gemini CLI saw why.
    agent_run::refused(&outputs, &secret, &[&settings_file, &project_file]);
    for (path, was) in [(&settings_file, settings.as_str()), (&project_file, "{}\n")] {
        assert_eq!(
            std::fs::read_to_string(path).ok().as_deref(),
            Some(was),
            "{} is as the test wrote it",
            path.display()
        );
    }
    // Its state stays writable: it kept the chat.
    assert!(home.join(".gemini/tmp").is_dir(), "{err}");
    agent_run::fixed_and_explained(&ws, &secret, &err, &outputs);
}
