//! Stage one: a policy file becomes a [`CompiledPolicy`].
//!
//! Why one file of this length: it is the compiler's one pass over a policy's keys (`Compiler`,
//! about 460 lines), in the order the language reference lists them; includes, carve-outs, the
//! network and the workspace are submodules.
//!
//! Parsing, path normalisation ([`crate::path`]), glob lowering ([`crate::glob`]), inode
//! resolution of pinned executables and network grant expansion all happen here. Every
//! problem is collected (not only the first) and reported with file, line, column and key.
//!
//! Documented normalisations, which change no meaning:
//! * a rule that repeats another in the same list is merged into the first one written (a
//!   warning names it); rules otherwise keep their source order;
//! * a `net.allow` table with several addresses (or host names) or port ranges becomes one
//!   rule per pair;
//! * a host name becomes its ASCII lowercase form without a trailing dot ([`crate::host`]);
//! * an IPv4-mapped IPv6 block becomes the IPv4 block ([`crate::net`]).

use std::cell::Cell;
use std::collections::hash_map::Entry;
use std::hash::Hash;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

mod carve;
pub mod include;
mod net;
mod workspace;

use rustc_hash::FxHashMap;
use toml::{Spanned, Value};

use crate::compiled::{
    COMPILED_FORMAT, CompiledPolicy, ExecRule, FileId, FsGrants, NetGrants, Origin, PathRule,
};
use crate::compiled::{HostRule, NetRule};
use crate::error::{PolicyDiagnostic, PolicyDiagnostics, PolicyError, PolicyWarning, Source};
use crate::glob::PathPattern;
use crate::path::{Anchors, normalize};
use crate::raw::{RawExec, RawFragment, RawFs, RawNet, RawPolicy};

/// The policy language versions this build understands.
pub const LANGUAGE_VERSIONS: &[i64] = &[1, 2, 3];

/// The newest language version, which new policies (and `bee exec --learn`) are written in.
/// Version 2 added the built-in protected paths ([`crate::protected`]); version 3 protects
/// more of the same tools' files (every configuration name of the hook managers,
/// `.devcontainer.json`, `*.code-workspace`, JetBrains' `.run/`), and means nothing else new.
pub const LANGUAGE_VERSION: u32 = 3;

/// The most rules (after expansion) one policy may hold; more is refused, not truncated.
pub const MAX_RULES: usize = 1 << 20;

/// What a compilation needs besides the text.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// Absolute directory relative paths are resolved against.
    pub base: PathBuf,
    /// The invoking user's home directory, for `~`; `None` makes `~` an error.
    pub home: Option<PathBuf>,
}

/// A compiled policy with the warnings its compilation produced.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The policy.
    pub policy: CompiledPolicy,
    /// Notes that changed nothing but may surprise the author.
    pub warnings: Vec<PolicyWarning>,
}

/// Reads and compiles the policy file at `path`.
///
/// # Errors
/// [`PolicyError::Read`] when the file can't be read; [`PolicyError::Invalid`] with every
/// problem found otherwise.
pub fn compile_file(path: &Path, options: &CompileOptions) -> Result<Compiled, PolicyError> {
    let bytes = crate::source_file::read_source(path).map_err(|source| PolicyError::Read {
        path: path.to_owned(),
        source,
    })?;
    let name = path.display().to_string();
    match std::str::from_utf8(&bytes) {
        Ok(text) => compile_str(&name, text, options),
        Err(e) => {
            let valid = String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned();
            let source = Source::new(name.clone(), &valid);
            let at = valid.len();
            Err(invalid(
                &name,
                vec![source.diagnostic(
                    at..at,
                    None,
                    format!("the file is not UTF-8 (invalid byte at offset {at})"),
                    Some("policies are TOML, which is always UTF-8".to_owned()),
                )],
            ))
        }
    }
}

/// Compiles policy text; `name` is used in diagnostics and recorded as the source.
///
/// # Errors
/// [`PolicyError::Invalid`] with every problem found.
pub fn compile_str(
    name: &str,
    text: &str,
    options: &CompileOptions,
) -> Result<Compiled, PolicyError> {
    let source = Source::new(name, text);
    let raw: RawPolicy = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let (key, help) = crate::error::toml_hint(
            text,
            &span,
            e.message(),
            "see the policy language reference in the README for each key's type",
        );
        invalid(
            name,
            vec![source.diagnostic(span, key, e.message().trim().to_owned(), help)],
        )
    })?;
    let dir = Path::new(name)
        .parent()
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        })
        .map(Path::to_owned);
    let identity =
        std::fs::canonicalize(name).map_or_else(|_| name.to_owned(), |p| p.display().to_string());
    let mut cx = Compiler {
        source,
        options,
        prefix: String::new(),
        dir,
        identity,
        problems: Vec::new(),
        warnings: Vec::new(),
        unread: None,
        line_hint: Cell::new(0),
    };
    let policy = cx.policy(raw);
    if cx.problems.is_empty() {
        Ok(Compiled {
            policy,
            warnings: cx.warnings,
        })
    } else {
        Err(PolicyError::Invalid(PolicyDiagnostics {
            file: name.to_owned(),
            problems: cx.problems,
            unread: cx.unread,
        }))
    }
}

fn invalid(name: &str, problems: Vec<PolicyDiagnostic>) -> PolicyError {
    PolicyError::Invalid(PolicyDiagnostics {
        file: name.to_owned(),
        problems,
        unread: None,
    })
}

struct Compiler<'a> {
    source: Source,
    options: &'a CompileOptions,
    problems: Vec<PolicyDiagnostic>,
    warnings: Vec<PolicyWarning>,
    /// [`PolicyDiagnostics::unread`]: the first include whose file could not be read.
    unread: Option<std::io::ErrorKind>,
    /// Prefix of every origin's key: empty for the policy, `FRAGMENT:` in an included file.
    prefix: String,
    /// The directory the file's relative includes resolve against.
    dir: Option<PathBuf>,
    /// The file's identity for include cycles.
    identity: String,
    /// The line of the last origin made: rules come in source order, mostly.
    line_hint: Cell<usize>,
}

/// How deep includes may nest.
const MAX_INCLUDE_DEPTH: usize = 8;

/// The rules of one or more files, by list.
#[derive(Default)]
struct Parts {
    read: Vec<PathRule>,
    write: Vec<PathRule>,
    deny: Vec<PathRule>,
    protect: Vec<PathRule>,
    unprotect: Vec<PathRule>,
    exec: Vec<ExecRule>,
    exec_deny: Vec<PathRule>,
    allow: Vec<NetRule>,
    hosts: Vec<HostRule>,
    unix: Vec<PathRule>,
}

impl Parts {
    fn append(&mut self, mut other: Parts) {
        self.read.append(&mut other.read);
        self.write.append(&mut other.write);
        self.deny.append(&mut other.deny);
        self.protect.append(&mut other.protect);
        self.unprotect.append(&mut other.unprotect);
        self.exec.append(&mut other.exec);
        self.exec_deny.append(&mut other.exec_deny);
        self.allow.append(&mut other.allow);
        self.hosts.append(&mut other.hosts);
        self.unix.append(&mut other.unix);
    }

    fn len(&self) -> usize {
        self.read.len()
            + self.write.len()
            + self.deny.len()
            + self.protect.len()
            + self.unprotect.len()
            + self.exec.len()
            + self.exec_deny.len()
            + self.allow.len()
            + self.hosts.len()
            + self.unix.len()
    }

    /// Rules repeated across files merged into the first (each file warned about its own
    /// repeats already; two fragments granting the same path is not worth a warning).
    fn deduplicated(self) -> Parts {
        fn first<T>(rules: Vec<T>, key: impl for<'r> Fn(&'r [T]) -> Vec<Option<usize>>) -> Vec<T> {
            let repeats = key(&rules);
            rules
                .into_iter()
                .zip(repeats)
                .filter_map(|(rule, repeat)| repeat.is_none().then_some(rule))
                .collect()
        }
        let pattern = |rules: &[PathRule]| repeats(rules, |r| &r.pattern);
        Parts {
            read: first(self.read, pattern),
            write: first(self.write, pattern),
            deny: first(self.deny, pattern),
            protect: first(self.protect, pattern),
            unprotect: first(self.unprotect, pattern),
            exec: first(self.exec, |rules| repeats(rules, |r| (&r.pattern, r.pin))),
            exec_deny: first(self.exec_deny, pattern),
            allow: first(self.allow, |rules| {
                repeats(rules, |r| (r.net, r.ports, &r.protocols))
            }),
            hosts: first(self.hosts, |rules| {
                repeats(rules, |r| (&r.host, r.ports, &r.protocols))
            }),
            unix: first(self.unix, pattern),
        }
    }
}

/// For each rule, the index of the first rule with the same identity, if that is an earlier
/// one: `None` for the rules to keep. Identities are borrowed from the rules, not copied.
fn repeats<'r, T, K: Hash + Eq>(
    rules: &'r [T],
    identity: impl Fn(&'r T) -> K,
) -> Vec<Option<usize>> {
    let mut first: FxHashMap<K, usize> = FxHashMap::default();
    first.reserve(rules.len());
    rules
        .iter()
        .enumerate()
        .map(|(i, rule)| match first.entry(identity(rule)) {
            Entry::Vacant(slot) => {
                slot.insert(i);
                None
            }
            Entry::Occupied(slot) => Some(*slot.get()),
        })
        .collect()
}

impl Compiler<'_> {
    fn problem(
        &mut self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
        help: Option<&str>,
    ) {
        let d =
            self.source
                .diagnostic(span, Some(key.to_owned()), message, help.map(str::to_owned));
        self.problems.push(d);
    }

    fn origin(&self, span: &Range<usize>, key: String, text: &str) -> Origin {
        let mut hint = self.line_hint.get();
        let (line, column) = self.source.line_column_from(span.start, &mut hint);
        self.line_hint.set(hint);
        Origin {
            key: if self.prefix.is_empty() {
                key
            } else {
                format!("{}{key}", self.prefix)
            },
            line,
            column,
            text: text.to_owned(),
        }
    }

    fn policy(&mut self, raw: RawPolicy) -> CompiledPolicy {
        let version = self.version(raw.version.as_ref());
        let mut all = Parts {
            protect: self.builtin_protected(version, raw.version.as_ref()),
            ..Parts::default()
        };
        let mut stack = vec![self.identity.clone()];
        let dir = self.dir.clone();
        let mut includes = Vec::new();
        // With no version known (missing, or one this bee does not know, already refused),
        // the shipped fragments are unknown too: say only what is wrong, not each fragment.
        if version != 0 {
            self.includes(
                &raw.include,
                version,
                dir.as_deref(),
                &mut stack,
                &mut all,
                &mut includes,
            );
        }
        let own = self.parts(&raw.fs, &raw.exec, &raw.net);
        all.append(own);
        let mut all = all.deduplicated();
        if version == 1 {
            if let Some(first) = all.unprotect.first() {
                let span = self.span_of(&first.origin);
                self.problem(
                    span,
                    "fs.unprotect",
                    "version 1 policies protect nothing but what `fs.protect` names, so there is nothing to unprotect",
                    Some("move the policy to `version = 3` (which protects .git/hooks, .git/config, .bee, .envrc, hook managers' configuration and editor task files), or drop `fs.unprotect`"),
                );
            }
        }
        self.check_shadowed_pins(&all.exec);
        self.protect_pins(&mut all);
        let total = all.len();
        if total > MAX_RULES {
            self.problem(
                0..0,
                "(policy)",
                format!("the policy has {total} rules; the limit is {MAX_RULES}"),
                Some("split the work across several scopes, or use subtree rules"),
            );
        }
        let policy = CompiledPolicy {
            format: COMPILED_FORMAT,
            version,
            name: raw.name.map(Spanned::into_inner),
            description: raw.description.map(Spanned::into_inner),
            source: self.source.name.clone(),
            base: self.options.base.to_string_lossy().into_owned(),
            include: includes,
            fs: FsGrants {
                read: std::mem::take(&mut all.read),
                write: std::mem::take(&mut all.write),
                deny: std::mem::take(&mut all.deny),
                protect: std::mem::take(&mut all.protect),
                unprotect: std::mem::take(&mut all.unprotect),
            },
            exec: std::mem::take(&mut all.exec),
            exec_deny: std::mem::take(&mut all.exec_deny),
            net: NetGrants {
                allow: std::mem::take(&mut all.allow),
                hosts: std::mem::take(&mut all.hosts),
                unix: std::mem::take(&mut all.unix),
            },
        };
        if self.problems.is_empty() {
            self.warnings
                .extend(carve::lint(&policy, &self.source.name));
            self.warnings
                .extend(net::lint_hosts(&policy, &self.source.name));
            self.warnings
                .extend(net::lint_dns_ports(&policy, &self.source.name));
            self.warnings
                .extend(workspace::lint(&policy, &self.source.name));
        }
        policy
    }

    /// The rules of one file's `[fs]`, `[exec]` and `[net]`, each list deduplicated within it.
    fn parts(&mut self, fs: &RawFs, exec: &RawExec, net: &RawNet) -> Parts {
        let (mut allow, mut hosts) = (Vec::new(), Vec::new());
        for (i, rule) in net.allow.iter().enumerate() {
            self.net_rule(&indexed_key("net.allow", i), rule, &mut allow, &mut hosts);
        }
        let allow = self.dedup(
            "net.allow",
            allow,
            |rs| repeats(rs, |r| (r.net, r.ports, &r.protocols)),
            |r| &r.origin,
        );
        let hosts = self.dedup(
            "net.allow",
            hosts,
            |rs| repeats(rs, |r| (&r.host, r.ports, &r.protocols)),
            |r| &r.origin,
        );
        Parts {
            read: self.path_rules("fs.read", &fs.read),
            write: self.path_rules("fs.write", &fs.write),
            deny: self.path_rules("fs.deny", &fs.deny),
            protect: self.path_rules("fs.protect", &fs.protect),
            unprotect: self.path_rules("fs.unprotect", &fs.unprotect),
            exec: self.exec_rules(&exec.allow),
            exec_deny: self.path_rules("exec.deny", &exec.deny),
            allow,
            hosts,
            unix: self.path_rules("net.unix", &net.unix),
        }
    }

    /// Expands `entries` (the `include` list of this compiler's file, whose directory is
    /// `dir`) into `out`, depth first; `stack` holds the identities of the files being
    /// expanded, to refuse cycles; `names` collects what was included, as diagnostics name it.
    fn includes(
        &mut self,
        entries: &[Spanned<String>],
        version: u32,
        dir: Option<&Path>,
        stack: &mut Vec<String>,
        out: &mut Parts,
        names: &mut Vec<String>,
    ) {
        for (i, entry) in entries.iter().enumerate() {
            let key = indexed_key("include", i);
            let resolved =
                match include::resolve(entry.get_ref(), version, dir, self.options.home.as_deref())
                {
                    Ok(r) => r,
                    Err(e) => {
                        self.unread = self.unread.or(e.unread);
                        self.problem(entry.span(), &key, e.message, Some(&e.help));
                        continue;
                    }
                };
            if stack.contains(&resolved.identity) {
                self.problem(
                    entry.span(),
                    &key,
                    format!(
                        "`{}` includes itself (through {})",
                        entry.get_ref(),
                        stack.join(" → ")
                    ),
                    Some("remove one of the includes that close the cycle"),
                );
                continue;
            }
            if stack.len() > MAX_INCLUDE_DEPTH {
                self.problem(
                    entry.span(),
                    &key,
                    format!("includes nest deeper than {MAX_INCLUDE_DEPTH}"),
                    Some("flatten the fragments"),
                );
                continue;
            }
            let source = Source::new(resolved.source_name.clone(), &resolved.text);
            let raw: RawFragment = match toml::from_str(&resolved.text) {
                Ok(r) => r,
                Err(e) => {
                    let span = e.span().unwrap_or(0..0);
                    let (k, help) = crate::error::toml_hint(
                        &resolved.text,
                        &span,
                        e.message(),
                        "a fragment has the tables of a policy ([fs], [exec], [net]), an optional `description` and `include`, and no `version`",
                    );
                    self.problems.push(source.diagnostic(
                        span,
                        k,
                        e.message().trim().to_owned(),
                        help,
                    ));
                    continue;
                }
            };
            if names.contains(&resolved.source_name) {
                // Its rules are already in: including it again would add nothing.
                let (line, column) = self.source.line_column(entry.span().start);
                self.warnings.push(PolicyWarning {
                    file: self.source.name.clone(),
                    line,
                    column,
                    key: key.clone(),
                    message: format!(
                        "{} is included already; this include adds nothing",
                        resolved.source_name
                    ),
                });
                continue;
            }
            names.push(resolved.source_name.clone());
            let mut sub = Compiler {
                source,
                options: self.options,
                problems: Vec::new(),
                warnings: Vec::new(),
                unread: None,
                prefix: format!("{}:", resolved.label),
                dir: resolved.dir.clone(),
                identity: resolved.identity.clone(),
                line_hint: Cell::new(0),
            };
            stack.push(resolved.identity);
            sub.includes(
                &raw.include,
                version,
                resolved.dir.as_deref(),
                stack,
                out,
                names,
            );
            stack.pop();
            let parts = sub.parts(&raw.fs, &raw.exec, &raw.net);
            out.append(parts);
            self.problems.append(&mut sub.problems);
            self.warnings.append(&mut sub.warnings);
            self.unread = self.unread.or(sub.unread);
        }
    }

    /// The built-in protected paths of `version`, each with the `version` value as its origin.
    fn builtin_protected(&self, version: u32, at: Option<&Spanned<Value>>) -> Vec<PathRule> {
        let span = at.map_or(0..0, Spanned::span);
        crate::protected::protected(version)
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let pattern = PathPattern::parse(p.pattern).ok()?;
                Some(PathRule {
                    pattern,
                    origin: self.origin(&span, crate::protected::builtin_key(i), p.pattern),
                })
            })
            .collect()
    }

    fn version(&mut self, v: Option<&Spanned<Value>>) -> u32 {
        let known = LANGUAGE_VERSIONS
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        match v {
            None => {
                self.problem(0..0, "version", "missing `version`", Some("start the policy with `version = 3` (the newest: it protects .git/hooks, .git/config, .bee, .envrc, hook managers' configuration and editor task files); an otherwise empty policy is valid and grants nothing"));
                0
            }
            Some(s) => match s.get_ref() {
                Value::Integer(n) if LANGUAGE_VERSIONS.contains(n) => {
                    u32::try_from(*n).unwrap_or(0)
                }
                Value::Integer(n) => {
                    self.problem(
                        s.span(),
                        "version",
                        format!("policy language version {n} is not known to this bee"),
                        Some(&format!("known versions: {known}")),
                    );
                    0
                }
                other => {
                    self.problem(
                        s.span(),
                        "version",
                        format!("`version` must be an integer, not a {}", other.type_str()),
                        Some("write `version = 3`"),
                    );
                    0
                }
            },
        }
    }

    fn anchors(&self) -> Anchors<'_> {
        Anchors {
            base: &self.options.base,
            home: self.options.home.as_deref(),
        }
    }

    /// Normalises and lowers one path-pattern string; `None` after recording a problem.
    fn pattern(&mut self, key: &str, raw: &Spanned<String>, text: &str) -> Option<PathPattern> {
        let normalised = match normalize(text, self.anchors()) {
            Ok(p) => p,
            Err(e) => {
                self.problem(
                    raw.span(),
                    key,
                    e.to_string(),
                    Some("write an absolute path, `~/…`, or a path relative to the base directory"),
                );
                return None;
            }
        };
        match PathPattern::parse_owned(thread_self(normalised)) {
            Ok(p) => Some(p),
            Err(e) => {
                self.problem(raw.span(), key, e.to_string(), Some("supported shapes: /exact/path, /dir/**, /dir/**/*.ext, /dir/**/name, /dir/**/a/b (optionally ending in /**), /a/*/b (optionally ending in /**)"));
                None
            }
        }
    }

    fn path_rules(&mut self, list: &str, raws: &[Spanned<String>]) -> Vec<PathRule> {
        let mut rules = Vec::new();
        for (i, raw) in raws.iter().enumerate() {
            let key = indexed_key(list, i);
            if let Some(pattern) = self.pattern(&key, raw, raw.get_ref()) {
                let origin = self.origin(&raw.span(), key, raw.get_ref());
                rules.push(PathRule { pattern, origin });
            }
        }
        self.dedup(list, rules, |rs| repeats(rs, |r| &r.pattern), |r| &r.origin)
    }

    fn exec_rules(&mut self, raws: &[Spanned<String>]) -> Vec<ExecRule> {
        let mut rules = Vec::new();
        for (i, raw) in raws.iter().enumerate() {
            let key = indexed_key("exec.allow", i);
            let (text, pinned) = match raw.get_ref().strip_prefix('!') {
                Some(rest) => (rest, true),
                None => (raw.get_ref().as_str(), false),
            };
            let Some(pattern) = self.pattern(&key, raw, text) else {
                continue;
            };
            let origin = self.origin(&raw.span(), key.clone(), raw.get_ref());
            if !pinned {
                rules.push(ExecRule {
                    pattern,
                    pin: None,
                    origin,
                });
                continue;
            }
            let PathPattern::Exact { path } = &pattern else {
                self.problem(
                    raw.span(),
                    &key,
                    format!(
                        "only an exact path can be pinned, not a {} pattern",
                        pattern.kind()
                    ),
                    Some("pin each executable by its full path, e.g. `!/usr/bin/git`"),
                );
                continue;
            };
            match pin(Path::new(path)) {
                Ok((resolved, pin)) => rules.push(ExecRule {
                    pattern: PathPattern::Exact { path: resolved },
                    pin: Some(pin),
                    origin,
                }),
                Err(message) => self.problem(raw.span(), &key, message, Some("a pinned executable must exist when the policy is compiled; its inode is recorded then")),
            }
        }
        self.dedup(
            "exec.allow",
            rules,
            |rs| repeats(rs, |r| (&r.pattern, r.pin)),
            |r| &r.origin,
        )
    }

    /// A pin that an unpinned rule also admits would pin nothing: refuse the contradiction.
    fn check_shadowed_pins(&mut self, rules: &[ExecRule]) {
        for pinned in rules.iter().filter(|r| r.pin.is_some()) {
            let PathPattern::Exact { path } = &pinned.pattern else {
                continue;
            };
            if let Some(open) = rules
                .iter()
                .find(|r| r.pin.is_none() && r.pattern.matches(path))
            {
                let span = self.span_of(&pinned.origin);
                self.problem(span, &pinned.origin.key, format!("the pin on {path} has no effect: {} (line {}) allows any file there", open.origin.key, open.origin.line), Some("drop the unpinned rule, or narrow it so it no longer covers the pinned path"));
            }
        }
    }

    /// A pin names one file, but the file's contents are what run: a pinned program that a
    /// write grant covers could be rewritten in place (same device and inode) and the pin
    /// would then admit other code. So every pinned path that a write grant matches is
    /// protected, with the pin's own origin ([`FsGrants::protect`]); an `fs.unprotect` rule
    /// that would lift that is refused as a contradiction. A pinned file with other hard
    /// links inside a write grant can still be rewritten through them, which no rule on
    /// names can see: that is a warning.
    fn protect_pins(&mut self, all: &mut Parts) {
        for pinned in all.exec.iter().filter(|r| r.pin.is_some()) {
            let PathPattern::Exact { path } = &pinned.pattern else {
                continue;
            };
            let Some(write) = all.write.iter().find(|r| r.pattern.matches(path)) else {
                continue;
            };
            if all.deny.iter().any(|r| r.pattern.matches(path)) {
                continue;
            }
            if let Some(lift) = all.unprotect.iter().find(|r| r.pattern.matches(path)) {
                let span = self.span_of(&lift.origin);
                self.problem(
                    span,
                    &lift.origin.key,
                    format!(
                        "the pinned program {path} ({}, line {}) would be writable: {} (line \
                         {}) lifts the protection a pin gives its file, and a program rewritten \
                         in place keeps its pin",
                        pinned.origin.key, pinned.origin.line, lift.origin.key, lift.origin.line
                    ),
                    Some("narrow fs.unprotect so it no longer covers the pinned file, or drop the pin"),
                );
                continue;
            }
            let links = std::fs::metadata(path).map(|m| m.nlink()).unwrap_or(1);
            if links > 1 {
                self.warnings.push(PolicyWarning {
                    file: self.source.name.clone(),
                    line: pinned.origin.line,
                    column: pinned.origin.column,
                    key: pinned.origin.key.clone(),
                    message: format!(
                        "the pinned program {path}, which {} (line {}) lets a scope write, has \
                         {links} hard links: a write through another of its names would change \
                         it, and only this name is protected; copy the program to a file of its \
                         own, or keep it out of write grants",
                        write.origin.key, write.origin.line
                    ),
                });
            }
            if !all.protect.iter().any(|r| r.pattern.matches(path)) {
                all.protect.push(PathRule {
                    pattern: pinned.pattern.clone(),
                    origin: pinned.origin.clone(),
                });
            }
        }
    }

    fn span_of(&self, origin: &Origin) -> Range<usize> {
        let Some(line) = self.source.line_range(origin.line) else {
            return 0..0;
        };
        let text = &self.source.text[line.clone()];
        let col: usize = text
            .chars()
            .take(origin.column.saturating_sub(1) as usize)
            .map(char::len_utf8)
            .sum();
        let start = line.start + col;
        start..start + origin.text.len()
    }

    /// Merges repeats into the first rule written (rules keep their source order), warning
    /// about each merged one.
    fn dedup<T>(
        &mut self,
        list: &str,
        rules: Vec<T>,
        repeats_of: impl for<'r> Fn(&'r [T]) -> Vec<Option<usize>>,
        origin: impl Fn(&T) -> &Origin,
    ) -> Vec<T> {
        let repeats = repeats_of(&rules);
        for (i, kept) in repeats.iter().enumerate() {
            let (Some(kept), Some(dup)) = (kept.and_then(|k| rules.get(k)), rules.get(i)) else {
                continue;
            };
            let (kept, dup) = (origin(kept), origin(dup));
            self.warnings.push(PolicyWarning {
                file: self.source.name.clone(),
                line: dup.line,
                column: dup.column,
                key: dup.key.clone(),
                message: format!(
                    "repeats {} (line {}) in {list}; merged",
                    kept.key, kept.line
                ),
            });
        }
        rules
            .into_iter()
            .zip(repeats)
            .filter_map(|(rule, repeat)| repeat.is_none().then_some(rule))
            .collect()
    }
}

/// `/proc/thread-self…` as the kernel programs name the calling thread's entries:
/// `/proc/self/task/self…` (`/proc/self` is the calling process's own directory; see
/// `proc_self_name` in the kernel programs). Other paths are returned unchanged.
fn thread_self(path: String) -> String {
    match path.strip_prefix("/proc/thread-self") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            format!("/proc/self/task/self{rest}")
        }
        _ => path,
    }
}

/// `LIST[INDEX]`, the key path of one list element.
fn indexed_key(list: &str, index: usize) -> String {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(index);
    let mut key = String::with_capacity(list.len() + digits.len() + 2);
    key.push_str(list);
    key.push('[');
    key.push_str(digits);
    key.push(']');
    key
}

/// Resolves a pinned executable: the canonical path (symbolic links followed, as `execve`
/// does) and the file's identity.
fn pin(path: &Path) -> Result<(String, FileId), String> {
    let resolved =
        std::fs::canonicalize(path).map_err(|e| format!("cannot pin {}: {e}", path.display()))?;
    let meta = std::fs::metadata(&resolved)
        .map_err(|e| format!("cannot pin {}: {e}", resolved.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "cannot pin {}: not a regular file",
            resolved.display()
        ));
    }
    let text = resolved
        .to_str()
        .ok_or_else(|| {
            format!(
                "cannot pin {}: its resolved path is not UTF-8",
                path.display()
            )
        })?
        .to_owned();
    if text.contains('*') {
        return Err(format!(
            "cannot pin {text}: a path containing `*` would read as a wildcard"
        ));
    }
    Ok((
        text,
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        },
    ))
}
