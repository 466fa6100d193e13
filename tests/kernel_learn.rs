//! Learn mode under a kernel that enforces (`bee exec --learn`): a denied open succeeds and
//! is reported as learned; what no policy can grant stays refused; and a real build run in
//! learn mode yields a policy that `bee validate` accepts, that passes the same build
//! enforced, and that refuses a secret the build never read. It also prints learn mode's
//! overhead on that build against enforced mode, measured in the same boot
//! (`kernel-learn-bench|` lines, docs/benchmarks.md).
//!
//! The guests have busybox, not cargo: the build is the closest real one they can run, a
//! shell build with busybox's tools (generate sources with sed, sort, archive with tar and
//! gzip, install a test script and run it, checksum the output).
//!
//! Built only with `--features kernel-tests` and run in the VM matrix
//! (`cargo xtask vm test -p bee --test kernel_learn --bin target/debug/bee`): on a host whose
//! kernel cannot run BPF LSM programs these tests fail, they never skip.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions fail the test the same way"
)]

mod support;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::{Fixture, code, text};

fn bee(args: &[impl AsRef<OsStr>], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bee"))
        .args(args)
        .current_dir(cwd)
        .env("HOME", "/root")
        .output()
        .expect("run bee")
}

/// A policy's text without its comment lines.
fn rules(policy: &str) -> String {
    policy
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

fn records(audit: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(audit)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_denied_open_succeeds_in_learn_mode_and_is_reported_as_learned() {
    let f = Fixture::new();
    let policy = f.policy.display().to_string();
    let secret = f.secret.display().to_string();
    let audit = f.root.join("audit.jsonl");
    let out = f.root.join("learned.toml");
    let o = bee(
        &[
            "exec",
            "--policy",
            &policy,
            "--audit",
            &audit.display().to_string(),
            "--learn",
            &out.display().to_string(),
            "--",
            "/bin/sh",
            "-c",
            &format!("cat {secret}; exit 7"),
        ],
        &f.root,
    );
    let err = text(&o.stderr);
    // The command's own status, and the read went through.
    assert_eq!(code(&o), 7, "{err}");
    assert_eq!(text(&o.stdout), "s3cret\n");
    // Loud: a banner before and after, and the learned access named.
    assert!(err.starts_with("bee: LEARN MODE: "), "{err}");
    assert!(err.contains("bee: LEARN MODE ended: "), "{err}");
    assert!(
        err.contains(&format!(
            "bee: learn: open {secret} for read: no fs.read grant covers it (allowed: learn mode)"
        )),
        "{err}"
    );
    // Every record of it is stamped.
    let rec = records(&audit)
        .into_iter()
        .find(|r| r["path"] == secret.as_str() && r["hook"] == "file_open")
        .expect("the secret's record");
    assert_eq!(rec["learn"], true, "{rec}");
    assert_eq!(rec["verdict"], "deny", "{rec}");
    assert!(rec.get("errno").is_none(), "{rec}");
    // The learned policy names the secret exactly, and compiles as is.
    // (bee ran in f.root, the base's directory: paths below it are written relative to it.)
    let learned = std::fs::read_to_string(&out).unwrap();
    assert!(learned.contains("\"./secret.txt\""), "{learned}");
    let o = bee(
        &["validate", "--policy", &out.display().to_string()],
        &f.root,
    );
    assert_eq!(
        code(&o),
        0,
        "{}{}\n{learned}",
        text(&o.stdout),
        text(&o.stderr)
    );
    // Enforced, the learned policy allows the read; the base still refuses it.
    let o = bee(
        &[
            "exec",
            "--policy",
            &out.display().to_string(),
            "--",
            "/bin/cat",
            &secret,
        ],
        &f.root,
    );
    assert_eq!(code(&o), 0, "{}\n{learned}", text(&o.stderr));
    let o = bee(
        &["exec", "--policy", &policy, "--", "/bin/cat", &secret],
        &f.root,
    );
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
}

#[test]
fn what_no_policy_can_grant_stays_refused_in_learn_mode() {
    let f = Fixture::new();
    let policy = f.policy.display().to_string();
    let audit = f.root.join("audit.jsonl");
    let out = f.root.join("learned.toml");
    let node = f.workspace.join("null2");
    // The guest's /init mounts binfmt_misc where systemd does (xtask/src/initramfs.rs).
    let register = Path::new("/proc/sys/fs/binfmt_misc/register");
    assert!(
        register.exists(),
        "binfmt_misc is not mounted in this guest"
    );
    let interpreter = Path::new("/proc/sys/fs/binfmt_misc/bee-learn");
    // Leaving the scope's cgroup through the root's cgroup.procs, signalling init (outside the
    // scope), creating a device node, and registering an interpreter for every program whose
    // name ends `.beex` on the whole host (the scope runs as root, and binfmt_misc's register
    // file is root's to write, mode 0200, no capability needed): each fails, and none is
    // learned.
    let script = format!(
        "echo $$ > /sys/fs/cgroup/cgroup.procs && echo ESCAPED; \
         kill -0 1 && echo SIGNALLED; \
         mknod {node} c 1 3 && echo DEVICE; \
         grep -q '^0::/$' /proc/self/cgroup && echo AT-ROOT; \
         echo ':bee-learn:E::beex::/bin/true:' > {register} && echo REGISTERED; \
         exit 0",
        node = node.display(),
        register = register.display()
    );
    let o = bee(
        &[
            "exec",
            "--policy",
            &policy,
            "--audit",
            &audit.display().to_string(),
            "--learn",
            &out.display().to_string(),
            "--",
            "/bin/sh",
            "-c",
            &script,
        ],
        &f.root,
    );
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(code(&o), 0, "{err}");
    for escape in ["ESCAPED", "SIGNALLED", "DEVICE", "AT-ROOT", "REGISTERED"] {
        assert!(!stdout.contains(escape), "{escape}: {stdout}\n{err}");
    }
    assert!(!node.exists());
    assert!(!interpreter.exists(), "an interpreter was registered");
    let recs = records(&audit);
    let find = |hook: &str| {
        recs.iter()
            .find(|r| r["hook"] == hook)
            .unwrap_or_else(|| panic!("no {hook} record: {recs:?}"))
    };
    for hook in ["file_open", "task_kill", "path_mknod"] {
        let r = find(hook);
        assert_eq!(r["verdict"], "deny", "{r}");
        assert!(r.get("learn").is_none(), "{hook} was learned: {r}");
        assert!(r["errno"].as_i64().is_some(), "{r}");
    }
    assert!(
        err.contains("bee: denied: open /sys/fs/cgroup/cgroup.procs for write"),
        "{err}"
    );
    let registration = recs
        .iter()
        .find(|r| r["hook"] == "file_open" && r["path"] == register.display().to_string())
        .unwrap_or_else(|| panic!("no record of the registration: {recs:?}"));
    assert_eq!(registration["verdict"], "deny", "{registration}");
    assert!(registration.get("learn").is_none(), "{registration}");
    // Nothing of it reaches the learned policy (its comments name the command).
    let learned = std::fs::read_to_string(&out).unwrap();
    let grants = rules(&learned);
    assert!(!grants.contains("cgroup.procs"), "{learned}");
    assert!(!grants.contains("null2"), "{learned}");
    assert!(!grants.contains("binfmt_misc"), "{learned}");
}

#[test]
fn an_episode_run_with_learn_records_learned_denials_and_writes_a_policy() {
    let f = Fixture::new();
    let secret = f.secret.display().to_string();
    let turns = [
        serde_json::json!({"text": "Copying the secret.", "tool_calls": [
            {"id": "c1", "name": "shell", "arguments": {"command": format!("cat {secret} > copy.txt")}}]}),
        serde_json::json!({"text": "Finished."}),
    ];
    let lines: Vec<String> = turns.iter().map(|t| t.to_string()).collect();
    std::fs::write(f.root.join("recording.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::write(
        f.root.join("provider.toml"),
        "kind = \"replay\"\nfile = \"recording.jsonl\"\nmodel = \"kernel-test\"\n",
    )
    .unwrap();
    std::fs::write(
        f.root.join("scenario.toml"),
        format!(
            "name = \"learn-episode\"\nprompt = \"Copy it.\"\nworkspace = \"{}\"\n\
             workspace_mode = \"in-place\"\npolicy = \"policy.toml\"\n\
             [success_check]\ncommand = \"grep -q s3cret copy.txt\"\n",
            f.workspace.display()
        ),
    )
    .unwrap();
    let records = f.root.join("records");
    let out = f.root.join("learned.toml");
    let o = bee(
        &[
            "run",
            "--scenario",
            "scenario.toml",
            "--provider",
            "provider.toml",
            "--records",
            &records.display().to_string(),
            "--learn",
            &out.display().to_string(),
        ],
        &f.root,
    );
    let err = text(&o.stderr);
    // The read went through (the success check found the copy), loudly.
    assert_eq!(code(&o), 0, "{}\n{err}", text(&o.stdout));
    assert!(
        err.contains("bee run: LEARN MODE") || err.contains("bee: LEARN MODE: "),
        "{err}"
    );
    assert!(err.contains("LEARN MODE ended: "), "{err}");
    let transcript = std::fs::read_dir(&records)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|r| r.path().is_dir())
        .flat_map(|r| std::fs::read_dir(r.path()).unwrap().filter_map(Result::ok))
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("a transcript");
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let denial = events
        .iter()
        .find(|e| {
            e["event"] == "denial"
                && e["explanation"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(&secret)
        })
        .expect("the secret's denial");
    assert_eq!(denial["learn"], true, "{denial}");
    let learned = std::fs::read_to_string(&out).unwrap();
    assert!(learned.contains(&format!("\"{secret}\"")), "{learned}");
    let o = bee(
        &["validate", "--policy", &out.display().to_string()],
        &f.workspace,
    );
    assert_eq!(
        code(&o),
        0,
        "{}{}\n{learned}",
        text(&o.stdout),
        text(&o.stderr)
    );
}

/// The build: sources generated from templates, sorted, archived and compressed, a test
/// script installed into the output and run, a checksum written.
const BUILD: &str = r#"set -e
mkdir -p out/gen out/bin
for f in src/*.in; do
  sed "s/@NAME@/bee/g" "$f" > "out/gen/$(basename "$f" .in).txt"
done
cat out/gen/*.txt | sort > out/all.txt
tar -cf out/bundle.tar -C out gen
gzip -f out/bundle.tar
printf '#!/bin/sh\ngrep -q "hello bee" "$1"\n' > out/bin/check
chmod +x out/bin/check
out/bin/check out/all.txt
md5sum out/all.txt > out/all.md5
echo built
"#;

/// Sources of the build checked (each is a `sed` run, the costly part under TCG).
const SOURCES: usize = 16;
/// Sources of the build measured.
const BENCH_SOURCES: usize = 40;

fn build_workspace(f: &Fixture, sources: usize) {
    let ws = &f.workspace;
    std::fs::create_dir_all(ws.join("src")).unwrap();
    for i in 0..sources {
        std::fs::write(
            ws.join("src").join(format!("m{i}.in")),
            format!("hello @NAME@ {i}\nline two of {i}\n"),
        )
        .unwrap();
    }
    std::fs::write(ws.join("build.sh"), BUILD).unwrap();
}

fn build(policy: &str, learn: Option<&Path>, f: &Fixture) -> (Output, Duration) {
    let mut args: Vec<String> = vec!["exec".into(), "--policy".into(), policy.into()];
    if let Some(out) = learn {
        args.push("--learn".into());
        args.push(out.display().to_string());
    }
    args.extend(["--", "/bin/sh", "build.sh"].map(str::to_owned));
    let start = Instant::now();
    let o = bee(&args, &f.workspace);
    (o, start.elapsed())
}

#[test]
fn a_build_learned_then_enforced_passes_and_still_refuses_a_secret() {
    let f = Fixture::new();
    build_workspace(&f, SOURCES);
    // The base grants nothing: everything the build does is learned.
    let base = f.root.join("base.toml");
    std::fs::write(&base, "version = 1\nname = \"empty\"\n").unwrap();
    let base = base.display().to_string();
    let learned = f.root.join("learned.toml");

    // Enforced under the empty base, the build cannot even start.
    let (o, _) = build(&base, None, &f);
    assert_ne!(code(&o), 0, "{}", text(&o.stderr));

    let (o, _) = build(&base, Some(&learned), &f);
    let err = text(&o.stderr);
    assert_eq!(code(&o), 0, "{err}");
    assert_eq!(text(&o.stdout), "built\n", "{err}");
    let policy = std::fs::read_to_string(&learned).unwrap();
    // Reviewable: the build's output as one subtree, busybox pinned, no secret.
    assert!(
        policy.contains("\"./out/**\", # every entry was observed"),
        "{policy}"
    );
    assert!(policy.contains("\"!/bin/busybox\""), "{policy}");
    assert!(!rules(&policy).contains("secret"), "{policy}");
    let o = bee(
        &["validate", "--policy", &learned.display().to_string()],
        &f.workspace,
    );
    assert_eq!(
        code(&o),
        0,
        "{}{}\n{policy}",
        text(&o.stdout),
        text(&o.stderr)
    );

    // The same build, from scratch, enforced by the learned policy: passes, with no denial.
    std::fs::remove_dir_all(f.workspace.join("out")).unwrap();
    let learned_s = learned.display().to_string();
    let (o, _) = build(&learned_s, None, &f);
    let err = text(&o.stderr);
    assert_eq!(code(&o), 0, "{err}\n{policy}");
    assert!(!err.contains("bee: denied"), "{err}\n{policy}");
    // And the secret the build never read stays out of reach.
    let o = bee(
        &[
            "exec",
            "--policy",
            &learned_s,
            "--",
            "/bin/cat",
            &f.secret.display().to_string(),
        ],
        &f.workspace,
    );
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("no fs.read grant covers it"),
        "{}",
        text(&o.stderr)
    );
}

/// Learn mode's overhead on the build against enforced mode, measured in one boot,
/// alternating: the build enforced by its learned policy, then learned again from the empty
/// base, each `bee exec` running the build `BENCH_REPEAT` times, and a `bee exec` of `true`
/// in the same mode for the launch's own cost (under TCG, `Engine::load` is most of a `bee
/// exec`), which is subtracted. A benchmark, not a check (its time would double the file's in
/// CI): run it with `cargo xtask vm test -p bee --test kernel_learn --bin target/debug/bee --
/// --nocapture --include-ignored learn_mode_overhead`; it prints one `kernel-learn-bench|`
/// line.
#[test]
#[ignore = "a benchmark: run with --include-ignored learn_mode_overhead"]
fn learn_mode_overhead_on_the_build() {
    const BENCH_REPEAT: usize = 5;
    let f = Fixture::new();
    build_workspace(&f, BENCH_SOURCES);
    let base = f.root.join("base.toml");
    std::fs::write(&base, "version = 1\nname = \"empty\"\n").unwrap();
    let base = base.display().to_string();
    let learned = f.root.join("learned.toml");
    let (o, _) = build(&base, Some(&learned), &f);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let learned_s = learned.display().to_string();
    let scratch = f.root.join("bench-learned.toml").display().to_string();
    let repeat =
        format!("for i in $(seq {BENCH_REPEAT}); do sh build.sh > out/log || exit 1; done");
    let timed = |learn: bool, script: &str| {
        let mut args = vec!["exec", "--policy"];
        if learn {
            args.extend([base.as_str(), "--learn", scratch.as_str()]);
        } else {
            args.push(learned_s.as_str());
        }
        args.extend(["--", "/bin/sh", "-c", script]);
        let start = Instant::now();
        let o = bee(&args, &f.workspace);
        assert_eq!(code(&o), 0, "{}", text(&o.stderr));
        start.elapsed()
    };
    let rounds = 3;
    let (mut enforced, mut learning, mut plain) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        let o = Command::new("/bin/sh")
            .args(["-c", &repeat])
            .current_dir(&f.workspace)
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{}", text(&o.stderr));
        plain.push(start.elapsed());
        let launch = timed(false, "true");
        enforced.push(timed(false, &repeat).saturating_sub(launch));
        let launch = timed(true, "true");
        learning.push(timed(true, &repeat).saturating_sub(launch));
    }
    enforced.sort();
    learning.sort();
    plain.sort();
    let (e, l, p) = (
        enforced[rounds / 2],
        learning[rounds / 2],
        plain[rounds / 2],
    );
    let per_build = |d: Duration| d.as_secs_f64() * 1e3 / BENCH_REPEAT as f64;
    println!(
        "kernel-learn-bench| {} | build of {BENCH_SOURCES} sources, ms per build, launch \
         subtracted, median of {rounds} | no bee {:.0} | enforced (learned policy) {:.0} | \
         learn mode (empty base) {:.0} | learn / enforced {:.2} | enforced / no bee {:.2}",
        std::env::var("BEE_VM_ENTRY").unwrap_or_else(|_| "host".into()),
        per_build(p),
        per_build(e),
        per_build(l),
        l.as_secs_f64() / e.as_secs_f64(),
        e.as_secs_f64() / p.as_secs_f64()
    );
}
