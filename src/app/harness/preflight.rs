//! What `bee run` and `bee repl` both check and build before the first model call: the
//! policy compiled against its workspace, the tools of the configuration, the records
//! directory and the run id. Each refusal is typed with the exit status it becomes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use bee_core::{CompileOptions, CompiledPolicy, PolicyError, PolicyWarning, compile_file};

use crate::agents::{AgentTool, Roles};
use crate::app::Exit;
use crate::app::user::invoking_home;
use crate::config::{Config, Confinement, Env, FileError, McpServerConfig};
use crate::episode::{ExecutorError, SandboxFactory, ToolExecutor, ToolScopes};
use crate::panels::{RENDER_TOOL, RenderTool};
use crate::policies::PolicyCache;
use crate::provider::{ErrorCategory, Provider, ProviderSpec};
use crate::records::{Enforcement, Timestamp};
use crate::sandbox::own_state::StatePath;
use crate::skills::{SkillError, SkillSet, SkillTool};
use crate::tools::{Placement, Registry};

/// A refusal before any model call: the exit status and the explanation.
pub(crate) struct Refused(pub(crate) Exit, pub(crate) String);

impl Refused {
    /// A session whose executor could not be made: the error's own status (65 a policy
    /// beyond a service's ceiling, 69 enforcement unavailable…), and `consequence` said at
    /// the end of its first line.
    pub(crate) fn no_executor(e: &ExecutorError, consequence: &str) -> Self {
        Self(
            Exit::of_service(e.status),
            with_consequence(&e.message, consequence),
        )
    }
}

/// `why`, with `consequence` said at the end of its first line: the lines after it (a
/// refused proof's counterexamples) follow as they are.
pub(crate) fn with_consequence(why: &str, consequence: &str) -> String {
    match why.split_once('\n') {
        Some((first, rest)) => format!("{first}; {consequence}\n{rest}"),
        None => format!("{why}; {consequence}"),
    }
}

pub(crate) fn file_status(e: &FileError) -> Exit {
    Exit::of_file(e)
}

pub(crate) fn file_refusal(e: &FileError) -> Refused {
    let text = match e.diagnostics() {
        Some(d) => {
            let mut s = String::new();
            for p in &d.problems {
                s.push_str(&p.to_string());
                if let Some(help) = &p.help {
                    s.push_str(&format!("\n  help: {help}"));
                }
                s.push('\n');
            }
            s
        }
        None => e.to_string(),
    };
    Refused(file_status(e), text)
}

/// The skills of the project (`.bee/skills/` under the current directory) and of the user
/// (`skills/` beside the user configuration), and the problems of those that did not load
/// (they are skipped).
pub(crate) fn discover_skills(env: &Env) -> (Arc<SkillSet>, Vec<SkillError>) {
    let user = env.user_config();
    let (skills, problems) = SkillSet::discover(&env.cwd, user.as_deref().and_then(Path::parent));
    (Arc::new(skills), problems)
}

/// The tools of the configuration: bee's built-in ones with the configured limits, the
/// `skill` tool when there are skills, the `render` tool in interactive sessions (`render`),
/// the `agent` tool where sessions may delegate (`roles`, when [`agents_on`] says so),
/// less those `tools.disabled` names (an unknown name is an invalid configuration, 65;
/// `render` is known to `bee run` too, which never offers it).
pub(crate) fn tool_registry(
    config: &Config,
    skills: &Arc<SkillSet>,
    render: Option<Arc<RenderTool>>,
    run: &RunSlot,
    roles: Option<&Arc<Roles>>,
) -> Result<Registry, Refused> {
    let mut registry = Registry::standard(config.tools.limits());
    #[cfg(not(feature = "findings"))]
    let _ = run;
    #[cfg(feature = "findings")]
    for tool in findings_tools(config, run)? {
        // Their names are none of the built-in ones.
        let _ = registry.register(tool);
    }
    if !skills.is_empty() {
        // The built-in names never include `skill`.
        let _ = registry.register(Arc::new(SkillTool::new(Arc::clone(skills))));
    }
    if let Some(render) = render {
        // Nor `render`.
        let _ = registry.register(render);
    }
    if let Some(roles) = roles {
        // Nor `agent`.
        let _ = registry.register(Arc::new(AgentTool::new(
            Arc::clone(roles),
            config.agents.settings(),
        )));
    }
    if let Some(disabled) = &config.tools.disabled {
        for name in &disabled.value {
            if name == RENDER_TOOL && registry.placement(name).is_none() {
                continue;
            }
            registry.remove(name).map_err(|e| {
                Refused(
                    Exit::DataErr,
                    format!("{}: tools.disabled: {e}", disabled.origin),
                )
            })?;
        }
    }
    Ok(registry)
}

/// The tools of the findings ledger (`record_finding`, `list_findings`) and, with feature
/// `scanners`, `scan`: all record into the configured ledger, at the workspace's `HEAD`.
#[cfg(feature = "findings")]
fn findings_tools(
    config: &Config,
    run: &RunSlot,
) -> Result<Vec<Arc<dyn crate::tools::Tool>>, Refused> {
    use crate::findings::{Ledger, Recorder, git::head_commit};
    use crate::tools::findings::{ListFindings, RecordFinding};
    let recorder = Arc::new(
        Recorder::new(
            Ledger::at(&config.ledger.value),
            head_commit(&config.workspace.value),
        )
        .in_run(Arc::clone(run)),
    );
    #[cfg_attr(
        not(feature = "scanners"),
        expect(unused_mut, reason = "scan adds to it")
    )]
    let mut tools: Vec<Arc<dyn crate::tools::Tool>> = vec![
        Arc::new(RecordFinding::new(Arc::clone(&recorder))),
        Arc::new(ListFindings::new(Arc::clone(&recorder))),
    ];
    #[cfg(feature = "scanners")]
    tools.push(Arc::new(crate::tools::scan::ScanTool::from_config(
        config, recorder,
    )));
    Ok(tools)
}

/// What a policy file is compiled with: `workspace` for relative paths, the invoking user's
/// home for `~`.
fn compile_options(workspace: &Path) -> CompileOptions {
    CompileOptions {
        base: workspace.to_owned(),
        home: invoking_home(),
    }
}

/// The refusal of `policy`'s compilation: 65 invalid (each problem drawn), 66 missing, 77
/// unreadable (the policy or a file it includes).
fn policy_refusal(policy: &Path, e: PolicyError) -> Refused {
    let status = Exit::of_policy(&e);
    match e {
        e @ PolicyError::Read { .. } => Refused(status, e.to_string()),
        PolicyError::Invalid(diagnostics) => {
            let mut text = format!("{}: the policy is invalid\n", policy.display());
            for problem in diagnostics.problems {
                text.push_str(&format!("{:?}\n", miette::Report::new(problem)));
            }
            Refused(status, text)
        }
    }
}

/// Compiles a policy against the workspace it will confine, dropping the warnings: for a
/// workspace copy or a subagent whose policy file [`Policies`] compiled (and warned about)
/// before.
pub(crate) fn compile_policy(policy: &Path, workspace: &Path) -> Result<CompiledPolicy, Refused> {
    compile_file(policy, &compile_options(workspace))
        .map(|c| c.policy)
        .map_err(|e| policy_refusal(policy, e))
}

/// A command's policies, each compiled once per workspace: a run names one policy file for
/// its plan, its engine check, its tool policies and learn mode, and compiles it once. The
/// compiler's warnings are kept, once per file, for the command to show as `bee validate`
/// does ([`Policies::warnings`]).
#[derive(Debug, Default)]
pub(crate) struct Policies {
    cache: Arc<PolicyCache>,
    warnings: Mutex<Vec<PolicyWarning>>,
}

impl Policies {
    /// `policy` compiled against `workspace`: from the cache, or compiled now.
    ///
    /// # Errors
    /// The refusal of [`compile_policy`], each time it is asked (a refusal is not cached).
    pub(crate) fn compile(
        &self,
        policy: &Path,
        workspace: &Path,
    ) -> Result<CompiledPolicy, Refused> {
        let bee_core::Compiled {
            policy: compiled,
            warnings,
        } = self
            .cache
            .compile_file(policy, &compile_options(workspace))
            .map_err(|e| policy_refusal(policy, e))?;
        if let Ok(mut kept) = self.warnings.lock() {
            for w in warnings {
                if !kept.contains(&w) {
                    kept.push(w);
                }
            }
        }
        Ok(compiled)
    }

    /// The compiled files, for the subagents' roles and tool policies.
    pub(crate) fn cache(&self) -> Arc<PolicyCache> {
        Arc::clone(&self.cache)
    }

    /// The warnings of every policy compiled so far, each once, in the order they were met.
    pub(crate) fn warnings(&self) -> Vec<PolicyWarning> {
        self.warnings.lock().map(|w| w.clone()).unwrap_or_default()
    }
}

/// A command's run id, named before it is known and set once: `bee run` builds its tools
/// while planning and learns its run id when its records directory is opened (`--resume`
/// continues an earlier run); the findings tools record their sightings in it.
pub(crate) type RunSlot = Arc<std::sync::OnceLock<String>>;

/// The current directory and home of this process (66 when the current directory is gone).
pub(crate) fn process_env() -> Result<Env, Refused> {
    Env::from_process().map_err(|e| {
        Refused(
            Exit::NoInput,
            format!("cannot determine the current directory: {e}"),
        )
    })
}

/// The session's policy file, or `None` in host mode (64 for neither or both), and its
/// workspace (66 when it is not a directory): what a single-session command (`bee repl`,
/// `bee mcp`) asks of the configuration before it compiles anything.
pub(crate) fn session_policy(config: &Config) -> Result<Option<PathBuf>, Refused> {
    match config.require_policy_or_host() {
        Ok(Confinement::Policy(p)) => Ok(Some(p.value.clone())),
        Ok(Confinement::Host(_)) => Ok(None),
        Err(refusal) => Err(Refused(Exit::Usage, refusal.to_string())),
    }
}

/// The configured workspace, which must be a directory (66).
pub(crate) fn workspace_dir(config: &Config) -> Result<PathBuf, Refused> {
    let workspace = config.workspace.value.clone();
    if workspace.is_dir() {
        Ok(workspace)
    } else {
        Err(Refused(
            Exit::NoInput,
            format!("the workspace {} is not a directory", workspace.display()),
        ))
    }
}

/// How one session's tools are confined: the tools with policies of their own, proven
/// within the session's, and the sandbox factory, which proves that the kernel enforces
/// every policy before anything runs.
pub(crate) struct Confined {
    /// Kernel scopes, or host processes (`--host`).
    pub(crate) enforcement: Enforcement,
    /// The tools confined to narrower policies.
    pub(crate) scoped: Vec<ToolPolicy>,
    /// Where the session's executors come from.
    pub(crate) factory: Box<dyn SandboxFactory>,
}

/// bee's own state that `config` names, wherever it lies: the findings ledger, the records
/// directory, the audit file, the current directory's `.bee` and the user's configuration
/// directory. Each scope protects it like the workspace's `.bee/`
/// (`crate::sandbox::own_state`), so a configuration that moves it into the workspace does not
/// put it within a tool's reach.
pub(crate) fn own_state(config: &Config) -> Vec<StatePath> {
    let absolute = |p: &Path| std::path::absolute(p).ok();
    let mut state = Vec::new();
    state.extend(absolute(&config.ledger.value).map(StatePath::File));
    state.extend(absolute(&config.records_dir.value).map(StatePath::Dir));
    if let Some(audit) = &config.audit {
        state.extend(absolute(&audit.value).map(StatePath::File));
    }
    // The current directory's `.bee` (each sandbox leaves it out where it is its
    // workspace's own: a run's episodes may work in other directories) and the user's
    // configuration.
    state.extend(crate::sandbox::own_state::of_this_process());
    state
}

/// Confines one session's `tools` under `policy` (compiled from `policy_file`; `None` in host
/// mode): per-tool policies compiled by `compiler` and proven within it (65/66), then the
/// sandbox factory for the configured engine (69 when the kernel cannot enforce, 77 when a
/// privilege is missing). `command` names the command in the refusal, and `nothing` says what
/// did not happen (e.g. "no model was called").
pub(crate) fn confine(
    config: &Config,
    tools: &Registry,
    policy: Option<(&CompiledPolicy, &Path)>,
    compiler: &Policies,
    command: &str,
    nothing: &str,
) -> Result<Confined, Refused> {
    let workspace = &config.workspace.value;
    let scoped = tool_policies(config, tools, workspace, policy, compiler)?;
    super::mcp_servers::check(&config.mcp_servers, workspace, policy, compiler)?;
    let enforcement = if policy.is_some() {
        Enforcement::Kernel
    } else {
        Enforcement::Host
    };
    let policies: Vec<&CompiledPolicy> = policy.map(|(p, _)| p).into_iter().collect();
    let factory = crate::app::run::sandbox_factory(
        enforcement,
        config.engine.value,
        config.service.value,
        &policies,
    )
    .map_err(|refusal| {
        // The command prints its own prefix on the first line.
        let text = refusal.render(command, nothing);
        let prefix = format!("{command}: ");
        let text = text.strip_prefix(&prefix).unwrap_or(&text).trim_end();
        Refused(refusal.exit(), text.to_owned())
    })?;
    let mut factory = factory;
    factory.keep_from_scopes(own_state(config));
    Ok(Confined {
        enforcement,
        scoped,
        factory,
    })
}

/// A run id: UTC time and process id, e.g. `20261130T062501Z-4242`.
pub(crate) fn run_id() -> String {
    let ts = Timestamp::now().to_string();
    let compact: String = ts
        .chars()
        .take_while(|c| *c != '.')
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    static RUNS: AtomicU32 = AtomicU32::new(0);
    match RUNS.fetch_add(1, Ordering::SeqCst) {
        0 => format!("{compact}Z-{}", std::process::id()),
        n => format!("{compact}Z-{}-{n}", std::process::id()),
    }
}

/// The configured provider file, loaded (64 when none is configured, 65/66 for a bad or
/// missing file).
pub(crate) fn load_provider(config: &Config) -> Result<ProviderSpec, Refused> {
    let Some(provider) = &config.provider else {
        return Err(Refused(
            Exit::Usage,
            "no provider: pass --provider FILE (or set `provider` in a configuration file)"
                .to_owned(),
        ));
    };
    ProviderSpec::load(&provider.value).map_err(|e| {
        let mut refused = file_refusal(&e);
        if let (FileError::Read { .. }, Ok(cwd)) = (&e, std::env::current_dir())
            && let Some(hint) = crate::config::relative_path_hint("provider", provider, &cwd)
        {
            refused.1 = format!("{}\n  help: {hint}", refused.1.trim_end());
        }
        refused
    })
}

/// Connects the provider once, before any model call: a missing or refused key is 77, any
/// other failure the status of its category.
pub(crate) fn connect(provider: &ProviderSpec) -> Result<Box<dyn Provider>, Refused> {
    provider.connect().map_err(|e| {
        let status = match e.category() {
            ErrorCategory::Auth => Exit::Auth,
            category => Exit::Provider(category),
        };
        Refused(status, format!("provider: {e}"))
    })
}

/// The system prompt with the skills' catalogue after it (when there are skills).
pub(crate) fn with_catalogue(system: Option<String>, skills: &SkillSet) -> Option<String> {
    let catalogue = skills.catalogue();
    match (system, catalogue.is_empty()) {
        (s, true) => s,
        (Some(s), false) => Some(format!("{s}\n\n{catalogue}")),
        (None, false) => Some(catalogue),
    }
}

/// The roles of the project (`.bee/agents/`) and of the user (`agents/` beside the user
/// configuration).
pub(crate) fn discover_roles(env: &Env) -> Arc<Roles> {
    let user = env.user_config();
    Arc::new(Roles::discover(
        &env.cwd,
        user.as_deref().and_then(Path::parent),
        env.home.as_deref(),
    ))
}

/// Whether sessions are offered the `agent` tool: some role exists (or inline policies are
/// allowed) and the depth limit lets a top-level session delegate.
pub(crate) fn agents_on(config: &Config, roles: &Roles) -> bool {
    let s = config.agents.settings();
    s.max_depth >= 1 && (!roles.is_empty() || s.inline_policy)
}

/// A tool confined to a narrower policy: its name, the policy file and the policy.
pub(crate) type ToolPolicy = (String, PathBuf, CompiledPolicy);

/// The configuration's per-tool policies (`[tools.NAME] policy`), compiled against
/// `workspace` and — when the session has a policy — proven within it (65 when a tool is
/// unknown or runs in bee itself, when a policy is invalid or grants more than the session's;
/// 66 when a file is missing).
pub(crate) fn tool_policies(
    config: &Config,
    registry: &Registry,
    workspace: &Path,
    session: Option<(&CompiledPolicy, &Path)>,
    policies: &Policies,
) -> Result<Vec<ToolPolicy>, Refused> {
    let mut out = Vec::new();
    for (tool, file) in &config.tools.policies {
        let at = format!("{}: tools.{tool}.policy", file.origin);
        match registry.placement(tool) {
            None => {
                let known: Vec<&str> = registry.names().collect();
                return Err(Refused(
                    Exit::DataErr,
                    format!(
                        "{at}: there is no tool `{tool}` (the tools are {})",
                        known.join(", ")
                    ),
                ));
            }
            Some(Placement::Harness | Placement::Session) => {
                return Err(Refused(
                    Exit::DataErr,
                    format!(
                        "{at}: `{tool}` runs in bee itself, not in a scope, so no policy can \
                         confine it"
                    ),
                ));
            }
            Some(_) => {}
        }
        let policy = policies.compile(&file.value, workspace)?;
        if let Some((parent, parent_file)) = session {
            let proof = bee_core::attenuate(&policy, parent);
            if !proof.is_subset() {
                return Err(Refused(
                    Exit::DataErr,
                    format!(
                        "{at}: {}",
                        proof.refusal(
                            &file.value.display().to_string(),
                            &parent_file.display().to_string()
                        )
                    ),
                ));
            }
        }
        out.push((tool.clone(), file.value.clone(), policy));
    }
    Ok(out)
}

/// A session's executor: its scope under `policy`, a scope of its own for each tool with a
/// narrower policy, and one for each MCP server of `servers`, whose tools join the session's.
///
/// # Errors
/// Why a sandbox could not be made or a server could not start, with the status a command
/// reports for it.
pub(crate) fn session_executor(
    factory: &dyn SandboxFactory,
    workspace: &Path,
    policy: Option<CompiledPolicy>,
    registry: &Arc<Registry>,
    tool_policies: &[ToolPolicy],
    servers: &BTreeMap<String, McpServerConfig>,
) -> Result<Box<dyn ToolExecutor>, ExecutorError> {
    let enforced = policy.is_some();
    let joined = super::mcp_servers::start(
        servers,
        factory,
        workspace,
        policy.as_ref(),
        registry.limits().output_cap,
    )?;
    let base = factory.executor(workspace, policy, registry)?;
    if tool_policies.is_empty() && joined.is_empty() {
        return Ok(base);
    }
    let mut scopes = ToolScopes::new(base);
    for server in joined {
        scopes = scopes.join(server);
    }
    for (tool, file, p) in tool_policies {
        let only = Arc::new(registry.only(tool));
        let x = factory.executor(workspace, enforced.then(|| p.clone()), &only)?;
        scopes = scopes.route(tool, file.display().to_string(), x);
    }
    Ok(Box::new(scopes))
}

/// Compiles already-checked per-tool policies against another workspace (an episode's copy)
/// and proves each within `session` again.
///
/// # Errors
/// Why one cannot be used, in words.
pub(crate) fn compile_tool_policies(
    files: &[(String, PathBuf)],
    workspace: &Path,
    session: Option<&CompiledPolicy>,
) -> Result<Vec<ToolPolicy>, String> {
    let mut out = Vec::new();
    for (tool, file) in files {
        let policy = compile_policy(file, workspace).map_err(|Refused(_, why)| why)?;
        if let Some(parent) = session {
            let proof = bee_core::attenuate(&policy, parent);
            if !proof.is_subset() {
                return Err(proof.refusal(&file.display().to_string(), "the session's policy"));
            }
        }
        out.push((tool.clone(), file.clone(), policy));
    }
    Ok(out)
}
