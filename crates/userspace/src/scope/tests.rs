//! The scope lifecycle against a fake enforcer, on this host's real cgroup v2 hierarchy (root
//! needed). The fake looks at the cgroup each time it is called, so the tests prove the order:
//! the plan is installed while the cgroup is still empty, and removed only once it is empty
//! again and before the cgroup is removed.

use std::cell::{Cell, RefCell};
use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use bee_common::{ACCESS_READ, Hook};
use bee_core::compile::{CompileOptions, compile_str};

use super::*;
use crate::launch::StdioMode;
use crate::support::parse_cgroup2_mount;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Install {
        cgroup_id: u64,
        flags: u32,
        procs_then: usize,
    },
    Uninstall {
        id: InstallId,
        cgroup_exists: bool,
        populated: bool,
    },
}

#[derive(Debug)]
struct Fake {
    parent: PathBuf,
    calls: RefCell<Vec<Call>>,
    fail_install: bool,
    fail_uninstall: bool,
    drained: Cell<bool>,
}

impl Fake {
    fn new(parent: &CgroupParent) -> Self {
        Self {
            parent: parent.path().to_owned(),
            calls: RefCell::new(Vec::new()),
            fail_install: false,
            fail_uninstall: false,
            drained: Cell::new(false),
        }
    }

    /// The cgroup directory whose inode is `id`.
    fn dir(&self, id: u64) -> Option<PathBuf> {
        fs::read_dir(&self.parent)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| fs::metadata(p).is_ok_and(|m| m.is_dir() && m.ino() == id))
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.borrow().clone()
    }
}

fn procs(dir: &Path) -> usize {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .count()
}

impl Enforcer for Fake {
    fn install(
        &self,
        _plan: &EnforcementPlan,
        cgroup_id: u64,
        flags: u32,
    ) -> Result<InstallId, EnforceError> {
        if self.fail_install {
            return Err(EnforceError::Install {
                detail: "map full".into(),
            });
        }
        let procs_then = self.dir(cgroup_id).map_or(usize::MAX, |d| procs(&d));
        self.calls.borrow_mut().push(Call::Install {
            cgroup_id,
            flags,
            procs_then,
        });
        Ok(InstallId(cgroup_id))
    }

    fn uninstall(&self, id: InstallId) -> Result<(), EnforceError> {
        let dir = self.dir(id.0);
        let populated = dir.as_deref().is_some_and(|d| {
            fs::read_to_string(d.join("cgroup.events"))
                .unwrap_or_default()
                .contains("populated 1")
        });
        self.calls.borrow_mut().push(Call::Uninstall {
            id,
            cgroup_exists: dir.is_some(),
            populated,
        });
        if self.fail_uninstall {
            return Err(EnforceError::Uninstall {
                detail: "map gone".into(),
            });
        }
        Ok(())
    }

    fn drain_events(&self, cgroup_id: u64) -> Vec<AuditEvent> {
        if self.drained.replace(true) {
            return Vec::new();
        }
        vec![shadow_read(cgroup_id)]
    }
}

/// A refused read of `/etc/shadow` in the scope with cgroup id `cgroup_id`.
pub(super) fn shadow_read(cgroup_id: u64) -> AuditEvent {
    let mut e = AuditEvent::zeroed();
    e.cgroup_id = cgroup_id;
    e.hook = Hook::FileOpen as u32;
    e.error = -13;
    e.access = ACCESS_READ;
    let path = b"/etc/shadow";
    e.path[..path.len()].copy_from_slice(path);
    e.path_len = path.len() as u32;
    e
}

fn policy() -> (CompiledPolicy, EnforcementPlan) {
    let options = CompileOptions {
        base: "/".into(),
        home: None,
    };
    let text = "version = 1\n[fs]\nread = [\"/usr/**\"]\n[exec]\nallow = [\"/usr/bin/*\"]\n";
    let policy = match compile_str("scope.toml", text, &options) {
        Ok(c) => c.policy,
        Err(e) => unreachable!("{e:?}"),
    };
    match EnforcementPlan::new(&policy) {
        Ok(plan) => (policy, plan),
        Err(e) => unreachable!("{e}"),
    }
}

/// A parent cgroup of the test's own, so that counting its scopes is exact.
fn parent(test: &str) -> CgroupParent {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some(mount) = parse_cgroup2_mount(&mountinfo) else {
        unreachable!("these tests need a cgroup2 mount")
    };
    let path = mount.join("bee-tests").join(format!("scope-{test}"));
    match CgroupParent::open(path) {
        Ok(p) => p,
        Err(e) => unreachable!("cannot open the test parent cgroup (root needed): {e}"),
    }
}

/// A run the scope's kill ended (137), after which the plan was uninstalled from an emptied,
/// still present cgroup, and the cgroup is gone.
fn assert_killed_then_torn_down(report: &ScopeReport, fake: &Fake, parent: &CgroupParent) {
    assert_eq!(report.outcome.exit_code(), 137);
    assert!(matches!(
        fake.calls().last(),
        Some(Call::Uninstall {
            populated: false,
            cgroup_exists: true,
            ..
        })
    ));
    assert_eq!(scopes_left(parent), 0);
}

fn scopes_left(parent: &CgroupParent) -> usize {
    fs::read_dir(parent.path())
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                .count()
        })
        .unwrap_or(usize::MAX)
}

fn sh(script: &str) -> LaunchSpec {
    LaunchSpec::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .current_dir("/")
        .stdin(StdioMode::Null)
        .stdout(StdioMode::Null)
}

fn create<'a>(
    fake: &'a Fake,
    parent: &CgroupParent,
    policy: &'a CompiledPolicy,
    plan: &EnforcementPlan,
    options: ScopeOptions,
) -> Scope<'a, Fake> {
    match Scope::create(fake, parent, policy, plan, options) {
        Ok(s) => s,
        Err(e) => unreachable!("{e}"),
    }
}

#[test]
fn run_installs_first_tears_down_last_and_reports() {
    let parent = parent("run");
    let fake = Fake::new(&parent);
    let (policy, plan) = policy();
    let options = ScopeOptions {
        flags: bee_common::scope::SCOPE_AUDIT_ALLOWS,
        ..ScopeOptions::default()
    };
    let scope = create(&fake, &parent, &policy, &plan, options);
    let id = scope.cgroup_id();
    // A grandchild outlives the command; teardown must kill it before uninstalling.
    let spec = sh("setsid sleep 300 </dev/null >/dev/null 2>&1 & exit 3");
    let mut seen = Vec::new();
    let report = match scope.run(&spec, &mut |r| seen.push(r.explanation())) {
        Ok(r) => r,
        Err(e) => unreachable!("{e}"),
    };
    assert_eq!(report.outcome.exit_code(), 3);
    assert!(!report.outcome.timed_out);
    assert_eq!(report.cgroup_id, id);
    assert_eq!(report.records.len(), 1);
    assert_eq!(report.records[0].scope, id);
    assert_eq!(report.records[0].policy, "scope.toml");
    assert_eq!(
        seen,
        ["open /etc/shadow for read: no fs.read grant covers it"]
    );
    assert_eq!(
        fake.calls(),
        [
            Call::Install {
                cgroup_id: id,
                flags: bee_common::scope::SCOPE_AUDIT_ALLOWS,
                procs_then: 0,
            },
            Call::Uninstall {
                id: InstallId(id),
                cgroup_exists: true,
                populated: false,
            },
        ]
    );
    assert_eq!(scopes_left(&parent), 0);
}

#[test]
fn a_timeout_kills_the_scope_and_still_tears_down() {
    let parent = parent("timeout");
    let fake = Fake::new(&parent);
    let (policy, plan) = policy();
    let options = ScopeOptions {
        timeout: Some(std::time::Duration::from_millis(200)),
        poll: std::time::Duration::from_millis(20),
        ..ScopeOptions::default()
    };
    let scope = create(&fake, &parent, &policy, &plan, options);
    let report = scope.run(&sh("sleep 300 & sleep 300"), &mut |_| {});
    let report = match report {
        Ok(r) => r,
        Err(e) => unreachable!("{e}"),
    };
    assert!(report.outcome.timed_out);
    assert_killed_then_torn_down(&report, &fake, &parent);
}

#[test]
fn a_stopped_run_kills_the_scope_says_interrupted_and_still_tears_down() {
    let parent = parent("stop");
    let fake = Fake::new(&parent);
    let (policy, plan) = policy();
    let options = ScopeOptions {
        poll: std::time::Duration::from_millis(20),
        ..ScopeOptions::default()
    };
    let scope = create(&fake, &parent, &policy, &plan, options);
    let asked = Cell::new(0);
    let started = std::time::Instant::now();
    let report = scope.run_until(&sh("sleep 300 & sleep 300"), &mut |_| {}, &|| {
        asked.set(asked.get() + 1);
        asked.get() >= 3
    });
    let report = match report {
        Ok(r) => r,
        Err(e) => unreachable!("{e}"),
    };
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(report.outcome.interrupted && !report.outcome.timed_out);
    assert_killed_then_torn_down(&report, &fake, &parent);
}

#[test]
fn a_refused_install_starts_nothing_and_leaves_nothing() {
    let parent = parent("install");
    let mut fake = Fake::new(&parent);
    fake.fail_install = true;
    let (policy, plan) = policy();
    let r = Scope::create(&fake, &parent, &policy, &plan, ScopeOptions::default());
    assert!(matches!(
        r,
        Err(ScopeError::Enforce(EnforceError::Install { .. }))
    ));
    assert!(fake.calls().is_empty());
    assert_eq!(scopes_left(&parent), 0);
}

#[test]
fn a_failed_launch_still_uninstalls_and_removes_the_cgroup() {
    let parent = parent("launch");
    let fake = Fake::new(&parent);
    let (policy, plan) = policy();
    let scope = create(&fake, &parent, &policy, &plan, ScopeOptions::default());
    let r = scope.run(&LaunchSpec::new("/nonexistent/program"), &mut |_| {});
    assert!(matches!(r, Err(ScopeError::Launch(_))), "{r:?}");
    assert!(matches!(
        fake.calls().as_slice(),
        [
            Call::Install { .. },
            Call::Uninstall {
                cgroup_exists: true,
                populated: false,
                ..
            }
        ]
    ));
    assert_eq!(scopes_left(&parent), 0);
}

#[test]
fn dropping_an_unfinished_scope_kills_uninstalls_and_removes() {
    let parent = parent("drop");
    let fake = Fake::new(&parent);
    let (policy, plan) = policy();
    let scope = create(&fake, &parent, &policy, &plan, ScopeOptions::default());
    let launched = match scope.spawn(&sh("exec sleep 300")) {
        Ok(l) => l,
        Err(e) => unreachable!("{e}"),
    };
    let pid = launched.id();
    drop(scope);
    assert!(matches!(
        fake.calls().as_slice(),
        [
            Call::Install { .. },
            Call::Uninstall {
                cgroup_exists: true,
                populated: false,
                ..
            }
        ]
    ));
    assert_eq!(scopes_left(&parent), 0);
    let mut launched = launched;
    let status = launched.wait_timeout(None).ok().flatten();
    assert_eq!(status.map(crate::launch::exit_code), Some(137), "pid {pid}");
}

#[test]
fn a_failed_uninstall_is_reported_and_the_cgroup_still_goes() {
    let parent = parent("uninstall");
    let mut fake = Fake::new(&parent);
    fake.fail_uninstall = true;
    let (policy, plan) = policy();
    let scope = create(&fake, &parent, &policy, &plan, ScopeOptions::default());
    let r = scope.run(&sh("exit 0"), &mut |_| {});
    assert!(
        matches!(r, Err(ScopeError::Enforce(EnforceError::Uninstall { .. }))),
        "{r:?}"
    );
    assert_eq!(scopes_left(&parent), 0);
}

/// A bare scope cgroup below `parent` and `script` launched into it.
fn launched_in(parent: &CgroupParent, script: &str) -> (ScopeCgroup, Launched) {
    let cgroup = match parent.create_scope(&ScopeLimits::default()) {
        Ok(c) => c,
        Err(e) => unreachable!("{e}"),
    };
    match sh(script).spawn(&cgroup) {
        Ok(l) => (cgroup, l),
        Err(e) => unreachable!("{e}"),
    }
}

#[test]
fn a_stopped_wait_kills_the_cgroup_and_says_interrupted() {
    let parent = parent("wait-stop");
    let (cgroup, mut launched) = launched_in(&parent, "sleep 300 & sleep 300");
    let limits = WaitLimits {
        timeout: Some(Duration::from_secs(60)),
        poll: Some(Duration::from_millis(10)),
        kill: KillTarget::Cgroup,
        kill_wait: Duration::from_secs(5),
    };
    let mut asked = 0;
    let outcome = wait_and_kill(&mut launched, &cgroup, &limits, &mut || {
        asked += 1;
        asked == 3
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => unreachable!("{e}"),
    };
    assert!(outcome.interrupted && !outcome.timed_out);
    assert_eq!(outcome.exit_code(), 137);
    assert!(cgroup.wait_empty(Duration::from_secs(5)).is_ok());
    assert!(cgroup.remove().is_ok());
}

/// A zero timeout gives a running command no time: killed at once, with its process group.
/// A command that has ended before the kill lands is reported as it ended, not timed out.
#[test]
fn a_zero_timeout_kills_a_running_command_at_once_and_reports_an_ended_one_as_it_ended() {
    let parent = parent("wait-zero");
    let limits = WaitLimits {
        timeout: Some(Duration::ZERO),
        poll: None,
        kill: KillTarget::ProcessGroupAndCgroup,
        kill_wait: Duration::from_secs(5),
    };
    let wait = |launched: &mut Launched, cgroup: &ScopeCgroup| match wait_and_kill(
        launched,
        cgroup,
        &limits,
        &mut || false,
    ) {
        Ok(o) => o,
        Err(e) => unreachable!("{e}"),
    };
    let (cgroup, mut launched) = launched_in(&parent, "sleep 300 & sleep 300");
    let outcome = wait(&mut launched, &cgroup);
    assert!(outcome.timed_out && !outcome.interrupted);
    assert_eq!(outcome.exit_code(), 137);
    assert!(cgroup.empty(Duration::from_secs(5)).is_ok());
    assert!(cgroup.remove().is_ok());

    let (cgroup, mut launched) = launched_in(&parent, "exit 3");
    // Ended, not yet reaped: the kill finds a zombie.
    while cgroup.is_populated().unwrap_or(false) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let outcome = wait(&mut launched, &cgroup);
    assert!(!outcome.timed_out && !outcome.interrupted);
    assert_eq!(outcome.exit_code(), 3);
    assert!(cgroup.empty(Duration::from_secs(5)).is_ok());
    assert!(cgroup.remove().is_ok());
}
