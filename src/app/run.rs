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
mod episode;
mod plan;
mod progress;
mod sandbox;

use episode::Shared;
use plan::{Plan, Planned, episode_policies, plan};

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use std::sync::{Arc, Mutex};

use bee_core::CompiledPolicy;
use clap::Parser;

use super::Exit;
use super::enforcement;
use super::harness::preflight::{Refused, connect};
use super::learn::Learn;
use crate::agents::Delegation;
use crate::config::{EngineChoice, Env, Flags, ServiceChoice};
pub use crate::episode::SandboxFactory;
use crate::episode::{Interrupt, Update};
use crate::records::{Enforcement, RunSummary, STORE_FILE, Store, Timestamp};
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
/// `Kernel` for a bee that is not root, where a `bee serve` service's socket exists, asks the
/// service: every episode's scope is made there, proven within the user's ceiling. Otherwise
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
    service: ServiceChoice,
    policies: &[&CompiledPolicy],
) -> Result<Box<dyn SandboxFactory>, enforcement::Refusal> {
    let socket = crate::serve::socket_path();
    match enforcement {
        Enforcement::Kernel if service.use_service(&socket) => {
            Ok(Box::new(sandbox::Factory::service(socket, engine)?))
        }
        Enforcement::Kernel => Ok(Box::new(sandbox::Factory::kernel(engine, policies)?)),
        Enforcement::Host => Ok(Box::new(sandbox::Factory::host())),
    }
}

/// How [`run_with`] obtains its sandbox: [`sandbox_factory`] in the real command, given how
/// tools are confined, the engine asked for and the episodes' policies.
pub type FactoryFn<'a> = dyn Fn(
        Enforcement,
        EngineChoice,
        ServiceChoice,
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

/// What to do where this kernel cannot enforce, said after the 69 refusal.
const KERNEL_INSTEAD: &str = "`cargo xtask demo` (in a checkout of bee) runs the demo episode \
     enforced: here where an engine can (`bee check`), else in a QEMU guest whose kernel \
     enforces; a scenario with no policy runs here with `--host`, its \
     tools as hardened host processes with NO kernel scope (the demo's: `bee run --host \
     --scenario examples/demo/host-scenario.toml --provider examples/demo/host-provider.toml`)";

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
    // The service grants learn mode only under a ceiling that grants everything: where
    // `auto` would ask it only because `$BEE_SOCKET` names it, root learns in this process.
    let service = match plan.service {
        ServiceChoice::Auto
            if learn.is_some()
                && !ServiceChoice::Auto.use_service_to_learn(&crate::serve::socket_path()) =>
        {
            ServiceChoice::Never
        }
        chosen => chosen,
    };
    let checked = (ctx.factory)(plan.enforcement, plan.engine, service, &policies);
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
    factory.keep_from_scopes(plan.own_state.clone());
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
        if let Err(e) = factory.learn_with(observer) {
            let _ = writeln!(
                ctx.err,
                "bee run: --learn: {}; no model was called",
                e.message
            );
            return Exit::of_service(e.status);
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
        mcp_servers: plan.mcp_servers.clone(),
        home: super::user::invoking_home(),
        policies: plan.policies.cache(),
        settings: plan.agent_settings,
        observer: &subagent_events,
    };
    let shared = Shared {
        delegation: plan.agents.then_some(&delegation),
        tool_policy_files: plan.tool_policy_files.clone(),
        mcp_servers: plan.mcp_servers.clone(),
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
