//! Exchanging one query with the upstream servers: UDP, then TCP when the answer is truncated
//! (RFC 1035 §4.2, RFC 7766), always within a deadline and abandoned when the resolver stops.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The longest a blocking socket call waits before the stop flag and the deadline are looked
/// at again.
pub(super) const SLICE: Duration = Duration::from_millis(200);

/// The largest answer read over UDP (the EDNS payload size the forwarded query advertises is
/// smaller; a larger datagram is cut and fails to parse).
const UDP_BUFFER: usize = 4096;

/// The upstream servers and the time one query may take over all of them.
#[derive(Debug, Clone)]
pub(super) struct Upstream {
    servers: Vec<SocketAddr>,
    timeout: Duration,
}

impl Upstream {
    pub(super) fn new(servers: Vec<SocketAddr>, timeout: Duration) -> Self {
        Self { servers, timeout }
    }

    /// The answer to `query` (a complete DNS message) from the first server that gives one;
    /// each server gets an equal share of the timeout. `Err` says why none did.
    ///
    /// Only an answer with the query's id and the response bit set is taken; what a server
    /// answered is checked further by the caller.
    pub(super) fn exchange(&self, query: &[u8], stop: &AtomicBool) -> Result<Vec<u8>, String> {
        if self.servers.is_empty() {
            return Err("no upstream server configured".to_owned());
        }
        let n = u32::try_from(self.servers.len()).unwrap_or(u32::MAX);
        let share = (self.timeout / n).max(Duration::from_millis(50));
        let mut last = String::new();
        for server in &self.servers {
            let deadline = Instant::now() + share;
            match exchange_one(*server, query, deadline, stop) {
                Ok(answer) => return Ok(answer),
                Err(e) => last = format!("{server}: {e}"),
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        Err(last)
    }
}

fn exchange_one(
    server: SocketAddr,
    query: &[u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<Vec<u8>> {
    let answer = udp(server, query, deadline, stop)?;
    if truncated(&answer) {
        tcp(server, query, deadline, stop)
    } else {
        Ok(answer)
    }
}

/// Whether a DNS message has the TC bit (RFC 1035 §4.1.1).
fn truncated(message: &[u8]) -> bool {
    message.get(2).is_some_and(|b| b & 0x02 != 0)
}

/// Whether `answer` answers `query`: the same id, and QR set.
fn answers(query: &[u8], answer: &[u8]) -> bool {
    answer.len() >= 12 && query.len() >= 2 && answer[..2] == query[..2] && answer[2] & 0x80 != 0
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "no answer in time")
}

/// The time left until `deadline`, at most [`SLICE`]; `Err` once it passed or on stop.
pub(super) fn slice(deadline: Instant, stop: &AtomicBool) -> io::Result<Duration> {
    if stop.load(Ordering::Relaxed) {
        return Err(io::Error::new(
            io::ErrorKind::Interrupted,
            "resolver stopping",
        ));
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(timed_out());
    }
    Ok(left.min(SLICE))
}

fn udp(
    server: SocketAddr,
    query: &[u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<Vec<u8>> {
    let local: SocketAddr = if server.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    // A fresh socket per query: a random source port (RFC 5452 §9.2), and connect(2) makes the
    // kernel drop datagrams from anyone but the server.
    let socket = UdpSocket::bind(local)?;
    socket.connect(server)?;
    socket.send(query)?;
    let mut buf = vec![0u8; UDP_BUFFER];
    loop {
        socket.set_read_timeout(Some(slice(deadline, stop)?))?;
        match socket.recv(&mut buf) {
            Ok(n) => {
                let answer = &buf[..n];
                if answers(query, answer) {
                    return Ok(answer.to_vec());
                }
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

fn tcp(
    server: SocketAddr,
    query: &[u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<Vec<u8>> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(timed_out());
    }
    let mut stream = TcpStream::connect_timeout(&server, left)?;
    stream.set_write_timeout(Some(left))?;
    write_message(&mut stream, query)?;
    let answer = read_message(&mut stream, deadline, stop)?;
    if answers(query, &answer) {
        Ok(answer)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "answer does not match the query",
        ))
    }
}

/// Whether an error is a read timeout (`EAGAIN` or `ETIMEDOUT`, as `SO_RCVTIMEO` reports it).
pub(super) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Writes one DNS message with its two-byte length prefix (RFC 1035 §4.2.2).
pub(super) fn write_message(stream: &mut TcpStream, message: &[u8]) -> io::Result<()> {
    let len = u16::try_from(message.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "DNS message over 65535 bytes"))?;
    let mut framed = Vec::with_capacity(message.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(message);
    stream.write_all(&framed)
}

/// Reads one length-prefixed DNS message, giving up at `deadline` or on stop. A zero length
/// or a closed connection is an error (`UnexpectedEof` when it closed before any byte).
pub(super) fn read_message(
    stream: &mut TcpStream,
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 2];
    read_exact_by(stream, &mut len, deadline, stop)?;
    let len = usize::from(u16::from_be_bytes(len));
    if len == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "empty DNS message",
        ));
    }
    let mut message = vec![0u8; len];
    read_exact_by(stream, &mut message, deadline, stop)?;
    Ok(message)
}

/// `read_exact` that waits at most until `deadline`, in slices so that a stop is seen.
fn read_exact_by(
    stream: &mut TcpStream,
    mut buf: &mut [u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<()> {
    while !buf.is_empty() {
        stream.set_read_timeout(Some(slice(deadline, stop)?))?;
        match stream.read(buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_server_fails_at_once() {
        let up = Upstream::new(Vec::new(), Duration::from_secs(2));
        let err = up.exchange(&[0; 12], &AtomicBool::new(false)).unwrap_err();
        assert!(err.contains("no upstream"), "{err}");
    }

    #[test]
    fn silent_server_times_out() {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let up = Upstream::new(
            vec![silent.local_addr().unwrap()],
            Duration::from_millis(300),
        );
        let start = Instant::now();
        let err = up.exchange(&[0; 12], &AtomicBool::new(false)).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(2), "{err}");
    }

    #[test]
    fn stop_abandons_the_wait() {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let up = Upstream::new(vec![silent.local_addr().unwrap()], Duration::from_secs(30));
        let start = Instant::now();
        let err = up.exchange(&[0; 12], &AtomicBool::new(true)).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(1), "{err}");
    }

    #[test]
    fn tc_bit() {
        assert!(truncated(&[0, 0, 0x82, 0]));
        assert!(!truncated(&[0, 0, 0x80, 0]));
        assert!(!truncated(&[0]));
    }
}
