//! Frames on a unix stream socket, with the file descriptors that ride on them.
//!
//! Both sides read with `recvmsg(2)` so that descriptors are never lost or leaked: whatever
//! arrives is owned (`O_CLOEXEC`) by the [`Received`] it came with, and closed when that is
//! dropped. A frame whose descriptors did not fit (`MSG_CTRUNC`) is an error. Once a frame's
//! first byte is in, the rest must follow within the stream's mid-frame timeout (a client
//! that sends half a frame and stalls is cut off).

use std::io::{self, IoSlice, IoSliceMut, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
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
    let idle = stream.read_timeout()?;
    let mut fds = Vec::new();
    let mut header = [0u8; HEADER];
    let first = fill(stream, &mut header, &mut fds, true);
    let read = first.and_then(|()| {
        stream.set_read_timeout(Some(mid_frame))?;
        let n = protocol::body_length(header)?;
        let mut body = vec![0u8; n];
        fill(stream, &mut body, &mut fds, false)?;
        Ok(body)
    });
    stream.set_read_timeout(idle)?;
    Ok(Received { body: read?, fds })
}

/// Fills `buf` from the stream, keeping descriptors in `fds`. `at_boundary`: an end of
/// stream before the first byte is [`RecvError::Closed`], not truncation.
fn fill(
    stream: &UnixStream,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
    at_boundary: bool,
) -> Result<(), RecvError> {
    let mut got = 0;
    while got < buf.len() {
        let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
        let mut iov = [IoSliceMut::new(&mut buf[got..])];
        let msg = match recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(m) => m,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EAGAIN) if got > 0 || !at_boundary => {
                return Err(RecvError::Truncated);
            }
            Err(e) => return Err(io::Error::from(e).into()),
        };
        let truncated_cmsg = msg.flags.contains(MsgFlags::MSG_CTRUNC);
        let n = msg.bytes;
        for cmsg in msg.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                for fd in raw {
                    // SAFETY: SCM_RIGHTS installed a new descriptor in this process that
                    // nothing else owns.
                    fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        if truncated_cmsg || fds.len() > MAX_FDS {
            return Err(RecvError::TooManyFds);
        }
        if n == 0 {
            return Err(if got == 0 && at_boundary {
                RecvError::Closed
            } else {
                RecvError::Truncated
            });
        }
        got += n;
    }
    Ok(())
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
