//! Running a turn's tool calls through the executor (side by side where it allows), and
//! recording what came back: denials, the subagent an `agent` call started, the result; and
//! the scenario's success check.

use std::time::{Duration, Instant};

use super::{Bounds, Interrupt, Session, SessionError, ToolExecution, ToolExecutor};
use crate::provider;
use crate::records::{EventBody, SuccessCheck, ToolResult, ToolState};

use super::ToolDenial;
use super::call::millis;

impl Session<'_> {
    pub(super) fn record_execution(
        &mut self,
        call_id: &str,
        exec: &ToolExecution,
    ) -> Result<(), SessionError> {
        self.record_denials(call_id, &exec.denials)?;
        if let Some(subagent) = &exec.subagent {
            self.log.record(EventBody::Subagent(subagent.clone()))?;
        }
        self.log.record(EventBody::ToolResult(ToolResult {
            call_id: call_id.to_owned(),
            state: exec.state,
            output: exec.content.clone(),
            truncated: None,
            exit: exec.exit,
            duration_ms: millis(exec.duration),
            lost_records: exec.lost_records,
        }))
    }

    fn record_denials(
        &mut self,
        call_id: &str,
        denials: &[ToolDenial],
    ) -> Result<(), SessionError> {
        for d in denials {
            self.log.record(EventBody::Denial(d.event(call_id)))?;
        }
        Ok(())
    }

    /// Runs `command` through the executor as the scenario's success check (confined like a
    /// tool call); its denials are recorded under [`crate::records::SUCCESS_CHECK_CALL_ID`].
    ///
    /// # Errors
    /// [`SessionError`] when a denial cannot be recorded.
    pub fn success_check(
        &mut self,
        command: &str,
        timeout: Duration,
        interrupt: &Interrupt,
    ) -> Result<SuccessCheck, SessionError> {
        let bounds = Bounds {
            deadline: Some(Instant::now() + timeout),
            interrupt: interrupt.clone(),
            budget: None,
        };
        let exec = self.executor.check(command, &bounds);
        self.record_denials(crate::records::SUCCESS_CHECK_CALL_ID, &exec.denials)?;
        Ok(check_result(command, &exec))
    }
}

/// Runs a batch of calls: one on this thread, several on a thread each; the executions come
/// back in the calls' order.
pub(super) fn run_batch(
    executor: &dyn ToolExecutor,
    batch: &[provider::ToolCall],
    bounds: &Bounds,
) -> Vec<ToolExecution> {
    if let [call] = batch {
        return vec![executor.call(call, bounds)];
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = batch
            .iter()
            .map(|call| s.spawn(move || executor.call(call, bounds)))
            .collect();
        handles
            .into_iter()
            .zip(batch)
            .map(|(h, call)| {
                h.join().unwrap_or_else(|_| {
                    ToolExecution::could_not_run(format!(
                        "tool call {} ({}) failed inside bee",
                        call.id, call.name
                    ))
                })
            })
            .collect()
    })
}

/// A success check's verdict: passed when it completed with status 0.
fn check_result(command: &str, exec: &ToolExecution) -> SuccessCheck {
    use crate::records::ExitStatus;
    let passed = exec.state == ToolState::Completed && exec.exit == Some(ExitStatus::Code(0));
    let how = match (exec.state, exec.exit) {
        (ToolState::Completed, Some(ExitStatus::Code(c))) => format!("exited with status {c}"),
        (_, Some(ExitStatus::Signal(s))) => format!("was ended by signal {s}"),
        (state, _) => format!("ended as {}", state.as_str()),
    };
    let mut detail = format!("`{command}` {how}");
    let tail = last_lines(&exec.content, 5);
    if !passed && !tail.is_empty() {
        detail.push_str(": ");
        detail.push_str(&tail);
    }
    if !exec.denials.is_empty() {
        detail.push_str(&format!(" ({} denial(s))", exec.denials.len()));
    }
    SuccessCheck { passed, detail }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}
