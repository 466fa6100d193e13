//! Name grants → what bee's resolver for the scope needs: which names it answers, on which
//! ports their addresses become peers, and which special addresses the policy's address grants
//! let an answer name.
//!
//! Nothing of it goes into the kernel maps with the plan: the resolver puts each answer's
//! addresses into the answers map as it gives them (`crate::engine::AnswerMap`).

use std::net::IpAddr;

use bee_common::{NetPortRule, PROTO_TCP, PROTO_UDP};
use bee_core::compiled::{HostRule, NetRule};
use bee_core::host::HostPattern;
use bee_core::net::{IpNet, Protocol};

/// One name grant: names matching `host`, on `rule`'s ports and protocols.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NameRule {
    host: HostPattern,
    rule: NetPortRule,
}

/// The name grants of a plan (empty for a policy without `host` rules).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamePlan {
    rules: Vec<NameRule>,
    addresses: Vec<IpNet>,
}

fn protocols(list: &[Protocol]) -> u8 {
    list.iter().fold(0, |acc, p| {
        acc | match p {
            Protocol::Tcp => PROTO_TCP,
            Protocol::Udp => PROTO_UDP,
        }
    })
}

impl NamePlan {
    /// The name grants `hosts`, and the address blocks of `addresses` (for
    /// [`NamePlan::address_granted`]).
    pub fn new(hosts: &[HostRule], addresses: &[NetRule]) -> Self {
        let rules = hosts
            .iter()
            .map(|h| NameRule {
                host: h.host.clone(),
                rule: NetPortRule {
                    first: h.ports.first,
                    last: h.ports.last,
                    protocols: protocols(&h.protocols),
                    _pad: [0; 3],
                },
            })
            .collect();
        let mut addresses: Vec<IpNet> = addresses.iter().map(|r| r.net).collect();
        addresses.sort();
        addresses.dedup();
        Self { rules, addresses }
    }

    /// True when the policy grants no names (its scopes get no resolver).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The port rules of every grant whose pattern matches `name` (normalised: ASCII
    /// lowercase, no trailing dot), without repeats; empty when the name is not granted.
    pub fn ports_for(&self, name: &str) -> Vec<NetPortRule> {
        let mut out: Vec<NetPortRule> = Vec::new();
        for r in self.rules.iter().filter(|r| r.host.matches(name)) {
            if !out.contains(&r.rule) {
                out.push(r.rule);
            }
        }
        out
    }

    /// Whether an address grant of the policy covers `ip` (on any port): then an answer may
    /// name it even when it is a loopback, private or other special address.
    pub fn address_granted(&self, ip: IpAddr) -> bool {
        let v = match ip {
            IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
            IpAddr::V6(a) => a
                .to_ipv4_mapped()
                .map_or(u128::from(a), |v4| u128::from(v4.to_ipv6_mapped())),
        };
        self.addresses.iter().any(|n| {
            let (first, last) = n.range();
            first <= v && v <= last
        })
    }

    /// The granted patterns as written (`*.crates.io`), each once, for messages.
    pub fn patterns(&self) -> Vec<String> {
        let mut out: Vec<String> = self.rules.iter().map(|r| r.host.to_string()).collect();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bee_core::{CompileOptions, compile_str};

    fn names(text: &str) -> NamePlan {
        let options = CompileOptions {
            base: "/w".into(),
            home: None,
        };
        let p = match compile_str("p.toml", text, &options) {
            Ok(c) => c.policy,
            Err(e) => unreachable!("{e:?}"),
        };
        NamePlan::new(&p.net.hosts, &p.net.allow)
    }

    #[test]
    fn names_get_the_ports_of_every_grant_that_matches_them() {
        let n = names(
            r#"version = 2
[[net.allow]]
host = ["crates.io", "*.crates.io"]
ports = [443]
proto = "tcp"
[[net.allow]]
host = "static.crates.io"
ports = [80]
proto = "tcp"
[[net.allow]]
addr = "10.0.0.0/8"
ports = [53]
proto = "udp"
"#,
        );
        assert!(!n.is_empty());
        let ports = |name: &str| -> Vec<(u16, u16, u8)> {
            n.ports_for(name)
                .iter()
                .map(|r| (r.first, r.last, r.protocols))
                .collect()
        };
        assert_eq!(ports("crates.io"), vec![(443, 443, PROTO_TCP)]);
        assert_eq!(
            ports("static.crates.io"),
            vec![(443, 443, PROTO_TCP), (80, 80, PROTO_TCP)]
        );
        assert!(ports("a.static.crates.io").is_empty());
        assert!(ports("evil.example").is_empty());
        assert!(n.address_granted("10.1.2.3".parse().unwrap()));
        assert!(n.address_granted("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!n.address_granted("169.254.169.254".parse().unwrap()));
    }

    #[test]
    fn a_policy_without_host_rules_has_no_name_plan() {
        let n = names(
            "version = 2\n[[net.allow]]\naddr = \"1.2.3.4\"\nports = [443]\nproto = \"tcp\"\n",
        );
        assert!(n.is_empty());
        assert!(n.ports_for("crates.io").is_empty());
    }
}
