//! The command line under the Landlock engine, on this host (no VM): where the kernel lists
//! `bpf` yet refuses LSM programs, `auto` must take the Landlock engine, say so, enforce, and
//! refuse what it cannot enforce exactly. Needs root and Landlock; fails, never skips, without
//! them (feature `landlock-tests`; `cargo xtask test` turns it on).

mod support;

use support::{bee, bee_in, code, stderr, stdout};

/// The loader and libraries, and a few programs; `READ` and `WRITE` are filled in.
const POLICY: &str = r#"version = 1
[fs]
read = ["/usr/lib/**", "/etc/ld.so.cache", READ]
write = ["/dev/null", WRITE]
[exec]
allow = ["/usr/lib/x86_64-linux-gnu/**", "/usr/bin/cat", "/usr/bin/dash"]
"#;

fn policy(dir: &std::path::Path, read: &str, write: &str) -> String {
    let path = dir.join("p.toml");
    let text = POLICY
        .replace("READ", &format!("{read:?}"))
        .replace("WRITE", &format!("{write:?}"));
    std::fs::write(&path, text).unwrap_or_else(|e| unreachable!("{e}"));
    path.display().to_string()
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"))
}

#[test]
fn check_takes_the_landlock_engine_where_the_bpf_lsm_cannot_run() {
    let o = bee(&["check"]);
    let out = stdout(&o);
    assert_eq!(code(&o), 0, "{out}{}", stderr(&o));
    assert!(out.starts_with("engine: landlock (auto)\n"), "{out}");
    assert!(out.contains("pass landlock Landlock ABI "), "{out}");
    // This host's kernel (ABI 7, audit built in) reports denials; bee runs as root.
    assert!(out.contains("pass reports the kernel's audit is "), "{out}");
    assert!(out.contains("FAIL lsm-probe"), "{out}");
    let o = bee(&["check", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    assert_eq!(
        (v["supported"].clone(), v["engine"].clone()),
        (true.into(), "landlock".into()),
        "{v}"
    );
    assert_eq!(v["bpf_lsm"]["supported"], false, "{v}");
    assert!(v["landlock"]["abi"].as_u64().is_some_and(|a| a >= 1), "{v}");
    assert_eq!(v["landlock"]["reports"]["denials"], true, "{v}");
    // Asked for the BPF LSM alone, it fails as before.
    assert_eq!(code(&bee(&["check", "--engine", "bpf-lsm"])), 65);
}

#[test]
fn exec_enforces_through_landlock_and_says_so() {
    let dir = scratch();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::write(ws.join("notes.txt"), "hello\n").unwrap_or_else(|e| unreachable!("{e}"));
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "top secret\n").unwrap_or_else(|e| unreachable!("{e}"));
    let p = policy(
        dir.path(),
        &format!("{}/**", ws.display()),
        &format!("{}/**", ws.display()),
    );
    let script = format!(
        "cat {ws}/notes.txt; echo made > {ws}/out.txt; cat {secret}; echo leaked > {dir}/leak",
        ws = ws.display(),
        secret = secret.display(),
        dir = dir.path().display()
    );
    let o = bee_in(
        &ws,
        &["exec", "--policy", &p, "--", "/usr/bin/dash", "-c", &script],
    );
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(
        err.starts_with("bee: engine: landlock (the BPF LSM cannot enforce here: "),
        "{err}"
    );
    assert_eq!(out, "hello\n", "{err}");
    assert_ne!(code(&o), 0, "{err}");
    assert!(err.contains("secret: Permission denied"), "{err}");
    // The kernel's own record of the refusal, explained as the BPF engine explains it.
    assert!(
        err.contains(&format!(
            "bee: denied: open {} for read: no fs.read grant covers it",
            secret.display()
        )),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).ok().as_deref(),
        Some("made\n")
    );
    assert!(!dir.path().join("leak").exists(), "{err}");
}

#[test]
fn a_policy_landlock_cannot_enforce_is_refused_with_its_rules() {
    let dir = scratch();
    let p = dir.path().join("carve.toml");
    std::fs::write(
        &p,
        "version = 1\n[fs]\nread = [\"./**\"]\ndeny = [\"./**/*.key\"]\n[exec]\nallow = [\"/usr/bin/true\"]\n",
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let p = p.display().to_string();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let o = bee_in(
        dir.path(),
        &["exec", "--policy", &p, "--", "/bin/sh", "-c", &script],
    );
    let err = stderr(&o);
    assert_eq!(code(&o), 69, "{err}");
    assert!(
        err.starts_with("bee: this kernel cannot enforce the policy; `/bin/sh` was not run"),
        "{err}"
    );
    assert!(
        err.contains("bee: the Landlock engine cannot enforce "),
        "{err}"
    );
    assert!(
        err.contains("fs.deny[0] `./**/*.key` (line 4): it cuts into `./**`"),
        "{err}"
    );
    assert!(!marker.exists());
    // The same with the engine named, and from `bee validate`.
    let o = bee_in(
        dir.path(),
        &[
            "exec", "--engine", "landlock", "--policy", &p, "--", "/bin/sh", "-c", &script,
        ],
    );
    assert_eq!(code(&o), 69, "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("bee: the Landlock engine cannot enforce "),
        "{}",
        stderr(&o)
    );
    let o = bee_in(
        dir.path(),
        &["validate", "--policy", &p, "--engine", "landlock"],
    );
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("fs.deny[0] `./**/*.key` (line 4)"),
        "{}",
        stderr(&o)
    );
    let o = bee_in(
        dir.path(),
        &["validate", "--policy", &p, "--engine", "landlock", "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    assert_eq!(v["ok"], false, "{v}");
    assert!(!marker.exists());
}

#[test]
fn validate_names_the_engines_verdict_and_each_narrowing() {
    let dir = scratch();
    let p = policy(dir.path(), "/usr", "/tmp/bee-landlock-cli.lock");
    let o = bee_in(dir.path(), &["validate", "--policy", &p]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(err.contains("landlock engine: enforces it (ABI "), "{err}");
    assert!(err.contains("more strictly for 2 rules"), "{err}");
    assert!(
        err.contains("fs.read[2] `/usr` (line 3): a directory is not listed"),
        "{err}"
    );
    assert!(
        err.contains("fs.write[1] `/tmp/bee-landlock-cli.lock` (line 4): the file may be written"),
        "{err}"
    );
    let o = bee_in(dir.path(), &["validate", "--policy", &p, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    assert_eq!(v["landlock"]["enforceable"], true, "{v}");
    assert_eq!(
        v["landlock"]["narrowings"].as_array().map(Vec::len),
        Some(2),
        "{v}"
    );
}

#[test]
fn learn_mode_is_refused_under_the_landlock_engine() {
    let dir = scratch();
    let p = policy(dir.path(), "/usr/share/**", "/tmp/**");
    let o = bee_in(
        dir.path(),
        &[
            "exec",
            "--policy",
            &p,
            "--learn",
            "out.toml",
            "--",
            "/usr/bin/cat",
            "/etc/hostname",
        ],
    );
    let err = stderr(&o);
    assert_eq!(code(&o), 69, "{err}");
    assert!(err.contains("learn mode needs the BPF LSM"), "{err}");
    assert!(!dir.path().join("out.toml").exists());
}
