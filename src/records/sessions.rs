//! The sessions of a run directory, grouped by the top-level episode they belong to: a
//! subagent's transcript goes with the episode that started it, for `bee run --resume` and
//! `bee records merge`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::event::{EventBody, Outcome};
use super::summary::transcripts_in;
use super::transcript::{Transcript, TranscriptError, read_transcript};

/// One session (a top-level episode or a subagent) of a run directory.
#[derive(Debug)]
pub(crate) struct Session {
    /// Its id (the transcript's file stem).
    pub id: String,
    /// Its transcript.
    pub path: PathBuf,
    /// The transcript, read.
    pub transcript: Transcript,
}

impl Session {
    /// Whether it ended, other than by an interruption.
    pub fn completed(&self) -> bool {
        matches!(
            self.transcript.events.last().map(|e| &e.body),
            Some(EventBody::EpisodeFinished(f)) if f.outcome != Outcome::Interrupted
        )
    }

    /// The content hash its `episode_started` recorded.
    pub fn content_hash(&self) -> Option<&str> {
        match self.transcript.events.first().map(|e| &e.body) {
            Some(EventBody::EpisodeStarted(s)) => s.content_hash.as_deref(),
            _ => None,
        }
    }

    fn parent(&self) -> Option<&str> {
        match self.transcript.events.first().map(|e| &e.body) {
            Some(EventBody::EpisodeStarted(s)) => s.parent.as_ref().map(|p| p.episode_id.as_str()),
            _ => None,
        }
    }
}

/// The sessions of a run directory grouped by the top-level episode they belong to (a
/// subagent belongs to its caller's episode): top-level id → the episode's session first,
/// then its subagents'. Set-aside partial transcripts are not sessions.
///
/// # Errors
/// When the directory or a transcript cannot be read.
pub(crate) fn sessions_by_episode(
    dir: &Path,
) -> Result<BTreeMap<String, Vec<Session>>, TranscriptError> {
    let mut sessions = BTreeMap::new();
    for (id, path) in transcripts_in(dir)? {
        let transcript = read_transcript(&path)?;
        sessions.insert(
            id.clone(),
            Session {
                id,
                path,
                transcript,
            },
        );
    }
    let root = |id: &str| {
        let mut at = id.to_owned();
        let mut seen = BTreeSet::new();
        while let Some(p) = sessions.get(&at).and_then(Session::parent) {
            if !seen.insert(at.clone()) {
                break;
            }
            at = p.to_owned();
        }
        at
    };
    let roots: Vec<(String, String)> = sessions.keys().map(|id| (id.clone(), root(id))).collect();
    let mut out: BTreeMap<String, Vec<Session>> = BTreeMap::new();
    for (id, root) in roots {
        if let Some(s) = sessions.remove(&id) {
            let group = out.entry(root.clone()).or_default();
            if id == root {
                group.insert(0, s);
            } else {
                group.push(s);
            }
        }
    }
    Ok(out)
}
