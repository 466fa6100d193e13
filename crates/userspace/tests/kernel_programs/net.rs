//! Kernel tests: network egress (`socket_connect`, `socket_sendmsg`, `socket_create`, the
//! unix hooks), in the VM matrix via `cargo xtask vm test`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

use bee_common::{ACCESS_NET, Hook, PROTO_TCP, PROTO_UDP};

use crate::kernel_support::*;

fn net_scope(name: &str) -> Scope {
    let exe = std::env::current_exe().unwrap();
    let text = format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{exe}"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{exe}"]
[[net.allow]]
addr = ["127.0.0.1", "::1"]
ports = [5000]
proto = "tcp"
[[net.allow]]
addr = ["127.0.0.2"]
ports = [6000]
proto = "udp"
"#,
        exe = exe.display()
    );
    Scope::new(name, &text, 0)
}

/// The network event of `cg` for `port`, which must be a denial.
fn net_denial(scope: &Scope, hook: Hook, port: u16) -> bee_common::AuditEvent {
    let evs = events(&scope.cg);
    let ev = *evs
        .iter()
        .find(|e| e.hook == hook as u32 && e.port == port && e.error != 0)
        .unwrap_or_else(|| panic!("no {hook:?} denial for port {port}: {} events", evs.len()));
    assert_eq!(ev.error, -EPERM);
    assert_eq!(ev.policy_id, scope.policy_id());
    assert_eq!(ev.access, ACCESS_NET);
    ev
}

/// Allowed means the LSM let the call through: whatever the network then says (the VM's
/// loopback may be down), it is not EPERM.
fn assert_not_denied(out: &std::process::Output, what: &str) {
    assert_ne!(errno_of(out), EPERM, "{what}: {}", show(out));
    assert!(errno_of(out) < 200, "{what}: helper failed: {}", show(out));
}

#[test]
fn tcp_connect_v4_v6_and_v4_mapped() {
    let scope = net_scope("tcp");
    let cg = Some(&scope.cg);
    assert_not_denied(
        &helper(
            cg,
            Action::Connect {
                addr: "127.0.0.1".into(),
                port: "5000".into(),
            },
        ),
        "granted v4",
    );
    assert_not_denied(
        &helper(
            cg,
            Action::Connect {
                addr: "::1".into(),
                port: "5000".into(),
            },
        ),
        "granted v6",
    );
    assert_not_denied(
        &helper(
            cg,
            Action::Connect {
                addr: "::ffff:127.0.0.1".into(),
                port: "5000".into(),
            },
        ),
        "granted v4 as v4-mapped v6",
    );

    let out = helper(
        cg,
        Action::Connect {
            addr: "127.0.0.1".into(),
            port: "5001".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "denied port: {}", show(&out));
    let ev = net_denial(&scope, Hook::SocketConnect, 5001);
    assert_eq!(ev.family, libc::AF_INET as u16);
    assert_eq!(ev.protocol, PROTO_TCP);
    assert_eq!(&ev.addr[..4], &[127, 0, 0, 1]);

    let out = helper(
        cg,
        Action::Connect {
            addr: "::2".into(),
            port: "5000".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "denied v6 address: {}", show(&out));
    let ev = net_denial(&scope, Hook::SocketConnect, 5000);
    assert_eq!(ev.family, libc::AF_INET6 as u16);

    let out = helper(
        cg,
        Action::Connect {
            addr: "::ffff:127.0.0.3".into(),
            port: "5002".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "denied v4-mapped: {}", show(&out));
    net_denial(&scope, Hook::SocketConnect, 5002);

    // UDP to the TCP grant is denied: the protocol is part of the rule.
    let out = helper(
        cg,
        Action::Sendto {
            addr: "127.0.0.1".into(),
            port: "5000".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "udp to a tcp grant: {}", show(&out));
}

#[test]
fn udp_sendto_without_connect() {
    let scope = net_scope("udp");
    let cg = Some(&scope.cg);
    assert_not_denied(
        &helper(
            cg,
            Action::Sendto {
                addr: "127.0.0.2".into(),
                port: "6000".into(),
            },
        ),
        "granted udp",
    );
    let out = helper(
        cg,
        Action::Sendto {
            addr: "127.0.0.2".into(),
            port: "6001".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "denied udp: {}", show(&out));
    let ev = net_denial(&scope, Hook::SocketSendmsg, 6001);
    assert_eq!(ev.protocol, PROTO_UDP);
}

#[test]
fn raw_and_packet_sockets_and_unix_peers_are_denied() {
    let scope = net_scope("sockets");
    let cg = Some(&scope.cg);
    let out = helper(cg, Action::SocketPacket {});
    assert_eq!(errno_of(&out), EPERM, "AF_PACKET: {}", show(&out));
    let out = helper(cg, Action::SocketRaw {});
    assert_eq!(errno_of(&out), EPERM, "SOCK_RAW: {}", show(&out));

    // A listening abstract socket and a pathname one, outside the scope.
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let name = format!("bee-abstract-{}", std::process::id());
    let _abstract =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
    let ws = Scratch::new("unix");
    let sock = ws.s("s.sock");
    let _named = UnixListener::bind(&sock).unwrap();
    let out = helper(
        cg,
        Action::UnixConnect {
            addr: format!("@{name}"),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "abstract unix peer: {}", show(&out));
    let out = helper(cg, Action::UnixConnect { addr: sock.clone() });
    assert_eq!(
        errno_of(&out),
        EPERM,
        "pathname peer without UNIX: {}",
        show(&out)
    );
    let evs = events(&scope.cg);
    denial(&evs, Hook::UnixStreamConnect, &sock, &scope);
    assert!(
        evs.iter().any(|e| e.hook == Hook::SocketCreate as u32
            && e.family == libc::AF_PACKET as u16
            && e.error == -EPERM),
        "socket denials are reported"
    );
}

#[test]
fn processes_outside_scopes_are_not_filtered() {
    let _scope = net_scope("outside");
    let out = helper(
        None,
        Action::Connect {
            addr: "127.0.0.1".into(),
            port: "5001".into(),
        },
    );
    assert_not_denied(&out, "outside any scope");
    let out = helper(None, Action::SocketRaw {});
    assert_ne!(
        errno_of(&out),
        EPERM,
        "raw socket outside any scope: {}",
        show(&out)
    );
}

#[test]
fn io_uring_connect_is_checked() {
    let scope = net_scope("uring");
    let cg = Some(&scope.cg);
    assert_not_denied(
        &helper(
            cg,
            Action::UringConnect {
                addr: "127.0.0.1".into(),
                port: "5000".into(),
            },
        ),
        "granted",
    );
    let out = helper(
        cg,
        Action::UringConnect {
            addr: "127.0.0.1".into(),
            port: "5003".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "io_uring connect: {}", show(&out));
    net_denial(&scope, Hook::SocketConnect, 5003);
}

#[test]
fn unix_datagrams_need_a_granted_peer_path() {
    let ws = Scratch::new("unix-dgram");
    let denied = ws.s("denied.sock");
    let granted = ws.s("granted.sock");
    let _d = std::os::unix::net::UnixDatagram::bind(&denied).unwrap();
    let _g = std::os::unix::net::UnixDatagram::bind(&granted).unwrap();
    let exe = std::env::current_exe().unwrap();
    let text = format!(
        r#"version = 1
[fs]
read = ["/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{exe}"]
[exec]
allow = ["/lib/**", "/lib64/**", "/usr/lib/**", "{exe}"]
[net]
unix = ["{granted}"]
"#,
        exe = exe.display()
    );
    let scope = Scope::new("unix-dgram", &text, 0);
    let cg = Some(&scope.cg);
    let out = helper(
        cg,
        Action::UnixSendto {
            addr: granted.clone(),
        },
    );
    assert_eq!(errno_of(&out), 0, "granted peer: {}", show(&out));
    let out = helper(
        cg,
        Action::UnixSendto {
            addr: denied.clone(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "ungranted peer: {}", show(&out));
    denial(&events(&scope.cg), Hook::UnixMaySend, &denied, &scope);
    // A socketpair's peer has no address: it passes.
    let out = helper(cg, Action::SocketpairDgram {});
    assert_eq!(errno_of(&out), 0, "socketpair: {}", show(&out));
}
