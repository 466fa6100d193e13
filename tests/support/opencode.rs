//! opencode for the tests that run it (`landlock_opencode` natively, `kernel_opencode` in the
//! VM matrix): its installation, its state, and a scripted OpenAI Chat Completions model that
//! has its `bash` tool run commands.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::scripted::Script;

/// The opencode release the tests run (`tests/agents/opencode.version`, which `cargo xtask
/// test` also reads to install it for the VM matrix).
pub fn version() -> &'static str {
    include_str!("../agents/opencode.version").trim()
}

/// What the scripted model answers once its commands have run.
pub const ANSWER: &str = "FIXED BY THE SCRIPTED MODEL";

/// opencode installed at [`version`] in the test cache (installed on first use) as `npm
/// install --global` lays it out under a prefix: the package's directory
/// (`lib/node_modules/opencode-ai`, as the profile's rules expect it under `/usr/lib`,
/// `/usr/local/lib` or nvm) and its executable (`bin/opencode.exe`). The package's native
/// builds come as a package per platform (optional dependencies, installed inside the
/// package's `node_modules/`); its install script (`postinstall.mjs`, no download) links the
/// one this CPU runs to `bin/opencode.exe`.
/// In the VM matrix `cargo xtask test` installs it on the host and copies the executable into
/// the guests at the same path. Returns the package's directory and the executable.
pub fn opencode() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agents/opencode-{}", version()));
    let package = dir.join("lib/node_modules/opencode-ai");
    let exe = package.join("bin/opencode.exe");
    let platform = match std::env::consts::ARCH {
        "x86_64" => "opencode-linux-x64",
        "aarch64" => "opencode-linux-arm64",
        arch => unreachable!("opencode ships no Linux build for {arch}"),
    };
    let native = package.join(format!("node_modules/{platform}/bin/opencode"));
    if exe.is_file() && !native.is_file() {
        // In a guest of the VM matrix: the executable alone was copied in.
        return (package, exe);
    }
    super::npm::install(
        &dir,
        &["--global"],
        &format!("opencode-ai@{}", version()),
        &[&exe, &native],
    );
    // The package ships `bin/opencode.exe` as a script that fails, saying the install script
    // did not run; where npm ran no install scripts, the script is run here (it links the
    // native build, offline).
    let size = |f: &Path| std::fs::metadata(f).map(|m| m.len()).unwrap_or_default();
    if size(&exe) != size(&native) {
        let o = std::process::Command::new("node")
            .arg("postinstall.mjs")
            .current_dir(&package)
            .output()
            .unwrap_or_else(|e| unreachable!("cannot run node to link opencode's build: {e}"));
        assert!(
            o.status.success() && size(&exe) == size(&native),
            "opencode-ai's install script did not link {} to {}: {}",
            native.display(),
            exe.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    (package, exe)
}

/// opencode's state in `dir`: a workspace `ws/` (with `app.py` and its bug) and a home
/// `home/` whose `~/.config/opencode/opencode.json` sends opencode to the scripted server on
/// `port`; the other directories of opencode's that its profile protects are made too (the
/// Landlock engine covers what exists). Returns the workspace, the home and the
/// configuration's text.
pub fn state(dir: &Path, port: u16) -> (PathBuf, PathBuf, String) {
    let (ws, home) = (dir.join("ws"), dir.join("home"));
    for d in [
        ws.join(".opencode"),
        home.join(".config/opencode"),
        // opencode 1.18.33 makes its tools' directory (`~/.cache/opencode/bin`) as it starts,
        // and stops where it cannot; the profile protects the cache, so it is made here, as
        // a first run of opencode outside the profile leaves it.
        home.join(".cache/opencode/bin"),
        home.join(".local/share/opencode/bin"),
        // Its state, which the profile writes: the Landlock engine grants what exists.
        home.join(".local/state/opencode"),
    ] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| unreachable!("{e}"));
    }
    // What opencode 1.18.33 writes into each configuration directory it finds (global and
    // project) as it starts, unless it is there, and stops where it cannot: made here, as a
    // first run outside the profile leaves it.
    for d in [home.join(".config/opencode"), ws.join(".opencode")] {
        std::fs::write(
            d.join(".gitignore"),
            "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
    }
    // The project's configuration, empty (the Landlock engine protects what exists).
    for f in [ws.join("opencode.json"), ws.join("opencode.jsonc")] {
        std::fs::write(f, "{}\n").unwrap_or_else(|e| unreachable!("{e}"));
    }
    std::fs::write(ws.join("app.py"), super::agent_run::BUGGY)
        .unwrap_or_else(|e| unreachable!("{e}"));
    // A custom provider (opencode.ai/docs/providers, "Custom provider"): Chat Completions at
    // the scripted server through the OpenAI-compatible AI SDK provider, which opencode
    // bundles (nothing installed into ~/.cache/opencode, which the profile protects). Its
    // tools allowed without asking (`opencode run` has no one to ask); no sharing, no
    // updates.
    let config = serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "model": "scripted/model",
        "small_model": "scripted/model",
        "autoupdate": false,
        "share": "disabled",
        "provider": {"scripted": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "scripted",
            "options": {"baseURL": format!("http://127.0.0.1:{port}/v1"), "apiKey": "sk-test"},
            "models": {"model": {"name": "model"}},
        }},
        "permission": {"bash": "allow", "edit": "allow", "external_directory": "allow"},
    });
    let config = format!("{config:#}\n");
    std::fs::write(home.join(".config/opencode/opencode.json"), &config)
        .unwrap_or_else(|e| unreachable!("{e}"));
    (ws, home, config)
}

/// Adds opencode's run to `command` (a `bee exec … -- /usr/bin/env` of
/// [`super::agent_run`]): `bash` as its shell, no models fetched and no update looked for,
/// then `exe` running the prompt non-interactively (`run PROMPT`), with no XDG directory of
/// the machine's (its state is under the home the command gets).
pub fn run<'a>(
    command: &'a mut std::process::Command,
    exe: &Path,
) -> &'a mut std::process::Command {
    command
        .args([
            "SHELL=/usr/bin/bash",
            "OPENCODE_DISABLE_MODELS_FETCH=1",
            "OPENCODE_DISABLE_AUTOUPDATE=1",
        ])
        .arg(exe)
        .args(["run", super::agent_run::PROMPT])
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("XDG_STATE_HOME")
}

/// The `tool` messages of a Chat Completions request, in order: their content.
pub fn tool_outputs(req: &serde_json::Value) -> Vec<String> {
    req["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| match &m["content"] {
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        })
        .collect()
}

/// A Chat Completions stream (`text/event-stream`) of one chunk with `delta`, then one that
/// ends it with `finish`.
fn completion(delta: &serde_json::Value, finish: &str) -> (&'static str, String) {
    let chunk = |delta: &serde_json::Value, finish: serde_json::Value| {
        serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
            "model": "model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut end = chunk(&serde_json::json!({}), serde_json::json!(finish));
    end["usage"] = serde_json::json!({"prompt_tokens": 1, "completion_tokens": 1,
        "total_tokens": 2});
    let text = [chunk(delta, serde_json::Value::Null), end]
        .iter()
        .map(|c| format!("data: {c}\n\n"))
        .chain(["data: [DONE]\n\n".to_owned()])
        .collect();
    ("text/event-stream", text)
}

/// Whether a request is one of the agent's turns (it offers tools), not the one that asks
/// for the session's title.
pub fn is_turn(req: &serde_json::Value) -> bool {
    req["tools"].as_array().is_some_and(|t| !t.is_empty())
}

/// The scripted model: each `POST /v1/chat/completions` turn has opencode's `bash` tool run
/// the next of `commands` (as many as the request carries tool outputs), then answers
/// [`ANSWER`]; the title request gets a title; anything else `{}`.
pub fn model(commands: Vec<String>) -> Script {
    Arc::new(move |request: &str, body: &str| {
        if !request.starts_with("POST /v1/chat/completions") {
            return ("application/json", "{}".to_owned());
        }
        let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        if !is_turn(&req) {
            let delta = serde_json::json!({"role": "assistant", "content": "Fix app.py"});
            return completion(&delta, "stop");
        }
        let n = tool_outputs(&req).len();
        match commands.get(n) {
            Some(cmd) => {
                let call = serde_json::json!({
                    "index": 0, "id": format!("call_{n}"), "type": "function",
                    "function": {
                        "name": "bash",
                        "arguments": serde_json::json!({
                            "command": cmd, "description": format!("step {n}"),
                        }).to_string(),
                    },
                });
                let delta = serde_json::json!({"role": "assistant", "tool_calls": [call]});
                completion(&delta, "tool_calls")
            }
            None => {
                let delta = serde_json::json!({"role": "assistant", "content": ANSWER});
                completion(&delta, "stop")
            }
        }
    })
}
