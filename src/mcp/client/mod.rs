//! bee as an MCP client: a server of `[mcp.servers.NAME]` started in a kernel scope of its
//! own, its tools offered to the model as `NAME__TOOL`, each call answered as bee's own tools
//! answer (see `docs/mcp.md`, "MCP servers under bee").
//!
//! The server's scope is made by the session's [`SandboxFactory`] under the server's policy,
//! which the caller has proven within the session's; the server runs there for the whole
//! session, with its standard input and output as the MCP stdio transport (the official SDK,
//! `rmcp`, on a runtime of this module's own). A call's denials are the scope's, drained when
//! it ends: calls of one server run one at a time, so whatever the kernel refused the server
//! meanwhile was done for that call. A server that exits, writes what is not MCP, or does not
//! answer in time gives `could-not-run`; one that timed out is stopped with its scope, and
//! every later call of it says so.
//!
//! Here: starting a server ([`start`]); [`tools`]: its tool list within bounds; [`call`]: one
//! call; [`answer`]: what a call says back (text, stderr, denials, the audit file).

mod answer;
mod call;
mod tools;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bee_core::CompiledPolicy;
use bee_userspace::audit::AuditRecord;
use rmcp::ServiceExt as _;
use rmcp::service::{RoleClient, RunningService};
use tokio::net::unix::pipe;

use answer::{denial_note, keep_tail, stderr_note, write_audit};
pub use tools::MAX_TOOLS;
use tools::{definitions, list_tools};

use crate::config::McpServerConfig;
use crate::episode::{AuditSink, ExecutorError, SandboxFactory};
use crate::provider::ToolDef;
use crate::records::Enforcement;
use crate::sandbox::{LongLived, Sandbox};

/// What separates a server's name from its tools' names in the names the model sees.
pub const SEPARATOR: &str = "__";

/// Most bytes of one JSON-RPC message read from a server; a longer line is dropped.
const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// A server to start: its name, its configuration, and its policy compiled against the
/// session's workspace (proven within the session's by the caller; `None` in host mode).
#[derive(Debug, Clone)]
pub struct ServerPlan {
    /// The name it has in `[mcp.servers.NAME]`.
    pub name: String,
    /// Its configuration.
    pub config: McpServerConfig,
    /// Its compiled policy.
    pub policy: Option<CompiledPolicy>,
}

/// One running server, as the session's executor for its tools.
pub struct ServerExecutor {
    name: String,
    source: String,
    defs: Vec<ToolDef>,
    call_timeout: Duration,
    output_cap: usize,
    enforcement: Enforcement,
    audit: Option<AuditSink>,
    runtime: tokio::runtime::Runtime,
    /// The connection, one call at a time; `Err` once the server is gone, with why.
    live: Mutex<Result<Connection, String>>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl std::fmt::Debug for ServerExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerExecutor")
            .field("name", &self.name)
            .field("tools", &self.defs.len())
            .finish_non_exhaustive()
    }
}

/// A running server: the client side of its session, its process and its scope. Dropped in
/// that order: the client closes the server's input, then the scope is torn down (whatever is
/// left in it is killed) and the process is reaped.
struct Connection {
    client: Option<RunningService<RoleClient, ()>>,
    process: LongLived,
    sandbox: Option<Sandbox>,
}

impl Connection {
    /// Ends the server: closes its session, tears its scope down, reaps it. Returns the
    /// denials that came in since the last call.
    fn end(&mut self, runtime: &tokio::runtime::Runtime) -> Vec<AuditRecord> {
        if let Some(client) = self.client.take() {
            let _ = runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(1), client.cancel()).await
            });
        }
        let mut late = Vec::new();
        if let Some(sandbox) = self.sandbox.take() {
            late = sandbox.denials();
            if let Ok(more) = sandbox.finish() {
                late.extend(more);
            }
        }
        let _ = self.process.wait_timeout(Duration::from_secs(1));
        late
    }
}

/// Starts `plan`'s server in a scope `factory` makes in `workspace`, and lists its tools.
///
/// # Errors
/// Why it could not start, with the status a command reports: the factory's own for its
/// scope, 69 for a server that could not be run, exited, did not answer the MCP handshake or
/// its tool list within `startup_timeout_seconds`, or offered tools bee cannot name.
pub fn start(
    plan: &ServerPlan,
    factory: &dyn SandboxFactory,
    workspace: &Path,
    output_cap: usize,
) -> Result<ServerExecutor, ExecutorError> {
    let name = &plan.name;
    let origin = &plan.config.command.origin;
    let fail =
        |why: String| ExecutorError::from(format!("the MCP server `{name}` ({origin}) {why}"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bee-mcp-client")
        .enable_all()
        .build()
        .map_err(|e| fail(format!("could not start: no runtime: {e}")))?;
    let program = resolve(&plan.config.command.value, workspace)
        .map_err(|why| fail(format!("could not start: {why}")))?;
    let sandbox = factory.sandbox(workspace, plan.policy.clone())?;
    let enforcement = sandbox.enforcement();
    let mut spec = sandbox.command(&program).args(&plan.config.args);
    for (k, v) in &plan.config.env {
        spec = spec.env(k, v);
    }
    let mut process = match sandbox.start(&spec) {
        Ok(p) => p,
        Err(crate::sandbox::SandboxError::Launch { source, denials }) => {
            return Err(fail(format!(
                "could not start `{}`: {source}{}",
                program.display(),
                denial_note(&denials)
            )));
        }
        Err(e) => {
            return Err(ExecutorError {
                status: e.status(),
                message: format!("the MCP server `{name}` could not start: {e}"),
            });
        }
    };
    let stderr = Arc::new(Mutex::new(Vec::new()));
    if let Some(err) = process.take_stderr() {
        keep_tail(std::fs::File::from(err), Arc::clone(&stderr));
    }
    let pipes = process.take_stdin().zip(process.take_stdout());
    let mut connection = Connection {
        client: None,
        process,
        sandbox: Some(sandbox),
    };
    let startup = Duration::from_secs(plan.config.startup_timeout_seconds);
    let started = pipes
        .ok_or_else(|| "has no pipes to talk to".to_owned())
        .and_then(|(input, output)| {
            runtime.block_on(async {
                let tx = pipe::Sender::from_owned_fd(input)
                    .map_err(|e| format!("could not be talked to: {e}"))?;
                let rx = pipe::Receiver::from_owned_fd(output)
                    .map_err(|e| format!("could not be talked to: {e}"))?;
                let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(rx, tx)
                    .with_max_line_length(MAX_MESSAGE);
                let handshake = async {
                    let client = ()
                        .serve(transport)
                        .await
                        .map_err(|e| format!("did not complete the MCP handshake: {e}"))?;
                    let tools = list_tools(client.peer()).await?;
                    Ok::<_, String>((client, tools))
                };
                tokio::time::timeout(startup, handshake)
                    .await
                    .map_err(|_| {
                        format!(
                            "did not answer the MCP handshake and list its tools within {} s",
                            startup.as_secs()
                        )
                    })?
            })
        });
    let (client, tools) = match started {
        Ok(x) => x,
        Err(why) => {
            let denials = connection.end(&runtime);
            return Err(fail(format!(
                "{why}{}{}",
                stderr_note(&stderr),
                denial_note(&denials)
            )));
        }
    };
    connection.client = Some(client);
    // What the server was refused while it started is in the audit trail, but no call's.
    let audit = factory.audit_sink();
    if let Some(sandbox) = &connection.sandbox {
        write_audit(audit.as_ref(), &sandbox.denials());
    }
    let defs = match definitions(name, tools) {
        Ok(d) => d,
        Err(why) => {
            connection.end(&runtime);
            return Err(fail(why));
        }
    };
    Ok(ServerExecutor {
        name: name.clone(),
        source: plan.config.policy.value.display().to_string(),
        defs,
        call_timeout: Duration::from_secs(plan.config.timeout_seconds),
        output_cap,
        enforcement,
        audit,
        runtime,
        live: Mutex::new(Ok(connection)),
        stderr,
    })
}

/// The executable `command` names: itself when it is a path (made absolute against
/// `workspace`), else the first executable of that name on `PATH`.
fn resolve(command: &str, workspace: &Path) -> Result<PathBuf, String> {
    if command.contains('/') {
        return Ok(workspace.join(command));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| format!("no `{command}` on PATH"))
}
