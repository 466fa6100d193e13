//! Starting the command with `clone3(CLONE_INTO_CGROUP)` (Linux 5.7): the child is created
//! inside its scope cgroup, so it never runs a single instruction outside it, and no write to
//! `cgroup.procs` is needed (a migration waits for an RCU grace period; a fork into the cgroup
//! does not).
//!
//! The parent prepares everything as plain values (paths and arguments as C strings with their
//! pointer arrays, the descriptors of the standard streams), calls `clone3` without `CLONE_VM`
//! (fork semantics: the child has its own copy of memory), and the child runs only raw,
//! async-signal-safe system calls: signal mask and `SIGPIPE` back to their defaults, the
//! standard streams, the working directory, every hardening step of [`ChildPlan::run`] but the
//! cgroup join, and `execve`. A failure is reported on the close-on-exec pipe (the step, or 0
//! for the spawn itself, and the errno) before the child exits with 127. For a Landlock launch
//! that channel is a `SOCK_SEQPACKET` socket pair instead, on which the child also sends its
//! seccomp filter's listener (`SCM_RIGHTS`), taken into [`Launched`].

use std::ffi::{CString, OsStr, OsString};
use std::io::{self, Read as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::{ChildPlan, LaunchError, LaunchSpec, Launched, StdioMode, Step, cloexec_pipe};
use crate::cgroup::ScopeCgroup;

/// `CLONE_PIDFD` (`include/uapi/linux/sched.h`).
const CLONE_PIDFD: u64 = 0x1000;
/// `CLONE_INTO_CGROUP` (`include/uapi/linux/sched.h`, Linux 5.7).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`, 88 bytes).
#[repr(C)]
#[derive(Debug, Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const _: () = assert!(size_of::<CloneArgs>() == 88);

/// How the child gets into the scope cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Join {
    /// Born in it (`CLONE_INTO_CGROUP`).
    IntoCgroup,
    /// By writing `0` to its `cgroup.procs`, first thing (a cgroup that was killed).
    Procs,
}

/// What [`spawn`] did.
pub(super) enum Clone3 {
    /// The command runs (or ran) in its scope.
    Started(Launched),
    /// This kernel has no `clone3` or no `CLONE_INTO_CGROUP` (before 5.7): nothing was
    /// started; the caller uses the launcher that joins through `cgroup.procs`.
    Unsupported,
}

/// One standard stream of the child: the descriptor it gets (if not inherited) and the
/// parent's end of a pipe.
struct Stream {
    child: Option<OwnedFd>,
    parent: Option<OwnedFd>,
}

fn prepare_err(what: &'static str) -> impl FnOnce(io::Error) -> LaunchError {
    move |source| LaunchError::Prepare { what, source }
}

fn cstring(s: &OsStr, what: &'static str) -> Result<CString, LaunchError> {
    CString::new(s.as_bytes()).map_err(|_| LaunchError::Prepare {
        what,
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })
}

/// The stream `mode` for descriptor `target` (0 is read by the child, 1 and 2 written).
fn stream(mode: &StdioMode, target: RawFd) -> Result<Stream, LaunchError> {
    match mode {
        StdioMode::Fd(fd) => Ok(Stream {
            child: Some(
                fd.try_clone()
                    .map_err(prepare_err("duplicate a standard stream's descriptor"))?,
            ),
            parent: None,
        }),
        StdioMode::Inherit => Ok(Stream {
            child: None,
            parent: None,
        }),
        StdioMode::Null => {
            let null = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
                .map_err(prepare_err("open /dev/null"))?;
            Ok(Stream {
                child: Some(OwnedFd::from(null)),
                parent: None,
            })
        }
        StdioMode::Piped => {
            let (read, write) = cloexec_pipe()?;
            Ok(if target == 0 {
                Stream {
                    child: Some(read),
                    parent: Some(write),
                }
            } else {
                Stream {
                    child: Some(write),
                    parent: Some(read),
                }
            })
        }
    }
}

/// The program's path as `execvp` would find it: as given when it has a `/`, else the first
/// executable file of that name in the `PATH` the command gets.
pub(super) fn resolve_program(program: &OsStr, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or_else(|| OsString::from("/usr/bin:/bin"), |(_, v)| v.clone());
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access(2) on a NUL-terminated path.
    let ok = unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0;
    ok && path.is_file()
}

/// Starts `spec` in `cgroup` with `clone3(CLONE_PIDFD)`, joining as `join` says, in the
/// Landlock engine's namespaces when the spec has a Landlock plan.
pub(super) fn spawn(
    spec: &LaunchSpec,
    cgroup: &ScopeCgroup,
    join: Join,
) -> Result<Clone3, LaunchError> {
    let program = spec.program.to_string_lossy().into_owned();
    let env = spec.environment();
    let Some(path) = resolve_program(&spec.program, &env) else {
        return Err(LaunchError::Spawn {
            program,
            source: io::Error::from(io::ErrorKind::NotFound),
        });
    };
    let path = cstring(path.as_os_str(), "the program path holds a NUL byte")?;
    let mut argv = vec![cstring(&spec.program, "the program holds a NUL byte")?];
    for a in &spec.args {
        argv.push(cstring(a, "an argument holds a NUL byte")?);
    }
    let envp: Vec<CString> = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            cstring(&kv, "an environment variable holds a NUL byte")
        })
        .collect::<Result<_, _>>()?;
    let argv_ptrs: Vec<*const libc::c_char> = argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp_ptrs: Vec<*const libc::c_char> = envp
        .iter()
        .map(|e| e.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let cwd = spec
        .cwd
        .as_ref()
        .map(|d| cstring(d.as_os_str(), "the working directory holds a NUL byte"))
        .transpose()?;
    let streams = [
        stream(&spec.stdin, 0)?,
        stream(&spec.stdout, 1)?,
        stream(&spec.stderr, 2)?,
    ];
    let child_fds: [RawFd; 3] = [0, 1, 2].map(|i| {
        streams[i]
            .child
            .as_ref()
            .map_or(-1, std::os::fd::AsRawFd::as_raw_fd)
    });
    let dir = std::fs::File::open(cgroup.path()).map_err(prepare_err("open the scope cgroup"))?;
    let procs = match join {
        Join::IntoCgroup => None,
        Join::Procs => Some(cgroup.open_procs()?),
    };
    // A Landlock launch's child also sends its seccomp filter's listener on the report
    // channel, which is then a socket (`super::send_fd`).
    let (report_read, report_write) = if spec.landlock.is_some() {
        seqpacket_pair()?
    } else {
        cloexec_pipe()?
    };
    let plan = ChildPlan::prepare(
        spec,
        procs.as_ref().map(std::os::fd::AsRawFd::as_raw_fd),
        report_write.as_raw_fd(),
    )?;

    let mut pidfd: libc::c_int = -1;
    let mut flags = CLONE_PIDFD;
    if join == Join::IntoCgroup {
        flags |= CLONE_INTO_CGROUP;
    }
    if spec.landlock.is_some() {
        flags |= crate::landlock::confine::NAMESPACES;
    }
    let args = CloneArgs {
        flags,
        pidfd: &raw mut pidfd as u64,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: if join == Join::IntoCgroup {
            dir.as_raw_fd() as u64
        } else {
            0
        },
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM forks this process; `args` is a valid clone_args of the
    // size passed. In the child only async-signal-safe system calls run (`child_main`), on
    // memory prepared above, and it never returns.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &raw const args,
            size_of::<CloneArgs>() as libc::size_t,
        )
    };
    if rc == 0 {
        // SAFETY: this is the child; see child_main.
        unsafe {
            child_main(
                &plan,
                &child_fds,
                cwd.as_ref(),
                &path,
                &argv_ptrs,
                &envp_ptrs,
                spec.landlock.is_some(),
            )
        }
    }
    if rc < 0 {
        let source = io::Error::last_os_error();
        return match source.raw_os_error() {
            // No clone3 (before 5.3, or a seccomp filter that hides it, as container
            // runtimes' default profiles do) or a clone_args without `cgroup` (E2BIG, before
            // 5.7). EINVAL is not among them: it also meant an unknown flag before 5.7, but bee
            // refuses kernels older than 6.1, where it means the scope's cgroup was refused
            // (`clone3(2)`), which falling back would only hide.
            Some(libc::ENOSYS | libc::E2BIG) => Ok(Clone3::Unsupported),
            _ => Err(LaunchError::Step {
                program,
                step: Step::JoinCgroup,
                source,
            }),
        };
    }
    let pid = rc as libc::pid_t;
    // SAFETY: CLONE_PIDFD stored a new descriptor that nothing else owns.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    // The child's ends and the report pipe's write end must close here, so that the read
    // below ends at the child's execve or exit.
    drop(report_write);
    drop(dir);
    drop(procs);
    let [stdin, stdout, stderr] = streams.map(|s| {
        drop(s.child);
        s.parent
    });
    let (report, got, listener) = if spec.landlock.is_some() {
        read_report_socket(&report_read)
    } else {
        let (report, got) = read_report_pipe(report_read);
        (report, got, None)
    };
    let launched = Launched::from_parts(pid, pidfd, [stdin, stdout, stderr], listener);
    if got == 0 {
        if spec.landlock.is_some() && launched.seccomp_listener.is_none() {
            // Cannot happen (the child fails its launch instead): a scope whose refusals
            // nobody would answer is not left running.
            let mut launched = launched;
            // SAFETY: kill(2) of our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = launched.wait_timeout(None);
            return Err(LaunchError::Step {
                program,
                step: Step::SeccompListener,
                source: io::Error::from(io::ErrorKind::UnexpectedEof),
            });
        }
        return Ok(Clone3::Started(launched));
    }
    // The child failed before execve and exits with 127: reap it.
    let mut launched = launched;
    let _ = launched.wait_timeout(None);
    let errno = i32::from_le_bytes([report[1], report[2], report[3], report[4]]);
    let source = io::Error::from_raw_os_error(errno);
    Err(match Step::from_raw(report[0]) {
        Some(step) => LaunchError::Step {
            program,
            step,
            source,
        },
        None => LaunchError::Spawn { program, source },
    })
}

/// `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`: (bee's end, the child's end).
fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd), LaunchError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a writable array of two ints, as socketpair(2) requires.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(LaunchError::Prepare {
            what: "socketpair for the launch's reports",
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: socketpair succeeded, so both fds are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reads the report pipe until the child's `execve` or exit closes it: the failed step's
/// five bytes, and how many arrived (0: none, the command runs).
fn read_report_pipe(report_read: OwnedFd) -> ([u8; 5], usize) {
    let mut report = [0u8; 5];
    let mut got = 0;
    let mut reader = std::fs::File::from(report_read);
    while got < report.len() {
        match reader.read(&mut report[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (report, got)
}

/// Reads the report socket until the child's `execve` or exit closes it: each message is
/// either the seccomp filter's listener (one byte and one descriptor, `SCM_RIGHTS`) or a failed
/// step's five bytes, which end the reading. Returns the report, its length (0: none), and the
/// listener if one came.
fn read_report_socket(socket: &OwnedFd) -> ([u8; 5], usize, Option<OwnedFd>) {
    let mut listener = None;
    loop {
        let mut report = [0u8; 5];
        let mut control = [0u64; 4];
        let mut iov = libc::iovec {
            iov_base: report.as_mut_ptr().cast(),
            iov_len: report.len(),
        };
        // SAFETY: a zeroed msghdr is valid; its buffers are this frame's.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&control) as _;
        // SAFETY: recvmsg into the buffers above; MSG_CMSG_CLOEXEC marks received descriptors.
        let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return ([0; 5], 0, listener);
        }
        let mut got_fd = false;
        // SAFETY: CMSG_FIRSTHDR/NXTHDR walk the control buffer recvmsg filled, within
        // `msg_controllen`; each SCM_RIGHTS payload is read unaligned.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg);
                    let len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                    for i in 0..len / size_of::<libc::c_int>() {
                        let fd = std::ptr::read_unaligned(data.cast::<libc::c_int>().add(i));
                        // A new descriptor of this process that nothing else owns; a second
                        // one (never sent) replaces and closes the first.
                        listener = Some(OwnedFd::from_raw_fd(fd));
                        got_fd = true;
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&raw const msg, cmsg);
            }
        }
        if got_fd {
            continue;
        }
        let n = usize::try_from(n).unwrap_or(0);
        if n == 0 {
            return (report, 0, listener);
        }
        return (report, n, listener);
    }
}

/// The child, between `clone3` and `execve`. Raw, async-signal-safe system calls only.
///
/// # Safety
/// Must run only in the child of [`spawn`]'s `clone3`, with the values it prepared.
unsafe fn child_main(
    plan: &ChildPlan,
    fds: &[RawFd; 3],
    cwd: Option<&CString>,
    path: &CString,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    pid_namespace: bool,
) -> ! {
    // SAFETY (whole function): plain system calls on integers, on this frame's stack and on
    // memory the parent prepared before clone3 and nobody mutates.
    unsafe {
        // Signals as a new process expects them: nothing blocked, SIGPIPE not ignored.
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        for (target, &fd) in fds.iter().enumerate() {
            if fd < 0 {
                continue;
            }
            let target = target as RawFd;
            let rc = if fd == target {
                // dup2 onto itself keeps close-on-exec: clear it.
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, target)
            };
            if rc < 0 {
                plan.report_spawn();
                libc::_exit(127);
            }
        }
        if let Some(dir) = cwd
            && libc::chdir(dir.as_ptr()) < 0
        {
            plan.report_spawn();
            libc::_exit(127);
        }
        if plan.run().is_err() {
            libc::_exit(127);
        }
        // In a PID namespace of its own, this process stays its init and the command runs
        // as its child (`super::init`).
        if pid_namespace && let Err(errno) = super::init::fork_command() {
            plan.report_errno(0, errno);
            libc::_exit(127);
        }
        libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        plan.report_spawn();
        libc::_exit(127)
    }
}
