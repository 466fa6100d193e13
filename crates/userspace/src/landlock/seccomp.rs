//! The scope's seccomp filter: the gates that bee's LSM programs hold and Landlock does not.
//!
//! Its length is its tests: the filter is about 350 lines.
//!
//! A classic BPF program over `struct seccomp_data` (`include/uapi/linux/seccomp.h`), built
//! here because it is small and every instruction of it is a security decision. It kills a
//! process of another architecture, answers `ENOSYS` for `clone3` and `openat2` itself (as a
//! kernel without them would: the C library falls back to `clone` and `openat`, whose
//! arguments the filter can read), and refuses with `EPERM` the x32 system call numbers and:
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
//! | `seccomp` with `SECCOMP_FILTER_FLAG_NEW_LISTENER` | a listener of the scope's own, once bee's is gone, could let a refused call through (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`) |
//!
//! A refusal is not answered by the filter: it returns `SECCOMP_RET_USER_NOTIF`, and the
//! listener the launched child made with it (`SECCOMP_FILTER_FLAG_NEW_LISTENER`), held by the
//! engine, answers `EPERM` and reports the call ([`notify`]). Where that listener is gone the
//! kernel answers `ENOSYS` instead: the call is refused either way, and the refusal is then
//! not reported. `clone3` and `openat2` are not refusals but the answer of a kernel without
//! them, made for every thread and file the C library starts or opens: they stay in the
//! filter, unreported.

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
/// `BPF_JMP | BPF_JA`: an unconditional jump by `k` (32 bits: the conditional jumps' offsets
/// are 8).
const BPF_JA: u16 = 0x05;
const BPF_ALU_AND_K: u16 = 0x54;

pub mod call;
pub mod notify;

const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// `SECCOMP_RET_USER_NOTIF` (Linux 5.0): the call waits for the listener's answer.
const SECCOMP_RET_USER_NOTIF: u32 = libc::SECCOMP_RET_USER_NOTIF;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// The errno the engine answers every refusal the listener is told of with.
pub const REFUSED_ERRNO: i32 = libc::EPERM;
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER` as the filter reads it (the low half of `seccomp(2)`'s
/// flags argument).
const NEW_LISTENER: u32 = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as u32;
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
/// `open_tree_attr(2)` (Linux 6.15): `open_tree` that also sets the new mount's attributes,
/// one of the mount family; the `libc` crate does not name it yet.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;
const MSG_FASTOPEN: u32 = 0x2000_0000;
const SOCK_TYPE_MASK: u32 = 0xf;

/// `ioctl` requests refused whatever the descriptor, with their names
/// (`include/uapi/asm-generic/ioctls.h`, `include/uapi/linux/fs.h`).
const IOCTLS: &[(u32, &str)] = &[
    (0x5412, "TIOCSTI"),
    (0x541C, "TIOCLINUX"),
    (0x541D, "TIOCCONS"),
    (0xC004_5877, "FIFREEZE"),
    (0xC004_5878, "FITHAW"),
    (0x4008_6602, "FS_IOC_SETFLAGS"),
    (0x4004_6602, "FS_IOC32_SETFLAGS"),
    (0x401C_5820, "FS_IOC_FSSETXATTR"),
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
    SYS_OPEN_TREE_ATTR,
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

/// Builds the program: each check loads what it tests, so no check depends on the
/// accumulator another left behind, and the checks are entered by number
/// ([`Builder::dispatch`]).
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

    /// Sets the offset of the jump at `at` so that it lands on the next instruction to be
    /// added.
    fn land_here(&mut self, at: usize) {
        let offset = u32::try_from(self.prog.len() - at - 1).unwrap_or(u32::MAX);
        if let Some(jump) = self.prog.get_mut(at) {
            jump.k = offset;
        }
    }

    /// Each check's body, entered by a binary search on the system call number: one `JGE`
    /// (and a jump) per level, then a `JEQ` per number at a leaf; a number no check names is
    /// allowed at its leaf. The kernel runs the filter on every call whose answer depends on
    /// its arguments, and on every number when the filter is installed (to cache the calls it
    /// always allows, `seccomp_cache_prepare`): a chain of one `JEQ` per check made both walk
    /// every check before the body, about 120 instructions, where the search walks about 12.
    /// A body of one instruction (a return) is placed at its leaf; the others after the
    /// search, each entered by a jump. `checks` must name each number once, in ascending
    /// order ([`Checks::sorted`]).
    fn dispatch(&mut self, checks: &[(u32, Vec<SockFilter>)]) {
        let mut to_body = Vec::new();
        self.load(OFF_NR);
        self.search(checks, &mut to_body);
        for (at, body) in to_body {
            self.land_here(at);
            self.prog.extend_from_slice(body);
        }
    }

    /// The search over `checks` (by the system call number in the accumulator); each jump to
    /// a body placed after the search is pushed onto `to_body` with that body, in order.
    fn search<'c>(
        &mut self,
        checks: &'c [(u32, Vec<SockFilter>)],
        to_body: &mut Vec<(usize, &'c [SockFilter])>,
    ) {
        /// Numbers compared one by one at a leaf.
        const LEAF: usize = 3;
        if checks.len() <= LEAF {
            for (nr, body) in checks {
                self.op(BPF_JEQ_K, *nr, 0, 1);
                match body.as_slice() {
                    [ret] => self.prog.push(*ret),
                    body => {
                        to_body.push((self.prog.len(), body));
                        self.op(BPF_JA, 0, 0, 0);
                    }
                }
            }
            self.ret(SECCOMP_RET_ALLOW);
            return;
        }
        let (below, from) = checks.split_at(checks.len() / 2);
        let pivot = from.first().map_or(u32::MAX, |(nr, _)| *nr);
        // At or above the pivot: the jump over the lower half; below: into it.
        self.op(BPF_JGE_K, pivot, 0, 1);
        let to_upper = self.prog.len();
        self.op(BPF_JA, 0, 0, 0);
        self.search(below, to_body);
        self.land_here(to_upper);
        self.search(from, to_body);
    }
}

/// The system calls a filter decides by more than being named: each one's number and the body
/// that decides it (a return on every path; its jumps stay within it, and it loads what it
/// tests, so it does not depend on how it was entered).
#[derive(Debug, Default)]
struct Checks {
    by_number: Vec<(u32, Vec<SockFilter>)>,
}

impl Checks {
    /// `sysno`'s check is `body`.
    fn on(&mut self, sysno: libc::c_long, body: impl FnOnce(&mut Builder)) {
        let mut b = Builder::default();
        body(&mut b);
        self.by_number.push((sysno as u32, b.prog));
    }

    /// The checks by ascending number; `None` when one number has two (the second could
    /// never be entered).
    fn sorted(mut self) -> Option<Vec<(u32, Vec<SockFilter>)>> {
        self.by_number.sort_by_key(|(nr, _)| *nr);
        self.by_number
            .windows(2)
            .all(|w| matches!(w, [a, b] if a.0 < b.0))
            .then_some(self.by_number)
    }
}

fn errno(e: i32) -> u32 {
    SECCOMP_RET_ERRNO | (e as u32 & 0xffff)
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
/// it answers `ENOSYS`, as on a kernel without it: callers fall back to `openat` (the kernel
/// would keep a set-user-ID bit of a new file even for a creator without `CAP_FSETID`).
///
/// Every refusal returns `SECCOMP_RET_USER_NOTIF`, for the listener to answer
/// ([`REFUSED_ERRNO`]) and report; only `clone3` and `openat2` are answered here (`ENOSYS`).
pub fn filter(sockets: Sockets, no_memfd: bool) -> Vec<SockFilter> {
    let mut b = header();
    match checks(sockets, no_memfd).sorted() {
        Some(checks) => b.dispatch(&checks),
        // No two checks share a number (a test holds the filter to that); were one named
        // twice, every call would be refused rather than a check be skipped.
        None => b.ret(SECCOMP_RET_USER_NOTIF),
    }
    b.prog
}

/// What the filter does before it looks at the system call: it kills a process of another
/// architecture, and refuses the x32 numbers.
fn header() -> Builder {
    let mut b = Builder::default();
    b.load(OFF_ARCH);
    b.op(BPF_JEQ_K, AUDIT_ARCH, 1, 0);
    b.ret(SECCOMP_RET_KILL_PROCESS);
    b.load(OFF_NR);
    b.op(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1);
    b.ret(SECCOMP_RET_USER_NOTIF);
    b
}

/// The checks of [`filter`], one per system call it looks at.
fn checks(sockets: Sockets, no_memfd: bool) -> Checks {
    let refuse = SECCOMP_RET_USER_NOTIF;
    let mut c = Checks::default();
    for &nr in REFUSED {
        c.on(nr, |b| b.ret(refuse));
    }
    if no_memfd {
        c.on(libc::SYS_memfd_create, |b| b.ret(refuse));
    }
    c.on(libc::SYS_clone3, |b| b.ret(errno(libc::ENOSYS)));
    c.on(libc::SYS_openat2, |b| b.ret(errno(libc::ENOSYS)));
    for &(nr, mode) in MODE_ARGS {
        c.on(nr, |b| b.refuse_bits(mode, SET_ID_BITS, refuse));
    }
    for &(nr, flags, mode) in OPEN_ARGS {
        c.on(nr, |b| {
            b.load(arg(flags));
            b.op(BPF_JSET_K, OPEN_CREATES, 1, 0);
            b.ret(SECCOMP_RET_ALLOW);
            b.refuse_bits(mode, SET_ID_BITS, refuse);
        });
    }
    c.on(libc::SYS_landlock_restrict_self, |b| {
        b.refuse_bits(1, LANDLOCK_LOG_OFF, refuse);
    });
    c.on(libc::SYS_seccomp, |b| {
        b.refuse_bits(1, NEW_LISTENER, refuse)
    });
    for nr in [libc::SYS_clone, libc::SYS_unshare] {
        c.on(nr, |b| b.refuse_bits(0, CLONE_NEWUSER, refuse));
    }
    c.on(libc::SYS_socket, |b| {
        // AF_NETLINK: NETLINK_ROUTE (0) only.
        b.load(arg(0));
        b.op(BPF_JEQ_K, libc::AF_NETLINK as u32, 0, 3);
        b.load(arg(2));
        b.op(BPF_JEQ_K, 0, 1, 0);
        b.ret(refuse);
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
            b.ret(refuse);
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
            b.ret(refuse);
            b.ret(SECCOMP_RET_ALLOW);
        }
        b.ret(refuse);
    });
    // A connected pair only: a datagram socket of a pair could still send to (or connect
    // to) any pathname socket, which Landlock does not check before ABI 9.
    c.on(libc::SYS_socketpair, |b| {
        b.load(arg(0));
        b.op(BPF_JEQ_K, libc::AF_UNIX as u32, 0, 5);
        b.load(arg(1));
        b.op(BPF_ALU_AND_K, SOCK_TYPE_MASK, 0, 0);
        b.op(BPF_JEQ_K, libc::SOCK_STREAM as u32, 1, 0);
        b.op(BPF_JEQ_K, libc::SOCK_SEQPACKET as u32, 0, 1);
        b.ret(SECCOMP_RET_ALLOW);
        b.ret(refuse);
    });
    for (nr, flags) in [
        (libc::SYS_sendto, 3),
        (libc::SYS_sendmsg, 2),
        (libc::SYS_sendmmsg, 3),
    ] {
        c.on(nr, |b| b.refuse_bits(flags, MSG_FASTOPEN, refuse));
    }
    c.on(libc::SYS_ioctl, |b| {
        b.load(arg(1));
        for (i, &(req, _)) in IOCTLS.iter().enumerate() {
            // On a match jump to the EPERM after the list.
            let to_deny = u8::try_from(IOCTLS.len() - i).unwrap_or(u8::MAX);
            b.op(BPF_JEQ_K, req, to_deny, 0);
        }
        b.ret(SECCOMP_RET_ALLOW);
        b.ret(refuse);
    });
    c
}

/// The filter of [`notify::probe`]: `getppid` with argument 0 equal to `magic` returns
/// `SECCOMP_RET_USER_NOTIF`, as the scope's filter does for what it refuses; every other call
/// is allowed.
fn probe_filter(magic: u32) -> Vec<SockFilter> {
    let mut b = Builder::default();
    b.on_syscall(libc::SYS_getppid, |b| {
        b.load(arg(0));
        b.op(BPF_JEQ_K, magic, 0, 1);
        b.ret(SECCOMP_RET_USER_NOTIF);
        b.ret(SECCOMP_RET_ALLOW);
    });
    b.ret(SECCOMP_RET_ALLOW);
    b.prog
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: Sockets = Sockets {
        tcp: true,
        udp: false,
    };

    /// Runs `prog` on a `seccomp_data` the way the kernel's classic BPF interpreter does, for
    /// the instructions the builder emits.
    fn run(prog: &[SockFilter], nr: u32, args: [u32; 6]) -> u32 {
        walk(prog, nr, args).0
    }

    /// [`run`]'s answer, and how many instructions it took.
    fn walk(prog: &[SockFilter], nr: u32, args: [u32; 6]) -> (u32, usize) {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&AUDIT_ARCH.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            let off = 16 + 8 * i;
            data[off..off + 4].copy_from_slice(&a.to_le_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        for steps in 1.. {
            let ins = prog[pc];
            pc += 1;
            match ins.code {
                BPF_LD_W_ABS => {
                    let o = ins.k as usize;
                    acc = u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
                }
                BPF_ALU_AND_K => acc &= ins.k,
                BPF_RET_K => return (ins.k, steps),
                BPF_JA => pc += ins.k as usize,
                BPF_JEQ_K | BPF_JGE_K | BPF_JSET_K => {
                    let taken = match ins.code {
                        BPF_JEQ_K => acc == ins.k,
                        BPF_JGE_K => acc >= ins.k,
                        _ => acc & ins.k != 0,
                    };
                    pc += usize::from(if taken { ins.jt } else { ins.jf });
                }
                other => unreachable!("unknown opcode {other:#x}"),
            }
        }
        unreachable!("a filter returns")
    }

    /// [`filter`] as it was first built: each check entered from a chain of one `JEQ` per
    /// system call, tried in turn, then the allow. The search is held to it.
    fn chained(sockets: Sockets, no_memfd: bool) -> Vec<SockFilter> {
        let mut b = header();
        for (nr, body) in checks(sockets, no_memfd).by_number {
            b.load(OFF_NR);
            b.op(BPF_JEQ_K, nr, 0, u8::try_from(body.len()).unwrap());
            b.prog.extend(body);
        }
        b.ret(SECCOMP_RET_ALLOW);
        b.prog
    }

    /// Every combination of the scope's sockets and memfd refusal.
    fn variants() -> Vec<(Sockets, bool)> {
        let mut all = Vec::new();
        for (tcp, udp, no_memfd) in (0..8).map(|i| (i & 1 != 0, i & 2 != 0, i & 4 != 0)) {
            all.push((Sockets { tcp, udp }, no_memfd));
        }
        all
    }

    #[test]
    fn the_search_decides_every_call_as_the_chain_of_checks_does() {
        // The values the checks test for, and their neighbours.
        let mut values: Vec<u32> = vec![0, 1, 2, 3, 4, 5, 6, 9, 10, 17, 58, 136, 262, u32::MAX];
        values.extend([
            CLONE_NEWUSER,
            CLONE_NEWUSER | 0x11,
            0o4755,
            0o2755,
            0o755,
            0o644,
        ]);
        values.extend([
            0o100,
            OPEN_CREATES,
            0o2000_0000 | 2,
            NEW_LISTENER,
            NEW_LISTENER | 2,
        ]);
        values.extend([
            MSG_FASTOPEN,
            MSG_FASTOPEN | 0x40,
            0x5401,
            0x80_000 | 1,
            0x800 | 2,
        ]);
        values.extend(IOCTLS.iter().map(|&(req, _)| req));
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut pick = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            values[(seed % values.len() as u64) as usize]
        };
        let mut numbers: Vec<u32> = (0..=600).collect();
        numbers.extend([
            X32_SYSCALL_BIT - 1,
            X32_SYSCALL_BIT,
            X32_SYSCALL_BIT | 1,
            u32::MAX,
        ]);
        for (sockets, no_memfd) in variants() {
            let (search, chain) = (filter(sockets, no_memfd), chained(sockets, no_memfd));
            let named: Vec<u32> = checks(sockets, no_memfd)
                .by_number
                .iter()
                .map(|(nr, _)| *nr)
                .collect();
            for &nr in &numbers {
                let tries = if named.contains(&nr) { 2000 } else { 20 };
                for _ in 0..tries {
                    let args = [pick(), pick(), pick(), pick(), pick(), pick()];
                    assert_eq!(
                        run(&search, nr, args),
                        run(&chain, nr, args),
                        "{sockets:?} memfd refused {no_memfd}: call {nr} {args:x?}"
                    );
                }
            }
        }
    }

    #[test]
    fn no_two_checks_name_one_number_and_the_filter_ends_in_a_return() {
        for (sockets, no_memfd) in variants() {
            assert!(checks(sockets, no_memfd).sorted().is_some());
            let p = filter(sockets, no_memfd);
            // The kernel refuses a classic program whose last instruction is not a return.
            assert_eq!(p.last().map(|i| i.code), Some(BPF_RET_K));
            assert!(p.len() < usize::from(u16::MAX));
        }
        let mut twice = checks(TCP, false);
        twice.on(libc::SYS_ioctl, |b| b.ret(SECCOMP_RET_ALLOW));
        assert!(twice.sorted().is_none());
    }

    #[test]
    fn a_call_is_found_within_a_few_instructions() {
        let (search, chain) = (filter(TCP, true), chained(TCP, true));
        for nr in 0..=600 {
            let (_, found) = walk(&search, nr, [0; 6]);
            // The header (6), the search (2 per level over about 60 checks, 3 at a leaf),
            // and a body's first steps.
            assert!(found <= 24, "call {nr}: {found} instructions");
        }
        // `read` is named by no check: the chain walked every one of them.
        let read = nr(libc::SYS_read);
        assert!(walk(&chain, read, [0; 6]).1 > 100);
        assert!(walk(&search, read, [0; 6]).1 <= 20);
    }

    /// A refusal: the listener answers it.
    const NOTIFY: u32 = SECCOMP_RET_USER_NOTIF;

    fn nr(n: libc::c_long) -> u32 {
        n as u32
    }

    #[test]
    fn refuses_the_gates_and_allows_the_rest() {
        let p = filter(TCP, false);
        assert_eq!(run(&p, nr(libc::SYS_bpf), [0; 6]), NOTIFY);
        assert_eq!(run(&p, nr(libc::SYS_mount), [0; 6]), NOTIFY);
        assert_eq!(run(&p, nr(libc::SYS_io_uring_setup), [0; 6]), NOTIFY);
        assert_eq!(run(&p, nr(libc::SYS_listen), [0; 6]), NOTIFY);
        assert_eq!(
            run(&p, nr(libc::SYS_clone3), [0; 6]),
            SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(run(&p, nr(libc::SYS_read), [0; 6]), SECCOMP_RET_ALLOW);
        assert_eq!(run(&p, nr(libc::SYS_openat), [0; 6]), SECCOMP_RET_ALLOW);
        assert_eq!(
            run(&p, nr(libc::SYS_read) | X32_SYSCALL_BIT, [0; 6]),
            NOTIFY
        );
    }

    #[test]
    fn clone_and_unshare_may_not_make_a_user_namespace() {
        let p = filter(TCP, false);
        for n in [libc::SYS_clone, libc::SYS_unshare] {
            assert_eq!(run(&p, nr(n), [CLONE_NEWUSER, 0, 0, 0, 0, 0]), NOTIFY);
            assert_eq!(
                run(&p, nr(n), [libc::CLONE_FILES as u32, 0, 0, 0, 0, 0]),
                SECCOMP_RET_ALLOW
            );
        }
    }

    #[test]
    fn set_id_bits_and_silenced_reports_are_refused() {
        let p = filter(TCP, false);
        for (n, at) in [
            (libc::SYS_chmod, 1),
            (libc::SYS_fchmod, 1),
            (libc::SYS_fchmodat, 2),
            (libc::SYS_fchmodat2, 2),
            (libc::SYS_mknodat, 2),
        ] {
            let mut args = [0u32; 6];
            for (mode, want) in [
                (0o4755, NOTIFY),
                (0o2755, NOTIFY),
                (0o755, SECCOMP_RET_ALLOW),
            ] {
                args[at] = mode;
                assert_eq!(run(&p, nr(n), args), want, "{n} {mode:o}");
            }
        }
        // openat: the mode counts only with O_CREAT (or O_TMPFILE).
        assert_eq!(
            run(&p, nr(libc::SYS_openat), [0, 0, 0o100, 0o4755, 0, 0]),
            NOTIFY
        );
        assert_eq!(
            run(&p, nr(libc::SYS_openat), [0, 0, 0o100, 0o644, 0, 0]),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(&p, nr(libc::SYS_openat), [0, 0, 0, 0o4755, 0, 0]),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(run(&p, nr(SYS_FILE_SETATTR), [0; 6]), NOTIFY);
        assert_eq!(run(&p, nr(SYS_OPEN_TREE_ATTR), [0; 6]), NOTIFY);
        assert_eq!(
            run(&p, nr(libc::SYS_openat2), [0; 6]),
            SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        let restrict = nr(libc::SYS_landlock_restrict_self);
        assert_eq!(run(&p, restrict, [3, 1, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, restrict, [u32::MAX, 4, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, restrict, [3, 0, 0, 0, 0, 0]), SECCOMP_RET_ALLOW);
    }

    #[test]
    fn a_gated_scope_may_also_make_udp_sockets_and_nothing_else_more() {
        for sockets in [
            Sockets {
                tcp: true,
                udp: true,
            },
            Sockets {
                tcp: false,
                udp: true,
            },
        ] {
            let p = filter(sockets, false);
            let sock = |d: i32, t: i32, pr: i32| {
                run(
                    &p,
                    nr(libc::SYS_socket),
                    [d as u32, t as u32, pr as u32, 0, 0, 0],
                )
            };
            let tcp = if sockets.tcp {
                SECCOMP_RET_ALLOW
            } else {
                NOTIFY
            };
            for family in [libc::AF_INET, libc::AF_INET6] {
                assert_eq!(sock(family, libc::SOCK_DGRAM, 0), SECCOMP_RET_ALLOW);
                assert_eq!(
                    sock(
                        family,
                        libc::SOCK_DGRAM | libc::SOCK_NONBLOCK,
                        libc::IPPROTO_UDP
                    ),
                    SECCOMP_RET_ALLOW
                );
                assert_eq!(sock(family, libc::SOCK_STREAM, 0), tcp);
                assert_eq!(sock(family, libc::SOCK_STREAM, libc::IPPROTO_TCP), tcp);
                // ICMP echo, UDP-Lite, SCTP, MPTCP, raw: never.
                assert_eq!(sock(family, libc::SOCK_DGRAM, libc::IPPROTO_ICMP), NOTIFY);
                assert_eq!(sock(family, libc::SOCK_DGRAM, libc::IPPROTO_ICMPV6), NOTIFY);
                assert_eq!(
                    sock(family, libc::SOCK_DGRAM, libc::IPPROTO_UDPLITE),
                    NOTIFY
                );
                assert_eq!(sock(family, libc::SOCK_DGRAM, libc::IPPROTO_TCP), NOTIFY);
                assert_eq!(sock(family, libc::SOCK_STREAM, libc::IPPROTO_UDP), NOTIFY);
                assert_eq!(sock(family, libc::SOCK_STREAM, 262), NOTIFY);
                assert_eq!(sock(family, libc::SOCK_SEQPACKET, 0), NOTIFY);
                assert_eq!(sock(family, libc::SOCK_RAW, libc::IPPROTO_UDP), NOTIFY);
            }
            assert_eq!(sock(libc::AF_UNIX, libc::SOCK_DGRAM, 0), NOTIFY);
            assert_eq!(sock(libc::AF_PACKET, libc::SOCK_DGRAM, 0), NOTIFY);
            assert_eq!(
                sock(libc::AF_NETLINK, libc::SOCK_DGRAM, 0),
                SECCOMP_RET_ALLOW
            );
        }
    }

    #[test]
    fn sockets_are_tcp_and_route_netlink_only() {
        let p = filter(TCP, false);
        let sock = |d: i32, t: i32, pr: i32| {
            run(
                &p,
                nr(libc::SYS_socket),
                [d as u32, t as u32, pr as u32, 0, 0, 0],
            )
        };
        assert_eq!(sock(libc::AF_INET, libc::SOCK_STREAM, 0), SECCOMP_RET_ALLOW);
        assert_eq!(
            sock(
                libc::AF_INET6,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                libc::IPPROTO_TCP
            ),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(sock(libc::AF_INET, libc::SOCK_DGRAM, 0), NOTIFY);
        assert_eq!(sock(libc::AF_INET, libc::SOCK_RAW, 1), NOTIFY);
        assert_eq!(sock(libc::AF_INET, libc::SOCK_STREAM, 262), NOTIFY); // MPTCP
        assert_eq!(sock(libc::AF_UNIX, libc::SOCK_STREAM, 0), NOTIFY);
        assert_eq!(sock(libc::AF_PACKET, libc::SOCK_RAW, 0), NOTIFY);
        assert_eq!(sock(libc::AF_NETLINK, libc::SOCK_RAW, 0), SECCOMP_RET_ALLOW);
        assert_eq!(sock(libc::AF_NETLINK, libc::SOCK_RAW, 9), NOTIFY); // NETLINK_AUDIT
        let no_tcp = filter(Sockets::default(), false);
        assert_eq!(
            run(
                &no_tcp,
                nr(libc::SYS_socket),
                [libc::AF_INET as u32, libc::SOCK_STREAM as u32, 0, 0, 0, 0]
            ),
            NOTIFY
        );
        let pair = |t: i32| {
            run(
                &p,
                nr(libc::SYS_socketpair),
                [libc::AF_UNIX as u32, t as u32, 0, 0, 0, 0],
            )
        };
        assert_eq!(
            pair(libc::SOCK_STREAM | libc::SOCK_CLOEXEC),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(pair(libc::SOCK_SEQPACKET), SECCOMP_RET_ALLOW);
        assert_eq!(pair(libc::SOCK_DGRAM), NOTIFY);
        assert_eq!(
            run(
                &p,
                nr(libc::SYS_socketpair),
                [libc::AF_INET as u32, 1, 0, 0, 0, 0]
            ),
            NOTIFY
        );
        assert_eq!(run(&p, nr(libc::SYS_fanotify_init), [0; 6]), NOTIFY);
    }

    #[test]
    fn the_probe_filter_asks_the_listener_about_its_one_call() {
        let p = probe_filter(0xbee5);
        let getppid = nr(libc::SYS_getppid);
        assert_eq!(run(&p, getppid, [0xbee5, 0, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, getppid, [0, 0, 0, 0, 0, 0]), SECCOMP_RET_ALLOW);
        assert_eq!(
            run(&p, nr(libc::SYS_getpid), [0xbee5, 0, 0, 0, 0, 0]),
            SECCOMP_RET_ALLOW
        );
    }

    #[test]
    fn a_listener_of_the_scope_s_own_is_refused_and_other_filters_are_not() {
        let p = filter(TCP, false);
        let seccomp = nr(libc::SYS_seccomp);
        // SECCOMP_SET_MODE_FILTER with SECCOMP_FILTER_FLAG_NEW_LISTENER (alone or with others).
        assert_eq!(run(&p, seccomp, [1, NEW_LISTENER, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, seccomp, [1, NEW_LISTENER | 2, 0, 0, 0, 0]), NOTIFY);
        // A filter of its own without a listener: allowed (it can only refuse more).
        assert_eq!(run(&p, seccomp, [1, 0, 0, 0, 0, 0]), SECCOMP_RET_ALLOW);
        assert_eq!(run(&p, seccomp, [1, 2, 0, 0, 0, 0]), SECCOMP_RET_ALLOW);
    }

    #[test]
    fn fast_open_and_terminal_injection_are_refused() {
        let p = filter(TCP, false);
        assert_eq!(
            run(&p, nr(libc::SYS_sendto), [3, 0, 0, MSG_FASTOPEN, 0, 0]),
            NOTIFY
        );
        assert_eq!(
            run(&p, nr(libc::SYS_sendto), [3, 0, 0, 0, 0, 0]),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(&p, nr(libc::SYS_sendmsg), [3, 0, MSG_FASTOPEN, 0, 0, 0]),
            NOTIFY
        );
        for &(req, _) in IOCTLS {
            assert_eq!(run(&p, nr(libc::SYS_ioctl), [0, req, 0, 0, 0, 0]), NOTIFY);
        }
        assert_eq!(
            run(&p, nr(libc::SYS_ioctl), [0, 0x5401, 0, 0, 0, 0]), // TCGETS
            SECCOMP_RET_ALLOW
        );
    }
}
