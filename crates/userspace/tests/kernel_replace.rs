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

mod kernel_support;

use std::io::{BufRead as _, BufReader};
use std::time::{Duration, Instant};

use kernel_support::*;

helper_entry!();

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
    let before = helper(Some(&scope.cg), "open-read", &[&new]);
    assert_eq!(
        errno_of(&before),
        libc::EPERM,
        "open new before: {}",
        show(&before)
    );

    let mut watchers: Vec<_> = (0..WATCHERS)
        .map(|_| helper_spawn(&scope.cg, "replace-watch", &[&granted, &new, &stop]))
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
    let after = helper(Some(&scope.cg), "open-read", &[&new]);
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
