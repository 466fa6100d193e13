//! One agent episode: a scenario's task sent to a [`Session`](crate::session::Session),
//! then its success check, every step recorded as it happens.
//!
//! [`run_episode`] starts the session, sends the task and lets the turn run — model calls,
//! tool calls through the episode's [`ToolExecutor`], limits (see [`crate::session`]) —
//! until the model ends its turn without tool calls. The scenario's success check then runs
//! through the same executor, under the same policy: the episode `passed` when it exits 0
//! (no check counts as passed), else `failed`.
//!
//! Any other end of the turn is the outcome: a limit ends the episode as `limit`, a refusal
//! or content filter as `refused`, a provider failure as `provider-error`, an [`Interrupt`]
//! (Ctrl-C) as `interrupted`. In every case the transcript holds what happened up to then,
//! and its last event is `episode_finished`.
//!
//! This module also holds the executors — [`SandboxExecutor`] (bee's tools in a sandbox),
//! [`ToolScopes`] (tools routed to scopes of their own), [`ScriptedExecutor`] (canned
//! answers, for tests) — the [`SandboxFactory`] a run builds them with, and the workspace
//! copies of a run.

mod factory;
mod fake;
mod run;
mod sandboxed;
mod tool_scopes;
mod workspace;

pub use crate::session::{
    Bounds, EpisodeLimits, Interrupt, Model, ProviderFailure, ToolDenial, ToolExecution,
    ToolExecutor, Update,
};
pub use factory::{ExecutorError, SandboxFactory};
pub use fake::{Rule, ScriptedExecutor, completed, denied};
pub use run::{
    CheckSpec, EpisodeError, EpisodeReport, EpisodeSpec, SUCCESS_CHECK_CALL_ID, run_episode,
};
pub use sandboxed::{AuditObserver, AuditSink, SandboxExecutor};
pub use tool_scopes::ToolScopes;
pub use workspace::{copy_path, copy_workspace};
