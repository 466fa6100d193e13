//! `bee mcp` against the official MCP Inspector's command-line client (npm
//! `@modelcontextprotocol/inspector`, pinned, installed into a cache under the target
//! directory on first use), under the Landlock engine, natively: `tools/list` with schemas and
//! annotations, an allowed `tools/call`, and one the kernel refuses, explained. Needs root,
//! Landlock, node, `npm` and the npm registry; fails, never skips, without them (features
//! `mcp` and `landlock-tests`).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use support::{bee_exe, stderr, stdout};

/// The Inspector release the test runs.
const INSPECTOR: &str = "2.12.0";

/// The Inspector installed at [`INSPECTOR`] in the test cache: its launcher.
fn inspector() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mcp-inspector-{INSPECTOR}"));
    let bin = dir.join("node_modules/.bin/mcp-inspector");
    if !bin.exists() {
        let o = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg(format!("@modelcontextprotocol/inspector@{INSPECTOR}"))
            .output()
            .unwrap_or_else(|e| unreachable!("cannot run npm: {e}"));
        assert!(o.status.success(), "npm install: {}", stderr(&o));
    }
    assert!(bin.exists(), "{} is not installed", bin.display());
    bin
}

/// Runs the Inspector's CLI against `bee mcp --policy POLICY --workspace WS` with `args`.
fn inspect(policy: &Path, ws: &Path, args: &[&str]) -> (Output, Value) {
    let o = Command::new(inspector())
        .arg("--cli")
        .arg(bee_exe())
        .args(["mcp", "--engine", "landlock", "--records-dir"])
        .arg(ws.with_file_name("records"))
        .arg("--policy")
        .arg(policy)
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .output()
        .unwrap_or_else(|e| unreachable!("cannot run the Inspector: {e}"));
    // The result is the JSON document on standard output; an error result adds a line.
    let out = stdout(&o);
    let start = out.find('{').unwrap_or(0);
    let mut values = serde_json::Deserializer::from_str(&out[start..]).into_iter::<Value>();
    let value = values.next().and_then(Result::ok).unwrap_or_default();
    (o, value)
}

#[test]
fn the_inspector_lists_calls_and_is_refused_with_bees_explanation() {
    let s = support::Confined::new(&["/usr/bin/dash"]);
    let (ws, secret, policy) = (&s.ws, &s.secret, &s.policy);
    std::fs::write(ws.join("a.txt"), "hello\n").unwrap_or_else(|e| unreachable!("{e}"));

    let (o, list) = inspect(policy, ws, &["--method", "tools/list"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let tools = list["tools"].as_array().cloned().unwrap_or_default();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| unreachable!("no {name} in {list}"))
    };
    for name in [
        "shell",
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "glob",
        "grep",
    ] {
        assert_eq!(tool(name)["inputSchema"]["type"], "object", "{name}");
    }
    assert_eq!(tool("read_file")["annotations"]["readOnlyHint"], true);
    assert_eq!(tool("write_file")["annotations"]["destructiveHint"], true);

    let (o, read) = inspect(
        policy,
        ws,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "read_file",
            "--tool-arg",
            "path=a.txt",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(read["isError"], false, "{read}");
    assert!(
        read["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("hello")),
        "{read}"
    );

    let arg = format!("path={}", secret.display());
    let (o, denied) = inspect(
        policy,
        ws,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "read_file",
            "--tool-arg",
            &arg,
        ],
    );
    assert_eq!(denied["isError"], true, "{denied}");
    let text = denied["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with(&format!(
            "denied by policy: open {} for read: no fs.read grant covers it",
            secret.display()
        )),
        "{text}"
    );
    assert!(!text.contains("top secret"), "{text}");
    // The Inspector reports the error result beside it, and fails.
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(all.contains("tool_is_error"), "{all}");
    assert_ne!(o.status.code(), Some(0), "{all}");
}
