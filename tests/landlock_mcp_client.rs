//! bee as an MCP client under the Landlock engine, on this host: `[mcp.servers.NAME]` started
//! each in a scope of its own. The real filesystem server (`@modelcontextprotocol/
//! server-filesystem`, from npm at a pinned version into a cache under the target directory)
//! reads what its policy grants and is refused by the kernel what it does not, the denial
//! attributed to the call; the real memory server (`@modelcontextprotocol/server-memory`,
//! the same way) reads its graph and is refused the write that would store an entity; a
//! server policy wider than the session's is refused before any
//! model call; servers that crash, never answer, flood or offer too much give `could-not-run`
//! or a refusal, never a hung session, and leave no process behind. Needs root, Landlock,
//! node, `npm` and the npm registry; fails, never skips, without them (features `mcp` and
//! `landlock-tests`).

mod support;

use std::path::{Path, PathBuf};

use serde_json::json;
use support::mcp_client::{self, BAD_SERVER, Run, done, policy};
use support::{code, processes_with, stderr, stdout, tool_call, tool_result};

#[test]
fn the_filesystem_server_reads_what_its_policy_grants_and_the_kernel_refuses_the_rest() {
    mcp_client::the_filesystem_server_reads_what_its_policy_grants_and_the_kernel_refuses_the_rest(
    );
}

#[test]
fn the_memory_server_reads_its_graph_and_the_kernel_refuses_it_a_write() {
    mcp_client::the_memory_server_reads_its_graph_and_the_kernel_refuses_it_a_write(false);
}

#[test]
fn a_server_policy_wider_than_the_session_is_refused_before_any_model_call() {
    let run = Run::new(&[], &[done()]);
    // The server would read /etc/passwd, which the session does not.
    run.server(
        "wide",
        "/usr/bin/node",
        &[BAD_SERVER, "echo"],
        &["/etc/passwd".to_owned()],
        "",
    );
    let o = run.run();
    let err = stderr(&o);
    assert_eq!(code(&o), 65, "{}{err}", stdout(&o));
    assert!(err.contains("bee.toml:4: mcp.servers.wide"), "{err}");
    assert!(
        err.contains("the MCP server `wide` would have more than the session"),
        "{err}"
    );
    assert!(
        err.contains("/etc/passwd"),
        "the counterexample is named: {err}"
    );
    assert!(!run.root().join("rec").exists() || !transcript_exists(&run.root().join("rec")));
}

fn transcript_exists(records: &Path) -> bool {
    std::fs::read_dir(records).is_ok_and(|runs| {
        runs.flatten().any(|r| {
            std::fs::read_dir(r.path()).is_ok_and(|fs| {
                fs.flatten()
                    .any(|f| f.path().extension().is_some_and(|e| e == "jsonl"))
            })
        })
    })
}

/// Runs the misbehaving server in `mode` for a model that calls `bad__echo` twice; returns
/// the run's output and its transcript (empty when the episode did not start).
fn misbehaving(mode: &str) -> (std::process::Output, String, Run) {
    let turns = [
        tool_call("c1", "bad__echo", &json!({"text": "hi"})),
        tool_call("c2", "bad__echo", &json!({"text": "again"})),
        done(),
    ];
    let run = Run::new(&[BAD_SERVER.to_owned()], &turns);
    // The scratch directory tells this run's server from other tests' ones.
    let tag = run.root().display().to_string();
    run.server(
        "bad",
        "/usr/bin/node",
        &[BAD_SERVER, mode, &tag],
        &[BAD_SERVER.to_owned()],
        "startup_timeout_seconds = 3\ntimeout_seconds = 3\n",
    );
    let o = run.run();
    let text = if transcript_exists(&run.root().join("rec")) {
        run.transcript()
    } else {
        String::new()
    };
    assert!(
        processes_with(&format!("bad_server.js {mode} {tag}")).is_empty(),
        "the {mode} server outlived its session"
    );
    (o, text, run)
}

#[test]
fn a_well_behaved_server_answers_every_call_in_its_scope() {
    let (o, text, _run) = misbehaving("echo");
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    for (id, arg) in [("c1", "hi"), ("c2", "again")] {
        let r = tool_result(&text, id);
        assert_eq!(r["state"], "completed", "{r}");
        assert_eq!(r["output"], format!("echo: {{\"text\":\"{arg}\"}}"), "{r}");
    }
}

#[test]
fn a_server_that_crashes_during_a_call_gives_could_not_run_and_stays_down() {
    let (o, text, _run) = misbehaving("crash");
    assert_eq!(
        code(&o),
        0,
        "the session goes on: {}{}",
        stdout(&o),
        stderr(&o)
    );
    let first = tool_result(&text, "c1");
    assert_eq!(first["state"], "could_not_run", "{first}");
    let out = first["output"].as_str().unwrap_or_default();
    assert!(
        out.contains("it exited (exit status: 3) during the call"),
        "{out}"
    );
    assert!(
        out.contains("bad server: crashing on purpose"),
        "its stderr is shown: {out}"
    );
    let second = tool_result(&text, "c2");
    assert_eq!(second["state"], "could_not_run", "{second}");
    assert!(
        second["output"]
            .as_str()
            .is_some_and(|s| s.contains("is not running")),
        "{second}"
    );
}

#[test]
fn a_server_that_never_answers_a_call_is_stopped_at_its_timeout() {
    for mode in ["silent-call", "garbage"] {
        let (o, text, _run) = misbehaving(mode);
        assert_eq!(code(&o), 0, "{mode}: {}{}", stdout(&o), stderr(&o));
        let first = tool_result(&text, "c1");
        assert_eq!(first["state"], "could_not_run", "{mode}: {first}");
        assert!(
            first["output"]
                .as_str()
                .is_some_and(|s| s.contains("did not answer within 3 s and was stopped")),
            "{mode}: {first}"
        );
        let ms = first["duration_ms"].as_u64().unwrap_or(u64::MAX);
        assert!(
            (3000..20_000).contains(&ms),
            "{mode}: stopped at its timeout, not hung: {ms} ms"
        );
        assert_eq!(tool_result(&text, "c2")["state"], "could_not_run", "{mode}");
    }
}

#[test]
fn a_server_that_never_answers_the_handshake_or_offers_too_much_is_refused() {
    for (mode, says) in [
        (
            "silent-start",
            "did not answer the MCP handshake and list its tools within 3 s",
        ),
        (
            "many-tools",
            "offers more than the 128 tools bee takes from one server",
        ),
        ("dup-tools", "offers two tools named `echo`"),
        ("pages", "lists its tools in more than 32 pages"),
    ] {
        let (o, text, run) = misbehaving(mode);
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert_eq!(code(&o), 69, "{mode}: {all}");
        // Named with where the configuration defines it.
        let at = format!(
            "the MCP server `bad` ({}/bee.toml:2) {says}",
            run.root().display()
        );
        assert!(all.contains(&at), "{mode}: {all}");
        assert!(
            !text.contains("\"event\":\"tool_call\""),
            "{mode}: no call was made: {text}"
        );
    }
}

#[test]
fn a_server_bee_cannot_start_says_what_the_kernel_refused() {
    let run = Run::new(&[], &[done()]);
    // node may run, but its policy does not let it read the script.
    run.server(
        "blind",
        "/usr/bin/node",
        &[BAD_SERVER, "echo"],
        &[],
        "startup_timeout_seconds = 5\n",
    );
    let o = run.run();
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(code(&o), 69, "{all}");
    assert!(all.contains("the MCP server `blind`"), "{all}");
    assert!(
        all.contains(&format!("denied by policy: open {BAD_SERVER} for read")),
        "{all}"
    );
}

/// Every transcript of the run under `records`, one after another.
fn all_transcripts(records: &Path) -> String {
    let mut text = String::new();
    for run in std::fs::read_dir(records).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(run.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if f.path().extension().is_some_and(|e| e == "jsonl") {
                text.push_str(&std::fs::read_to_string(f.path()).unwrap_or_default());
            }
        }
    }
    text
}

/// A model turn calling `agent` with `role`.
fn agent(id: &str, role: &str) -> String {
    json!({"tool_calls": [{"id": id, "name": "agent", "arguments": {"role": role, "task": "echo"}}]})
        .to_string()
}

/// A run whose model makes `turns`, with the echoing server `bad` configured and an empty
/// `.bee/agents/`: the run, its tag (on the server's command line) and the roles' directory.
fn echo_server_with_roles(turns: &[String]) -> (Run, String, PathBuf) {
    let run = Run::new(&[BAD_SERVER.to_owned()], turns);
    let tag = run.root().display().to_string();
    run.server(
        "bad",
        "/usr/bin/node",
        &[BAD_SERVER, "echo", &tag],
        &[BAD_SERVER.to_owned()],
        "",
    );
    let agents = run.root().join(".bee/agents");
    std::fs::create_dir_all(&agents).unwrap_or_else(|e| unreachable!("{e}"));
    (run, tag, agents)
}

#[test]
fn a_subagent_is_offered_only_the_servers_its_role_names() {
    let (run, tag, agents) =
        echo_server_with_roles(&[agent("a1", "with-server"), agent("a2", "without"), done()]);
    for (role, servers, id) in [("with-server", "[\"bad\"]", "s1"), ("without", "[]", "s2")] {
        let provider = format!("{role}-provider.toml");
        std::fs::write(
            run.root().join(&provider),
            format!("kind = \"replay\"\nfile = \"{role}.jsonl\"\nmodel = \"m\"\n"),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        std::fs::write(
            run.root().join(format!("{role}.jsonl")),
            [tool_call(id, "bad__echo", &json!({"text": role})), done()].join("\n"),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        std::fs::write(
            agents.join(format!("{role}.toml")),
            format!(
                "description = \"Echoes.\"\npolicy = \"../../session.toml\"\n\
                 tools = [\"read_file\"]\nmcp_servers = {servers}\nprovider = \"../../{provider}\"\n"
            ),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
    }
    let o = run.run();
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let text = all_transcripts(&run.root().join("rec"));
    let with = tool_result(&text, "s1");
    assert_eq!(with["state"], "completed", "{with}");
    assert_eq!(with["output"], "echo: {\"text\":\"with-server\"}", "{with}");
    let without = tool_result(&text, "s2");
    assert_eq!(without["state"], "could_not_run", "{without}");
    assert!(
        without["output"]
            .as_str()
            .is_some_and(|s| s.contains("no tool `bad__echo`")),
        "{without}"
    );
    assert!(
        processes_with(&format!("bad_server.js echo {tag}")).is_empty(),
        "a subagent's server outlived it"
    );
}

#[test]
fn a_role_naming_an_unknown_server_or_one_wider_than_itself_starts_no_subagent() {
    let (run, _, agents) =
        echo_server_with_roles(&[agent("a1", "ghost"), agent("a2", "narrow"), done()]);
    // `narrow` reads the workspace only: the server's script is outside it.
    let ws = run.root().join("ws");
    std::fs::write(
        run.root().join("narrow.toml"),
        policy(&[format!("{}/**", ws.display())], &[]),
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    for (role, policy_file, servers) in [
        ("ghost", "session.toml", "nope"),
        ("narrow", "narrow.toml", "bad"),
    ] {
        std::fs::write(
            agents.join(format!("{role}.toml")),
            format!(
                "description = \"Echoes.\"\npolicy = \"../../{policy_file}\"\n\
                 tools = [\"read_file\"]\nmcp_servers = [\"{servers}\"]\n"
            ),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
    }
    let text = run.completed();
    let ghost = tool_result(&text, "a1");
    assert_ne!(ghost["state"], "completed", "{ghost}");
    assert!(
        ghost["output"].as_str().is_some_and(|s| s
            .contains("names the MCP server `nope`, which the configuration does not define (its servers are bad)")),
        "{ghost}"
    );
    let narrow = tool_result(&text, "a2");
    assert_ne!(narrow["state"], "completed", "{narrow}");
    let out = narrow["output"].as_str().unwrap_or_default();
    assert!(
        out.contains("the MCP server `bad` would have more than the subagent"),
        "{out}"
    );
    assert!(
        out.contains("bad_server.js"),
        "the counterexample is named: {out}"
    );
}

#[test]
fn a_scenario_starts_servers_of_its_own_and_its_bad_tables_name_file_line_and_key() {
    let run = Run::new(
        &[BAD_SERVER.to_owned()],
        &[
            tool_call("c1", "own__echo", &json!({"text": "mine"})),
            done(),
        ],
    );
    let tag = run.root().display().to_string();
    std::fs::write(run.root().join("bee.toml"), "").unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::write(
        run.root().join("server.toml"),
        policy(&[BAD_SERVER.to_owned()], &[]),
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let scenario = run.root().join("scenario.toml");
    let base = std::fs::read_to_string(&scenario).unwrap_or_default();
    let table = format!(
        "[mcp.servers.own]\ncommand = \"/usr/bin/node\"\nargs = {}\npolicy = \"server.toml\"\n",
        json!([BAD_SERVER, "echo", tag])
    );
    std::fs::write(&scenario, format!("{base}{table}")).unwrap_or_else(|e| unreachable!("{e}"));
    let r = tool_result(&run.completed(), "c1");
    assert_eq!(r["output"], "echo: {\"text\":\"mine\"}", "{r}");

    std::fs::write(&scenario, format!("{base}{table}timeout_seconds = 0\n"))
        .unwrap_or_else(|e| unreachable!("{e}"));
    let o = run.run();
    let err = stderr(&o);
    assert_eq!(code(&o), 65, "{err}");
    assert!(err.contains(&format!("{}:", scenario.display())), "{err}");
    assert!(err.contains("mcp.servers.own.timeout_seconds"), "{err}");
    assert!(err.contains("must be at least 1"), "{err}");
}

#[test]
fn a_json_rpc_error_answer_fails_the_call_and_keeps_the_server() {
    let (o, text, _run) = misbehaving("rpc-error");
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let first = tool_result(&text, "c1");
    assert_eq!(first["state"], "failed", "{first}");
    assert!(
        first["output"]
            .as_str()
            .is_some_and(|s| s.contains("the server answered with error -32602: no such thing")),
        "{first}"
    );
    let second = tool_result(&text, "c2");
    assert_eq!(second["state"], "completed", "{second}");
}

#[test]
fn what_a_server_is_refused_between_its_calls_is_said_apart_and_kept() {
    let turns = |root: &Path| {
        vec![
            tool_call("c1", "bad__echo", &json!({"path": root.join("secret.txt")})),
            tool_call("c2", "shell", &json!({"command": "sleep 1"})),
            tool_call("c3", "bad__echo", &json!({"text": "next"})),
            done(),
        ]
    };
    let run = Run::new(&[BAD_SERVER.to_owned()], &[]);
    let root = run.root().to_path_buf();
    support::replay_scenario(&root, "ws", "session.toml", &turns(&root));
    let tag = root.display().to_string();
    run.server(
        "bad",
        "/usr/bin/node",
        &[BAD_SERVER, "later", &tag],
        &[BAD_SERVER.to_owned()],
        "",
    );
    let text = run.completed();
    let secret = format!("open {}/secret.txt for read", root.display());
    // Not the call that scheduled it, nor the shell's: the next call of the server says it
    // happened before it.
    assert_eq!(tool_result(&text, "c1")["output"], "later");
    let next = tool_result(&text, "c3");
    let out = next["output"].as_str().unwrap_or_default();
    assert!(out.starts_with("echo: {\"text\":\"next\"}"), "{out}");
    assert!(
        out.contains("note: between its calls, before this one, the server was refused:"),
        "{out}"
    );
    assert!(out.contains(&secret), "{out}");
    let denial = text
        .lines()
        .find(|l| l.contains("\"event\":\"denial\"") && l.contains(&secret))
        .unwrap_or_else(|| unreachable!("no denial event: {text}"));
    assert!(denial.contains("\"call_id\":\"c3\""), "{denial}");
    assert!(
        denial.contains("before this call, between the server's calls: "),
        "{denial}"
    );
}
