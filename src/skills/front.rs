//! The front matter of a `SKILL.md`: finding the `---` lines around it, parsing the YAML
//! between them into a map, and pointing diagnostics at a top-level key's line.

use std::ops::Range;

use bee_core::error::Source;
use serde_norway::{Mapping, Value};

use crate::config::FileDiagnostic;

/// Where the front matter and the body lie in a `SKILL.md` (byte offsets into its text).
#[derive(Debug, Clone)]
pub(super) struct Front {
    /// The opening `---` line, without its newline.
    pub open: Range<usize>,
    /// The YAML between the two `---` lines.
    pub yaml: Range<usize>,
    /// The 1-based line of the YAML's first line.
    pub yaml_line: u32,
    /// Where the body starts: just after the closing `---` line.
    pub body: usize,
    /// The 1-based line the body starts on.
    pub body_line: u32,
}

const SHAPE: &str = "a SKILL.md begins with a line `---`, then YAML with `name: …` and \
                     `description: …`, then a closing `---` line, then the instructions";

/// Finds the front matter.
///
/// # Errors
/// When the text does not begin with a `---` line, or that front matter is never closed.
pub(super) fn split(source: &Source) -> Result<Front, Box<FileDiagnostic>> {
    let text = &*source.text;
    let start = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let mut lines = text[start..].split_inclusive('\n').scan(start, |at, line| {
        let begin = *at;
        *at += line.len();
        Some((begin, line))
    });
    let open = match lines.next() {
        Some((at, line)) if is_fence(line) => at..at + line.trim_end().len(),
        first => {
            let span = first.map_or(0..0, |(at, line)| at..at + line.trim_end().len());
            return Err(Box::new(FileDiagnostic::at(
                source,
                span,
                None,
                "the file does not begin with front matter",
                Some(SHAPE.to_owned()),
            )));
        }
    };
    let yaml_start = text[open.end..]
        .find('\n')
        .map_or(text.len(), |i| open.end + i + 1);
    for (number, (at, line)) in (2u32..).zip(lines) {
        if is_fence(line) {
            return Ok(Front {
                open,
                yaml: yaml_start..at,
                yaml_line: 2,
                body: at + line.len(),
                body_line: number + 1,
            });
        }
    }
    Err(Box::new(FileDiagnostic::at(
        source,
        open,
        None,
        "the front matter opened here is never closed",
        Some("end the front matter with a line holding only `---`".to_owned()),
    )))
}

fn is_fence(line: &str) -> bool {
    line.trim_end() == "---"
}

/// Parses the front matter's YAML into a map; empty front matter is an empty map.
///
/// # Errors
/// A YAML syntax error (at its line and column), or YAML that is not a map.
pub(super) fn parse(source: &Source, front: &Front) -> Result<Mapping, Box<FileDiagnostic>> {
    let yaml = &source.text[front.yaml.clone()];
    match serde_norway::from_str::<Value>(yaml) {
        Ok(Value::Mapping(map)) => Ok(map),
        Ok(Value::Null) => Ok(Mapping::new()),
        Ok(_) => Err(Box::new(FileDiagnostic::at(
            source,
            front.yaml.start..front.yaml.start,
            None,
            "the front matter is not a map of keys",
            Some(SHAPE.to_owned()),
        ))),
        Err(e) => {
            if let Some(d) = duplicate(source, front, &e.to_string()) {
                return Err(Box::new(d));
            }
            let at = e.location().map_or(front.yaml.start, |l| {
                offset_of(source, front, l.line(), l.column())
            });
            let message = e.to_string();
            let message = match message.find(" at line ") {
                Some(i) => &message[..i],
                None => &message,
            };
            Err(Box::new(FileDiagnostic::at(
                source,
                at..at,
                None,
                format!("the front matter is not valid YAML: {message}"),
                Some(
                    "quote a value that holds `: ` or starts with a YAML sign such as `[`, `{`, \
                     `*`, `&`, `!`, `|`, `>`, `%` or `@`"
                        .to_owned(),
                ),
            )))
        }
    }
}

/// A diagnostic at the second of two same keys, when `message` reports one.
fn duplicate(source: &Source, front: &Front, message: &str) -> Option<FileDiagnostic> {
    let key = message.strip_prefix("duplicate entry with key \"")?;
    let key = &key[..key.find('"')?];
    let (span, _) = key_spans(source, front, key).nth(1)?;
    Some(FileDiagnostic::at(
        source,
        span,
        Some(key.to_owned()),
        format!("`{key}` is given twice"),
        Some("keep one of them".to_owned()),
    ))
}

/// The byte offset of a 1-based line and column (in characters) of the YAML.
fn offset_of(source: &Source, front: &Front, line: usize, column: usize) -> usize {
    let line = u32::try_from(line.saturating_sub(1))
        .unwrap_or(u32::MAX)
        .saturating_add(front.yaml_line);
    let Some(range) = source.line_range(line) else {
        return front.yaml.end;
    };
    let text = &source.text[range.clone()];
    let col = text
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(text.len(), |(b, _)| b);
    range.start + col
}

/// The spans of a top-level key and of its value on the same line, when the key starts a
/// line of the front matter (block style, the usual form); else the opening `---` line.
pub(super) fn key_span(source: &Source, front: &Front, key: &str) -> (Range<usize>, Range<usize>) {
    key_spans(source, front, key)
        .next()
        .unwrap_or_else(|| (front.open.clone(), front.open.clone()))
}

/// The spans of each line that starts with `key:`, and of the value after it.
fn key_spans<'a>(
    source: &'a Source,
    front: &Front,
    key: &'a str,
) -> impl Iterator<Item = (Range<usize>, Range<usize>)> + 'a {
    let yaml = &source.text[front.yaml.clone()];
    let mut at = front.yaml.start;
    yaml.split_inclusive('\n').filter_map(move |line| {
        let begin = at;
        at += line.len();
        let rest = ["\"", "'", ""].iter().find_map(|q| {
            line.strip_prefix(q)?
                .strip_prefix(key)?
                .strip_prefix(q)?
                .trim_start_matches([' ', '\t'])
                .strip_prefix(':')
        });
        rest.map(|rest| {
            let key_end = begin + line.len() - rest.len() - 1;
            let value = rest.trim();
            let value_start = begin + line.len() - rest.trim_start().len();
            let value_start = if value.is_empty() {
                key_end
            } else {
                value_start
            };
            (begin..key_end, value_start..value_start + value.len())
        })
    })
}
