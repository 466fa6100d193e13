//! The Landlock engine's network gate on the running kernel, natively (root, Landlock and
//! cgroup socket programs; no BPF LSM): name grants end to end through the same scenarios the
//! BPF LSM engine runs in the VM (`kernel_support::names`), then what only the gate decides
//! (UDP, addresses, one family, the resolver's port, a live policy change), each tried
//! around. The helper is this test binary, launched into each scope by the Landlock launcher.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a step that fails fails the test"
)]

mod kernel_support;
mod landlock_support;

use std::io::Read as _;
use std::sync::OnceLock;
use std::time::Duration;

use bee_common::{AuditEvent, Hook};
use bee_core::{CompileOptions, CompiledPolicy};
use bee_userspace::cgroup::CgroupParent;
use bee_userspace::landlock::LandlockEngine;
use bee_userspace::launch::{StdioMode, exit_code};
use bee_userspace::scope::{Enforcer, Scope, ScopeOptions};
use kernel_support::names::{self, NameScope, denied, name_servers};
use kernel_support::{Action, EPERM, helper_spec};
use landlock_support::policy_text;

helper_entry!();

/// The process's one engine, made after the name servers started (its resolvers read their
/// upstream when each starts).
fn engine() -> &'static LandlockEngine {
    static ENGINE: OnceLock<LandlockEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        // SAFETY: geteuid has no preconditions.
        assert_eq!(unsafe { libc::geteuid() }, 0, "the gate tests need root");
        name_servers();
        LandlockEngine::new().expect("this kernel runs Landlock")
    })
}

/// A second engine, as another bee process would hold: a gate of its own.
fn other_engine() -> &'static LandlockEngine {
    static OTHER: OnceLock<LandlockEngine> = OnceLock::new();
    OTHER.get_or_init(|| {
        engine();
        LandlockEngine::new().expect("this kernel runs Landlock")
    })
}

/// A policy granting this test binary and `net` (TOML tables).
fn policy(net: &str) -> &'static CompiledPolicy {
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_str().unwrap();
    let text = policy_text(&[exe], &[], &[exe], net);
    let options = CompileOptions {
        base: std::env::temp_dir(),
        home: None,
    };
    let compiled = bee_core::compile_str("gate.toml", &text, &options)
        .unwrap_or_else(|e| panic!("{e:?}"))
        .policy;
    Box::leak(Box::new(compiled))
}

fn hosts_policy(hosts: &[&str]) -> &'static CompiledPolicy {
    let hosts: Vec<String> = hosts.iter().map(|h| format!("{h:?}")).collect();
    policy(&format!(
        "[[net.allow]]\nhost = [{}]\nports = [8443]\nproto = \"tcp\"\n",
        hosts.join(", ")
    ))
}

/// A scope of the Landlock engine, gated.
struct Gated {
    scope: Scope<'static, LandlockEngine>,
}

impl Gated {
    fn new(policy: &'static CompiledPolicy) -> Self {
        Self::on(engine(), policy)
    }

    /// A scope of `engine`, which may be another than the process's own (standing for
    /// another bee process: its gate is loaded apart, its maps its own but the one shared).
    fn on(engine: &'static LandlockEngine, policy: &'static CompiledPolicy) -> Self {
        let planned = engine.plan(policy).unwrap_or_else(|e| panic!("{e}"));
        assert!(planned.gated(), "the plan does not use the gate");
        let parent = CgroupParent::open_default().expect("a cgroup2 hierarchy");
        let scope = Scope::create_for_policy(engine, &parent, policy, ScopeOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        Self { scope }
    }

    fn names(hosts: &[&str]) -> Self {
        Self::new(hosts_policy(hosts))
    }

    fn events(&self) -> Vec<AuditEvent> {
        // Drained from every engine: the scope's own holds its events, the others none.
        let mut events = engine().drain_events(self.scope.cgroup_id());
        events.extend(other_engine().drain_events(self.scope.cgroup_id()));
        events
    }
}

impl NameScope for Gated {
    fn act(&self, action: Action) -> (i32, String) {
        let spec = helper_spec(&action).stderr(StdioMode::Piped);
        let mut launched = self.scope.spawn(&spec).unwrap_or_else(|e| panic!("{e}"));
        let mut out = launched.take_stdout().unwrap();
        let mut err = launched.take_stderr().unwrap();
        let t = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let mut stdout = String::new();
        out.read_to_string(&mut stdout).unwrap();
        let stderr = t.join().unwrap();
        let status = launched
            .wait_timeout(Some(Duration::from_secs(60)))
            .unwrap()
            .expect("the helper ended");
        (exit_code(status), format!("{stdout}{stderr}"))
    }

    fn refusals(&self) -> Vec<AuditEvent> {
        self.events()
    }
}

#[test]
fn a_granted_name_resolves_and_connects_and_an_ungranted_one_never_leaves() {
    names::a_granted_name_resolves_and_connects_and_an_ungranted_one_never_leaves(&Gated::names(
        &["granted.test", "*.granted.test"],
    ));
}

#[test]
fn a_query_carrying_data_and_queries_to_other_servers_never_leave() {
    names::a_query_carrying_data_and_queries_to_other_servers_never_leave(&Gated::names(&[
        "granted.test",
    ]));
}

#[test]
fn answers_expire_and_aliases_and_special_addresses_are_refused() {
    names::answers_expire_and_aliases_and_special_addresses_are_refused(&Gated::names(&[
        "*.granted.test",
    ]));
}

#[test]
fn concurrent_scopes_with_different_names_share_no_answers() {
    names::concurrent_scopes_with_different_names_share_no_answers(
        &Gated::names(&["granted.test"]),
        &Gated::names(&["b.test"]),
    );
}

/// The gate's refusals of one scope, as (hook, address text, port).
fn refused_peers(scope: &Gated) -> Vec<(u32, String, u16)> {
    scope
        .events()
        .into_iter()
        .filter(|e| e.hook == Hook::SocketConnect as u32 || e.hook == Hook::SocketSendmsg as u32)
        .map(|e| {
            let addr = if e.family == libc::AF_INET as u16 {
                std::net::Ipv4Addr::new(e.addr[0], e.addr[1], e.addr[2], e.addr[3]).to_string()
            } else {
                std::net::Ipv6Addr::from(e.addr).to_string()
            };
            (e.hook, addr, e.port)
        })
        .collect()
}

#[test]
fn udp_and_addresses_reach_only_what_is_granted_in_every_family_and_form() {
    let scope = Gated::new(policy(
        "[[net.allow]]\naddr = [\"192.0.2.40/32\"]\nports = [5000]\nproto = \"udp\"\n\
         [[net.allow]]\naddr = [\"192.0.2.41/32\"]\nports = [8000]\nproto = \"tcp\"\n\
         [[net.allow]]\naddr = [\"2001:db8::/32\"]\nports = [9000]\nproto = \"tcp\"\n",
    ));
    // UDP: the granted address and port only, whatever form the address takes.
    assert_eq!(scope.sendto("192.0.2.40", "5000"), 0);
    assert_eq!(scope.sendto("::ffff:192.0.2.40", "5000"), 0, "v4-mapped");
    assert_eq!(scope.sendto("192.0.2.40", "5001"), EPERM, "another port");
    assert_eq!(scope.sendto("192.0.2.42", "5000"), EPERM, "another address");
    assert_eq!(
        scope.sendto("::ffff:192.0.2.42", "5000"),
        EPERM,
        "another address, v4-mapped"
    );
    assert_eq!(scope.sendto("192.0.2.41", "8000"), EPERM, "a TCP grant's");
    // IPv6 addresses that end in the granted one but are not v4-mapped: each bit of the
    // mapped prefix (80 zeros, then 0xffff) counts.
    for unmapped in [
        "::192.0.2.40",
        "::fffe:192.0.2.40",
        "::1:ffff:192.0.2.40",
        "0:0:0:1:0:ffff:192.0.2.40",
        "0:0:1::ffff:192.0.2.40",
        "64:ff9b::192.0.2.40",
        "8000::ffff:192.0.2.40",
    ] {
        assert_eq!(scope.sendto(unmapped, "5000"), EPERM, "{unmapped}");
    }
    // An AF_UNSPEC name reads as IPv4; two datagrams in one call are each decided.
    let (errno, _) = scope.act(Action::UdpUnspec {
        addr: "192.0.2.42".into(),
        port: "5000".into(),
    });
    assert_eq!(errno, EPERM, "AF_UNSPEC");
    let (errno, _) = scope.act(Action::UdpUnspec {
        addr: "192.0.2.40".into(),
        port: "5000".into(),
    });
    assert_eq!(errno, 0, "AF_UNSPEC to the granted address");
    let (errno, _) = scope.act(Action::Sendmmsg {
        addr: "192.0.2.42".into(),
        port: "5000".into(),
    });
    assert_eq!(errno, EPERM, "sendmmsg");
    // TCP: the port is Landlock's (EACCES) unless some rule grants it; the address the gate's.
    assert_eq!(scope.connect("192.0.2.41", "8000"), 0);
    assert_eq!(scope.connect("::ffff:192.0.2.41", "8000"), 0, "v4-mapped");
    assert_eq!(
        scope.connect("192.0.2.42", "8000"),
        EPERM,
        "another address"
    );
    assert_eq!(
        scope.connect("::ffff:192.0.2.42", "8000"),
        EPERM,
        "another address, v4-mapped"
    );
    assert_eq!(
        scope.connect("192.0.2.41", "9000"),
        EPERM,
        "the v6 grant's port"
    );
    assert!(
        denied(scope.connect("192.0.2.41", "8001")),
        "a port no rule grants"
    );
    // Name servers: with no name grant, port 53 is an ordinary port, and not granted.
    assert_eq!(scope.sendto("192.0.2.1", "53"), EPERM);
    assert!(denied(scope.connect("192.0.2.1", "53")));
    let refused = refused_peers(&scope);
    // Each as its hook saw it: a v4-mapped peer of a TCP connect stays one; the kernel hands
    // a v4-mapped UDP datagram to the IPv4 hook as IPv4.
    for (hook, addr, port) in [
        (Hook::SocketSendmsg, "192.0.2.40", 5001),
        (Hook::SocketSendmsg, "192.0.2.42", 5000),
        (Hook::SocketConnect, "192.0.2.42", 8000),
        (Hook::SocketConnect, "::ffff:192.0.2.42", 8000),
    ] {
        assert!(
            refused.contains(&(hook as u32, addr.to_owned(), port)),
            "{hook:?} {addr}:{port} not reported: {refused:?}"
        );
    }
}

#[test]
fn no_socket_kind_goes_around_the_gate() {
    let scope = Gated::names(&["granted.test"]);
    // Every way of sending to port 53 ends at the scope's resolver: the upstream is never
    // asked for an ungranted name, whatever server or form.
    for (mode, server) in [
        ("udp", "192.0.2.1"),
        ("tcp", "192.0.2.1"),
        ("udp", names::UPSTREAM),
        ("tcp", "::ffff:127.0.0.2"),
        ("tcp", names::OTHER_SERVER),
    ] {
        let (errno, out) = scope.act(Action::Resolve {
            mode: mode.into(),
            name: "leak.evil.test".into(),
            server: server.into(),
        });
        assert_eq!(errno, 0, "{mode} {server}: {out}");
        assert!(out.contains("rcode=3"), "{mode} {server}: {out}");
    }
    assert!(
        !name_servers().0.asked().iter().any(|n| n.contains("evil")),
        "{:?}",
        name_servers().0.asked()
    );
    // Raw, ICMP, SCTP, UDP-Lite, MPTCP and packet sockets are never made, so nothing goes
    // around the programs.
    for kind in [
        "raw-udp",
        "raw-tcp",
        "packet-dgram",
        "sctp",
        "udplite",
        "icmp",
    ] {
        let (errno, out) = scope.act(Action::SocketTry { kind: kind.into() });
        assert_eq!(errno, EPERM, "{kind}: {out}");
    }
    let (errno, out) = scope.act(Action::ConnectMptcp {
        addr: "192.0.2.20".into(),
        port: "8443".into(),
    });
    assert_eq!(errno, EPERM, "mptcp: {out}");
}

/// A resolver answers only its own scope: a scope of another bee process (its own gate) that
/// may reach every loopback port over UDP and TCP still cannot query it, so it cannot have
/// names it was not granted resolved, nor make refusals appear in the other scope's report.
#[test]
fn another_processs_scope_cannot_use_this_scopes_resolver() {
    let owner = Gated::names(&["granted.test"]);
    // The resolver's port, as the owner's steered TCP connection sees its peer.
    let (errno, out) = owner.act(Action::Dns {
        mode: "tcp".into(),
        addr: "192.0.2.1".into(),
        port: "53".into(),
    });
    assert_eq!(errno, 0, "{out}");
    let port = out
        .split("reply from 127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .unwrap_or_else(|| panic!("no resolver peer in {out}"))
        .to_owned();
    let intruder = Gated::on(
        other_engine(),
        policy(
            "[[net.allow]]\naddr = [\"127.0.0.0/8\", \"::1/128\"]\nports = [\"1024-65535\"]\nproto = [\"tcp\", \"udp\"]\n",
        ),
    );
    for mode in ["udp", "tcp"] {
        for addr in ["127.0.0.1", "::ffff:127.0.0.1"] {
            let (errno, out) = intruder.act(Action::Dns {
                mode: mode.into(),
                addr: addr.into(),
                port: port.clone(),
            });
            assert_eq!(errno, EPERM, "{mode} to {addr}:{port}: {out}");
        }
    }
    // A loopback port that is no resolver's stays reachable as granted.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let free = listener.local_addr().unwrap().port().to_string();
    assert_eq!(intruder.connect("127.0.0.1", &free), 0);
}

/// Issue "hold under load": 50 gated scopes resolving at once while a 51st floods 100,000
/// distinct names; none of the 50 fails (the flooder's answers stay within its quota).
#[test]
fn a_flooding_scope_fails_alone() {
    let flooder = Gated::names(&["*.flood.test"]);
    let others: Vec<Gated> = (0..50).map(|_| Gated::names(&["*.load.test"])).collect();
    let others: Vec<&(dyn NameScope + Sync)> = others
        .iter()
        .map(|g| g as &(dyn NameScope + Sync))
        .collect();
    names::a_flooding_scope_fails_alone(&flooder, &others, 100_000, 4);
}

/// A gated scope binds a UDP socket only to port 0 (a port the kernel picks): bound to a port
/// of its choosing it would receive what any host process sends there, and with
/// `SO_REUSEPORT` it would join a host service's group on that port and take a share of the
/// service's datagrams (the BPF LSM engine's `socket_bind` refuses the same).
#[test]
fn a_udp_socket_binds_only_a_port_the_kernel_picks() {
    let scope = Gated::new(policy(
        "[[net.allow]]\naddr = [\"127.0.0.1/32\"]\nports = [5000]\nproto = \"udp\"\n",
    ));
    // A host service in a SO_REUSEPORT group on a free loopback port.
    let host = kernel_support::net::host_reuseport_udp(0);
    let port = host.local_addr().unwrap().port().to_string();
    let free = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port().to_string()
    };
    let bind = |addr: &str, port: &str| {
        scope
            .act(Action::Bind {
                proto: "udp".into(),
                addr: addr.into(),
                port: port.into(),
            })
            .0
    };
    assert_eq!(bind("127.0.0.1", &port), EPERM, "joining the host's group");
    assert_eq!(bind("0.0.0.0", &free), EPERM, "a free port");
    assert_eq!(bind("::", &free), EPERM, "a free port, IPv6");
    assert_eq!(bind("::ffff:127.0.0.1", &port), EPERM, "v4-mapped");
    assert_eq!(bind("127.0.0.1", "0"), 0, "a port the kernel picks");
    assert_eq!(bind("::", "0"), 0, "a port the kernel picks, IPv6");
    // The host's service still gets every datagram sent to it.
    kernel_support::net::assert_host_gets_every_datagram(&host);
    let binds: Vec<u16> = scope
        .events()
        .iter()
        .filter(|e| e.hook == Hook::SocketBind as u32 && e.error == -EPERM)
        .map(|e| e.port)
        .collect();
    let (port, free): (u16, u16) = (port.parse().unwrap(), free.parse().unwrap());
    assert_eq!(binds, [port, free, free, port], "socket_bind refusals");
}
