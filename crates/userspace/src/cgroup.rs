//! Scope cgroups: one cgroup v2 directory per scope, created below a bee parent, killed and
//! removed when the scope ends.
//!
//! Why one file of this length: every operation on a scope's cgroup directory (create, move,
//! kill, wait until empty, remove) and the checks on its parent, which must stay consistent
//! with one another.
//!
//! A scope's identity in the kernel is its cgroup id, which is the inode number of the cgroup's
//! directory on the cgroup2 file system (what `bpf_get_current_cgroup_id()` returns for a task
//! in it). The interface files used here are documented in the kernel's
//! `Documentation/admin-guide/cgroup-v2.rst`:
//!
//! * `cgroup.procs` — the processes in the cgroup; writing a pid (or `0`, "the writer") moves it;
//! * `cgroup.events` — `populated 0|1`: whether the cgroup or a descendant has live processes;
//! * `cgroup.kill` (Linux 5.14) — writing `1` SIGKILLs every process in the cgroup subtree;
//! * `cgroup.subtree_control` — controllers enabled for the children of a cgroup;
//! * `pids.max`, `memory.max` — the limits of the `pids` and `memory` controllers.
//!
//! On hosts where `pids` or `memory` are bound to a cgroup v1 hierarchy (hybrid mode), or not
//! delegated, the controller is unavailable in cgroup v2: [`CgroupParent::controllers`] says so
//! and a scope that asks for that limit is refused ([`CgroupError::ControllerUnavailable`]).

use std::fs;
use std::io::{self, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::parse_cgroup2_mount;

mod sweep;

pub use sweep::SweepReport;
pub(crate) use sweep::start_time;

/// Name of the directory below the cgroup2 mount that holds every scope.
pub const BEE_PARENT: &str = "bee";

/// `CGROUP2_SUPER_MAGIC` (`include/uapi/linux/magic.h`): `statfs(2)` `f_type` of cgroup2.
const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;

/// The controllers bee enables for its scopes when the hierarchy offers them.
pub const CONTROLLERS: [&str; 2] = ["pids", "memory"];

/// Errors of cgroup management. Each names the file and the operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CgroupError {
    /// `/proc/self/mountinfo` lists no cgroup2 mount.
    #[error("no cgroup v2 hierarchy is mounted (no cgroup2 entry in /proc/self/mountinfo)")]
    NoCgroup2,
    /// The given parent directory is not on a cgroup2 file system.
    #[error("`{path}` is not on a cgroup2 file system")]
    NotCgroup2 {
        /// The directory.
        path: PathBuf,
    },
    /// A file operation failed.
    #[error("{op} `{path}` failed: {source}")]
    Io {
        /// What was done: `mkdir`, `write`, `read`, `rmdir`, `open`, `stat`.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A limit was asked for but its controller is not available below the parent.
    #[error(
        "cannot set {setting}: the `{controller}` controller is unavailable in `{parent}` ({why})"
    )]
    ControllerUnavailable {
        /// The controller, e.g. `pids`.
        controller: &'static str,
        /// The interface file that would have held the limit, e.g. `pids.max`.
        setting: &'static str,
        /// The bee parent cgroup.
        parent: PathBuf,
        /// Why it is unavailable.
        why: String,
    },
    /// This process could not move a command into a scope below the parent: the kernel
    /// requires write access to the `cgroup.procs` of the nearest common ancestor of the
    /// process's own cgroup and the scope (`cgroup_procs_write_permission` in
    /// `kernel/cgroup/cgroup.c`).
    #[error(
        "this process's cgroup `{own}` and the scopes below `{parent}` meet at `{ancestor}`, \
         whose cgroup.procs this process may not write: the kernel would refuse to move a \
         command into its scope"
    )]
    CannotJoin {
        /// This process's cgroup.
        own: PathBuf,
        /// The bee parent cgroup.
        parent: PathBuf,
        /// Their nearest common ancestor.
        ancestor: PathBuf,
    },
    /// Processes remained in the scope after killing and waiting.
    #[error("`{path}` still has processes after {waited:?}")]
    StillPopulated {
        /// The scope cgroup.
        path: PathBuf,
        /// How long bee waited.
        waited: Duration,
    },
}

/// `populated` of `cgroup.events` in the cgroup directory `dir`: whether a live process is in
/// the cgroup or below; `None` when the file has no such line, which callers decide about.
///
/// # Errors
/// Reading the file failed (the cgroup is gone, or not a cgroup v2 directory).
pub(crate) fn events_populated(dir: &Path) -> io::Result<Option<bool>> {
    let text = fs::read_to_string(dir.join("cgroup.events"))?;
    Ok(text.lines().find_map(|l| match l.split_once(' ') {
        Some(("populated", v)) => Some(v.trim() != "0"),
        _ => None,
    }))
}

/// The cgroup v2 directory of process `pid` (`None`: this process): the `0::` line of
/// `/proc/PID/cgroup`, below `mount`, the cgroup2 mount ([`parse_cgroup2_mount`]).
///
/// # Errors
/// Reading the file failed (a process gone: `NotFound`); `InvalidData` when it has no cgroup
/// v2 (`0::`) line.
pub fn process_cgroup_dir(pid: Option<u32>, mount: &Path) -> io::Result<PathBuf> {
    let file = match pid {
        Some(pid) => format!("/proc/{pid}/cgroup"),
        None => "/proc/self/cgroup".to_owned(),
    };
    let text = fs::read_to_string(file)?;
    let rel = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no cgroup v2 (`0::`) line"))?;
    Ok(mount.join(rel.trim().trim_start_matches('/')))
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |source| CgroupError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Whether one controller can be used in scopes, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerStatus {
    /// The controller's name (`pids`, `memory`).
    pub name: &'static str,
    /// True when it is enabled in the parent's `cgroup.subtree_control`.
    pub enabled: bool,
    /// What was found: where it is enabled, or why it is not.
    pub reason: String,
}

/// Resource limits of a scope cgroup. `None` leaves the limit at the kernel default (`max`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScopeLimits {
    /// `pids.max`: most tasks (processes and threads) alive in the scope at once.
    pub pids_max: Option<u64>,
    /// `memory.max`: the memory hard limit in bytes; above it the OOM killer acts in the scope.
    pub memory_max: Option<u64>,
}

/// The bee parent cgroup (`<cgroup2 mount>/bee`), under which scopes are created.
#[derive(Debug, Clone)]
pub struct CgroupParent {
    path: PathBuf,
    controllers: Vec<ControllerStatus>,
}

impl CgroupParent {
    /// Opens (creating it if needed) [`BEE_PARENT`] below the cgroup2 mount listed in
    /// `/proc/self/mountinfo`, and enables the [`CONTROLLERS`] the hierarchy offers.
    ///
    /// # Errors
    /// [`CgroupError::NoCgroup2`] without a cgroup2 mount; [`CgroupError::Io`] when the
    /// directory cannot be created.
    pub fn open_default() -> Result<Self, CgroupError> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")
            .map_err(io_err("read", Path::new("/proc/self/mountinfo")))?;
        let mount = parse_cgroup2_mount(&mountinfo).ok_or(CgroupError::NoCgroup2)?;
        Self::open(mount.join(BEE_PARENT))
    }

    /// Opens (creating it and its missing ancestors if needed) the parent cgroup at `path`,
    /// which must be on a cgroup2 file system, and enables the [`CONTROLLERS`] the hierarchy
    /// offers. A controller that cannot be enabled is recorded in
    /// [`CgroupParent::controllers`] with the reason, not treated as an error.
    ///
    /// # Errors
    /// [`CgroupError::NotCgroup2`] or [`CgroupError::Io`].
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, CgroupError> {
        let path = path.into();
        fs::create_dir_all(&path).map_err(io_err("mkdir", &path))?;
        if !is_cgroup2(&path)? {
            return Err(CgroupError::NotCgroup2 { path });
        }
        let controllers = CONTROLLERS
            .iter()
            .map(|&name| enable_controller(&path, name))
            .collect();
        Ok(Self { path, controllers })
    }

    /// Checks, before any scope exists, that this process will be able to move a command
    /// into a scope below this parent: with its effective uid and capabilities
    /// (`faccessat(2)`, `AT_EACCESS`) it must be able to write the `cgroup.procs` of the
    /// nearest common ancestor of its own cgroup (`/proc/self/cgroup`) and the parent. Root
    /// can; a non-root user can when the parent is delegated to it and bee runs in a cgroup
    /// inside that delegated subtree.
    ///
    /// # Errors
    /// [`CgroupError::CannotJoin`]; [`CgroupError::Io`] or [`CgroupError::NoCgroup2`] when
    /// this process's cgroup cannot be found.
    pub fn check_join(&self) -> Result<(), CgroupError> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")
            .map_err(io_err("read", Path::new("/proc/self/mountinfo")))?;
        let mount = parse_cgroup2_mount(&mountinfo).ok_or(CgroupError::NoCgroup2)?;
        let own_file = Path::new("/proc/self/cgroup");
        let own = process_cgroup_dir(None, &mount).map_err(|e| {
            let op = if e.kind() == io::ErrorKind::InvalidData {
                "parse"
            } else {
                "read"
            };
            io_err(op, own_file)(e)
        })?;
        let ancestor = common_ancestor(&own, &self.path);
        let procs = ancestor.join("cgroup.procs");
        let c = std::ffi::CString::new(procs.as_os_str().as_encoded_bytes()).map_err(|_| {
            io_err("faccessat", &procs)(io::Error::from(io::ErrorKind::InvalidInput))
        })?;
        // SAFETY: `c` is a NUL-terminated path; faccessat(2) only reads it.
        let rc =
            unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
        if rc == 0 {
            Ok(())
        } else {
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::PermissionDenied => Err(CgroupError::CannotJoin {
                    own,
                    parent: self.path.clone(),
                    ancestor,
                }),
                _ => Err(io_err("faccessat", &procs)(err)),
            }
        }
    }

    /// The parent cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state of each of the [`CONTROLLERS`] for scopes below this parent.
    pub fn controllers(&self) -> &[ControllerStatus] {
        &self.controllers
    }

    /// True when `name` is enabled for scopes below this parent.
    pub fn has_controller(&self, name: &str) -> bool {
        self.controllers.iter().any(|c| c.name == name && c.enabled)
    }

    /// Creates a scope cgroup with a fresh name (`<pid>-<starttime>-<sequence>`: this
    /// process, so that [`CgroupParent::sweep_stale`] can tell whether its maker is gone) and
    /// sets `limits`. The scope holds a shared `flock(2)` on its directory until it is
    /// dropped, which says the same to a sweep in another PID namespace.
    ///
    /// # Errors
    /// [`CgroupError::ControllerUnavailable`] when a limit's controller is not enabled (nothing
    /// is created then); [`CgroupError::Io`] when creating the directory or writing a limit fails
    /// (the directory is removed again).
    pub fn create_scope(&self, limits: &ScopeLimits) -> Result<ScopeCgroup, CgroupError> {
        let wanted = [
            ("pids", "pids.max", limits.pids_max),
            ("memory", "memory.max", limits.memory_max),
        ];
        for (controller, setting, value) in wanted {
            if value.is_some() && !self.has_controller(controller) {
                let why = self
                    .controllers
                    .iter()
                    .find(|c| c.name == controller)
                    .map_or_else(|| "not probed".to_owned(), |c| c.reason.clone());
                return Err(CgroupError::ControllerUnavailable {
                    controller,
                    setting,
                    parent: self.path.clone(),
                    why,
                });
            }
        }
        let scope = self.mkdir_unique()?;
        for (_, setting, value) in wanted {
            if let Some(v) = value {
                write_file(&scope.path.join(setting), &v.to_string())?;
            }
        }
        Ok(scope)
    }

    /// The existing scope cgroup `name` directly below this parent (e.g. one an earlier
    /// process made and did not remove), to tear it down; `None` when `name` is not one
    /// plain path component or no such directory (not a link) is there.
    ///
    /// # Errors
    /// [`CgroupError::Io`] when it exists but cannot be examined.
    pub fn existing_scope(&self, name: &str) -> Result<Option<ScopeCgroup>, CgroupError> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Ok(None);
        }
        let path = self.path.join(name);
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("stat", &path)(e)),
        };
        if !meta.is_dir() {
            return Ok(None);
        }
        Ok(Some(ScopeCgroup {
            path,
            name: name.to_owned(),
            id: meta.ino(),
            removed: false,
            killed: AtomicBool::new(false),
            _lock: None,
        }))
    }

    fn mkdir_unique(&self) -> Result<ScopeCgroup, CgroupError> {
        static SEQUENCE: AtomicU64 = AtomicU64::new(0);
        loop {
            let name = sweep::scope_name(SEQUENCE.fetch_add(1, Ordering::Relaxed))?;
            let path = self.path.join(&name);
            match fs::create_dir(&path) {
                Ok(()) => {
                    let id = fs::metadata(&path).map_err(io_err("stat", &path))?.ino();
                    // `None`: a sweep in another PID namespace took it for a dead maker's.
                    let Some(lock) = sweep::lock_new(&path, id)? else {
                        continue;
                    };
                    return Ok(ScopeCgroup {
                        path,
                        name,
                        id,
                        removed: false,
                        killed: AtomicBool::new(false),
                        _lock: Some(lock),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err("mkdir", &path)(e)),
            }
        }
    }
}

/// The longest common leading path of `a` and `b`, component by component.
fn common_ancestor(a: &Path, b: &Path) -> PathBuf {
    a.components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

fn is_cgroup2(path: &Path) -> Result<bool, CgroupError> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
        CgroupError::Io {
            op: "statfs",
            path: path.to_owned(),
            source: io::Error::from(io::ErrorKind::InvalidInput),
        }
    })?;
    let mut buf = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated string and `buf` points to writable memory of the
    // size statfs(2) fills.
    let rc = unsafe { libc::statfs(c.as_ptr(), buf.as_mut_ptr()) };
    if rc != 0 {
        return Err(io_err("statfs", path)(io::Error::last_os_error()));
    }
    // SAFETY: statfs returned 0, so it initialised the structure.
    let st = unsafe { buf.assume_init() };
    // `f_type`'s integer type differs between targets.
    Ok(u64::try_from(st.f_type).is_ok_and(|t| t == CGROUP2_SUPER_MAGIC))
}

/// Makes `controller` available to the children of `parent` by enabling it in the
/// `cgroup.subtree_control` of every ancestor up to the mount root and of `parent` itself.
fn enable_controller(parent: &Path, controller: &'static str) -> ControllerStatus {
    let mut chain = Vec::new();
    let mut dir = Some(parent);
    while let Some(d) = dir {
        if !d.join("cgroup.procs").exists() {
            break;
        }
        chain.push(d.to_owned());
        dir = d.parent();
    }
    chain.reverse();
    let off = |reason: String| ControllerStatus {
        name: controller,
        enabled: false,
        reason,
    };
    for dir in &chain {
        let available = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        if !available.split_whitespace().any(|c| c == controller) {
            return off(format!(
                "not listed in {}/cgroup.controllers (bound to a cgroup v1 hierarchy, or not \
                 delegated)",
                dir.display()
            ));
        }
        let control = dir.join("cgroup.subtree_control");
        let enabled = fs::read_to_string(&control).unwrap_or_default();
        if enabled.split_whitespace().any(|c| c == controller) {
            continue;
        }
        if let Err(e) = write_file(&control, &format!("+{controller}")) {
            return off(e.to_string());
        }
    }
    ControllerStatus {
        name: controller,
        enabled: true,
        reason: format!("enabled in {}/cgroup.subtree_control", parent.display()),
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), CgroupError> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err("open", path))?;
    f.write_all(text.as_bytes()).map_err(io_err("write", path))
}

/// How [`ScopeCgroup::kill_with`] kills the processes of a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillMethod {
    /// Write `1` to `cgroup.kill` (Linux 5.14): the kernel SIGKILLs the whole subtree, and
    /// processes forked meanwhile cannot escape.
    CgroupKill,
    /// Send SIGKILL to every pid in `cgroup.procs`, again until it reads empty (for kernels
    /// without `cgroup.kill`). The cgroup is frozen meanwhile when `cgroup.freeze` exists, so
    /// that nothing forks between reading and killing.
    Signals,
}

/// A scope's cgroup. Dropping it kills what is left in it and removes the directory
/// (best effort; use [`ScopeCgroup::teardown`] to see errors).
#[derive(Debug)]
pub struct ScopeCgroup {
    path: PathBuf,
    name: String,
    id: u64,
    removed: bool,
    /// Whether bee wrote `cgroup.kill` here (see [`ScopeCgroup::was_killed`]).
    killed: AtomicBool,
    /// The maker's shared lock on the directory (scopes this process made): held until the
    /// scope is dropped, released by the kernel however the process ends.
    _lock: Option<OwnedFd>,
}

impl ScopeCgroup {
    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's name below the parent.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cgroup id: the directory's inode number, as `bpf_get_current_cgroup_id()` reports
    /// it for tasks in this cgroup.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Opens `cgroup.procs` for writing (close-on-exec), for a child to join the cgroup by
    /// writing `0` to it before `execve`.
    ///
    /// # Errors
    /// [`CgroupError::Io`].
    pub fn open_procs(&self) -> Result<OwnedFd, CgroupError> {
        let path = self.path.join("cgroup.procs");
        let f = fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
            .map_err(io_err("open", &path))?;
        Ok(f.into())
    }

    /// The pids in `cgroup.procs` (this cgroup only, not descendants).
    ///
    /// # Errors
    /// [`CgroupError::Io`].
    pub fn procs(&self) -> Result<Vec<u32>, CgroupError> {
        let path = self.path.join("cgroup.procs");
        let text = fs::read_to_string(&path).map_err(io_err("read", &path))?;
        Ok(text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect())
    }

    /// `populated` of `cgroup.events`: true while a live process is in the cgroup or below.
    ///
    /// # Errors
    /// [`CgroupError::Io`].
    pub fn is_populated(&self) -> Result<bool, CgroupError> {
        let populated = events_populated(&self.path)
            .map_err(io_err("read", &self.path.join("cgroup.events")))?;
        match populated {
            Some(p) => Ok(p),
            None => Ok(!self.procs()?.is_empty()),
        }
    }

    /// Whether bee has written `cgroup.kill` in this cgroup. Some kernels then kill every
    /// child later born into it with `clone3(CLONE_INTO_CGROUP)` (Linux 6.18.44 here: the
    /// fork compares the kill sequence of the parent's cgroup with the target's), so the
    /// launcher joins such a cgroup through `cgroup.procs` instead
    /// ([`crate::launch::LaunchSpec::spawn`]).
    pub fn was_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Kills every process in the scope, with `cgroup.kill` where the kernel has it and
    /// signals otherwise; returns the method used. Does not wait: see
    /// [`ScopeCgroup::wait_empty`].
    ///
    /// # Errors
    /// [`CgroupError::Io`].
    pub fn kill(&self) -> Result<KillMethod, CgroupError> {
        let method = if self.path.join("cgroup.kill").exists() {
            KillMethod::CgroupKill
        } else {
            KillMethod::Signals
        };
        self.kill_with(method)?;
        Ok(method)
    }

    /// Kills every process in the scope with `method`.
    ///
    /// # Errors
    /// [`CgroupError::Io`]; [`CgroupError::StillPopulated`] when signals did not empty
    /// `cgroup.procs` within five seconds.
    pub fn kill_with(&self, method: KillMethod) -> Result<(), CgroupError> {
        match method {
            KillMethod::CgroupKill => {
                self.killed.store(true, Ordering::SeqCst);
                write_file(&self.path.join("cgroup.kill"), "1")
            }
            KillMethod::Signals => self.kill_by_signals(),
        }
    }

    fn kill_by_signals(&self) -> Result<(), CgroupError> {
        let freeze = self.path.join("cgroup.freeze");
        let frozen = freeze.exists() && write_file(&freeze, "1").is_ok();
        let start = Instant::now();
        let limit = Duration::from_secs(5);
        let result = loop {
            let pids = match self.procs() {
                Ok(p) => p,
                Err(e) => break Err(e),
            };
            if pids.is_empty() {
                break Ok(());
            }
            if start.elapsed() > limit {
                break Err(CgroupError::StillPopulated {
                    path: self.path.clone(),
                    waited: limit,
                });
            }
            for pid in pids {
                let Ok(pid) = libc::pid_t::try_from(pid) else {
                    continue;
                };
                // SAFETY: kill(2) has no memory-safety preconditions. ESRCH (already gone) is
                // fine; anything else shows up as a pid that stays listed.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        if frozen {
            // Killed tasks leave a frozen cgroup too; thawing lets the stragglers die as well.
            let _ = write_file(&freeze, "0");
        }
        result
    }

    /// Waits until no live process is left in the scope (`populated 0` in `cgroup.events`).
    ///
    /// # Errors
    /// [`CgroupError::StillPopulated`] after `timeout`; [`CgroupError::Io`].
    pub fn wait_empty(&self, timeout: Duration) -> Result<(), CgroupError> {
        let start = Instant::now();
        let mut pause = Duration::from_micros(200);
        while self.is_populated()? {
            if start.elapsed() >= timeout {
                return Err(CgroupError::StillPopulated {
                    path: self.path.clone(),
                    waited: timeout,
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Kills whatever is in the scope and waits up to `timeout` until it is empty; nothing
    /// when it is empty already.
    ///
    /// # Errors
    /// As [`ScopeCgroup::is_populated`], [`ScopeCgroup::kill`] and
    /// [`ScopeCgroup::wait_empty`] ([`CgroupError::StillPopulated`] when processes survive).
    pub fn empty(&self, timeout: Duration) -> Result<(), CgroupError> {
        if self.is_populated()? {
            self.kill()?;
            self.wait_empty(timeout)?;
        }
        Ok(())
    }

    /// Removes the (empty) cgroup directory.
    ///
    /// # Errors
    /// [`CgroupError::Io`], e.g. `EBUSY` while processes remain. The scope is then kept, and
    /// dropping it tries again.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.rmdir()
    }

    fn rmdir(&mut self) -> Result<(), CgroupError> {
        match fs::remove_dir(&self.path) {
            Ok(()) => {
                self.removed = true;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.removed = true;
                Ok(())
            }
            Err(e) => Err(io_err("rmdir", &self.path)(e)),
        }
    }

    /// Kills what is left in the scope, waits up to `timeout` for it to be empty, and removes
    /// the directory.
    ///
    /// # Errors
    /// As [`ScopeCgroup::kill`], [`ScopeCgroup::wait_empty`] and [`ScopeCgroup::remove`].
    pub fn teardown(mut self, timeout: Duration) -> Result<(), CgroupError> {
        self.empty(timeout)?;
        self.rmdir()
    }
}

impl Drop for ScopeCgroup {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        if self.is_populated().unwrap_or(true) {
            let _ = self.kill();
            let _ = self.wait_empty(Duration::from_secs(2));
        }
        let _ = self.rmdir();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_ancestor_of_cgroup_paths() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            common_ancestor(&p("/sys/fs/cgroup/bee/session"), &p("/sys/fs/cgroup/bee")),
            p("/sys/fs/cgroup/bee")
        );
        assert_eq!(
            common_ancestor(&p("/sys/fs/cgroup"), &p("/sys/fs/cgroup/bee")),
            p("/sys/fs/cgroup")
        );
        assert_eq!(
            common_ancestor(&p("/sys/fs/cgroup/user.slice"), &p("/sys/fs/cgroup/bee")),
            p("/sys/fs/cgroup")
        );
        // Components, not bytes: `bee2` is not below `bee`.
        assert_eq!(
            common_ancestor(&p("/sys/fs/cgroup/bee2"), &p("/sys/fs/cgroup/bee")),
            p("/sys/fs/cgroup")
        );
    }
}
