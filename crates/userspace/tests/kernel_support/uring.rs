//! io_uring helper actions: one submission per action, its completion's errno returned.

use super::net::sockaddr_v4;
use super::sys::{cstr, errno, xattr_value};

/// Submits one io_uring operation and returns its errno (0 on success).
pub(super) fn uring_one(entry: &io_uring::squeue::Entry) -> i32 {
    match io_uring::IoUring::new(4) {
        Ok(mut ring) => uring_on(&mut ring, entry),
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// Submits one operation on `ring` and returns its errno (0 on success).
fn uring_on(ring: &mut io_uring::IoUring, entry: &io_uring::squeue::Entry) -> i32 {
    // SAFETY: the entry's buffers outlive the wait below.
    unsafe {
        if ring.submission().push(entry).is_err() {
            return -1;
        }
    }
    if let Err(e) = ring.submit_and_wait(1) {
        return e.raw_os_error().unwrap_or(-1);
    }
    match ring.completion().next() {
        Some(c) if c.result() < 0 => -c.result(),
        Some(_) => 0,
        None => -1,
    }
}

/// `IORING_OP_OPENAT` of `path` for reading.
pub(super) fn uring_openat(path: &str) -> i32 {
    let p = cstr(path);
    let e = io_uring::opcode::OpenAt::new(io_uring::types::Fd(libc::AT_FDCWD), p.as_ptr())
        .flags(libc::O_RDONLY)
        .build();
    uring_one(&e)
}

/// `IORING_OP_CONNECT` of a TCP socket to `addr:port` (IPv4).
pub(super) fn uring_connect(addr: &str, port: u16) -> i32 {
    // SAFETY: a plain socket call.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        return errno();
    }
    let sa = sockaddr_v4(addr, port);
    let e = io_uring::opcode::Connect::new(
        io_uring::types::Fd(fd),
        (&raw const sa).cast(),
        size_of::<libc::sockaddr_in>() as u32,
    )
    .build();
    uring_one(&e)
}

/// The helper action `uring-unlinkat PATH`.
pub(super) fn uring_unlinkat(path: &str) -> i32 {
    let p = cstr(path);
    let e =
        io_uring::opcode::UnlinkAt::new(io_uring::types::Fd(libc::AT_FDCWD), p.as_ptr()).build();
    uring_one(&e)
}

/// The helper action `uring-renameat FROM TO`.
pub(super) fn uring_renameat(from: &str, to: &str) -> i32 {
    let (a0, a1) = (cstr(from), cstr(to));
    let e = io_uring::opcode::RenameAt::new(
        io_uring::types::Fd(libc::AT_FDCWD),
        a0.as_ptr(),
        io_uring::types::Fd(libc::AT_FDCWD),
        a1.as_ptr(),
    )
    .build();
    uring_one(&e)
}

/// The helper action `uring-linkat FROM TO`.
pub(super) fn uring_linkat(from: &str, to: &str) -> i32 {
    let (a0, a1) = (cstr(from), cstr(to));
    let e = io_uring::opcode::LinkAt::new(
        io_uring::types::Fd(libc::AT_FDCWD),
        a0.as_ptr(),
        io_uring::types::Fd(libc::AT_FDCWD),
        a1.as_ptr(),
    )
    .build();
    uring_one(&e)
}

/// The helper action `uring-sendmsg ADDR PORT`: IORING_OP_SENDMSG of a UDP datagram with an
/// address.
pub(super) fn uring_sendmsg(addr: &str, port: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        let mut sa = sockaddr_v4(addr, port.parse().unwrap());
        let mut data = *b"x";
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = (&raw mut sa).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        let e = io_uring::opcode::SendMsg::new(io_uring::types::Fd(fd), &raw const msg).build();
        uring_one(&e)
    }
}

/// The helper action `uring-fsetxattr-ro PATH NAME`: IORING_OP_FSETXATTR on a descriptor opened for
/// reading.
pub(super) fn uring_fsetxattr_ro(path: &str, name: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY);
        if fd < 0 {
            return 100 + errno();
        }
        let value = xattr_value(name);
        let name = cstr(name);
        let e = io_uring::opcode::FSetXattr::new(
            io_uring::types::Fd(fd),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len() as u32,
        )
        .build();
        uring_one(&e)
    }
}

/// The helper action `uring-personality-openat PATH`: the task's own credentials registered as
/// an io_uring personality (`IORING_REGISTER_PERSONALITY`), then `IORING_OP_OPENAT` of `PATH`
/// for reading under it. Registering fails with `100 + errno`.
pub(super) fn uring_personality_openat(path: &str) -> i32 {
    let mut ring = match io_uring::IoUring::new(4) {
        Ok(r) => r,
        Err(e) => return e.raw_os_error().unwrap_or(-1),
    };
    let id = match ring.submitter().register_personality() {
        Ok(id) => id,
        Err(e) => return 100 + e.raw_os_error().unwrap_or(0),
    };
    let p = cstr(path);
    let e = io_uring::opcode::OpenAt::new(io_uring::types::Fd(libc::AT_FDCWD), p.as_ptr())
        .flags(libc::O_RDONLY)
        .build()
        .personality(id);
    uring_on(&mut ring, &e)
}

/// The helper action `uring-async-after-capset ALLOWED PATH`: an `IORING_OP_OPENAT` of
/// `ALLOWED` forced to io_uring's worker threads (`IOSQE_ASYNC`), so that a worker starts with
/// the task's credentials; then `capset(2)` of the task's own (empty) sets, which installs new
/// credentials; then the same for `PATH`. The worker runs the second request under the task's
/// new credentials in place of its own old ones (`override_creds`). Returns the second
/// request's errno; the first's or `capset`'s failure as `100 + errno`.
pub(super) fn uring_async_after_capset(allowed: &str, path: &str) -> i32 {
    let mut ring = match io_uring::IoUring::new(4) {
        Ok(r) => r,
        Err(e) => return e.raw_os_error().unwrap_or(-1),
    };
    let open = |p: &std::ffi::CString| {
        io_uring::opcode::OpenAt::new(io_uring::types::Fd(libc::AT_FDCWD), p.as_ptr())
            .flags(libc::O_RDONLY)
            .build()
            .flags(io_uring::squeue::Flags::ASYNC)
    };
    let first = cstr(allowed);
    let rc = uring_on(&mut ring, &open(&first));
    if rc != 0 {
        return 100 + rc;
    }
    // A version 3 header (`_LINUX_CAPABILITY_VERSION_3`, this task) and its two data words
    // (effective, permitted, inheritable each): all empty, the sets a scope's task has.
    let header: [u32; 2] = [0x2008_0522, 0];
    let data = [0u32; 6];
    // SAFETY: capset reads the header and the two data words it needs.
    let rc = unsafe { libc::syscall(libc::SYS_capset, header.as_ptr(), data.as_ptr()) };
    if rc != 0 {
        return 100 + errno();
    }
    let second = cstr(path);
    uring_on(&mut ring, &open(&second))
}
