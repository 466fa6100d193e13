//! A real coding agent under bee on this host: Claude Code, installed from npm at a pinned
//! version into a cache under the target directory, against a scripted Anthropic Messages
//! server on loopback. Under its shipped profile and the Landlock engine it answers one prompt
//! in print mode while its settings stay read-only; with `bee mcp` as its only tools (its own
//! off) it is refused a secret outside the workspace, with bee's explanation in the tool
//! result, and lands a fix. Needs root, Landlock, `npm` and the npm registry; fails, never
//! skips, without them (features `landlock-tests` and `mcp`).

mod support;

use std::path::Path;
use std::sync::Arc;

use support::claude::{self, ANSWER};
use support::scripted::{self, Seen};
use support::{stderr, stdout};

/// `bee exec` of Claude Code (`claude`) under its profile (made version 1, with `more_fs` in
/// its `[fs]` and `more_exec` runnable), in `dir`'s `ws/` with `dir`'s `home/`, its API at the
/// scripted server on `port`: up to `env`'s arguments; the caller adds its own variables,
/// then the executable and its arguments. (`bee exec` passes only a few variables — PATH,
/// HOME, LANG…: the others go through `env`, which the profile lets run.)
fn under_profile(
    claude: &claude::ClaudeCode,
    dir: &Path,
    port: u16,
    more_fs: &str,
    more_exec: &[&str],
) -> std::process::Command {
    let (ws, home) = (dir.join("ws"), dir.join("home"));
    let install = claude.prefix.display();
    let mut exec = vec![format!("{:?}", claude.exe.display().to_string())];
    exec.extend(more_exec.iter().map(|e| format!("{e:?}")));
    let rest = format!(
        "[fs]\nread = [\"{install}/**\"]\nwrite = [\"./**\"]\n{more_fs}[exec]\nallow = [{}]\n\
         [[net.allow]]\naddr = \"127.0.0.1\"\nports = {port}\nproto = \"tcp\"\n",
        exec.join(", ")
    );
    let policy = dir.join("claude.toml");
    let text = support::profile_as_version_1("agent-claude-code", &ws, &home, &rest);
    std::fs::write(&policy, text).unwrap_or_else(|e| unreachable!("{e}"));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_bee"));
    cmd.args(["exec", "--engine", "landlock", "--policy"])
        .arg(&policy)
        .args(["--", "/usr/bin/env"])
        .args(claude::environment(port))
        // Its temporary directory where the profile writes whether or not it exists yet: the
        // Landlock engine grants `/tmp/claude-*/**` only where it exists as the scope starts
        // (docs/profiles.md), and this test must not depend on an earlier run's.
        .arg(format!("CLAUDE_CODE_TMPDIR={}/.claude/tmp", home.display()));
    cmd
}

#[test]
fn claude_code_answers_under_its_profile_and_cannot_touch_its_settings() {
    let claude = claude::claude_code();
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let (ws, home, settings) = claude::state(dir.path());
    let seen: Seen = Arc::default();
    let port = scripted::server(Arc::clone(&seen), claude::answering());
    let o = under_profile(&claude, dir.path(), port, "", &[])
        .arg(&claude.exe)
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

#[test]
fn claude_code_with_bee_mcp_as_its_only_tools_is_refused_a_secret_and_lands_a_fix() {
    let claude = claude::claude_code();
    let s = support::Confined::new(&["/usr/bin/dash"]);
    let (ws, secret, policy) = (&s.ws, &s.secret, &s.policy);
    let home = ws.with_file_name("home");
    std::fs::create_dir_all(&home).unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::write(ws.join("app.py"), "def add(a, b):\n    return a - b\n")
        .unwrap_or_else(|e| unreachable!("{e}"));
    // The model: read the secret, fix the bug, then answer; every other request gets text.
    let secret_path = secret.display().to_string();
    let target = secret_path.clone();
    let script = claude::stepping("mcp__bee__read_file", move |n| match n {
        0 => Some(("mcp__bee__read_file", serde_json::json!({"path": target}))),
        1 => Some((
            "mcp__bee__edit_file",
            serde_json::json!({"path": "app.py", "old_string": "a - b", "new_string": "a + b"}),
        )),
        _ => None,
    });
    let seen: Seen = Arc::default();
    let port = scripted::server(Arc::clone(&seen), script);
    let records = s.records.clone();
    let config = serde_json::json!({"mcpServers": {"bee": {
        "command": env!("CARGO_BIN_EXE_bee"),
        "args": ["mcp", "--engine", "landlock", "--policy", policy, "--workspace", ws,
                 "--records-dir", records],
    }}});
    let config_file = ws.with_file_name("mcp.json");
    std::fs::write(&config_file, config.to_string()).unwrap_or_else(|e| unreachable!("{e}"));
    let o = std::process::Command::new(&claude.exe)
        .args([
            "-p",
            "Fix the bug in app.py.",
            "--tools",
            "",
            "--strict-mcp-config",
            "--mcp-config",
        ])
        .arg(&config_file)
        .args(["--allowedTools", "mcp__bee__read_file mcp__bee__edit_file"])
        .current_dir(ws)
        .env("HOME", &home)
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap_or_else(|e| unreachable!("{e}"));
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert_eq!(out.trim(), ANSWER, "{err}");
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let main: Vec<serde_json::Value> = seen
        .iter()
        .filter_map(|(_, b)| serde_json::from_str::<serde_json::Value>(b).ok())
        .filter(|r| claude::offers(r, "mcp__bee__read_file"))
        .collect();
    let last = main
        .last()
        .unwrap_or_else(|| unreachable!("no main-loop request: {seen:?}"));
    // Its own tools are off: every tool it offers its model is bee's.
    let names: Vec<&str> = last["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    // (Claude Code adds a placeholder of its own for tools it defers; it touches nothing.)
    let own = [
        "Bash",
        "Read",
        "Write",
        "Edit",
        "MultiEdit",
        "Glob",
        "Grep",
        "NotebookEdit",
        "WebFetch",
        "Task",
    ];
    assert!(names.iter().all(|n| !own.contains(n)), "{names:?}");
    assert!(
        names
            .iter()
            .filter(|n| !n.starts_with("mcp__bee__"))
            .all(|n| *n == "DeferredToolPlaceholder"),
        "{names:?}"
    );
    let results = claude::tool_results(last);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].contains(&format!(
            "denied by policy: open {secret_path} for read: no fs.read grant covers it"
        )),
        "the refusal is explained to the agent: {}",
        results[0]
    );
    assert!(
        !results.iter().any(|r| r.contains("top secret")),
        "{results:?}"
    );
    // The fix landed; bee recorded both calls and the denial.
    support::agent_run::fixed_through_bee_mcp(ws, &s.records, &results);
}

#[test]
fn claude_code_under_its_profile_is_refused_a_secret_a_hook_and_its_settings_and_lands_a_fix() {
    let claude = claude::claude_code();
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let (ws, home, _) = claude::state(dir.path());
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::write(ws.join("app.py"), "def add(a, b):\n    return a - b\n")
        .unwrap_or_else(|e| unreachable!("{e}"));
    let settings = home.join(".claude/settings.json");
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "TOP SECRET\n").unwrap_or_else(|e| unreachable!("{e}"));
    let hook = ws.join(".git/hooks/pre-commit");
    // What the scripted model has Claude Code's own Bash tool run, in order. The hook and the
    // settings are written by a script, as a model that knows Claude Code's own checks (which
    // refuse a redirect to them) would: the kernel is what stops it.
    let commands = [
        format!("cat {}", secret.display()),
        format!(
            "printf 'echo planted > {}\\necho hooked > {}\\n' > plant.sh",
            hook.display(),
            settings.display()
        ),
        "sh plant.sh".to_owned(),
        "sed -i 's/a - b/a + b/' app.py".to_owned(),
    ];
    let script = claude::bash(commands.to_vec());
    let seen: Seen = Arc::default();
    let port = scripted::server(Arc::clone(&seen), script);
    let o = under_profile(
        &claude,
        dir.path(),
        port,
        "protect = [\"./.git/**\"]\n",
        &[
            "/usr/bin/bash",
            "/usr/bin/cat",
            "/usr/bin/sed",
            "/usr/bin/dash",
        ],
    )
    .arg("SHELL=/usr/bin/bash")
    .arg(&claude.exe)
    .args(["-p", "Fix the bug in app.py.", "--allowedTools", "Bash"])
    .current_dir(&ws)
    .env("HOME", &home)
    .env_remove("XDG_CONFIG_HOME")
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap_or_else(|e| unreachable!("{e}"));
    let o = scripted::within(o, std::time::Duration::from_secs(120), &seen);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert_eq!(out.trim(), ANSWER, "{err}");
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let results = claude::tool_results(&claude::last_offering(&seen, "Bash"));
    assert_eq!(results.len(), commands.len(), "{results:?}");
    // The kernel refused the secret, the hook and the settings; Claude Code saw why.
    assert!(
        results[0].contains(&format!("cat: {}: Permission denied", secret.display())),
        "{}",
        results[0]
    );
    for path in [&hook, &settings] {
        let said = format!("{}: Read-only file system", path.display());
        let denied = format!("{}: Permission denied", path.display());
        assert!(
            results[2].contains(&said) || results[2].contains(&denied),
            "{}: {}",
            path.display(),
            results[2]
        );
    }
    assert!(
        !results.iter().any(|r| r.contains("TOP SECRET")),
        "{results:?}"
    );
    assert!(!hook.exists(), "a hook was planted");
    assert_eq!(
        std::fs::read_to_string(&settings).ok().as_deref(),
        Some("{}\n")
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).ok().as_deref(),
        Some("def add(a, b):\n    return a + b\n"),
        "the fix lands: {results:?}"
    );
}
