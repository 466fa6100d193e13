//! The reader's thread: it waits on the audit socket and on a wake-up descriptor, reads
//! records as they come, and answers the drains' flushes.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{QUIET, Shared, netlink, record};

/// Reads records until `stop`, completing events as they end: when a later event begins,
/// when the socket has been quiet for [`QUIET`], and when a drain asked for the socket to be
/// read empty.
pub(super) fn read_loop(
    socket: &netlink::Socket,
    wake: &OwnedFd,
    shared: &Shared,
    stop: &AtomicBool,
) {
    let mut buf = vec![0u8; 16 * 1024];
    while !stop.load(Ordering::Relaxed) {
        #[cfg(feature = "landlock-tests")]
        if shared.held.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let open = !shared.lock().open.is_empty();
        let ready = match wait(socket, wake, if open { QUIET } else { IDLE }) {
            Ok(r) => r,
            Err(_) => return fail(shared),
        };
        // Taken before the socket is read: a flush answers only drains that asked before it.
        let asked = ready.woken.then(|| shared.lock().asked);
        loop {
            match socket.recv(&mut buf) {
                Ok(netlink::Received::Records(messages)) => {
                    let mut state = shared.lock();
                    let marked = state.marked;
                    for (msg_type, text) in messages {
                        if let Some(r) = record::parse(msg_type, &text) {
                            state.add(r);
                        }
                    }
                    if state.marked != marked {
                        shared.flushed.notify_all();
                    }
                }
                Ok(netlink::Received::Overrun) => {
                    let mut state = shared.lock();
                    state.losses.overrun();
                    // A mark logged before may be among what was dropped.
                    state.marked = state.marks;
                    shared.flushed.notify_all();
                }
                Ok(netlink::Received::Empty) => break,
                Err(_) => return fail(shared),
            }
        }
        if ready.quiet || asked.is_some() {
            let mut state = shared.lock();
            let serials: Vec<u64> = state.open.keys().copied().collect();
            for s in serials {
                state.complete(s);
            }
            if let Some(asked) = asked {
                state.done = state.done.max(asked);
                shared.flushed.notify_all();
            }
        }
    }
}

/// How long the reader sleeps with no event open (it wakes earlier to stop or to flush).
const IDLE: Duration = Duration::from_secs(1);

/// What woke the reader.
struct Ready {
    /// A drain (or the drop) kicked it.
    woken: bool,
    /// Nothing came within the timeout.
    quiet: bool,
}

/// Waits up to `timeout` for records or a kick; a kick is consumed.
fn wait(socket: &netlink::Socket, wake: &OwnedFd, timeout: Duration) -> std::io::Result<Ready> {
    let mut fds = [
        libc::pollfd {
            fd: socket.fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fds` is an array of two initialised pollfds.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted {
            Ok(Ready {
                woken: false,
                quiet: false,
            })
        } else {
            Err(e)
        };
    }
    let woken = fds[1].revents & libc::POLLIN != 0;
    if woken {
        let mut count = [0u8; 8];
        // SAFETY: an eventfd read of its 8-byte counter into a buffer of that size.
        unsafe { libc::read(wake.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
    }
    Ok(Ready {
        woken,
        quiet: n == 0,
    })
}

/// Marks the reader failed (drains return at once) and wakes any drain waiting.
fn fail(shared: &Shared) {
    shared.lock().failed = true;
    shared.flushed.notify_all();
}

/// A non-blocking eventfd.
pub(super) fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: eventfd(2) with constant flags; returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Wakes the reader.
pub(super) fn kick(wake: &OwnedFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: an eventfd write of its 8-byte increment from a buffer of that size.
    unsafe { libc::write(wake.as_raw_fd(), one.as_ptr().cast(), 8) };
}
