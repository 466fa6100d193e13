//! The typed vocabulary of what the kernel decided, shared from the ring buffer to the
//! transcript and the UI: the hook that decided ([`HookName`]), the access attempted
//! ([`Access`]) and the kind of grant that would have allowed it ([`GrantKind`]).
//!
//! Each serializes as the string bee has always written (`"file_open"`, `"read"`,
//! `"fs.read"`), so audit files and transcripts keep their shape; nothing downstream parses
//! those strings back. Comparisons with a string (`record.hook == "file_open"`) are kept for
//! tests and readers of JSON.

use std::fmt;

use bee_common::Hook;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The LSM hook of a record: one this build knows, or the text of another (`unknown:N` for an
/// id the kernel programs sent that this build does not know, or a name a newer bee wrote in a
/// transcript).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HookName {
    /// A hook this build knows.
    Known(Hook),
    /// Any other hook, as written.
    Other(String),
}

impl HookName {
    /// The record's hook for a raw `AuditEvent::hook` id.
    #[must_use]
    pub fn from_raw(raw: u32) -> Self {
        Hook::from_raw(raw).map_or_else(|| Self::Other(format!("unknown:{raw}")), Self::Known)
    }

    /// The hook for its name as in `include/linux/lsm_hook_defs.h` (`dns_query` for bee's
    /// resolver); any other text is kept as [`HookName::Other`].
    #[must_use]
    pub fn parse(name: &str) -> Self {
        Hook::ALL
            .iter()
            .find(|h| h.name() == name)
            .map_or_else(|| Self::Other(name.to_owned()), |h| Self::Known(*h))
    }

    /// The hook's name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Known(h) => h.name(),
            Self::Other(s) => s,
        }
    }

    /// The hook, when this build knows it.
    #[must_use]
    pub fn known(&self) -> Option<Hook> {
        match self {
            Self::Known(h) => Some(*h),
            Self::Other(_) => None,
        }
    }
}

impl From<Hook> for HookName {
    fn from(h: Hook) -> Self {
        Self::Known(h)
    }
}

impl fmt::Display for HookName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for HookName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for HookName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<Hook> for HookName {
    fn eq(&self, other: &Hook) -> bool {
        self.known() == Some(*other)
    }
}

impl Serialize for HookName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for HookName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(Self::parse(&name))
    }
}

/// An access a process attempted, as the kernel programs report it in a record's `access`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Reading a file or listing a directory.
    Read,
    /// Writing, creating, removing or changing a file or directory.
    Write,
    /// Executing a file (or mapping it executable).
    Exec,
    /// Connecting or sending to a unix socket.
    Unix,
    /// Connecting or sending to an IP peer, or resolving a name.
    Net,
}

impl Access {
    /// `read`, `write`, `exec`, `unix` or `net`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Exec => "exec",
            Self::Unix => "unix",
            Self::Net => "net",
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Access {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        [Self::Read, Self::Write, Self::Exec, Self::Unix, Self::Net]
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| UnknownName(s.to_owned()))
    }
}

impl PartialEq<str> for Access {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Access {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A name that is no [`Access`] or [`GrantKind`] (the text given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a known name")]
pub struct UnknownName(pub String);

/// A kind of grant, named by the policy key that grants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GrantKind {
    /// `fs.read`
    #[serde(rename = "fs.read")]
    FsRead,
    /// `fs.write`
    #[serde(rename = "fs.write")]
    FsWrite,
    /// `exec.allow`
    #[serde(rename = "exec.allow")]
    Exec,
    /// `net.allow`
    #[serde(rename = "net.allow")]
    Net,
    /// `net.unix`
    #[serde(rename = "net.unix")]
    NetUnix,
}

impl GrantKind {
    /// The policy key, for example `fs.write`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FsRead => "fs.read",
            Self::FsWrite => "fs.write",
            Self::Exec => "exec.allow",
            Self::Net => "net.allow",
            Self::NetUnix => "net.unix",
        }
    }
}

impl fmt::Display for GrantKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for GrantKind {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        [
            Self::FsRead,
            Self::FsWrite,
            Self::Exec,
            Self::Net,
            Self::NetUnix,
        ]
        .into_iter()
        .find(|g| g.as_str() == s)
        .ok_or_else(|| UnknownName(s.to_owned()))
    }
}

impl PartialEq<&str> for GrantKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_serializes_as_the_text_bee_always_wrote() {
        let json = serde_json::to_string(&(
            HookName::Known(Hook::FileOpen),
            HookName::from_raw(9999),
            [Access::Read, Access::Exec],
            GrantKind::NetUnix,
        ))
        .unwrap_or_default();
        assert_eq!(
            json,
            r#"["file_open","unknown:9999",["read","exec"],"net.unix"]"#
        );
    }

    #[test]
    fn every_known_hook_reads_back_as_itself() {
        for hook in Hook::ALL {
            let text = serde_json::to_string(&HookName::from(hook)).unwrap_or_default();
            let back: HookName = serde_json::from_str(&text).unwrap_or(HookName::Other(text));
            assert_eq!(back, HookName::Known(hook));
        }
        let other: Result<HookName, _> = serde_json::from_str(r#""path_future""#);
        assert_eq!(other.ok(), Some(HookName::Other("path_future".to_owned())));
    }
}
