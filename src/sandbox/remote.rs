//! A sandbox whose scope lives in `bee serve`: the same calls, confined by the service
//! instead of by this process, which needs no privilege ([`SandboxMode::Service`]).
//!
//! The policy (runner grant and bee's own state included) is compiled here and proven by the
//! service within the caller's ceiling. Each call passes the service three descriptors — a
//! pipe for input (or `/dev/null`) and pipes for output and errors this process reads — and
//! asks it to kill the scope at the deadline or when told to stop. The service reports each
//! call's denials as they come. A long-lived process ([`Remote::start`]) keeps the connection
//! busy while it runs, on a thread of its own; its denials wait in [`Remote::denials`].
//!
//! [`SandboxMode::Service`]: super::SandboxMode::Service

use std::cell::Cell;
use std::io::Write as _;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bee_core::CompiledPolicy;
use bee_userspace::audit::AuditRecord;
use bee_userspace::launch::{LaunchError, LaunchSpec};
use bee_userspace::scope::EngineKind;

use super::long_lived::{LongLived, RemoteRun};
use super::{RunOutput, SandboxError, capture};
use crate::records::Enforcement;
use crate::serve::client::{Client, ClientError, CommandLine, Report};
use crate::serve::protocol::{Request, Response};

/// How long [`Remote::denials`] waits for the service to send what the kernel just
/// reported: two of its 50 ms polls, and time for the kernel's delivery.
const SERVICE_SETTLE: Duration = Duration::from_millis(150);

/// The service's scope of one sandbox, and the connection that owns it.
pub(super) struct Remote {
    client: Arc<Mutex<Client>>,
    scope: u64,
    engine: EngineKind,
    /// Long-lived processes still running, stopped before the scope is closed.
    live: Mutex<Vec<Arc<RemoteRun>>>,
    /// Their denials, not yet drained.
    pending: Arc<Mutex<Vec<AuditRecord>>>,
    /// The audit records the kernel lost while they ran, not yet taken.
    lost: Arc<AtomicU64>,
}

impl Remote {
    /// Connects to the service at `socket` and has it make a scope for `policy`, in learn
    /// mode when `learn`.
    ///
    /// # Errors
    /// [`SandboxError::Service`]: no service, or the request refused (with the proof's
    /// counterexamples).
    pub(super) fn create(
        socket: &Path,
        policy: &CompiledPolicy,
        origin: &str,
        learn: bool,
    ) -> Result<Self, SandboxError> {
        let mut client = Client::connect(socket)?;
        let engine = EngineKind::parse(&client.welcome.engine).ok_or_else(|| {
            ClientError::Protocol(format!(
                "an engine this bee does not know: {}",
                client.welcome.engine
            ))
        })?;
        let scope = client.create(policy, origin, None, learn)?;
        Ok(Self {
            client: Arc::new(Mutex::new(client)),
            scope,
            engine,
            live: Mutex::new(Vec::new()),
            pending: Arc::default(),
            lost: Arc::default(),
        })
    }

    /// The engine the service enforces with.
    pub(super) fn engine(&self) -> EngineKind {
        self.engine
    }

    /// The scope's id (its cgroup's, in the service's audit records).
    pub(super) fn scope(&self) -> u64 {
        self.scope
    }

    fn client(&self) -> MutexGuard<'_, Client> {
        self.client.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts `spec` in the scope and leaves it running: as [`super::Sandbox::start`]. The
    /// connection is the run's until the process exits or the scope is closed.
    pub(super) fn start(&self, spec: &LaunchSpec) -> Result<LongLived, SandboxError> {
        let command = command_line(spec)?;
        let io = pipe_error("make the process's pipes");
        let (in_read, in_write) = std::io::pipe().map_err(io)?;
        let (out_read, out_write) = std::io::pipe().map_err(io)?;
        let (err_read, err_write) = std::io::pipe().map_err(io)?;
        let run = Arc::new(RemoteRun {
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            status: Mutex::new(None),
        });
        let (client, scope, pending, lost) = (
            Arc::clone(&self.client),
            self.scope,
            Arc::clone(&self.pending),
            Arc::clone(&self.lost),
        );
        let theirs = Arc::clone(&run);
        let thread = std::thread::spawn(move || {
            let child = [
                OwnedFd::from(in_read),
                OwnedFd::from(out_write),
                OwnedFd::from(err_write),
            ];
            let stdio = [
                child[0].as_raw_fd(),
                child[1].as_raw_fd(),
                child[2].as_raw_fd(),
            ];
            let mut client = client.lock().unwrap_or_else(|e| e.into_inner());
            let ran = client.run(
                scope,
                command,
                stdio,
                &mut |r| match r {
                    Report::Record(r) => {
                        if let Ok(mut p) = pending.lock() {
                            p.push(r.clone());
                        }
                    }
                    Report::Lost(n) => {
                        lost.fetch_add(n, Ordering::Relaxed);
                    }
                },
                &|| theirs.stop.load(Ordering::SeqCst),
            );
            drop(child);
            ran.ok().map(|ended| status_of(ended.code))
        });
        if let Ok(mut t) = run.thread.lock() {
            *t = Some(thread);
        }
        if let Ok(mut live) = self.live.lock() {
            live.push(Arc::clone(&run));
        }
        Ok(LongLived::remote(
            run,
            [
                OwnedFd::from(in_write),
                OwnedFd::from(out_read),
                OwnedFd::from(err_read),
            ],
        ))
    }

    /// The denials of long-lived processes since the last drain. The service sends them as
    /// it drains the scope, every 50 ms while a command runs (after the kernel has delivered
    /// them, `bee_userspace::landlock::audit`): so with `settle` this first waits
    /// [`SERVICE_SETTLE`], for a denial made just before to have come.
    pub(super) fn denials(&self, settle: bool) -> Vec<AuditRecord> {
        if settle && self.live.lock().is_ok_and(|l| !l.is_empty()) {
            std::thread::sleep(SERVICE_SETTLE);
        }
        self.pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }

    /// The audit records the kernel lost while long-lived processes ran, since the last
    /// take: as the service reported them with their denials ([`Remote::denials`]).
    pub(super) fn take_lost(&self) -> u64 {
        self.lost.swap(0, Ordering::Relaxed)
    }

    /// Runs `spec` in the scope: as [`super::Sandbox::run_until`].
    pub(super) fn run(
        &self,
        spec: &LaunchSpec,
        input: Option<&[u8]>,
        timeout: Duration,
        output_cap: usize,
        stop: Option<&(dyn Fn() -> bool + Sync)>,
    ) -> Result<RunOutput, SandboxError> {
        let command = command_line(spec)?;
        let io = pipe_error("make the call's pipes");
        let (stdin_child, stdin_parent) = match input {
            Some(_) => {
                let (r, w) = std::io::pipe().map_err(io)?;
                (OwnedFd::from(r), Some(w))
            }
            None => (
                OwnedFd::from(std::fs::File::open("/dev/null").map_err(io)?),
                None,
            ),
        };
        let (out_read, out_write) = std::io::pipe().map_err(io)?;
        let (err_read, err_write) = std::io::pipe().map_err(io)?;
        let out = capture::spawn_reader(out_read, output_cap);
        let err = capture::spawn_reader(err_read, output_cap);
        let writer = stdin_parent.zip(input).map(|(mut w, data)| {
            let data = data.to_vec();
            // A command that does not read its input closes the pipe: EPIPE is fine.
            std::thread::spawn(move || {
                let _ = w.write_all(&data);
            })
        });
        let start = Instant::now();
        let deadline = start + timeout;
        let (timed_out, interrupted) = (Cell::new(false), Cell::new(false));
        let should_stop = || {
            if Instant::now() >= deadline {
                timed_out.set(true);
            } else if stop.is_some_and(|s| s()) {
                interrupted.set(true);
            }
            timed_out.get() || interrupted.get()
        };
        let mut denials: Vec<AuditRecord> = Vec::new();
        let stdio = [
            stdin_child.as_raw_fd(),
            out_write.as_raw_fd(),
            err_write.as_raw_fd(),
        ];
        let ran = self.client().run(
            self.scope,
            command,
            stdio,
            // `exited` carries the total lost.
            &mut |r| {
                if let Report::Record(r) = r {
                    denials.push(r.clone());
                }
            },
            &should_stop,
        );
        // Only the command holds the write ends now; once it is gone the readers end.
        drop((stdin_child, out_write, err_write));
        let ended = match ran {
            Ok(ended) => ended,
            Err(ClientError::Refused(body)) if matches!(body.status, 126 | 127) => {
                let kind = if body.status == 127 {
                    std::io::ErrorKind::NotFound
                } else {
                    std::io::ErrorKind::PermissionDenied
                };
                let _ = (out.join(), err.join());
                return Err(SandboxError::Launch {
                    source: LaunchError::Spawn {
                        program: spec.program().to_string_lossy().into_owned(),
                        source: std::io::Error::new(kind, body.message),
                    },
                    denials,
                });
            }
            Err(e) => return Err(e.into()),
        };
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        if let Some(w) = writer {
            let _ = w.join();
        }
        Ok(RunOutput {
            enforcement: Enforcement::Kernel,
            status: status_of(ended.code),
            timed_out: ended.timed_out || timed_out.get(),
            interrupted: interrupted.get() && !timed_out.get(),
            stdout,
            stderr,
            duration: start.elapsed(),
            denials,
            allowed: Vec::new(),
            lost_records: ended.lost_records,
        })
    }

    /// Has the service switch the scope to `policy`, proven within the caller's ceiling.
    pub(super) fn replace(&self, policy: &CompiledPolicy) -> Result<(), SandboxError> {
        let request = Request::Replace {
            scope: self.scope,
            policy: Box::new(policy.clone()),
        };
        match self.client().ask(&request, &[])? {
            Response::Done => Ok(()),
            other => Err(SandboxError::Service(ClientError::Protocol(format!(
                "an unexpected answer: {other:?}"
            )))),
        }
    }

    /// Tears the scope down, after having the service kill its long-lived processes.
    pub(super) fn close(&self) -> Result<(), SandboxError> {
        let live = self
            .live
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default();
        for run in live {
            run.stop_and_join();
        }
        Ok(self.client().close(self.scope)?)
    }
}

/// The service's form of `spec`, or why it has none (a launch error: the command did not run).
fn command_line(spec: &LaunchSpec) -> Result<CommandLine, SandboxError> {
    CommandLine::of(spec).map_err(|why| SandboxError::Launch {
        source: LaunchError::Spawn {
            program: spec.program().to_string_lossy().into_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why),
        },
        denials: Vec::new(),
    })
}

/// The error of a failed `pipe(2)` while preparing to `what`.
fn pipe_error(what: &'static str) -> impl Fn(std::io::Error) -> SandboxError + Copy {
    move |source| SandboxError::Wait(LaunchError::Prepare { what, source })
}

/// A wait status for a shell-style code: `code` for an exit, 128 + N for signal N.
fn status_of(code: i32) -> ExitStatus {
    if code > 128 && code < 128 + 65 {
        ExitStatus::from_raw(code - 128)
    } else {
        ExitStatus::from_raw((code & 0xff) << 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_codes_become_the_same_wait_status() {
        for code in [0, 1, 3, 126, 127, 128 + 9, 128 + 15] {
            assert_eq!(
                bee_userspace::launch::exit_code(status_of(code)),
                code,
                "{code}"
            );
        }
        assert_eq!(status_of(128 + 9).signal(), Some(9));
    }
}
