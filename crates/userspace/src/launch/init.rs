//! A minimal init for a command launched into a PID namespace of its own (the Landlock
//! engine's launches): the launched child stays PID 1 and runs the command as its child.
//!
//! The first process of a PID namespace gets from inside the namespace only the signals it
//! has a handler for, and inherits every orphan. A command that ran as that process would
//! survive its own `kill -9 $$` or `raise(SIGTERM)`, ignore Ctrl-C without a handler of its
//! own, and leave its orphans unreaped; as the BPF LSM runs it (no PID namespace), it does
//! none of these. So, as `bwrap` and `tini` do, the child forks once more after every step of
//! its confinement: the command runs as PID 2, and PID 1:
//!
//! - closes every descriptor it holds (the command's standard streams, the report pipe), so
//!   that bee sees end-of-file and the launch's outcome exactly as it would without it;
//! - passes on each signal a process sends it (a `kill 1` inside the scope, or a signal sent
//!   to the launched process from outside) to the command; a signal the terminal sends reaches the whole foreground process group, the
//!   command included, and is not passed on a second time;
//! - is not dumpable, so the command cannot trace it or read its memory;
//! - reaps every child, and exits as the command ended: its exit status, or 128 + the signal
//!   that ended it (PID 1 cannot be ended by its own signal). When it exits, the kernel kills
//!   whatever else runs in the namespace, as it did when the command was PID 1.
//!
//! It runs only async-signal-safe system calls on its own stack, like the rest of the child.

use std::sync::atomic::{AtomicI32, Ordering};

/// The command's PID in the namespace, for the signal handler.
static COMMAND: AtomicI32 = AtomicI32::new(0);

/// The signals passed on to the command (`SIGKILL` and `SIGSTOP` cannot be caught; bee's
/// kill of the scope reaches every process through the cgroup anyway).
const FORWARDED: [libc::c_int; 9] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGCONT,
    libc::SIGWINCH,
    libc::SIGALRM,
];

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let code = unsafe { (*info).si_code };
    // SI_KERNEL: the terminal's signal to the foreground process group, which the command is
    // in and has had already.
    if code == libc::SI_KERNEL {
        return;
    }
    let pid = COMMAND.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Forks the command's process. In the command's process this returns and the caller goes on
/// to `execve`; in this one (PID 1) it never returns. A fork that fails returns its errno
/// to the caller, which reports it and exits.
///
/// # Safety
/// Only in the launched child, after every confinement step and before `execve`, with
/// nothing but raw system calls around it.
pub(super) unsafe fn fork_command() -> Result<(), libc::c_int> {
    // SAFETY (whole function): raw system calls on integers and this frame's stack.
    unsafe {
        // Handlers go in before the fork, with every forwarded signal blocked until the
        // command's PID is known; the command's process restores the defaults before it
        // unblocks them.
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut blocked);
        for sig in FORWARDED {
            libc::sigaddset(&mut blocked, sig);
        }
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_BLOCK, &blocked, &mut old);
        // Not dumpable from before the fork, so that no instant is left in which the command
        // (same user, same domain, no capability) could trace it, stop it or read its memory:
        // a `PTRACE_ATTACH` would leave it stopped, and the launch waiting for it. The
        // command's process gets a dumpable state again from its `execve`.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let pid = libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0);
        if pid < 0 {
            let e = *libc::__errno_location();
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            return Err(e);
        }
        if pid == 0 {
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            return Ok(());
        }
        let pid = pid as libc::pid_t;
        COMMAND.store(pid, Ordering::Relaxed);
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
        let mut action: libc::sigaction = std::mem::zeroed();
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = forward;
        action.sa_sigaction = handler as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        for sig in FORWARDED {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
        libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        loop {
            let mut status: libc::c_int = 0;
            let reaped = libc::waitpid(-1, &mut status, 0);
            // Only an exit or a death ends the command: a traced command's stop (after
            // `PTRACE_TRACEME`) is reported here too, and is not its end.
            if reaped > 0 && libc::WIFSTOPPED(status) {
                // Only a traced child's stop is reported without `WUNTRACED`: a command that
                // asked to be traced (`PTRACE_TRACEME`) has this process as its tracer. It
                // goes on, with the signal that stopped it.
                libc::ptrace(
                    libc::PTRACE_CONT,
                    reaped,
                    std::ptr::null_mut::<libc::c_void>(),
                    libc::WSTOPSIG(status) as usize as *mut libc::c_void,
                );
                continue;
            }
            if reaped == pid && (libc::WIFEXITED(status) || libc::WIFSIGNALED(status)) {
                let code = if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                };
                libc::_exit(code);
            }
            if reaped < 0 && *libc::__errno_location() == libc::ECHILD {
                libc::_exit(127);
            }
        }
    }
}
