//! Aider for the tests that run it (`landlock_aider` natively, `kernel_aider` in the VM
//! matrix): its installation, its state, and a scripted OpenAI Chat Completions model whose
//! replies are Aider's SEARCH/REPLACE edits.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::scripted::Script;

/// The Aider release the tests run (`tests/agents/aider.version`, which `cargo xtask test`
/// also reads to install it for the VM matrix).
pub fn version() -> &'static str {
    include_str!("../agents/aider.version").trim()
}

/// The model Aider is told to use: litellm's OpenAI provider, at the scripted server.
pub const MODEL: &str = "openai/scripted";

/// What the scripted model says with its last edit.
pub const ANSWER: &str = "FIXED BY THE SCRIPTED MODEL";

/// Aider installed at [`version`] in a virtual environment in the test cache (made on first
/// use): the environment (read and run, as the profile grants pipx's and uv's) and its
/// `bin/aider`. In the VM matrix `cargo xtask test` makes it on the host and copies it into
/// one guest at the same path, where it is found made.
pub fn aider() -> (PathBuf, PathBuf) {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agents/aider-{}", version()));
    let exe = venv.join("bin/aider");
    super::pip::install(&venv, &format!("aider-chat=={}", version()), &[&exe]);
    (venv, exe)
}

/// One file of Aider's that its profile protects: where, and what the test wrote into it.
pub struct Kept {
    /// The file.
    pub path: PathBuf,
    /// What the test wrote into it.
    pub text: &'static str,
}

/// Aider's state in `dir`: a workspace `ws/` (with `app.py` and its bug, and the skeleton of a
/// git repository, `.git/` with `HEAD`, `objects/`, `refs/` and `hooks/`: Aider takes the
/// nearest repository above its directory as the root of its file names, even with `--no-git`,
/// and without one here it would find whatever repository holds the test's scratch directory)
/// and a home `home/` with the model's metadata in `~/.aider/` (its context window and prices,
/// which Aider would otherwise download); and the files of `kept`, which the profile protects
/// (the Landlock engine protects what exists; what they set, the command line sets too).
/// Returns the workspace, the home and the metadata file.
pub fn aider_state(dir: &Path, kept: &[Kept]) -> (PathBuf, PathBuf, PathBuf) {
    let (ws, home) = (dir.join("ws"), dir.join("home"));
    for d in [
        ws.join(".git/hooks"),
        ws.join(".git/objects"),
        ws.join(".git/refs/heads"),
        home.join(".aider"),
    ] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| unreachable!("{e}"));
    }
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n")
        .unwrap_or_else(|e| unreachable!("{e}"));
    for k in kept {
        std::fs::write(&k.path, k.text).unwrap_or_else(|e| unreachable!("{e}"));
    }
    std::fs::write(ws.join("app.py"), super::agent_run::BUGGY)
        .unwrap_or_else(|e| unreachable!("{e}"));
    // aider.chat/docs/config/adv-model-settings.html, "Context window size and token costs".
    let metadata = serde_json::json!({MODEL: {
        "max_tokens": 4096, "max_input_tokens": 128_000, "max_output_tokens": 4096,
        "input_cost_per_token": 0, "output_cost_per_token": 0,
        "litellm_provider": "openai", "mode": "chat",
    }});
    let metadata_file = home.join(".aider/scripted.metadata.json");
    std::fs::write(&metadata_file, format!("{metadata:#}\n"))
        .unwrap_or_else(|e| unreachable!("{e}"));
    (ws, home, metadata_file)
}

/// A SEARCH/REPLACE block of Aider's `diff` edit format: `search` in `file` replaced by
/// `replace` (an empty `search` appends, or makes the file).
pub fn edit(file: &str, search: &str, replace: &str) -> String {
    format!("{file}\n```\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```\n")
}

/// The marker the scripted model's reply `n` starts with (Aider sends its replies back, with
/// the whole chat, in every request: the server tells which to answer by them).
pub fn step(n: usize) -> String {
    format!("SCRIPTED STEP {n}.")
}

/// The messages of a Chat Completions request: role and content.
pub fn messages(req: &serde_json::Value) -> Vec<(String, String)> {
    req["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let content = match &m["content"] {
                serde_json::Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            (m["role"].as_str().unwrap_or_default().to_owned(), content)
        })
        .collect()
}

/// The scripted model's replies a request carries (Aider sends the chat whole), in order.
pub fn replies_back(req: &serde_json::Value) -> Vec<String> {
    messages(req)
        .into_iter()
        .filter(|(role, content)| role == "assistant" && content.starts_with("SCRIPTED STEP"))
        .map(|(_, content)| content)
        .collect()
}

/// A Chat Completions answer (`application/json`, `--no-stream`) whose message is `content`.
pub fn completion(content: &str) -> (&'static str, String) {
    let body = serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    });
    ("application/json", body.to_string())
}

/// The scripted model: each `POST /v1/chat/completions` gets the next of `replies` (as many
/// as the request carries of them already); anything else `{}`.
pub fn model(replies: Vec<String>) -> Script {
    Arc::new(move |request: &str, body: &str| {
        if !request.starts_with("POST /v1/chat/completions") {
            return ("application/json", "{}".to_owned());
        }
        let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let n = replies_back(&req).len();
        completion(replies.get(n).map_or(ANSWER, String::as_str))
    })
}

/// Whether `text` tells of the kernel's refusal of a write to `path` as Python words it: a
/// read-only file system (a protected file, mounted read-only) or no permission.
pub fn refused_write(text: &str, path: &Path) -> bool {
    let path = path.display();
    text.contains(&format!("Read-only file system: '{path}'"))
        || text.contains(&format!("Permission denied: '{path}'"))
}

/// Adds Aider's run to `command` (a `bee exec … -- /usr/bin/env` of [`super::agent_run`]): its
/// environment (an API key, litellm's table of models from its own package rather than
/// downloaded, lines as wide as the paths in Aider's messages: its console wraps at the
/// terminal's width, 80 columns without one), `exe` with the scripted model at loopback `port`
/// and its `metadata`, no update check or analytics (their hosts are not granted), no git (the
/// workspace is none), no repository map, no lint run, plain input and output, every edit
/// allowed, and `app.py` in the chat. Standard input is a pipe for the user's messages, one
/// line each (`--no-fancy-input` reads them with Python's `input()`; Aider exits at its end).
pub fn run<'a>(
    command: &'a mut std::process::Command,
    exe: &Path,
    port: u16,
    metadata: &Path,
) -> &'a mut std::process::Command {
    command
        .args([
            "OPENAI_API_KEY=sk-test",
            "LITELLM_LOCAL_MODEL_COST_MAP=True",
            "COLUMNS=1000",
        ])
        .arg(exe)
        .args([
            "--model",
            MODEL,
            "--weak-model",
            MODEL,
            "--edit-format",
            "diff",
        ])
        .arg("--openai-api-base")
        .arg(format!("http://127.0.0.1:{port}/v1"))
        .arg("--model-metadata-file")
        .arg(metadata)
        .args([
            "--no-check-update",
            "--no-analytics",
            "--no-show-release-notes",
            "--no-show-model-warnings",
            "--no-git",
            "--map-tokens",
            "0",
            "--no-auto-lint",
            "--no-detect-urls",
            "--no-stream",
            "--no-pretty",
            "--no-fancy-input",
            "--yes-always",
            "app.py",
        ])
        .stdin(std::process::Stdio::piped())
        .env_remove("XDG_CONFIG_HOME")
}
