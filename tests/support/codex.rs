//! OpenAI's Codex CLI for the tests that run it (`landlock_codex` natively, `kernel_codex` in
//! the VM matrix): its installation, its state, and a scripted Responses model that has its
//! shell tool read a secret, write Codex's configuration and a git hook, and fix a bug under
//! its profile; and the scenario of Codex with `bee mcp` as its tools for files and commands
//! ([`with_bee_mcp`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::agent_run::{self, Engine};
use super::scripted::Script;

/// The Codex CLI release the tests run (`tests/agents/codex.version`, which `cargo xtask test`
/// also reads to install it for the VM matrix).
pub fn version() -> &'static str {
    include_str!("../agents/codex.version").trim()
}

/// What the scripted model answers once its commands have run.
pub const ANSWER: &str = "FIXED BY THE SCRIPTED MODEL";

/// Codex as `npm install --global` lays it out under a prefix in the test cache: the
/// package's directory (`lib/node_modules/@openai/codex`, as the profile's rules expect it
/// under `/usr/lib`, `/usr/local/lib` or nvm), its launcher (`bin/codex.js`, run by Node.js)
/// and the native build the launcher replaces itself with (an optional dependency per
/// platform, inside the package's `node_modules/`).
pub struct Codex {
    /// `lib/node_modules/@openai/codex`.
    pub package: PathBuf,
    /// `bin/codex.js` in the package.
    pub launcher: PathBuf,
    /// The native executable.
    pub native: PathBuf,
}

/// Codex at [`version`] under `target/tmp/agents/codex-VERSION/` (`CARGO_TARGET_TMPDIR`),
/// installed from npm on first use. In the VM matrix `cargo xtask test` installs it on the
/// host and copies the native executable into the guests at the same path.
pub fn codex() -> Codex {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agents/codex-{}", version()));
    let package = dir.join("lib/node_modules/@openai/codex");
    let launcher = package.join("bin/codex.js");
    let (platform, triple) = match std::env::consts::ARCH {
        "x86_64" => ("codex-linux-x64", "x86_64-unknown-linux-musl"),
        "aarch64" => ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
        arch => unreachable!("Codex ships no Linux build for {arch}"),
    };
    let native = package.join(format!(
        "node_modules/@openai/{platform}/vendor/{triple}/bin/codex"
    ));
    if !native.is_file() {
        super::npm::install(
            &dir,
            &["--global"],
            &format!("@openai/codex@{}", version()),
            &[&launcher, &native],
        );
    }
    Codex {
        package,
        launcher,
        native,
    }
}

/// A scratch directory for one run of Codex, under the test cache (`CARGO_TARGET_TMPDIR`)
/// rather than `/tmp`, as a home is: Codex refuses to make its PATH aliases (in
/// `~/.codex/tmp/`) under a temporary directory.
pub fn scratch() -> tempfile::TempDir {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(tmp).unwrap_or_else(|e| unreachable!("{e}"));
    tempfile::tempdir_in(tmp).unwrap_or_else(|e| unreachable!("{e}"))
}

/// Clears what of the tests' own environment would change a run of Codex (or of the `bee`
/// that starts it): `CODEX_HOME` and `XDG_CONFIG_HOME` (its state is the test's home), and
/// `BEE_SOCKET`, so that bee runs in its own process and not through the service the VM
/// matrix names there, whose ceiling (`src/serve/everything.toml`) grants every address but
/// no host name, while the profile grants its API hosts by name.
pub fn own_environment(command: &mut std::process::Command) -> &mut std::process::Command {
    command
        .env_remove("CODEX_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("BEE_SOCKET")
}

/// Codex's state in `dir`: a workspace `ws/` (with `app.py`, its bug, and a `.git/hooks/`)
/// and a home `home/` whose `~/.codex/config.toml` sends Codex to the scripted server on
/// `port`; every other file and directory of Codex's that its profile protects is made too
/// (the Landlock engine covers what exists). Returns the workspace, the home and the
/// configuration's text.
pub fn state(dir: &Path, port: u16) -> (PathBuf, PathBuf, String) {
    let (ws, home) = (dir.join("ws"), dir.join("home"));
    let codex_home = home.join(".codex");
    for d in [
        ws.join(".git/hooks"),
        ws.join(".codex"),
        codex_home.join("rules"),
        codex_home.join("prompts"),
        codex_home.join("skills"),
    ] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| unreachable!("{e}"));
    }
    for f in [codex_home.join(".env"), codex_home.join("AGENTS.md")] {
        std::fs::write(f, "").unwrap_or_else(|e| unreachable!("{e}"));
    }
    std::fs::write(ws.join("app.py"), agent_run::BUGGY).unwrap_or_else(|e| unreachable!("{e}"));
    // A provider of Codex's own configuration (developers.openai.com/codex/config-advanced):
    // the Responses API at the scripted server, the key from OPENAI_API_KEY, no retries (each
    // request the server sees is one the model answered). No update check, no metrics
    // (ab.chatgpt.com), no plugins (their catalogue is synced from api.github.com): the
    // profile grants none of those hosts.
    let config = format!(
        "model = \"gpt-5\"\nmodel_provider = \"scripted\"\ncheck_for_update_on_startup = false\n\n\
         [analytics]\nenabled = false\n\n[features]\nplugins = false\n\n\
         [model_providers.scripted]\n\
         name = \"scripted\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
         env_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\n\
         stream_max_retries = 0\n"
    );
    std::fs::write(codex_home.join("config.toml"), &config).unwrap_or_else(|e| unreachable!("{e}"));
    (ws, home, config)
}

/// What the scripted model has Codex run, in order: the `secret`; a `notify` program added to
/// Codex's configuration `config_file` (run after every turn, outside any sandbox of Codex's)
/// and a git `hook` planted; the fix.
pub fn commands(secret: &Path, config_file: &Path, hook: &Path) -> Vec<String> {
    vec![
        format!("cat {}", secret.display()),
        format!(
            "echo 'notify = [\"/usr/bin/sh\", \"-c\", \"echo pwned\"]' >> {}; \
             echo 'echo planted' > {}",
            config_file.display(),
            hook.display()
        ),
        "sed -i 's/a - b/a + b/' app.py".to_owned(),
    ]
}

/// Codex's command line after its executable: `exec` of the task, its own sandbox and
/// approvals off (bee's scope is the sandbox).
pub const ARGS: [&str; 6] = [
    "exec",
    "--dangerously-bypass-approvals-and-sandbox",
    "--skip-git-repo-check",
    "--color",
    "never",
    agent_run::PROMPT,
];

/// The `function_call_output` items of a Responses request's input, in order: their output.
pub fn tool_outputs(req: &serde_json::Value) -> Vec<String> {
    req["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| match &i["output"] {
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        })
        .collect()
}

/// A Responses API stream (`text/event-stream`) whose one output item is `item`.
fn response(n: usize, item: &serde_json::Value) -> (&'static str, String) {
    let id = format!("resp_{n}");
    let usage = serde_json::json!({"input_tokens": 1, "output_tokens": 1, "total_tokens": 2});
    let events = [
        serde_json::json!({"type": "response.created", "response": {"id": id}}),
        serde_json::json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        serde_json::json!({"type": "response.completed",
            "response": {"id": id, "usage": usage}}),
    ];
    let text = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect();
    ("text/event-stream", text)
}

/// The scripted model: each `POST /v1/responses` has Codex's shell tool (`exec_command`) run
/// the next of `commands` (as many as the request carries tool outputs), then answers
/// [`ANSWER`]; anything else gets `{}`.
pub fn model(commands: Vec<String>) -> Script {
    Arc::new(move |request: &str, body: &str| {
        if !request.starts_with("POST /v1/responses") {
            return ("application/json", "{}".to_owned());
        }
        let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let n = tool_outputs(&req).len();
        let item = match commands.get(n) {
            Some(cmd) => serde_json::json!({
                "type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
                "name": "exec_command",
                "arguments": serde_json::json!({"cmd": cmd}).to_string(),
            }),
            None => serde_json::json!({
                "type": "message", "id": "msg_1", "role": "assistant",
                "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
            }),
        };
        response(n, &item)
    })
}

/// The files of one run of Codex the checks look at.
pub struct Files<'a> {
    /// The secret beside the workspace.
    pub secret: &'a Path,
    /// `~/.codex/config.toml`, and the text the test wrote to it.
    pub config: (&'a Path, &'a str),
    /// `.git/hooks/pre-commit` in the workspace, which must not come to exist.
    pub hook: &'a Path,
    /// The workspace and the home.
    pub ws: &'a Path,
    /// The home.
    pub home: &'a Path,
}

/// What both tests check once Codex has run the scripted model's [`commands`] (`commands` of
/// them) under `engine`:
/// bee's output `out` is the model's last answer; the requests `seen` are the prompt and one
/// per command, the secret in none; the kernel refused the secret, the configuration and the
/// hook, and Codex saw why; the third command ran; the configuration is as written, no hook
/// exists, Codex kept its session, the fix landed and bee's standard error `err` explained the
/// refused read.
pub fn ran_as_scripted(
    engine: Engine,
    files: &Files<'_>,
    (out, err): (&str, &str),
    seen: &[(String, String)],
    commands: usize,
) {
    assert_eq!(out.trim(), ANSWER, "{err}");
    let outputs = agent_run::turns(seen, |_| true, commands, tool_outputs);
    let (config_file, config) = files.config;
    agent_run::refused_by(engine, &outputs, files.secret, &[config_file, files.hook]);
    assert!(
        outputs[2].contains("Process exited with code 0"),
        "{}",
        outputs[2]
    );
    assert_eq!(
        std::fs::read_to_string(config_file).ok().as_deref(),
        Some(config),
        "the configuration is as the test wrote it"
    );
    assert!(!files.hook.exists(), "a hook was planted");
    // Its state stays writable: it kept the session.
    assert!(files.home.join(".codex/sessions").is_dir(), "{err}");
    agent_run::fixed_and_explained(files.ws, files.secret, err, &outputs);
}

/// The Responses request's tools: the name of each function tool (a hosted tool's type, as
/// `web_search`, where it has no name), and of each tool in a namespace (`{"type":
/// "namespace", "name": …, "tools": […]}`, as Codex offers an MCP server's tools) with the
/// namespace's name.
pub fn tools(req: &serde_json::Value) -> Vec<(Option<String>, String)> {
    let name = |t: &serde_json::Value| {
        t["name"]
            .as_str()
            .or_else(|| t["type"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let mut out = Vec::new();
    for t in req["tools"].as_array().into_iter().flatten() {
        match t["tools"].as_array() {
            Some(inner) => out.extend(inner.iter().map(|i| (Some(name(t)), name(i)))),
            None => out.push((None, name(t))),
        }
    }
    out
}

/// The scripted model of Codex with `bee mcp` as its tools: each `POST /v1/responses` has
/// Codex call bee's `read_file` on `secret` (in the namespace Codex offers the `bee` server's
/// tools in), then bee's `edit_file` to fix `app.py`, then answers [`ANSWER`]; a first or
/// second request that offers no bee tool is answered with the tools it offers (which fails
/// the test), and anything else gets `{}`.
pub fn mcp_model(secret: String) -> Script {
    Arc::new(move |request: &str, body: &str| {
        if !request.starts_with("POST /v1/responses") {
            return ("application/json", "{}".to_owned());
        }
        let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let offered = tools(&req);
        let bee = |tool: &str| {
            offered
                .iter()
                .find(|(ns, name)| ns.as_deref() == Some(MCP_NAMESPACE) && name == tool)
        };
        let n = tool_outputs(&req).len();
        let step = match n {
            0 => bee("read_file").map(|t| (t, serde_json::json!({"path": secret}))),
            1 => bee("edit_file").map(|t| {
                let edit = serde_json::json!({
                    "path": "app.py", "old_string": "a - b", "new_string": "a + b"
                });
                (t, edit)
            }),
            _ => None,
        };
        let item = match step {
            Some(((namespace, name), args)) => serde_json::json!({
                "type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
                "namespace": namespace, "name": name, "arguments": args.to_string(),
            }),
            None => {
                let text = if n >= 2 {
                    ANSWER.to_owned()
                } else {
                    format!("NO BEE TOOL {n}: {offered:?}")
                };
                serde_json::json!({
                    "type": "message", "id": "msg_1", "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                })
            }
        };
        response(n, &item)
    })
}

/// The namespace Codex offers the tools of its MCP server `bee` in.
pub const MCP_NAMESPACE: &str = "mcp__bee";

/// The tools of its own (namespace, name) Codex 0.171.0 offers with its shell tool off and
/// `bee` as its MCP server, against the scripted model: MCP resources (of its servers),
/// questions to the user, `view_image` (which reads an image file in Codex's own process),
/// sub-agents (which get the same tools), goals, and `web_search` (hosted: the model's
/// provider searches, not Codex). None runs a command or writes a file.
pub const CODEX_OWN: &[(Option<&str>, &str)] = &[
    (None, "list_mcp_resources"),
    (None, "list_mcp_resource_templates"),
    (None, "read_mcp_resource"),
    (None, "request_user_input"),
    (None, "view_image"),
    (Some("multi_agent_v1"), "close_agent"),
    (Some("multi_agent_v1"), "resume_agent"),
    (Some("multi_agent_v1"), "send_input"),
    (Some("multi_agent_v1"), "spawn_agent"),
    (Some("multi_agent_v1"), "wait_agent"),
    (None, "get_goal"),
    (None, "create_goal"),
    (None, "update_goal"),
    (None, "web_search"),
];

/// Codex with `bee mcp --engine ENGINE` as its tools for files and commands (its own shell
/// tool off; what it keeps of its own is [`CODEX_OWN`]), run on the host or guest as itself —
/// no scope of its own — against [`mcp_model`]: bee's `read_file`
/// of a secret beside the workspace is refused by the kernel and Codex hands bee's
/// explanation to the model; bee's `edit_file` lands the fix; Codex answers [`ANSWER`]; bee
/// recorded both calls and the denial. The tools' policy grants the workspace and
/// `/usr/lib` only.
pub fn with_bee_mcp(engine: Engine) {
    let codex = codex();
    let dir = scratch();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, agent_run::SECRET).unwrap_or_else(|e| unreachable!("{e}"));
    let seen = super::scripted::Seen::default();
    let port = super::scripted::server(seen.clone(), mcp_model(secret.display().to_string()));
    let (ws, home, config) = state(dir.path(), port);
    let (policy, records) = (dir.path().join("tools.toml"), dir.path().join("records"));
    let grants = format!(
        "version = 1\n[fs]\nread = [\"/usr/lib/**\"]\nwrite = [\"{}/**\"]\n",
        ws.display()
    );
    std::fs::write(&policy, grants).unwrap_or_else(|e| unreachable!("{e}"));
    // Codex's configuration (developers.openai.com/codex/mcp): bee's server, required (Codex
    // ends if it does not start) and given time (under TCG, `bee mcp` loading the BPF LSM's
    // programs itself takes longer than Codex's default 10 s); its own shell tool off.
    let server = serde_json::json!([
        "mcp",
        "--engine",
        engine.name(),
        "--policy",
        policy,
        "--workspace",
        ws,
        "--records-dir",
        records,
    ]);
    let config = format!(
        "{}\n[mcp_servers.bee]\ncommand = {:?}\nargs = {server}\nrequired = true\n\
         startup_timeout_sec = 600\ntool_timeout_sec = 600\n",
        config.replace("[features]\n", "[features]\nshell_tool = false\n"),
        env!("CARGO_BIN_EXE_bee")
    );
    std::fs::write(home.join(".codex/config.toml"), config).unwrap_or_else(|e| unreachable!("{e}"));
    let child = own_environment(&mut std::process::Command::new(&codex.native))
        .args(ARGS)
        .current_dir(&ws)
        .env("HOME", &home)
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err, seen) = agent_run::ended_under(
        child,
        std::time::Duration::from_secs(600),
        &seen,
        "POST /v1/responses",
    );
    assert_eq!(out.trim(), ANSWER, "{err}");
    let offers_bee = |r: &serde_json::Value| {
        tools(r)
            .iter()
            .any(|(ns, _)| ns.as_deref() == Some(MCP_NAMESPACE))
    };
    let outputs = agent_run::turns(&seen, offers_bee, 2, tool_outputs);
    // Every turn offers bee's tools, and of Codex's own only those it keeps with its shell
    // off: none that runs a command or writes a file.
    for (_, body) in &seen {
        let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let own: Vec<_> = tools(&req)
            .into_iter()
            .filter(|(ns, n)| {
                ns.as_deref() != Some(MCP_NAMESPACE)
                    && !CODEX_OWN.contains(&(ns.as_deref(), n.as_str()))
            })
            .collect();
        assert!(offers_bee(&req) && own.is_empty(), "{own:?}");
    }
    let refused = format!(
        "denied by policy: open {} for read: no fs.read grant covers it",
        secret.display()
    );
    assert!(
        outputs[0].contains(&refused) && outputs[0].contains(engine.read_refused()),
        "the refusal is explained to the model: {}",
        outputs[0]
    );
    assert!(
        outputs[1].contains("replaced 1 occurrence in `app.py`"),
        "{}",
        outputs[1]
    );
    agent_run::fixed_through_bee_mcp(&ws, &records, &outputs);
}
