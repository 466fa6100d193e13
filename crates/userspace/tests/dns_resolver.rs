//! The per-scope DNS resolver end to end on loopback: real sockets, a fake upstream server
//! (UDP and TCP on 127.0.0.1, built here with hickory-proto) that records what it was asked.
//! No kernel feature, no privilege.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bee_core::host::HostPattern;
use bee_userspace::dns::{
    Admitted, AnswerSink, NameDenial, NameDenialReason, NameGrants, PortGrant, ResolverConfig,
    ScopeResolver,
};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME};
use hickory_proto::rr::{Name, RData, Record, RecordType};

// ---------------------------------------------------------------------------------------------
// The fake upstream server.

/// What the fake upstream does for a name.
#[derive(Clone)]
enum Behaviour {
    /// Answers with these records (over UDP truncated, TC, when they exceed the query's EDNS
    /// payload size).
    Answer(Vec<Record>),
    /// Never answers.
    Silent,
}

/// (name, type, "udp" | "tcp") of every query the fake upstream received, in order.
type Asked = Mutex<Vec<(String, RecordType, &'static str)>>;

struct Upstream {
    addr: SocketAddr,
    asked: Arc<Asked>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Upstream {
    fn start(table: Vec<(&str, Behaviour)>) -> Upstream {
        Self::start_at("127.0.0.1:0", table)
    }

    /// The fake server on `at` (`[::1]:0`: an IPv6 name server).
    fn start_at(at: &str, table: Vec<(&str, Behaviour)>) -> Upstream {
        let table: Arc<HashMap<String, Behaviour>> =
            Arc::new(table.into_iter().map(|(n, b)| (n.to_owned(), b)).collect());
        // A free UDP port whose TCP twin is free too: another process may hold the latter.
        let (udp, tcp) = (0..50)
            .find_map(|_| {
                let udp = UdpSocket::bind(at).ok()?;
                let tcp = TcpListener::bind(udp.local_addr().ok()?).ok()?;
                Some((udp, tcp))
            })
            .expect("no UDP port with its TCP twin free in 50 tries");
        let addr = udp.local_addr().unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        tcp.set_nonblocking(true).unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, a, s) = (Arc::clone(&table), Arc::clone(&asked), Arc::clone(&stop));
        let udp_thread = thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !s.load(Ordering::Relaxed) {
                let Ok((n, peer)) = udp.recv_from(&mut buf) else {
                    continue;
                };
                if let Some(reply) = serve(&t, &a, &buf[..n], "udp") {
                    udp.send_to(&reply, peer).unwrap();
                }
            }
        });
        let (t, a, s) = (table, Arc::clone(&asked), Arc::clone(&stop));
        let tcp_thread = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((mut conn, _)) = tcp.accept() else {
                    thread::sleep(Duration::from_millis(10));
                    continue;
                };
                conn.set_nonblocking(false).unwrap();
                conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let Some(query) = read_framed(&mut conn) else {
                    continue;
                };
                if let Some(reply) = serve(&t, &a, &query, "tcp") {
                    let _ = write_framed(&mut conn, &reply);
                }
            }
        });
        Upstream {
            addr,
            asked,
            stop,
            threads: vec![udp_thread, tcp_thread],
        }
    }

    fn asked(&self) -> Vec<(String, RecordType, &'static str)> {
        self.asked.lock().unwrap().clone()
    }

    fn asked_names(&self) -> HashSet<String> {
        self.asked().into_iter().map(|(n, _, _)| n).collect()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
    }
}

fn serve(
    table: &HashMap<String, Behaviour>,
    asked: &Asked,
    query: &[u8],
    transport: &'static str,
) -> Option<Vec<u8>> {
    let query = Message::from_vec(query).ok()?;
    let q = query.queries().first()?.clone();
    let name = q.name().to_ascii().trim_end_matches('.').to_lowercase();
    asked
        .lock()
        .unwrap()
        .push((name.clone(), q.query_type(), transport));
    let mut reply = Message::error_msg(query.id(), OpCode::Query, ResponseCode::NXDomain);
    reply.add_query(q.clone());
    reply.set_recursion_available(true);
    match table.get(&name) {
        None => {}
        Some(Behaviour::Silent) => return None,
        Some(Behaviour::Answer(records)) => {
            reply.set_response_code(ResponseCode::NoError);
            // Only the records of the asked type, and the CNAMEs.
            let records = records.iter().filter(|r| {
                r.record_type() == q.query_type() || r.record_type() == RecordType::CNAME
            });
            reply.insert_answers(records.cloned().collect());
        }
    }
    let bytes = reply.to_vec().unwrap();
    if transport == "udp" && bytes.len() > usize::from(query.max_payload()) {
        return Some(reply.truncate().to_vec().unwrap());
    }
    Some(bytes)
}

fn read_framed(conn: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 2];
    conn.read_exact(&mut len).ok()?;
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    conn.read_exact(&mut buf).ok()?;
    Some(buf)
}

fn write_framed(conn: &mut TcpStream, message: &[u8]) -> std::io::Result<()> {
    let mut framed = u16::try_from(message.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(message);
    conn.write_all(&framed)
}

fn name(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

fn a(owner: &str, ttl: u32, ip: [u8; 4]) -> Record {
    Record::from_rdata(name(owner), ttl, RData::A(A(Ipv4Addr::from(ip))))
}

fn aaaa(owner: &str, ttl: u32, ip: &str) -> Record {
    Record::from_rdata(name(owner), ttl, RData::AAAA(AAAA(ip.parse().unwrap())))
}

fn cname(owner: &str, target: &str) -> Record {
    Record::from_rdata(name(owner), 60, RData::CNAME(CNAME(name(target))))
}

// ---------------------------------------------------------------------------------------------
// The policy and the sink.

const HTTPS: PortGrant = PortGrant {
    first: 443,
    last: 443,
    tcp: true,
    udp: false,
};

/// Grants names by bee-core's host patterns (`*.x`: one label below `x`), on port 443, and
/// addresses.
#[derive(Default)]
struct Grants {
    names: Vec<HostPattern>,
    addrs: Vec<IpAddr>,
}

impl Grants {
    fn of(names: &[&str]) -> Arc<Grants> {
        Arc::new(Grants {
            names: names
                .iter()
                .map(|n| HostPattern::parse(n).unwrap())
                .collect(),
            addrs: Vec::new(),
        })
    }
}

impl NameGrants for Grants {
    fn ports_for(&self, name: &str) -> Vec<PortGrant> {
        let granted = self.names.iter().any(|p| p.matches(name));
        if granted { vec![HTTPS] } else { Vec::new() }
    }
    fn address_allows(&self, ip: IpAddr) -> bool {
        self.addrs.contains(&ip)
    }
}

#[derive(Debug, Clone)]
enum Event {
    Admit(Vec<Admitted>),
    Denied(NameDenial),
}

/// Records what the resolver reports. `slow`: admitting takes 100 ms, so a reply sent before
/// the admission would reach the client before the admission is recorded.
#[derive(Default)]
struct Sink {
    events: Mutex<Vec<Event>>,
    slow: bool,
}

impl Sink {
    fn new() -> Arc<Sink> {
        Arc::new(Sink::default())
    }
    fn admitted(&self) -> Vec<Admitted> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter_map(|e| match e {
                Event::Admit(a) => Some(a.clone()),
                Event::Denied(_) => None,
            })
            .flatten()
            .collect()
    }
    fn denials(&self) -> Vec<NameDenial> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter_map(|e| match e {
                Event::Denied(d) => Some(d.clone()),
                Event::Admit(_) => None,
            })
            .collect()
    }
}

impl AnswerSink for Sink {
    fn admit(&self, answers: &[Admitted]) -> Result<(), String> {
        if self.slow {
            thread::sleep(Duration::from_millis(100));
        }
        self.events
            .lock()
            .unwrap()
            .push(Event::Admit(answers.to_vec()));
        Ok(())
    }
    fn denied(&self, denial: NameDenial) {
        self.events.lock().unwrap().push(Event::Denied(denial));
    }
}

fn config(upstream: &Upstream) -> ResolverConfig {
    let mut c = ResolverConfig::with_upstream(vec![upstream.addr]);
    c.timeout = Duration::from_millis(800);
    c
}

fn start(config: ResolverConfig, grants: Arc<Grants>, sink: &Arc<Sink>) -> ScopeResolver {
    ScopeResolver::start(config, grants, Arc::clone(sink) as Arc<dyn AnswerSink>).unwrap()
}

// ---------------------------------------------------------------------------------------------
// The client.

fn query_bytes(qname: &str, qtype: RecordType, id: u16) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(id);
    m.set_message_type(MessageType::Query);
    m.set_recursion_desired(true);
    m.add_query(Query::query(name(qname), qtype));
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    m.set_edns(edns);
    m.to_vec().unwrap()
}

/// One query over UDP to `127.0.0.1:port`; the reply, parsed (panics after 5 s).
fn udp_query(port: u16, qname: &str, qtype: RecordType) -> Message {
    udp_query_at(SocketAddr::from(([127, 0, 0, 1], port)), qname, qtype).expect("no UDP reply")
}

fn udp_query_at(server: SocketAddr, qname: &str, qtype: RecordType) -> Option<Message> {
    let local: SocketAddr = if server.is_ipv4() {
        "127.0.0.1:0"
    } else {
        "[::1]:0"
    }
    .parse()
    .unwrap();
    let socket = UdpSocket::bind(local).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    socket
        .send_to(&query_bytes(qname, qtype, 0xbeef), server)
        .unwrap();
    let mut buf = [0u8; 65535];
    let (n, _) = socket.recv_from(&mut buf).ok()?;
    let reply = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!(reply.id(), 0xbeef);
    assert_eq!(reply.message_type(), MessageType::Response);
    assert_eq!(reply.queries().len(), 1);
    Some(reply)
}

fn tcp_connect(port: u16) -> TcpStream {
    let conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn
}

fn tcp_exchange(conn: &mut TcpStream, qname: &str, qtype: RecordType, id: u16) -> Message {
    write_framed(conn, &query_bytes(qname, qtype, id)).unwrap();
    let reply = Message::from_vec(&read_framed(conn).expect("no TCP reply")).unwrap();
    assert_eq!(reply.id(), id);
    reply
}

fn addrs(reply: &Message) -> Vec<IpAddr> {
    reply
        .answers()
        .iter()
        .filter_map(|r| r.data().ip_addr())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn granted_names_are_admitted_before_the_reply() {
    let up = Upstream::start(vec![(
        "crates.io",
        Behaviour::Answer(vec![
            a("crates.io.", 300, [13, 224, 0, 1]),
            aaaa("crates.io.", 300, "2600:9000::1"),
        ]),
    )]);
    let sink = Arc::new(Sink {
        slow: true,
        ..Sink::default()
    });
    let resolver = start(config(&up), Grants::of(&["crates.io"]), &sink);
    let reply = udp_query(resolver.port(), "crates.io", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert_eq!(addrs(&reply), vec![IpAddr::from([13, 224, 0, 1])]);
    // The admission was recorded before the reply arrived (the sink takes 100 ms to admit).
    let admitted = sink.admitted();
    assert_eq!(admitted.len(), 1);
    assert_eq!(admitted[0].addr, IpAddr::from([13, 224, 0, 1]));
    assert_eq!(admitted[0].name, "crates.io");
    assert_eq!(admitted[0].ttl, Duration::from_secs(300));
    assert_eq!(admitted[0].ports, vec![HTTPS]);

    let reply = udp_query(resolver.port(), "CRATES.IO.", RecordType::AAAA);
    assert_eq!(
        addrs(&reply),
        vec!["2600:9000::1".parse::<IpAddr>().unwrap()]
    );
    assert_eq!(sink.admitted().len(), 2);
    assert!(sink.denials().is_empty());
    assert_eq!(
        up.asked(),
        vec![
            ("crates.io".to_owned(), RecordType::A, "udp"),
            ("crates.io".to_owned(), RecordType::AAAA, "udp"),
        ]
    );
}

#[test]
fn ungranted_names_never_reach_upstream() {
    let up = Upstream::start(vec![(
        "evil.test",
        Behaviour::Answer(vec![a("evil.test.", 60, [6, 6, 6, 6])]),
    )]);
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["crates.io"]), &sink);
    let secret = "c2VjcmV0LWtleS0xMjM0NTY3ODkw";
    for (qname, qtype) in [
        ("evil.test".to_owned(), RecordType::A),
        (format!("{secret}.evil.test"), RecordType::A),
        (format!("{secret}.evil.test"), RecordType::AAAA),
        (format!("{secret}.evil.test"), RecordType::TXT),
        (format!("{secret}.crates.io"), RecordType::A),
    ] {
        let reply = udp_query(resolver.port(), &qname, qtype);
        assert_eq!(reply.response_code(), ResponseCode::NXDomain, "{qname}");
        assert!(reply.answers().is_empty());
    }
    assert!(up.asked().is_empty(), "upstream was asked {:?}", up.asked());
    let denials = sink.denials();
    assert_eq!(denials.len(), 5);
    assert!(
        denials
            .iter()
            .all(|d| d.reason == NameDenialReason::NotGranted)
    );
    assert_eq!(
        denials[1].name,
        format!("{secret}.evil.test").to_lowercase()
    );
    assert!(sink.admitted().is_empty());
}

#[test]
fn cname_into_an_ungranted_name_is_refused() {
    let up = Upstream::start(vec![(
        "www.crates.io",
        Behaviour::Answer(vec![
            cname("www.crates.io.", "crates.evil.test."),
            a("crates.evil.test.", 60, [13, 0, 0, 1]),
        ]),
    )]);
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["*.crates.io"]), &sink);
    let reply = udp_query(resolver.port(), "www.crates.io", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    assert!(reply.answers().is_empty());
    assert!(sink.admitted().is_empty());
    assert_eq!(
        sink.denials()[0].reason,
        NameDenialReason::CnameNotGranted {
            target: "crates.evil.test".to_owned()
        }
    );
    // The target itself was never looked up.
    assert_eq!(
        up.asked_names(),
        HashSet::from(["www.crates.io".to_owned()])
    );
}

#[test]
fn a_thousand_addresses_are_capped() {
    let records: Vec<Record> = (0..1000u32)
        .map(|i| a("many.test.", 60, (0x0d00_0000 + i).to_be_bytes()))
        .collect();
    let up = Upstream::start(vec![("many.test", Behaviour::Answer(records))]);
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["many.test"]), &sink);
    let mut conn = tcp_connect(resolver.port());
    let reply = tcp_exchange(&mut conn, "many.test", RecordType::A, 7);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert_eq!(addrs(&reply).len(), 32);
    assert_eq!(sink.admitted().len(), 32);
    // The upstream's UDP answer was truncated; the resolver asked again over TCP.
    assert_eq!(
        up.asked(),
        vec![
            ("many.test".to_owned(), RecordType::A, "udp"),
            ("many.test".to_owned(), RecordType::A, "tcp"),
        ]
    );
}

#[test]
fn ttls_are_clamped() {
    let up = Upstream::start(vec![(
        "t.test",
        Behaviour::Answer(vec![
            a("t.test.", 0, [13, 0, 0, 1]),
            a("t.test.", 365 * 86400, [13, 0, 0, 2]),
        ]),
    )]);
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["t.test"]), &sink);
    let reply = udp_query(resolver.port(), "t.test", RecordType::A);
    let ttls: Vec<u32> = reply.answers().iter().map(Record::ttl).collect();
    assert_eq!(ttls, vec![5, 3600]);
    let ttls: Vec<Duration> = sink.admitted().iter().map(|a| a.ttl).collect();
    assert_eq!(
        ttls,
        vec![Duration::from_secs(5), Duration::from_secs(3600)]
    );
}

#[test]
fn special_addresses_are_refused_unless_an_address_grant_covers_them() {
    let records = vec![
        a("s.test.", 60, [169, 254, 169, 254]),
        a("s.test.", 60, [10, 0, 0, 1]),
    ];
    let up = Upstream::start(vec![("s.test", Behaviour::Answer(records))]);

    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["s.test"]), &sink);
    let reply = udp_query(resolver.port(), "s.test", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.answers().is_empty());
    assert!(sink.admitted().is_empty());
    let classes: Vec<_> = sink
        .denials()
        .into_iter()
        .map(|d| match d.reason {
            NameDenialReason::SpecialAddress { class, .. } => class,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(classes, vec!["metadata", "private"]);
    resolver.stop();

    let sink = Sink::new();
    let grants = Arc::new(Grants {
        names: vec![HostPattern::parse("s.test").unwrap()],
        addrs: vec![IpAddr::from([10, 0, 0, 1])],
    });
    let resolver = start(config(&up), grants, &sink);
    let reply = udp_query(resolver.port(), "s.test", RecordType::A);
    assert_eq!(addrs(&reply), vec![IpAddr::from([10, 0, 0, 1])]);
    assert_eq!(sink.admitted().len(), 1);
    assert_eq!(sink.denials().len(), 1);
}

#[test]
fn a_silent_upstream_is_servfail_in_time() {
    let up = Upstream::start(vec![("slow.test", Behaviour::Silent)]);
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["slow.test"]), &sink);
    let started = Instant::now();
    let reply = udp_query(resolver.port(), "slow.test", RecordType::A);
    let took = started.elapsed();
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
    // The configured timeout is 800 ms; generous slack for a loaded machine.
    assert!(took >= Duration::from_millis(700), "{took:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(matches!(
        sink.denials()[0].reason,
        NameDenialReason::Upstream(_)
    ));
}

#[test]
fn no_upstream_is_servfail() {
    let sink = Sink::new();
    let resolver = start(
        ResolverConfig::with_upstream(Vec::new()),
        Grants::of(&["x.test"]),
        &sink,
    );
    let reply = udp_query(resolver.port(), "x.test", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
}

#[test]
fn malformed_packets_are_ignored() {
    let up = Upstream::start(vec![(
        "ok.test",
        Behaviour::Answer(vec![a("ok.test.", 60, [13, 0, 0, 9])]),
    )]);
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["ok.test"]), &sink);
    let server = SocketAddr::from(([127, 0, 0, 1], resolver.port()));
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut response = Message::from_vec(&query_bytes("ok.test", RecordType::A, 1)).unwrap();
    response.set_message_type(MessageType::Response);
    let garbage: Vec<Vec<u8>> = vec![
        Vec::new(),
        vec![0],
        vec![0xff; 12],
        vec![0xab; 3000],
        query_bytes("ok.test", RecordType::A, 1)[..20].to_vec(),
        response.to_vec().unwrap(),
    ];
    for packet in &garbage {
        socket.send_to(packet, server).unwrap();
    }
    let mut buf = [0u8; 512];
    assert!(
        socket.recv_from(&mut buf).is_err(),
        "a malformed packet was answered"
    );

    // TCP: a malformed message closes the connection.
    let mut conn = tcp_connect(resolver.port());
    write_framed(&mut conn, &[0xff; 30]).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(conn.read(&mut byte).unwrap_or(0), 0);
    let mut conn = tcp_connect(resolver.port());
    conn.write_all(&[0, 0]).unwrap(); // a zero length
    assert_eq!(conn.read(&mut byte).unwrap_or(0), 0);

    // And the resolver still serves.
    let reply = udp_query(resolver.port(), "ok.test", RecordType::A);
    assert_eq!(addrs(&reply), vec![IpAddr::from([13, 0, 0, 9])]);
    let mut conn = tcp_connect(resolver.port());
    assert_eq!(
        addrs(&tcp_exchange(&mut conn, "ok.test", RecordType::A, 2)).len(),
        1
    );
    assert!(sink.denials().is_empty());
}

#[test]
fn tcp_serves_several_queries_per_connection() {
    let up = Upstream::start(vec![(
        "ok.test",
        Behaviour::Answer(vec![a("ok.test.", 60, [13, 0, 0, 9])]),
    )]);
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["ok.test"]), &sink);
    let mut conn = tcp_connect(resolver.port());
    for id in 0..3 {
        let reply = tcp_exchange(&mut conn, "ok.test", RecordType::A, id);
        assert_eq!(addrs(&reply), vec![IpAddr::from([13, 0, 0, 9])]);
    }
    let reply = tcp_exchange(&mut conn, "nope.test", RecordType::A, 9);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    assert_eq!(sink.admitted().len(), 3);
}

#[test]
fn two_scopes_share_nothing() {
    let up = Upstream::start(vec![
        (
            "a.test",
            Behaviour::Answer(vec![a("a.test.", 60, [13, 0, 0, 1])]),
        ),
        (
            "b.test",
            Behaviour::Answer(vec![a("b.test.", 60, [13, 0, 0, 2])]),
        ),
    ]);
    let (sink_a, sink_b) = (Sink::new(), Sink::new());
    let ra = start(config(&up), Grants::of(&["a.test"]), &sink_a);
    let rb = start(config(&up), Grants::of(&["b.test"]), &sink_b);
    assert_ne!(ra.port(), rb.port());
    assert_eq!(
        addrs(&udp_query(ra.port(), "a.test", RecordType::A)).len(),
        1
    );
    assert_eq!(
        udp_query(ra.port(), "b.test", RecordType::A).response_code(),
        ResponseCode::NXDomain
    );
    assert_eq!(
        udp_query(rb.port(), "a.test", RecordType::A).response_code(),
        ResponseCode::NXDomain
    );
    assert_eq!(
        addrs(&udp_query(rb.port(), "b.test", RecordType::A)).len(),
        1
    );
    let names = |s: &Sink| s.admitted().into_iter().map(|a| a.name).collect::<Vec<_>>();
    assert_eq!(names(&sink_a), vec!["a.test"]);
    assert_eq!(names(&sink_b), vec!["b.test"]);
    assert_eq!(sink_a.denials()[0].name, "b.test");
    assert_eq!(sink_b.denials()[0].name, "a.test");
    // Stopping one leaves the other serving.
    ra.stop();
    assert_eq!(
        addrs(&udp_query(rb.port(), "b.test", RecordType::A)).len(),
        1
    );
}

#[test]
fn two_hundred_sequential_queries() {
    let up = Upstream::start(vec![(
        "ok.test",
        Behaviour::Answer(vec![a("ok.test.", 60, [13, 0, 0, 9])]),
    )]);
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["ok.test"]), &sink);
    for i in 0..200 {
        let (qname, want) = if i % 2 == 0 {
            ("ok.test", 1)
        } else {
            ("no.test", 0)
        };
        let reply = udp_query(resolver.port(), qname, RecordType::A);
        assert_eq!(addrs(&reply).len(), want, "query {i}");
    }
    assert_eq!(sink.admitted().len(), 100);
    assert_eq!(sink.denials().len(), 100);
}

#[test]
fn ipv6_loopback_serves_the_same_port_when_available() {
    let up = Upstream::start(vec![(
        "ok.test",
        Behaviour::Answer(vec![a("ok.test.", 60, [13, 0, 0, 9])]),
    )]);
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["ok.test"]), &sink);
    let addrs_listened = resolver.addrs();
    assert_eq!(
        addrs_listened[0],
        SocketAddr::from(([127, 0, 0, 1], resolver.port()))
    );
    if !resolver.v6() {
        // No IPv6 loopback on this host: nothing more to check.
        assert_eq!(addrs_listened.len(), 1);
        return;
    }
    let v6 = addrs_listened[1];
    assert_eq!(v6.port(), resolver.port());
    let reply = udp_query_at(v6, "ok.test", RecordType::A).expect("no reply on [::1]");
    assert_eq!(addrs(&reply), vec![IpAddr::from([13, 0, 0, 9])]);
    let mut conn = TcpStream::connect(v6).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(
        tcp_exchange(&mut conn, "ok.test", RecordType::A, 3).response_code(),
        ResponseCode::NoError
    );
}

#[test]
fn stop_is_prompt_and_final() {
    let up = Upstream::start(vec![("slow.test", Behaviour::Silent)]);
    let sink = Sink::new();
    let mut c = config(&up);
    c.timeout = Duration::from_secs(30);
    let resolver = start(c, Grants::of(&["slow.test"]), &sink);
    let port = resolver.port();
    // A query stuck upstream, and an idle TCP connection.
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .send_to(
            &query_bytes("slow.test", RecordType::A, 5),
            ("127.0.0.1", port),
        )
        .unwrap();
    let _idle = tcp_connect(port);
    while up.asked().is_empty() {
        thread::sleep(Duration::from_millis(10));
    }
    let started = Instant::now();
    resolver.stop();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // The abandoned query was not reported, and nothing answers on the port any more.
    assert!(sink.denials().is_empty());
    let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
    probe
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    probe
        .send_to(
            &query_bytes("slow.test", RecordType::A, 6),
            ("127.0.0.1", port),
        )
        .unwrap();
    assert!(probe.recv_from(&mut [0u8; 512]).is_err());
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    assert!(socket.recv_from(&mut [0u8; 512]).is_err());
}

/// A repeated question is answered from the scope's cache while its answer lives: nothing is
/// asked upstream again, the TTLs count down, and the addresses are admitted again (an answer
/// evicted from the kernel's map meanwhile comes back before the client sees it).
#[test]
fn a_repeated_lookup_is_answered_from_the_cache() {
    let up = Upstream::start(vec![(
        "ok.test",
        Behaviour::Answer(vec![a("ok.test.", 60, [13, 0, 0, 9])]),
    )]);
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["ok.test"]), &sink);
    let first = udp_query(resolver.port(), "ok.test", RecordType::A);
    assert_eq!(first.answers()[0].ttl(), 60);
    thread::sleep(Duration::from_millis(1100));
    for spelling in ["ok.test", "OK.Test."] {
        let again = udp_query(resolver.port(), spelling, RecordType::A);
        assert_eq!(addrs(&again), vec![IpAddr::from([13, 0, 0, 9])]);
        assert!(
            again.answers()[0].ttl() < 60,
            "{}",
            again.answers()[0].ttl()
        );
        let owner = again.answers()[0].name().to_ascii();
        assert_eq!(owner.trim_end_matches('.'), spelling.trim_end_matches('.'));
    }
    let mut conn = tcp_connect(resolver.port());
    let over_tcp = tcp_exchange(&mut conn, "ok.test", RecordType::A, 9);
    assert_eq!(addrs(&over_tcp), vec![IpAddr::from([13, 0, 0, 9])]);
    assert_eq!(up.asked().len(), 1, "{:?}", up.asked());
    let admitted = sink.admitted();
    assert_eq!(admitted.len(), 4);
    assert!(
        admitted[1..]
            .iter()
            .all(|a| a.ttl < Duration::from_secs(59))
    );
    // Another type of the same name is another question.
    udp_query(resolver.port(), "ok.test", RecordType::AAAA);
    assert_eq!(up.asked().len(), 2);
    // After a change of grants nothing cached is used.
    resolver.clear_cache();
    udp_query(resolver.port(), "ok.test", RecordType::A);
    assert_eq!(up.asked().len(), 3);
}

/// A cached answer lives its lowest TTL less a second, then the name is asked again; a
/// refusal or a failure is never cached.
#[test]
fn the_cache_honours_ttls() {
    let up = Upstream::start(vec![
        (
            "short.test",
            Behaviour::Answer(vec![a("short.test.", 2, [13, 0, 0, 1])]),
        ),
        ("silent.test", Behaviour::Silent),
    ]);
    let sink = Sink::new();
    let mut c = config(&up);
    c.ttl_min = Duration::from_secs(2);
    c.timeout = Duration::from_millis(300);
    let resolver = start(
        c,
        Grants::of(&["short.test", "missing.test", "silent.test"]),
        &sink,
    );
    udp_query(resolver.port(), "short.test", RecordType::A);
    udp_query(resolver.port(), "short.test", RecordType::A);
    assert_eq!(up.asked().len(), 1);
    thread::sleep(Duration::from_millis(1200));
    let reply = udp_query(resolver.port(), "short.test", RecordType::A);
    assert_eq!(reply.answers()[0].ttl(), 2, "asked again, a fresh TTL");
    assert_eq!(up.asked().len(), 2);
    for _ in 0..2 {
        let r = udp_query(resolver.port(), "missing.test", RecordType::A);
        assert_eq!(r.response_code(), ResponseCode::NXDomain);
        let r = udp_query(resolver.port(), "silent.test", RecordType::A);
        assert_eq!(r.response_code(), ResponseCode::ServFail);
    }
    let asked = up.asked();
    assert_eq!(asked.iter().filter(|q| q.0 == "missing.test").count(), 2);
    assert_eq!(asked.iter().filter(|q| q.0 == "silent.test").count(), 2);
}

/// `bind(2)` of `addr` with `SO_REUSEADDR` and `SO_REUSEPORT` set, as a process that wants
/// the port would try; the errno (0: bound).
fn bind_errno(addr: SocketAddr, kind: libc::c_int) -> i32 {
    use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket(2); the descriptor is owned below.
    let fd = unsafe { libc::socket(family, kind, 0) };
    assert!(fd >= 0);
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
        // SAFETY: `one` outlives the call, and its size is passed.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&raw const one).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
    }
    let rc = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `sin` is a valid sockaddr_in of the size passed.
            unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&raw const sin).cast(),
                    size_of::<libc::sockaddr_in>() as libc::socklen_t,
                )
            }
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: 0,
            };
            // SAFETY: `sin6` is a valid sockaddr_in6 of the size passed.
            unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&raw const sin6).cast(),
                    size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                )
            }
        }
    };
    if rc == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap()
    }
}

/// While a resolver lives, no other socket of the host binds its port, on the loopback
/// address or the wildcard, UDP or TCP, even with `SO_REUSEADDR` and `SO_REUSEPORT`: nothing
/// else can receive what its scope sends there. Once it stopped, the port is free again.
#[test]
fn a_resolvers_port_is_held_while_it_lives() {
    let up = Upstream::start(Vec::new());
    let resolver = start(config(&up), Grants::of(&["ok.test"]), &Sink::new());
    let port = resolver.port();
    let mut addrs: Vec<SocketAddr> = vec![
        SocketAddr::from(([127, 0, 0, 1], port)),
        SocketAddr::from(([0, 0, 0, 0], port)),
    ];
    if resolver.v6() {
        addrs.push(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)));
        addrs.push(SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)));
    }
    for addr in &addrs {
        for kind in [libc::SOCK_DGRAM, libc::SOCK_STREAM] {
            assert_eq!(bind_errno(*addr, kind), libc::EADDRINUSE, "{addr} {kind}");
        }
    }
    resolver.stop();
    assert_eq!(bind_errno(addrs[0], libc::SOCK_DGRAM), 0);
}

/// An IPv6 name server (`nameserver ::1`) serves like an IPv4 one, over UDP and over TCP for
/// a truncated answer.
#[test]
fn an_ipv6_name_server_works() {
    if UdpSocket::bind("[::1]:0").is_err() {
        // No IPv6 loopback on this host.
        return;
    }
    let many: Vec<Record> = (0..100u8)
        .map(|i| a("big.test.", 60, [13, 0, 1, i]))
        .collect();
    let up = Upstream::start_at(
        "[::1]:0",
        vec![
            (
                "ok.test",
                Behaviour::Answer(vec![aaaa("ok.test.", 60, "2600:9000::9")]),
            ),
            ("big.test", Behaviour::Answer(many)),
        ],
    );
    assert!(up.addr.is_ipv6());
    let sink = Sink::new();
    let resolver = start(config(&up), Grants::of(&["ok.test", "big.test"]), &sink);
    let reply = udp_query(resolver.port(), "ok.test", RecordType::AAAA);
    assert_eq!(
        addrs(&reply),
        vec!["2600:9000::9".parse::<IpAddr>().unwrap()]
    );
    let reply = udp_query(resolver.port(), "big.test", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(up.asked().iter().any(|q| q.0 == "big.test" && q.2 == "tcp"));
    // The resolv.conf spelling, with and without a zone.
    let conf = bee_userspace::dns::parse_resolv_conf("nameserver ::1\nnameserver fe80::1%1\n");
    assert_eq!(
        conf[0],
        SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 53))
    );
    assert!(matches!(conf[1], SocketAddr::V6(a) if a.scope_id() == 1));
}

/// Median µs of `n` runs of `f`.
fn median_us(n: usize, mut f: impl FnMut(usize)) -> f64 {
    let mut times: Vec<f64> = (0..n)
        .map(|i| {
            let t = Instant::now();
            f(i);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[n / 2]
}

/// The cost of a lookup through the resolver: a name asked for the first time (a worker
/// thread, an upstream socket), the same name again (from the cache, in the receiving
/// thread), and the same question asked of the upstream directly. `docs/benchmarks.md`:
/// `cargo test --release -p bee-userspace --test dns_resolver -- --ignored --nocapture bench_`.
#[test]
#[ignore = "a benchmark: run by hand"]
fn bench_repeated_lookup_against_direct() {
    let n = 1000;
    let table: Vec<(String, Behaviour)> = (0..n)
        .map(|i| {
            let name = format!("n{i}.b.test");
            let rec = a(
                &format!("{name}."),
                300,
                [13, 0, (i / 256) as u8, (i % 256) as u8],
            );
            (name, Behaviour::Answer(vec![rec]))
        })
        .collect();
    let up = Upstream::start(table.iter().map(|(n, b)| (n.as_str(), b.clone())).collect());
    let resolver = start(config(&up), Grants::of(&["*.b.test"]), &Sink::new());
    let port = resolver.port();
    let direct = median_us(n, |i| {
        udp_query_at(up.addr, &format!("n{i}.b.test"), RecordType::A).unwrap();
    });
    let first = median_us(n, |i| {
        udp_query(port, &format!("n{i}.b.test"), RecordType::A);
    });
    let repeated = median_us(n, |i| {
        udp_query(port, &format!("n{i}.b.test"), RecordType::A);
    });
    println!(
        "median µs over {n}: direct {direct:.1}, first lookup {first:.1} ({:.2}× direct), \
         repeated {repeated:.1} ({:.2}× direct)",
        first / direct,
        repeated / direct
    );
}
