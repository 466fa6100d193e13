//! The `scan` tool under the kernel, for `landlock_scan` (natively, the Landlock engine) and
//! `kernel_scan` (the BPF LSM, in the VM matrix): a replayed episode runs the real Semgrep CLI
//! (Opengrep's upstream, from PyPI: [`super::semgrep_exe`]) in the episode's scope, pinned by
//! the policy, and records its results in the findings ledger. Then the episode tries to forge
//! the ledger with every tool it has, under a version 1 policy that writes the whole workspace
//! (which protects nothing by itself): each attempt fails and the ledger holds only what bee
//! wrote.

use std::path::{Path, PathBuf};

use super::agent_run::Engine;
use super::{
    bee_in, code, replay_scenario, semgrep_exe, stderr, stdout, tool_call, tool_result,
    transcript_text,
};

/// The fixture's rules and workspace (`tests/fixtures/findings/opengrep/`).
const RULES: &str = include_str!("../fixtures/findings/opengrep/rules/python.yaml");
const VIEWS: &str = include_str!("../fixtures/findings/opengrep/workspace/app/views.py");

/// What Semgrep reports on the fixture, by rule and line, sorted: the eval on line 21 has a
/// `nosemgrep` comment and is reported anyway (`--disable-nosem`); the constant eval on line
/// 10 is excluded by the rule itself.
pub fn semgrep_results() -> Vec<(String, u64)> {
    [
        ("python-eval-of-input", 6),
        ("python-eval-of-input", 21),
        ("python-sql-format", 15),
    ]
    .map(|(rule, line)| (rule.to_owned(), line))
    .to_vec()
}

fn ok<T, E: std::fmt::Debug>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| unreachable!("{e:?}"))
}

/// The Semgrep executable ([`semgrep_exe`]), and the Python installation its virtual
/// environment runs on (the directory above the interpreter's `bin/`).
fn semgrep() -> (PathBuf, PathBuf) {
    let semgrep = semgrep_exe();
    let venv = semgrep
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| unreachable!("{}", semgrep.display()));
    let python = ok(std::fs::canonicalize(venv.join("bin/python3")));
    let prefix = python
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| unreachable!("{}", python.display()))
        .to_owned();
    (semgrep, prefix)
}

/// What Semgrep needs, found by running it under the Landlock engine and reading the denials:
/// its virtual environment and the Python under it (whose libraries and extension modules are
/// mapped executable, so their trees are exec grants), `uname` and `git`, which it runs, and a
/// few files of the system it reads. The shell for the episode's `shell` calls: Debian's
/// `dash` on the host; in the VM's guests busybox (their `/bin/sh`), and the shared libraries
/// where `ldd` names them (`/lib/x86_64-linux-gnu`, `/lib64`), which the host has only as
/// links into `/usr`. Version 1: no built-in protected paths, so only bee's own state
/// directory is kept from the scope.
fn policy(engine: Engine, root: &Path, ws: &Path, semgrep: &Path, prefix: &Path) -> PathBuf {
    let venv = semgrep
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| unreachable!());
    let python = ok(std::fs::canonicalize(venv.join("bin/python3")));
    let (v, p, w) = (venv.display(), prefix.display(), ws.display());
    let text = format!(
        r#"version = 1
[fs]
read = ["/usr/lib/**", "/lib/**", "/lib64/**", "/etc/**", "/dev/urandom", "/usr/share/zoneinfo/**",
        "/sys/devices/system/cpu/**", "/sys/fs/cgroup/**", "{v}/**", "{p}/**",
        "{rules}/**", "{w}/**"]
write = ["/dev/null", "{w}/**"]
[exec]
allow = ["/usr/lib/x86_64-linux-gnu/**", {shell}, "/usr/bin/uname", "/usr/bin/git",
         "!{semgrep}", "{v}/bin/python3", "{v}/bin/pysemgrep", "{python}", "{p}/lib/**",
         "{v}/lib/**"]
"#,
        rules = root.join("rules").display(),
        semgrep = semgrep.display(),
        python = python.display(),
        shell = match engine {
            Engine::Landlock => r#""/usr/bin/dash""#,
            Engine::BpfLsm => r#""/bin/busybox", "/lib/x86_64-linux-gnu/**", "/lib64/**""#,
        },
    );
    let path = root.join("policy.toml");
    ok(std::fs::write(&path, text));
    path
}

/// Runs the episode under `engine` (`bee run` chooses it: natively the Landlock engine, in the
/// guests the BPF LSM, through the guest's `bee serve` where `BEE_SOCKET` names one) and checks
/// the scan's findings and that each forgery of the ledger failed: under the Landlock engine
/// on the read-only mount over bee's state directory (`EROFS`), under the BPF LSM by its
/// programs (`EPERM`).
pub fn runs_and_the_ledger_cannot_be_forged(engine: Engine) {
    let (semgrep, prefix) = semgrep();
    let t = ok(tempfile::tempdir());
    let root = ok(std::fs::canonicalize(t.path()));
    // The fixture is compiled in: the VM's guests have the test binary, not the repository.
    let put = |rel: &str, text: &str| {
        let path = root.join(rel);
        ok(std::fs::create_dir_all(path.parent().unwrap_or(&root)));
        ok(std::fs::write(path, text));
    };
    put("rules/python.yaml", RULES);
    // The workspace is bee's working directory, so the ledger (`.bee/findings/ledger.jsonl`
    // by default) lies inside the tree the policy writes.
    put("ws/app/views.py", VIEWS);
    let ws = root.join("ws");
    let policy = policy(engine, &root, &ws, &semgrep, &prefix);
    let ledger = ".bee/findings/ledger.jsonl";
    let forged =
        r#"{"kind":"verdict","finding":"forged","verdict":"false-positive","by":"forged"}"#;
    let calls = [
        tool_call("scan", "scan", &serde_json::json!({"scanner": "opengrep"})),
        tool_call(
            "append",
            "shell",
            &serde_json::json!({"command": format!("echo '{forged}' >> {ledger}")}),
        ),
        tool_call(
            "truncate",
            "shell",
            &serde_json::json!({"command": format!(": > {ledger}")}),
        ),
        tool_call(
            "write",
            "write_file",
            &serde_json::json!({"path": ledger, "content": format!("{forged}\n")}),
        ),
        tool_call(
            "replace",
            "shell",
            &serde_json::json!({"command": format!("echo '{forged}' > forged.jsonl && cat forged.jsonl > {ledger}")}),
        ),
        r#"{"text": "done"}"#.to_owned(),
    ];
    replay_scenario(&root, "ws", &policy.display().to_string(), &calls);
    let file = |name: &str, text: &str| ok(std::fs::write(root.join(name), text));
    file(
        "config.toml",
        &format!(
            "[security.scanners.opengrep]\npath = {:?}\nrules = {:?}\ntimeout_seconds = 300\n",
            semgrep.display().to_string(),
            root.join("rules").display().to_string()
        ),
    );
    let records = root.join("records");
    let arg = |p: PathBuf| p.display().to_string();
    let o = bee_in(
        &ws,
        &[
            "run",
            "--config",
            &arg(root.join("config.toml")),
            "--scenario",
            &arg(root.join("scenario.toml")),
            "--provider",
            &arg(root.join("provider.toml")),
            "--records-dir",
            &arg(records.clone()),
        ],
    );
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{}{err}", stdout(&o));
    let text = transcript_text(&records);
    let events: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(
        events[0]["policy"]["engine"],
        engine.name(),
        "{}",
        events[0]
    );
    let result = |id: &str| tool_result(&text, id);

    // The scan ran in the scope and recorded Semgrep's three results.
    let scan = result("scan");
    assert_eq!(scan["state"], "completed", "{scan}");
    let listed = bee_in(&ws, &["findings", "list", "--json"]);
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    let list: serde_json::Value = ok(serde_json::from_str(&stdout(&listed)));
    let findings = list["findings"]
        .as_array()
        .unwrap_or_else(|| unreachable!("{list}"));
    let mut got: Vec<(String, u64)> = findings
        .iter()
        .map(|f| {
            (
                f["identity"]["rule"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                f["latest"]["location"]["start_line"]
                    .as_u64()
                    .unwrap_or_default(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(got, semgrep_results(), "{list}");
    assert!(findings.iter().all(|f| f["state"] == "open"), "{list}");

    // Every forgery failed, and the ledger holds what bee wrote and nothing else.
    for id in ["append", "truncate", "replace"] {
        let r = result(id);
        let output = r["output"].as_str().unwrap_or_default();
        let why = match engine {
            Engine::Landlock => "Read-only file system",
            Engine::BpfLsm => "Operation not permitted",
        };
        assert!(output.contains(why), "{id}: {output}");
    }
    for id in ["append", "truncate", "write", "replace"] {
        assert_ne!(result(id)["state"], "completed", "{id}: {}", result(id));
    }
    let held = ok(std::fs::read_to_string(ws.join(ledger)));
    assert!(!held.contains("forged"), "{held}");
    assert_eq!(held.lines().count(), 3, "{held}");
    // The rest of the workspace is as writable as the policy says.
    assert!(ws.join("forged.jsonl").is_file());
}
