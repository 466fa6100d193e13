//! Errors in bee's own TOML and JSONL files (configuration, provider files, replay
//! recordings): each one names the file, line, column and key, with a hint.
//!
//! [`FileDiagnostic`] implements [`miette::Diagnostic`], so a terminal shows the offending line
//! with a caret under it; [`serde::Serialize`] gives the same facts as JSON. Line and column
//! come from the spans the `toml` parser keeps, through [`bee_core::error::Source`], so these
//! errors read exactly like policy errors.

use std::io;
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
    let bytes = bee_core::source_file::read_source(path).map_err(|source| FileError::Read {
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
        let (key, help) = bee_core::error::toml_hint(
            &source.text,
            &span,
            &message,
            "see docs for each key's type",
        );
        Box::new(FileDiagnostic::at(source, span, key, message, help))
    })
}
