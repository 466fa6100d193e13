//! How a run obtains the tool executors of its sessions (episodes, the REPL, subagents).

use std::path::Path;
use std::sync::Arc;

use bee_core::CompiledPolicy;

use crate::records::Enforcement;
use crate::session::ToolExecutor;
use crate::tools::Registry;

/// Why a [`SandboxFactory`] could not build an executor: the words, and the sysexits status
/// a command reports for it (65 a policy refused, as by a service's ceiling; 69 enforcement
/// unavailable; 77 not permitted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExecutorError {
    /// The sysexits status.
    pub status: u8,
    /// What went wrong, in words; lines after the first are details (a refused proof's
    /// counterexamples).
    pub message: String,
}

impl ExecutorError {
    /// A request this sandbox cannot take (64).
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            status: 64,
            message: message.into(),
        }
    }
}

impl From<String> for ExecutorError {
    /// An error that leaves enforcement unavailable (69).
    fn from(message: String) -> Self {
        Self {
            status: 69,
            message,
        }
    }
}

/// Builds the executors of a run's episodes, one per episode.
pub trait SandboxFactory: Send + Sync {
    /// How the executors it builds confine tools.
    fn enforcement(&self) -> Enforcement;

    /// The executor of one episode, working in `workspace` under `policy` (compiled against
    /// that workspace; `None` only in host mode) and offering `tools`.
    ///
    /// # Errors
    /// Why no executor could be built (the episode then ends as `enforcement-unavailable`;
    /// a command that cannot start its session exits with the error's status).
    fn executor(
        &self,
        workspace: &Path,
        policy: Option<CompiledPolicy>,
        tools: &Arc<Registry>,
    ) -> Result<Box<dyn ToolExecutor>, ExecutorError>;

    /// A scope of its own under `policy` (compiled against `workspace`; `None` only in host
    /// mode), made like an executor's, for a long-lived process its caller starts in it and
    /// talks to (an MCP server, [`Sandbox::start`](crate::sandbox::Sandbox::start)).
    ///
    /// # Errors
    /// Why no scope could be made; a factory that makes no sandboxes refuses (64).
    fn sandbox(
        &self,
        workspace: &Path,
        policy: Option<CompiledPolicy>,
    ) -> Result<crate::sandbox::Sandbox, ExecutorError> {
        let _ = (workspace, policy);
        Err(ExecutorError::usage(
            "this sandbox makes no scope for a long-lived process",
        ))
    }

    /// Where the audit records of the scopes it makes go (`--audit FILE`), if anywhere.
    fn audit_sink(&self) -> Option<crate::episode::AuditSink> {
        None
    }

    /// bee's own state that the configuration put outside the workspace's `.bee/` (a
    /// ledger, records directory or audit file): every scope made from now on protects it
    /// like `.bee/` itself (`crate::sandbox::own_state`). A factory whose executors make no
    /// scope has nothing to protect it from and ignores it.
    fn keep_from_scopes(&mut self, state: Vec<crate::sandbox::own_state::StatePath>) {
        let _ = state;
    }

    /// Appends the audit records of every tool call of every episode to `path` as JSON
    /// lines (`--audit FILE`).
    ///
    /// # Errors
    /// Why the file cannot be opened; the run then stops before any model call. A factory
    /// that has no audit records to give refuses rather than ignoring the request.
    fn write_audit_to(&mut self, path: &Path) -> Result<(), String> {
        Err(format!(
            "this sandbox keeps no audit records, so {} would stay empty",
            path.display()
        ))
    }

    /// Learn mode (`bee run --learn`): every scope it creates from now on runs with
    /// `SCOPE_LEARN`, and every call's audit records go to `observer`.
    ///
    /// # Errors
    /// Why this sandbox cannot learn, with its status: 64 for a sandbox that has no kernel
    /// scope to learn in, 69 for an engine that cannot report what it would learn from.
    fn learn_with(&mut self, observer: crate::episode::AuditObserver) -> Result<(), ExecutorError> {
        let _ = observer;
        Err(ExecutorError::usage(
            "this sandbox has no kernel scope to learn in",
        ))
    }
}
