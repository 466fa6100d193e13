//! The backend-neutral compiled form of a policy.
//!
//! A [`CompiledPolicy`] is what the policy *means*: every path absolute and normalised, every
//! glob lowered to one of the six [`PathPattern`] kinds, every pinned executable resolved to
//! its inode, every host name in its ASCII form ([`crate::host`]), every network grant split
//! into one rule per address (or name), protocol set and port range. It is
//! deterministic (rules in source order, duplicates merged) so that the same input gives
//! byte-identical JSON, and it keeps each rule's [`Origin`] so that diagnostics and audit explanations can name
//! the line a grant came from.

use serde::{Deserialize, Serialize};

use crate::glob::PathPattern;
use crate::host::HostPattern;
use crate::net::{IpNet, PortRange, Protocol};

/// Version of the compiled JSON layout; bumped when a field changes meaning.
pub const COMPILED_FORMAT: u32 = 1;

/// A policy after parsing, path normalisation and glob lowering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompiledPolicy {
    /// [`COMPILED_FORMAT`] at the time of compilation.
    pub format: u32,
    /// The policy language version the source declared (`version = 1`).
    pub version: u32,
    /// The policy's `name`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The policy's `description`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The file the policy was read from, as given.
    pub source: String,
    /// The absolute directory that relative paths were resolved against.
    pub base: String,
    /// The fragments `include` expanded, in order, as diagnostics name them (`shipped
    /// fragment rust (version 2)`, or a path); their rules' keys start with `FRAGMENT:`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// File-system grants.
    pub fs: FsGrants,
    /// Executables that may be run.
    pub exec: Vec<ExecRule>,
    /// `exec.deny`: paths never executed, whatever `exec` grants (`fs.deny` also applies).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exec_deny: Vec<PathRule>,
    /// Network egress grants.
    pub net: NetGrants,
}

/// Where in the source a rule was written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// The key path of the value, e.g. `fs.read[2]` or `net.allow[0].ports[1]`.
    pub key: String,
    /// 1-based line of the value in the source file.
    pub line: u32,
    /// 1-based column (in characters) of the value.
    pub column: u32,
    /// The value as written, before normalisation.
    pub text: String,
}

/// A path pattern and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PathRule {
    /// The lowered pattern.
    #[serde(flatten)]
    pub pattern: PathPattern,
    /// Where it was written.
    pub origin: Origin,
}

/// File-system grants and carve-outs.
///
/// A write grant covers, for every path it matches: opening for writing, creating, deleting,
/// renaming to or from, hard-linking, symlinking, truncating, changing mode and ownership, and
/// making directories and special files. A write grant also implies read on the same paths;
/// [`FsGrants::readable`] lists both.
///
/// Carve-outs are subtracted from the grants, and always win:
///
/// | capability | granted paths |
/// |---|---|
/// | read | (`read` ∪ `write`) ∖ `deny` |
/// | write | `write` ∖ (`deny` ∪ (`protect` ∖ `unprotect`)) |
/// | exec | `exec` ∖ (`exec_deny` ∪ `deny`) |
/// | unix sockets (`net.unix`) | `net.unix` ∖ `deny` |
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsGrants {
    /// `fs.read` rules, as written.
    pub read: Vec<PathRule>,
    /// `fs.write` rules.
    pub write: Vec<PathRule>,
    /// `fs.deny`: paths neither read, written, executed nor connected to (as unix sockets),
    /// whatever the grants say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<PathRule>,
    /// Protected paths, never written unless `unprotect` also matches: the built-in set of
    /// the policy's language version ([`crate::protected`]), then `fs.protect`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect: Vec<PathRule>,
    /// `fs.unprotect`: paths taken out of `protect` (they still need a write grant).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprotect: Vec<PathRule>,
}

impl FsGrants {
    /// Every rule that grants read: `read` and `write` together.
    pub fn readable(&self) -> impl Iterator<Item = &PathRule> {
        self.read.iter().chain(&self.write)
    }
}

/// The identity of a file: device and inode number as `stat(2)` reports them
/// (`st_dev` in user-space encoding, `st_ino`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileId {
    /// `st_dev` as returned by `stat(2)` (glibc encoding; the kernel's `dev_t` differs).
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

/// An executable grant: files matching `pattern` may be executed; with `pin`, only while the
/// file at that path is still the inode resolved when the policy was compiled.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ExecRule {
    /// The lowered pattern (always [`PathPattern::Exact`] when pinned).
    #[serde(flatten)]
    pub pattern: PathPattern,
    /// The pinned file identity, for rules written with a leading `!`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<FileId>,
    /// Where it was written.
    pub origin: Origin,
}

/// Network egress grants.
///
/// | grant | allows |
/// |---|---|
/// | `allow` ([`NetRule`]) | connecting (or sending) to a peer address in a block, on a port, over a protocol |
/// | `hosts` ([`HostRule`]) | resolving a name through bee's resolver, then connecting to the addresses of its answers, on a port, over a protocol, for the answer's lifetime |
/// | `unix` | connecting to a pathname unix socket |
///
/// The two IP grants are separate capabilities: an address grant never covers a name grant
/// (see [`crate::attenuate`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetGrants {
    /// IP egress rules (connect, and sendmsg to an explicit address).
    pub allow: Vec<NetRule>,
    /// Domain name egress rules (`[[net.allow]]` tables with `host`). Absent in compiled
    /// policies written before name grants existed, hence the default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostRule>,
    /// Pathname unix sockets that may be connected to (or sent to).
    pub unix: Vec<PathRule>,
}

/// One IP egress rule: peers in `net`, on a port in `ports`, over one of `protocols`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetRule {
    /// The peer address block.
    pub net: IpNet,
    /// The peer port range.
    pub ports: PortRange,
    /// The protocols covered; sorted, never empty.
    pub protocols: Vec<Protocol>,
    /// Where it was written.
    pub origin: Origin,
}

/// One domain name egress rule: the names `host` matches, resolved through bee's resolver,
/// and the addresses their answers give, on a port in `ports`, over one of `protocols`.
///
/// A `[[net.allow]]` table with several names or port ranges becomes one rule per pair, like
/// [`NetRule`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostRule {
    /// The name, or `*.suffix`, in ASCII lowercase form.
    pub host: HostPattern,
    /// The peer port range.
    pub ports: PortRange,
    /// The protocols covered; sorted, never empty.
    pub protocols: Vec<Protocol>,
    /// Where it was written.
    pub origin: Origin,
}

impl CompiledPolicy {
    /// The canonical JSON form: pretty-printed, fields in declaration order, rules in source
    /// order.
    /// Two compilations of the same source on the same machine give identical bytes.
    ///
    /// # Errors
    /// Only if serialisation itself fails, which the types here cannot cause.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        let mut s = serde_json::to_string_pretty(self)?;
        s.push('\n');
        Ok(s)
    }
}
