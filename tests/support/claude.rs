//! Claude Code for the tests that run it (`landlock_agents` natively, `kernel_claude` in the
//! VM matrix): its installation, its state, and a scripted Anthropic Messages server on
//! loopback that answers its requests, has its own Bash tool run commands, or has it call
//! tools it was given.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::scripted::Script;

/// The Claude Code release the tests run (`tests/agents/claude-code.version`, which `cargo
/// xtask test` also reads to install it for the VM matrix).
pub fn version() -> &'static str {
    include_str!("../agents/claude-code.version").trim()
}

/// What the scripted model answers once it has nothing more to do.
pub const ANSWER: &str = "HELLO FROM THE SCRIPTED MODEL";

/// Claude Code as `npm install @anthropic-ai/claude-code` lays it out under a prefix in the
/// test cache: the package's directory and the native executable it ships.
pub struct ClaudeCode {
    /// The install's prefix (`agents/claude-code-VERSION`), holding `node_modules/`.
    pub prefix: PathBuf,
    /// `node_modules/@anthropic-ai/claude-code`.
    pub package: PathBuf,
    /// `bin/claude.exe` in the package: Claude Code, one native executable.
    pub exe: PathBuf,
}

/// Claude Code at [`version`] under `target/tmp/agents/claude-code-VERSION/`
/// (`CARGO_TARGET_TMPDIR`), installed from npm on first use. In the VM matrix `cargo xtask
/// test` installs it on the host and copies the executable into the guests at the same path.
pub fn claude_code() -> ClaudeCode {
    let prefix =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agents/claude-code-{}", version()));
    let package = prefix.join("node_modules/@anthropic-ai/claude-code");
    let exe = package.join("bin/claude.exe");
    if !exe.is_file() {
        super::npm::install(
            &prefix,
            &[],
            &format!("@anthropic-ai/claude-code@{}", version()),
            &[&exe],
        );
    }
    ClaudeCode {
        prefix,
        package,
        exe,
    }
}

/// The variables Claude Code is started with through `/usr/bin/env` (which `bee exec` runs;
/// it passes only a few of its own): its API at the scripted server on `port`, a key, and no
/// traffic beyond the API.
pub fn environment(port: u16) -> Vec<String> {
    vec![
        format!("ANTHROPIC_BASE_URL=http://127.0.0.1:{port}"),
        "ANTHROPIC_API_KEY=sk-ant-test".to_owned(),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1".to_owned(),
    ]
}

/// Clears what of the tests' own environment would change a run of Claude Code (or of the
/// `bee` that starts it): `XDG_CONFIG_HOME` and `CLAUDE_CONFIG_DIR` (its state is the test's
/// home), and `BEE_SOCKET`, so that bee runs in its own process and not through the service
/// the VM matrix names there (whose ceiling grants no host name, and which does not learn).
pub fn own_environment(command: &mut std::process::Command) -> &mut std::process::Command {
    command
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("BEE_SOCKET")
}

/// A workspace `ws` and a home `home` in `dir` with every file and directory of Claude
/// Code's that its profile protects in place (the Landlock engine covers what exists); returns
/// them and the protected files, each holding `{}`.
pub fn state(dir: &Path) -> (PathBuf, PathBuf, Vec<PathBuf>) {
    let (ws, home) = (dir.join("ws"), dir.join("home"));
    for d in [
        ws.join(".claude"),
        home.join(".claude/hooks"),
        home.join(".claude/plugins"),
        home.join(".claude/agents"),
        home.join(".claude/commands"),
        home.join(".claude/skills"),
        home.join(".claude/local"),
    ] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| unreachable!("{e}"));
    }
    let settings = vec![
        home.join(".claude/settings.json"),
        home.join(".claude/settings.local.json"),
        home.join(".claude.json"),
        home.join(".claude/statusline-command.sh"),
        home.join(".claude/CLAUDE.md"),
        ws.join(".claude/settings.json"),
        ws.join(".mcp.json"),
    ];
    for f in &settings {
        std::fs::write(f, "{}\n").unwrap_or_else(|e| unreachable!("{e}"));
    }
    (ws, home, settings)
}

/// Whether `request` (its request line) is one of Claude Code's Messages requests (not its
/// token counting).
fn is_messages(request: &str) -> bool {
    request.starts_with("POST /v1/messages") && !request.contains("count_tokens")
}

/// Whether the Messages request `req` offers the tool `name`: its main loop's requests do,
/// its side questions (a session title, a command's prefix) offer none.
pub fn offers(req: &serde_json::Value, name: &str) -> bool {
    req["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["name"] == name))
}

/// The scripted reply to a request that is not a step of a script: every Messages request
/// answers [`ANSWER`] (streamed where asked), anything else `{"input_tokens": 1}`.
pub fn answer(request: &str, body: &str) -> (&'static str, String) {
    if !is_messages(request) {
        return ("application/json", "{\"input_tokens\": 1}".to_owned());
    }
    let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    reply(&req, None)
}

/// The scripted model of [`answer`], as a script.
pub fn answering() -> Script {
    Arc::new(|r: &str, b: &str| answer(r, b))
}

/// A scripted model that steps through its main loop: each Messages request that offers
/// `tool` is answered with the call `steps` gives for it (its request, and the number of
/// tool results it carries), or [`ANSWER`] where that is `None`; every other request as
/// [`answer`] does.
pub fn stepping(
    tool: &'static str,
    steps: impl Fn(usize) -> Option<(&'static str, serde_json::Value)> + Send + Sync + 'static,
) -> Script {
    Arc::new(move |request: &str, body: &str| {
        let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        if !is_messages(request) || !offers(&req, tool) {
            return answer(request, body);
        }
        reply(&req, steps(tool_results(&req).len()))
    })
}

/// A scripted model that has Claude Code's own Bash tool run `commands`, one per turn, then
/// answers [`ANSWER`].
pub fn bash(commands: Vec<String>) -> Script {
    stepping("Bash", move |n| {
        commands.get(n).map(|c| {
            (
                "Bash",
                serde_json::json!({"command": c, "description": "step"}),
            )
        })
    })
}

/// A Messages API reply to `req` (streamed where it asks): `use_tool`'s call (name, input),
/// or [`ANSWER`].
pub fn reply(
    req: &serde_json::Value,
    use_tool: Option<(&str, serde_json::Value)>,
) -> (&'static str, String) {
    match use_tool {
        Some((name, input)) => {
            let id = format!("toolu_{}", tool_results(req).len());
            message(
                req,
                &serde_json::json!({"type": "tool_use", "id": id, "name": name, "input": input}),
                &serde_json::json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                &serde_json::json!({"type": "input_json_delta", "partial_json": input.to_string()}),
                "tool_use",
            )
        }
        None => message(
            req,
            &serde_json::json!({"type": "text", "text": ANSWER}),
            &serde_json::json!({"type": "text", "text": ""}),
            &serde_json::json!({"type": "text_delta", "text": ANSWER}),
            "end_turn",
        ),
    }
}

/// A Messages API reply of one content block: `block` whole, or streamed (where `req` asks)
/// as `start` and one `delta`; it stops for `stop_reason`.
fn message(
    req: &serde_json::Value,
    block: &serde_json::Value,
    start: &serde_json::Value,
    delta: &serde_json::Value,
    stop_reason: &str,
) -> (&'static str, String) {
    let model = req["model"].clone();
    let usage = serde_json::json!({"input_tokens": 1, "output_tokens": 5});
    if req["stream"] != true {
        let message = serde_json::json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop_reason, "stop_sequence": null, "usage": usage,
        });
        return ("application/json", message.to_string());
    }
    let events = [
        serde_json::json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}}),
        serde_json::json!({"type": "content_block_start", "index": 0, "content_block": start}),
        serde_json::json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        serde_json::json!({"type": "content_block_stop", "index": 0}),
        serde_json::json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
        serde_json::json!({"type": "message_stop"}),
    ];
    let text = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect();
    ("text/event-stream", text)
}

/// The `tool_result` blocks of a request's messages, in order: their text.
pub fn tool_results(req: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in req["messages"].as_array().into_iter().flatten() {
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                let text = match &block["content"] {
                    serde_json::Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                out.push(text);
            }
        }
    }
    out
}

/// The last of the requests `seen` (request line, body) that offers `tool`: the one that
/// carries every tool result of the main loop. The test fails if there is none.
pub fn last_offering(seen: &[(String, String)], tool: &str) -> serde_json::Value {
    seen.iter()
        .rev()
        .filter_map(|(_, b)| serde_json::from_str::<serde_json::Value>(b).ok())
        .find(|r| offers(r, tool))
        .unwrap_or_else(|| unreachable!("no main-loop request: {seen:?}"))
}
