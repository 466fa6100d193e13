//! Who made a scope cgroup, and the sweep of the scopes whose maker is gone.
//!
//! A scope's name says which process made it: `<pid>-<starttime>-<seq>`, with the maker's
//! start time (field 22 of `/proc/PID/stat`, clock ticks since boot) so that a later process
//! given the same pid is not taken for it. Its maker also holds a shared `flock(2)` on the
//! scope's directory for as long as the scope lives: the kernel drops it when the last
//! descriptor closes, however the process ends. A scope is stale when both say its maker is
//! gone — no process with that pid and start time, and the lock free — and then it is removed
//! unless processes still live in it.
//!
//! The lock covers what the name cannot: a maker in another PID namespace (whose pid means
//! another process here). The name covers the moment between `mkdir` and `flock`.
//!
//! Names of bee before the start time was in them (`<pid>-<seq>-<nanos>`, nanoseconds always
//! nine digits) are swept when no process has their pid; a process that has it may be their
//! maker, so they are kept then.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::{CgroupError, CgroupParent, events_populated, io_err};

/// The maker of a scope, as its name records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScopeOwner {
    /// `<pid>-<starttime>-<seq>`: the process `pid` that started at `start` (clock ticks
    /// since boot).
    Process {
        /// The maker's pid, in its PID namespace.
        pid: u32,
        /// Its start time.
        start: u64,
    },
    /// `<pid>-<seq>-<nanos>` (nanoseconds: nine digits), the names of earlier bee: only the
    /// pid is known.
    Pid(u32),
}

impl ScopeOwner {
    /// The maker named by the scope name `name`; `None` for a name bee does not make (three
    /// `-`-separated decimal fields). A third field of nine digits is read as an earlier
    /// bee's nanoseconds: it would take 10^8 scopes of one process to make such a sequence
    /// number, and the reading that knows less keeps more.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        let mut fields = name.split('-');
        let (a, b, c) = (fields.next()?, fields.next()?, fields.next()?);
        let decimal =
            |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
        if fields.next().is_some() || ![a, b, c].into_iter().all(decimal) {
            return None;
        }
        let pid = a.parse().ok()?;
        if c.len() == 9 {
            return Some(Self::Pid(pid));
        }
        Some(Self::Process {
            pid,
            start: b.parse().ok()?,
        })
    }

    /// Whether the maker may still run: a process with its pid (and start time, when the name
    /// has it) exists in this process's PID namespace.
    pub(crate) fn alive(self) -> bool {
        match self {
            Self::Process { pid, start } => start_time(&pid.to_string()) == Some(start),
            Self::Pid(pid) => Path::new(&format!("/proc/{pid}")).exists(),
        }
    }
}

/// The start time in the text of a `/proc/PID/stat` file: field 22, clock ticks since boot.
pub(crate) fn parse_start_time(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The start time of process `pid` (`self` for this one) from `/proc/PID/stat`; `None` when
/// there is no such process.
pub(crate) fn start_time(pid: &str) -> Option<u64> {
    parse_start_time(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The name of this process's scope number `seq`: `<pid>-<starttime>-<seq>`.
///
/// # Errors
/// [`CgroupError::Io`] when `/proc/self/stat` cannot be read or parsed.
pub(super) fn scope_name(seq: u64) -> Result<String, CgroupError> {
    let stat = Path::new("/proc/self/stat");
    let start = start_time("self").ok_or_else(|| {
        io_err("read", stat)(io::Error::new(
            io::ErrorKind::InvalidData,
            "no start time (field 22)",
        ))
    })?;
    Ok(format!("{}-{start}-{seq}", std::process::id()))
}

/// Takes the maker's shared lock on the scope directory `path`, just made. `None` when the
/// directory is no longer the one made (inode `id`) or a sweep holds it: a sweeper took the
/// name for a dead maker's, and the caller makes another.
///
/// # Errors
/// [`CgroupError::Io`] when the directory cannot be opened or locked.
pub(super) fn lock_new(path: &Path, id: u64) -> Result<Option<OwnedFd>, CgroupError> {
    let dir: OwnedFd = match open_dir(path) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("open", path)(e)),
    };
    match flock(&dir, libc::LOCK_SH | libc::LOCK_NB) {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        Err(e) => return Err(io_err("flock", path)(e)),
    }
    match fs::symlink_metadata(path) {
        Ok(m) if m.ino() == id => Ok(Some(dir)),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("stat", path)(e)),
    }
}

fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    Ok(f.into())
}

/// `flock(fd, op)`: `Ok(false)` when `LOCK_NB` found it held.
fn flock(fd: &OwnedFd, op: libc::c_int) -> io::Result<bool> {
    // SAFETY: flock(2) on a descriptor this function borrows; no memory is passed.
    if unsafe { libc::flock(fd.as_raw_fd(), op) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// What [`CgroupParent::sweep_stale`] did.
#[derive(Debug, Default)]
pub struct SweepReport {
    /// The stale scopes removed (their directories, and any empty cgroups below them).
    pub removed: Vec<PathBuf>,
    /// Scopes whose maker is gone but in which processes still live: left as they are. Under
    /// the BPF LSM the engine keeps enforcing for them (its pins stay while a scope has
    /// processes); under Landlock the confinement is the processes' own.
    pub populated: Vec<PathBuf>,
    /// What could not be done, each naming its path: a sweep never fails, it reports.
    pub errors: Vec<CgroupError>,
}

impl CgroupParent {
    /// Removes the scope cgroups below this parent whose maker is gone (see the module
    /// documentation: no process with the pid and start time of the name, and the maker's
    /// lock free) and in which no process lives, with the empty cgroups below them. Scopes
    /// of live makers, populated scopes and directories whose names are not scope names are
    /// left alone; a scope that gets a process or goes meanwhile (`EBUSY`, `ENOENT`) is
    /// someone else's, and skipped.
    ///
    /// Housekeeping: a failure is recorded in [`SweepReport::errors`], never returned, and
    /// the sweep goes on with the next scope.
    pub fn sweep_stale(&self) -> SweepReport {
        let mut report = SweepReport::default();
        let entries = match fs::read_dir(&self.path) {
            Ok(e) => e,
            Err(e) => {
                report.errors.push(io_err("readdir", &self.path)(e));
                return report;
            }
        };
        for entry in entries.flatten() {
            let Some(owner) = entry.file_name().to_str().and_then(ScopeOwner::parse) else {
                continue;
            };
            if owner.alive() || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            sweep_one(&entry.path(), &mut report);
        }
        report
    }

    /// [`CgroupParent::sweep_stale`], the first time a process calls it (for any parent);
    /// `None` afterwards. A command opens its parent again for each session or episode, and
    /// one sweep at its start is enough.
    pub fn sweep_stale_once(&self) -> Option<SweepReport> {
        static SWEPT: AtomicBool = AtomicBool::new(false);
        (!SWEPT.swap(true, Ordering::AcqRel)).then(|| self.sweep_stale())
    }
}

impl SweepReport {
    /// True when the sweep found nothing to say: nothing removed, kept or failed.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.populated.is_empty() && self.errors.is_empty()
    }

    /// One line for a log or `bee check`: how many stale scopes were removed below `parent`,
    /// how many were kept because processes live in them, and how many could not be swept
    /// (the first error, which names its path).
    pub fn summary(&self, parent: &Path) -> String {
        if self.is_empty() {
            return format!("no stale scope cgroups below {}", parent.display());
        }
        let mut text = format!(
            "{} stale scope cgroup{} removed below {}",
            self.removed.len(),
            if self.removed.len() == 1 { "" } else { "s" },
            parent.display()
        );
        if !self.populated.is_empty() {
            text.push_str(&format!(
                "; {} of ended bee processes kept: processes still live in them",
                self.populated.len()
            ));
        }
        if let Some(first) = self.errors.first() {
            text.push_str(&format!(
                "; {} could not be swept ({first})",
                self.errors.len()
            ));
        }
        text
    }
}

/// Removes the scope `dir`, whose maker's name says it is gone, unless its maker's lock is
/// held or processes live in it.
fn sweep_one(dir: &Path, report: &mut SweepReport) {
    let gone = |e: &io::Error| e.kind() == io::ErrorKind::NotFound;
    let lock = match open_dir(dir) {
        Ok(d) => d,
        Err(e) if gone(&e) => return,
        Err(e) => return report.errors.push(io_err("open", dir)(e)),
    };
    // Held while the scope is examined and removed: a maker that locks it meanwhile finds it
    // gone, and makes another ([`lock_new`]).
    match flock(&lock, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => return report.errors.push(io_err("flock", dir)(e)),
    }
    match events_populated(dir) {
        Ok(Some(false)) => {}
        Ok(_) => return report.populated.push(dir.to_owned()),
        Err(e) if gone(&e) => return,
        Err(e) => {
            return report
                .errors
                .push(io_err("read", &dir.join("cgroup.events"))(e));
        }
    }
    match remove_tree(dir) {
        Ok(()) => report.removed.push(dir.to_owned()),
        Err((path, e)) if gone(&e) && path == dir => {}
        Err((_, e)) if e.raw_os_error() == Some(libc::EBUSY) => {}
        Err((path, e)) => report.errors.push(io_err("rmdir", &path)(e)),
    }
}

/// Removes the cgroup `dir` and the cgroups below it, deepest first. bee makes none below a
/// scope, but a command allowed to write the cgroup file system could have.
fn remove_tree(dir: &Path) -> Result<(), (PathBuf, io::Error)> {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                match remove_tree(&entry.path()) {
                    Err((_, e)) if e.kind() == io::ErrorKind::NotFound => {}
                    other => other?,
                }
            }
        }
    }
    fs::remove_dir(dir).map_err(|e| (dir.to_owned(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_names_say_their_maker() {
        assert_eq!(
            ScopeOwner::parse("4242-918273-0"),
            Some(ScopeOwner::Process {
                pid: 4242,
                start: 918_273
            })
        );
        assert_eq!(
            ScopeOwner::parse("17-5-12"),
            Some(ScopeOwner::Process { pid: 17, start: 5 })
        );
        // Earlier bee: `<pid>-<seq>-<nanos:09>`.
        assert_eq!(
            ScopeOwner::parse("1064-0-379816730"),
            Some(ScopeOwner::Pid(1064))
        );
        assert_eq!(
            ScopeOwner::parse("16749-3-000000955"),
            Some(ScopeOwner::Pid(16749))
        );
        for other in [
            "session",
            "bee-tests",
            "1-2",
            "1-2-3-4",
            "1--3",
            "-1-2",
            "1-2-",
            "a-2-3",
            "1-2-3x",
            "+1-2-3",
            "1-2-99999999999999999999999",
            "99999999999-2-3",
            "",
        ] {
            assert_eq!(ScopeOwner::parse(other), None, "{other:?}");
        }
    }

    #[test]
    fn the_start_time_is_field_22_after_the_command_name() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    918273 1000 200 18446744073709551615";
        assert_eq!(parse_start_time(stat), Some(918_273));
        assert_eq!(parse_start_time("4242 (x) S 1"), None);
        assert_eq!(parse_start_time("no parenthesis"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_later_start_time_is_not_it() {
        let pid = std::process::id();
        let start = start_time("self");
        assert!(start.is_some());
        let start = start.unwrap_or_default();
        assert!(ScopeOwner::Process { pid, start }.alive());
        assert!(
            !ScopeOwner::Process {
                pid,
                start: start + 1
            }
            .alive()
        );
        assert!(ScopeOwner::Pid(pid).alive());
        // Above the kernel's pid limit (4,194,304): no such process.
        assert!(!ScopeOwner::Pid(4_194_305).alive());
        assert!(
            !ScopeOwner::Process {
                pid: 4_194_305,
                start
            }
            .alive()
        );
        let name = scope_name(7).unwrap_or_default();
        assert_eq!(name, format!("{pid}-{start}-7"));
        assert_eq!(
            ScopeOwner::parse(&name),
            Some(ScopeOwner::Process { pid, start })
        );
    }
}
