//! File helper actions that change or read attributes: extended attributes, ACLs, inode
//! flags, timestamps, ioctls, and the inotify and fanotify watches.

use super::POSIX_ACL_ACCESS;
use super::sys::{check, cstr, errno, xattr_value};

/// The helper action `setxattr PATH [NAME]`: set the extended attribute NAME (default user.bee) to
/// xattr_value(NAME).
pub(super) fn setxattr(path: &str, name: Option<&str>) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let name = name.unwrap_or("user.bee");
        let v = xattr_value(name);
        let name = cstr(name);
        check(
            libc::setxattr(
                cstr(path).as_ptr(),
                name.as_ptr(),
                v.as_ptr().cast(),
                v.len(),
                0,
            )
            .into(),
        )
    }
}

/// The helper action `setflags-raw PATH FLAGS`: FS_IOC_SETFLAGS (as chattr does) through a
/// read-only descriptor.
pub(super) fn setflags_raw(path: &str, flags: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK);
        if fd < 0 {
            return 100 + errno();
        }
        let flags: libc::c_long = flags.parse().unwrap();
        const FS_IOC_SETFLAGS: libc::c_ulong = 0x4008_6602;
        check(libc::ioctl(fd, FS_IOC_SETFLAGS, &raw const flags).into())
    }
}

/// The helper action `ioctl PATH CMD`: ioctl CMD (hex) with a pointer to an int 0 on a read-only
/// descriptor.
pub(super) fn ioctl(path: &str, cmd: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK);
        if fd < 0 {
            return 100 + errno();
        }
        let cmd = libc::c_ulong::from_str_radix(cmd, 16).unwrap();
        let zero: libc::c_int = 0;
        check(libc::ioctl(fd, cmd, &raw const zero).into())
    }
}

/// The helper action `removexattr PATH NAME`.
pub(super) fn removexattr(path: &str, name: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe { check(libc::removexattr(cstr(path).as_ptr(), cstr(name).as_ptr()).into()) }
}

/// The helper action `set-acl PATH`: set a minimal POSIX access ACL (u::rw-, g::r--, o::r--), as
/// setfacl does.
pub(super) fn set_acl(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let v = xattr_value(POSIX_ACL_ACCESS);
        check(
            libc::setxattr(
                cstr(path).as_ptr(),
                cstr("system.posix_acl_access").as_ptr(),
                v.as_ptr().cast(),
                v.len(),
                0,
            )
            .into(),
        )
    }
}

/// The helper action `utimes PATH`.
pub(super) fn utimes(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        check(libc::utimensat(libc::AT_FDCWD, cstr(path).as_ptr(), std::ptr::null(), 0).into())
    }
}

/// The helper action `inotify-watch PATH`: an inotify watch on PATH (it reports the names of
/// entries used there).
pub(super) fn inotify_watch(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::inotify_init1(0);
        if fd < 0 {
            return errno();
        }
        check(libc::inotify_add_watch(fd, cstr(path).as_ptr(), libc::IN_ALL_EVENTS).into())
    }
}

/// The helper action `fanotify-deny PATH SECS`: A filesystem-wide FAN_OPEN_PERM mark through PATH;
/// say so on stdout, then answer FAN_DENY to every open for SECS seconds.
pub(super) fn fanotify_deny(path: &str, secs: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        use std::io::Write;
        const FAN_CLASS_CONTENT: u32 = 0x4;
        const FAN_MARK_ADD: u32 = 0x1;
        const FAN_MARK_FILESYSTEM: u32 = 0x100;
        const FAN_OPEN_PERM: u64 = 0x10000;
        const FAN_DENY: u32 = 2;
        let fan = libc::syscall(
            libc::SYS_fanotify_init,
            FAN_CLASS_CONTENT | libc::FAN_CLOEXEC,
            libc::O_RDONLY as u32,
        ) as i32;
        if fan < 0 {
            return 100 + errno();
        }
        if libc::syscall(
            libc::SYS_fanotify_mark,
            fan,
            FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
            FAN_OPEN_PERM,
            libc::AT_FDCWD,
            cstr(path).as_ptr(),
        ) < 0
        {
            return errno();
        }
        println!("bee-fanotify-ready");
        std::io::stdout().flush().unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(secs.parse().unwrap());
        let mut buf = [0u8; 4096];
        while std::time::Instant::now() < end {
            let mut p = libc::pollfd {
                fd: fan,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&raw mut p, 1, 100) <= 0 {
                continue;
            }
            let n = libc::read(fan, buf.as_mut_ptr().cast(), buf.len());
            let mut off = 0usize;
            while n > 0 && off + 24 <= n as usize {
                let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap());
                let fd = i32::from_ne_bytes(buf[off + 16..off + 20].try_into().unwrap());
                if fd >= 0 {
                    let resp = [fd.to_ne_bytes(), FAN_DENY.to_ne_bytes()].concat();
                    libc::write(fan, resp.as_ptr().cast(), 8);
                    libc::close(fd);
                }
                off += len.max(24) as usize;
            }
        }
        0
    }
}

/// The helper action `setflags PATH SIGN`: set or clear FS_IMMUTABLE_FL with FS_IOC_SETFLAGS on a
/// descriptor opened for reading.
pub(super) fn setflags(path: &str, sign: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        const FS_IOC_GETFLAGS: libc::c_ulong = 0x8008_6601;
        const FS_IOC_SETFLAGS: libc::c_ulong = 0x4008_6602;
        const FS_IMMUTABLE_FL: libc::c_long = 0x10;
        let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY);
        if fd < 0 {
            return 100 + errno();
        }
        let mut flags: libc::c_long = 0;
        if libc::ioctl(fd, FS_IOC_GETFLAGS, &raw mut flags) < 0 {
            return 150 + errno();
        }
        if sign == "-" {
            flags &= !FS_IMMUTABLE_FL;
        } else {
            flags |= FS_IMMUTABLE_FL;
        }
        check(libc::ioctl(fd, FS_IOC_SETFLAGS, &raw const flags).into())
    }
}

/// The helper action `getxattr PATH NAME`: read the extended attribute NAME and print it.
pub(super) fn getxattr(path: &str, name: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut buf = [0u8; 256];
        let n = libc::getxattr(
            cstr(path).as_ptr(),
            cstr(name).as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        );
        if n < 0 {
            return errno();
        }
        println!("getxattr {:?}", String::from_utf8_lossy(&buf[..n as usize]));
        0
    }
}

/// The helper action `futimens-ro PATH`: futimens on a descriptor opened for reading.
pub(super) fn futimens_ro(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY);
        if fd < 0 {
            return 100 + errno();
        }
        check(libc::futimens(fd, std::ptr::null()).into())
    }
}

/// The helper action `fsetxattr-ro PATH NAME`: fsetxattr on a descriptor opened for reading.
pub(super) fn fsetxattr_ro(path: &str, name: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY);
        if fd < 0 {
            return 100 + errno();
        }
        let v = xattr_value(name);
        check(libc::fsetxattr(fd, cstr(name).as_ptr(), v.as_ptr().cast(), v.len(), 0).into())
    }
}
