//! Who is on the other end of a connection: its user, groups, process and cgroup.
//!
//! The kernel says, not the client: `SO_PEERCRED` (uid, gid and pid at `connect(2)`),
//! `SO_PEERGROUPS` (supplementary groups) and `SO_PEERPIDFD` (Linux 6.5: a pidfd of that very
//! process, so a recycled pid cannot stand in for it; before 6.5, `pidfd_open(2)` of the pid,
//! checked against the credentials). The cgroup (`/proc/PID/cgroup`) and the uid and
//! sandbox (`/proc/PID/status`) are read once, and trusted only if the pidfd still names a
//! live process afterwards.

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// `SO_PEERGROUPS` (`asm-generic/socket.h`).
const SO_PEERGROUPS: libc::c_int = 59;
/// `SO_PEERPIDFD` (`asm-generic/socket.h`, Linux 6.5).
const SO_PEERPIDFD: libc::c_int = 77;

/// The process that connected, as the kernel identifies it.
#[derive(Debug)]
pub struct Peer {
    /// Its uid at `connect(2)`.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
    /// Its supplementary groups (without `gid` unless listed).
    pub groups: Vec<u32>,
    /// Its pid in the service's PID namespace.
    pub pid: u32,
    /// A pidfd of that process.
    pub pidfd: OwnedFd,
    /// Its cgroup v2 directory (the mount joined with `/proc/PID/cgroup`'s `0::` path).
    pub cgroup: PathBuf,
    /// The sandbox it runs in, from its `/proc/PID/status` as it connected.
    pub sandbox: Sandbox,
}

/// What a process's `/proc/PID/status` says of the sandbox it runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sandbox {
    /// `NoNewPrivs: 1`.
    pub no_new_privs: bool,
    /// Its seccomp filters: `Seccomp_filters` (Linux 5.9); before it, 1 for any filter
    /// (`Seccomp: 2`).
    pub seccomp_filters: u64,
}

impl Sandbox {
    /// Reads it from the text of a `/proc/PID/status`.
    pub fn from_status(status: &str) -> Self {
        let seccomp_filters = status_field(status, "Seccomp_filters")
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::from(status_field(status, "Seccomp") == Some("2")));
        Self {
            no_new_privs: status_field(status, "NoNewPrivs") == Some("1"),
            seccomp_filters,
        }
    }
}

/// The value of the field `name` of a `/proc/PID/status` text, trimmed.
fn status_field<'s>(status: &'s str, name: &str) -> Option<&'s str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

impl Peer {
    /// Identifies the peer of `stream`; `cgroup2` is the cgroup2 mount.
    ///
    /// # Errors
    /// The socket option's or `/proc`'s error; [`io::ErrorKind::NotFound`] when the process
    /// is gone (or its pid was reused) before its cgroup was read.
    pub fn of(stream: &UnixStream, cgroup2: &Path) -> io::Result<Self> {
        let fd = stream.as_raw_fd();
        let cred: libc::ucred = getsockopt(fd, libc::SO_PEERCRED)?;
        let groups = peer_groups(fd)?;
        let pidfd = match getsockopt::<libc::c_int>(fd, SO_PEERPIDFD) {
            // SAFETY: the kernel installed a new pidfd that nothing else owns.
            Ok(raw) if raw >= 0 => unsafe { OwnedFd::from_raw_fd(raw) },
            _ => pidfd_open(cred.pid)?,
        };
        let pid = u32::try_from(cred.pid)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a negative peer pid"))?;
        let gone = || io::Error::new(io::ErrorKind::NotFound, "the connecting process is gone");
        let cgroup = bee_userspace::cgroup::process_cgroup_dir(Some(pid), cgroup2)?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|_| gone())?;
        // The pid may have been reused while /proc was read: only a live pidfd vouches for
        // what was read, and for the credentials (the effective uid of the same status).
        if !alive(&pidfd) || effective_uid(&status) != Some(cred.uid) {
            return Err(gone());
        }
        Ok(Self {
            uid: cred.uid,
            gid: cred.gid,
            groups,
            pid,
            pidfd,
            cgroup,
            sandbox: Sandbox::from_status(&status),
        })
    }

    /// Runs `f` with this thread's file-system identity switched to the caller's: its fsuid,
    /// fsgid and supplementary groups, so that every path `f` opens or lists is checked as the
    /// caller's own access would be (root's `CAP_DAC_*` leave the effective set with a
    /// nonzero fsuid). Credentials are per thread in Linux and these are raw system calls,
    /// which change only the calling thread; they are restored before this returns.
    pub fn as_caller<T>(&self, f: impl FnOnce() -> T) -> T {
        with_fs_identity(self.uid, self.gid, &self.groups, f)
    }
}

/// A `SOL_SOCKET` option of `fd`, read as a `T` (plain data).
///
/// # Errors
/// `getsockopt(2)`'s.
pub(super) fn getsockopt<T: Copy>(fd: libc::c_int, option: libc::c_int) -> io::Result<T> {
    let mut value = std::mem::MaybeUninit::<T>::zeroed();
    let mut len = libc::socklen_t::try_from(size_of::<T>()).unwrap_or(0);
    // SAFETY: `value` has room for `len` bytes; getsockopt(2) writes at most that many.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            value.as_mut_ptr().cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zero-initialised, then written by the kernel; T is plain data.
    Ok(unsafe { value.assume_init() })
}

fn peer_groups(fd: libc::c_int) -> io::Result<Vec<u32>> {
    let mut groups = vec![0u32; 64];
    loop {
        let mut len = libc::socklen_t::try_from(groups.len() * 4).unwrap_or(0);
        // SAFETY: `groups` has room for `len` bytes.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &raw mut len,
            )
        };
        let n = len as usize / 4;
        if rc == 0 {
            groups.truncate(n);
            return Ok(groups);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ERANGE) && n > groups.len() {
            groups.resize(n, 0);
            continue;
        }
        return Err(err);
    }
}

/// [`Peer::as_caller`] for `uid`, `gid` and `groups`.
fn with_fs_identity<T>(uid: u32, gid: u32, groups: &[u32], f: impl FnOnce() -> T) -> T {
    let mut saved = vec![0 as libc::gid_t; 256];
    // SAFETY: raw credential system calls on this thread with plain values and buffers of
    // the sizes passed.
    let n = unsafe {
        libc::syscall(
            libc::SYS_getgroups,
            saved.len() as libc::c_int,
            saved.as_mut_ptr(),
        )
    };
    saved.truncate(usize::try_from(n).unwrap_or(0));
    // SAFETY: as above.
    unsafe {
        libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr());
        libc::syscall(libc::SYS_setfsgid, gid);
        libc::syscall(libc::SYS_setfsuid, uid);
    }
    let result = f();
    // SAFETY: as above; back to the identity this thread had (root's, in the service).
    unsafe {
        libc::syscall(libc::SYS_setfsuid, 0);
        libc::syscall(libc::SYS_setfsgid, 0);
        libc::syscall(libc::SYS_setgroups, saved.len(), saved.as_ptr());
    }
    result
}

fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) returns a new descriptor or -1.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw as libc::c_int) })
}

/// True while the process of `pidfd` has not exited (signal 0 through the pidfd).
pub fn alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: pidfd_send_signal(2) with signal 0 only checks; the arguments are plain values.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    };
    rc == 0
}

/// The effective uid of a `/proc/PID/status` text (the second of its `Uid:` line).
fn effective_uid(status: &str) -> Option<u32> {
    status_field(status, "Uid")?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_of_a_socket_pair_is_this_process() -> io::Result<()> {
        let (a, _b) = UnixStream::pair()?;
        let peer = Peer::of(&a, Path::new("/sys/fs/cgroup"))?;
        assert_eq!(peer.pid, std::process::id());
        // SAFETY: getuid(2) cannot fail.
        assert_eq!(peer.uid, unsafe { libc::getuid() });
        assert!(alive(&peer.pidfd));
        Ok(())
    }

    #[test]
    fn status_gives_the_effective_uid_and_the_sandbox() {
        let status = "Name:\tbee\nUid:\t1000\t65534\t1000\t1000\nNoNewPrivs:\t1\n\
                      Seccomp:\t2\nSeccomp_filters:\t3\n";
        assert_eq!(effective_uid(status), Some(65_534));
        assert_eq!(
            Sandbox::from_status(status),
            Sandbox {
                no_new_privs: true,
                seccomp_filters: 3
            }
        );
        // Before Linux 5.9 only `Seccomp: 2` says that a filter is there.
        assert_eq!(
            Sandbox::from_status("NoNewPrivs:\t0\nSeccomp:\t2\n"),
            Sandbox {
                no_new_privs: false,
                seccomp_filters: 1
            }
        );
        assert_eq!(
            Sandbox::from_status("NoNewPrivs:\t0\nSeccomp:\t0\nSeccomp_filters:\t0\n"),
            Sandbox {
                no_new_privs: false,
                seccomp_filters: 0
            }
        );
        assert_eq!(effective_uid("Name:\tbee\n"), None);
    }

    /// Under the caller's identity a directory only root may list stays unlisted, on this
    /// thread only; after it, this thread is root again. Needs root (the native suite's).
    #[cfg(feature = "landlock-tests")]
    #[test]
    fn planning_as_the_caller_cannot_list_what_the_caller_cannot() -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir()?;
        let hidden = dir.path().join("hidden");
        std::fs::create_dir_all(hidden.join("alpha"))?;
        std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o700))?;
        const NOBODY: u32 = 65_534;
        // A thread of the service made before (a thread made inside would copy the caller's
        // identity, as clone(2) does), which lists the directory while the switch holds.
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let other = {
            let hidden = hidden.clone();
            std::thread::spawn(move || {
                asked.recv().ok();
                std::fs::read_dir(hidden).map(Iterator::count)
            })
        };
        let (inside, beside) = with_fs_identity(NOBODY, NOBODY, &[], || {
            let inside = std::fs::read_dir(&hidden).map(|_| ()).map_err(|e| e.kind());
            ask.send(()).ok();
            let beside = other
                .join()
                .map_err(|_| io::Error::other("the other thread panicked"));
            (inside, beside)
        });
        assert_eq!(inside, Err(io::ErrorKind::PermissionDenied));
        // Another thread of the service kept root's identity meanwhile.
        assert_eq!(beside??, 1);
        // And this one has it back.
        assert_eq!(std::fs::read_dir(&hidden)?.count(), 1);
        Ok(())
    }
}
