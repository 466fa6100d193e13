//! Domain names as egress grants: `[[net.allow]] host = "crates.io"` or `"*.crates.io"`.
//!
//! A [`HostPattern`] is kept in its ASCII form (IDNA, UTS #46: `bücher.example` is
//! `xn--bcher-kva.example`), lowercase, without a trailing dot, so that two spellings of one
//! name are one pattern and the names a resolver sees on the wire compare byte for byte.
//!
//! A wildcard `*.suffix` stands for exactly one more label than `suffix`, as in TLS
//! certificates (RFC 6125 §6.4.3): `*.crates.io` matches `static.crates.io`, but neither
//! `crates.io` nor `a.static.crates.io`. Its suffix needs at least two labels (`*.com` would
//! grant every name under a top-level domain).
//!
//! [`normalize_name`] brings a name read from a DNS query into the same form, so that
//! [`HostPattern::matches`] can compare it.

use std::fmt;
use std::net::IpAddr;

use idna::AsciiDenyList;
use idna::uts46::{DnsLength, Hyphens, Uts46};
use serde::{Deserialize, Serialize};

/// The longest name in ASCII form, without the trailing dot (RFC 1035 §2.3.4: 255 octets
/// on the wire, which is 253 characters written out).
pub const MAX_NAME_LEN: usize = 253;

/// The longest label (RFC 1035 §2.3.4).
pub const MAX_LABEL_LEN: usize = 63;

/// A domain name grant: one name, or every name one label below a suffix.
///
/// Both forms hold the ASCII (punycode) lowercase name without a trailing dot; build them with
/// [`HostPattern::parse`], which guarantees it. Printed (and serialised) as written in a
/// policy: `crates.io`, `*.crates.io`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostPattern {
    /// Exactly this name.
    Exact(String),
    /// Every name of exactly one more label than this suffix (written `*.suffix`).
    Wildcard(String),
}

/// Why a host pattern did not parse. Each message says what was wrong with the name as
/// written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Nothing was written (or only a dot).
    #[error("the host name is empty")]
    Empty,
    /// An IP address was written where a name belongs.
    #[error("`{0}` is an IP address, not a host name: use `addr` to grant addresses")]
    IpLiteral(String),
    /// UTS #46 processing refused the name (a character that is not allowed in a host name,
    /// or a malformed `xn--` label).
    #[error(
        "`{0}` is not a valid internationalised host name (a character not allowed in host names, or a malformed `xn--` label)"
    )]
    Idna(String),
    /// The name is longer than [`MAX_NAME_LEN`] bytes in ASCII form.
    #[error("`{name}` is {len} bytes long in ASCII form; a host name has at most 253")]
    TooLong {
        /// The name as written.
        name: String,
        /// Its length in ASCII form.
        len: usize,
    },
    /// Two dots in a row, or a dot at the start.
    #[error("`{0}` has an empty label (two dots in a row, or a leading dot)")]
    EmptyLabel(String),
    /// A label longer than [`MAX_LABEL_LEN`] bytes.
    #[error("the label `{label}` of `{name}` is {len} bytes long; a label has at most 63")]
    LabelTooLong {
        /// The name as written.
        name: String,
        /// The label, in ASCII form.
        label: String,
        /// Its length.
        len: usize,
    },
    /// A character other than a letter, digit or hyphen (after IDNA mapping).
    #[error(
        "`{name}` contains `{found}`; host names have letters, digits and hyphens between dots"
    )]
    BadCharacter {
        /// The name as written.
        name: String,
        /// The first character refused.
        found: char,
    },
    /// A label that starts or ends with a hyphen.
    #[error("the label `{label}` of `{name}` starts or ends with a hyphen")]
    Hyphen {
        /// The name as written.
        name: String,
        /// The label, in ASCII form.
        label: String,
    },
    /// A `*` other than as the whole first label.
    #[error(
        "`{0}` has a `*` that is not the whole first label; the only wildcard is a leading `*.` (`*.example.com`)"
    )]
    BadWildcard(String),
    /// A wildcard whose suffix has fewer than two labels.
    #[error(
        "`{0}` is too broad: a wildcard needs a suffix of at least two labels (`*.example.com`, not `*.com`)"
    )]
    WildcardTooBroad(String),
    /// The last label is all digits, which no top-level domain is (and which reads as an
    /// address).
    #[error(
        "`{0}` ends in an all-numeric label, which no top-level domain is; for an address, use `addr`"
    )]
    NumericTld(String),
}

impl HostPattern {
    /// Parses a host pattern as written in a policy: a name (`crates.io`, `Bücher.example`,
    /// `example.com.`) or a wildcard (`*.crates.io`).
    ///
    /// The name is mapped to its ASCII form by UTS #46 (lowercased, punycode for non-ASCII
    /// labels), and one trailing dot is dropped.
    ///
    /// # Errors
    /// A [`HostError`] naming what is wrong: an empty name, an IP address, a name longer than
    /// 253 bytes or a label longer than 63 in ASCII form, an empty label, a character outside
    /// letters, digits and hyphens, a label starting or ending with a hyphen, a `*` that is not
    /// the whole first label, a wildcard over fewer than two labels, or an all-numeric last
    /// label.
    pub fn parse(text: &str) -> Result<Self, HostError> {
        let name = text.strip_suffix('.').unwrap_or(text);
        if name.is_empty() {
            return Err(HostError::Empty);
        }
        let unbracketed = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(name);
        if unbracketed.parse::<IpAddr>().is_ok() {
            return Err(HostError::IpLiteral(text.to_owned()));
        }
        let (wildcard, rest) = match name.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, name),
        };
        if name == "*" {
            return Err(HostError::WildcardTooBroad(text.to_owned()));
        }
        if rest.contains('*') || rest.is_empty() {
            return Err(HostError::BadWildcard(text.to_owned()));
        }
        // ASCII input is checked before IDNA, whose errors say less.
        if rest.is_ascii() {
            check(text, &rest.to_ascii_lowercase(), wildcard)?;
        }
        let ascii = Uts46::new()
            .to_ascii(
                rest.as_bytes(),
                AsciiDenyList::STD3,
                Hyphens::CheckFirstLast,
                DnsLength::Ignore,
            )
            .map_err(|_| HostError::Idna(text.to_owned()))?;
        // A full stop of another script (`。`) may have been mapped to a trailing dot.
        let ascii = ascii.strip_suffix('.').unwrap_or(&ascii).to_owned();
        check(text, &ascii, wildcard)?;
        Ok(if wildcard {
            Self::Wildcard(ascii)
        } else {
            Self::Exact(ascii)
        })
    }

    /// Whether this pattern grants `name`: an ASCII name without a trailing dot, as
    /// [`normalize_name`] gives it (letters are compared without regard to case).
    #[must_use]
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Self::Exact(n) => n.eq_ignore_ascii_case(name),
            Self::Wildcard(suffix) => {
                let Some(cut) = name.len().checked_sub(suffix.len() + 1) else {
                    return false;
                };
                let (Some(label), Some(tail)) = (name.get(..cut), name.get(cut..)) else {
                    return false;
                };
                !label.is_empty()
                    && !label.contains('.')
                    && tail
                        .strip_prefix('.')
                        .is_some_and(|t| t.eq_ignore_ascii_case(suffix))
            }
        }
    }

    /// The name of an exact pattern, or the suffix of a wildcard (ASCII form).
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Exact(n) | Self::Wildcard(n) => n,
        }
    }

    /// Whether this is a `*.suffix` pattern.
    #[must_use]
    pub fn is_wildcard(&self) -> bool {
        matches!(self, Self::Wildcard(_))
    }
}

/// Checks an ASCII, lowercase name (the suffix of a wildcard when `wildcard`); `text` is what
/// was written, for the messages.
fn check(text: &str, ascii: &str, wildcard: bool) -> Result<(), HostError> {
    let len = ascii.len() + if wildcard { 2 } else { 0 };
    if len > MAX_NAME_LEN {
        return Err(HostError::TooLong {
            name: text.to_owned(),
            len,
        });
    }
    let mut labels = 0;
    let mut last = "";
    for label in ascii.split('.') {
        if label.is_empty() {
            return Err(HostError::EmptyLabel(text.to_owned()));
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(HostError::LabelTooLong {
                name: text.to_owned(),
                label: label.to_owned(),
                len: label.len(),
            });
        }
        if let Some(found) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
        {
            return Err(HostError::BadCharacter {
                name: text.to_owned(),
                found,
            });
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(HostError::Hyphen {
                name: text.to_owned(),
                label: label.to_owned(),
            });
        }
        labels += 1;
        last = label;
    }
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HostError::NumericTld(text.to_owned()));
    }
    if wildcard && labels < 2 {
        return Err(HostError::WildcardTooBroad(text.to_owned()));
    }
    Ok(())
}

/// A name from a DNS query in the form [`HostPattern::matches`] compares: ASCII lowercase,
/// one trailing dot dropped. `None` when it is not a name a grant could cover: empty (the
/// root), not ASCII, longer than 253 bytes, an empty label or one longer than 63 bytes, or a
/// character other than a letter, digit, hyphen or underscore (`_` appears in service names
/// such as `_443._tcp.example.com`). No IDNA mapping is done: names on the wire are ASCII
/// already.
#[must_use]
pub fn normalize_name(wire: &str) -> Option<String> {
    let name = wire.strip_suffix('.').unwrap_or(wire);
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return None;
    }
    let ok = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= MAX_LABEL_LEN
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    ok.then(|| name.to_ascii_lowercase())
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact(n) => f.write_str(n),
            Self::Wildcard(s) => write!(f, "*.{s}"),
        }
    }
}

impl std::str::FromStr for HostPattern {
    type Err = HostError;

    /// [`HostPattern::parse`].
    fn from_str(s: &str) -> Result<Self, HostError> {
        Self::parse(s)
    }
}

impl Serialize for HostPattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> HostPattern {
        match HostPattern::parse(s) {
            Ok(h) => h,
            Err(e) => unreachable!("{s}: {e}"),
        }
    }

    fn refused(s: &str) -> HostError {
        match HostPattern::parse(s) {
            Ok(h) => unreachable!("{s} parsed as {h:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn names_are_ascii_lowercase_without_the_root_dot() {
        assert_eq!(host("crates.io"), HostPattern::Exact("crates.io".into()));
        assert_eq!(host("Static.Crates.IO"), host("static.crates.io"));
        assert_eq!(
            host("example.com."),
            HostPattern::Exact("example.com".into())
        );
        assert_eq!(
            host("*.Crates.io."),
            HostPattern::Wildcard("crates.io".into())
        );
        assert_eq!(host("localhost"), HostPattern::Exact("localhost".into()));
        assert_eq!(
            host("r1---sn-abc.googlevideo.com").to_string(),
            "r1---sn-abc.googlevideo.com"
        );
    }

    #[test]
    fn idna() {
        assert_eq!(host("BÜCHER.example").to_string(), "xn--bcher-kva.example");
        assert_eq!(host("bücher.example"), host("xn--bcher-kva.example"));
        assert_eq!(
            host("*.bücher.example").to_string(),
            "*.xn--bcher-kva.example"
        );
        // A full stop of another script separates labels too.
        assert_eq!(host("bücher。example").to_string(), "xn--bcher-kva.example");
        assert!(matches!(refused("xn--a.example"), HostError::Idna(_)));
        assert!(matches!(
            refused("a\u{2764}b c.example"),
            HostError::Idna(_)
        ));
    }

    #[test]
    fn refusals() {
        assert_eq!(refused(""), HostError::Empty);
        assert_eq!(refused("."), HostError::Empty);
        assert!(matches!(refused("1.2.3.4"), HostError::IpLiteral(_)));
        assert!(matches!(refused("::1"), HostError::IpLiteral(_)));
        assert!(matches!(refused("[2001:db8::1]"), HostError::IpLiteral(_)));
        assert!(refused("1.2.3.4").to_string().contains("`addr`"));
        assert!(matches!(refused("a.*.b"), HostError::BadWildcard(_)));
        assert!(matches!(refused("*"), HostError::WildcardTooBroad(_)));
        assert!(matches!(refused("*."), HostError::WildcardTooBroad(_)));
        assert!(matches!(
            refused("a*.example.com"),
            HostError::BadWildcard(_)
        ));
        assert!(matches!(
            refused("*.*.example.com"),
            HostError::BadWildcard(_)
        ));
        assert!(matches!(refused("*.com"), HostError::WildcardTooBroad(_)));
        assert!(refused("*.com").to_string().contains("too broad"));
        assert!(matches!(refused("a..b"), HostError::EmptyLabel(_)));
        assert!(matches!(refused(".a.b"), HostError::EmptyLabel(_)));
        assert!(matches!(
            refused("a_b.example"),
            HostError::BadCharacter { found: '_', .. }
        ));
        assert!(matches!(
            refused("a b.example"),
            HostError::BadCharacter { found: ' ', .. }
        ));
        assert!(matches!(refused("-a.example"), HostError::Hyphen { .. }));
        assert!(matches!(refused("a-.example"), HostError::Hyphen { .. }));
        assert!(matches!(refused("example.123"), HostError::NumericTld(_)));
        assert!(matches!(
            refused(&format!("{}.com", "a".repeat(64))),
            HostError::LabelTooLong { len: 64, .. }
        ));
        let long = vec!["a".repeat(60); 5].join(".");
        assert!(matches!(
            refused(&long),
            HostError::TooLong { len: 304, .. }
        ));
        // 253 bytes is the most; a wildcard counts its `*.`.
        let max = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        assert_eq!(max.len(), 253);
        assert_eq!(host(&max).to_string(), max);
        assert!(matches!(
            refused(&format!("*.{max}")),
            HostError::TooLong { len: 255, .. }
        ));
        // Non-ASCII labels are measured in their ASCII form.
        assert!(matches!(
            refused(&format!("{}.example", "ü".repeat(60))),
            HostError::LabelTooLong { .. }
        ));
    }

    #[test]
    fn wildcards_match_exactly_one_more_label() {
        let w = host("*.crates.io");
        assert!(w.matches("static.crates.io"));
        assert!(w.matches("STATIC.crates.io"));
        assert!(!w.matches("crates.io"));
        assert!(!w.matches(".crates.io"));
        assert!(!w.matches("a.static.crates.io"));
        assert!(!w.matches("staticcrates.io"));
        assert!(!w.matches("static.crates.io.evil"));
        assert!(!w.matches("xcrates.io"));
        let e = host("crates.io");
        assert!(e.matches("crates.io"));
        assert!(!e.matches("static.crates.io"));
        assert!(!host("*.bücher.example").matches("a.bücher.example"));
        assert!(host("*.bücher.example").matches("a.xn--bcher-kva.example"));
    }

    #[test]
    fn wire_names() {
        assert_eq!(
            normalize_name("Static.Crates.IO."),
            Some("static.crates.io".into())
        );
        assert_eq!(
            normalize_name("_443._tcp.example.com"),
            Some("_443._tcp.example.com".into())
        );
        assert_eq!(normalize_name("."), None);
        assert_eq!(normalize_name(""), None);
        assert_eq!(normalize_name("a..b"), None);
        assert_eq!(normalize_name("a.b.."), None);
        assert_eq!(normalize_name("bücher.example"), None);
        assert_eq!(normalize_name("a b.example"), None);
        assert_eq!(normalize_name(&format!("{}.com", "a".repeat(64))), None);
        assert_eq!(normalize_name(&vec!["a".repeat(60); 5].join(".")), None);
    }

    #[test]
    fn serde_round_trip_reparses() {
        let w = host("*.Bücher.example");
        let json = serde_json::to_string(&w).unwrap_or_default();
        assert_eq!(json, "\"*.xn--bcher-kva.example\"");
        let back: Result<HostPattern, _> = serde_json::from_str(&json);
        assert_eq!(back.ok(), Some(w));
        let bad: Result<HostPattern, _> = serde_json::from_str("\"*.com\"");
        assert!(bad.is_err());
    }
}
