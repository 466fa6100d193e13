//! Frames on a unix stream socket, with the file descriptors that ride on them.
//!
//! Both sides read with `recvmsg(2)` so that descriptors are never lost or leaked: whatever
//! arrives is owned (`O_CLOEXEC`) by the [`Received`] it came with, and closed when that is
//! dropped. A frame whose descriptors did not fit (`MSG_CTRUNC`) is an error. Once a frame's
//! first byte is in, the rest must follow within the stream's mid-frame timeout (a client
//! that sends half a frame and stalls is cut off).

use std::io::{self, IoSlice, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use serde::Serialize;

use super::protocol::{self, FrameError, HEADER};

/// The most descriptors one frame may carry.
pub const MAX_FDS: usize = 3;

/// One frame read: its body and the descriptors that came with it.
#[derive(Debug)]
pub struct Received {
    /// The frame's body (JSON).
    pub body: Vec<u8>,
    /// The descriptors, in the order sent.
    pub fds: Vec<OwnedFd>,
}

/// Why no frame was read.
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// The peer closed the connection between frames.
    #[error("the connection was closed")]
    Closed,
    /// The peer closed the connection, or stalled past the timeout, inside a frame.
    #[error("the connection ended inside a frame")]
    Truncated,
    /// The header announced a bad length.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// More descriptors than [`MAX_FDS`] were sent with a frame.
    #[error("a frame carried more than {MAX_FDS} file descriptors")]
    TooManyFds,
    /// The frame's body would hold more memory than its [`Budget`] has left (frames of the
    /// same caller being read at once).
    #[error(
        "the service holds as much of this caller's unread frames as it will; send one at a time"
    )]
    OverBudget,
    /// The socket failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Sends `message` as one frame, with `fds` (at most [`MAX_FDS`]) on its first bytes.
///
/// # Errors
/// A [`FrameError`] for a message too large, or the socket's error.
pub fn send<T: Serialize>(stream: &UnixStream, message: &T, fds: &[RawFd]) -> io::Result<()> {
    let frame = protocol::encode(message).map_err(io::Error::other)?;
    let mut sent = 0;
    if !fds.is_empty() {
        let rights = [ControlMessage::ScmRights(fds)];
        sent = loop {
            match sendmsg::<()>(
                stream.as_raw_fd(),
                &[IoSlice::new(&frame)],
                &rights,
                MsgFlags::MSG_NOSIGNAL,
                None,
            ) {
                Ok(n) => break n,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        };
    }
    let mut writer = stream;
    writer.write_all(&frame[sent..])
}

/// Reads one frame. Blocks until its first byte arrives (or the stream's own read timeout
/// passes); then allows `mid_frame` for the rest.
///
/// # Errors
/// [`RecvError`]; after any but [`RecvError::Closed`] the stream is out of step and must be
/// closed.
pub fn recv(stream: &UnixStream, mid_frame: Duration) -> Result<Received, RecvError> {
    recv_within(stream, mid_frame, &Unbounded)
}

/// Memory the bodies of frames being read may hold: shared by the connections of one caller
/// (the service's, per uid), so that many half-sent frames cannot make it hold more.
pub trait Budget {
    /// Takes `bytes` from what is left; false (nothing taken) when not that much is.
    fn reserve(&self, bytes: usize) -> bool;
    /// Gives back `bytes` taken before.
    fn release(&self, bytes: usize);
}

/// A budget that grants everything (a client reading the service's answers).
#[derive(Debug, Clone, Copy)]
pub struct Unbounded;

impl Budget for Unbounded {
    fn reserve(&self, _: usize) -> bool {
        true
    }
    fn release(&self, _: usize) {}
}

/// [`recv`], the body's memory taken from `budget` a chunk ahead of its bytes and given back
/// when this returns.
///
/// # Errors
/// As [`recv`]; [`RecvError::OverBudget`] when `budget` has no room for the body's next chunk.
pub fn recv_within(
    stream: &UnixStream,
    mid_frame: Duration,
    budget: &dyn Budget,
) -> Result<Received, RecvError> {
    let idle = stream.read_timeout()?;
    let mut taken = 0;
    let mut fds = Vec::new();
    let mut reader = Reader {
        stream,
        mid_frame,
        deadline: None,
    };
    let mut header = [0u8; HEADER];
    let read = reader.fill(&mut header, &mut fds).and_then(|()| {
        let n = protocol::body_length(header)?;
        // The body grows as it arrives, a chunk ahead at most: a header alone claims no
        // memory.
        let mut body = Vec::new();
        while body.len() < n {
            let start = body.len();
            let grow = (n - start).min(CHUNK);
            if !budget.reserve(grow) {
                return Err(RecvError::OverBudget);
            }
            taken += grow;
            body.resize(start + grow, 0);
            reader.fill(&mut body[start..], &mut fds)?;
        }
        Ok(body)
    });
    budget.release(taken);
    stream.set_read_timeout(idle)?;
    Ok(Received { body: read?, fds })
}

/// How much of a frame's body is allocated ahead of its bytes.
const CHUNK: usize = 64 << 10;

/// Reads one frame: the stream's own timeout until its first byte, then `mid_frame` for the
/// whole rest of it (not per read: a byte every few seconds does not keep a frame alive).
struct Reader<'a> {
    stream: &'a UnixStream,
    mid_frame: Duration,
    deadline: Option<std::time::Instant>,
}

impl Reader<'_> {
    fn fill(&mut self, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> Result<(), RecvError> {
        let mut got = 0;
        while got < buf.len() {
            if let Some(deadline) = self.deadline {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Err(RecvError::Truncated);
                }
                self.stream.set_read_timeout(Some(left))?;
            }
            let at_boundary = self.deadline.is_none();
            let n = fill_once(self.stream, &mut buf[got..], fds, at_boundary)?;
            if self.deadline.is_none() {
                self.deadline = Some(std::time::Instant::now() + self.mid_frame);
            }
            got += n;
        }
        Ok(())
    }
}

/// Room for this many descriptors per `recvmsg(2)`: more than [`MAX_FDS`], so that a frame
/// with a few too many is seen (and its descriptors closed) rather than truncated by the
/// kernel.
const FD_ROOM: usize = 16;

/// One `recvmsg(2)` into `buf`, keeping descriptors in `fds`; the bytes read (never 0).
/// `at_boundary`: an end of stream here is [`RecvError::Closed`], not truncation, and the
/// stream's own timeout is an [`io::Error`] the caller may wait on.
///
/// Every descriptor the kernel installed is owned before anything is checked: a truncated
/// control message (`MSG_CTRUNC`) still installs the descriptors that fit, and they must be
/// closed, not leaked.
fn fill_once(
    stream: &UnixStream,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
    at_boundary: bool,
) -> Result<usize, RecvError> {
    loop {
        // u64 words keep the control buffer aligned for `cmsghdr`.
        let mut control = [0u64; (FD_ROOM * 4 + 64) / 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: a zeroed msghdr is valid; the pointers set below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&control);
        // SAFETY: `msg` describes buffers owned by this frame.
        let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut if !at_boundary => {
                    return Err(RecvError::Truncated);
                }
                _ => return Err(e.into()),
            }
        }
        take_fds(&msg, fds);
        if msg.msg_flags & libc::MSG_CTRUNC != 0 || fds.len() > MAX_FDS {
            return Err(RecvError::TooManyFds);
        }
        if n == 0 {
            return Err(if at_boundary {
                RecvError::Closed
            } else {
                RecvError::Truncated
            });
        }
        return Ok(n.unsigned_abs());
    }
}

/// Owns every descriptor of every `SCM_RIGHTS` message in `msg`'s control data.
fn take_fds(msg: &libc::msghdr, fds: &mut Vec<OwnedFd>) {
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, within
    // `msg_controllen`; each SCM_RIGHTS payload is an array of ints, which are new
    // descriptors this process owns.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            let header = &*cmsg;
            if header.cmsg_level == libc::SOL_SOCKET && header.cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let len = header.cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..len / size_of::<RawFd>() {
                    let raw = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(raw));
                }
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::protocol::{Request, decode};

    #[test]
    fn a_frame_and_its_descriptors_arrive_together() -> Result<(), Box<dyn std::error::Error>> {
        let (a, b) = UnixStream::pair()?;
        let null = std::fs::File::open("/dev/null")?;
        send(&a, &Request::List, &[null.as_raw_fd(), null.as_raw_fd()])?;
        let got = recv(&b, Duration::from_secs(1))?;
        assert_eq!(decode::<Request>(&got.body)?, Request::List);
        assert_eq!(got.fds.len(), 2);
        drop(a);
        assert!(matches!(
            recv(&b, Duration::from_secs(1)),
            Err(RecvError::Closed)
        ));
        Ok(())
    }

    #[test]
    fn half_a_frame_then_silence_is_cut_off() -> Result<(), Box<dyn std::error::Error>> {
        let (mut a, b) = UnixStream::pair()?;
        a.write_all(&[0, 0, 0, 9, b'{'])?;
        let started = std::time::Instant::now();
        assert!(matches!(
            recv(&b, Duration::from_millis(200)),
            Err(RecvError::Truncated)
        ));
        assert!(started.elapsed() < Duration::from_secs(5));
        Ok(())
    }

    /// Descriptors past what a frame may carry are closed, never kept: none of them stays
    /// open in this process after the refusal.
    #[test]
    fn descriptors_of_a_refused_frame_are_closed() -> Result<(), Box<dyn std::error::Error>> {
        let open = || std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
        let (a, b) = UnixStream::pair()?;
        let null = std::fs::File::open("/dev/null")?;
        let fd = null.as_raw_fd();
        let before = open();
        for many in [5, 20, 200] {
            send(&a, &Request::List, &vec![fd; many])?;
            assert!(matches!(
                recv(&b, Duration::from_secs(1)),
                Err(RecvError::TooManyFds)
            ));
            // What is left of the frame, if anything, is read off before the next one.
            b.set_nonblocking(true)?;
            let mut sink = [0u8; 4096];
            while std::io::Read::read(&mut &b, &mut sink).is_ok_and(|n| n > 0) {}
            b.set_nonblocking(false)?;
        }
        assert_eq!(open(), before);
        Ok(())
    }

    /// A byte at a time, each within the timeout, does not stretch a frame past it.
    #[test]
    fn a_trickled_frame_is_cut_off_at_the_frame_deadline() -> Result<(), Box<dyn std::error::Error>>
    {
        let (mut a, b) = UnixStream::pair()?;
        let writer = std::thread::spawn(move || {
            let _ = a.write_all(&[0, 0, 0, 100]);
            for _ in 0..40 {
                std::thread::sleep(Duration::from_millis(50));
                if a.write_all(b"x").is_err() {
                    break;
                }
            }
        });
        let started = std::time::Instant::now();
        assert!(matches!(
            recv(&b, Duration::from_millis(300)),
            Err(RecvError::Truncated)
        ));
        assert!(started.elapsed() < Duration::from_millis(1500));
        drop(b);
        let _ = writer.join();
        Ok(())
    }

    #[test]
    fn four_descriptors_are_refused() -> Result<(), Box<dyn std::error::Error>> {
        let (a, b) = UnixStream::pair()?;
        let null = std::fs::File::open("/dev/null")?;
        let fd = null.as_raw_fd();
        send(&a, &Request::List, &[fd, fd, fd, fd])?;
        assert!(matches!(
            recv(&b, Duration::from_secs(1)),
            Err(RecvError::TooManyFds)
        ));
        Ok(())
    }
}
