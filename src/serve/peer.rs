//! Who is on the other end of a connection: its user, groups, process and cgroup.
//!
//! The kernel says, not the client: `SO_PEERCRED` (uid, gid and pid at `connect(2)`),
//! `SO_PEERGROUPS` (supplementary groups) and `SO_PEERPIDFD` (Linux 6.5: a pidfd of that very
//! process, so a recycled pid cannot stand in for it; before 6.5, `pidfd_open(2)` of the pid,
//! checked against the credentials). The cgroup is read from `/proc/PID/cgroup` and trusted
//! only if the pidfd still names a live process afterwards.

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
        let cgroup = bee_userspace::cgroup::process_cgroup_dir(Some(pid), cgroup2)?;
        // The pid may have been reused while /proc was read: only a live pidfd vouches for
        // what was read, and for the credentials (`/proc/PID/status` of the same process).
        if !alive(&pidfd) || !same_uid(cred.pid, cred.uid) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the connecting process is gone",
            ));
        }
        Ok(Self {
            uid: cred.uid,
            gid: cred.gid,
            groups,
            pid,
            pidfd,
            cgroup,
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

/// True when the effective uid of `pid` (`/proc/PID/status`) is `uid`, as `SO_PEERCRED`
/// reported it.
fn same_uid(pid: libc::pid_t, uid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u32>().ok())
        == Some(uid)
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
