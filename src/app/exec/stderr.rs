//! What `bee exec` says on standard error while the command runs (`bee: denied: …`), written
//! whole even where the command made the pipe non-blocking: a standard error shared with the
//! command is one open file, and Node.js (Claude Code, Codex, opencode…) sets its pipes
//! `O_NONBLOCK`. `eprint!` then fails with `EAGAIN` as soon as the reader falls behind — and
//! panics. Here bee waits for room instead, as a blocking write would; a standard error that is
//! gone (`EPIPE`) or broken drops the line, which the audit file (`--audit`) still keeps.

use std::os::fd::AsRawFd as _;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// How many lines [`Printer`] holds for a standard error that is not read fast enough.
pub(crate) const PRINTER_QUEUE: usize = 4_096;

/// The lines said while the command runs (`bee: denied: …`), written by a thread of their own:
/// the wait that enforces `--timeout` must never block on a standard error nobody reads, and
/// the command decides how many lines there are (a command refusing calls in a loop made the
/// wait block in `write` and outlive its timeout). Past [`PRINTER_QUEUE`] waiting lines, a
/// line is not printed but counted; [`Printer::finish`] returns the count, for bee to say so
/// (the audit file, `--audit`, still has every record).
#[derive(Debug)]
pub(crate) struct Printer {
    lines: Option<SyncSender<String>>,
    thread: Option<JoinHandle<()>>,
    dropped: u64,
}

impl Printer {
    /// Starts the writing thread; where no thread can be made, lines are written by the
    /// caller ([`say`]) as before.
    pub(crate) fn start() -> Self {
        let (tx, rx) = mpsc::sync_channel::<String>(PRINTER_QUEUE);
        let thread = std::thread::Builder::new()
            .name("bee-stderr".into())
            .spawn(move || {
                for line in rx {
                    say(&line);
                }
            })
            .ok();
        Self {
            lines: thread.is_some().then_some(tx),
            thread,
            dropped: 0,
        }
    }

    /// Queues `line` for standard error, or counts it when the queue is full.
    pub(crate) fn say(&mut self, line: String) {
        match &self.lines {
            Some(tx) => match tx.try_send(line) {
                Ok(()) => {}
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => self.dropped += 1,
            },
            None => say(&line),
        }
    }

    /// Waits until every queued line is written (as long as standard error takes), and
    /// returns how many lines were not printed.
    pub(crate) fn finish(mut self) -> u64 {
        drop(self.lines.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.dropped
    }
}

/// Denials said once each: a command that meets the same refusal again and again (glibc asks
/// for the `nscd` socket at every user lookup, so `ls -l` meets `socket(AF_UNIX)` four times)
/// gets one `bee: denied:` line for it, and one more at the end saying how many times it came
/// again. The audit file (`--audit`) keeps every record.
#[derive(Debug, Default)]
pub(crate) struct Repeats {
    /// Each denial said, in order, with how many times it came after.
    said: Vec<(String, u64)>,
    /// Its place in `said`.
    at: std::collections::HashMap<String, usize>,
}

impl Repeats {
    /// Denials told apart; past these, each is said every time it comes.
    const MAX: usize = PRINTER_QUEUE;

    /// The line to say for the denial explained as `explanation`: `None` when it was said
    /// already (and is counted).
    pub(crate) fn line(&mut self, explanation: &str, eol: &str) -> Option<String> {
        if let Some(&i) = self.at.get(explanation) {
            if let Some((_, n)) = self.said.get_mut(i) {
                *n += 1;
            }
            return None;
        }
        if self.said.len() < Self::MAX {
            self.at.insert(explanation.to_owned(), self.said.len());
            self.said.push((explanation.to_owned(), 0));
        }
        Some(format!("bee: denied: {explanation}{eol}"))
    }

    /// One line for each denial that came again, in the order they were first said.
    pub(crate) fn summary(&self, eol: &str) -> Vec<String> {
        self.said
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(explanation, n)| {
                let times = if *n == 1 { "time" } else { "times" };
                format!("bee: denied {n} more {times}: {explanation}{eol}")
            })
            .collect()
    }
}

/// Writes `text` to standard error whole, waiting for room in a full non-blocking pipe.
pub(crate) fn say(text: &str) {
    let fd = std::io::stderr().as_raw_fd();
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        // SAFETY: write(2) of a slice we own to a descriptor this process has open.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n >= 0 {
            rest = &rest[n.unsigned_abs()..];
            continue;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EAGAIN) => {
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd on the stack.
                unsafe { libc::poll(&mut pfd, 1, 1000) };
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_is_said_once_and_its_repeats_counted_at_the_end() {
        let mut r = Repeats::default();
        let unix = "socket(AF_UNIX, SOCK_STREAM): never allowed inside a scope";
        let exec = "exec /usr/bin/id: no exec.allow rule covers it";
        assert_eq!(r.line(unix, "\n"), Some(format!("bee: denied: {unix}\n")));
        assert_eq!(
            r.line(exec, "\r\n"),
            Some(format!("bee: denied: {exec}\r\n"))
        );
        for _ in 0..3 {
            assert_eq!(r.line(unix, "\n"), None);
        }
        assert_eq!(
            r.summary("\n"),
            vec![format!("bee: denied 3 more times: {unix}\n")]
        );
        assert_eq!(r.line(exec, "\n"), None);
        assert_eq!(r.summary("\n").len(), 2);
        // Past what it tells apart, each denial is said every time.
        let mut full = Repeats::default();
        for i in 0..Repeats::MAX {
            assert!(full.line(&format!("d{i}"), "\n").is_some());
        }
        assert!(full.line("new", "\n").is_some());
        assert!(full.line("new", "\n").is_some());
        assert!(full.line("d0", "\n").is_none());
    }

    #[test]
    fn the_printer_keeps_order_and_counts_what_its_queue_could_not_hold() {
        // A printer whose thread is stuck: every line past the queue is counted, none waits.
        let (tx, rx) = mpsc::sync_channel::<String>(PRINTER_QUEUE);
        let mut stuck = Printer {
            lines: Some(tx),
            thread: None,
            dropped: 0,
        };
        let started = std::time::Instant::now();
        for i in 0..PRINTER_QUEUE + 10 {
            stuck.say(format!("line {i}\n"));
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(stuck.finish(), 10);
        let kept: Vec<String> = rx.iter().collect();
        assert_eq!(kept.len(), PRINTER_QUEUE);
        assert_eq!(kept[0], "line 0\n");
        assert_eq!(
            kept[PRINTER_QUEUE - 1],
            format!("line {}\n", PRINTER_QUEUE - 1)
        );
    }

    #[test]
    fn a_line_gets_through_a_full_non_blocking_pipe_once_it_drains() {
        // A child whose stderr is a pipe made non-blocking and filled: `say` must wait.
        let mut fds = [0; 2];
        // SAFETY: pipe2(2) into an array of two.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
            0
        );
        let (r, w) = (fds[0], fds[1]);
        // SAFETY: fork(2) in a test: the child only calls async-signal-safe functions and
        // `say`, which writes and polls, then exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                libc::dup2(w, 2);
                libc::close(r);
                let block = [b'x'; 4096];
                while libc::write(2, block.as_ptr().cast(), block.len()) > 0 {}
            }
            say("bee: denied: the line\n");
            unsafe { libc::_exit(0) };
        }
        // SAFETY: closing our copy of the write end; reading the pipe to its end.
        unsafe { libc::close(w) };
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut all = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            let n = unsafe { libc::read(r, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                all.extend_from_slice(&buf[..n.unsigned_abs()]);
            } else if n == 0 {
                break;
            } else {
                let mut pfd = libc::pollfd {
                    fd: r,
                    events: libc::POLLIN,
                    revents: 0,
                };
                unsafe { libc::poll(&mut pfd, 1, 1000) };
            }
        }
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status}"
        );
        assert!(all.ends_with(b"bee: denied: the line\n"));
    }
}
