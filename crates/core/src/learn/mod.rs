//! Learn mode's synthesis: the smallest policy that would have allowed what a run did.
//!
//! `bee exec --learn` and `bee run --learn` run a command with the base policy's denials
//! turned into audited allows (the kernel's `SCOPE_LEARN`); every such access is fed to an
//! [`Observed`] set, which dedupes as it goes and holds at most [`Limits::max_per_kind`]
//! distinct entries of each kind (paths read, written, executed, unix peers, network peers),
//! counting the rest. [`synthesize`] then writes a policy: the base policy's grants, followed
//! by the learned ones in commented sections —
//!
//! * exact paths, widened to `DIR/**` only where every entry of `DIR` was observed and no
//!   protected path or well-known secret could fall under it ([`collapse`], [`sensitive`]);
//! * exec rules pinned to the file that ran (`!/usr/bin/make`), except for files the run wrote
//!   itself or that are gone (a pin records an inode at compile time);
//! * one `[[net.allow]]` per address and protocol, with the ports seen.
//!
//! The output compiles as is (`bee validate`); its `version` is the newest language version
//! this build knows ([`crate::compile::LANGUAGE_VERSIONS`]).

pub mod collapse;
mod emit;
pub mod sensitive;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::net::IpAddr;

pub use collapse::{FsView, HostFs};
pub use emit::{Synthesis, synthesize};

use crate::net::Protocol;

/// One access learn mode observed: denied by the base policy, allowed and reported.
/// Paths are absolute and normalised, as the kernel reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access<'a> {
    /// A path opened for reading (or watched).
    Read(&'a str),
    /// A path opened for writing, created, removed, renamed, linked or changed.
    Write(&'a str),
    /// A file executed or mapped executable.
    Exec(&'a str),
    /// A unix socket bound at this path, connected to or sent to.
    Unix(&'a str),
    /// An IP peer connected to or sent to.
    Net {
        /// TCP or UDP.
        proto: Protocol,
        /// The peer's address.
        addr: IpAddr,
        /// The peer's port.
        port: u16,
    },
}

/// Bounds on what [`Observed`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Distinct entries kept per kind (read, write, exec, unix, net); more are counted, not
    /// kept, and the output says so.
    pub max_per_kind: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_per_kind: 10_000,
        }
    }
}

/// The kinds of [`Access`], as indices of [`Observed`]'s counters.
const KINDS: [&str; 5] = ["fs.read", "fs.write", "exec.allow", "net.unix", "net.allow"];

/// The distinct accesses of a run, bounded by [`Limits`].
#[derive(Debug, Clone)]
pub struct Observed {
    limits: Limits,
    pub(crate) read: BTreeSet<String>,
    pub(crate) write: BTreeSet<String>,
    pub(crate) exec: BTreeSet<String>,
    pub(crate) unix: BTreeSet<String>,
    pub(crate) net: BTreeSet<(Protocol, IpAddr, u16)>,
    /// Paths a policy cannot name (a wildcard character, or bytes that are not UTF-8).
    pub(crate) unnameable: BTreeSet<String>,
    /// Accesses seen, repeats included.
    pub(crate) total: u64,
    /// Distinct entries not kept, per kind ([`KINDS`]).
    pub(crate) dropped: [u64; 5],
}

impl Observed {
    /// An empty set.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            read: BTreeSet::new(),
            write: BTreeSet::new(),
            exec: BTreeSet::new(),
            unix: BTreeSet::new(),
            net: BTreeSet::new(),
            unnameable: BTreeSet::new(),
            total: 0,
            dropped: [0; 5],
        }
    }

    /// Records one access. Repeats cost nothing; a new entry beyond the limit is counted in
    /// [`Observed::dropped`] instead of kept.
    pub fn record(&mut self, access: Access<'_>) {
        self.total = self.total.saturating_add(1);
        let max = self.limits.max_per_kind;
        let (kind, path) = match access {
            Access::Read(p) => (0, p),
            Access::Write(p) => (1, p),
            Access::Exec(p) => (2, p),
            Access::Unix(p) => (3, p),
            Access::Net { proto, addr, port } => {
                let key = (proto, addr, port);
                if !self.net.contains(&key) {
                    if self.net.len() >= max {
                        self.dropped[4] += 1;
                    } else {
                        self.net.insert(key);
                    }
                }
                return;
            }
        };
        if !nameable(path) {
            if self.unnameable.len() < max && !self.unnameable.contains(path) {
                self.unnameable.insert(path.to_owned());
            }
            return;
        }
        let set = match kind {
            0 => &mut self.read,
            1 => &mut self.write,
            2 => &mut self.exec,
            _ => &mut self.unix,
        };
        if set.contains(path) {
            return;
        }
        if set.len() >= max {
            self.dropped[kind] += 1;
        } else {
            set.insert(path.to_owned());
        }
    }

    /// Accesses recorded, repeats included.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Distinct entries kept.
    #[must_use]
    pub fn distinct(&self) -> usize {
        self.read.len() + self.write.len() + self.exec.len() + self.unix.len() + self.net.len()
    }

    /// Distinct entries not kept because of [`Limits::max_per_kind`], per kind
    /// (`fs.read`, `fs.write`, `exec.allow`, `net.unix`, `net.allow`).
    #[must_use]
    pub fn dropped(&self) -> Vec<(&'static str, u64)> {
        KINDS
            .iter()
            .zip(self.dropped)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (*k, n))
            .collect()
    }

    /// Whether nothing was observed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.distinct() == 0 && self.unnameable.is_empty()
    }
}

/// Whether a policy can name `path` exactly: absolute, normalised, without the characters
/// patterns treat specially (`*`, `?`, `[`, `]`, `{`, `}`) and without U+FFFD (the mark of
/// bytes that were not UTF-8, which would name another file).
fn nameable(path: &str) -> bool {
    path.starts_with('/')
        && (path == "/" || !path.ends_with('/'))
        && !path
            .split('/')
            .skip(1)
            .any(|s| s.is_empty() || s == "." || s == "..")
        && !path.contains(['*', '?', '[', ']', '{', '}', '\u{fffd}', '\0'])
}
