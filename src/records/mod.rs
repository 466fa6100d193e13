//! Episode records: transcripts, run summaries and the metrics store.
//!
//! A records directory holds one directory per run and, beside them, the metrics store:
//!
//! ```text
//! <records_dir>/
//!   metrics.sqlite            the metrics store (rebuildable from the transcripts)
//!   <run id>/
//!     <episode id>.jsonl      the episode's transcript, one event a line
//!     summary.json            the run's summary, replaced atomically
//!     run.json                what made the run: bee version, scenario hash, shard
//!     run.lock                held by the process writing the run
//!     <episode id>.jsonl.partial-<n>   an interrupted attempt set aside by `--resume`
//! ```
//!
//! The transcripts are the record; the store is an index over them for `bee metrics`. See
//! `docs/records.md` for the event and SQL schemas.

mod event;
mod manifest;
mod merge;
mod query;
mod recorder;
mod sessions;
mod store;
mod summary;
mod time;
mod transcript;

pub use event::{
    Cost, CostTotal, Denial, DenialTarget, Enforcement, EngineName, EpisodeFinished,
    EpisodeStarted, ErrorCategory, Event, EventBody, ExitStatus, GrantKind, LimitHit, LimitKind,
    Limits, Message, ModelCallEnded, ModelError, ModelLatency, Outcome, ParentLink, PolicyRecord,
    PriceSource, Refusal, Role, SUCCESS_CHECK_CALL_ID, StopReason, Subagent, SuccessCheck,
    ToolCall, ToolResult, ToolState, Totals, Truncation, Usage,
};
pub use manifest::{
    BEE_VERSION, LOCK_FILE, MANIFEST_FILE, MANIFEST_FORMAT, ManifestError, RunLock, RunManifest,
};
pub use merge::{
    Duplicate, MERGE_FILE, MergeError, MergeSummary, MergedRun, REPL_SESSION_ID, merge,
};
pub use query::{
    Delegations, Group, GroupBy, MAIN_AGENT_GROUP, ModelStats, Percentiles, Report,
    SUCCESS_CHECK_GROUP, Stats, Tokens, ToolStats, nearest_rank,
};
pub use recorder::{EpisodeRecorder, RecordError, check_id, transcript_path};
pub(crate) use sessions::{Session, sessions_by_episode};
pub use store::{BUSY_TIMEOUT, RebuildReport, SCHEMA_VERSION, STORE_FILE, Store, StoreError};
pub use summary::{EpisodeSummary, RefusedSubagent, RunSummary, SUMMARY_FILE, transcripts_in};
pub use time::Timestamp;
pub use transcript::{
    Transcript, TranscriptError, TranscriptWriter, TruncatedTail, read_transcript,
};

/// Where records go when nothing says otherwise, relative to the current directory.
pub const DEFAULT_RECORDS_DIR: &str = ".bee/records";
