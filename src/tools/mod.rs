//! The tools an agent may call, and how their calls run in a [`Sandbox`].
//!
//! | tool | runs as |
//! |---|---|
//! | `read_file`, `write_file`, `edit_file`, `list_dir`, `glob`, `grep` | `bee __tool NAME` in the sandbox ([`runner`]) |
//! | `shell` | `/bin/sh -c COMMAND` in the sandbox |
//!
//! Nothing here touches the workspace from the harness process: every file access happens in
//! a child inside the sandbox, where the kernel decides it. The harness only builds the
//! request, runs the child and turns its answer, with the denials the kernel reported for the
//! call, into a [`ToolOutcome`].
//!
//! Every outcome is in one of three [`ToolState`]s, and a denial reaches the model as the
//! policy's reason (`denied by policy: open /home/u/.ssh/id_rsa for read: no fs.read grant
//! covers it`), never as a bare `EPERM`.

mod defs;
mod denial;
pub mod runner;
mod shell;

use std::time::{Duration, Instant};

use bee_userspace::audit::AuditRecord;
use serde::{Deserialize, Serialize};

use crate::provider::{Item, ToolCall, ToolDef};
use crate::sandbox::{Isolation, Sandbox, SandboxError};

pub use denial::{denial_lines, is_permission_errno};
pub use runner::{RunnerRequest, RunnerResponse};

/// The names of the tools that run as `bee __tool NAME`.
pub const RUNNER_TOOLS: [&str; 6] = [
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "glob",
    "grep",
];

/// The name of the shell tool.
pub const SHELL_TOOL: &str = "shell";

/// The state a tool call ended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolState {
    /// It ran and did what was asked; the content is its output.
    Completed,
    /// It did not run: bad arguments, a missing binary, a timeout, a launch failure, no scope.
    CouldNotRun,
    /// It ran and failed: a non-zero exit, an I/O error, an edit that could not be applied.
    Failed,
}

impl ToolState {
    /// `completed`, `could_not_run` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolState::Completed => "completed",
            ToolState::CouldNotRun => "could_not_run",
            ToolState::Failed => "failed",
        }
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolOutcome {
    /// The state.
    pub state: ToolState,
    /// What the model sees: the output, or what went wrong (led by the denials when they
    /// explain it).
    pub content: String,
    /// The kernel's denials during the call, oldest first.
    pub denials: Vec<AuditRecord>,
    /// Denials of the tool runner's own start-up, kept for the records but not shown to the
    /// model: Rust's standard library reads the runner's `/proc/PID/maps` to find the main
    /// thread's stack, which a policy rarely grants and the tool does not need.
    pub runner_denials: Vec<AuditRecord>,
    /// How long the call took.
    pub duration: Duration,
    /// The isolation the call ran under (`host`: nothing was enforced).
    pub isolation: Isolation,
}

impl ToolOutcome {
    /// The conversation item that answers `call_id`; an error unless [`ToolState::Completed`].
    pub fn to_item(&self, call_id: &str) -> Item {
        Item::ToolResult {
            call_id: call_id.to_owned(),
            output: self.content.clone(),
            is_error: self.state != ToolState::Completed,
        }
    }
}

/// Limits of the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// Most bytes of output content a tool returns to the model.
    pub output_cap: usize,
    /// How long a file tool may run.
    pub file_timeout: Duration,
    /// The shell's timeout when the model gives none.
    pub shell_timeout: Duration,
    /// The longest shell timeout the model may ask for.
    pub shell_timeout_max: Duration,
}

impl Default for ToolLimits {
    /// 32 KiB of output; 60 s for file tools; 120 s for the shell, 600 s at most.
    fn default() -> Self {
        Self {
            output_cap: 32 * 1024,
            file_timeout: Duration::from_secs(60),
            shell_timeout: Duration::from_secs(120),
            shell_timeout_max: Duration::from_secs(600),
        }
    }
}

/// The tools, with their limits.
#[derive(Debug, Clone, Default)]
pub struct ToolSet {
    limits: ToolLimits,
}

impl ToolSet {
    /// A tool set with `limits`.
    pub fn new(limits: ToolLimits) -> Self {
        Self { limits }
    }

    /// The limits.
    pub fn limits(&self) -> &ToolLimits {
        &self.limits
    }

    /// The definitions the model is given, one per tool.
    pub fn definitions() -> Vec<ToolDef> {
        defs::definitions()
    }

    /// Runs `call` in `sandbox`.
    pub fn call(&self, sandbox: &Sandbox, call: &ToolCall) -> ToolOutcome {
        let start = Instant::now();
        let answer = match call.parsed_arguments() {
            Err(e) => Answer::could_not_run(format!("the arguments are not valid JSON: {e}")),
            Ok(args) if !args.is_object() => {
                Answer::could_not_run("the arguments must be a JSON object".to_owned())
            }
            Ok(args) => match call.name.as_str() {
                SHELL_TOOL => shell::call(&self.limits, sandbox, &args),
                name if RUNNER_TOOLS.contains(&name) => self.run_file_tool(sandbox, name, args),
                other => Answer::could_not_run(format!(
                    "there is no tool `{other}`; the tools are {}, {SHELL_TOOL}",
                    RUNNER_TOOLS.join(", ")
                )),
            },
        };
        answer.into_outcome(sandbox.isolation(), start.elapsed())
    }

    fn run_file_tool(&self, sandbox: &Sandbox, name: &str, args: serde_json::Value) -> Answer {
        let request = RunnerRequest {
            workspace: sandbox.workspace().to_owned(),
            output_cap: self.limits.output_cap,
            args,
        };
        let input = match serde_json::to_vec(&request) {
            Ok(i) => i,
            Err(e) => return Answer::could_not_run(format!("encoding the request: {e}")),
        };
        let spec = sandbox
            .command(sandbox.runner().as_os_str())
            .args(["__tool", name])
            .env_pass(Vec::<String>::new());
        // JSON escaping can grow the content up to sixfold; the rest is the envelope.
        let stdout_cap = self
            .limits
            .output_cap
            .saturating_mul(6)
            .saturating_add(4096);
        let mut run =
            match sandbox.run_with_input(&spec, &input, self.limits.file_timeout, stdout_cap) {
                Ok(run) => run,
                Err(e) => return Answer::from_sandbox_error("the tool runner", e),
            };
        let (runner_denials, denials): (Vec<_>, Vec<_>) = std::mem::take(&mut run.denials)
            .into_iter()
            .partition(is_runner_startup);
        if run.timed_out {
            return Answer {
                state: ToolState::CouldNotRun,
                body: format!(
                    "`{name}` timed out after {} and was killed",
                    seconds(self.limits.file_timeout)
                ),
                denials,
                permission_error: false,
                runner_denials,
            };
        }
        match serde_json::from_slice::<RunnerResponse>(&run.stdout.bytes) {
            Ok(resp) => Answer {
                state: resp.state,
                body: resp.content,
                permission_error: resp.errno.is_some_and(is_permission_errno),
                denials,
                runner_denials,
            },
            Err(_) => {
                let stderr = run.stderr.text();
                Answer {
                    state: ToolState::CouldNotRun,
                    body: format!(
                        "the tool runner gave no answer (exit status {}){}",
                        run.exit_code(),
                        if stderr.trim().is_empty() {
                            String::new()
                        } else {
                            format!(": {}", stderr.trim())
                        }
                    ),
                    // A runner that died without answering may well have been stopped by a
                    // denial: lead with any.
                    permission_error: true,
                    denials,
                    runner_denials,
                }
            }
        }
    }
}

/// A timeout as people write it: `60 s`, or `250 ms` below a second.
pub(crate) fn seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 || d.as_secs() >= 10 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// True for the runner's read of its own `/proc/PID/maps` at start-up.
fn is_runner_startup(record: &AuditRecord) -> bool {
    record.hook == "file_open"
        && record.access == ["read"]
        && record.path.as_deref() == Some(format!("/proc/{}/maps", record.pid).as_str())
}

/// A tool's answer before it is rendered for the model.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) state: ToolState,
    pub(crate) body: String,
    pub(crate) denials: Vec<AuditRecord>,
    /// True when the failure was a permission error (`EACCES`/`EPERM`), which denials explain.
    pub(crate) permission_error: bool,
    /// See [`ToolOutcome::runner_denials`].
    pub(crate) runner_denials: Vec<AuditRecord>,
}

impl Answer {
    pub(crate) fn could_not_run(body: String) -> Self {
        Self {
            state: ToolState::CouldNotRun,
            body,
            denials: Vec::new(),
            permission_error: false,
            runner_denials: Vec::new(),
        }
    }

    pub(crate) fn from_sandbox_error(what: &str, e: SandboxError) -> Self {
        match e {
            SandboxError::Launch { source, denials } => Self {
                state: ToolState::CouldNotRun,
                body: format!("{what} could not start: {source}"),
                denials,
                permission_error: true,
                runner_denials: Vec::new(),
            },
            other => Self::could_not_run(format!("the sandbox could not run {what}: {other}")),
        }
    }

    fn into_outcome(self, isolation: Isolation, duration: Duration) -> ToolOutcome {
        let content = denial::render(self.state, &self.body, &self.denials, self.permission_error);
        ToolOutcome {
            state: self.state,
            content,
            denials: self.denials,
            runner_denials: self.runner_denials,
            duration,
            isolation,
        }
    }
}
