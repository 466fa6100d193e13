//! The configuration file as written: unknown keys refused, spans kept for origins and
//! errors. [`apply`] resolves one file onto the [`Config`] built so far.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use bee_core::error::Source;
use serde::Deserialize;
use toml::Spanned;

use super::{Config, Env, FileDiagnostic, FileDiagnostics, FileError, Origin, Sourced, parse_toml};

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
    #[serde(default)]
    themes: BTreeMap<String, Spanned<toml::Table>>,
    security: Option<RawSecurity>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepl {
    theme: Option<Spanned<String>>,
    tui: Option<Spanned<bool>>,
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
    #[serde(default)]
    scanners: BTreeMap<String, Spanned<toml::Table>>,
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
    if let Some(s) = &raw.security {
        for (name, table) in &s.scanners {
            config.scanners.insert(name.clone(), r.sourced(table));
        }
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
