//! `/allow`: the narrowest rule that would have allowed one denial, added to a running
//! policy as a proof-checked live change.
//!
//! [`propose`] reads one [`AuditRecord`] of a denial and answers with the one [`Rule`] that
//! would have allowed exactly that access and nothing of another kind — an exact path under
//! `fs.read` or `fs.write` (as the access needed), an exec pin of the file that was refused,
//! the exact address, port and protocol under `net.allow`, the socket's path under
//! `net.unix` — or with [`Cannot`], saying why no rule can: refusals bee makes whatever a
//! policy says (device nodes, `bpf(2)`, abstract unix sockets, listening and accepting,
//! mounts, …), paths the kernel could not resolve or had to cut, a pinned file that was
//! swapped. [`Change::new`] adds the rule to the policy, runs the attenuation prover both ways
//! against the policy in force ([`bee_core::diff`]: what the new policy grants that the old
//! does not, with a counterexample for each) and, for a scope that has a parent, against the
//! parent ([`bee_core::attenuate()`]): a change that would take a subagent beyond its parent is
//! refused with the counterexample. Applying the change to the scope is the executor's
//! ([`crate::session::ToolExecutor::replace_policy`]), atomically ([`bee_userspace::engine::Engine::replace`]).

use std::fmt;
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt as _;

use bee_core::compiled::{ExecRule, FileId, NetRule, Origin, PathRule};
use bee_core::glob::PathPattern;
use bee_core::net::{IpNet, PortRange, Protocol};
use bee_core::{CompiledPolicy, PolicyDiff};
use bee_userspace::audit::{AuditRecord, GrantKind, Reason, Verdict};

#[cfg(test)]
mod tests;

/// The `Origin::key` of rules added by `/allow` (they have no line in a file).
pub const ALLOW_ORIGIN_KEY: &str = "allow";

/// The narrowest rule that allows one denied access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// `fs.read = ["PATH"]`: open PATH for reading.
    Read(String),
    /// `fs.write = ["PATH"]`: write PATH (and read it).
    Write(String),
    /// `exec.allow = ["!PATH"]`: run PATH while it is still the file `FileId`.
    Exec {
        /// The absolute path the kernel executed.
        path: String,
        /// The file's identity now (the pin).
        pin: FileId,
    },
    /// `net.unix = ["PATH"]`: connect or send to the unix socket bound at PATH.
    Unix(String),
    /// `[[net.allow]] addr = "ADDR", ports = PORT, proto = "PROTO"`.
    Net {
        /// The peer's address.
        addr: IpAddr,
        /// The peer's port.
        port: u16,
        /// The protocol.
        proto: Protocol,
    },
}

impl Rule {
    /// The policy key the rule goes under (`fs.read`, `exec.allow`, …).
    pub fn key(&self) -> &'static str {
        match self {
            Rule::Read(_) => "fs.read",
            Rule::Write(_) => "fs.write",
            Rule::Exec { .. } => "exec.allow",
            Rule::Unix(_) => "net.unix",
            Rule::Net { .. } => "net.allow",
        }
    }

    /// Adds the rule to `policy`, after its own rules of the same key.
    pub fn add_to(&self, policy: &mut CompiledPolicy) {
        let origin = Origin {
            key: ALLOW_ORIGIN_KEY.to_owned(),
            line: 0,
            column: 0,
            text: self.to_string(),
        };
        let exact = |path: &str| PathPattern::Exact {
            path: path.to_owned(),
        };
        match self {
            Rule::Read(p) => policy.fs.read.push(PathRule {
                pattern: exact(p),
                origin,
            }),
            Rule::Write(p) => policy.fs.write.push(PathRule {
                pattern: exact(p),
                origin,
            }),
            Rule::Exec { path, pin } => policy.exec.push(ExecRule {
                pattern: exact(path),
                pin: Some(*pin),
                origin,
            }),
            Rule::Unix(p) => policy.net.unix.push(PathRule {
                pattern: exact(p),
                origin,
            }),
            Rule::Net { addr, port, proto } => policy.net.allow.push(NetRule {
                net: host(*addr),
                ports: PortRange {
                    first: *port,
                    last: *port,
                },
                protocols: vec![*proto],
                origin,
            }),
        }
    }
}

impl fmt::Display for Rule {
    /// The rule as a policy file would have it: `fs.read += "/etc/hosts"`,
    /// `exec.allow += "!/usr/bin/git"`, `net.allow += { addr = "1.2.3.4", ports = 443, proto =
    /// "tcp" }`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.key();
        match self {
            Rule::Read(p) | Rule::Write(p) | Rule::Unix(p) => write!(f, "{key} += {p:?}"),
            Rule::Exec { path, .. } => write!(f, "{key} += \"!{}\"", path.escape_debug()),
            Rule::Net { addr, port, proto } => write!(
                f,
                "{key} += {{ addr = \"{addr}\", ports = {port}, proto = \"{proto}\" }}"
            ),
        }
    }
}

/// A single address as a block (`/32` or `/128`; IPv4-mapped IPv6 as IPv4).
fn host(addr: IpAddr) -> IpNet {
    match addr {
        IpAddr::V4(a) => IpNet::V4 {
            addr: a,
            prefix_len: 32,
        },
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpNet::V4 {
                addr: v4,
                prefix_len: 32,
            },
            None => IpNet::V6 {
                addr: a,
                prefix_len: 128,
            },
        },
    }
}

/// Why no rule could allow a denial; its text says so to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cannot(pub String);

impl fmt::Display for Cannot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The identity of the file at `path` now (`stat(2)`, symbolic links followed), for a pin.
pub fn file_id(path: &str) -> Option<FileId> {
    std::fs::metadata(path).ok().map(|m| FileId {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// The narrowest rule that would have allowed the access `record` denied, or why there is
/// none. `identify` gives the identity of an executable to pin ([`file_id`] in use).
///
/// # Errors
/// [`Cannot`], naming the reason: the access was allowed; bee refuses it whatever the policy
/// says; the path was unresolved, cut short, relative or missing; a pinned file was swapped
/// (edit the policy: a live change never re-pins); the executable is gone; the record lacks
/// the peer's address, port or protocol.
pub fn propose(
    record: &AuditRecord,
    identify: &dyn Fn(&str) -> Option<FileId>,
) -> Result<Rule, Cannot> {
    let what = record.explanation();
    let cannot = |why: &str| Cannot(format!("no rule can allow `{what}`: {why}"));
    if record.verdict != Verdict::Deny {
        return Err(cannot("it was allowed"));
    }
    match &record.reason {
        Some(Reason::NeverGranted) => {
            return Err(cannot(
                "bee refuses it inside every scope, whatever the policy says",
            ));
        }
        Some(Reason::Unresolved) => {
            return Err(cannot(
                "the kernel could not resolve the path, and no rule can name an unresolved path",
            ));
        }
        Some(Reason::PinMismatch { rule }) => {
            return Err(cannot(&format!(
                "the file pinned by {} (line {}) was replaced; a live change never re-pins — \
                 review the new file and edit the policy",
                rule.key, rule.line
            )));
        }
        Some(Reason::CarvedOut { rule }) => {
            return Err(cannot(&format!(
                "{} (line {}) `{}` carves it out, and a carve-out wins over any grant — \
                 a live change only adds grants; edit the policy to drop the carve-out",
                rule.key, rule.line, rule.text
            )));
        }
        Some(Reason::Protected { rule }) => {
            return Err(cannot(&format!(
                "it is a protected path (`{}`): a live change never lifts protection; \
                 `fs.unprotect` in the policy file does, if that is what you mean",
                rule.text
            )));
        }
        Some(Reason::Reparent) => {
            return Err(cannot(
                "a directory moves only between places granted alike below, and no single \
                 narrow rule makes two places alike",
            ));
        }
        Some(Reason::NameNotGranted | Reason::AliasNotGranted { .. } | Reason::SpecialAddress) => {
            return Err(cannot(
                "bee's resolver refused it, and name grants change only by editing the \
                 policy (`host` in a [[net.allow]] table)",
            ));
        }
        Some(Reason::NoGrant | Reason::NoLiveAnswer | Reason::ReadOnly { .. }) | None => {}
    }
    let path = || -> Result<String, Cannot> {
        match record.path.as_deref() {
            _ if record.path_truncated => Err(cannot(
                "the path was cut short in the kernel's event, so its rule would name another path",
            )),
            Some(p) if p.starts_with('/') && !p.contains('\0') => Ok(p.to_owned()),
            Some("") | None => Err(cannot("the kernel's event names no path")),
            Some(p) => Err(cannot(&format!("`{p}` is not an absolute path"))),
        }
    };
    match record.grant {
        Some(GrantKind::FsRead) => path().map(Rule::Read),
        Some(GrantKind::FsWrite) => path().map(Rule::Write),
        Some(GrantKind::Exec) => {
            let path = path()?;
            match identify(&path) {
                Some(pin) => Ok(Rule::Exec { path, pin }),
                None => Err(cannot(&format!(
                    "`{path}` cannot be found now, and an exec grant pins the file"
                ))),
            }
        }
        Some(GrantKind::NetUnix) => match record.path.as_deref() {
            None | Some("") => Err(cannot(
                "the socket is abstract, and abstract sockets are never granted",
            )),
            Some(p) if p.starts_with('@') => Err(cannot(
                "the socket is abstract, and abstract sockets are never granted",
            )),
            Some(_) => path().map(Rule::Unix),
        },
        Some(GrantKind::Net) => {
            let Some(proto) = record.proto else {
                return Err(cannot("the kernel's event names no protocol (tcp or udp)"));
            };
            match (record.addr, record.port) {
                (Some(addr), Some(port)) => Ok(Rule::Net { addr, port, proto }),
                _ => Err(cannot("the kernel's event names no peer address and port")),
            }
        }
        None => Err(cannot("no kind of grant allows it")),
    }
}

/// A proposed live change: the policy in force, the rule, the policy with it, and the proof.
#[derive(Debug, Clone)]
pub struct Change {
    /// The rule added.
    pub rule: Rule,
    /// The policy in force with the rule added (as requested: before bee's runner grant).
    pub policy: CompiledPolicy,
    /// What the new policy grants that the one in force does not (and, always empty, the
    /// reverse), from the prover.
    pub diff: PolicyDiff,
}

impl Change {
    /// Adds `rule` to `current` and proves the result: the diff against `current`, and, when
    /// the scope has a `parent` policy, that the result is still within it.
    ///
    /// # Errors
    /// [`Cannot`] when the rule grants nothing new (the denial came from elsewhere: a policy
    /// changed since, or another layer), or when the result is not provably within `parent`
    /// (with the prover's counterexamples).
    pub fn new(
        current: &CompiledPolicy,
        parent: Option<(&CompiledPolicy, &str)>,
        rule: Rule,
    ) -> Result<Self, Cannot> {
        let mut policy = current.clone();
        rule.add_to(&mut policy);
        let diff = bee_core::diff(current, &policy);
        if diff.added.is_empty() {
            return Err(Cannot(format!(
                "`{rule}` grants nothing the policy in force does not already grant"
            )));
        }
        if let Some((parent, name)) = parent {
            let report = bee_core::attenuate(&policy, parent);
            if !report.is_subset() {
                return Err(Cannot(format!(
                    "`{rule}` would take this scope beyond its parent: {}",
                    report.refusal("the widened policy", name)
                )));
            }
        }
        Ok(Self { rule, policy, diff })
    }
}
