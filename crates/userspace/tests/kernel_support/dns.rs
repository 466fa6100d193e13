//! The DNS side of the helper: a query-and-reply exchange over UDP or TCP, a resolver
//! lookup, and a raw client that sends hand-built messages (`dns-raw`).

use super::net::{sockaddr_v4, sockaddr_v6};
use super::sys::errno;
use super::uring::uring_one;

/// The helper action `dns MODE ADDR PORT`: sends `query` to `ADDR:PORT` and waits (5 s) for a
/// reply, printing `reply from PEER: TEXT` on stdout. MODE is `udp` (unconnected `sendto`,
/// `recvfrom`), `udp-connected` (`connect`, `send`, `recv`, the peer from `getpeername`) or
/// `tcp` (connect, write, read to the end; the peer from `getpeername`). Returns the errno of
/// the first call that failed, 0 otherwise.
pub(super) fn dns_exchange(mode: &str, addr: &str, port: &str) -> i32 {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream, UdpSocket};
    let ip: std::net::IpAddr = addr.parse().unwrap();
    let peer = SocketAddr::new(ip, port.parse().unwrap());
    let wait = Some(std::time::Duration::from_secs(5));
    let code = |e: std::io::Error| e.raw_os_error().unwrap_or(-1);
    let local: SocketAddr = if ip.is_ipv4() {
        "0.0.0.0:0".parse().unwrap()
    } else {
        "[::]:0".parse().unwrap()
    };
    let result = (|| -> std::io::Result<(SocketAddr, Vec<u8>)> {
        let mut buf = vec![0u8; 512];
        match mode {
            "udp" => {
                let s = UdpSocket::bind(local)?;
                s.set_read_timeout(wait)?;
                s.send_to(b"query", peer)?;
                let (n, from) = s.recv_from(&mut buf)?;
                buf.truncate(n);
                Ok((from, buf))
            }
            "udp-connected" => {
                let s = UdpSocket::bind(local)?;
                s.set_read_timeout(wait)?;
                s.connect(peer)?;
                s.send(b"query")?;
                let n = s.recv(&mut buf)?;
                buf.truncate(n);
                Ok((s.peer_addr()?, buf))
            }
            _ => {
                let mut s = TcpStream::connect_timeout(&peer, std::time::Duration::from_secs(5))?;
                s.set_read_timeout(wait)?;
                // Before the peer closes: a closed socket has no peer name (ENOTCONN).
                let from = s.peer_addr()?;
                s.write_all(b"query")?;
                s.shutdown(std::net::Shutdown::Write)?;
                let mut got = Vec::new();
                s.read_to_end(&mut got)?;
                Ok((from, got))
            }
        }
    })();
    match result {
        Ok((from, text)) => {
            println!("reply from {from}: {}", String::from_utf8_lossy(&text));
            0
        }
        Err(e) => code(e),
    }
}

/// The helper action `resolve MODE NAME SERVER`: an `A` query for NAME to `SERVER:53` over
/// `udp` or `tcp` (MODE), as a stub resolver sends it; prints `rcode=CODE addrs=A,B` (the
/// answer's A records) on stdout. Returns the errno of the first call that failed, or 110
/// (ETIMEDOUT) when no reply came within 5 s.
pub(super) fn resolve(mode: &str, name: &str, server: &str) -> i32 {
    use hickory_proto::op::{Message, MessageType, OpCode, Query};
    use hickory_proto::rr::{Name, RData, RecordType};
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream, UdpSocket};
    let server = SocketAddr::new(server.parse().unwrap(), 53);
    let mut query = Message::new();
    query
        .set_id(0x4242)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    let bytes = query.to_vec().unwrap();
    let wait = Some(std::time::Duration::from_secs(5));
    let reply = (|| -> std::io::Result<Vec<u8>> {
        if mode == "udp" {
            let s = UdpSocket::bind("0.0.0.0:0")?;
            s.set_read_timeout(wait)?;
            s.send_to(&bytes, server)?;
            let mut buf = vec![0u8; 4096];
            let (n, _) = s.recv_from(&mut buf)?;
            buf.truncate(n);
            Ok(buf)
        } else {
            let mut s = TcpStream::connect_timeout(&server, std::time::Duration::from_secs(5))?;
            s.set_read_timeout(wait)?;
            let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&bytes);
            s.write_all(&framed)?;
            let mut len = [0u8; 2];
            s.read_exact(&mut len)?;
            let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut buf)?;
            Ok(buf)
        }
    })();
    let reply = match reply {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return 110,
        Err(e) => return e.raw_os_error().unwrap_or(-1),
    };
    let Ok(message) = Message::from_vec(&reply) else {
        println!("rcode=unparsable addrs=");
        return 0;
    };
    let addrs: Vec<String> = message
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect();
    println!(
        "rcode={} addrs={}",
        u16::from(message.response_code()),
        addrs.join(",")
    );
    0
}

/// The helper action `resolve-many PREFIX SUFFIX COUNT ROUNDS THREADS START`: `A` queries over
/// UDP to `10.0.0.53:53` (steered to the scope's resolver) for `PREFIX{k}SUFFIX`, `k` in
/// `0..COUNT`, ROUNDS times over, shared by THREADS threads each asking one at a time (5 s
/// timeout, then the query once more, as stub resolvers do), the first query not before START
/// (milliseconds since the Unix epoch; 0: at once), so that helpers started one by one ask at
/// once. Prints `ok=N failed=M retried=R late=MS lat=… why=…` on stdout: how many milliseconds
/// after START the queries began (0 when the helper was ready before it), each lookup's
/// microseconds (in no order, only when there are at most 10,000) and the first failures
/// (`NAME:REASON`). A lookup succeeds when it is answered NOERROR with an address. Returns 0.
pub(super) fn resolve_many(
    prefix: &str,
    suffix: &str,
    count: &str,
    rounds: &str,
    threads: &str,
    start: &str,
) -> i32 {
    use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
    use hickory_proto::rr::{Name, RecordType};
    use std::net::UdpSocket;
    let count: usize = count.parse().unwrap();
    let rounds: usize = rounds.parse().unwrap();
    let threads: usize = threads.parse::<usize>().unwrap().max(1);
    let start: u64 = start.parse().unwrap();
    let start = std::time::UNIX_EPOCH + std::time::Duration::from_millis(start);
    let late = match start.duration_since(std::time::SystemTime::now()) {
        Ok(wait) => {
            std::thread::sleep(wait);
            0
        }
        // START 0 is long past: at once, and not late.
        Err(_) if start == std::time::UNIX_EPOCH => 0,
        Err(e) => e.duration().as_millis(),
    };
    // Lookups sent a second time after a timeout, as a stub resolver does (glibc's
    // `attempts:2`).
    let retried = std::sync::atomic::AtomicUsize::new(0);
    let retried = &retried;
    // Ok, or why not: `send`, `timeout` (twice), `unparsable`, `rcode-N`, `no-address`.
    let one = |socket: &UdpSocket, name: &str, id: u16| -> Result<(), String> {
        let mut query = Message::new();
        query
            .set_id(id)
            .set_message_type(MessageType::Query)
            .set_op_code(OpCode::Query)
            .set_recursion_desired(true)
            .add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
        let bytes = query.to_vec().unwrap();
        let mut buf = [0u8; 4096];
        for attempt in 0..2 {
            if attempt > 0 {
                retried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            socket
                .send_to(&bytes, "10.0.0.53:53")
                .map_err(|_| "send".to_owned())?;
            // A late reply to an earlier query (its id) is skipped.
            while let Ok((n, _)) = socket.recv_from(&mut buf) {
                let reply = Message::from_vec(&buf[..n]).map_err(|_| "unparsable".to_owned())?;
                if reply.id() != id {
                    continue;
                }
                if reply.response_code() != ResponseCode::NoError {
                    return Err(format!("rcode-{}", u16::from(reply.response_code())));
                }
                if !reply.answers().iter().any(|r| r.data().ip_addr().is_some()) {
                    return Err("no-address".to_owned());
                }
                return Ok(());
            }
        }
        Err("timeout".to_owned())
    };
    type Run = (usize, usize, Vec<u32>, Vec<String>);
    let results: Vec<Run> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
                    socket
                        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                        .unwrap();
                    let (mut ok, mut failed, mut lat, mut why) = (0, 0, Vec::new(), Vec::new());
                    let mut id: u16 = 0;
                    for _ in 0..rounds {
                        for k in (t..count).step_by(threads) {
                            id = id.wrapping_add(1);
                            let start = std::time::Instant::now();
                            match one(&socket, &format!("{prefix}{k}{suffix}"), id) {
                                Ok(()) => ok += 1,
                                Err(e) => {
                                    failed += 1;
                                    if why.len() < 10 {
                                        why.push(format!("{prefix}{k}{suffix}:{e}"));
                                    }
                                }
                            }
                            let us = start.elapsed().as_micros();
                            lat.push(u32::try_from(us).unwrap_or(u32::MAX));
                        }
                    }
                    (ok, failed, lat, why)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let ok: usize = results.iter().map(|r| r.0).sum();
    let failed: usize = results.iter().map(|r| r.1).sum();
    let lat: Vec<String> = if count * rounds <= 10_000 {
        results
            .iter()
            .flat_map(|r| r.2.iter().map(u32::to_string))
            .collect()
    } else {
        Vec::new()
    };
    let why: Vec<String> = results.iter().flat_map(|r| r.3.iter().cloned()).collect();
    println!(
        "ok={ok} failed={failed} retried={} late={late} lat={} why={}",
        retried.load(std::sync::atomic::Ordering::Relaxed),
        lat.join(","),
        why.join(",")
    );
    0
}

/// A socket address for `addr:port`, IPv4 or IPv6 by the form of `addr`, as a
/// `sockaddr_storage` and its length.
/// `sendto(2)` of `bytes` with `flags` to the address `sa` of `len` bytes.
fn send_to(fd: i32, bytes: &[u8], flags: i32, sa: &libc::sockaddr_storage, len: u32) -> isize {
    // SAFETY: `bytes` and `sa` are valid for the lengths given.
    unsafe {
        libc::sendto(
            fd,
            bytes.as_ptr().cast(),
            bytes.len(),
            flags,
            std::ptr::from_ref(sa).cast(),
            len,
        )
    }
}

fn sockaddr_any(addr: &str, port: u16) -> (libc::sockaddr_storage, u32) {
    // SAFETY: an all-zero sockaddr_storage is valid; the writes stay within it.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        if addr.contains(':') {
            std::ptr::write((&raw mut ss).cast(), sockaddr_v6(addr, port));
            (ss, size_of::<libc::sockaddr_in6>() as u32)
        } else {
            std::ptr::write((&raw mut ss).cast(), sockaddr_v4(addr, port));
            (ss, size_of::<libc::sockaddr_in>() as u32)
        }
    }
}

fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Waits (3 s) for one datagram on `fd`, or one length-prefixed message when `stream`.
fn recv_reply(fd: i32, stream: bool) -> Result<Vec<u8>, i32> {
    let tv = libc::timeval {
        tv_sec: 3,
        tv_usec: 0,
    };
    let mut buf = vec![0u8; 4096];
    // SAFETY: setsockopt and recv into owned buffers of the stated sizes.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const tv).cast(),
            size_of::<libc::timeval>() as u32,
        );
        let mut got = 0usize;
        loop {
            let n = libc::recv(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got, 0);
            if n < 0 {
                return Err(errno());
            }
            if n == 0 {
                return Err(libc::ECONNRESET);
            }
            got += n as usize;
            if !stream {
                buf.truncate(got);
                return Ok(buf);
            }
            if got >= 2 {
                let len = usize::from(u16::from_be_bytes([buf[0], buf[1]]));
                if got >= 2 + len {
                    return Ok(buf[2..2 + len].to_vec());
                }
            }
        }
    }
}

/// Prints `rcode=N answers=M` for a DNS reply (or `rcode=unparsable`).
fn print_reply(reply: &[u8]) {
    match hickory_proto::op::Message::from_vec(reply) {
        Ok(m) => println!(
            "rcode={} answers={}",
            u16::from(m.response_code()),
            m.answers().len()
        ),
        Err(_) => println!("rcode=unparsable answers=0"),
    }
}

/// The helper action `dns-raw MODE ADDRS PORT HEX`: sends the DNS message HEX (raw bytes, no
/// TCP length prefix) to `ADDR:PORT` by one of the ways an attacker might try to get around
/// the steering, waits for the reply and prints `rcode=N answers=M` (one line per reply).
/// ADDRS is one address, or several separated by `,` for `sendmmsg`. Returns the errno of
/// the first call that failed, 0 otherwise. MODEs:
/// `udp` (sendto), `tcp` (connect, write framed), `tfo` (sendto with MSG_FASTOPEN),
/// `tfo-connect` (TCP_FASTOPEN_CONNECT, then connect), `sendmmsg` (one datagram per address
/// in one call; prints `sent=N`), `uring-udp` (IORING_OP_SENDMSG), `uring-tcp`
/// (IORING_OP_CONNECT, then write), `v6only-udp` and `v6only-tcp` (an IPV6_V6ONLY socket,
/// ADDR an IPv4 address sent to as `::ffff:ADDR`), `inet-on-v6` (an AF_INET sockaddr given
/// to an IPv6 UDP socket), `unspec-udp` (connect to ADDR, connect(AF_UNSPEC), then sendto
/// an AF_UNSPEC-family sockaddr that holds ADDR), `connected-sendto` (connect to
/// 127.0.0.1:PORT, then sendto ADDR:PORT explicitly).
pub(super) fn dns_raw(mode: &str, addrs: &str, port: &str, hex: &str) -> i32 {
    let msg = from_hex(hex);
    let port: u16 = port.parse().unwrap();
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&msg);
    let first = addrs.split(',').next().unwrap();
    let v6 = first.contains(':');
    let fam = if v6 { libc::AF_INET6 } else { libc::AF_INET };
    // SAFETY: plain syscalls on descriptors this function owns and buffers that outlive them.
    unsafe {
        let dgram = |family: i32| libc::socket(family, libc::SOCK_DGRAM, 0);
        let stream = |family: i32| libc::socket(family, libc::SOCK_STREAM, 0);
        let v6only = |fd: i32| {
            let one: i32 = 1;
            libc::setsockopt(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&raw const one).cast(),
                4,
            )
        };
        let (fd, is_stream) = match mode {
            "udp" | "sendmmsg" | "uring-udp" | "unspec-udp" | "connected-sendto" => {
                let fd = dgram(fam);
                if fd < 0 {
                    return errno();
                }
                match mode {
                    "udp" => {
                        let (sa, len) = sockaddr_any(first, port);
                        let r = send_to(fd, &msg, 0, &sa, len);
                        if r < 0 {
                            return errno();
                        }
                    }
                    "sendmmsg" => {
                        let list: Vec<(libc::sockaddr_storage, u32)> =
                            addrs.split(',').map(|a| sockaddr_any(a, port)).collect();
                        let mut iovs: Vec<libc::iovec> = list
                            .iter()
                            .map(|_| libc::iovec {
                                iov_base: msg.as_ptr() as *mut _,
                                iov_len: msg.len(),
                            })
                            .collect();
                        let mut hdrs: Vec<libc::mmsghdr> = list
                            .iter()
                            .zip(iovs.iter_mut())
                            .map(|((sa, len), iov)| {
                                let mut h: libc::mmsghdr = std::mem::zeroed();
                                h.msg_hdr.msg_name =
                                    (sa as *const libc::sockaddr_storage).cast_mut().cast();
                                h.msg_hdr.msg_namelen = *len;
                                h.msg_hdr.msg_iov = iov;
                                h.msg_hdr.msg_iovlen = 1;
                                h
                            })
                            .collect();
                        let r = libc::sendmmsg(fd, hdrs.as_mut_ptr(), hdrs.len() as u32, 0);
                        if r < 0 {
                            return errno();
                        }
                        println!("sent={r}");
                        for _ in 0..r {
                            match recv_reply(fd, false) {
                                Ok(reply) => print_reply(&reply),
                                Err(e) => return e,
                            }
                        }
                        return 0;
                    }
                    "uring-udp" => {
                        let (sa, len) = sockaddr_any(first, port);
                        let mut iov = libc::iovec {
                            iov_base: msg.as_ptr() as *mut _,
                            iov_len: msg.len(),
                        };
                        let mut hdr: libc::msghdr = std::mem::zeroed();
                        hdr.msg_name = (&raw const sa).cast_mut().cast();
                        hdr.msg_namelen = len;
                        hdr.msg_iov = &raw mut iov;
                        hdr.msg_iovlen = 1;
                        let e =
                            io_uring::opcode::SendMsg::new(io_uring::types::Fd(fd), &raw const hdr)
                                .build();
                        let r = uring_one(&e);
                        if r != 0 {
                            return r;
                        }
                    }
                    "unspec-udp" => {
                        let (sa, len) = sockaddr_any(first, port);
                        if libc::connect(fd, (&raw const sa).cast(), len) < 0 {
                            return errno();
                        }
                        let unspec = libc::sockaddr {
                            sa_family: libc::AF_UNSPEC as u16,
                            sa_data: [0; 14],
                        };
                        if libc::connect(fd, &raw const unspec, size_of::<libc::sockaddr>() as u32)
                            < 0
                        {
                            return 100 + errno();
                        }
                        let mut sa2 = sa;
                        (*(&raw mut sa2).cast::<libc::sockaddr>()).sa_family =
                            libc::AF_UNSPEC as u16;
                        let r = send_to(fd, &msg, 0, &sa2, len);
                        if r < 0 {
                            return errno();
                        }
                    }
                    _ => {
                        // connected-sendto: connected to the loopback (steered or not), then
                        // an explicit peer.
                        let lo = if v6 { "::1" } else { "127.0.0.1" };
                        let (sa, len) = sockaddr_any(lo, port);
                        if libc::connect(fd, (&raw const sa).cast(), len) < 0 {
                            return 100 + errno();
                        }
                        let (sa, len) = sockaddr_any(first, port);
                        let r = send_to(fd, &msg, 0, &sa, len);
                        if r < 0 {
                            return errno();
                        }
                    }
                }
                (fd, false)
            }
            "inet-on-v6" => {
                let fd = dgram(libc::AF_INET6);
                let (sa, len) = sockaddr_any(first, port);
                let r = send_to(fd, &msg, 0, &sa, len);
                if r < 0 {
                    return errno();
                }
                (fd, false)
            }
            "v6only-udp" | "v6only-tcp" => {
                let tcp = mode == "v6only-tcp";
                let fd = if tcp {
                    stream(libc::AF_INET6)
                } else {
                    dgram(libc::AF_INET6)
                };
                if v6only(fd) < 0 {
                    return 100 + errno();
                }
                let (sa, len) = sockaddr_any(&format!("::ffff:{first}"), port);
                if tcp {
                    if libc::connect(fd, (&raw const sa).cast(), len) < 0 {
                        return errno();
                    }
                    if libc::write(fd, framed.as_ptr().cast(), framed.len()) < 0 {
                        return errno();
                    }
                } else {
                    let r = send_to(fd, &msg, 0, &sa, len);
                    if r < 0 {
                        return errno();
                    }
                }
                (fd, tcp)
            }
            "tcp" | "tfo" | "tfo-connect" | "uring-tcp" => {
                let fd = stream(fam);
                if fd < 0 {
                    return errno();
                }
                let (sa, len) = sockaddr_any(first, port);
                match mode {
                    "tcp" => {
                        if libc::connect(fd, (&raw const sa).cast(), len) < 0 {
                            return errno();
                        }
                    }
                    "tfo" => {
                        let r = send_to(fd, &framed, libc::MSG_FASTOPEN, &sa, len);
                        if r < 0 {
                            return errno();
                        }
                    }
                    "tfo-connect" => {
                        let one: i32 = 1;
                        if libc::setsockopt(
                            fd,
                            libc::IPPROTO_TCP,
                            libc::TCP_FASTOPEN_CONNECT,
                            (&raw const one).cast(),
                            4,
                        ) < 0
                        {
                            return 100 + errno();
                        }
                        if libc::connect(fd, (&raw const sa).cast(), len) < 0 {
                            return errno();
                        }
                    }
                    _ => {
                        let e = io_uring::opcode::Connect::new(
                            io_uring::types::Fd(fd),
                            (&raw const sa).cast(),
                            len,
                        )
                        .build();
                        let r = uring_one(&e);
                        if r != 0 {
                            return r;
                        }
                    }
                }
                if mode != "tfo" && libc::write(fd, framed.as_ptr().cast(), framed.len()) < 0 {
                    return errno();
                }
                (fd, true)
            }
            other => panic!("dns-raw: unknown mode {other}"),
        };
        let r = match recv_reply(fd, is_stream) {
            Ok(reply) => {
                print_reply(&reply);
                0
            }
            Err(e) => e,
        };
        libc::close(fd);
        r
    }
}
