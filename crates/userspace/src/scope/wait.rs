//! Waiting for a command in a scope: one wait with a deadline and a stop question, and one
//! kill when the wait ends early.
//!
//! [`wait_and_kill`] is the wait of every owner of a scope: a [`super::Scope`] running one
//! command and `bee serve`'s spawns (which kill the whole cgroup), and the harness's sandbox,
//! whose calls are children in one long-lived cgroup (which kills the call's process group
//! first). Emptying the cgroup
//! afterwards is the caller's next step ([`ScopeCgroup::empty`]).

use std::io;
use std::os::unix::process::ExitStatusExt as _;
use std::time::{Duration, Instant};

use crate::cgroup::ScopeCgroup;
use crate::launch::{LaunchError, Launched, Outcome};

/// What [`wait_and_kill`] kills when the wait ends early (at the deadline, when stopped, or
/// when waiting itself failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillTarget {
    /// Every process in the cgroup. When that kill fails the command may still run, so the
    /// wait ends with the error ([`LaunchError::Cgroup`]) instead of waiting for it.
    Cgroup,
    /// The command's process group (the launcher makes every command a session and group
    /// leader), then every process in the cgroup. The group's `SIGKILL` ends the command
    /// whatever the cgroup kill does, so a failed cgroup kill is left to the caller, which
    /// empties the cgroup afterwards ([`ScopeCgroup::empty`]).
    ProcessGroupAndCgroup,
}

/// How [`wait_and_kill`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitLimits {
    /// How long the command may run; then it is killed and reported with
    /// [`Outcome::timed_out`]. Zero gives it no time at all: it is killed at once (one that
    /// has ended on its own by the time the kill lands is reported as it ended, not timed
    /// out). `None`: no limit.
    pub timeout: Option<Duration>,
    /// How often the wait wakes to ask its `tick` whether to stop; `None`: it is never asked.
    pub poll: Option<Duration>,
    /// What is killed when the wait ends early.
    pub kill: KillTarget,
    /// How long to wait for the killed command to be reaped (a process in an uninterruptible
    /// sleep outlives `SIGKILL` until it wakes): past it the wait ends with an error rather
    /// than hang its caller.
    pub kill_wait: Duration,
}

/// Waits for `launched`, which runs in `cgroup`, until it exits or `limits.timeout` (counted
/// from this call) passes. While it runs, `tick` is called every `limits.poll` (when set);
/// when it answers true the command is stopped and reported with [`Outcome::interrupted`].
/// At the timeout or a stop, `limits.kill` is killed and the command reaped. Whatever else the
/// command left in the cgroup may still run when this returns.
///
/// # Errors
/// [`LaunchError::Wait`] when waiting failed (the command is then killed and given up to
/// `limits.kill_wait` to be reaped) or the killed command was not reaped within
/// `limits.kill_wait` (`ErrorKind::TimedOut`);
/// [`LaunchError::Cgroup`] when killing the cgroup failed with [`KillTarget::Cgroup`].
pub fn wait_and_kill(
    launched: &mut Launched,
    cgroup: &ScopeCgroup,
    limits: &WaitLimits,
    tick: &mut dyn FnMut() -> bool,
) -> Result<Outcome, LaunchError> {
    let deadline = limits.timeout.map(|t| Instant::now() + t);
    let mut interrupted = false;
    let waited = loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let slice = match (left, limits.poll) {
            (Some(left), Some(poll)) => Some(left.min(poll)),
            (left, poll) => left.or(poll),
        };
        if slice.is_some_and(|s| s.is_zero()) {
            break Ok(None);
        }
        match launched.wait_timeout(slice) {
            Ok(None) if tick() => {
                interrupted = true;
                break Ok(None);
            }
            Ok(None) => {}
            done => break done,
        }
    };
    match waited {
        Ok(Some(status)) => Ok(Outcome {
            status,
            timed_out: false,
            interrupted: false,
        }),
        Ok(None) => {
            kill(launched.id(), cgroup, limits.kill)?;
            let status = launched
                .wait_timeout(Some(limits.kill_wait))?
                .ok_or_else(|| LaunchError::Wait {
                    pid: launched.id(),
                    source: io::Error::from(io::ErrorKind::TimedOut),
                })?;
            // A command that ended on its own before the kill landed is reported as it ended:
            // only one the kill ended timed out or was stopped.
            let killed = status.signal() == Some(libc::SIGKILL);
            Ok(Outcome {
                status,
                timed_out: killed && !interrupted,
                interrupted: killed && interrupted,
            })
        }
        Err(e) => {
            let _ = kill(launched.id(), cgroup, limits.kill);
            let _ = launched.wait_timeout(Some(limits.kill_wait));
            Err(e)
        }
    }
}

/// Kills `target`: the process group `pid` leads and/or every process in `cgroup`.
fn kill(pid: u32, cgroup: &ScopeCgroup, target: KillTarget) -> Result<(), LaunchError> {
    match target {
        KillTarget::Cgroup => {
            cgroup.kill()?;
        }
        KillTarget::ProcessGroupAndCgroup => {
            if let Ok(pgid) = libc::pid_t::try_from(pid) {
                // SAFETY: killpg(2) takes two integers and has no memory-safety
                // preconditions; ESRCH (the group is already gone) is fine.
                unsafe { libc::killpg(pgid, libc::SIGKILL) };
            }
            let _ = cgroup.kill();
        }
    }
    Ok(())
}
