//! `bee mcp` run by an ordinary user (`nobody`) on a machine with a `bee serve` service: every
//! `tools/call` runs in a scope the service makes, proven within the user's ceiling, as that
//! user; a denial comes back to the MCP client as a tool error with bee's explanation, and no
//! scope outlives the session. Raw JSON-RPC on the wire (the official SDK's client is
//! `tests/mcp_sdk.rs`'s). Needs root (to start the service) and Landlock; fails, never skips,
//! without them (features `landlock-tests` and `mcp`).

mod support;

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::bee_exe;
use support::serve::{NOBODY, ceiling_with_bee, ok, pub_policy, start, ws};

#[test]
fn an_ordinary_users_mcp_calls_run_in_scopes_of_the_service() {
    let service = start();
    ceiling_with_bee(&service);
    let ws = ws(&service);
    let policy = pub_policy(&service);
    let mut child = ok(Command::new(bee_exe())
        .arg("mcp")
        .arg("--policy")
        .arg(&policy)
        .arg("--workspace")
        .arg(&ws)
        .current_dir(&ws)
        .env("BEE_SOCKET", service.socket())
        .env("HOME", &ws)
        .env_remove("XDG_CONFIG_HOME")
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn());
    let (tx, lines) = channel();
    let out = child.stdout.take();
    std::thread::spawn(move || {
        for line in out.map(BufReader::new).into_iter().flat_map(|r| r.lines()) {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take();
    let mut ask = |request: Value| -> Value {
        if let Some(i) = stdin.as_mut() {
            let _ = writeln!(i, "{request}");
            let _ = i.flush();
        }
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| unreachable!("no answer to {request} within 20 s: {e}"));
        ok(serde_json::from_str::<Value>(&line).map_err(|e| format!("{e}: {line}")))
    };
    let init = ask(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let call = |id: u64, name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
    };
    let text = |answer: &Value| -> String {
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    // Allowed: a write in `pub/`, made by the user the client is.
    let a = ask(call(
        1,
        "write_file",
        json!({"path": "pub/made.txt", "content": "ok\n"}),
    ));
    assert_eq!(a["result"]["isError"], false, "{a}");
    let made = ok(std::fs::metadata(ws.join("pub/made.txt")));
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&made), NOBODY);
    // The shell runs as that user, in a scope the kernel confines: the secret beside `pub/`
    // is refused, and the answer says what was refused and why.
    let a = ask(call(2, "shell", json!({"command": "id -u; cat secret"})));
    let said = text(&a);
    assert_eq!(a["result"]["isError"], true, "{a}");
    assert!(said.contains("65534"), "{said}");
    assert!(said.contains("denied by policy"), "{said}");
    assert!(said.contains(&format!("{}/secret", ws.display())), "{said}");
    let a = ask(call(3, "read_file", json!({"path": "secret"})));
    assert_eq!(a["result"]["isError"], true, "{a}");
    assert!(!text(&a).contains("hush"), "{a}");

    // The client leaves: bee mcp ends, and the service tears its scope down.
    drop(stdin.take());
    let until = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if Instant::now() > until {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{err}");
    assert!(err.contains("through the service at"), "{err}");
    assert_eq!(service.scopes_left_after_hangup(), 0, "{}", service.log());
}
