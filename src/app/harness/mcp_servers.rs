//! The MCP servers a session starts (`[mcp.servers.NAME]`): their policies checked before any
//! model call, then each server started in a scope of its own for every session
//! (`crate::mcp::client`).

use std::collections::BTreeMap;
use std::path::Path;

use bee_core::CompiledPolicy;

use super::preflight::{Policies, Refused};
use crate::app::Exit;
use crate::config::McpServerConfig;
use crate::episode::{ExecutorError, SandboxFactory, ToolExecutor};

/// The servers an episode starts: the configuration's, and its scenario's (which win by
/// name).
pub(crate) fn with_episode(
    config: &BTreeMap<String, McpServerConfig>,
    episode: &BTreeMap<String, McpServerConfig>,
) -> BTreeMap<String, McpServerConfig> {
    let mut all = config.clone();
    all.extend(episode.iter().map(|(k, v)| (k.clone(), v.clone())));
    all
}

/// Checks every configured server before any model call: its policy compiles against
/// `workspace` and — when the session has a policy — is proven within it (65 otherwise, with
/// the proof's counterexamples; 66 for a missing file); a bee built without the `mcp` feature
/// refuses any server (69) rather than run the session without it.
///
/// # Errors
/// The first refusal.
pub(crate) fn check(
    servers: &BTreeMap<String, McpServerConfig>,
    workspace: &Path,
    session: Option<(&CompiledPolicy, &Path)>,
    policies: &Policies,
) -> Result<(), Refused> {
    for (name, server) in servers {
        let at = format!("{}: mcp.servers.{name}", server.policy.origin);
        if !cfg!(feature = "mcp") {
            return Err(Refused(
                Exit::Unavailable,
                format!(
                    "{at}: this bee was built without the `mcp` feature, so it cannot start MCP servers"
                ),
            ));
        }
        let policy = policies.compile(&server.policy.value, workspace)?;
        if let Some((parent, parent_file)) = session {
            proven(
                name,
                &server.policy.value,
                &policy,
                parent,
                &parent_file.display().to_string(),
            )
            .map_err(|why| Refused(Exit::DataErr, format!("{at}: {why}")))?;
        }
    }
    Ok(())
}

/// Why `policy` (of server `name`, from `file`) is not within `parent` (named `parent_name`).
fn proven(
    name: &str,
    file: &Path,
    policy: &CompiledPolicy,
    parent: &CompiledPolicy,
    parent_name: &str,
) -> Result<(), String> {
    let proof = bee_core::attenuate(policy, parent);
    if proof.is_subset() {
        return Ok(());
    }
    Err(format!(
        "the MCP server `{name}` would have more than the session: {}",
        proof.refusal(&file.display().to_string(), parent_name)
    ))
}

/// Starts every server for one session working in `workspace`: each server's policy compiled
/// against it and proven within `session` again (an episode's copy has paths of its own),
/// then the server started in a scope `factory` makes ([`crate::mcp::client::start`]).
///
/// # Errors
/// The first server that could not start, with the status a command reports (65 for a policy
/// not within the session's).
#[cfg(feature = "mcp")]
pub(crate) fn start(
    servers: &BTreeMap<String, McpServerConfig>,
    factory: &dyn SandboxFactory,
    workspace: &Path,
    session: Option<&CompiledPolicy>,
    output_cap: usize,
) -> Result<Vec<Box<dyn ToolExecutor>>, ExecutorError> {
    let mut out: Vec<Box<dyn ToolExecutor>> = Vec::new();
    for (name, server) in servers {
        let policy = super::preflight::compile_policy(&server.policy.value, workspace).map_err(
            |Refused(status, why)| ExecutorError {
                status: status.code(),
                message: why,
            },
        )?;
        if let Some(parent) = session {
            proven(
                name,
                &server.policy.value,
                &policy,
                parent,
                "the session's policy",
            )
            .map_err(|message| ExecutorError {
                status: Exit::DataErr.code(),
                message,
            })?;
        }
        let plan = crate::mcp::client::ServerPlan {
            name: name.clone(),
            config: server.clone(),
            policy: session.is_some().then_some(policy),
        };
        out.push(Box::new(crate::mcp::client::start(
            &plan, factory, workspace, output_cap,
        )?));
    }
    Ok(out)
}

/// Without the `mcp` feature no server can start ([`check`] has refused any before).
///
/// # Errors
/// 69 when a server is configured.
#[cfg(not(feature = "mcp"))]
pub(crate) fn start(
    servers: &BTreeMap<String, McpServerConfig>,
    _factory: &dyn SandboxFactory,
    _workspace: &Path,
    _session: Option<&CompiledPolicy>,
    _output_cap: usize,
) -> Result<Vec<Box<dyn ToolExecutor>>, ExecutorError> {
    match servers.keys().next() {
        Some(name) => Err(ExecutorError::from(format!(
            "this bee was built without the `mcp` feature, so the MCP server `{name}` cannot start"
        ))),
        None => Ok(Vec::new()),
    }
}
