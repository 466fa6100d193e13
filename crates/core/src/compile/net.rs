//! `[[net.allow]]` tables: addresses, ports and protocols, expanded to one rule per pair.

use std::ops::Range;

use toml::{Spanned, Value};

use super::Compiler;
use crate::compiled::NetRule;
use crate::net::{IpNet, PortRange, Protocol};
use crate::raw::RawNetRule;

impl Compiler<'_> {
    pub(super) fn net_rule(
        &mut self,
        key: &str,
        rule: &Spanned<RawNetRule>,
        out: &mut Vec<NetRule>,
    ) {
        let r = rule.get_ref();
        if let Some(host) = &r.host {
            self.problem(host.span(), &format!("{key}.host"), "hostnames are not policy values: the kernel sees addresses, and a name's addresses change", Some("write the addresses or CIDR blocks the name resolves to in `addr`"));
        }
        let addrs = self.strings(
            &format!("{key}.addr"),
            r.addr.as_ref(),
            rule.span(),
            "an address or CIDR block (\"10.0.0.0/8\", \"::1\") or a list of them",
        );
        let ports = self.ports(&format!("{key}.ports"), r.ports.as_ref(), rule.span());
        let protocols = self.protocols(&format!("{key}.proto"), r.proto.as_ref(), rule.span());
        let (Some(addrs), Some(ports), Some(protocols)) = (addrs, ports, protocols) else {
            return;
        };
        for (text, span) in addrs {
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
                out.push(NetRule {
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
