//! `bee exec` on a terminal: the command gets a pseudo-terminal of its own, as `ssh -t` gives.
//!
//! [`Pty::open`] opens a pseudo-terminal when `--pty` asks for one (`auto`: when bee's standard
//! input and output are both terminals). The command is launched with the slave as its three
//! standard streams and its controlling terminal
//! ([`LaunchSpec::controlling_terminal`](bee_userspace::launch::LaunchSpec::controlling_terminal)),
//! so `tty`, `/dev/tty`, the window size and the line discipline's signals (Ctrl-C, Ctrl-Z,
//! Ctrl-\) work inside the scope. [`Pty::relay`] then puts the user's terminal in raw mode,
//! copies its window size to the pseudo-terminal (at the start and on every `SIGWINCH`) and
//! copies bytes both ways on a thread of its own, with `poll(2)`; [`Relay::finish`] (or
//! dropping the [`Relay`]) drains what the command wrote and restores the terminal's mode.
//! `SIGTERM`, `SIGHUP`, `SIGINT` and `SIGQUIT` sent to bee end the command's scope first
//! ([`super::ending`]); the relay then finishes as after any end, restoring the terminal, and
//! only then do they end bee.
//!
//! The sandbox gains nothing: the master stays in bee, and the slave is the terminal the
//! command would otherwise have shared with bee. The command's standard error goes through the
//! terminal too, so it reaches bee's standard output, as with any terminal program.

use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::termios::{self, SetArg};

/// When `bee exec` gives the command a pseudo-terminal (`--pty`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PtyChoice {
    /// When bee's standard input and output are both terminals.
    #[default]
    Auto,
    /// Always, even when bee's standard streams are not terminals.
    Always,
    /// Never: the command gets bee's standard streams, as they are.
    Never,
}

/// A pseudo-terminal opened for one command.
#[derive(Debug)]
pub struct Pty {
    master: OwnedFd,
    slave: Arc<OwnedFd>,
}

/// How long [`Relay::finish`] waits for more output once the command has ended, when
/// something still holds the slave open.
const QUIET: Duration = Duration::from_millis(500);

fn is_terminal(fd: RawFd) -> bool {
    // SAFETY: isatty(3) on a descriptor number; no memory is involved.
    unsafe { libc::isatty(fd) == 1 }
}

impl Pty {
    /// A pseudo-terminal when `choice` asks for one, sized as bee's terminal; `None` when
    /// the command keeps bee's streams.
    ///
    /// # Errors
    /// `openpty(3)` failed.
    pub fn open(choice: PtyChoice) -> io::Result<Option<Self>> {
        let wanted = match choice {
            PtyChoice::Never => false,
            PtyChoice::Always => true,
            PtyChoice::Auto => is_terminal(0) && is_terminal(1),
        };
        if !wanted {
            return Ok(None);
        }
        // The user's terminal's settings, so that the command starts with the same modes.
        let settings = termios::tcgetattr(io::stdin()).ok();
        let pair = nix::pty::openpty(None, &settings).map_err(io::Error::from)?;
        for fd in [&pair.master, &pair.slave] {
            // SAFETY: fcntl(2) on a descriptor owned here.
            unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        let pty = Self {
            master: pair.master,
            slave: Arc::new(pair.slave),
        };
        copy_window_size(pty.master.as_fd());
        Ok(Some(pty))
    }

    /// The slave, for the command's standard streams.
    pub fn slave(&self) -> Arc<OwnedFd> {
        Arc::clone(&self.slave)
    }

    /// Puts bee's terminal in raw mode and starts relaying; the slave held here is closed.
    ///
    /// # Errors
    /// The relay's pipes, signal handler or thread could not be set up (the terminal's mode
    /// is then restored).
    pub fn relay(self) -> io::Result<Relay> {
        let raw = RawMode::enter();
        let (stop_read, stop_write) = pipe()?;
        let (winch_read, winch_write) = pipe()?;
        let winch_handler = signal_hook::low_level::pipe::register(libc::SIGWINCH, winch_write)?;
        let fds = Fds {
            master: self.master,
            stop: stop_read,
            winch: winch_read,
        };
        let thread = std::thread::Builder::new()
            .name("bee-pty".into())
            .spawn(move || fds.run())?;
        Ok(Relay {
            thread: Some(thread),
            stop: Some(stop_write),
            winch_handler,
            _raw: raw,
        })
    }
}

/// The running relay between bee's terminal and the command's pseudo-terminal.
#[derive(Debug)]
pub struct Relay {
    thread: Option<JoinHandle<()>>,
    stop: Option<OwnedFd>,
    /// Writes a byte to the thread's `winch` pipe per `SIGWINCH`.
    winch_handler: signal_hook::SigId,
    /// Restores the terminal when dropped, after the thread is joined.
    _raw: RawMode,
}

impl Relay {
    /// Call when the command has ended, after closing every descriptor of the slave this
    /// process still holds (the launch's): copies what the command still wrote, stops the
    /// relay and restores the terminal.
    pub fn finish(self) {}
}

impl Drop for Relay {
    fn drop(&mut self) {
        // Closing the stop pipe wakes the thread, which drains the master and returns.
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        signal_hook::low_level::unregister(self.winch_handler);
    }
}

/// The user's terminal in raw mode; its settings come back when this is dropped.
#[derive(Debug)]
struct RawMode {
    saved: Option<libc::termios>,
}

impl RawMode {
    /// Raw mode on bee's standard input, when it is a terminal (nothing otherwise).
    fn enter() -> Self {
        let Ok(saved) = termios::tcgetattr(io::stdin()) else {
            return Self { saved: None };
        };
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        if termios::tcsetattr(io::stdin(), SetArg::TCSADRAIN, &raw).is_err() {
            return Self { saved: None };
        }
        Self {
            saved: Some(libc::termios::from(saved)),
        }
    }
}

impl Drop for RawMode {
    /// Puts the saved settings back.
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // SAFETY: tcsetattr(3) reads one termios.
            unsafe { libc::tcsetattr(0, libc::TCSADRAIN, saved) };
        }
    }
}

/// What the relay thread watches.
struct Fds {
    master: OwnedFd,
    /// Hangs up when [`Relay`] is dropped.
    stop: OwnedFd,
    /// A byte per `SIGWINCH`.
    winch: OwnedFd,
}

impl Fds {
    fn run(&self) {
        let master = self.master.as_raw_fd();
        let mut stdin_open = true;
        let mut buf = [0u8; 8192];
        loop {
            let mut fds = [
                pollfd(self.stop.as_raw_fd()),
                pollfd(master),
                pollfd(self.winch.as_raw_fd()),
                pollfd(if stdin_open { 0 } else { -1 }),
            ];
            if !poll(&mut fds, -1) {
                return;
            }
            if fds[2].revents != 0 {
                let _ = read(self.winch.as_raw_fd(), &mut buf);
                copy_window_size(self.master.as_fd());
            }
            if fds[1].revents != 0 && !self.copy_out(&mut buf) {
                return;
            }
            if fds[3].revents != 0 {
                match read(0, &mut buf) {
                    Ok(n) if n > 0 => {
                        if write_all(master, &buf[..n]).is_err() {
                            return;
                        }
                    }
                    // End of bee's input: the command reads an end of file (VEOF) instead.
                    _ => {
                        stdin_open = false;
                        let _ = write_all(master, &[4]);
                    }
                }
            }
            if fds[0].revents != 0 {
                self.drain(&mut buf);
                return;
            }
        }
    }

    /// Copies what the master has to bee's standard output; false once the slave is closed
    /// everywhere (EIO) or the output is gone.
    fn copy_out(&self, buf: &mut [u8]) -> bool {
        match read(self.master.as_raw_fd(), buf) {
            Ok(n) if n > 0 => write_all(1, &buf[..n]).is_ok(),
            Ok(_) => false,
            Err(e) => e.kind() == io::ErrorKind::Interrupted,
        }
    }

    /// After the command ended: what it wrote last, until the slave is closed everywhere
    /// (`EIO` once the last byte is read) or the master has been quiet for [`QUIET`] — a
    /// process that still holds the slave does not keep bee waiting.
    fn drain(&self, buf: &mut [u8]) {
        let quiet = QUIET.as_millis() as libc::c_int;
        loop {
            let mut fds = [pollfd(self.master.as_raw_fd())];
            if !poll(&mut fds, quiet) || fds[0].revents == 0 || !self.copy_out(buf) {
                return;
            }
        }
    }
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// `poll(2)`, again on `EINTR`; false on any other error.
fn poll(fds: &mut [libc::pollfd], timeout_ms: libc::c_int) -> bool {
    loop {
        // SAFETY: a valid slice of pollfd structs and its length.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if rc >= 0 {
            return true;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
}

fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: read(2) into a writable buffer of the length passed.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

fn write_all(fd: RawFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: write(2) from a readable buffer of the length passed.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)
}

/// Copies the window size of bee's standard input (or, failing that, output) to `master`;
/// nothing when neither is a terminal.
fn copy_window_size(master: BorrowedFd<'_>) {
    for fd in [0, 1] {
        // SAFETY: winsize is plain integers; zeroed is a valid value.
        let mut size: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ writes one winsize into `size`.
        if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } == 0 {
            // SAFETY: TIOCSWINSZ reads one winsize from `size`.
            unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
            return;
        }
    }
}
