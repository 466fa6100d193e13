//! The calls the scope's seccomp filter refuses, in words: the system call's name and the
//! argument that decided (`socket(AF_UNIX, SOCK_STREAM)`, `unshare(CLONE_NEWUSER)`,
//! `ioctl(TIOCSTI)`), and the audit event that carries it ([`bee_common::Hook::Seccomp`]).
//! [`crate::audit::AuditRecord::explanation`] says why, as for every other denial.

use bee_common::{ACCESS_NET, AuditEvent, Hook, PATH_MAX, PROTO_TCP, PROTO_UDP};

use super::{
    IOCTLS, LANDLOCK_LOG_OFF, NEW_LISTENER, REFUSED_ERRNO, SYS_FILE_SETATTR, SYS_OPEN_TREE_ATTR,
    X32_SYSCALL_BIT,
};

/// The transport of a refused socket that a `net.allow` rule of that transport would have let
/// be made (TCP where Landlock or the gate decides TCP, UDP where the gate decides UDP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grantable {
    /// `SOCK_STREAM` with protocol 0 or `IPPROTO_TCP`, `AF_INET` or `AF_INET6`.
    Tcp,
    /// `SOCK_DGRAM` with protocol 0 or `IPPROTO_UDP`, `AF_INET` or `AF_INET6`.
    Udp,
}

/// A refused call as people read it: its name and the argument that decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `socket(AF_UNIX, SOCK_STREAM)`, `unshare(CLONE_NEWUSER)`, `ioctl(TIOCSTI)`, `mount()`.
    pub text: String,
    /// Set for a socket some policy could grant; `None` for what no policy can.
    pub grantable: Option<Grantable>,
}

/// Names of the system calls the filter refuses (`libc`'s numbers for this architecture).
const NAMES: &[(libc::c_long, &str)] = &[
    (libc::SYS_bpf, "bpf"),
    (libc::SYS_perf_event_open, "perf_event_open"),
    (libc::SYS_mount, "mount"),
    (libc::SYS_umount2, "umount2"),
    (libc::SYS_pivot_root, "pivot_root"),
    (libc::SYS_move_mount, "move_mount"),
    (libc::SYS_open_tree, "open_tree"),
    (SYS_OPEN_TREE_ATTR, "open_tree_attr"),
    (libc::SYS_fsopen, "fsopen"),
    (libc::SYS_fsconfig, "fsconfig"),
    (libc::SYS_fsmount, "fsmount"),
    (libc::SYS_fspick, "fspick"),
    (libc::SYS_mount_setattr, "mount_setattr"),
    (libc::SYS_setns, "setns"),
    (libc::SYS_keyctl, "keyctl"),
    (libc::SYS_add_key, "add_key"),
    (libc::SYS_request_key, "request_key"),
    (libc::SYS_syslog, "syslog"),
    (libc::SYS_init_module, "init_module"),
    (libc::SYS_finit_module, "finit_module"),
    (libc::SYS_delete_module, "delete_module"),
    (libc::SYS_kexec_load, "kexec_load"),
    (libc::SYS_kexec_file_load, "kexec_file_load"),
    (libc::SYS_io_uring_setup, "io_uring_setup"),
    (libc::SYS_io_uring_enter, "io_uring_enter"),
    (libc::SYS_io_uring_register, "io_uring_register"),
    (libc::SYS_listen, "listen"),
    (libc::SYS_accept, "accept"),
    (libc::SYS_accept4, "accept4"),
    (libc::SYS_inotify_add_watch, "inotify_add_watch"),
    (libc::SYS_fanotify_init, "fanotify_init"),
    (libc::SYS_fanotify_mark, "fanotify_mark"),
    (libc::SYS_acct, "acct"),
    (libc::SYS_swapon, "swapon"),
    (libc::SYS_swapoff, "swapoff"),
    (libc::SYS_reboot, "reboot"),
    (SYS_FILE_SETATTR, "file_setattr"),
    (libc::SYS_memfd_create, "memfd_create"),
    (libc::SYS_chmod, "chmod"),
    (libc::SYS_fchmod, "fchmod"),
    (libc::SYS_fchmodat, "fchmodat"),
    (libc::SYS_fchmodat2, "fchmodat2"),
    (libc::SYS_mknod, "mknod"),
    (libc::SYS_mknodat, "mknodat"),
    (libc::SYS_creat, "creat"),
    (libc::SYS_open, "open"),
    (libc::SYS_openat, "openat"),
    (libc::SYS_landlock_restrict_self, "landlock_restrict_self"),
    (libc::SYS_seccomp, "seccomp"),
    (libc::SYS_clone, "clone"),
    (libc::SYS_unshare, "unshare"),
    (libc::SYS_socket, "socket"),
    (libc::SYS_socketpair, "socketpair"),
    (libc::SYS_sendto, "sendto"),
    (libc::SYS_sendmsg, "sendmsg"),
    (libc::SYS_sendmmsg, "sendmmsg"),
    (libc::SYS_ioctl, "ioctl"),
];

/// Address families by number (`include/linux/socket.h`).
const FAMILIES: &[(u64, &str)] = &[
    (0, "AF_UNSPEC"),
    (1, "AF_UNIX"),
    (2, "AF_INET"),
    (4, "AF_IPX"),
    (5, "AF_APPLETALK"),
    (9, "AF_X25"),
    (10, "AF_INET6"),
    (15, "AF_KEY"),
    (16, "AF_NETLINK"),
    (17, "AF_PACKET"),
    (29, "AF_CAN"),
    (30, "AF_TIPC"),
    (31, "AF_BLUETOOTH"),
    (38, "AF_ALG"),
    (40, "AF_VSOCK"),
    (44, "AF_XDP"),
    (45, "AF_MCTP"),
];

/// Socket types by number, after `SOCK_NONBLOCK` and `SOCK_CLOEXEC` are masked off.
const TYPES: &[(u64, &str)] = &[
    (1, "SOCK_STREAM"),
    (2, "SOCK_DGRAM"),
    (3, "SOCK_RAW"),
    (4, "SOCK_RDM"),
    (5, "SOCK_SEQPACKET"),
    (6, "SOCK_DCCP"),
    (10, "SOCK_PACKET"),
];

fn named(table: &[(u64, &str)], value: u64) -> String {
    table
        .iter()
        .find(|(v, _)| *v == value)
        .map_or_else(|| value.to_string(), |(_, n)| (*n).to_owned())
}

/// A mode as `chmod(1)` writes it: `04755`.
fn mode(value: u64) -> String {
    format!("mode 0{:o}", value & 0o7777)
}

/// The refused call `nr` with `args`, as the filter decided it (the same arguments, read the
/// same way: the low 32 bits of each). The one place each refusal's text is made.
pub fn describe(nr: i32, args: [u64; 6]) -> Call {
    let low = |i: usize| args.get(i).map_or(0, |a| a & 0xffff_ffff);
    let none = |text: String| Call {
        text,
        grantable: None,
    };
    // The filter refuses every number from the x32 bit up (negative ones too, as unsigned).
    if nr > 0 && nr as u32 & X32_SYSCALL_BIT != 0 {
        return none(format!("x32 system call {}", nr as u32 & !X32_SYSCALL_BIT));
    }
    let sysno = libc::c_long::from(nr);
    let Some(&(_, name)) = NAMES.iter().find(|(n, _)| *n == sysno) else {
        return none(format!("system call {nr}"));
    };
    let text = match sysno {
        libc::SYS_socket | libc::SYS_socketpair => {
            let (family, kind, proto) = (low(0), low(1) & 0xf, low(2));
            let ip = sysno == libc::SYS_socket && matches!(family, 2 | 10);
            let grantable = match (ip, kind, proto) {
                (true, 1, 0 | 6) => Some(Grantable::Tcp),
                (true, 2, 0 | 17) => Some(Grantable::Udp),
                _ => None,
            };
            let mut text = format!("{name}({}, {}", named(FAMILIES, family), named(TYPES, kind));
            if proto != 0 {
                text.push_str(&format!(", {proto}"));
            }
            text.push(')');
            return Call { text, grantable };
        }
        libc::SYS_clone | libc::SYS_unshare => format!("{name}(CLONE_NEWUSER)"),
        libc::SYS_ioctl => {
            let req = low(1);
            match IOCTLS.iter().find(|(r, _)| u64::from(*r) == req) {
                Some((_, n)) => format!("{name}({n})"),
                None => format!("{name}({req:#x})"),
            }
        }
        libc::SYS_sendto | libc::SYS_sendmsg | libc::SYS_sendmmsg => {
            format!("{name}(MSG_FASTOPEN)")
        }
        libc::SYS_chmod | libc::SYS_fchmod | libc::SYS_mknod | libc::SYS_creat => {
            format!("{name}({})", mode(low(1)))
        }
        libc::SYS_fchmodat | libc::SYS_fchmodat2 | libc::SYS_mknodat => {
            format!("{name}({})", mode(low(2)))
        }
        libc::SYS_open => format!("{name}(O_CREAT, {})", mode(low(2))),
        libc::SYS_openat => format!("{name}(O_CREAT, {})", mode(low(3))),
        libc::SYS_landlock_restrict_self => {
            let flags = low(1) & u64::from(LANDLOCK_LOG_OFF);
            let names: Vec<&str> = [
                (1, "LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF"),
                (4, "LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF"),
            ]
            .iter()
            .filter(|(bit, _)| flags & bit != 0)
            .map(|(_, n)| *n)
            .collect();
            format!("{name}({})", names.join(" | "))
        }
        libc::SYS_seccomp if low(1) & u64::from(NEW_LISTENER) != 0 => {
            format!("{name}(SECCOMP_FILTER_FLAG_NEW_LISTENER)")
        }
        _ => format!("{name}()"),
    };
    none(text)
}

/// The audit event of `call`, refused to thread `tid` of process `tgid` named `comm` in the
/// scope with cgroup id `cgroup_id` ([`Hook::Seccomp`] says how it is encoded).
pub fn event(call: &Call, cgroup_id: u64, tid: u32, tgid: u32, comm: &str) -> AuditEvent {
    let mut e = AuditEvent::zeroed();
    e.cgroup_id = cgroup_id;
    e.pid = tid;
    e.tgid = tgid;
    e.hook = Hook::Seccomp as u32;
    e.error = -REFUSED_ERRNO;
    let comm = comm.as_bytes();
    let n = comm.len().min(e.comm.len() - 1);
    e.comm[..n].copy_from_slice(&comm[..n]);
    let text = call.text.as_bytes();
    let n = text.len().min(PATH_MAX);
    e.path[..n].copy_from_slice(&text[..n]);
    e.path_len = n as u32;
    if let Some(g) = call.grantable {
        e.access = ACCESS_NET;
        e.protocol = match g {
            Grantable::Tcp => PROTO_TCP,
            Grantable::Udp => PROTO_UDP,
        };
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::landlock::seccomp::{MODE_ARGS, OPEN_ARGS, REFUSED};

    #[test]
    fn every_call_the_filter_refuses_has_a_name() {
        let more = [
            libc::SYS_memfd_create,
            libc::SYS_landlock_restrict_self,
            libc::SYS_seccomp,
            libc::SYS_clone,
            libc::SYS_unshare,
            libc::SYS_socket,
            libc::SYS_socketpair,
            libc::SYS_sendto,
            libc::SYS_sendmsg,
            libc::SYS_sendmmsg,
            libc::SYS_ioctl,
        ];
        let all = REFUSED
            .iter()
            .copied()
            .chain(MODE_ARGS.iter().map(|(n, _)| *n))
            .chain(OPEN_ARGS.iter().map(|(n, _, _)| *n))
            .chain(more);
        for nr in all {
            let call = describe(nr as i32, [0; 6]);
            assert!(!call.text.starts_with("system call"), "{nr}: {call:?}");
        }
    }

    #[test]
    fn each_refusal_names_the_argument_that_decided() {
        let text = |nr: libc::c_long, args: [u64; 6]| describe(nr as i32, args).text;
        // Socket flags are masked off the type; a protocol is shown when given.
        assert_eq!(
            text(libc::SYS_socket, [10, 2 | 0o4000 | 0o2000000, 58, 0, 0, 0]),
            "socket(AF_INET6, SOCK_DGRAM, 58)"
        );
        assert_eq!(
            text(libc::SYS_socket, [99, 1, 0, 0, 0, 0]),
            "socket(99, SOCK_STREAM)"
        );
        assert_eq!(
            text(libc::SYS_socketpair, [1, 2, 0, 0, 0, 0]),
            "socketpair(AF_UNIX, SOCK_DGRAM)"
        );
        assert_eq!(
            text(libc::SYS_clone, [0x1000_0011, 0, 0, 0, 0, 0]),
            "clone(CLONE_NEWUSER)"
        );
        assert_eq!(
            text(libc::SYS_ioctl, [3, 0x4008_6602, 0, 0, 0, 0]),
            "ioctl(FS_IOC_SETFLAGS)"
        );
        assert_eq!(
            text(libc::SYS_sendto, [3, 0, 0, 0x2000_0000, 0, 0]),
            "sendto(MSG_FASTOPEN)"
        );
        assert_eq!(
            text(libc::SYS_openat, [0, 0, 0o100, 0o104755, 0, 0]),
            "openat(O_CREAT, mode 04755)"
        );
        assert_eq!(
            text(libc::SYS_landlock_restrict_self, [3, 5, 0, 0, 0, 0]),
            "landlock_restrict_self(LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF | LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF)"
        );
        assert_eq!(
            text(libc::SYS_seccomp, [1, 8, 0, 0, 0, 0]),
            "seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER)"
        );
        assert_eq!(text(libc::SYS_bpf, [0; 6]), "bpf()");
        assert_eq!(describe(0x4000_0029, [0; 6]).text, "x32 system call 41");
        assert_eq!(describe(-1, [0; 6]).text, "system call -1");
        // Only IP TCP and UDP sockets are grantable.
        let grant = |args: [u64; 6]| describe(libc::SYS_socket as i32, args).grantable;
        assert_eq!(grant([2, 1, 0, 0, 0, 0]), Some(Grantable::Tcp));
        assert_eq!(grant([10, 1, 6, 0, 0, 0]), Some(Grantable::Tcp));
        assert_eq!(grant([2, 2, 17, 0, 0, 0]), Some(Grantable::Udp));
        assert_eq!(grant([2, 1, 262, 0, 0, 0]), None);
        assert_eq!(grant([2, 3, 0, 0, 0, 0]), None);
        assert_eq!(grant([1, 1, 0, 0, 0, 0]), None);
        assert_eq!(
            describe(libc::SYS_socketpair as i32, [2, 1, 0, 0, 0, 0]).grantable,
            None
        );
    }

    #[test]
    fn a_refusal_becomes_a_seccomp_event_explained_as_the_others() {
        let call = describe(libc::SYS_socket as i32, [2, 1, 0, 0, 0, 0]);
        let e = event(&call, 7, 11, 10, "a-very-long-command-name");
        assert_eq!((e.hook, e.error), (Hook::Seccomp as u32, -libc::EPERM));
        assert_eq!((e.cgroup_id, e.pid, e.tgid), (7, 11, 10));
        assert_eq!((e.access, e.protocol), (ACCESS_NET, PROTO_TCP));
        assert_eq!(e.path(), b"socket(AF_INET, SOCK_STREAM)");
        assert_eq!(&e.comm[..15], b"a-very-long-com");
        assert_eq!(e.comm[15], 0);
        let options = bee_core::CompileOptions {
            base: "/".into(),
            home: None,
        };
        let policy = match bee_core::compile_str("p.toml", "version = 1\n", &options) {
            Ok(c) => c.policy,
            Err(e) => unreachable!("{e:?}"),
        };
        let explain = |nr: libc::c_long, args: [u64; 6]| {
            let e = event(&describe(nr as i32, args), 7, 11, 10, "perl");
            crate::audit::AuditRecord::from_event(&e, &policy, std::time::SystemTime::now())
                .explanation()
        };
        for (nr, args, text) in [
            (
                libc::SYS_socket,
                [1, 0o2000001, 0, 0, 0, 0],
                "socket(AF_UNIX, SOCK_STREAM)",
            ),
            (
                libc::SYS_unshare,
                [0x1000_0000, 0, 0, 0, 0, 0],
                "unshare(CLONE_NEWUSER)",
            ),
            (libc::SYS_ioctl, [0, 0x5412, 0, 0, 0, 0], "ioctl(TIOCSTI)"),
            (libc::SYS_mount, [0; 6], "mount()"),
            (
                libc::SYS_fchmodat,
                [0, 0, 0o4755, 0, 0, 0],
                "fchmodat(mode 04755)",
            ),
        ] {
            assert_eq!(
                explain(nr, args),
                format!("{text}: never allowed inside a scope")
            );
        }
        assert_eq!(
            explain(libc::SYS_socket, [2, 1, 0, 0, 0, 0]),
            "socket(AF_INET, SOCK_STREAM): no net.allow rule covers it"
        );
    }
}
