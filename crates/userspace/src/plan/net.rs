//! Network grants → LPM-trie entries with the port rules pushed down.
//!
//! An LPM lookup returns only the longest prefix containing the peer, so the value stored for
//! each granted block holds the port rules of *every* grant whose block contains it (its own
//! and its ancestors'). Grants for one block are merged per protocol (overlapping and adjacent
//! port ranges joined), and a range granted for both protocols becomes one rule.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use bee_common::{LpmKeyV4, LpmKeyV6, NET_RULES_MAX, NetPortRule, NetValue, PROTO_TCP, PROTO_UDP};
use bee_core::compiled::{NetRule, Origin};
use bee_core::net::{IpNet, Protocol};

use super::{PlanError, PlanLimits};

/// The LPM-trie contents with policy id 0 (set by relocation).
#[derive(Debug, Default)]
pub(crate) struct NetPlan {
    pub v4: BTreeMap<LpmKeyV4, NetValue>,
    pub v6: BTreeMap<LpmKeyV6, NetValue>,
}

/// One port rule of one grant.
#[derive(Debug, Clone, Copy)]
struct Ports<'a> {
    protocols: u8,
    first: u16,
    last: u16,
    origin: &'a Origin,
}

/// An address block: `(prefix length, address as an integer, host bits zero)`.
type Block = (u8, u128);

/// Grants of one family by block.
type Blocks<'a> = BTreeMap<Block, Vec<Ports<'a>>>;

fn mask(addr: u128, len: u8, bits: u8) -> u128 {
    let host = u32::from(bits.saturating_sub(len));
    if host >= 128 {
        0
    } else {
        addr & !((1u128 << host) - 1)
    }
}

/// The IPv4-mapped block `::ffff:0:0/96` (RFC 4291 §2.5.5.2) as an integer.
const V4_MAPPED: u128 = 0xffff_0000_0000;

/// Builds the two tries' contents.
pub(crate) fn build(rules: &[NetRule], limits: &PlanLimits) -> Result<NetPlan, PlanError> {
    let mut v4: Blocks<'_> = BTreeMap::new();
    let mut v6: Blocks<'_> = BTreeMap::new();
    for rule in rules {
        let ports = Ports {
            protocols: rule.protocols.iter().fold(0, |acc, p| {
                acc | match p {
                    Protocol::Tcp => PROTO_TCP,
                    Protocol::Udp => PROTO_UDP,
                }
            }),
            first: rule.ports.first,
            last: rule.ports.last,
            origin: &rule.origin,
        };
        match rule.net {
            IpNet::V4 { addr, prefix_len } => v4
                .entry((prefix_len, u128::from(u32::from(addr))))
                .or_default()
                .push(ports),
            IpNet::V6 { addr, prefix_len } => {
                let addr = u128::from(addr);
                // A block containing all IPv4-mapped addresses grants every IPv4 peer too
                // (`IpNet::range` places IPv4 there), and the kernel looks those up as IPv4.
                if prefix_len <= 96 && mask(V4_MAPPED, prefix_len, 128) == addr {
                    v4.entry((0, 0)).or_default().push(ports);
                }
                v6.entry((prefix_len, addr)).or_default().push(ports);
            }
        }
    }
    let prefixes = v4.len() + v6.len();
    if prefixes > limits.max_net_prefixes {
        return Err(PlanError::TooManyNetPrefixes {
            count: prefixes,
            cap: limits.max_net_prefixes,
        });
    }
    let mut plan = NetPlan::default();
    for ((len, addr), value) in push_down(&v4, 32)? {
        let key = LpmKeyV4 {
            prefixlen: 32 + u32::from(len),
            policy_id: 0,
            addr: (addr as u32).to_be_bytes(),
        };
        plan.v4.insert(key, value);
    }
    for ((len, addr), value) in push_down(&v6, 128)? {
        let key = LpmKeyV6 {
            prefixlen: 32 + u32::from(len),
            policy_id: 0,
            addr: addr.to_be_bytes(),
        };
        plan.v6.insert(key, value);
    }
    Ok(plan)
}

/// For each block, the merged rules of every grant whose block contains it.
fn push_down(blocks: &Blocks<'_>, bits: u8) -> Result<Vec<(Block, NetValue)>, PlanError> {
    let mut out = Vec::with_capacity(blocks.len());
    for &(len, addr) in blocks.keys() {
        let mut ports: Vec<Ports<'_>> = Vec::new();
        for l in 0..=len {
            if let Some(p) = blocks.get(&(l, mask(addr, l, bits))) {
                ports.extend(p);
            }
        }
        let rules = merge(&ports);
        if rules.len() > NET_RULES_MAX {
            let mut origins: Vec<Origin> = ports.iter().map(|p| p.origin.clone()).collect();
            origins.sort();
            origins.dedup();
            return Err(PlanError::TooManyPortRules {
                block: block_text(len, addr, bits),
                count: rules.len(),
                origins,
            });
        }
        let mut value = NetValue {
            count: rules.len() as u32,
            ..NetValue::default()
        };
        for (slot, rule) in value.rules.iter_mut().zip(rules) {
            *slot = rule;
        }
        out.push(((len, addr), value));
    }
    Ok(out)
}

fn block_text(len: u8, addr: u128, bits: u8) -> String {
    if bits == 32 {
        format!("{}/{len}", std::net::Ipv4Addr::from(addr as u32))
    } else {
        format!("{}/{len}", Ipv6Addr::from(addr))
    }
}

/// Joins overlapping and adjacent ranges per protocol; a range present for both protocols
/// becomes one rule. Sorted by `(first, last, protocols)`.
fn merge(ports: &[Ports<'_>]) -> Vec<NetPortRule> {
    let ranges = |proto: u8| -> Vec<(u16, u16)> {
        let mut r: Vec<(u16, u16)> = ports
            .iter()
            .filter(|p| p.protocols & proto != 0)
            .map(|p| (p.first, p.last))
            .collect();
        r.sort_unstable();
        let mut out: Vec<(u16, u16)> = Vec::with_capacity(r.len());
        for (first, last) in r {
            match out.last_mut() {
                Some(prev) if u32::from(first) <= u32::from(prev.1) + 1 => {
                    prev.1 = prev.1.max(last);
                }
                _ => out.push((first, last)),
            }
        }
        out
    };
    let tcp = ranges(PROTO_TCP);
    let udp = ranges(PROTO_UDP);
    let mut rules: Vec<NetPortRule> = Vec::with_capacity(tcp.len() + udp.len());
    let rule = |(first, last): (u16, u16), protocols: u8| NetPortRule {
        first,
        last,
        protocols,
        _pad: [0; 3],
    };
    for &r in &tcp {
        let both = udp.binary_search(&r).is_ok();
        rules.push(rule(
            r,
            if both {
                PROTO_TCP | PROTO_UDP
            } else {
                PROTO_TCP
            },
        ));
    }
    for &r in &udp {
        if tcp.binary_search(&r).is_err() {
            rules.push(rule(r, PROTO_UDP));
        }
    }
    rules.sort_unstable_by_key(|r| (r.first, r.last, r.protocols));
    rules
}
