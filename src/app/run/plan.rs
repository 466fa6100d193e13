//! `bee run`'s plan: every file read and checked, every policy compiled once, before the
//! first model call ([`plan`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bee_core::CompiledPolicy;

use super::super::Exit;
use super::super::harness::preflight::{
    Policies, Refused, RunSlot, agents_on, discover_roles, discover_skills, file_refusal,
    load_provider, tool_policies, tool_registry,
};
use super::{Args, batch};
use crate::agents::{AgentSettings, Roles};
use crate::config::{Config, EngineChoice, Env, Origin, Refusal, Sourced};
use crate::episode::EpisodeLimits;
use crate::provider::ProviderSpec;
use crate::records::Enforcement;
use crate::scenario::{EpisodeDef, Scenario};
use crate::skills::SkillSet;
use crate::tools::Registry;

/// One episode, ready to run.
pub(super) struct Planned {
    pub(super) def: EpisodeDef,
    pub(super) policy: Option<PathBuf>,
    pub(super) limits: EpisodeLimits,
    /// The SHA-256 of its definition ([`batch::content_hash`]).
    pub(super) content_hash: String,
}

/// Everything checked before the first model call.
pub(super) struct Plan {
    /// This process's episodes (its shard's, when sharded).
    pub(super) episodes: Vec<Planned>,
    /// Their policies, compiled once per workspace, and the compiler's warnings.
    pub(super) policies: Policies,
    /// The run id, set when the records directory is opened (the findings tools hold it).
    pub(super) run_slot: RunSlot,
    /// What the run directory records about the run (its `run.json`).
    pub(super) manifest: crate::records::RunManifest,
    /// Every episode's content hash, all shards': episode id → hash.
    pub(super) hashes: std::collections::BTreeMap<String, String>,
    pub(super) enforcement: Enforcement,
    /// `--engine`, `[enforcement] engine`.
    pub(super) engine: EngineChoice,
    /// `--service`, `[enforcement] service`.
    pub(super) service: crate::config::ServiceChoice,
    pub(super) provider: ProviderSpec,
    pub(super) records_dir: PathBuf,
    /// Where every tool call's audit records are appended as JSON lines (`--audit`).
    pub(super) audit: Option<PathBuf>,
    /// bee's own state the configuration names (ledger, records, audit file), which every
    /// scope protects.
    pub(super) own_state: Vec<crate::sandbox::own_state::StatePath>,
    /// The tools every episode offers, with their limits.
    pub(super) tools: Arc<Registry>,
    /// The skills found, for the episodes that name some.
    pub(super) skills: Arc<SkillSet>,
    /// Skills that did not load (they are skipped), said before the run starts.
    pub(super) skill_problems: Vec<String>,
    /// The roles subagents can play.
    pub(super) roles: Arc<Roles>,
    /// Whether episodes are offered the `agent` tool.
    pub(super) agents: bool,
    /// Depth and inline policies of subagents.
    pub(super) agent_settings: AgentSettings,
    /// Tools confined to narrower policies: tool name → policy file.
    pub(super) tool_policy_files: Vec<(String, PathBuf)>,
    /// The MCP servers every episode starts.
    pub(super) mcp_servers: std::collections::BTreeMap<String, crate::config::McpServerConfig>,
}

pub(super) fn is_flag(origin: &Origin) -> bool {
    matches!(origin, Origin::Flag { .. })
}

/// A flag wins over the scenario, which wins over configuration files.
pub(super) fn layered<T: Copy>(config: &Option<Sourced<T>>, scenario: Option<T>) -> Option<T> {
    match config {
        Some(s) if is_flag(&s.origin) => Some(s.value),
        _ => scenario.or(config.as_ref().map(|s| s.value)),
    }
}

pub(super) fn plan(args: &Args, env: &Env) -> Result<Plan, Refused> {
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
    let roles = discover_roles(env);
    let agents = agents_on(&config, &roles);
    let tools = Arc::new(tool_registry(
        &config,
        &skills,
        None,
        &run_slot,
        agents.then_some(&roles),
    )?);
    // `tools.disabled` may have taken `agent` away.
    let agents = tools.session_tools().next().is_some();
    // Per-tool policies are proven within each episode's policy before anything runs.
    for ep in &episodes {
        let session = match &ep.policy {
            Some(p) => Some((policies.compile(p, &ep.def.workspace)?, p.clone())),
            None => None,
        };
        let session = session.as_ref().map(|(c, p)| (c, p.as_path()));
        tool_policies(&config, &tools, &ep.def.workspace, session, &policies)
            .and_then(|_| {
                crate::app::harness::mcp_servers::check(
                    &crate::app::harness::mcp_servers::with_episode(
                        &config.mcp_servers,
                        &ep.def.mcp_servers,
                    ),
                    &ep.def.workspace,
                    session,
                    &policies,
                )
            })
            .map_err(|Refused(s, why)| Refused(s, format!("episode {}: {why}", ep.def.id)))?;
    }
    Ok(Plan {
        own_state: crate::app::harness::preflight::own_state(&config),
        engine: config.engine.value,
        service: config.service.value,
        agents,
        agent_settings: config.agents.settings(),
        mcp_servers: config.mcp_servers.clone(),
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

/// What to run instead of a scenario with a policy under `--host`.
pub(super) const HOST_INSTEAD: &str = "for host mode run a scenario that has no policy (the demo's is \
     examples/demo/host-scenario.toml, with examples/demo/host-provider.toml), or `cargo xtask \
     demo` for the enforced demo in a VM";

/// The episodes' policies, compiled as when the run was planned: the engine is chosen for
/// them (the Landlock engine refuses one it cannot enforce exactly, the BPF LSM one whose name
/// grants this process cannot enforce), before any episode starts.
pub(super) fn episode_policies(plan: &Plan) -> Vec<CompiledPolicy> {
    plan.episodes
        .iter()
        .filter_map(|ep| {
            ep.policy
                .as_deref()
                .and_then(|p| plan.policies.compile(p, &ep.def.workspace).ok())
        })
        .collect()
}
