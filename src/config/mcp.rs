//! `[mcp.servers.NAME]`: the MCP servers a session starts, each in a kernel scope of its own
//! under a policy proven within the session's (see `docs/mcp.md`, "MCP servers under bee").
//! Configuration files and scenario files (`crate::scenario`) read the same table.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{Origin, Sourced};

/// What reading the table needs of the file it is in: where a span is, its paths resolved
/// against the file's directory, and where problems go.
pub(crate) trait FileContext {
    /// The file and line of `span`.
    fn origin_of(&self, span: &std::ops::Range<usize>) -> Origin;
    /// `v` resolved as a path of this file (`None`, with a problem reported, when empty).
    fn path_of(&mut self, v: &Spanned<String>, key: &str) -> Option<PathBuf>;
    /// Reports a problem at `span`.
    fn problem_at(&mut self, span: std::ops::Range<usize>, key: &str, message: &str, help: &str);
}

/// Most characters in a server's name: its tools are offered as `NAME__TOOL`, and providers
/// take tool names of at most 64 characters.
pub const MAX_SERVER_NAME: usize = 24;

/// One MCP server a session starts (`[mcp.servers.NAME]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServerConfig {
    /// `command`: the server's executable, absolute, relative to the file that names it
    /// (when it holds a `/`), or a name looked up in `PATH` when the server starts.
    pub command: Sourced<String>,
    /// `args`: its arguments, as given.
    pub args: Vec<String>,
    /// `env`: variables set for it, over the default pass-list of tool calls.
    pub env: BTreeMap<String, String>,
    /// `policy`: the policy file of its scope, which must be a subset of the session's.
    pub policy: Sourced<PathBuf>,
    /// `startup_timeout_seconds`: how long it may take to start and list its tools
    /// (default [`DEFAULT_STARTUP_TIMEOUT`] seconds).
    pub startup_timeout_seconds: u64,
    /// `timeout_seconds`: how long one `tools/call` may take before the server is stopped
    /// (default [`DEFAULT_CALL_TIMEOUT`] seconds; a session's deadline shortens it).
    pub timeout_seconds: u64,
}

/// Default `startup_timeout_seconds`.
pub const DEFAULT_STARTUP_TIMEOUT: u64 = 30;
/// Default `timeout_seconds`.
pub const DEFAULT_CALL_TIMEOUT: u64 = 120;

/// `[mcp]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcp {
    #[serde(default)]
    servers: BTreeMap<String, Spanned<RawServer>>,
}

/// `[mcp.servers.NAME]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    command: Option<Spanned<String>>,
    args: Option<Spanned<Vec<String>>>,
    env: Option<Spanned<BTreeMap<String, String>>>,
    policy: Option<Spanned<String>>,
    startup_timeout_seconds: Option<Spanned<u64>>,
    timeout_seconds: Option<Spanned<u64>>,
}

/// Whether `name` can name a server: 1 to [`MAX_SERVER_NAME`] ASCII letters, digits, `-`
/// and single `_`s (a double `_` separates it from its tools' names).
#[must_use]
pub fn valid_server_name(name: &str) -> bool {
    (1..=MAX_SERVER_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_')
}

/// Checks `[mcp]` and sets every server it names (a server a later file names again is
/// replaced whole).
pub(crate) fn resolve(
    r: &mut dyn FileContext,
    servers: &mut BTreeMap<String, McpServerConfig>,
    raw: &RawMcp,
) {
    for (name, table) in &raw.servers {
        let key = |k: &str| format!("mcp.servers.{name}.{k}");
        if !valid_server_name(name) {
            r.problem_at(
                table.span(),
                &format!("mcp.servers.{name}"),
                &format!("`{name}` cannot name a server"),
                &format!(
                    "use 1 to {MAX_SERVER_NAME} letters, digits, `-` and single `_` (its tools \
                     are offered as NAME__TOOL)"
                ),
            );
            continue;
        }
        let t = table.get_ref();
        let args = t
            .args
            .as_ref()
            .map(|a| a.get_ref().clone())
            .unwrap_or_default();
        let env = t
            .env
            .as_ref()
            .map(|e| e.get_ref().clone())
            .unwrap_or_default();
        if let Some(a) = t
            .args
            .as_ref()
            .filter(|_| args.iter().any(|a| a.contains('\0')))
        {
            r.problem_at(a.span(), &key("args"), "an argument holds a NUL byte", "");
        }
        if let Some((span, k)) = t
            .env
            .as_ref()
            .map(|e| (e.span(), e.get_ref()))
            .into_iter()
            .flat_map(|(span, map)| map.iter().map(move |kv| (span.clone(), kv)))
            .find(|(_, (k, v))| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0'))
            .map(|(span, (k, _))| (span, k.clone()))
        {
            r.problem_at(
                span,
                &key("env"),
                &format!("`{k}` cannot be set: a name is not empty and holds no `=`, and no NUL byte is in a name or value"),
                "",
            );
        }
        let command = match &t.command {
            Some(c) if c.get_ref().contains('\0') => {
                r.problem_at(
                    c.span(),
                    &key("command"),
                    "the command holds a NUL byte",
                    "",
                );
                None
            }
            Some(c) if !c.get_ref().trim().is_empty() => {
                let value = if c.get_ref().contains('/') {
                    r.path_of(c, &key("command"))
                        .map(|p| p.display().to_string())
                } else {
                    Some(c.get_ref().clone())
                };
                value.map(|value| Sourced {
                    value,
                    origin: r.origin_of(&c.span()),
                })
            }
            Some(c) => {
                r.problem_at(c.span(), &key("command"), "the command is empty", "");
                None
            }
            None => {
                r.problem_at(
                    table.span(),
                    &key("command"),
                    "a server needs a command",
                    "e.g. command = \"npx\", args = [\"@modelcontextprotocol/server-filesystem\", \".\"]",
                );
                None
            }
        };
        let policy = match &t.policy {
            Some(p) => r.path_of(p, &key("policy")).map(|value| Sourced {
                value,
                origin: r.origin_of(&p.span()),
            }),
            None => {
                r.problem_at(
                    table.span(),
                    &key("policy"),
                    "a server needs a policy: it runs in a kernel scope of its own",
                    "write a policy that grants what the server needs, within the session's",
                );
                None
            }
        };
        let mut timeout = |v: &Option<Spanned<u64>>, k: &str, default: u64| match v {
            Some(n) if *n.get_ref() == 0 => {
                r.problem_at(
                    n.span(),
                    &key(k),
                    "must be at least 1",
                    "remove the key for the default",
                );
                default
            }
            Some(n) => *n.get_ref(),
            None => default,
        };
        let startup = timeout(
            &t.startup_timeout_seconds,
            "startup_timeout_seconds",
            DEFAULT_STARTUP_TIMEOUT,
        );
        let call = timeout(&t.timeout_seconds, "timeout_seconds", DEFAULT_CALL_TIMEOUT);
        if let (Some(command), Some(policy)) = (command, policy) {
            servers.insert(
                name.clone(),
                McpServerConfig {
                    command,
                    args,
                    env,
                    policy,
                    startup_timeout_seconds: startup,
                    timeout_seconds: call,
                },
            );
        }
    }
}
