use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;

use hickory_proto::rr::rdata::{A, AAAA, TXT};

use super::*;
use crate::dns::PortGrant;

const HTTPS: PortGrant = PortGrant {
    first: 443,
    last: 443,
    tcp: true,
    udp: false,
};

#[derive(Default)]
struct Grants {
    names: HashMap<String, Vec<PortGrant>>,
    addrs: HashSet<IpAddr>,
    asked: Mutex<Vec<String>>,
}

impl Grants {
    fn of(names: &[&str]) -> Self {
        Self {
            names: names
                .iter()
                .map(|n| ((*n).to_owned(), vec![HTTPS]))
                .collect(),
            ..Self::default()
        }
    }
}

impl NameGrants for Grants {
    fn ports_for(&self, name: &str) -> Vec<PortGrant> {
        self.asked.lock().unwrap().push(name.to_owned());
        self.names.get(name).cloned().unwrap_or_default()
    }
    fn address_allows(&self, ip: IpAddr) -> bool {
        self.addrs.contains(&ip)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Event {
    Admit(Vec<Admitted>),
    Denied(NameDenial),
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<Event>>,
    refuse: bool,
}

impl Recorder {
    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
    fn denials(&self) -> Vec<NameDenialReason> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Denied(d) => Some(d.reason),
                Event::Admit(_) => None,
            })
            .collect()
    }
    fn admitted(&self) -> Vec<Admitted> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Admit(a) => Some(a),
                Event::Denied(_) => None,
            })
            .flatten()
            .collect()
    }
}

impl AnswerSink for Recorder {
    fn admit(&self, answers: &[Admitted]) -> Result<(), String> {
        self.events
            .lock()
            .unwrap()
            .push(Event::Admit(answers.to_vec()));
        if self.refuse {
            Err("map full".to_owned())
        } else {
            Ok(())
        }
    }
    fn denied(&self, denial: NameDenial) {
        self.events.lock().unwrap().push(Event::Denied(denial));
    }
}

fn config() -> ResolverConfig {
    ResolverConfig::with_upstream(Vec::new())
}

fn name(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

fn query_for(qname: Name, qtype: RecordType, edns: bool) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(0x1234);
    m.set_recursion_desired(true);
    m.add_query(Query::query(qname, qtype));
    if edns {
        let mut e = Edns::new();
        e.set_max_payload(1232);
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

fn query(qname: &str, qtype: RecordType) -> Vec<u8> {
    query_for(name(qname), qtype, false)
}

/// An upstream that answers every query with `records` (owner names as given) and `rcode`,
/// and counts the queries.
struct Fake {
    records: Vec<Record>,
    rcode: ResponseCode,
    asked: Vec<Message>,
}

impl Fake {
    fn new(records: Vec<Record>) -> Self {
        Self {
            records,
            rcode: ResponseCode::NoError,
            asked: Vec::new(),
        }
    }
    fn exchange(&mut self, q: &[u8]) -> Result<Vec<u8>, String> {
        let q = Message::from_vec(q).unwrap();
        let mut a = Message::error_msg(q.id(), OpCode::Query, self.rcode);
        a.add_queries(q.queries().to_vec());
        a.insert_answers(self.records.clone());
        self.asked.push(q);
        Ok(a.to_vec().unwrap())
    }
}

fn a(owner: &str, ttl: u32, ip: [u8; 4]) -> Record {
    Record::from_rdata(name(owner), ttl, RData::A(A(Ipv4Addr::from(ip))))
}

fn aaaa(owner: &str, ttl: u32, ip: &str) -> Record {
    Record::from_rdata(
        name(owner),
        ttl,
        RData::AAAA(AAAA(ip.parse::<Ipv6Addr>().unwrap())),
    )
}

fn cname(owner: &str, target: &str) -> Record {
    Record::from_rdata(name(owner), 300, RData::CNAME(CNAME(name(target))))
}

struct Run {
    reply: Option<Message>,
    sink: Recorder,
    upstream: Fake,
}

fn run_with(
    q: &[u8],
    transport: Transport,
    config: &ResolverConfig,
    grants: &Grants,
    upstream: Fake,
    sink: Recorder,
) -> Run {
    let mut upstream = upstream;
    let reply = respond(q, transport, config, grants, &sink, &mut |b| {
        upstream.exchange(b)
    });
    Run {
        reply: reply.map(|r| Message::from_vec(&r).unwrap()),
        sink,
        upstream,
    }
}

fn run(q: &[u8], grants: &Grants, records: Vec<Record>) -> Run {
    run_with(
        q,
        Transport::Udp,
        &config(),
        grants,
        Fake::new(records),
        Recorder::default(),
    )
}

fn addrs(reply: &Message) -> Vec<IpAddr> {
    reply
        .answers()
        .iter()
        .filter_map(|r| r.data().ip_addr())
        .collect()
}

#[test]
fn granted_name_is_answered_and_admitted() {
    let grants = Grants::of(&["crates.io"]);
    let r = run(
        &query("Crates.IO.", RecordType::A),
        &grants,
        vec![a("crates.io.", 300, [93, 184, 216, 34])],
    );
    let reply = r.reply.unwrap();
    assert_eq!(reply.id(), 0x1234);
    assert_eq!(reply.message_type(), MessageType::Response);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.recursion_available());
    assert!(reply.recursion_desired());
    // The client's question, as it was asked.
    assert_eq!(reply.queries()[0].name().to_ascii(), "Crates.IO.");
    assert_eq!(addrs(&reply), vec![IpAddr::from([93, 184, 216, 34])]);
    assert_eq!(reply.answers()[0].ttl(), 300);
    let admitted = r.sink.admitted();
    assert_eq!(admitted.len(), 1);
    assert_eq!(admitted[0].name, "crates.io");
    assert_eq!(admitted[0].addr, IpAddr::from([93, 184, 216, 34]));
    assert_eq!(admitted[0].ttl, Duration::from_secs(300));
    assert_eq!(admitted[0].ports, vec![HTTPS]);
    assert!(r.sink.denials().is_empty());
}

#[test]
fn forwarded_query_is_fresh_and_normalised() {
    let grants = Grants::of(&["crates.io"]);
    let mut q = Message::from_vec(&query_for(name("CRATES.io"), RecordType::AAAA, true)).unwrap();
    // A client option (padding here) that could carry data: it must not go upstream.
    if let Some(e) = q.extensions_mut() {
        e.options_mut()
            .insert(hickory_proto::rr::rdata::opt::EdnsOption::Unknown(
                12,
                vec![7; 64],
            ));
    }
    let r = run(&q.to_vec().unwrap(), &grants, Vec::new());
    let [sent] = r.upstream.asked.as_slice() else {
        panic!("{:?}", r.upstream.asked)
    };
    assert_eq!(sent.queries().len(), 1);
    assert_eq!(sent.queries()[0].name().to_ascii(), "crates.io.");
    assert_eq!(sent.queries()[0].query_type(), RecordType::AAAA);
    assert!(sent.recursion_desired());
    assert!(sent.answers().is_empty() && sent.additionals().is_empty());
    let edns = sent.extensions().as_ref().unwrap();
    assert!(edns.options().as_ref().is_empty(), "{edns:?}");
}

#[test]
fn ungranted_name_is_nxdomain_and_never_forwarded() {
    let grants = Grants::of(&["crates.io"]);
    for qname in [
        "c2VjcmV0.evil.test",
        "evil.test",
        "crates.io.evil.test",
        "io",
    ] {
        let r = run(
            &query(qname, RecordType::A),
            &grants,
            vec![a("x.", 1, [1, 2, 3, 4])],
        );
        assert_eq!(
            r.reply.unwrap().response_code(),
            ResponseCode::NXDomain,
            "{qname}"
        );
        assert!(r.upstream.asked.is_empty(), "{qname} went upstream");
        assert_eq!(r.sink.denials(), vec![NameDenialReason::NotGranted]);
        let events = r.sink.events();
        let Event::Denied(d) = &events[0] else {
            panic!()
        };
        assert_eq!(d.name, qname.to_lowercase());
        assert_eq!(d.qtype, "A");
    }
}

#[test]
fn invalid_names_are_nxdomain_and_never_forwarded() {
    let grants = Grants::of(&["crates.io"]);
    let bad = [
        Name::from_labels(vec![&b"a b"[..], b"crates", b"io"]).unwrap(),
        Name::from_labels(vec![&b"\x00\xff"[..], b"io"]).unwrap(),
        Name::from_labels(vec![&b"*"[..], b"crates", b"io"]).unwrap(),
        Name::root(),
    ];
    for qname in bad {
        let r = run_with(
            &query_for(qname.clone(), RecordType::A, false),
            Transport::Udp,
            &config(),
            &grants,
            Fake::new(Vec::new()),
            Recorder::default(),
        );
        assert_eq!(
            r.reply.unwrap().response_code(),
            ResponseCode::NXDomain,
            "{qname:?}"
        );
        assert!(r.upstream.asked.is_empty());
        assert_eq!(r.sink.denials(), vec![NameDenialReason::InvalidName]);
    }
    assert!(
        grants.asked.lock().unwrap().is_empty(),
        "grants asked about an invalid name"
    );
}

#[test]
fn other_types_of_granted_names_are_empty_and_not_forwarded() {
    let grants = Grants::of(&["crates.io"]);
    for qtype in [
        RecordType::TXT,
        RecordType::MX,
        RecordType::HTTPS,
        RecordType::SVCB,
        RecordType::ANY,
    ] {
        let txt = Record::from_rdata(
            name("crates.io."),
            60,
            RData::TXT(TXT::new(vec!["x".into()])),
        );
        let r = run(&query("crates.io", qtype), &grants, vec![txt]);
        let reply = r.reply.unwrap();
        assert_eq!(reply.response_code(), ResponseCode::NoError, "{qtype}");
        assert!(reply.answers().is_empty());
        assert!(r.upstream.asked.is_empty());
        assert!(r.sink.events().is_empty());
    }
}

#[test]
fn cname_into_an_ungranted_name_is_refused() {
    let grants = Grants::of(&["crates.io", "cdn.crates.io"]);
    let records = vec![
        cname("crates.io.", "cdn.crates.io."),
        cname("cdn.crates.io.", "Evil.Test."),
        a("evil.test.", 300, [93, 184, 216, 34]),
    ];
    let r = run(&query("crates.io", RecordType::A), &grants, records);
    assert_eq!(r.reply.unwrap().response_code(), ResponseCode::NXDomain);
    assert_eq!(
        r.sink.denials(),
        vec![NameDenialReason::CnameNotGranted {
            target: "evil.test".to_owned()
        }]
    );
    assert!(r.sink.admitted().is_empty());
}

#[test]
fn granted_cname_chain_is_followed() {
    let grants = Grants::of(&["crates.io", "d1.cloudfront.net"]);
    let records = vec![
        // Out of order, with an address of another name slipped in.
        a("d1.cloudfront.net.", 60, [13, 224, 1, 1]),
        a("bank.test.", 60, [8, 8, 8, 8]),
        a("crates.io.", 60, [8, 8, 4, 4]),
        cname("crates.io.", "d1.cloudfront.net."),
        a("d1.cloudfront.net.", 60, [13, 224, 1, 2]),
    ];
    let r = run(&query("crates.io", RecordType::A), &grants, records);
    let reply = r.reply.unwrap();
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    let types: Vec<_> = reply.answers().iter().map(Record::record_type).collect();
    assert_eq!(types, vec![RecordType::CNAME, RecordType::A, RecordType::A]);
    assert_eq!(
        addrs(&reply),
        vec![IpAddr::from([13, 224, 1, 1]), IpAddr::from([13, 224, 1, 2])]
    );
    let admitted = r.sink.admitted();
    assert_eq!(
        admitted.iter().map(|a| a.addr).collect::<Vec<_>>(),
        addrs(&reply)
    );
    assert!(
        admitted
            .iter()
            .all(|a| a.name == "crates.io" && a.ports == vec![HTTPS])
    );
}

#[test]
fn cname_loops_fail() {
    let grants = Grants::of(&["a.test", "b.test"]);
    let records = vec![cname("a.test.", "b.test."), cname("b.test.", "a.test.")];
    let r = run(&query("a.test", RecordType::A), &grants, records);
    assert_eq!(r.reply.unwrap().response_code(), ResponseCode::ServFail);
    assert!(matches!(
        r.sink.denials()[..],
        [NameDenialReason::Upstream(_)]
    ));
}

#[test]
fn cname_chains_are_bounded() {
    // n links: c0 -> c1 -> ... -> cn, with an address at the end.
    let chain = |n: usize| {
        let names: Vec<String> = (0..=n).map(|i| format!("c{i}.test")).collect();
        let mut records: Vec<Record> = names
            .windows(2)
            .map(|w| cname(&format!("{}.", w[0]), &format!("{}.", w[1])))
            .collect();
        records.push(a(&format!("{}.", names[n]), 60, [13, 0, 0, 1]));
        let grants = Grants::of(&names.iter().map(String::as_str).collect::<Vec<_>>());
        let reply = run(&query("c0.test", RecordType::A), &grants, records)
            .reply
            .unwrap();
        (reply.response_code(), addrs(&reply).len())
    };
    assert_eq!(chain(MAX_CHAIN), (ResponseCode::NoError, 1));
    assert_eq!(chain(MAX_CHAIN + 1), (ResponseCode::ServFail, 0));
}

#[test]
fn addresses_are_capped() {
    let grants = Grants::of(&["many.test"]);
    let records: Vec<_> = (0..1000u32)
        .map(|i| a("many.test.", 60, (0x0d00_0000 + i).to_be_bytes()))
        .collect();
    let r = run_with(
        &query("many.test", RecordType::A),
        Transport::Tcp,
        &config(),
        &grants,
        Fake::new(records),
        Recorder::default(),
    );
    assert_eq!(addrs(&r.reply.unwrap()).len(), 32);
    assert_eq!(r.sink.admitted().len(), 32);
}

#[test]
fn ttls_are_clamped() {
    let grants = Grants::of(&["t.test"]);
    let records = vec![
        a("t.test.", 0, [13, 0, 0, 1]),
        a("t.test.", 365 * 24 * 3600, [13, 0, 0, 2]),
        a("t.test.", 77, [13, 0, 0, 3]),
    ];
    let r = run(&query("t.test", RecordType::A), &grants, records);
    let ttls: Vec<u32> = r.reply.unwrap().answers().iter().map(Record::ttl).collect();
    assert_eq!(ttls, vec![5, 3600, 77]);
    let ttls: Vec<u64> = r.sink.admitted().iter().map(|a| a.ttl.as_secs()).collect();
    assert_eq!(ttls, vec![5, 3600, 77]);
    // A misconfigured range: the minimum wins.
    let mut c = config();
    c.ttl_min = Duration::from_secs(100);
    c.ttl_max = Duration::from_secs(10);
    let r = run_with(
        &query("t.test", RecordType::A),
        Transport::Udp,
        &c,
        &grants,
        Fake::new(vec![a("t.test.", 50, [13, 0, 0, 1])]),
        Recorder::default(),
    );
    assert_eq!(r.reply.unwrap().answers()[0].ttl(), 100);
}

#[test]
fn special_addresses_are_refused_unless_granted() {
    let records = vec![
        a("s.test.", 60, [169, 254, 169, 254]),
        a("s.test.", 60, [10, 0, 0, 1]),
        a("s.test.", 60, [127, 0, 0, 1]),
        a("s.test.", 60, [13, 0, 0, 1]),
    ];
    let grants = Grants::of(&["s.test"]);
    let r = run(&query("s.test", RecordType::A), &grants, records.clone());
    assert_eq!(addrs(&r.reply.unwrap()), vec![IpAddr::from([13, 0, 0, 1])]);
    assert_eq!(
        r.sink.denials(),
        vec![
            NameDenialReason::SpecialAddress {
                addr: IpAddr::from([169, 254, 169, 254]),
                class: "metadata"
            },
            NameDenialReason::SpecialAddress {
                addr: IpAddr::from([10, 0, 0, 1]),
                class: "private"
            },
            NameDenialReason::SpecialAddress {
                addr: IpAddr::from([127, 0, 0, 1]),
                class: "loopback"
            },
        ]
    );
    // The denials are reported before the admission.
    assert!(matches!(r.sink.events().last(), Some(Event::Admit(_))));

    let mut grants = Grants::of(&["s.test"]);
    grants.addrs.insert(IpAddr::from([10, 0, 0, 1]));
    let r = run(&query("s.test", RecordType::A), &grants, records);
    assert_eq!(
        addrs(&r.reply.unwrap()),
        vec![IpAddr::from([10, 0, 0, 1]), IpAddr::from([13, 0, 0, 1])]
    );
    assert_eq!(r.sink.denials().len(), 2);
}

#[test]
fn mapped_and_host_addresses_are_refused() {
    let grants = Grants::of(&["s.test"]);
    let mut c = config();
    c.host_addresses = vec!["2001:db8::7".parse().unwrap()];
    let records = vec![
        aaaa("s.test.", 60, "::ffff:127.0.0.1"),
        aaaa("s.test.", 60, "::ffff:8.8.8.8"),
        aaaa("s.test.", 60, "2001:db8::7"),
        aaaa("s.test.", 60, "fd00:ec2::254"),
    ];
    let r = run_with(
        &query("s.test", RecordType::AAAA),
        Transport::Udp,
        &c,
        &grants,
        Fake::new(records),
        Recorder::default(),
    );
    let reply = r.reply.unwrap();
    // Nothing left: "no data", not NXDOMAIN, and nothing admitted.
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.answers().is_empty());
    let classes: Vec<_> = r
        .sink
        .denials()
        .into_iter()
        .map(|d| match d {
            NameDenialReason::SpecialAddress { class, .. } => class,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(classes, vec!["loopback", "ipv4-mapped", "host", "metadata"]);
    assert!(r.sink.admitted().is_empty());
    assert!(!r.sink.events().iter().any(|e| matches!(e, Event::Admit(_))));
}

#[test]
fn upstream_failures_are_servfail() {
    let grants = Grants::of(&["u.test"]);
    let sink = Recorder::default();
    let reply = respond(
        &query("u.test", RecordType::A),
        Transport::Udp,
        &config(),
        &grants,
        &sink,
        &mut |_| Err("timed out".to_owned()),
    );
    let reply = Message::from_vec(&reply.unwrap()).unwrap();
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
    assert_eq!(reply.id(), 0x1234);
    assert_eq!(
        sink.denials(),
        vec![NameDenialReason::Upstream("timed out".to_owned())]
    );

    // An answer to another query (a wrong id): refused like a failure.
    let sink = Recorder::default();
    let reply = respond(
        &query("u.test", RecordType::A),
        Transport::Udp,
        &config(),
        &grants,
        &sink,
        &mut |q| {
            let mut m = Message::from_vec(q).unwrap();
            m.set_id(m.id().wrapping_add(1));
            m.set_message_type(MessageType::Response);
            m.add_answer(a("u.test.", 60, [13, 0, 0, 1]));
            Ok(m.to_vec().unwrap())
        },
    );
    assert_eq!(
        Message::from_vec(&reply.unwrap()).unwrap().response_code(),
        ResponseCode::ServFail
    );
    assert!(sink.admitted().is_empty());

    // Garbage.
    let sink = Recorder::default();
    let reply = respond(
        &query("u.test", RecordType::A),
        Transport::Udp,
        &config(),
        &grants,
        &sink,
        &mut |_| Ok(vec![1, 2, 3]),
    );
    assert_eq!(
        Message::from_vec(&reply.unwrap()).unwrap().response_code(),
        ResponseCode::ServFail
    );

    // The server's own SERVFAIL and REFUSED.
    for rcode in [ResponseCode::ServFail, ResponseCode::Refused] {
        let mut fake = Fake::new(Vec::new());
        fake.rcode = rcode;
        let r = run_with(
            &query("u.test", RecordType::A),
            Transport::Udp,
            &config(),
            &grants,
            fake,
            Recorder::default(),
        );
        assert_eq!(r.reply.unwrap().response_code(), ResponseCode::ServFail);
    }
}

#[test]
fn upstream_nxdomain_is_passed_on() {
    let grants = Grants::of(&["gone.test"]);
    let mut fake = Fake::new(Vec::new());
    fake.rcode = ResponseCode::NXDomain;
    let r = run_with(
        &query("gone.test", RecordType::A),
        Transport::Udp,
        &config(),
        &grants,
        fake,
        Recorder::default(),
    );
    assert_eq!(r.reply.unwrap().response_code(), ResponseCode::NXDomain);
    assert!(r.sink.events().is_empty());
}

#[test]
fn a_failed_admission_is_servfail() {
    let grants = Grants::of(&["crates.io"]);
    let sink = Recorder {
        refuse: true,
        ..Recorder::default()
    };
    let r = run_with(
        &query("crates.io", RecordType::A),
        Transport::Udp,
        &config(),
        &grants,
        Fake::new(vec![a("crates.io.", 60, [13, 0, 0, 1])]),
        sink,
    );
    let reply = r.reply.unwrap();
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
    assert!(reply.answers().is_empty());
    assert_eq!(reply.queries().len(), 1);
}

#[test]
fn non_queries_are_dropped_and_odd_queries_refused() {
    let grants = Grants::of(&["crates.io"]);
    let drop = |bytes: &[u8]| run(bytes, &grants, Vec::new()).reply;
    assert!(drop(&[]).is_none());
    assert!(drop(&[0; 5]).is_none());
    assert!(drop(&[0xff; 40]).is_none());
    let mut q = query("crates.io", RecordType::A);
    q.truncate(q.len() - 2);
    assert!(drop(&q).is_none());
    // A response (QR set): never answered, so two resolvers cannot ping-pong.
    let mut m = Message::from_vec(&query("crates.io", RecordType::A)).unwrap();
    m.set_message_type(MessageType::Response);
    assert!(drop(&m.to_vec().unwrap()).is_none());

    let rcode = |bytes: Vec<u8>| {
        run(&bytes, &grants, Vec::new())
            .reply
            .unwrap()
            .response_code()
    };
    let mut two = Message::from_vec(&query("crates.io", RecordType::A)).unwrap();
    two.add_query(Query::query(name("crates.io."), RecordType::AAAA));
    assert_eq!(rcode(two.to_vec().unwrap()), ResponseCode::FormErr);
    let mut none = Message::new();
    none.set_id(9);
    assert_eq!(rcode(none.to_vec().unwrap()), ResponseCode::FormErr);
    let mut chaos = Message::from_vec(&query("crates.io", RecordType::A)).unwrap();
    chaos.queries_mut()[0].set_query_class(DNSClass::CH);
    assert_eq!(rcode(chaos.to_vec().unwrap()), ResponseCode::Refused);
    let mut update = Message::from_vec(&query("crates.io", RecordType::A)).unwrap();
    update.set_op_code(OpCode::Update);
    assert_eq!(rcode(update.to_vec().unwrap()), ResponseCode::NotImp);
}

#[test]
fn large_udp_answers_are_truncated() {
    let grants = Grants::of(&["big.test"]);
    let records: Vec<_> = (0..32u16)
        .map(|i| aaaa("big.test.", 60, &format!("2001:db8:1::{i:x}")))
        .collect();
    // Without EDNS: 512 bytes, so truncated (TC), for the client to ask again over TCP.
    let r = run(
        &query("big.test", RecordType::AAAA),
        &grants,
        records.clone(),
    );
    let reply = r.reply.unwrap();
    assert!(reply.truncated());
    assert!(reply.answers().is_empty());
    assert_eq!(reply.queries().len(), 1);
    // With EDNS (1232 bytes) it fits, and the reply carries an OPT record (RFC 6891 §6.1.1).
    let r = run(
        &query_for(name("big.test"), RecordType::AAAA, true),
        &grants,
        records.clone(),
    );
    let reply = r.reply.unwrap();
    assert!(!reply.truncated());
    assert_eq!(reply.answers().len(), 32);
    assert!(reply.extensions().is_some());
    // Over TCP it fits.
    let r = run_with(
        &query("big.test", RecordType::AAAA),
        Transport::Tcp,
        &config(),
        &grants,
        Fake::new(records),
        Recorder::default(),
    );
    assert_eq!(r.reply.unwrap().answers().len(), 32);
}

#[test]
fn normalise_names() {
    assert_eq!(
        normalise(&name("WWW.Crates.IO.")).as_deref(),
        Some("www.crates.io")
    );
    assert_eq!(
        normalise(&name("_dns.x-y.test")).as_deref(),
        Some("_dns.x-y.test")
    );
    assert_eq!(normalise(&Name::root()), None);
    // The longest name (253 characters; hickory refuses longer ones when parsing).
    let long = [
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61),
    ];
    let longest = Name::from_labels(long.iter().map(String::as_str)).unwrap();
    assert_eq!(normalise(&longest).map(|n| n.len()), Some(253));
    assert_eq!(
        normalise(&Name::from_labels(vec![&b"a.b"[..]]).unwrap()),
        None
    );
}

#[test]
fn normalise_agrees_with_core() {
    // Grants compare names in bee_core's form; the resolver must produce exactly that form.
    for text in [
        "crates.io",
        "Static.Crates.IO.",
        "_443._tcp.example.com",
        "a-b.c_d.test",
        "xn--bcher-kva.example",
        "1.2.3.4",
        "x",
    ] {
        let wire = Name::from_ascii(text).unwrap();
        assert_eq!(
            normalise(&wire),
            bee_core::host::normalize_name(text),
            "{text}"
        );
    }
}

#[test]
fn denials_read_as_sentences() {
    let d = NameDenial {
        name: "evil.test".to_owned(),
        qtype: "A".to_owned(),
        reason: NameDenialReason::NotGranted,
    };
    assert_eq!(
        d.to_string(),
        "DNS A evil.test: the policy grants no egress to this name"
    );
}

fn resolved(ttl: u32) -> Resolved {
    let addr = Ipv4Addr::new(13, 0, 0, 1);
    Resolved {
        chain: Vec::new(),
        addrs: vec![(RData::A(A(addr)), IpAddr::V4(addr), ttl)],
        refused: Vec::new(),
    }
}

/// The cache keeps at most `CACHE_ENTRIES` answers, the soonest to expire going first; an
/// answer without addresses, or with a TTL of a second or less, is not kept; one asked for
/// before a clear is not kept either.
#[test]
fn the_cache_is_bounded_and_a_clear_wins_over_a_late_answer() {
    let cache = AnswerCache::default();
    let g = cache.generation();
    cache.put("short.test", RecordType::A, resolved(10), g);
    for i in 0..CACHE_ENTRIES {
        cache.put(&format!("n{i}.test"), RecordType::A, resolved(300), g);
    }
    assert!(
        cache.get("short.test", RecordType::A).is_none(),
        "the soonest to expire went"
    );
    assert!(cache.get("n0.test", RecordType::A).is_some());
    assert!(cache.get("n0.test", RecordType::AAAA).is_none());
    assert_eq!(cache.lock().by_question.len(), CACHE_ENTRIES);

    cache.put("one.test", RecordType::A, resolved(1), g);
    assert!(cache.get("one.test", RecordType::A).is_none());
    let none = Resolved {
        addrs: Vec::new(),
        ..resolved(300)
    };
    cache.put("none.test", RecordType::A, none, g);
    assert!(cache.get("none.test", RecordType::A).is_none());

    let before = cache.generation();
    cache.clear();
    assert!(cache.get("n0.test", RecordType::A).is_none());
    cache.put("late.test", RecordType::A, resolved(300), before);
    assert!(
        cache.get("late.test", RecordType::A).is_none(),
        "decided before the clear"
    );
    cache.put(
        "late.test",
        RecordType::A,
        resolved(300),
        cache.generation(),
    );
    assert!(cache.get("late.test", RecordType::A).is_some());
}
