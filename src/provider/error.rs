//! Provider errors, sorted into categories the application maps to exit codes.

use std::path::PathBuf;
use std::time::Duration;

use super::Response;

/// What kind of failure a [`ProviderError`] is, for choosing an exit code or a retry.
///
/// Written in kebab case (`rate-limit`) in `--json` output, transcripts and the metrics
/// store.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCategory {
    /// The API key is missing or was refused.
    Auth,
    /// The endpoint or the model does not exist.
    NotFound,
    /// The provider kept answering 429, or said so inside the stream.
    RateLimit,
    /// The provider is overloaded (HTTP 529, Anthropic's `overloaded_error`): try later.
    Overloaded,
    /// The provider kept failing with 5xx or 408, or reported a server error in the stream.
    Server,
    /// No answer: connection refused, DNS, timeouts, a stream cut off.
    Network,
    /// A request the provider refused as sent, or an answer bee cannot use: a rejected
    /// request (other 4xx), malformed JSON, an invalid-request error inside the stream, a stop
    /// reason bee does not know, a replay recording that ran out.
    Protocol,
}

impl ErrorCategory {
    /// The category as written: `auth`, `not-found`, `rate-limit`, `overloaded`, `server`,
    /// `network` or `protocol`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::NotFound => "not-found",
            Self::RateLimit => "rate-limit",
            Self::Overloaded => "overloaded",
            Self::Server => "server",
            Self::Network => "network",
            Self::Protocol => "protocol",
        }
    }

    /// The category of an error reported inside a stream, from the provider's error type or
    /// code: Anthropic's `error.type` (`overloaded_error`, `rate_limit_error`, `api_error`,
    /// `invalid_request_error`, `authentication_error`, `permission_error`,
    /// `not_found_error`, `request_too_large`) and OpenAI's `error.code`/`error.type`
    /// (`rate_limit_exceeded`, `server_error`, `invalid_prompt`, …). Anything else is
    /// `server`: the provider failed on its side while answering.
    #[must_use]
    pub fn of_stream_error(kind: &str) -> Self {
        let k = kind.to_ascii_lowercase();
        if k.contains("overloaded") || k == "slow_down" {
            Self::Overloaded
        } else if k.contains("rate_limit") || k.contains("quota") {
            Self::RateLimit
        } else if k.contains("authentication") || k.contains("permission") || k == "invalid_api_key"
        {
            Self::Auth
        } else if k.contains("not_found") || k == "model_not_found" {
            Self::NotFound
        } else if k.contains("invalid") || k.contains("too_large") || k.contains("context_length") {
            Self::Protocol
        } else {
            Self::Server
        }
    }
}

impl std::fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a model call failed. No variant ever holds the API key: texts that come from the
/// provider are redacted before they are stored here.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The environment variable that should hold the API key is unset or empty.
    #[error("the API key variable {env} is not set (provider file: api_key_env)")]
    MissingKey {
        /// The variable's name.
        env: String,
    },
    /// 401 or 403.
    #[error(
        "authentication failed ({status}) at {url}: check the API key in {}{}",
        .env.as_deref().unwrap_or("(no api_key_env configured)"),
        detail_suffix(.detail)
    )]
    Auth {
        /// HTTP status.
        status: u16,
        /// The variable the key came from.
        env: Option<String>,
        /// The URL called.
        url: String,
        /// The provider's message, redacted and shortened.
        detail: String,
    },
    /// 404.
    #[error("not found (404): {url} with model {model:?}; check base_url and model{}", detail_suffix(.detail))]
    NotFound {
        /// The URL called.
        url: String,
        /// The model asked for.
        model: String,
        /// The provider's message, redacted and shortened.
        detail: String,
    },
    /// 429 on every attempt.
    #[error("rate limited (429) after {attempts} attempt(s){}{}", retry_after_suffix(.retry_after), detail_suffix(.detail))]
    RateLimited {
        /// Attempts made.
        attempts: u32,
        /// The last `Retry-After` the provider sent.
        retry_after: Option<Duration>,
        /// The provider's message, redacted and shortened.
        detail: String,
    },
    /// 5xx (or 408, a server-side timeout) on every attempt.
    #[error("server error ({status}) after {attempts} attempt(s){}", detail_suffix(.detail))]
    Server {
        /// The last HTTP status.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// The provider's message, redacted and shortened.
        detail: String,
    },
    /// Another 4xx: the provider refused the request as sent.
    #[error("request rejected ({status}) by {url}{}", detail_suffix(.detail))]
    Rejected {
        /// HTTP status.
        status: u16,
        /// The URL called.
        url: String,
        /// The provider's message, redacted and shortened.
        detail: String,
    },
    /// No HTTP answer on any attempt (connection, DNS, timeout).
    #[error("cannot reach {url} after {attempts} attempt(s): {message}")]
    Network {
        /// The URL called.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// What went wrong.
        message: String,
    },
    /// The connection closed (or failed) before the provider's terminal event.
    #[error("the response stream was cut before its end ({reason}) after {events} event(s)")]
    StreamCut {
        /// Why reading stopped.
        reason: String,
        /// How many events had been passed to the sink.
        events: usize,
        /// What had been received, assembled as far as it went.
        received: Box<Response>,
    },
    /// A 2xx answer that is JSON, not an event stream (a server that ignored `stream: true`,
    /// or one that reports errors with 200).
    #[error("{url} answered with JSON, not an event stream{}", detail_suffix(.detail))]
    NotAStream {
        /// The URL called.
        url: String,
        /// The provider's message, redacted and shortened.
        detail: String,
    },
    /// An event whose data is not the JSON its type promises.
    #[error("malformed {event} event: {message} (data: {data})")]
    MalformedEvent {
        /// The event's name or type.
        event: String,
        /// The parser's message.
        message: String,
        /// The beginning of the data, redacted.
        data: String,
    },
    /// The provider reported an error inside the stream (or a `response.failed`).
    #[error("the provider reported {category} error{} in the stream: {message}", code_suffix(.code))]
    StreamError {
        /// How it is sorted, from the provider's error type or code.
        category: ErrorCategory,
        /// The provider's error type or code (`overloaded_error`, `server_error`), if any.
        code: Option<String>,
        /// The provider's message, redacted.
        message: String,
        /// What had been received before the error, assembled as far as it went.
        received: Box<Response>,
    },
    /// The replay recording has ended: every turn was played, and this request has none.
    #[error(
        "the replay recording {} has ended: all {turns} recorded turn(s) were played, and it \
         answers no more (start a new session to play it again)",
        .file.display()
    )]
    ReplayExhausted {
        /// The recording.
        file: PathBuf,
        /// How many turns it holds.
        turns: usize,
    },
}

fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

fn code_suffix(code: &Option<String>) -> String {
    code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default()
}

fn retry_after_suffix(d: &Option<Duration>) -> String {
    d.map(|d| format!(" (Retry-After {}s)", d.as_secs()))
        .unwrap_or_default()
}

impl ProviderError {
    /// The category, for exit codes and retry decisions.
    pub fn category(&self) -> ErrorCategory {
        match self {
            Self::MissingKey { .. } | Self::Auth { .. } => ErrorCategory::Auth,
            Self::NotFound { .. } => ErrorCategory::NotFound,
            Self::RateLimited { .. } => ErrorCategory::RateLimit,
            Self::Server { status: 529, .. } => ErrorCategory::Overloaded,
            Self::Server { .. } => ErrorCategory::Server,
            Self::Network { .. } | Self::StreamCut { .. } => ErrorCategory::Network,
            Self::StreamError { category, .. } => *category,
            Self::Rejected { .. }
            | Self::NotAStream { .. }
            | Self::MalformedEvent { .. }
            | Self::ReplayExhausted { .. } => ErrorCategory::Protocol,
        }
    }

    /// What the provider had sent before the call failed, for errors that happened inside a
    /// stream (a cut, an error event); `None` when no answer had begun.
    #[must_use]
    pub fn received(&self) -> Option<&Response> {
        match self {
            Self::StreamCut { received, .. } | Self::StreamError { received, .. } => Some(received),
            _ => None,
        }
    }
}
