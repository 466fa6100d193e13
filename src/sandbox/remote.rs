//! A sandbox whose scope lives in `bee serve`: the same calls, confined by the service
//! instead of by this process, which needs no privilege ([`SandboxMode::Service`]).
//!
//! The policy (runner grant and bee's own state included) is compiled here and proven by the
//! service within the caller's ceiling. Each call passes the service three descriptors — a
//! pipe for input (or `/dev/null`) and pipes for output and errors this process reads — and
//! asks it to kill the scope at the deadline or when told to stop. The service reports each
//! call's denials when it ends.
//!
//! [`SandboxMode::Service`]: super::SandboxMode::Service

use std::cell::Cell;
use std::io::Write as _;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bee_core::CompiledPolicy;
use bee_userspace::audit::AuditRecord;
use bee_userspace::launch::{LaunchError, LaunchSpec};
use bee_userspace::scope::EngineKind;

use super::{RunOutput, SandboxError, capture};
use crate::records::Enforcement;
use crate::serve::client::{Client, ClientError, CommandLine};
use crate::serve::protocol::{Request, Response};

/// The service's scope of one sandbox, and the connection that owns it.
pub(super) struct Remote {
    client: Mutex<Client>,
    scope: u64,
    engine: EngineKind,
}

impl Remote {
    /// Connects to the service at `socket` and has it make a scope for `policy`.
    ///
    /// # Errors
    /// [`SandboxError::Service`]: no service, or the request refused (with the proof's
    /// counterexamples).
    pub(super) fn create(
        socket: &Path,
        policy: &CompiledPolicy,
        origin: &str,
    ) -> Result<Self, SandboxError> {
        let mut client = Client::connect(socket)?;
        let engine = EngineKind::parse(&client.welcome.engine).ok_or_else(|| {
            ClientError::Protocol(format!(
                "an engine this bee does not know: {}",
                client.welcome.engine
            ))
        })?;
        let scope = client.create(policy, origin, None)?;
        Ok(Self {
            client: Mutex::new(client),
            scope,
            engine,
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

    /// Runs `spec` in the scope: as [`super::Sandbox::run_until`].
    pub(super) fn run(
        &self,
        spec: &LaunchSpec,
        input: Option<&[u8]>,
        timeout: Duration,
        output_cap: usize,
        stop: Option<&(dyn Fn() -> bool + Sync)>,
    ) -> Result<RunOutput, SandboxError> {
        let command = CommandLine::of(spec).map_err(|why| SandboxError::Launch {
            source: LaunchError::Spawn {
                program: spec.program().to_string_lossy().into_owned(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why),
            },
            denials: Vec::new(),
        })?;
        let io = |e: std::io::Error| {
            SandboxError::Wait(LaunchError::Prepare {
                what: "make the call's pipes",
                source: e,
            })
        };
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
            &mut |r| denials.push(r.clone()),
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

    /// Tears the scope down.
    pub(super) fn close(&self) -> Result<(), SandboxError> {
        Ok(self.client().close(self.scope)?)
    }
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
