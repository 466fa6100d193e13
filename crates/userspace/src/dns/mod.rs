//! The per-scope DNS resolver: egress by domain name without trusting the scope's queries.
//!
//! A policy can grant egress to names (`[[net.allow]] host = ["crates.io", "*.crates.io"]`).
//! The kernel cannot match names — a `connect(2)` carries an address — so bee learns the
//! addresses of granted names from DNS and admits exactly those into the scope's allowed
//! addresses. Each scope gets its own [`ScopeResolver`]: a small stub resolver on
//! `127.0.0.1` (and `[::1]` where available), one port for UDP and TCP, to which the kernel
//! steers the scope's DNS traffic (UDP and TCP port 53). For every query it:
//!
//! 1. answers NXDOMAIN for a name the policy does not grant ([`NameGrants::ports_for`] is
//!    empty) **without sending anything upstream** — a query name is data, and `<secret>.evil.test`
//!    must not leave the machine — and reports a [`NameDenial`];
//! 2. answers NOERROR with no records for other query types (TXT, MX, HTTPS, …) of a granted
//!    name, again without forwarding;
//! 3. forwards A and AAAA queries for granted names to the upstream servers (a fresh query:
//!    new id, the normalised name, no client options), over UDP and over TCP when the answer
//!    is truncated, within [`ResolverConfig::timeout`]; a failure or timeout is SERVFAIL;
//! 4. follows the answer's CNAME chain, refusing the answer (NXDOMAIN) if any name of the
//!    chain is not granted, keeps the addresses of the chain's last name, drops special
//!    addresses ([`special_class`], the host's own) unless an address grant covers them
//!    ([`NameGrants::address_allows`]), caps their number and clamps their TTLs;
//! 5. hands the surviving addresses to the [`AnswerSink`] **before** replying: only when
//!    [`AnswerSink::admit`] succeeds does the client get them (else SERVFAIL), so a client can
//!    never connect to an address the kernel has not yet admitted.
//!
//! An answer that admitted addresses is cached by (name, type) until its lowest TTL less a
//! second: a repeated query is answered from the cache, its TTLs counted down, and its
//! addresses admitted again (step 5) first; nothing goes upstream.
//! [`ScopeResolver::clear_cache`] drops it all (a change of grants).
//!
//! When every address of an answer is refused, the reply is NOERROR with no records ("no data"
//! for this type, RFC 2308 §2.2) rather than NXDOMAIN: the name exists, and an NXDOMAIN would
//! make a client drop the other address family's good answer too.
//!
//! What a domain grant cannot prevent, by its nature: a granted name's owner chooses its
//! addresses (special ones excepted), and a wildcard grant (`*.crates.io`) lets a scope put data
//! in the labels below it, which reach the upstream servers and the zone's operator.
//!
//! The module needs no kernel feature and no privilege; the kernel side (steering port 53 to
//! [`ScopeResolver::port`], the map of admitted addresses) lives elsewhere.

mod answer;
mod server;
mod special;
mod upstream;

use std::fmt;
use std::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::time::Duration;

pub use server::ScopeResolver;
pub use special::{is_host_address, special_class};

/// The DNS port (RFC 1035 §4.2).
pub const DNS_PORT: u16 = 53;

/// Where the system's upstream servers are listed (resolv.conf(5)).
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// How a [`ScopeResolver`] resolves and what it lets through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolverConfig {
    /// The upstream servers, tried in order. Empty: every granted query is answered SERVFAIL.
    pub upstream: Vec<SocketAddr>,
    /// The time one client query may spend upstream, over all servers together (each gets an
    /// equal share); then the client gets SERVFAIL. Default 2 s.
    pub timeout: Duration,
    /// The lowest TTL of an answered record; a TTL of 0 becomes this. Default 5 s. Whole
    /// seconds (DNS TTLs are seconds, RFC 1035 §3.2.1); if it exceeds `ttl_max`, it wins.
    pub ttl_min: Duration,
    /// The highest TTL of an answered record. Default 3600 s.
    pub ttl_max: Duration,
    /// The most addresses one answer admits; further ones are dropped. Default 32.
    pub max_addresses: usize,
    /// The host's own addresses: refused in answers like the special classes. Default empty.
    pub host_addresses: Vec<IpAddr>,
}

impl ResolverConfig {
    /// The defaults (2 s, 5–3600 s, 32 addresses, no host addresses) with the upstream servers
    /// of [`RESOLV_CONF`] ([`parse_resolv_conf`]); an unreadable file gives no upstream.
    pub fn system() -> Self {
        let upstream = std::fs::read_to_string(RESOLV_CONF)
            .map(|text| parse_resolv_conf(&text))
            .unwrap_or_default();
        Self::with_upstream(upstream)
    }

    /// The defaults with the given upstream servers.
    pub fn with_upstream(upstream: Vec<SocketAddr>) -> Self {
        Self {
            upstream,
            timeout: Duration::from_secs(2),
            ttl_min: Duration::from_secs(5),
            ttl_max: Duration::from_secs(3600),
            max_addresses: 32,
            host_addresses: Vec::new(),
        }
    }
}

impl Default for ResolverConfig {
    /// [`ResolverConfig::system`].
    fn default() -> Self {
        Self::system()
    }
}

/// The `nameserver` addresses of a resolv.conf(5) text, in order, each on port 53.
///
/// Comments (`#`, `;`) and other options are ignored, and so is an address that does not
/// parse. A link-local IPv6 address may carry a numeric zone (`fe80::1%2`); one with an
/// interface name is skipped.
pub fn parse_resolv_conf(text: &str) -> Vec<SocketAddr> {
    let mut servers = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("nameserver") {
            continue;
        }
        let Some(addr) = words.next() else { continue };
        if let Ok(ip) = addr.parse::<IpAddr>() {
            servers.push(SocketAddr::new(ip, DNS_PORT));
        } else if let Some((Ok(ip), Ok(zone))) = addr
            .split_once('%')
            .map(|(ip, zone)| (ip.parse(), zone.parse()))
        {
            servers.push(SocketAddr::V6(SocketAddrV6::new(ip, DNS_PORT, 0, zone)));
        }
    }
    servers
}

/// The policy's name and address grants, as the resolver asks them.
pub trait NameGrants: Send + Sync + 'static {
    /// The grants for `name` (normalised: lowercase ASCII, no trailing dot, e.g. `"crates.io"`);
    /// empty = not granted.
    fn ports_for(&self, name: &str) -> Vec<PortGrant>;
    /// Whether an address grant of the policy covers `ip` (then a special-range answer is allowed).
    fn address_allows(&self, ip: IpAddr) -> bool;
}

/// One grant of ports for a name: the inclusive range `first..=last`, for TCP, UDP or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortGrant {
    /// The first port of the range.
    pub first: u16,
    /// The last port of the range (inclusive).
    pub last: u16,
    /// Whether the grant is for TCP.
    pub tcp: bool,
    /// Whether the grant is for UDP.
    pub udp: bool,
}

/// An address the resolver is about to give a scope, with what the scope may do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The name the scope asked for (normalised), whose grants these are. When the answer went
    /// through CNAMEs, every name of the chain was granted too.
    pub name: String,
    /// The address.
    pub addr: IpAddr,
    /// How long the client may use the address: the record's TTL, clamped to
    /// [`ResolverConfig::ttl_min`]..=[`ResolverConfig::ttl_max`] (whole seconds).
    pub ttl: Duration,
    /// The ports granted for `name` ([`NameGrants::ports_for`]).
    pub ports: Vec<PortGrant>,
}

/// Why a query (or part of its answer) was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameDenialReason {
    /// The name is not granted; answered NXDOMAIN, nothing sent upstream.
    NotGranted,
    /// The answer's CNAME chain leads to a name that is not granted (`target`, normalised, or
    /// escaped if it is not a valid host name); answered NXDOMAIN.
    CnameNotGranted {
        /// The first name of the chain that is not granted.
        target: String,
    },
    /// An address of the answer is special ([`special_class`], or `"host"` for one of
    /// [`ResolverConfig::host_addresses`]) and no address grant covers it; it was dropped.
    SpecialAddress {
        /// The refused address.
        addr: IpAddr,
        /// Its class.
        class: &'static str,
    },
    /// The query name is not a valid host name (letters, digits, `-` and `_` in labels of
    /// 1–63 bytes, at most 253 characters); answered NXDOMAIN, nothing sent upstream.
    InvalidName,
    /// The upstream servers failed (timeout, error, unusable answer, no server configured);
    /// answered SERVFAIL. Not a policy decision, reported so that a failed lookup can be told.
    Upstream(String),
}

/// A refused query or answer, for the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameDenial {
    /// The query name: normalised, or (for [`NameDenialReason::InvalidName`]) escaped as in a
    /// zone file.
    pub name: String,
    /// The query type's mnemonic (`"A"`, `"AAAA"`, `"TXT"`, …).
    pub qtype: String,
    /// Why.
    pub reason: NameDenialReason,
}

impl fmt::Display for NameDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DNS {} {}: ", self.qtype, self.name)?;
        match &self.reason {
            NameDenialReason::NotGranted => write!(f, "the policy grants no egress to this name"),
            NameDenialReason::CnameNotGranted { target } => {
                write!(
                    f,
                    "it is an alias of {target}, which the policy does not grant"
                )
            }
            NameDenialReason::SpecialAddress { addr, class } => {
                write!(f, "answer {addr} refused ({class} address, not granted)")
            }
            NameDenialReason::InvalidName => write!(f, "not a valid host name"),
            NameDenialReason::Upstream(why) => write!(f, "upstream failed: {why}"),
        }
    }
}

/// Where a [`ScopeResolver`] delivers its decisions. Called from the resolver's threads,
/// concurrently; never after [`ScopeResolver::stop`] returns.
pub trait AnswerSink: Send + Sync + 'static {
    /// Admit `answers` (one query's addresses, at least one) before the client sees them:
    /// typically, insert them into the scope's kernel map. `Err` (why) makes the client's
    /// answer SERVFAIL.
    fn admit(&self, answers: &[Admitted]) -> Result<(), String>;
    /// A query or part of an answer was refused.
    fn denied(&self, denial: NameDenial);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_nameservers() {
        let text = "# comment\nsearch example.com\nnameserver 127.0.0.53\n; nameserver 1.2.3.4\n\
                    nameserver ::1\nnameserver fe80::1%2\nnameserver fe80::1%eth0\nnameserver bogus\n\
                    nameserver\noptions edns0 trust-ad\n  nameserver 9.9.9.9 # trailing\n";
        let servers = parse_resolv_conf(text);
        assert_eq!(
            servers,
            vec![
                "127.0.0.53:53".parse().unwrap(),
                "[::1]:53".parse().unwrap(),
                SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().unwrap(), 53, 0, 2)),
                "9.9.9.9:53".parse().unwrap(),
            ]
        );
    }

    #[test]
    fn defaults() {
        let c = ResolverConfig::with_upstream(Vec::new());
        assert_eq!(c.timeout, Duration::from_secs(2));
        assert_eq!(c.ttl_min, Duration::from_secs(5));
        assert_eq!(c.ttl_max, Duration::from_secs(3600));
        assert_eq!(c.max_addresses, 32);
    }
}
