//! One call of a server's tool: sent on the client's runtime, bounded by the call's timeout
//! and the run's interrupt, answered with the call's denials (and those the server was
//! refused between its calls, said apart); a server that fails is stopped with its scope.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};

use super::answer::{result_text, stderr_note, write_audit};
use super::{SEPARATOR, ServerExecutor};
use crate::provider::{ToolCall, ToolDef};
use crate::records::{Enforcement, ToolState};
use crate::sandbox::Sandbox;
use crate::session::{Bounds, ToolDenial, ToolExecution, ToolExecutor};
use crate::tools::{self, denial};

/// How often a waiting call asks whether the run was interrupted.
const POLL: Duration = Duration::from_millis(50);

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
        // Records lost since the server's last call, between calls or during this one: any
        // may have been one of its denials, said either way.
        let lost_records = connection
            .sandbox
            .as_ref()
            .map_or(0, Sandbox::take_lost_records);
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
            content: tools::with_lost_records(content, lost_records),
            exit: None,
            denials: events,
            duration: started.elapsed(),
            subagent: None,
            lost_records,
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
