//! The attenuation proof: a child policy may only be run under a parent if every grant of
//! the child is also a grant of the parent.
//!
//! [`attenuate`] checks each capability separately and lists **every** child rule that grants
//! something the parent does not, each with a concrete counterexample:
//!
//! | capability | child ⊆ parent means | counterexample |
//! |---|---|---|
//! | `fs.read` | child readable (read ∪ write) ⊆ parent readable | a path |
//! | `fs.write` | child write ⊆ parent write | a path |
//! | `exec` | unpinned child patterns ⊆ parent *unpinned* patterns; a child pin `(p, id)` needs an unpinned parent rule admitting `p` or a parent pin of `p` with the same `id` | a path, or a file at a path |
//! | `net.allow` | child boxes protocol × address × port ⊆ union of parent boxes | `tcp 10.1.2.3:443` |
//! | `net.allow` by `host` | child boxes name × protocol × port ⊆ union of the parent's *name* boxes (address grants never cover a name grant) | `tcp static.crates.io:443` |
//! | `net.unix` | child socket paths ⊆ parent socket paths | a path |
//!
//! # Sound and complete
//! Path grants are regular languages over the path's bytes. The check decides inclusion
//! exactly over the universe of *valid normalised paths* (absolute, no empty, `.` or `..`
//! segment, no trailing `/`, no NUL byte), for all six [`PathPattern`] kinds; IP grants are
//! decided exactly over protocol × 128-bit address × port, and name grants over valid names
//! × protocol × port:
//!
//! * **sound**: when the report is empty, every valid path (every peer) the child grants is
//!   granted by the parent;
//! * **complete**: when a child rule grants something the parent does not, that rule is
//!   reported with a witness the child grants and the parent does not (a valid path, checked
//!   against [`PathPattern::matches`] by the property tests, a peer, or a name checked
//!   against [`crate::host::HostPattern::matches`]).
//!
//! When an automaton would exceed its size limit, or a rule is malformed (it cannot come from
//! the policy compiler), the child rule is reported as unproven ([`Witness::Unproven`]), never
//! as covered; a malformed *parent* rule is taken to grant nothing.
//!
//! # How
//! Parent path rules are indexed in a trie by literal prefix (the segments before any
//! wildcard). For each child rule:
//!
//! 1. an exact child path is looked up directly (its parent candidates are the rules on the
//!    trie path to it, tested with [`PathPattern::matches`]);
//! 2. a parent rule on the trie path to the child's literal prefix may cover it on its own
//!    by a syntactic rule (a subtree at or above the prefix, a wider suffix, a star segment
//!    over a literal one, …), each rule sound;
//! 3. otherwise the parent rules that can meet the child (on the trie path or below it, and
//!    not syntactically disjoint from it) are united in one lazy DFA, and the product
//!    child × parents × valid-paths is searched breadth-first for a state where the child
//!    accepts and the parent does not, over a reduced alphabet: every byte the patterns name,
//!    `/`, `.`, and one stand-in for all other bytes (they behave identically everywhere).
//!    The search path is the shortest witness.
//!
//! IP rules are boxes; parent blocks meeting a child block either contain it (one lookup per
//! prefix length in use) or lie inside it (a range of the blocks sorted by address), and a
//! sweep over the child's address range finds any point no parent box covers.
//!
//! Name rules are compared pattern by pattern (`hosts`): the parent rules whose pattern
//! matches every name of the child's must together cover its protocols and ports.

mod automata;
pub(crate) mod carve;
mod exec;
mod hosts;
pub(crate) mod net;
pub(crate) mod paths;
mod ports;

use std::fmt;
use std::net::IpAddr;

use serde::Serialize;

use crate::compiled::{CompiledPolicy, FileId, Origin, PathRule};
use crate::glob::PathPattern;
use crate::net::Protocol;

/// The capability a grant belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Reading files (`fs.read`, and `fs.write`, which implies read).
    FsRead,
    /// Writing files (`fs.write`).
    FsWrite,
    /// Executing files (`exec`).
    Exec,
    /// IP egress (`net.allow` with `addr`).
    NetIp,
    /// Egress by domain name (`net.allow` with `host`): resolving the name through bee's
    /// resolver, and connecting to the addresses it answers with.
    NetHost,
    /// Connecting to pathname unix sockets (`net.unix`).
    NetUnix,
}

impl Capability {
    /// What a grant of this capability allows, before its object: `read of `, `executing `.
    #[must_use]
    pub fn granting(self) -> &'static str {
        match self {
            Self::FsRead => "read of ",
            Self::FsWrite => "write to ",
            Self::Exec => "executing ",
            Self::NetIp => "connecting to ",
            Self::NetHost => "resolving and connecting to ",
            Self::NetUnix => "connecting to the unix socket ",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::FsRead => "read",
            Self::FsWrite => "write",
            Self::Exec => "exec",
            Self::NetIp => "net",
            Self::NetHost => "host",
            Self::NetUnix => "unix",
        })
    }
}

/// A rule of one of the two policies, as diagnostics name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleRef {
    /// Where the rule was written (its key, e.g. `fs.read[2]`, and line).
    pub origin: Origin,
    /// The compiled rule, printed canonically (e.g. `/home/**`, `!/usr/bin/git`,
    /// `tcp 10.0.0.0/8 port 443`).
    pub rule: String,
}

impl fmt::Display for RuleRef {
    /// `KEY (line N) `RULE``; without the line for a rule no file wrote (line 0: one bee
    /// adds, such as its tool runner's).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.origin.line {
            0 => write!(f, "{} `{}`", self.origin.key, self.rule),
            line => write!(f, "{} (line {line}) `{}`", self.origin.key, self.rule),
        }
    }
}

/// Something the child grants and the parent does not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Witness {
    /// A valid normalised path. Witnesses are built from the bytes the patterns name plus
    /// one other letter, so they are UTF-8 unless a pattern's non-ASCII literal has to be
    /// cut; such bytes are shown as U+FFFD.
    Path {
        /// The path.
        path: String,
    },
    /// The file with identity `file` at `path` (a child pin the parent does not admit).
    PinnedFile {
        /// The pinned path.
        path: String,
        /// The child's pinned identity.
        file: FileId,
    },
    /// Any file at `path` other than the ones the parent pins there.
    FileOtherThan {
        /// The path.
        path: String,
        /// The identities the parent pins at `path`.
        pinned: Vec<FileId>,
    },
    /// An IP peer: protocol, address and port.
    Peer {
        /// Transport protocol.
        protocol: Protocol,
        /// Peer address, in the family a user would write it.
        address: IpAddr,
        /// Peer port.
        port: u16,
    },
    /// A domain name, and a protocol and port to reach it on.
    Host {
        /// Transport protocol.
        protocol: Protocol,
        /// The name, in ASCII lowercase form without a trailing dot.
        name: String,
        /// Peer port.
        port: u16,
    },
    /// The inclusion could not be proven, so the rule is refused.
    Unproven {
        /// Why: a malformed rule or an automaton over its size limit.
        reason: String,
    },
}

fn fmt_id(f: &mut fmt::Formatter<'_>, id: &FileId) -> fmt::Result {
    write!(f, "dev {} inode {}", id.dev, id.ino)
}

impl fmt::Display for Witness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Path { path } => write!(f, "`{path}`"),
            Self::PinnedFile { path, file } => {
                write!(f, "the file ")?;
                fmt_id(f, file)?;
                write!(f, " at `{path}`")
            }
            Self::FileOtherThan { path, pinned } => {
                write!(f, "a file other than ")?;
                for (i, id) in pinned.iter().enumerate() {
                    if i > 0 {
                        write!(f, " or ")?;
                    }
                    fmt_id(f, id)?;
                }
                write!(f, " at `{path}`")
            }
            Self::Peer {
                protocol,
                address: IpAddr::V6(a),
                port,
            } => write!(f, "`{protocol} [{a}]:{port}`"),
            Self::Peer {
                protocol,
                address,
                port,
            } => write!(f, "`{protocol} {address}:{port}`"),
            Self::Host {
                protocol,
                name,
                port,
            } => write!(f, "`{protocol} {name}:{port}`"),
            Self::Unproven { reason } => write!(f, "something that cannot be proven ({reason})"),
        }
    }
}

/// One child grant that exceeds the parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Excess {
    /// The capability exceeded.
    pub capability: Capability,
    /// The child rule that grants `witness`.
    pub child: RuleRef,
    /// What the child grants and the parent does not.
    pub witness: Witness,
    /// The parent rule closest to the witness (for paths: the one whose literal prefix
    /// shares the most segments with it; for peers: the smallest block containing the
    /// address; for names: a rule matching the name, else the one sharing the most trailing
    /// labels with it), if any is close at all.
    pub nearest_parent: Option<RuleRef>,
}

impl fmt::Display for Excess {
    /// E.g. ``fs.read[2] (line 7) `/home/**` grants read of `/home/a/.ssh/x`, which the
    /// parent does not grant; nearest parent rule fs.read[0] (line 4) `/home/a/src/**` ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = self.capability.granting();
        match &self.witness {
            Witness::Unproven { reason } => write!(
                f,
                "{} cannot be proven to grant only what the parent grants ({reason})",
                self.child
            )?,
            w => write!(
                f,
                "{} grants {what}{w}, which the parent does not grant",
                self.child
            )?,
        }
        match &self.nearest_parent {
            Some(p) => write!(f, "; nearest parent rule {p}"),
            None => write!(f, "; the parent has no rule near it"),
        }
    }
}

/// Prints excess grants one per line.
struct Lines<'a>(&'a [Excess]);

impl fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in self.0 {
            writeln!(f, "{e}")?;
        }
        Ok(())
    }
}

/// The outcome of [`attenuate`]: every child grant that exceeds the parent (empty when the
/// child is provably a subset).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AttenuationReport {
    /// Excess grants, by capability in the order of [`Capability`], then in child rule order.
    pub excess: Vec<Excess>,
}

impl AttenuationReport {
    /// Whether the child grants nothing beyond the parent.
    #[must_use]
    pub fn is_subset(&self) -> bool {
        self.excess.is_empty()
    }

    /// The refusal in words, as `bee validate --parent` and the `agent` tool give it: a
    /// heading naming `child` and `parent` (file names, roles), then one indented line per
    /// excess grant with its counterexample. Empty when the child is a subset.
    #[must_use]
    pub fn refusal(&self, child: &str, parent: &str) -> String {
        if self.excess.is_empty() {
            return String::new();
        }
        let n = self.excess.len();
        let mut text = format!(
            "refused: {child} grants {n} capabilit{} that {parent} does not:",
            if n == 1 { "y" } else { "ies" }
        );
        for e in &self.excess {
            text.push_str(&format!("\n  {e}"));
        }
        text
    }

    /// `Ok(())` when the child is a subset, else the error listing every excess grant.
    ///
    /// # Errors
    /// [`AttenuationError`] with all excess grants when the child is not a subset.
    pub fn into_result(self) -> Result<(), AttenuationError> {
        if self.excess.is_empty() {
            Ok(())
        } else {
            Err(AttenuationError {
                excess: self.excess,
            })
        }
    }
}

impl fmt::Display for AttenuationReport {
    /// One line per excess grant.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Lines(&self.excess).fmt(f)
    }
}

/// A child policy that grants more than its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error(
    "the policy has {} grant(s) its parent does not have:\n{}",
    excess.len(),
    Lines(excess)
)]
pub struct AttenuationError {
    /// Every excess grant (never empty).
    pub excess: Vec<Excess>,
}

/// Proves `child ⊆ parent` for every capability, or lists every child rule that grants
/// more than the parent, each with a counterexample. See the [module docs](self) for what
/// is checked and in what sense it is exact. Never panics, whatever the input.
#[must_use]
pub fn attenuate(child: &CompiledPolicy, parent: &CompiledPolicy) -> AttenuationReport {
    let (cc, pc) = (carve::Carves::of(child), carve::Carves::of(parent));
    let mut excess = Vec::new();
    excess.extend(carve::check_rules(
        Capability::FsRead,
        &child.fs.readable().collect::<Vec<_>>(),
        &cc.read,
        &parent.fs.readable().collect::<Vec<_>>(),
        &pc.read,
    ));
    excess.extend(carve::check_rules(
        Capability::FsWrite,
        &all(&child.fs.write),
        &cc.write,
        &all(&parent.fs.write),
        &pc.write,
    ));
    excess.extend(exec::check(&child.exec, &cc.exec, &parent.exec, &pc.exec));
    excess.extend(net::check(&child.net.allow, &parent.net.allow));
    excess.extend(hosts::check(&child.net.hosts, &parent.net.hosts));
    excess.extend(carve::check_rules(
        Capability::NetUnix,
        &all(&child.net.unix),
        &cc.read,
        &all(&parent.net.unix),
        &pc.read,
    ));
    AttenuationReport { excess }
}

/// What two policies grant differently: [`attenuate`] in both directions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PolicyDiff {
    /// Grants of the new policy the old one does not have, each with a counterexample
    /// (`child` is the new policy's rule, `nearest_parent` the old policy's nearest).
    pub added: Vec<Excess>,
    /// Grants of the old policy the new one does not have (`child` is the old policy's rule,
    /// `nearest_parent` the new policy's nearest).
    pub removed: Vec<Excess>,
}

impl PolicyDiff {
    /// Whether the two policies grant exactly the same, capability by capability (both
    /// proofs of inclusion hold).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// What `new` grants that `old` does not, and what `old` grants that `new` does not, each
/// difference a rule with a counterexample, as exact as [`attenuate`] (which it runs in both
/// directions). Never panics, whatever the input.
#[must_use]
pub fn diff(old: &CompiledPolicy, new: &CompiledPolicy) -> PolicyDiff {
    PolicyDiff {
        added: attenuate(new, old).excess,
        removed: attenuate(old, new).excess,
    }
}

/// Prints a path pattern for a [`RuleRef`].
fn pattern_text(p: &PathPattern) -> String {
    p.to_string()
}

fn all(rules: &[PathRule]) -> Vec<&PathRule> {
    rules.iter().collect()
}

#[cfg(test)]
mod tests;
