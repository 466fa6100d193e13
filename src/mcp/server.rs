//! The MCP server: `tools/list` from the registry's definitions, `tools/call` in a scope of
//! its own, on stdio.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorCode,
    Implementation, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, ServerInitializeError};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::map;
use super::record::CallLog;
use crate::episode::ExecutorError;
use crate::provider::{ToolCall, ToolDef};
use crate::session::{Bounds, Interrupt, ToolExecution, ToolExecutor};

/// Makes the executor of one call: a fresh scope under the session's policy (and the
/// narrower scopes of tools that have their own), torn down when it is dropped.
pub type ScopeFn = dyn Fn() -> Result<Box<dyn ToolExecutor>, ExecutorError> + Send + Sync;

/// The most bytes of arguments a call may have; larger ones are refused before any scope
/// starts (`invalid params`).
pub const MAX_ARGUMENTS: usize = 1024 * 1024;

/// How often a running call reports progress to a client that asked for it.
const PROGRESS: Duration = Duration::from_secs(1);

/// How long bee waits, once the client has gone, for its running calls to be killed and
/// their scopes torn down.
const DRAIN: Duration = Duration::from_secs(10);

/// The protocol revisions served, oldest first: the stateless 2026-07-28 (`server/discover`)
/// and, for clients that still open with `initialize`, 2025-11-25.
const VERSIONS: [ProtocolVersion; 2] =
    [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28];

/// bee's tools as an MCP server.
pub struct Server {
    tools: Vec<ToolDef>,
    scope: Arc<ScopeFn>,
    log: Arc<CallLog>,
    running: Arc<Running>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

/// The interrupts of the calls now running: raising one kills its call's processes and
/// ends the call; all are raised when the client goes away.
#[derive(Debug, Default)]
struct Running(Mutex<Vec<(String, Interrupt)>>);

impl Running {
    fn add(&self, call_id: &str, interrupt: &Interrupt) {
        if let Ok(mut v) = self.0.lock() {
            v.push((call_id.to_owned(), interrupt.clone()));
        }
    }

    fn remove(&self, call_id: &str) {
        if let Ok(mut v) = self.0.lock() {
            v.retain(|(id, _)| id != call_id);
        }
    }

    fn raise_all(&self) {
        if let Ok(v) = self.0.lock() {
            for (_, i) in v.iter() {
                i.raise();
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.0.lock().map_or(true, |v| v.is_empty())
    }
}

impl Server {
    /// Serves `tools` (the registry's definitions), each call run in a scope from `scope`
    /// and recorded in `log`.
    #[must_use]
    pub fn new(tools: Vec<ToolDef>, scope: Arc<ScopeFn>, log: Arc<CallLog>) -> Self {
        Self {
            tools,
            scope,
            log,
            running: Arc::new(Running::default()),
        }
    }

    /// Runs one call to its end in a scope of its own, on a blocking thread; `interrupt`
    /// stops it. The call is recorded and forgotten by [`Running`] on that thread, so that
    /// a call whose request was dropped (the client left) still ends in the records.
    async fn run(&self, call: ToolCall, interrupt: Interrupt) -> ToolExecution {
        let (scope, log, running) = (
            Arc::clone(&self.scope),
            Arc::clone(&self.log),
            Arc::clone(&self.running),
        );
        let bounds = Bounds {
            deadline: None,
            interrupt,
            budget: None,
        };
        let id = call.id.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let exec = match scope() {
                // The executor, and with it the call's scope, is dropped (torn down) here.
                Ok(executor) => executor.call(&call, &bounds),
                Err(why) => ToolExecution::could_not_run(format!(
                    "the call's scope could not be made: {why}"
                )),
            };
            log.result(&call.id, &exec);
            running.remove(&call.id);
            exec
        })
        .await;
        joined.unwrap_or_else(|e| {
            self.running.remove(&id);
            ToolExecution::could_not_run(format!("the call broke: {e}"))
        })
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bee", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "bee's tools: every call runs in a kernel-enforced scope of its own under the \
                 policy bee was started with. A result that says `denied by policy` was refused \
                 by the kernel; do not try to get around it.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(VERSIONS.to_vec())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "bee has no method `{}`: it serves tools (tools/list, tools/call)",
                request.method
            ),
            Some(serde_json::json!({"method": request.method})),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.tools.iter().map(map::tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !self.tools.iter().any(|t| t.name == name) {
            let known: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "there is no tool `{name}`; the tools are {}",
                    known.join(", ")
                ),
                None,
            ));
        }
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let text = arguments.to_string();
        if text.len() > MAX_ARGUMENTS {
            return Err(ErrorData::invalid_params(
                format!(
                    "the arguments of `{name}` are {} bytes; bee takes at most {MAX_ARGUMENTS}",
                    text.len()
                ),
                None,
            ));
        }
        let call_id = self.log.next_call_id();
        self.log.call(&call_id, &name, arguments);
        let interrupt = Interrupt::new();
        self.running.add(&call_id, &interrupt);
        let watcher = tokio::spawn(watch(context, interrupt.clone()));
        let call = ToolCall {
            id: call_id.clone(),
            name,
            arguments: text,
        };
        let exec = self.run(call, interrupt).await;
        watcher.abort();
        Ok(map::result(&exec).into())
    }
}

/// Watches a running call: `notifications/cancelled` for its request (or the session's
/// end) raises `interrupt`, which kills the call's processes; while it runs, a client that
/// gave a progress token hears every [`PROGRESS`] how long it has run.
async fn watch(context: RequestContext<RoleServer>, interrupt: Interrupt) {
    let token = context.meta.get_progress_token();
    let mut ran = Duration::ZERO;
    loop {
        tokio::select! {
            () = context.ct.cancelled() => {
                interrupt.raise();
                return;
            }
            () = tokio::time::sleep(PROGRESS) => {
                ran += PROGRESS;
                if let Some(token) = &token {
                    let seconds = ran.as_secs();
                    #[expect(clippy::cast_precision_loss, reason = "seconds of one call")]
                    let progress = ProgressNotificationParam::new(token.clone(), seconds as f64)
                        .with_message(format!("running for {seconds} s"));
                    let _ = context.peer.notify_progress(progress).await;
                }
            }
        }
    }
}

/// Serves `server` on standard input and output until the client closes them; then kills
/// the calls still running (their scopes with them) and ends the session's records.
///
/// # Errors
/// When the runtime cannot start or the transport fails, in words.
pub fn serve(server: Server) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    let running = Arc::clone(&server.running);
    let log = Arc::clone(&server.log);
    let served = runtime.block_on(async move {
        let wire = super::wire::stdio();
        let service = match server.serve((wire.from_client, wire.to_client)).await {
            Ok(service) => service,
            // The client left before it began: nothing was asked, so nothing failed.
            Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(e) => return Err(format!("starting the MCP session: {e}")),
        };
        // SIGTERM, SIGINT and SIGHUP end the session as the client's leaving does: every
        // running call is killed and its scope torn down, and the record is finished.
        let signalled = Arc::new(AtomicBool::new(false));
        for signal in [SIGTERM, SIGINT, SIGHUP] {
            signal_hook::flag::register(signal, Arc::clone(&signalled))
                .map_err(|e| format!("watching for signal {signal}: {e}"))?;
        }
        let token = service.cancellation_token();
        let watch = Arc::clone(&signalled);
        let watcher = tokio::spawn(async move {
            while !watch.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            token.cancel();
        });
        let quit = service
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| format!("the MCP session broke: {e}"));
        watcher.abort();
        if signalled.load(Ordering::SeqCst) {
            eprintln!("bee mcp: a signal ended the session; running calls are stopped");
        }
        // The last answers reach the client before bee goes on to exit.
        let _ = tokio::time::timeout(DRAIN, wire.written).await;
        quit
    });
    // The client is gone: whatever still runs is killed, and its scope torn down, before
    // bee exits (the blocking calls return once their interrupt is seen).
    running.raise_all();
    runtime.block_on(async {
        let waited = tokio::time::timeout(DRAIN, async {
            while !running.is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        if waited.is_err() {
            eprintln!(
                "bee mcp: calls still running {} s after the client left",
                DRAIN.as_secs()
            );
        }
    });
    runtime.shutdown_timeout(DRAIN);
    log.finish();
    served
}
