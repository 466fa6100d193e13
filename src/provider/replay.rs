//! The `replay` provider: recorded model turns played back in order, one per request —
//! deterministic episodes for tests and demos, with no network.
//!
//! A recording is JSON Lines (one turn per line; blank lines are skipped) or, when the file
//! name ends in `.toml`, a TOML file with one `[[turn]]` table per turn. A turn has `text`,
//! `tool_calls` (each `name`, `arguments` as a JSON object or TOML table, optional `id`), or
//! both, or `refusal` (refusal text); optionally `usage` (the [`Usage`] fields, in tokens)
//! `pace_ms` (milliseconds between streamed words, at most 1,000: a demo of streaming),
//! and `stop` (a [`StopReason`] spelling: `end_turn`, `tool_use`, `max_tokens`, `refusal`,
//! `content_filter`, `pause`, …; by default `refusal` with refusal text, else `tool_use` when
//! there are calls, else `end_turn`). A turn without `usage` reports none, so its tokens are
//! unknown.
//!
//! ```text
//! {"text": "Let me look.", "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]}
//! {"text": "Done.", "usage": {"input_tokens": 1200, "output_tokens": 40}}
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use bee_core::error::Source;
use serde::{Deserialize, Serialize};

use super::{Assembler, Event, Provider, ProviderError, Request, Response, StopReason, Usage};
use crate::config::{FileDiagnostic, FileDiagnostics, FileError, parse_toml, read_text};

/// One recorded model turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Assistant text.
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls, after the text.
    #[serde(default)]
    pub tool_calls: Vec<RecordedCall>,
    /// Refusal text: the model declines.
    #[serde(default)]
    pub refusal: Option<String>,
    /// Token counts to report.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Why the model stopped.
    #[serde(default)]
    pub stop: Option<StopReason>,
    /// Milliseconds between words of `text` as it streams (demos of a streaming screen);
    /// by default the text comes in one piece.
    #[serde(default)]
    pub pace_ms: Option<u64>,
}

/// One recorded tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedCall {
    /// The call id; `call_<turn>_<n>` when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The tool.
    pub name: String,
    /// The arguments.
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// A loaded recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Where it was read from.
    pub path: PathBuf,
    /// The turns, in order.
    pub turns: Vec<Turn>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlRecording {
    #[serde(default)]
    turn: Vec<toml::Spanned<Turn>>,
}

impl Recording {
    /// Reads a recording.
    ///
    /// # Errors
    /// [`FileError`] naming the file and line of each malformed or empty turn.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let text = read_text(path, "replay recording")?;
        let toml = path.extension().is_some_and(|e| e == "toml");
        Self::parse(path, &text, toml)
    }

    /// Parses recording text (`toml` selects the TOML form, else JSON Lines).
    ///
    /// # Errors
    /// [`FileError::Invalid`] with every problem found.
    pub fn parse(path: &Path, text: &str, toml: bool) -> Result<Self, FileError> {
        let name = path.display().to_string();
        let source = Source::new(name.clone(), text);
        let mut problems = Vec::new();
        let mut turns = Vec::new();
        if toml {
            let raw: TomlRecording = parse_toml(&source).map_err(|d| FileError::one(*d))?;
            for t in raw.turn {
                let span = t.span();
                let turn = t.into_inner();
                if let Some(p) = empty_turn(&source, span, &turn) {
                    problems.push(p);
                }
                turns.push(turn);
            }
        } else {
            let mut offset = 0;
            for line in text.split_inclusive('\n') {
                let start = offset;
                offset += line.len();
                if line.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Turn>(line) {
                    Ok(turn) => {
                        if let Some(p) = empty_turn(&source, start..offset, &turn) {
                            problems.push(p);
                        }
                        turns.push(turn);
                    }
                    Err(e) => {
                        let col = line
                            .char_indices()
                            .nth(e.column().saturating_sub(1))
                            .map_or(line.len(), |(b, _)| b);
                        problems.push(FileDiagnostic::at(
                            &source,
                            start + col..start + col,
                            Some(format!("turn {}", turns.len() + problems.len() + 1)),
                            format!("malformed turn: {e}"),
                            Some(
                                "each line is one JSON object: {\"text\": …, \"tool_calls\": [{\"name\": …, \"arguments\": {…}}], \"usage\": {…}}"
                                    .to_owned(),
                            ),
                        ));
                    }
                }
            }
        }
        if turns.is_empty() && problems.is_empty() {
            problems.push(FileDiagnostic::at(
                &source,
                0..0,
                None,
                "the recording holds no turns",
                None,
            ));
        }
        if !problems.is_empty() {
            return Err(FileError::Invalid(FileDiagnostics {
                file: name,
                problems,
            }));
        }
        Ok(Self {
            path: path.to_owned(),
            turns,
        })
    }
}

fn empty_turn(
    source: &Source,
    span: std::ops::Range<usize>,
    turn: &Turn,
) -> Option<FileDiagnostic> {
    (turn.text.is_none() && turn.tool_calls.is_empty() && turn.refusal.is_none()).then(|| {
        FileDiagnostic::at(
            source,
            span,
            None,
            "a turn needs `text`, `tool_calls` or both, or `refusal`",
            None,
        )
    })
}

/// Plays a [`Recording`]: request *n* gets turn *n*.
#[derive(Debug)]
pub struct Replay {
    recording: Arc<Recording>,
    next: AtomicUsize,
    model: String,
}

impl Replay {
    /// A player at the first turn.
    pub fn new(recording: Arc<Recording>, model: &str) -> Self {
        Self {
            recording,
            next: AtomicUsize::new(0),
            model: model.to_owned(),
        }
    }

    /// How many turns have been played.
    pub fn played(&self) -> usize {
        self.next
            .load(Ordering::SeqCst)
            .min(self.recording.turns.len())
    }
}

impl Provider for Replay {
    fn model(&self) -> &str {
        &self.model
    }

    fn stream(
        &self,
        _req: &Request,
        sink: &mut dyn FnMut(Event),
    ) -> Result<Response, ProviderError> {
        let started = Instant::now();
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let Some(turn) = self.recording.turns.get(n) else {
            return Err(ProviderError::ReplayExhausted {
                file: self.recording.path.clone(),
                turns: self.recording.turns.len(),
            });
        };
        let mut asm = Assembler::new(sink, started, &self.model);
        match (&turn.text, turn.pace_ms) {
            (Some(text), Some(ms)) if ms > 0 => {
                for word in text.split_inclusive(' ') {
                    asm.text(word);
                    std::thread::sleep(std::time::Duration::from_millis(ms.min(1_000)));
                }
            }
            (Some(text), _) => asm.text(text),
            (None, _) => {}
        }
        if let Some(text) = &turn.refusal {
            asm.refusal(text);
        }
        for (i, call) in turn.tool_calls.iter().enumerate() {
            let key = i.to_string();
            let id = call.id.clone().unwrap_or_else(|| format!("call_{n}_{i}"));
            asm.tool_started(&key, &id, &call.name);
            let args = match &call.arguments {
                serde_json::Value::Null => "{}".to_owned(),
                v => v.to_string(),
            };
            asm.tool_arguments(&key, &args);
            asm.tool_finished(&key, None);
        }
        if let Some(u) = turn.usage {
            asm.usage(u);
        }
        asm.complete(turn.stop.clone().unwrap_or(StopReason::EndTurn));
        Ok(asm.response())
    }
}
