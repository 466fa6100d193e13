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
        /// The provider's message.
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

/// Why the model stopped generating.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It is waiting for tool results.
    ToolUse,
    /// It hit the output token limit.
    MaxTokens,
    /// Another reason, as the provider spelled it.
    Other(String),
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
    /// What the assistant produced, in order: [`Item::AssistantText`] and [`Item::ToolCall`].
    pub items: Vec<Item>,
    /// Token counts.
    pub usage: Usage,
    /// Why it stopped.
    pub stop: StopReason,
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

    /// All assistant text, concatenated.
    pub fn text(&self) -> String {
        self.items
            .iter()
            .filter_map(|i| match i {
                Item::AssistantText { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
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
