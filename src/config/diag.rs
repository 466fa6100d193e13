//! Errors in bee's own TOML and JSONL files (configuration, provider files, replay
//! recordings): each one names the file, line, column and key, with a hint.
//!
//! [`FileDiagnostic`] implements [`miette::Diagnostic`], so a terminal shows the offending line
//! with a caret under it; [`serde::Serialize`] gives the same facts as JSON. Line and column
//! come from the spans the `toml` parser keeps, through [`bee_core::error::Source`], so these
//! errors read exactly like policy errors.

use std::io;
use std::ops::Range;
use std::path::PathBuf;

use bee_core::error::Source;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// One problem at one place in a file: the same diagnostic policies use, so these errors
/// read exactly like policy errors.
pub use bee_core::error::PolicyDiagnostic as FileDiagnostic;

/// Every problem found in one file.
#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic, Serialize)]
#[error("{}", render(.problems))]
pub struct FileDiagnostics {
    /// The file as given.
    pub file: String,
    /// The problems, in source order.
    #[related]
    pub problems: Vec<FileDiagnostic>,
}

fn render(problems: &[FileDiagnostic]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why one of bee's files could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read.
    #[error("cannot read {what} {}: {source}", .path.display())]
    Read {
        /// What the file is (`configuration`, `provider file`, `replay recording`).
        what: &'static str,
        /// The path as given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The file was read but refused.
    #[error(transparent)]
    Invalid(#[from] FileDiagnostics),
}

impl FileError {
    /// The diagnostics, when the file was read but refused.
    pub fn diagnostics(&self) -> Option<&FileDiagnostics> {
        match self {
            Self::Invalid(d) => Some(d),
            Self::Read { .. } => None,
        }
    }

    /// One problem in one file.
    pub fn one(problem: FileDiagnostic) -> Self {
        Self::Invalid(FileDiagnostics {
            file: problem.file.clone(),
            problems: vec![problem],
        })
    }
}

/// Reads a UTF-8 text file; `what` names it in the error.
///
/// # Errors
/// [`FileError::Read`] when it cannot be read, [`FileError::Invalid`] when it is not UTF-8.
pub fn read_text(path: &std::path::Path, what: &'static str) -> Result<String, FileError> {
    let bytes = std::fs::read(path).map_err(|source| FileError::Read {
        what,
        path: path.to_owned(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let valid = String::from_utf8_lossy(&e.as_bytes()[..at]).into_owned();
        let source = Source::new(path.display().to_string(), &valid);
        FileError::one(FileDiagnostic::at(
            &source,
            at..at,
            None,
            format!("the file is not UTF-8 (invalid byte at offset {at})"),
            Some("the file must be UTF-8 text".to_owned()),
        ))
    })
}

/// Parses TOML text into `T`, turning a parse or shape error (an unknown key, a wrong type)
/// into a diagnostic naming the key and, for unknown keys, the keys that are known there.
///
/// # Errors
/// The diagnostic.
pub fn parse_toml<T: DeserializeOwned>(source: &Source) -> Result<T, Box<FileDiagnostic>> {
    toml::from_str(&source.text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let message = e.message().trim().to_owned();
        let (key, help) = toml_hint(&source.text, &span, &message);
        Box::new(FileDiagnostic::at(source, span, key, message, help))
    })
}

/// A key name and a hint for a TOML/serde message, where one is known.
fn toml_hint(text: &str, span: &Range<usize>, message: &str) -> (Option<String>, Option<String>) {
    let at = text.get(span.clone()).map(str::trim).unwrap_or_default();
    if message.contains("unknown field") || message.contains("unknown variant") {
        let help = match message.split_once("expected") {
            Some((_, rest)) => format!(
                "known {} here: {}",
                if message.contains("variant") {
                    "values"
                } else {
                    "keys"
                },
                rest.trim().trim_start_matches("one of").trim()
            ),
            None => "this table takes no keys".to_owned(),
        };
        let key = at
            .split(['=', ' ', '\n'])
            .next()
            .unwrap_or(at)
            .trim_matches('"');
        let key = match enclosing_table(text, span.start) {
            Some(table) if message.contains("unknown field") => format!("{table}.{key}"),
            _ => key.to_owned(),
        };
        return (Some(key), Some(help));
    }
    if message.contains("invalid type") {
        let key = enclosing_key(text, span.start);
        return (key, Some("see docs for each key's type".to_owned()));
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
pub(crate) fn enclosing_table(text: &str, offset: usize) -> Option<String> {
    let before = text.get(..offset)?;
    before.lines().rev().find_map(|line| {
        let line = line.trim();
        let name = line.strip_prefix("[[").and_then(|l| l.split("]]").next());
        let name = name.or_else(|| line.strip_prefix('[').and_then(|l| l.split(']').next()));
        name.map(|n| n.trim().to_owned())
    })
}
