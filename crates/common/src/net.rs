//! The network egress maps: one LPM trie per address family.
//!
//! A key is `prefixlen` followed by the data the trie matches bit by bit, most significant bit
//! of the first byte first (`BPF_MAP_TYPE_LPM_TRIE`, Documentation/bpf/map_lpm_trie.rst; the
//! `struct bpf_lpm_trie_key_u8` header in `include/uapi/linux/bpf.h`). The data is the policy
//! id followed by the address in network byte order, so `prefixlen` is 32 plus the address
//! prefix length and every lookup is confined to one policy. The policy id is matched whole, so
//! its byte order only has to agree between the two sides (both use the host's).
//!
//! Because an LPM lookup returns only the longest matching prefix, each [`NetValue`] holds the
//! port rules of *every* grant whose block contains that prefix (the planner pushes rules down).
//! IPv4-mapped IPv6 peers (`::ffff:a.b.c.d`) are looked up in the IPv4 trie.

use core::mem::{align_of, size_of};

use crate::access::NET_RULES_MAX;

/// Key of the IPv4 trie.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LpmKeyV4 {
    /// Number of leading data bits that must match: 32 (policy id) + address prefix (0..=32).
    pub prefixlen: u32,
    /// Policy id ([`crate::ScopeValue::policy_id`]).
    pub policy_id: u32,
    /// Address in network byte order, host bits zero.
    pub addr: [u8; 4],
}

const _: () = assert!(size_of::<LpmKeyV4>() == 12 && align_of::<LpmKeyV4>() == 4);

/// Key of the IPv6 trie; laid out like [`LpmKeyV4`] with a 16-byte address.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LpmKeyV6 {
    /// Number of leading data bits that must match: 32 (policy id) + address prefix (0..=128).
    pub prefixlen: u32,
    /// Policy id ([`crate::ScopeValue::policy_id`]).
    pub policy_id: u32,
    /// Address in network byte order, host bits zero.
    pub addr: [u8; 16],
}

const _: () = assert!(size_of::<LpmKeyV6>() == 24 && align_of::<LpmKeyV6>() == 4);

/// One port rule: peers on a port in `first..=last` over a protocol in `protocols` are allowed.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NetPortRule {
    /// First port, host byte order (the kernel converts `sin_port` with `bpf_ntohs`).
    pub first: u16,
    /// Last port (inclusive), host byte order.
    pub last: u16,
    /// `PROTO_TCP` | `PROTO_UDP` bits.
    pub protocols: u8,
    /// Explicit padding to the 2-byte alignment of the ports; always 0.
    pub _pad: [u8; 3],
}

const _: () = assert!(size_of::<NetPortRule>() == 8 && align_of::<NetPortRule>() == 2);

impl NetPortRule {
    /// Whether the rule allows `port` (host byte order) over `protocol` (`PROTO_*`, one bit).
    pub const fn allows(&self, protocol: u8, port: u16) -> bool {
        self.protocols & protocol != 0 && self.first <= port && port <= self.last
    }
}

/// Value of both tries: the port rules for peers in the key's block.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NetValue {
    /// Number of used entries in `rules` (0..=16).
    pub count: u32,
    /// Keeps `rules` at offset 8; always 0.
    pub _pad: u32,
    /// The rules; entries from `count` on are zero.
    pub rules: [NetPortRule; NET_RULES_MAX],
}

const _: () = assert!(size_of::<NetValue>() == 136 && align_of::<NetValue>() == 4);

impl NetValue {
    /// The used rules.
    pub fn rules(&self) -> &[NetPortRule] {
        self.rules.get(..self.count as usize).unwrap_or(&self.rules)
    }

    /// Whether any used rule allows `port` over `protocol` — the kernel's check after the
    /// trie lookup.
    pub fn allows(&self, protocol: u8, port: u16) -> bool {
        self.rules().iter().any(|r| r.allows(protocol, port))
    }
}

/// The well-known DNS port (RFC 1035 §4.2): a scope with [`crate::scope::SCOPE_DNS`] has
/// every TCP or UDP peer on it steered to bee's resolver.
pub const DNS_PORT: u16 = 53;

/// DNS over TLS (RFC 7858) and over QUIC (RFC 9250): always denied to a scope with
/// [`crate::scope::SCOPE_DNS`], whose only name server is bee's resolver.
pub const DOT_PORT: u16 = 853;

/// Value of the DNS map, a hash map keyed by the scope's cgroup id: where the scope's DNS
/// traffic is steered. Written before the scope entry that sets
/// [`crate::scope::SCOPE_DNS`], removed after it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DnsValue {
    /// The resolver's port (host byte order) on `127.0.0.1`, UDP and TCP alike.
    pub port: u16,
    /// 1 when the resolver also listens on `[::1]` (IPv6 peers go there, else to
    /// `::ffff:127.0.0.1`).
    pub v6: u8,
    /// Always 0.
    pub _pad: [u8; 5],
}

const _: () = assert!(size_of::<DnsValue>() == 8 && align_of::<DnsValue>() == 2);

/// Value of the Landlock engine's gate map (`gate.bpf.c`), a hash map keyed by a gated
/// scope's cgroup id: where its address rules are and whether its DNS is steered.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GateScope {
    /// The key of the scope's rules in the gate's LPM tries ([`LpmKeyV4::policy_id`]).
    pub gate_id: u32,
    /// [`crate::scope::SCOPE_DNS`] when names are granted, else 0.
    pub flags: u32,
}

const _: () = assert!(size_of::<GateScope>() == 8 && align_of::<GateScope>() == 4);

/// Key of the answers map (hash): an address one of the scope's resolver answers named.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct AnswerKey {
    /// The scope's cgroup id: answers are never shared between scopes.
    pub cgroup_id: u64,
    /// The address in network byte order; IPv4 in its IPv4-mapped form `::ffff:a.b.c.d`.
    pub addr: [u8; 16],
}

const _: () = assert!(size_of::<AnswerKey>() == 24 && align_of::<AnswerKey>() == 8);

/// Value of the answers map: until when the address is a peer, and on which ports.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct AnswerValue {
    /// Expiry on `CLOCK_BOOTTIME` in nanoseconds (`bpf_ktime_get_boot_ns()`): the answer's TTL
    /// after it was given. At or after it the entry allows nothing.
    pub expires_ns: u64,
    /// The port rules of every granted name that answered with this address.
    pub ports: NetValue,
}

const _: () = assert!(size_of::<AnswerValue>() == 144 && align_of::<AnswerValue>() == 8);

crate::pod!(
    LpmKeyV4,
    LpmKeyV6,
    NetPortRule,
    NetValue,
    DnsValue,
    GateScope,
    AnswerKey,
    AnswerValue
);
