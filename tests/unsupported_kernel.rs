//! The fail-closed smoke test: on a kernel that runs BPF LSM programs but lacks pieces bee's
//! programs need (Debian's Linux 5.10 lacks the `bpf_loop` helper and the `userns_create` LSM
//! hook), `bee check` names each missing piece and the lowest kernel that has them all and
//! exits 65, and `bee exec` and `bee run` exit 69 without starting a command or an episode,
//! leaving no scope cgroup and no pin behind.
//!
//! Built only with `--features kernel-tests` and run by the VM matrix on the kernels it marks
//! fail-closed (`cargo xtask vm test --kernel 5.10`, `cargo xtask test`). On a kernel that can
//! enforce these tests fail: they prove a refusal, and there is nothing to refuse there.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions fail the test the same way"
)]

mod support;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use support::{Fixture, bee_in, code, stderr, stdout};

/// Where scope cgroups and pins would appear if anything had started.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";
const PIN_ROOT: &str = "/sys/fs/bpf";

/// Every cgroup and bpffs entry, recursively: a refused command must add none.
fn cgroups_and_pins() -> BTreeSet<String> {
    fn walk(dir: &Path, dirs_only: bool, found: &mut BTreeSet<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                found.insert(p.display().to_string());
                walk(&p, dirs_only, found);
            } else if !dirs_only {
                found.insert(p.display().to_string());
            }
        }
    }
    let mut found = BTreeSet::new();
    walk(Path::new(CGROUP_ROOT), true, &mut found);
    walk(Path::new(PIN_ROOT), false, &mut found);
    found
}

/// The release and `major.minor` of the running kernel.
fn running_kernel() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn check_names_the_missing_pieces_and_the_lowest_kernel_and_exits_65() {
    let f = Fixture::new();
    let o = bee_in(&f.root, &["check"]);
    let out = stdout(&o);
    println!("{out}");
    assert_eq!(code(&o), 65, "{out}{}", stderr(&o));
    let release = running_kernel();
    assert!(
        out.contains(&format!(
            "FAIL kernel-features kernel {release} lacks what bee's programs need: "
        )),
        "{out}"
    );
    for piece in [
        "the bpf_task_storage_get helper (Linux 5.11)",
        "BPF_MAP_TYPE_TASK_STORAGE maps (Linux 5.11)",
        "the bpf_loop helper (Linux 5.17)",
        "the userns_create LSM hook (Linux 6.1)",
    ] {
        assert!(out.contains(piece), "no {piece:?} in\n{out}");
    }
    assert!(
        out.contains("the lowest kernel that has it all is Linux 6.1"),
        "{out}"
    );
    assert!(out.contains("fix: boot Linux 6.1 or newer"), "{out}");
    assert!(
        out.trim_end()
            .ends_with("BPF LSM enforcement NOT supported"),
        "{out}"
    );

    let o = bee_in(&f.root, &["check", "--json"]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["supported"], false, "{v}");
    assert_eq!(v["kernel"], release.as_str(), "{v}");
    assert_eq!(v["kernel_features"]["lowest_kernel"], "6.1", "{v}");
    let missing: Vec<(&str, &str)> = v["kernel_features"]["missing"]
        .as_array()
        .expect("a missing list")
        .iter()
        .map(|m| {
            (
                m["piece"].as_str().unwrap_or_default(),
                m["since"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        missing,
        [
            ("bpf_task_storage_get", "5.11"),
            ("bpf_get_current_task_btf", "5.11"),
            ("bpf_loop", "5.17"),
            ("BPF_MAP_TYPE_TASK_STORAGE", "5.11"),
            ("userns_create", "6.1")
        ],
        "{v}"
    );
    let gates = v["gates"].as_array().expect("gates");
    let failed: Vec<&str> = gates
        .iter()
        .filter(|g| g["passed"] == false)
        .filter_map(|g| g["gate"].as_str())
        .collect();
    // BPF LSM itself works here: the trivial probe program loads. Only the pieces bee's
    // programs use are missing, and so the verifier refuses bee's programs.
    assert_eq!(failed, ["kernel-features", "programs"], "{v}");
    let programs = gates
        .iter()
        .find(|g| g["gate"] == "programs")
        .expect("programs gate");
    let reason = programs["reason"].as_str().unwrap_or_default();
    // The first thing 5.10 cannot do is create a task storage map (the path, segment and
    // event buffers; which one comes first depends on the loader).
    assert!(
        reason.starts_with("bee's programs cannot load here: ")
            && ["bee_pathbuf", "bee_segbuf", "bee_evbuf"]
                .iter()
                .any(|m| reason.contains(&format!("failed to create map `{m}`"))),
        "{reason}"
    );
}

#[test]
fn exec_exits_69_and_never_runs_the_command() {
    let f = Fixture::new();
    let before = cgroups_and_pins();
    let marker = f.workspace.join("marker");
    let audit = f.root.join("audit.jsonl");
    let o = bee_in(
        &f.root,
        &[
            "exec",
            "--policy",
            &f.policy.display().to_string(),
            "--audit",
            &audit.display().to_string(),
            "--",
            "/bin/busybox",
            "touch",
            &marker.display().to_string(),
        ],
    );
    let err = stderr(&o);
    println!("{err}");
    assert_eq!(code(&o), 69, "{err}");
    assert!(err.contains("`/bin/busybox` was not run"), "{err}");
    assert!(err.contains("kernel-features failed: "), "{err}");
    assert!(err.contains("the bpf_loop helper (Linux 5.17)"), "{err}");
    assert!(err.contains("fix: boot Linux 6.1 or newer"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Give a stray child a moment to prove itself; there must be none.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!marker.exists(), "the command ran unconfined");
    assert!(!audit.exists(), "an audit log was started");
    assert_eq!(cgroups_and_pins(), before, "a scope or pin was left behind");
}

#[test]
fn run_exits_69_before_any_episode() {
    let f = Fixture::new();
    let before = cgroups_and_pins();
    let recording = serde_json::json!({"text": "Writing.", "tool_calls": [
        {"id": "c1", "name": "write_file", "arguments": {"path": "summary.txt", "content": "x\n"}}]});
    fs::write(
        f.root.join("recording.jsonl"),
        format!("{recording}\n{}\n", serde_json::json!({"text": "Done."})),
    )
    .unwrap();
    fs::write(
        f.root.join("provider.toml"),
        "kind = \"replay\"\nfile = \"recording.jsonl\"\nmodel = \"kernel-test\"\n",
    )
    .unwrap();
    fs::write(
        f.root.join("scenario.toml"),
        format!(
            "name = \"refused\"\nprompt = \"Write a summary.\"\nworkspace = \"{}\"\n\
             workspace_mode = \"in-place\"\npolicy = \"policy.toml\"\n\
             [success_check]\ncommand = \"test -f summary.txt\"\n",
            f.workspace.display()
        ),
    )
    .unwrap();
    let records = f.root.join("records");
    let o = bee_in(
        &f.root,
        &[
            "run",
            "--scenario",
            "scenario.toml",
            "--provider",
            "provider.toml",
            "--records",
            &records.display().to_string(),
        ],
    );
    let err = stderr(&o);
    println!("{err}");
    assert_eq!(code(&o), 69, "{}{err}", stdout(&o));
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("bee run: ")
            && first.ends_with("; no episode was started, no model was called"),
        "{err}"
    );
    assert!(
        err.contains("the userns_create LSM hook (Linux 6.1)"),
        "{err}"
    );
    assert!(err.contains("fix: boot Linux 6.1 or newer"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!records.exists(), "an episode was recorded");
    assert!(!f.workspace.join("summary.txt").exists(), "a tool call ran");
    assert_eq!(cgroups_and_pins(), before, "a scope or pin was left behind");
}
