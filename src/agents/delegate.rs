//! The `agent` tool: a session's executor that can start subagents.
//!
//! [`AgentExecutor`] wraps a session's executor and answers the calls of the tools the
//! run's registry places in the session ([`Placement::Session`]: the `agent` tool,
//! [`super::AgentTool`]); every other call goes to the wrapped executor. An `agent` call goes through
//! [`Plan`](super::plan) — role, policy, proof, tools — and only a call that passes all of it
//! starts anything: a sandbox of its own, a provider connection, and a [`Session`] linked
//! to the caller's, spending from the caller's [`Budget`](crate::session::Budget).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use bee_core::CompiledPolicy;

use super::Roles;
use super::plan::{self, Request, Target};
use crate::episode::{SandboxFactory, ToolScopes};
use crate::policies::PolicyCache;
use crate::provider::price::PriceTable;
use crate::provider::{ProviderSpec, ToolCall, ToolDef};
use crate::records::{Enforcement, Outcome, ParentLink, Store, Subagent, Timestamp, ToolState};
use crate::session::{
    Bounds, Controller, Model, ReadText, Session, SessionSpec, ToolExecution, ToolExecutor,
    TurnEnd, Update,
};
use crate::tools::Registry;

/// How far delegation may go (`[agents]` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentSettings {
    /// The deepest a subagent may be: 1 lets top-level sessions delegate, 2 lets their
    /// subagents delegate once more (`agents.max_depth`, default 2).
    pub max_depth: u32,
    /// Whether the model may pass a policy's text instead of a role (`agents.inline_policy`,
    /// default false). It gets the same proof.
    pub inline_policy: bool,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            max_depth: 2,
            inline_policy: false,
        }
    }
}

/// What every subagent of a run (or of a REPL session) is made with.
pub struct Delegation<'a> {
    /// The run (its records directory name).
    pub run_id: String,
    /// Where transcripts go (the run's directory is below it).
    pub records_dir: PathBuf,
    /// The metrics store, if any.
    pub store: Option<Arc<Store>>,
    /// When the run started.
    pub run_started_at: Timestamp,
    /// Builds each subagent's executor (its own scope).
    pub factory: &'a dyn SandboxFactory,
    /// The provider subagents use unless their role names another.
    pub provider: ProviderSpec,
    /// Its prices.
    pub prices: Arc<PriceTable>,
    /// The roles.
    pub roles: Arc<Roles>,
    /// Every tool a session of the run may be offered (a role's tools are drawn from it).
    pub tools: Arc<Registry>,
    /// Tools the configuration confines to a narrower policy (`[tools.NAME] policy`): tool
    /// name → policy file.
    pub tool_policies: Vec<(String, PathBuf)>,
    /// The configuration's MCP servers (`[mcp.servers.NAME]`): a role's `mcp_servers` names
    /// some of them.
    pub mcp_servers: std::collections::BTreeMap<String, crate::config::McpServerConfig>,
    /// The home directory `~/` in policies means.
    pub home: Option<PathBuf>,
    /// The command's compiled policy files: a role's policy is compiled at its first spawn.
    pub policies: Arc<PolicyCache>,
    /// Depth and inline policies.
    pub settings: AgentSettings,
    /// Shown every event of every subagent, with the subagent's session id.
    pub observer: &'a (dyn Fn(&str, Update<'_>) + Sync),
}

impl std::fmt::Debug for Delegation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegation")
            .field("run_id", &self.run_id)
            .field("roles", &self.roles.names().collect::<Vec<_>>())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// The session an [`AgentExecutor`] serves.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Its session id.
    pub session_id: String,
    /// Its scenario (subagents record the same).
    pub scenario: String,
    /// Its workspace (subagents work in the same one, in scopes of their own).
    pub workspace: PathBuf,
    /// How deep it is: 0 for a top-level session.
    pub depth: u32,
    /// The roles above it and its own, top first (to refuse cycles).
    pub lineage: Vec<String>,
    /// The name of its policy in refusals (a file, or `role reviewer`).
    pub policy_name: String,
}

/// A session's executor with the `agent` tool; see the module documentation.
pub struct AgentExecutor<'a> {
    inner: Box<dyn ToolExecutor + 'a>,
    delegation: &'a Delegation<'a>,
    caller: Caller,
    next: AtomicU32,
    /// The tools this layer answers: those the run's registry places in the session.
    own: Vec<String>,
}

impl std::fmt::Debug for AgentExecutor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentExecutor")
            .field("caller", &self.caller)
            .finish_non_exhaustive()
    }
}

impl<'a> AgentExecutor<'a> {
    /// Answers the session tools of `delegation`'s registry (`agent`) for the session
    /// `caller`, whose other calls go to `inner`.
    #[must_use]
    pub fn new(
        inner: Box<dyn ToolExecutor + 'a>,
        delegation: &'a Delegation<'a>,
        caller: Caller,
    ) -> Self {
        let own = delegation
            .tools
            .session_tools()
            .map(str::to_owned)
            .collect();
        Self {
            inner,
            delegation,
            caller,
            next: AtomicU32::new(0),
            own,
        }
    }

    /// Whether `tool` is one this layer answers.
    fn owns(&self, tool: &str) -> bool {
        self.own.iter().any(|n| n == tool)
    }

    /// The tools this session is offered, by name.
    fn offered(&self) -> Vec<String> {
        self.definitions().into_iter().map(|d| d.name).collect()
    }

    fn delegate(&self, call: &ToolCall, bounds: &Bounds) -> ToolExecution {
        let started = Instant::now();
        let d = self.delegation;
        let request = match Request::parse(&call.arguments) {
            Ok(r) => r,
            Err(why) => return refused(call, "?", &why, started),
        };
        let label = request.label();
        // Fail closed: a kernel-enforced caller whose policy cannot be read proves nothing.
        let effective = match (self.inner.enforcement(), self.inner.policies()) {
            (Enforcement::Kernel, None) => {
                let why = "the calling session's policy cannot be read, so nothing can be \
                           proven within it";
                return refused(call, &label, why, started);
            }
            (_, policies) => policies.map(|(requested, _)| requested),
        };
        let planned = plan::plan(
            &request,
            &Target {
                delegation: d,
                caller: &self.caller,
                caller_policy: effective.as_ref(),
                caller_tools: &self.offered(),
            },
        );
        let planned = match planned {
            Ok(p) => p,
            Err(why) => return refused(call, &label, &why, started),
        };
        if bounds.interrupt.is_raised() {
            return refused(call, &label, "the run was interrupted", started);
        }
        let n = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let session_id = format!("{}.{}-{n}", self.caller.session_id, planned.id_part);
        let policy =
            (self.inner.enforcement() == Enforcement::Kernel).then(|| planned.policy.clone());
        let confined = policy.is_some();
        let executor = match self.executor(&planned, policy, &session_id) {
            Ok(x) => x,
            Err(why) => return refused(call, &label, &why, started),
        };
        let model = match model(d, &planned) {
            Ok(m) => m,
            Err(why) => return refused(call, &label, &why, started),
        };
        let spec = SessionSpec {
            run_id: d.run_id.clone(),
            session_id: session_id.clone(),
            scenario: self.caller.scenario.clone(),
            system_prompt: Some(planned.system_prompt(&self.caller.workspace, confined)),
            limits: planned.limits.clone(),
            workspace: self.caller.workspace.clone(),
            policy: Some(planned.policy_source.clone()),
            run_started_at: d.run_started_at,
            max_output_tokens: None,
            parent: Some(ParentLink {
                episode_id: self.caller.session_id.clone(),
                call_id: call.id.clone(),
                role: label.clone(),
                depth: self.caller.depth + 1,
            }),
            content_hash: None,
        };
        let observer = |u: Update<'_>| (d.observer)(&session_id, u);
        let record = Subagent {
            call_id: call.id.clone(),
            role: label.clone(),
            session_id: Some(session_id.clone()),
            refused: None,
        };
        let mut session = match Session::start(
            spec,
            model,
            executor.as_ref(),
            &d.records_dir,
            d.store.clone(),
            &observer,
        ) {
            Ok(s) => s,
            Err(e) => {
                return refused(call, &label, &format!("its transcript: {e}"), started);
            }
        };
        if let Some(budget) = &bounds.budget {
            session = session.within(Arc::clone(budget));
        }
        let mut controller = Controller::new(session);
        let end = controller.send(&request.task, &bounds.interrupt);
        let answer = controller.session().last_answer();
        let outcome = controller.task_outcome(Outcome::Ended);
        let (state, mut content) = match end {
            Ok(TurnEnd::Done) => (ToolState::Completed, answer.clone()),
            Ok(TurnEnd::Limit(hit)) => (
                ToolState::Failed,
                format!(
                    "the subagent stopped at its {} limit: {}",
                    hit.limit.as_str(),
                    hit.detail
                ),
            ),
            Ok(TurnEnd::Refused(r)) => (
                ToolState::Failed,
                format!("the subagent's model refused: {}", r.text),
            ),
            Ok(TurnEnd::Provider(f)) => (
                ToolState::Failed,
                format!(
                    "the subagent's provider failed ({}): {}",
                    f.category, f.message
                ),
            ),
            Ok(TurnEnd::Interrupted) => {
                (ToolState::Failed, "the subagent was interrupted".to_owned())
            }
            Err(e) => (ToolState::Failed, format!("the subagent stopped: {e}")),
        };
        if state != ToolState::Completed && !answer.is_empty() {
            content.push_str(&format!("\n\nIts last answer:\n{answer}"));
        }
        if state == ToolState::Completed && content.trim().is_empty() {
            content = "(the subagent ended its turn without an answer)".to_owned();
        }
        let footer = match controller.finish(outcome, None) {
            Ok(f) => format!(
                "[subagent {session_id} ({label}): {} model call(s), {} tool call(s), {}, \
                 cost {}{}]",
                f.totals.model_calls,
                f.totals.tool_calls,
                f.totals.denials_said(),
                f.totals.cost,
                if policy_enforced(executor.as_ref()) {
                    ""
                } else {
                    "; host mode: nothing was enforced"
                }
            ),
            Err(e) => format!("[subagent {session_id}: its transcript could not be finished: {e}]"),
        };
        for note in &planned.notes {
            content.push_str(&format!("\n{note}"));
        }
        content.push_str(&format!("\n\n{footer}"));
        // Dropping the executor here tears down the subagent's scopes.
        drop(executor);
        ToolExecution {
            state,
            content,
            exit: None,
            denials: Vec::new(),
            duration: started.elapsed(),
            subagent: Some(record),
            lost_records: 0,
        }
    }

    /// The subagent's executor: its scope, per-tool scopes, and `agent` again when the role
    /// may delegate and the depth allows.
    fn executor(
        &self,
        planned: &plan::Planned,
        policy: Option<CompiledPolicy>,
        session_id: &str,
    ) -> Result<Box<dyn ToolExecutor + 'a>, String> {
        let d = self.delegation;
        let ws = &self.caller.workspace;
        let made = |p: Option<CompiledPolicy>, tools: &Arc<Registry>| {
            d.factory
                .executor(ws, p, tools)
                .map_err(|e| format!("its sandbox could not be made: {e}"))
        };
        let mut scoped = ToolScopes::new(made(policy.clone(), &planned.registry)?);
        // The subagent's scope may never be widened beyond its caller's policy.
        if let Some((caller_policy, _)) = self.inner.policies() {
            scoped = scoped.bounded_by(caller_policy, self.caller.policy_name.clone());
        }
        for (tool, source, tool_policy) in &planned.tool_scopes {
            let only = Arc::new(planned.registry.only(tool));
            let p = policy.as_ref().map(|_| tool_policy.clone());
            scoped = scoped.route(tool, source.clone(), made(p, &only)?);
        }
        for (name, config, server_policy) in &planned.mcp_servers {
            scoped = scoped.join(start_server(
                d,
                ws,
                name,
                config,
                policy.as_ref().map(|_| server_policy.clone()),
                planned.registry.limits().output_cap,
            )?);
        }
        if !planned.delegates {
            return Ok(Box::new(scoped));
        }
        let mut lineage = self.caller.lineage.clone();
        lineage.push(planned.label.clone());
        Ok(Box::new(AgentExecutor::new(
            Box::new(scoped),
            d,
            Caller {
                session_id: session_id.to_owned(),
                scenario: self.caller.scenario.clone(),
                workspace: ws.clone(),
                depth: self.caller.depth + 1,
                lineage,
                policy_name: planned.policy_name.clone(),
            },
        )))
    }
}

fn policy_enforced(executor: &dyn ToolExecutor) -> bool {
    executor.enforcement() == Enforcement::Kernel
}

/// The subagent's model: the role's provider file and model, else the run's provider file
/// (with the role's model, when it names one).
fn model(d: &Delegation<'_>, planned: &plan::Planned) -> Result<Model, String> {
    let mut spec = match &planned.provider {
        Some(path) => ProviderSpec::load(path).map_err(|e| format!("its provider file: {e}"))?,
        None => d.provider.clone(),
    };
    let own_file = planned.provider.is_some();
    if let Some(m) = &planned.model {
        spec.model.clone_from(m);
        // The file's [prices] are for its own model; another one is priced by the table.
        spec.prices = None;
    }
    let prices = if own_file || planned.model.is_some() {
        Arc::new(
            spec.price_table()
                .map_err(|e| format!("its price table is malformed: {e}"))?,
        )
    } else {
        Arc::clone(&d.prices)
    };
    let provider = spec
        .connect()
        .map_err(|e| format!("its provider could not be connected: {e}"))?;
    Ok(Model {
        provider: Arc::from(provider),
        kind: spec.kind.as_str().to_owned(),
        prices,
        max_output_tokens: spec.max_output_tokens,
    })
}

/// An `agent` call that started nothing: `could_not_run` with the reason, recorded.
fn refused(call: &ToolCall, role: &str, why: &str, started: Instant) -> ToolExecution {
    ToolExecution {
        duration: started.elapsed(),
        subagent: Some(Subagent {
            call_id: call.id.clone(),
            role: role.to_owned(),
            session_id: None,
            refused: Some(why.to_owned()),
        }),
        ..ToolExecution::could_not_run(format!("no subagent was started: {why}"))
    }
}

impl ToolExecutor for AgentExecutor<'_> {
    fn definitions(&self) -> Vec<ToolDef> {
        let mut defs = self.inner.definitions();
        // At the depth limit the tool is not offered; a call of it anyway is refused in words.
        if self.caller.depth >= self.delegation.settings.max_depth {
            defs.retain(|d| !self.owns(&d.name));
        }
        defs
    }

    fn call(&self, call: &ToolCall, bounds: &Bounds) -> ToolExecution {
        if self.owns(&call.name) {
            self.delegate(call, bounds)
        } else {
            self.inner.call(call, bounds)
        }
    }

    /// Several subagents of one turn run at the same time, each in its own scope.
    fn concurrent(&self, tool: &str) -> bool {
        self.owns(tool) || self.inner.concurrent(tool)
    }

    fn check(&self, command: &str, bounds: &Bounds) -> ToolExecution {
        self.inner.check(command, bounds)
    }

    fn enforcement(&self) -> Enforcement {
        self.inner.enforcement()
    }

    fn policies(&self) -> Option<(CompiledPolicy, CompiledPolicy)> {
        self.inner.policies()
    }

    fn engine(&self) -> Option<bee_userspace::scope::EngineKind> {
        self.inner.engine()
    }

    fn tool_policies(&self) -> std::collections::BTreeMap<String, String> {
        self.inner.tool_policies()
    }

    fn read_text(&self, path: &str, cap: usize) -> Result<ReadText, String> {
        self.inner.read_text(path, cap)
    }

    fn recent_denials(&self) -> Vec<bee_userspace::audit::AuditRecord> {
        self.inner.recent_denials()
    }

    fn bound(&self) -> Option<(CompiledPolicy, String)> {
        self.inner.bound()
    }

    fn replace_policy(&self, policy: &CompiledPolicy) -> Result<(), String> {
        self.inner.replace_policy(policy)
    }
}

/// Starts the MCP server `name` for a subagent, in a scope of its own under `policy` (proven
/// within the subagent's when it was planned).
#[cfg(feature = "mcp")]
fn start_server<'a>(
    d: &Delegation<'a>,
    workspace: &std::path::Path,
    name: &str,
    config: &crate::config::McpServerConfig,
    policy: Option<CompiledPolicy>,
    output_cap: usize,
) -> Result<Box<dyn ToolExecutor + 'a>, String> {
    let plan = crate::mcp::client::ServerPlan {
        name: name.to_owned(),
        config: config.clone(),
        policy,
    };
    crate::mcp::client::start(&plan, d.factory, workspace, output_cap)
        .map(|x| Box::new(x) as Box<dyn ToolExecutor + 'a>)
        .map_err(|e| e.message)
}

/// Without the `mcp` feature no server starts (a session with servers is refused before).
#[cfg(not(feature = "mcp"))]
fn start_server<'a>(
    _d: &Delegation<'a>,
    _workspace: &std::path::Path,
    name: &str,
    _config: &crate::config::McpServerConfig,
    _policy: Option<CompiledPolicy>,
    _output_cap: usize,
) -> Result<Box<dyn ToolExecutor + 'a>, String> {
    Err(format!(
        "this bee was built without the `mcp` feature, so the MCP server `{name}` cannot start"
    ))
}
