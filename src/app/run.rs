//! `bee run`: run a scenario's episodes, headless, and exit with a status that says how
//! they went.
//!
//! The order fails closed. Configuration, scenario, provider file and policies are read and
//! checked first (64 usage, 65 invalid file, 66 missing file); neither a policy nor `--host`
//! is a refusal (64). The sandbox is then obtained through [`sandbox_factory`], which asks what
//! `bee exec` asks ([`super::enforcement`]) — when the kernel cannot enforce, bee exits 69
//! before any model call, and when it could but this process lacks a privilege (a capability,
//! a writable pin directory, a cgroup it may create scopes in and join) it exits 77 — and the
//! provider is connected (77 for a missing or refused key). Only then do episodes run,
//! `--concurrency N` at a time, each on a thread of its own with its own workspace copy and its
//! own executor (scope).
//!
//! Exit statuses (see `docs/episodes.md`); when episodes end differently, the first line of
//! this table that applies wins:
//!
//! | status | meaning |
//! |---|---|
//! | 130 | interrupted (Ctrl-C); every transcript ends with `episode_finished` |
//! | 69 | enforcement unavailable: the kernel cannot enforce (also before any episode ran) |
//! | 77 | the provider refused the API key, or it is not set |
//! | 78 | the provider has no such endpoint or model (check `base_url` and `model`) |
//! | 76 | the provider refused the request as sent, or answered in a way bee cannot use |
//! | 74 | the provider failed on its side (5xx, an in-stream server error) or could not be reached |
//! | 75 | the provider is rate limiting or overloaded: try again later |
//! | 70 | internal error: records could not be written |
//! | 3 | a hard limit (turns, tokens, wall time, cost, an answer cut off at the output limit) ended an episode |
//! | 2 | the model refused the task, or a content filter stopped its answer |
//! | 1 | an episode's success check failed |
//! | 0 | every episode passed |
//! | 64 | usage: bad flags; no policy and no `--host`; both a policy and `--host` |
//! | 65 | an invalid scenario, provider, configuration or policy file |
//! | 66 | a file or directory that does not exist |
//! | 73 | the run directory exists (without `--resume`) or another process is writing it |
//! | 77 | before any episode: a file exists but may not be read; enforcement would work, but this process lacks a privilege it needs |

mod batch;
mod progress;
mod sandbox;

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bee_core::CompiledPolicy;
use clap::Parser;

use super::Exit;
use super::enforcement;
use super::learn::Learn;
use super::setup::{
    Policies, Refused, RunSlot, agents_on, compile_policy, compile_tool_policies, connect,
    discover_roles, discover_skills, file_refusal, load_provider, session_executor, tool_policies,
    tool_registry, with_catalogue,
};
use crate::agents::{AgentExecutor, AgentSettings, Caller, Delegation, Roles};
use crate::config::{Config, EngineChoice, Env, Flags, Origin, Refusal, Sourced};
pub use crate::episode::SandboxFactory;
use crate::episode::{
    EpisodeLimits, EpisodeSpec, Interrupt, Model, ToolExecutor, Update, copy_path, copy_workspace,
    run_episode,
};
use crate::provider::ProviderSpec;
use crate::records::{
    Enforcement, EpisodeRecorder, EpisodeStarted, Limits, Outcome, PolicyRecord, RunSummary,
    STORE_FILE, Store, Timestamp,
};
use crate::scenario::{EpisodeDef, Scenario, WorkspaceMode};
use crate::skills::SkillSet;
use crate::tools::Registry;
use progress::{Progress, Style};

/// Arguments of `bee run`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The scenario file (or a directory of scenario files).
    #[arg(long, value_name = "FILE")]
    pub scenario: PathBuf,
    /// Configuration: --policy, --provider, --host, --records-dir, limits, --config.
    #[command(flatten)]
    pub flags: Flags,
    /// Where records go (the same as --records-dir).
    #[arg(long, value_name = "DIR", conflicts_with = "records_dir")]
    pub records: Option<PathBuf>,
    /// Run up to N episodes at once, each with its own workspace copy and scope.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// Print progress and the result as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// Keep each episode's workspace copy (they are removed at the end otherwise).
    #[arg(long)]
    pub keep_workspaces: bool,
    /// Run only shard K of N (numbered from 1): a stable share of the scenario's episodes.
    #[arg(long, value_name = "K/N", conflicts_with = "shards")]
    pub shard: Option<crate::scenario::Shard>,
    /// Split into N shards and run the one JOB_COMPLETION_INDEX names (counted from 0, as a
    /// Kubernetes Indexed Job sets it).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub shards: Option<u32>,
    /// Name the run directory (the run id) instead of a fresh timestamped one.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Continue an earlier run of this scenario (and shard): completed episodes are kept,
    /// interrupted ones run again. Starts a new run when there is none.
    #[arg(long)]
    pub resume: bool,
    /// `JOB_COMPLETION_INDEX` from the environment (`bee run` reads it; used with --shards).
    #[arg(skip)]
    pub job_completion_index: Option<String>,
    /// Learn mode: do NOT enforce the episodes' policy but allow and record what it denies,
    /// then write the smallest policy that would have allowed the run to OUT. Every episode
    /// must share one policy and one workspace. Command line only: no configuration key.
    #[arg(long, value_name = "OUT.toml")]
    pub learn: Option<PathBuf>,
}

#[derive(Debug, Parser)]
#[command(name = "bee run")]
struct RunCli {
    #[command(flatten)]
    args: Args,
}

/// Parses `bee run` arguments (without the `bee run` words), as the command line would.
///
/// # Errors
/// clap's error for bad arguments.
pub fn parse_args<I, T>(args: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv = std::iter::once(std::ffi::OsString::from("bee-run"))
        .chain(args.into_iter().map(Into::into));
    RunCli::try_parse_from(argv).map(|c| c.args)
}

/// The sandbox for `enforcement`: the one place `bee run` obtains its tools.
///
/// `Kernel` proves that this kernel enforces (a program is loaded, not the LSM list read),
/// loads the engine once for the run and checks that scopes can be joined, as `bee exec`
/// does ([`super::enforcement`]); every episode then gets its own scope. `Host` (only with an
/// explicit `--host`) runs the tools as hardened host processes with no kernel scope.
///
/// # Errors
/// Why enforcement is refused; `bee run` then exits before any model call, 77 when only
/// privileges are missing and 69 when the kernel cannot enforce ([`enforcement::Refusal::exit`]).
pub fn sandbox_factory(
    enforcement: Enforcement,
    engine: EngineChoice,
    policies: &[&CompiledPolicy],
) -> Result<Box<dyn SandboxFactory>, enforcement::Refusal> {
    match enforcement {
        Enforcement::Kernel => Ok(Box::new(sandbox::Factory::kernel(engine, policies)?)),
        Enforcement::Host => Ok(Box::new(sandbox::Factory::host())),
    }
}

/// The episodes' policies, compiled as when the run was planned: the engine is chosen for
/// them (the Landlock engine refuses one it cannot enforce exactly, the BPF LSM one whose name
/// grants this process cannot enforce), before any episode starts.
fn episode_policies(plan: &Plan) -> Vec<CompiledPolicy> {
    plan.episodes
        .iter()
        .filter_map(|ep| {
            ep.policy
                .as_deref()
                .and_then(|p| plan.policies.compile(p, &ep.def.workspace).ok())
        })
        .collect()
}

/// How [`run_with`] obtains its sandbox: [`sandbox_factory`] in the real command, given how
/// tools are confined, the engine asked for and the episodes' policies.
pub type FactoryFn<'a> = dyn Fn(
        Enforcement,
        EngineChoice,
        &[&CompiledPolicy],
    ) -> Result<Box<dyn SandboxFactory>, enforcement::Refusal>
    + 'a;

/// What [`run_with`] needs from the process; tests build one by hand.
pub struct RunContext<'a> {
    /// Current directory and home, for configuration resolution.
    pub env: Env,
    /// Obtains the sandbox ([`sandbox_factory`] in the real command).
    pub factory: &'a FactoryFn<'a>,
    /// Progress and the result.
    pub out: Box<dyn Write + Send>,
    /// Notes and errors.
    pub err: Box<dyn Write + Send>,
    /// Whether `out` is a terminal (live lines instead of one line per event).
    pub terminal: bool,
    /// Raised on Ctrl-C.
    pub interrupt: Interrupt,
    /// Where workspace copies go.
    pub temp_dir: PathBuf,
}

impl std::fmt::Debug for RunContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("env", &self.env)
            .field("terminal", &self.terminal)
            .field("temp_dir", &self.temp_dir)
            .finish_non_exhaustive()
    }
}

/// Runs `bee run` for this process: resolves the environment, installs the Ctrl-C handler
/// and calls [`run_with`].
pub fn run(args: &Args) -> Exit {
    let env = match Env::from_process() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("bee run: cannot determine the current directory: {e}");
            return Exit::NoInput;
        }
    };
    let interrupt = Interrupt::new();
    let handler = interrupt.clone();
    let installed = ctrlc::set_handler(move || {
        if handler.is_raised() {
            // A second Ctrl-C: the first one's orderly stop is taking too long.
            std::process::exit(i32::from(Exit::Interrupted.code()));
        }
        handler.raise();
    });
    // SIGTERM stops the run as Ctrl-C does: every episode and subagent ends orderly and
    // every scope is torn down.
    let installed = installed.map_err(|e| e.to_string()).and_then(|()| {
        signal_hook::flag::register(signal_hook::consts::SIGTERM, interrupt.flag())
            .map(drop)
            .map_err(|e| e.to_string())
    });
    if let Err(e) = installed {
        eprintln!("bee run: cannot install the Ctrl-C and SIGTERM handlers: {e}");
        return Exit::Software;
    }
    let mut args = args.clone();
    args.job_completion_index = std::env::var("JOB_COMPLETION_INDEX").ok();
    let args = &args;
    let ctx = RunContext {
        env,
        factory: &sandbox_factory,
        out: Box::new(std::io::stdout()),
        err: Box::new(std::io::stderr()),
        terminal: std::io::stdout().is_terminal() && !args.json,
        interrupt,
        temp_dir: std::env::temp_dir(),
    };
    run_with(args, ctx)
}

/// One episode, ready to run.
struct Planned {
    def: EpisodeDef,
    policy: Option<PathBuf>,
    limits: EpisodeLimits,
    /// The SHA-256 of its definition ([`batch::content_hash`]).
    content_hash: String,
}

/// Everything checked before the first model call.
struct Plan {
    /// This process's episodes (its shard's, when sharded).
    episodes: Vec<Planned>,
    /// Their policies, compiled once per workspace, and the compiler's warnings.
    policies: Policies,
    /// The run id, set when the records directory is opened (the findings tools hold it).
    run_slot: RunSlot,
    /// What the run directory records about the run (its `run.json`).
    manifest: crate::records::RunManifest,
    /// Every episode's content hash, all shards': episode id → hash.
    hashes: std::collections::BTreeMap<String, String>,
    enforcement: Enforcement,
    /// `--engine`, `[enforcement] engine`.
    engine: EngineChoice,
    provider: ProviderSpec,
    records_dir: PathBuf,
    /// Where every tool call's audit records are appended as JSON lines (`--audit`).
    audit: Option<PathBuf>,
    /// The tools every episode offers, with their limits.
    tools: Arc<Registry>,
    /// The skills found, for the episodes that name some.
    skills: Arc<SkillSet>,
    /// Skills that did not load (they are skipped), said before the run starts.
    skill_problems: Vec<String>,
    /// The roles subagents can play.
    roles: Arc<Roles>,
    /// Whether episodes are offered the `agent` tool.
    agents: bool,
    /// Depth and inline policies of subagents.
    agent_settings: AgentSettings,
    /// Tools confined to narrower policies: tool name → policy file.
    tool_policy_files: Vec<(String, PathBuf)>,
}

fn is_flag(origin: &Origin) -> bool {
    matches!(origin, Origin::Flag { .. })
}

/// A flag wins over the scenario, which wins over configuration files.
fn layered<T: Copy>(config: &Option<Sourced<T>>, scenario: Option<T>) -> Option<T> {
    match config {
        Some(s) if is_flag(&s.origin) => Some(s.value),
        _ => scenario.or(config.as_ref().map(|s| s.value)),
    }
}

fn plan(args: &Args, env: &Env) -> Result<Plan, Refused> {
    let mut flags = args.flags.clone();
    if let Some(r) = &args.records {
        flags.records_dir = Some(r.clone());
    }
    let config = Config::resolve_in(&flags, env).map_err(|e| file_refusal(&e))?;
    let scenario_path = env.cwd.join(&args.scenario);
    if !scenario_path.exists() {
        return Err(Refused(
            Exit::NoInput,
            format!("the scenario {} does not exist", scenario_path.display()),
        ));
    }
    let scenario = Scenario::load(&scenario_path).map_err(|e| file_refusal(&e))?;
    if scenario.episodes.is_empty() {
        return Err(Refused(
            Exit::DataErr,
            format!("the scenario {} holds no episodes", scenario_path.display()),
        ));
    }
    let provider = load_provider(&config)?;

    let host = config.host.value;
    let policies = Policies::default();
    let mut episodes = Vec::new();
    for mut def in scenario.episodes {
        let policy = match &config.policy {
            Some(p) if is_flag(&p.origin) => Some(p.value.clone()),
            p => def.policy.clone().or(p.as_ref().map(|p| p.value.clone())),
        };
        match (&policy, host) {
            (None, false) => {
                return Err(Refused(
                    Exit::Usage,
                    format!("episode {}: {}", def.id, Refusal::NoPolicy),
                ));
            }
            (Some(p), true) => {
                return Err(Refused(
                    Exit::Usage,
                    format!(
                        "episode {}: both a policy ({}) and host mode ({}) are set; they \
                         exclude each other: drop one. --host never drops a scenario's \
                         policy (its tools would run unconfined, doing what the policy was \
                         written to stop); {HOST_INSTEAD}",
                        def.id,
                        p.display(),
                        config.host.origin
                    ),
                ));
            }
            _ => {}
        }
        if is_flag(&config.workspace.origin) {
            def.workspace = config.workspace.value.clone();
        }
        if !def.workspace.is_dir() {
            return Err(Refused(
                Exit::NoInput,
                format!(
                    "episode {}: the workspace {} is not a directory",
                    def.id,
                    def.workspace.display()
                ),
            ));
        }
        if let Some(p) = &policy {
            policies.compile(p, &def.workspace)?;
        }
        let l = &config.limits;
        let limits = EpisodeLimits {
            turns: layered(&l.turns, def.limits.turns),
            tokens: layered(&l.tokens, def.limits.tokens),
            wall: layered(&l.wall_seconds, def.limits.wall_seconds).map(Duration::from_secs),
            cost_usd: layered(&l.cost_usd, def.limits.cost_usd),
        };
        episodes.push(Planned {
            def,
            policy,
            limits,
            content_hash: String::new(),
        });
    }
    let (skills, skill_problems) = discover_skills(env);
    for ep in &episodes {
        for name in &ep.def.skills {
            if skills.get(name).is_none() {
                let known: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
                return Err(Refused(
                    Exit::DataErr,
                    format!(
                        "episode {} ({}): skills: there is no skill `{name}` ({})",
                        ep.def.id,
                        ep.def.file.display(),
                        if known.is_empty() {
                            "no skills were found in .bee/skills or the user's skills".to_owned()
                        } else {
                            format!("the skills are {}", known.join(", "))
                        }
                    ),
                ));
            }
        }
    }
    let shard = batch::shard_of(args)?;
    let mut hashes = std::collections::BTreeMap::new();
    for ep in &mut episodes {
        ep.content_hash = batch::content_hash(ep, &skills)?;
        hashes.insert(ep.def.id.clone(), ep.content_hash.clone());
    }
    if let Some(shard) = shard {
        let assignment = crate::scenario::assign(hashes.keys().map(String::as_str), shard.count);
        episodes.retain(|ep| shard.holds(&assignment, &ep.def.id));
    }
    let ids: Vec<String> = episodes.iter().map(|e| e.def.id.clone()).collect();
    let manifest = batch::manifest(args, shard, &hashes, &ids);
    let run_slot = RunSlot::default();
    let tools = Arc::new(tool_registry(&config, &skills, None, &run_slot)?);
    // Per-tool policies are proven within each episode's policy before anything runs.
    for ep in &episodes {
        let session = match &ep.policy {
            Some(p) => Some((policies.compile(p, &ep.def.workspace)?, p.clone())),
            None => None,
        };
        tool_policies(
            &config,
            &tools,
            &ep.def.workspace,
            session.as_ref().map(|(c, p)| (c, p.as_path())),
            &policies,
        )
        .map_err(|Refused(s, why)| Refused(s, format!("episode {}: {why}", ep.def.id)))?;
    }
    let roles = discover_roles(env);
    Ok(Plan {
        engine: config.engine.value,
        agents: agents_on(&config, &roles),
        agent_settings: config.agents.settings(),
        tool_policy_files: config
            .tools
            .policies
            .iter()
            .map(|(t, p)| (t.clone(), p.value.clone()))
            .collect(),
        roles,
        episodes,
        manifest,
        hashes,
        enforcement: if host {
            Enforcement::Host
        } else {
            Enforcement::Kernel
        },
        provider,
        records_dir: config.records_dir.value,
        audit: config.audit.map(|a| a.value),
        tools,
        skills,
        skill_problems: skill_problems.iter().map(ToString::to_string).collect(),
        policies,
        run_slot,
    })
}

/// What to do where this kernel cannot enforce, said after the 69 refusal.
const KERNEL_INSTEAD: &str = "`cargo xtask demo` (in a checkout of bee) runs the demo episode in \
     a QEMU guest whose kernel enforces; a scenario with no policy runs here with `--host`, its \
     tools as hardened host processes with NO kernel scope (the demo's: `bee run --host \
     --scenario examples/demo/host-scenario.toml --provider examples/demo/host-provider.toml`)";

/// What to run instead of a scenario with a policy under `--host`.
const HOST_INSTEAD: &str = "for host mode run a scenario that has no policy (the demo's is \
     examples/demo/host-scenario.toml, with examples/demo/host-provider.toml), or `cargo xtask \
     demo` for the enforced demo in a VM";

/// Runs `bee run` with an explicit context. Every refusal is explained on `ctx.err`.
pub fn run_with(args: &Args, mut ctx: RunContext<'_>) -> Exit {
    let plan = match plan(args, &ctx.env) {
        Ok(p) => p,
        Err(Refused(status, msg)) => {
            let _ = writeln!(ctx.err, "bee run: {}", msg.trim_end());
            return status;
        }
    };
    let learn = match prepare_learn(args, &plan) {
        Ok(l) => l,
        Err(Refused(status, msg)) => {
            let _ = writeln!(ctx.err, "bee run: {}", msg.trim_end());
            return status;
        }
    };
    let policies = episode_policies(&plan);
    let policies: Vec<&CompiledPolicy> = policies.iter().collect();
    let checked = (ctx.factory)(plan.enforcement, plan.engine, &policies);
    let mut factory = match checked {
        Ok(f) => f,
        Err(refusal) => {
            let _ = write!(
                ctx.err,
                "{}",
                refusal.render("bee run", "no episode was started, no model was called")
            );
            if !refusal.is_permission() {
                let _ = writeln!(ctx.err, "bee run: instead: {KERNEL_INSTEAD}");
            }
            return refusal.exit();
        }
    };
    if let Some(audit) = &plan.audit
        && let Err(why) = factory.write_audit_to(audit)
    {
        let _ = writeln!(ctx.err, "bee run: --audit: {why}; no model was called");
        return Exit::NoInput;
    }
    if let Some((l, _, _)) = &learn {
        let sink = Arc::clone(l);
        let observer: crate::episode::AuditObserver = Arc::new(move |ws, record| {
            if let Ok(mut l) = sink.lock()
                && let Some(l) = l.as_mut()
            {
                l.record_from(Some(ws), record);
            }
        });
        if let Err(why) = factory.learn_with(observer) {
            let _ = writeln!(ctx.err, "bee run: --learn: {why}; no model was called");
            return Exit::Usage;
        }
        if let Ok(l) = l.lock()
            && let Some(l) = l.as_ref()
        {
            l.banner_start();
        }
    }
    for warning in plan.policies.warnings() {
        let _ = writeln!(ctx.err, "warning: {warning}");
    }
    for problem in &plan.skill_problems {
        let _ = writeln!(ctx.err, "bee run: a skill was skipped: {problem}");
    }
    if plan.agents {
        for problem in plan.roles.problems() {
            let _ = writeln!(
                ctx.err,
                "bee run: a role file is invalid (an `agent` call for it will be refused): \
                 {problem}"
            );
        }
        for note in plan.roles.notes() {
            let _ = writeln!(ctx.err, "bee run: {note}");
        }
    }
    if plan.enforcement == Enforcement::Host {
        let _ = writeln!(
            ctx.err,
            "bee run: --host: tools run as hardened host processes with NO kernel scope; no \
             policy confines them (recorded as enforcement \"host\")"
        );
        if !plan.tool_policy_files.is_empty() || plan.agents {
            let _ = writeln!(
                ctx.err,
                "bee run: --host: per-tool policies and subagents' policies are checked but \
                 NOT enforced"
            );
        }
    }
    // Connect once up front: a missing or refused key stops the run before any episode.
    if let Err(Refused(status, why)) = connect(&plan.provider) {
        let _ = writeln!(ctx.err, "bee run: {why}");
        return status;
    }
    let prices = match plan.provider.price_table() {
        Ok(p) => Arc::new(p),
        Err(e) => {
            let _ = writeln!(ctx.err, "bee run: the price table is malformed: {e}");
            return Exit::Software;
        }
    };
    let store = match Store::open(&plan.records_dir.join(STORE_FILE)) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            let _ = writeln!(ctx.err, "bee run: metrics store: {e}");
            return Exit::Software;
        }
    };
    let opened = batch::open(
        args,
        &plan.records_dir,
        &plan.manifest,
        &plan.hashes,
        &store,
    );
    let batch = match opened {
        Ok(b) => b,
        Err(Refused(status, why)) => {
            let _ = writeln!(ctx.err, "bee run: {why}");
            return status;
        }
    };
    for note in &batch.notes {
        let _ = writeln!(ctx.err, "bee run: {note}");
    }
    let run_id = batch.run_id.clone();
    let _ = plan.run_slot.set(run_id.clone());
    let run_dir = batch.dir.clone();
    let episodes: Vec<Planned> = plan
        .episodes
        .into_iter()
        .filter(|ep| !batch.completed.contains(&ep.def.id))
        .collect();
    let started_at = Timestamp::now();
    let progress = Progress::new(
        ctx.out,
        if args.json {
            Style::Json
        } else if ctx.terminal {
            Style::Live
        } else {
            Style::Lines
        },
        episodes.iter().map(|e| e.def.id.clone()).collect(),
    );
    let subagent_events = |id: &str, u: Update<'_>| {
        if let Update::Recorded(e) = u {
            progress.event(id, e);
        }
    };
    let delegation = Delegation {
        run_id: run_id.clone(),
        records_dir: plan.records_dir.clone(),
        store: Some(Arc::clone(&store)),
        run_started_at: started_at,
        factory: factory.as_ref(),
        provider: plan.provider.clone(),
        prices: Arc::clone(&prices),
        roles: Arc::clone(&plan.roles),
        tools: Arc::clone(&plan.tools),
        tool_policies: plan.tool_policy_files.clone(),
        home: super::user::invoking_home(),
        settings: plan.agent_settings,
        observer: &subagent_events,
    };
    let shared = Shared {
        delegation: plan.agents.then_some(&delegation),
        tool_policy_files: plan.tool_policy_files.clone(),
        run_id: run_id.clone(),
        run_dir: run_dir.clone(),
        records_dir: plan.records_dir.clone(),
        started_at,
        provider: &plan.provider,
        prices,
        store,
        factory: factory.as_ref(),
        interrupt: ctx.interrupt.clone(),
        progress: &progress,
        summary_lock: Mutex::new(()),
        temp_dir: ctx.temp_dir.clone(),
        keep: args.keep_workspaces,
        errors: Mutex::new(Vec::new()),
        tools: Arc::clone(&plan.tools),
        skills: Arc::clone(&plan.skills),
    };
    let queue = Mutex::new(episodes.into_iter().collect::<VecDeque<_>>());
    let results = Mutex::new(Vec::new());
    let workers = usize::from(args.concurrency).max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                    let Some(ep) = next else { break };
                    let status = shared.episode(&ep);
                    if let Ok(mut r) = results.lock() {
                        r.push(status);
                    }
                }
            });
        }
    });
    let statuses = results.into_inner().unwrap_or_default();
    for e in shared.errors.into_inner().unwrap_or_default() {
        let _ = writeln!(ctx.err, "bee run: {e}");
    }
    let summary = match RunSummary::from_run_dir(&run_dir) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(ctx.err, "bee run: summary: {e}");
            return Exit::Software;
        }
    };
    if let Err(e) = summary.write_atomic(&run_dir) {
        let _ = writeln!(ctx.err, "bee run: summary: {e}");
        return Exit::Software;
    }
    let status = Exit::of_run(statuses.into_iter().chain(batch.completed_statuses));
    progress.done(&summary, status, &run_dir);
    if let Some((l, base, command)) = learn {
        // The factory's executors still hold the observer: take the observations out.
        let Some(l) = l.lock().ok().and_then(|mut l| l.take()) else {
            let _ = writeln!(ctx.err, "bee run: --learn: the observed accesses were lost");
            return Exit::Software;
        };
        if l.finish(&base, super::user::invoking_home().as_deref(), &command)
            .is_err()
        {
            return Exit::Software;
        }
    }
    status
}

/// A learn run's state: the observations (shared with every executor), the base policy
/// compiled against the episodes' workspace, and what ran (for the output's header).
type LearnState = (Arc<Mutex<Option<Learn>>>, bee_core::CompiledPolicy, String);

/// `--learn`: every episode must have the same policy and workspace (the learned policy is
/// one policy on top of one base), in kernel mode; OUT must be writable before anything runs.
fn prepare_learn(args: &Args, plan: &Plan) -> Result<Option<LearnState>, Refused> {
    let Some(out) = &args.learn else {
        return Ok(None);
    };
    if plan.enforcement == Enforcement::Host {
        return Err(Refused(
            Exit::Usage,
            "--learn needs kernel scopes; with --host no policy is enforced, so there is \
             nothing to learn"
                .to_owned(),
        ));
    }
    let mut pairs = plan.episodes.iter().map(|e| (&e.policy, &e.def.workspace));
    let Some((Some(policy), workspace)) = pairs.next() else {
        return Err(Refused(
            Exit::Usage,
            "--learn needs a policy to learn on top of".to_owned(),
        ));
    };
    if pairs.any(|(p, w)| p.as_ref() != Some(policy) || w != workspace) {
        return Err(Refused(
            Exit::Usage,
            "--learn learns one policy: every episode must have the same policy and workspace"
                .to_owned(),
        ));
    }
    let base = plan.policies.compile(policy, workspace)?;
    let learn = Learn::prepare(out, policy, Some(workspace)).map_err(|e| {
        let status = match e {
            Exit::CantCreat => Exit::CantCreat,
            Exit::NoInput => Exit::NoInput,
            _ => Exit::Software,
        };
        Refused(status, format!("--learn {}: see above", out.display()))
    })?;
    let command = format!("bee run --scenario {}", args.scenario.display());
    Ok(Some((Arc::new(Mutex::new(Some(learn))), base, command)))
}

/// What every episode thread shares.
struct Shared<'a> {
    run_id: String,
    run_dir: PathBuf,
    records_dir: PathBuf,
    started_at: Timestamp,
    provider: &'a ProviderSpec,
    prices: Arc<crate::provider::price::PriceTable>,
    store: Arc<Store>,
    factory: &'a dyn SandboxFactory,
    interrupt: Interrupt,
    progress: &'a Progress,
    summary_lock: Mutex<()>,
    temp_dir: PathBuf,
    keep: bool,
    errors: Mutex<Vec<String>>,
    tools: Arc<Registry>,
    skills: Arc<SkillSet>,
    /// Subagents, when episodes are offered the `agent` tool.
    delegation: Option<&'a Delegation<'a>>,
    /// Tools confined to narrower policies: tool name → policy file.
    tool_policy_files: Vec<(String, PathBuf)>,
}

impl Shared<'_> {
    fn error(&self, e: String) -> Exit {
        self.warn(e);
        Exit::Software
    }

    /// A message for stderr at the end of the run.
    fn warn(&self, e: String) {
        if let Ok(mut v) = self.errors.lock() {
            v.push(e);
        }
    }

    fn episode(&self, ep: &Planned) -> Exit {
        let id = &ep.def.id;
        if self.interrupt.is_raised() {
            return Exit::Interrupted;
        }
        let workspace = match ep.def.workspace_mode {
            WorkspaceMode::InPlace => ep.def.workspace.clone(),
            WorkspaceMode::Copy => {
                let dst = copy_path(&self.temp_dir, &self.run_id, id);
                if let Err(e) = copy_workspace(&ep.def.workspace, &dst) {
                    return self.error(format!("episode {id}: copying the workspace: {e}"));
                }
                dst
            }
        };
        let status = self.run_in(ep, &workspace);
        if ep.def.workspace_mode == WorkspaceMode::Copy && !self.keep {
            let _ = std::fs::remove_dir_all(&workspace);
        }
        {
            let _guard = self.summary_lock.lock();
            let written =
                RunSummary::from_run_dir(&self.run_dir).and_then(|s| s.write_atomic(&self.run_dir));
            if let Err(e) = written {
                return self.error(format!("episode {id}: summary: {e}"));
            }
        }
        status
    }

    fn run_in(&self, ep: &Planned, workspace: &Path) -> Exit {
        let id = &ep.def.id;
        let spec = EpisodeSpec {
            run_id: self.run_id.clone(),
            episode_id: id.clone(),
            scenario: ep.def.scenario.clone(),
            prompt: ep.def.prompt.clone(),
            system_prompt: with_catalogue(ep.def.system_prompt.clone(), &self.skills),
            limits: ep.limits.clone(),
            success_check: ep.def.success_check.clone(),
            workspace: workspace.to_owned(),
            policy: ep.policy.as_ref().map(|p| p.display().to_string()),
            run_started_at: self.started_at,
            max_output_tokens: ep.def.max_output_tokens,
            context: ep
                .def
                .skills
                .iter()
                .filter_map(|name| self.skills.get(name))
                .map(crate::skills::Skill::instructions)
                .collect(),
            content_hash: Some(ep.content_hash.clone()),
        };
        // The policy, compiled against this episode's workspace (a copy's paths are its own).
        let policy = match ep.policy.as_deref().map(|p| compile_policy(p, workspace)) {
            None => None,
            Some(Ok(p)) => Some(p),
            Some(Err(Refused(_, why))) => return self.unavailable(&spec, &why),
        };
        let scoped = compile_tool_policies(&self.tool_policy_files, workspace, policy.as_ref());
        let scoped = match scoped {
            Ok(t) => t,
            Err(why) => return self.unavailable(&spec, &why),
        };
        let executor = match session_executor(self.factory, workspace, policy, &self.tools, &scoped)
        {
            Ok(x) => x,
            Err(why) => return self.unavailable(&spec, &why),
        };
        let executor: Box<dyn ToolExecutor + '_> = match self.delegation {
            Some(d) => Box::new(AgentExecutor::new(
                executor,
                d,
                Caller {
                    session_id: id.clone(),
                    scenario: ep.def.scenario.clone(),
                    workspace: workspace.to_owned(),
                    depth: 0,
                    lineage: Vec::new(),
                    policy_name: ep
                        .policy
                        .as_ref()
                        .map_or_else(|| "the session".to_owned(), |p| p.display().to_string()),
                },
            )),
            None => executor,
        };
        // A provider per episode: a replay recording's cursor is per episode, and so is a
        // connection.
        let provider = match self.provider.connect() {
            Ok(p) => Arc::from(p),
            Err(e) => {
                return self.error(format!("episode {id}: provider: {e}"));
            }
        };
        let model = Model {
            provider,
            kind: self.provider.kind.as_str().to_owned(),
            prices: Arc::clone(&self.prices),
            max_output_tokens: self.provider.max_output_tokens,
        };
        self.progress.started(id, workspace);
        let observer = |u: Update<'_>| {
            if let Update::Recorded(e) = u {
                self.progress.event(id, e);
            }
        };
        match run_episode(
            &spec,
            &model,
            executor.as_ref(),
            &self.records_dir,
            Some(Arc::clone(&self.store)),
            &self.interrupt,
            &observer,
        ) {
            Ok(report) => {
                if !report.store_errors.is_empty() {
                    self.warn(format!(
                        "episode {id}: the metrics store refused {} event(s) (they are in the \
                         transcript; `bee metrics --rebuild` recovers the store); first: {}",
                        report.store_errors.len(),
                        report.store_errors[0]
                    ));
                }
                self.progress.finished(&report);
                Exit::of_episode(&report)
            }
            Err(e) => self.error(e.to_string()),
        }
    }

    /// Records an episode that could not get an executor.
    fn unavailable(&self, spec: &EpisodeSpec, why: &str) -> Exit {
        let started = EpisodeStarted {
            run_id: spec.run_id.clone(),
            episode_id: spec.episode_id.clone(),
            scenario: spec.scenario.clone(),
            model: self.provider.model.clone(),
            provider: self.provider.kind.as_str().to_owned(),
            policy: PolicyRecord {
                source: spec.policy.clone(),
                enforcement: self.factory.enforcement(),
                engine: None,
                requested: None,
                installed: None,
                tools: std::collections::BTreeMap::new(),
            },
            workspace: spec.workspace.display().to_string(),
            limits: Limits::default(),
            run_started_at: spec.run_started_at,
            parent: None,
            content_hash: spec.content_hash.clone(),
        };
        let recorded =
            EpisodeRecorder::start(&self.records_dir, started, Some(Arc::clone(&self.store)))
                .and_then(|r| r.finish(Outcome::EnforcementUnavailable, None));
        if let Err(e) = recorded {
            return self.error(format!("episode {}: {e}", spec.episode_id));
        }
        self.progress
            .note(&spec.episode_id, &format!("enforcement unavailable: {why}"));
        Exit::Unavailable
    }
}
