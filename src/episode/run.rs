//! The episode loop.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::executor::{Bounds, Interrupt, ToolExecution, ToolExecutor};
use super::limits::{Spent, after_call, before_call, output_budget};
use crate::provider::price::{PriceSource as TablePriceSource, PriceTable};
use crate::provider::{ErrorCategory, Item, Provider, ProviderError, Request, Response};
use crate::records::{
    Cost, Denial, EpisodeRecorder, EpisodeStarted, Event, EventBody, ExitStatus, LimitHit,
    LimitKind, Limits, Message, ModelCallEnded, ModelError, ModelLatency, Outcome, PolicyRecord,
    PriceSource, RecordError, Refusal, Role, StopReason, Store, SuccessCheck, Timestamp, ToolCall,
    ToolResult, ToolState, Totals, Usage,
};

pub use crate::records::SUCCESS_CHECK_CALL_ID;

/// How often a wait for the model looks at the interrupt flag and the deadline.
const POLL: Duration = Duration::from_millis(50);

/// The hard limits of one episode; `None` is no limit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EpisodeLimits {
    /// Model turns (model calls).
    pub turns: Option<u32>,
    /// Tokens, input plus output over all model calls.
    pub tokens: Option<u64>,
    /// Wall-clock time from the episode's start.
    pub wall: Option<Duration>,
    /// Cost in USD.
    pub cost_usd: Option<f64>,
}

impl EpisodeLimits {
    fn record(&self) -> Limits {
        Limits {
            turns: self.turns,
            tokens: self.tokens,
            wall_ms: self
                .wall
                .map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
            cost_usd: self.cost_usd,
        }
    }
}

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
}

/// The model side of an episode.
#[derive(Debug, Clone)]
pub struct Model {
    /// The provider, shared by the run's episodes.
    pub provider: Arc<dyn Provider>,
    /// The provider's kind as recorded (`anthropic`, `replay`, …).
    pub kind: String,
    /// Prices, for the cost of each call.
    pub prices: Arc<PriceTable>,
    /// The provider file's output budget per call, in tokens (used when the episode sets
    /// none).
    pub max_output_tokens: u32,
}

/// How a provider failed, for the report and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderFailure {
    /// Its category.
    pub category: ErrorCategory,
    /// The error, in words (never holds the API key).
    pub message: String,
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

/// Why an episode could not be recorded. The episode stops at the first event that cannot
/// be written to its transcript: an unrecorded step must not happen. (An event the metrics
/// store refuses is still in the transcript; it is reported in
/// [`EpisodeReport::store_errors`] and the episode goes on.)
#[derive(Debug, thiserror::Error)]
pub enum EpisodeError {
    /// The transcript refused an event.
    #[error("episode {episode_id}: {source}")]
    Record {
        /// The episode.
        episode_id: String,
        /// The recorder's error.
        #[source]
        source: Box<RecordError>,
    },
}

/// Records events and shows each to the observer.
struct Log<'a> {
    rec: EpisodeRecorder,
    observer: &'a (dyn Fn(&Event) + Sync),
    episode_id: &'a str,
    store_errors: Vec<String>,
}

impl Log<'_> {
    fn record(&mut self, body: EventBody) -> Result<(), EpisodeError> {
        let kind = body.kind();
        match self.rec.record(body) {
            Ok(event) => {
                (self.observer)(&event);
                Ok(())
            }
            Err(RecordError::Store(e)) => {
                self.store_errors.push(format!("{kind}: {e}"));
                Ok(())
            }
            Err(source) => Err(EpisodeError::Record {
                episode_id: self.episode_id.to_owned(),
                source: Box::new(source),
            }),
        }
    }
}

/// Where the loop stopped before the success check.
enum Stop {
    /// The model ended its turn without tool calls.
    Done,
    Limit(LimitHit),
    Provider(ProviderFailure),
    /// The model declined, or a content filter stopped its answer.
    Refused(Refusal),
    Interrupted,
}

/// Runs one episode to its end, recording every step under `records_dir` (and in `store`)
/// and showing each recorded event to `observer`.
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
    observer: &(dyn Fn(&Event) + Sync),
) -> Result<EpisodeReport, EpisodeError> {
    let started = Instant::now();
    let deadline = spec.limits.wall.map(|w| started + w);
    let rec_err = |source| EpisodeError::Record {
        episode_id: spec.episode_id.clone(),
        source: Box::new(source),
    };
    let started_event = EpisodeStarted {
        run_id: spec.run_id.clone(),
        episode_id: spec.episode_id.clone(),
        scenario: spec.scenario.clone(),
        model: model.provider.model().to_owned(),
        provider: model.kind.clone(),
        policy: PolicyRecord {
            source: spec.policy.clone(),
            enforcement: executor.enforcement(),
        },
        workspace: spec.workspace.display().to_string(),
        limits: spec.limits.record(),
        run_started_at: spec.run_started_at,
    };
    let rec = EpisodeRecorder::start(records_dir, started_event.clone(), store).map_err(rec_err)?;
    // The recorder wrote `episode_started` as event 1; show it too.
    observer(&Event {
        seq: 1,
        at: Timestamp::now(),
        body: EventBody::EpisodeStarted(started_event),
    });
    let transcript = rec.transcript_path().to_owned();
    let mut log = Log {
        rec,
        observer,
        episode_id: &spec.episode_id,
        store_errors: Vec::new(),
    };

    let stop = converse(spec, model, executor, deadline, interrupt, &mut log)?;
    let mut refusal = None;
    let (outcome, limit, provider_error, check) = match stop {
        Stop::Done => {
            let check = match &spec.success_check {
                Some(c) => Some(success_check(c, executor, interrupt, &mut log)?),
                None => None,
            };
            let outcome = if interrupt.is_raised() {
                Outcome::Interrupted
            } else if check.as_ref().is_none_or(|c| c.passed) {
                Outcome::Passed
            } else {
                Outcome::Failed
            };
            (outcome, None, None, check)
        }
        Stop::Limit(hit) => {
            log.record(EventBody::LimitHit(hit.clone()))?;
            (Outcome::Limit, Some(hit), None, None)
        }
        Stop::Provider(p) => (Outcome::ProviderError, None, Some(p), None),
        Stop::Refused(r) => {
            refusal = Some(r);
            (Outcome::Refused, None, None, None)
        }
        Stop::Interrupted => (Outcome::Interrupted, None, None, None),
    };
    let Log {
        rec,
        mut store_errors,
        ..
    } = log;
    let counted = rec.totals().clone();
    let totals = match rec.finish(outcome, check.clone()) {
        Ok(finished) => {
            observer(&finished);
            match finished.body {
                EventBody::EpisodeFinished(f) => f.totals,
                _ => counted,
            }
        }
        Err(RecordError::Store(e)) => {
            store_errors.push(format!("episode_finished: {e}"));
            counted
        }
        Err(e) => return Err(rec_err(e)),
    };
    Ok(EpisodeReport {
        episode_id: spec.episode_id.clone(),
        outcome,
        limit,
        provider_error,
        refusal,
        success_check: check,
        transcript,
        totals,
        store_errors,
    })
}

fn converse(
    spec: &EpisodeSpec,
    model: &Model,
    executor: &dyn ToolExecutor,
    deadline: Option<Instant>,
    interrupt: &Interrupt,
    log: &mut Log<'_>,
) -> Result<Stop, EpisodeError> {
    let mut items = Vec::new();
    if let Some(system) = &spec.system_prompt {
        log.record(EventBody::Message(Message {
            role: Role::System,
            text: system.clone(),
        }))?;
        items.push(Item::System {
            text: system.clone(),
        });
    }
    log.record(EventBody::Message(Message {
        role: Role::User,
        text: spec.prompt.clone(),
    }))?;
    items.push(Item::User {
        text: spec.prompt.clone(),
    });
    let tools = executor.definitions();
    let mut spent = Spent::default();
    let wall_hit = |what: &str| {
        Stop::Limit(LimitHit {
            limit: LimitKind::Wall,
            detail: format!(
                "wall time of {} s reached {what}",
                spec.limits.wall.map_or(0.0, |w| w.as_secs_f64())
            ),
        })
    };
    loop {
        if interrupt.is_raised() {
            return Ok(Stop::Interrupted);
        }
        if let Some(hit) = before_call(spec, model, &spent, deadline) {
            return Ok(Stop::Limit(hit));
        }
        let budget = output_budget(spec, model, &spent);
        let request = Request {
            items: items.clone(),
            tools: tools.clone(),
            max_output_tokens: budget,
        };
        spent.turns += 1;
        let call_no = spent.turns;
        let sent = Instant::now();
        let response = match call_model(&model.provider, request, deadline, interrupt) {
            Ok(r) => r,
            Err(end) => {
                let (failure, stop) = match end {
                    CallEnd::Provider(e) => {
                        let failure = ProviderFailure {
                            category: e.category(),
                            message: e.to_string(),
                        };
                        record_failed_call(
                            call_no,
                            model.provider.model(),
                            e.received(),
                            sent,
                            Some(&failure),
                            log,
                        )?;
                        return Ok(Stop::Provider(failure));
                    }
                    CallEnd::Crashed => {
                        let failure = ProviderFailure {
                            category: ErrorCategory::Protocol,
                            message: "the model call ended without an answer (its thread failed)"
                                .to_owned(),
                        };
                        (Some(failure.clone()), Stop::Provider(failure))
                    }
                    CallEnd::Deadline => (None, wall_hit("while waiting for the model")),
                    CallEnd::Interrupted => (None, Stop::Interrupted),
                };
                // An abandoned call still happened: it is recorded with unknown tokens.
                record_failed_call(
                    call_no,
                    model.provider.model(),
                    None,
                    sent,
                    failure.as_ref(),
                    log,
                )?;
                return Ok(stop);
            }
        };
        spent.record(call_no, &response, model);
        record_response(&response, call_no, model, log)?;
        let calls: Vec<_> = response.tool_calls().cloned().collect();
        match &response.stop {
            StopReason::Refusal | StopReason::ContentFilter => {
                // The assembler gives every refusal and content-filter stop a Refusal.
                let refusal = response.refusal.clone().unwrap_or(Refusal {
                    text: String::new(),
                    detail: None,
                });
                return Ok(Stop::Refused(refusal));
            }
            StopReason::MaxTokens => {
                let detail = format!(
                    "the answer of model call {call_no} was cut off at its output limit{}",
                    if calls.is_empty() {
                        String::new()
                    } else {
                        format!("; {} tool call(s) of it not run", calls.len())
                    }
                );
                for call in &calls {
                    record_not_run(call, &response.cut_calls, log)?;
                }
                return Ok(Stop::Limit(LimitHit {
                    limit: LimitKind::MaxOutputTokens,
                    detail,
                }));
            }
            StopReason::Error => {
                return Ok(Stop::Provider(ProviderFailure {
                    category: ErrorCategory::Server,
                    message: format!(
                        "model call {call_no} stopped with an error on the provider's side \
                         (stop reason `error`)"
                    ),
                }));
            }
            StopReason::Unknown(raw) => {
                return Ok(Stop::Provider(ProviderFailure {
                    category: ErrorCategory::Protocol,
                    message: format!(
                        "model call {call_no} stopped for a reason bee does not know \
                         (`{raw}`), so its answer is not used"
                    ),
                }));
            }
            StopReason::EndTurn | StopReason::ToolUse | StopReason::Pause => {}
        }
        items.extend(response.items.iter().cloned());
        if calls.is_empty() {
            if response.stop == StopReason::Pause {
                // The provider paused a long turn: sending the answer back continues it.
                continue;
            }
            return Ok(Stop::Done);
        }
        if let Some(hit) = after_call(spec, &spent, calls.len()) {
            return Ok(Stop::Limit(hit));
        }
        for call in &calls {
            if interrupt.is_raised() {
                return Ok(Stop::Interrupted);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(wall_hit(&format!("before tool call {} ran", call.id)));
            }
            let bounds = Bounds {
                deadline,
                interrupt: interrupt.clone(),
            };
            let exec = executor.call(call, &bounds);
            record_execution(&call.id, &exec, log)?;
            items.push(Item::ToolResult {
                call_id: call.id.clone(),
                output: exec.content.clone(),
                is_error: exec.state != ToolState::Completed,
            });
            if interrupt.is_raised() {
                return Ok(Stop::Interrupted);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(wall_hit(&format!(
                    "while tool call {} ({}) ran",
                    call.id, call.name
                )));
            }
        }
    }
}

/// Records a model answer: its text, its tool calls, then its usage, latency and how it
/// ended.
fn record_response(
    response: &Response,
    call_no: u32,
    model: &Model,
    log: &mut Log<'_>,
) -> Result<(), EpisodeError> {
    for item in &response.items {
        match item {
            Item::AssistantText { text } if !text.is_empty() => {
                log.record(EventBody::Message(Message {
                    role: Role::Assistant,
                    text: text.clone(),
                }))?;
            }
            Item::ToolCall(c) => {
                let arguments = c
                    .parsed_arguments()
                    .unwrap_or_else(|_| serde_json::Value::String(c.arguments.clone()));
                log.record(EventBody::ToolCall(ToolCall {
                    call_id: c.id.clone(),
                    tool: c.name.clone(),
                    arguments,
                }))?;
            }
            _ => {}
        }
    }
    log.record(EventBody::Usage(usage_record(
        call_no,
        &response.model,
        response.usage,
        model,
    )))?;
    log.record(EventBody::ModelLatency(ModelLatency {
        model_call: call_no,
        first_token_ms: response.latency.first_token.map(millis),
        total_ms: millis(response.latency.total),
    }))?;
    log.record(EventBody::ModelCallEnded(ModelCallEnded {
        model_call: call_no,
        stop_reason: Some(response.stop.clone()),
        error: None,
        refusal: response.refusal.clone(),
        cut_calls: response.cut_calls.clone(),
        notes: response.notes.clone(),
    }))
}

/// The usage record of a call: every count known and the cost from the price table, or
/// every count unknown (the provider reported none) and the cost unknown with them.
fn usage_record(
    call_no: u32,
    answered_by: &str,
    usage: Option<crate::provider::Usage>,
    model: &Model,
) -> Usage {
    let Some(u) = usage else {
        return Usage {
            model_call: call_no,
            model: answered_by.to_owned(),
            input_tokens: None,
            cached_input_tokens: None,
            output_tokens: None,
            reasoning_tokens: None,
            cost: Cost::UnknownTokens,
        };
    };
    let cost = match model.prices.lookup(answered_by) {
        Some((price, source)) => Cost::Known {
            usd: price.cost(&u),
            source: match source {
                TablePriceSource::Shipped { as_of, .. } => PriceSource::ShippedTable(as_of.clone()),
                TablePriceSource::Override => PriceSource::Override,
            },
        },
        None => Cost::Unknown {
            model: answered_by.to_owned(),
        },
    };
    Usage {
        model_call: call_no,
        model: answered_by.to_owned(),
        input_tokens: Some(u.input_tokens),
        cached_input_tokens: Some(u.cached_input_tokens),
        output_tokens: Some(u.output_tokens),
        reasoning_tokens: Some(u.reasoning_tokens),
        cost,
    }
}

/// Records a model call that gave no usable answer (failed, or abandoned at the deadline or
/// on an interrupt): the text received before the failure, the input tokens the provider had
/// reported (its output count is never final before the stream ends, so it is unknown), the
/// time spent, and the error.
fn record_failed_call(
    call_no: u32,
    configured_model: &str,
    received: Option<&Response>,
    sent: Instant,
    failure: Option<&ProviderFailure>,
    log: &mut Log<'_>,
) -> Result<(), EpisodeError> {
    let model_name = received.map_or_else(|| configured_model.to_owned(), |r| r.model.clone());
    if let Some(r) = received {
        let text = r.text();
        if !text.is_empty() {
            log.record(EventBody::Message(Message {
                role: Role::Assistant,
                text,
            }))?;
        }
    }
    let known = received.and_then(|r| r.usage);
    log.record(EventBody::Usage(Usage {
        model_call: call_no,
        model: model_name,
        input_tokens: known.map(|u| u.input_tokens),
        cached_input_tokens: known.map(|u| u.cached_input_tokens),
        output_tokens: None,
        reasoning_tokens: None,
        cost: Cost::UnknownTokens,
    }))?;
    log.record(EventBody::ModelLatency(ModelLatency {
        model_call: call_no,
        first_token_ms: received.and_then(|r| r.latency.first_token).map(millis),
        total_ms: millis(sent.elapsed()),
    }))?;
    log.record(EventBody::ModelCallEnded(ModelCallEnded {
        model_call: call_no,
        stop_reason: None,
        error: failure.map(|f| ModelError {
            category: f.category,
            message: f.message.clone(),
        }),
        refusal: None,
        cut_calls: Vec::new(),
        notes: received.map(|r| r.notes.clone()).unwrap_or_default(),
    }))
}

/// Answers a tool call of a cut-off answer without running it.
fn record_not_run(
    call: &crate::provider::ToolCall,
    cut: &[String],
    log: &mut Log<'_>,
) -> Result<(), EpisodeError> {
    let why = if cut.contains(&call.id) {
        "its arguments were cut off"
    } else {
        "the answer it belongs to was cut off"
    };
    log.record(EventBody::ToolResult(ToolResult {
        call_id: call.id.clone(),
        state: ToolState::CouldNotRun,
        output: format!(
            "not run: {why} at the model's output limit (stop reason max_tokens); the episode \
             ends here"
        ),
        truncated: None,
        exit: None,
        duration_ms: 0,
    }))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn record_execution(
    call_id: &str,
    exec: &ToolExecution,
    log: &mut Log<'_>,
) -> Result<(), EpisodeError> {
    for d in &exec.denials {
        log.record(EventBody::Denial(Denial {
            call_id: call_id.to_owned(),
            hook: d.hook.clone(),
            explanation: d.explanation.clone(),
            target: d.target.clone(),
            missing: d.missing,
        }))?;
    }
    log.record(EventBody::ToolResult(ToolResult {
        call_id: call_id.to_owned(),
        state: exec.state,
        output: exec.content.clone(),
        truncated: None,
        exit: exec.exit,
        duration_ms: millis(exec.duration),
    }))
}

fn success_check(
    check: &CheckSpec,
    executor: &dyn ToolExecutor,
    interrupt: &Interrupt,
    log: &mut Log<'_>,
) -> Result<SuccessCheck, EpisodeError> {
    let bounds = Bounds {
        deadline: Some(Instant::now() + check.timeout),
        interrupt: interrupt.clone(),
    };
    let exec = executor.check(&check.command, &bounds);
    for d in &exec.denials {
        log.record(EventBody::Denial(Denial {
            call_id: SUCCESS_CHECK_CALL_ID.to_owned(),
            hook: d.hook.clone(),
            explanation: d.explanation.clone(),
            target: d.target.clone(),
            missing: d.missing,
        }))?;
    }
    let passed = exec.state == ToolState::Completed && exec.exit == Some(ExitStatus::Code(0));
    let how = match (exec.state, exec.exit) {
        (ToolState::Completed, Some(ExitStatus::Code(c))) => format!("exited with status {c}"),
        (_, Some(ExitStatus::Signal(s))) => format!("was ended by signal {s}"),
        (state, _) => format!("ended as {}", state.as_str()),
    };
    let mut detail = format!("`{}` {how}", check.command);
    let tail = last_lines(&exec.content, 5);
    if !passed && !tail.is_empty() {
        detail.push_str(": ");
        detail.push_str(&tail);
    }
    if !exec.denials.is_empty() {
        detail.push_str(&format!(" ({} denial(s))", exec.denials.len()));
    }
    Ok(SuccessCheck { passed, detail })
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

enum CallEnd {
    Provider(ProviderError),
    Crashed,
    Deadline,
    Interrupted,
}

/// Calls the model on a thread of its own, so that the wall deadline and an interrupt bound
/// the wait; a call left behind is abandoned (its answer is dropped when it arrives).
fn call_model(
    provider: &Arc<dyn Provider>,
    request: Request,
    deadline: Option<Instant>,
    interrupt: &Interrupt,
) -> Result<Response, CallEnd> {
    let (tx, rx) = mpsc::channel();
    let p = Arc::clone(provider);
    let spawned = std::thread::Builder::new()
        .name("bee-model-call".to_owned())
        .spawn(move || {
            let result = p.stream(&request, &mut |_| {});
            let _ = tx.send(result);
        });
    if spawned.is_err() {
        return Err(CallEnd::Crashed);
    }
    loop {
        let wait = deadline.map_or(POLL, |d| {
            d.saturating_duration_since(Instant::now()).min(POLL)
        });
        match rx.recv_timeout(wait) {
            Ok(result) => return result.map_err(CallEnd::Provider),
            Err(RecvTimeoutError::Disconnected) => return Err(CallEnd::Crashed),
            Err(RecvTimeoutError::Timeout) => {
                if interrupt.is_raised() {
                    return Err(CallEnd::Interrupted);
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(CallEnd::Deadline);
                }
            }
        }
    }
}
