//! Scope cgroups on the real cgroup v2 hierarchy of this host. Needs root; fails (never
//! skips) without it.

use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bee_userspace::cgroup::{CgroupError, CgroupParent, KillMethod, ScopeCgroup, ScopeLimits};
use bee_userspace::support::parse_cgroup2_mount;

fn parent() -> CgroupParent {
    parent_at("bee-tests")
}

/// A parent of its own below the test parent, for tests that count its scopes.
fn parent_at(relative: &str) -> CgroupParent {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some(mount) = parse_cgroup2_mount(&mountinfo) else {
        unreachable!("these tests need a cgroup2 mount")
    };
    match CgroupParent::open(mount.join(relative)) {
        Ok(p) => p,
        Err(e) => unreachable!("cannot open the test parent cgroup (root needed): {e}"),
    }
}

fn scope(parent: &CgroupParent) -> ScopeCgroup {
    match parent.create_scope(&ScopeLimits::default()) {
        Ok(s) => s,
        Err(e) => unreachable!("{e}"),
    }
}

/// Starts `sleep 300` and moves it into `cgroup` from outside.
fn sleeper_in(cgroup: &ScopeCgroup) -> Child {
    let child = match Command::new("sleep")
        .arg("300")
        .stdin(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => unreachable!("{e}"),
    };
    if let Err(e) = fs::write(cgroup.path().join("cgroup.procs"), child.id().to_string()) {
        unreachable!("{e}");
    }
    child
}

#[test]
fn scope_id_is_the_directory_inode_and_remove_deletes_it() {
    let parent = parent();
    let a = scope(&parent);
    let b = scope(&parent);
    assert_ne!(a.path(), b.path());
    assert!(a.path().starts_with(parent.path()));
    let ino = fs::metadata(a.path()).map(|m| m.ino()).unwrap_or(0);
    assert_eq!(a.id(), ino);
    assert_ne!(a.id(), b.id());
    assert_eq!(a.procs().ok(), Some(Vec::new()));
    assert_eq!(a.is_populated().ok(), Some(false));
    let path = a.path().to_owned();
    assert!(a.remove().is_ok());
    assert!(!path.exists());
    let path = b.path().to_owned();
    drop(b);
    assert!(!path.exists(), "dropping a scope removes its cgroup");
}

#[test]
fn controllers_are_reported_and_limits_never_pretended() {
    let parent = parent_at("bee-tests/controllers");
    assert_eq!(parent.controllers().len(), 2);
    for c in parent.controllers() {
        assert!(!c.reason.is_empty(), "{c:?}");
    }
    for (name, setting, limits) in [
        (
            "pids",
            "pids.max",
            ScopeLimits {
                pids_max: Some(32),
                memory_max: None,
            },
        ),
        (
            "memory",
            "memory.max",
            ScopeLimits {
                pids_max: None,
                memory_max: Some(64 << 20),
            },
        ),
    ] {
        let before = fs::read_dir(parent.path()).map(|d| d.count()).unwrap_or(0);
        match parent.create_scope(&limits) {
            Ok(s) => {
                assert!(parent.has_controller(name));
                let value = fs::read_to_string(s.path().join(setting)).unwrap_or_default();
                let want = limits.pids_max.or(limits.memory_max).unwrap_or(0);
                assert_eq!(value.trim(), want.to_string());
            }
            Err(CgroupError::ControllerUnavailable {
                controller, why, ..
            }) => {
                assert!(!parent.has_controller(name));
                assert_eq!(controller, name);
                assert!(!why.is_empty());
                let after = fs::read_dir(parent.path()).map(|d| d.count()).unwrap_or(0);
                assert_eq!(before, after, "a refused scope leaves nothing behind");
            }
            Err(e) => unreachable!("{e}"),
        }
    }
}

#[test]
fn cgroup_kill_empties_the_scope() {
    let parent = parent();
    let cg = scope(&parent);
    let mut kids: Vec<Child> = (0..3).map(|_| sleeper_in(&cg)).collect();
    assert_eq!(cg.procs().map(|p| p.len()).ok(), Some(3));
    assert_eq!(cg.is_populated().ok(), Some(true));
    assert_eq!(cg.kill().ok(), Some(KillMethod::CgroupKill));
    assert!(cg.wait_empty(Duration::from_secs(5)).is_ok());
    for k in &mut kids {
        let status = k.wait().ok();
        assert_eq!(
            status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
            Some(9)
        );
    }
    assert!(cg.remove().is_ok());
}

#[test]
fn signal_fallback_empties_the_scope() {
    let parent = parent();
    let cg = scope(&parent);
    let mut kids: Vec<Child> = (0..3).map(|_| sleeper_in(&cg)).collect();
    assert!(cg.kill_with(KillMethod::Signals).is_ok());
    assert!(cg.wait_empty(Duration::from_secs(5)).is_ok());
    for k in &mut kids {
        let _ = k.wait();
    }
    assert_eq!(cg.procs().ok(), Some(Vec::new()));
    let frozen = fs::read_to_string(cg.path().join("cgroup.freeze")).unwrap_or_default();
    assert_eq!(frozen.trim(), "0", "the fallback thaws the cgroup again");
    assert!(cg.remove().is_ok());
}

#[test]
fn wait_empty_times_out_and_remove_refuses_a_populated_scope() {
    let parent = parent();
    let cg = scope(&parent);
    let mut kid = sleeper_in(&cg);
    match cg.wait_empty(Duration::from_millis(50)) {
        Err(CgroupError::StillPopulated { .. }) => {}
        other => unreachable!("{other:?}"),
    }
    let path: PathBuf = cg.path().to_owned();
    assert!(matches!(
        cg.remove(),
        Err(CgroupError::Io { op: "rmdir", .. })
    ));
    // The failed remove dropped the scope, which killed the sleeper and removed the cgroup.
    let _ = kid.wait();
    assert!(!path.exists());
}

#[test]
fn teardown_kills_and_removes() {
    let parent = parent();
    let cg = scope(&parent);
    let mut kid = sleeper_in(&cg);
    let path = cg.path().to_owned();
    assert!(cg.teardown(Duration::from_secs(5)).is_ok());
    assert!(!path.exists());
    assert!(kid.wait().is_ok());
}

#[test]
fn a_parent_outside_cgroup2_is_refused() {
    let dir = std::env::temp_dir().join(format!("bee-not-cgroup-{}", std::process::id()));
    let r = CgroupParent::open(&dir);
    let _ = fs::remove_dir(&dir);
    assert!(matches!(r, Err(CgroupError::NotCgroup2 { .. })), "{r:?}");
}
