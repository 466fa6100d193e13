//! The hardened launcher: starts a command inside a scope cgroup, stripped of everything it
//! does not need, before its first instruction runs.
//!
//! Why one file of this length: the parent's set-up and the child's steps between `clone3` and
//! `execve` (`ChildPlan`) must be read together — every resource the child uses is prepared by
//! the parent, because the child may not allocate.
//!
//! [`LaunchSpec::spawn`] creates the child with `clone3(CLONE_INTO_CGROUP)` (Linux 5.7): it is
//! born inside the scope cgroup, so the `execve` itself and everything before it is already
//! checked by the scope's programs, and no migration (a write to `cgroup.procs`, which waits
//! for an RCU grace period) is needed. On a kernel without it, the child is forked by
//! [`std::process::Command`] and joins the scope first thing in a `pre_exec` hook. Between the
//! fork and `execve` the child runs only raw, async-signal-safe system calls on memory
//! prepared by the parent (no allocation, no locks), in this order:
//!
//! 1. join the scope: with `clone3`, done by the kernel at birth; otherwise write `0` to the
//!    scope's `cgroup.procs`, opened by the parent (`cgroup-v2.rst`);
//! 2. `setsid(2)`: a session and process group of its own, detached from bee's terminal;
//!    with [`LaunchSpec::controlling_terminal`], `ioctl(0, TIOCSCTTY, 0)` then makes the
//!    command's standard input (a pseudo-terminal's slave bee opened for it) the new
//!    session's controlling terminal — never stealing one another session controls;
//! 3. `setrlimit(2)`: `RLIMIT_CORE` 0 always, and the configured [`Rlimits`];
//! 4. `close_range(2)` with `CLOSE_RANGE_CLOEXEC` on every fd above 2, so that nothing
//!    inherited survives `execve` (marking instead of closing keeps the pipe through which the
//!    child reports a failed step until `execve` succeeds); kernels before 5.11 get `fcntl`
//!    on each fd below the `RLIMIT_NOFILE` hard limit;
//! 5. when the process holds `CAP_SETPCAP`: lock the securebits (`SECBIT_NOROOT`,
//!    `SECBIT_NO_SETUID_FIXUP`, `SECBIT_KEEP_CAPS_LOCKED`, `SECBIT_NO_CAP_AMBIENT_RAISE`, each
//!    locked; `capabilities(7)`) and empty the bounding set (`PR_CAPBSET_DROP`);
//! 6. clear the ambient set (`PR_CAP_AMBIENT_CLEAR_ALL`);
//! 7. with [`Credentials`]: `setgroups(2)`, `setresgid(2)`, `setresuid(2)` — as raw system calls,
//!    which change only the calling thread, the only thread of the child;
//! 8. `capset(2)`: effective, permitted and inheritable sets empty; then, with
//!    [`Credentials`], `chdir(2)` into the working directory again, as that user with no
//!    capability (a directory the user cannot reach fails the launch);
//! 9. `PR_SET_NO_NEW_PRIVS`: no set-uid bit or file capability can grant anything afterwards;
//! 10. `PR_SET_PDEATHSIG(SIGKILL)` (after the credential change, which would clear it), then a
//!     check that the parent has not already exited;
//! 11. with a Landlock plan: the Landlock domain and the seccomp filter, whose listener is sent
//!     to bee on the report channel (a socket for such a launch) and closed in the child.
//!
//! The environment is rebuilt from a pass-list of names and explicit extras ([`LaunchSpec`]).
//!
//! Each failed step makes [`LaunchSpec::spawn`] return [`LaunchError::Step`] naming it: the
//! child writes the step's number to a close-on-exec pipe before failing, and never runs the
//! command. Without `CAP_SETPCAP` (bee not run as root), step 5 is skipped and the bounding set
//! kept: the empty permitted set and `no_new_privs` then leave no way to regain a capability,
//! but the launch refuses if it would run as uid 0 that way ([`Step::BoundingSet`]).
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that spawned the child exits: spawn from a thread
//! that outlives the command (the one that waits for it).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus};
use std::time::{Duration, Instant};

use std::sync::Arc;

use crate::cgroup::{CgroupError, ScopeCgroup};
use crate::landlock::{Confinement, LandlockPlan};

mod clone3;
mod init;

/// Environment variables passed through by default, when set in bee's environment.
/// `BEE_SOCKET` names the `bee serve` socket, so that a command in a scope asks the same
/// service for a narrower scope of its own.
pub const DEFAULT_ENV_PASS: &[&str] = &[
    "BEE_SOCKET",
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "TZ",
    "USER",
    "LOGNAME",
];

/// Capability number of `CAP_SETPCAP` (`include/uapi/linux/capability.h`).
const CAP_SETPCAP: u32 = 8;
/// `_LINUX_CAPABILITY_VERSION_3` (`include/uapi/linux/capability.h`).
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// Securebits set before the capabilities are dropped (`include/uapi/linux/securebits.h`):
/// NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE and their locks, and KEEP_CAPS_LOCKED
/// (with KEEP_CAPS itself off).
const SECUREBITS: libc::c_ulong = (1 << 0) // SECBIT_NOROOT
    | (1 << 1) // SECBIT_NOROOT_LOCKED
    | (1 << 2) // SECBIT_NO_SETUID_FIXUP
    | (1 << 3) // SECBIT_NO_SETUID_FIXUP_LOCKED
    | (1 << 5) // SECBIT_KEEP_CAPS_LOCKED
    | (1 << 6) // SECBIT_NO_CAP_AMBIENT_RAISE
    | (1 << 7); // SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED

/// A hardening step of the child, named in [`LaunchError::Step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    /// Joining the scope cgroup: `clone3(CLONE_INTO_CGROUP)`, or writing `0` to the scope's
    /// `cgroup.procs` where the kernel lacks it.
    JoinCgroup = 1,
    /// `setsid(2)`.
    Setsid,
    /// `setrlimit(RLIMIT_CORE, 0)`.
    RlimitCore,
    /// `setrlimit(RLIMIT_NOFILE)`.
    RlimitNofile,
    /// `setrlimit(RLIMIT_NPROC)`.
    RlimitNproc,
    /// `setrlimit(RLIMIT_CPU)`.
    RlimitCpu,
    /// `setrlimit(RLIMIT_AS)`.
    RlimitAs,
    /// Marking inherited fds close-on-exec.
    CloseFds,
    /// `PR_SET_SECUREBITS`.
    Securebits,
    /// `PR_CAPBSET_DROP` of every capability (or: uid 0 without `CAP_SETPCAP`).
    BoundingSet,
    /// `PR_CAP_AMBIENT_CLEAR_ALL`.
    AmbientCaps,
    /// `setgroups(2)`.
    Setgroups,
    /// `setresgid(2)`.
    Setgid,
    /// `setresuid(2)`.
    Setuid,
    /// `capset(2)` to empty sets.
    DropCaps,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs,
    /// `PR_SET_PDEATHSIG(SIGKILL)`.
    ParentDeathSignal,
    /// The parent exited before the command could start.
    ParentGone,
    /// The Landlock engine's private mounts (`mount`, `mount_setattr`, `open_tree`,
    /// `move_mount`).
    PrivateMounts,
    /// The Landlock engine's private `/proc`.
    ProcMount,
    /// `landlock_restrict_self(2)` (or the private `/proc`'s rule).
    Landlock,
    /// `seccomp(SECCOMP_SET_MODE_FILTER)`.
    Seccomp,
    /// Entering the working directory again as the command's user (with [`Credentials`]),
    /// so that it is one that user may reach: the first `chdir` ran with bee's privileges.
    WorkingDir,
    /// `ioctl(0, TIOCSCTTY)`: standard input as the controlling terminal.
    ControllingTerminal,
    /// Handing the seccomp filter's listener to bee (`sendmsg(SCM_RIGHTS)` on the launch's
    /// report socket).
    SeccompListener,
    /// `setrlimit(2)` lowering one of [`LOWERED`]'s resources ([`Rlimits::lowered`]).
    RlimitLowered,
}

impl Step {
    const ALL: [Step; 26] = [
        Step::JoinCgroup,
        Step::Setsid,
        Step::RlimitCore,
        Step::RlimitNofile,
        Step::RlimitNproc,
        Step::RlimitCpu,
        Step::RlimitAs,
        Step::CloseFds,
        Step::Securebits,
        Step::BoundingSet,
        Step::AmbientCaps,
        Step::Setgroups,
        Step::Setgid,
        Step::Setuid,
        Step::DropCaps,
        Step::NoNewPrivs,
        Step::ParentDeathSignal,
        Step::ParentGone,
        Step::PrivateMounts,
        Step::ProcMount,
        Step::Landlock,
        Step::Seccomp,
        Step::WorkingDir,
        Step::ControllingTerminal,
        Step::SeccompListener,
        Step::RlimitLowered,
    ];

    fn from_raw(raw: u8) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| *s as u8 == raw)
    }

    /// The step as the system call that carries it out.
    pub fn name(self) -> &'static str {
        match self {
            Step::JoinCgroup => "join the scope cgroup (clone3 CLONE_INTO_CGROUP or cgroup.procs)",
            Step::Setsid => "setsid",
            Step::RlimitCore => "setrlimit(RLIMIT_CORE)",
            Step::RlimitNofile => "setrlimit(RLIMIT_NOFILE)",
            Step::RlimitNproc => "setrlimit(RLIMIT_NPROC)",
            Step::RlimitCpu => "setrlimit(RLIMIT_CPU)",
            Step::RlimitAs => "setrlimit(RLIMIT_AS)",
            Step::RlimitLowered => "setrlimit (a hard limit lowered to the caller's)",
            Step::CloseFds => "close inherited fds (close_range)",
            Step::Securebits => "prctl(PR_SET_SECUREBITS)",
            Step::BoundingSet => "empty the capability bounding set (PR_CAPBSET_DROP)",
            Step::AmbientCaps => "prctl(PR_CAP_AMBIENT_CLEAR_ALL)",
            Step::Setgroups => "setgroups",
            Step::Setgid => "setresgid",
            Step::Setuid => "setresuid",
            Step::DropCaps => "capset (drop all capabilities)",
            Step::NoNewPrivs => "prctl(PR_SET_NO_NEW_PRIVS)",
            Step::ParentDeathSignal => "prctl(PR_SET_PDEATHSIG)",
            Step::ParentGone => "parent still alive",
            Step::PrivateMounts => {
                "the scope's private mounts (mount_setattr, open_tree, move_mount)"
            }
            Step::ProcMount => "the scope's private /proc (mount proc subset=pid)",
            Step::Landlock => "landlock_restrict_self",
            Step::Seccomp => "seccomp(SECCOMP_SET_MODE_FILTER)",
            Step::WorkingDir => "chdir into the working directory as the command's user",
            Step::ControllingTerminal => "make standard input the controlling terminal (TIOCSCTTY)",
            Step::SeccompListener => {
                "hand the seccomp listener to bee (sendmsg SCM_RIGHTS on the report socket)"
            }
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a launch failed. A failed launch never runs the command.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// A hardening step failed in the child, before `execve`.
    #[error("launching `{program}`: step `{step}` failed: {source}")]
    Step {
        /// The command.
        program: String,
        /// The step.
        step: Step,
        /// The OS error of the step.
        #[source]
        source: io::Error,
    },
    /// `fork` or `execve` failed (e.g. the program does not exist).
    #[error("launching `{program}` failed: {source}")]
    Spawn {
        /// The command.
        program: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The policy refuses the launch as asked (for instance a working directory that the
    /// scope's own carve-outs hide from it): a data error of the request, decided before
    /// anything starts.
    #[error("launching `{program}` refused: {reason}")]
    Refused {
        /// The command.
        program: String,
        /// Why, naming the policy's rule.
        reason: String,
    },
    /// Preparing the launch in the parent failed.
    #[error("preparing the launch: {what}: {source}")]
    Prepare {
        /// What was being prepared.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `SUDO_UID` or `SUDO_GID` is set but not a number.
    #[error("`{var}` is `{value}`, not a numeric id")]
    BadSudoId {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// Waiting for the command failed.
    #[error("waiting for pid {pid}: {source}")]
    Wait {
        /// The child.
        pid: u32,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The scope cgroup could not be used.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
}

impl LaunchError {
    /// The status a command reports for this failure: as `env(1)` and the shells, 127 for a
    /// command not found and 126 for one that could not be run ([`Self::Spawn`]); 65
    /// (`EX_DATAERR`) for a launch the policy refuses ([`Self::Refused`]); for a working
    /// directory the command's user may not enter 77 (`EX_NOPERM`), and 66 (`EX_NOINPUT`)
    /// for one that is not there; 70 (`EX_SOFTWARE`) for the rest (`docs/exit-status.md`).
    pub fn exit_status(&self) -> u8 {
        match self {
            Self::Spawn { source, .. } if source.kind() == io::ErrorKind::NotFound => 127,
            Self::Spawn { .. } => 126,
            Self::Refused { .. } => 65,
            Self::Step {
                step: Step::WorkingDir,
                source,
                ..
            } => match source.kind() {
                io::ErrorKind::PermissionDenied => 77,
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => 66,
                _ => 70,
            },
            _ => 70,
        }
    }
}

/// The resources whose hard limit [`Rlimits::lowered`] may lower, in its order, each with the
/// name `/proc/PID/limits` gives it (`fs/proc/base.c`).
pub const LOWERED: [(libc::__rlimit_resource_t, &str); 11] = [
    (libc::RLIMIT_FSIZE, "Max file size"),
    (libc::RLIMIT_DATA, "Max data size"),
    (libc::RLIMIT_STACK, "Max stack size"),
    (libc::RLIMIT_RSS, "Max resident set"),
    (libc::RLIMIT_MEMLOCK, "Max locked memory"),
    (libc::RLIMIT_LOCKS, "Max file locks"),
    (libc::RLIMIT_SIGPENDING, "Max pending signals"),
    (libc::RLIMIT_MSGQUEUE, "Max msgqueue size"),
    (libc::RLIMIT_NICE, "Max nice priority"),
    (libc::RLIMIT_RTPRIO, "Max realtime priority"),
    (libc::RLIMIT_RTTIME, "Max realtime timeout"),
];

/// Resource limits of the command (`setrlimit(2)`); each of the four named set as both soft
/// and hard limit, and [`Rlimits::lowered`] only ever lowered. `RLIMIT_CORE` is always 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rlimits {
    /// `RLIMIT_NOFILE`: one more than the highest fd number it may open.
    pub nofile: Option<u64>,
    /// `RLIMIT_NPROC`: most processes (threads) of its real uid.
    pub nproc: Option<u64>,
    /// `RLIMIT_CPU`: CPU time in seconds (SIGXCPU at the limit, SIGKILL past it).
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_AS`: the size of its virtual address space in bytes.
    pub address_space: Option<u64>,
    /// Hard limits of [`LOWERED`]'s resources, in its order and units (`bee serve`: its
    /// caller's own): each lowers the limit the command would inherit, never raises it (its
    /// soft limit comes down with it where above).
    pub lowered: [Option<u64>; LOWERED.len()],
}

/// The user and groups the command runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Real, effective and saved uid.
    pub uid: u32,
    /// Real, effective and saved gid.
    pub gid: u32,
    /// Supplementary groups (empty: none).
    pub groups: Vec<u32>,
}

impl Credentials {
    /// The invoking user when bee runs as root through `sudo`: `SUDO_UID` and `SUDO_GID` from
    /// the environment, with no supplementary groups. `None` when not running as root or when
    /// `SUDO_UID` is unset.
    ///
    /// # Errors
    /// [`LaunchError::BadSudoId`] when a variable is set but not a number.
    pub fn from_sudo_env() -> Result<Option<Self>, LaunchError> {
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        if euid != 0 {
            return Ok(None);
        }
        let uid = std::env::var("SUDO_UID").ok();
        let gid = std::env::var("SUDO_GID").ok();
        Self::from_sudo_vars(uid.as_deref(), gid.as_deref())
    }

    /// [`Credentials::from_sudo_env`] on given values of `SUDO_UID` and `SUDO_GID`. Without
    /// `SUDO_GID` the gid is the uid's number, as `sudo` always sets both.
    ///
    /// # Errors
    /// [`LaunchError::BadSudoId`].
    pub fn from_sudo_vars(
        uid: Option<&str>,
        gid: Option<&str>,
    ) -> Result<Option<Self>, LaunchError> {
        let parse = |var: &'static str, v: &str| {
            v.trim().parse::<u32>().map_err(|_| LaunchError::BadSudoId {
                var,
                value: v.to_owned(),
            })
        };
        let Some(uid) = uid else { return Ok(None) };
        let uid = parse("SUDO_UID", uid)?;
        let gid = match gid {
            Some(g) => parse("SUDO_GID", g)?,
            None => uid,
        };
        Ok(Some(Self {
            uid,
            gid,
            groups: Vec::new(),
        }))
    }
}

/// How the child gets into its scope cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// `clone3(CLONE_INTO_CGROUP)` (Linux 5.7): born in the scope.
    Clone3IntoCgroup,
    /// A fork, then a write of `0` to the scope's `cgroup.procs` before anything else.
    CgroupProcs,
}

/// What a standard stream of the command is connected to.
#[derive(Debug, Clone, Default)]
pub enum StdioMode {
    /// bee's own stream.
    #[default]
    Inherit,
    /// `/dev/null`.
    Null,
    /// A pipe to bee ([`Launched::take_stdout`] and friends).
    Piped,
    /// This descriptor (duplicated for the child; bee keeps its own), e.g. one a client of
    /// `bee serve` passed over its socket.
    Fd(Arc<OwnedFd>),
}

impl StdioMode {
    fn to_std(&self) -> io::Result<std::process::Stdio> {
        Ok(match self {
            StdioMode::Inherit => std::process::Stdio::inherit(),
            StdioMode::Null => std::process::Stdio::null(),
            StdioMode::Piped => std::process::Stdio::piped(),
            StdioMode::Fd(fd) => std::process::Stdio::from(fd.try_clone()?),
        })
    }
}

/// Why the descriptor `fd`, as a command's standard stream, would give the scope a channel
/// its policy does not grant: a socket that is listening (the scope would accept connections
/// from any peer), not a stream or seqpacket socket (a datagram or raw socket sends to any
/// address), or not connected (the scope would connect it to any peer). `None` for every
/// other descriptor, a connected stream socket included (its peer is fixed). The Landlock
/// engine decides neither a unix socket's `connect` nor a `sendto` on a socket it did not
/// see made, so a launch under it refuses such a stream ([`LaunchError::Refused`]).
pub fn open_socket_stream(fd: RawFd) -> Option<&'static str> {
    // SAFETY: fstat, getsockopt and getpeername write at most the sizes given, into this
    // frame's stack.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return None;
        }
        let int = |option: libc::c_int| {
            let mut v: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            (libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                option,
                (&raw mut v).cast(),
                &raw mut len,
            ) == 0)
                .then_some(v)
        };
        if !matches!(
            int(libc::SO_TYPE),
            Some(libc::SOCK_STREAM | libc::SOCK_SEQPACKET)
        ) {
            return Some("a datagram or raw socket, which sends to any address");
        }
        if int(libc::SO_ACCEPTCONN) != Some(0) {
            return Some("a listening socket, which would accept connections from any peer");
        }
        let mut addr: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        if libc::getpeername(fd, (&raw mut addr).cast(), &raw mut len) != 0 {
            return Some("a socket that is not connected, which could connect to any peer");
        }
        None
    }
}

fn stdio_err(source: io::Error) -> LaunchError {
    LaunchError::Prepare {
        what: "duplicate a standard stream's descriptor",
        source,
    }
}

/// A command to launch hardened, built step by step.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    env_pass: Vec<OsString>,
    env_extra: Vec<(OsString, OsString)>,
    rlimits: Rlimits,
    credentials: Option<Credentials>,
    stdin: StdioMode,
    stdout: StdioMode,
    stderr: StdioMode,
    controlling_terminal: bool,
    landlock: Option<Arc<LandlockPlan>>,
}

impl LaunchSpec {
    /// A launch of `program` (looked up in the passed `PATH` when it has no `/`), with the
    /// [`DEFAULT_ENV_PASS`] pass-list, no extra limits, bee's credentials and inherited stdio.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: None,
            env_pass: DEFAULT_ENV_PASS.iter().map(OsString::from).collect(),
            env_extra: Vec::new(),
            rlimits: Rlimits::default(),
            credentials: None,
            stdin: StdioMode::Inherit,
            stdout: StdioMode::Inherit,
            stderr: StdioMode::Inherit,
            controlling_terminal: false,
            landlock: None,
        }
    }

    /// Appends an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// The working directory of the command (default: bee's).
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Replaces the pass-list: the names of bee's environment variables the command sees.
    pub fn env_pass<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, names: I) -> Self {
        self.env_pass = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets a variable for the command, overriding a passed one of the same name.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env_extra.push((key.into(), value.into()));
        self
    }

    /// Sets the resource limits.
    pub fn rlimits(mut self, limits: Rlimits) -> Self {
        self.rlimits = limits;
        self
    }

    /// Runs the command as `credentials` instead of bee's own user.
    pub fn credentials(mut self, credentials: Option<Credentials>) -> Self {
        self.credentials = credentials;
        self
    }

    /// Connects standard input.
    pub fn stdin(mut self, mode: StdioMode) -> Self {
        self.stdin = mode;
        self
    }

    /// Connects standard output.
    pub fn stdout(mut self, mode: StdioMode) -> Self {
        self.stdout = mode;
        self
    }

    /// Connects standard error.
    pub fn stderr(mut self, mode: StdioMode) -> Self {
        self.stderr = mode;
        self
    }

    /// Makes the command's standard input its controlling terminal (`TIOCSCTTY` right after
    /// `setsid`), so that `/dev/tty`, job control and the terminal's signals (Ctrl-C, Ctrl-Z,
    /// `SIGWINCH`) work. Standard input must then be a terminal no other session controls —
    /// the slave of a pseudo-terminal opened for this command — or the launch fails at
    /// [`Step::ControllingTerminal`]. The command gains nothing by it: the terminal is already
    /// its standard input, and the other end stays with whoever opened it.
    pub fn controlling_terminal(mut self, yes: bool) -> Self {
        self.controlling_terminal = yes;
        self
    }

    /// Whether standard input becomes the controlling terminal
    /// ([`LaunchSpec::controlling_terminal`]).
    pub fn has_controlling_terminal(&self) -> bool {
        self.controlling_terminal
    }

    /// Confines the command by a Landlock engine's `plan` ([`crate::landlock`]): it is born in
    /// new mount, PID and IPC namespaces, and its private mounts, Landlock domain and seccomp
    /// filter are in place before `execve`. Such a launch always uses `clone3`.
    pub fn landlock(mut self, plan: Arc<LandlockPlan>) -> Self {
        self.landlock = Some(plan);
        self
    }

    /// The Landlock plan the command is confined by, if any.
    pub fn landlock_plan(&self) -> Option<&Arc<LandlockPlan>> {
        self.landlock.as_ref()
    }

    /// The program.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The file [`LaunchSpec::spawn`] runs: the program as given when it holds a `/`, else
    /// the first executable file of that name on the `PATH` the command gets
    /// (`/usr/bin:/bin` without one), as `execvp(3)` finds it. `None` when there is none.
    /// It probes files with this process's own access, so it answers only for a caller
    /// who could look for itself.
    pub fn resolved_program(&self) -> Option<std::path::PathBuf> {
        clone3::resolve_program(&self.program, &self.environment())
    }

    /// The arguments after the program.
    pub fn arguments(&self) -> &[OsString] {
        &self.args
    }

    /// The working directory, when set.
    pub fn working_dir(&self) -> Option<&std::path::Path> {
        self.cwd.as_deref()
    }

    /// The resource limits.
    pub fn resource_limits(&self) -> Rlimits {
        self.rlimits
    }

    /// The environment the command will get, in order: passed variables that are set, then
    /// the extras (a later entry replaces an earlier one of the same name).
    pub fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = Vec::new();
        let mut put = |k: &OsStr, v: OsString| {
            if let Some(slot) = env.iter_mut().find(|(key, _)| key == k) {
                slot.1 = v;
            } else {
                env.push((k.to_owned(), v));
            }
        };
        for name in &self.env_pass {
            if let Some(v) = std::env::var_os(name) {
                put(name, v);
            }
        }
        for (k, v) in &self.env_extra {
            put(k, v.clone());
        }
        env
    }

    /// Starts the command inside `cgroup`, hardened as the module describes.
    ///
    /// # Errors
    /// [`LaunchError::Step`] naming the hardening step that failed, [`LaunchError::Spawn`]
    /// when `fork`/`execve` failed, [`LaunchError::Prepare`] or [`LaunchError::Cgroup`] for
    /// the parent's preparations. In every case the command has not run.
    pub fn spawn(&self, cgroup: &ScopeCgroup) -> Result<Launched, LaunchError> {
        if self.landlock.is_some() {
            // New namespaces need clone3's flags; the child joins through `cgroup.procs`
            // where being born in a killed cgroup could kill it.
            let join = if cgroup.was_killed() {
                clone3::Join::Procs
            } else {
                clone3::Join::IntoCgroup
            };
            return match clone3::spawn(self, cgroup, join)? {
                clone3::Clone3::Started(launched) => Ok(launched),
                clone3::Clone3::Unsupported => Err(LaunchError::Spawn {
                    program: self.program.to_string_lossy().into_owned(),
                    source: io::Error::other(
                        "the Landlock engine starts commands with clone3, which this kernel (or a seccomp filter around bee) does not offer",
                    ),
                }),
            };
        }
        // A cgroup killed with `cgroup.kill` may kill every child clone3 starts in it
        // (`ScopeCgroup::was_killed`); joining through `cgroup.procs` is not affected.
        if cgroup.was_killed() {
            return self.spawn_joining(cgroup);
        }
        match clone3::spawn(self, cgroup, clone3::Join::IntoCgroup)? {
            clone3::Clone3::Started(launched) => Ok(launched),
            clone3::Clone3::Unsupported => self.spawn_joining(cgroup),
        }
    }

    /// As [`LaunchSpec::spawn`], with exactly the `launcher` given: no fallback. For tests
    /// and benchmarks that compare the two.
    ///
    /// # Errors
    /// As [`LaunchSpec::spawn`]; [`Launcher::Clone3IntoCgroup`] on a kernel without it is
    /// [`LaunchError::Spawn`] with `ENOSYS`.
    pub fn spawn_with(
        &self,
        cgroup: &ScopeCgroup,
        launcher: Launcher,
    ) -> Result<Launched, LaunchError> {
        match launcher {
            Launcher::CgroupProcs => self.spawn_joining(cgroup),
            Launcher::Clone3IntoCgroup => {
                match clone3::spawn(self, cgroup, clone3::Join::IntoCgroup)? {
                    clone3::Clone3::Started(launched) => Ok(launched),
                    clone3::Clone3::Unsupported => Err(LaunchError::Spawn {
                        program: self.program.to_string_lossy().into_owned(),
                        source: io::Error::from_raw_os_error(libc::ENOSYS),
                    }),
                }
            }
        }
    }

    /// Starts the command with [`Command`], joining `cgroup` through its `cgroup.procs` first
    /// thing after the fork: for kernels without `clone3(CLONE_INTO_CGROUP)` (before 5.7).
    fn spawn_joining(&self, cgroup: &ScopeCgroup) -> Result<Launched, LaunchError> {
        let program = self.program.to_string_lossy().into_owned();
        let procs = cgroup.open_procs()?;
        let (report_read, report_write) = cloexec_pipe()?;
        let child_plan =
            ChildPlan::prepare(self, Some(procs.as_raw_fd()), report_write.as_raw_fd())?;

        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .env_clear()
            .envs(self.environment())
            .stdin(self.stdin.to_std().map_err(stdio_err)?)
            .stdout(self.stdout.to_std().map_err(stdio_err)?)
            .stderr(self.stderr.to_std().map_err(stdio_err)?);
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        // SAFETY: the hook only makes raw system calls on values owned by the closure
        // (integers and a vector allocated before fork); it allocates nothing, takes no lock
        // and touches no state shared with other threads, so it is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || child_plan.run());
        }
        let spawned = cmd.spawn();
        // Close the parent's write end so the read below ends at the child's exec or exit.
        drop(report_write);
        drop(procs);
        match spawned {
            Ok(child) => Ok(Launched::new(child)),
            Err(source) => {
                let mut report = [0u8; 5];
                let mut reader = std::fs::File::from(report_read);
                let step = match reader.read(&mut report) {
                    Ok(n) if n >= 1 => Step::from_raw(report[0]),
                    _ => None,
                };
                Err(match step {
                    Some(step) => LaunchError::Step {
                        program,
                        step,
                        source,
                    },
                    None => LaunchError::Spawn { program, source },
                })
            }
        }
    }
}

fn cloexec_pipe() -> Result<(OwnedFd, OwnedFd), LaunchError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2(2) requires.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(LaunchError::Prepare {
            what: "pipe2",
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Everything the child needs, prepared in the parent as plain values.
#[derive(Debug)]
struct ChildPlan {
    /// The scope's `cgroup.procs` to join by writing to it; `None` when the child was born in
    /// the scope (`clone3`).
    procs_fd: Option<RawFd>,
    report_fd: RawFd,
    parent_pid: libc::pid_t,
    /// Standard input becomes the controlling terminal after `setsid`.
    controlling_terminal: bool,
    /// `(step, value)`; `RLIMIT_CORE` first. The step names the resource ([`set_rlimit`]).
    rlimits: [(Step, Option<u64>); 5],
    /// [`Rlimits::lowered`].
    lowered: [Option<u64>; LOWERED.len()],
    setpcap: bool,
    last_cap: u32,
    credentials: Option<(u32, u32)>,
    groups: Vec<libc::gid_t>,
    /// With credentials: the working directory, entered again after the credential change.
    cwd_as_user: Option<std::ffi::CString>,
    becomes_root: bool,
    /// The Landlock engine's confinement, applied around the capability drop.
    confinement: Option<Confinement>,
    /// A pidfd of the parent: a child in a new PID namespace sees its parent as pid 0, so it
    /// learns whether the parent is still alive from this instead of `getppid`.
    parent_pidfd: Option<OwnedFd>,
}

impl ChildPlan {
    fn prepare(
        spec: &LaunchSpec,
        procs_fd: Option<RawFd>,
        report_fd: RawFd,
    ) -> Result<Self, LaunchError> {
        let status = std::fs::read_to_string("/proc/self/status").map_err(|source| {
            LaunchError::Prepare {
                what: "read /proc/self/status",
                source,
            }
        })?;
        let cap_eff =
            crate::support::parse_cap_eff(&status).ok_or_else(|| LaunchError::Prepare {
                what: "parse CapEff in /proc/self/status",
                source: io::Error::from(io::ErrorKind::InvalidData),
            })?;
        let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(63);
        // SAFETY: getpid(2) and geteuid(2) have no preconditions and cannot fail.
        let (parent_pid, euid) = unsafe { (libc::getpid(), libc::geteuid()) };
        let r = &spec.rlimits;
        // The working directory is entered again through the scope's mounts, the inherited
        // one (bee's) included: seen through the mounts made before them it is read-only.
        let cwd = spec.cwd.clone().or_else(|| std::env::current_dir().ok());
        if let (Some(plan), Some(cwd)) = (spec.landlock.as_deref(), cwd.as_deref())
            && let Some(reason) = crate::landlock::confine::hidden_cwd(plan, cwd)
        {
            return Err(LaunchError::Refused {
                program: spec.program.to_string_lossy().into_owned(),
                reason,
            });
        }
        if spec.landlock.is_some() {
            let streams = [
                (&spec.stdin, 0, "input"),
                (&spec.stdout, 1, "output"),
                (&spec.stderr, 2, "error"),
            ];
            for (mode, own, name) in streams {
                let fd = match mode {
                    StdioMode::Inherit => own,
                    StdioMode::Fd(fd) => fd.as_raw_fd(),
                    StdioMode::Null | StdioMode::Piped => continue,
                };
                if let Some(what) = open_socket_stream(fd) {
                    return Err(LaunchError::Refused {
                        program: spec.program.to_string_lossy().into_owned(),
                        reason: format!(
                            "its standard {name} is {what}: a channel no rule of the policy \
                             grants (give it a pipe, a file, a terminal or a connected stream)"
                        ),
                    });
                }
            }
        }
        let confinement = spec
            .landlock
            .as_deref()
            .map(|plan| Confinement::prepare(plan, cwd.as_deref()))
            .transpose()
            .map_err(|source| {
                match source
                    .get_ref()
                    .and_then(|e| e.downcast_ref::<crate::landlock::confine::Refusal>())
                {
                    Some(refusal) => LaunchError::Refused {
                        program: spec.program.to_string_lossy().into_owned(),
                        reason: refusal.0.clone(),
                    },
                    None => LaunchError::Prepare {
                        what: "prepare the Landlock confinement",
                        source,
                    },
                }
            })?;
        let parent_pidfd = match confinement {
            None => None,
            Some(_) => {
                // SAFETY: pidfd_open(2) of this process; returns a new descriptor or -1.
                let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, parent_pid, 0u32) };
                if fd < 0 {
                    return Err(LaunchError::Prepare {
                        what: "pidfd_open of bee itself",
                        source: io::Error::last_os_error(),
                    });
                }
                // SAFETY: a new descriptor nobody else owns.
                Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
            }
        };
        Ok(Self {
            procs_fd,
            report_fd,
            parent_pid,
            controlling_terminal: spec.controlling_terminal,
            rlimits: [
                (Step::RlimitCore, Some(0)),
                (Step::RlimitNofile, r.nofile),
                (Step::RlimitNproc, r.nproc),
                (Step::RlimitCpu, r.cpu_seconds),
                (Step::RlimitAs, r.address_space),
            ],
            lowered: r.lowered,
            setpcap: cap_eff.has(CAP_SETPCAP),
            last_cap: last_cap.min(63),
            credentials: spec.credentials.as_ref().map(|c| (c.uid, c.gid)),
            groups: spec
                .credentials
                .as_ref()
                .map(|c| c.groups.clone())
                .unwrap_or_default(),
            cwd_as_user: match (&spec.credentials, &cwd) {
                (Some(_), Some(dir)) => Some(
                    std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|_| {
                        LaunchError::Prepare {
                            what: "the working directory holds a NUL byte",
                            source: io::Error::from(io::ErrorKind::InvalidInput),
                        }
                    })?,
                ),
                _ => None,
            },
            becomes_root: spec.credentials.as_ref().map_or(euid == 0, |c| c.uid == 0),
            confinement,
            parent_pidfd,
        })
    }

    /// Runs in the child between `fork` and `execve`: raw system calls only.
    fn run(&self) -> io::Result<()> {
        let fail = |step: Step| -> io::Error {
            let err = io::Error::last_os_error();
            self.report(step);
            err
        };
        let check = |rc: libc::c_long, step: Step| -> io::Result<()> {
            if rc < 0 { Err(fail(step)) } else { Ok(()) }
        };
        // SAFETY (whole function): each call is a plain system call on integers, on stack
        // memory of this frame or on `self.groups`, allocated before fork and not mutated.
        unsafe {
            // 1. Join the scope (unless born in it).
            if let Some(procs_fd) = self.procs_fd {
                let zero = b"0";
                let rc = libc::write(procs_fd, zero.as_ptr().cast(), zero.len());
                check(rc as libc::c_long, Step::JoinCgroup)?;
            }
            // 2. New session.
            check(libc::setsid() as libc::c_long, Step::Setsid)?;
            // 2b. Standard input as the session's controlling terminal; 0: never steal it.
            if self.controlling_terminal {
                let rc = libc::ioctl(0, libc::TIOCSCTTY, 0);
                check(rc as libc::c_long, Step::ControllingTerminal)?;
            }
            // 3. Resource limits.
            for (step, value) in self.rlimits {
                if let Some(v) = value {
                    check(set_rlimit(step, v), step)?;
                }
            }
            for ((resource, _), value) in LOWERED.iter().zip(self.lowered) {
                if let Some(v) = value {
                    check(lower_rlimit(*resource, v), Step::RlimitLowered)?;
                }
            }
            // 4. Inherited fds.
            let rc = libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            if rc < 0 {
                let mut lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                check(
                    libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) as libc::c_long,
                    Step::CloseFds,
                )?;
                let top = lim.rlim_max.min(1 << 20) as libc::c_int;
                for fd in 3..top {
                    // EBADF for fds that are not open is expected.
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
            // 4b. The Landlock engine's private mounts, while capabilities are held.
            if let Some(c) = &self.confinement {
                if let Err(step) = c.enter() {
                    let err = io::Error::last_os_error();
                    self.report(step);
                    return Err(err);
                }
            }
            // 5. Securebits and the bounding set.
            if self.setpcap {
                check(
                    libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0) as libc::c_long,
                    Step::Securebits,
                )?;
                for cap in 0..=self.last_cap {
                    let rc = libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
                    check(rc as libc::c_long, Step::BoundingSet)?;
                }
            } else if self.becomes_root {
                // uid 0 with a non-empty bounding set cannot be made capability-free for good.
                self.report_errno(Step::BoundingSet as u8, libc::EPERM);
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
            // 6. Ambient capabilities.
            let rc = libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            );
            check(rc as libc::c_long, Step::AmbientCaps)?;
            // 7. Credentials.
            if let Some((uid, gid)) = self.credentials {
                let rc = libc::syscall(
                    libc::SYS_setgroups,
                    self.groups.len() as libc::size_t,
                    self.groups.as_ptr(),
                );
                check(rc, Step::Setgroups)?;
                let rc = libc::syscall(libc::SYS_setresgid, gid, gid, gid);
                check(rc, Step::Setgid)?;
                let rc = libc::syscall(libc::SYS_setresuid, uid, uid, uid);
                check(rc, Step::Setuid)?;
            }
            // 8. Empty effective, permitted and inheritable sets.
            let mut header = CapHeader {
                version: CAPABILITY_VERSION_3,
                pid: 0,
            };
            let data = [CapData::default(); 2];
            let rc = libc::syscall(
                libc::SYS_capset,
                &mut header as *mut CapHeader,
                data.as_ptr(),
            );
            check(rc, Step::DropCaps)?;
            // 8b. The working directory, resolved again with the user's own access and no
            // capability left: the first chdir was bee's, and may have crossed directories
            // the user cannot.
            if let Some(dir) = &self.cwd_as_user {
                check(libc::chdir(dir.as_ptr()) as libc::c_long, Step::WorkingDir)?;
            }
            // 9. No new privileges.
            let rc = libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            check(rc as libc::c_long, Step::NoNewPrivs)?;
            // 10. Die with the parent, and make sure it is still there.
            let rc = libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            check(rc as libc::c_long, Step::ParentDeathSignal)?;
            let parent_gone = match &self.parent_pidfd {
                // Readable once the process has exited.
                Some(fd) => {
                    let mut poll = libc::pollfd {
                        fd: fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    libc::poll(&mut poll, 1, 0) != 0
                }
                None => libc::getppid() != self.parent_pid,
            };
            if parent_gone {
                self.report_errno(Step::ParentGone as u8, libc::ESRCH);
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // 11. The Landlock domain and the seccomp filter, last; the filter's listener goes
            // to bee, and this process keeps no copy of it.
            if let Some(c) = &self.confinement {
                let listener = match c.restrict() {
                    Ok(listener) => listener,
                    Err(step) => {
                        let err = io::Error::last_os_error();
                        self.report(step);
                        return Err(err);
                    }
                };
                let sent = send_fd(self.report_fd, listener);
                let err = io::Error::last_os_error();
                libc::close(listener);
                if !sent {
                    self.report_errno(Step::SeccompListener as u8, err.raw_os_error().unwrap_or(0));
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// Reports `step` with the current `errno`.
    fn report(&self, step: Step) {
        self.report_errno(step as u8, errno());
    }

    /// Reports a failure of the spawn itself (standard streams, working directory,
    /// `execve`) with the current `errno`.
    fn report_spawn(&self) {
        self.report_errno(0, errno());
    }

    /// Writes `[step, errno (4 bytes, little endian)]` to the report pipe. Async-signal-safe.
    fn report_errno(&self, step: u8, errno: i32) {
        let e = errno.to_le_bytes();
        let msg = [step, e[0], e[1], e[2], e[3]];
        // SAFETY: writes five bytes from the stack to the report pipe; errors are ignored (the
        // parent then reports a spawn error without the step).
        unsafe { libc::write(self.report_fd, msg.as_ptr().cast(), msg.len()) };
    }
}

/// Sends `fd` as the only descriptor of a one-byte message on the socket `socket`
/// (`SCM_RIGHTS`); false with `errno` set when it was not sent. Async-signal-safe: the message
/// and its control buffer are on this frame's stack.
///
/// Why a message, and not `pidfd_getfd(2)` from the parent: the child only pushes the
/// descriptor and goes on, with no handshake, on a socket it has anyway (the report channel);
/// `pidfd_getfd` would need the child to wait until bee took it, and ptrace access to a child
/// that has by then dropped every capability and may run as another user — refused outright
/// under Yama's `ptrace_scope` 3. A descriptor in flight belongs to the socket: if bee never
/// receives it, closing the socket closes it, and the kernel answers the filter's refusals
/// `ENOSYS` (fail closed).
fn send_fd(socket: RawFd, fd: RawFd) -> bool {
    const SPACE: usize = 32;
    // u64 words: the control buffer must be aligned for `struct cmsghdr`.
    let mut control = [0u64; SPACE / 8];
    let mut byte = [b'L'];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: a msghdr over this frame's buffers; CMSG_* only compute within `control`, which
    // holds CMSG_SPACE(sizeof(int)) (24 bytes on 64-bit Linux).
    unsafe {
        let space = libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize;
        if space > SPACE {
            *libc::__errno_location() = libc::EINVAL;
            return false;
        }
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        if cmsg.is_null() {
            *libc::__errno_location() = libc::EINVAL;
            return false;
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd);
        libc::sendmsg(socket, &raw const msg, libc::MSG_NOSIGNAL) == 1
    }
}

/// The calling thread's `errno`. Async-signal-safe.
fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// `setrlimit(2)` of the resource `step` names, soft and hard limit both `value`. Returns the
/// call's result (negative on failure, with `errno` set). Async-signal-safe.
fn set_rlimit(step: Step, value: u64) -> libc::c_long {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: `lim` is a valid rlimit on the stack.
    let rc = unsafe {
        match step {
            Step::RlimitCore => libc::setrlimit(libc::RLIMIT_CORE, &lim),
            Step::RlimitNofile => libc::setrlimit(libc::RLIMIT_NOFILE, &lim),
            Step::RlimitNproc => libc::setrlimit(libc::RLIMIT_NPROC, &lim),
            Step::RlimitCpu => libc::setrlimit(libc::RLIMIT_CPU, &lim),
            Step::RlimitAs => libc::setrlimit(libc::RLIMIT_AS, &lim),
            _ => return -1,
        }
    };
    libc::c_long::from(rc)
}

/// Lowers `resource`'s hard limit to `hard` where it is higher, and its soft limit with it
/// (`getrlimit`, then `setrlimit`); never raises either. Returns the call's result (negative
/// on failure, with `errno` set). Async-signal-safe.
fn lower_rlimit(resource: libc::__rlimit_resource_t, hard: u64) -> libc::c_long {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit on the stack, for both calls.
    let rc = unsafe {
        if libc::getrlimit(resource, &mut lim) != 0 {
            return -1;
        }
        lim.rlim_max = lim.rlim_max.min(hard);
        lim.rlim_cur = lim.rlim_cur.min(lim.rlim_max);
        libc::setrlimit(resource, &lim)
    };
    libc::c_long::from(rc)
}

/// `struct __user_cap_header_struct` (`include/uapi/linux/capability.h`).
#[repr(C)]
#[derive(Debug)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`; version 3 takes two of them (capabilities 0–31, 32–63).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// A launched command.
#[derive(Debug)]
pub struct Launched {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    /// Set once the command has been reaped.
    status: Option<ExitStatus>,
    launcher: Launcher,
    /// The listener of the Landlock engine's seccomp filter, until the engine takes it.
    seccomp_listener: Option<OwnedFd>,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Its wait status.
    pub status: ExitStatus,
    /// True when it ran out of time and was killed.
    pub timed_out: bool,
    /// True when it was stopped early (its waiter was interrupted) and killed the same way.
    pub interrupted: bool,
}

impl Outcome {
    /// The shell's convention: the exit code, or 128 + the signal number.
    pub fn exit_code(&self) -> i32 {
        exit_code(self.status)
    }
}

/// How long [`Launched::wait_or_kill`] gives a command it killed to be reaped.
pub const REAP_WAIT: Duration = Duration::from_secs(5);

/// The shell's convention for a wait status: the exit code, or 128 + the signal number.
pub fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 128,
    }
}

impl Launched {
    /// A command started by [`Command`]: its pid, a pidfd opened for it and its pipes. The
    /// [`Child`] itself is dropped (which neither waits nor kills): the command is waited for
    /// by pid.
    fn new(mut child: Child) -> Self {
        let pid = child.id() as libc::pid_t;
        // SAFETY: pidfd_open(2) takes a pid and flags; the result is a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let pidfd = (fd >= 0).then(|| {
            // SAFETY: pidfd_open returned a new fd that nothing else owns.
            unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
        });
        Self {
            pid,
            pidfd,
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            status: None,
            launcher: Launcher::CgroupProcs,
            seccomp_listener: None,
        }
    }

    /// A command started by `clone3`: its pid, pidfd, the parent's ends of its pipes and the
    /// listener of its seccomp filter (Landlock engine).
    fn from_parts(
        pid: libc::pid_t,
        pidfd: Option<OwnedFd>,
        [stdin, stdout, stderr]: [Option<OwnedFd>; 3],
        seccomp_listener: Option<OwnedFd>,
    ) -> Self {
        Self {
            pid,
            pidfd,
            stdin: stdin.map(ChildStdin::from),
            stdout: stdout.map(ChildStdout::from),
            stderr: stderr.map(ChildStderr::from),
            status: None,
            launcher: Launcher::Clone3IntoCgroup,
            seccomp_listener,
        }
    }

    /// Takes the listener of the command's seccomp filter (a launch confined by a Landlock
    /// plan; `None` otherwise, or once taken): every call the filter refuses, by any process
    /// or thread of the launch, waits until whoever holds it answers. Dropped unanswered, it
    /// closes, and the kernel answers those calls `ENOSYS` ([`crate::landlock::seccomp`]).
    pub fn take_seccomp_listener(&mut self) -> Option<OwnedFd> {
        self.seccomp_listener.take()
    }

    /// How the command got into its scope.
    pub fn launcher(&self) -> Launcher {
        self.launcher
    }

    /// The command's pid (also its session and process group id).
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Takes the write end of a piped stdin.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Takes the read end of a piped stdout.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// Takes the read end of a piped stderr.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.stderr.take()
    }

    /// `waitpid` of the command, without blocking when `block` is false; `None` while it
    /// runs. The status is kept once reaped.
    fn reap(&mut self, block: bool) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let flags = if block { 0 } else { libc::WNOHANG };
        loop {
            let mut raw = 0;
            // SAFETY: waitpid(2) on our own child, with a status int on the stack.
            let rc = unsafe { libc::waitpid(self.pid, &mut raw, flags) };
            if rc == 0 {
                return Ok(None);
            }
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let status = ExitStatus::from_raw(raw);
            self.status = Some(status);
            return Ok(Some(status));
        }
    }

    /// Waits up to `timeout` (forever with `None`) for the command to exit; `None` if it is
    /// still running then. Uses a pidfd (Linux 5.3) and falls back to polling.
    ///
    /// # Errors
    /// [`LaunchError::Wait`].
    pub fn wait_timeout(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<ExitStatus>, LaunchError> {
        let pid = self.id();
        let werr = |source| LaunchError::Wait { pid, source };
        let Some(timeout) = timeout else {
            return self.reap(true).map_err(werr);
        };
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.reap(false).map_err(werr)? {
                return Ok(Some(status));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            match &self.pidfd {
                Some(fd) => {
                    let mut pfd = libc::pollfd {
                        fd: fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
                    // SAFETY: one valid pollfd on the stack.
                    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
                    if rc < 0 {
                        let e = io::Error::last_os_error();
                        if e.kind() != io::ErrorKind::Interrupted {
                            return Err(werr(e));
                        }
                    }
                }
                None => std::thread::sleep(left.min(Duration::from_millis(10))),
            }
        }
    }

    /// Waits up to `timeout` for the command; on timeout kills every process of `cgroup`
    /// and reaps the command, giving it [`REAP_WAIT`] to go ([`crate::scope::wait_and_kill`]
    /// with [`KillTarget::Cgroup`](crate::scope::KillTarget::Cgroup)).
    ///
    /// # Errors
    /// [`LaunchError::Wait`] (waiting failed, or the killed command was not reaped within
    /// [`REAP_WAIT`]) or [`LaunchError::Cgroup`] (when killing failed).
    pub fn wait_or_kill(
        &mut self,
        cgroup: &ScopeCgroup,
        timeout: Option<Duration>,
    ) -> Result<Outcome, LaunchError> {
        let limits = crate::scope::WaitLimits {
            timeout,
            poll: None,
            kill: crate::scope::KillTarget::Cgroup,
            kill_wait: REAP_WAIT,
        };
        crate::scope::wait_and_kill(self, cgroup, &limits, &mut || false)
    }
}
