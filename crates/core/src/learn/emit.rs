//! Writing the learned policy: the base policy's keys, then the learned grants in commented
//! sections, as TOML that compiles as is.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::IpAddr;

use toml::{Table, Value};

use super::Observed;
use super::collapse::{FsView, collapse, parent};
use super::sensitive::{is_sensitive, within};
use crate::CompiledPolicy;
use crate::compile::LANGUAGE_VERSIONS;
use crate::glob::PathPattern;
use crate::net::Protocol;

/// What [`synthesize`] needs.
#[derive(Clone, Copy)]
pub struct Synthesis<'a> {
    /// The base policy's text, as read.
    pub base_text: &'a str,
    /// The base policy's file, as given on the command line (for comments).
    pub base_name: &'a str,
    /// The base policy, compiled: learned entries it already covers are left out.
    pub base: &'a CompiledPolicy,
    /// What the run did that the base policy denied.
    pub observed: &'a Observed,
    /// The filesystem, for directory listings and whether a file still exists.
    pub fs: &'a dyn FsView,
    /// The invoking user's home directory, normalised, if known.
    pub home: Option<&'a str>,
    /// The command that ran, for the header (one line).
    pub command: &'a str,
    /// The directory the base policy's relative paths resolve against (normalised): learned
    /// paths below it are written relative to it (`./target/**`), as a base policy writes
    /// them, so the learned policy holds wherever that directory is.
    pub workspace: Option<&'a str>,
}

impl std::fmt::Debug for Synthesis<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synthesis")
            .field("base_name", &self.base_name)
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

/// The newest policy language version this build knows: the learned policy's `version`.
fn current_version() -> i64 {
    LANGUAGE_VERSIONS.last().copied().unwrap_or(1)
}

/// Writes the learned policy.
///
/// # Errors
/// When the base text is not TOML (it compiled, so only if it changed since).
pub fn synthesize(s: &Synthesis<'_>) -> Result<String, toml::de::Error> {
    let mut base: Table = s.base_text.parse()?;
    let obs = s.observed;
    let mut out = String::new();
    let mut notes: Vec<String> = Vec::new();

    // The learned entries the base does not cover; writes imply reads.
    let write: BTreeSet<String> = obs
        .write
        .iter()
        .filter(|p| !s.base.fs.write.iter().any(|r| r.pattern.matches(p)))
        .cloned()
        .collect();
    let read: BTreeSet<String> = obs
        .read
        .iter()
        .filter(|p| !write.contains(*p) && !s.base.fs.readable().any(|r| r.pattern.matches(p)))
        .cloned()
        .collect();
    let (write_exact, write_roots) = collapse(&write, s.fs, s.home);
    let read_rest: BTreeSet<String> = read
        .into_iter()
        .filter(|p| !write_roots.iter().any(|r| within(p, r)))
        .collect();
    let (read_exact, read_roots) = collapse(&read_rest, s.fs, s.home);
    let mut pinned_in_base = Vec::new();
    let exec: BTreeSet<String> = obs
        .exec
        .iter()
        .filter(|p| {
            let rule = s.base.exec.iter().find(|r| r.pattern.matches(p));
            if let Some(r) = rule
                && r.pin.is_some()
            {
                pinned_in_base.push((*p).clone());
            }
            rule.is_none()
        })
        .cloned()
        .collect();
    let unix: BTreeSet<String> = obs
        .unix
        .iter()
        .filter(|p| !s.base.net.unix.iter().any(|r| r.pattern.matches(p)))
        .cloned()
        .collect();
    let mut net: BTreeMap<(IpAddr, Protocol), Vec<u16>> = BTreeMap::new();
    for &(proto, addr, port) in &obs.net {
        let covered = s.base.net.allow.iter().any(|r| {
            let (lo, hi) = r.net.range();
            let v = u128::from(match addr {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            });
            lo <= v
                && v <= hi
                && r.ports.first <= port
                && port <= r.ports.last
                && r.protocols.contains(&proto)
        });
        if !covered {
            net.entry((addr, proto)).or_default().push(port);
        }
    }

    for (kind, n) in obs.dropped() {
        notes.push(format!(
            "CAPPED: {n} more distinct {kind} entries were observed than this policy lists \
             (the limit is {} per kind); it does NOT allow them",
            obs.limits.max_per_kind
        ));
    }
    for p in &obs.unnameable {
        notes.push(format!(
            "not expressible in a policy (a wildcard character or bytes that are not UTF-8), \
             left out: {p:?}"
        ));
    }
    for p in &pinned_in_base {
        notes.push(format!(
            "{p}: the base policy pins it and the file changed since; recompile the base \
             policy (pins are taken at compile time) rather than widen it"
        ));
    }

    // The header.
    let _ = writeln!(
        out,
        "# Learned by bee in learn mode, on top of the base policy {}.",
        s.base_name
    );
    let _ = writeln!(out, "# Command: {}", one_line(s.command));
    let _ = writeln!(
        out,
        "# {} accesses the base policy denied were observed ({} distinct).",
        obs.total,
        obs.distinct()
    );
    out.push_str(
        "# The base policy's grants come first in each list; the learned ones follow under\n\
         # `# learned` comments. Review every learned entry before you enforce this policy:\n\
         # `# review:` marks protected paths and well-known secrets, `# gone:` paths that no\n\
         # longer existed when the run ended (temporary files: their names may change).\n",
    );
    for n in &notes {
        let _ = writeln!(out, "# NOTE: {}", one_line(n));
    }
    out.push('\n');
    base.remove("version");
    let _ = writeln!(out, "version = {}", current_version());
    for key in ["name", "description"] {
        if let Some(v) = base.remove(key) {
            let _ = writeln!(out, "{key} = {v}");
        }
    }
    // Other top-level keys of the base that are not tables, as written (tables follow at
    // the end, after the sections this module writes).
    let plain: Vec<String> = base
        .iter()
        .filter(|(_, v)| !v.is_table() && !is_table_array(v))
        .map(|(k, _)| k.clone())
        .collect();
    for key in plain {
        if let Some(v) = base.remove(&key) {
            let _ = writeln!(out, "{} = {v}", bare(&key));
        }
    }

    // [fs]
    let mut fs = take_table(&mut base, "fs");
    let base_read = take_strings(&mut fs, "read");
    let base_write = take_strings(&mut fs, "write");
    out.push_str("\n[fs]\n");
    let mut learned_read = Vec::new();
    learned_read.extend(read_roots.iter().map(|r| subtree_entry(r, s)));
    learned_read.extend(read_exact.iter().map(|p| exact_entry(p, s)));
    list(&mut out, "read", &base_read, "learned: read", &learned_read);
    let mut learned_write = Vec::new();
    learned_write.extend(write_roots.iter().map(|r| subtree_entry(r, s)));
    learned_write.extend(write_exact.iter().map(|p| exact_entry(p, s)));
    list(
        &mut out,
        "write",
        &base_write,
        "learned: written (write implies read)",
        &learned_write,
    );
    rest(&mut out, &fs);

    // [exec]
    let mut ex = take_table(&mut base, "exec");
    let base_exec = take_strings(&mut ex, "allow");
    let learned_exec: Vec<(String, Option<String>)> = exec
        .iter()
        .map(|p| {
            let written = write.contains(p)
                || write
                    .iter()
                    .any(|w| parent(w).is_some_and(|d| parent(p) == Some(d)))
                || write_roots.iter().any(|r| within(p, r))
                // A file the base lets the command write can be replaced (a build relinks
                // its binaries): a pin would hold one inode of it.
                || s.base.fs.write.iter().any(|r| r.pattern.matches(p));
            if !s.fs.exists(p) {
                (shown(p, s), Some("gone: not pinned".to_owned()))
            } else if written {
                (
                    shown(p, s),
                    Some("written by the run: not pinned (a pin is one inode)".to_owned()),
                )
            } else {
                (format!("!{}", shown(p, s)), review(p, s))
            }
        })
        .collect();
    out.push_str("\n[exec]\n");
    list(
        &mut out,
        "allow",
        &base_exec,
        "learned: executed or mapped executable; `!` pins the file that ran",
        &learned_exec,
    );
    rest(&mut out, &ex);

    // [net]
    let mut nt = take_table(&mut base, "net");
    let base_unix = take_strings(&mut nt, "unix");
    let base_allow = nt.remove("allow");
    out.push_str("\n[net]\n");
    let learned_unix: Vec<(String, Option<String>)> =
        unix.iter().map(|p| exact_entry(p, s)).collect();
    list(
        &mut out,
        "unix",
        &base_unix,
        "learned: unix sockets connected to",
        &learned_unix,
    );
    rest(&mut out, &nt);
    if let Some(Value::Array(rules)) = base_allow {
        for rule in rules {
            if let Value::Table(t) = rule {
                out.push_str("\n[[net.allow]]\n");
                for (k, v) in &t {
                    let _ = writeln!(out, "{} = {v}", bare(k));
                }
            }
        }
    }
    if !net.is_empty() {
        out.push_str("\n# learned: one rule per address and protocol, with the ports seen\n");
    }
    for ((addr, proto), ports) in &net {
        out.push_str("[[net.allow]]\n");
        let _ = writeln!(out, "addr = [{}]", Value::String(addr.to_string()));
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        let _ = writeln!(out, "ports = [{}]", ports.join(", "));
        let _ = writeln!(out, "proto = {}", Value::String(proto.to_string()));
    }

    // Any other table of the base, as it was.
    if !base.is_empty() {
        out.push('\n');
        out.push_str(&toml::to_string(&base).unwrap_or_default());
    }
    Ok(out)
}

fn is_table_array(v: &Value) -> bool {
    matches!(v, Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_table))
}

fn take_table(t: &mut Table, key: &str) -> Table {
    match t.remove(key) {
        Some(Value::Table(inner)) => inner,
        _ => Table::new(),
    }
}

/// The values of `t[key]` as written (strings, or other values printed as TOML).
fn take_strings(t: &mut Table, key: &str) -> Vec<String> {
    match t.remove(key) {
        Some(Value::Array(a)) => a.iter().map(ToString::to_string).collect(),
        Some(v) => vec![v.to_string()],
        None => Vec::new(),
    }
}

/// Keys of a section the learned policy does not change, as written.
fn rest(out: &mut String, t: &Table) {
    for (k, v) in t {
        let _ = writeln!(out, "{} = {v}", bare(k));
    }
}

/// A key, quoted when it is not a bare TOML key.
fn bare(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        key.to_owned()
    } else {
        Value::String(key.to_owned()).to_string()
    }
}

/// `key = [ base…, # comment, learned… ]`. `base` holds TOML values as written; `learned`
/// holds pattern text and an optional trailing comment.
fn list(
    out: &mut String,
    key: &str,
    base: &[String],
    comment: &str,
    learned: &[(String, Option<String>)],
) {
    if base.is_empty() && learned.is_empty() {
        return;
    }
    let _ = writeln!(out, "{key} = [");
    if !base.is_empty() {
        out.push_str("  # from the base policy\n");
    }
    for v in base {
        let _ = writeln!(out, "  {v},");
    }
    if !learned.is_empty() {
        let _ = writeln!(out, "  # {comment} ({})", learned.len());
    }
    for (pattern, note) in learned {
        let v = Value::String(pattern.clone());
        match note {
            Some(n) => {
                let _ = writeln!(out, "  {v}, # {n}");
            }
            None => {
                let _ = writeln!(out, "  {v},");
            }
        }
    }
    out.push_str("]\n");
}

fn subtree_entry(root: &str, s: &Synthesis<'_>) -> (String, Option<String>) {
    let pattern = if root == "/" {
        "/**".to_owned()
    } else {
        format!("{root}/**")
    };
    debug_assert!(matches!(
        PathPattern::parse(&pattern),
        Ok(PathPattern::Subtree { .. })
    ));
    (
        shown(&pattern, s),
        Some("every entry was observed".to_owned()),
    )
}

/// `path` as the learned policy writes it: relative (`./…`, `.`) below the workspace.
fn shown(path: &str, s: &Synthesis<'_>) -> String {
    match s.workspace.filter(|w| *w != "/") {
        Some(w) if path == w => ".".to_owned(),
        Some(w) => match path.strip_prefix(w).and_then(|r| r.strip_prefix('/')) {
            Some(rest) => format!("./{rest}"),
            None => path.to_owned(),
        },
        None => path.to_owned(),
    }
}

fn exact_entry(path: &str, s: &Synthesis<'_>) -> (String, Option<String>) {
    let note = if s.fs.exists(path) {
        review(path, s)
    } else {
        Some("gone: did not exist when the run ended".to_owned())
    };
    (shown(path, s), note)
}

fn review(path: &str, s: &Synthesis<'_>) -> Option<String> {
    is_sensitive(path, s.home).then(|| "review: a protected path or a known secret".to_owned())
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}
