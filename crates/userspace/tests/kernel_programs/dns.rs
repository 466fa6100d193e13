//! Kernel tests: name grants' kernel half, in the VM matrix via `cargo xtask vm test`. A
//! scope with `SCOPE_DNS` has every port-53 peer steered to its resolver (here a fake one the
//! test runs), whose replies read as coming from the name server the scope addressed; port
//! 853 is denied; an address no grant covers is a peer only while an unexpired answer of the
//! scope's resolver names it, on the answer's ports, and for no other scope.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bee_common::scope::SCOPE_DNS;
use bee_common::{NetPortRule, NetValue, PROTO_TCP};
use bee_userspace::engine::{EngineError, dns_value};

use crate::kernel_support::*;

fn policy() -> String {
    let exe = std::env::current_exe().unwrap();
    format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{exe}"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{exe}"]
"#,
        exe = exe.display()
    )
}

/// A scope whose DNS goes to `port` on loopback, both families (`SCOPE_DNS`).
fn dns_scope(name: &str, port: u16) -> Scope {
    let cg = Cgroup::create(name);
    let plan = plan(&policy());
    let mut e = engine();
    e.enable_dns().expect("enable_dns");
    e.set_dns(cg.id(), dns_value(port, true)).expect("set_dns");
    let installed = e.install(&plan, cg.id(), SCOPE_DNS).expect("install");
    drop(e);
    let _ = events(&cg);
    Scope {
        cg,
        installed: Some(installed),
    }
}

/// A fake resolver on 127.0.0.1 (UDP and TCP, one port): answers every message with
/// `answer` and records what it was sent.
struct FakeResolver {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl FakeResolver {
    fn start() -> Self {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        let tcp = TcpListener::bind(("127.0.0.1", port)).unwrap();
        // And on [::1]: IPv6 name servers are steered there (a v4-mapped target is refused
        // by the kernel for unconnected IPv6 sends).
        let udp6 = UdpSocket::bind(("::1", port)).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = udp6.recv_from(&mut buf) {
                s.lock()
                    .unwrap()
                    .push(format!("udp {}", String::from_utf8_lossy(&buf[..n])));
                let _ = udp6.send_to(b"answer", from);
            }
        });
        let s = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = udp.recv_from(&mut buf) {
                s.lock()
                    .unwrap()
                    .push(format!("udp {}", String::from_utf8_lossy(&buf[..n])));
                let _ = udp.send_to(b"answer", from);
            }
        });
        let s = Arc::clone(&seen);
        std::thread::spawn(move || {
            for conn in tcp.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut got = Vec::new();
                let _ = conn.read_to_end(&mut got);
                s.lock()
                    .unwrap()
                    .push(format!("tcp {}", String::from_utf8_lossy(&got)));
                let _ = conn.write_all(b"answer");
            }
        });
        Self { port, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// The helper's `reply from …` line (libtest prints its own lines around it).
fn reply(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("reply from "))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn port_53_is_steered_to_the_scope_resolver_and_replies_read_as_the_server() {
    let resolver = FakeResolver::start();
    let scope = dns_scope("steer", resolver.port);
    let cg = Some(&scope.cg);

    let out = helper(
        cg,
        Action::Dns {
            mode: "udp".into(),
            addr: "10.53.0.1".into(),
            port: "53".into(),
        },
    );
    assert_eq!(errno_of(&out), 0, "udp sendto: {}", show(&out));
    assert_eq!(reply(&out), "reply from 10.53.0.1:53: answer");

    let out = helper(
        cg,
        Action::Dns {
            mode: "udp-connected".into(),
            addr: "10.53.0.1".into(),
            port: "53".into(),
        },
    );
    assert_eq!(errno_of(&out), 0, "connected udp: {}", show(&out));
    assert!(reply(&out).ends_with(": answer"), "{}", show(&out));

    let out = helper(
        cg,
        Action::Dns {
            mode: "tcp".into(),
            addr: "192.0.2.53".into(),
            port: "53".into(),
        },
    );
    assert_eq!(errno_of(&out), 0, "tcp: {}", show(&out));
    assert!(reply(&out).ends_with(": answer"), "{}", show(&out));

    // IPv6 name servers, and an IPv4 one through an IPv6 socket.
    let out = helper(
        cg,
        Action::Dns {
            mode: "udp".into(),
            addr: "::ffff:10.53.0.1".into(),
            port: "53".into(),
        },
    );
    assert_eq!(errno_of(&out), 0, "v4-mapped: {}", show(&out));
    assert_eq!(reply(&out), "reply from [::ffff:10.53.0.1]:53: answer");
    let out = helper(
        cg,
        Action::Dns {
            mode: "udp".into(),
            addr: "fd00::53".into(),
            port: "53".into(),
        },
    );
    assert_eq!(errno_of(&out), 0, "v6: {}", show(&out));
    assert_eq!(reply(&out), "reply from [fd00::53]:53: answer");

    let seen = resolver.seen();
    assert_eq!(
        seen.iter().filter(|s| *s == "udp query").count(),
        4,
        "{seen:?}"
    );
    assert!(seen.contains(&"tcp query".to_owned()), "{seen:?}");

    // Nor is MPTCP, whose subflows would make the connection: port 53 over it is denied.
    let out = helper(
        cg,
        Action::ConnectMptcp {
            addr: "10.53.0.1".into(),
            port: "53".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "mptcp to port 53: {}", show(&out));

    // DNS over TLS (and QUIC) is no way around it.
    for (sendto, addr) in [(false, "10.53.0.1"), (true, "10.53.0.1"), (false, "::1")] {
        let (addr, port) = (addr.to_owned(), "853".to_owned());
        let action = if sendto {
            Action::Sendto { addr, port }
        } else {
            Action::Connect { addr, port }
        };
        let what = format!("{action:?}");
        let out = helper(cg, action);
        assert_eq!(errno_of(&out), EPERM, "{what}: {}", show(&out));
    }
}

#[test]
fn without_name_grants_port_53_is_an_ordinary_denied_port_and_others_are_not_steered() {
    let resolver = FakeResolver::start();
    let plain = Scope::new("plain", &policy(), 0);
    let out = helper(
        Some(&plain.cg),
        Action::Dns {
            mode: "udp".into(),
            addr: "10.53.0.1".into(),
            port: "53".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "{}", show(&out));

    // With a steered scope alive, a process outside every scope is left alone: its query
    // goes where it was sent (nowhere, in a guest without a network), not to the resolver.
    let _steered = dns_scope("steer-others", resolver.port);
    let out = helper(
        None,
        Action::Dns {
            mode: "udp".into(),
            addr: "10.53.0.1".into(),
            port: "53".into(),
        },
    );
    assert_ne!(errno_of(&out), 0, "{}", show(&out));
    assert!(resolver.seen().is_empty(), "{:?}", resolver.seen());
}

#[test]
fn scope_dns_without_steering_is_refused() {
    let cg = Cgroup::create("unsteered");
    let err = engine()
        .install(&plan(&policy()), cg.id(), SCOPE_DNS)
        .unwrap_err();
    assert!(matches!(err, EngineError::NoDnsSteering { .. }), "{err}");
}

fn tcp_port(port: u16) -> NetValue {
    let mut v = NetValue {
        count: 1,
        ..NetValue::default()
    };
    v.rules[0] = NetPortRule {
        first: port,
        last: port,
        protocols: PROTO_TCP,
        _pad: [0; 3],
    };
    v
}

#[test]
fn answers_open_their_ports_for_their_scope_until_they_expire() {
    let resolver = FakeResolver::start();
    let a = dns_scope("answers-a", resolver.port);
    let b = dns_scope("answers-b", resolver.port);
    let answers = engine().answers().expect("answers map");
    let peer = "127.0.0.9".parse().unwrap();

    let out = helper(
        Some(&a.cg),
        Action::Connect {
            addr: "127.0.0.9".into(),
            port: "4443".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "before any answer: {}", show(&out));

    answers
        .admit(a.id(), peer, Duration::from_secs(3), &tcp_port(4443))
        .expect("admit");
    let out = helper(
        Some(&a.cg),
        Action::Connect {
            addr: "127.0.0.9".into(),
            port: "4443".into(),
        },
    );
    assert_ne!(errno_of(&out), EPERM, "answered: {}", show(&out));
    let out = helper(
        Some(&a.cg),
        Action::Connect {
            addr: "::ffff:127.0.0.9".into(),
            port: "4443".into(),
        },
    );
    assert_ne!(errno_of(&out), EPERM, "answered, v4-mapped: {}", show(&out));
    // Only its ports and protocol, and only for its scope.
    let out = helper(
        Some(&a.cg),
        Action::Connect {
            addr: "127.0.0.9".into(),
            port: "4444".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "another port: {}", show(&out));
    let out = helper(
        Some(&a.cg),
        Action::Sendto {
            addr: "127.0.0.9".into(),
            port: "4443".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "udp: {}", show(&out));
    let out = helper(
        Some(&b.cg),
        Action::Connect {
            addr: "127.0.0.9".into(),
            port: "4443".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "another scope: {}", show(&out));

    std::thread::sleep(Duration::from_millis(3500));
    let out = helper(
        Some(&a.cg),
        Action::Connect {
            addr: "127.0.0.9".into(),
            port: "4443".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "after the TTL: {}", show(&out));
    assert_eq!(answers.sweep(bee_userspace::engine::boot_time_ns()), 1);

    // Uninstalling a scope takes its answers with it.
    answers
        .admit(a.id(), peer, Duration::from_secs(60), &tcp_port(4443))
        .expect("admit");
    let id = a.id();
    drop(a);
    assert_eq!(answers.forget_scope(id), 0, "answers left after uninstall");
}
