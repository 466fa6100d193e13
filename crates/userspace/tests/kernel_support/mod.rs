//! Shared pieces of the kernel tests: one engine per test binary, test cgroups, policies,
//! scoped child processes, a helper mode of the test binary for syscalls busybox lacks, and
//! audit-event lookups.
//!
//! Tests run with `--test-threads=1` in the VM; every test makes its own cgroup, so events are
//! told apart by cgroup id.
//!
//! This file holds the harness (engine, cgroups, scopes, commands, events); `helper` re-executes
//! the test binary as a helper and `action` is the helper's typed [`Action`], which dispatches
//! to the files by concern: `fs_open`, `fs_attr`, `mount`, `uring`, `net`, `dns`, `process`,
//! `system` and `repeat`; `sys` has the small pieces they share.
#![allow(dead_code, reason = "each test binary uses part of the support module")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support: a step that fails fails the test"
)]

use std::error::Error;
use std::ffi::CString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};

use bee_common::{AuditEvent, Hook};
use bee_core::{CompileOptions, compile_str};
use bee_userspace::engine::{Engine, EngineOptions, InstalledPolicy};
use bee_userspace::plan::EnforcementPlan;

mod action;
mod dns;
mod fs_attr;
mod fs_open;
mod helper;
mod mount;
pub mod names;
pub mod net;
mod process;
mod repeat;
mod sys;
mod system;
mod uring;

pub use action::Action;
pub use helper::*;
pub use sys::POSIX_ACL_ACCESS;
use sys::{cstr, errno};

pub type TestResult = Result<(), Box<dyn Error>>;

pub const BUSYBOX: &str = "/bin/busybox";
pub const EPERM: i32 = 1;

/// Asserts the kernel is the one the VM runner booted, when it says which.
pub fn assert_expected_kernel(release: &str) {
    if let Ok(series) = std::env::var("BEE_VM_KERNEL") {
        assert!(
            release.starts_with(&format!("{series}.")),
            "booted for {series}, running {release}"
        );
    }
}

/// The engine of this test binary, loaded on first use. Panics (fails the test) if it cannot
/// be loaded: a kernel test never skips.
pub fn engine() -> MutexGuard<'static, Engine> {
    static ENGINE: OnceLock<Mutex<Engine>> = OnceLock::new();
    let m = ENGINE.get_or_init(|| {
        assert_expected_kernel(&fs::read_to_string("/proc/sys/kernel/osrelease").unwrap());
        let start = std::time::Instant::now();
        let engine = Engine::load(&EngineOptions::default()).expect("Engine::load");
        println!("Engine::load took {:?}", start.elapsed());
        Mutex::new(engine)
    });
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cgroup2 mount point.
pub fn cgroup_root() -> PathBuf {
    bee_userspace::support::parse_cgroup2_mount(
        &fs::read_to_string("/proc/self/mountinfo").unwrap(),
    )
    .expect("no cgroup2 mount")
}

/// A cgroup v2 directory; on drop its processes are killed and it is removed.
#[derive(Debug)]
pub struct Cgroup {
    pub path: PathBuf,
}

impl Cgroup {
    pub fn create(name: &str) -> Self {
        let path = cgroup_root().join(format!("bee-kt-{name}-{}", std::process::id()));
        let _ = fs::remove_dir(&path);
        fs::create_dir(&path).unwrap();
        Self { path }
    }

    /// The cgroup id `bpf_get_current_cgroup_id()` returns: the directory's inode number.
    pub fn id(&self) -> u64 {
        fs::metadata(&self.path).unwrap().ino()
    }

    pub fn procs(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    pub fn pids(&self) -> Vec<u32> {
        fs::read_to_string(self.procs())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    pub fn kill_all(&self) {
        let _ = fs::write(self.path.join("cgroup.kill"), "1");
        for _ in 0..200 {
            if self.pids().is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill_all();
        let _ = fs::remove_dir(&self.path);
    }
}

/// Compiles a policy text (paths absolute) and plans it.
pub fn plan(text: &str) -> EnforcementPlan {
    let options = CompileOptions {
        base: PathBuf::from("/"),
        home: None,
    };
    let compiled = compile_str("test.toml", text, &options)
        .unwrap_or_else(|e| panic!("policy does not compile: {e:?}\n{text}"));
    EnforcementPlan::new(&compiled.policy).unwrap_or_else(|e| panic!("plan: {e}\n{text}"))
}

/// The read and exec grants every scoped child needs to start: busybox, the dynamic loader and
/// shared libraries, and the test binary itself (the helper).
pub fn base_grants() -> String {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().display().to_string();
    format!(
        r#"
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{dir}/**"]
write = ["/dev/null"]

[exec]
allow = ["/bin/busybox", "/bin/*", "/lib/**", "/lib64/**", "/usr/lib/**", "{dir}/**"]
"#
    )
}

/// A cgroup with an installed policy; uninstalled and removed on drop.
pub struct Scope {
    pub cg: Cgroup,
    pub installed: Option<InstalledPolicy>,
}

impl Scope {
    /// Creates a cgroup and installs `text` (a whole policy) for it with scope `flags`.
    pub fn new(name: &str, text: &str, flags: u32) -> Self {
        Self::in_cgroup(Cgroup::create(name), text, flags)
    }

    /// Installs `text` for the existing cgroup `cg` with scope `flags`.
    pub fn in_cgroup(cg: Cgroup, text: &str, flags: u32) -> Self {
        let plan = plan(text);
        let installed = engine().install(&plan, cg.id(), flags).expect("install");
        let _ = events(&cg);
        Self {
            cg,
            installed: Some(installed),
        }
    }

    pub fn id(&self) -> u64 {
        self.cg.id()
    }

    pub fn policy_id(&self) -> u32 {
        self.installed.as_ref().map_or(0, |i| i.policy_id())
    }

    /// Uninstalls now (the cgroup stays).
    pub fn uninstall(&mut self) {
        if let Some(i) = self.installed.take() {
            engine().uninstall(i).expect("uninstall");
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        self.cg.kill_all();
        self.uninstall();
    }
}

/// A command that joins `cg` (if given) between fork and exec, so the exec is checked.
pub fn command_in(cg: Option<&Cgroup>, program: &str) -> Command {
    let mut cmd = Command::new(program);
    if let Some(cg) = cg {
        let procs = CString::new(cg.procs().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: the closure only calls async-signal-safe functions (open, write, close).
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
                libc::close(fd);
                if ok {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }
    cmd
}

/// Runs `program args…` in `cg`.
pub fn run(cg: Option<&Cgroup>, program: &str, args: &[&str]) -> Output {
    command_in(cg, program).args(args).output().unwrap()
}

/// Runs `busybox sh -c SCRIPT sh ARGS…` in `cg`.
pub fn sh(cg: Option<&Cgroup>, script: &str, args: &[&str]) -> Output {
    command_in(cg, BUSYBOX)
        .args(["sh", "-c", script, "sh"])
        .args(args)
        .output()
        .unwrap()
}

pub fn errno_of(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub fn show(out: &Output) -> String {
    format!(
        "status {:?}, stdout {:?}, stderr {:?}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts a busybox command failed with EPERM.
pub fn assert_eperm(out: &Output, what: &str) {
    assert!(
        !out.status.success(),
        "{what}: expected a denial: {}",
        show(out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
        "{what}: expected EPERM: {}",
        show(out)
    );
}

pub fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: expected success: {}",
        show(out)
    );
}

/// Drains the engine's events and returns those of `cg`; events of other cgroups are kept for
/// their own callers.
pub fn events(cg: &Cgroup) -> Vec<AuditEvent> {
    static STASH: Mutex<Vec<AuditEvent>> = Mutex::new(Vec::new());
    let id = cg.id();
    let mut e = engine();
    let mut stash = STASH.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let batch = e.read_events(1024);
        if batch.is_empty() {
            break;
        }
        stash.extend(batch);
    }
    let (mine, rest): (Vec<_>, Vec<_>) = stash.drain(..).partition(|ev| ev.cgroup_id == id);
    *stash = rest;
    mine
}

pub fn path_of(ev: &AuditEvent) -> String {
    String::from_utf8_lossy(ev.path()).into_owned()
}

/// Finds the denial of `hook` on `path` among `evs`, and checks its common fields.
pub fn denial<'a>(evs: &'a [AuditEvent], hook: Hook, path: &str, scope: &Scope) -> &'a AuditEvent {
    let ev = evs
        .iter()
        .find(|e| e.hook == hook as u32 && path_of(e) == path && e.error != 0)
        .unwrap_or_else(|| {
            let seen: Vec<String> = evs
                .iter()
                .map(|e| {
                    format!(
                        "{:?} {} err {}",
                        Hook::from_raw(e.hook),
                        path_of(e),
                        e.error
                    )
                })
                .collect();
            panic!("no {hook:?} denial of {path}; events: {seen:#?}")
        });
    assert_eq!(ev.error, -EPERM);
    assert_eq!(ev.cgroup_id, scope.id());
    assert_eq!(ev.policy_id, scope.policy_id());
    assert!(ev.tgid > 1 && ev.pid > 1);
    assert_eq!(ev.flags & bee_common::event::EVENT_ALLOWED, 0);
    ev
}

/// A scratch directory, removed on drop.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Self {
        let path = PathBuf::from(format!("/tmp/bee-kt-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        Self { path }
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn s(&self, name: &str) -> String {
        self.join(name).display().to_string()
    }

    pub fn write(&self, name: &str, content: &str) -> String {
        let p = self.join(name);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, content).unwrap();
        p.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Defines the `helper_entry` test that runs helper actions when [`HELPER_ENV`] is set.
#[macro_export]
macro_rules! helper_entry {
    () => {
        #[test]
        #[ignore = "not a test: the tests run it in a child process (with --ignored) as their helper"]
        fn helper_entry() {
            kernel_support::helper_main();
        }
    };
}

/// Creates `n` nested directories named `seg` under `base` (with *at() calls, so the chain
/// may exceed PATH_MAX) and a file `f` holding "x\n" at the bottom.
pub fn make_chain(base: &Path, seg: &str, n: u32) {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut fd = libc::open(cstr(base.to_str().unwrap()).as_ptr(), libc::O_PATH);
        assert!(fd >= 0);
        let s = cstr(seg);
        for _ in 0..n {
            libc::mkdirat(fd, s.as_ptr(), 0o755);
            fd = libc::openat(fd, s.as_ptr(), libc::O_PATH | libc::O_DIRECTORY);
            assert!(fd >= 0, "openat: {}", errno());
        }
        let f = libc::openat(
            fd,
            cstr("f").as_ptr(),
            libc::O_WRONLY | libc::O_CREAT,
            0o644,
        );
        assert!(f >= 0, "create f: {}", errno());
        assert_eq!(libc::write(f, b"x\n".as_ptr().cast(), 2), 2);
        libc::close(f);
    }
}

/// `stat` of a path in the kernel's `(dev, ino)` terms.
pub fn kernel_id(path: &Path) -> (u32, u64) {
    let m = fs::metadata(path).unwrap();
    (bee_userspace::plan::kernel_dev(m.dev()).unwrap(), m.ino())
}
