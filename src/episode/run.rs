//! An episode: a session driven by a scenario — its task sent once, then its success check.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::records::{LimitHit, Outcome, Refusal, Store, SuccessCheck, Timestamp, Totals};
use crate::session::{
    Controller, EpisodeLimits, Interrupt, Model, ProviderFailure, Session, SessionError,
    SessionSpec, ToolExecutor, TurnEnd, Update,
};

pub use crate::records::SUCCESS_CHECK_CALL_ID;

/// The success check: a command run after the episode, confined like a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckSpec {
    /// Run with `/bin/sh -c` in the workspace, e.g. `cargo test --offline`.
    pub command: String,
    /// How long it may run.
    pub timeout: Duration,
}

/// Everything that defines one episode.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeSpec {
    /// The run the episode belongs to (its records directory name).
    pub run_id: String,
    /// The episode's id, unique within the run (its transcript's file stem).
    pub episode_id: String,
    /// The scenario's name.
    pub scenario: String,
    /// The task, sent as the first user message.
    pub prompt: String,
    /// Instructions sent before the task, if any.
    pub system_prompt: Option<String>,
    /// The hard limits.
    pub limits: EpisodeLimits,
    /// The success check, if any.
    pub success_check: Option<CheckSpec>,
    /// The directory the tools work in (already copied when the scenario asked for a copy).
    pub workspace: PathBuf,
    /// The policy file, as recorded (`None` in host mode without a policy).
    pub policy: Option<String>,
    /// When the run started.
    pub run_started_at: Timestamp,
    /// The output budget of each model call, in tokens; `None` uses the provider file's.
    pub max_output_tokens: Option<u32>,
    /// Texts added to the conversation before the task (the instructions of the skills the
    /// scenario names).
    pub context: Vec<String>,
    /// The hash of the episode's definition, recorded in `episode_started`.
    pub content_hash: Option<String>,
}

impl EpisodeSpec {
    fn session(&self) -> SessionSpec {
        SessionSpec {
            run_id: self.run_id.clone(),
            session_id: self.episode_id.clone(),
            scenario: self.scenario.clone(),
            system_prompt: self.system_prompt.clone(),
            limits: self.limits.clone(),
            workspace: self.workspace.clone(),
            policy: self.policy.clone(),
            run_started_at: self.run_started_at,
            max_output_tokens: self.max_output_tokens,
            parent: None,
            content_hash: self.content_hash.clone(),
        }
    }
}

/// How an episode ended.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeReport {
    /// The episode's id.
    pub episode_id: String,
    /// The outcome, as recorded.
    pub outcome: Outcome,
    /// The limit that ended it, if one did.
    pub limit: Option<LimitHit>,
    /// The provider failure that ended it, if one did.
    pub provider_error: Option<ProviderFailure>,
    /// The refusal that ended it, when the model declined (or a content filter stopped it).
    pub refusal: Option<Refusal>,
    /// The success check's result, when it ran.
    pub success_check: Option<SuccessCheck>,
    /// The transcript.
    pub transcript: PathBuf,
    /// What the episode used.
    pub totals: Totals,
    /// Events that are in the transcript but that the metrics store refused, in words
    /// (`bee metrics --rebuild` recovers the store from the transcripts).
    pub store_errors: Vec<String>,
}

/// Why an episode could not be recorded (see [`SessionError`]).
pub type EpisodeError = SessionError;

/// Runs one episode to its end, recording every step under `records_dir` (and in `store`)
/// and showing each recorded event, and the model's stream, to `observer`.
///
/// The task is sent as the first user message; when the model ends its turn, the success
/// check runs (no check counts as passed). Any other end of the turn is the outcome: `limit`,
/// `refused`, `provider-error` or `interrupted`.
///
/// # Errors
/// [`EpisodeError`] when an event cannot be recorded; the episode stops there.
pub fn run_episode(
    spec: &EpisodeSpec,
    model: &Model,
    executor: &dyn ToolExecutor,
    records_dir: &Path,
    store: Option<Arc<Store>>,
    interrupt: &Interrupt,
    observer: &(dyn Fn(Update<'_>) + Sync),
) -> Result<EpisodeReport, EpisodeError> {
    let mut controller = Controller::new(Session::start(
        spec.session(),
        model.clone(),
        executor,
        records_dir,
        store,
        observer,
    )?);
    for text in &spec.context {
        controller.session_mut().add_context(text)?;
    }
    let end = controller.send(&spec.prompt, interrupt)?;
    let mut report = EpisodeReport {
        episode_id: spec.episode_id.clone(),
        outcome: Outcome::Interrupted,
        limit: None,
        provider_error: None,
        refusal: None,
        success_check: None,
        transcript: controller.session().transcript().to_owned(),
        totals: Totals::default(),
        store_errors: Vec::new(),
    };
    let mut done = Outcome::Passed;
    match end {
        TurnEnd::Done => {
            if let Some(c) = &spec.success_check {
                let check = controller
                    .session_mut()
                    .success_check(&c.command, c.timeout, interrupt)?;
                report.success_check = Some(check);
            }
            done = if interrupt.is_raised() {
                Outcome::Interrupted
            } else if report.success_check.as_ref().is_none_or(|c| c.passed) {
                Outcome::Passed
            } else {
                Outcome::Failed
            };
        }
        TurnEnd::Limit(hit) => report.limit = Some(hit),
        TurnEnd::Provider(p) => report.provider_error = Some(p),
        TurnEnd::Refused(r) => report.refusal = Some(r),
        TurnEnd::Interrupted => {}
    }
    report.outcome = controller.task_outcome(done);
    let finished = controller.finish(report.outcome, report.success_check.clone())?;
    report.totals = finished.totals;
    report.store_errors = finished.store_errors;
    Ok(report)
}
