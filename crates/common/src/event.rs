//! The audit event the kernel programs send through a ring buffer.

use core::mem::{align_of, size_of};

use crate::access::PATH_MAX;

/// [`AuditEvent::flags`]: the access was allowed (sent only with `SCOPE_AUDIT_ALLOWS`).
pub const EVENT_ALLOWED: u8 = 1;
/// [`AuditEvent::flags`]: the path did not fit in [`AuditEvent::path`] and was cut.
pub const EVENT_PATH_TRUNCATED: u8 = 2;
/// [`AuditEvent::flags`]: the path could not be resolved (`bpf_d_path` failed) and was denied.
pub const EVENT_PATH_UNRESOLVED: u8 = 4;
/// [`AuditEvent::flags`]: a `path_rename` of a directory refused because the two places
/// grant differently at some path below them (the path is the destination).
pub const EVENT_REPARENT: u8 = 8;
/// [`AuditEvent::flags`]: the policy denied the access and learn mode (`SCOPE_LEARN`) allowed
/// it; [`AuditEvent::error`] keeps the errno enforcement would have returned.
pub const EVENT_LEARNED: u8 = 16;
/// [`AuditEvent::flags`], set in user space only (the Landlock engine's reports): the denial
/// was logged against a Landlock domain the scope's own program created, nested in bee's
/// (Landlock logs against the youngest layer that refused); bee's policy may or may not
/// refuse the access too.
pub const EVENT_NESTED: u8 = 32;

/// The LSM hook an event comes from. Stored in [`AuditEvent::hook`] as its `u32`
/// discriminant; the values are ABI and never reused.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hook {
    /// `file_open`: open of a file for reading and/or writing.
    FileOpen = 1,
    /// `bprm_check_security`: `execve` of a file.
    BprmCheckSecurity = 2,
    /// `mmap_file`: executable mapping of a file.
    MmapFile = 3,
    /// `file_mprotect`: making a file mapping executable.
    FileMprotect = 4,
    /// `path_unlink`: removing a file.
    PathUnlink = 5,
    /// `path_rmdir`: removing a directory.
    PathRmdir = 6,
    /// `path_mkdir`: creating a directory.
    PathMkdir = 7,
    /// `path_mknod`: creating a file, FIFO, socket or device node.
    PathMknod = 8,
    /// `path_rename`: renaming (both ends are checked for write).
    PathRename = 9,
    /// `path_link`: creating a hard link.
    PathLink = 10,
    /// `path_symlink`: creating a symbolic link.
    PathSymlink = 11,
    /// `path_truncate`: truncating by path.
    PathTruncate = 12,
    /// `path_chmod`: changing the mode.
    PathChmod = 13,
    /// `path_chown`: changing the owner.
    PathChown = 14,
    /// `socket_connect`: connecting an IP or unix socket.
    SocketConnect = 15,
    /// `socket_sendmsg`: sending to an explicit address.
    SocketSendmsg = 16,
    /// `unix_stream_connect`: connecting a unix stream socket (the peer's bound path).
    UnixStreamConnect = 17,
    /// `unix_may_send`: sending on a unix datagram socket (the peer's bound path).
    UnixMaySend = 18,
    /// `bpf`: the `bpf(2)` system call (always denied in a scope).
    Bpf = 19,
    /// `ptrace_access_check`: tracing a process outside the scope.
    PtraceAccessCheck = 20,
    /// `task_kill`: signalling a process outside the scope.
    TaskKill = 21,
    /// `sb_mount`: mounting (always denied in a scope).
    SbMount = 22,
    /// `file_truncate`: truncating an open file (`ftruncate(2)`).
    FileTruncate = 23,
    /// `path_notify`: watching a path (`inotify`, `fanotify`).
    PathNotify = 24,
    /// `task_alloc`: creating a task; `clone3(CLONE_INTO_CGROUP)` is denied in a scope.
    TaskAlloc = 25,
    /// `netlink_send`: a netlink message to the kernel; only `NETLINK_ROUTE` reads pass.
    NetlinkSend = 26,
    /// `socket_listen`: listening on an IP socket (always denied in a scope).
    SocketListen = 27,
    /// `socket_accept`: accepting on an IP socket (always denied in a scope).
    SocketAccept = 28,
    /// `perf_event_open`: opening a perf event (always denied in a scope).
    PerfEventOpen = 29,
    /// `inode_setattr`: changing timestamps, mode, owner or size.
    InodeSetattr = 30,
    /// `inode_setxattr`: setting an extended attribute (POSIX ACLs included).
    InodeSetxattr = 31,
    /// `inode_removexattr`: removing an extended attribute.
    InodeRemovexattr = 32,
    /// `socket_create`: creating a socket of a family or type outside what a policy can grant.
    SocketCreate = 33,
    /// `userns_create`: creating a user namespace (always denied in a scope).
    UsernsCreate = 34,
    /// `file_ioctl`: an ioctl that changes inode flags, freezes a filesystem or injects
    /// terminal input (fd owners are reported as `task_kill`).
    FileIoctl = 35,
    /// `capable`: a capability that acts on the host (always denied in a scope; the event's
    /// `port` holds the capability number).
    Capable = 36,
    /// `syslog`: reading or controlling the kernel log (always denied in a scope).
    Syslog = 37,
    /// `key_permission`: using a key or keyring (always denied in a scope).
    KeyPermission = 38,
    /// `ipc_permission`: using a SysV IPC object another scope or no scope created (also
    /// `shmctl`, `msgctl`, `semctl`).
    IpcPermission = 39,
    /// `task_setscheduler`: the priority, I/O priority or scheduling of a process outside the
    /// scope (also `task_setnice`, `task_setioprio`).
    TaskSetscheduler = 40,
    /// `task_setrlimit`: the resource limits of a process outside the scope.
    TaskSetrlimit = 41,
    /// Not an LSM hook: bee's resolver refused a scope's DNS query or the answer to it (name
    /// grants). The event's path is the queried name, its `port` one of the `DNS_REFUSED_*`
    /// codes, and for [`DNS_REFUSED_ADDRESS`] its family and address are the refused address.
    /// Made in user space, never by the kernel programs.
    DnsQuery = 42,
    /// Not an LSM hook: the Landlock engine's seccomp filter refused a system call, and the
    /// engine's listener answered it `EPERM`. The event's path is the call with the argument
    /// that decided (`socket(AF_UNIX, SOCK_STREAM)`, `ioctl(TIOCSTI)`); its access is
    /// `ACCESS_NET` with the transport in `protocol` for a TCP or UDP socket a `net.allow`
    /// rule would have let be made, and 0 for what no policy grants. Made in user space, never
    /// by the kernel programs.
    Seccomp = 43,
    /// `uring_override_creds`: an io_uring request run under a registered personality, credentials
    /// other than the submitting task's own (always denied in a scope).
    UringOverrideCreds = 44,
    /// `socket_bind`: binding an IP socket to a port of its choosing (port 0, one the kernel
    /// picks, is allowed); also the Landlock engine's network gate (`cgroup/bind4`, `bind6`).
    SocketBind = 45,
}

/// [`Hook::DnsQuery`] `port`: no host rule names the queried name; it was answered NXDOMAIN
/// and never forwarded.
pub const DNS_REFUSED_NAME: u16 = 0;
/// [`Hook::DnsQuery`] `port`: the answer is an alias (CNAME) of a name no host rule names; the
/// path is `NAME -> TARGET`.
pub const DNS_REFUSED_ALIAS: u16 = 1;
/// [`Hook::DnsQuery`] `port`: the answer named a loopback, private, link-local, metadata or
/// other special address that no address grant covers.
pub const DNS_REFUSED_ADDRESS: u16 = 2;

impl Hook {
    /// Every hook, in discriminant order.
    pub const ALL: [Hook; 45] = [
        Hook::FileOpen,
        Hook::BprmCheckSecurity,
        Hook::MmapFile,
        Hook::FileMprotect,
        Hook::PathUnlink,
        Hook::PathRmdir,
        Hook::PathMkdir,
        Hook::PathMknod,
        Hook::PathRename,
        Hook::PathLink,
        Hook::PathSymlink,
        Hook::PathTruncate,
        Hook::PathChmod,
        Hook::PathChown,
        Hook::SocketConnect,
        Hook::SocketSendmsg,
        Hook::UnixStreamConnect,
        Hook::UnixMaySend,
        Hook::Bpf,
        Hook::PtraceAccessCheck,
        Hook::TaskKill,
        Hook::SbMount,
        Hook::FileTruncate,
        Hook::PathNotify,
        Hook::TaskAlloc,
        Hook::NetlinkSend,
        Hook::SocketListen,
        Hook::SocketAccept,
        Hook::PerfEventOpen,
        Hook::InodeSetattr,
        Hook::InodeSetxattr,
        Hook::InodeRemovexattr,
        Hook::SocketCreate,
        Hook::UsernsCreate,
        Hook::FileIoctl,
        Hook::Capable,
        Hook::Syslog,
        Hook::KeyPermission,
        Hook::IpcPermission,
        Hook::TaskSetscheduler,
        Hook::TaskSetrlimit,
        Hook::DnsQuery,
        Hook::Seccomp,
        Hook::UringOverrideCreds,
        Hook::SocketBind,
    ];

    /// The hook for a raw [`AuditEvent::hook`] value, if it is one.
    pub fn from_raw(raw: u32) -> Option<Self> {
        Self::ALL.get((raw as usize).checked_sub(1)?).copied()
    }

    /// The LSM hook's name as in `include/linux/lsm_hook_defs.h` (and the program's section);
    /// `dns_query` for bee's resolver, `seccomp` for the Landlock engine's seccomp filter.
    pub const fn name(self) -> &'static str {
        match self {
            Hook::FileOpen => "file_open",
            Hook::BprmCheckSecurity => "bprm_check_security",
            Hook::MmapFile => "mmap_file",
            Hook::FileMprotect => "file_mprotect",
            Hook::PathUnlink => "path_unlink",
            Hook::PathRmdir => "path_rmdir",
            Hook::PathMkdir => "path_mkdir",
            Hook::PathMknod => "path_mknod",
            Hook::PathRename => "path_rename",
            Hook::PathLink => "path_link",
            Hook::PathSymlink => "path_symlink",
            Hook::PathTruncate => "path_truncate",
            Hook::PathChmod => "path_chmod",
            Hook::PathChown => "path_chown",
            Hook::SocketConnect => "socket_connect",
            Hook::SocketSendmsg => "socket_sendmsg",
            Hook::UnixStreamConnect => "unix_stream_connect",
            Hook::UnixMaySend => "unix_may_send",
            Hook::Bpf => "bpf",
            Hook::PtraceAccessCheck => "ptrace_access_check",
            Hook::TaskKill => "task_kill",
            Hook::SbMount => "sb_mount",
            Hook::FileTruncate => "file_truncate",
            Hook::PathNotify => "path_notify",
            Hook::TaskAlloc => "task_alloc",
            Hook::NetlinkSend => "netlink_send",
            Hook::SocketListen => "socket_listen",
            Hook::SocketAccept => "socket_accept",
            Hook::PerfEventOpen => "perf_event_open",
            Hook::InodeSetattr => "inode_setattr",
            Hook::InodeSetxattr => "inode_setxattr",
            Hook::InodeRemovexattr => "inode_removexattr",
            Hook::SocketCreate => "socket_create",
            Hook::UsernsCreate => "userns_create",
            Hook::FileIoctl => "file_ioctl",
            Hook::Capable => "capable",
            Hook::Syslog => "syslog",
            Hook::KeyPermission => "key_permission",
            Hook::IpcPermission => "ipc_permission",
            Hook::TaskSetscheduler => "task_setscheduler",
            Hook::TaskSetrlimit => "task_setrlimit",
            Hook::DnsQuery => "dns_query",
            Hook::Seccomp => "seccomp",
            Hook::UringOverrideCreds => "uring_override_creds",
            Hook::SocketBind => "socket_bind",
        }
    }
}

/// One audited access, as written to the ring buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditEvent {
    /// cgroup v2 id of the scope.
    pub cgroup_id: u64,
    /// Thread id (the kernel's `pid`).
    pub pid: u32,
    /// Process id (the kernel's `tgid`).
    pub tgid: u32,
    /// [`Hook`] discriminant.
    pub hook: u32,
    /// The hook's return value: 0 if allowed, else a negative errno (`-EACCES`, `-EPERM`).
    pub error: i32,
    /// The scope's policy id.
    pub policy_id: u32,
    /// `ACCESS_*` bits that were attempted.
    pub access: u32,
    /// `task->comm`, NUL-padded.
    pub comm: [u8; 16],
    /// Address family (`AF_INET`, `AF_INET6`, `AF_UNIX`) for socket hooks, else 0.
    pub family: u16,
    /// Peer port, host byte order, for IP socket hooks; for `capable`, the capability
    /// number (`include/uapi/linux/capability.h`).
    pub port: u16,
    /// `PROTO_*` bit for IP socket hooks.
    pub protocol: u8,
    /// `EVENT_*` bits.
    pub flags: u8,
    /// Aligns `addr`; always 0.
    pub _pad0: u16,
    /// Peer address, network byte order: IPv4 in the first 4 bytes, or IPv6.
    pub addr: [u8; 16],
    /// Used bytes of `path`, without a terminating NUL.
    pub path_len: u32,
    /// Aligns `path` to 8 (keeps the size a multiple of 8); always 0.
    pub _pad1: u32,
    /// The path (file, executable or unix socket), if the hook has one.
    pub path: [u8; PATH_MAX],
}

const _: () = assert!(size_of::<AuditEvent>() == 4176 && align_of::<AuditEvent>() == 8);

impl AuditEvent {
    /// An all-zero event.
    pub const fn zeroed() -> Self {
        Self {
            cgroup_id: 0,
            pid: 0,
            tgid: 0,
            hook: 0,
            error: 0,
            policy_id: 0,
            access: 0,
            comm: [0; 16],
            family: 0,
            port: 0,
            protocol: 0,
            flags: 0,
            _pad0: 0,
            addr: [0; 16],
            path_len: 0,
            _pad1: 0,
            path: [0; PATH_MAX],
        }
    }

    /// The used part of `path`.
    pub fn path(&self) -> &[u8] {
        self.path
            .get(..self.path_len as usize)
            .unwrap_or(&self.path)
    }
}

crate::pod!(AuditEvent);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_ids_round_trip_and_are_dense() {
        for (i, hook) in Hook::ALL.iter().enumerate() {
            assert_eq!(*hook as u32, i as u32 + 1);
            assert_eq!(Hook::from_raw(*hook as u32), Some(*hook));
        }
        assert_eq!(Hook::from_raw(0), None);
        assert_eq!(Hook::from_raw(Hook::ALL.len() as u32 + 1), None);
        assert_eq!(Hook::BprmCheckSecurity.name(), "bprm_check_security");
    }

    #[test]
    fn event_path_is_cut_at_path_len() {
        let mut e = AuditEvent::zeroed();
        e.path[..4].copy_from_slice(b"/etc");
        e.path_len = 4;
        assert_eq!(e.path(), b"/etc");
    }
}
