//! What the scope's seccomp filter refuses, by system call: the name and the reason a denial
//! report gives. One entry for each system call [`super::filter`] can refuse; a test holds
//! the two together.

/// `(number, name, why)`.
type Entry = (libc::c_long, &'static str, &'static str);

const MOUNTS: &str = "nothing is mounted or unmounted inside a scope";
const KEYS: &str = "the kernel's keyrings are out of a scope's reach";
const MODULES: &str = "no kernel module or kexec image is loaded from a scope";
const IO_URING: &str = "io_uring would carry system calls past this filter";
const LISTEN: &str = "policies grant outbound traffic only: no socket listens or accepts";
const WATCH: &str = "Landlock does not check what a watch observes";
const HOST: &str = "it acts on the whole host";
const SET_ID: &str =
    "a set-user-ID or set-group-ID bit would run the file as its owner for whoever runs it next";
const FAST_OPEN: &str = "a TCP Fast Open connect is not seen by Landlock's connect check";

const ENTRIES: &[Entry] = &[
    (libc::SYS_bpf, "bpf", "no BPF inside a scope"),
    (
        libc::SYS_perf_event_open,
        "perf_event_open",
        "no perf events inside a scope",
    ),
    (libc::SYS_mount, "mount", MOUNTS),
    (libc::SYS_umount2, "umount2", MOUNTS),
    (libc::SYS_pivot_root, "pivot_root", MOUNTS),
    (libc::SYS_move_mount, "move_mount", MOUNTS),
    (libc::SYS_open_tree, "open_tree", MOUNTS),
    (libc::SYS_fsopen, "fsopen", MOUNTS),
    (libc::SYS_fsconfig, "fsconfig", MOUNTS),
    (libc::SYS_fsmount, "fsmount", MOUNTS),
    (libc::SYS_fspick, "fspick", MOUNTS),
    (libc::SYS_mount_setattr, "mount_setattr", MOUNTS),
    (libc::SYS_setns, "setns", "a scope joins no other namespace"),
    (libc::SYS_keyctl, "keyctl", KEYS),
    (libc::SYS_add_key, "add_key", KEYS),
    (libc::SYS_request_key, "request_key", KEYS),
    (
        libc::SYS_syslog,
        "syslog",
        "the kernel's log is out of a scope's reach",
    ),
    (libc::SYS_init_module, "init_module", MODULES),
    (libc::SYS_finit_module, "finit_module", MODULES),
    (libc::SYS_delete_module, "delete_module", MODULES),
    (libc::SYS_kexec_load, "kexec_load", MODULES),
    (libc::SYS_kexec_file_load, "kexec_file_load", MODULES),
    (libc::SYS_io_uring_setup, "io_uring_setup", IO_URING),
    (libc::SYS_io_uring_enter, "io_uring_enter", IO_URING),
    (libc::SYS_io_uring_register, "io_uring_register", IO_URING),
    (libc::SYS_listen, "listen", LISTEN),
    (libc::SYS_accept, "accept", LISTEN),
    (libc::SYS_accept4, "accept4", LISTEN),
    (libc::SYS_inotify_add_watch, "inotify_add_watch", WATCH),
    (libc::SYS_fanotify_init, "fanotify_init", WATCH),
    (libc::SYS_fanotify_mark, "fanotify_mark", WATCH),
    (libc::SYS_acct, "acct", HOST),
    (libc::SYS_swapon, "swapon", HOST),
    (libc::SYS_swapoff, "swapoff", HOST),
    (libc::SYS_reboot, "reboot", HOST),
    (
        super::SYS_FILE_SETATTR,
        "file_setattr",
        "a scope changes no inode flags (chattr)",
    ),
    (
        libc::SYS_memfd_create,
        "memfd_create",
        "this kernel has no vm.memfd_noexec, so a memfd could be executed",
    ),
    (libc::SYS_chmod, "chmod", SET_ID),
    (libc::SYS_fchmod, "fchmod", SET_ID),
    (libc::SYS_fchmodat, "fchmodat", SET_ID),
    (libc::SYS_fchmodat2, "fchmodat2", SET_ID),
    (libc::SYS_mknod, "mknod", SET_ID),
    (libc::SYS_mknodat, "mknodat", SET_ID),
    (libc::SYS_creat, "creat", SET_ID),
    (libc::SYS_open, "open", SET_ID),
    (libc::SYS_openat, "openat", SET_ID),
    (
        libc::SYS_landlock_restrict_self,
        "landlock_restrict_self",
        "a process of the scope may not silence the engine's denial reports",
    ),
    (
        libc::SYS_clone,
        "clone",
        "no user namespace is made inside a scope",
    ),
    (
        libc::SYS_unshare,
        "unshare",
        "no user namespace is made inside a scope",
    ),
    (
        libc::SYS_socket,
        "socket",
        "a scope makes TCP sockets, route netlink sockets and, where the network gate decides their peers, UDP sockets; no other kind",
    ),
    (
        libc::SYS_socketpair,
        "socketpair",
        "only connected unix socket pairs (stream, seqpacket): a datagram pair could send to any named socket",
    ),
    (libc::SYS_sendto, "sendto", FAST_OPEN),
    (libc::SYS_sendmsg, "sendmsg", FAST_OPEN),
    (libc::SYS_sendmmsg, "sendmmsg", FAST_OPEN),
    (
        libc::SYS_ioctl,
        "ioctl",
        "no terminal input injection, console redirection, file-system freeze or inode flags (chattr)",
    ),
];

/// The name of system call `nr` of this build's architecture, for one the filter can refuse;
/// `None` for any other number.
#[must_use]
pub fn name(nr: u32) -> Option<&'static str> {
    entry(nr).map(|e| e.1)
}

/// Why the filter refuses system call `nr`, in words; `None` for a number it never refuses.
#[must_use]
pub fn why(nr: u32) -> Option<&'static str> {
    entry(nr).map(|e| e.2)
}

fn entry(nr: u32) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.0 == libc::c_long::from(nr))
}

#[cfg(test)]
mod tests {
    use super::super::{Sockets, filter, tests::run_all};
    use super::*;

    /// Every number the filter refuses for some arguments has a name and a reason: each is
    /// run with arguments that trip every check the filter makes (all bits set, then none).
    #[test]
    fn every_system_call_the_filter_refuses_is_named() {
        let progs = [filter(Sockets::default(), true)];
        for nr in 0..1024u32 {
            for args in [[u32::MAX; 6], [0; 6], [libc::AF_UNIX as u32, 0, 0, 0, 0, 0]] {
                let action = run_all(&progs, nr, args);
                if action & 0xffff_0000 == super::super::SECCOMP_RET_ERRNO {
                    assert!(name(nr).is_some(), "system call {nr} refused unnamed");
                    assert!(why(nr).is_some());
                }
            }
        }
        assert_eq!(name(libc::SYS_mount as u32), Some("mount"));
        assert_eq!(name(libc::SYS_read as u32), None);
    }
}
