//! IP egress grants as boxes protocol × address × port, and box coverage.
//!
//! Addresses live in one 128-bit space ([`IpNet::range`]: IPv4 at its mapped position), so
//! a v4 child rule is covered by a v6 parent block that contains its mapped form. Address
//! blocks are CIDR blocks, hence any two are nested or disjoint: the parent blocks that meet
//! a child block are the ones containing it (found by one lookup per prefix length) and the
//! ones inside it (a range of the blocks sorted by first address).

use std::net::IpAddr;

use super::ports::{Ports, subtract};
use super::{Capability, Excess, RuleRef, Witness};
use crate::compiled::NetRule;
use crate::net::{IpNet, Protocol};
use rustc_hash::FxHashMap;

/// A well-formed rule's address block as an inclusive range in the 128-bit space, or
/// `None` for a malformed one (prefix out of range, host bits set, ports descending). A
/// malformed parent rule grants nothing; a malformed child rule (or one without protocols,
/// whose meaning to a backend is unclear) is refused.
fn block(r: &NetRule) -> Option<(u128, u128)> {
    let (base, len, bits) = match r.net {
        IpNet::V4 { addr, prefix_len } => (u128::from(addr.to_ipv6_mapped()), prefix_len, 32),
        IpNet::V6 { addr, prefix_len } => (u128::from(addr), prefix_len, 128),
    };
    if u32::from(len) > bits || r.ports.first > r.ports.last {
        return None;
    }
    let host = bits - u32::from(len);
    let span = if host >= 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    };
    (base & span == 0).then_some((base, base | span))
}

/// The number of host bits of an aligned block `[lo, hi]` (0 for one address).
fn host_bits(lo: u128, hi: u128) -> u32 {
    128 - (hi - lo).leading_zeros()
}

fn rule_ref(r: &NetRule) -> RuleRef {
    let protocols: Vec<String> = r.protocols.iter().map(ToString::to_string).collect();
    RuleRef {
        origin: r.origin.clone(),
        rule: format!("{} {} port {}", protocols.join(","), r.net, r.ports),
    }
}

struct Parents<'a> {
    rules: &'a [NetRule],
    /// Well-formed rules by exact block.
    by_block: FxHashMap<(u128, u128), Vec<usize>>,
    /// The block sizes present, as numbers of host bits in the 128-bit space, ascending.
    sizes: Vec<u32>,
    /// Well-formed rules' (first address, last address, index), sorted.
    sorted: Vec<(u128, u128, usize)>,
}

impl<'a> Parents<'a> {
    fn new(rules: &'a [NetRule]) -> Self {
        let mut by_block: FxHashMap<(u128, u128), Vec<usize>> = FxHashMap::default();
        let mut sorted = Vec::new();
        let mut sizes = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            if let Some(b) = block(r) {
                by_block.entry(b).or_default().push(i);
                sorted.push((b.0, b.1, i));
                sizes.push(host_bits(b.0, b.1));
            }
        }
        sorted.sort_unstable();
        sizes.sort_unstable();
        sizes.dedup();
        Self {
            rules,
            by_block,
            sizes,
            sorted,
        }
    }

    /// Rules whose block contains `[lo, hi]` (an aligned block), smallest block first.
    fn containing(&self, lo: u128, hi: u128) -> Vec<usize> {
        let from = host_bits(lo, hi);
        let mut out = Vec::new();
        for &k in self.sizes.iter().filter(|&&k| k >= from) {
            let mask = if k >= 128 {
                u128::MAX
            } else {
                (1u128 << k) - 1
            };
            let base = lo & !mask;
            if let Some(v) = self.by_block.get(&(base, base | mask)) {
                out.extend_from_slice(v);
            }
        }
        out
    }

    /// Rules whose block lies strictly inside `[lo, hi]`.
    fn inside(&self, lo: u128, hi: u128) -> impl Iterator<Item = (u128, u128, usize)> + '_ {
        let start = self.sorted.partition_point(|&(a, _, _)| a < lo);
        self.sorted[start..]
            .iter()
            .copied()
            .take_while(move |&(a, _, _)| a <= hi)
            .filter(move |&(a, b, _)| (a, b) != (lo, hi))
    }

    fn has(&self, i: usize, p: Protocol) -> bool {
        self.rules.get(i).is_some_and(|r| r.protocols.contains(&p))
    }

    fn ports(&self, i: usize) -> Ports {
        self.rules.get(i).map_or((1, 0), |r| {
            (u32::from(r.ports.first), u32::from(r.ports.last))
        })
    }

    /// A point of `[lo, hi] × ports` over `p` that no parent rule covers.
    fn uncovered(&self, lo: u128, hi: u128, ports: Ports, p: Protocol) -> Option<(u128, u32)> {
        let mut outer: Vec<Ports> = self
            .containing(lo, hi)
            .into_iter()
            .filter(|&i| self.has(i, p))
            .map(|i| self.ports(i))
            .collect();
        let need = subtract(&[ports], &mut outer);
        if need.is_empty() {
            return None;
        }
        let inner: Vec<(u128, u128, Ports)> = self
            .inside(lo, hi)
            .filter(|&(_, _, i)| self.has(i, p))
            .map(|(a, b, i)| (a, b, self.ports(i)))
            .collect();
        // Sweep the address range: at each boundary, the blocks containing it must cover
        // the ports still needed.
        let mut points: Vec<u128> = vec![lo];
        for &(a, b, _) in &inner {
            points.push(a);
            if b < hi {
                points.push(b + 1);
            }
        }
        points.sort_unstable();
        points.dedup();
        let mut next = 0;
        let mut active: Vec<(u128, Ports)> = Vec::new();
        for e in points {
            active.retain(|&(b, _)| b >= e);
            while let Some(&(a, b, ports)) = inner.get(next) {
                if a > e {
                    break;
                }
                if b >= e {
                    active.push((b, ports));
                }
                next += 1;
            }
            let mut here: Vec<Ports> = active.iter().map(|&(_, p)| p).collect();
            if let Some(&(port, _)) = subtract(&need, &mut here).first() {
                return Some((e, port));
            }
        }
        None
    }

    /// The smallest block containing `addr`, preferring rules over `p`.
    fn nearest(&self, addr: u128, p: Protocol) -> Option<usize> {
        let all = self.containing(addr, addr);
        all.iter()
            .copied()
            .find(|&i| self.has(i, p))
            .or_else(|| all.first().copied())
    }
}

/// Checks every child IP egress rule against the union of the parent's.
pub(crate) fn check(child: &[NetRule], parent: &[NetRule]) -> Vec<Excess> {
    let parents = Parents::new(parent);
    let mut out = Vec::new();
    for c in child {
        let Some((lo, hi)) = block(c).filter(|_| !c.protocols.is_empty()) else {
            out.push(Excess {
                capability: Capability::NetIp,
                child: rule_ref(c),
                witness: Witness::Unproven {
                    reason: format!(
                        "`{}` port `{}` over {} protocol(s) is not a well-formed rule",
                        c.net,
                        c.ports,
                        c.protocols.len()
                    ),
                },
                nearest_parent: None,
            });
            continue;
        };
        let ports = (u32::from(c.ports.first), u32::from(c.ports.last));
        let mut protocols = c.protocols.clone();
        protocols.sort_unstable();
        protocols.dedup();
        let found = protocols.into_iter().find_map(|p| {
            parents
                .uncovered(lo, hi, ports, p)
                .map(|(addr, port)| (p, addr, port))
        });
        let Some((protocol, addr, port)) = found else {
            continue;
        };
        let address: IpAddr = IpNet::address_at(addr);
        out.push(Excess {
            capability: Capability::NetIp,
            child: rule_ref(c),
            witness: Witness::Peer {
                protocol,
                address,
                port: u16::try_from(port).unwrap_or(u16::MAX),
            },
            nearest_parent: parents
                .nearest(addr, protocol)
                .and_then(|i| parent.get(i))
                .map(rule_ref),
        });
    }
    out
}
