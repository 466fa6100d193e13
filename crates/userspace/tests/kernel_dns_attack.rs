//! Kernel tests: name grants attacked from inside a scope, in the VM matrix via
//! `cargo xtask vm test --test kernel_dns_attack`. A [`SharedEngine`] installs policies with
//! `host` rules (each scope gets its own resolver, forwarding to a fake upstream run here);
//! the scope's processes then try every way around the steering and the resolver that a
//! security review came up with. Each test asserts the *safe* outcome: a test that fails names
//! a hole (see the report of the review that added this file).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

mod kernel_support;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bee_userspace::engine::{EngineOptions, SharedEngine, UPSTREAM_ENV};
use bee_userspace::scope::{Enforcer, InstallId};
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use kernel_support::*;

helper_entry!();

/// The fake upstream the resolvers forward to (UDP).
const UPSTREAM: &str = "127.0.0.4";
/// A name server the scopes address and must never reach; it answers everything with
/// [`OTHER_ANSWER`], so a reply from it is told apart from the resolver's.
const OTHER_SERVER: &str = "127.0.0.5";
const OTHER_ANSWER: [u8; 4] = [198, 51, 100, 66];
/// How long the upstream waits before answering a name that starts with `slow`.
const SLOW: Duration = Duration::from_millis(1200);

/// The upstream's zone: RFC 5737 addresses (no route in the guest: an allowed connect fails
/// with `ENETUNREACH`, a denied one with `EPERM`), and one loopback answer.
fn zone(name: &str) -> Option<[u8; 4]> {
    match name {
        "granted.test" => Some([192, 0, 2, 20]),
        "slow.granted.test" => Some([192, 0, 2, 30]),
        "lo.granted.test" => Some([127, 0, 0, 1]),
        n if n.ends_with(".b.test") => Some([192, 0, 2, 24]),
        n if n.ends_with(".granted.test") => Some([192, 0, 2, 25]),
        _ => None,
    }
}

/// A UDP name server on `ip`:53 (and TCP, when `tcp`), recording `NAME TYPE` of each query.
struct NameServer {
    asked: Arc<Mutex<Vec<String>>>,
}

fn reply_to(query: &[u8], asked: &Mutex<Vec<String>>, other: bool) -> Option<(Vec<u8>, bool)> {
    let query = Message::from_vec(query).ok()?;
    let q = query.queries().first()?.clone();
    let name = q.name().to_ascii().trim_end_matches('.').to_lowercase();
    asked
        .lock()
        .unwrap()
        .push(format!("{name} {}", q.query_type()));
    let mut reply = Message::error_msg(query.id(), OpCode::Query, ResponseCode::NXDomain);
    reply.add_query(q.clone());
    let ip = if other {
        Some(OTHER_ANSWER)
    } else {
        zone(&name)
    };
    if let Some(ip) = ip {
        reply.set_response_code(ResponseCode::NoError);
        if q.query_type() == RecordType::A {
            reply.add_answer(Record::from_rdata(
                q.name().clone(),
                300,
                RData::A(A(Ipv4Addr::from(ip))),
            ));
        }
    }
    Some((reply.to_vec().ok()?, name.starts_with("slow")))
}

impl NameServer {
    fn start(ip: &str, other: bool) -> Self {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let udp = Arc::new(UdpSocket::bind((ip, 53)).unwrap());
        let log = Arc::clone(&asked);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok((n, from)) = udp.recv_from(&mut buf) {
                let Some((r, slow)) = reply_to(&buf[..n], &log, other) else {
                    log.lock().unwrap().push("unparsable".to_owned());
                    continue;
                };
                let udp = Arc::clone(&udp);
                std::thread::spawn(move || {
                    if slow {
                        std::thread::sleep(SLOW);
                    }
                    let _ = udp.send_to(&r, from);
                });
            }
        });
        if other {
            let tcp = TcpListener::bind((ip, 53)).unwrap();
            let log = Arc::clone(&asked);
            std::thread::spawn(move || {
                for conn in tcp.incoming() {
                    let Ok(mut conn) = conn else { continue };
                    let mut len = [0u8; 2];
                    if conn.read_exact(&mut len).is_err() {
                        log.lock().unwrap().push("tcp connection".to_owned());
                        continue;
                    }
                    let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
                    if conn.read_exact(&mut q).is_err() {
                        continue;
                    }
                    if let Some((r, _)) = reply_to(&q, &log, true) {
                        let mut framed = (r.len() as u16).to_be_bytes().to_vec();
                        framed.extend_from_slice(&r);
                        let _ = conn.write_all(&framed);
                    }
                }
            });
        }
        Self { asked }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

/// The engine and the two name servers, started once per process.
fn shared() -> &'static (SharedEngine, NameServer, NameServer) {
    static SHARED: OnceLock<(SharedEngine, NameServer, NameServer)> = OnceLock::new();
    SHARED.get_or_init(|| {
        assert_expected_kernel(&std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap());
        // SAFETY: set once, before any resolver thread exists, and nothing else in this
        // process reads the environment concurrently.
        unsafe { std::env::set_var(UPSTREAM_ENV, format!("{UPSTREAM}:53")) };
        let upstream = NameServer::start(UPSTREAM, false);
        let other = NameServer::start(OTHER_SERVER, true);
        let engine = SharedEngine::load(&EngineOptions::default()).expect("load");
        (engine, upstream, other)
    })
}

fn upstream_asked() -> Vec<String> {
    shared().1.asked()
}

fn other_asked() -> Vec<String> {
    shared().2.asked()
}

/// A policy granting `hosts` on TCP `port`, plus `extra` TOML (more `[[net.allow]]` tables).
fn policy(hosts: &[&str], port: u16, extra: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    let hosts: Vec<String> = hosts.iter().map(|h| format!("\"{h}\"")).collect();
    format!(
        r#"version = 2
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{exe}"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{exe}"]
[[net.allow]]
host = [{hosts}]
ports = [{port}]
proto = "tcp"
{extra}"#,
        exe = exe.display(),
        hosts = hosts.join(", ")
    )
}

/// A cgroup governed by a policy text, through the shared engine.
struct NamedScope {
    cg: Cgroup,
    id: Option<InstallId>,
}

impl NamedScope {
    fn new(name: &str, text: &str) -> Self {
        let cg = Cgroup::create(name);
        let id = shared()
            .0
            .install(&plan(text), cg.id(), 0)
            .expect("install");
        Self { cg, id: Some(id) }
    }

    fn granting(name: &str, hosts: &[&str]) -> Self {
        Self::new(name, &policy(hosts, 8443, ""))
    }

    fn connect(&self, addr: &str, port: &str) -> i32 {
        errno_of(&helper(
            Some(&self.cg),
            Action::Connect {
                addr: addr.into(),
                port: port.into(),
            },
        ))
    }

    /// `dns-raw MODE ADDRS PORT HEX` in the scope: the errno and the reply lines.
    fn raw(&self, mode: &str, addrs: &str, port: u16, msg: &[u8]) -> (i32, Vec<String>) {
        let out = helper(
            Some(&self.cg),
            Action::DnsRaw {
                mode: mode.into(),
                addrs: addrs.into(),
                port: port.to_string(),
                hex: hex(msg),
            },
        );
        let lines = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("rcode=") || l.starts_with("sent="))
            .map(str::to_owned)
            .collect();
        (errno_of(&out), lines)
    }
}

impl Drop for NamedScope {
    fn drop(&mut self) {
        self.cg.kill_all();
        if let Some(id) = self.id.take() {
            shared().0.uninstall(id).expect("uninstall");
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An A query for `name`, as hickory encodes it (recursion desired).
fn query(name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(0x5151)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

/// A query in wire form built by hand: `opcode`, and questions of raw labels, type and class.
fn wire(opcode: u8, questions: &[(&[&[u8]], u16, u16)]) -> Vec<u8> {
    let mut w = vec![0x61, 0x61, (opcode << 3) | 1, 0];
    w.extend_from_slice(&(questions.len() as u16).to_be_bytes());
    w.extend_from_slice(&[0; 6]);
    for (labels, qtype, qclass) in questions {
        for l in *labels {
            w.push(l.len() as u8);
            w.extend_from_slice(l);
        }
        w.push(0);
        w.extend_from_slice(&qtype.to_be_bytes());
        w.extend_from_slice(&qclass.to_be_bytes());
    }
    w
}

const NXDOMAIN: &str = "rcode=3 answers=0";

/// The ways of sending a query to port 53 an attacker might try; each must end at the scope's
/// resolver (which answers an ungranted name NXDOMAIN) or fail, and never reach the server
/// the scope addressed.
#[test]
fn every_way_of_sending_to_port_53_ends_at_the_scope_resolver() {
    let scope = NamedScope::granting("atk-steer", &["granted.test"]);
    let mut holes = Vec::new();
    let cases: &[(&str, &str)] = &[
        ("udp", OTHER_SERVER),
        ("tcp", OTHER_SERVER),
        ("tfo", OTHER_SERVER),
        ("tfo-connect", OTHER_SERVER),
        ("uring-udp", OTHER_SERVER),
        ("uring-tcp", OTHER_SERVER),
        ("inet-on-v6", OTHER_SERVER),
        ("unspec-udp", OTHER_SERVER),
        ("connected-sendto", OTHER_SERVER),
        ("v6only-udp", OTHER_SERVER),
        ("v6only-tcp", OTHER_SERVER),
        ("udp", "::ffff:127.0.0.5"),
        ("tcp", "::ffff:127.0.0.5"),
        ("udp", "fd00::53"),
    ];
    for (i, (mode, addr)) in cases.iter().enumerate() {
        let name = format!("leak{i}.evil.test");
        let (errno, lines) = scope.raw(mode, addr, 53, &query(&name, RecordType::A));
        // Safe: NXDOMAIN from the resolver, or a failed call (no reply at all).
        let safe = if errno == 0 {
            lines == [NXDOMAIN]
        } else {
            lines.is_empty()
        };
        if !safe {
            holes.push(format!("{mode} to {addr}: errno {errno}, {lines:?}"));
        }
        println!("{mode} {addr}: errno {errno} {lines:?}");
    }
    // sendmmsg: three peers in one call, each steered.
    let (errno, lines) = scope.raw(
        "sendmmsg",
        &format!("{OTHER_SERVER},10.0.0.53,192.0.2.1"),
        53,
        &query("mmsg.evil.test", RecordType::A),
    );
    println!("sendmmsg: errno {errno} {lines:?}");
    if errno != 0 || lines != ["sent=3", NXDOMAIN, NXDOMAIN, NXDOMAIN] {
        holes.push(format!("sendmmsg: errno {errno}, {lines:?}"));
    }
    assert!(holes.is_empty(), "{holes:#?}");
    assert!(
        other_asked().is_empty(),
        "the addressed server was reached: {:?}",
        other_asked()
    );
    let up = upstream_asked();
    assert!(!up.iter().any(|n| n.contains("evil")), "{up:?}");
}

/// Port 53 (or anything) over a protocol the steering does not cover: the socket itself is
/// refused.
#[test]
fn other_protocols_and_raw_sockets_are_refused_at_socket_creation() {
    let scope = NamedScope::granting("atk-sockets", &["granted.test"]);
    for kind in [
        "raw-udp",
        "raw-tcp",
        "packet-dgram",
        "sctp",
        "udplite",
        "icmp",
    ] {
        let out = helper(Some(&scope.cg), Action::SocketTry { kind: kind.into() });
        assert_eq!(errno_of(&out), EPERM, "{kind}: {}", show(&out));
    }
    // MPTCP to port 53 (kernel_dns proves the denial on 10.53.0.1; here the server exists).
    let out = helper(
        Some(&scope.cg),
        Action::ConnectMptcp {
            addr: OTHER_SERVER.into(),
            port: "53".into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "mptcp: {}", show(&out));
    assert!(other_asked().is_empty(), "{:?}", other_asked());
}

/// Query names and messages shaped to get something other than the granted name forwarded.
#[test]
fn odd_names_types_and_messages_forward_nothing_but_granted_addresses() {
    let scope = NamedScope::granting("atk-names", &["granted.test", "*.granted.test"]);
    let long = "a".repeat(63);
    let before: HashSet<String> = upstream_asked().into_iter().collect();
    let a = 1u16;
    let txt = 16u16;
    let any = 255u16;
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        // Letter case and the final dot: the granted name, forwarded in its normal form.
        (
            "mixed case",
            query("GrAnTeD.TeSt.", RecordType::A),
            &["rcode=0 answers=1"],
        ),
        // A label holding a dot ("granted.test" as ONE label): not a host name.
        (
            "dotted label",
            wire(0, &[(&[b"granted.test"], a, 1)]),
            &[NXDOMAIN],
        ),
        (
            "dotted label under the wildcard",
            wire(0, &[(&[b"x.evil", b"granted", b"test"], a, 1)]),
            &[NXDOMAIN],
        ),
        (
            "NUL in a label",
            wire(0, &[(&[b"granted\0evil", b"test"], a, 1)]),
            &[NXDOMAIN],
        ),
        (
            "two labels below the wildcard",
            query("a.evil.granted.test", RecordType::A),
            &[NXDOMAIN],
        ),
        // Other types carry data (TXT) or ask for everything (ANY): never forwarded.
        (
            "TXT, ungranted",
            wire(0, &[(&[b"data", b"evil", b"test"], txt, 1)]),
            &[NXDOMAIN],
        ),
        (
            "ANY, ungranted",
            wire(0, &[(&[b"data", b"evil", b"test"], any, 1)]),
            &[NXDOMAIN],
        ),
        (
            "TXT, granted",
            wire(0, &[(&[b"granted", b"test"], txt, 1)]),
            &["rcode=0 answers=0"],
        ),
        (
            "ANY, granted",
            wire(0, &[(&[b"granted", b"test"], any, 1)]),
            &["rcode=0 answers=0"],
        ),
        (
            "CHAOS version.bind",
            wire(0, &[(&[b"version", b"bind"], txt, 3)]),
            &["rcode=5 answers=0"],
        ),
        // A granted question with an ungranted one beside it.
        (
            "two questions",
            wire(
                0,
                &[
                    (&[b"granted", b"test"], a, 1),
                    (&[b"second", b"evil", b"test"], a, 1),
                ],
            ),
            &["rcode=1 answers=0"],
        ),
        (
            "opcode NOTIFY",
            wire(4, &[(&[b"granted", b"test"], a, 1)]),
            &["rcode=4 answers=0"],
        ),
        (
            "opcode UPDATE",
            wire(5, &[(&[b"granted", b"test"], a, 1)]),
            &["rcode=4 answers=0"],
        ),
        // The longest label under the wildcard: forwarded (documented), as itself.
        (
            "63-byte label under the wildcard",
            query(&format!("{long}.granted.test"), RecordType::A),
            &["rcode=0 answers=1"],
        ),
    ];
    let mut wrong = Vec::new();
    for (what, msg, expected) in &cases {
        for mode in ["udp", "tcp"] {
            let (errno, lines) = scope.raw(mode, "10.0.0.53", 53, msg);
            if errno != 0 || lines != *expected {
                wrong.push(format!(
                    "{what} over {mode}: errno {errno}, {lines:?}, expected {expected:?}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let forwarded: HashSet<String> = upstream_asked()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    let allowed: HashSet<String> = [
        "granted.test A".to_owned(),
        format!("{long}.granted.test A"),
    ]
    .into();
    assert_eq!(forwarded, allowed, "forwarded upstream");
    assert!(other_asked().is_empty(), "{:?}", other_asked());
}

/// The 127.0.0.1 UDP ports bound right now (from /proc/net/udp).
fn loopback_udp_ports() -> HashSet<u16> {
    std::fs::read_to_string("/proc/net/udp")
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let local = l.split_whitespace().nth(1)?;
            let (ip, port) = local.split_once(':')?;
            (ip == "0100007F").then(|| u16::from_str_radix(port, 16).ok())?
        })
        .collect()
}

/// A scope whose policy grants loopback ports (a local dev server, say) can address another
/// scope's resolver directly: that resolver then forwards, under the OTHER scope's wildcard,
/// a name carrying this scope's data, and admits the answer for the other scope. Safe: a
/// resolver answers only its own scope (or the kernel keeps scopes off resolver ports).
#[test]
fn another_scopes_resolver_is_no_way_out() {
    let a = NamedScope::new(
        "atk-xa",
        &policy(
            &["granted.test"],
            8443,
            "[[net.allow]]\naddr = [\"127.0.0.1\"]\nports = [\"1024-65535\"]\nproto = \"udp\"\n",
        ),
    );
    let ports = loopback_udp_ports();
    let b = NamedScope::granting("atk-xb", &["*.b.test"]);
    let new: Vec<u16> = loopback_udp_ports().difference(&ports).copied().collect();
    assert_eq!(new.len(), 1, "b's resolver port: {new:?}");
    let b_port = new[0];

    // Without a loopback grant the port is denied like any other.
    let c = NamedScope::granting("atk-xc", &["granted.test"]);
    let (errno, _) = c.raw(
        "udp",
        "127.0.0.1",
        b_port,
        &query("x.b.test", RecordType::A),
    );
    assert_eq!(errno, EPERM, "a scope without loopback grants");

    let secret = "c2VjcmV0LWtleQ.b.test";
    let (errno, lines) = a.raw("udp", "127.0.0.1", b_port, &query(secret, RecordType::A));
    println!("a asks b's resolver for {secret}: errno {errno} {lines:?}");
    assert_eq!(
        a.connect("192.0.2.24", "8443"),
        EPERM,
        "b's answer opened an address for a"
    );
    assert!(
        !upstream_asked().iter().any(|n| n.starts_with("c2vjcmv0")),
        "scope a's query for a name only scope b grants left the machine through b's \
         resolver: {:?} (a got {lines:?})",
        upstream_asked()
    );
    drop(b);
}

/// A live policy change that drops a name, while a query for it is upstream: the answer
/// arrives after the change withdrew the old answers, and must not open the address.
#[test]
fn a_query_in_flight_during_a_policy_change_does_not_reopen_a_dropped_name() {
    let scope = NamedScope::granting("atk-regrant", &["granted.test", "slow.granted.test"]);
    let child = helper_spawn(
        &scope.cg,
        Action::Resolve {
            mode: "udp".into(),
            name: "slow.granted.test".into(),
            server: "10.0.0.53".into(),
        },
    );
    // The query is now waiting upstream (SLOW).
    std::thread::sleep(Duration::from_millis(400));
    shared()
        .0
        .replace(
            scope.id.unwrap(),
            &plan(&policy(&["granted.test"], 8443, "")),
        )
        .expect("replace");
    let out = child.wait_with_output().unwrap();
    println!("in-flight resolve: {}", show(&out));
    assert!(
        upstream_asked().contains(&"slow.granted.test A".to_owned()),
        "{:?}",
        upstream_asked()
    );
    assert_eq!(
        scope.connect("192.0.2.30", "8443"),
        EPERM,
        "the dropped name's address is open after the policy change ({})",
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.starts_with("rcode="))
            .unwrap_or_default()
    );
}

/// An address grant for a loopback port lets a name's answer hold the loopback address; the
/// answer must then open no more than the address grant did (here: 5432, not the name's 8443).
#[test]
fn a_loopback_answer_opens_only_what_the_address_grant_opens() {
    let scope = NamedScope::new(
        "atk-lo",
        &policy(
            &["lo.granted.test"],
            8443,
            "[[net.allow]]\naddr = [\"127.0.0.1\"]\nports = [5432]\nproto = \"tcp\"\n",
        ),
    );
    assert_eq!(
        scope.connect("127.0.0.1", "8443"),
        EPERM,
        "before any answer"
    );
    let out = helper(
        Some(&scope.cg),
        Action::Resolve {
            mode: "udp".into(),
            name: "lo.granted.test".into(),
            server: "10.0.0.53".into(),
        },
    );
    println!("resolve lo.granted.test: {}", show(&out));
    assert_ne!(
        scope.connect("127.0.0.1", "5432"),
        EPERM,
        "the address grant"
    );
    assert_eq!(
        scope.connect("127.0.0.1", "8443"),
        EPERM,
        "a name answered with 127.0.0.1 opened 127.0.0.1 on the name's port, which no \
         address grant covers"
    );
}

/// Two concurrent scopes granting the same name on different ports: one's resolution opens
/// nothing for the other, on neither port.
#[test]
fn the_same_name_in_two_scopes_opens_each_only_its_own_ports() {
    let a = NamedScope::new("atk-same-a", &policy(&["granted.test"], 8443, ""));
    let b = NamedScope::new("atk-same-b", &policy(&["granted.test"], 9443, ""));
    let (errno, lines) = a.raw(
        "udp",
        "10.0.0.53",
        53,
        &query("granted.test", RecordType::A),
    );
    assert_eq!((errno, lines), (0, vec!["rcode=0 answers=1".to_owned()]));
    assert_ne!(a.connect("192.0.2.20", "8443"), EPERM);
    assert_eq!(a.connect("192.0.2.20", "9443"), EPERM, "a on b's port");
    assert_eq!(
        b.connect("192.0.2.20", "9443"),
        EPERM,
        "b without resolving"
    );
    assert_eq!(b.connect("192.0.2.20", "8443"), EPERM, "b on a's port");
    let (errno, lines) = b.raw(
        "tcp",
        "10.0.0.53",
        53,
        &query("granted.test", RecordType::A),
    );
    assert_eq!((errno, lines), (0, vec!["rcode=0 answers=1".to_owned()]));
    assert_ne!(b.connect("192.0.2.20", "9443"), EPERM);
    assert_eq!(
        b.connect("192.0.2.20", "8443"),
        EPERM,
        "b on a's port, resolved"
    );
}

/// Answers are keyed by cgroup id; a recycled id would hand a dead scope's answers to a new
/// one. cgroup ids are kernfs node ids: 64-bit, allocated cyclically, never reused while
/// they last. Creating and removing cgroups must never give an id twice.
#[test]
fn cgroup_ids_are_not_recycled() {
    let mut seen = HashSet::new();
    let mut last = 0u64;
    for i in 0..300 {
        let cg = Cgroup::create(&format!("atk-ids-{i}"));
        let id = cg.id();
        assert!(seen.insert(id), "cgroup id {id} given twice");
        assert!(id > last, "cgroup id {id} after {last}");
        last = id;
        drop(cg);
    }
}
