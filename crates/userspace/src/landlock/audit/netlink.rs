//! The audit netlink socket (`NETLINK_AUDIT`, `include/uapi/linux/audit.h`): the status
//! request that enables audit, and the read-only multicast group records are read from.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::record::AUDIT_USER;

/// `NETLINK_AUDIT`.
const NETLINK_AUDIT: libc::c_int = 9;
/// `AUDIT_NLGRP_READLOG`: the multicast group every record is copied to (`CAP_AUDIT_READ`).
const AUDIT_NLGRP_READLOG: u32 = 1;
/// `AUDIT_GET`: the audit status.
const AUDIT_GET: u16 = 1000;
/// `AUDIT_SET`: set status fields.
const AUDIT_SET: u16 = 1001;
/// `AUDIT_STATUS_ENABLED`: the `enabled` field of a set request.
const AUDIT_STATUS_ENABLED: u32 = 1;
/// `NLMSG_ERROR`: an acknowledgement or an error.
const NLMSG_ERROR: u16 = 2;
/// `sizeof(struct nlmsghdr)`.
const HEADER: usize = 16;
/// `struct audit_status` as far as bee reads or writes it: mask, enabled, failure, pid,
/// rate_limit, backlog_limit, lost, backlog (eight `u32`s).
const STATUS: usize = 32;

/// A subscribed audit socket.
#[derive(Debug)]
pub(super) struct Socket(OwnedFd);

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; returns a new descriptor or -1.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_AUDIT,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(fd: &OwnedFd, groups: u32) -> io::Result<()> {
    // SAFETY: an all-zero sockaddr_nl is valid; the fields are set below.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = groups;
    // SAFETY: `addr` is a sockaddr_nl of the size given.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const addr).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends one request of `msg_type` with `payload`, asking for an acknowledgement.
///
/// The kernel acknowledges a request when it has handled it, but sends an `AUDIT_GET` reply
/// from another thread: the reply may come after the acknowledgement ([`status`] waits for
/// it).
fn request(fd: &OwnedFd, msg_type: u16, payload: &[u8], seq: u32) -> io::Result<()> {
    let len = HEADER + payload.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&msg_type.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(payload);
    // SAFETY: `msg` is a readable buffer of its length.
    let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads replies to request `seq`: with `want_status`, until the `AUDIT_GET` reply (its
/// payload), otherwise until the acknowledgement. An error acknowledgement ends it either
/// way; so does the socket's receive timeout.
fn replies(fd: &OwnedFd, seq: u32, want_status: bool) -> io::Result<Option<Status>> {
    let mut buf = vec![0u8; 8192];
    loop {
        // SAFETY: `buf` is a writable buffer of its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        for (msg_type, msg_seq, payload) in messages(&buf[..n as usize]) {
            if msg_seq != seq {
                continue;
            }
            match msg_type {
                AUDIT_GET if want_status && payload.len() >= STATUS => {
                    let field = |i: usize| {
                        u32::from_ne_bytes([
                            payload[4 * i],
                            payload[4 * i + 1],
                            payload[4 * i + 2],
                            payload[4 * i + 3],
                        ])
                    };
                    return Ok(Some(Status {
                        enabled: field(1),
                        lost: field(6),
                        backlog: field(7),
                    }));
                }
                NLMSG_ERROR if payload.len() >= 4 => {
                    let errno =
                        i32::from_ne_bytes([payload[0], payload[1], payload[2], payload[3]]);
                    if errno != 0 {
                        return Err(io::Error::from_raw_os_error(-errno));
                    }
                    if !want_status {
                        return Ok(None);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Sets `fd`'s receive timeout.
fn receive_timeout(fd: &OwnedFd, micros: libc::suseconds_t) -> io::Result<()> {
    let timeout = libc::timeval {
        tv_sec: (micros / 1_000_000) as libc::time_t,
        tv_usec: micros % 1_000_000,
    };
    // SAFETY: a timeval of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const timeout).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The netlink messages in `buf`: type, sequence number and payload.
fn messages(mut buf: &[u8]) -> Vec<(u16, u32, &[u8])> {
    let mut out = Vec::new();
    while buf.len() >= HEADER {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let msg_type = u16::from_ne_bytes([buf[4], buf[5]]);
        let seq = u32::from_ne_bytes([buf[8], buf[9], buf[10], buf[11]]);
        if len < HEADER || len > buf.len() {
            break;
        }
        out.push((msg_type, seq, &buf[HEADER..len]));
        let next = (len + 3) & !3;
        buf = buf.get(next..).unwrap_or_default();
    }
    out
}

/// A socket for status requests, with a receive timeout so a kernel that never answers
/// cannot hang bee.
fn control() -> Result<OwnedFd, String> {
    let fd = socket().map_err(|e| format!("the kernel has no audit socket ({e})"))?;
    bind(&fd, 0).map_err(|e| format!("binding the audit socket failed ({e})"))?;
    receive_timeout(&fd, 2_000_000)
        .map_err(|e| format!("setting the audit socket's timeout failed ({e})"))?;
    Ok(fd)
}

/// The fields of `struct audit_status` bee reads.
#[derive(Debug, Clone, Copy)]
struct Status {
    /// 0 off, 1 on, 2 locked on.
    enabled: u32,
    /// Records the kernel dropped since boot, wrapping (`audit_log_lost`: its backlog was
    /// full, its rate limit was reached, or it could not allocate one).
    lost: u32,
    /// Records logged and not yet taken off the kernel's queue by `kauditd`.
    backlog: u32,
}

/// `AUDIT_GET` on the control socket `fd`.
fn status(fd: &OwnedFd) -> Result<Status, String> {
    request(fd, AUDIT_GET, &[], 1)
        .and_then(|()| replies(fd, 1, true))
        .map_err(|e| format!("reading the kernel's audit status failed ({e})"))?
        .ok_or_else(|| "the kernel sent no audit status".to_owned())
}

/// Whether the kernel's audit is enabled.
pub(super) fn audit_enabled() -> Result<bool, String> {
    Ok(status(&control()?)?.enabled != 0)
}

/// Waits, for at most `within`, until the kernel's record queue has been seen empty: every
/// record logged before this call has then been taken off it by `kauditd`, which copies each
/// to the multicast group as it takes it (`kauditd_send_queue`, `kernel/audit.c`).
///
/// The queue is shared by the whole machine: where other processes keep it busy, `within`
/// runs out and the caller settles for what has arrived; so it does where the status
/// cannot be read.
///
/// Returns the kernel's count of records lost (`struct audit_status.lost`) as last read, or
/// `None` where the status could not be read.
pub(super) fn wait_queue_emptied(within: std::time::Duration) -> Option<u32> {
    let start = std::time::Instant::now();
    let fd = control().ok()?;
    loop {
        let s = status(&fd).ok()?;
        if s.backlog == 0 || start.elapsed() >= within {
            return Some(s.lost);
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// The kernel's count of records lost since boot (`struct audit_status.lost`, wrapping);
/// `None` where the status cannot be read.
pub(super) fn kernel_lost() -> Option<u32> {
    Some(status(&control().ok()?).ok()?.lost)
}

/// Logs `text` as an [`AUDIT_USER`] record (`msg='TEXT'`, after the sender's `pid=`): the
/// kernel queues it behind every record logged before, and `kauditd` copies records to the
/// multicast group in queue order, so a reader that has read it has read every one of those
/// (or lost it in a full socket). Needs `CAP_AUDIT_WRITE`, the initial user and PID
/// namespaces and audit on.
///
/// # Errors
/// The kernel refused the message or did not acknowledge it.
pub(super) fn log_user_message(text: &str) -> io::Result<()> {
    let fd = control().map_err(io::Error::other)?;
    // The kernel overwrites the payload's last byte with a NUL: send one.
    let mut payload = text.as_bytes().to_vec();
    payload.push(0);
    request(&fd, AUDIT_USER, &payload, 3)?;
    replies(&fd, 3, false).map(|_| ())
}

/// Enables the kernel's audit if it is off (Landlock logs nothing otherwise).
pub(super) fn enable_audit() -> Result<(), String> {
    let fd = control()?;
    if status(&fd)?.enabled != 0 {
        return Ok(());
    }
    let mut set = [0u8; STATUS];
    set[..4].copy_from_slice(&AUDIT_STATUS_ENABLED.to_ne_bytes());
    set[4..8].copy_from_slice(&1u32.to_ne_bytes());
    request(&fd, AUDIT_SET, &set, 2)
        .and_then(|()| replies(&fd, 2, false))
        .map_err(|e| {
            format!("the kernel's audit is off and enabling it failed ({e}; it needs CAP_AUDIT_CONTROL, or `auditctl -e 1`)")
        })?;
    Ok(())
}

/// A socket subscribed to every audit record.
pub(super) fn subscribe() -> Result<Socket, String> {
    let fd = socket().map_err(|e| format!("the kernel has no audit socket ({e})"))?;
    bind(&fd, AUDIT_NLGRP_READLOG)
        .map_err(|e| format!("reading audit records needs CAP_AUDIT_READ ({e})"))?;
    grow_receive_buffer(&fd);
    Ok(Socket(fd))
}

/// The receive buffer the reader asks for, in bytes (the kernel doubles it for its own
/// bookkeeping). `kauditd` copies every record to the group whether or not a reader keeps up,
/// and drops what a full buffer cannot take: the default (`net.core.rmem_default`, 208 KiB)
/// held about a thousand records, so a scope that made denials in a loop could make the
/// kernel drop the records of every other scope. 16 MiB holds about 80,000.
pub(super) const RECEIVE_BUFFER: libc::c_int = 16 << 20;

/// Sets the socket's receive buffer to [`RECEIVE_BUFFER`]: `SO_RCVBUFFORCE` (with
/// `CAP_NET_ADMIN`, past `net.core.rmem_max`), else `SO_RCVBUF` (capped at that limit). A
/// smaller buffer loses records in a flood, not the socket, so failing here is not an error.
fn grow_receive_buffer(fd: &OwnedFd) {
    let size = RECEIVE_BUFFER;
    for option in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: setsockopt(2) with a pointer to a c_int of the size given.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&raw const size).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return;
        }
    }
}

impl Socket {
    /// A socket on `fd`, which is not an audit socket: for tests of what holds one.
    #[cfg(test)]
    pub(super) fn stand_in(fd: OwnedFd) -> Self {
        Self(fd)
    }

    /// The descriptor, to wait on.
    pub(super) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.0.as_fd()
    }

    /// The records of one read, as (type, text). Never blocks.
    ///
    /// # Errors
    /// The socket failed (other than by being empty, an interruption or a full buffer,
    /// which loses records but not the socket).
    pub(super) fn recv(&self, buf: &mut [u8]) -> io::Result<Received> {
        // SAFETY: `buf` is a writable buffer of its length.
        let n = unsafe {
            libc::recv(
                self.0.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) => Ok(Received::Empty),
                Some(libc::EINTR) => Ok(Received::Records(Vec::new())),
                Some(libc::ENOBUFS) => Ok(Received::Overrun),
                _ => Err(e),
            };
        }
        Ok(Received::Records(
            messages(&buf[..n as usize])
                .into_iter()
                .map(|(t, _, p)| (t, String::from_utf8_lossy(p).into_owned()))
                .collect(),
        ))
    }

    /// How many records the kernel dropped because this socket's receive buffer was full
    /// (the socket's `sk_drops`, the `Drops` column of `/proc/net/netlink` for its inode);
    /// `None` where that cannot be read.
    pub(super) fn dropped(&self) -> Option<u64> {
        // SAFETY: an all-zero stat is valid; fstat(2) fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat(2) on an open descriptor into a stat of the right size.
        if unsafe { libc::fstat(self.0.as_raw_fd(), &raw mut st) } != 0 {
            return None;
        }
        drops_of(
            &std::fs::read_to_string("/proc/net/netlink").ok()?,
            st.st_ino,
        )
    }

    /// Sets the receive buffer to `bytes` (the kernel doubles it, and keeps a minimum of a
    /// few kilobytes), so that a test can make the kernel drop records.
    #[cfg(feature = "landlock-tests")]
    pub(super) fn set_receive_buffer(&self, bytes: libc::c_int) -> io::Result<()> {
        // SAFETY: setsockopt(2) with a pointer to a c_int of the size given.
        let rc = unsafe {
            libc::setsockopt(
                self.0.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&raw const bytes).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// What one [`Socket::recv`] got.
#[derive(Debug)]
pub(super) enum Received {
    /// Records, as (type, text); none after an interruption.
    Records(Vec<(u16, String)>),
    /// The socket was empty.
    Empty,
    /// `ENOBUFS`: the kernel dropped records since the last read, the receive buffer being
    /// full (one error for a run of drops: [`Socket::dropped`] counts them).
    Overrun,
}

/// The `Drops` of the audit socket with inode `inode` in `/proc/net/netlink`'s `table`:
/// `sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode`, one socket a line.
fn drops_of(table: &str, inode: u64) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let ours = f.get(1)?.parse::<libc::c_int>().ok()? == NETLINK_AUDIT
            && f.get(9)?.parse::<u64>().ok()? == inode;
        if ours { f.get(8)?.parse().ok() } else { None }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader's socket holds a flood's worth of records (needs root: `CAP_AUDIT_READ`,
    /// `CAP_NET_ADMIN`).
    #[cfg(feature = "landlock-tests")]
    #[test]
    fn the_readers_socket_has_a_large_receive_buffer() {
        let socket = subscribe().unwrap_or_else(|e| unreachable!("{e}"));
        let mut size: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt(2) into a c_int of the size given.
        let rc = unsafe {
            libc::getsockopt(
                socket.fd().as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&raw mut size).cast(),
                &raw mut len,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        // The kernel reports twice what was set.
        assert!(size >= RECEIVE_BUFFER, "{size}");
    }

    #[test]
    fn a_sockets_drops_are_read_from_its_line() {
        let table = "sk               Eth Pid        Groups   Rmem     Wmem     Dump  Locks    Drops    Inode\n\
            ffff8880037c3000 0   1          00000000 0        0        0     2        5        17\n\
            ffff8880037c4800 9   4026531    00000001 2304     0        0     2        312      9042\n\
            ffff8880037c5000 9   4026532    00000000 0        0        0     2        7        9043\n";
        assert_eq!(drops_of(table, 9042), Some(312));
        assert_eq!(drops_of(table, 9043), Some(7));
        // Another protocol's socket with that inode is not the audit socket.
        assert_eq!(drops_of(table, 17), None);
        assert_eq!(drops_of(table, 1), None);
    }

    #[test]
    fn messages_are_split_at_their_aligned_lengths() {
        let mut buf = Vec::new();
        for (t, text) in [(1423u16, "abc"), (1320, "")] {
            let len = HEADER + text.len();
            buf.extend_from_slice(&(len as u32).to_ne_bytes());
            buf.extend_from_slice(&t.to_ne_bytes());
            buf.extend_from_slice(&0u16.to_ne_bytes());
            buf.extend_from_slice(&7u32.to_ne_bytes());
            buf.extend_from_slice(&0u32.to_ne_bytes());
            buf.extend_from_slice(text.as_bytes());
            buf.resize((buf.len() + 3) & !3, 0);
        }
        let m = messages(&buf);
        assert_eq!(m, [(1423, 7, &b"abc"[..]), (1320, 7, &b""[..])]);
        // A length past the buffer ends the list.
        let mut bad = buf.clone();
        bad[0] = 200;
        assert!(messages(&bad).is_empty());
    }
}
