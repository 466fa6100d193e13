//! bee as an MCP client under the BPF LSM engine, in the VM matrix: the real filesystem
//! server (`@modelcontextprotocol/server-filesystem` from npm, the release
//! `tests/mcp/server-filesystem.version` pins) started by `bee run` in a scope of its own
//! reads what its policy grants, and the kernel refuses it the secret beside the workspace,
//! the denial attributed to the call; the real memory server (`@modelcontextprotocol/
//! server-memory`, `tests/mcp/server-memory.version`) reads its graph and is refused the
//! write that would store an entity (the scenarios `landlock_mcp_client` runs natively).
//!
//! Built only with features `kernel-tests` and `mcp`, and run in the VM matrix by `cargo
//! xtask test`, which installs the servers on the host and copies them and `node` into the
//! guests: `cargo xtask vm test -p bee --test kernel_mcp --features kernel-tests,mcp --bin
//! target/debug/bee --bin /usr/bin/node --with
//! target/tmp/mcp-servers/server-filesystem-VERSION --with
//! target/tmp/mcp-servers/server-memory-VERSION --memory 3072`. On a host whose kernel cannot
//! run BPF LSM programs, or without the servers or `node`, it fails; it never skips.

mod support;

use support::mcp_client;

#[test]
fn the_filesystem_server_reads_what_its_policy_grants_and_the_kernel_refuses_the_rest() {
    mcp_client::the_filesystem_server_reads_what_its_policy_grants_and_the_kernel_refuses_the_rest(
    );
}

#[test]
fn the_memory_server_reads_its_graph_and_the_kernel_refuses_it_a_write() {
    mcp_client::the_memory_server_reads_its_graph_and_the_kernel_refuses_it_a_write(true);
}

/// Calls each way per round of [`mcp_call_cost`], and its rounds.
const BENCH_CALLS: usize = 25;
const BENCH_ROUNDS: usize = 4;

/// Issue "confine any agent", item 4, under the BPF LSM engine: a `shell` call running `true`
/// three ways, side by side in one boot (`bench/mcp/bench.py` measures the same natively
/// under the Landlock engine): `/bin/sh -c true` spawned by the test (no bee); `bee run`'s
/// tool path (a replayed episode of [`BENCH_CALLS`] calls, one scope for the episode, each
/// call's `duration_ms` from its transcript); and `bee mcp`'s `tools/call` (a scope of its
/// own per call) over raw JSON-RPC on stdio, timed by the client (round trip) and by bee
/// (`duration_ms` in `mcp.jsonl`). [`BENCH_ROUNDS`] interleaved rounds, so the guest's load
/// falls on every column alike. A benchmark, not a check: `cargo xtask vm test --kernel 7.x
/// -p bee --test kernel_mcp --features kernel-tests,mcp --bin target/debug/bee -- --nocapture
/// --include-ignored mcp_call_cost`; it prints `kernel-mcp-bench|` lines (docs/benchmarks.md,
/// "bee mcp").
#[test]
#[ignore = "a benchmark: run with --include-ignored mcp_call_cost"]
fn mcp_call_cost() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap_or_else(|e| unreachable!("{e}"));
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[fs]\nread = [\"/bin/**\", \"/lib/**\", \"/lib64/**\", \"/usr/lib/**\", \
             \"/etc/ld.so.cache\", \"{ws}/**\"]\nwrite = [\"/dev/null\", \"{ws}/**\"]\n\
             [exec]\nallow = [\"/bin/busybox\", \"/lib/**\", \"/lib64/**\", \"/usr/lib/**\"]\n",
            ws = ws.display()
        ),
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let (mut spawned, mut run, mut client, mut server) = (vec![], vec![], vec![], vec![]);
    for round in 0..BENCH_ROUNDS {
        for _ in 0..BENCH_CALLS {
            let t = std::time::Instant::now();
            let s = std::process::Command::new("/bin/sh")
                .args(["-c", "true"])
                .status()
                .unwrap_or_else(|e| unreachable!("{e}"));
            assert!(s.success());
            spawned.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        run.extend(bench::bee_run(dir.path(), &policy, &ws, round));
        let (c, s) = bench::bee_mcp(dir.path(), &policy, &ws, round);
        client.extend(c);
        server.extend(s);
    }
    for (name, values) in [
        ("spawn `/bin/sh -c true`", &mut spawned),
        ("`bee run` tool path (bee's duration)", &mut run),
        ("`bee mcp` tools/call (bee's duration)", &mut server),
        ("`bee mcp` tools/call (client round trip)", &mut client),
    ] {
        assert_eq!(values.len(), BENCH_CALLS * BENCH_ROUNDS, "{name}");
        values.sort_by(f64::total_cmp);
        let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        println!(
            "kernel-mcp-bench| {name} | {} | {:.2} | {:.2} | {mean:.2} |",
            values.len(),
            at(0.5),
            at(0.99)
        );
    }
}

/// The two bee paths of [`mcp_call_cost`].
mod bench {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::path::Path;
    use std::process::{Command, Stdio};

    use serde_json::{Value, json};

    use super::BENCH_CALLS;

    /// Every `tool_result` event's `duration_ms` in the one file named `name` under `root`.
    fn durations(root: &Path, name: &str) -> Vec<f64> {
        let file = files_under(root)
            .into_iter()
            .find(|p| p.file_name().is_some_and(|n| n == name))
            .unwrap_or_else(|| unreachable!("no {name} under {}", root.display()));
        std::fs::read_to_string(&file)
            .unwrap_or_else(|e| unreachable!("{e}"))
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["event"] == "tool_result")
            .map(|e| e["duration_ms"].as_f64().unwrap_or(f64::NAN))
            .collect()
    }

    fn files_under(root: &Path) -> Vec<std::path::PathBuf> {
        let mut out = vec![];
        for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(files_under(&path));
            } else {
                out.push(path);
            }
        }
        out
    }

    /// `bee run` replaying [`BENCH_CALLS`] `shell` calls of `true`: their durations.
    pub fn bee_run(dir: &Path, policy: &Path, ws: &Path, round: usize) -> Vec<f64> {
        let call = |i: usize| {
            json!({"tool_calls": [{"id": format!("c{i}"), "name": "shell",
                "arguments": {"command": "true"}}]})
            .to_string()
        };
        let mut turns: Vec<String> = (0..BENCH_CALLS).map(call).collect();
        turns.push(json!({"text": "done"}).to_string());
        crate::support::replay_scenario(
            dir,
            &ws.display().to_string(),
            &policy.display().to_string(),
            &turns,
        );
        // The replay's calls, and a turn to end on, within the episode's turn limit.
        let mut scenario = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("scenario.toml"))
            .unwrap_or_else(|e| unreachable!("{e}"));
        writeln!(scenario, "[limits]\nturns = {}", BENCH_CALLS + 5)
            .unwrap_or_else(|e| unreachable!("{e}"));
        let records = dir.join(format!("run-records-{round}"));
        let o = Command::new(env!("CARGO_BIN_EXE_bee"))
            .args([
                "run",
                "--scenario",
                "scenario.toml",
                "--provider",
                "provider.toml",
            ])
            .arg("--records")
            .arg(&records)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        durations(&records, "s.jsonl")
    }

    /// `bee mcp` answering [`BENCH_CALLS`] `tools/call`s of `shell` running `true`: the
    /// client's round trips (ms) and bee's durations.
    pub fn bee_mcp(dir: &Path, policy: &Path, ws: &Path, round: usize) -> (Vec<f64>, Vec<f64>) {
        let records = dir.join(format!("mcp-records-{round}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_bee"))
            .args(["mcp", "--engine", "bpf-lsm", "--policy"])
            .arg(policy)
            .arg("--workspace")
            .arg(ws)
            .arg("--records-dir")
            .arg(&records)
            .current_dir(ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| unreachable!("{e}"));
        let mut stdin = child.stdin.take().unwrap_or_else(|| unreachable!());
        let mut lines = BufReader::new(child.stdout.take().unwrap_or_else(|| unreachable!()))
            .lines()
            .map_while(Result::ok);
        let mut ask = |request: &Value| -> Value {
            writeln!(stdin, "{request}").unwrap_or_else(|e| unreachable!("{e}"));
            stdin.flush().unwrap_or_else(|e| unreachable!("{e}"));
            let line = lines
                .next()
                .unwrap_or_else(|| unreachable!("bee mcp ended before answering {request}"));
            serde_json::from_str(&line).unwrap_or_else(|e| unreachable!("{e}: {line}"))
        };
        let init = ask(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}}),
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        let mut times = vec![];
        for id in 1..=BENCH_CALLS {
            let t = std::time::Instant::now();
            let answer = ask(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "shell", "arguments": {"command": "true"}}}));
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(answer["result"]["isError"], false, "{answer}");
        }
        drop(stdin);
        let status = child.wait().unwrap_or_else(|e| unreachable!("{e}"));
        assert!(status.success(), "bee mcp: {status}");
        (times, durations(&records, "mcp.jsonl"))
    }
}
