//! File helper actions that open, execute, map, link or rename: each returns the errno of the
//! call the kernel checks.

use std::fs;
use std::os::unix::fs::MetadataExt;

use bee_userspace::engine::{Engine, EngineOptions};

use super::plan;
use super::sys::{check, cstr, errno, execveat_true};

/// The helper action `open-read PATH`.
pub(super) fn open_read(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY);
        check(fd.into())
    }
}

/// The helper action `open-write PATH`.
pub(super) fn open_write(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644);
        check(fd.into())
    }
}

/// The helper action `mmap-exec | mprotect-exec PATH`.
pub(super) fn mmap_exec(path: &str, mprotect: bool) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY);
        if fd < 0 {
            return errno();
        }
        let prot = if mprotect {
            libc::PROT_READ
        } else {
            libc::PROT_READ | libc::PROT_EXEC
        };
        let p = libc::mmap(std::ptr::null_mut(), 4096, prot, libc::MAP_PRIVATE, fd, 0);
        if p == libc::MAP_FAILED {
            return errno();
        }
        if mprotect {
            return check(libc::mprotect(p, 4096, libc::PROT_READ | libc::PROT_EXEC).into());
        }
        0
    }
}

/// The helper action `anon-exec`.
pub(super) fn anon_exec() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED { errno() } else { 0 }
    }
}

/// The helper action `memfd-exec PATH`.
pub(super) fn memfd_exec(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let bytes = fs::read(path).unwrap();
        let fd = libc::memfd_create(cstr("bee").as_ptr(), 0);
        if fd < 0 {
            return errno();
        }
        libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let argv = [cstr("busybox"), cstr("true")];
        let argv_p = [argv[0].as_ptr(), argv[1].as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null()];
        libc::fexecve(fd, argv_p.as_ptr(), envp.as_ptr());
        errno()
    }
}

/// The helper action `execveat-empty PATH`.
pub(super) fn execveat_empty(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_PATH);
        if fd < 0 {
            return errno();
        }
        execveat_true(fd, c"", libc::AT_EMPTY_PATH)
    }
}

/// The helper action `open-chain DIR SEG COUNT`: walk N directories named SEG with O_PATH, then
/// open `f`.
pub(super) fn open_chain(dir: &str, seg: &str, count: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut fd = libc::open(cstr(dir).as_ptr(), libc::O_PATH);
        let seg = cstr(seg);
        for _ in 0..count.parse::<u32>().unwrap() {
            fd = libc::openat(fd, seg.as_ptr(), libc::O_PATH | libc::O_DIRECTORY);
            if fd < 0 {
                return errno();
            }
        }
        check(libc::openat(fd, cstr("f").as_ptr(), libc::O_RDONLY).into())
    }
}

/// The helper action `loader TARGET POLICY`: load an engine, install the policy for the cgroup, say
/// so, and wait to be killed.
pub(super) fn loader(target: &str, policy: &str) -> i32 {
    let engine = Engine::load(&EngineOptions::default());
    let mut engine = match engine {
        Ok(e) => e,
        Err(e) => {
            eprintln!("loader: {e}");
            return 200;
        }
    };
    let id = fs::metadata(target).unwrap().ino();
    let text = fs::read_to_string(policy).unwrap();
    let installed = engine.install(&plan(&text), id, 0).unwrap();
    println!("bee-loader-ready policy {}", installed.policy_id());
    std::mem::forget(installed);
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

/// The helper action `open-many PATHS…`: opens each argument for reading and prints `errno path`
/// per line.
pub(super) fn open_many(paths: &[String]) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        for path in paths {
            let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY);
            let e = if fd < 0 { errno() } else { 0 };
            if fd >= 0 {
                libc::close(fd);
            }
            println!("open-many {e} {path}");
        }
        0
    }
}

/// The helper action `open-repeat PATH COUNT`: opens (and closes) PATH for reading COUNT
/// times; prints how many opens succeeded and the loop's time (`open-repeat N in NS ns`).
pub(super) fn open_repeat(path: &str, count: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let path = cstr(path);
        let mut opened = 0u32;
        let start = std::time::Instant::now();
        for _ in 0..count.parse::<u32>().unwrap() {
            let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
            if fd >= 0 {
                opened += 1;
                libc::close(fd);
            }
        }
        println!("open-repeat {opened} in {} ns", start.elapsed().as_nanos());
        0
    }
}

/// The helper action `open-trunc-ro PATH`.
pub(super) fn open_trunc_ro(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe { check(libc::open(cstr(path).as_ptr(), libc::O_RDONLY | libc::O_TRUNC).into()) }
}

/// The helper action `mknod-open PATH MAJOR MINOR`: create a character device node and open it for
/// reading.
pub(super) fn mknod_open(path: &str, major: &str, minor: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let dev = libc::makedev(major.parse().unwrap(), minor.parse().unwrap());
        if libc::mknod(cstr(path).as_ptr(), libc::S_IFCHR | 0o600, dev) < 0 {
            return errno();
        }
        check(libc::open(cstr(path).as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK).into())
    }
}

/// The helper action `rename-exchange FROM TO`.
pub(super) fn rename_exchange(from: &str, to: &str) -> i32 {
    renameat2(from, to, libc::RENAME_EXCHANGE)
}

/// The helper action `rename-whiteout FROM TO`.
pub(super) fn rename_whiteout(from: &str, to: &str) -> i32 {
    renameat2(from, to, libc::RENAME_WHITEOUT)
}

/// `renameat2(2)` of `from` to `to` (both relative to the working directory) with `flags`.
fn renameat2(from: &str, to: &str, flags: libc::c_uint) -> i32 {
    // SAFETY: a plain syscall on NUL-terminated strings.
    unsafe {
        check(libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            cstr(from).as_ptr(),
            libc::AT_FDCWD,
            cstr(to).as_ptr(),
            flags,
        ))
    }
}

/// The helper action `opath-reopen PATH`: O_PATH (not checked), then a real open through
/// /proc/self/fd/N.
pub(super) fn opath_reopen(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_PATH);
        if fd < 0 {
            return errno();
        }
        let p = cstr(&format!("/proc/self/fd/{fd}"));
        check(libc::open(p.as_ptr(), libc::O_RDONLY).into())
    }
}

/// The helper action `opath-link | opath-link-empty SRC DST`: O_PATH of SRC, then a hard link DST
/// of it, through /proc/self/fd/N (AT_SYMLINK_FOLLOW) or AT_EMPTY_PATH.
pub(super) fn opath_link(src: &str, dst: &str, empty: bool) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(src).as_ptr(), libc::O_PATH);
        if fd < 0 {
            return errno();
        }
        let dst = cstr(dst);
        if !empty {
            let p = cstr(&format!("/proc/self/fd/{fd}"));
            check(
                libc::linkat(
                    libc::AT_FDCWD,
                    p.as_ptr(),
                    libc::AT_FDCWD,
                    dst.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
                .into(),
            )
        } else {
            check(
                libc::linkat(
                    fd,
                    cstr("").as_ptr(),
                    libc::AT_FDCWD,
                    dst.as_ptr(),
                    libc::AT_EMPTY_PATH,
                )
                .into(),
            )
        }
    }
}

/// The helper action `opath-exec PATH`: execve of /proc/self/fd/N of an O_PATH descriptor.
pub(super) fn opath_exec(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let fd = libc::open(cstr(path).as_ptr(), libc::O_PATH);
        if fd < 0 {
            return errno();
        }
        let p = cstr(&format!("/proc/self/fd/{fd}"));
        let argv = [cstr("busybox"), cstr("true")];
        let argv_p = [argv[0].as_ptr(), argv[1].as_ptr(), std::ptr::null()];
        let envp: [*const libc::c_char; 1] = [std::ptr::null()];
        libc::execve(p.as_ptr(), argv_p.as_ptr(), envp.as_ptr());
        errno()
    }
}

/// The helper action `handle-open PATH DIR`: name_to_handle_at, then open_by_handle_at with a
/// descriptor of DIR (on the same mount) as the mount descriptor.
pub(super) fn handle_open(path: &str, dir: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        #[repr(C)]
        struct Handle {
            bytes: u32,
            kind: i32,
            f: [u8; 128],
        }
        let mut h = Handle {
            bytes: 128,
            kind: 0,
            f: [0; 128],
        };
        let mut mnt = 0i32;
        let r = libc::syscall(
            libc::SYS_name_to_handle_at,
            libc::AT_FDCWD,
            cstr(path).as_ptr(),
            &raw mut h,
            &raw mut mnt,
            0,
        );
        if r < 0 {
            return 100 + errno();
        }
        let root = libc::open(cstr(dir).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
        if root < 0 {
            return 200 + errno();
        }
        check(libc::syscall(
            libc::SYS_open_by_handle_at,
            root,
            &raw mut h,
            libc::O_RDONLY,
        ))
    }
}

/// What the `fd3-*` actions do with a name below descriptor 3.
#[derive(Debug, Clone, Copy)]
pub(super) enum Fd3 {
    /// Open it for reading.
    Open,
    /// Create it for writing.
    Create,
    /// Execute it.
    Exec,
}

/// The helper action `fd3-open | fd3-create | fd3-exec REL`: open (for reading, or creating it for
/// writing) or execute REL below the directory or detached mount on descriptor 3.
pub(super) fn fd3(rel: &str, op: Fd3) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let rel = cstr(rel);
        match op {
            Fd3::Open => check(libc::openat(3, rel.as_ptr(), libc::O_RDONLY).into()),
            Fd3::Create => {
                check(libc::openat(3, rel.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644).into())
            }
            Fd3::Exec => execveat_true(3, &rel, 0),
        }
    }
}

/// The helper action `readlink PATH`.
pub(super) fn readlink(path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut buf = [0u8; 256];
        let n = libc::readlink(cstr(path).as_ptr(), buf.as_mut_ptr().cast(), buf.len());
        if n < 0 {
            return errno();
        }
        println!("readlink {:?}", String::from_utf8_lossy(&buf[..n as usize]));
        0
    }
}
