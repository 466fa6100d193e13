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

    /// Checks that a policy which arrived as data (e.g. over `bee serve`'s socket), not from
    /// the compiler, is in the compiler's normal form: the compiled format, every path
    /// pattern normalised (absolute, no `.`, `..` or empty segment) and printing back to
    /// itself, every host pattern likewise, port ranges ordered, and exec pins only on exact
    /// paths. The attenuation prover and the planners read patterns as the compiler makes
    /// them: a `root` of `/ws/../etc` would look to the prover like a path below `/ws`.
    ///
    /// # Errors
    /// One sentence naming the first rule (its key and index) that is not in normal form.
    pub fn check_normal_form(&self) -> Result<(), String> {
        if self.format != COMPILED_FORMAT {
            return Err(format!(
                "compiled format {} (this build reads {COMPILED_FORMAT})",
                self.format
            ));
        }
        if !crate::compile::LANGUAGE_VERSIONS.contains(&i64::from(self.version)) {
            let known: Vec<String> = crate::compile::LANGUAGE_VERSIONS
                .iter()
                .map(ToString::to_string)
                .collect();
            return Err(format!(
                "policy language version {} (this build has {})",
                self.version,
                known.join(", ")
            ));
        }
        let lists: [(&str, &[PathRule]); 6] = [
            ("fs.read", &self.fs.read),
            ("fs.write", &self.fs.write),
            ("fs.deny", &self.fs.deny),
            ("fs.protect", &self.fs.protect),
            ("fs.unprotect", &self.fs.unprotect),
            ("exec.deny", &self.exec_deny),
        ];
        let unix = ("net.unix", self.net.unix.as_slice());
        for (key, rules) in lists.into_iter().chain(std::iter::once(unix)) {
            for (i, rule) in rules.iter().enumerate() {
                check_pattern(&rule.pattern).map_err(|why| format!("{key}[{i}]: {why}"))?;
            }
        }
        for (i, rule) in self.exec.iter().enumerate() {
            check_pattern(&rule.pattern).map_err(|why| format!("exec.allow[{i}]: {why}"))?;
            if rule.pin.is_some() && !matches!(rule.pattern, PathPattern::Exact { .. }) {
                return Err(format!(
                    "exec.allow[{i}]: a pin on a pattern that is not one path"
                ));
            }
        }
        for (i, rule) in self.net.allow.iter().enumerate() {
            if rule.ports.first > rule.ports.last {
                return Err(format!(
                    "net.allow[{i}]: ports {}-{} are reversed",
                    rule.ports.first, rule.ports.last
                ));
            }
        }
        for (i, rule) in self.net.hosts.iter().enumerate() {
            let text = rule.host.to_string();
            if HostPattern::parse(&text).ok().as_ref() != Some(&rule.host) {
                return Err(format!(
                    "net.allow host[{i}]: `{text}` is not in normal form"
                ));
            }
            if rule.ports.first > rule.ports.last {
                return Err(format!(
                    "net.allow host[{i}]: ports {}-{} are reversed",
                    rule.ports.first, rule.ports.last
                ));
            }
        }
        Ok(())
    }
}

/// A pattern is in normal form when its text normalises to itself and parses back to it.
fn check_pattern(pattern: &PathPattern) -> Result<(), String> {
    let text = pattern.to_string();
    let anchors = crate::path::Anchors {
        base: std::path::Path::new("/"),
        home: None,
    };
    let normal = crate::path::normalize(&text, anchors).ok();
    if !text.starts_with('/') || normal.as_deref() != Some(text.as_str()) {
        return Err(format!("`{text}` is not a normalised absolute pattern"));
    }
    if PathPattern::parse(&text).ok().as_ref() != Some(pattern) {
        return Err(format!("`{text}` does not print as the pattern it is"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::{CompileOptions, compile_str};

    fn compiled() -> CompiledPolicy {
        let text = "version = 1\n[fs]\nread = [\"/ws/**\", \"/etc/hosts\"]\nwrite = [\"/ws/out/**\"]\n\
                    [exec]\nallow = [\"/usr/bin/*\"]\n[[net.allow]]\nhost = \"example.com\"\nports = [443]\nproto = \"tcp\"\n";
        let options = CompileOptions {
            base: PathBuf::from("/"),
            home: None,
        };
        match compile_str("p.toml", text, &options) {
            Ok(c) => c.policy,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn what_the_compiler_makes_is_in_normal_form() {
        assert_eq!(compiled().check_normal_form(), Ok(()));
    }

    /// Every language version the compiler takes, the check takes (version 3 was once
    /// refused: `bee serve` then refused every version 3 policy, learned ones included).
    #[test]
    fn every_language_version_is_in_normal_form_and_no_other() {
        let options = CompileOptions {
            base: PathBuf::from("/"),
            home: None,
        };
        for version in crate::compile::LANGUAGE_VERSIONS {
            let text = format!("version = {version}\n[fs]\nread = [\"/ws/**\"]\n");
            let policy = match compile_str("p.toml", &text, &options) {
                Ok(c) => c.policy,
                Err(e) => panic!("version {version}: {e}"),
            };
            assert_eq!(policy.check_normal_form(), Ok(()), "version {version}");
        }
        let mut p = compiled();
        p.version = 4;
        assert_eq!(
            p.check_normal_form(),
            Err("policy language version 4 (this build has 1, 2, 3)".to_owned())
        );
    }

    #[test]
    fn patterns_the_compiler_would_never_make_are_refused() {
        let bad = [
            PathPattern::Subtree {
                root: "/ws/../etc".into(),
            },
            PathPattern::Subtree { root: "ws".into() },
            PathPattern::Exact {
                path: "/ws//x".into(),
            },
            PathPattern::Exact {
                path: "/ws/*".into(),
            },
            PathPattern::Exact {
                path: "/ws/./x".into(),
            },
            PathPattern::Segment {
                root: "/ws".into(),
                name: "a/b".into(),
            },
            PathPattern::BoundedStar {
                segments: vec!["tmp".into(), "w*".into(), "..".into(), "..".into()],
                subtree: true,
            },
            PathPattern::BoundedStar {
                segments: vec!["ws".into(), "pu*".into(), "..".into(), "pub".into()],
                subtree: false,
            },
        ];
        for pattern in bad {
            let mut p = compiled();
            p.fs.read[0].pattern = pattern.clone();
            let refused = p.check_normal_form();
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.starts_with("fs.read[0]: ")),
                "{pattern:?}: {refused:?}"
            );
        }
        let mut p = compiled();
        p.format += 1;
        assert!(p.check_normal_form().is_err());
        let mut p = compiled();
        p.version = 99;
        assert!(p.check_normal_form().is_err());
        let mut p = compiled();
        p.exec[0].pin = Some(FileId { dev: 1, ino: 2 });
        assert!(p.check_normal_form().is_err());
    }
}
