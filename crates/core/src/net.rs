//! Network egress values: address blocks (CIDR), port ranges and transport protocols.
//!
//! IPv4-mapped IPv6 blocks (`::ffff:0:0/96` and below) are normalised to the IPv4 block they
//! denote, because the kernel sees a connect to `::ffff:10.0.0.1` on an IPv6 socket as the
//! IPv4 peer `10.0.0.1` (RFC 4291 §2.5.5.2); a grant written either way means the same thing.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An address block: a network address and a prefix length (RFC 4632 for IPv4, RFC 4291 for
/// IPv6). Host bits below the prefix are always zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpNet {
    /// An IPv4 block; `prefix_len` is 0..=32.
    V4 {
        /// Network address (host bits zero).
        addr: Ipv4Addr,
        /// Prefix length in bits.
        prefix_len: u8,
    },
    /// An IPv6 block that is not IPv4-mapped; `prefix_len` is 0..=128.
    V6 {
        /// Network address (host bits zero).
        addr: Ipv6Addr,
        /// Prefix length in bits.
        prefix_len: u8,
    },
}

/// Why an address block did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// Not an IP address (names are granted with `host`, see [`crate::host`]).
    #[error("`{0}` is not an IPv4 or IPv6 address")]
    NotAnAddress(String),
    /// The prefix length is not a number in range for the family.
    #[error("prefix length `{0}` is out of range (0..=32 for IPv4, 0..=128 for IPv6)")]
    BadPrefix(String),
    /// The address has bits set below the prefix, e.g. `10.0.0.1/8`.
    #[error("`{given}` has host bits set; the block is `{network}`")]
    HostBitsSet {
        /// What was written.
        given: String,
        /// The block it would denote with the host bits cleared.
        network: String,
    },
    /// A port range whose first port is above its last, or a port above 65535.
    #[error("`{0}` is not a port (0..=65535) or an ascending range `A-B`")]
    BadPort(String),
}

impl IpNet {
    /// The block's first and last address as 128-bit integers in one space: IPv4 addresses
    /// are placed at their IPv4-mapped position (`::ffff:a.b.c.d`), so v4 and v6 blocks never
    /// overlap unless one is the mapped form of the other (which normalisation removes).
    pub fn range(&self) -> (u128, u128) {
        let (base, bits, len) = match *self {
            Self::V4 { addr, prefix_len } => (
                u128::from(addr.to_ipv6_mapped()),
                32u32,
                u32::from(prefix_len),
            ),
            Self::V6 { addr, prefix_len } => (u128::from(addr), 128, u32::from(prefix_len)),
        };
        let host_bits = bits - len;
        let span = if host_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        };
        (base, base | span)
    }

    /// The address at 128-bit position `v` (as [`IpNet::range`] numbers them), printed as the
    /// family a user would write it in.
    pub fn address_at(v: u128) -> IpAddr {
        let v6 = Ipv6Addr::from(v);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }
}

impl FromStr for IpNet {
    type Err = NetError;

    /// Parses `ADDR` (a single host: /32 or /128) or `ADDR/LEN`.
    fn from_str(s: &str) -> Result<Self, NetError> {
        let (addr_text, len_text) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = addr_text
            .parse()
            .map_err(|_| NetError::NotAnAddress(addr_text.to_owned()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len: u8 = match len_text {
            None => max,
            Some(l) => l
                .parse()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| NetError::BadPrefix(l.to_owned()))?,
        };
        let net = match addr {
            IpAddr::V4(a) => Self::V4 {
                addr: Ipv4Addr::from(mask32(u32::from(a), len)),
                prefix_len: len,
            },
            IpAddr::V6(a) => match (a.to_ipv4_mapped(), len >= 96) {
                (Some(v4), true) => Self::V4 {
                    addr: Ipv4Addr::from(mask32(u32::from(v4), len - 96)),
                    prefix_len: len - 96,
                },
                _ => Self::V6 {
                    addr: Ipv6Addr::from(mask128(u128::from(a), len)),
                    prefix_len: len,
                },
            },
        };
        let exact = match (addr, net) {
            (IpAddr::V4(a), Self::V4 { addr, .. }) => a == addr,
            (IpAddr::V6(a), Self::V4 { addr, .. }) => a.to_ipv4_mapped() == Some(addr),
            (IpAddr::V6(a), Self::V6 { addr, .. }) => a == addr,
            (IpAddr::V4(_), Self::V6 { .. }) => false,
        };
        if !exact {
            return Err(NetError::HostBitsSet {
                given: s.to_owned(),
                network: net.to_string(),
            });
        }
        Ok(net)
    }
}

fn mask32(v: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        v & (u32::MAX << (32 - u32::from(len)))
    }
}

fn mask128(v: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        v & (u128::MAX << (128 - u32::from(len)))
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4 { addr, prefix_len } => write!(f, "{addr}/{prefix_len}"),
            Self::V6 { addr, prefix_len } => write!(f, "{addr}/{prefix_len}"),
        }
    }
}

impl Serialize for IpNet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IpNet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// An inclusive range of transport ports, `first <= last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRange {
    /// First port in the range.
    pub first: u16,
    /// Last port in the range (inclusive).
    pub last: u16,
}

impl FromStr for PortRange {
    type Err = NetError;

    /// Parses `P` or `A-B` with `A <= B`.
    fn from_str(s: &str) -> Result<Self, NetError> {
        let bad = || NetError::BadPort(s.to_owned());
        let (a, b) = s.split_once('-').unwrap_or((s, s));
        let first: u16 = a.trim().parse().map_err(|_| bad())?;
        let last: u16 = b.trim().parse().map_err(|_| bad())?;
        if first > last {
            return Err(bad());
        }
        Ok(Self { first, last })
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl Serialize for PortRange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A transport protocol an egress grant covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP (`SOCK_STREAM` over IP), including TCP Fast Open's data-carrying SYN.
    Tcp,
    /// UDP (`SOCK_DGRAM` over IP), connected or not.
    Udp,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        match s.parse() {
            Ok(n) => n,
            Err(e) => unreachable!("{s}: {e}"),
        }
    }

    #[test]
    fn parses_hosts_and_blocks() {
        assert_eq!(net("10.0.0.1").to_string(), "10.0.0.1/32");
        assert_eq!(net("10.0.0.0/8").to_string(), "10.0.0.0/8");
        assert_eq!(net("::1").to_string(), "::1/128");
        assert_eq!(net("2001:db8::/32").to_string(), "2001:db8::/32");
        assert_eq!(
            net("0.0.0.0/0").range(),
            (0xffff_0000_0000, 0xffff_ffff_ffff)
        );
    }

    #[test]
    fn v4_mapped_blocks_become_v4() {
        assert_eq!(net("::ffff:10.0.0.1"), net("10.0.0.1"));
        assert_eq!(net("::ffff:10.0.0.0/104"), net("10.0.0.0/8"));
        // A block wider than the mapped range stays IPv6.
        assert!(matches!(net("::fffe:0:0/95"), IpNet::V6 { .. }));
    }

    #[test]
    fn refuses_bad_blocks() {
        assert!(matches!(
            "10.0.0.1/8".parse::<IpNet>(),
            Err(NetError::HostBitsSet { .. })
        ));
        assert!(matches!(
            "10.0.0.0/33".parse::<IpNet>(),
            Err(NetError::BadPrefix(_))
        ));
        assert!(matches!(
            "example.com".parse::<IpNet>(),
            Err(NetError::NotAnAddress(_))
        ));
    }

    #[test]
    fn ports() {
        assert_eq!(
            "80".parse::<PortRange>(),
            Ok(PortRange {
                first: 80,
                last: 80
            })
        );
        assert_eq!(
            "8000-8100".parse::<PortRange>().map(|p| p.to_string()),
            Ok("8000-8100".to_owned())
        );
        assert!("90-80".parse::<PortRange>().is_err());
        assert!("65536".parse::<PortRange>().is_err());
    }

    #[test]
    fn address_at_prints_the_family() {
        let (lo, _) = net("192.168.1.0/24").range();
        assert_eq!(IpNet::address_at(lo).to_string(), "192.168.1.0");
        let (lo, _) = net("::1").range();
        assert_eq!(IpNet::address_at(lo).to_string(), "::1");
    }
}
