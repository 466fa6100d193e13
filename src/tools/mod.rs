//! The tools an agent may call, in a [`Registry`], and how their calls run.
//!
//! Each tool declares its name, its JSON Schema and where it runs ([`Placement`]):
//!
//! | tool | placement | runs as |
//! |---|---|---|
//! | `read_file`, `write_file`, `edit_file`, `list_dir`, `glob`, `grep` | [`Placement::Runner`] | `bee __tool NAME` in the sandbox ([`runner`]) |
//! | `shell` | [`Placement::Command`] | `/bin/sh -c COMMAND` in the sandbox |
//! | `skill`, `cvss`, `render`, `record_finding`, `list_findings` | [`Placement::Harness`] | in bee itself, with no access to the workspace |
//! | `scan` (feature `scanners`) | [`Placement::Command`] | the operator's pinned scanner in the sandbox |
//! | `agent` (when roles exist) | [`Placement::Session`] | a subagent: a session of its own, in a scope of its own |
//!
//! Nothing here touches the workspace from the harness process: every file access happens in
//! a child inside the sandbox, where the kernel decides it. The harness only builds the
//! request, runs the child and turns its answer, with the denials the kernel reported for the
//! call, into a [`ToolOutcome`]. A harness tool is handed no sandbox at all ([`Context`]).
//!
//! Every outcome is in one of three [`ToolState`]s, and a denial reaches the model as the
//! policy's reason (`denied by policy: open /home/u/.ssh/id_rsa for read: no fs.read grant
//! covers it`), never as a bare `EPERM`. A timeout has one meaning everywhere: the tool
//! started and did not finish in time, so it is `failed` (its processes are killed).

mod defs;
pub(crate) mod denial;
mod registry;
mod review;
mod run_end;
pub mod runner;
mod runner_tool;
#[cfg(feature = "scanners")]
pub mod scan;
mod shell;

use std::time::Duration;

use bee_userspace::audit::AuditRecord;
use serde::Serialize;

use crate::provider::{Item, ToolDef};
use crate::records::Enforcement;
use crate::sandbox::{Sandbox, SandboxError};

pub use crate::records::ToolState;
pub use denial::{denial_lines, is_permission_errno, with_lost_records};
pub use registry::{Registry, RegistryError};
#[cfg(feature = "cvss")]
pub use review::cvss;
#[cfg(feature = "findings")]
pub use review::findings;
pub(crate) use run_end::RunEnd;
pub use runner::{RunnerRequest, RunnerResponse};
pub use runner_tool::RunnerTool;
pub(crate) use runner_tool::run_runner;
pub use shell::ShellTool;

/// The names of the file tools, which run as `bee __tool NAME` (the runner's [`runner::TOOLS`]
/// serves them under these names).
pub const RUNNER_TOOLS: [&str; 6] = [
    runner::READ_FILE,
    runner::WRITE_FILE,
    runner::EDIT_FILE,
    runner::LIST_DIR,
    runner::GLOB,
    runner::GREP,
];

/// The name of the shell tool.
pub const SHELL_TOOL: &str = "shell";

/// Where a tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Inside the scope, as `bee __tool NAME` (file tools, search): the kernel decides every
    /// file it touches.
    Runner,
    /// Inside the scope, as a command the policy must grant (the shell, the scanners).
    Command,
    /// In the harness, with no access to the workspace (skills, panels, findings).
    Harness,
    /// In the session's own layer, which answers it by starting sessions rather than
    /// processes (the `agent` tool, answered by [`crate::agents::AgentExecutor`]): the
    /// registration gives its definition, and the layer that serves the session finds by it
    /// which calls are its own. A session without that layer answers it `could_not_run`.
    Session,
}

/// What a tool call is given: the sandbox (only for [`Placement::Runner`] and
/// [`Placement::Command`] tools), the
/// limits of this call, and whether to stop early.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// The sandbox the call runs in; `None` for harness tools.
    pub sandbox: Option<&'a Sandbox>,
    /// The limits of this call (the configured ones, shortened by a deadline).
    pub limits: &'a ToolLimits,
    /// True once the call should stop (the user interrupted): a running command is killed
    /// with its whole cgroup ([`Sandbox::run_until`]).
    pub stop: &'a (dyn Fn() -> bool + Sync),
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("sandbox", &self.sandbox)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// What an interrupted command answers: it started and was stopped, so it `failed`.
pub(crate) fn interrupted(what: &str) -> Answer {
    Answer {
        state: RunEnd::Interrupted.state(None),
        body: format!("{what} was interrupted; its processes were killed"),
        denials: Vec::new(),
        permission_error: false,
        runner_denials: Vec::new(),
    }
}

/// A tool the model may call. Implementations are registered in a [`Registry`]; the
/// registry parses the arguments (a JSON object) before [`Tool::call`].
pub trait Tool: Send + Sync + std::fmt::Debug {
    /// The name, description and JSON Schema the model is given.
    fn definition(&self) -> ToolDef;

    /// Where the tool runs; only [`Placement::Runner`] and [`Placement::Command`] tools get
    /// the sandbox.
    fn placement(&self) -> Placement;

    /// Runs one call with `args` (always a JSON object).
    fn call(&self, args: &serde_json::Value, ctx: &Context<'_>) -> Answer;
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
    /// Denials of the tool runner's own start-up, written to the `--audit` file but not shown
    /// to the model, the UI, `/allow` or learn mode: Rust's standard library reads the runner's
    /// `/proc/PID/maps` to find the main thread's stack, which a policy rarely grants and the
    /// tool does not need.
    pub runner_denials: Vec<AuditRecord>,
    /// How long the call took.
    pub duration: Duration,
    /// How the call was confined (`host`: nothing was enforced; harness tools report their
    /// sandbox's, though they touch nothing in it).
    pub enforcement: Enforcement,
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

/// A timeout as people write it: `60 s`, or `250 ms` below a second.
pub(crate) fn seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 || d.as_secs() >= 10 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// A tool's answer before it is rendered for the model.
#[derive(Debug)]
pub struct Answer {
    /// The state.
    pub state: ToolState,
    /// The output, or what went wrong.
    pub body: String,
    /// The kernel's denials during the call.
    pub denials: Vec<AuditRecord>,
    /// True when the failure was a permission error (`EACCES`/`EPERM`), which denials explain.
    pub permission_error: bool,
    /// See [`ToolOutcome::runner_denials`].
    pub runner_denials: Vec<AuditRecord>,
}

impl Answer {
    /// A completed answer with `body` and no denials (what harness tools return).
    pub fn completed(body: String) -> Self {
        Self {
            state: ToolState::Completed,
            ..Self::could_not_run(body)
        }
    }

    /// A could-not-run answer with `body`.
    pub fn could_not_run(body: String) -> Self {
        Self {
            state: ToolState::CouldNotRun,
            body,
            denials: Vec::new(),
            permission_error: false,
            runner_denials: Vec::new(),
        }
    }

    /// The answer for a sandbox that could not run `what`.
    pub fn from_sandbox_error(what: &str, e: SandboxError) -> Self {
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

    pub(crate) fn into_outcome(self, enforcement: Enforcement, duration: Duration) -> ToolOutcome {
        let content = denial::render(self.state, &self.body, &self.denials, self.permission_error);
        ToolOutcome {
            state: self.state,
            content,
            denials: self.denials,
            runner_denials: self.runner_denials,
            duration,
            enforcement,
        }
    }
}
