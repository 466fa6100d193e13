//! Kernel tests: a live policy change ([`Engine::replace`], what `/allow` in `bee repl` does).
//! Processes of the scope open a file both policies grant and one only the new policy grants,
//! in a tight loop, while the test replaces the policy: once to grant the new file, then again
//! and again with the same grants under new ids (each replace frees the entries of the policy
//! before it while checks may still be walking them). Not one check may see a torn policy:
//! the granted file opens every time, the new file is refused with EPERM until the replace
//! that grants it and opens every time after its first success.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

use std::io::{BufRead as _, BufReader};
use std::time::{Duration, Instant};

use crate::kernel_support::*;

/// Watchers in the scope (the guest has two vCPUs).
const WATCHERS: usize = 2;
/// Replaces after the one that grants the new file.
const AGAIN: usize = 20;

/// The policy: the base grants, `granted`, and `extra` when given (exact paths).
fn policy(granted: &str, extra: Option<&str>) -> String {
    let text = format!("version = 1\n{}", base_grants());
    let mut reads = format!("\"{granted}\"");
    if let Some(extra) = extra {
        reads.push_str(&format!(", \"{extra}\""));
    }
    text.replace("read = [", &format!("read = [{reads}, "))
}

#[test]
fn a_live_replace_is_never_seen_torn() {
    let ws = Scratch::new("replace");
    let granted = ws.write("granted", "x");
    let new = ws.write("new", "x");
    let stop = ws.s("stop");
    let mut scope = Scope::new("replace", &policy(&granted, None), 0);
    let wider = plan(&policy(&granted, Some(&new)));

    // Before: the new file is refused.
    let before = helper(Some(&scope.cg), Action::OpenRead { path: new.clone() });
    assert_eq!(
        errno_of(&before),
        libc::EPERM,
        "open new before: {}",
        show(&before)
    );

    let mut watchers: Vec<_> = (0..WATCHERS)
        .map(|_| {
            helper_spawn(
                &scope.cg,
                Action::ReplaceWatch {
                    args: vec![granted.clone(), new.clone(), stop.clone()],
                },
            )
        })
        .collect();
    let mut lines: Vec<_> = watchers
        .iter_mut()
        .map(|w| BufReader::new(w.stdout.take().unwrap()).lines())
        .collect();
    // The test harness prints a line or two of its own first.
    for l in &mut lines {
        assert!(
            l.any(|line| line.unwrap() == "ready"),
            "a watcher never got ready"
        );
    }

    let first = scope.policy_id();
    let mut times = Vec::new();
    for _ in 0..=AGAIN {
        let installed = scope.installed.as_mut().unwrap();
        let before = installed.policy_id();
        let t = Instant::now();
        engine().replace(installed, &wider).expect("replace");
        times.push(t.elapsed());
        assert_ne!(installed.policy_id(), before, "a new policy id");
    }

    // The watchers run a while under the last policy too.
    std::thread::sleep(Duration::from_millis(500));
    ws.write("stop", "");
    let mut reports = Vec::new();
    for (w, l) in watchers.iter_mut().zip(&mut lines) {
        let report = l
            .map(Result::unwrap)
            .find(|line| line.starts_with("watch "))
            .unwrap_or_default();
        let status = w.wait().unwrap();
        assert!(status.success(), "a watcher saw a torn policy: {report}");
        reports.push(report);
    }
    // After: the new file opens, in a new process too.
    let after = helper(Some(&scope.cg), Action::OpenRead { path: new.clone() });
    assert_eq!(errno_of(&after), 0, "open new after: {}", show(&after));
    // Every denial of the workspace reported is of the new file, under the first policy (the
    // test harness's own probes of /proc are refused too).
    let mut denials = 0;
    for ev in events(&scope.cg)
        .iter()
        .filter(|e| e.error != 0 && path_of(e).starts_with(&ws.s("")))
    {
        denials += 1;
        assert_eq!(path_of(ev), new, "only the new file is ever refused");
        assert_eq!(ev.policy_id, first, "denials only under the first policy");
    }
    assert!(
        denials > 0,
        "the new file's denials before the replace were reported"
    );
    times.sort();
    println!(
        "replace: {} times, median {:?}, max {:?}; {denials} denials reported; watchers: \
         {reports:?}",
        times.len(),
        times[times.len() / 2],
        times.last().copied().unwrap_or(Duration::ZERO)
    );
    scope.uninstall();
}

/// Rounds of the churn: uninstall the busy scope, install another one at once, check it.
const CHURN: usize = 30;
/// Opens per check of the scope installed right after an uninstall.
const CHURN_OPENS: &str = "200";

#[test]
fn a_scope_installed_right_after_an_uninstall_is_decided_by_its_own_policy() {
    let ws = Scratch::new("churn");
    let a = ws.write("a", "x");
    let b = ws.write("b", "x");
    let (grants_a, grants_b) = (policy(&a, None), policy(&b, None));
    let plan_a = plan(&grants_a);
    // The busy scope: workers open both files without pause, so that checks of it are in
    // flight whenever it is uninstalled (what they decide is not looked at: from each
    // uninstall to the reinstall they are not confined).
    let mut busy = Scope::new("churn-busy", &grants_a, 0);
    let (a_ok, a_no) = (format!("{a}=ok"), format!("{a}=no"));
    let (b_ok, b_no) = (format!("{b}=ok"), format!("{b}=no"));
    let workers: Vec<_> = (0..WATCHERS)
        .map(|_| {
            helper_spawn(
                &busy.cg,
                Action::StressOpen {
                    args: vec!["1000000000".into(), "0".into(), a_ok.clone(), b_ok.clone()],
                },
            )
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut checked = 0;
    for round in 0..CHURN {
        busy.uninstall();
        // Installed straight after the delete: its entry may be the element just deleted.
        let fresh = if round % 2 == 0 {
            Scope::new("churn-fresh", &grants_b, 0)
        } else {
            Scope::new("churn-fresh", &grants_a, 0)
        };
        let (allowed, denied) = if round % 2 == 0 {
            (&b_ok, &a_no)
        } else {
            (&a_ok, &b_no)
        };
        let out = helper(
            Some(&fresh.cg),
            Action::StressOpen {
                args: vec![
                    CHURN_OPENS.into(),
                    "0".into(),
                    allowed.into(),
                    denied.into(),
                ],
            },
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "round {round}: the fresh scope was not decided by its own policy: {}",
            show(&out)
        );
        let refused = if round % 2 == 0 { &a } else { &b };
        let denials: Vec<_> = events(&fresh.cg)
            .into_iter()
            .filter(|e| e.error != 0 && path_of(e).starts_with(&ws.s("")))
            .collect();
        assert!(!denials.is_empty(), "round {round}: no denial reported");
        for ev in &denials {
            assert_eq!(
                &path_of(ev),
                refused,
                "round {round}: only {refused} is refused"
            );
            assert_eq!(
                ev.policy_id,
                fresh.policy_id(),
                "round {round}: denied under the fresh scope's policy"
            );
        }
        checked += denials.len();
        drop(fresh);
        busy.installed = Some(engine().install(&plan_a, busy.id(), 0).expect("reinstall"));
    }
    busy.cg.kill_all();
    for mut w in workers {
        let _ = w.wait();
    }
    println!("churn: {CHURN} rounds, {checked} denials of fresh scopes checked");
}

/// Nearest-rank percentile `p` of sorted `v`, in milliseconds.
fn ms(v: &[Duration], p: usize) -> f64 {
    let i = (v.len() * p).div_ceil(100).clamp(1, v.len()) - 1;
    v[i].as_secs_f64() * 1000.0
}

/// The benchmark of `docs/benchmarks.md`, "Live policy change": `ROUNDS` replaces of an idle
/// scope's policy (base grants and 100 exact reads) by the same plus one path, and the cost
/// of an uninstall to the install after it: one straight after against one a while after.
/// Run it alone:
/// `cargo xtask vm test --kernel 6.12,7.x --test kernel_programs -- --ignored --nocapture --exact replace::replace_bench`.
#[test]
#[ignore = "a benchmark: run it alone (see its documentation)"]
fn replace_bench() {
    const ROUNDS: usize = 50;
    let ws = Scratch::new("replace-bench");
    let reads: Vec<String> = (0..100).map(|i| ws.write(&format!("f{i}"), "x")).collect();
    let extra = ws.write("extra", "x");
    let text = |more: Option<&str>| {
        let mut all = reads.clone();
        all.extend(more.map(str::to_owned));
        let list: Vec<String> = all.iter().map(|p| format!("\"{p}\"")).collect();
        format!("version = 1\n{}", base_grants())
            .replace("read = [", &format!("read = [{}, ", list.join(", ")))
    };
    let (narrow, wide) = (plan(&text(None)), plan(&text(Some(&extra))));
    let mut scope = Scope::new("replace-bench", &text(None), 0);
    let mut replace = Vec::new();
    for i in 0..ROUNDS {
        let installed = scope.installed.as_mut().unwrap();
        let next = if i % 2 == 0 { &wide } else { &narrow };
        let t = Instant::now();
        engine().replace(installed, next).expect("replace");
        replace.push(t.elapsed());
    }
    scope.uninstall();
    // Install, for a fresh cgroup as every scope has, straight after an uninstall and 200 ms
    // after one: an uninstall leaves no grace period for the install to wait for, so the two
    // cost the same.
    let (mut soon, mut later) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS {
        let (old, new) = (
            Cgroup::create("replace-bench-a"),
            Cgroup::create("replace-bench-b"),
        );
        let installed = engine().install(&narrow, old.id(), 0).expect("install");
        engine().uninstall(installed).expect("uninstall");
        if i % 2 == 1 {
            std::thread::sleep(Duration::from_millis(200));
        }
        let t = Instant::now();
        let installed = engine().install(&narrow, new.id(), 0).expect("install");
        if i % 2 == 0 { &mut soon } else { &mut later }.push(t.elapsed());
        engine().uninstall(installed).expect("uninstall");
        std::thread::sleep(Duration::from_millis(200));
    }
    for v in [&mut replace, &mut soon, &mut later] {
        v.sort();
    }
    println!(
        "bench replace: {ROUNDS} replaces of {} states, p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms",
        wide.stats().states,
        ms(&replace, 50),
        ms(&replace, 95),
        ms(&replace, 100)
    );
    println!(
        "bench install right after an uninstall: p50 {:.2} ms, p95 {:.2} ms; 200 ms after: p50 \
         {:.2} ms, p95 {:.2} ms",
        ms(&soon, 50),
        ms(&soon, 95),
        ms(&later, 50),
        ms(&later, 95)
    );
}
