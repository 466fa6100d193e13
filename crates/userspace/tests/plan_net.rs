//! Network grants: LPM entries with pushed-down port rules, checked against brute force.

mod plan_support;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bee_common::{LpmKeyV4, NetPortRule, NetValue, PROTO_TCP, PROTO_UDP};
use bee_core::net::{IpNet, Protocol};
use bee_userspace::plan::{EnforcementPlan, Placement, PlanError};
use plan_support::*;
use proptest::prelude::*;

/// Whether the first `bits` bits of `a` and `b` agree, most significant bit of byte 0 first,
/// as `BPF_MAP_TYPE_LPM_TRIE` compares key data.
fn prefix_eq(a: &[u8], b: &[u8], bits: u32) -> bool {
    (0..bits as usize).all(|i| {
        let bit = |d: &[u8]| d.get(i / 8).map(|byte| byte >> (7 - i % 8) & 1);
        bit(a) == bit(b)
    })
}

/// The kernel's lookup: IPv4 and IPv4-mapped peers in the IPv4 trie, others in the IPv6 trie;
/// the longest matching prefix wins.
fn lpm(plan: &EnforcementPlan, policy_id: u32, peer: IpAddr) -> Option<NetValue> {
    let v4 = match peer {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(a) => a.to_ipv4_mapped(),
    };
    let mut query = policy_id.to_ne_bytes().to_vec();
    match (v4, peer) {
        (Some(a), _) => {
            query.extend(a.octets());
            plan.net_v4()
                .iter()
                .filter(|(k, _)| {
                    let mut data = k.policy_id.to_ne_bytes().to_vec();
                    data.extend(k.addr);
                    prefix_eq(&data, &query, k.prefixlen)
                })
                .max_by_key(|(k, _)| k.prefixlen)
                .map(|(_, v)| *v)
        }
        (None, IpAddr::V6(a)) => {
            query.extend(a.octets());
            plan.net_v6()
                .iter()
                .filter(|(k, _)| {
                    let mut data = k.policy_id.to_ne_bytes().to_vec();
                    data.extend(k.addr);
                    prefix_eq(&data, &query, k.prefixlen)
                })
                .max_by_key(|(k, _)| k.prefixlen)
                .map(|(_, v)| *v)
        }
        (None, IpAddr::V4(_)) => None,
    }
}

fn proto_bit(p: Protocol) -> u8 {
    match p {
        Protocol::Tcp => PROTO_TCP,
        Protocol::Udp => PROTO_UDP,
    }
}

fn kernel_allows(
    plan: &EnforcementPlan,
    policy_id: u32,
    peer: IpAddr,
    p: Protocol,
    port: u16,
) -> bool {
    lpm(plan, policy_id, peer).is_some_and(|v| v.allows(proto_bit(p), port))
}

fn brute_force(pol: &bee_core::CompiledPolicy, peer: IpAddr, p: Protocol, port: u16) -> bool {
    let at = match peer {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    };
    pol.net.allow.iter().any(|g| {
        let (lo, hi) = g.net.range();
        lo <= at
            && at <= hi
            && g.ports.first <= port
            && port <= g.ports.last
            && g.protocols.contains(&p)
    })
}

fn rule(first: u16, last: u16, protocols: u8) -> NetPortRule {
    NetPortRule {
        first,
        last,
        protocols,
        _pad: [0; 3],
    }
}

const TCP: &[Protocol] = &[Protocol::Tcp];
const UDP: &[Protocol] = &[Protocol::Udp];
const BOTH: &[Protocol] = &[Protocol::Tcp, Protocol::Udp];

#[test]
fn rules_are_pushed_down_to_nested_blocks() -> Result<(), PlanError> {
    let mut pol = policy();
    net(&mut pol, "10.0.0.0/8", (443, 443), TCP);
    net(&mut pol, "10.1.0.0/16", (53, 53), UDP);
    let plan = EnforcementPlan::new(&pol)?;
    let entries: Vec<(LpmKeyV4, Vec<NetPortRule>)> = plan
        .net_v4()
        .iter()
        .map(|(k, v)| (*k, v.rules().to_vec()))
        .collect();
    assert_eq!(
        entries,
        vec![
            (
                LpmKeyV4 {
                    prefixlen: 40,
                    policy_id: 0,
                    addr: [10, 0, 0, 0]
                },
                vec![rule(443, 443, PROTO_TCP)]
            ),
            (
                LpmKeyV4 {
                    prefixlen: 48,
                    policy_id: 0,
                    addr: [10, 1, 0, 0]
                },
                vec![rule(53, 53, PROTO_UDP), rule(443, 443, PROTO_TCP)]
            ),
        ]
    );
    assert!(plan.net_v6().is_empty());
    Ok(())
}

#[test]
fn ranges_merge_per_protocol() -> Result<(), PlanError> {
    let mut pol = policy();
    net(&mut pol, "192.0.2.1", (80, 80), TCP);
    net(&mut pol, "192.0.2.1", (80, 80), UDP);
    net(&mut pol, "192.0.2.1", (8000, 8100), TCP);
    net(&mut pol, "192.0.2.1", (8101, 8200), TCP);
    net(&mut pol, "192.0.2.1", (8150, 9000), BOTH);
    net(&mut pol, "192.0.2.1", (65535, 65535), TCP);
    let plan = EnforcementPlan::new(&pol)?;
    let value = plan.net_v4().values().next().copied().unwrap_or_default();
    assert_eq!(
        value.rules(),
        [
            rule(80, 80, PROTO_TCP | PROTO_UDP),
            rule(8000, 9000, PROTO_TCP),
            rule(8150, 9000, PROTO_UDP),
            rule(65535, 65535, PROTO_TCP),
        ]
    );
    // Unused slots stay zero.
    assert!(
        value
            .rules
            .iter()
            .skip(4)
            .all(|r| *r == NetPortRule::default())
    );
    Ok(())
}

#[test]
fn ipv6_blocks_covering_mapped_addresses_grant_ipv4() -> Result<(), PlanError> {
    let mut pol = policy();
    net(&mut pol, "::/0", (443, 443), TCP);
    net(&mut pol, "2001:db8::/32", (53, 53), UDP);
    let plan = EnforcementPlan::new(&pol)?;
    assert_eq!(plan.net_v4().len(), 1);
    assert_eq!(plan.net_v6().len(), 2);
    let v4 = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
    assert!(kernel_allows(&plan, 0, v4, Protocol::Tcp, 443));
    assert!(!kernel_allows(&plan, 0, v4, Protocol::Udp, 53));
    let doc = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    assert!(kernel_allows(&plan, 0, doc, Protocol::Tcp, 443));
    assert!(kernel_allows(&plan, 0, doc, Protocol::Udp, 53));
    Ok(())
}

#[test]
fn relocation_sets_the_policy_id() -> Result<(), PlanError> {
    let mut pol = policy();
    net(&mut pol, "10.0.0.0/8", (443, 443), TCP);
    net(&mut pol, "2001:db8::/32", (443, 443), TCP);
    let plan = EnforcementPlan::new(&pol)?.relocated(Placement {
        policy_id: 9,
        ..Placement::default()
    })?;
    assert!(plan.net_v4().keys().all(|k| k.policy_id == 9));
    assert!(plan.net_v6().keys().all(|k| k.policy_id == 9));
    let peer = IpAddr::V4(Ipv4Addr::new(10, 2, 3, 4));
    assert!(kernel_allows(&plan, 9, peer, Protocol::Tcp, 443));
    assert!(!kernel_allows(&plan, 8, peer, Protocol::Tcp, 443));
    Ok(())
}

fn v4_block() -> impl Strategy<Value = IpNet> {
    (
        0u8..16,
        prop::sample::select(vec![0u8, 8, 24, 28, 29, 30, 31, 32]),
    )
        .prop_map(|(x, len)| {
            let raw = u32::from(Ipv4Addr::new(10, 0, 0, x));
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len))
            };
            IpNet::V4 {
                addr: Ipv4Addr::from(raw & mask),
                prefix_len: len,
            }
        })
}

fn v6_block() -> impl Strategy<Value = IpNet> {
    prop::sample::select(vec![
        "::/0",
        "::/64",
        "::fffe:0:0/95",
        "2001:db8::/32",
        "2001:db8::/64",
        "2001:db8:0:1::/64",
        "2001:db8::1",
    ])
    .prop_map(|s| {
        s.parse::<IpNet>().unwrap_or(IpNet::V6 {
            addr: Ipv6Addr::UNSPECIFIED,
            prefix_len: 0,
        })
    })
}

fn grant() -> impl Strategy<Value = (IpNet, u16, u16, Vec<Protocol>)> {
    (
        prop_oneof![3 => v4_block(), 1 => v6_block()],
        0u16..12,
        0u16..4,
        prop::sample::select(vec![TCP.to_vec(), UDP.to_vec(), BOTH.to_vec()]),
    )
        .prop_map(|(net, first, width, protocols)| (net, first, first + width, protocols))
}

fn peers() -> Vec<IpAddr> {
    let mut peers: Vec<IpAddr> = (0..20)
        .map(|x| IpAddr::V4(Ipv4Addr::new(10, 0, 0, x)))
        .chain([IpAddr::V4(Ipv4Addr::new(11, 0, 0, 1))])
        .collect();
    for s in [
        "2001:db8::1",
        "2001:db8::2",
        "2001:db8:0:1::5",
        "2001:db9::1",
        "::1",
        "::fffe:1:1",
    ] {
        if let Ok(a) = s.parse() {
            peers.push(IpAddr::V6(a));
        }
    }
    peers
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// LPM lookup + port/protocol check over the planned entries == "some grant contains
    /// (protocol, peer, port)".
    #[test]
    fn lpm_lookup_agrees_with_brute_force(grants in prop::collection::vec(grant(), 0..7)) {
        let mut pol = policy();
        for (i, (block, first, last, protocols)) in grants.iter().enumerate() {
            pol.net.allow.push(bee_core::compiled::NetRule {
                net: *block,
                ports: bee_core::net::PortRange { first: *first, last: *last },
                protocols: protocols.clone(),
                origin: origin(&format!("net.allow[{i}]"), &block.to_string()),
            });
        }
        let plan = EnforcementPlan::new(&pol);
        prop_assert!(plan.is_ok(), "{:?}", plan.err());
        let Ok(plan) = plan else { return Ok(()) };
        for peer in peers() {
            for port in 0..17u16 {
                for p in [Protocol::Tcp, Protocol::Udp] {
                    prop_assert_eq!(
                        kernel_allows(&plan, 0, peer, p, port),
                        brute_force(&pol, peer, p, port),
                        "{} {} {}", peer, p, port
                    );
                }
            }
        }
    }
}
