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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bee_core::CompiledPolicy;
use bee_userspace::audit::{AuditRecord, write_jsonl};
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use tokio::net::unix::pipe;

use crate::config::McpServerConfig;
use crate::episode::{AuditSink, ExecutorError, SandboxFactory};
use crate::provider::{ToolCall, ToolDef};
use crate::records::{Enforcement, ToolState};
use crate::sandbox::{LongLived, Sandbox};
use crate::session::{Bounds, ToolDenial, ToolExecution, ToolExecutor};
use crate::tools::denial;

/// What separates a server's name from its tools' names in the names the model sees.
pub const SEPARATOR: &str = "__";

/// Most tools one server may offer.
pub const MAX_TOOLS: usize = 128;

/// Most pages of `tools/list` read from one server.
const MAX_PAGES: usize = 32;

/// Most bytes of a tool's description given to the model; a longer one is cut.
const MAX_DESCRIPTION: usize = 4096;

/// Most bytes of a tool's input schema (as JSON); a server with a larger one is refused.
const MAX_SCHEMA: usize = 64 * 1024;

/// Most bytes of a server's standard error kept (its last ones), for the reason a server
/// that failed gives.
const STDERR_TAIL: usize = 4096;

/// Most bytes of one JSON-RPC message read from a server; a longer line is dropped.
const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// How often a waiting call asks whether the run was interrupted.
const POLL: Duration = Duration::from_millis(50);

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

/// The server's tools, page by page, stopping as soon as there are more than [`MAX_TOOLS`]
/// or more than [`MAX_PAGES`] pages (a server that pages on forever cannot fill bee's memory).
async fn list_tools(peer: &rmcp::Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        let page = peer
            .list_tools(Some(params))
            .await
            .map_err(|e| format!("did not list its tools: {e}"))?;
        tools.extend(page.tools);
        if tools.len() > MAX_TOOLS {
            return Err(format!(
                "offers more than the {MAX_TOOLS} tools bee takes from one server"
            ));
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(format!("lists its tools in more than {MAX_PAGES} pages"))
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

/// The model's definitions of a server's tools: `SERVER__TOOL`, its description and input
/// schema.
fn definitions(server: &str, tools: Vec<rmcp::model::Tool>) -> Result<Vec<ToolDef>, String> {
    if tools.len() > MAX_TOOLS {
        return Err(format!(
            "offers {} tools, more than the {MAX_TOOLS} bee takes from one server",
            tools.len()
        ));
    }
    let mut out: Vec<ToolDef> = Vec::new();
    for tool in tools {
        let full = format!("{server}{SEPARATOR}{}", tool.name);
        let nameable = !tool.name.is_empty()
            && full.len() <= 64
            && full
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !nameable {
            return Err(format!(
                "offers a tool `{}` that cannot be named to a model as `{full}` (1 to 64 \
                 letters, digits, `_` and `-` in all)",
                tool.name
            ));
        }
        if out.iter().any(|d| d.name == full) {
            return Err(format!("offers two tools named `{}`", tool.name));
        }
        let parameters = serde_json::Value::Object((*tool.input_schema).clone());
        let size = parameters.to_string().len();
        if size > MAX_SCHEMA {
            return Err(format!(
                "offers a tool `{}` whose input schema is {size} bytes, more than the \
                 {MAX_SCHEMA} bee gives a model",
                tool.name
            ));
        }
        let mut description = tool.description.map(|d| d.into_owned()).unwrap_or_default();
        if description.len() > MAX_DESCRIPTION {
            let mut end = MAX_DESCRIPTION;
            while !description.is_char_boundary(end) {
                end -= 1;
            }
            description.truncate(end);
            description.push_str(" […]");
        }
        out.push(ToolDef {
            name: full,
            description,
            parameters,
        });
    }
    Ok(out)
}

/// Keeps the last [`STDERR_TAIL`] bytes of `err` in `tail`, on a thread of its own until the
/// pipe closes.
fn keep_tail(mut err: impl std::io::Read + Send + 'static, tail: Arc<Mutex<Vec<u8>>>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Ok(mut t) = tail.lock() {
                t.extend_from_slice(&buf[..n]);
                let over = t.len().saturating_sub(STDERR_TAIL);
                t.drain(..over);
            }
        }
    });
}

/// Appends `records` to the `--audit` file, when there is one.
fn write_audit(audit: Option<&AuditSink>, records: &[AuditRecord]) {
    let Some(audit) = audit else { return };
    if let Ok(mut out) = audit.lock() {
        for record in records {
            // A failed write must not end the session; the transcript keeps call denials.
            if write_jsonl(&mut *out, record).is_err() {
                break;
            }
        }
        let _ = std::io::Write::flush(&mut *out);
    }
}

fn stderr_note(tail: &Mutex<Vec<u8>>) -> String {
    let text = tail
        .lock()
        .map(|t| String::from_utf8_lossy(&t).trim().to_owned())
        .unwrap_or_default();
    if text.is_empty() {
        String::new()
    } else {
        format!("\nits last output on stderr:\n{text}")
    }
}

fn denial_note(denials: &[AuditRecord]) -> String {
    if denials.is_empty() {
        return String::new();
    }
    format!("\n{}", denial::denial_lines(denials).join("\n"))
}

/// The text of a tool result for the model: its text content, what else it holds named.
fn result_text(result: &CallToolResult, cap: usize) -> String {
    let mut parts = Vec::new();
    for block in &result.content {
        let v = serde_json::to_value(block).unwrap_or_default();
        match v["type"].as_str() {
            Some("text") => parts.push(v["text"].as_str().unwrap_or_default().to_owned()),
            Some("resource_link") | Some("resource") => parts.push(format!(
                "[resource {}]",
                v["uri"]
                    .as_str()
                    .or_else(|| v["resource"]["uri"].as_str())
                    .unwrap_or("?")
            )),
            Some(kind) => parts.push(format!(
                "[{kind} content, {}]",
                v["mimeType"].as_str().unwrap_or("no type")
            )),
            None => {}
        }
    }
    if parts.is_empty()
        && let Some(s) = &result.structured_content
    {
        parts.push(s.to_string());
    }
    let mut text = parts.join("\n");
    if text.len() > cap {
        let mut end = cap;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(&format!("\n[output truncated at {cap} bytes]"));
    }
    text
}

/// How a call that reached the server ended, before its denials are added.
enum Ended {
    Result(CallToolResult),
    /// The server answered with a JSON-RPC error: the call failed, the server goes on.
    Refused(String),
    Error(String),
    TimedOut(Duration),
    Interrupted,
}

impl ServerExecutor {
    /// The server's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The policy file of the server's scope.
    #[must_use]
    pub fn policy_source(&self) -> &str {
        &self.source
    }

    fn send(
        &self,
        client: &RunningService<RoleClient, ()>,
        params: CallToolRequestParams,
        limit: Duration,
        bounds: &Bounds,
    ) -> Ended {
        let peer = client.peer().clone();
        let interrupt = bounds.interrupt.clone();
        self.runtime.block_on(async move {
            let call = peer.call_tool(params);
            let watch = async {
                while !interrupt.is_raised() {
                    tokio::time::sleep(POLL).await;
                }
            };
            tokio::select! {
                r = tokio::time::timeout(limit, call) => match r {
                    Ok(Ok(result)) => Ended::Result(result),
                    Ok(Err(rmcp::ServiceError::McpError(e))) => Ended::Refused(format!(
                        "the server answered with error {}: {}",
                        e.code.0, e.message
                    )),
                    Ok(Err(e)) => Ended::Error(e.to_string()),
                    Err(_) => Ended::TimedOut(limit),
                },
                () = watch => Ended::Interrupted,
            }
        })
    }
}

impl ToolExecutor for ServerExecutor {
    fn definitions(&self) -> Vec<ToolDef> {
        self.defs.clone()
    }

    fn call(&self, call: &ToolCall, bounds: &Bounds) -> ToolExecution {
        let started = Instant::now();
        let Some(tool) = call
            .name
            .strip_prefix(&self.name)
            .and_then(|t| t.strip_prefix(SEPARATOR))
            .filter(|_| self.defs.iter().any(|d| d.name == call.name))
        else {
            return ToolExecution::could_not_run(format!(
                "the MCP server `{}` has no tool `{}`",
                self.name, call.name
            ));
        };
        let arguments = match call.parsed_arguments() {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(_) => {
                return ToolExecution::could_not_run("the arguments must be a JSON object");
            }
            Err(e) => {
                return ToolExecution::could_not_run(format!("the arguments are not JSON: {e}"));
            }
        };
        if bounds.interrupt.is_raised() {
            return ToolExecution::could_not_run("the run was interrupted before this call");
        }
        let mut live = match self.live.lock() {
            Ok(l) => l,
            Err(_) => return ToolExecution::could_not_run("the MCP client is unusable"),
        };
        let connection = match &mut *live {
            Ok(c) => c,
            Err(why) => {
                let body = format!("the MCP server `{}` is not running: {why}", self.name);
                return ToolExecution::could_not_run(denial::render(
                    ToolState::CouldNotRun,
                    &body,
                    &[],
                    false,
                ));
            }
        };
        let Some(client) = &connection.client else {
            return ToolExecution::could_not_run("the MCP server is not connected");
        };
        let limit = bounds
            .remaining()
            .map_or(self.call_timeout, |left| left.min(self.call_timeout));
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        // What the server was refused since its last call (on its own, between calls) is not
        // this call's: said apart, and kept.
        let between = connection
            .sandbox
            .as_ref()
            .map(Sandbox::pending_denials)
            .unwrap_or_default();
        let ended = self.send(client, params, limit, bounds);
        let mut denials = connection
            .sandbox
            .as_ref()
            .map(Sandbox::denials)
            .unwrap_or_default();
        let (state, body) = match ended {
            Ended::Result(result) if result.is_error == Some(true) => {
                (ToolState::Failed, result_text(&result, self.output_cap))
            }
            Ended::Result(result) => (ToolState::Completed, result_text(&result, self.output_cap)),
            Ended::Refused(why) => (ToolState::Failed, why),
            gone => {
                let why = match gone {
                    Ended::TimedOut(d) => format!(
                        "it did not answer within {} s and was stopped",
                        d.as_secs_f64().ceil()
                    ),
                    Ended::Interrupted => {
                        "the run was interrupted; the server was stopped".to_owned()
                    }
                    Ended::Error(e) => {
                        let exited = connection.process.wait_timeout(Duration::from_millis(200));
                        match exited {
                            Some(status) => format!("it exited ({status}) during the call: {e}"),
                            None => format!("the call failed and the server was stopped: {e}"),
                        }
                    }
                    Ended::Result(_) | Ended::Refused(_) => unreachable!("handled above"),
                };
                denials.extend(connection.end(&self.runtime));
                let body = format!(
                    "the MCP server `{}`: {why}{}",
                    self.name,
                    stderr_note(&self.stderr)
                );
                *live = Err(why);
                (ToolState::CouldNotRun, body)
            }
        };
        write_audit(self.audit.as_ref(), &between);
        write_audit(self.audit.as_ref(), &denials);
        let mut content = denial::render(state, &body, &denials, true);
        if !between.is_empty() {
            content.push_str(&format!(
                "\n\nnote: between its calls, before this one, the server was refused:\n{}",
                denial::denial_lines(&between).join("\n")
            ));
        }
        let mut events: Vec<ToolDenial> = between
            .iter()
            .filter_map(ToolDenial::from_audit)
            .map(|mut d| {
                d.explanation = format!(
                    "before this call, between the server's calls: {}",
                    d.explanation
                );
                d
            })
            .collect();
        events.extend(denials.iter().filter_map(ToolDenial::from_audit));
        ToolExecution {
            state,
            content,
            exit: None,
            denials: events,
            duration: started.elapsed(),
            subagent: None,
        }
    }

    fn check(&self, _command: &str, _bounds: &Bounds) -> ToolExecution {
        ToolExecution::could_not_run("an MCP server runs no success check")
    }

    fn enforcement(&self) -> Enforcement {
        self.enforcement
    }

    fn tool_policies(&self) -> BTreeMap<String, String> {
        self.defs
            .iter()
            .map(|d| (d.name.clone(), self.source.clone()))
            .collect()
    }
}

impl Drop for ServerExecutor {
    fn drop(&mut self) {
        if let Ok(live) = self.live.get_mut()
            && let Ok(connection) = live
        {
            let late = connection.end(&self.runtime);
            write_audit(self.audit.as_ref(), &late);
        }
    }
}
