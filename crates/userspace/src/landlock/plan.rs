//! Stage two for the Landlock engine: what a [`CompiledPolicy`] becomes under Landlock, rule
//! by rule, or why it cannot.
//!
//! Why one file of this length: it classifies each rule of a policy once, exactly or refused,
//! and the types of the plan and of the refusal are what that classification produces; the
//! tests are in `plan/tests.rs`.
//!
//! Each rule of the policy is classified once, before anything starts:
//!
//! * **exact**: the Landlock plan (a ruleset, the scope's private mounts and its seccomp
//!   filter, `docs/enforcement.md`, "The Landlock engine") allows exactly what the rule allows;
//! * **narrower**: it allows less, and [`LandlockPlan::narrowings`] says what (a directory that
//!   may be opened but not listed, a file that may be written but not created or removed).
//!   These are shown wherever the plan is (`bee validate --engine landlock`, `bee check`);
//! * **inexpressible**: the plan would allow more than the rule, so the whole policy is refused
//!   with [`LandlockRefusal`], naming each such rule and why.
//!
//! Landlock grants rights on file *hierarchies*: a rule on a directory covers everything
//! below it, and nothing can be taken back from a hierarchy once granted. So a subtree grant is
//! exact, and a carve-out under a grant or a protected path inside a writable tree is not. Rules
//! bind to the files that exist when a call starts (looked up without following symbolic links:
//! a path through a link never matches under bee's reference semantics either), so each call
//! looks them up again: a `*` pattern's matches, and a pattern that matches by name anywhere
//! below a root (`**/*.so`), whose root each call walks ([`Target::Walk`]). A match the scope
//! creates during a call is granted from the next call on ([`NarrowingKind::NewMatches`]).

use std::collections::BTreeSet;
use std::fmt;

use bee_core::CompiledPolicy;
use bee_core::compiled::{FileId, Origin, PathRule};
use bee_core::glob::{PathPattern, split_segments};
use bee_core::net::{IpNet, PortRange, Protocol};

/// bee's rights on a path, as the policy grants them (write implies read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rights {
    /// Open for reading, list a directory.
    pub read: bool,
    /// Open for writing, create, remove, rename, link, truncate, change attributes.
    pub write: bool,
    /// `execve`, or map executable.
    pub exec: bool,
}

impl Rights {
    const READ: Self = Self {
        read: true,
        write: false,
        exec: false,
    };
    const WRITE: Self = Self {
        read: true,
        write: true,
        exec: false,
    };
    const EXEC: Self = Self {
        read: false,
        write: false,
        exec: true,
    };
    /// What a protected path takes from a write grant: write, not the read it implies.
    const WRITE_ONLY: Self = Self {
        read: false,
        write: true,
        exec: false,
    };
    /// What `fs.deny` takes.
    const ALL: Self = Self {
        read: true,
        write: true,
        exec: true,
    };

    /// These rights less `removed`.
    #[must_use]
    pub fn without(self, removed: Self) -> Self {
        Self {
            read: self.read && !removed.read,
            write: self.write && !removed.write,
            exec: self.exec && !removed.exec,
        }
    }

    /// Whether no right is granted.
    pub fn is_empty(self) -> bool {
        !(self.read || self.write || self.exec)
    }

    fn union(self, other: Self) -> Self {
        Self {
            read: self.read || other.read,
            write: self.write || other.write,
            exec: self.exec || other.exec,
        }
    }
}

impl fmt::Display for Rights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.read {
            parts.push("read");
        }
        if self.write {
            parts.push("write");
        }
        if self.exec {
            parts.push("exec");
        }
        f.write_str(&parts.join("+"))
    }
}

/// Where a [`PathGrant`] attaches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// One file (or the directory itself, which Landlock cannot grant without its contents:
    /// see [`NarrowingKind::DirectoryItself`]).
    Exact {
        /// The absolute, normalised path.
        path: String,
        /// The pinned identity, for `!`-pinned exec rules: the grant holds only while the path
        /// is that inode.
        pin: Option<FileId>,
    },
    /// A directory and everything below it.
    Tree {
        /// The absolute, normalised root.
        root: String,
    },
    /// Every path a `*` pattern matches when a call starts (`/usr/lib/*-linux-gnu/**`).
    Star {
        /// The pattern's segments below `/`.
        segments: Vec<String>,
        /// Whether a final `/**` follows: each match is a tree.
        subtree: bool,
    },
    /// Every path a pattern that matches by name below its root matches when a call starts
    /// (`ROOT/**/*SUFFIX`, `ROOT/**/NAME`, `ROOT/**/A/B…`, with or without a final `/**`):
    /// each call walks `ROOT` without following symbolic links, and grants each match, as a
    /// tree where the pattern ends in `/**` (nothing below a match is walked), otherwise as
    /// one file (a matching directory is not granted: [`NarrowingKind::DirectoryItself`]).
    Walk {
        /// The pattern ([`PathPattern::Postfix`], [`PathPattern::Segment`] or
        /// [`PathPattern::Nested`]).
        pattern: PathPattern,
    },
    /// The caller's own `/proc` entries (`/proc/self/**`, `/proc/thread-self/**`): the
    /// scope's private `/proc`, mounted with `subset=pid` in the scope's PID namespace, which
    /// holds only the scope's own processes.
    ProcSelf,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The glob text of the pattern it came from.
        match self {
            Self::Exact { path, .. } => f.write_str(path),
            Self::Tree { root } => PathPattern::Subtree { root: root.clone() }.fmt(f),
            Self::Star { segments, subtree } => PathPattern::BoundedStar {
                segments: segments.clone(),
                subtree: *subtree,
            }
            .fmt(f),
            Self::Walk { pattern } => pattern.fmt(f),
            Self::ProcSelf => f.write_str("/proc/self/** (the scope's private /proc)"),
        }
    }
}

/// One Landlock rule of the plan: rights on a target, from one rule of the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathGrant {
    /// Where it attaches.
    pub target: Target,
    /// What it grants.
    pub rights: Rights,
    /// The policy rule it comes from.
    pub origin: Origin,
}

/// A carve-out or protected path as each call applies it to the matches of a
/// [`Target::Walk`] granted one file at a time: a match it matches loses `removes` (unless an
/// `unless` pattern matches it too). Exact, with no mount: each such match is its own rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The carve-out or protected path.
    pub pattern: PathPattern,
    /// The rights it takes away: all of them (`fs.deny`), exec (`exec.deny`) or write
    /// (a protected path, which stays readable).
    pub removes: Rights,
    /// Patterns under which it does not apply (`fs.unprotect`, for a protected path).
    pub unless: Vec<PathPattern>,
    /// The rule.
    pub origin: Origin,
}

impl Cut {
    /// `rights` at `path` once this cut is applied.
    pub fn apply(&self, path: &str, rights: Rights) -> Rights {
        if self.pattern.matches(path) && !self.unless.iter().any(|u| u.matches(path)) {
            rights.without(self.removes)
        } else {
            rights
        }
    }
}

/// Why the plan allows less than a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NarrowingKind {
    /// An exact grant on a path that is a directory when the call starts: Landlock can grant
    /// listing a directory only with every directory below it, so the directory itself is not
    /// granted.
    DirectoryItself,
    /// An exact write grant on a regular file: Landlock grants creating, removing and renaming
    /// on the parent directory only (for every name in it), so the file may be written and
    /// truncated but not created, removed or renamed.
    FileCreation,
    /// A `*` pattern whose matches the scope may create: matches made during a call are not
    /// granted until the next call.
    NewMatches,
    /// A `/proc` path outside the caller's own entries: the scope's private `/proc` holds only
    /// its processes' directories.
    ProcOutsideSelf,
    /// All of `/proc`: granted as the scope's private `/proc`, which holds its own processes'
    /// directories and nothing else.
    ProcPrivate,
}

impl fmt::Display for NarrowingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DirectoryItself => {
                "a directory is not listed: Landlock grants listing a directory only with every directory below it"
            }
            Self::FileCreation => {
                "the file may be written and truncated, not created, removed or renamed: Landlock grants those on a whole directory"
            }
            Self::NewMatches => {
                "matches created during a call are granted from the next call on: Landlock rules bind to files that exist when a call starts"
            }
            Self::ProcOutsideSelf => {
                "not reachable: the scope's private /proc holds only its own processes' entries"
            }
            Self::ProcPrivate => {
                "granted as the scope's private /proc, which holds only its own processes' entries"
            }
        })
    }
}

/// A rule the plan enforces more strictly than the policy says, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowing {
    /// The rule.
    pub origin: Origin,
    /// How.
    pub kind: NarrowingKind,
}

/// How a carve-out or protected path that cuts into a grant is enforced: by the scope's
/// mounts, over the path as it exists when a call starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskKind {
    /// `fs.deny DIR/**`: an empty read-only tmpfs of mode 000 over the directory, so that
    /// nothing below it can be opened, listed, changed or run.
    Hidden,
    /// A protected path (`fs.protect`): bound again read-only.
    ReadOnly,
    /// `exec.deny`: bound again `noexec`, so that it is neither run nor mapped executable.
    NoExec,
}

/// A carve-out or protected path enforced by a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mask {
    /// The path covered (a carve-out's directory, a protected file or tree's root).
    pub path: String,
    /// How.
    pub kind: MaskKind,
    /// Whether the scope could create the path (it existed when the plan was made): a call
    /// that finds it gone is refused.
    pub creatable: bool,
    /// The rule.
    pub origin: Origin,
}

/// Why one rule cannot be enforced exactly by Landlock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inexpressible {
    /// A carve-out (`fs.deny`, `exec.deny`) that takes something out of a grant: Landlock
    /// cannot take a right back below a rule.
    CarveOut {
        /// The grant it would cut into.
        grant: Origin,
    },
    /// A protected path that may lie inside a writable tree.
    ProtectedInWritable {
        /// The write grant.
        grant: Origin,
    },
    /// An IP grant for some addresses only: Landlock matches TCP ports, not addresses.
    Address,
    /// A UDP grant: Landlock does not restrict UDP.
    Udp,
    /// TCP ports granted for one address family only: Landlock's port rules hold for both.
    OneFamily,
    /// A TCP grant on a kernel whose Landlock has no network rules (ABI 4, Linux 6.7).
    NoNetworkRules {
        /// The running kernel's ABI.
        abi: u32,
    },
    /// A domain name grant: it needs bee's resolver and the cgroup `sock_addr` programs.
    Name,
    /// A pathname unix socket grant: Landlock restricts connecting to one only from ABI 9.
    UnixSocket,
    /// A write or exec grant inside `/proc`.
    ProcWrite,
    /// A carve-out or protected path that cuts into a grant and that no mount can cover
    /// exactly.
    Unmaskable {
        /// The grant it cuts into.
        grant: Origin,
        /// Why no mount covers it.
        why: &'static str,
    },
}

impl fmt::Display for Inexpressible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CarveOut { grant } => write!(
                f,
                "it cuts into `{}` ({}, line {}); Landlock cannot take a right back below a grant (narrow the grant instead)",
                grant.text, grant.key, grant.line
            ),
            Self::ProtectedInWritable { grant } => write!(
                f,
                "it may lie inside the writable `{}` ({}, line {}), where the scope may create it; Landlock cannot keep it read-only there (write exact files or trees that cannot hold it, unprotect a scratch tree, or use the bpf-lsm engine)",
                grant.text, grant.key, grant.line
            ),
            Self::Address => f.write_str(
                "it names addresses; Landlock's network rules match TCP ports only (grant the port for every address, 0.0.0.0/0 and ::/0, or use the bpf-lsm engine)",
            ),
            Self::Udp => f.write_str("it grants UDP, which Landlock does not restrict"),
            Self::OneFamily => f.write_str(
                "it grants a port for one address family; Landlock's port rules hold for IPv4 and IPv6 alike",
            ),
            Self::NoNetworkRules { abi } => write!(
                f,
                "this kernel's Landlock (ABI {abi}) has no network rules (ABI 4, Linux 6.7)"
            ),
            Self::Name => f.write_str(
                "a domain name grant needs bee's resolver and the network gate (cgroup sock_addr programs)",
            ),
            Self::UnixSocket => f.write_str(
                "Landlock restricts connecting to pathname unix sockets only from ABI 9; the Landlock engine allows no unix socket",
            ),
            Self::ProcWrite => f.write_str(
                "the scope's private /proc is mounted read-only, and nothing in it is executable",
            ),
            Self::Unmaskable { grant, why } => write!(
                f,
                "it cuts into `{}` ({}, line {}), and {why}",
                grant.text, grant.key, grant.line
            ),
        }
    }
}

impl Inexpressible {
    /// Whether the network gate decides such a rule exactly where it is available.
    pub fn gate_decides(&self) -> bool {
        matches!(
            self,
            Self::Address | Self::Udp | Self::OneFamily | Self::NoNetworkRules { .. } | Self::Name
        )
    }
}

/// One rule that stops the policy from being enforced by Landlock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The rule.
    pub origin: Origin,
    /// Why.
    pub why: Inexpressible,
}

/// The policy cannot be enforced exactly by the Landlock engine: every rule that stops it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_refusal(self))]
pub struct LandlockRefusal {
    /// The rules, in policy order.
    pub rules: Vec<Refused>,
    /// Why the network gate, which would decide the network rules among them, is
    /// unavailable; `None` when it is, or when no such rule is refused.
    pub gate: Option<String>,
}

/// The refusal in words: its first line, then [`LandlockRefusal::causes`], each indented.
fn render_refusal(refusal: &LandlockRefusal) -> String {
    let mut out = format!(
        "the Landlock engine cannot enforce this policy exactly ({} rule{}):",
        refusal.rules.len(),
        if refusal.rules.len() == 1 { "" } else { "s" }
    );
    for cause in refusal.causes() {
        out.push_str("\n  ");
        out.push_str(&cause);
    }
    out
}

impl LandlockRefusal {
    /// What stops the plan, one line each (no indent, no newline): a line per rule, except
    /// that the protected paths that may lie in one writable tree share one line, which names
    /// the tree first (the user's rule, usually, and every version 2 policy protects fifteen
    /// names at any depth); then why the network gate is unavailable, if that matters. The
    /// one wording of a Landlock refusal, for `bee validate` and for every command.
    pub fn causes(&self) -> Vec<String> {
        let in_tree = |r: &Refused| match &r.why {
            Inexpressible::ProtectedInWritable { grant } => Some(grant.clone()),
            _ => None,
        };
        let mut out = Vec::new();
        let mut trees_done: Vec<Origin> = Vec::new();
        for r in &self.rules {
            let Some(tree) = in_tree(r) else {
                out.push(format!(
                    "{} `{}` (line {}): {}",
                    r.origin.key, r.origin.text, r.origin.line, r.why
                ));
                continue;
            };
            if trees_done.contains(&tree) {
                continue;
            }
            let protected: Vec<String> = self
                .rules
                .iter()
                .filter(|o| in_tree(o).as_ref() == Some(&tree))
                .map(|o| format!("{} `{}`", o.origin.key, o.origin.text))
                .collect();
            out.push(format!(
                "{} `{}` (line {}) is writable, and {} protected path{} may lie inside it, \
                 which Landlock cannot keep read-only there, since the scope may create them: \
                 {}. Write exact files or trees that cannot hold them, name the tree in \
                 `fs.unprotect` if nothing in it is run or trusted outside the scope (a cache, \
                 build output or scratch), or use the bpf-lsm engine",
                tree.key,
                tree.text,
                tree.line,
                protected.len(),
                if protected.len() == 1 { "" } else { "s" },
                protected.join(", ")
            ));
            trees_done.push(tree);
        }
        if let Some(why) = &self.gate {
            out.push(format!(
                "the network gate (cgroup sock_addr programs), which would decide the network \
                 rules, is unavailable: {why}"
            ));
        }
        out
    }
}

/// What the plan needs of the kernel's Landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LandlockAbi(pub u32);

impl LandlockAbi {
    /// Landlock's network rules (`LANDLOCK_ACCESS_NET_CONNECT_TCP`): ABI 4, Linux 6.7.
    pub fn has_network(self) -> bool {
        self.0 >= 4
    }
}

/// Whether the network gate ([`super::gate`], cgroup `sock_addr` programs) can decide a
/// scope's TCP and UDP peers on this host: then address grants, UDP, one-family ports and
/// name grants are exact, and TCP needs no Landlock network rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateSupport {
    /// Its programs load (and attach to a scope's cgroup).
    Available,
    /// Why not: the kernel's refusal, a missing privilege.
    Unavailable(String),
}

/// A policy planned for the Landlock engine: the path grants, the TCP ports, what is
/// narrower than the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockPlan {
    paths: Vec<PathGrant>,
    masks: Vec<Mask>,
    cuts: Vec<Cut>,
    tcp_connect: Vec<PortRange>,
    gated: bool,
    narrowings: Vec<Narrowing>,
    abi: LandlockAbi,
}

impl LandlockPlan {
    /// Plans `policy` for a kernel whose Landlock has `abi`, where the network gate is as
    /// `gate` says. The gate is used only where Landlock alone cannot decide a network rule.
    ///
    /// # Errors
    /// [`LandlockRefusal`], naming every rule the plan cannot enforce exactly.
    pub fn new(
        policy: &CompiledPolicy,
        abi: LandlockAbi,
        gate: &GateSupport,
    ) -> Result<Self, LandlockRefusal> {
        let mut refused = Vec::new();
        let mut narrowings = Vec::new();
        let mut paths = Vec::new();
        let mut grant = |rule: &PathRule, rights: Rights, pin: Option<FileId>| match target_of(
            &rule.pattern,
            pin,
        ) {
            Ok(Some(target)) => {
                // All of `/proc` holds the scope's private `/proc`: granted as it is.
                let target = match target {
                    Target::Tree { root } if root == "/proc" => {
                        narrowings.push(Narrowing {
                            origin: rule.origin.clone(),
                            kind: NarrowingKind::ProcPrivate,
                        });
                        Target::ProcSelf
                    }
                    other => other,
                };
                let proc_self = target == Target::ProcSelf;
                if (proc_self || under(&target, "/proc")) && (rights.write || rights.exec) {
                    refused.push(Refused {
                        origin: rule.origin.clone(),
                        why: Inexpressible::ProcWrite,
                    });
                    return;
                }
                if !proc_self && under(&target, "/proc") {
                    narrowings.push(Narrowing {
                        origin: rule.origin.clone(),
                        kind: NarrowingKind::ProcOutsideSelf,
                    });
                    return;
                }
                paths.push(PathGrant {
                    target,
                    rights,
                    origin: rule.origin.clone(),
                });
            }
            Ok(None) => {}
            Err(why) => refused.push(Refused {
                origin: rule.origin.clone(),
                why,
            }),
        };
        for rule in &policy.fs.read {
            grant(rule, Rights::READ, None);
        }
        for rule in &policy.fs.write {
            grant(rule, Rights::WRITE, None);
        }
        for rule in &policy.exec {
            let as_path = PathRule {
                pattern: rule.pattern.clone(),
                origin: rule.origin.clone(),
            };
            grant(&as_path, Rights::EXEC, rule.pin);
        }

        // Carve-outs and protected paths: exact where they cut into no grant at all, or
        // where a mount over an existing path takes exactly what they take away.
        let mut masks = Vec::new();
        let mut cut = |carve: &PathRule,
                       kind: MaskKind,
                       right: fn(&Rights) -> bool,
                       lifted: &dyn Fn(&PathGrant) -> bool| {
            // The grant it cuts into, the policy file's own before an included fragment's: an
            // error names the rule the user wrote where there is one.
            // A walk granted one file at a time is cut match by match instead ([`Cut`]).
            let overlapping = || {
                paths.iter().filter(|g| {
                    right(&g.rights)
                        && !lifted(g)
                        && !file_walk(&g.target)
                        && may_overlap(&carve.pattern, &g.target)
                })
            };
            let Some(g) = overlapping()
                .find(|g| !g.origin.key.contains(':'))
                .or_else(|| overlapping().next())
            else {
                return;
            };
            match mask_for(&carve.pattern, kind, &paths, &g.origin) {
                Ok(path) => masks.push(Mask {
                    creatable: creatable(&path, &paths),
                    path,
                    kind,
                    origin: carve.origin.clone(),
                }),
                Err(why) => refused.push(Refused {
                    origin: carve.origin.clone(),
                    why,
                }),
            }
        };
        let never = |_: &PathGrant| false;
        for carve in &policy.fs.deny {
            cut(
                carve,
                MaskKind::Hidden,
                |r| r.read || r.write || r.exec,
                &never,
            );
        }
        for carve in &policy.exec_deny {
            cut(carve, MaskKind::NoExec, |r| r.exec, &never);
        }
        // A protected path is writable where `fs.unprotect` matches: a write grant that an
        // unprotect rule covers whole takes no protection to cut into.
        let unprotected = |g: &PathGrant| {
            let pattern = target_pattern(&g.target);
            policy
                .fs
                .unprotect
                .iter()
                .any(|u| pattern.as_ref().is_some_and(|p| covers(&u.pattern, p)))
        };
        for protect in &policy.fs.protect {
            let lifted = policy
                .fs
                .unprotect
                .iter()
                .any(|u| covers(&u.pattern, &protect.pattern));
            if !lifted {
                cut(protect, MaskKind::ReadOnly, |r| r.write, &unprotected);
            }
        }

        // The same carve-outs and protected paths, applied by each call to the matches of a
        // walk granted one file at a time.
        let mut cuts = Vec::new();
        if paths.iter().any(|g| file_walk(&g.target)) {
            let cut =
                |pattern: &PathPattern, origin: &Origin, removes, unless: &[PathPattern]| Cut {
                    pattern: pattern.clone(),
                    removes,
                    unless: unless.to_vec(),
                    origin: origin.clone(),
                };
            let unprotect: Vec<PathPattern> = policy
                .fs
                .unprotect
                .iter()
                .map(|u| u.pattern.clone())
                .collect();
            cuts.extend(
                policy
                    .fs
                    .deny
                    .iter()
                    .map(|r| cut(&r.pattern, &r.origin, Rights::ALL, &[])),
            );
            cuts.extend(
                policy
                    .exec_deny
                    .iter()
                    .map(|r| cut(&r.pattern, &r.origin, Rights::EXEC, &[])),
            );
            cuts.extend(
                policy
                    .fs
                    .protect
                    .iter()
                    .map(|r| cut(&r.pattern, &r.origin, Rights::WRITE_ONLY, &unprotect)),
            );
        }

        // Narrowings that depend only on the rule's shape.
        for g in &paths {
            match &g.target {
                // Device nodes are never created or removed in a scope under either engine;
                // a file inside a writable tree is created and removed through the tree.
                Target::Exact { path, .. }
                    if g.rights.write && !starts_with(path, "/dev") && !paths.iter().any(|w| {
                        w.rights.write
                            && matches!(&w.target, Target::Tree { root } if starts_with(path, root))
                    }) =>
                {
                    narrowings.push(Narrowing {
                        origin: g.origin.clone(),
                        kind: NarrowingKind::FileCreation,
                    });
                }
                // Looked at when the plan is made; each call looks again.
                Target::Exact { path, .. }
                    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) =>
                {
                    narrowings.push(Narrowing {
                        origin: g.origin.clone(),
                        kind: NarrowingKind::DirectoryItself,
                    });
                }
                Target::Walk { pattern } => {
                    let root = target_root(&g.target);
                    // A match the scope creates (a writable tree around or within the root).
                    let creatable = paths.iter().any(|w| {
                        w.rights.write
                            && !matches!(w.target, Target::Exact { .. } | Target::ProcSelf)
                            && !file_walk(&w.target)
                            && nested_either_way(&root, &target_root(&w.target))
                    });
                    if creatable {
                        narrowings.push(Narrowing {
                            origin: g.origin.clone(),
                            kind: NarrowingKind::NewMatches,
                        });
                    }
                    // A name may be a directory's, which is granted only as a tree.
                    if !matches!(pattern, PathPattern::Postfix { .. }) && file_walk(&g.target) {
                        narrowings.push(Narrowing {
                            origin: g.origin.clone(),
                            kind: NarrowingKind::DirectoryItself,
                        });
                    }
                    // A match granted as one file is written, not created, removed or renamed.
                    if g.rights.write && file_walk(&g.target) {
                        narrowings.push(Narrowing {
                            origin: g.origin.clone(),
                            kind: NarrowingKind::FileCreation,
                        });
                    }
                }
                // The directory whose entries the first `*` matches (deeper ones lie below it).
                Target::Star { .. } => {
                    let parent = target_root(&g.target);
                    let creatable = paths.iter().any(|w| {
                        w.rights.write
                            && matches!(&w.target, Target::Tree { root } if starts_with(&parent, root))
                    });
                    if creatable {
                        narrowings.push(Narrowing {
                            origin: g.origin.clone(),
                            kind: NarrowingKind::NewMatches,
                        });
                    }
                }
                _ => {}
            }
        }

        let (tcp_connect, gated) = plan_net(policy, abi, gate, &mut refused);
        if !refused.is_empty() {
            refused.sort_by_key(|r| r.origin.line);
            let gate = match gate {
                GateSupport::Unavailable(why) if refused.iter().any(|r| r.why.gate_decides()) => {
                    Some(why.clone())
                }
                _ => None,
            };
            return Err(LandlockRefusal {
                rules: refused,
                gate,
            });
        }
        masks.sort_by_key(|m| (m.path.matches('/').count(), m.path.clone()));
        Ok(Self {
            paths,
            masks,
            cuts,
            tcp_connect,
            gated,
            narrowings,
            abi,
        })
    }

    /// The path grants, in policy order (read, write, exec).
    pub fn paths(&self) -> &[PathGrant] {
        &self.paths
    }

    /// The carve-outs and protected paths the scope's mounts enforce, shallowest first.
    pub fn masks(&self) -> &[Mask] {
        &self.masks
    }

    /// The carve-outs and protected paths each call applies to the matches of a walk granted
    /// one file at a time (empty where the plan has none), in policy order.
    pub fn cuts(&self) -> &[Cut] {
        &self.cuts
    }

    /// The TCP port ranges that may be connected to, on any address, as far as Landlock's
    /// network rules go (where the plan is [`gated`](Self::gated), the gate narrows them to
    /// the policy's addresses).
    pub fn tcp_connect(&self) -> &[PortRange] {
        &self.tcp_connect
    }

    /// Whether the network gate decides the scope's TCP and UDP peers: the policy has a
    /// network rule Landlock alone cannot decide (an address, UDP, one family, a name).
    pub fn gated(&self) -> bool {
        self.gated
    }

    /// What the plan enforces more strictly than the policy, rule by rule.
    pub fn narrowings(&self) -> &[Narrowing] {
        &self.narrowings
    }

    /// The Landlock ABI the plan was made for.
    pub fn abi(&self) -> LandlockAbi {
        self.abi
    }

    /// The rights the plan's grants give `path` by their shape alone (trees and exact paths;
    /// `*` patterns by [`PathPattern::matches`], the private `/proc` as `/proc/self`): what a
    /// call may do there when every named file exists. For tests and explanations.
    pub fn rights_at(&self, path: &str) -> Rights {
        self.paths
            .iter()
            .filter(|g| match &g.target {
                Target::Exact { path: p, .. } => p == path,
                Target::Tree { root } => starts_with(path, root),
                Target::Star { segments, subtree } => PathPattern::BoundedStar {
                    segments: segments.clone(),
                    subtree: *subtree,
                }
                .matches(path),
                Target::Walk { pattern } => pattern.matches(path),
                Target::ProcSelf => {
                    starts_with(path, "/proc/self") || starts_with(path, "/proc/thread-self")
                }
            })
            .fold(Rights::default(), |acc, g| acc.union(g.rights))
    }
}

/// The path a mount of `kind` covers to enforce the carve-out or protected `pattern` exactly,
/// where it cuts into the grant `grant`; or why no mount can. Looked at when the plan is made
/// (each call looks again, and covers the path only while it exists):
///
/// * only a literal path can be covered: a pattern that matches by name anywhere is refused;
/// * `fs.deny` is exact for `DIR/**` only (a tmpfs covers a directory, and all below it);
/// * a protected or `exec.deny` path is exact as `DIR/**` or as one file (a bind covers all
///   below its root, so an exact path must not be a directory);
/// * a symbolic link cannot be covered (a mount follows it), and a path that does not exist
///   is exact only where the scope cannot create it (no write grant covers it).
fn mask_for(
    pattern: &PathPattern,
    kind: MaskKind,
    paths: &[PathGrant],
    grant: &Origin,
) -> Result<String, Inexpressible> {
    let refuse = |why: &'static str| Inexpressible::Unmaskable {
        grant: grant.clone(),
        why,
    };
    let (path, tree) = match pattern {
        PathPattern::Exact { path } => (path.clone(), false),
        PathPattern::Subtree { root } => (root.clone(), true),
        _ => {
            return Err(match kind {
                MaskKind::ReadOnly => Inexpressible::ProtectedInWritable {
                    grant: grant.clone(),
                },
                _ => Inexpressible::CarveOut {
                    grant: grant.clone(),
                },
            });
        }
    };
    if kind == MaskKind::Hidden && !tree {
        return Err(refuse(
            "only a carve-out of a whole tree (`DIR/**`) can be covered by a mount",
        ));
    }
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_symlink() => {
            Err(refuse("it is a symbolic link, which a mount cannot cover"))
        }
        Ok(m) if kind == MaskKind::Hidden && !m.is_dir() => Err(refuse(
            "it is not a directory, which the carve-out's tmpfs needs",
        )),
        Ok(m) if !tree && m.is_dir() => Err(refuse(
            "it is a directory, and a mount over it would cover what lies below it too",
        )),
        Ok(_) => Ok(path),
        Err(_) => {
            if creatable(&path, paths) {
                Err(refuse(
                    "it does not exist, and the scope could create it where no mount covers it",
                ))
            } else {
                Ok(path)
            }
        }
    }
}

/// Whether a writable tree of the plan may cover `path` (the scope could create it): a tree
/// grant around it, or a `*` pattern or a name pattern whose matches are trees and that
/// matches it (it lies at or below one of their matches, whether that exists or not).
fn creatable(path: &str, paths: &[PathGrant]) -> bool {
    paths.iter().any(|g| {
        g.rights.write
            && match &g.target {
                Target::Tree { root } => starts_with(path, root),
                Target::Star { subtree: true, .. } => {
                    target_pattern(&g.target).is_some_and(|p| p.matches(path))
                }
                Target::Walk { pattern } if !file_walk(&g.target) => pattern.matches(path),
                _ => false,
            }
    })
}

/// The TCP ports of `policy`'s IP grants, or the rules Landlock cannot express.
fn plan_net(
    policy: &CompiledPolicy,
    abi: LandlockAbi,
    gate: &GateSupport,
    refused: &mut Vec<Refused>,
) -> (Vec<PortRange>, bool) {
    let mut alone = Vec::new();
    let ports = landlock_net(policy, abi, &mut alone);
    let (gate_decides, others): (Vec<Refused>, Vec<Refused>) =
        alone.into_iter().partition(|r| r.why.gate_decides());
    refused.extend(others);
    if gate_decides.is_empty() {
        return (ports, false);
    }
    if *gate != GateSupport::Available {
        refused.extend(gate_decides);
        return (ports, false);
    }
    // The gate decides every peer exactly; Landlock's network rules (where the kernel has
    // them) still allow no TCP port that no rule grants on some address.
    let mut tcp = BTreeSet::new();
    if abi.has_network() {
        for rule in &policy.net.allow {
            if rule.protocols.contains(&Protocol::Tcp) {
                tcp.extend(rule.ports.first..=rule.ports.last);
            }
        }
        for rule in &policy.net.hosts {
            if rule.protocols.contains(&Protocol::Tcp) {
                tcp.extend(rule.ports.first..=rule.ports.last);
            }
        }
        // Name grants: DNS over TCP, which Landlock sees before the gate steers it to the
        // scope's resolver.
        if !policy.net.hosts.is_empty() {
            tcp.insert(53);
        }
    }
    (ranges(tcp), true)
}

/// Contiguous ranges of `ports`, ascending.
fn ranges(ports: BTreeSet<u16>) -> Vec<PortRange> {
    let mut out: Vec<PortRange> = Vec::new();
    for p in ports {
        match out.last_mut() {
            Some(r) if r.last.checked_add(1) == Some(p) => r.last = p,
            _ => out.push(PortRange { first: p, last: p }),
        }
    }
    out
}

/// The TCP ports Landlock alone enforces the policy's network rules with, every rule it
/// cannot decide pushed to `refused`.
fn landlock_net(
    policy: &CompiledPolicy,
    abi: LandlockAbi,
    refused: &mut Vec<Refused>,
) -> Vec<PortRange> {
    for rule in &policy.net.hosts {
        refused.push(Refused {
            origin: rule.origin.clone(),
            why: Inexpressible::Name,
        });
    }
    for rule in &policy.net.unix {
        refused.push(Refused {
            origin: rule.origin.clone(),
            why: Inexpressible::UnixSocket,
        });
    }
    let mut v4 = BTreeSet::new();
    let mut v6 = BTreeSet::new();
    for rule in &policy.net.allow {
        if rule.protocols.contains(&Protocol::Udp) {
            refused.push(Refused {
                origin: rule.origin.clone(),
                why: Inexpressible::Udp,
            });
            continue;
        }
        let any = match rule.net {
            IpNet::V4 { prefix_len, .. } => prefix_len == 0,
            IpNet::V6 { prefix_len, .. } => prefix_len == 0,
        };
        if !any {
            refused.push(Refused {
                origin: rule.origin.clone(),
                why: Inexpressible::Address,
            });
            continue;
        }
        if !abi.has_network() {
            refused.push(Refused {
                origin: rule.origin.clone(),
                why: Inexpressible::NoNetworkRules { abi: abi.0 },
            });
            continue;
        }
        let set = match rule.net {
            IpNet::V4 { .. } => &mut v4,
            IpNet::V6 { .. } => &mut v6,
        };
        set.insert((rule.ports.first, rule.ports.last, rule.origin.clone()));
    }
    let ports = |s: &BTreeSet<(u16, u16, Origin)>| -> BTreeSet<u16> {
        s.iter().flat_map(|(a, b, _)| *a..=*b).collect()
    };
    let (p4, p6) = (ports(&v4), ports(&v6));
    if p4 != p6 {
        for (a, b, origin) in v4.iter().chain(&v6) {
            let other = if v4.iter().any(|(_, _, o)| o == origin) {
                &p6
            } else {
                &p4
            };
            if (*a..=*b).any(|p| !other.contains(&p)) {
                refused.push(Refused {
                    origin: origin.clone(),
                    why: Inexpressible::OneFamily,
                });
            }
        }
        return Vec::new();
    }
    ranges(p4)
}

/// The Landlock target of a grant's pattern; `None` for a pattern that can match nothing.
fn target_of(pattern: &PathPattern, pin: Option<FileId>) -> Result<Option<Target>, Inexpressible> {
    Ok(Some(match pattern {
        PathPattern::Exact { path } => Target::Exact {
            path: path.clone(),
            pin,
        },
        PathPattern::Subtree { root } => {
            if root == "/proc/self" || root == "/proc/thread-self" {
                Target::ProcSelf
            } else {
                Target::Tree { root: root.clone() }
            }
        }
        PathPattern::BoundedStar { segments, subtree } => Target::Star {
            segments: segments.clone(),
            subtree: *subtree,
        },
        PathPattern::Postfix { .. } | PathPattern::Segment { .. } | PathPattern::Nested { .. } => {
            Target::Walk {
                pattern: pattern.clone(),
            }
        }
    }))
}

/// Whether `path` is `root` or lies below it (segment-wise).
fn starts_with(path: &str, root: &str) -> bool {
    let (p, r) = (split_segments(path), split_segments(root));
    p.len() >= r.len() && p.iter().zip(&r).all(|(a, b)| a == b)
}

/// Whether every path `target` may grant lies at or below `dir`.
fn under(target: &Target, dir: &str) -> bool {
    starts_with(&target_root(target), dir)
}

/// Whether `carve` may match a path `target` grants. Conservative: true unless the two are
/// provably apart (neither literal prefix lies within the other).
fn may_overlap(carve: &PathPattern, target: &Target) -> bool {
    match target {
        Target::Exact { path, .. } => carve.matches(path),
        _ => nested_either_way(
            &format!("/{}", carve.literal_prefix().join("/")),
            &target_root(target),
        ),
    }
}

/// Whether one of the directories `a` and `b` lies at or below the other.
fn nested_either_way(a: &str, b: &str) -> bool {
    starts_with(a, b) || starts_with(b, a)
}

/// The pattern a target grants, where it is one (not the private `/proc`).
fn target_pattern(target: &Target) -> Option<PathPattern> {
    match target {
        Target::Exact { path, .. } => Some(PathPattern::Exact { path: path.clone() }),
        Target::Tree { root } => Some(PathPattern::Subtree { root: root.clone() }),
        Target::Star { segments, subtree } => Some(PathPattern::BoundedStar {
            segments: segments.clone(),
            subtree: *subtree,
        }),
        Target::Walk { pattern } => Some(pattern.clone()),
        Target::ProcSelf => None,
    }
}

/// The literal directory every path `target` may grant lies at or below (its pattern's
/// literal prefix; `/proc` for the private `/proc`).
fn target_root(target: &Target) -> String {
    target_pattern(target).map_or_else(
        || "/proc".to_owned(),
        |p| format!("/{}", p.literal_prefix().join("/")),
    )
}

/// Whether `target` is a walk whose matches are granted one file at a time (its pattern
/// does not end in `/**`): carve-outs and protected paths are applied to each match.
pub fn file_walk(target: &Target) -> bool {
    matches!(
        target,
        Target::Walk { pattern } if !matches!(pattern, PathPattern::Nested { subtree: true, .. })
    )
}

/// Whether `outer` matches every path `inner` matches (only for the shapes where that is
/// plain: equal patterns, or a subtree around the other's literal prefix).
fn covers(outer: &PathPattern, inner: &PathPattern) -> bool {
    if outer == inner {
        return true;
    }
    match outer {
        PathPattern::Subtree { root } => {
            starts_with(&format!("/{}", inner.literal_prefix().join("/")), root)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
