//! Process helper actions: signals, ptrace and pidfds, another process's memory and
//! namespaces, scheduling and resource limits, cgroups, and the terminal.

use super::sys::{check, cstr, errno};

/// The helper action `kill PID`.
pub(super) fn kill(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe { check(libc::kill(pid.parse().unwrap(), 0).into()) }
}

/// The helper action `ptrace PID`.
pub(super) fn ptrace(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let pid: i32 = pid.parse().unwrap();
        let r = libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0);
        let e = check(r);
        if e == 0 {
            libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0);
        }
        e
    }
}

/// The helper action `unshare-user`: unshare(CLONE_NEWUSER) needs a single-threaded caller: do it
/// in a child.
pub(super) fn unshare_user() -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            let e = check(libc::unshare(libc::CLONE_NEWUSER).into());
            libc::_exit(e);
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        libc::WEXITSTATUS(status)
    }
}

/// The helper action `sigio-kill PID`: make PID the owner of a pipe with O_ASYNC and SIGKILL as its
/// signal, then write to the pipe (the kernel sends the signal, not kill(2)).
pub(super) fn sigio_kill(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut p = [0i32; 2];
        if libc::pipe(p.as_mut_ptr()) < 0 {
            return errno();
        }
        const F_SETSIG: i32 = 10;
        let pid: i32 = pid.parse().unwrap();
        if libc::fcntl(p[0], libc::F_SETOWN, pid) < 0
            || libc::fcntl(p[0], F_SETSIG, libc::SIGKILL) < 0
            || libc::fcntl(p[0], libc::F_SETFL, libc::O_ASYNC | libc::O_NONBLOCK) < 0
        {
            return errno();
        }
        check(libc::write(p[1], b"x".as_ptr().cast(), 1) as i64)
    }
}

/// The helper action `pidfd-kill PID`.
pub(super) fn pidfd_kill(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let pfd = libc::syscall(libc::SYS_pidfd_open, pid.parse::<i32>().unwrap(), 0);
        if pfd < 0 {
            return errno();
        }
        check(libc::syscall(
            libc::SYS_pidfd_send_signal,
            pfd,
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        ))
    }
}

/// The helper action `pidfd-getfd PID FD`: copy descriptor FD of PID.
pub(super) fn pidfd_getfd(pid: &str, fd: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let pfd = libc::syscall(libc::SYS_pidfd_open, pid.parse::<i32>().unwrap(), 0);
        if pfd < 0 {
            return errno();
        }
        check(libc::syscall(
            libc::SYS_pidfd_getfd,
            pfd,
            fd.parse::<i32>().unwrap(),
            0,
        ))
    }
}

/// The helper action `vm-read PID`: process_vm_readv of one byte at the stack of PID's address
/// space.
pub(super) fn vm_read(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut buf = [0u8; 1];
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let remote = libc::iovec {
            iov_base: 0x1000 as *mut libc::c_void,
            iov_len: 1,
        };
        let r = libc::process_vm_readv(pid.parse().unwrap(), &local, 1, &remote, 1, 0);
        check(r as i64)
    }
}

/// The helper action `proc-mem PID`.
pub(super) fn proc_mem(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let p = cstr(&format!("/proc/{}/mem", pid));
        check(libc::open(p.as_ptr(), libc::O_RDONLY).into())
    }
}

/// The helper action `cgroup-clone-into CGROUP PATH`: clone3(CLONE_INTO_CGROUP) of a child into
/// another cgroup; the child reads PATH and exits with its errno, which is returned (100 + errno
/// when the cgroup directory cannot be opened).
pub(super) fn cgroup_clone_into(cgroup: &str, path: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let cg = libc::open(cstr(cgroup).as_ptr(), libc::O_PATH | libc::O_DIRECTORY);
        if cg < 0 {
            return 100 + errno();
        }
        #[repr(C)]
        #[derive(Default)]
        struct CloneArgs {
            flags: u64,
            pidfd: u64,
            child_tid: u64,
            parent_tid: u64,
            exit_signal: u64,
            stack: u64,
            stack_size: u64,
            tls: u64,
            set_tid: u64,
            set_tid_size: u64,
            cgroup: u64,
        }
        const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
        let args = CloneArgs {
            flags: CLONE_INTO_CGROUP,
            exit_signal: libc::SIGCHLD as u64,
            cgroup: cg as u64,
            ..CloneArgs::default()
        };
        let pid = libc::syscall(libc::SYS_clone3, &raw const args, size_of::<CloneArgs>());
        if pid == 0 {
            let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY);
            libc::_exit(if fd < 0 { errno() } else { 0 });
        }
        if pid < 0 {
            return errno();
        }
        let mut status = 0;
        libc::waitpid(pid as i32, &mut status, 0);
        libc::WEXITSTATUS(status)
    }
}

/// The helper action `perf-pid PID`: perf_event_open of a software counter on PID (any CPU).
pub(super) fn perf_pid(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut attr = [0u8; 128];
        attr[0..4].copy_from_slice(&1u32.to_ne_bytes()); // PERF_TYPE_SOFTWARE
        attr[4..8].copy_from_slice(&128u32.to_ne_bytes());
        let pid: i32 = pid.parse().unwrap();
        check(libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            pid,
            -1,
            -1,
            0,
        ))
    }
}

/// The helper action `tiocsti [ctty] TEXT`: push TEXT into the input queue of the terminal on
/// fd 3 with TIOCSTI, byte by byte (as if typed there); with `ctty`, first make it the
/// controlling terminal of a new session (what an unprivileged caller needs).
pub(super) fn tiocsti(args: &[String]) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let arg = |i: usize| args.get(i).map_or("", String::as_str);
        let (ctty, text) = if arg(0) == "ctty" {
            (true, arg(1))
        } else {
            (false, arg(0))
        };
        if ctty && (libc::setsid() < 0 || libc::ioctl(3, libc::TIOCSCTTY, 0) < 0) {
            return 100 + errno();
        }
        for b in text.replace("\\n", "\n").bytes() {
            if libc::ioctl(3, libc::TIOCSTI, &raw const b) < 0 {
                return errno();
            }
        }
        0
    }
}

/// The helper action `prlimit-cpu PID`: lower PID's RLIMIT_CPU to one second (soft and hard).
pub(super) fn prlimit_cpu(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let lim = libc::rlimit {
            rlim_cur: 1,
            rlim_max: 1,
        };
        check(
            libc::prlimit(
                pid.parse().unwrap(),
                libc::RLIMIT_CPU,
                &raw const lim,
                std::ptr::null_mut(),
            )
            .into(),
        )
    }
}

/// The helper action `setpriority PID`.
pub(super) fn setpriority(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe { check(libc::setpriority(libc::PRIO_PROCESS, pid.parse().unwrap(), 19).into()) }
}

/// The helper action `ioprio-idle PID`: the idle I/O class for PID (IOPRIO_WHO_PROCESS).
pub(super) fn ioprio_idle(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        const IOPRIO_CLASS_IDLE: i64 = 3;
        check(libc::syscall(
            libc::SYS_ioprio_set,
            1,
            pid.parse::<i32>().unwrap(),
            IOPRIO_CLASS_IDLE << 13,
        ))
    }
}

/// The helper action `setaffinity PID`: pin PID to CPU 0.
pub(super) fn setaffinity(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        check(
            libc::sched_setaffinity(
                pid.parse().unwrap(),
                size_of::<libc::cpu_set_t>(),
                &raw const set,
            )
            .into(),
        )
    }
}

/// The helper action `kcmp PID`.
pub(super) fn kcmp(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        check(libc::syscall(
            libc::SYS_kcmp,
            libc::getpid(),
            pid.parse::<i32>().unwrap(),
            0, // KCMP_FILE
            0,
            0,
        ))
    }
}

/// The helper action `process-madvise PID`: MADV_COLD on one page of PID through a pidfd.
pub(super) fn process_madvise(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let pfd = libc::syscall(libc::SYS_pidfd_open, pid.parse::<i32>().unwrap(), 0);
        if pfd < 0 {
            return errno();
        }
        let iov = libc::iovec {
            iov_base: 0x1000 as *mut libc::c_void,
            iov_len: 4096,
        };
        check(libc::syscall(
            libc::SYS_process_madvise,
            pfd,
            &raw const iov,
            1,
            libc::MADV_COLD,
            0,
        ))
    }
}

/// The helper action `setns-pidfd PID`: join PID's mount namespace through a pidfd.
pub(super) fn setns_pidfd(pid: &str) -> i32 {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let pfd = libc::syscall(libc::SYS_pidfd_open, pid.parse::<i32>().unwrap(), 0);
        if pfd < 0 {
            return errno();
        }
        check(libc::setns(pfd as i32, libc::CLONE_NEWNS).into())
    }
}
