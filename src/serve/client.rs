//! The client side: what `bee exec` (and any program) uses to have `bee serve` confine a
//! command, with no privilege of its own.

use std::ffi::OsStr;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use bee_core::CompiledPolicy;
use bee_userspace::audit::AuditRecord;
use bee_userspace::launch::LaunchSpec;

use super::protocol::{ErrorBody, Limits, Request, Response, VERSION, Welcome, decode};
use super::server::MID_FRAME;
use super::wire::{self, RecvError};

/// Why the service did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No service answers at the socket (69), or the socket may not be used (77).
    #[error("no bee service answers at {path}: {source}")]
    Unreachable {
        /// The socket's path.
        path: String,
        /// `connect(2)`'s error.
        source: io::Error,
    },
    /// The service refused the request, with the status a command reports for it.
    /// Shown with its details (a refused proof's counterexamples), a line each.
    #[error("{0}")]
    Refused(ErrorBody),
    /// The conversation broke: a bad frame, an unexpected answer, a hang-up (70).
    #[error("the bee service: {0}")]
    Protocol(String),
}

impl ClientError {
    /// The sysexits status a command reports for this error.
    pub fn status(&self) -> u8 {
        match self {
            ClientError::Unreachable { source, .. }
                if source.kind() == io::ErrorKind::PermissionDenied =>
            {
                77
            }
            ClientError::Unreachable { .. } => 69,
            ClientError::Refused(body) => body.status,
            ClientError::Protocol(_) => 70,
        }
    }
}

/// How a command run through the service ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Its status as a shell reports it (128 + signal when a signal ended it).
    pub code: i32,
    /// True when the scope's timeout killed it.
    pub timed_out: bool,
    /// How many of the kernel's audit records were lost while it ran (its denials may be
    /// incomplete).
    pub lost_records: u64,
}

/// What the service reports of a command while it runs, as [`Client::run`] hands it on.
#[derive(Debug, Clone, Copy)]
pub enum Report<'a> {
    /// One of the scope's denials (or, in learn mode, an access learned).
    Record(&'a AuditRecord),
    /// This many of the kernel's audit records were lost since the last report of it: the
    /// records reported may miss denials. [`Ended::lost_records`] is their total.
    Lost(u64),
}

/// What [`Client::run`] starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
    /// Its working directory (absolute).
    pub cwd: String,
    /// Its resource limits (lowered by the service to the caller's own).
    pub limits: Limits,
    /// Its stdin is a terminal the caller opened for it, to become its controlling terminal
    /// ([`LaunchSpec::controlling_terminal`]).
    pub terminal: bool,
}

impl CommandLine {
    /// The command `spec` describes, as the service starts it: its program, arguments and
    /// working directory (`/` when it names none), its environment (`spec.environment()`;
    /// a variable whose name or value is not UTF-8 is not passed) and its resource limits.
    ///
    /// # Errors
    /// The first argument (the program is the first) or the working directory that is not
    /// UTF-8, in words: the protocol carries text, and a name changed on the way could start
    /// another program or work in another directory.
    pub fn of(spec: &LaunchSpec) -> Result<Self, String> {
        let text = |what: &str, s: &OsStr| {
            s.to_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{what} `{}` is not UTF-8", s.to_string_lossy()))
        };
        let mut argv = vec![text("the program", spec.program())?];
        for arg in spec.arguments() {
            argv.push(text("the argument", arg)?);
        }
        let cwd = match spec.working_dir() {
            Some(dir) => text("the working directory", dir.as_os_str())?,
            None => "/".to_owned(),
        };
        let env = spec
            .environment()
            .into_iter()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let r = spec.resource_limits();
        Ok(Self {
            argv,
            env,
            cwd,
            limits: Limits {
                nofile: r.nofile,
                nproc: r.nproc,
                cpu_seconds: r.cpu_seconds,
                address_space: r.address_space,
            },
            terminal: spec.has_controlling_terminal(),
        })
    }
}

/// A connection to `bee serve`, past its `hello`.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    /// What the service said of itself and of this caller.
    pub welcome: Welcome,
}

impl Client {
    /// Connects to the socket at `path` and says hello.
    ///
    /// # Errors
    /// [`ClientError::Unreachable`] when nothing listens there; [`ClientError::Refused`] when
    /// the service refuses this caller or protocol version.
    pub fn connect(path: &Path) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(path).map_err(|source| ClientError::Unreachable {
            path: path.display().to_string(),
            source,
        })?;
        match ask(&stream, &Request::Hello { version: VERSION }, &[])? {
            Response::Welcome(welcome) => Ok(Self { stream, welcome }),
            other => Err(unexpected(&other)),
        }
    }

    /// Creates a scope confined by `policy` (named `origin` in messages), in learn mode when
    /// `learn`; returns its id.
    ///
    /// # Errors
    /// [`ClientError::Refused`]: 65 when the policy (or, with `learn`, learn mode) is not
    /// within the ceiling (the details are the counterexamples) or cannot be enforced, 69
    /// when `learn` is asked of a service whose engine has no learn mode, 77 when no ceiling
    /// applies.
    pub fn create(
        &mut self,
        policy: &CompiledPolicy,
        origin: &str,
        timeout: Option<Duration>,
        learn: bool,
    ) -> Result<u64, ClientError> {
        let request = Request::Create {
            policy: Box::new(policy.clone()),
            origin: origin.to_owned(),
            timeout_ms: timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            learn,
        };
        match self.ask(&request, &[])? {
            Response::Created { scope, .. } => Ok(scope),
            other => Err(unexpected(&other)),
        }
    }

    /// Runs `command` in `scope`, its standard streams on `stdio`; shows each denial, and
    /// each count of records lost, to `on_report` as it comes; asks the service to kill the
    /// scope once `interrupted` turns true. Returns how the command ended.
    ///
    /// # Errors
    /// [`ClientError::Refused`] when it could not start (126, 127) or the request was bad.
    pub fn run(
        &mut self,
        scope: u64,
        command: CommandLine,
        stdio: [RawFd; 3],
        on_report: &mut dyn FnMut(Report<'_>),
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Ended, ClientError> {
        let request = Request::Spawn {
            scope,
            argv: command.argv,
            env: command.env,
            cwd: command.cwd,
            limits: command.limits,
            terminal: command.terminal,
        };
        wire::send(&self.stream, &request, &stdio).map_err(hangup)?;
        let poll = Duration::from_millis(100);
        self.stream.set_read_timeout(Some(poll)).map_err(hangup)?;
        let mut kill_sent = false;
        let result = loop {
            if interrupted() && !kill_sent {
                kill_sent = true;
                wire::send(&self.stream, &Request::Kill { scope }, &[]).map_err(hangup)?;
            }
            let response = match self.read() {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(e) => break Err(e),
            };
            match response {
                Response::Spawned { .. } => {}
                Response::Record(record) => on_report(Report::Record(&record)),
                Response::Lost { records } => on_report(Report::Lost(records)),
                Response::Exited {
                    code,
                    timed_out,
                    lost_records,
                } => {
                    break Ok(Ended {
                        code,
                        timed_out,
                        lost_records,
                    });
                }
                Response::Error(body) => break Err(ClientError::Refused(body)),
                other => break Err(unexpected(&other)),
            }
        };
        self.stream.set_read_timeout(None).map_err(hangup)?;
        result
    }

    /// Tears `scope` down.
    ///
    /// # Errors
    /// As any request.
    pub fn close(&mut self, scope: u64) -> Result<(), ClientError> {
        match self.ask(&Request::Close { scope }, &[])? {
            Response::Done => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Sends `request` and reads the one answer; an error answer is [`ClientError::Refused`].
    ///
    /// # Errors
    /// As the module's requests.
    pub fn ask(&mut self, request: &Request, fds: &[RawFd]) -> Result<Response, ClientError> {
        ask(&self.stream, request, fds)
    }

    /// The next answer; `None` when the stream's read timeout passed first.
    fn read(&self) -> Result<Option<Response>, ClientError> {
        read(&self.stream)
    }
}

/// [`Client::ask`] on `stream`.
fn ask(stream: &UnixStream, request: &Request, fds: &[RawFd]) -> Result<Response, ClientError> {
    if let Err(e) = wire::send(stream, request, fds) {
        // A service that turned this caller away may have hung up before the request was
        // written: its reason is still waiting to be read.
        return match read(stream) {
            Ok(Some(Response::Error(body))) => Err(ClientError::Refused(body)),
            _ => Err(hangup(e)),
        };
    }
    loop {
        match read(stream)? {
            Some(Response::Error(body)) => return Err(ClientError::Refused(body)),
            Some(other) => return Ok(other),
            None => {}
        }
    }
}

/// [`Client::read`] on `stream`.
fn read(stream: &UnixStream) -> Result<Option<Response>, ClientError> {
    match wire::recv(stream, MID_FRAME) {
        Ok(received) => decode(&received.body)
            .map(Some)
            .map_err(|e| ClientError::Protocol(e.to_string())),
        Err(RecvError::Io(e))
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Ok(None)
        }
        Err(RecvError::Closed) => Err(ClientError::Protocol("the service hung up".into())),
        Err(e) => Err(ClientError::Protocol(e.to_string())),
    }
}

fn hangup(e: io::Error) -> ClientError {
    ClientError::Protocol(e.to_string())
}

fn unexpected(response: &Response) -> ClientError {
    ClientError::Protocol(format!("an unexpected answer: {response:?}"))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt as _;

    use super::*;

    #[test]
    fn a_command_line_carries_the_spec_and_refuses_what_is_not_text() {
        let spec = LaunchSpec::new("/bin/sh")
            .args(["-c", "true"])
            .current_dir("/tmp");
        let command = CommandLine::of(&spec).expect("a UTF-8 command");
        assert_eq!(command.argv, ["/bin/sh", "-c", "true"]);
        assert_eq!(command.cwd, "/tmp");
        assert_eq!(command.limits, Limits::default());
        let passed: Vec<_> = spec
            .environment()
            .into_iter()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        assert_eq!(command.env, passed);

        assert_eq!(
            CommandLine::of(&LaunchSpec::new("true")).map(|c| c.cwd),
            Ok("/".to_owned()),
            "no working directory is the root"
        );
        let bytes = OsString::from_vec(b"caf\xe9".to_vec());
        let refused = CommandLine::of(&LaunchSpec::new("cat").arg(bytes.clone()))
            .expect_err("an argument that is not UTF-8");
        assert!(refused.contains("the argument `caf"), "{refused}");
        let refused =
            CommandLine::of(&LaunchSpec::new("true").current_dir(std::path::PathBuf::from(bytes)))
                .expect_err("a directory that is not UTF-8");
        assert!(refused.starts_with("the working directory"), "{refused}");
    }
}
