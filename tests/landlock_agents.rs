//! A real coding agent under its shipped profile and the Landlock engine, on this host: Claude
//! Code, installed from npm at a pinned version into a cache under the target directory,
//! answers one prompt in print mode through a scripted Anthropic Messages server on loopback,
//! while its settings stay read-only. Needs root, Landlock, `npm` and the npm registry; fails,
//! never skips, without them (feature `landlock-tests`).

mod support;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use support::{stderr, stdout};

/// The Claude Code release the test runs.
const CLAUDE_CODE: &str = "2.1.332";

/// What the scripted model answers.
const ANSWER: &str = "HELLO FROM THE SCRIPTED MODEL";

/// Claude Code installed at [`CLAUDE_CODE`] in the test cache (installed on first use): its
/// executable.
fn claude_code() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agents/claude-code-{CLAUDE_CODE}"));
    let exe = dir.join("node_modules/@anthropic-ai/claude-code/bin/claude.exe");
    if !exe.is_file() {
        let o = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg(format!("@anthropic-ai/claude-code@{CLAUDE_CODE}"))
            .output()
            .unwrap_or_else(|e| unreachable!("cannot run npm: {e}"));
        assert!(o.status.success(), "npm install: {}", stderr(&o));
    }
    assert!(exe.is_file(), "{} is not installed", exe.display());
    exe
}

/// One request the scripted server saw: its request line and body.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A scripted Anthropic Messages server on a loopback port: every `POST /v1/messages`
/// answers [`ANSWER`] (streamed where asked), anything else `{}`. Returns the port.
fn scripted_server(seen: Seen) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| unreachable!("{e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let request = line.trim_end().to_owned();
                    let mut length = 0;
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        if header.trim_end().is_empty() {
                            break;
                        }
                        if let Some((k, v)) = header.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let body = String::from_utf8_lossy(&body).into_owned();
                    let (kind, reply) = answer(&request, &body);
                    if let Ok(mut s) = seen.lock() {
                        s.push((request, body));
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
                        reply.len()
                    );
                    let out = reader.get_mut();
                    if out.write_all(head.as_bytes()).is_err()
                        || out.write_all(reply.as_bytes()).is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// The scripted reply to one request: its content type and body.
fn answer(request: &str, body: &str) -> (&'static str, String) {
    if !request.starts_with("POST /v1/messages") || request.contains("count_tokens") {
        return ("application/json", "{\"input_tokens\": 1}".to_owned());
    }
    let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let model = req["model"].clone();
    let usage = serde_json::json!({"input_tokens": 1, "output_tokens": 5});
    if req["stream"] != true {
        let message = serde_json::json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": ANSWER}],
            "stop_reason": "end_turn", "stop_sequence": null, "usage": usage,
        });
        return ("application/json", message.to_string());
    }
    let events = [
        serde_json::json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}}),
        serde_json::json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        serde_json::json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": ANSWER}}),
        serde_json::json!({"type": "content_block_stop", "index": 0}),
        serde_json::json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
        serde_json::json!({"type": "message_stop"}),
    ];
    let text = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect();
    ("text/event-stream", text)
}

#[test]
fn claude_code_answers_under_its_profile_and_cannot_touch_its_settings() {
    let exe = claude_code();
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let (ws, home) = (dir.path().join("ws"), dir.path().join("home"));
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
    let settings = [
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
    let seen: Seen = Arc::default();
    let port = scripted_server(Arc::clone(&seen));
    let install = exe
        .ancestors()
        .nth(4)
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let rest = format!(
        "[fs]\nread = [\"{install}/**\"]\nwrite = [\"./**\"]\n[exec]\nallow = [{:?}]\n\
         [[net.allow]]\naddr = \"127.0.0.1\"\nports = {port}\nproto = \"tcp\"\n",
        exe.display().to_string()
    );
    let policy = dir.path().join("claude.toml");
    let text = support::profile_as_version_1("agent-claude-code", &ws, &home, &rest);
    std::fs::write(&policy, text).unwrap_or_else(|e| unreachable!("{e}"));
    // `bee exec` passes only a few variables (PATH, HOME, LANG…): the others through `env`,
    // which the profile lets run.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_bee"))
        .args(["exec", "--engine", "landlock", "--policy"])
        .arg(&policy)
        .args(["--", "/usr/bin/env"])
        .arg(format!("ANTHROPIC_BASE_URL=http://127.0.0.1:{port}"))
        .args([
            "ANTHROPIC_API_KEY=sk-ant-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
        ])
        .arg(&exe)
        .args(["-p", "Say hello."])
        .current_dir(&ws)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(err.contains("bee: engine: landlock\n"), "{err}");
    assert_eq!(out.trim(), ANSWER, "{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(
        seen.iter()
            .any(|(r, b)| r.starts_with("POST /v1/messages") && b.contains("Say hello.")),
        "{seen:?}"
    );
    // It ran, wrote its session state, and left every settings file as it was.
    assert!(home.join(".claude/projects").is_dir(), "{err}");
    for f in &settings {
        assert_eq!(
            std::fs::read_to_string(f).ok().as_deref(),
            Some("{}\n"),
            "{}",
            f.display()
        );
    }
}
