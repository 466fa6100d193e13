//! `bee config show` end to end: origins on stdout, errors with positions, exit statuses.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::path::Path;
use std::process::{Command, Output};

fn bee_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bee"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir.join("home"))
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .output()
        .unwrap()
}

#[test]
fn show_prints_values_with_origins() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".bee")).unwrap();
    std::fs::write(
        root.join(".bee/config.toml"),
        "provider = \"p.toml\"\n[limits]\nturns = 7\n",
    )
    .unwrap();
    // Relative to the file that names it: .bee/p.toml.
    std::fs::write(
        root.join(".bee/p.toml"),
        "kind = \"anthropic\"\nmodel = \"m\"\n",
    )
    .unwrap();
    let out = bee_in(&root, &["config", "show", "--host", "--max-tokens", "5000"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = |key: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no {key} in\n{stdout}"))
            .to_owned()
    };
    assert!(
        line("provider").ends_with(&format!("# {}:1", root.join(".bee/config.toml").display()))
    );
    assert!(line("limits.turns").contains(" 7 "));
    assert!(line("limits.tokens").ends_with("# flag --max-tokens"));
    assert!(line("host").ends_with("# flag --host"));
    assert!(stdout.contains("NO kernel scope"));
    assert!(line("provider").contains(&root.join(".bee/p.toml").display().to_string()));
    assert!(
        stdout.contains(
            "relative paths in a configuration file resolve against that file's directory"
        ),
        "{stdout}"
    );

    let out = bee_in(&root, &["config", "show", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert!(v["enforcement"].as_str().unwrap().contains("refuse"));
}

#[test]
fn bad_files_exit_65_with_a_position_and_missing_ones_66() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".bee")).unwrap();
    std::fs::write(root.join(".bee/config.toml"), "policy = \"p\"\nturns = 3\n").unwrap();
    let out = bee_in(root, &["config", "show"]);
    assert_eq!(out.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("config.toml:2:1: turns: unknown field"),
        "{stderr}"
    );

    let out = bee_in(root, &["config", "show", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["errors"][0]["line"], 2);
    assert_eq!(v["errors"][0]["key"], "turns");

    std::fs::remove_file(root.join(".bee/config.toml")).unwrap();
    let out = bee_in(root, &["config", "show", "--config", "missing.toml"]);
    assert_eq!(out.status.code(), Some(66));
}

#[test]
fn flag_limits_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    for args in [["--max-turns", "0"], ["--max-cost-usd", "NaN"]] {
        let mut all = vec!["config", "show"];
        all.extend(args);
        let out = bee_in(dir.path(), &all);
        assert_eq!(out.status.code(), Some(64), "{args:?}");
    }
}

/// `bee config show` refuses what `bee repl` would refuse before its first model call, with
/// the same statuses: an unknown theme (65), a provider file that is missing (66) or invalid
/// (65).
#[test]
fn show_checks_the_theme_and_the_provider_file_as_a_session_does() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".bee")).unwrap();
    let config = root.join(".bee/config.toml");

    std::fs::write(&config, "[repl]\ntheme = \"drak\"\n").unwrap();
    let out = bee_in(&root, &["config", "show", "--host"]);
    assert_eq!(out.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("repl.theme: there is no theme `drak`"),
        "{stderr}"
    );
    let out = bee_in(&root, &["repl", "--host"]);
    assert_eq!(out.status.code(), Some(65), "bee repl agrees");

    // A relative provider resolves against .bee/, where there is none.
    std::fs::write(&config, "provider = \"providers/replay.toml\"\n").unwrap();
    let out = bee_in(&root, &["config", "show", "--host"]);
    assert_eq!(out.status.code(), Some(66));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = root.join(".bee/providers/replay.toml");
    assert!(
        stderr.contains(&format!("cannot read provider file {}", expected.display())),
        "{stderr}"
    );
    // Nor is there under the project, so no hint: the path meant is unknown.
    assert!(!stderr.contains("help:"), "{stderr}");
    let out = bee_in(&root, &["repl", "--host"]);
    assert_eq!(out.status.code(), Some(66), "bee repl agrees");
    // With the project's providers/replay.toml there, both say how to name it from .bee/.
    std::fs::create_dir_all(root.join("providers")).unwrap();
    std::fs::write(
        root.join("providers/replay.toml"),
        "kind = \"anthropic\"\nmodel = \"m\"\n",
    )
    .unwrap();
    let hint = "write `provider = \"../providers/replay.toml\"`";
    let out = bee_in(&root, &["config", "show", "--host"]);
    assert_eq!(out.status.code(), Some(66));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is relative to that file's directory"),
        "{stderr}"
    );
    assert!(stderr.contains(hint), "{stderr}");
    let out = bee_in(&root, &["repl", "--host"]);
    assert_eq!(out.status.code(), Some(66));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(hint), "bee repl too: {stderr}");

    std::fs::create_dir_all(root.join(".bee/providers")).unwrap();
    std::fs::write(&expected, "kind = \"replya\"\nfile = \"t.jsonl\"\n").unwrap();
    let out = bee_in(&root, &["config", "show", "--host"]);
    assert_eq!(out.status.code(), Some(65));
    // The diagnostic as the terminal shows it, wrapped: its words joined again.
    let stderr = String::from_utf8_lossy(&out.stderr)
        .replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(stderr.contains("unknown provider kind"), "{stderr}");
    assert!(stderr.contains("did you mean \"replay\"?"), "{stderr}");
    let out = bee_in(&root, &["config", "show", "--host", "--json"]);
    assert_eq!(out.status.code(), Some(65));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["errors"][0]["key"], "kind");
    let out = bee_in(&root, &["repl", "--host"]);
    assert_eq!(out.status.code(), Some(65), "bee repl agrees");
}

#[test]
fn mcp_servers_show_with_origins_and_bad_tables_name_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let file = root.join("bee.toml");
    std::fs::write(
        &file,
        "[mcp.servers.fs]\ncommand = \"npx\"\nargs = [\"server\", \".\"]\n\
         policy = \"fs.toml\"\nenv = { TOKEN = \"x\" }\n",
    )
    .unwrap();
    let out = bee_in(&root, &["config", "show", "--config", "bee.toml"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let line = |key: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no {key} in\n{stdout}"))
            .to_owned()
    };
    assert!(line("mcp.servers.fs.command").contains("npx server ."));
    assert!(line("mcp.servers.fs.command").ends_with(&format!("# {}:2", file.display())));
    // Relative to the file that names it.
    assert!(line("mcp.servers.fs.policy").contains(&root.join("fs.toml").display().to_string()));
    // Names only: a variable's value may be a secret.
    let env = line("mcp.servers.fs.env");
    let value: Vec<&str> = env.split('#').next().unwrap().split_whitespace().collect();
    assert_eq!(value, ["mcp.servers.fs.env", "TOKEN"], "{env}");
    assert!(line("mcp.servers.fs.timeout_seconds").contains("120 (start-up 30)"));

    std::fs::write(
        &file,
        "[mcp.servers.\"bad__name\"]\ncommand = \"x\"\npolicy = \"p.toml\"\n\
         [mcp.servers.nopolicy]\ncommand = \"x\"\n\
         [mcp.servers.slow]\ncommand = \"x\"\npolicy = \"p.toml\"\ntimeout_seconds = 0\n\
         [mcp.servers.typo]\ncommand = \"x\"\npolicy = \"p.toml\"\nargv = []\n",
    )
    .unwrap();
    let out = bee_in(&root, &["config", "show", "--config", "bee.toml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{stderr}");
    assert!(
        stderr.contains("mcp.servers.typo.argv: unknown field"),
        "{stderr}"
    );
    std::fs::write(
        &file,
        "[mcp.servers.\"bad__name\"]\ncommand = \"x\"\npolicy = \"p.toml\"\n\
         [mcp.servers.nopolicy]\ncommand = \"x\"\n\
         [mcp.servers.slow]\ncommand = \"x\"\npolicy = \"p.toml\"\ntimeout_seconds = 0\n\
         [mcp.servers.env]\ncommand = \"x\"\npolicy = \"p.toml\"\nenv = { \"A=B\" = \"1\" }\n\
         [mcp.servers.nul]\ncommand = \"x\\u0000y\"\npolicy = \"p.toml\"\n",
    )
    .unwrap();
    let out = bee_in(&root, &["config", "show", "--config", "bee.toml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{stderr}");
    // miette wraps its lines: compare words.
    let flat = stderr
        .replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for said in [
        "mcp.servers.bad__name",
        "cannot name a server",
        "mcp.servers.nopolicy.policy",
        "a server needs a policy",
        "mcp.servers.slow.timeout_seconds",
        "must be at least 1",
        "mcp.servers.env.env",
        "`A=B` cannot be set",
        "mcp.servers.nul.command",
        "the command holds a NUL byte",
    ] {
        assert!(flat.contains(said), "{said}: {stderr}");
    }
}
