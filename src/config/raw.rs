//! The configuration file as written: unknown keys refused, spans kept for origins and
//! errors. [`apply`] resolves one file onto the [`Config`] built so far.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use bee_core::error::Source;
use serde::Deserialize;
use toml::Spanned;

use super::{
    Config, Env, FileDiagnostic, FileDiagnostics, FileError, Origin, ScannerConfig, Sourced,
    parse_toml,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    policy: Option<Spanned<String>>,
    provider: Option<Spanned<String>>,
    workspace: Option<Spanned<String>>,
    host: Option<Spanned<bool>>,
    audit: Option<Spanned<String>>,
    records_dir: Option<Spanned<String>>,
    limits: Option<RawLimits>,
    tools: Option<RawTools>,
    agents: Option<RawAgents>,
    repl: Option<RawRepl>,
    enforcement: Option<RawEnforcement>,
    #[serde(default)]
    themes: BTreeMap<String, Spanned<toml::Table>>,
    security: Option<RawSecurity>,
    mcp: Option<super::mcp::RawMcp>,
}

/// `[enforcement]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnforcement {
    engine: Option<Spanned<super::EngineChoice>>,
    service: Option<Spanned<super::ServiceChoice>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepl {
    theme: Option<Spanned<String>>,
    tui: Option<Spanned<bool>>,
    approve: Option<Spanned<bool>>,
}

/// `[tools]`: its own keys, and a `[tools.NAME]` table per tool (read by hand, so that an
/// unknown key keeps its span: serde's `flatten` would lose it).
#[derive(Debug, Default)]
struct RawTools {
    output_cap_bytes: Option<Spanned<u64>>,
    file_timeout_seconds: Option<Spanned<u64>>,
    shell_timeout_seconds: Option<Spanned<u64>>,
    shell_timeout_max_seconds: Option<Spanned<u64>>,
    disabled: Option<Spanned<Vec<String>>>,
    per_tool: BTreeMap<String, Spanned<RawTool>>,
}

/// `[tools.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename = "table")]
struct RawTool {
    policy: Option<Spanned<String>>,
}

impl<'de> Deserialize<'de> for RawTools {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawTools;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the [tools] table")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawTools, A::Error> {
                let mut t = RawTools::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "output_cap_bytes" => t.output_cap_bytes = Some(map.next_value()?),
                        "file_timeout_seconds" => t.file_timeout_seconds = Some(map.next_value()?),
                        "shell_timeout_seconds" => {
                            t.shell_timeout_seconds = Some(map.next_value()?);
                        }
                        "shell_timeout_max_seconds" => {
                            t.shell_timeout_max_seconds = Some(map.next_value()?);
                        }
                        "disabled" => t.disabled = Some(map.next_value()?),
                        _ => {
                            let table = map.next_value()?;
                            t.per_tool.insert(key, table);
                        }
                    }
                }
                Ok(t)
            }
        }
        d.deserialize_map(Visitor)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgents {
    max_depth: Option<Spanned<u32>>,
    inline_policy: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub(crate) turns: Option<Spanned<u32>>,
    pub(crate) tokens: Option<Spanned<u64>>,
    pub(crate) wall_seconds: Option<Spanned<u64>>,
    pub(crate) cost_usd: Option<Spanned<f64>>,
}

impl RawLimits {
    /// Reports each value no limit can take to `problem(span, key, message, help)`: zero
    /// turns, and a cost that is not an amount of USD ≥ 0. (The same `[limits]` table is
    /// read from configuration and scenario files.)
    pub(crate) fn check(&self, mut problem: impl FnMut(Range<usize>, &str, &str, &str)) {
        if let Some(n) = self.turns.as_ref().filter(|n| *n.get_ref() == 0) {
            problem(
                n.span(),
                "limits.turns",
                "a limit of 0 turns allows nothing",
                "remove the key for no limit",
            );
        }
        if let Some(c) = self
            .cost_usd
            .as_ref()
            .filter(|c| !c.get_ref().is_finite() || *c.get_ref() < 0.0)
        {
            problem(
                c.span(),
                "limits.cost_usd",
                "not an amount of USD ≥ 0",
                "e.g. cost_usd = 2.5",
            );
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecurity {
    ledger: Option<Spanned<String>>,
    #[serde(default)]
    scanners: BTreeMap<String, Spanned<RawScanner>>,
}

/// `[security.scanners.NAME]`: every key any scanner has; which apply is checked by name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScanner {
    path: Option<Spanned<String>>,
    rules: Option<Spanned<String>>,
    bundle_version: Option<Spanned<String>>,
    timeout_seconds: Option<Spanned<u64>>,
}

/// Why `rules` is not a local path: `auto`, a registry name (`p/…`, `r/…`, `s/…`) or a URL,
/// which the scanner would fetch over the network a scanning scope does not have.
pub(crate) fn remote_rules(rules: &str) -> Option<&'static str> {
    let r = rules.trim();
    if r == "auto" {
        Some("`auto` fetches rules from the registry")
    } else if r.contains("://") {
        Some("a URL is fetched over the network")
    } else if ["p/", "r/", "s/"].iter().any(|p| r.starts_with(p)) {
        Some("`p/…`, `r/…` and `s/…` name registry rules")
    } else {
        None
    }
}

/// `X.Y.Z` from `codeql-bundle-vX.Y.Z` or `X.Y.Z`.
pub(crate) fn bundle_version(v: &str) -> Option<String> {
    let v = v.trim();
    let bare = v.strip_prefix("codeql-bundle-v").unwrap_or(v);
    let parts: Vec<&str> = bare.split('.').collect();
    (parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
    .then(|| bare.to_owned())
}

struct Resolver<'a> {
    path: &'a Path,
    dir: PathBuf,
    source: Source,
    env: &'a Env,
    problems: Vec<FileDiagnostic>,
}

impl Resolver<'_> {
    fn origin(&self, span: &Range<usize>) -> Origin {
        Origin::File {
            path: self.path.to_owned(),
            line: self.source.line_column(span.start).0,
        }
    }

    fn sourced<T: Clone>(&self, v: &Spanned<T>) -> Sourced<T> {
        Sourced {
            value: v.get_ref().clone(),
            origin: self.origin(&v.span()),
        }
    }

    fn problem(&mut self, span: Range<usize>, key: &str, message: &str, help: &str) {
        self.problems.push(FileDiagnostic::at(
            &self.source,
            span,
            Some(key.to_owned()),
            message,
            (!help.is_empty()).then(|| help.to_owned()),
        ));
    }

    fn path(&mut self, v: &Option<Spanned<String>>, key: &str) -> Option<Sourced<PathBuf>> {
        let v = v.as_ref()?;
        if v.get_ref().trim().is_empty() {
            self.problem(v.span(), key, "the path is empty", "");
            return None;
        }
        Some(Sourced {
            value: self.env.absolute(&self.dir, Path::new(v.get_ref())),
            origin: self.origin(&v.span()),
        })
    }
}

impl super::mcp::FileContext for Resolver<'_> {
    fn origin_of(&self, span: &Range<usize>) -> Origin {
        self.origin(span)
    }

    fn path_of(&mut self, v: &Spanned<String>, key: &str) -> Option<PathBuf> {
        self.path(&Some(v.clone()), key).map(|p| p.value)
    }

    fn problem_at(&mut self, span: Range<usize>, key: &str, message: &str, help: &str) {
        self.problem(span, key, message, help);
    }
}

/// Checks `[security.scanners.NAME]` and overwrites the keys it sets.
fn scanner(r: &mut Resolver<'_>, config: &mut Config, name: &str, table: &Spanned<RawScanner>) {
    let at = |k: &str| format!("security.scanners.{name}.{k}");
    if !super::SCANNERS.contains(&name) {
        r.problem(
            table.span(),
            &format!("security.scanners.{name}"),
            &format!("unknown scanner `{name}`"),
            &format!("bee has adapters for {}", super::SCANNERS.join(" and ")),
        );
        return;
    }
    let t = table.get_ref();
    if let (Some(v), "codeql") = (&t.rules, name) {
        r.problem(
            v.span(),
            &at("rules"),
            "CodeQL runs its bundle's own query suites; `rules` is Opengrep's",
            "remove the key",
        );
    }
    if let (Some(v), "opengrep") = (&t.bundle_version, name) {
        r.problem(
            v.span(),
            &at("bundle_version"),
            "`bundle_version` is CodeQL's; Opengrep has none",
            "remove the key",
        );
    }
    let mut ok = ScannerConfig::default();
    if let Some(v) = &t.rules
        && let Some(why) = remote_rules(v.get_ref())
    {
        r.problem(
            v.span(),
            &at("rules"),
            &format!(
                "the rules must be a local file or directory: {why}, and a scanning scope has \
                 no egress"
            ),
            "e.g. rules = \"/etc/bee/opengrep-rules\" (write `./p/…` for a local directory \
             named p)",
        );
    } else {
        ok.rules = r.path(&t.rules, &at("rules"));
    }
    ok.path = r.path(&t.path, &at("path"));
    if let Some(v) = &t.bundle_version {
        match bundle_version(v.get_ref()) {
            Some(version) => {
                ok.bundle_version = Some(Sourced {
                    value: version,
                    origin: r.origin(&v.span()),
                });
            }
            None => r.problem(
                v.span(),
                &at("bundle_version"),
                &format!("`{}` is not a CodeQL bundle version", v.get_ref()),
                "e.g. bundle_version = \"2.26.1\" or \"codeql-bundle-v2.26.1\"",
            ),
        }
    }
    if let Some(v) = &t.timeout_seconds {
        if *v.get_ref() == 0 {
            r.problem(
                v.span(),
                &at("timeout_seconds"),
                "must be at least 1",
                "remove the key for the default",
            );
        } else {
            ok.timeout_seconds = Some(r.sourced(v));
        }
    }
    let slot = config.scanners.entry(name.to_owned()).or_default();
    for (dst, src) in [(&mut slot.path, ok.path), (&mut slot.rules, ok.rules)] {
        if src.is_some() {
            *dst = src;
        }
    }
    if ok.bundle_version.is_some() {
        slot.bundle_version = ok.bundle_version;
    }
    if ok.timeout_seconds.is_some() {
        slot.timeout_seconds = ok.timeout_seconds;
    }
}

/// Reads one configuration file's text and overwrites in `config` every key it sets.
pub(super) fn apply(
    config: &mut Config,
    path: &Path,
    text: &str,
    env: &Env,
) -> Result<(), FileError> {
    let source = Source::new(path.display().to_string(), text);
    let raw: RawConfig = parse_toml(&source).map_err(|d| FileError::one(*d))?;
    let dir = path
        .parent()
        .map_or_else(|| env.cwd.clone(), Path::to_owned);
    let mut r = Resolver {
        path,
        dir,
        source,
        env,
        problems: Vec::new(),
    };

    if let Some(p) = r.path(&raw.policy, "policy") {
        config.policy = Some(p);
    }
    if let Some(p) = r.path(&raw.provider, "provider") {
        config.provider = Some(p);
    }
    if let Some(p) = r.path(&raw.workspace, "workspace") {
        config.workspace = p;
    }
    if let Some(h) = &raw.host {
        config.host = r.sourced(h);
    }
    if let Some(p) = r.path(&raw.audit, "audit") {
        config.audit = Some(p);
    }
    if let Some(p) = r.path(&raw.records_dir, "records_dir") {
        config.records_dir = p;
    }
    if let Some(l) = &raw.limits {
        l.check(|span, key, message, help| r.problem(span, key, message, help));
        if let Some(n) = &l.turns {
            config.limits.turns = Some(r.sourced(n));
        }
        if let Some(n) = &l.tokens {
            config.limits.tokens = Some(r.sourced(n));
        }
        if let Some(n) = &l.wall_seconds {
            config.limits.wall_seconds = Some(r.sourced(n));
        }
        if let Some(n) = &l.cost_usd {
            config.limits.cost_usd = Some(r.sourced(n));
        }
    }
    if let Some(t) = &raw.tools {
        let positive = [
            (&t.output_cap_bytes, "tools.output_cap_bytes"),
            (&t.file_timeout_seconds, "tools.file_timeout_seconds"),
            (&t.shell_timeout_seconds, "tools.shell_timeout_seconds"),
            (
                &t.shell_timeout_max_seconds,
                "tools.shell_timeout_max_seconds",
            ),
        ];
        for (v, key) in positive {
            if let Some(n) = v.as_ref().filter(|n| *n.get_ref() == 0) {
                r.problem(
                    n.span(),
                    key,
                    "must be at least 1",
                    "remove the key for the default",
                );
            }
        }
        if let (Some(t1), Some(max)) = (&t.shell_timeout_seconds, &t.shell_timeout_max_seconds)
            && t1.get_ref() > max.get_ref()
        {
            r.problem(
                t1.span(),
                "tools.shell_timeout_seconds",
                "is longer than tools.shell_timeout_max_seconds",
                "the default timeout must be within the longest one",
            );
        }
        let c = &mut config.tools;
        for (slot, v) in [
            (&mut c.output_cap_bytes, &t.output_cap_bytes),
            (&mut c.file_timeout_seconds, &t.file_timeout_seconds),
            (&mut c.shell_timeout_seconds, &t.shell_timeout_seconds),
            (
                &mut c.shell_timeout_max_seconds,
                &t.shell_timeout_max_seconds,
            ),
        ] {
            if let Some(v) = v {
                *slot = Some(r.sourced(v));
            }
        }
        if let Some(d) = &t.disabled {
            config.tools.disabled = Some(r.sourced(d));
        }
        for (tool, table) in &t.per_tool {
            if let Some(p) = r.path(&table.get_ref().policy, &format!("tools.{tool}.policy")) {
                config.tools.policies.insert(tool.clone(), p);
            }
        }
    }
    if let Some(a) = &raw.agents {
        if let Some(n) = &a.max_depth {
            config.agents.max_depth = Some(r.sourced(n));
        }
        if let Some(b) = &a.inline_policy {
            config.agents.inline_policy = Some(r.sourced(b));
        }
    }
    for (name, table) in &raw.themes {
        match crate::render::user_theme(&r.source, table) {
            Ok(theme) => {
                config
                    .themes
                    .insert(name.clone(), r.sourced(table).map(|_| theme));
            }
            Err(d) => r.problems.extend(d.problems),
        }
    }
    if let Some(t) = raw.repl.as_ref().and_then(|r| r.theme.as_ref()) {
        config.repl_theme = Some(r.sourced(t));
    }
    if let Some(t) = raw.repl.as_ref().and_then(|r| r.tui.as_ref()) {
        config.repl_tui = Some(r.sourced(t));
    }
    if let Some(a) = raw.repl.as_ref().and_then(|r| r.approve.as_ref()) {
        config.repl_approve = Some(r.sourced(a));
    }
    if let Some(e) = raw.enforcement.as_ref().and_then(|e| e.engine.as_ref()) {
        config.engine = r.sourced(e);
    }
    if let Some(s) = raw.enforcement.as_ref().and_then(|e| e.service.as_ref()) {
        config.service = r.sourced(s);
    }
    if let Some(s) = &raw.security {
        if let Some(p) = r.path(&s.ledger, "security.ledger") {
            config.ledger = p;
        }
        for (name, table) in &s.scanners {
            scanner(&mut r, config, name, table);
        }
    }
    if let Some(m) = &raw.mcp {
        super::mcp::resolve(&mut r, &mut config.mcp_servers, m);
    }

    if r.problems.is_empty() {
        Ok(())
    } else {
        Err(FileError::Invalid(FileDiagnostics {
            file: path.display().to_string(),
            problems: r.problems,
        }))
    }
}
