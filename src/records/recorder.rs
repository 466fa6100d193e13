//! Recording one episode: its transcript, its running totals and the shared metrics store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::event::{
    EpisodeFinished, EpisodeStarted, Event, EventBody, Outcome, SuccessCheck, Totals,
};
use super::store::{Store, StoreError};
use super::transcript::{TranscriptError, TranscriptWriter};

/// Why an episode's record could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A run or episode id cannot name a file.
    #[error("`{id}` cannot be a run or episode id: {reason}")]
    BadId {
        /// The id.
        id: String,
        /// Why not.
        reason: &'static str,
    },
    /// `episode_started` or `episode_finished` given to [`EpisodeRecorder::record`]: they are
    /// recorded by [`EpisodeRecorder::start`] and [`EpisodeRecorder::finish`] only.
    #[error("{event} is recorded by the recorder's start and finish, not by record")]
    OutOfPlace {
        /// The event's kind.
        event: &'static str,
    },
    /// The transcript could not be written; the event is not recorded.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// The event is in the transcript, but the metrics store refused it
    /// (`bee metrics --rebuild` recovers the store from the transcripts).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Checks that `id` can name a run directory or a transcript file: not empty, at most 200
/// bytes, no `/`, NUL or control characters, not `.` or `..`, not starting with `.`.
///
/// # Errors
/// When it cannot.
pub fn check_id(id: &str) -> Result<(), RecordError> {
    let reason = if id.is_empty() {
        "it is empty"
    } else if id.len() > 200 {
        "it is longer than 200 bytes"
    } else if id.starts_with('.') {
        "it starts with `.`"
    } else if id.contains('/') {
        "it contains `/`"
    } else if id.chars().any(char::is_control) {
        "it contains a control character"
    } else {
        return Ok(());
    };
    Err(RecordError::BadId {
        id: id.to_owned(),
        reason,
    })
}

/// The transcript path of an episode: `<records_dir>/<run id>/<episode id>.jsonl`.
#[must_use]
pub fn transcript_path(records_dir: &Path, run_id: &str, episode_id: &str) -> PathBuf {
    records_dir.join(run_id).join(format!("{episode_id}.jsonl"))
}

/// Records one episode: every event goes to its transcript first (on disk when the call
/// returns), then into the metrics store, if there is one; the totals of
/// [`EpisodeFinished`] are counted along the way.
#[derive(Debug)]
pub struct EpisodeRecorder {
    writer: TranscriptWriter,
    store: Option<Arc<Store>>,
    run_id: String,
    episode_id: String,
    totals: Totals,
    started_at_ms: Option<i64>,
}

impl EpisodeRecorder {
    /// Creates the episode's transcript under `records_dir` and records `started` as its
    /// first event.
    ///
    /// # Errors
    /// When an id cannot name a file, the transcript exists or cannot be created, or the
    /// store refuses the event (the transcript then holds it).
    pub fn start(
        records_dir: &Path,
        started: EpisodeStarted,
        store: Option<Arc<Store>>,
    ) -> Result<Self, RecordError> {
        check_id(&started.run_id)?;
        check_id(&started.episode_id)?;
        let path = transcript_path(records_dir, &started.run_id, &started.episode_id);
        let mut recorder = Self {
            writer: TranscriptWriter::create(path)?,
            store,
            run_id: started.run_id.clone(),
            episode_id: started.episode_id.clone(),
            totals: Totals::default(),
            started_at_ms: None,
        };
        recorder.write(EventBody::EpisodeStarted(started))?;
        Ok(recorder)
    }

    /// The transcript's path.
    #[must_use]
    pub fn transcript_path(&self) -> &Path {
        self.writer.path()
    }

    /// What the episode has used so far (`wall_ms` from the first event to the last).
    #[must_use]
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// Records an event now. `episode_started` and `episode_finished` are recorded by
    /// [`start`](Self::start) and [`finish`](Self::finish).
    ///
    /// # Errors
    /// [`RecordError::OutOfPlace`] for `episode_started` and `episode_finished`;
    /// [`RecordError::Transcript`] when the event is not recorded;
    /// [`RecordError::Store`] when it is in the transcript but not in the store.
    pub fn record(&mut self, body: EventBody) -> Result<Event, RecordError> {
        match body {
            EventBody::EpisodeStarted(_) | EventBody::EpisodeFinished(_) => {
                Err(RecordError::OutOfPlace { event: body.kind() })
            }
            body => self.write(body),
        }
    }

    fn write(&mut self, body: EventBody) -> Result<Event, RecordError> {
        let event = self.writer.append(body)?;
        let at = event.at.as_unix_millis();
        let start = *self.started_at_ms.get_or_insert(at);
        self.totals.wall_ms = u64::try_from(at - start).unwrap_or(0);
        self.totals.add(&event.body);
        if let Some(store) = &self.store {
            store.ingest(&self.run_id, &self.episode_id, &event)?;
        }
        Ok(event)
    }

    /// Records `episode_finished` with the totals counted so far and syncs the transcript
    /// to disk.
    ///
    /// # Errors
    /// As for [`record`](Self::record), and when the sync fails.
    pub fn finish(
        mut self,
        outcome: Outcome,
        success_check: Option<SuccessCheck>,
    ) -> Result<Event, RecordError> {
        let mut totals = self.totals.clone();
        let now = super::time::Timestamp::now().as_unix_millis();
        if let Some(start) = self.started_at_ms {
            totals.wall_ms = u64::try_from(now - start).unwrap_or(0);
        }
        let event = self.write(EventBody::EpisodeFinished(EpisodeFinished {
            outcome,
            success_check,
            totals,
        }));
        let synced = self.writer.finish();
        let event = event?;
        synced?;
        Ok(event)
    }
}
