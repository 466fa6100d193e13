//! Mount helper actions: new and detached mounts, mount attributes, namespaces and chroot.

use super::sys::{check, cstr, errno, execveat_true};

/// The helper action `mount-tmpfs TARGET`.
pub(super) fn mount_tmpfs(target: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        check(
            libc::mount(
                cstr("none").as_ptr(),
                cstr(target).as_ptr(),
                cstr("tmpfs").as_ptr(),
                0,
                std::ptr::null(),
            )
            .into(),
        )
    }
}

/// The helper action `open-tree-read | open-tree-exec DIR REL`: clone the mount subtree at DIR (a
/// detached mount) and open or exec REL below it.
pub(super) fn open_tree(dir: &str, rel: &str, exec: bool) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        const OPEN_TREE_CLONE: libc::c_uint = 1;
        let t = libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            cstr(dir).as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        );
        if t < 0 {
            return errno();
        }
        let rel = cstr(rel);
        if !exec {
            return check(libc::openat(t as i32, rel.as_ptr(), libc::O_RDONLY).into());
        }
        execveat_true(t as i32, &rel, 0)
    }
}

/// The helper action `unshare-ns-read PATH`: A new mount namespace (no new mounts), then read PATH.
pub(super) fn unshare_ns_read(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) < 0 {
            return errno();
        }
        check(libc::open(cstr(path).as_ptr(), libc::O_RDONLY).into())
    }
}

/// The helper action `proc-cwd-read PID REL`: read REL below /proc/PID/cwd.
pub(super) fn proc_cwd_read(pid: &str, rel: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let p = cstr(&format!("/proc/{}/cwd/{}", pid, rel));
        check(libc::open(p.as_ptr(), libc::O_RDONLY).into())
    }
}

/// The helper action `chroot-read ROOT PATH`: chroot(DIR), then read PATH (relative to the new
/// root).
pub(super) fn chroot_read(root: &str, path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        if libc::chroot(cstr(root).as_ptr()) < 0 {
            return 100 + errno();
        }
        check(libc::open(cstr(path).as_ptr(), libc::O_RDONLY).into())
    }
}

/// The helper action `mount-setattr-ro PATH`: make the mount at PATH read-only with
/// mount_setattr(2).
pub(super) fn mount_setattr_ro(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        #[repr(C)]
        struct MountAttr {
            set: u64,
            clr: u64,
            propagation: u64,
            userns_fd: u64,
        }
        let attr = MountAttr {
            set: 0x1, // MOUNT_ATTR_RDONLY
            clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        check(libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            cstr(path).as_ptr(),
            0,
            &raw const attr,
            size_of::<MountAttr>(),
        ))
    }
}

/// The helper action `fspick-ro PATH`: reconfigure the filesystem mounted at PATH read-only with
/// fspick(2) and fsconfig(2) (FSCONFIG_SET_FLAG "ro", FSCONFIG_CMD_RECONFIGURE).
pub(super) fn fspick_ro(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::syscall(libc::SYS_fspick, libc::AT_FDCWD, cstr(path).as_ptr(), 1);
        if fd < 0 {
            return 100 + errno();
        }
        let ro = cstr("ro");
        let null = std::ptr::null::<libc::c_char>();
        if libc::syscall(libc::SYS_fsconfig, fd, 0, ro.as_ptr(), null, 0) < 0 {
            return 150 + errno();
        }
        check(libc::syscall(libc::SYS_fsconfig, fd, 7, null, null, 0))
    }
}

/// The helper action `fsmount-create`: A new tmpfs with fsopen(2) and fsmount(2), never attached;
/// create `f` in it.
pub(super) fn fsmount_create() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fs = libc::syscall(libc::SYS_fsopen, cstr("tmpfs").as_ptr(), 1);
        if fs < 0 {
            return 100 + errno();
        }
        let null = std::ptr::null::<libc::c_char>();
        if libc::syscall(libc::SYS_fsconfig, fs, 6, null, null, 0) < 0 {
            return 150 + errno();
        }
        let m = libc::syscall(libc::SYS_fsmount, fs, 1, 0);
        if m < 0 {
            return 200 + errno();
        }
        let f = libc::openat(
            m as i32,
            cstr("f").as_ptr(),
            libc::O_WRONLY | libc::O_CREAT,
            0o644,
        );
        check(f.into())
    }
}
