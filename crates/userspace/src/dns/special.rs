//! Address classes a DNS answer must not smuggle into a scope's allowed addresses.
//!
//! A domain grant says "whatever `crates.io` resolves to"; the resolver is what keeps that
//! from meaning "this machine, its local network or the cloud's metadata service" when a
//! name's owner (or an attacker on the path to the upstream server) answers with such an
//! address. [`special_class`] names the class of such an address; the resolver refuses it
//! unless an address grant of the policy covers it ([`super::NameGrants::address_allows`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The class of a special-purpose address, or `None` for an ordinary (public unicast) one.
///
/// The classes (the returned names are stable; they appear in denials):
///
/// | class | IPv4 | IPv6 |
/// |---|---|---|
/// | `"unspecified"` | `0.0.0.0` | `::` |
/// | `"this-network"` | `0.0.0.0/8` (RFC 1122 §3.2.1.3) | |
/// | `"loopback"` | `127.0.0.0/8` (RFC 1122) | `::1` (RFC 4291) |
/// | `"metadata"` | `169.254.169.254` (cloud instance metadata) | `fd00:ec2::254` (AWS) |
/// | `"link-local"` | `169.254.0.0/16` (RFC 3927) | `fe80::/10` (RFC 4291) |
/// | `"private"` | `10/8`, `172.16/12`, `192.168/16` (RFC 1918) | |
/// | `"shared"` | `100.64.0.0/10` (RFC 6598, carrier-grade NAT) | |
/// | `"unique-local"` | | `fc00::/7` (RFC 4193) |
/// | `"site-local"` | | `fec0::/10` (deprecated, RFC 3879) |
/// | `"multicast"` | `224.0.0.0/4` (RFC 5771) | `ff00::/8` (RFC 4291) |
/// | `"broadcast"` | `255.255.255.255` (RFC 919) | |
/// | `"reserved"` | `240.0.0.0/4` (RFC 1112 §4) | |
/// | `"ipv4-mapped"` | | `::ffff:0:0/96` (RFC 4291 §2.5.5.2) with a public IPv4 address |
/// | `"ipv4-compatible"` | | `::/96` (deprecated, RFC 4291 §2.5.5.1) |
///
/// An IPv4-mapped address (`::ffff:a.b.c.d`) or a NAT64 address of the well-known prefix
/// (`64:ff9b::/96`, RFC 6052) that embeds a special IPv4 address has that address's class.
/// IPv4-mapped addresses are refused even when the embedded address is public: no genuine
/// AAAA record holds one, and a socket connecting to one reaches the IPv4 address.
pub fn special_class(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => v6_class(v6),
    }
}

fn v4_class(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, _, _] = ip.octets();
    let class = if ip.is_unspecified() {
        "unspecified"
    } else if ip.is_broadcast() {
        "broadcast"
    } else if ip == Ipv4Addr::new(169, 254, 169, 254) {
        "metadata"
    } else if a == 0 {
        "this-network"
    } else if ip.is_loopback() {
        "loopback"
    } else if ip.is_link_local() {
        "link-local"
    } else if ip.is_private() {
        "private"
    } else if a == 100 && (b & 0xc0) == 64 {
        "shared"
    } else if ip.is_multicast() {
        "multicast"
    } else if a >= 240 {
        "reserved"
    } else {
        return None;
    };
    Some(class)
}

fn v6_class(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4_class(v4).unwrap_or("ipv4-mapped"));
    }
    let class = if ip.is_unspecified() {
        "unspecified"
    } else if ip.is_loopback() {
        "loopback"
    } else if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        "metadata"
    } else if s[..6] == [0; 6] {
        // ::/96 without :: and ::1: the deprecated IPv4-compatible addresses.
        "ipv4-compatible"
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return v4_class(embedded_v4(ip));
    } else if (s[0] & 0xffc0) == 0xfe80 {
        "link-local"
    } else if (s[0] & 0xffc0) == 0xfec0 {
        "site-local"
    } else if (s[0] & 0xfe00) == 0xfc00 {
        "unique-local"
    } else if ip.is_multicast() {
        "multicast"
    } else {
        return None;
    };
    Some(class)
}

/// The IPv4 address in the last 32 bits of `ip`.
fn embedded_v4(ip: Ipv6Addr) -> Ipv4Addr {
    let o = ip.octets();
    Ipv4Addr::new(o[12], o[13], o[14], o[15])
}

/// Whether `ip` is one of `host` (the host's own addresses), also when `ip` is the
/// IPv4-mapped form of one of them or `host` lists the mapped form of `ip`.
pub fn is_host_address(ip: IpAddr, host: &[IpAddr]) -> bool {
    let canonical = ip.to_canonical();
    host.iter().any(|h| h.to_canonical() == canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> Option<&'static str> {
        special_class(s.parse().unwrap())
    }

    #[test]
    fn ipv4_classes() {
        for (addr, want) in [
            ("0.0.0.0", Some("unspecified")),
            ("0.1.2.3", Some("this-network")),
            ("127.0.0.1", Some("loopback")),
            ("127.255.0.9", Some("loopback")),
            ("169.254.169.254", Some("metadata")),
            ("169.254.1.1", Some("link-local")),
            ("10.0.0.1", Some("private")),
            ("172.16.0.1", Some("private")),
            ("172.31.255.255", Some("private")),
            ("192.168.1.1", Some("private")),
            ("100.64.0.1", Some("shared")),
            ("100.127.255.255", Some("shared")),
            ("100.100.100.200", Some("shared")),
            ("224.0.0.1", Some("multicast")),
            ("239.255.255.250", Some("multicast")),
            ("255.255.255.255", Some("broadcast")),
            ("240.0.0.1", Some("reserved")),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("100.63.255.255", None),
            ("93.184.216.34", None),
            ("8.8.8.8", None),
            ("1.1.1.1", None),
        ] {
            assert_eq!(class(addr), want, "{addr}");
        }
    }

    #[test]
    fn ipv6_classes() {
        for (addr, want) in [
            ("::", Some("unspecified")),
            ("::1", Some("loopback")),
            ("fe80::1", Some("link-local")),
            ("febf::1", Some("link-local")),
            ("fec0::1", Some("site-local")),
            ("fc00::1", Some("unique-local")),
            ("fd12:3456::1", Some("unique-local")),
            ("fd00:ec2::254", Some("metadata")),
            ("ff02::1", Some("multicast")),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:169.254.169.254", Some("metadata")),
            ("::ffff:10.0.0.1", Some("private")),
            ("::ffff:8.8.8.8", Some("ipv4-mapped")),
            ("::10.0.0.1", Some("ipv4-compatible")),
            ("64:ff9b::10.0.0.1", Some("private")),
            ("64:ff9b::169.254.169.254", Some("metadata")),
            ("64:ff9b::8.8.8.8", None),
            ("2606:2800:220:1::1", None),
            ("2001:4860:4860::8888", None),
        ] {
            assert_eq!(class(addr), want, "{addr}");
        }
    }

    #[test]
    fn host_addresses_match_mapped_forms() {
        let host: Vec<IpAddr> = vec![
            "203.0.113.7".parse().unwrap(),
            "2001:db8::7".parse().unwrap(),
        ];
        assert!(is_host_address("203.0.113.7".parse().unwrap(), &host));
        assert!(is_host_address(
            "::ffff:203.0.113.7".parse().unwrap(),
            &host
        ));
        assert!(is_host_address("2001:db8::7".parse().unwrap(), &host));
        assert!(!is_host_address("203.0.113.8".parse().unwrap(), &host));
        let mapped: Vec<IpAddr> = vec!["::ffff:203.0.113.7".parse().unwrap()];
        assert!(is_host_address("203.0.113.7".parse().unwrap(), &mapped));
    }
}
