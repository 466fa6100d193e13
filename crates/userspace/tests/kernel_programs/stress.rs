//! Kernel tests: decisions under preemption. Many tasks on the guest's two vCPUs open, for
//! reading, granted and denied files whose paths share long prefixes, in two scopes with
//! different policies and outside every scope, a fixed number of times; every outcome is
//! compared with what the policy says, and not one may differ. On `preempt=full` and PREEMPT_RT
//! kernels a program can be preempted mid-walk by another task's check on the same CPU: with a
//! path buffer per CPU the second check rewrote the first one's path (and the caches could
//! remember the mixed result); with a buffer per task (`docs/enforcement.md`, "The path
//! walk") each check walks its own path. Every kernel of the matrix runs it; the runner checks
//! that `6.12-full` and `6.12-rt` boot with the preemption model they name.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

use std::process::{Child, Stdio};

use crate::kernel_support::*;

/// Workers per group (scope A, scope B, outside every scope).
const WORKERS: usize = 4;
/// Opens per worker.
const OPENS: u64 = 20_000;
/// Directory levels below each tree root: long walks keep programs running long enough to be
/// preempted in the middle.
const DEPTH: usize = 12;
/// A directory name of 40 bytes: past the short-edge limit, so every level takes the long
/// edge map, and shared by every tree.
const SEG: &str = "level-with-a-name-long-enough-to-matter";

/// The policy of a scope that may read `{ws}/t/{tree}/**` and nothing else of `ws`.
fn policy(ws: &Scratch, tree: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().display();
    format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{dir}/**", "{ws}/t/{tree}/**"]
write = ["/dev/null"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{dir}/**"]
"#,
        ws = ws.path.display(),
    )
}

/// Files of one tree: one at the top, one in the middle, one at the bottom of its chain, and
/// one at the bottom whose name differs from a granted one's by its last byte.
fn tree_files(ws: &Scratch, tree: &str) -> Vec<String> {
    let mut dir = format!("t/{tree}");
    let mut files = vec![ws.write(&format!("{dir}/top"), "x")];
    for level in 1..=DEPTH {
        dir = format!("{dir}/{SEG}");
        if level == DEPTH / 2 {
            files.push(ws.write(&format!("{dir}/middle"), "x"));
        }
    }
    files.push(ws.write(&format!("{dir}/bottom-file-a"), "x"));
    files.push(ws.write(&format!("{dir}/bottom-file-b"), "x"));
    files
}

/// Starts a worker: the test binary's `stress-open` helper in `cg` (outside every scope
/// without one), with stdout piped.
fn spawn_worker(cg: Option<&Cgroup>, start: usize, cases: &[String]) -> Child {
    let exe = std::env::current_exe().unwrap();
    let count = OPENS.to_string();
    let start = start.to_string();
    let mut spec = vec!["stress-open", count.as_str(), start.as_str()];
    spec.extend(cases.iter().map(String::as_str));
    command_in(cg, exe.to_str().unwrap())
        .args([
            "--ignored",
            "--exact",
            "helper_entry",
            "--test-threads=1",
            "--nocapture",
            "-q",
        ])
        .env(HELPER_ENV, spec.join("\u{1f}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The `checks=` and `wrong=` counts of a worker's report line.
fn counts(report: &str) -> (u64, u64) {
    let field = |name: &str| {
        report
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX)
    };
    (field("checks="), field("wrong="))
}

#[test]
fn no_wrong_decision_under_preemption() {
    let ws = Scratch::new("stress");
    // Trees `a` and `b` are granted to one scope each; `ab` shares `a`'s first byte and is
    // granted to neither.
    let a = tree_files(&ws, "a");
    let b = tree_files(&ws, "b");
    let ab = tree_files(&ws, "ab");
    let scope_a = Scope::new("stress-a", &policy(&ws, "a"), 0);
    let scope_b = Scope::new("stress-b", &policy(&ws, "b"), 0);

    let expect = |granted: &[String], denied: &[&[String]]| {
        let mut cases: Vec<String> = Vec::new();
        // Interleaved, so consecutive opens of one worker alternate grant and denial.
        let denied: Vec<&String> = denied.iter().flat_map(|d| d.iter()).collect();
        for i in 0..granted.len().max(denied.len()) {
            if let Some(g) = granted.get(i) {
                cases.push(format!("{g}=ok"));
            }
            if let Some(d) = denied.get(i) {
                cases.push(format!("{d}=eperm"));
            }
        }
        cases
    };
    let cases_a = expect(&a, &[&b, &ab]);
    let cases_b = expect(&b, &[&a, &ab]);
    let all: Vec<String> = a.iter().chain(&b).chain(&ab).cloned().collect();
    let cases_out = expect(&all, &[]);

    // Every denial reported names a path its own scope was denied: an event built in a buffer
    // another task rewrote would name a mixed path. The ring buffer (1 MiB) holds a few
    // hundred events, so a reader drains it while the workers run, checking each event as it
    // comes and keeping only counts.
    let denied_a: Vec<&String> = b.iter().chain(&ab).collect();
    let denied_b: Vec<&String> = a.iter().chain(&ab).collect();
    let check = |cg: &Cgroup, denied: &[&String], name: &str| -> u64 {
        let mut n = 0;
        for ev in events(cg).iter().filter(|e| e.error != 0) {
            let p = path_of(ev);
            assert!(
                denied.iter().any(|d| **d == p) || !p.starts_with(&ws.s("t")),
                "scope {name}: a denial names {p:?}, not one of its denied paths"
            );
            n += 1;
        }
        n
    };
    let running = std::sync::atomic::AtomicBool::new(true);
    let reported = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let (mut in_a, mut in_b) = (0u64, 0u64);
            while running.load(std::sync::atomic::Ordering::SeqCst) {
                in_a += check(&scope_a.cg, &denied_a, "a");
                in_b += check(&scope_b.cg, &denied_b, "b");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            (
                in_a + check(&scope_a.cg, &denied_a, "a"),
                in_b + check(&scope_b.cg, &denied_b, "b"),
            )
        });
        let outcome = run_workers(&cases_a, &cases_b, &cases_out, &scope_a, &scope_b);
        running.store(false, std::sync::atomic::Ordering::SeqCst);
        let reported = reader.join().unwrap();
        outcome.check();
        reported
    });
    println!(
        "denials reported and checked: {} in scope a, {} in scope b",
        reported.0, reported.1
    );
    assert!(
        reported.0 > 0 && reported.1 > 0,
        "no denial was reported in a scope: {reported:?}"
    );
}

/// What the workers reported.
struct Outcome {
    total: u64,
    wrong: u64,
    reports: Vec<String>,
}

impl Outcome {
    /// The fixed number of checks, and not one wrong decision.
    fn check(&self) {
        assert_eq!(
            self.total,
            3 * WORKERS as u64 * OPENS,
            "the fixed number of checks"
        );
        assert_eq!(
            self.wrong,
            0,
            "wrong decisions:\n{}",
            self.reports.join("\n")
        );
    }
}

/// Runs the twelve workers to their end: four in each scope, four outside every scope.
fn run_workers(
    cases_a: &[String],
    cases_b: &[String],
    cases_out: &[String],
    scope_a: &Scope,
    scope_b: &Scope,
) -> Outcome {
    let mut workers = Vec::new();
    for i in 0..WORKERS {
        workers.push(("scope a", spawn_worker(Some(&scope_a.cg), i, cases_a)));
        workers.push(("scope b", spawn_worker(Some(&scope_b.cg), i, cases_b)));
        workers.push(("outside", spawn_worker(None, i, cases_out)));
    }
    let started = std::time::Instant::now();
    let (mut total, mut wrong) = (0u64, 0u64);
    let mut reports = Vec::new();
    for (group, child) in workers {
        let out = child.wait_with_output().unwrap();
        let report = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let (c, w) = counts(&report);
        assert_eq!(
            c, OPENS,
            "{group}: a worker did not finish its opens: {report:?}"
        );
        total += c;
        wrong = wrong.saturating_add(w);
        reports.push(format!("{group}: {report} (exit {:?})", out.status.code()));
    }
    println!(
        "{total} checks by {} tasks in {:?} on {}, wrong {wrong}",
        3 * WORKERS,
        started.elapsed(),
        std::env::var("BEE_VM_ENTRY").unwrap_or_else(|_| "this kernel".into())
    );
    Outcome {
        total,
        wrong,
        reports,
    }
}
