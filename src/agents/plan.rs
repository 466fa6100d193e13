//! Everything decided about an `agent` call before anything starts: which role (or inline
//! policy), its policy compiled against the caller's workspace and proven within the caller's
//! effective policy, the tools it is offered (within the caller's), the per-tool scopes that
//! still hold inside it, and whether it may delegate in turn. Any failure is the reason the
//! call starts nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bee_core::{CompileOptions, CompiledPolicy, PolicyError, attenuate, compile_str};
use serde::Deserialize;

use super::AgentRole;
use super::delegate::{Caller, Delegation};
use crate::session::EpisodeLimits;
use crate::tools::{Placement, Registry};

/// The role of a subagent started with an inline policy.
pub const INLINE_ROLE: &str = "(inline)";

/// An `agent` call's arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Request {
    role: Option<String>,
    pub(super) task: String,
    policy: Option<String>,
}

impl Request {
    /// Parses the arguments; says what is wrong in words for the model.
    pub(super) fn parse(args: &str) -> Result<Self, String> {
        let r: Self = serde_json::from_str(args)
            .map_err(|e| format!("the arguments are not {{role, task}}: {e}"))?;
        if r.task.trim().is_empty() {
            return Err("`task` is empty: say what the subagent must do".to_owned());
        }
        match (&r.role, &r.policy) {
            (Some(_), Some(_)) => Err("give either `role` or `policy`, not both".to_owned()),
            (None, None) => Err("give `role`: the name of one of the roles listed".to_owned()),
            _ => Ok(r),
        }
    }

    /// The role name as recorded (`(inline)` for a policy's text).
    pub(super) fn label(&self) -> String {
        self.role.clone().unwrap_or_else(|| INLINE_ROLE.to_owned())
    }
}

/// Whom a call delegates for.
pub(super) struct Target<'t> {
    pub(super) delegation: &'t Delegation<'t>,
    pub(super) caller: &'t Caller,
    /// The caller's effective policy (as requested, without bee's runner grant); `None` in
    /// host mode.
    pub(super) caller_policy: Option<&'t CompiledPolicy>,
    /// The tools the caller is offered, `agent` included.
    pub(super) caller_tools: &'t [String],
}

/// A subagent that may start.
pub(super) struct Planned {
    /// The role's name, or `(inline)`.
    pub(super) label: String,
    /// The role's name in session ids (`inline` for an inline policy).
    pub(super) id_part: String,
    /// The compiled policy, proven within the caller's.
    pub(super) policy: CompiledPolicy,
    /// Its source as recorded (the file, or `(inline)`).
    pub(super) policy_source: String,
    /// Its name in later refusals.
    pub(super) policy_name: String,
    /// The tools it is offered (without `agent`, which its executor adds).
    pub(super) registry: Arc<Registry>,
    /// Per-tool scopes that hold inside it: tool, policy source, policy.
    pub(super) tool_scopes: Vec<(String, String, CompiledPolicy)>,
    /// The MCP servers its role names, each with its policy (proven within the subagent's).
    pub(super) mcp_servers: Vec<(String, crate::config::McpServerConfig, CompiledPolicy)>,
    /// Whether its role lists `agent`: its executor then handles `agent` calls (offering the
    /// tool only while the depth limit allows, and refusing calls past it in words).
    pub(super) delegates: bool,
    /// The role's provider file.
    pub(super) provider: Option<PathBuf>,
    /// The role's model.
    pub(super) model: Option<String>,
    /// Its own limits.
    pub(super) limits: EpisodeLimits,
    /// The role's instructions.
    instructions: Option<String>,
    /// Things the caller should know (tools withheld).
    pub(super) notes: Vec<String>,
}

impl Planned {
    /// The subagent's system prompt; `confined` says whether a policy confines its tool
    /// calls (with `--host` none does, and the prompt says so).
    pub(super) fn system_prompt(&self, workspace: &Path, confined: bool) -> String {
        let confinement = if confined {
            "every tool call runs in a sandbox whose policy may refuse an operation. When a \
             result says `denied by policy`, do not try to get around it: say what you needed \
             and why."
        } else {
            "tool calls run on the host with the user's own authority: no sandbox or policy \
             confines them, so stay within the task and the directory."
        };
        let mut p = format!(
            "You are a subagent: another agent gave you one task, in the directory {}. Use \
             the tools to do it; {confinement} Your final answer is all the other agent will \
             see: make it complete, and brief.",
            workspace.display()
        );
        if let Some(i) = &self.instructions {
            p.push_str("\n\n");
            p.push_str(i);
        }
        p
    }
}

/// Decides an `agent` call; `Err` is the reason nothing starts.
pub(super) fn plan(request: &Request, t: &Target<'_>) -> Result<Planned, String> {
    let d = t.delegation;
    let depth = t.caller.depth + 1;
    if depth > d.settings.max_depth {
        return Err(format!(
            "delegation too deep: this subagent would be at depth {depth}, and the limit is \
             {} (agents.max_depth)",
            d.settings.max_depth
        ));
    }
    let options = CompileOptions {
        base: t.caller.workspace.clone(),
        home: d.home.clone(),
    };
    // The compiler's warnings about the subagent's policies, said in its result's notes as
    // `bee validate` says them.
    let mut warnings = Vec::new();
    let (role, policy, source) = match (&request.role, &request.policy) {
        (Some(name), _) => {
            let role = match d.roles.get(name) {
                None => {
                    let known: Vec<&str> = d.roles.names().collect();
                    return Err(if known.is_empty() {
                        format!("there is no role `{name}`: no role files were found")
                    } else {
                        format!(
                            "there is no role `{name}`; the roles are {}",
                            known.join(", ")
                        )
                    });
                }
                Some(Err(problems)) => {
                    return Err(format!("the role file of `{name}` is invalid:\n{problems}"));
                }
                Some(Ok(role)) => role,
            };
            if let Some(pos) = t.caller.lineage.iter().position(|r| r == name) {
                let mut chain = t.caller.lineage[pos..].to_vec();
                chain.push(name.clone());
                return Err(format!("cyclic delegation: {}", chain.join(" → ")));
            }
            let compiled = d
                .policies
                .compile_file(&role.policy, &options)
                .map_err(|e| policy_problem(&format!("role `{name}`"), &e))?;
            warnings.extend(compiled.warnings);
            let policy = compiled.policy;
            (Some(role), policy, role.policy.display().to_string())
        }
        (None, Some(text)) => {
            if !d.settings.inline_policy {
                return Err(
                    "inline policies are not allowed here (agents.inline_policy = false): \
                     name a role"
                        .to_owned(),
                );
            }
            let compiled = compile_str(INLINE_ROLE, text, &options)
                .map_err(|e| policy_problem("the inline policy", &e))?;
            warnings.extend(compiled.warnings);
            let policy = compiled.policy;
            (None, policy, INLINE_ROLE.to_owned())
        }
        (None, None) => return Err("give `role`".to_owned()),
    };
    let label = request.label();
    let policy_name = match role {
        Some(r) => format!("role `{}` ({})", r.name, r.policy.display()),
        None => "the inline policy".to_owned(),
    };
    if let Some(parent) = t.caller_policy {
        let proof = attenuate(&policy, parent);
        if !proof.is_subset() {
            return Err(proof.refusal(&policy_name, &t.caller.policy_name));
        }
    }

    // Tools: the role's, or the caller's but the session's own (`agent`); never one the
    // caller lacks.
    let session_tool = |n: &str| d.tools.placement(n) == Some(Placement::Session);
    let wanted: Vec<String> = match role.and_then(|r| r.tools.clone()) {
        Some(tools) => tools,
        None => t
            .caller_tools
            .iter()
            .filter(|n| !session_tool(n))
            .cloned()
            .collect(),
    };
    let missing: Vec<&str> = wanted
        .iter()
        .filter(|w| !t.caller_tools.contains(w))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{policy_name} lists tools the calling session is not offered: {} (a subagent's \
             tools must be within its caller's: {})",
            missing.join(", "),
            t.caller_tools.join(", ")
        ));
    }
    // A server is offered whole, by the role's `mcp_servers`, never tool by tool.
    if let Some(tool) = role
        .and_then(|r| r.tools.as_ref())
        .and_then(|tools| tools.iter().find(|t| server_of(t, d).is_some()))
    {
        return Err(format!(
            "{policy_name} lists `{tool}`, a tool of the MCP server `{}`: name the server in \
             the role's mcp_servers instead",
            server_of(tool, d).unwrap_or_default()
        ));
    }
    let mcp_servers = role.map_or_else(
        || Ok(Vec::new()),
        |r| servers(r, t, &policy, &policy_name, &options),
    )?;
    let delegates = wanted.iter().any(|w| session_tool(w));
    let mut notes: Vec<String> = warnings.iter().map(|w| format!("warning: {w}")).collect();
    if delegates && depth >= d.settings.max_depth {
        notes.push(format!(
            "note: the subagent was not offered `agent`: it is at the depth limit ({})",
            d.settings.max_depth
        ));
    }
    // A tool confined to a narrower policy keeps that policy inside a subagent only when it
    // is within the subagent's own; otherwise the subagent is not offered the tool.
    let mut tool_scopes = Vec::new();
    let mut withheld = Vec::new();
    for (tool, file) in &d.tool_policies {
        if !wanted.contains(tool) {
            continue;
        }
        let tool_policy = d
            .policies
            .compile_file(file, &options)
            .map(|c| c.policy)
            .map_err(|e| policy_problem(&format!("[tools.{tool}] policy"), &e))?;
        if attenuate(&tool_policy, &policy).is_subset() {
            tool_scopes.push((tool.clone(), file.display().to_string(), tool_policy));
        } else {
            withheld.push(tool.clone());
            notes.push(format!(
                "note: the subagent was not offered `{tool}`: its [tools.{tool}] policy ({}) \
                 is not within {policy_name}",
                file.display()
            ));
        }
    }
    // A session tool stays registered for a subagent that delegates, below the depth limit:
    // its own `agent` layer answers it (and refuses a call of it at the limit in words).
    let keep: Vec<&str> = wanted
        .iter()
        .filter(|w| !withheld.contains(w) && (!session_tool(w) || depth < d.settings.max_depth))
        .map(String::as_str)
        .collect();
    let registry = Arc::new(d.tools.retain(&keep));
    Ok(Planned {
        id_part: if role.is_some() {
            label.clone()
        } else {
            "inline".to_owned()
        },
        label,
        policy,
        policy_source: source,
        policy_name,
        registry,
        tool_scopes,
        mcp_servers,
        delegates,
        provider: role.and_then(|r| r.provider.clone()),
        model: role.and_then(|r| r.model.clone()),
        limits: role.map(|r| r.limits.clone()).unwrap_or_default(),
        instructions: role.and_then(|r: &AgentRole| r.instructions.clone()),
        notes,
    })
}

/// The configured MCP server whose tool `tool` is (`SERVER__TOOL`), if any.
fn server_of<'d>(tool: &str, d: &'d Delegation<'_>) -> Option<&'d str> {
    let (server, _) = tool.split_once("__")?;
    d.mcp_servers.get_key_value(server).map(|(k, _)| k.as_str())
}

/// The MCP servers `role` names, each offered to the caller, with its policy compiled and
/// proven within the subagent's `policy`.
fn servers(
    role: &AgentRole,
    t: &Target<'_>,
    policy: &CompiledPolicy,
    policy_name: &str,
    options: &CompileOptions,
) -> Result<Vec<(String, crate::config::McpServerConfig, CompiledPolicy)>, String> {
    let d = t.delegation;
    let mut out = Vec::new();
    for name in &role.mcp_servers {
        let Some(config) = d.mcp_servers.get(name) else {
            let known: Vec<&str> = d.mcp_servers.keys().map(String::as_str).collect();
            return Err(format!(
                "role `{}` names the MCP server `{name}`, which the configuration does not \
                 define ({})",
                role.name,
                if known.is_empty() {
                    "it defines none".to_owned()
                } else {
                    format!("its servers are {}", known.join(", "))
                }
            ));
        };
        let prefix = format!("{name}__");
        if !t.caller_tools.iter().any(|c| c.starts_with(&prefix)) {
            return Err(format!(
                "role `{}` names the MCP server `{name}`, which the calling session is not \
                 offered (a subagent's servers must be its caller's)",
                role.name
            ));
        }
        let server_policy = d
            .policies
            .compile_file(&config.policy.value, options)
            .map(|c| c.policy)
            .map_err(|e| policy_problem(&format!("[mcp.servers.{name}] policy"), &e))?;
        let proof = attenuate(&server_policy, policy);
        if !proof.is_subset() {
            return Err(format!(
                "the MCP server `{name}` would have more than the subagent: {}",
                proof.refusal(&config.policy.value.display().to_string(), policy_name)
            ));
        }
        out.push((name.clone(), config.clone(), server_policy));
    }
    Ok(out)
}

fn policy_problem(what: &str, e: &PolicyError) -> String {
    match e {
        PolicyError::Read { .. } => format!("{what}: {e}"),
        PolicyError::Invalid(diagnostics) => {
            let mut text = format!("{what}: the policy is invalid");
            for p in &diagnostics.problems {
                text.push_str(&format!("\n  {p}"));
            }
            text
        }
    }
}
