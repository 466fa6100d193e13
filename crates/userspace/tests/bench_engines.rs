//! The two engines side by side in one boot (a benchmark, ignored by default): a kernel that
//! runs both the BPF LSM and Landlock confines the same helper under the BPF LSM engine
//! ([`SharedEngine`]), under the Landlock engine ([`LandlockEngine`], its mounts, namespaces
//! and seccomp filter included) and under neither, rounds interleaved. Per variant: a scope's
//! start-up (the scope made, the helper started, waited for and the scope torn down) and the
//! cost of one `open`+`close` of a granted file (a loop timed inside the helper). Run it in
//! the VM: `cargo xtask vm test --kernel 7.x -p bee-userspace --test bench_engines
//! --features kernel-tests -- --ignored --nocapture`; `docs/benchmarks.md` has the figures.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a benchmark: a step that fails fails it"
)]

mod kernel_support;
mod landlock_support;

use std::io::Read as _;
use std::time::{Duration, Instant};

use bee_core::{CompileOptions, CompiledPolicy};
use bee_userspace::cgroup::CgroupParent;
use bee_userspace::engine::{EngineOptions, SharedEngine};
use bee_userspace::landlock::LandlockEngine;
use bee_userspace::launch::exit_code;
use bee_userspace::scope::{Enforcer, Scope, ScopeOptions};
use kernel_support::{Action, helper, helper_spec};
use landlock_support::policy_text;

helper_entry!();

/// Rounds, each running every variant once per measurement, in turn.
const ROUNDS: usize = 15;
/// Opens per timed loop.
const OPENS: u32 = 20_000;

/// Runs `action` as the helper, in a scope of `enforcer` confined by `policy` (none: a plain
/// child); its output and the wall time from the request to the scope's teardown.
fn run(
    enforcer: Option<&dyn Enforcer>,
    policy: &CompiledPolicy,
    action: &Action,
) -> (String, Duration) {
    let spec = helper_spec(action);
    let start = Instant::now();
    let out = match enforcer {
        Some(enforcer) => {
            let parent = CgroupParent::open_default().expect("a cgroup2 hierarchy");
            let scope =
                Scope::create_for_policy(enforcer, &parent, policy, ScopeOptions::default())
                    .unwrap_or_else(|e| panic!("{e}"));
            let mut launched = scope.spawn(&spec).unwrap_or_else(|e| panic!("{e}"));
            let mut out = String::new();
            launched
                .take_stdout()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            let report = scope.finish(&mut launched, &mut |_| {}).unwrap();
            assert_eq!(report.outcome.exit_code(), 0, "{out}");
            out
        }
        None => {
            let out = helper(None, action.clone());
            assert_eq!(exit_code(out.status), 0);
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    (out, start.elapsed())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore = "a benchmark: run in the VM with --ignored (see the module's text)"]
fn engines_side_by_side() {
    kernel_support::assert_expected_kernel(
        &std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap(),
    );
    let bpf = SharedEngine::load(&EngineOptions::default()).expect("the BPF LSM engine");
    let landlock = LandlockEngine::new().expect("the Landlock engine");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, "x\n").unwrap();
    let exe = std::env::current_exe().unwrap();
    let (exe, tree) = (
        exe.to_str().unwrap().to_owned(),
        format!("{}/**", dir.path().display()),
    );
    let text = policy_text(
        &[&exe, "/lib/**", "/lib64/**", &tree],
        &[&tree],
        &[&exe, "/lib/**", "/lib64/**", "/usr/lib/**"],
        "",
    );
    let options = CompileOptions {
        base: dir.path().to_owned(),
        home: None,
    };
    let policy = bee_core::compile_str("bench.toml", &text, &options)
        .unwrap_or_else(|e| panic!("{e:?}"))
        .policy;
    let variants: [(&str, Option<&dyn Enforcer>); 3] = [
        ("no engine", None),
        ("BPF LSM engine", Some(&bpf)),
        ("Landlock engine", Some(&landlock)),
    ];
    let path = file.display().to_string();
    let (none, many) = (
        Action::OpenRepeat {
            path: path.clone(),
            count: "0".into(),
        },
        Action::OpenRepeat {
            path,
            count: OPENS.to_string(),
        },
    );
    let mut start_ms = vec![Vec::new(); variants.len()];
    let mut open_ns = vec![Vec::new(); variants.len()];
    for (_, enforcer) in &variants {
        run(*enforcer, &policy, &none); // warm-up
    }
    for _ in 0..ROUNDS {
        for (i, (name, enforcer)) in variants.iter().enumerate() {
            let (_, took) = run(*enforcer, &policy, &none);
            start_ms[i].push(took.as_secs_f64() * 1e3);
            let (out, _) = run(*enforcer, &policy, &many);
            let line = out
                .lines()
                .find(|l| l.starts_with("open-repeat "))
                .unwrap_or_else(|| panic!("{name}: no result in {out}"));
            let words: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(words[1], OPENS.to_string(), "{name}: {line}");
            let ns: f64 = words[3].parse().unwrap();
            open_ns[i].push(ns / f64::from(OPENS));
        }
    }
    let (base_start, base_open) = (median(start_ms[0].clone()), median(open_ns[0].clone()));
    println!(
        "kernel {}, {ROUNDS} interleaved rounds, {OPENS} opens per loop",
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap()
            .trim()
    );
    println!("| variant | start-up p50 | ratio | open+close p50 | ratio |");
    println!("|---|---|---|---|---|");
    for (i, (name, _)) in variants.iter().enumerate() {
        let (s, o) = (median(start_ms[i].clone()), median(open_ns[i].clone()));
        println!(
            "| {name} | {s:.1} ms | {:.2}x | {o:.0} ns | {:.2}x |",
            s / base_start,
            o / base_open
        );
    }
}
