//! The typed vocabulary of what the kernel decided, shared from the ring buffer to the
//! transcript and the UI: the hook that decided ([`HookName`]), the access attempted
//! ([`Access`]), the capability used ([`Capability`]) and the kind of grant that would have
//! allowed it ([`GrantKind`]). A peer's transport is the policy's own
//! [`bee_core::net::Protocol`].
//!
//! Each serializes as the string bee has always written (`"file_open"`, `"read"`,
//! `"CAP_SYS_ADMIN"`, `"fs.read"`), so audit files and transcripts keep their shape; nothing
//! downstream parses those strings back. Comparisons with a string
//! (`record.hook == "file_open"`) are kept for tests and readers of JSON.

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

/// A capability a process used (the `capable` hook), by its number in
/// `include/uapi/linux/capability.h`, or a name a newer bee wrote in a transcript.
///
/// Written (JSON and [`fmt::Display`]) by its name, `CAP_SYS_ADMIN`, or `CAP_<number>` for a
/// number this build has no name for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Capability {
    /// The capability with this number (`CAP_SYS_ADMIN` is 21).
    Number(u16),
    /// A name this build does not know, as written.
    Other(String),
}

/// Capability names by number (`include/uapi/linux/capability.h`, 0 to 40).
const NAMES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => match NAMES.get(usize::from(*n)) {
                Some(name) => f.write_str(name),
                None => write!(f, "CAP_{n}"),
            },
            Self::Other(name) => f.write_str(name),
        }
    }
}

impl Serialize for Capability {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Capability {
    /// The capability [`Capability`]'s `Display` writes: a known name or `CAP_<number>` is its
    /// number; any other text is kept as [`Capability::Other`].
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        let number = NAMES.iter().position(|n| *n == name).map_or_else(
            || name.strip_prefix("CAP_").and_then(|n| n.parse().ok()),
            |n| u16::try_from(n).ok(),
        );
        Ok(number.map_or(Self::Other(name), Self::Number))
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
    fn a_capability_is_written_by_its_name_and_read_back_as_its_number() {
        let json = serde_json::to_string(&[Capability::Number(21), Capability::Number(63)])
            .unwrap_or_default();
        assert_eq!(json, r#"["CAP_SYS_ADMIN","CAP_63"]"#);
        let back: Vec<Capability> =
            serde_json::from_str(r#"["CAP_SYS_ADMIN","CAP_63","CAP_NEW"]"#).unwrap_or_default();
        assert_eq!(
            back,
            [
                Capability::Number(21),
                Capability::Number(63),
                Capability::Other("CAP_NEW".to_owned())
            ]
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
