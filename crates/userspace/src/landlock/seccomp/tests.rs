use super::*;

const TCP: Sockets = Sockets {
    tcp: true,
    udp: false,
};

/// Runs `prog` on a `seccomp_data` the way the kernel's classic BPF interpreter does, for
/// the instructions the builder emits.
fn run(prog: &[SockFilter], nr: u32, args: [u32; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&nr.to_le_bytes());
    data[4..8].copy_from_slice(&AUDIT_ARCH.to_le_bytes());
    for (i, a) in args.iter().enumerate() {
        let off = 16 + 8 * i;
        data[off..off + 4].copy_from_slice(&a.to_le_bytes());
    }
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let ins = prog[pc];
        pc += 1;
        match ins.code {
            BPF_LD_W_ABS => {
                let o = ins.k as usize;
                acc = u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
            }
            BPF_ALU_AND_K => acc &= ins.k,
            BPF_RET_K => return ins.k,
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
}

/// Runs every filter of `progs` and keeps the action the kernel keeps
/// (`seccomp_run_filters`): the lowest `ACTION_ONLY` as a signed number, so that
/// `KILL_PROCESS` wins over `ERRNO`, and `ERRNO` over `ALLOW`.
pub(super) fn run_all(progs: &[Vec<SockFilter>], nr: u32, args: [u32; 6]) -> u32 {
    progs
        .iter()
        .map(|p| run(p, nr, args))
        .min_by_key(|ret| (ret & 0xffff_0000) as i32)
        .unwrap_or(SECCOMP_RET_ALLOW)
}

const EPERM: u32 = SECCOMP_RET_ERRNO | libc::EPERM as u32;

/// The reported filter leaves `clone3` and `openat2` to the unreported one, which answers
/// nothing else: a `fork` is never reported as a refusal, and nothing is allowed that the
/// first filter alone would refuse.
#[test]
fn only_the_fallbacks_go_unreported() {
    let p = filter(TCP, false);
    let f = fallbacks();
    for n in [libc::SYS_clone3, libc::SYS_openat2] {
        assert_eq!(run(&p, nr(n), [0; 6]), SECCOMP_RET_ALLOW);
        assert_eq!(run(&f, nr(n), [0; 6]), errno(libc::ENOSYS));
    }
    for n in 0..1024u32 {
        if n != nr(libc::SYS_clone3) && n != nr(libc::SYS_openat2) {
            assert_eq!(run(&f, n, [u32::MAX; 6]), SECCOMP_RET_ALLOW, "{n}");
            for args in [[0; 6], [u32::MAX; 6]] {
                assert_eq!(run_all(&[p.clone(), f.clone()], n, args), run(&p, n, args));
            }
        }
    }
}

fn nr(n: libc::c_long) -> u32 {
    n as u32
}

#[test]
fn refuses_the_gates_and_allows_the_rest() {
    let p = filter(TCP, false);
    assert_eq!(run(&p, nr(libc::SYS_bpf), [0; 6]), EPERM);
    assert_eq!(run(&p, nr(libc::SYS_mount), [0; 6]), EPERM);
    assert_eq!(run(&p, nr(libc::SYS_io_uring_setup), [0; 6]), EPERM);
    assert_eq!(run(&p, nr(libc::SYS_listen), [0; 6]), EPERM);
    assert_eq!(
        run_all(&[p.clone(), fallbacks()], nr(libc::SYS_clone3), [0; 6]),
        SECCOMP_RET_ERRNO | libc::ENOSYS as u32
    );
    assert_eq!(run(&p, nr(libc::SYS_read), [0; 6]), SECCOMP_RET_ALLOW);
    assert_eq!(run(&p, nr(libc::SYS_openat), [0; 6]), SECCOMP_RET_ALLOW);
    assert_eq!(run(&p, nr(libc::SYS_read) | X32_SYSCALL_BIT, [0; 6]), EPERM);
}

#[test]
fn clone_and_unshare_may_not_make_a_user_namespace() {
    let p = filter(TCP, false);
    for n in [libc::SYS_clone, libc::SYS_unshare] {
        assert_eq!(run(&p, nr(n), [CLONE_NEWUSER, 0, 0, 0, 0, 0]), EPERM);
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
        for (mode, want) in [(0o4755, EPERM), (0o2755, EPERM), (0o755, SECCOMP_RET_ALLOW)] {
            args[at] = mode;
            assert_eq!(run(&p, nr(n), args), want, "{n} {mode:o}");
        }
    }
    // openat: the mode counts only with O_CREAT (or O_TMPFILE).
    assert_eq!(
        run(&p, nr(libc::SYS_openat), [0, 0, 0o100, 0o4755, 0, 0]),
        EPERM
    );
    assert_eq!(
        run(&p, nr(libc::SYS_openat), [0, 0, 0o100, 0o644, 0, 0]),
        SECCOMP_RET_ALLOW
    );
    assert_eq!(
        run(&p, nr(libc::SYS_openat), [0, 0, 0, 0o4755, 0, 0]),
        SECCOMP_RET_ALLOW
    );
    assert_eq!(run(&p, nr(SYS_FILE_SETATTR), [0; 6]), EPERM);
    assert_eq!(
        run_all(&[p.clone(), fallbacks()], nr(libc::SYS_openat2), [0; 6]),
        SECCOMP_RET_ERRNO | libc::ENOSYS as u32
    );
    let restrict = nr(libc::SYS_landlock_restrict_self);
    assert_eq!(run(&p, restrict, [3, 1, 0, 0, 0, 0]), EPERM);
    assert_eq!(run(&p, restrict, [u32::MAX, 4, 0, 0, 0, 0]), EPERM);
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
            EPERM
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
            assert_eq!(sock(family, libc::SOCK_DGRAM, libc::IPPROTO_ICMP), EPERM);
            assert_eq!(sock(family, libc::SOCK_DGRAM, libc::IPPROTO_ICMPV6), EPERM);
            assert_eq!(sock(family, libc::SOCK_DGRAM, libc::IPPROTO_UDPLITE), EPERM);
            assert_eq!(sock(family, libc::SOCK_DGRAM, libc::IPPROTO_TCP), EPERM);
            assert_eq!(sock(family, libc::SOCK_STREAM, libc::IPPROTO_UDP), EPERM);
            assert_eq!(sock(family, libc::SOCK_STREAM, 262), EPERM);
            assert_eq!(sock(family, libc::SOCK_SEQPACKET, 0), EPERM);
            assert_eq!(sock(family, libc::SOCK_RAW, libc::IPPROTO_UDP), EPERM);
        }
        assert_eq!(sock(libc::AF_UNIX, libc::SOCK_DGRAM, 0), EPERM);
        assert_eq!(sock(libc::AF_PACKET, libc::SOCK_DGRAM, 0), EPERM);
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
    assert_eq!(sock(libc::AF_INET, libc::SOCK_DGRAM, 0), EPERM);
    assert_eq!(sock(libc::AF_INET, libc::SOCK_RAW, 1), EPERM);
    assert_eq!(sock(libc::AF_INET, libc::SOCK_STREAM, 262), EPERM); // MPTCP
    assert_eq!(sock(libc::AF_UNIX, libc::SOCK_STREAM, 0), EPERM);
    assert_eq!(sock(libc::AF_PACKET, libc::SOCK_RAW, 0), EPERM);
    assert_eq!(sock(libc::AF_NETLINK, libc::SOCK_RAW, 0), SECCOMP_RET_ALLOW);
    assert_eq!(sock(libc::AF_NETLINK, libc::SOCK_RAW, 9), EPERM); // NETLINK_AUDIT
    let no_tcp = filter(Sockets::default(), false);
    assert_eq!(
        run(
            &no_tcp,
            nr(libc::SYS_socket),
            [libc::AF_INET as u32, libc::SOCK_STREAM as u32, 0, 0, 0, 0]
        ),
        EPERM
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
    assert_eq!(pair(libc::SOCK_DGRAM), EPERM);
    assert_eq!(
        run(
            &p,
            nr(libc::SYS_socketpair),
            [libc::AF_INET as u32, 1, 0, 0, 0, 0]
        ),
        EPERM
    );
    assert_eq!(run(&p, nr(libc::SYS_fanotify_init), [0; 6]), EPERM);
}

#[test]
fn fast_open_and_terminal_injection_are_refused() {
    let p = filter(TCP, false);
    assert_eq!(
        run(&p, nr(libc::SYS_sendto), [3, 0, 0, MSG_FASTOPEN, 0, 0]),
        EPERM
    );
    assert_eq!(
        run(&p, nr(libc::SYS_sendto), [3, 0, 0, 0, 0, 0]),
        SECCOMP_RET_ALLOW
    );
    assert_eq!(
        run(&p, nr(libc::SYS_sendmsg), [3, 0, MSG_FASTOPEN, 0, 0, 0]),
        EPERM
    );
    for &req in IOCTLS {
        assert_eq!(run(&p, nr(libc::SYS_ioctl), [0, req, 0, 0, 0, 0]), EPERM);
    }
    assert_eq!(
        run(&p, nr(libc::SYS_ioctl), [0, 0x5401, 0, 0, 0, 0]), // TCGETS
        SECCOMP_RET_ALLOW
    );
}
