//! Episode transcripts: JSON Lines, one [`Event`] a line, written as they happen.
//!
//! The writer hands each line to the kernel in one `write` before it returns, so a provider
//! failure, a crash or an interrupt loses nothing already recorded; [`TranscriptWriter::finish`]
//! also syncs the file to disk. The reader accepts a transcript whose last line was cut short
//! by a crash and reports it in [`Transcript::truncated_tail`].

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::event::{Event, EventBody};
use super::time::Timestamp;

/// Why a transcript could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The transcript (or directory) involved.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// An event could not be encoded as JSON.
    #[error("{path}: cannot encode event {seq}: {source}")]
    Encode {
        /// The transcript.
        path: PathBuf,
        /// The sequence number the event would have had.
        seq: u64,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// A complete line is not an event: the transcript is damaged.
    #[error("{path}:{line}: not a transcript event: {reason}")]
    Malformed {
        /// The transcript.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> TranscriptError + '_ {
    move |source| TranscriptError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Appends the events of one episode to its transcript file.
#[derive(Debug)]
pub struct TranscriptWriter {
    file: File,
    path: PathBuf,
    next_seq: u64,
}

impl TranscriptWriter {
    /// Creates the transcript at `path` (and its parent directories). An existing file is an
    /// error: a transcript is never overwritten.
    ///
    /// # Errors
    /// When the directory or file cannot be created.
    pub fn create(path: impl Into<PathBuf>) -> Result<Self, TranscriptError> {
        let path = path.into();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        }
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(io_error(&path))?;
        Ok(Self {
            file,
            path,
            next_seq: 1,
        })
    }

    /// The transcript's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sequence number the next event will get.
    #[must_use]
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Records `body` now; returns the event as written.
    ///
    /// # Errors
    /// When the event cannot be encoded or written.
    pub fn append(&mut self, body: EventBody) -> Result<Event, TranscriptError> {
        self.append_at(Timestamp::now(), body)
    }

    /// Records `body` with the timestamp `at`; returns the event as written. The line is in
    /// the file (handed to the kernel in a single write) when this returns.
    ///
    /// # Errors
    /// When the event cannot be encoded or written.
    pub fn append_at(&mut self, at: Timestamp, body: EventBody) -> Result<Event, TranscriptError> {
        let event = Event {
            seq: self.next_seq,
            at,
            body,
        };
        let mut line = serde_json::to_vec(&event).map_err(|source| TranscriptError::Encode {
            path: self.path.clone(),
            seq: event.seq,
            source,
        })?;
        line.push(b'\n');
        self.file.write_all(&line).map_err(io_error(&self.path))?;
        self.file.flush().map_err(io_error(&self.path))?;
        self.next_seq += 1;
        Ok(event)
    }

    /// Syncs the transcript's data to disk and closes it; call it when the episode ends.
    ///
    /// # Errors
    /// When the sync fails.
    pub fn finish(self) -> Result<(), TranscriptError> {
        self.file.sync_data().map_err(io_error(&self.path))
    }
}

/// A transcript as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The events of every complete line, in order.
    pub events: Vec<Event>,
    /// Set when the last line was cut short (a crash in the middle of a write) and left out.
    pub truncated_tail: Option<TruncatedTail>,
}

/// A last line that was cut short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruncatedTail {
    /// Its line number, from 1.
    pub line: usize,
    /// How many bytes of it are in the file.
    pub bytes: usize,
}

impl Transcript {
    /// Whether the transcript ends with an `episode_finished` event.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        matches!(
            self.events.last().map(|e| &e.body),
            Some(EventBody::EpisodeFinished(_))
        )
    }
}

/// Reads the transcript at `path`.
///
/// Every line that ends in a newline must be an event, with sequence numbers 1, 2, 3, …
/// A last line without a newline that does not parse is taken for a write cut short by a
/// crash: it is left out and reported in [`Transcript::truncated_tail`].
///
/// # Errors
/// When the file cannot be read, or a complete line is not the next event.
pub fn read_transcript(path: &Path) -> Result<Transcript, TranscriptError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(io_error(path))?;
    parse_transcript(path, &bytes)
}

fn parse_transcript(path: &Path, bytes: &[u8]) -> Result<Transcript, TranscriptError> {
    let malformed = |line: usize, reason: String| TranscriptError::Malformed {
        path: path.to_owned(),
        line,
        reason,
    };
    let mut events: Vec<Event> = Vec::new();
    let mut truncated_tail = None;
    let mut rest = bytes;
    let mut line_no = 0;
    while !rest.is_empty() {
        line_no += 1;
        let (line, complete) = match rest.iter().position(|&b| b == b'\n') {
            Some(end) => {
                let line = &rest[..end];
                rest = &rest[end + 1..];
                (line, true)
            }
            None => {
                let line = rest;
                rest = &[];
                (line, false)
            }
        };
        let event: Event = match serde_json::from_slice(line) {
            Ok(e) => e,
            Err(_) if !complete => {
                truncated_tail = Some(TruncatedTail {
                    line: line_no,
                    bytes: line.len(),
                });
                break;
            }
            Err(e) => return Err(malformed(line_no, e.to_string())),
        };
        let expected = events.last().map_or(1, |e| e.seq + 1);
        if event.seq != expected {
            return Err(malformed(
                line_no,
                format!("sequence number {} where {expected} was due", event.seq),
            ));
        }
        if (event.seq == 1) != matches!(event.body, EventBody::EpisodeStarted(_)) {
            return Err(malformed(
                line_no,
                "a transcript starts with episode_started, and only there".to_owned(),
            ));
        }
        events.push(event);
    }
    Ok(Transcript {
        events,
        truncated_tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_an_empty_transcript() {
        let t = parse_transcript(Path::new("t"), b"").unwrap();
        assert!(t.events.is_empty());
        assert!(t.truncated_tail.is_none());
        assert!(!t.is_finished());
    }

    #[test]
    fn a_bad_complete_line_is_an_error() {
        let err = parse_transcript(Path::new("t.jsonl"), b"{\"seq\":1}\n").unwrap_err();
        assert!(err.to_string().starts_with("t.jsonl:1: "), "{err}");
    }
}
