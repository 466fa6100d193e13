//! The scope's seccomp filter: the gates that bee's LSM programs hold and Landlock does not.
//!
//! A classic BPF program over `struct seccomp_data` (`include/uapi/linux/seccomp.h`), built
//! here because it is small and every instruction of it is a security decision. It kills a
//! process of another architecture, refuses the x32 system call numbers, and returns `EPERM`
//! for what the table lists. A second, smaller filter ([`fallbacks`]) answers `ENOSYS` for
//! `clone3` and `openat2`, whose arguments sit behind a pointer, so that the C library falls
//! back to `clone` and `openat`, whose arguments the first filter reads.
//!
//! The first filter is installed with `SECCOMP_FILTER_FLAG_LOG`: each of its refusals becomes
//! an `AUDIT_SECCOMP` record, which the engine reports ([`refusal`] names the call and says
//! why). The fallbacks are installed without it: they refuse nothing a program notices, and
//! every `fork` of glibc tries `clone3` first. Where filters disagree the kernel takes the
//! strictest action, and logs it only when the filter that returned it asked to.
//!
//! | what | why |
//! |---|---|
//! | `bpf`, `perf_event_open`, the mount family, `keyctl`/`add_key`/`request_key`, `syslog`, module and `kexec` loading, `io_uring_*` | refused outright by the LSM programs too (`io_uring` would bypass this filter) |
//! | `clone`/`unshare` with `CLONE_NEWUSER`, `clone3` | no user namespace (`userns_create`); `clone3`'s flags sit behind a pointer |
//! | `socket` but `AF_INET`/`AF_INET6` TCP and `AF_NETLINK` `NETLINK_ROUTE` | Landlock decides TCP only; no unix, raw, packet or other sockets |
//! | `socketpair` but `AF_UNIX` stream and seqpacket pairs | a datagram socket of a pair could send to any pathname socket |
//! | `listen`, `accept`, `accept4` | a listening socket would take connections no rule names |
//! | `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN` | a TCP Fast Open connect that Landlock's connect hook does not see |
//! | `ioctl` `TIOCSTI`, `TIOCLINUX`, `TIOCCONS`, `FIFREEZE`, `FITHAW`, `FS_IOC_SETFLAGS`, `FS_IOC_FSSETXATTR` | terminal input injection, console redirection, freezing a file system, `chattr` |
//! | `inotify_add_watch`, `fanotify_init`, `fanotify_mark` | Landlock does not check what is watched |
//! | `memfd_create`, where the kernel has no `vm.memfd_noexec` (before 6.3) | Landlock lets kernel-internal files through, so a memfd could be executed |

pub mod refusal;

/// One classic BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
#[derive(Debug)]
pub struct SockFprog {
    /// Instruction count.
    pub len: u16,
    /// The instructions.
    pub filter: *const SockFilter,
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;
const BPF_ALU_AND_K: u16 = 0x54;

const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// `AUDIT_ARCH_X86_64`.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
/// `AUDIT_ARCH_AARCH64`.
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;
/// `__X32_SYSCALL_BIT`.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// The low 32 bits of argument `i` (little endian).
const fn arg(i: u32) -> u32 {
    16 + 8 * i
}

const CLONE_NEWUSER: u32 = 0x1000_0000;
/// `S_ISUID | S_ISGID`: a file the scope marks so would run with its owner's (or group's)
/// identity when a user outside the scope runs it, after the call.
const SET_ID_BITS: u32 = 0o6000;
/// `LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF | LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF`:
/// a process of the scope would silence the engine's denial reports.
const LANDLOCK_LOG_OFF: u32 = (1 << 0) | (1 << 2);
/// `file_setattr(2)` (Linux 6.17): the inode flags `FS_IOC_SETFLAGS` changes, by a system call.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SYS_FILE_SETATTR: libc::c_long = 469;
const MSG_FASTOPEN: u32 = 0x2000_0000;
const SOCK_TYPE_MASK: u32 = 0xf;

/// `ioctl` requests refused whatever the descriptor (`include/uapi/asm-generic/ioctls.h`,
/// `include/uapi/linux/fs.h`).
const IOCTLS: &[u32] = &[
    0x5412,      // TIOCSTI
    0x541C,      // TIOCLINUX
    0x541D,      // TIOCCONS
    0xC004_5877, // FIFREEZE
    0xC004_5878, // FITHAW
    0x4008_6602, // FS_IOC_SETFLAGS
    0x4004_6602, // FS_IOC32_SETFLAGS
    0x401C_5820, // FS_IOC_FSSETXATTR
];

/// System calls refused whatever their arguments.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_syslog,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_listen,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_inotify_add_watch,
    libc::SYS_fanotify_init,
    libc::SYS_fanotify_mark,
    libc::SYS_acct,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    SYS_FILE_SETATTR,
];

/// System calls whose mode argument (by index) may not carry [`SET_ID_BITS`]: the `chmod`
/// family, and the creations that take a mode (`mknod` with `S_IFREG`, `creat`).
const MODE_ARGS: &[(libc::c_long, u32)] = &[
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
    (libc::SYS_creat, 1),
];

/// `open` and `openat`: (number, flags argument, mode argument). The mode means something
/// only with `O_CREAT` or `O_TMPFILE`; without them it may hold anything. `openat2`'s flags
/// and mode are in a structure a filter cannot read, so it answers `ENOSYS` (see [`filter`]).
const OPEN_ARGS: &[(libc::c_long, u32, u32)] = &[(libc::SYS_open, 1, 2), (libc::SYS_openat, 2, 3)];

/// `O_CREAT | __O_TMPFILE`: the flags with which `open` reads its mode.
const OPEN_CREATES: u32 = 0o100 | 0o2000_0000;

/// Builds the program as straight-line checks: each check loads what it tests, so no check
/// depends on the accumulator another left behind.
#[derive(Debug, Default)]
struct Builder {
    prog: Vec<SockFilter>,
}

impl Builder {
    fn op(&mut self, code: u16, k: u32, jt: u8, jf: u8) {
        self.prog.push(SockFilter { code, jt, jf, k });
    }
    fn load(&mut self, off: u32) {
        self.op(BPF_LD_W_ABS, off, 0, 0);
    }
    fn ret(&mut self, action: u32) {
        self.op(BPF_RET_K, action, 0, 0);
    }
    /// Returns `action` when argument `index` has any bit of `mask`, and allows the call
    /// otherwise: the body of a check on flags or a mode.
    fn refuse_bits(&mut self, index: u32, mask: u32, action: u32) {
        self.load(arg(index));
        self.op(BPF_JSET_K, mask, 0, 1);
        self.ret(action);
        self.ret(SECCOMP_RET_ALLOW);
    }
    /// `if nr == sysno { body } ` where `body` ends in a return on every path.
    fn on_syscall(&mut self, sysno: libc::c_long, body: impl FnOnce(&mut Self)) {
        let mut inner = Self::default();
        body(&mut inner);
        self.load(OFF_NR);
        // Skip the body unless the number matches.
        let skip = u8::try_from(inner.prog.len()).unwrap_or(u8::MAX);
        self.op(BPF_JEQ_K, sysno as u32, 0, skip);
        self.prog.extend(inner.prog);
    }
}

fn errno(e: i32) -> u32 {
    SECCOMP_RET_ERRNO | (e as u32 & 0xffff)
}

/// The second filter: `ENOSYS` for `clone3` and `openat2`, which the first filter cannot
/// read the arguments of (`clone3`'s flags, `openat2`'s mode, sit in a structure), so that
/// callers fall back to `clone` and `openat`; everything else is left to the first filter.
/// Installed without `SECCOMP_FILTER_FLAG_LOG`: these answers are not refusals to report.
pub fn fallbacks() -> Vec<SockFilter> {
    let mut b = Builder::default();
    b.on_syscall(libc::SYS_clone3, |b| b.ret(errno(libc::ENOSYS)));
    b.on_syscall(libc::SYS_openat2, |b| b.ret(errno(libc::ENOSYS)));
    b.ret(SECCOMP_RET_ALLOW);
    b.prog
}

/// Which IP sockets a scope may make: only those some layer decides the peers of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sockets {
    /// TCP (`SOCK_STREAM`, protocol 0 or `IPPROTO_TCP`): where Landlock decides their
    /// connections (network rules, ABI 4) or the network gate does.
    pub tcp: bool,
    /// UDP (`SOCK_DGRAM`, protocol 0 or `IPPROTO_UDP`): only where the network gate decides
    /// their peers (Landlock does not restrict UDP).
    pub udp: bool,
}

/// The filter. `sockets` says which IP sockets may be made; `no_memfd` refuses
/// `memfd_create` (kernels without `vm.memfd_noexec`, where a memfd could be executed).
///
/// Set-user-ID and set-group-ID bits are refused wherever a mode is given: a file the scope
/// marks so would run with its owner's identity (root's, for bee as root) when someone outside
/// the scope runs it later. `openat2` carries its mode in a structure a filter cannot read, so
/// it answers `ENOSYS` ([`fallbacks`]), as on a kernel without it: callers fall back to
/// `openat` (the kernel would keep a set-user-ID bit of a new file even for a creator without
/// `CAP_FSETID`).
pub fn filter(sockets: Sockets, no_memfd: bool) -> Vec<SockFilter> {
    let eperm = errno(libc::EPERM);
    let mut b = Builder::default();
    b.load(OFF_ARCH);
    b.op(BPF_JEQ_K, AUDIT_ARCH, 1, 0);
    b.ret(SECCOMP_RET_KILL_PROCESS);
    b.load(OFF_NR);
    b.op(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1);
    b.ret(eperm);
    for &nr in REFUSED {
        b.on_syscall(nr, |b| b.ret(eperm));
    }
    if no_memfd {
        b.on_syscall(libc::SYS_memfd_create, |b| b.ret(eperm));
    }
    for &(nr, mode) in MODE_ARGS {
        b.on_syscall(nr, |b| b.refuse_bits(mode, SET_ID_BITS, eperm));
    }
    for &(nr, flags, mode) in OPEN_ARGS {
        b.on_syscall(nr, |b| {
            b.load(arg(flags));
            b.op(BPF_JSET_K, OPEN_CREATES, 1, 0);
            b.ret(SECCOMP_RET_ALLOW);
            b.refuse_bits(mode, SET_ID_BITS, eperm);
        });
    }
    b.on_syscall(libc::SYS_landlock_restrict_self, |b| {
        b.refuse_bits(1, LANDLOCK_LOG_OFF, eperm);
    });
    for nr in [libc::SYS_clone, libc::SYS_unshare] {
        b.on_syscall(nr, |b| b.refuse_bits(0, CLONE_NEWUSER, eperm));
    }
    b.on_syscall(libc::SYS_socket, |b| {
        // AF_NETLINK: NETLINK_ROUTE (0) only.
        b.load(arg(0));
        b.op(BPF_JEQ_K, libc::AF_NETLINK as u32, 0, 3);
        b.load(arg(2));
        b.op(BPF_JEQ_K, 0, 1, 0);
        b.ret(eperm);
        // (falls through to the allow below on protocol 0)
        b.load(arg(0));
        b.op(BPF_JEQ_K, libc::AF_NETLINK as u32, 0, 1);
        b.ret(SECCOMP_RET_ALLOW);
        let kinds: Vec<(u32, u32)> = [
            (
                sockets.tcp,
                libc::SOCK_STREAM as u32,
                libc::IPPROTO_TCP as u32,
            ),
            (
                sockets.udp,
                libc::SOCK_DGRAM as u32,
                libc::IPPROTO_UDP as u32,
            ),
        ]
        .into_iter()
        .filter_map(|(on, kind, proto)| on.then_some((kind, proto)))
        .collect();
        if kinds.is_empty() {
            b.ret(eperm);
            return;
        }
        // AF_INET, AF_INET6: each allowed type with protocol 0 or its own. Each block is six
        // instructions and ends in a return, so the type in A survives the blocks skipped.
        const BLOCK: u8 = 6;
        let blocks = u8::try_from(kinds.len()).unwrap_or(u8::MAX);
        b.load(arg(0));
        b.op(BPF_JEQ_K, libc::AF_INET as u32, 1, 0);
        b.op(BPF_JEQ_K, libc::AF_INET6 as u32, 0, 2 + BLOCK * blocks);
        b.load(arg(1));
        b.op(BPF_ALU_AND_K, SOCK_TYPE_MASK, 0, 0);
        for (kind, proto) in kinds {
            b.op(BPF_JEQ_K, kind, 0, BLOCK - 1);
            b.load(arg(2));
            b.op(BPF_JEQ_K, 0, 2, 0);
            b.op(BPF_JEQ_K, proto, 1, 0);
            b.ret(eperm);
            b.ret(SECCOMP_RET_ALLOW);
        }
        b.ret(eperm);
    });
    // A connected pair only: a datagram socket of a pair could still send to (or connect
    // to) any pathname socket, which Landlock does not check before ABI 9.
    b.on_syscall(libc::SYS_socketpair, |b| {
        b.load(arg(0));
        b.op(BPF_JEQ_K, libc::AF_UNIX as u32, 0, 5);
        b.load(arg(1));
        b.op(BPF_ALU_AND_K, SOCK_TYPE_MASK, 0, 0);
        b.op(BPF_JEQ_K, libc::SOCK_STREAM as u32, 1, 0);
        b.op(BPF_JEQ_K, libc::SOCK_SEQPACKET as u32, 0, 1);
        b.ret(SECCOMP_RET_ALLOW);
        b.ret(eperm);
    });
    for (nr, flags) in [
        (libc::SYS_sendto, 3),
        (libc::SYS_sendmsg, 2),
        (libc::SYS_sendmmsg, 3),
    ] {
        b.on_syscall(nr, |b| b.refuse_bits(flags, MSG_FASTOPEN, eperm));
    }
    b.on_syscall(libc::SYS_ioctl, |b| {
        b.load(arg(1));
        for (i, &req) in IOCTLS.iter().enumerate() {
            // On a match jump to the EPERM after the list.
            let to_deny = u8::try_from(IOCTLS.len() - i).unwrap_or(u8::MAX);
            b.op(BPF_JEQ_K, req, to_deny, 0);
        }
        b.ret(SECCOMP_RET_ALLOW);
        b.ret(eperm);
    });
    b.ret(SECCOMP_RET_ALLOW);
    b.prog
}

#[cfg(test)]
mod tests;
