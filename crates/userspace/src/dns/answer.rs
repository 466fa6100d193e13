//! The decision on one query: from the client's bytes (and an upstream exchange) to the reply,
//! the addresses to admit and the denials to report. No sockets here: [`decide`] takes the
//! upstream as a closure and [`finish`] the sink as a trait object, so every rule is
//! unit-tested.
//!
//! Why one file of this length: one query's decision, from its bytes to the reply, the
//! addresses to admit and the denials; the scope's answer cache is part of it, since a cached
//! answer is admitted again by the same rules before it is replayed. The tests are in
//! `answer/tests.rs`.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::CNAME;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use super::special::{is_host_address, special_class};
use super::{
    Admitted, AnswerSink, NameDenial, NameDenialReason, NameGrants, PortGrant, ResolverConfig,
};

/// The longest CNAME chain followed (RFC 1034 §5.3.2 wants a bound; resolvers use ~8–16).
const MAX_CHAIN: usize = 8;

/// The EDNS payload size advertised upstream (the 2020 DNS flag day's 1232 bytes).
const UPSTREAM_PAYLOAD: u16 = 1232;

/// The largest UDP reply sent to a client that advertises a larger EDNS payload (RFC 6891).
const CLIENT_PAYLOAD_MAX: u16 = 4096;

/// The largest UDP reply to a client without EDNS (RFC 1035 §4.2.1).
const CLASSIC_UDP: u16 = 512;

/// Sends one DNS query upstream and returns the answer's bytes (`Err`: why not).
pub(super) type Exchange<'a> = dyn FnMut(&[u8]) -> Result<Vec<u8>, String> + 'a;

/// How the query came, which bounds the reply's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Transport {
    /// A datagram: at most 512 bytes, or the client's EDNS payload size (capped at 4096);
    /// a larger reply is sent truncated (TC), for the client to ask again over TCP.
    Udp,
    /// A stream: up to 65535 bytes.
    Tcp,
}

/// Where [`respond`] delivers admissions and denials: every [`AnswerSink`], and the server's
/// wrapper that silences one once the resolver stops.
pub(super) trait Sink {
    /// As [`AnswerSink::admit`].
    fn admit(&self, answers: &[Admitted]) -> Result<(), String>;
    /// As [`AnswerSink::denied`].
    fn denied(&self, denial: NameDenial);
}

impl<T: AnswerSink + ?Sized> Sink for T {
    fn admit(&self, answers: &[Admitted]) -> Result<(), String> {
        AnswerSink::admit(self, answers)
    }
    fn denied(&self, denial: NameDenial) {
        AnswerSink::denied(self, denial);
    }
}

/// What [`decide`] made of a query.
#[derive(Debug)]
pub(super) struct Decision {
    /// The reply if the sink admits [`Decision::admitted`] (or there is nothing to admit).
    reply: Message,
    /// The reply if it does not.
    servfail: Message,
    /// The UDP size limit of the reply.
    udp_limit: u16,
    /// The addresses to admit before replying; empty: none.
    pub(super) admitted: Vec<Admitted>,
    /// What was refused.
    pub(super) denials: Vec<NameDenial>,
}

impl Decision {
    /// The reply to send, encoded for `transport`; `admitted` says whether the sink admitted the
    /// addresses. `None` if it cannot be encoded.
    pub(super) fn encode(&self, admitted: bool, transport: Transport) -> Option<Vec<u8>> {
        let message = if admitted {
            &self.reply
        } else {
            &self.servfail
        };
        let limit = match transport {
            Transport::Udp => usize::from(self.udp_limit),
            Transport::Tcp => usize::from(u16::MAX),
        };
        let bytes = message.to_vec().ok()?;
        if bytes.len() <= limit {
            return Some(bytes);
        }
        message.truncate().to_vec().ok()
    }
}

/// The whole exchange for one query: decide, report the denials, admit, and return the reply
/// to send (`None`: drop the packet — it was not a DNS query).
///
/// `upstream` sends a complete DNS query and returns the answer's bytes (`Err`: why not).
#[cfg(test)]
pub(super) fn respond(
    query: &[u8],
    transport: Transport,
    config: &ResolverConfig,
    grants: &dyn NameGrants,
    sink: &dyn Sink,
    upstream: &mut Exchange<'_>,
) -> Option<Vec<u8>> {
    let decision = decide(query, config, grants, None, upstream)?;
    finish(&decision, sink, transport)
}

/// The rest of the exchange once `decision` is made: report its denials, admit its addresses,
/// and encode the reply for `transport` (`None`: it cannot be encoded).
pub(super) fn finish(
    decision: &Decision,
    sink: &dyn Sink,
    transport: Transport,
) -> Option<Vec<u8>> {
    for denial in &decision.denials {
        sink.denied(denial.clone());
    }
    let admitted = decision.admitted.is_empty() || sink.admit(&decision.admitted).is_ok();
    decision.encode(admitted, transport)
}

/// Decides one query. `None`: not a DNS query (unparsable, or a response), to be dropped.
///
/// A granted A or AAAA question is answered from `cache` while an answer to it lives there;
/// otherwise it is sent `upstream`, and an answer that admits addresses is cached.
pub(super) fn decide(
    query: &[u8],
    config: &ResolverConfig,
    grants: &dyn NameGrants,
    cache: Option<&AnswerCache>,
    upstream: &mut Exchange<'_>,
) -> Option<Decision> {
    let request = Message::from_vec(query).ok()?;
    if request.message_type() != MessageType::Query {
        return None;
    }
    let mut reply = Message::error_msg(request.id(), request.op_code(), ResponseCode::NoError);
    reply.set_recursion_desired(request.recursion_desired());
    reply.set_recursion_available(true);
    let udp_limit = match request.extensions() {
        Some(edns) => {
            let mut ours = Edns::new();
            ours.set_max_payload(CLIENT_PAYLOAD_MAX);
            reply.set_edns(ours);
            edns.max_payload().clamp(CLASSIC_UDP, CLIENT_PAYLOAD_MAX)
        }
        None => CLASSIC_UDP,
    };
    let mut decision = Decision {
        servfail: reply.clone(),
        reply,
        udp_limit,
        admitted: Vec::new(),
        denials: Vec::new(),
    };
    if request.op_code() != OpCode::Query {
        decision.rcode(ResponseCode::NotImp);
        return Some(decision);
    }
    let [question] = request.queries() else {
        decision.rcode(ResponseCode::FormErr);
        return Some(decision);
    };
    decision.reply.add_query(question.clone());
    decision.servfail.add_query(question.clone());
    decision.servfail.set_response_code(ResponseCode::ServFail);
    if question.query_class() != DNSClass::IN {
        decision.rcode(ResponseCode::Refused);
        return Some(decision);
    }
    let qtype = question.query_type();
    let Some(name) = normalise(question.name()) else {
        decision.deny(
            question.name().to_ascii(),
            qtype,
            NameDenialReason::InvalidName,
        );
        decision.rcode(ResponseCode::NXDomain);
        return Some(decision);
    };
    let ports = grants.ports_for(&name);
    if ports.is_empty() {
        decision.deny(name, qtype, NameDenialReason::NotGranted);
        decision.rcode(ResponseCode::NXDomain);
        return Some(decision);
    }
    if !matches!(qtype, RecordType::A | RecordType::AAAA) {
        // Granted, but only addresses are looked up: "no data" for every other type.
        return Some(decision);
    }

    let cached = cache.and_then(|c| c.get(&name, qtype));
    let found = match cached {
        Some((resolved, age)) => spell(&resolved, &name, question, &ports, age),
        None => {
            let generation = cache.map(AnswerCache::generation);
            resolve(&name, qtype, config, grants, upstream).and_then(|resolved| {
                let found = spell(&resolved, &name, question, &ports, Duration::ZERO)?;
                if let (Some(cache), Some(generation)) = (cache, generation) {
                    cache.put(&name, qtype, resolved, generation);
                }
                Ok(found)
            })
        }
    };
    match found {
        Ok(found) => {
            for reason in found.refused {
                decision.deny(name.clone(), qtype, reason);
            }
            if !found.admitted.is_empty() {
                decision.reply.insert_answers(found.records);
                decision.admitted = found.admitted;
            }
        }
        Err(refusal) => {
            if let Some(reason) = refusal.reason {
                decision.deny(name, qtype, reason);
            }
            decision.rcode(refusal.rcode);
        }
    }
    Some(decision)
}

/// The reply records and the addresses of a granted A or AAAA question.
struct Found {
    /// The CNAME chain and the addresses, TTLs clamped.
    records: Vec<Record>,
    /// The addresses to admit.
    admitted: Vec<Admitted>,
    /// Why addresses were dropped.
    refused: Vec<NameDenialReason>,
}

/// A question answered with an error code (and, when it is a refusal or a failure, why).
struct Refusal {
    rcode: ResponseCode,
    reason: Option<NameDenialReason>,
}

impl Refusal {
    fn servfail(why: String) -> Self {
        Self {
            rcode: ResponseCode::ServFail,
            reason: Some(NameDenialReason::Upstream(why)),
        }
    }
}

/// What an upstream answer resolved a name to, before it is spelled for a client: the CNAME
/// chain (normalised names, clamped TTLs in seconds), the kept addresses of its last name
/// (record data, address, clamped TTL) and why others were refused.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    chain: Vec<(String, u32)>,
    addrs: Vec<(RData, IpAddr, u32)>,
    refused: Vec<NameDenialReason>,
}

impl Resolved {
    /// The lowest TTL of the answer, in seconds (`None`: no address).
    fn min_ttl(&self) -> Option<u32> {
        let addrs = self.addrs.iter().map(|(_, _, t)| *t);
        let lowest = addrs.min()?;
        Some(self.chain.iter().map(|(_, t)| *t).fold(lowest, u32::min))
    }
}

/// Asks upstream for `name`, follows the answer's CNAME chain and keeps the admissible
/// addresses of its last name.
fn resolve(
    name: &str,
    qtype: RecordType,
    config: &ResolverConfig,
    grants: &dyn NameGrants,
    upstream: &mut Exchange<'_>,
) -> Result<Resolved, Refusal> {
    let answer = forward(name, qtype, upstream).map_err(Refusal::servfail)?;
    match answer.response_code() {
        ResponseCode::NoError => {}
        ResponseCode::NXDomain => {
            return Err(Refusal {
                rcode: ResponseCode::NXDomain,
                reason: None,
            });
        }
        other => return Err(Refusal::servfail(format!("the server answered {other}"))),
    }
    let chain: Vec<(String, u32)> = follow_chain(&answer, name, grants)?
        .into_iter()
        .map(|(n, ttl)| (n, clamp_ttl(ttl, config)))
        .collect();
    let current = chain.last().map_or(name, |(n, _)| n.as_str());
    let mut resolved = Resolved {
        chain: Vec::new(),
        addrs: Vec::new(),
        refused: Vec::new(),
    };
    let mut seen = HashSet::new();
    for record in answer.answers() {
        if record.dns_class() != DNSClass::IN
            || normalise(record.name()).as_deref() != Some(current)
        {
            continue;
        }
        let addr = match (record.data(), qtype) {
            (RData::A(a), RecordType::A) => IpAddr::V4(a.0),
            (RData::AAAA(a), RecordType::AAAA) => IpAddr::V6(a.0),
            _ => continue,
        };
        if !seen.insert(addr) {
            continue;
        }
        if resolved.addrs.len() >= config.max_addresses {
            break;
        }
        if let Some(class) = refused_class(addr, config).filter(|_| !grants.address_allows(addr)) {
            if resolved.refused.len() < config.max_addresses {
                resolved
                    .refused
                    .push(NameDenialReason::SpecialAddress { addr, class });
            }
            continue;
        }
        let ttl = clamp_ttl(record.ttl(), config);
        resolved.addrs.push((record.data().clone(), addr, ttl));
    }
    resolved.chain = chain;
    Ok(resolved)
}

/// The reply records and the addresses to admit of `resolved`, the answer to `question`
/// (granted `ports`) given `age` ago: every TTL lowered by it (whole seconds in the records;
/// exactly for the admitted addresses).
fn spell(
    resolved: &Resolved,
    name: &str,
    question: &Query,
    ports: &[PortGrant],
    age: Duration,
) -> Result<Found, Refusal> {
    let secs = u32::try_from(age.as_secs()).unwrap_or(u32::MAX);
    // Reply records are owned by the client's spelling of the question name, and by the
    // normalised names after it.
    let owner = |n: &str| {
        if n == name {
            Ok(question.name().clone())
        } else {
            Name::from_labels(n.split('.').map(str::as_bytes))
                .map_err(|e| Refusal::servfail(format!("name {n}: {e}")))
        }
    };
    let mut records = Vec::new();
    let mut current = name;
    for (next, ttl) in &resolved.chain {
        let rdata = RData::CNAME(CNAME(owner(next)?));
        records.push(Record::from_rdata(
            owner(current)?,
            ttl.saturating_sub(secs),
            rdata,
        ));
        current = next;
    }
    let last = owner(current)?;
    let mut found = Found {
        records,
        admitted: Vec::new(),
        refused: resolved.refused.clone(),
    };
    for (data, addr, ttl) in &resolved.addrs {
        found.records.push(Record::from_rdata(
            last.clone(),
            ttl.saturating_sub(secs),
            data.clone(),
        ));
        found.admitted.push(Admitted {
            name: name.to_owned(),
            addr: *addr,
            ttl: Duration::from_secs(u64::from(*ttl)).saturating_sub(age),
            ports: ports.to_vec(),
        });
    }
    Ok(found)
}

/// The most answers a scope's [`AnswerCache`] holds.
pub(super) const CACHE_ENTRIES: usize = 1024;

/// A scope's answers by (name, type), each until its lowest TTL less a second (so that a
/// reply from it never carries a TTL under one second), for [`decide`] to answer a repeated
/// question without asking upstream. Only answers that admit addresses are kept; at most
/// [`CACHE_ENTRIES`], the soonest to expire going first when a new one needs room.
#[derive(Debug, Default)]
pub(super) struct AnswerCache {
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_question: HashMap<(String, RecordType), Cached>,
    /// How many times the cache was cleared: an answer asked for before a clear is not kept.
    generation: u64,
}

#[derive(Debug)]
struct Cached {
    resolved: Resolved,
    stored: Instant,
    expires: Instant,
}

impl AnswerCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The live answer to (`name`, `qtype`) and its age; an expired one is dropped.
    fn get(&self, name: &str, qtype: RecordType) -> Option<(Resolved, Duration)> {
        let now = Instant::now();
        let mut guard = self.lock();
        let entries = &mut guard.by_question;
        let key = (name.to_owned(), qtype);
        let cached = entries.get(&key)?;
        if cached.expires <= now {
            entries.remove(&key);
            return None;
        }
        Some((cached.resolved.clone(), now.duration_since(cached.stored)))
    }

    /// The generation to pass to [`AnswerCache::put`], taken before asking upstream.
    fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Keeps `resolved`, the answer to (`name`, `qtype`) just received, unless the cache was
    /// cleared since [`AnswerCache::generation`] said `generation` (the answer was decided by
    /// grants that may be gone).
    fn put(&self, name: &str, qtype: RecordType, resolved: Resolved, generation: u64) {
        let Some(ttl) = resolved.min_ttl().filter(|t| *t > 1) else {
            return;
        };
        let stored = Instant::now();
        let expires = stored + Duration::from_secs(u64::from(ttl - 1));
        let mut guard = self.lock();
        if guard.generation != generation {
            return;
        }
        let entries = &mut guard.by_question;
        if entries.len() >= CACHE_ENTRIES {
            entries.retain(|_, c| c.expires > stored);
        }
        if entries.len() >= CACHE_ENTRIES {
            let soonest = entries
                .iter()
                .min_by_key(|(_, c)| c.expires)
                .map(|(k, _)| k.clone());
            if let Some(k) = soonest {
                entries.remove(&k);
            }
        }
        entries.insert(
            (name.to_owned(), qtype),
            Cached {
                resolved,
                stored,
                expires,
            },
        );
    }

    /// Drops every answer (the grants changed).
    pub(super) fn clear(&self) {
        let mut guard = self.lock();
        guard.by_question.clear();
        guard.generation += 1;
    }
}

fn follow_chain(
    answer: &Message,
    name: &str,
    grants: &dyn NameGrants,
) -> Result<Vec<(String, u32)>, Refusal> {
    let mut chain: Vec<(String, u32)> = Vec::new();
    let mut current = name.to_owned();
    while let Some((target, ttl)) = cname_of(answer, &current) {
        let Some(next) = normalise(target).filter(|t| !grants.ports_for(t).is_empty()) else {
            let target = normalise(target).unwrap_or_else(|| target.to_ascii());
            return Err(Refusal {
                rcode: ResponseCode::NXDomain,
                reason: Some(NameDenialReason::CnameNotGranted { target }),
            });
        };
        if next == name || chain.iter().any(|(n, _)| *n == next) || chain.len() >= MAX_CHAIN {
            let why = format!("a CNAME loop, or a chain of more than {MAX_CHAIN} links");
            return Err(Refusal::servfail(why));
        }
        chain.push((next.clone(), ttl));
        current = next;
    }
    Ok(chain)
}

impl Decision {
    /// Sets the reply's response code (the SERVFAIL alternative stays as it is unless the
    /// code is an error, which then is the only reply).
    fn rcode(&mut self, code: ResponseCode) {
        self.reply.set_response_code(code);
        if code != ResponseCode::NoError {
            self.servfail = self.reply.clone();
        }
    }

    fn deny(&mut self, name: String, qtype: RecordType, reason: NameDenialReason) {
        self.denials.push(NameDenial {
            name,
            qtype: qtype.to_string(),
            reason,
        });
    }
}

/// The target and TTL of the CNAME record of `owner` in `answer`, if it has one.
fn cname_of<'a>(answer: &'a Message, owner: &str) -> Option<(&'a Name, u32)> {
    answer.answers().iter().find_map(|r| match r.data() {
        RData::CNAME(CNAME(target))
            if r.dns_class() == DNSClass::IN && normalise(r.name()).as_deref() == Some(owner) =>
        {
            Some((target, r.ttl()))
        }
        _ => None,
    })
}

/// Why `addr` may not be admitted without an address grant, if it may not.
fn refused_class(addr: IpAddr, config: &ResolverConfig) -> Option<&'static str> {
    special_class(addr).or_else(|| is_host_address(addr, &config.host_addresses).then_some("host"))
}

/// A record TTL (seconds) clamped to the configured range; `ttl_min` wins a conflict.
fn clamp_ttl(ttl: u32, config: &ResolverConfig) -> u32 {
    let secs = |d: Duration| u32::try_from(d.as_secs()).unwrap_or(u32::MAX);
    ttl.min(secs(config.ttl_max)).max(secs(config.ttl_min))
}

/// Sends a fresh query for `name`/`qtype` (random id, recursion desired, EDNS without
/// options: nothing of the client's message goes upstream but the normalised name) and
/// returns the parsed answer, if it is one to that query.
fn forward(name: &str, qtype: RecordType, upstream: &mut Exchange<'_>) -> Result<Message, String> {
    let qname =
        Name::from_labels(name.split('.').map(str::as_bytes)).map_err(|e| format!("name: {e}"))?;
    let mut query = Message::new();
    query.set_id(random_id());
    query.set_message_type(MessageType::Query);
    query.set_op_code(OpCode::Query);
    query.set_recursion_desired(true);
    query.add_query(Query::query(qname, qtype));
    let mut edns = Edns::new();
    edns.set_max_payload(UPSTREAM_PAYLOAD);
    query.set_edns(edns);
    let bytes = query
        .to_vec()
        .map_err(|e| format!("encoding the query: {e}"))?;
    let answer = upstream(&bytes)?;
    let answer = Message::from_vec(&answer).map_err(|e| format!("malformed answer: {e}"))?;
    let matches = answer.id() == query.id()
        && answer.message_type() == MessageType::Response
        && matches!(answer.queries(), [q] if q.query_type() == qtype
            && q.query_class() == DNSClass::IN
            && normalise(q.name()).as_deref() == Some(name));
    if matches {
        Ok(answer)
    } else {
        Err("the answer does not match the query".to_owned())
    }
}

/// A query id no one else can predict (RFC 5452 §9.2): std's `RandomState` is keyed from
/// the operating system's randomness.
fn random_id() -> u16 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (hasher.finish() & 0xffff) as u16
}

/// A host name as grants see it: lowercase, no trailing dot; `None` if it is not a valid host
/// name (the root, a label with a byte other than a letter, digit, `-` or `_`, or over 253
/// characters). The same form as `bee_core::host::normalize_name`, but checked label by label
/// on the wire, where a label may hold a `.` byte that a text form would hide.
pub(super) fn normalise(name: &Name) -> Option<String> {
    let mut out = String::new();
    for label in name.iter() {
        if label.is_empty()
            || label.len() > 63
            || !label
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        {
            return None;
        }
        if !out.is_empty() {
            out.push('.');
        }
        out.extend(label.iter().map(|b| char::from(b.to_ascii_lowercase())));
    }
    (!out.is_empty() && out.len() <= 253).then_some(out)
}

#[cfg(test)]
mod tests;
