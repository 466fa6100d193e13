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

/// Tells the re-executed test binary to be [`scope_maker_entry`]: the parent cgroup to make a
/// scope in, and whether to start a `sleep` in it.
const MAKER_ENV: &str = "BEE_CGROUP_TEST_MAKER";

#[test]
#[ignore = "not a test: the sweep tests run it in a child process (with --ignored) as the maker of a scope"]
fn scope_maker_entry() {
    use std::io::Write as _;
    let Ok(spec) = std::env::var(MAKER_ENV) else {
        return;
    };
    let (parent, populate) = spec.split_once('\u{1f}').unwrap_or((&spec, ""));
    let parent = match CgroupParent::open(parent) {
        Ok(p) => p,
        Err(e) => unreachable!("{e}"),
    };
    let cg = scope(&parent);
    // Left running when this process is killed (nothing tears its scope down), and waited
    // for by no one: its reaper is whoever inherits it.
    let sleeper = (populate == "populate").then(|| sleeper_in(&cg));
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", cg.path().display());
    let _ = out.flush();
    std::thread::sleep(Duration::from_secs(300));
    if let Some(mut s) = sleeper {
        let _ = s.kill();
        let _ = s.wait();
    }
}

/// Re-executes this test binary as [`scope_maker_entry`], which makes a scope below `parent`
/// (with a `sleep` in it when `populate`), and SIGKILLs it once it has: the scope's maker
/// is then gone without a teardown. Returns the scope's directory.
fn scope_of_a_killed_maker(parent: &CgroupParent, populate: bool) -> PathBuf {
    use std::io::BufRead as _;
    let exe = std::env::current_exe().unwrap_or_else(|e| unreachable!("{e}"));
    let spec = format!(
        "{}\u{1f}{}",
        parent.path().display(),
        if populate { "populate" } else { "" }
    );
    let mut maker = Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "scope_maker_entry",
            "--nocapture",
            "-q",
        ])
        .env(MAKER_ENV, spec)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    // The test harness's own lines come first: the scope is the line naming the parent.
    let mut line = String::new();
    if let Some(out) = maker.stdout.take() {
        let mut out = std::io::BufReader::new(out);
        let prefix = parent.path().display().to_string();
        while !line.starts_with(&prefix) {
            line.clear();
            if out.read_line(&mut line).map_or(true, |n| n == 0) {
                break;
            }
        }
    }
    let _ = maker.kill();
    let _ = maker.wait();
    let path = PathBuf::from(line.trim());
    assert!(
        path.starts_with(parent.path()) && path.is_dir(),
        "the maker made no scope: {line:?}"
    );
    path
}

#[test]
fn the_sweep_removes_a_killed_makers_empty_scope_and_keeps_a_live_ones() {
    let parent = parent_at("bee-tests/sweep-empty");
    let stale = scope_of_a_killed_maker(&parent, false);
    let mine = scope(&parent);
    let report = parent.sweep_stale();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.removed.contains(&stale), "{report:?}");
    assert!(!stale.exists(), "{} is still there", stale.display());
    assert!(
        mine.path().is_dir(),
        "a live maker's empty scope was removed"
    );
    assert!(
        !report.removed.iter().any(|p| p == mine.path()),
        "{report:?}"
    );
    // What this process makes next still works, and goes at its teardown.
    let path = mine.path().to_owned();
    assert!(mine.teardown(Duration::from_secs(5)).is_ok());
    assert!(!path.exists());
}

#[test]
fn the_sweep_keeps_a_killed_makers_scope_while_processes_live_in_it() {
    let parent = parent_at("bee-tests/sweep-populated");
    let stale = scope_of_a_killed_maker(&parent, true);
    let report = parent.sweep_stale();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.populated.contains(&stale), "{report:?}");
    assert!(!report.removed.contains(&stale), "{report:?}");
    assert!(stale.is_dir());
    // Once its last process is gone, it is stale like any other.
    assert!(fs::write(stale.join("cgroup.kill"), "1").is_ok());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while fs::read_to_string(stale.join("cgroup.events")).is_ok_and(|e| e.contains("populated 1"))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let report = parent.sweep_stale();
    assert!(report.removed.contains(&stale), "{report:?}");
    assert!(!stale.exists());
}

#[test]
fn the_sweep_reads_names_and_honours_the_makers_lock() {
    use std::os::fd::AsRawFd as _;
    let parent = parent_at("bee-tests/sweep-names");
    let at = |name: &str| parent.path().join(name);
    // No process can have a pid above the kernel's limit (4,194,304).
    let dead = "4194305-12345-0";
    let dead_old = "4194305-0-123456789";
    let live_old = format!("{}-0-123456789", std::process::id());
    let nested = "4194305-12345-1";
    let locked = "4194305-12345-2";
    for name in [
        dead,
        dead_old,
        &live_old,
        nested,
        locked,
        "session",
        "4194305-1",
    ] {
        let _ = fs::create_dir(at(name));
    }
    assert!(fs::create_dir(at(nested).join("inner")).is_ok());
    // A maker this process cannot see (another PID namespace) still holds its lock.
    let held = fs::File::open(at(locked)).unwrap_or_else(|e| unreachable!("{e}"));
    // SAFETY: flock(2) on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_SH) }, 0);

    let report = parent.sweep_stale();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    for gone in [dead, dead_old, nested] {
        assert!(report.removed.contains(&at(gone)), "{gone}: {report:?}");
        assert!(!at(gone).exists(), "{gone}");
    }
    for kept in [&*live_old, locked, "session", "4194305-1"] {
        assert!(at(kept).is_dir(), "{kept} was removed");
    }
    drop(held);
    let report = parent.sweep_stale();
    assert!(report.removed.contains(&at(locked)), "{report:?}");
    for name in [&*live_old, "session", "4194305-1"] {
        assert!(fs::remove_dir(at(name)).is_ok(), "{name}");
    }
}
