//! What `bee repl` checks and builds before the first model call, for either screen (the
//! inline REPL or the full-screen TUI): the same refusals, in the same order, as `bee run`.

use std::path::PathBuf;
use std::sync::Arc;

use bee_core::CompiledPolicy;

use super::super::preflight::{
    Confined, Policies, Refused, RunSlot, ToolPolicy, agents_on, confine, connect, discover_roles,
    discover_skills, file_refusal, load_provider, process_env, run_id, session_executor,
    session_policy, tool_registry, with_catalogue, workspace_dir,
};
use super::{SESSION_ID, system_prompt};
use crate::agents::{AgentSettings, Caller, Delegation, Roles};
use crate::app::Exit;
use crate::app::run::SandboxFactory;
use crate::config::{Config, Env, Flags};
use crate::panels::{Outbox, RenderTool, Surface};
use crate::provider::ProviderSpec;
use crate::records::{Enforcement, STORE_FILE, Store, Timestamp};
use crate::render::Theme;
use crate::session::{EpisodeLimits, Model, SessionSpec, ToolExecutor, Update};
use crate::skills::{SkillError, SkillSet};
use crate::tools::Registry;

/// Everything a REPL session needs, checked (the tool executor is handed over apart: the
/// screen wraps it for subagents).
pub(crate) struct Prepared {
    /// The process's environment.
    pub(crate) env: Env,
    /// The configured theme (before the colour policy).
    pub(crate) theme: Theme,
    /// The policy file, or `None` with `--host`.
    pub(crate) policy_file: Option<PathBuf>,
    /// The compiled policy.
    pub(crate) policy: Option<CompiledPolicy>,
    /// How tool calls are confined.
    pub(crate) enforcement: Enforcement,
    /// The skills found.
    pub(crate) skills: Arc<SkillSet>,
    /// The skills that did not load.
    skill_problems: Vec<SkillError>,
    /// The command's compiled policy files (the subagents' roles are compiled into it).
    pub(crate) policies: Arc<crate::policies::PolicyCache>,
    /// The compiler's warnings about the policies.
    policy_warnings: Vec<bee_core::PolicyWarning>,
    /// The roles subagents may take.
    pub(crate) roles: Arc<Roles>,
    /// Whether the model is offered `agent`.
    pub(crate) agents: bool,
    agent_settings: AgentSettings,
    /// The configuration's MCP servers, for subagents' roles to name.
    mcp_servers: std::collections::BTreeMap<String, crate::config::McpServerConfig>,
    scoped: Vec<ToolPolicy>,
    tools: Arc<Registry>,
    provider: ProviderSpec,
    factory: Box<dyn SandboxFactory>,
    /// The session's definition.
    pub(crate) spec: SessionSpec,
    /// The model.
    pub(crate) model: Model,
    /// The metrics store.
    pub(crate) store: Arc<Store>,
    /// Where records go.
    pub(crate) records_dir: PathBuf,
    /// This run's records.
    pub(crate) run_dir: PathBuf,
    /// Where the render tool puts what it placed.
    pub(crate) outbox: Outbox,
}

/// Checks and builds everything; the render tool shows its panels on `surface`.
pub(crate) fn prepare(
    flags: &Flags,
    surface: Surface,
) -> Result<(Prepared, Box<dyn ToolExecutor>), Refused> {
    let env = process_env()?;
    let config = Config::resolve_in(flags, &env).map_err(|e| file_refusal(&e))?;
    let theme = config.theme().map_err(|why| Refused(Exit::DataErr, why))?;
    let policy_file = session_policy(&config)?;
    let provider = load_provider(&config)?;
    let workspace = workspace_dir(&config)?;
    let compiler = Policies::default();
    let policy = match &policy_file {
        Some(p) => Some(compiler.compile(p, &workspace)?),
        None => None,
    };
    let (skills, skill_problems) = discover_skills(&env);
    let outbox = Outbox::default();
    let render = Arc::new(RenderTool::new(surface, outbox.clone()));
    let run_id = run_id();
    let run_slot = RunSlot::default();
    let _ = run_slot.set(run_id.clone());
    let roles = discover_roles(&env);
    let agents = agents_on(&config, &roles);
    let tools = Arc::new(tool_registry(
        &config,
        &skills,
        Some(render),
        &run_slot,
        agents.then_some(&roles),
    )?);
    // `tools.disabled` may have taken `agent` away.
    let agents = tools.session_tools().next().is_some();
    // The same checks, in the same order, as `bee run`: before any model call.
    let Confined {
        enforcement,
        scoped,
        factory,
    } = confine(
        &config,
        &tools,
        policy.as_ref().zip(policy_file.as_deref()),
        &compiler,
        "bee repl",
        "no model was called",
    )?;
    let connected = connect(&provider)?;
    let prices = provider
        .price_table()
        .map_err(|e| Refused(Exit::Software, format!("the price table is malformed: {e}")))?;
    let records_dir = config.records_dir.value.clone();
    let store = Store::open(&records_dir.join(STORE_FILE))
        .map_err(|e| Refused(Exit::Software, format!("metrics store: {e}")))?;
    let run_dir = records_dir.join(&run_id);
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| Refused(Exit::Software, format!("{}: {e}", run_dir.display())))?;
    let executor = session_executor(
        factory.as_ref(),
        &workspace,
        policy.clone(),
        &tools,
        &scoped,
        &config.mcp_servers,
    )
    .map_err(|why| Refused::no_executor(&why, "no model was called"))?;
    let spec = SessionSpec {
        run_id,
        session_id: SESSION_ID.to_owned(),
        scenario: "repl".to_owned(),
        system_prompt: with_catalogue(Some(system_prompt(&workspace, policy.is_some())), &skills),
        limits: EpisodeLimits {
            turns: config.limits.turns.as_ref().map(|s| s.value),
            tokens: config.limits.tokens.as_ref().map(|s| s.value),
            wall: config
                .limits
                .wall_seconds
                .as_ref()
                .map(|s| std::time::Duration::from_secs(s.value)),
            cost_usd: config.limits.cost_usd.as_ref().map(|s| s.value),
        },
        workspace,
        policy: policy_file.as_ref().map(|p| p.display().to_string()),
        run_started_at: Timestamp::now(),
        max_output_tokens: None,
        parent: None,
        content_hash: None,
    };
    let model = Model {
        provider: Arc::from(connected),
        kind: provider.kind.as_str().to_owned(),
        prices: Arc::new(prices),
        max_output_tokens: provider.max_output_tokens,
    };
    let prepared = Prepared {
        env,
        theme,
        policy_file,
        policy,
        enforcement,
        skills,
        skill_problems,
        policy_warnings: compiler.warnings(),
        policies: compiler.cache(),
        roles,
        agents,
        agent_settings: config.agents.settings(),
        mcp_servers: config.mcp_servers.clone(),
        scoped,
        tools,
        provider,
        factory,
        spec,
        model,
        store: Arc::new(store),
        records_dir,
        run_dir,
        outbox,
    };
    Ok((prepared, executor))
}

impl Prepared {
    /// What the session says before its first prompt, on either screen: the compiler's
    /// warnings about the policies (as `bee validate` words them) and the skills that did
    /// not load.
    pub(crate) fn start_notices(&self) -> Vec<String> {
        let warnings = self.policy_warnings.iter().map(|w| format!("warning: {w}"));
        let skills = (self.skill_problems.iter()).map(|p| format!("a skill was skipped: {p}"));
        warnings.chain(skills).collect()
    }

    /// The tools that run in scopes of their own, and their policy files.
    pub(crate) fn tool_policy_files(&self) -> Vec<(String, PathBuf)> {
        self.scoped
            .iter()
            .map(|(t, f, _)| (t.clone(), f.clone()))
            .collect()
    }

    /// What subagents run under; their events go to `observer`.
    pub(crate) fn delegation<'a>(
        &'a self,
        observer: &'a (dyn Fn(&str, Update<'_>) + Sync),
    ) -> Delegation<'a> {
        Delegation {
            run_id: self.spec.run_id.clone(),
            records_dir: self.records_dir.clone(),
            store: Some(Arc::clone(&self.store)),
            run_started_at: self.spec.run_started_at,
            factory: self.factory.as_ref(),
            provider: self.provider.clone(),
            prices: Arc::clone(&self.model.prices),
            roles: Arc::clone(&self.roles),
            tools: Arc::clone(&self.tools),
            tool_policies: self.tool_policy_files(),
            mcp_servers: self.mcp_servers.clone(),
            home: crate::app::user::invoking_home(),
            policies: Arc::clone(&self.policies),
            settings: self.agent_settings,
            observer,
        }
    }

    /// The REPL session as the caller of its subagents.
    pub(crate) fn caller(&self) -> Caller {
        Caller {
            session_id: SESSION_ID.to_owned(),
            scenario: "repl".to_owned(),
            workspace: self.spec.workspace.clone(),
            depth: 0,
            lineage: Vec::new(),
            policy_name: self
                .policy_file
                .as_ref()
                .map_or_else(|| "the session".to_owned(), |p| p.display().to_string()),
        }
    }
}
