//! Kernel tests: scope boundaries and escapes (bpf, ptrace, kill, mount, user namespaces,
//! cgroup moves, fork/setsid, concurrent scopes, SIGKILL of the loader), in the VM matrix via
//! `cargo xtask vm test`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bee_common::Hook;

use crate::kernel_support::*;

fn policy(ws: &Scratch) -> String {
    let exe = std::env::current_exe().unwrap();
    format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{exe}"]
write = ["/dev/null", "{ws}/**"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{exe}"]
"#,
        exe = exe.display(),
        ws = ws.path.display()
    )
}

fn plain_denial(scope: &Scope, hook: Hook) {
    let evs = events(&scope.cg);
    let ev = evs
        .iter()
        .find(|e| e.hook == hook as u32 && e.error != 0)
        .unwrap_or_else(|| panic!("no {hook:?} denial among {} events", evs.len()));
    assert_eq!(ev.error, -EPERM);
    assert_eq!(ev.cgroup_id, scope.id());
    assert_eq!(ev.policy_id, scope.policy_id());
}

#[test]
fn bpf_mount_and_user_namespaces_are_denied() {
    let ws = Scratch::new("escape");
    let scope = Scope::new("escape", &policy(&ws), 0);
    let cg = Some(&scope.cg);
    let out = helper(cg, Action::Bpf {});
    assert_eq!(errno_of(&out), EPERM, "bpf(): {}", show(&out));
    plain_denial(&scope, Hook::Bpf);
    let out = helper(cg, Action::MountTmpfs { target: ws.s("") });
    assert_eq!(errno_of(&out), EPERM, "mount: {}", show(&out));
    plain_denial(&scope, Hook::SbMount);
    let out = helper(cg, Action::UnshareUser {});
    assert_eq!(
        errno_of(&out),
        EPERM,
        "unshare(CLONE_NEWUSER): {}",
        show(&out)
    );
    plain_denial(&scope, Hook::UsernsCreate);
    // Outside the scope bpf() reaches the kernel's own checks (EINVAL for an empty attr).
    let out = helper(None, Action::Bpf {});
    assert_ne!(errno_of(&out), EPERM, "bpf() outside: {}", show(&out));
}

#[test]
fn ptrace_and_kill_of_outside_processes_are_denied() {
    let ws = Scratch::new("signals");
    let scope = Scope::new("signals", &policy(&ws), 0);
    let mut outside = Command::new(BUSYBOX).args(["sleep", "60"]).spawn().unwrap();
    let pid = outside.id().to_string();
    let out = helper(Some(&scope.cg), Action::Kill { pid: pid.clone() });
    assert_eq!(errno_of(&out), EPERM, "kill outside: {}", show(&out));
    plain_denial(&scope, Hook::TaskKill);
    let out = helper(Some(&scope.cg), Action::Ptrace { pid: pid.clone() });
    assert_eq!(errno_of(&out), EPERM, "ptrace outside: {}", show(&out));
    plain_denial(&scope, Hook::PtraceAccessCheck);
    let _ = outside.kill();
    let _ = outside.wait();
    // Signals inside the scope work.
    let out = sh(
        Some(&scope.cg),
        "sleep 30 & kill $! && wait $!; echo killed",
        &[],
    );
    assert_ok(&out, "kill inside the scope");
}

#[test]
fn moving_into_another_cgroup_is_a_denied_write() {
    let ws = Scratch::new("cgmove");
    let scope = Scope::new("cgmove", &policy(&ws), 0);
    let other = Cgroup::create("cgmove-other");
    let procs = other.procs().display().to_string();
    let out = sh(Some(&scope.cg), r#"echo $$ > "$1""#, &[&procs]);
    assert_eperm(&out, "writing another cgroup's cgroup.procs");
    denial(&events(&scope.cg), Hook::FileOpen, &procs, &scope);
    assert!(other.pids().is_empty());
}

#[test]
fn double_forked_setsid_grandchild_stays_confined() {
    let ws = Scratch::new("setsid");
    let secret = Scratch::new("setsid-secret");
    let key = secret.write("key", "SECRET\n");
    let scope = Scope::new("setsid", &policy(&ws), 0);
    let out_file = ws.s("out");
    let script =
        r#"( setsid sh -c 'cat "$1" > "$2" 2>&1; echo "rc=$?" >> "$2"' sh "$1" "$2" & ); sleep 2"#;
    assert_ok(
        &sh(Some(&scope.cg), script, &[&key, &out_file]),
        "the parent shell",
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut text = String::new();
    while Instant::now() < deadline {
        text = std::fs::read_to_string(&out_file).unwrap_or_default();
        if text.contains("rc=") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        text.contains("Operation not permitted"),
        "grandchild output: {text:?}"
    );
    assert!(!text.contains("SECRET"));
    denial(&events(&scope.cg), Hook::FileOpen, &key, &scope);
}

#[test]
fn concurrent_scopes_do_not_leak_into_each_other() {
    let a = Scratch::new("conc-a");
    let b = Scratch::new("conc-b");
    let fa = a.write("f", "A\n");
    let fb = b.write("f", "B\n");
    let text = |s: &Scratch| {
        format!(
            "version = 1\n[fs]\nread = [\"/bin/**\", \"{}/**\"]\n[exec]\nallow = [\"/bin/busybox\"]\n",
            s.path.display()
        )
    };
    let sa = Scope::new("conc-a", &text(&a), 0);
    let sb = Scope::new("conc-b", &text(&b), 0);
    assert_ne!(sa.policy_id(), sb.policy_id());
    assert_ok(&run(Some(&sa.cg), BUSYBOX, &["cat", &fa]), "A reads A");
    assert_ok(&run(Some(&sb.cg), BUSYBOX, &["cat", &fb]), "B reads B");
    assert_eperm(&run(Some(&sa.cg), BUSYBOX, &["cat", &fb]), "A reads B");
    assert_eperm(&run(Some(&sb.cg), BUSYBOX, &["cat", &fa]), "B reads A");
    denial(&events(&sa.cg), Hook::FileOpen, &fb, &sa);
    denial(&events(&sb.cg), Hook::FileOpen, &fa, &sb);
    // Removing one scope leaves the other enforced.
    drop(sa);
    assert_eperm(
        &run(Some(&sb.cg), BUSYBOX, &["cat", &fa]),
        "B after A is gone",
    );
    assert_ok(&run(None, BUSYBOX, &["cat", &fa]), "outside any scope");
}

#[test]
fn sigkill_of_the_loader_leaves_the_scope_confined() {
    // Make sure this process's engine exists (its pins are not stale).
    drop(engine());
    let ws = Scratch::new("sigkill");
    let secret = Scratch::new("sigkill-secret");
    let key = secret.write("key", "SECRET\n");
    let policy_file = ws.write("policy.toml", &policy(&ws));
    let cg = Cgroup::create("sigkill");

    // A separate loader process installs the scope, says so, and waits to be killed.
    let exe = std::env::current_exe().unwrap();
    let mut loader = Command::new(&exe)
        .args([
            "--ignored",
            "--exact",
            "helper_entry",
            "--test-threads=1",
            "--nocapture",
            "-q",
        ])
        .env(
            HELPER_ENV,
            format!("loader\u{1f}{}\u{1f}{policy_file}", cg.path.display()),
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = loader.stdout.take().unwrap();
    let mut ready = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        println!("loader: {line}");
        if line.contains("bee-loader-ready") {
            ready = true;
            break;
        }
    }
    assert!(ready, "the loader did not install the scope");
    // A process of the scope that outlives the loader.
    let trigger = ws.s("go");
    let out_file = ws.s("out");
    let mut waiter = command_in(Some(&cg), BUSYBOX)
        .args([
            "sh",
            "-c",
            r#"while [ ! -e "$1" ]; do sleep 1; done; cat "$2" > "$3" 2>&1; echo "rc=$?" >> "$3""#,
            "sh",
            &trigger,
            &key,
            &out_file,
        ])
        .spawn()
        .unwrap();

    loader.kill().unwrap(); // SIGKILL
    loader.wait().unwrap();
    std::fs::write(&trigger, "").unwrap();
    waiter.wait().unwrap();
    let text = std::fs::read_to_string(&out_file).unwrap_or_default();
    assert!(
        text.contains("Operation not permitted"),
        "after SIGKILL: {text:?}"
    );
    // New processes joining the scope are confined too.
    assert_eperm(
        &run(Some(&cg), BUSYBOX, &["cat", &key]),
        "new process after SIGKILL",
    );

    // Once the scope is empty, stale pins of the dead loader are cleaned up.
    cg.kill_all();
    let kept = bee_userspace::engine::clean_stale_pins(std::path::Path::new(
        bee_userspace::engine::DEFAULT_PIN_ROOT,
    ))
    .unwrap();
    assert!(kept.is_empty(), "stale pins kept: {kept:?}");
    let dirs: Vec<_> = std::fs::read_dir(bee_userspace::engine::DEFAULT_PIN_ROOT)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(dirs.len(), 1, "only this process's pins remain: {dirs:?}");
    // With the dead loader's pins gone, its programs detach and the (empty) cgroup is no
    // longer governed. The kernel frees a released link asynchronously (6.12 defers it past
    // an RCU grace period), so this may take a moment.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = run(Some(&cg), BUSYBOX, &["cat", &key]);
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still confined after cleanup: {}",
            show(&out)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A cgroup whose id (inode number) shares `id`'s slot of the scope filter
/// (`bee_common::scope::SCOPE_SLOTS`): cgroup ids grow with each new cgroup, so at most a few
/// thousand are made and removed on the way.
fn cgroup_in_slot_of(id: u64, name: &str) -> Cgroup {
    let slots = u64::from(bee_common::scope::SCOPE_SLOTS);
    for _ in 0..3 * slots {
        let cg = Cgroup::create(name);
        if cg.id() != id && cg.id() % slots == id % slots {
            return cg;
        }
    }
    panic!("no cgroup id in the slot of {id} after {} tries", 3 * slots);
}

/// The scope filter counts the scopes per slot: with two scopes in one slot, removing either
/// leaves the other enforced (a count, not a bit, so the early return never lets a scoped
/// task through), and a cgroup whose scope is gone is no longer checked.
#[test]
fn scopes_sharing_a_filter_slot_stay_enforced_when_the_other_goes() {
    let ws = Scratch::new("slot");
    let outside = Scratch::new("slot-secret");
    let key = outside.write("key", "secret\n");
    let text = policy(&ws);
    let mut a = Scope::new("slot-a", &text, 0);
    let mut b = Scope::in_cgroup(cgroup_in_slot_of(a.id(), "slot-b"), &text, 0);
    for (scope, who) in [(&a, "a"), (&b, "b")] {
        assert_eperm(&run(Some(&scope.cg), BUSYBOX, &["cat", &key]), who);
    }

    // b goes: a, in the same slot, is still checked; b's cgroup is not.
    b.uninstall();
    assert_eperm(
        &run(Some(&a.cg), BUSYBOX, &["cat", &key]),
        "a after b's scope went",
    );
    denial(&events(&a.cg), Hook::FileOpen, &key, &a);
    assert_ok(
        &run(Some(&b.cg), BUSYBOX, &["cat", &key]),
        "b's cgroup after its scope went",
    );

    // b again, then a goes first: b is still checked.
    b.installed = Some(engine().install(&plan(&text), b.id(), 0).expect("install"));
    a.uninstall();
    assert_eperm(
        &run(Some(&b.cg), BUSYBOX, &["cat", &key]),
        "b after a's scope went",
    );
    denial(&events(&b.cg), Hook::FileOpen, &key, &b);
    assert_ok(
        &run(Some(&a.cg), BUSYBOX, &["cat", &key]),
        "a's cgroup after its scope went",
    );
}
