//! The signals that end `bee exec` while its command runs — `SIGTERM`, `SIGHUP`, `SIGINT` and
//! `SIGQUIT` — and the one place that decides what they do, in process and through `bee serve`,
//! with a pseudo-terminal or without.
//!
//! Caught from just before the scope is made ([`Ending::catch`]), such a signal does not end bee
//! at once: the wait sees it at its next poll ([`Ending::came`]) and kills the whole scope, as
//! `--timeout` does (through the service: asks the service to), and bee then runs the teardown
//! a normal end runs — the scope's cgroup removed, the audit file completed and flushed, the
//! denial lines printed, the terminal restored. Only then does [`Ending::end`] end bee by that
//! signal's default action. Before, the default action ended bee at once: the command died with
//! it (`PR_SET_PDEATHSIG`) but the scope's cgroup stayed behind, empty, and the audit file lost
//! what was not yet written out. A second ending signal still ends bee at once, by its default
//! action: the teardown itself is bounded, but the denial lines and the terminal's output wait
//! for readers, and one that never reads must not keep bee from ending.

use std::io::{self, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::app::Exit;

/// The signals that end `bee exec` after its teardown.
const ENDING: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT];

/// The ending signals, once caught: which one came, if any.
#[derive(Debug, Default)]
pub(crate) struct Ending {
    signal: Arc<AtomicUsize>,
    /// Set by the first: the next one takes its default action at once.
    came: Arc<AtomicBool>,
}

impl Ending {
    /// Catches the ending signals that bee's parent left to their default action; one bee was
    /// started ignoring stays ignored (`nohup`'s `SIGHUP`, a background job's `SIGINT` and
    /// `SIGQUIT`), as it would have been without bee's catching, for the command too. A
    /// signal that cannot be caught (signal-hook refuses) keeps its default action.
    pub(crate) fn catch(&self) {
        for signal in ENDING {
            if ignored(signal) {
                continue;
            }
            let value = usize::try_from(signal).unwrap_or_default();
            // In this order (signal-hook runs a signal's actions as registered): a second one
            // ends bee before it would be recorded; the first is recorded, then marked.
            let _ = signal_hook::flag::register_conditional_default(signal, Arc::clone(&self.came));
            let _ = signal_hook::flag::register_usize(signal, Arc::clone(&self.signal), value);
            let _ = signal_hook::flag::register(signal, Arc::clone(&self.came));
        }
    }

    /// The ending signal that came, if one did.
    pub(crate) fn signal(&self) -> Option<libc::c_int> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            n => libc::c_int::try_from(n).ok(),
        }
    }

    /// Whether an ending signal came: the wait's stop question.
    pub(crate) fn came(&self) -> bool {
        self.signal().is_some()
    }

    /// `bee exec`'s end, called once its teardown is done: `exit` when no ending signal came;
    /// otherwise bee ends by that signal.
    ///
    /// The signal is raised again with its default action rather than turned into an exit
    /// status: a process a signal ended is reported as one (`WIFSIGNALED` for whatever started
    /// bee; 128 + N in a shell), and a shell running bee in a script goes on after a child
    /// that exited 130 on Ctrl-C but stops with one that `SIGINT` ended (bash's wait and
    /// cooperative exit) — an exit status would tell both apart wrongly. `SIGQUIT`'s default
    /// action dumps core where the limits allow it, as it would have. Only where the default
    /// action cannot be restored does bee exit 128 + N instead ([`Exit::of_signal`]).
    pub(crate) fn end(self, exit: Exit) -> Exit {
        let Some(signal) = self.signal() else {
            return exit;
        };
        let _ = io::stdout().flush();
        let _ = io::stderr().flush();
        // SAFETY: sigaction(2) with a zeroed struct whose handler is SIG_DFL, then
        // pthread_sigmask(3) and raise(3) on this thread; no memory is shared.
        unsafe {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            if libc::sigaction(signal, &default, std::ptr::null_mut()) == 0 {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, signal);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::raise(signal);
            }
        }
        Exit::of_signal(signal)
    }
}

/// The name of an ending signal, for bee's message (`SIGTERM`).
pub(crate) fn name(signal: libc::c_int) -> &'static str {
    signal_hook::low_level::signal_name(signal).unwrap_or("a signal")
}

/// Whether `signal`'s action is to be ignored (as bee's parent left it).
fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: sigaction(2) reads the current action into a zeroed struct and changes nothing.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_signal_leaves_the_status_as_it_is() {
        let ending = Ending::default();
        assert!(!ending.came());
        assert_eq!(ending.end(Exit::Child(3)), Exit::Child(3));
    }

    #[test]
    fn the_names_are_the_signals() {
        assert_eq!(name(libc::SIGTERM), "SIGTERM");
        assert_eq!(name(libc::SIGHUP), "SIGHUP");
    }
}
