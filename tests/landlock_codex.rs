//! OpenAI's Codex CLI under bee on this host: installed from npm at a pinned version into a
//! cache under the target directory, run non-interactively (`codex exec`, its own sandbox and
//! prompts off) under its shipped profile and the Landlock engine, against a scripted OpenAI
//! Responses server on loopback that it reaches through a model provider of its configuration.
//! The scripted model has Codex's own shell tool read a secret outside the workspace, write
//! Codex's configuration and a git hook, and fix a bug: the kernel refuses the first two, the
//! fix lands, and what Codex sent back to the model shows it. Needs root, Landlock, the BPF
//! file system at `/sys/fs/bpf` (the Landlock engine's network gate, for the profile's host
//! names and the loopback address), `npm` and the npm registry; fails, never skips, without
//! them (feature `landlock-tests`).

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use support::agent_run;
use support::scripted::{self, Script, Seen};

/// The Codex CLI release the test runs.
const CODEX: &str = "0.171.0";

/// What the scripted model answers once its commands have run.
const ANSWER: &str = "FIXED BY THE SCRIPTED MODEL";

/// Codex installed at [`CODEX`] in the test cache (installed on first use) as `npm install
/// --global` lays it out under a prefix: the package's directory
/// (`lib/node_modules/@openai/codex`, as the profile's rules expect it under `/usr/lib`,
/// `/usr/local/lib` or nvm) and its launcher (`bin/codex.js`, run by Node.js).
fn codex() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agents/codex-{CODEX}"));
    let package = dir.join("lib/node_modules/@openai/codex");
    let launcher = package.join("bin/codex.js");
    // The launcher replaces itself with the native build, which comes in a package of its own
    // per platform (an optional dependency), installed inside the package's `node_modules/`.
    let (platform, triple) = match std::env::consts::ARCH {
        "x86_64" => ("codex-linux-x64", "x86_64-unknown-linux-musl"),
        "aarch64" => ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
        arch => unreachable!("Codex ships no Linux build for {arch}"),
    };
    let native = package.join(format!(
        "node_modules/@openai/{platform}/vendor/{triple}/bin/codex"
    ));
    support::npm::install(
        &dir,
        &["--global"],
        &format!("@openai/codex@{CODEX}"),
        &[&launcher, &native],
    );
    (package, launcher)
}

/// Codex's state in `dir`: a workspace `ws/` (with `app.py`, its bug, and a `.git/hooks/`)
/// and a home `home/` whose `~/.codex/config.toml` sends Codex to the scripted server on
/// `port`; every other file and directory of Codex's that its profile protects is made too
/// (the Landlock engine covers what exists). Returns the workspace, the home and the
/// configuration's text.
fn codex_state(dir: &Path, port: u16) -> (PathBuf, PathBuf, String) {
    let (ws, home) = (dir.join("ws"), dir.join("home"));
    let codex_home = home.join(".codex");
    for d in [
        ws.join(".git/hooks"),
        ws.join(".codex"),
        codex_home.join("rules"),
        codex_home.join("prompts"),
        codex_home.join("skills"),
    ] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| unreachable!("{e}"));
    }
    for f in [codex_home.join(".env"), codex_home.join("AGENTS.md")] {
        std::fs::write(f, "").unwrap_or_else(|e| unreachable!("{e}"));
    }
    std::fs::write(ws.join("app.py"), agent_run::BUGGY).unwrap_or_else(|e| unreachable!("{e}"));
    // A provider of Codex's own configuration (developers.openai.com/codex/config-advanced):
    // the Responses API at the scripted server, the key from OPENAI_API_KEY, no retries (each
    // request the server sees is one the model answered). No update check, no metrics
    // (ab.chatgpt.com), no plugins (their catalogue is synced from api.github.com): the
    // profile grants none of those hosts.
    let config = format!(
        "model = \"gpt-5\"\nmodel_provider = \"scripted\"\ncheck_for_update_on_startup = false\n\n\
         [analytics]\nenabled = false\n\n[features]\nplugins = false\n\n\
         [model_providers.scripted]\n\
         name = \"scripted\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
         env_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\n\
         stream_max_retries = 0\n"
    );
    std::fs::write(codex_home.join("config.toml"), &config).unwrap_or_else(|e| unreachable!("{e}"));
    (ws, home, config)
}

/// The `function_call_output` items of a Responses request's input, in order: their output.
fn tool_outputs(req: &serde_json::Value) -> Vec<String> {
    req["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| match &i["output"] {
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        })
        .collect()
}

/// A Responses API stream (`text/event-stream`) whose one output item is `item`.
fn response(n: usize, item: &serde_json::Value) -> (&'static str, String) {
    let id = format!("resp_{n}");
    let usage = serde_json::json!({"input_tokens": 1, "output_tokens": 1, "total_tokens": 2});
    let events = [
        serde_json::json!({"type": "response.created", "response": {"id": id}}),
        serde_json::json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        serde_json::json!({"type": "response.completed",
            "response": {"id": id, "usage": usage}}),
    ];
    let text = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect();
    ("text/event-stream", text)
}

/// The scripted model: each `POST /v1/responses` has Codex's shell tool (`exec_command`) run
/// the next of `commands` (as many as the request carries tool outputs), then answers
/// [`ANSWER`]; anything else gets `{}`.
fn model(commands: Vec<String>) -> Script {
    Arc::new(move |request: &str, body: &str| {
        if !request.starts_with("POST /v1/responses") {
            return ("application/json", "{}".to_owned());
        }
        let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let n = tool_outputs(&req).len();
        let item = match commands.get(n) {
            Some(cmd) => serde_json::json!({
                "type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
                "name": "exec_command",
                "arguments": serde_json::json!({"cmd": cmd}).to_string(),
            }),
            None => serde_json::json!({
                "type": "message", "id": "msg_1", "role": "assistant",
                "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
            }),
        };
        response(n, &item)
    })
}

#[test]
fn codex_under_its_profile_is_refused_a_secret_its_configuration_and_a_hook_and_lands_a_fix() {
    let (package, launcher) = codex();
    // Outside /tmp, as a home is: Codex refuses to make its PATH aliases (in ~/.codex/tmp/)
    // under a temporary directory.
    let dir =
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap_or_else(|e| unreachable!("{e}"));
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, agent_run::SECRET).unwrap_or_else(|e| unreachable!("{e}"));
    let (ws, home) = (dir.path().join("ws"), dir.path().join("home"));
    let config_file = home.join(".codex/config.toml");
    let hook = ws.join(".git/hooks/pre-commit");
    // What the scripted model has Codex run, in order: the secret; a `notify` program added
    // to Codex's configuration (run after every turn, outside any sandbox of Codex's) and a
    // git hook planted; the fix.
    let commands = vec![
        format!("cat {}", secret.display()),
        format!(
            "echo 'notify = [\"/usr/bin/sh\", \"-c\", \"echo pwned\"]' >> {}; \
             echo 'echo planted' > {}",
            config_file.display(),
            hook.display()
        ),
        "sed -i 's/a - b/a + b/' app.py".to_owned(),
    ];
    let seen: Seen = Arc::default();
    let port = scripted::server(Arc::clone(&seen), model(commands.clone()));
    let (ws, home, config) = codex_state(dir.path(), port);
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
    let child = agent_run::bee_exec(&policy, &ws, &home)
        .args(["OPENAI_API_KEY=sk-test", "SHELL=/usr/bin/bash"])
        .arg(&launcher)
        .args([
            "exec",
            "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check",
            "--color",
            "never",
            agent_run::PROMPT,
        ])
        .env_remove("CODEX_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err, seen) =
        agent_run::ended(child, Duration::from_secs(180), &seen, "POST /v1/responses");
    assert_eq!(out.trim(), ANSWER, "{err}");
    // Every request is a turn: the prompt, then one per command with its output.
    let outputs = agent_run::turns(&seen, |_| true, commands.len(), tool_outputs);
    // The kernel refused the secret, the configuration and the hook; Codex saw why.
    agent_run::refused(&outputs, &secret, &[&config_file, &hook]);
    assert!(
        outputs[2].contains("Process exited with code 0"),
        "{}",
        outputs[2]
    );
    assert_eq!(
        std::fs::read_to_string(&config_file).ok().as_deref(),
        Some(config.as_str()),
        "the configuration is as the test wrote it"
    );
    assert!(!hook.exists(), "a hook was planted");
    // Its state stays writable: it kept the session.
    assert!(home.join(".codex/sessions").is_dir(), "{err}");
    agent_run::fixed_and_explained(&ws, &secret, &err, &outputs);
}
