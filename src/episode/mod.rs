//! One agent episode: a task prompt, model turns, tool calls, limits and a success check,
//! every step recorded as it happens.
//!
//! [`run_episode`] drives the loop: it streams a model turn from the [`Provider`], records
//! the assistant's text, tool calls, token usage (with the cost from the price table; an
//! unknown price stays unknown) and latency, runs each tool call through the episode's
//! [`ToolExecutor`] and feeds the results back, until the model ends a turn without tool
//! calls or a limit is reached. The scenario's success check then runs through the same
//! executor, under the same policy.
//!
//! Limits are checked *before* the step that would exceed them:
//!
//! - **turns** — no model call past the limit; tool calls of the last allowed turn are not
//!   run (their results could never reach the model);
//! - **tokens** (input + output over all calls) — no model call once the total reaches the
//!   limit, and each request's output budget is capped at what is left; a single call can
//!   still pass the limit by its input tokens, and the episode then stops before its tools run;
//! - **wall time** — a deadline that bounds waiting for the model and every running tool
//!   (the executor must stop a tool by [`Bounds::deadline`]);
//! - **cost** (USD) — no model call once the cost reaches the limit; when the model's price is
//!   unknown and a cost limit is set, the episode refuses to start (or go on) and says why.
//!
//! A provider failure ends the episode as `provider-error`; an [`Interrupt`] (Ctrl-C) ends it
//! as `interrupted`. In every case the transcript holds what happened up to then, and its
//! last event is `episode_finished`.
//!
//! [`Provider`]: crate::provider::Provider

mod executor;
mod fake;
mod limits;
mod run;
mod sandboxed;
mod workspace;

pub use executor::{Bounds, Interrupt, ToolDenial, ToolExecution, ToolExecutor};
pub use fake::{Rule, ScriptedExecutor, completed, denied};
pub use run::{
    CheckSpec, EpisodeError, EpisodeLimits, EpisodeReport, EpisodeSpec, Model, ProviderFailure,
    SUCCESS_CHECK_CALL_ID, run_episode,
};
pub use sandboxed::{AuditSink, SandboxExecutor};
pub use workspace::{copy_path, copy_workspace};
