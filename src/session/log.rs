//! The session's transcript writer: every event is recorded (transcript, then metrics store)
//! and then shown to the observer.

use std::path::Path;

use super::{SessionError, Update};
use crate::records::{EpisodeRecorder, Event, EventBody, RecordError};

/// Records events and shows each to the observer.
pub(super) struct Log<'a> {
    pub(super) rec: EpisodeRecorder,
    pub(super) observer: &'a (dyn Fn(Update<'_>) + Sync),
    pub(super) session_id: String,
    /// Events the metrics store refused (they are in the transcript), in words.
    pub(super) store_errors: Vec<String>,
}

impl Log<'_> {
    /// Records `body`. A store failure is kept in `store_errors` and the session goes on; a
    /// transcript failure stops it: an unrecorded step must not happen.
    pub(super) fn record(&mut self, body: EventBody) -> Result<(), SessionError> {
        let kind = body.kind();
        match self.rec.record(body) {
            Ok(event) => {
                (self.observer)(Update::Recorded(&event));
                Ok(())
            }
            Err(RecordError::Store(e)) => {
                self.store_errors.push(format!("{kind}: {e}"));
                Ok(())
            }
            Err(source) => Err(self.error(source)),
        }
    }

    pub(super) fn error(&self, source: RecordError) -> SessionError {
        SessionError::Record {
            session_id: self.session_id.clone(),
            source: Box::new(source),
        }
    }

    pub(super) fn transcript(&self) -> &Path {
        self.rec.transcript_path()
    }

    /// Shows an event that was recorded outside [`Log::record`].
    pub(super) fn show(&self, event: &Event) {
        (self.observer)(Update::Recorded(event));
    }
}
