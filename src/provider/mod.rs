//! Model providers: one conversation and event model over three wire formats.
//!
//! A [`Request`] carries conversation [`Item`]s, tool definitions and an output budget; a
//! [`Provider`] sends it, reports the streamed answer as [`Event`]s while it arrives, and
//! returns the assembled [`Response`] with its [`Usage`] and [`Latency`]. Every wire format
//! maps onto the same model:
//!
//! | module | API | endpoint |
//! |---|---|---|
//! | [`openai_responses`] | OpenAI Responses | `POST {base_url}/responses` |
//! | [`openai_chat`] | OpenAI Chat Completions (and compatible servers: vLLM, Ollama) | `POST {base_url}/chat/completions` |
//! | [`anthropic`] | Anthropic Messages | `POST {base_url}/messages` |
//! | [`replay`] | recorded turns from a file, for tests and demos | — |
//!
//! A provider is described by a `provider.toml` ([`ProviderSpec`]); the API key is read from
//! the environment variable it names and never written anywhere — not in a file, a log, a
//! transcript or an error message. Transient failures are retried ([`retry`]); costs come
//! from [`price`].
//!
//! Everything is blocking (ureq and threads); no async runtime is involved.

pub mod anthropic;
mod error;
mod http;
pub mod openai_chat;
pub mod openai_responses;
pub mod price;
pub mod replay;
pub mod retry;
mod spec;
pub mod sse;
mod stream;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use error::{ErrorCategory, ProviderError};
pub use spec::{Kind, ProviderSpec, Timeouts};
pub use stream::Assembler;

/// One item of a conversation, in the order the model sees them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Item {
    /// Instructions from the harness (OpenAI `system` message, Anthropic `system` field).
    System {
        /// The instructions.
        text: String,
    },
    /// A user message.
    User {
        /// The message.
        text: String,
    },
    /// Text the assistant wrote.
    AssistantText {
        /// The text.
        text: String,
    },
    /// A tool call the assistant made.
    ToolCall(ToolCall),
    /// A reasoning item the provider asked to be sent back in later requests (the Responses
    /// API's `reasoning` output item with `encrypted_content`, kept verbatim as JSON; sent
    /// back without its server `id`). Wire formats without such items leave it out of their
    /// requests.
    Reasoning {
        /// The output item exactly as the provider sent it.
        item: serde_json::Value,
    },
    /// The result of running a tool call, sent back to the model.
    ToolResult {
        /// The [`ToolCall::id`] this answers.
        call_id: String,
        /// What the tool printed or returned, as text.
        output: String,
        /// Whether the tool failed (Anthropic's `is_error`; OpenAI has no such field, so the
        /// output text itself must say so).
        is_error: bool,
    },
}

/// A tool call made by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id (OpenAI `call_id` / `tool_calls[].id`, Anthropic `tool_use.id`);
    /// synthesised as `call_<n>` when a compatible server sends none.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the JSON text the model produced. Models can produce invalid JSON:
    /// [`ToolCall::parsed_arguments`] checks it.
    pub arguments: String,
}

impl ToolCall {
    /// The arguments parsed as JSON; an empty string counts as `{}`.
    ///
    /// # Errors
    /// The JSON error when the model produced invalid JSON.
    pub fn parsed_arguments(&self) -> Result<serde_json::Value, serde_json::Error> {
        if self.arguments.trim().is_empty() {
            return Ok(serde_json::Value::Object(serde_json::Map::new()));
        }
        serde_json::from_str(&self.arguments)
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The tool's name, as the model will call it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// A JSON Schema (an `object` schema) for the arguments.
    pub parameters: serde_json::Value,
}

/// One model call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The conversation so far.
    pub items: Vec<Item>,
    /// The tools the model may call.
    pub tools: Vec<ToolDef>,
    /// The most tokens the model may generate; `None` uses the provider file's
    /// `max_output_tokens` (Anthropic requires a value; the OpenAI formats omit it then).
    pub max_output_tokens: Option<u32>,
}

/// Something that happened while a response streamed in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// More assistant text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// The model began a tool call.
    ToolCallStarted {
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
    },
    /// More of a tool call's JSON arguments.
    ToolCallArgumentsDelta {
        /// The call id.
        id: String,
        /// The next piece of JSON text.
        delta: String,
    },
    /// A tool call is complete.
    ToolCallFinished {
        /// The whole call.
        call: ToolCall,
    },
    /// More refusal text: the model declined to answer (OpenAI `refusal` deltas and content
    /// parts). It is not assistant text and is never sent back as such.
    RefusalDelta {
        /// The new text.
        text: String,
    },
    /// The provider started the answer over (a second Anthropic `message_start` or Responses
    /// `response.created`, as a provider-side retry or fallback sends): everything streamed
    /// before it is void, and the response is assembled from what follows.
    Restarted,
    /// Something in the stream bee noticed but did not use (extra choices, an output item of
    /// an unknown type); the same text is in [`Response::notes`].
    Note {
        /// What was noticed, in words.
        text: String,
    },
    /// Token counts, as reported by the provider (possibly more than once; the last wins).
    Usage {
        /// The counts so far.
        usage: Usage,
    },
    /// The response is complete.
    Completed {
        /// Why the model stopped.
        stop: StopReason,
    },
    /// The provider reported an error inside the stream; the call then fails.
    Error {
        /// How the error is sorted (from the provider's error type or code).
        category: ErrorCategory,
        /// The provider's message, redacted.
        message: String,
    },
}

/// Token counts of one response.
///
/// All counts are tokens. `input_tokens` includes `cached_input_tokens` and
/// `output_tokens` includes `reasoning_tokens` (OpenAI's convention; Anthropic's separate
/// counts are added up to match).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Prompt tokens served from the provider's prompt cache (OpenAI
    /// `input_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`).
    pub cached_input_tokens: u64,
    /// Generated tokens, reasoning included.
    pub output_tokens: u64,
    /// Hidden reasoning tokens (OpenAI `output_tokens_details.reasoning_tokens`; Anthropic
    /// does not report them separately, so 0 there).
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

impl std::ops::AddAssign for Usage {
    /// Sums counts field by field (an episode's total over its turns), saturating.
    fn add_assign(&mut self, other: Self) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
    }
}

/// Why the model stopped generating, in one vocabulary over every wire format.
///
/// | variant | Chat `finish_reason` | Responses | Messages `stop_reason` |
/// |---|---|---|---|
/// | `end_turn` | `stop` | `completed` | `end_turn`, `stop_sequence` |
/// | `tool_use` | `tool_calls`, `function_call` | `completed` with calls | `tool_use` |
/// | `max_tokens` | `length` | `incomplete`: `max_output_tokens` | `max_tokens`, `model_context_window_exceeded` |
/// | `refusal` | `stop` after `refusal` deltas | a `refusal` content part | `refusal` |
/// | `content_filter` | `content_filter` | `incomplete`: `content_filter` | — |
/// | `pause` | — | — | `pause_turn` |
/// | `error` | `error` (some compatible servers) | — | — |
///
/// In JSON and in records it is written as the snake-case name, or `unknown(<raw>)` for a
/// reason bee does not know (see [`StopReason::as_string`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It is waiting for tool results.
    ToolUse,
    /// It hit the output token limit (or the context window): the answer is cut off.
    MaxTokens,
    /// It declined to answer.
    Refusal,
    /// The provider's content filter stopped the answer.
    ContentFilter,
    /// A long turn was paused by the provider; sending the answer back continues it.
    Pause,
    /// The model stopped because of an error on the provider's side.
    Error,
    /// A reason bee does not know, as the provider spelled it.
    Unknown(String),
}

impl StopReason {
    /// The reason as written in records: `end_turn`, `tool_use`, `max_tokens`, `refusal`,
    /// `content_filter`, `pause`, `error`, or `unknown(<raw>)`.
    #[must_use]
    pub fn as_string(&self) -> String {
        match self {
            Self::Unknown(raw) => format!("unknown({raw})"),
            known => known.name().to_owned(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Self::EndTurn => "end_turn",
            Self::ToolUse => "tool_use",
            Self::MaxTokens => "max_tokens",
            Self::Refusal => "refusal",
            Self::ContentFilter => "content_filter",
            Self::Pause => "pause",
            Self::Error => "error",
            Self::Unknown(_) => "unknown",
        }
    }

    /// Reads [`StopReason::as_string`]'s spelling back; any other text is `Unknown(text)`.
    #[must_use]
    pub fn parse(s: &str) -> Self {
        match s {
            "end_turn" => Self::EndTurn,
            "tool_use" => Self::ToolUse,
            "max_tokens" => Self::MaxTokens,
            "refusal" => Self::Refusal,
            "content_filter" => Self::ContentFilter,
            "pause" => Self::Pause,
            "error" => Self::Error,
            other => Self::Unknown(
                other
                    .strip_prefix("unknown(")
                    .and_then(|r| r.strip_suffix(')'))
                    .unwrap_or(other)
                    .to_owned(),
            ),
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_string())
    }
}

impl Serialize for StopReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_string())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self::parse(&String::deserialize(d)?))
    }
}

/// What the model said when it declined to answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The refusal text the model wrote (OpenAI's `refusal`); empty when the provider gave
    /// only a stop reason.
    pub text: String,
    /// The provider's explanation, when it gave one (Anthropic's `stop_details`, as
    /// `<category>: <explanation>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// How long a response took, measured with [`std::time::Instant`] from just before the
/// request was sent (the first attempt, so retries count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latency {
    /// Until the first text or tool-call delta; `None` when none came.
    pub first_token: Option<Duration>,
    /// Until the terminal event.
    pub total: Duration,
}

/// A complete model answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// What the assistant produced, in order: [`Item::AssistantText`], [`Item::ToolCall`]
    /// and [`Item::Reasoning`].
    pub items: Vec<Item>,
    /// Token counts, as last reported; `None` when the provider reported none (they are
    /// then unknown, never 0).
    pub usage: Option<Usage>,
    /// Why it stopped.
    pub stop: StopReason,
    /// The refusal, when the model declined (with [`StopReason::Refusal`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// The ids of tool calls whose arguments were cut off before the provider said they were
    /// complete (an answer that hit its output limit mid-call). They must never run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut_calls: Vec<String>,
    /// What bee noticed in the stream but did not use, in words (see [`Event::Note`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Timing.
    pub latency: Latency,
    /// The model that answered, as the provider reported it (else as configured).
    pub model: String,
}

impl Response {
    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.items.iter().filter_map(|i| match i {
            Item::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// All assistant text; separate text items (two message items, text on both sides of a
    /// tool call) are joined with a blank line.
    pub fn text(&self) -> String {
        self.items
            .iter()
            .filter_map(|i| match i {
                Item::AssistantText { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// A model behind some wire format. Calls block; a provider may be shared between threads.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// The configured model name.
    fn model(&self) -> &str;

    /// Sends `req`, calls `sink` with each [`Event`] as it arrives, and returns the assembled
    /// response once the provider's terminal event has been read.
    ///
    /// # Errors
    /// A [`ProviderError`]; [`ProviderError::category`] sorts it for exit codes. Events that
    /// were already passed to `sink` stay valid: a cut stream carries them in
    /// [`ProviderError::StreamCut`].
    fn stream(&self, req: &Request, sink: &mut dyn FnMut(Event))
    -> Result<Response, ProviderError>;
}
