//! The records of an MCP session: one transcript, as for a `bee repl` session, with every
//! `tools/call` as a `tool_call`, its denials and its `tool_result`, so that `bee metrics`
//! counts the calls, their durations and their denials.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::records::{
    EpisodeRecorder, EpisodeStarted, EventBody, Outcome, RecordError, RunSummary, Store, ToolCall,
    ToolResult,
};
use crate::session::ToolExecution;

/// The session id of an MCP session: its transcript is `<run id>/mcp.jsonl`.
pub const SESSION_ID: &str = "mcp";

/// The scenario name MCP sessions are recorded under (what `bee metrics --by scenario` shows).
pub const SCENARIO: &str = "mcp";

/// Records the calls of one MCP session. Recording never stops a call: a write that fails is
/// reported once on standard error and the calls go on.
#[derive(Debug)]
pub struct CallLog {
    recorder: Mutex<Option<EpisodeRecorder>>,
    run_dir: PathBuf,
    calls: AtomicU64,
    warned: std::sync::atomic::AtomicBool,
}

impl CallLog {
    /// Starts the transcript of `started` under `records_dir` (and in `store`).
    ///
    /// # Errors
    /// When the transcript cannot be created.
    pub fn start(
        records_dir: &Path,
        started: EpisodeStarted,
        store: Option<Arc<Store>>,
    ) -> Result<Self, RecordError> {
        let run_dir = records_dir.join(&started.run_id);
        let recorder = EpisodeRecorder::start(records_dir, started, store)?;
        Ok(Self {
            recorder: Mutex::new(Some(recorder)),
            run_dir,
            calls: AtomicU64::new(0),
            warned: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// A new call id, unique in the session: `mcp-1`, `mcp-2`, …
    pub fn next_call_id(&self) -> String {
        format!("mcp-{}", self.calls.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Records that the client called `tool` with `arguments`.
    pub fn call(&self, call_id: &str, tool: &str, arguments: serde_json::Value) {
        self.record(EventBody::ToolCall(ToolCall {
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            arguments,
        }));
    }

    /// Records how the call `call_id` ended: its denials, then its result.
    pub fn result(&self, call_id: &str, exec: &ToolExecution) {
        for d in &exec.denials {
            self.record(EventBody::Denial(d.event(call_id)));
        }
        self.record(EventBody::ToolResult(ToolResult {
            call_id: call_id.to_owned(),
            state: exec.state,
            output: exec.content.clone(),
            truncated: None,
            exit: exec.exit,
            duration_ms: u64::try_from(exec.duration.as_millis()).unwrap_or(u64::MAX),
            lost_records: exec.lost_records,
        }));
    }

    /// Ends the session (`ended`: the client went away) and writes the run's summary.
    pub fn finish(&self) {
        let recorder = self.recorder.lock().ok().and_then(|mut r| r.take());
        if let Some(recorder) = recorder
            && let Err(e) = recorder.finish(Outcome::Ended, None)
        {
            self.warn(&e);
        }
        if let Ok(summary) = RunSummary::from_run_dir(&self.run_dir) {
            let _ = summary.write_atomic(&self.run_dir);
        }
    }

    fn record(&self, body: EventBody) {
        let written = match self.recorder.lock() {
            Ok(mut r) => r.as_mut().map(|r| r.record(body).map(|_| ())),
            Err(_) => None,
        };
        if let Some(Err(e)) = written {
            self.warn(&e);
        }
    }

    fn warn(&self, e: &RecordError) {
        if !self.warned.swap(true, Ordering::SeqCst) {
            eprintln!("bee mcp: recording the calls: {e}; the calls go on unrecorded");
        }
    }
}
