//! Resolution latency through a scope's resolver (`bee_userspace::dns::ScopeResolver`) against
//! asking the upstream server directly, on loopback, no kernel involved.
//!
//! A fake authoritative server on `127.0.0.1` (UDP, built here with hickory-proto) answers every
//! A query with one public address. The resolver forwards the first query to it and answers
//! the rest from its cache (the answer's TTL is 300 s): the series through the resolver is a
//! repeated lookup. The policy grants the one name the client asks for, and the
//! [`AnswerSink`] accepts without doing anything (it is still called for every reply): the
//! kernel map write of a real scope (`AnswerMap::admit`) is not part of this figure (it needs a
//! kernel running bee's programs; the kernel benchmark times it, `benches/kernel/dns.rs`).
//!
//! One client socket sends sequential A queries, alternately straight to the upstream and to
//! the resolver (which goes first alternates too), each timed from `send` to the reply's
//! arrival; every reply is checked (its id, NOERROR, one answer). It prints percentiles of both
//! series and their ratios as a Markdown table.
//!
//! `cargo bench -p bee-userspace --bench dns [-- --queries 2000]`. Without `--bench` (as
//! `cargo test --all-targets` runs it) it measures nothing.

use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bee_userspace::dns::{
    Admitted, AnswerSink, NameDenial, NameGrants, PortGrant, ResolverConfig, ScopeResolver,
};
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};

type Res<T> = Result<T, Box<dyn Error>>;

/// The name the client asks for and the policy grants.
const NAME: &str = "bench.example.com";
/// The address the fake upstream answers with (public: the resolver keeps it).
const ANSWER: Ipv4Addr = Ipv4Addr::new(93, 184, 216, 34);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("dns bench: measures only under `cargo bench` (--bench)");
        return;
    }
    if let Err(e) = run(&args) {
        eprintln!("dns bench: error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &[String]) -> Res<()> {
    let mut queries = 2000usize;
    let mut warmup = 200usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--bench" => {}
            "--queries" => queries = val()?.parse()?,
            "--warmup" => warmup = val()?.parse()?,
            // cargo bench passes a filter when one is given; there is only one benchmark.
            other if !other.starts_with('-') => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }

    let upstream = Upstream::start()?;
    let sink = Arc::new(Accept::default());
    let resolver = ScopeResolver::start(
        ResolverConfig::with_upstream(vec![upstream.addr]),
        Arc::new(OneName),
        Arc::clone(&sink) as Arc<dyn AnswerSink>,
    )?;
    let via = resolver.addrs()[0];

    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    client.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut query = query_bytes()?;
    let mut id = 0u16;
    let mut direct = Vec::with_capacity(queries);
    let mut resolved = Vec::with_capacity(queries);
    for i in 0..warmup + queries {
        let order = if i % 2 == 0 {
            [upstream.addr, via]
        } else {
            [via, upstream.addr]
        };
        for to in order {
            id = id.wrapping_add(1);
            let took = ask(&client, to, &mut query, id)?;
            if i >= warmup {
                if to == via {
                    resolved.push(took);
                } else {
                    direct.push(took);
                }
            }
        }
    }
    let admitted = sink.admitted.load(Ordering::Relaxed);
    let denied = sink.denied.load(Ordering::Relaxed);
    resolver.stop();
    let forwarded = upstream.stop();
    if admitted != warmup + queries || denied != 0 {
        return Err(format!(
            "the resolver admitted {admitted} answers and refused {denied} for {} queries",
            warmup + queries
        )
        .into());
    }

    println!(
        "{queries} sequential A queries of {NAME} over UDP on loopback, each way alternately \
         ({warmup} more of each discarded as warm-up); the upstream received {forwarded}"
    );
    println!();
    println!("| µs per query | p50 | p90 | p99 | mean |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let d = Stats::of(&mut direct);
    let r = Stats::of(&mut resolved);
    println!(
        "| straight to the upstream | {:.1} | {:.1} | {:.1} | {:.1} |",
        d.p50, d.p90, d.p99, d.mean
    );
    println!(
        "| through the scope's resolver (no-op sink) | {:.1} | {:.1} | {:.1} | {:.1} |",
        r.p50, r.p90, r.p99, r.mean
    );
    println!(
        "| resolver − direct | {:.1} | {:.1} | {:.1} | {:.1} |",
        r.p50 - d.p50,
        r.p90 - d.p90,
        r.p99 - d.p99,
        r.mean - d.mean
    );
    println!(
        "| resolver / direct | {:.2}× | {:.2}× | {:.2}× | {:.2}× |",
        r.p50 / d.p50,
        r.p90 / d.p90,
        r.p99 / d.p99,
        r.mean / d.mean
    );
    Ok(())
}

/// Percentiles (nearest rank) and mean, in µs.
struct Stats {
    p50: f64,
    p90: f64,
    p99: f64,
    mean: f64,
}

impl Stats {
    fn of(v: &mut [f64]) -> Stats {
        v.sort_by(f64::total_cmp);
        let at = |p: f64| {
            let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
            v.get(rank.saturating_sub(1)).copied().unwrap_or(f64::NAN)
        };
        Stats {
            p50: at(50.0),
            p90: at(90.0),
            p99: at(99.0),
            mean: v.iter().sum::<f64>() / v.len() as f64,
        }
    }
}

/// A recursive A query for [`NAME`], as a stub resolver sends it (id 0, patched per send).
fn query_bytes() -> Res<Vec<u8>> {
    let mut m = Message::new();
    m.set_id(0)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(NAME)?, RecordType::A));
    Ok(m.to_vec()?)
}

/// Sends `query` with `id` to `to` and waits for its reply; µs from send to arrival. The
/// reply must carry the id, NOERROR and one answer (read from the header).
fn ask(client: &UdpSocket, to: SocketAddr, query: &mut [u8], id: u16) -> Res<f64> {
    query[..2].copy_from_slice(&id.to_be_bytes());
    let mut buf = [0u8; 512];
    let start = Instant::now();
    client.send_to(query, to)?;
    let (n, from) = client.recv_from(&mut buf)?;
    let took = start.elapsed();
    let reply = buf
        .get(..n)
        .filter(|r| r.len() >= 12)
        .ok_or("short reply")?;
    let rcode = reply[3] & 0x0f;
    let answers = u16::from_be_bytes([reply[6], reply[7]]);
    if from != to || reply[..2] != id.to_be_bytes() || rcode != 0 || answers != 1 {
        return Err(format!(
            "unexpected reply from {from} (asked {to}): id {:?}, rcode {rcode}, {answers} answers",
            &reply[..2]
        )
        .into());
    }
    Ok(took.as_secs_f64() * 1e6)
}

/// The policy: [`NAME`] on port 443, no address grants.
struct OneName;

impl NameGrants for OneName {
    fn ports_for(&self, name: &str) -> Vec<PortGrant> {
        if name == NAME {
            vec![PortGrant {
                first: 443,
                last: 443,
                tcp: true,
                udp: false,
            }]
        } else {
            Vec::new()
        }
    }

    fn address_allows(&self, _ip: std::net::IpAddr) -> bool {
        false
    }
}

/// Accepts every answer (counting them, to check the run): no kernel map behind it.
#[derive(Default)]
struct Accept {
    admitted: AtomicUsize,
    denied: AtomicUsize,
}

impl AnswerSink for Accept {
    fn admit(&self, answers: &[Admitted]) -> Result<(), String> {
        self.admitted.fetch_add(1, Ordering::Relaxed);
        std::hint::black_box(answers);
        Ok(())
    }

    fn denied(&self, _denial: NameDenial) {
        self.denied.fetch_add(1, Ordering::Relaxed);
    }
}

/// A fake authoritative server on 127.0.0.1 (UDP): every A query gets [`ANSWER`] with TTL 300.
struct Upstream {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
    thread: JoinHandle<()>,
}

impl Upstream {
    fn start() -> Res<Upstream> {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = socket.local_addr()?;
        socket.set_read_timeout(Some(Duration::from_millis(50)))?;
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let (s, n) = (Arc::clone(&stop), Arc::clone(&served));
        let thread = std::thread::Builder::new()
            .name("fake-upstream".into())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                while !s.load(Ordering::Relaxed) {
                    let Ok((len, peer)) = socket.recv_from(&mut buf) else {
                        continue;
                    };
                    if let Some(reply) = buf.get(..len).and_then(answer) {
                        n.fetch_add(1, Ordering::Relaxed);
                        let _ = socket.send_to(&reply, peer);
                    }
                }
            })?;
        Ok(Upstream {
            addr,
            stop,
            served,
            thread,
        })
    }

    /// Stops the server; how many queries it answered.
    fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.served.load(Ordering::Relaxed)
    }
}

/// The reply to one query: authoritative, the question echoed, one A record for an A query.
fn answer(query: &[u8]) -> Option<Vec<u8>> {
    let query = Message::from_vec(query).ok()?;
    let q = query.queries().first()?.clone();
    let mut reply = Message::error_msg(query.id(), OpCode::Query, ResponseCode::NoError);
    reply
        .set_authoritative(true)
        .set_recursion_desired(query.recursion_desired());
    if q.query_type() == RecordType::A {
        reply.add_answer(Record::from_rdata(
            q.name().clone(),
            300,
            RData::A(A(ANSWER)),
        ));
    }
    reply.add_query(q);
    reply.to_vec().ok()
}
