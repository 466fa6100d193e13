//! `bee mcp` under the Landlock engine, natively: the official MCP Python SDK's client (PyPI
//! `mcp`, pinned, installed into a venv under the target directory on first use) through both
//! protocol revisions, and bad input on the raw wire. Needs root, Landlock, python3 with venv
//! and pip, and PyPI; fails, never skips, without them (features `mcp` and `landlock-tests`).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{bee, bee_exe, bee_in, code, stderr, stdout};

/// The MCP Python SDK the tests run, pinned.
const SDK: &str = "mcp==2.3.0";

/// A workspace beside a secret, with a policy that runs the shell, `cat` and `sleep`.
fn setup() -> support::Confined {
    support::Confined::new(&["/usr/bin/dash", "/usr/bin/cat", "/usr/bin/sleep"])
}

/// The venv's python with the pinned SDK, made once and reused by later runs.
fn sdk_python() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mcp-python-{}", &SDK[5..]));
    let python = venv.join("bin/python");
    let ready = |p: &Path| {
        Command::new(p)
            .args(["-c", "import mcp, mcp_types"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ready(&python) {
        return python;
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap_or_else(|e| unreachable!("cannot run python3 to make a venv for the MCP SDK: {e}"));
    assert!(
        made.status.success(),
        "python3 -m venv {} failed: {}",
        venv.display(),
        String::from_utf8_lossy(&made.stderr)
    );
    let pip = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", SDK])
        .output()
        .unwrap_or_else(|e| unreachable!("cannot run pip to install {SDK}: {e}"));
    assert!(
        pip.status.success(),
        "the MCP Python SDK ({SDK}) could not be installed from PyPI: {}",
        String::from_utf8_lossy(&pip.stderr)
    );
    assert!(ready(&python), "{SDK} installed but does not import");
    python
}

/// Pids of processes whose command line contains `needle`.
fn processes(needle: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
        .collect()
}

#[test]
fn the_python_sdk_client_lists_calls_is_refused_and_cancels() {
    let s = setup();
    let python = sdk_python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    let o = Command::new(&python)
        .arg(&script)
        .arg(bee_exe())
        .args([&s.policy, &s.ws, &s.secret, &s.records])
        .output()
        .unwrap_or_else(|e| unreachable!("cannot run the client: {e}"));
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(code(&o), 0, "{out}{err}");
    let r: Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| unreachable!("{e}: {out}{err}"));
    assert_eq!(r.get("errors"), None, "{r:#}\n{err}");

    // The 2025-11-25 handshake.
    assert_eq!(r["initialize"]["protocol_version"], "2025-11-25", "{r:#}");
    assert_eq!(r["initialize"]["server"], "bee", "{r:#}");
    assert_eq!(r["initialize"]["tools_capability"], true, "{r:#}");
    // The tools, with the schemas bee gives its own model, and hints.
    for name in [
        "shell",
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "glob",
        "grep",
    ] {
        let t = &r["tools"][name];
        assert_eq!(t["schema_type"], "object", "{name}: {r:#}");
        assert_eq!(t["description"], true, "{name}: {r:#}");
    }
    assert!(
        r["tools"]["shell"]["properties"]
            .as_array()
            .is_some_and(|p| p.contains(&json!("command"))),
        "{r:#}"
    );
    assert_eq!(r["tools"]["read_file"]["read_only"], true, "{r:#}");
    assert_eq!(r["tools"]["write_file"]["read_only"], false, "{r:#}");

    // Allowed, then refused by the kernel with bee's explanation.
    assert_eq!(r["allowed"]["is_error"], false, "{r:#}");
    let allowed = r["allowed"]["text"].as_str().unwrap_or_default();
    assert!(allowed.ends_with("[stdout]\nhi"), "{allowed}");
    assert_eq!(r["denied"]["is_error"], true, "{r:#}");
    let denied = r["denied"]["text"].as_str().unwrap_or_default();
    assert!(denied.contains("denied by policy"), "{denied}");
    assert!(denied.contains(&s.secret.display().to_string()), "{denied}");
    assert!(!denied.contains("top secret"), "{denied}");

    // JSON-RPC errors for an unknown tool and an unknown method.
    assert_eq!(r["unknown_tool"]["code"], -32602, "{r:#}");
    assert_eq!(r["unknown_method"]["code"], -32601, "{r:#}");

    // The long call ran and reported progress; cancelled, its process is gone and the
    // session goes on.
    assert_eq!(r["cancelled"]["was_running"], true, "{r:#}");
    assert_eq!(r["cancelled"]["progress"][0], "running for 1 s", "{r:#}");
    assert_eq!(r["cancelled"]["gone"], true, "{r:#}");
    assert_eq!(r["after_cancel"]["is_error"], false, "{r:#}");

    // The stateless 2026-07-28 revision, through `server/discover`.
    let supported = r["discover"]["supported"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(supported.contains(&json!("2026-07-28")), "{r:#}");
    assert!(supported.contains(&json!("2025-11-25")), "{r:#}");
    assert_eq!(r["discover"]["negotiated"], "2026-07-28", "{r:#}");
    assert!(
        r["modern_tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("shell"))),
        "{r:#}"
    );
    assert_eq!(r["modern_call"]["is_error"], false, "{r:#}");
    let modern = r["modern_call"]["text"].as_str().unwrap_or_default();
    assert!(modern.ends_with("[stdout]\nmodern"), "{modern}");

    // Recorded like a session: `bee metrics` counts the calls and the denial.
    let records = s.records.display().to_string();
    let m = bee(&["metrics", "--records", &records, "--by", "tool", "--json"]);
    assert_eq!(code(&m), 0, "{}{}", stdout(&m), stderr(&m));
    let metrics = stdout(&m);
    assert!(metrics.contains("\"shell\""), "{metrics}");
    let transcripts: Vec<String> = std::fs::read_dir(&s.records)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|run| std::fs::read_to_string(run.path().join("mcp.jsonl")).ok())
        .collect();
    assert_eq!(transcripts.len(), 2, "one session per connection");
    let all = transcripts.concat();
    assert!(all.contains("\"event\":\"denial\""), "{all}");
    assert!(all.contains("\"episode_finished\""), "{all}");
}

/// `bee mcp` on raw pipes: lines written, answers read with a deadline.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Raw {
    fn start(s: &support::Confined) -> Self {
        let mut child = Command::new(bee_exe())
            .args(["mcp", "--policy"])
            .arg(&s.policy)
            .arg("--workspace")
            .arg(&s.ws)
            .arg("--records-dir")
            .arg(&s.records)
            .current_dir(&s.ws)
            .env("HOME", &s.ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| unreachable!("cannot start bee mcp: {e}"));
        let (tx, lines) = channel();
        let out = child.stdout.take();
        std::thread::spawn(move || {
            for line in out.map(BufReader::new).into_iter().flat_map(BufRead::lines) {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap_or_else(|| unreachable!());
        let _ = stdin.write_all(line.as_bytes());
        let _ = stdin.write_all(b"\n");
        let _ = stdin.flush();
    }

    /// The next answer, within 10 s.
    fn answer(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| unreachable!("no answer from bee mcp within 10 s: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| unreachable!("{e}: {line}"))
    }

    fn ask(&mut self, request: &Value) -> Value {
        self.send(&request.to_string());
        self.answer()
    }

    fn initialize(&mut self, version: &str) -> Value {
        let a = self.ask(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        );
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        a
    }

    /// Starts a `shell` call of `command` (request `id`) and waits, at most 10 s, until its
    /// process runs.
    fn start_long_call(&mut self, id: u64, command: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "shell", "arguments": {"command": command}}})
            .to_string(),
        );
        let until = Instant::now() + Duration::from_secs(10);
        while processes(command).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            !processes(command).is_empty(),
            "the long call never started"
        );
    }

    /// Closes standard input and waits, at most `within`, for bee to exit.
    fn hang_up(mut self, within: Duration) -> Option<std::process::ExitStatus> {
        drop(self.stdin.take());
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

#[test]
fn bad_input_gets_json_rpc_errors_and_never_hangs() {
    let s = setup();
    let mut raw = Raw::start(&s);
    // A version bee does not speak: it answers with one it does, for the client to judge.
    let init = raw.initialize("1999-01-01");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");

    let a = raw.ask(&json!({"jsonrpc": "2.0", "id": 1, "method": "bee/no-such-method"}));
    assert_eq!(a["error"]["code"], -32601, "{a}");
    let message = a["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no method `bee/no-such-method`"), "{a}");

    // 10 MB of arguments: refused as invalid params before any scope starts.
    let big = "x".repeat(10 * 1024 * 1024);
    let a = raw.ask(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "shell", "arguments": {"command": big}}}));
    assert_eq!(a["id"], 2, "{a}");
    assert_eq!(a["error"]["code"], -32602, "{a}");

    // A line over the SDK's 16 MiB: answered, never held whole, and the session goes on.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{{"x":"{}"}}}}"#,
        "y".repeat(17 * 1024 * 1024)
    );
    raw.send(&huge);
    let a = raw.answer();
    assert_eq!(a["error"]["code"], -32600, "{a}");
    assert!(
        a["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("at most"),
        "{a}"
    );

    // Arguments that are not an object: invalid params, not "no such method".
    let a = raw.ask(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "shell", "arguments": ["true"]}}));
    assert_eq!(
        (a["id"].clone(), a["error"]["code"].clone()),
        (json!(4), json!(-32602)),
        "{a}"
    );

    // Not JSON at all: a parse error, and the session goes on.
    raw.send("this is not json {");
    let a = raw.answer();
    assert_eq!(a["error"]["code"], -32700, "{a}");
    let a = raw.ask(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    assert!(a["result"]["tools"].is_array(), "{a}");

    // The stateless revision with a version bee does not speak: -32022, naming those it does.
    let mut modern = Raw::start(&s);
    let a = modern.ask(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "1999-01-01",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}}}}),
    );
    assert_eq!(a["error"]["code"], -32022, "{a}");
    assert_eq!(
        a["error"]["data"]["supported"],
        json!(["2025-11-25", "2026-07-28"]),
        "{a}"
    );
    assert!(
        modern
            .hang_up(Duration::from_secs(15))
            .is_some_and(|s| s.success())
    );

    // The client hangs up in the middle of a call: bee kills its scope and exits.
    let needle = "sleep 27.1828";
    raw.start_long_call(4, needle);
    let status = raw.hang_up(Duration::from_secs(15));
    assert!(
        status.is_some(),
        "bee mcp still ran 15 s after its client hung up"
    );
    assert!(
        processes(needle).is_empty(),
        "the call's process outlived bee mcp"
    );
}

#[test]
fn set_up_refuses_with_bees_statuses_before_serving() {
    let s = setup();
    let ws = s.ws.display().to_string();
    // A client that leaves before it begins: nothing asked, nothing failed.
    let p = s.policy.display().to_string();
    let o = bee_in(&s.ws, &["mcp", "--policy", &p, "--workspace", &ws]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let o = bee_in(&s.ws, &["mcp", "--workspace", &ws]);
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    let o = bee_in(
        &s.ws,
        &["mcp", "--workspace", &ws, "--policy", "/nonexistent/p.toml"],
    );
    assert_eq!(code(&o), 66, "{}", stderr(&o));
    let o = bee_in(
        &s.ws,
        &["mcp", "--workspace", &ws, "--policy", "/etc/passwd"],
    );
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    // The engine asked for applies: this host's kernel refuses BPF LSM programs.
    let o = bee_in(
        &s.ws,
        &[
            "mcp",
            "--policy",
            &p,
            "--workspace",
            &ws,
            "--engine",
            "bpf-lsm",
        ],
    );
    assert_eq!(code(&o), 69, "{}", stderr(&o));
    assert!(stderr(&o).contains("no call was served"), "{}", stderr(&o));
}

/// SIGTERM ends `bee mcp` as its client's leaving does: the running call's process is killed
/// with its scope, and the session's record is finished.
#[test]
fn sigterm_stops_the_running_calls_and_finishes_the_record() {
    let s = setup();
    let mut raw = Raw::start(&s);
    raw.initialize("2025-11-25");
    let needle = "sleep 31.0271";
    raw.start_long_call(2, needle);
    let pid = i32::try_from(raw.child.id()).unwrap_or_default();
    // SAFETY: a plain kill(2) of the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let until = Instant::now() + Duration::from_secs(15);
    let mut status = None;
    while status.is_none() && Instant::now() < until {
        status = raw.child.try_wait().ok().flatten();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(status.is_some(), "bee mcp still ran 15 s after SIGTERM");
    assert!(
        processes(needle).is_empty(),
        "the call's process outlived bee mcp"
    );
    let transcripts: String = std::fs::read_dir(&s.records)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|run| std::fs::read_to_string(run.path().join("mcp.jsonl")).ok())
        .collect();
    assert!(
        transcripts.contains("\"episode_finished\""),
        "{transcripts}"
    );
}
