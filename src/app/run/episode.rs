//! What every episode thread of `bee run` shares, and one episode's run from its workspace
//! copy to its summary ([`Shared::episode`]).

use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex};

use super::super::Exit;
use super::super::harness::preflight::{
    Refused, compile_policy, compile_tool_policies, session_executor, with_catalogue,
};
use super::plan::Planned;
use super::progress::Progress;
use crate::agents::{AgentExecutor, Caller, Delegation};
use crate::episode::SandboxFactory;
use crate::episode::{
    EpisodeSpec, Interrupt, Model, ToolExecutor, Update, copy_path, copy_workspace, run_episode,
};
use crate::provider::ProviderSpec;
use crate::records::{
    EpisodeRecorder, EpisodeStarted, Limits, Outcome, PolicyRecord, RunSummary, Store, Timestamp,
};
use crate::scenario::WorkspaceMode;
use crate::skills::SkillSet;
use crate::tools::Registry;

/// What every episode thread shares.
pub(super) struct Shared<'a> {
    pub(super) run_id: String,
    pub(super) run_dir: PathBuf,
    pub(super) records_dir: PathBuf,
    pub(super) started_at: Timestamp,
    pub(super) provider: &'a ProviderSpec,
    pub(super) prices: Arc<crate::provider::price::PriceTable>,
    pub(super) store: Arc<Store>,
    pub(super) factory: &'a dyn SandboxFactory,
    pub(super) interrupt: Interrupt,
    pub(super) progress: &'a Progress,
    pub(super) summary_lock: Mutex<()>,
    pub(super) temp_dir: PathBuf,
    pub(super) keep: bool,
    pub(super) errors: Mutex<Vec<String>>,
    pub(super) tools: Arc<Registry>,
    pub(super) skills: Arc<SkillSet>,
    /// Subagents, when episodes are offered the `agent` tool.
    pub(super) delegation: Option<&'a Delegation<'a>>,
    /// Tools confined to narrower policies: tool name → policy file.
    pub(super) tool_policy_files: Vec<(String, PathBuf)>,
    /// The MCP servers every episode starts, each in a scope of its own.
    pub(super) mcp_servers: std::collections::BTreeMap<String, crate::config::McpServerConfig>,
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

    pub(super) fn episode(&self, ep: &Planned) -> Exit {
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
            Some(Err(Refused(status, why))) => return self.unavailable(&spec, &why, status),
        };
        let scoped = compile_tool_policies(&self.tool_policy_files, workspace, policy.as_ref());
        let scoped = match scoped {
            Ok(t) => t,
            Err(why) => return self.unavailable(&spec, &why, Exit::Unavailable),
        };
        let executor = match session_executor(
            self.factory,
            workspace,
            policy,
            &self.tools,
            &scoped,
            &crate::app::harness::mcp_servers::with_episode(&self.mcp_servers, &ep.def.mcp_servers),
        ) {
            Ok(x) => x,
            Err(why) => {
                return self.unavailable(&spec, &why.message, Exit::of_service(why.status));
            }
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

    /// Records an episode that could not get an executor (outcome `enforcement-unavailable`)
    /// and returns `status`, the cause's: 65 for a policy the engine or a ceiling refused,
    /// 77 for a missing privilege, 69 when enforcement is unavailable — as `bee exec` says
    /// the same failures.
    fn unavailable(&self, spec: &EpisodeSpec, why: &str, status: Exit) -> Exit {
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
        status
    }
}
