//! `bee check` and `bee exec` on this host, whose kernel lists `bpf` among its LSMs yet refuses
//! to load LSM programs: `check` must say so (65) and `exec` must refuse to run anything (69).
//! These tests assert that kernel: on a host that enforces they fail, by design, rather than
//! pass vacuously.

mod support;

use std::path::{Path, PathBuf};

use support::{bee, code, stderr, stdout};

/// A scratch directory of the test's own, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("bee-cli-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            unreachable!("{e}");
        }
        Self(dir)
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            unreachable!("{e}");
        }
        path.display().to_string()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const POLICY: &str = "version = 1\n[fs]\nread = [\"/usr/**\"]\n[exec]\nallow = [\"/usr/bin/*\"]\n";

#[test]
fn check_fails_closed_and_names_the_probe() {
    let o = bee(&["check", "--engine", "bpf-lsm"]);
    assert_eq!(code(&o), 65, "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("FAIL lsm-probe"), "{out}");
    assert!(out.contains("Operation not permitted"), "{out}");
    assert!(out.contains("fix: "), "{out}");
    assert!(
        out.contains("pass lsm-list"),
        "bpf is listed on this host: {out}"
    );
    assert!(
        out.trim_end()
            .ends_with("BPF LSM enforcement NOT supported")
    );
}

#[test]
fn check_json_has_every_gate() {
    let o = bee(&["check", "--json", "--engine", "bpf-lsm"]);
    assert_eq!(code(&o), 65);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    assert_eq!(v["supported"], false);
    let gates = v["gates"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = gates.iter().filter_map(|g| g["gate"].as_str()).collect();
    assert_eq!(
        names,
        [
            "btf",
            "kernel-features",
            "cgroup-v2",
            "capabilities",
            "lockdown",
            "lsm-list",
            "lsm-probe",
            "programs"
        ]
    );
    // The set depends on who runs the tests (uid 0 adds CAP_SETPCAP or, through sudo,
    // CAP_SETGID and CAP_SETUID), but always starts with these two.
    let required = v["capabilities"]["required"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(required[..2], ["CAP_BPF", "CAP_PERFMON"], "{v}");
    assert!(v["capabilities"]["missing"].is_array(), "{v}");
    let probe = &gates[6];
    assert_eq!(probe["passed"], false);
    assert!(probe["fix"].as_str().is_some_and(|f| !f.is_empty()));
    assert!(
        gates
            .iter()
            .filter(|g| g["passed"] == true)
            .all(|g| g["fix"].is_null())
    );
}

#[test]
fn exec_refuses_with_69_and_never_runs_the_command() {
    let s = Scratch::new("refuse");
    let policy = s.file("p.toml", POLICY);
    let marker = s.path("marker");
    let audit = s.path("audit.jsonl");
    let script = format!("touch {}", marker.display());
    let o = bee(&[
        "exec",
        "--engine",
        "bpf-lsm",
        "--policy",
        &policy,
        "--audit",
        &audit.display().to_string(),
        "--",
        "/bin/sh",
        "-c",
        &script,
    ]);
    assert_eq!(code(&o), 69, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("`/bin/sh` was not run"), "{err}");
    assert!(err.contains("lsm-probe"), "{err}");
    assert!(
        !marker.exists(),
        "the command ran although nothing can enforce"
    );
    // Give a stray child a moment to prove itself; there must be none.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!marker.exists());
}

#[test]
fn exec_usage_errors_exit_64() {
    let s = Scratch::new("usage");
    let policy = s.file("p.toml", POLICY);
    for args in [
        vec!["exec", "--policy", policy.as_str()],
        vec!["exec", "--", "true"],
        vec![
            "exec",
            "--policy",
            policy.as_str(),
            "--frobnicate",
            "--",
            "true",
        ],
        vec!["check", "extra"],
    ] {
        let o = bee(&args);
        assert_eq!(code(&o), 64, "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn exec_missing_policy_exits_66() {
    let s = Scratch::new("missing");
    let marker = s.path("marker");
    let missing = s.path("nope.toml").display().to_string();
    let script = format!("touch {}", marker.display());
    let o = bee(&["exec", "--policy", &missing, "--", "/bin/sh", "-c", &script]);
    assert_eq!(code(&o), 66, "{}", stderr(&o));
    assert!(stderr(&o).contains("nope.toml"));
    assert!(!marker.exists());
}

#[test]
fn exec_invalid_or_unenforceable_policy_exits_65() {
    let s = Scratch::new("invalid");
    let marker = s.path("marker");
    let script = format!("touch {}", marker.display());
    let bad = s.file("bad.toml", "version = 1\n[fs]\nread = [\"/a/../../b\"]\n");
    let o = bee(&["exec", "--policy", &bad, "--", "/bin/sh", "-c", &script]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("fs.read[0]"), "{}", stderr(&o));
    // A star segment longer than the kernel's glob buffer compiles, but cannot be planned.
    let long = format!("version = 1\n[fs]\nread = [\"/tmp/*{}\"]\n", "x".repeat(80));
    let unplannable = s.file("long.toml", &long);
    let o = bee(&[
        "exec",
        "--engine",
        "bpf-lsm",
        "--policy",
        &unplannable,
        "--",
        "/bin/sh",
        "-c",
        &script,
    ]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be enforced"), "{}", stderr(&o));
    assert!(!marker.exists());
}

#[test]
fn help_lists_check_and_exec() {
    let o = bee(&["--help"]);
    let out = stdout(&o);
    assert!(out.contains("check") && out.contains("exec"), "{out}");
    let o = bee(&["exec", "--help"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("--audit"));
    assert!(Path::new(env!("CARGO_BIN_EXE_bee")).exists());
}
