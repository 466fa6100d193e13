//! Network helper actions: socket addresses, connects and sends, unix sockets, routing
//! netlink, and descriptors passed over a socket.

use super::sys::{check, errno};

/// A unix socket address for `path` (`@name` for an abstract one) and its length.
pub(super) fn sockaddr_un(path: &str) -> (libc::sockaddr_un, u32) {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as u16;
    let path = path.as_bytes();
    let abstract_ = path.first() == Some(&b'@');
    for (i, b) in path.iter().enumerate() {
        sa.sun_path[i] = if abstract_ && i == 0 {
            0
        } else {
            *b as libc::c_char
        };
    }
    (sa, (size_of::<libc::sa_family_t>() + path.len()) as u32)
}

pub(super) fn sockaddr_v4(addr: &str, port: u16) -> libc::sockaddr_in {
    let ip: std::net::Ipv4Addr = addr.parse().unwrap();
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip.octets()),
        },
        sin_zero: [0; 8],
    }
}

pub(super) fn sockaddr_v6(addr: &str, port: u16) -> libc::sockaddr_in6 {
    let ip: std::net::Ipv6Addr = addr.parse().unwrap();
    libc::sockaddr_in6 {
        sin6_family: libc::AF_INET6 as u16,
        sin6_port: port.to_be(),
        sin6_flowinfo: 0,
        sin6_addr: libc::in6_addr {
            s6_addr: ip.octets(),
        },
        sin6_scope_id: 0,
    }
}

/// The helper actions `connect | sendto ADDR PORT`: connects (or sends a UDP datagram) to
/// `addr:port`; returns 0 or the errno.
pub(super) fn net(sendto: bool, addr: &str, port: u16) -> i32 {
    let v6 = addr.contains(':');
    let (family, ty) = match (v6, sendto) {
        (false, false) => (libc::AF_INET, libc::SOCK_STREAM),
        (true, false) => (libc::AF_INET6, libc::SOCK_STREAM),
        (false, true) => (libc::AF_INET, libc::SOCK_DGRAM),
        (true, true) => (libc::AF_INET6, libc::SOCK_DGRAM),
    };
    // SAFETY: plain syscalls on owned descriptors and stack buffers of the right size.
    unsafe {
        let fd = libc::socket(family, ty, 0);
        if fd < 0 {
            return errno();
        }
        let (sa, len): (*const libc::sockaddr, u32) = if v6 {
            let b = Box::leak(Box::new(sockaddr_v6(addr, port)));
            (
                (b as *const libc::sockaddr_in6).cast(),
                size_of::<libc::sockaddr_in6>() as u32,
            )
        } else {
            let b = Box::leak(Box::new(sockaddr_v4(addr, port)));
            (
                (b as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as u32,
            )
        };
        let r = if !sendto {
            // Non-blocking: the LSM decides before any packet is sent.
            libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
            let r = libc::connect(fd, sa, len);
            if r < 0 && errno() == libc::EINPROGRESS {
                0
            } else {
                check(r.into())
            }
        } else {
            check(libc::sendto(fd, b"x".as_ptr().cast(), 1, 0, sa, len) as i64)
        };
        libc::close(fd);
        r
    }
}

/// The helper action `socket-try KIND`: creates a socket of KIND (`raw-udp`, `raw-tcp`,
/// `packet-dgram`, `sctp`, `udplite`, `icmp`); returns the errno (0: created).
pub(super) fn socket_try(kind: &str) -> i32 {
    let (family, ty, proto) = match kind {
        "raw-udp" => (libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP),
        "raw-tcp" => (libc::AF_INET6, libc::SOCK_RAW, libc::IPPROTO_TCP),
        "packet-dgram" => (libc::AF_PACKET, libc::SOCK_DGRAM, 0),
        "sctp" => (libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_SCTP),
        "udplite" => (libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_UDPLITE),
        "icmp" => (libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_ICMP),
        other => panic!("socket-try: unknown kind {other}"),
    };
    // SAFETY: a plain socket call.
    check(unsafe { libc::socket(family, ty, proto) }.into())
}

/// Receives one descriptor over fd 3 (SCM_RIGHTS): 0 if it arrived, EPERM if the kernel
/// dropped it (`MSG_CTRUNC` without a descriptor).
pub(super) fn recv_fd() -> i32 {
    let mut data = [0u8; 16];
    let mut control = [0u8; 64];
    // SAFETY: recvmsg into stack buffers described by the msghdr.
    unsafe {
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len();
        if libc::recvmsg(3, &mut msg, 0) < 0 {
            return errno();
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if !cmsg.is_null() && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
            return 0;
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return libc::EPERM;
        }
        -1
    }
}

/// The helper action `unix-sendto ADDR`: A datagram to the unix socket bound at PATH.
pub(super) fn unix_sendto(addr: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0);
        let mut sa: libc::sockaddr_un = std::mem::zeroed();
        sa.sun_family = libc::AF_UNIX as u16;
        for (i, b) in addr.as_bytes().iter().enumerate() {
            sa.sun_path[i] = *b as libc::c_char;
        }
        let len = size_of::<libc::sockaddr_un>() as u32;
        let r = libc::sendto(fd, b"x".as_ptr().cast(), 1, 0, (&raw const sa).cast(), len);
        check(r as i64)
    }
}

/// The helper action `socketpair-dgram`.
pub(super) fn socketpair_dgram() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut sv = [0i32; 2];
        libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, sv.as_mut_ptr());
        check(libc::send(sv[0], b"x".as_ptr().cast(), 1, 0) as i64)
    }
}

/// The helper action `connect-mptcp ADDR PORT`: IPPROTO_MPTCP (262); a kernel without MPTCP refuses
/// the socket itself.
pub(super) fn connect_mptcp(addr: &str, port: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 262);
        if fd < 0 {
            return errno();
        }
        let sa = sockaddr_v4(addr, port.parse().unwrap());
        libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
        let r = libc::connect(
            fd,
            (&raw const sa).cast(),
            size_of::<libc::sockaddr_in>() as u32,
        );
        let e = if r < 0 && errno() == libc::EINPROGRESS {
            0
        } else {
            check(r.into())
        };
        libc::close(fd);
        e
    }
}

/// The helper action `socket-packet`.
pub(super) fn socket_packet() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe { check(libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0).into()) }
}

/// The helper action `socket-raw`.
pub(super) fn socket_raw() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe { check(libc::socket(libc::AF_INET, libc::SOCK_RAW, 1).into()) }
}

/// The helper action `unix-connect ADDR`.
pub(super) fn unix_connect(addr: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let (sa, len) = sockaddr_un(addr);
        check(libc::connect(fd, (&raw const sa).cast(), len).into())
    }
}

/// The helper action `unix-listen ADDR`: ADDR (a path, or @name for an abstract one): bind, then
/// listen; 100 + errno when the bind fails.
pub(super) fn unix_listen(addr: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let (sa, len) = sockaddr_un(addr);
        if libc::bind(fd, (&raw const sa).cast(), len) < 0 {
            return 100 + errno();
        }
        check(libc::listen(fd, 1).into())
    }
}

/// The helper action `udp-unspec ADDR PORT`: an IPv4 UDP datagram whose sockaddr_in says AF_UNSPEC.
pub(super) fn udp_unspec(addr: &str, port: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        let mut sa = sockaddr_v4(addr, port.parse().unwrap());
        sa.sin_family = libc::AF_UNSPEC as u16;
        let len = size_of::<libc::sockaddr_in>() as u32;
        let r = libc::sendto(fd, b"x".as_ptr().cast(), 1, 0, (&raw const sa).cast(), len);
        check(r as i64)
    }
}

/// The helper action `sendmmsg ADDR PORT`: two datagrams to ADDR:PORT in one sendmmsg; the errno of
/// the first failure.
pub(super) fn sendmmsg(addr: &str, port: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        let mut sa = sockaddr_v4(addr, port.parse().unwrap());
        let mut data = *b"x";
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut msgs: [libc::mmsghdr; 2] = std::mem::zeroed();
        for m in &mut msgs {
            m.msg_hdr.msg_name = (&raw mut sa).cast();
            m.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
            m.msg_hdr.msg_iov = &mut iov;
            m.msg_hdr.msg_iovlen = 1;
        }
        check(libc::sendmmsg(fd, msgs.as_mut_ptr(), 2, 0).into())
    }
}

/// The helper action `listen-send PORT`: listen on 127.0.0.1:PORT (0: a port the kernel
/// picks), say so on stdout with the port (`bee-listening PORT`), accept one connection and
/// send "leak" on it.
pub(super) fn listen_send(port: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        use std::io::Write;
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        let mut sa = sockaddr_v4("127.0.0.1", port.parse().unwrap());
        let mut len = size_of::<libc::sockaddr_in>() as u32;
        if libc::bind(fd, (&raw const sa).cast(), len) < 0 || libc::listen(fd, 1) < 0 {
            return errno();
        }
        libc::getsockname(fd, (&raw mut sa).cast(), &raw mut len);
        println!("bee-listening {}", u16::from_be(sa.sin_port));
        std::io::stdout().flush().unwrap();
        let c = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
        if c < 0 {
            return errno();
        }
        check(libc::send(c, b"leak".as_ptr().cast(), 4, 0) as i64)
    }
}

/// A socket of `kind` (`SOCK_DGRAM`, `SOCK_STREAM`) in `ip`'s family, with `SO_REUSEPORT` set
/// (so that it joins any group a socket of the same user on that port leads), bound to
/// `ip`:`port`: the socket, or bind's errno.
pub(super) fn bound_reuseport(
    kind: libc::c_int,
    ip: std::net::IpAddr,
    port: u16,
) -> Result<std::os::fd::OwnedFd, i32> {
    use std::os::fd::FromRawFd as _;
    let family = if ip.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    // SAFETY: plain syscalls on a descriptor owned from its creation, with stack arguments.
    unsafe {
        let fd = libc::socket(family, kind, 0);
        if fd < 0 {
            return Err(errno());
        }
        let fd = std::os::fd::OwnedFd::from_raw_fd(fd);
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let one: libc::c_int = 1;
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_REUSEPORT,
            (&raw const one).cast(),
            size_of::<libc::c_int>() as u32,
        );
        let r = match ip {
            std::net::IpAddr::V4(a) => {
                let sa = sockaddr_v4(&a.to_string(), port);
                libc::bind(
                    raw,
                    (&raw const sa).cast(),
                    size_of::<libc::sockaddr_in>() as u32,
                )
            }
            std::net::IpAddr::V6(a) => {
                let sa = sockaddr_v6(&a.to_string(), port);
                libc::bind(
                    raw,
                    (&raw const sa).cast(),
                    size_of::<libc::sockaddr_in6>() as u32,
                )
            }
        };
        if r < 0 { Err(errno()) } else { Ok(fd) }
    }
}

/// A host UDP socket with `SO_REUSEPORT`, bound to 127.0.0.1:`port` (0: a free port), as a
/// service that shares its port would hold it.
pub fn host_reuseport_udp(port: u16) -> std::net::UdpSocket {
    bound_reuseport(libc::SOCK_DGRAM, std::net::Ipv4Addr::LOCALHOST.into(), port)
        .map(std::net::UdpSocket::from)
        .unwrap_or_else(|e| panic!("binding 127.0.0.1:{port}: errno {e}"))
}

/// Sends 20 datagrams to `host` (a socket on 127.0.0.1) from another host socket, and asserts
/// that each reached it: no scope's socket took a share of its port's traffic.
pub fn assert_host_gets_every_datagram(host: &std::net::UdpSocket) {
    let port = host.local_addr().unwrap().port();
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..20 {
        tx.send_to(b"x", ("127.0.0.1", port)).unwrap();
    }
    host.set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .unwrap();
    let mut buf = [0u8; 8];
    for i in 0..20 {
        assert!(
            host.recv(&mut buf).is_ok(),
            "datagram {i} did not reach the host's socket on port {port}"
        );
    }
}

/// The helper action `bind PROTO ADDR PORT`: a `tcp` or `udp` socket bound to ADDR:PORT with
/// `SO_REUSEPORT` ([`bound_reuseport`]); returns bind's errno (0: bound).
pub(super) fn bind(proto: &str, addr: &str, port: &str) -> i32 {
    let kind = if proto == "tcp" {
        libc::SOCK_STREAM
    } else {
        libc::SOCK_DGRAM
    };
    match bound_reuseport(kind, addr.parse().unwrap(), port.parse().unwrap()) {
        Ok(_) => 0,
        Err(e) => e,
    }
}

/// The helper action `rtnl-addaddr IP`: RTM_NEWADDR ADDR/32 on lo (ifindex 1) over NETLINK_ROUTE
/// with send(2) (no address: netlink sends to the kernel); returns the errno of the ack.
pub(super) fn rtnl_addaddr(ip: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE);
        if fd < 0 {
            return errno();
        }
        let mut m = Vec::with_capacity(40);
        push_new_addr(&mut m, ip.parse().unwrap(), 1);
        if libc::send(fd, m.as_ptr().cast(), m.len(), 0) < 0 {
            return errno();
        }
        let mut ack = [0u8; 256];
        if libc::recv(fd, ack.as_mut_ptr().cast(), ack.len(), 0) < 20 {
            return errno();
        }
        -i32::from_ne_bytes(ack[16..20].try_into().unwrap())
    }
}

/// The helper action `srr-sendto HOP ADDR PORT TEXT`: A UDP datagram to ADDR:PORT with an IPv4
/// loose source route (IP_OPTIONS, LSRR) whose first hop is HOP: the kernel sends it to HOP.
pub(super) fn srr_sendto(hop: &str, addr: &str, port: &str, text: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        if fd < 0 {
            return errno();
        }
        let hop: std::net::Ipv4Addr = hop.parse().unwrap();
        let mut opt = vec![131u8, 7, 4];
        opt.extend_from_slice(&hop.octets());
        opt.push(0);
        if libc::setsockopt(
            fd,
            libc::IPPROTO_IP,
            libc::IP_OPTIONS,
            opt.as_ptr().cast(),
            opt.len() as u32,
        ) < 0
        {
            eprintln!("srr-sendto: setsockopt(IP_OPTIONS) failed");
            return 100 + errno();
        }
        let sa = sockaddr_v4(addr, port.parse().unwrap());
        let len = size_of::<libc::sockaddr_in>() as u32;
        let t = text;
        let r = libc::sendto(
            fd,
            t.as_ptr().cast(),
            t.len(),
            0,
            (&raw const sa).cast(),
            len,
        );
        check(r as i64)
    }
}

/// The helper action `rtnl-batch IP`: one send of two messages, an RTM_GETLINK dump and an
/// RTM_NEWADDR of ADDR/32 on lo; returns the errno of the send (or of the address's ack).
pub(super) fn rtnl_batch(ip: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE);
        if fd < 0 {
            return errno();
        }
        let mut m = Vec::new();
        m.extend_from_slice(&32u32.to_ne_bytes());
        m.extend_from_slice(&libc::RTM_GETLINK.to_ne_bytes());
        m.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
        m.extend_from_slice(&1u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&[0u8; 16]);
        push_new_addr(&mut m, ip.parse().unwrap(), 2);
        check(libc::send(fd, m.as_ptr().cast(), m.len(), 0) as i64)
    }
}

/// Appends an `RTM_NEWADDR` netlink message (40 bytes, sequence number `seq`) adding `ip`/32 to
/// interface 1 (`lo`), as `IFA_LOCAL` and `IFA_ADDRESS`.
fn push_new_addr(m: &mut Vec<u8>, ip: std::net::Ipv4Addr, seq: u32) {
    m.extend_from_slice(&40u32.to_ne_bytes());
    m.extend_from_slice(&libc::RTM_NEWADDR.to_ne_bytes());
    let flags =
        (libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16;
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[libc::AF_INET as u8, 32, 0, 0]);
    m.extend_from_slice(&1u32.to_ne_bytes());
    for ty in [libc::IFA_LOCAL, libc::IFA_ADDRESS] {
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&ip.octets());
    }
}
