//! Gemini CLI for the tests that run it (`landlock_gemini` natively, `kernel_gemini` in the VM
//! matrix): its installation, its state, and a scripted Gemini API model that has its shell
//! tool (`run_shell_command`) run commands.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::scripted::Script;

/// The Gemini CLI release the tests run (`tests/agents/gemini.version`, which `cargo xtask
/// test` also reads to install it for the VM matrix).
pub fn version() -> &'static str {
    include_str!("../agents/gemini.version").trim()
}

/// What the scripted model answers once its commands have run.
pub const ANSWER: &str = "FIXED BY THE SCRIPTED MODEL";

/// Gemini CLI installed at [`version`] in the test cache (installed on first use) as `npm
/// install --global` lays it out under a prefix: the package's directory
/// (`lib/node_modules/@google/gemini-cli`, as the profile's rules expect it under `/usr/lib`,
/// `/usr/local/lib` or nvm) and its script (`bundle/gemini.js`, run by Node.js). In the VM
/// matrix `cargo xtask test` installs it on the host and copies the package into the guests
/// at the same path, where it is found installed.
pub fn gemini() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agents/gemini-{}", version()));
    let package = dir.join("lib/node_modules/@google/gemini-cli");
    let script = package.join("bundle/gemini.js");
    super::npm::install(
        &dir,
        &["--global"],
        &format!("@google/gemini-cli@{}", version()),
        &[&script],
    );
    (package, script)
}

/// Gemini CLI's state in `dir`: a workspace `ws/` (with `app.py`, its bug, and an empty
/// `.gemini/settings.json`) and a home `home/` whose `~/.gemini/settings.json` picks the
/// Gemini API key (the endpoint comes from `GOOGLE_GEMINI_BASE_URL`) and whose
/// `trustedFolders.json` trusts the workspace (else `--yolo` is turned off); the other files
/// and directories of Gemini CLI's that its profile protects are made too (the Landlock engine
/// covers what exists). Returns the workspace, the home and the settings' text.
pub fn gemini_state(dir: &Path) -> (PathBuf, PathBuf, String) {
    let (ws, home) = (dir.join("ws"), dir.join("home"));
    let gemini_home = home.join(".gemini");
    for d in [
        ws.join(".gemini"),
        gemini_home.join("tmp"),
        gemini_home.join("extensions"),
        gemini_home.join("commands"),
        gemini_home.join("policies"),
    ] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| unreachable!("{e}"));
    }
    for f in [gemini_home.join(".env"), gemini_home.join("GEMINI.md")] {
        std::fs::write(f, "").unwrap_or_else(|e| unreachable!("{e}"));
    }
    std::fs::write(ws.join(".gemini/settings.json"), "{}\n")
        .unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::write(ws.join("app.py"), super::agent_run::BUGGY)
        .unwrap_or_else(|e| unreachable!("{e}"));
    // geminicli.com/docs/cli/configuration: the API key's way in (with GOOGLE_GEMINI_BASE_URL
    // alone it would pick its "gateway" way, which the CLI refuses), no usage statistics or
    // telemetry (play.googleapis.com), no update check.
    let settings = serde_json::json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
    });
    let settings = format!("{settings:#}\n");
    std::fs::write(gemini_home.join("settings.json"), &settings)
        .unwrap_or_else(|e| unreachable!("{e}"));
    let trusted = serde_json::json!({ws.display().to_string(): "TRUST_FOLDER"});
    std::fs::write(
        gemini_home.join("trustedFolders.json"),
        format!("{trusted}\n"),
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    (ws, home, settings)
}

/// The `functionResponse` parts of a Gemini request's contents, in order: their response's
/// `output` (or the whole response).
pub fn tool_outputs(req: &serde_json::Value) -> Vec<String> {
    req["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["parts"].as_array().into_iter().flatten())
        .filter_map(|p| p.get("functionResponse"))
        .map(|r| match &r["response"]["output"] {
            serde_json::Value::String(s) => s.clone(),
            _ => r["response"].to_string(),
        })
        .collect()
}

/// Whether a request is one of the agent's turns (it offers tools), not one of the CLI's own
/// questions to a small model (which model to route to, and the like).
pub fn is_turn(req: &serde_json::Value) -> bool {
    req["tools"].as_array().into_iter().flatten().any(|t| {
        t["functionDeclarations"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
    })
}

/// A `GenerateContentResponse` whose one candidate has `parts`.
pub fn response(parts: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
            "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        "modelVersion": "scripted",
    })
}

/// The scripted model: each streamed turn (`:streamGenerateContent?alt=sse`) has the shell
/// tool run the next of `commands` (as many as the request carries tool outputs), then
/// answers [`ANSWER`]; the router's question (`:generateContent`, JSON asked for) gets a
/// low complexity score; anything else `{}`.
pub fn model(commands: Vec<String>) -> Script {
    Arc::new(move |request: &str, body: &str| {
        let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        if request.contains(":streamGenerateContent") && is_turn(&req) {
            let n = tool_outputs(&req).len();
            let part = match commands.get(n) {
                Some(cmd) => serde_json::json!({"functionCall": {
                    "name": "run_shell_command",
                    "args": {"command": cmd, "description": format!("step {n}")},
                }}),
                None => serde_json::json!({"text": ANSWER}),
            };
            let r = response(serde_json::json!([part]));
            return ("text/event-stream", format!("data: {r}\r\n\r\n"));
        }
        if request.contains(":generateContent") {
            let verdict = serde_json::json!({"complexity_reasoning": "a small fix",
                "complexity_score": 1});
            let r = response(serde_json::json!([{"text": verdict.to_string()}]));
            return ("application/json", r.to_string());
        }
        ("application/json", "{}".to_owned())
    })
}

/// Adds Gemini CLI's run to `command` (a `bee exec … -- /usr/bin/env` of
/// [`super::agent_run`]): `bash` as its shell, an API key and the scripted server at loopback
/// `port` as its endpoint, its temporary directory in its state under `home` (its shell tool
/// makes a directory in the temporary directory for each command, and fails the command where
/// it cannot: the profile writes `~/.gemini/tmp/`, not `/tmp`), then `node` running `script`
/// non-interactively with every tool call allowed (`-p PROMPT --yolo`).
pub fn run<'a>(
    command: &'a mut std::process::Command,
    node: &str,
    script: &Path,
    home: &Path,
    port: u16,
) -> &'a mut std::process::Command {
    command
        .args(["SHELL=/usr/bin/bash", "GEMINI_API_KEY=test"])
        .arg(format!("GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:{port}"))
        .arg(format!("TMPDIR={}", home.join(".gemini/tmp").display()))
        .arg(node)
        .arg(script)
        .args(["-p", super::agent_run::PROMPT, "--yolo"])
        .env_remove("GEMINI_CLI_HOME")
}
