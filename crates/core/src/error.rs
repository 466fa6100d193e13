//! Errors in bee's TOML files (policies here; the harness uses the same type for its
//! configuration, provider and scenario files): each one names the file, line, column and
//! key, with a hint.
//!
//! [`PolicyDiagnostic`] implements [`miette::Diagnostic`], so a terminal shows the offending
//! line with a caret under the value; [`serde::Serialize`] gives the same facts as JSON.

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use miette::{NamedSource, SourceSpan};
use serde::Serialize;

/// One problem at one place in a file.
#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic, Serialize)]
#[error("{file}:{line}:{column}: {}{message}", key_prefix(.key))]
pub struct PolicyDiagnostic {
    /// The policy file as given.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
    /// The key path, e.g. `fs.read[2]`, when the problem belongs to one key.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    #[help]
    pub help: Option<String>,
    #[source_code]
    #[serde(skip)]
    src: NamedSource<Arc<str>>,
    #[label("here")]
    #[serde(skip)]
    span: SourceSpan,
}

impl PolicyDiagnostic {
    /// A diagnostic for the byte range `span` of `source`; the same as
    /// [`Source::diagnostic`].
    pub fn at(
        source: &Source,
        span: std::ops::Range<usize>,
        key: Option<String>,
        message: impl Into<String>,
        help: Option<String>,
    ) -> Self {
        source.diagnostic(span, key, message, help)
    }
}

fn key_prefix(key: &Option<String>) -> String {
    key.as_ref().map(|k| format!("{k}: ")).unwrap_or_default()
}

/// A policy's source text, kept for diagnostics, with an index of line starts.
#[derive(Debug, Clone)]
pub struct Source {
    /// The file name as given on the command line.
    pub name: String,
    /// The whole text.
    pub text: Arc<str>,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
}

impl Source {
    /// Wraps a text for diagnostics.
    pub fn new(name: impl Into<String>, text: &str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self {
            name: name.into(),
            text: Arc::from(text),
            line_starts,
        }
    }

    /// The byte range of the 1-based `line`, without its newline.
    pub fn line_range(&self, line: u32) -> Option<std::ops::Range<usize>> {
        let i = usize::try_from(line).ok()?.checked_sub(1)?;
        let start = *self.line_starts.get(i)?;
        let end = self
            .line_starts
            .get(i + 1)
            .map_or(self.text.len(), |n| n - 1);
        Some(start..end)
    }

    /// Makes a diagnostic for the byte range `span` (clamped to the text).
    pub fn diagnostic(
        &self,
        span: std::ops::Range<usize>,
        key: Option<String>,
        message: impl Into<String>,
        help: Option<String>,
    ) -> PolicyDiagnostic {
        let start = floor_char_boundary(&self.text, span.start.min(self.text.len()));
        let end = floor_char_boundary(&self.text, span.end.clamp(start, self.text.len()));
        let (line, column) = self.line_column(start);
        PolicyDiagnostic {
            file: self.name.clone(),
            line,
            column,
            key,
            message: message.into(),
            help,
            src: NamedSource::new(self.name.clone(), Arc::clone(&self.text)),
            span: (start, end - start).into(),
        }
    }

    /// 1-based line and column of a byte offset.
    pub fn line_column(&self, offset: usize) -> (u32, u32) {
        let offset = floor_char_boundary(&self.text, offset);
        let line = self.line_starts.partition_point(|&s| s <= offset);
        self.column_in(offset, line)
    }

    /// [`Source::line_column`] for a caller going through the text in order: the line is
    /// looked for first at `*hint` (a line number this returned before) and the few lines
    /// after it, and `*hint` is set to the line found.
    pub(crate) fn line_column_from(&self, offset: usize, hint: &mut usize) -> (u32, u32) {
        let offset = floor_char_boundary(&self.text, offset);
        // `line` is the number of line starts at or before `offset`.
        let is_line = |line: usize| {
            line.checked_sub(1)
                .and_then(|i| self.line_starts.get(i))
                .is_some_and(|&s| s <= offset)
                && self.line_starts.get(line).is_none_or(|&s| s > offset)
        };
        let line = (*hint..hint.saturating_add(8))
            .find(|&l| is_line(l))
            .unwrap_or_else(|| self.line_starts.partition_point(|&s| s <= offset));
        *hint = line;
        self.column_in(offset, line)
    }

    /// 1-based line and column of `offset` (a char boundary) on `line`.
    fn column_in(&self, offset: usize, line: usize) -> (u32, u32) {
        let line_start = self
            .line_starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        let column = self.text[line_start..offset].chars().count() + 1;
        (
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(column).unwrap_or(u32::MAX),
        )
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Every problem found in one policy file.
#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic, Serialize)]
#[error("{file}: {} problem{} in the policy", .problems.len(), if .problems.len() == 1 { "" } else { "s" })]
pub struct PolicyDiagnostics {
    /// The policy file as given.
    pub file: String,
    /// The problems, in source order.
    #[related]
    pub problems: Vec<PolicyDiagnostic>,
    /// The kind of the first error met reading an included file (`NotFound`,
    /// `PermissionDenied`…), `None` when every include was read: a policy is then refused for
    /// an input it could not read, as when its own file cannot be, not for what it says
    /// (the exit status of `src/app/exit.rs`).
    #[serde(skip)]
    pub unread: Option<io::ErrorKind>,
}

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read policy {}: {source}", .path.display())]
    Read {
        /// The path as given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The file was read but is not a valid policy.
    #[error(transparent)]
    Invalid(#[from] PolicyDiagnostics),
}

impl PolicyError {
    /// The diagnostics, when the policy was read but refused.
    pub fn diagnostics(&self) -> Option<&PolicyDiagnostics> {
        match self {
            Self::Invalid(d) => Some(d),
            Self::Read { .. } => None,
        }
    }
}

/// A compile-time note that changes nothing but may surprise the author (a duplicate rule that
/// was merged, a rule that names a symbolic link).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyWarning {
    /// The policy file as given.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// The key path.
    pub key: String,
    /// What was noticed.
    pub message: String,
}

impl fmt::Display for PolicyWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {}",
            self.file, self.line, self.column, self.key, self.message
        )
    }
}

/// A key name and a hint for a TOML/serde parse message (`message`, at `span` of `text`):
/// for an unknown key the key's dotted path and the keys known there, for an unknown value the
/// values known, for a wrong type the key and `type_help`, for a missing key its name.
/// `type_help` is the hint for a value of the wrong type (where the file's keys are
/// documented).
pub fn toml_hint(
    text: &str,
    span: &Range<usize>,
    message: &str,
    type_help: &str,
) -> (Option<String>, Option<String>) {
    let at = text.get(span.clone()).map(str::trim).unwrap_or_default();
    if message.contains("unknown field") || message.contains("unknown variant") {
        let key = at
            .split(['=', ' ', '\n'])
            .next()
            .unwrap_or(at)
            .trim_matches('"');
        let help = match message.split_once("expected") {
            Some((_, rest)) => {
                let known = rest.trim().trim_start_matches("one of").trim();
                // serde lists them as "`a`, `b`" or, for two, "`a` or `b`".
                let names: Vec<&str> = known
                    .split(',')
                    .flat_map(|n| n.split(" or "))
                    .map(|n| n.trim().trim_matches('`'))
                    .filter(|n| !n.is_empty())
                    .collect();
                let what = if message.contains("variant") {
                    "values"
                } else {
                    "keys"
                };
                let unknown = message.split('`').nth(1).unwrap_or(key);
                match did_you_mean(unknown, names.iter().copied()) {
                    Some(near) => format!("did you mean `{near}`? known {what} here: {known}"),
                    None => format!("known {what} here: {known}"),
                }
            }
            None => "this table takes no keys".to_owned(),
        };
        let key = match enclosing_table(text, span.start) {
            Some(table) if message.contains("unknown field") => format!("{table}.{key}"),
            _ => key.to_owned(),
        };
        return (Some(key), Some(help));
    }
    if message.contains("invalid type") {
        let key = enclosing_key(text, span.start);
        return (key, Some(type_help.to_owned()));
    }
    if message.contains("missing field") {
        return (
            message
                .split('`')
                .nth(1)
                .map(str::to_owned)
                .or_else(|| enclosing_table(text, span.start)),
            None,
        );
    }
    (None, None)
}

/// The name among `known` that `unknown` is most likely a misspelling of: the nearest by
/// optimal string alignment distance (a swap of two neighbours counts as one edit), within
/// one edit for names of up to four characters and two for longer ones. `None` when no name
/// is that near, or `unknown` is one of them.
pub fn did_you_mean<'a>(
    unknown: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = if unknown.chars().count() <= 4 { 1 } else { 2 };
    known
        .into_iter()
        .map(|k| (strsim::osa_distance(unknown, k), k))
        .filter(|(d, _)| (1..=limit).contains(d))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The `key` of the `key = value` line holding byte `offset`, within its table.
fn enclosing_key(text: &str, offset: usize) -> Option<String> {
    let line_start = text.get(..offset)?.rfind('\n').map_or(0, |i| i + 1);
    let line = text.get(line_start..)?.lines().next()?;
    let (key, _) = line.split_once('=')?;
    let key = key.trim().trim_matches('"');
    Some(match enclosing_table(text, line_start) {
        Some(table) => format!("{table}.{key}"),
        None => key.to_owned(),
    })
}

/// The `[table]` or `[[table]]` header in force at byte `offset`, if any.
pub fn enclosing_table(text: &str, offset: usize) -> Option<String> {
    let before = text.get(..offset)?;
    before.lines().rev().find_map(|line| {
        let line = line.trim();
        let name = line.strip_prefix("[[").and_then(|l| l.split("]]").next());
        let name = name.or_else(|| line.strip_prefix('[').and_then(|l| l.split(']').next()));
        name.map(|n| n.trim().to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::{did_you_mean, toml_hint};

    #[test]
    fn the_nearest_name_within_reach_is_suggested() {
        let keys = ["read", "write", "deny", "protect", "unprotect"];
        assert_eq!(did_you_mean("dney", keys), Some("deny"));
        assert_eq!(did_you_mean("wirte", keys), Some("write"));
        assert_eq!(did_you_mean("protekt", keys), Some("protect"));
        // Too far, or not misspelt at all.
        assert_eq!(did_you_mean("exec", keys), None);
        assert_eq!(did_you_mean("deny", keys), None);
        // Short names get one edit only.
        assert_eq!(did_you_mean("dy", ["deny"]), None);
    }

    #[test]
    fn unknown_values_listed_with_or_get_a_suggestion_too() {
        let text = "proto = \"tpc\"\n";
        let (_, help) = toml_hint(
            text,
            &(8..13),
            "unknown variant `tpc`, expected `tcp` or `udp`",
            "",
        );
        let help = help.unwrap_or_default();
        assert!(help.starts_with("did you mean `tcp`?"), "{help}");
        assert!(help.contains("known values here: `tcp` or `udp`"), "{help}");
    }
}
