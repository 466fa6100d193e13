//! The harness layer under the commands: what `bee run`, `bee repl` (both screens),
//! `bee mcp` and subagent spawns share, none of it a command's own.
//!
//! - [`preflight`]: the staged set-up — the configuration, the policies compiled once per
//!   workspace with their warnings kept (`Policies`), the tool registry, the per-tool
//!   policies, the sandbox factory (`confine`), the provider (`load_provider`, `connect`),
//!   the run id — each refusing with its exit status before any model call.
//! - [`mcp_servers`]: the configured MCP servers, checked with the rest of the set-up and
//!   started, each in a scope of its own, for every session.
//! - [`conversation`]: an interactive session on it — `prepare`, and `Chat`, the controller
//!   both screens draw (turns, slash commands, a pending `/allow` change, the outcome).

pub(crate) mod conversation;
pub(crate) mod mcp_servers;
pub(crate) mod preflight;
