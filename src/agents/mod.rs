//! Subagents: a session delegates a task to another agent whose policy is provably within
//! its own.
//!
//! ```text
//! agent {role, task}
//!   └─ plan: role file → policy compiled against the workspace → proof ⊆ caller's policy
//!            → tools ⊆ caller's tools → per-tool scopes that still hold → depth, cycles
//!        (any failure: `could_not_run` with the reason; nothing starts)
//!   └─ start: a sandbox of its own (scope), a provider connection, a Session linked to the
//!             caller's (parent session and tool call), spending from the caller's Budget
//!   └─ the subagent's final answer is the call's result; its scopes are torn down
//! ```
//!
//! Roles are TOML files ([`AgentRole`], found by [`Roles::discover`]); the `agent` tool is
//! registered like every tool ([`AgentTool`], placed [`crate::tools::Placement::Session`]),
//! and its calls are answered by the [`AgentExecutor`] wrapped around a delegating session's
//! executor. Several `agent` calls of one
//! turn run at the same time, each in its own scope. The proof is
//! [`bee_core::attenuate()`], the same as `bee validate --parent`, and a refusal uses the same
//! words.

mod delegate;
mod plan;
mod role;
mod roles;
mod tool;

pub use delegate::{AgentExecutor, AgentSettings, Caller, Delegation};
pub use plan::INLINE_ROLE;
pub use role::{AgentRole, valid_name};
pub use roles::Roles;
pub use tool::AgentTool;

/// The name of the tool that starts a subagent.
pub const AGENT_TOOL: &str = "agent";
