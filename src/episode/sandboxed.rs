//! The real [`ToolExecutor`]: bee's tools, each call run in the episode's [`Sandbox`].

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex};

use bee_userspace::audit::{AuditRecord, Verdict, write_jsonl};
use std::time::{Duration, Instant};

use crate::provider::{ToolCall, ToolDef};
use crate::records::{Enforcement, ExitStatus, ToolState};
use crate::sandbox::{RunOutput, Sandbox};
use crate::tools::runner::READ_TEXT;
use crate::tools::{self, Registry, RunEnd, ToolLimits};

use crate::session::{Bounds, RECENT_DENIALS, ReadText, ToolDenial, ToolExecution, ToolExecutor};

/// Most bytes of a success check's output kept for the record.
const CHECK_OUTPUT_CAP: usize = 64 * 1024;

/// Where audit records are appended as JSON lines, shared by the episodes of a run.
pub type AuditSink = Arc<Mutex<dyn Write + Send>>;

/// Called with every audit record of every call, and the workspace of the sandbox it came
/// from (learn mode collects the run's accesses this way).
pub type AuditObserver = Arc<dyn Fn(&std::path::Path, &AuditRecord) + Send + Sync>;

/// Runs the calls of a [`Registry`]'s tools in one session's sandbox, one call at a time.
pub struct SandboxExecutor {
    // One call at a time: a call's denials are the scope's events drained after it.
    sandbox: Mutex<Sandbox>,
    registry: Arc<Registry>,
    enforcement: Enforcement,
    audit: Option<AuditSink>,
    /// The last [`RECENT_DENIALS`] denials of the scope, oldest first (for `/allow`).
    recent: Mutex<VecDeque<AuditRecord>>,
    observer: Option<AuditObserver>,
    /// The sandbox's workspace, for the observer (the sandbox's lock is held while a call's
    /// records are handed on).
    workspace: std::path::PathBuf,
}

impl std::fmt::Debug for SandboxExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxExecutor")
            .field("sandbox", &self.sandbox)
            .field("tools", &self.registry.names().collect::<Vec<_>>())
            .field("enforcement", &self.enforcement)
            .field("audit", &self.audit.is_some())
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl SandboxExecutor {
    /// Wraps a session's sandbox; the registry's tools are offered and its limits bound
    /// every call (shortened further by the session's wall-clock deadline).
    pub fn new(sandbox: Sandbox, registry: Arc<Registry>) -> Self {
        let enforcement = sandbox.enforcement();
        let workspace = sandbox.workspace().to_path_buf();
        Self {
            workspace,
            sandbox: Mutex::new(sandbox),
            registry,
            enforcement,
            audit: None,
            recent: Mutex::new(VecDeque::new()),
            observer: None,
        }
    }

    /// Appends every call's audit records (denials, and allows where the scope audits them)
    /// to `audit` as JSON lines.
    #[must_use]
    pub fn with_audit(mut self, audit: Option<AuditSink>) -> Self {
        self.audit = audit;
        self
    }

    /// Also hands every call's audit records to `observer`.
    #[must_use]
    pub fn with_observer(mut self, observer: Option<AuditObserver>) -> Self {
        self.observer = observer;
        self
    }

    fn record(&self, records: &[AuditRecord]) {
        if let Ok(mut recent) = self.recent.lock() {
            for record in records.iter().filter(|r| r.verdict == Verdict::Deny) {
                if recent.len() == RECENT_DENIALS {
                    recent.pop_front();
                }
                recent.push_back(record.clone());
            }
        }
        if let Some(observe) = &self.observer {
            for record in records {
                observe(&self.workspace, record);
            }
        }
        self.write_audit(records);
    }

    /// Appends `records` to the `--audit` file, when there is one.
    fn write_audit(&self, records: &[AuditRecord]) {
        let Some(audit) = &self.audit else { return };
        if let Ok(mut out) = audit.lock() {
            for record in records {
                // A failed write must not end the episode; the transcript keeps the denials.
                if write_jsonl(&mut *out, record).is_err() {
                    break;
                }
            }
            let _ = out.flush();
        }
    }

    /// The limits of one call: the configured ones, none longer than what the deadline leaves.
    fn limits_within(&self, bounds: &Bounds) -> ToolLimits {
        let mut limits = *self.registry.limits();
        if let Some(left) = bounds.remaining() {
            limits.file_timeout = limits.file_timeout.min(left);
            limits.shell_timeout = limits.shell_timeout.min(left);
            limits.shell_timeout_max = limits.shell_timeout_max.min(left);
        }
        limits
    }
}

impl ToolExecutor for SandboxExecutor {
    fn definitions(&self) -> Vec<ToolDef> {
        self.registry.definitions()
    }

    fn call(&self, call: &ToolCall, bounds: &Bounds) -> ToolExecution {
        if bounds.interrupt.is_raised() {
            return ToolExecution::could_not_run("the run was interrupted before this call");
        }
        let sandbox = match self.sandbox.lock() {
            Ok(s) => s,
            Err(_) => return ToolExecution::could_not_run("the sandbox is unusable"),
        };
        let stop = || bounds.interrupt.is_raised();
        let outcome = self
            .registry
            .with_limits(self.limits_within(bounds))
            .call_until(&sandbox, call, &stop);
        self.record(&outcome.denials);
        // The runner's own start-up reads: in the audit trail, which keeps every decision, but
        // not shown to the model, the UI, `/allow` or learn mode (the tool does not need them).
        self.write_audit(&outcome.runner_denials);
        let lost_records = sandbox.take_lost_records();
        ToolExecution {
            state: outcome.state,
            content: tools::with_lost_records(outcome.content, lost_records),
            lost_records,
            exit: None,
            denials: outcome
                .denials
                .iter()
                .filter_map(ToolDenial::from_audit)
                .collect(),
            duration: outcome.duration,
            subagent: None,
        }
    }

    fn check(&self, command: &str, bounds: &Bounds) -> ToolExecution {
        let start = Instant::now();
        let sandbox = match self.sandbox.lock() {
            Ok(s) => s,
            Err(_) => return ToolExecution::could_not_run("the sandbox is unusable"),
        };
        let spec = sandbox.command("/bin/sh").arg("-c").arg(command);
        let timeout = bounds
            .remaining()
            .unwrap_or(Duration::MAX)
            .min(self.registry.limits().shell_timeout_max);
        match sandbox.run(&spec, timeout, CHECK_OUTPUT_CAP) {
            Ok(out) => {
                self.record(&out.denials);
                let exec = check_execution(&out, timeout);
                let lost_records = sandbox.take_lost_records();
                ToolExecution {
                    content: tools::with_lost_records(exec.content, lost_records),
                    lost_records,
                    ..exec
                }
            }
            Err(e) => ToolExecution {
                duration: start.elapsed(),
                ..ToolExecution::could_not_run(format!("the success check could not run: {e}"))
            },
        }
    }

    fn enforcement(&self) -> Enforcement {
        self.enforcement
    }

    fn engine(&self) -> Option<bee_userspace::scope::EngineKind> {
        self.sandbox.lock().ok()?.engine()
    }

    fn policies(&self) -> Option<(bee_core::CompiledPolicy, bee_core::CompiledPolicy)> {
        let sandbox = self.sandbox.lock().ok()?;
        Some((
            sandbox.requested_policy()?.clone(),
            sandbox.policy()?.clone(),
        ))
    }

    fn recent_denials(&self) -> Vec<AuditRecord> {
        self.recent
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn replace_policy(&self, policy: &bee_core::CompiledPolicy) -> Result<(), String> {
        let mut sandbox = self
            .sandbox
            .lock()
            .map_err(|_| "the sandbox is unusable; the old policy stays in force".to_owned())?;
        sandbox
            .replace_policy(policy.clone())
            .map_err(|e| e.to_string())
    }

    fn read_text(&self, path: &str, cap: usize) -> Result<ReadText, String> {
        let sandbox = self
            .sandbox
            .lock()
            .map_err(|_| "the sandbox is unusable".to_owned())?;
        let limits = ToolLimits {
            output_cap: cap,
            ..*self.registry.limits()
        };
        let answer = tools::run_runner(
            &sandbox,
            READ_TEXT,
            &serde_json::json!({ "path": path }),
            &limits,
            &|| false,
        );
        self.record(&answer.denials);
        if answer.state != ToolState::Completed {
            let mut why = tools::denial_lines(&answer.denials);
            why.push(answer.body);
            return Err(why.join("; "));
        }
        #[derive(serde::Deserialize)]
        struct Raw {
            text: String,
            total_bytes: u64,
        }
        let raw: Raw = serde_json::from_str(&answer.body)
            .map_err(|e| format!("the tool runner's answer is malformed: {e}"))?;
        Ok(ReadText {
            text: raw.text,
            total_bytes: usize::try_from(raw.total_bytes).unwrap_or(usize::MAX),
        })
    }
}

fn exit_status(status: std::process::ExitStatus) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitStatus::Code(code),
        (None, Some(signal)) => ExitStatus::Signal(signal),
        (None, None) => ExitStatus::Code(-1),
    }
}

fn check_execution(out: &RunOutput, timeout: Duration) -> ToolExecution {
    let mut content = String::from_utf8_lossy(&out.stdout.bytes).into_owned();
    content.push_str(&String::from_utf8_lossy(&out.stderr.bytes));
    if out.stdout.truncated || out.stderr.truncated {
        content.push_str("\n[output truncated]");
    }
    let denials: Vec<ToolDenial> = out
        .denials
        .iter()
        .filter_map(ToolDenial::from_audit)
        .collect();
    let refused: Vec<AuditRecord> = (out.denials.iter())
        .filter(|r| r.verdict == Verdict::Deny)
        .cloned()
        .collect();
    for line in tools::denial_lines(&refused) {
        content.push('\n');
        content.push_str(&line);
    }
    // `Sandbox::run` is never stopped early, so the run timed out or exited.
    let end = RunEnd::of(out);
    if end == RunEnd::TimedOut {
        content.push_str(&format!("\ntimed out after {} s", timeout.as_secs()));
    }
    let state = end.state(None);
    ToolExecution {
        state,
        content,
        exit: Some(exit_status(out.status)),
        denials,
        duration: out.duration,
        subagent: None,
        lost_records: 0,
    }
}
