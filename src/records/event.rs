//! The transcript event model: everything an episode records, one [`Event`] at a time.
//!
//! Why one file of this length: it is the transcript's whole schema, every event kind with its
//! fields, so a change to the format is one diff to read against `docs/records.md`; its tests
//! are the last 140 lines.
//!
//! An event is written as one JSON object: its sequence number, its timestamp and an
//! `event` tag naming the kind, followed by that kind's fields:
//!
//! ```json
//! {"seq":3,"at":"2026-11-30T06:15:02.118Z","event":"tool_call","call_id":"c1","tool":"shell","arguments":{"cmd":"cargo test"}}
//! ```
//!
//! Units are in the field names' documentation: token counts are tokens, money is US dollars,
//! durations are milliseconds.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::time::Timestamp;
pub use crate::provider::{ErrorCategory, Refusal, StopReason};
pub use crate::vocab::{Enforcement, GrantKind, HookName, Outcome, ToolState};

/// One transcript line: a sequence number, when it happened, and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the episode's transcript: 1 for the first event, then consecutive.
    pub seq: u64,
    /// When the event was recorded.
    pub at: Timestamp,
    /// What happened.
    #[serde(flatten)]
    pub body: EventBody,
}

/// The kinds of event, tagged by `event` in JSON (`"event": "tool_result"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventBody {
    /// The episode began; always the first event of a transcript.
    EpisodeStarted(EpisodeStarted),
    /// A message in the conversation.
    Message(Message),
    /// The model asked for a tool to run.
    ToolCall(ToolCall),
    /// A tool call ended (or could not start).
    ToolResult(ToolResult),
    /// The kernel refused an operation of a tool call.
    Denial(Denial),
    /// Token usage and cost of one model call.
    Usage(Usage),
    /// Latency of one model call.
    ModelLatency(ModelLatency),
    /// How one model call ended: its stop reason, or the error that ended it.
    ModelCallEnded(ModelCallEnded),
    /// A limit of the episode was reached; the episode ends.
    LimitHit(LimitHit),
    /// An `agent` tool call asked for a subagent: the session it started, or why none was
    /// (recorded in the calling session's transcript, before the call's `tool_result`).
    Subagent(Subagent),
    /// The episode ended; always the last event of a complete transcript.
    EpisodeFinished(EpisodeFinished),
}

impl EventBody {
    /// The `event` tag of this kind, as written in JSON.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::EpisodeStarted(_) => "episode_started",
            Self::Message(_) => "message",
            Self::ToolCall(_) => "tool_call",
            Self::ToolResult(_) => "tool_result",
            Self::Denial(_) => "denial",
            Self::Usage(_) => "usage",
            Self::ModelLatency(_) => "model_latency",
            Self::ModelCallEnded(_) => "model_call_ended",
            Self::LimitHit(_) => "limit_hit",
            Self::Subagent(_) => "subagent",
            Self::EpisodeFinished(_) => "episode_finished",
        }
    }
}

/// How an episode was set up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeStarted {
    /// The run this episode belongs to (the transcript's directory name).
    pub run_id: String,
    /// The episode, unique within its run (the transcript's file stem).
    pub episode_id: String,
    /// The scenario's name.
    pub scenario: String,
    /// The model, as the provider names it.
    pub model: String,
    /// The provider kind (for example `anthropic`, `openai-compatible`).
    pub provider: String,
    /// Which policy confined the tools and how.
    pub policy: PolicyRecord,
    /// The episode's workspace directory.
    pub workspace: String,
    /// The limits the episode ran under.
    pub limits: Limits,
    /// When the run this episode belongs to started.
    pub run_started_at: Timestamp,
    /// The session and tool call that started this one, when it is a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Box<ParentLink>>,
    /// The SHA-256 of the episode's definition (prompt, system prompt, policy file bytes,
    /// limits, success check, skills: see `docs/episodes.md`), set by `bee run` for a
    /// scenario's episodes; `bee run --resume` skips an episode only when it matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
}

/// Where a subagent session came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    /// The calling session (an episode, `repl`, or another subagent) in the same run.
    pub episode_id: String,
    /// The `agent` tool call of that session that started this one.
    pub call_id: String,
    /// The role it plays (`.bee/agents/<role>.toml`), or `(inline)` for an inline policy.
    pub role: String,
    /// How deep it is: 1 for a subagent of a top-level session.
    pub depth: u32,
}

/// An `agent` tool call's subagent, as its caller records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subagent {
    /// The `agent` tool call.
    pub call_id: String,
    /// The role asked for, or `(inline)`.
    pub role: String,
    /// The subagent's session (its transcript's file stem in this run), when one started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Why no subagent started (a failed attenuation proof, an unknown role, …); `None` when
    /// one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The policy of an episode and how it was enforced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyRecord {
    /// Where the policy came from (a file path), or `None` when the episode ran without one.
    pub source: Option<String>,
    /// Whether a kernel scope enforced it.
    pub enforcement: Enforcement,
    /// The engine that did; absent in host mode and in records written before there was a
    /// choice (the BPF LSM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineName>,
    /// The policy as compiled from its file (`bee validate --emit compiled` form), when a
    /// kernel scope enforced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<serde_json::Value>,
    /// What was installed for the scope: the requested policy plus bee's tool-runner grant
    /// (rules whose origin key is `(bee tool runner)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed: Option<serde_json::Value>,
    /// Tools whose calls run in a scope of their own, under a narrower policy
    /// (`[tools.NAME] policy`): tool name → policy file.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tools: std::collections::BTreeMap<String, String>,
}

/// The kernel mechanism that enforced an episode's scope (`bpf-lsm`, `landlock`), as
/// `bee_userspace::scope::EngineKind` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineName {
    /// bee's BPF LSM programs.
    BpfLsm,
    /// The Landlock engine.
    Landlock,
}

impl From<bee_userspace::scope::EngineKind> for EngineName {
    fn from(k: bee_userspace::scope::EngineKind) -> Self {
        match k {
            bee_userspace::scope::EngineKind::BpfLsm => Self::BpfLsm,
            bee_userspace::scope::EngineKind::Landlock => Self::Landlock,
        }
    }
}

/// The limits of an episode; `None` means no limit of that kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Most model turns (model calls).
    pub turns: Option<u32>,
    /// Most tokens, input plus output, over all model calls.
    pub tokens: Option<u64>,
    /// Most wall-clock time, milliseconds.
    pub wall_ms: Option<u64>,
    /// Most cost, US dollars.
    pub cost_usd: Option<f64>,
}

/// A conversation message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub text: String,
}

/// The author of a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions from bee or the scenario.
    System,
    /// The user (or the scenario's task).
    User,
    /// The model.
    Assistant,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, unique within the episode; results and denials refer to it.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments as the model gave them.
    pub arguments: serde_json::Value,
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The [`ToolCall::call_id`] this answers.
    pub call_id: String,
    /// Which of the three states the tool ended in.
    pub state: ToolState,
    /// What the tool returned to the model, possibly cut short (see `truncated`).
    pub output: String,
    /// Present when `output` was cut short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncation>,
    /// How the tool's process exited, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<ExitStatus>,
    /// From the start of the call to its end, milliseconds.
    pub duration_ms: u64,
    /// Audit records the kernel lost while the call ran: its denials above may be
    /// incomplete. Left out when none were.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_records: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How a tool's output was shortened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncation {
    /// The length of the whole output, bytes.
    pub total_bytes: u64,
    /// What was kept and where the rest is, in words (for example "kept the last 16 KiB").
    pub note: String,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// It exited with this status (`{"code": 0}`).
    Code(i32),
    /// A signal with this number ended it (`{"signal": 9}`).
    Signal(i32),
}

/// The call id under which denials of an episode's success check are recorded (the check
/// runs in a scope like a tool call, but is not one).
pub const SUCCESS_CHECK_CALL_ID: &str = "success-check";

/// An operation the kernel refused to a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// The [`ToolCall::call_id`] whose scope the refusal happened in, or
    /// [`SUCCESS_CHECK_CALL_ID`].
    pub call_id: String,
    /// The LSM hook that refused (for example `file_open`, `bprm_check_security`).
    pub hook: HookName,
    /// One line saying what was refused and why.
    pub explanation: String,
    /// The file or peer the operation was aimed at.
    pub target: DenialTarget,
    /// The kind of grant that would have allowed it.
    pub missing: GrantKind,
    /// Learn mode (`bee run --learn`): the policy refused it, and learn mode allowed it and
    /// recorded it for the learned policy. Absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub learn: bool,
}

/// What a refused operation was aimed at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenialTarget {
    /// A file path (`{"path": "/etc/shadow"}`).
    Path(String),
    /// A network peer: `address:port`, or a unix socket path (`{"peer": "1.1.1.1:443"}`).
    Peer(String),
    /// A domain name bee's resolver refused to resolve (`{"name": "x.evil.example"}`).
    Name(String),
    /// A system call the Landlock engine's seccomp filter refused, with the argument that
    /// decided (`{"call": "socket(AF_UNIX, SOCK_STREAM)"}`).
    Call(String),
}

impl DenialTarget {
    /// `path`, `peer`, `name` or `call`.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Path(_) => "path",
            Self::Peer(_) => "peer",
            Self::Name(_) => "name",
            Self::Call(_) => "call",
        }
    }

    /// The path, the peer, the name or the call.
    #[must_use]
    pub fn value(&self) -> &str {
        match self {
            Self::Path(v) | Self::Peer(v) | Self::Name(v) | Self::Call(v) => v,
        }
    }
}

/// Tokens and cost of one model call, failed calls included. A count the provider did not
/// report is `null` (unknown), never 0: a call that failed before any usage arrived has
/// every count unknown, and one that failed after Anthropic's `message_start` knows its input
/// tokens only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// The model call this is for: 1 for the episode's first call, then consecutive.
    pub model_call: u32,
    /// The model that answered.
    pub model: String,
    /// Input tokens, cached ones included.
    pub input_tokens: Option<u64>,
    /// Of `input_tokens`, those served from the provider's cache.
    pub cached_input_tokens: Option<u64>,
    /// Output tokens, reasoning ones included.
    pub output_tokens: Option<u64>,
    /// Of `output_tokens`, those spent on reasoning.
    pub reasoning_tokens: Option<u64>,
    /// What the call cost; unknown when its price or any of its counts is.
    pub cost: Cost,
}

impl Usage {
    /// Whether every count is known.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.input_tokens.is_some()
            && self.cached_input_tokens.is_some()
            && self.output_tokens.is_some()
            && self.reasoning_tokens.is_some()
    }
}

/// How one model call ended: written after its `usage` and `model_latency`, for every call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCallEnded {
    /// The model call this is for (as in [`Usage::model_call`]).
    pub model_call: u32,
    /// Why the model stopped (`end_turn`, `tool_use`, `max_tokens`, `refusal`,
    /// `content_filter`, `pause`, `error`, `unknown(<raw>)`); `None` when the call failed.
    pub stop_reason: Option<StopReason>,
    /// The error that ended the call, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ModelError>,
    /// What the model said when it declined to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// Tool calls whose arguments were cut off by the output limit; never run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut_calls: Vec<String>,
    /// What bee noticed in the stream and did not use (extra choices, unknown output items,
    /// a restarted answer), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A failed model call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelError {
    /// How the failure is sorted (`rate-limit`, `overloaded`, `server`, `network`,
    /// `protocol`, `auth`, `not-found`).
    pub category: ErrorCategory,
    /// The error, in words (never holds the API key).
    pub message: String,
}

/// The cost of a model call. An unknown price or token count stays unknown: it is never
/// written as $0.
///
/// In JSON: `{"usd": 0.0123, "source": "shipped table 2026-11"}`,
/// `{"unknown": {"model": "local-llama"}}` (no price), or `{"unknown": {"tokens": "not
/// reported"}}` (the call's token counts are not all known, as for a failed call).
#[derive(Debug, Clone, PartialEq)]
pub enum Cost {
    /// The price was known.
    Known {
        /// US dollars.
        usd: f64,
        /// Where the price came from.
        source: PriceSource,
    },
    /// No price is known for this model.
    Unknown {
        /// The model without a price.
        model: String,
    },
    /// The provider did not report all of the call's token counts.
    UnknownTokens,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum CostRepr {
    Known { usd: f64, source: PriceSource },
    Unknown { unknown: UnknownRepr },
}

#[derive(Serialize, Deserialize)]
struct UnknownRepr {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tokens: Option<String>,
}

/// How [`Cost::UnknownTokens`] is spelled in JSON.
const TOKENS_NOT_REPORTED: &str = "not reported";

impl Serialize for Cost {
    /// Refuses a non-finite `usd`: JSON would write it as `null`, which reads back as
    /// neither a known nor an unknown cost.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Known { usd, .. } if !usd.is_finite() => {
                return Err(serde::ser::Error::custom(format!(
                    "cost {usd} USD is not a finite number"
                )));
            }
            Self::Known { usd, source } => CostRepr::Known {
                usd: *usd,
                source: source.clone(),
            },
            Self::Unknown { model } => CostRepr::Unknown {
                unknown: UnknownRepr {
                    model: Some(model.clone()),
                    tokens: None,
                },
            },
            Self::UnknownTokens => CostRepr::Unknown {
                unknown: UnknownRepr {
                    model: None,
                    tokens: Some(TOKENS_NOT_REPORTED.to_owned()),
                },
            },
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match CostRepr::deserialize(d)? {
            CostRepr::Known { usd, source } => Self::Known { usd, source },
            CostRepr::Unknown {
                unknown: UnknownRepr {
                    model: Some(model), ..
                },
            } => Self::Unknown { model },
            CostRepr::Unknown {
                unknown: UnknownRepr {
                    tokens: Some(_), ..
                },
            } => Self::UnknownTokens,
            CostRepr::Unknown { .. } => {
                return Err(serde::de::Error::custom(
                    "an unknown cost names its model or says its tokens were not reported",
                ));
            }
        })
    }
}

/// Where a price came from.
///
/// Written as `shipped table <edition>` (the price table shipped with bee, for example
/// `shipped table 2026-11`) or `override` (a price the operator configured).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PriceSource {
    /// The price table shipped with bee, by edition (`2026-11`).
    ShippedTable(String),
    /// A price from the operator's configuration.
    Override,
}

impl fmt::Display for PriceSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ShippedTable(edition) => write!(f, "shipped table {edition}"),
            Self::Override => f.write_str("override"),
        }
    }
}

impl FromStr for PriceSource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "override" {
            return Ok(Self::Override);
        }
        match s.strip_prefix("shipped table ") {
            Some(edition) if !edition.is_empty() => Ok(Self::ShippedTable(edition.to_owned())),
            _ => Err(format!(
                "`{s}` is not a price source (`shipped table <edition>` or `override`)"
            )),
        }
    }
}

impl Serialize for PriceSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PriceSource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// How long one model call took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelLatency {
    /// The model call this is for (as in [`Usage::model_call`]).
    pub model_call: u32,
    /// From sending the request to the first streamed token, milliseconds; `None` when
    /// nothing was streamed.
    pub first_token_ms: Option<u64>,
    /// From sending the request to the end of the response, milliseconds.
    pub total_ms: u64,
}

/// A limit that ended the episode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitHit {
    /// Which limit.
    pub limit: LimitKind,
    /// What was reached, in words (for example "40 turns of 40").
    pub detail: String,
}

/// The kinds of episode limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Model turns.
    Turns,
    /// Tokens.
    Tokens,
    /// Wall-clock time.
    Wall,
    /// Cost.
    Cost,
    /// The model's output limit: an answer was cut off (`max_tokens`).
    MaxOutputTokens,
}

impl LimitKind {
    /// `turns`, `tokens`, `wall`, `cost` or `max_output_tokens`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Turns => "turns",
            Self::Tokens => "tokens",
            Self::Wall => "wall",
            Self::Cost => "cost",
            Self::MaxOutputTokens => "max_output_tokens",
        }
    }
}

/// How an episode ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeFinished {
    /// The outcome.
    pub outcome: Outcome,
    /// The scenario's success check, when it ran.
    pub success_check: Option<SuccessCheck>,
    /// What the episode used.
    pub totals: Totals,
}

/// The result of a scenario's success check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuccessCheck {
    /// Whether it passed.
    pub passed: bool,
    /// What it found, in words.
    pub detail: String,
}

/// What an episode (or a run) used. Build one from events with [`Totals::add`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Model calls made, failed ones included.
    pub model_calls: u64,
    /// Of `model_calls`, those with a token count the provider did not report (the token
    /// sums below are then lower bounds).
    #[serde(default)]
    pub unknown_token_calls: u64,
    /// Tool calls asked for.
    pub tool_calls: u64,
    /// Operations the kernel refused.
    pub denials: u64,
    /// Audit records the kernel lost during tool calls (each call's
    /// [`ToolResult::lost_records`]): `denials` is then a lower bound.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_records: u64,
    /// Input tokens, cached ones included.
    pub input_tokens: u64,
    /// Cached input tokens.
    pub cached_input_tokens: u64,
    /// Output tokens, reasoning ones included.
    pub output_tokens: u64,
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
    /// The cost, which is unknown as a whole when any part of it is.
    pub cost: CostTotal,
    /// From the first event to the last, milliseconds.
    pub wall_ms: u64,
}

impl Totals {
    /// Counts one event in (model calls by their [`Usage`], tool calls, denials, tokens,
    /// cost). Wall time is not derived from events; set `wall_ms` yourself.
    pub fn add(&mut self, body: &EventBody) {
        match body {
            EventBody::ToolCall(_) => self.tool_calls += 1,
            EventBody::Denial(_) => self.denials += 1,
            EventBody::ToolResult(r) => self.lost_records += r.lost_records,
            EventBody::Usage(u) => {
                self.model_calls += 1;
                if !u.is_complete() {
                    self.unknown_token_calls += 1;
                }
                self.input_tokens += u.input_tokens.unwrap_or(0);
                self.cached_input_tokens += u.cached_input_tokens.unwrap_or(0);
                self.output_tokens += u.output_tokens.unwrap_or(0);
                self.reasoning_tokens += u.reasoning_tokens.unwrap_or(0);
                self.cost.add(&u.cost);
            }
            _ => {}
        }
    }

    /// The denials in words, as every summary line says them: `3 denial(s)`, and when audit
    /// records were lost, `3 denial(s) (and 12 audit record(s) lost: there may be more)`.
    pub fn denials_said(&self) -> String {
        let mut said = format!("{} denial(s)", self.denials);
        if self.lost_records > 0 {
            said.push_str(&format!(
                " (and {} audit record(s) lost: there may be more)",
                self.lost_records
            ));
        }
        said
    }

    /// Adds another total (an episode's, into a run's).
    pub fn merge(&mut self, other: &Totals) {
        self.model_calls += other.model_calls;
        self.unknown_token_calls += other.unknown_token_calls;
        self.tool_calls += other.tool_calls;
        self.denials += other.denials;
        self.lost_records += other.lost_records;
        self.input_tokens += other.input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.output_tokens += other.output_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cost.merge(&other.cost);
        self.wall_ms += other.wall_ms;
    }
}

/// A sum of costs that stays honest about unknown prices.
///
/// In JSON: `{"usd": 0.42, "known_usd": 0.42, "unknown_models": [], "sources": ["shipped table
/// 2026-11"]}`; `usd` is `null` whenever `unknown_models` is not empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CostTotal {
    /// The sum of the known costs, US dollars.
    pub known_usd: f64,
    /// The models of the calls whose price is unknown, sorted, without repeats. When not
    /// empty, the total is unknown and `known_usd` is only a lower bound.
    pub unknown_models: Vec<String>,
    /// Calls whose token counts were not all reported (failed calls, mostly). When not 0,
    /// the total is unknown and `known_usd` is only a lower bound.
    pub unknown_token_calls: u64,
    /// The price sources of the known costs, sorted, without repeats.
    pub sources: Vec<PriceSource>,
}

impl CostTotal {
    /// The total in US dollars, or `None` when a part of it is unknown.
    #[must_use]
    pub fn usd(&self) -> Option<f64> {
        (self.unknown_models.is_empty() && self.unknown_token_calls == 0).then_some(self.known_usd)
    }

    /// Adds one cost.
    pub fn add(&mut self, cost: &Cost) {
        match cost {
            Cost::Known { usd, source } => {
                self.known_usd += usd;
                insert_sorted(&mut self.sources, source.clone());
            }
            Cost::Unknown { model } => insert_sorted(&mut self.unknown_models, model.clone()),
            Cost::UnknownTokens => self.unknown_token_calls += 1,
        }
    }

    /// Adds another total.
    pub fn merge(&mut self, other: &CostTotal) {
        self.known_usd += other.known_usd;
        self.unknown_token_calls += other.unknown_token_calls;
        for m in &other.unknown_models {
            insert_sorted(&mut self.unknown_models, m.clone());
        }
        for s in &other.sources {
            insert_sorted(&mut self.sources, s.clone());
        }
    }
}

impl fmt::Display for CostTotal {
    /// `$0.4200`; when part of it is unknown, the known part and the gap:
    /// `$0.4200 + unknown for 1 call (tokens not reported)`, `$0.4200 + unknown for m (no
    /// price)`; `unknown (no price for m)` when no part of it is known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(usd) = self.usd() {
            return write!(f, "${usd:.4}");
        }
        let calls = |n: u64| format!("{n} call{}", if n == 1 { "" } else { "s" });
        if self.sources.is_empty() {
            let mut parts = Vec::new();
            if !self.unknown_models.is_empty() {
                parts.push(format!("no price for {}", self.unknown_models.join(", ")));
            }
            if self.unknown_token_calls > 0 {
                parts.push(format!(
                    "tokens not reported for {}",
                    calls(self.unknown_token_calls)
                ));
            }
            return write!(f, "unknown ({})", parts.join("; "));
        }
        let mut gaps = Vec::new();
        if self.unknown_token_calls > 0 {
            gaps.push(format!(
                "{} (tokens not reported)",
                calls(self.unknown_token_calls)
            ));
        }
        if !self.unknown_models.is_empty() {
            gaps.push(format!("{} (no price)", self.unknown_models.join(", ")));
        }
        write!(
            f,
            "${:.4} + unknown for {}",
            self.known_usd,
            gaps.join(" and for ")
        )
    }
}

fn insert_sorted<T: Ord>(v: &mut Vec<T>, item: T) {
    if let Err(at) = v.binary_search(&item) {
        v.insert(at, item);
    }
}

#[derive(Serialize, Deserialize)]
struct CostTotalRepr {
    #[serde(default)]
    usd: Option<f64>,
    known_usd: f64,
    unknown_models: Vec<String>,
    #[serde(default)]
    unknown_token_calls: u64,
    sources: Vec<PriceSource>,
}

impl Serialize for CostTotal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CostTotalRepr {
            usd: self.usd(),
            known_usd: self.known_usd,
            unknown_models: self.unknown_models.clone(),
            unknown_token_calls: self.unknown_token_calls,
            sources: self.sources.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for CostTotal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = CostTotalRepr::deserialize(d)?;
        Ok(Self {
            known_usd: r.known_usd,
            unknown_models: r.unknown_models,
            unknown_token_calls: r.unknown_token_calls,
            sources: r.sources,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn event_json_is_flat_and_tagged() {
        let e = Event {
            seq: 3,
            at: Timestamp::from_unix_millis(0).unwrap(),
            body: EventBody::ToolCall(ToolCall {
                call_id: "c1".into(),
                tool: "shell".into(),
                arguments: json!({"cmd": "cargo test"}),
            }),
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            json!({"seq": 3, "at": "1970-01-01T00:00:00.000Z", "event": "tool_call",
                   "call_id": "c1", "tool": "shell", "arguments": {"cmd": "cargo test"}})
        );
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn cost_shapes() {
        let known = Cost::Known {
            usd: 0.5,
            source: PriceSource::ShippedTable("2026-11".into()),
        };
        assert_eq!(
            serde_json::to_value(&known).unwrap(),
            json!({"usd": 0.5, "source": "shipped table 2026-11"})
        );
        let unknown = Cost::Unknown {
            model: "local".into(),
        };
        assert_eq!(
            serde_json::to_value(&unknown).unwrap(),
            json!({"unknown": {"model": "local"}})
        );
        for c in [known, unknown] {
            let back: Cost = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
            assert_eq!(back, c);
        }
        assert!(serde_json::from_value::<Cost>(json!({"usd": 1.0, "source": "guess"})).is_err());
    }

    #[test]
    fn a_non_finite_cost_is_not_written() {
        for usd in [f64::NAN, f64::INFINITY] {
            let c = Cost::Known {
                usd,
                source: PriceSource::Override,
            };
            assert!(serde_json::to_string(&c).is_err());
        }
    }

    #[test]
    fn a_failed_call_leaves_the_known_cost_and_marks_the_gap() {
        let mut t = CostTotal::default();
        t.add(&Cost::Known {
            usd: 0.0123,
            source: PriceSource::Override,
        });
        t.add(&Cost::UnknownTokens);
        assert_eq!(t.usd(), None);
        assert_eq!(
            t.to_string(),
            "$0.0123 + unknown for 1 call (tokens not reported)"
        );
        t.add(&Cost::UnknownTokens);
        t.add(&Cost::Unknown { model: "m".into() });
        assert_eq!(
            t.to_string(),
            "$0.0123 + unknown for 2 calls (tokens not reported) and for m (no price)"
        );
        // Nothing known: no amount at all.
        let mut t = CostTotal::default();
        t.add(&Cost::Unknown {
            model: "replay".into(),
        });
        assert_eq!(t.to_string(), "unknown (no price for replay)");
    }

    #[test]
    fn unknown_cost_makes_the_total_unknown() {
        let mut t = CostTotal::default();
        t.add(&Cost::Known {
            usd: 0.25,
            source: PriceSource::Override,
        });
        assert_eq!(t.usd(), Some(0.25));
        t.add(&Cost::Unknown { model: "m".into() });
        assert_eq!(t.usd(), None);
        // What is known is kept, and the gap named.
        assert_eq!(t.to_string(), "$0.2500 + unknown for m (no price)");
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["usd"], serde_json::Value::Null);
        assert_eq!(v["known_usd"], json!(0.25));
    }

    #[test]
    fn enum_spellings() {
        assert_eq!(
            serde_json::to_value(Outcome::EnforcementUnavailable).unwrap(),
            json!("enforcement-unavailable")
        );
        assert_eq!(
            serde_json::to_value(ToolState::CouldNotRun).unwrap(),
            json!("could_not_run")
        );
        assert_eq!(
            serde_json::to_value(GrantKind::NetUnix).unwrap(),
            json!("net.unix")
        );
        assert_eq!(
            serde_json::to_value(DenialTarget::Peer("1.1.1.1:443".into())).unwrap(),
            json!({"peer": "1.1.1.1:443"})
        );
        assert_eq!(
            serde_json::to_value(DenialTarget::Call("socket(AF_UNIX, SOCK_STREAM)".into()))
                .unwrap(),
            json!({"call": "socket(AF_UNIX, SOCK_STREAM)"})
        );
        assert_eq!(
            serde_json::to_value(ExitStatus::Signal(9)).unwrap(),
            json!({"signal": 9})
        );
        for o in [
            Outcome::Passed,
            Outcome::Failed,
            Outcome::Limit,
            Outcome::Refused,
            Outcome::ProviderError,
            Outcome::Interrupted,
            Outcome::EnforcementUnavailable,
            Outcome::Ended,
        ] {
            assert_eq!(serde_json::to_value(o).unwrap(), json!(o.as_str()));
        }
    }
}
