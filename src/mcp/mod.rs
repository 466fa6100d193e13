//! The Model Context Protocol (feature `mcp`; see `docs/mcp.md`): `bee mcp` serving bee's
//! tools to other agents, and bee as the client of configured MCP servers ([`client`]), each
//! in a kernel scope of its own.
//!
//! The server speaks MCP through the official Rust SDK (`rmcp`) on standard input and
//! output. `tools/list` answers with the registry's definitions — the same names, descriptions
//! and JSON Schemas the model providers are given — with annotations where they hold
//! ([`map`]). Every `tools/call` runs as a call of `bee run` does, through a
//! [`ToolExecutor`](crate::session::ToolExecutor), in a kernel scope made for that call alone
//! and torn down after it; a cancelled request, or a client that goes away, kills the call's
//! processes. A denial comes back as an error result with bee's explanation, and every call is
//! recorded in the session's transcript and the metrics store ([`record`]).
//!
//! This module is the only one with an async runtime (tokio, which `rmcp` needs): the
//! executor, the sandbox and the core crates stay synchronous, and a call runs on a blocking
//! thread (the client blocks on a runtime of its own).

pub mod client;
pub mod map;
pub mod record;
mod server;
pub mod wire;

pub use record::CallLog;
pub use server::{MAX_ARGUMENTS, ScopeFn, Server, serve};
