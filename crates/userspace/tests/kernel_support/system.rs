//! System-wide helper actions: BPF, SysV shared memory, keys, modules, kexec, the host
//! name, reboot and the kernel log.

use super::sys::{check, cstr, errno};

/// The helper action `bpf`: BPF_PROG_LOAD with an empty attr: refused by the LSM before any check.
pub(super) fn bpf() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let attr = [0u8; 128];
        check(libc::syscall(libc::SYS_bpf, 5, attr.as_ptr(), attr.len()))
    }
}

/// The helper action `shm-own`: A private SysV segment of the caller's own: create, attach, write,
/// remove.
pub(super) fn shm_own() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let id = libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600);
        if id < 0 {
            return 100 + errno();
        }
        let p = libc::shmat(id, std::ptr::null(), 0);
        if p as isize == -1 {
            return 150 + errno();
        }
        p.cast::<u8>().write(1);
        libc::shmdt(p);
        check(libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()).into())
    }
}

/// The helper action `sethostname NAME`.
pub(super) fn sethostname(name: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let n = name;
        check(libc::sethostname(n.as_ptr().cast(), n.len()).into())
    }
}

/// The helper action `reboot-cad-off`.
pub(super) fn reboot_cad_off() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe { check(libc::reboot(libc::LINUX_REBOOT_CMD_CAD_OFF).into()) }
}

/// The helper action `syslog-read MARKER`: read the kernel log with syslog(2); say whether MARKER
/// is in it.
pub(super) fn syslog_read(marker: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut buf = vec![0u8; 1 << 20];
        let n = libc::klogctl(3, buf.as_mut_ptr().cast(), buf.len() as i32);
        if n < 0 {
            return errno();
        }
        let text = String::from_utf8_lossy(&buf[..n as usize]);
        println!("syslog-read {} bytes, marker {}", n, text.contains(marker));
        0
    }
}

/// The helper action `shm-read KEY`: attach the System V shared memory segment KEY read-only and
/// print its first bytes.
pub(super) fn shm_read(key: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let id = libc::shmget(key.parse().unwrap(), 0, 0);
        if id < 0 {
            return errno();
        }
        let p = libc::shmat(id, std::ptr::null(), libc::SHM_RDONLY);
        if p as isize == -1 {
            return errno();
        }
        let bytes = std::slice::from_raw_parts(p.cast::<u8>(), 16);
        println!("shm-read {:?}", String::from_utf8_lossy(bytes));
        0
    }
}

/// The helper action `add-key DESC DATA`: A "user" key in the user keyring.
pub(super) fn add_key(desc: &str, data: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let (d, t) = (cstr(desc), data);
        check(libc::syscall(
            libc::SYS_add_key,
            cstr("user").as_ptr(),
            d.as_ptr(),
            t.as_ptr(),
            t.len(),
            -4, // KEY_SPEC_USER_KEYRING
        ))
    }
}

/// The helper action `key-read DESC`: find the "user" key DESC in the user keyring and print its
/// payload.
pub(super) fn key_read(desc: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        const KEYCTL_SEARCH: i64 = 10;
        const KEYCTL_READ: i64 = 11;
        let id = libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_SEARCH,
            -4,
            cstr("user").as_ptr(),
            cstr(desc).as_ptr(),
            0,
        );
        if id < 0 {
            return 100 + errno();
        }
        let mut buf = [0u8; 256];
        let n = libc::syscall(libc::SYS_keyctl, KEYCTL_READ, id, buf.as_mut_ptr(), 256);
        if n < 0 {
            return errno();
        }
        println!("key-read {:?}", String::from_utf8_lossy(&buf[..n as usize]));
        0
    }
}

/// The helper action `kexec-unload`.
pub(super) fn kexec_unload() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        check(libc::syscall(
            libc::SYS_kexec_load,
            0,
            0,
            std::ptr::null::<u8>(),
            0,
        ))
    }
}

/// The helper action `finit-module PATH`: load the kernel module PATH (xz-compressed if it ends in
/// .xz).
pub(super) fn finit_module(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY);
        if fd < 0 {
            return 100 + errno();
        }
        let flags = if path.ends_with(".xz") { 4 } else { 0 };
        check(libc::syscall(
            libc::SYS_finit_module,
            fd,
            cstr("").as_ptr(),
            flags,
        ))
    }
}

/// The helper action `init-module-garbage`: init_module(2) of 64 zero bytes: the loader refuses it
/// (ENOEXEC) unless an LSM refused the load first.
pub(super) fn init_module_garbage() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let image = [0u8; 64];
        check(libc::syscall(
            libc::SYS_init_module,
            image.as_ptr(),
            image.len(),
            cstr("").as_ptr(),
        ))
    }
}
