//! `[[net.allow]]` tables: addresses or host names, ports and protocols, expanded to one rule
//! per pair.

use std::ops::Range;

use toml::{Spanned, Value};

use super::Compiler;
use crate::compiled::{CompiledPolicy, HostRule, NetRule, Origin};
use crate::error::PolicyWarning;
use crate::host::{HostError, HostPattern};
use crate::net::{IpNet, PortRange, Protocol};
use crate::raw::RawNetRule;

/// Warnings about DNS ports in a policy with name grants: port 53 of any rule always reaches
/// bee's resolver (the kernel steers it there), and port 853 is always refused, so a grant of
/// either does not do what it says.
pub(super) fn lint_dns_ports(policy: &CompiledPolicy, file: &str) -> Vec<PolicyWarning> {
    if policy.net.hosts.is_empty() {
        return Vec::new();
    }
    let dns_ports = |r: &PortRange| {
        [53u16, 853]
            .into_iter()
            .filter(|p| r.first <= *p && *p <= r.last)
            .collect::<Vec<_>>()
    };
    let rules = policy
        .net
        .allow
        .iter()
        .map(|r| (&r.origin, r.ports))
        .chain(policy.net.hosts.iter().map(|r| (&r.origin, r.ports)));
    let mut out = Vec::new();
    for (origin, ports) in rules {
        for port in dns_ports(&ports) {
            let what = if port == 53 {
                "port 53 always reaches bee's resolver in a policy with names (the kernel steers it there), never the address named"
            } else {
                "port 853 (DNS over TLS) is always refused in a policy with names"
            };
            out.push(PolicyWarning {
                file: file.to_owned(),
                line: origin.line,
                column: origin.column,
                key: origin.key.clone(),
                message: format!("`{}` includes {what}", origin.text),
            });
        }
    }
    out.dedup_by(|a, b| a.line == b.line && a.column == b.column && a.message == b.message);
    out
}

/// Warnings about name rules whose ports the address rules already open to every address
/// (`0.0.0.0/0` and `::/0`): the name rule then only makes the name resolvable through bee's
/// resolver, which may not be what the author meant.
pub(super) fn lint_hosts(policy: &CompiledPolicy, file: &str) -> Vec<PolicyWarning> {
    if policy.net.allow.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for r in &policy.net.hosts {
        let everywhere = NetRule {
            net: IpNet::V6 {
                addr: std::net::Ipv6Addr::UNSPECIFIED,
                prefix_len: 0,
            },
            ports: r.ports,
            protocols: r.protocols.clone(),
            origin: Origin {
                key: String::new(),
                line: 0,
                column: 0,
                text: String::new(),
            },
        };
        if crate::attenuate::net::check(&[everywhere], &policy.net.allow).is_empty() {
            out.push(PolicyWarning {
                file: file.to_owned(),
                line: r.origin.line,
                column: r.origin.column,
                key: r.origin.key.clone(),
                message: format!(
                    "`{}` port {} adds only name resolution: the address rules already allow every IPv4 and IPv6 address on these ports",
                    r.host, r.ports
                ),
            });
        }
    }
    out
}

impl Compiler<'_> {
    /// One `[[net.allow]]` table: an address rule per address × port range into `addrs`, or
    /// a name rule per name × port range into `hosts`.
    pub(super) fn net_rule(
        &mut self,
        key: &str,
        rule: &Spanned<RawNetRule>,
        addrs: &mut Vec<NetRule>,
        hosts: &mut Vec<HostRule>,
    ) {
        let r = rule.get_ref();
        let (targets, by_name) = match (&r.addr, &r.host) {
            (Some(_), Some(host)) => {
                self.problem(
                    host.span(),
                    &format!("{key}.host"),
                    "a `[[net.allow]]` table grants addresses (`addr`) or names (`host`), not both",
                    Some("split it into two `[[net.allow]]` tables, one with `addr` and one with `host`"),
                );
                return;
            }
            (None, None) => {
                self.problem(
                    rule.span(),
                    key,
                    "missing `addr` or `host`",
                    Some("give `addr` (an address or CIDR block, or a list of them) or `host` (a name such as \"crates.io\" or \"*.crates.io\", or a list of them)"),
                );
                // The other keys are still checked, so every problem is reported at once.
                let _ = self.ports(&format!("{key}.ports"), r.ports.as_ref(), rule.span());
                let _ = self.protocols(&format!("{key}.proto"), r.proto.as_ref(), rule.span());
                return;
            }
            (None, Some(_)) => (
                self.strings(
                    &format!("{key}.host"),
                    r.host.as_ref(),
                    rule.span(),
                    "a host name (\"crates.io\", \"*.crates.io\") or a list of them",
                ),
                true,
            ),
            (Some(_), None) => (
                self.strings(
                    &format!("{key}.addr"),
                    r.addr.as_ref(),
                    rule.span(),
                    "an address or CIDR block (\"10.0.0.0/8\", \"::1\") or a list of them",
                ),
                false,
            ),
        };
        let ports = self.ports(&format!("{key}.ports"), r.ports.as_ref(), rule.span());
        let protocols = self.protocols(&format!("{key}.proto"), r.proto.as_ref(), rule.span());
        let (Some(targets), Some(ports), Some(protocols)) = (targets, ports, protocols) else {
            return;
        };
        for (text, span) in targets {
            if by_name {
                let host = match HostPattern::parse(&text) {
                    Ok(h) => h,
                    Err(e) => {
                        let help = match e {
                            HostError::IpLiteral(_) => {
                                "move the address to a `[[net.allow]]` table with `addr`"
                            }
                            HostError::WildcardTooBroad(_) | HostError::BadWildcard(_) => {
                                "a wildcard is `*.` before a name of at least two labels, and matches exactly one more label"
                            }
                            _ => {
                                "write a domain name such as \"crates.io\", or \"*.crates.io\" for the names one label below it"
                            }
                        };
                        self.problem(span, &format!("{key}.host"), e.to_string(), Some(help));
                        continue;
                    }
                };
                for range in &ports {
                    hosts.push(HostRule {
                        host: host.clone(),
                        ports: *range,
                        protocols: protocols.clone(),
                        origin: self.origin(&span, key.to_owned(), &text),
                    });
                }
                continue;
            }
            let net: IpNet = match text.parse() {
                Ok(n) => n,
                Err(e) => {
                    self.problem(
                        span,
                        &format!("{key}.addr"),
                        e.to_string(),
                        Some("write an IPv4/IPv6 address or a CIDR block with host bits zero"),
                    );
                    continue;
                }
            };
            for range in &ports {
                addrs.push(NetRule {
                    net,
                    ports: *range,
                    protocols: protocols.clone(),
                    origin: self.origin(&span, key.to_owned(), &text),
                });
            }
        }
    }

    /// A string or a non-empty list of strings, with each one's span.
    fn strings(
        &mut self,
        key: &str,
        v: Option<&Spanned<Value>>,
        table: Range<usize>,
        what: &str,
    ) -> Option<Vec<(String, Range<usize>)>> {
        let Some(v) = v else {
            self.problem(
                table,
                key,
                format!("missing `{}`", key.rsplit('.').next().unwrap_or(key)),
                Some(&format!("give {what}")),
            );
            return None;
        };
        let items: Vec<&Value> = match v.get_ref() {
            Value::Array(a) if !a.is_empty() => a.iter().collect(),
            one @ Value::String(_) => vec![one],
            _ => {
                self.problem(v.span(), key, format!("expected {what}"), None);
                return None;
            }
        };
        let mut out = Vec::new();
        for item in items {
            match item.as_str() {
                Some(s) => out.push((s.to_owned(), v.span())),
                None => {
                    self.problem(v.span(), key, format!("expected {what}"), None);
                    return None;
                }
            }
        }
        Some(out)
    }

    fn ports(
        &mut self,
        key: &str,
        v: Option<&Spanned<Value>>,
        table: Range<usize>,
    ) -> Option<Vec<PortRange>> {
        let help = "give a port (443), a range (\"8000-8100\") or a list of them; every port is \"0-65535\"";
        let Some(v) = v else {
            self.problem(table, key, "missing `ports`", Some(help));
            return None;
        };
        let items: Vec<&Value> = match v.get_ref() {
            Value::Array(a) if !a.is_empty() => a.iter().collect(),
            Value::Array(_) => {
                self.problem(
                    v.span(),
                    key,
                    "an empty port list grants nothing",
                    Some(help),
                );
                return None;
            }
            one => vec![one],
        };
        let mut out = Vec::new();
        for item in items {
            let parsed = match item {
                Value::Integer(n) => u16::try_from(*n)
                    .ok()
                    .map(|p| PortRange { first: p, last: p }),
                Value::String(s) => s.parse().ok(),
                _ => None,
            };
            match parsed {
                Some(r) => out.push(r),
                None => {
                    self.problem(
                        v.span(),
                        key,
                        format!("`{item}` is not a port or an ascending port range"),
                        Some(help),
                    );
                    return None;
                }
            }
        }
        Some(out)
    }

    fn protocols(
        &mut self,
        key: &str,
        v: Option<&Spanned<Value>>,
        table: Range<usize>,
    ) -> Option<Vec<Protocol>> {
        let help = "write proto = \"tcp\", \"udp\" or [\"tcp\", \"udp\"]";
        let Some(v) = v else {
            self.problem(table, key, "missing `proto`", Some(help));
            return None;
        };
        let items: Vec<&Value> = match v.get_ref() {
            Value::Array(a) if !a.is_empty() => a.iter().collect(),
            one => vec![one],
        };
        let mut out = Vec::new();
        for item in items {
            match item.as_str() {
                Some("tcp") => out.push(Protocol::Tcp),
                Some("udp") => out.push(Protocol::Udp),
                _ => {
                    self.problem(
                        v.span(),
                        key,
                        format!("`{item}` is not a protocol"),
                        Some(help),
                    );
                    return None;
                }
            }
        }
        out.sort();
        out.dedup();
        Some(out)
    }
}
