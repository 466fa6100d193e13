//! The `bee run` executable: refusals happen before any model call, with the documented
//! statuses. (This host's kernel lists `bpf` yet refuses LSM programs, so a well-formed run
//! that asks for the BPF LSM stops at 69; `tests/run_episodes.rs` covers the runs themselves
//! with a scripted sandbox, and `tests/kernel_caps.rs` the 77 of missing privileges.)

mod support;

use std::path::Path;

use support::{bee_in, stderr};

fn demo(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/demo")
        .join(file)
        .display()
        .to_string()
}

/// The demo asking for the BPF LSM, which this kernel cannot run (`auto` would take the
/// Landlock engine, which enforces the demo's policy: `cargo xtask demo` runs it so).
#[test]
fn the_demo_without_enforcement_exits_69_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let o = bee_in(
        dir.path(),
        &[
            "run",
            "--engine",
            "bpf-lsm",
            "--scenario",
            &demo("scenario.toml"),
            "--provider",
            &demo("provider.toml"),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(69), "{err}");
    assert!(
        err.starts_with(
            "bee run: this kernel cannot enforce the policy; no episode was started, no model \
             was called\n"
        ),
        "{err}"
    );
    // Every failed gate with its fix; here the probe's EPERM, though root holds every
    // capability (so this is the kernel's refusal, not a missing privilege).
    assert!(err.contains("bee run: lsm-probe failed: "), "{err}");
    assert!(err.contains("Operation not permitted"), "{err}");
    assert!(err.contains("         fix: "), "{err}");
    assert!(!err.contains("capabilities failed"), "{err}");
    // And what to do instead: the demo in a VM, or host mode with the host-mode scenario.
    let instead = err
        .lines()
        .find(|l| l.starts_with("bee run: instead: "))
        .unwrap_or_else(|| unreachable!("no `instead` line in {err}"));
    assert!(instead.contains("`cargo xtask demo`"), "{instead}");
    assert!(instead.contains("--host"), "{instead}");
    assert!(
        instead.contains("examples/demo/host-scenario.toml"),
        "{instead}"
    );
    assert!(!dir.path().join(".bee/records").exists());
}

/// The command the 69 refusal suggests runs: the demo's crate fixed in host mode, said out
/// loud, recorded as `host`.
#[test]
fn the_host_mode_demo_runs_and_says_its_tools_are_unconfined() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    // The episode runs `cargo test`, so HOME stays (rustup finds its toolchains there); the
    // user configuration is kept out by XDG_CONFIG_HOME instead.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_bee"))
        .args([
            "run",
            "--host",
            "--scenario",
            &demo("host-scenario.toml"),
            "--provider",
            &demo("host-provider.toml"),
            "--records-dir",
            records.to_str().unwrap(),
        ])
        .current_dir(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("xdg"))
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("NO kernel scope"), "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("enforcement=host"), "{out}");
    assert!(out.contains("1 of 1 episode(s) passed"), "{out}");
    // The crate's own copy was edited; the example stays as shipped.
    let lib = std::fs::read_to_string(demo("crate/src/lib.rs")).unwrap();
    assert!(lib.contains("(4, \"VI\")"));
}

#[test]
fn host_and_a_policy_together_exit_64() {
    let dir = tempfile::tempdir().unwrap();
    let o = bee_in(
        dir.path(),
        &[
            "run",
            "--scenario",
            &demo("scenario.toml"),
            "--provider",
            &demo("provider.toml"),
            "--host",
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(64), "{err}");
    // --host never drops the scenario's policy, and says what to run instead.
    assert!(err.contains("never drops a scenario's policy"), "{err}");
    assert!(err.contains("examples/demo/host-scenario.toml"), "{err}");
    assert!(err.contains("`cargo xtask demo`"), "{err}");
}

#[test]
fn missing_arguments_and_files_exit_64_and_66() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(bee_in(dir.path(), &["run"]).status.code(), Some(64));
    assert_eq!(
        bee_in(
            dir.path(),
            &["run", "--scenario", "s.toml", "--concurrency", "0"]
        )
        .status
        .code(),
        Some(64)
    );
    let o = bee_in(
        dir.path(),
        &[
            "run",
            "--scenario",
            "missing.toml",
            "--provider",
            &demo("provider.toml"),
        ],
    );
    assert_eq!(o.status.code(), Some(66), "{}", stderr(&o));
}

#[test]
fn help_lists_the_run_flags() {
    let dir = tempfile::tempdir().unwrap();
    let o = bee_in(dir.path(), &["run", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--scenario",
        "--provider",
        "--policy",
        "--host",
        "--concurrency",
        "--json",
        "--config",
        "--records",
        "--max-turns",
        "--max-cost-usd",
    ] {
        assert!(help.contains(flag), "{flag} missing from\n{help}");
    }
}

/// SIGTERM while a subagent's command runs (host mode: the kernel matrix sends Ctrl-C to the
/// enforced run, `tests/kernel_agents.rs`; both raise the same interrupt): bee stops in order,
/// every transcript ends `interrupted`, exit 130, and the command is gone.
#[test]
fn sigterm_stops_a_run_and_its_subagents_in_order() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("ws")).unwrap();
    std::fs::create_dir_all(p.join(".bee/agents")).unwrap();
    let marker = "sleep 603";
    let write = |name: &str, body: &str| std::fs::write(p.join(name), body).unwrap();
    write(
        "parent.jsonl",
        r#"{"tool_calls": [{"id": "c1", "name": "agent", "arguments": {"role": "sleeper", "task": "wait"}}]}"#,
    );
    write(
        "sleeper.jsonl",
        &format!(
            r#"{{"tool_calls": [{{"id": "s1", "name": "shell", "arguments": {{"command": "{marker}"}}}}]}}"#
        ),
    );
    for who in ["parent", "sleeper"] {
        write(
            &format!("{who}.toml"),
            &format!("kind = \"replay\"\nfile = \"{who}.jsonl\"\nmodel = \"m\"\n"),
        );
    }
    write("ro.toml", "version = 1\n[fs]\nread = [\"./**\"]\n");
    write(
        ".bee/agents/sleeper.toml",
        "description = \"Waits.\"\npolicy = \"../../ro.toml\"\ntools = [\"shell\"]\nprovider = \"../../sleeper.toml\"\n",
    );
    write(
        "scenario.toml",
        "name = \"term\"\nprompt = \"go\"\nworkspace = \"ws\"\nworkspace_mode = \"in-place\"\n",
    );
    let running = || !support::processes_with(marker).is_empty();
    let child = Command::new(support::bee_exe())
        .args([
            "run",
            "--scenario",
            "scenario.toml",
            "--provider",
            "parent.toml",
            "--host",
        ])
        .current_dir(p)
        .env("HOME", p)
        .env_remove("XDG_CONFIG_HOME")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !running() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid with a standard signal.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(!running(), "the subagent's command outlived bee");
    let run = std::fs::read_dir(p.join(".bee/records"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|d| d.is_dir())
        .unwrap();
    for session in ["term", "term.sleeper-1"] {
        let t = std::fs::read_to_string(run.join(format!("{session}.jsonl"))).unwrap();
        let last = t.lines().last().unwrap();
        assert!(
            last.contains(r#""event":"episode_finished""#)
                && last.contains(r#""outcome":"interrupted""#),
            "{session}: {last}"
        );
    }
}
