//! A process left running in a sandbox's scope ([`super::Sandbox::start`]): an MCP server its
//! caller talks to over its standard input and output for a whole session. Started by this
//! process (a local scope) or by `bee serve` (a scope of the service's, over a connection kept
//! busy for as long as the process runs).

use std::os::fd::OwnedFd;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bee_userspace::launch::Launched;

/// The process, and its ends of its standard streams until they are taken.
pub struct LongLived {
    inner: Inner,
    stdin: Option<OwnedFd>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
}

enum Inner {
    Local(Launched),
    Remote(Arc<RemoteRun>),
}

impl std::fmt::Debug for LongLived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Inner::Local(l) => f.debug_tuple("Local").field(&l.id()).finish(),
            Inner::Remote(_) => f.write_str("Remote"),
        }
    }
}

/// A run in a service's scope: the thread that holds the connection while the process runs,
/// the flag that has the service kill it, and how it ended.
pub(super) struct RemoteRun {
    pub(super) stop: AtomicBool,
    pub(super) thread: Mutex<Option<JoinHandle<Option<ExitStatus>>>>,
    pub(super) status: Mutex<Option<ExitStatus>>,
}

impl RemoteRun {
    /// Has the service kill the process, and waits for the run to end.
    pub(super) fn stop_and_join(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.join();
    }

    fn join(&self) -> Option<ExitStatus> {
        let handle = self.thread.lock().ok()?.take();
        let ended = handle.and_then(|h| h.join().ok().flatten());
        let mut status = self.status.lock().ok()?;
        if status.is_none() {
            *status = ended;
        }
        *status
    }

    fn finished(&self) -> bool {
        self.thread
            .lock()
            .map(|t| t.as_ref().is_none_or(JoinHandle::is_finished))
            .unwrap_or(true)
    }
}

impl LongLived {
    pub(super) fn local(mut launched: Launched) -> Self {
        let stdin = launched.take_stdin().map(OwnedFd::from);
        let stdout = launched.take_stdout().map(OwnedFd::from);
        let stderr = launched.take_stderr().map(OwnedFd::from);
        Self {
            inner: Inner::Local(launched),
            stdin,
            stdout,
            stderr,
        }
    }

    pub(super) fn remote(run: Arc<RemoteRun>, pipes: [OwnedFd; 3]) -> Self {
        let [stdin, stdout, stderr] = pipes;
        Self {
            inner: Inner::Remote(run),
            stdin: Some(stdin),
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    /// The write end of its standard input.
    pub fn take_stdin(&mut self) -> Option<OwnedFd> {
        self.stdin.take()
    }

    /// The read end of its standard output.
    pub fn take_stdout(&mut self) -> Option<OwnedFd> {
        self.stdout.take()
    }

    /// The read end of its standard error.
    pub fn take_stderr(&mut self) -> Option<OwnedFd> {
        self.stderr.take()
    }

    /// Waits up to `limit` for it to exit; `None` while it runs.
    pub fn wait_timeout(&mut self, limit: Duration) -> Option<ExitStatus> {
        match &mut self.inner {
            Inner::Local(l) => l.wait_timeout(Some(limit)).ok().flatten(),
            Inner::Remote(run) => {
                let deadline = Instant::now() + limit;
                while !run.finished() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                if run.finished() { run.join() } else { None }
            }
        }
    }
}
