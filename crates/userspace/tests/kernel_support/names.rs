//! Name grants end to end, for either engine: a fake authoritative name server (the scope
//! resolvers' upstream, `BEE_DNS_UPSTREAM`), a second one the scopes must never reach, and
//! the scenarios `kernel_names` (the BPF LSM engine, in the VM) and `landlock_gate` (the
//! Landlock engine's network gate, natively) both run, each through its own [`NameScope`].

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bee_common::event::{DNS_REFUSED_ADDRESS, DNS_REFUSED_ALIAS, DNS_REFUSED_NAME};
use bee_common::{AuditEvent, Hook};
use bee_userspace::engine::UPSTREAM_ENV;
use hickory_proto::op::{Message, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::{Action, EPERM};

/// Where the fake authoritative server listens (UDP and TCP).
pub const UPSTREAM: &str = "127.0.0.2";
/// A second name server, which the scopes must never reach.
pub const OTHER_SERVER: &str = "127.0.0.3";

fn record(owner: &str, ttl: u32, data: RData) -> Record {
    Record::from_rdata(Name::from_ascii(owner).unwrap(), ttl, data)
}

fn a(owner: &str, ttl: u32, ip: [u8; 4]) -> Record {
    record(owner, ttl, RData::A(A(Ipv4Addr::from(ip))))
}

/// The zone the fake server answers from. Its addresses are documentation ones (RFC 5737):
/// the resolver refuses loopback and private answers. Connects are non-blocking, so an
/// allowed one starts (`EINPROGRESS`) or finds no route (`ENETUNREACH`, in the VM), and a
/// denied one fails at once with `EPERM` (or `EACCES` from Landlock's port rules).
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

/// The load test's names, answered without a zone: `f{n}.flood.test` with `11.x.y.z` (`n`'s
/// low 24 bits) and `s{i}-{k}.load.test` with `12.i.k/256.k%256`, each for 300 s (addresses the
/// resolver does not count as special, all distinct).
fn synthetic(name: &str) -> Option<Record> {
    if let Some(n) = name
        .strip_suffix(".flood.test")
        .and_then(|l| l.strip_prefix('f'))
        .and_then(|n| n.parse::<u32>().ok())
    {
        let [_, x, y, z] = n.to_be_bytes();
        return Some(a(name, 300, [11, x, y, z]));
    }
    let (i, k) = name
        .strip_suffix(".load.test")?
        .strip_prefix('s')?
        .split_once('-')?;
    let k: u16 = k.parse().ok()?;
    let [x, y] = k.to_be_bytes();
    Some(a(name, 300, [12, i.parse().ok()?, x, y]))
}

/// A name server on `ip`:53 answering from [`zone`] and recording every name it is asked.
pub struct NameServer {
    asked: Arc<Mutex<Vec<String>>>,
}

fn answer(query: &[u8], asked: &Mutex<Vec<String>>) -> Option<Vec<u8>> {
    let query = Message::from_vec(query).ok()?;
    let q = query.queries().first()?.clone();
    let name = q.name().to_ascii().trim_end_matches('.').to_lowercase();
    asked.lock().unwrap().push(name.clone());
    let mut reply = Message::error_msg(query.id(), OpCode::Query, ResponseCode::NXDomain);
    reply.add_query(q.clone());
    if let Some(record) = synthetic(&name) {
        reply.set_response_code(ResponseCode::NoError);
        if q.query_type() == RecordType::A {
            reply.add_answer(record);
        }
    } else if let Some(records) = zone().get(&name) {
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
    pub fn start(ip: &str) -> Self {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let udp = UdpSocket::bind((ip, 53)).unwrap();
        let tcp = TcpListener::bind((ip, 53)).unwrap();
        // Two threads on the UDP socket: the load test keeps it busy.
        for udp in [udp.try_clone().unwrap(), udp] {
            let log = Arc::clone(&asked);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok((n, from)) = udp.recv_from(&mut buf) {
                    if let Some(r) = answer(&buf[..n], &log) {
                        let _ = udp.send_to(&r, from);
                    }
                }
            });
        }
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

    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

/// The two name servers, started once per test binary, the resolvers' upstream set to the
/// first.
pub fn name_servers() -> &'static (NameServer, NameServer) {
    static SERVERS: OnceLock<(NameServer, NameServer)> = OnceLock::new();
    SERVERS.get_or_init(|| {
        // SAFETY: set once, before any resolver thread exists (the first test to get here
        // starts them), and nothing else in this process reads the environment concurrently.
        unsafe { std::env::set_var(UPSTREAM_ENV, format!("{UPSTREAM}:53")) };
        (NameServer::start(UPSTREAM), NameServer::start(OTHER_SERVER))
    })
}

/// A scope whose policy grants some names on TCP port 8443, as an engine confines it.
pub trait NameScope {
    /// Runs `action` in the scope; its errno (0: success) and standard output.
    fn act(&self, action: Action) -> (i32, String);
    /// The scope's resolver's refusals reported so far (hook `DnsQuery`).
    fn refusals(&self) -> Vec<AuditEvent>;

    /// Resolves `name` through `server` on port 53 over `mode`; the `rcode=… addrs=…` line.
    fn resolve(&self, mode: &str, name: &str, server: &str) -> String {
        let (errno, out) = self.act(Action::Resolve {
            mode: mode.into(),
            name: name.into(),
            server: server.into(),
        });
        assert_eq!(errno, 0, "resolve {name}: {out}");
        out.lines()
            .find(|l| l.starts_with("rcode="))
            .unwrap_or_default()
            .to_owned()
    }

    /// A non-blocking TCP connect to `addr:port`: 0 when the kernel let it start.
    fn connect(&self, addr: &str, port: &str) -> i32 {
        self.act(Action::Connect {
            addr: addr.into(),
            port: port.into(),
        })
        .0
    }

    /// A UDP datagram to `addr:port`.
    fn sendto(&self, addr: &str, port: &str) -> i32 {
        self.act(Action::Sendto {
            addr: addr.into(),
            port: port.into(),
        })
        .0
    }
}

/// Whether `errno` is a denial: `EPERM` from bee's programs, `EACCES` from Landlock's TCP
/// port rules (which the Landlock engine stacks in front of its gate).
pub fn denied(errno: i32) -> bool {
    errno == EPERM || errno == libc::EACCES
}

fn path_of(e: &AuditEvent) -> String {
    String::from_utf8_lossy(e.path()).into_owned()
}

fn dns_refusals(scope: &dyn NameScope) -> Vec<AuditEvent> {
    scope
        .refusals()
        .into_iter()
        .filter(|e| e.hook == Hook::DnsQuery as u32)
        .collect()
}

/// Granted `granted.test` and `*.granted.test`: a granted name resolves through any server
/// and opens its address on its port only; an ungranted one never leaves the machine.
pub fn a_granted_name_resolves_and_connects_and_an_ungranted_one_never_leaves(
    scope: &dyn NameScope,
) {
    // Any name server the scope names on port 53 is bee's resolver.
    assert_eq!(
        scope.resolve("udp", "granted.test", "10.0.0.53"),
        "rcode=0 addrs=192.0.2.20"
    );
    assert!(
        !denied(scope.connect("192.0.2.20", "8443")),
        "the answered address"
    );
    assert!(denied(scope.connect("192.0.2.20", "8444")), "another port");
    assert!(
        denied(scope.connect("192.0.2.23", "8443")),
        "an address never answered"
    );

    assert_eq!(
        scope.resolve("udp", "other.test", "10.0.0.53"),
        "rcode=3 addrs="
    );
    let asked = name_servers().0.asked();
    assert!(asked.contains(&"granted.test".to_owned()), "{asked:?}");
    assert!(!asked.contains(&"other.test".to_owned()), "{asked:?}");
    let refused = dns_refusals(scope);
    assert!(
        refused
            .iter()
            .any(|e| path_of(e) == "other.test" && e.port == DNS_REFUSED_NAME && e.error != 0),
        "{} refusals",
        refused.len()
    );
}

/// Granted `granted.test`: a query carrying data, to any server and over either protocol,
/// is answered here and never forwarded; DNS over TLS and QUIC is refused.
pub fn a_query_carrying_data_and_queries_to_other_servers_never_leave(scope: &dyn NameScope) {
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
        name_servers().1.asked().is_empty(),
        "the other name server was reached: {:?}",
        name_servers().1.asked()
    );
    assert!(
        !name_servers().0.asked().iter().any(|n| n.contains("evil")),
        "{:?}",
        name_servers().0.asked()
    );
    // DNS over TLS and over QUIC: denied, whatever the address.
    assert!(denied(scope.connect(OTHER_SERVER, "853")));
    assert_eq!(scope.sendto("192.0.2.1", "853"), EPERM);
}

/// Granted `*.granted.test`: answers expire, an alias to an ungranted name and a metadata
/// address are refused and reported.
pub fn answers_expire_and_aliases_and_special_addresses_are_refused(scope: &dyn NameScope) {
    assert_eq!(
        scope.resolve("udp", "short.granted.test", "10.0.0.53"),
        "rcode=0 addrs=192.0.2.21"
    );
    assert!(
        !denied(scope.connect("192.0.2.21", "8443")),
        "a live answer"
    );
    // A TTL of 1 s is held for the 5 s minimum, then the address is no peer.
    std::thread::sleep(Duration::from_secs(6));
    assert!(denied(scope.connect("192.0.2.21", "8443")), "after the TTL");

    let r = scope.resolve("udp", "alias.granted.test", "10.0.0.53");
    assert!(r.starts_with("rcode=3"), "{r}");
    assert!(
        denied(scope.connect("192.0.2.22", "8443")),
        "the alias's address"
    );

    let r = scope.resolve("udp", "meta.granted.test", "10.0.0.53");
    assert!(!r.contains("169.254.169.254"), "{r}");
    assert!(denied(scope.connect("169.254.169.254", "8443")), "metadata");

    let refused = dns_refusals(scope);
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

/// `a` granted `granted.test`, `b` granted `b.test`, alive at once: neither reaches the
/// other's answers.
pub fn concurrent_scopes_with_different_names_share_no_answers(
    a: &dyn NameScope,
    b: &dyn NameScope,
) {
    assert_eq!(
        a.resolve("udp", "granted.test", "10.0.0.53"),
        "rcode=0 addrs=192.0.2.20"
    );
    assert_eq!(
        b.resolve("udp", "b.test", "10.0.0.53"),
        "rcode=0 addrs=192.0.2.24"
    );
    assert!(!denied(a.connect("192.0.2.20", "8443")));
    assert!(denied(b.connect("192.0.2.20", "8443")), "a's answer in b");
    assert!(denied(a.connect("192.0.2.24", "8443")), "b's answer in a");
    assert_eq!(
        b.resolve("udp", "granted.test", "10.0.0.53"),
        "rcode=3 addrs="
    );
}

/// What one `resolve-many` run reported: lookups that succeeded, that failed, and each one's
/// microseconds.
struct Many {
    ok: usize,
    failed: usize,
    lat: Vec<u32>,
    why: String,
    retried: usize,
    /// Milliseconds after its start time the run began asking (0: it was ready in time).
    late: u64,
}

/// The `resolve-many` helper in `scope`, asking from `start` on (milliseconds since the Unix
/// epoch; 0: at once).
fn resolve_many(
    scope: &dyn NameScope,
    prefix: &str,
    suffix: &str,
    count: usize,
    rounds: usize,
    threads: usize,
    start: u64,
) -> Many {
    let (errno, out) = scope.act(Action::ResolveMany {
        prefix: prefix.into(),
        suffix: suffix.into(),
        count: count.to_string(),
        rounds: rounds.to_string(),
        threads: threads.to_string(),
        start: start.to_string(),
    });
    assert_eq!(errno, 0, "resolve-many {prefix}…{suffix}: {out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("ok="))
        .unwrap_or_else(|| panic!("no result: {out}"));
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap_or_default()
            .to_owned()
    };
    Many {
        ok: field("ok=").parse().unwrap(),
        failed: field("failed=").parse().unwrap(),
        lat: field("lat=")
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect(),
        why: field("why="),
        retried: field("retried=").parse().unwrap(),
        late: field("late=").parse().unwrap(),
    }
}

/// The `p`th percentile of `lat` (sorted here), in microseconds.
fn percentile(lat: &mut [u32], p: f64) -> u32 {
    lat.sort_unstable();
    let i = ((lat.len() as f64 - 1.0) * p / 100.0).round() as usize;
    lat.get(i).copied().unwrap_or(0)
}

/// Distinct names each of `others` resolves per round, and how many times over (the repeats
/// are answered from its resolver's cache).
const LOAD_NAMES: usize = 10;
const LOAD_ROUNDS: usize = 2;

/// How long a round's helpers get to start before they all begin asking at once: starting 50
/// processes is itself a load, which the lookups' latencies must not include. 2 s; 20 s in
/// the VM's emulated guests (`BEE_VM_KERNEL` set), where 50 processes take seconds to start.
fn start_margin() -> std::time::Duration {
    if std::env::var_os("BEE_VM_KERNEL").is_some() {
        std::time::Duration::from_secs(20)
    } else {
        std::time::Duration::from_secs(2)
    }
}

/// What one round of the 50 gave: every lookup's latency, how many were sent twice (after a
/// 5 s timeout), and how late the latest helper began (ms; 0: all were ready in time).
struct Round {
    lat: Vec<u32>,
    retried: usize,
    late: u64,
}

/// One round of `others` at once, each resolving its own [`LOAD_NAMES`] names of round `round`
/// ([`LOAD_ROUNDS`] times over) from the same instant ([`start_margin`] from now); every
/// lookup must succeed.
fn load_round(others: &[&(dyn NameScope + Sync)], round: usize) -> Round {
    let start = std::time::SystemTime::now() + start_margin();
    let start = start
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let start = u64::try_from(start).unwrap();
    let runs: Vec<Many> = std::thread::scope(|s| {
        let runs: Vec<_> = others
            .iter()
            .enumerate()
            .map(|(i, scope)| {
                s.spawn(move || {
                    // `s{i}-{round}{k}`: LOAD_NAMES is 10, so each round's names are new.
                    let prefix = format!("s{i}-{round}");
                    let run = resolve_many(
                        *scope,
                        &prefix,
                        ".load.test",
                        LOAD_NAMES,
                        LOAD_ROUNDS,
                        1,
                        start,
                    );
                    (i, run)
                })
            })
            .collect();
        runs.into_iter()
            .map(|r| {
                let (i, run) = r.join().unwrap();
                assert_eq!(
                    run.failed,
                    0,
                    "scope {i} failed {} of {} lookups in round {round}: {}",
                    run.failed,
                    run.ok + run.failed,
                    run.why
                );
                run
            })
            .collect()
    });
    Round {
        retried: runs.iter().map(|r| r.retried).sum(),
        late: runs.iter().map(|r| r.late).max().unwrap_or(0),
        lat: runs.into_iter().flat_map(|r| r.lat).collect(),
    }
}

/// `flooder` granted `*.flood.test`, each of `others` `*.load.test`: while the flooder asks
/// for `flood` distinct names (each answered with an address of its own, far more than the
/// answers map holds), every lookup of every other scope still succeeds. Prints the others'
/// latencies, quiet and under the flood (`docs/benchmarks.md`); asserts no failure outside
/// the flooder. The flooder's own lookups may fail (it evicts its own answers).
///
/// The flooder asks `flood_threads` names at a time.
pub fn a_flooding_scope_fails_alone(
    flooder: &(dyn NameScope + Sync),
    others: &[&(dyn NameScope + Sync)],
    flood: usize,
    flood_threads: usize,
) {
    name_servers();
    let Round {
        lat: mut quiet,
        retried: quiet_retried,
        late: quiet_late,
    } = load_round(others, 0);
    let done = std::sync::atomic::AtomicBool::new(false);
    let started = std::time::Instant::now();
    let (flooded, loaded, rounds) = std::thread::scope(|s| {
        let flooding = s.spawn(|| {
            let run = resolve_many(flooder, "f", ".flood.test", flood, 1, flood_threads, 0);
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            run
        });
        let (mut loaded, mut retried, mut late) = (Vec::new(), 0, 0);
        let mut round = 1;
        // Rounds a second apart until the flood is over (the last one well past the map's
        // 65,536 entries), leaving the flooder most of the machine; each waits out its
        // helpers' start first (`start_margin`).
        while !done.load(std::sync::atomic::Ordering::SeqCst) && round < 200 {
            let r = load_round(others, round);
            loaded.extend(r.lat);
            retried += r.retried;
            late = late.max(r.late);
            round += 1;
            for _ in 0..10 {
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
        (flooding.join().unwrap(), (loaded, retried, late), round - 1)
    });
    let (loaded, loaded_retried, loaded_late) = loaded;
    let took = started.elapsed();
    let (q50, q99) = (percentile(&mut quiet, 50.0), percentile(&mut quiet, 99.0));
    let (l50, l99) = (
        percentile(&mut loaded.clone(), 50.0),
        percentile(&mut loaded.clone(), 99.0),
    );
    println!(
        "load: {} scopes × {LOAD_NAMES} names × {LOAD_ROUNDS}; quiet p50 {q50} µs p99 {q99} µs; \
         under a flood of {flood} names ({} ok, {} failed, {:.1} s, {rounds} rounds, {} lookups): \
         p50 {l50} µs p99 {l99} µs ({:.2}× quiet); lookups sent twice after a 5 s timeout: \
         {quiet_retried} quiet, {loaded_retried} under the flood; the latest helper began \
         {quiet_late} ms after its round's start quiet, {loaded_late} ms under the flood \
         (margin {} ms)",
        others.len(),
        flooded.ok,
        flooded.failed,
        took.as_secs_f64(),
        loaded.len(),
        f64::from(l99) / f64::from(q99.max(1)),
        start_margin().as_millis(),
    );
    assert!(rounds >= 1, "no round ran during the flood");
    assert_eq!(flooded.ok + flooded.failed, flood);
}
