//! A session: one conversation with a model whose tool calls run through a
//! [`ToolExecutor`], every step recorded as it happens. Every journey drives it through one
//! [`Controller`], which also decides the outcome — `bee run` sends a scenario's task once
//! and then runs its success check ([`crate::episode::run_episode`]); a subagent sends its
//! task once; `bee repl` sends what the user types, turn after turn.
//!
//! Why one file of this length: it is `Session`'s turn loop and the types that cross its
//! boundary; what the loop calls — a model call, a tool batch, the limits, the log — is in the
//! submodules.
//!
//! ```text
//! Session::start ──▶ send(text) ──▶ send(text) … ──▶ finish(outcome)
//!   episode_started    user message, then model calls and tool calls until the model ends
//!   (+ system prompt)  its turn or something stops it (TurnEnd)
//! ```
//!
//! [`Session::send`] streams a model turn from the [`Provider`],
//! records the assistant's text, tool calls, token usage (with the cost from the price table;
//! an unknown price stays unknown), latency and how the call ended, runs each tool call
//! through the executor and feeds the results back, until the model ends its turn without
//! tool calls — or a limit, a refusal, a provider failure or an interrupt ends the turn
//! ([`TurnEnd`]). Every event is shown to the observer as it is recorded, and the model's
//! stream as it arrives ([`Update`]).
//!
//! Limits are the session's and are checked *before* the step that would exceed them:
//!
//! - **turns** — no model call past the limit; tool calls of the last allowed turn are not
//!   run (their results could never reach the model);
//! - **tokens** (input + output over all calls) — each model call reserves its worst case
//!   first: an upper estimate of its input plus its output budget, which is capped at what
//!   the limit leaves; a call that cannot fit is not made, and a call that would fit once
//!   concurrent subagents' calls settle waits for them;
//! - **wall time** — a deadline from the session's start that bounds waiting for the model
//!   and every running tool (the executor must stop a tool by [`Bounds::deadline`]);
//! - **cost** (USD) — reserved the same way, at the model's prices; when the model's price
//!   or a call's token counts are unknown and a cost limit is set, the session refuses to go
//!   on and says why.
//!
//! A limit that ends a turn is recorded as `limit_hit`. The transcript's last event is
//! `episode_finished`, written by [`Session::finish`].

mod call;
mod controller;
mod executor;
mod limits;
mod log;
mod tool_calls;

use tool_calls::run_batch;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use call::{CallEnd, call_model, millis, record_failed_call, record_not_run, record_response};
pub use controller::Controller;
pub use limits::Budget;
use limits::{Reservation, Reserved, input_estimate};
use log::Log;

pub use executor::{
    Bounds, Interrupt, RECENT_DENIALS, ReadText, ToolDenial, ToolExecution, ToolExecutor,
};

use crate::provider::price::PriceTable;
use crate::provider::{self, ErrorCategory, Item, Provider, Request, ToolDef};
use crate::records::{
    EpisodeRecorder, EpisodeStarted, Event, EventBody, LimitHit, LimitKind, Limits, Message,
    Outcome, ParentLink, RecordError, Refusal, Role, StopReason, Store, SuccessCheck, Timestamp,
    ToolState, Totals,
};

/// How often a model call that waits for other calls' reservations to settle looks again.
const RESERVE_POLL: Duration = Duration::from_millis(20);

/// The hard limits of a session (an episode's, or an interactive session's); `None` is no
/// limit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EpisodeLimits {
    /// Model turns (model calls).
    pub turns: Option<u32>,
    /// Tokens, input plus output over all model calls.
    pub tokens: Option<u64>,
    /// Wall-clock time from the session's start.
    pub wall: Option<Duration>,
    /// Cost in USD.
    pub cost_usd: Option<f64>,
}

impl EpisodeLimits {
    fn record(&self) -> Limits {
        Limits {
            turns: self.turns,
            tokens: self.tokens,
            wall_ms: self.wall.map(millis),
            cost_usd: self.cost_usd,
        }
    }
}

/// The model side of a session.
#[derive(Debug, Clone)]
pub struct Model {
    /// The provider, shared by the run's episodes.
    pub provider: Arc<dyn Provider>,
    /// The provider's kind as recorded (`anthropic`, `replay`, …).
    pub kind: String,
    /// Prices, for the cost of each call.
    pub prices: Arc<PriceTable>,
    /// The provider file's output budget per call, in tokens (used when the session sets
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

/// Everything that defines a session, fixed at its start.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSpec {
    /// The run the session belongs to (its records directory name).
    pub run_id: String,
    /// The session's id, unique within the run (its transcript's file stem).
    pub session_id: String,
    /// What it is part of: the scenario's name, or `repl`.
    pub scenario: String,
    /// Instructions sent before the first message, if any.
    pub system_prompt: Option<String>,
    /// The hard limits.
    pub limits: EpisodeLimits,
    /// The directory the tools work in.
    pub workspace: PathBuf,
    /// The policy file, as recorded (`None` in host mode without a policy).
    pub policy: Option<String>,
    /// When the run started.
    pub run_started_at: Timestamp,
    /// The output budget of each model call, in tokens; `None` uses the provider file's.
    pub max_output_tokens: Option<u32>,
    /// The session and tool call that started this one, when it is a subagent (recorded in
    /// `episode_started`; its budget is joined with [`Session::within`]).
    pub parent: Option<ParentLink>,
    /// The hash of the episode's definition, for a scenario's episode (recorded in
    /// `episode_started`).
    pub content_hash: Option<String>,
}

/// Something the observer is shown while it happens.
#[derive(Debug, Clone, Copy)]
pub enum Update<'a> {
    /// An event, just recorded in the transcript (tool calls and their results, denials,
    /// usage, messages, …).
    Recorded(&'a Event),
    /// A piece of the model's answer as it streams in (text deltas, refusal text, tool-call
    /// fragments, usage), before the answer is complete and recorded.
    Stream(&'a provider::Event),
    /// A tool call is about to run (its `tool_call` event was recorded with the answer).
    ToolStarted(&'a provider::ToolCall),
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    /// The model ended its turn without tool calls.
    Done,
    /// A limit ended it (recorded as `limit_hit`). Limits of turns, tokens, time and cost
    /// are the session's: every later turn ends the same way at once.
    Limit(LimitHit),
    /// The provider failed (recorded with the failed call).
    Provider(ProviderFailure),
    /// The model declined, or a content filter stopped its answer.
    Refused(Refusal),
    /// The interrupt was raised: the model call was abandoned or the running tool stopped.
    Interrupted,
}

/// Why a session could not be recorded. The session stops at the first event that cannot be
/// written to its transcript: an unrecorded step must not happen. (An event the metrics store
/// refuses is still in the transcript; it is reported in [`Finished::store_errors`] and the
/// session goes on.)
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The transcript refused an event.
    #[error("session {session_id}: {source}")]
    Record {
        /// The session.
        session_id: String,
        /// The recorder's error.
        #[source]
        source: Box<RecordError>,
    },
}

/// What [`Session::finish`] reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The transcript.
    pub transcript: PathBuf,
    /// What the session used.
    pub totals: Totals,
    /// Events that are in the transcript but that the metrics store refused, in words
    /// (`bee metrics --rebuild` recovers the store from the transcripts).
    pub store_errors: Vec<String>,
}

/// One conversation; see the module documentation.
pub struct Session<'a> {
    spec: SessionSpec,
    model: Model,
    executor: &'a dyn ToolExecutor,
    log: Log<'a>,
    items: Vec<Item>,
    tools: Vec<ToolDef>,
    budget: Arc<Budget>,
    /// The item count and reported input tokens of the last request, for the next call's
    /// input estimate; `None` before the first call and after the conversation is cleared.
    last_input: Option<(usize, u64)>,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("session_id", &self.spec.session_id)
            .field("items", &self.items.len())
            .finish_non_exhaustive()
    }
}

impl<'a> Session<'a> {
    /// Starts a session: writes `episode_started` (and the system prompt, if any) to a new
    /// transcript under `records_dir` (and to `store`), and shows each to `observer`.
    ///
    /// # Errors
    /// [`SessionError`] when the transcript cannot be created or written.
    pub fn start(
        spec: SessionSpec,
        model: Model,
        executor: &'a dyn ToolExecutor,
        records_dir: &Path,
        store: Option<Arc<Store>>,
        observer: &'a (dyn Fn(Update<'_>) + Sync),
    ) -> Result<Self, SessionError> {
        let started = Instant::now();
        let started_event = EpisodeStarted {
            run_id: spec.run_id.clone(),
            episode_id: spec.session_id.clone(),
            scenario: spec.scenario.clone(),
            model: model.provider.model().to_owned(),
            provider: model.kind.clone(),
            policy: executor.policy_record(spec.policy.clone()),
            workspace: spec.workspace.display().to_string(),
            limits: spec.limits.record(),
            run_started_at: spec.run_started_at,
            parent: spec.parent.clone().map(Box::new),
            content_hash: spec.content_hash.clone(),
        };
        let rec = EpisodeRecorder::start(records_dir, started_event.clone(), store).map_err(
            |source| SessionError::Record {
                session_id: spec.session_id.clone(),
                source: Box::new(source),
            },
        )?;
        let log = Log {
            rec,
            observer,
            session_id: spec.session_id.clone(),
            store_errors: Vec::new(),
        };
        // The recorder wrote `episode_started` as event 1; show it too.
        log.show(&Event {
            seq: 1,
            at: Timestamp::now(),
            body: EventBody::EpisodeStarted(started_event),
        });
        let system = spec.system_prompt.clone();
        let mut session = Self {
            budget: Arc::new(Budget::new(&spec.session_id, &spec.limits, started, None)),
            tools: executor.definitions(),
            spec,
            model,
            executor,
            log,
            items: Vec::new(),
            last_input: None,
        };
        if let Some(system) = &system {
            session.add_system(system)?;
        }
        Ok(session)
    }

    /// The transcript being written.
    #[must_use]
    pub fn transcript(&self) -> &Path {
        self.log.transcript()
    }

    /// What the session has used so far.
    #[must_use]
    pub fn totals(&self) -> &Totals {
        self.log.rec.totals()
    }

    /// The session's fixed settings.
    #[must_use]
    pub fn spec(&self) -> &SessionSpec {
        &self.spec
    }

    /// The model side.
    #[must_use]
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The text of the model's last answer in the conversation (empty when it has given
    /// none, or its last answer held only tool calls).
    #[must_use]
    pub fn last_answer(&self) -> String {
        let mut text = Vec::new();
        for item in self.items.iter().rev() {
            match item {
                Item::AssistantText { text: t } => text.push(t.as_str()),
                Item::User { .. } | Item::ToolResult { .. } => break,
                _ if !text.is_empty() => break,
                _ => {}
            }
        }
        text.reverse();
        text.join("\n")
    }

    /// The tool definitions the model is given.
    #[must_use]
    pub fn tools(&self) -> &[ToolDef] {
        &self.tools
    }

    /// Sends a user message and runs the turn it starts to its end: model calls and tool
    /// calls until the model answers without tool calls, or a limit, a refusal, a provider
    /// failure or `interrupt` ends it. The conversation keeps everything, so the next
    /// [`Session::send`] goes on from there.
    ///
    /// # Errors
    /// [`SessionError`] when an event cannot be recorded; the session stops there.
    pub fn send(&mut self, text: &str, interrupt: &Interrupt) -> Result<TurnEnd, SessionError> {
        self.add_message(Role::User, text)?;
        let end = self.turn(interrupt)?;
        if let TurnEnd::Limit(hit) = &end {
            self.log.record(EventBody::LimitHit(hit.clone()))?;
        }
        Ok(end)
    }

    fn wall_hit(&self, what: &str) -> TurnEnd {
        TurnEnd::Limit(LimitHit {
            limit: LimitKind::Wall,
            detail: match self.spec.limits.wall {
                Some(w) => format!("wall time of {} s reached {what}", w.as_secs_f64()),
                // Only a parent's deadline can have passed.
                None => format!("the parent session's wall time ran out {what}"),
            },
        })
    }

    fn past_deadline(&self) -> bool {
        self.budget.deadline().is_some_and(|d| Instant::now() >= d)
    }

    /// Makes this session a subagent of the session that owns `parent`: its tokens, cost and
    /// time then count against that session's limits (and its ancestors') too, and it stops
    /// when any of them is reached ([`Budget`]). Call it before the first [`Session::send`].
    #[must_use]
    pub fn within(mut self, parent: Arc<Budget>) -> Self {
        self.budget = Arc::new(Budget::new(
            &self.spec.session_id,
            &self.spec.limits,
            Instant::now(),
            Some(parent),
        ));
        self
    }

    /// What this session spends from: its limits, and its ancestors' for a subagent.
    #[must_use]
    pub fn budget(&self) -> &Arc<Budget> {
        &self.budget
    }

    fn turn(&mut self, interrupt: &Interrupt) -> Result<TurnEnd, SessionError> {
        loop {
            if interrupt.is_raised() {
                return Ok(TurnEnd::Interrupted);
            }
            let mut request = Request {
                items: self.items.clone(),
                tools: self.tools.clone(),
                max_output_tokens: None,
            };
            let reservation = match self.reserve(&request, interrupt) {
                Ok(r) => r,
                Err(end) => return Ok(end),
            };
            request.max_output_tokens = reservation.output();
            let sent_items = request.items.len();
            let call_no = self.budget.next_turn();
            let sent = Instant::now();
            let observer = self.log.observer;
            let response = match call_model(
                &self.model.provider,
                request,
                self.budget.deadline(),
                interrupt,
                observer,
            ) {
                Ok(r) => r,
                Err(end) => return self.failed_call(call_no, sent, end, reservation),
            };
            let usage = record_response(&response, call_no, &self.model, &mut self.log)?;
            reservation.settle(&usage);
            self.last_input = usage.input_tokens.map(|n| (sent_items, n));
            let calls: Vec<_> = response.tool_calls().cloned().collect();
            match &response.stop {
                StopReason::Refusal | StopReason::ContentFilter => {
                    // The assembler gives every refusal and content-filter stop a Refusal.
                    let refusal = response.refusal.clone().unwrap_or(Refusal {
                        text: String::new(),
                        detail: None,
                    });
                    return Ok(TurnEnd::Refused(refusal));
                }
                StopReason::MaxTokens => {
                    for call in &calls {
                        record_not_run(call, &response.cut_calls, &mut self.log)?;
                    }
                    let not_run = if calls.is_empty() {
                        String::new()
                    } else {
                        format!("; {} tool call(s) of it not run", calls.len())
                    };
                    return Ok(TurnEnd::Limit(LimitHit {
                        limit: LimitKind::MaxOutputTokens,
                        detail: format!(
                            "the answer of model call {call_no} was cut off at its output \
                             limit{not_run}"
                        ),
                    }));
                }
                StopReason::Error => {
                    return Ok(TurnEnd::Provider(ProviderFailure {
                        category: ErrorCategory::Server,
                        message: format!(
                            "model call {call_no} stopped with an error on the provider's side \
                             (stop reason `error`)"
                        ),
                    }));
                }
                StopReason::Unknown(raw) => {
                    return Ok(TurnEnd::Provider(ProviderFailure {
                        category: ErrorCategory::Protocol,
                        message: format!(
                            "model call {call_no} stopped for a reason bee does not know \
                             (`{raw}`), so its answer is not used"
                        ),
                    }));
                }
                StopReason::EndTurn | StopReason::ToolUse | StopReason::Pause => {}
            }
            self.items.extend(response.items.iter().cloned());
            if calls.is_empty() {
                if response.stop == StopReason::Pause {
                    // The provider paused a long turn: sending the answer back continues it.
                    continue;
                }
                return Ok(TurnEnd::Done);
            }
            if let Some(hit) = self.budget.after_call(calls.len()) {
                return Ok(TurnEnd::Limit(hit));
            }
            let mut rest = &calls[..];
            while let Some(first) = rest.first() {
                if interrupt.is_raised() {
                    return Ok(TurnEnd::Interrupted);
                }
                if self.past_deadline() {
                    return Ok(self.wall_hit(&format!("before tool call {} ran", first.id)));
                }
                // Calls the executor can run side by side (subagents) run together; every
                // other call runs alone, in order.
                let n = if self.executor.concurrent(&first.name) {
                    rest.iter()
                        .take_while(|c| self.executor.concurrent(&c.name))
                        .count()
                } else {
                    1
                };
                let (batch, tail) = rest.split_at(n);
                rest = tail;
                for call in batch {
                    observer(Update::ToolStarted(call));
                }
                let bounds = Bounds {
                    deadline: self.budget.deadline(),
                    interrupt: interrupt.clone(),
                    budget: Some(Arc::clone(&self.budget)),
                };
                for (call, exec) in batch.iter().zip(run_batch(self.executor, batch, &bounds)) {
                    self.record_execution(&call.id, &exec)?;
                    self.items.push(Item::ToolResult {
                        call_id: call.id.clone(),
                        output: exec.content.clone(),
                        is_error: exec.state != ToolState::Completed,
                    });
                }
                if interrupt.is_raised() {
                    return Ok(TurnEnd::Interrupted);
                }
                if self.past_deadline() {
                    let last = batch.last().unwrap_or(first);
                    return Ok(
                        self.wall_hit(&format!("while tool call {} ({}) ran", last.id, last.name))
                    );
                }
            }
        }
    }

    /// Reserves the worst case of the call that would send `request`, waiting while calls in
    /// flight elsewhere in the budget's tree hold part of what it needs; the turn's end when
    /// a limit refuses it, the wall time runs out or the user interrupts.
    fn reserve(&self, request: &Request, interrupt: &Interrupt) -> Result<Reservation, TurnEnd> {
        let input = input_estimate(request, self.last_input);
        loop {
            match self
                .budget
                .reserve(&self.model, input, self.spec.max_output_tokens)
            {
                Reserved::Granted(r) => return Ok(r),
                Reserved::Refused(hit) => return Err(TurnEnd::Limit(hit)),
                Reserved::Wait => {}
            }
            if interrupt.is_raised() {
                return Err(TurnEnd::Interrupted);
            }
            if self.past_deadline() {
                return Err(self.wall_hit("while waiting for other model calls to settle"));
            }
            std::thread::sleep(RESERVE_POLL);
        }
    }

    /// Records a call that gave no answer, settles its reservation, and says how the turn
    /// ends.
    fn failed_call(
        &mut self,
        call_no: u32,
        sent: Instant,
        end: CallEnd,
        reservation: Reservation,
    ) -> Result<TurnEnd, SessionError> {
        let configured = self.model.provider.model().to_owned();
        let (failure, received, turn_end) = match end {
            CallEnd::Provider(e) => {
                let failure = ProviderFailure {
                    category: e.category(),
                    message: e.to_string(),
                };
                let usage = record_failed_call(
                    call_no,
                    &configured,
                    e.received(),
                    sent,
                    Some(&failure),
                    &mut self.log,
                )?;
                reservation.settle(&usage);
                return Ok(TurnEnd::Provider(failure));
            }
            CallEnd::Crashed => {
                let failure = ProviderFailure {
                    category: ErrorCategory::Protocol,
                    message: "the model call ended without an answer (its thread failed)"
                        .to_owned(),
                };
                (Some(failure.clone()), None, TurnEnd::Provider(failure))
            }
            CallEnd::Deadline => (None, None, self.wall_hit("while waiting for the model")),
            CallEnd::Interrupted => (None, None, TurnEnd::Interrupted),
        };
        // An abandoned call still happened: it is recorded with unknown tokens.
        let usage = record_failed_call(
            call_no,
            &configured,
            received,
            sent,
            failure.as_ref(),
            &mut self.log,
        )?;
        reservation.settle(&usage);
        Ok(turn_end)
    }

    /// Adds a user message to the conversation without starting a turn (a loaded skill, say):
    /// it is recorded, and the model sees it with the next [`Session::send`].
    ///
    /// # Errors
    /// [`SessionError`] when it cannot be recorded.
    pub fn add_context(&mut self, text: &str) -> Result<(), SessionError> {
        self.add_message(Role::User, text)
    }

    /// Adds instructions from the harness (project instructions, say) after the system
    /// prompt: recorded as a system message, sent with every later request.
    ///
    /// # Errors
    /// [`SessionError`] when it cannot be recorded.
    pub fn add_system(&mut self, text: &str) -> Result<(), SessionError> {
        self.add_message(Role::System, text)
    }

    fn add_message(&mut self, role: Role, text: &str) -> Result<(), SessionError> {
        self.log.record(EventBody::Message(Message {
            role,
            text: text.to_owned(),
        }))?;
        self.items.push(match role {
            Role::System => Item::System {
                text: text.to_owned(),
            },
            Role::User => Item::User {
                text: text.to_owned(),
            },
            Role::Assistant => Item::AssistantText {
                text: text.to_owned(),
            },
        });
        Ok(())
    }

    /// Forgets the conversation (the system prompt stays): later turns start afresh. The
    /// transcript, totals and limits go on.
    pub fn clear(&mut self) {
        self.items.retain(|i| matches!(i, Item::System { .. }));
        self.last_input = None;
    }

    /// Ends the session: writes `episode_finished` with `outcome` and the check, shows it to
    /// the observer, and reports the totals.
    ///
    /// # Errors
    /// [`SessionError`] when the transcript refuses the last event.
    pub fn finish(
        self,
        outcome: Outcome,
        check: Option<SuccessCheck>,
    ) -> Result<Finished, SessionError> {
        let Log {
            rec,
            observer,
            session_id,
            mut store_errors,
        } = self.log;
        let transcript = rec.transcript_path().to_owned();
        let counted = rec.totals().clone();
        let totals = match rec.finish(outcome, check) {
            Ok(finished) => {
                observer(Update::Recorded(&finished));
                match finished.body {
                    EventBody::EpisodeFinished(f) => f.totals,
                    _ => counted,
                }
            }
            Err(RecordError::Store(e)) => {
                store_errors.push(format!("episode_finished: {e}"));
                counted
            }
            Err(source) => {
                return Err(SessionError::Record {
                    session_id,
                    source: Box::new(source),
                });
            }
        };
        Ok(Finished {
            transcript,
            totals,
            store_errors,
        })
    }
}
