//! Provider errors, sorted into categories the application maps to exit codes.

use std::path::PathBuf;
use std::time::Duration;

use super::Response;

/// What kind of failure a [`ProviderError`] is, for choosing an exit code or a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCategory {
    /// The API key is missing or was refused.
    Auth,
    /// The endpoint or the model does not exist.
    NotFound,
    /// The provider kept answering 429.
    RateLimit,
    /// The provider kept failing with 5xx or 408.
    Server,
    /// No answer: connection refused, DNS, timeouts, a stream cut off.
    Network,
    /// An answer bee cannot use: malformed JSON, a rejected request (other 4xx), an error
    /// event inside the stream, a replay recording that ran out.
    Protocol,
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
    /// The provider reported an error inside the stream.
    #[error("the provider reported an error in the stream: {message}")]
    StreamError {
        /// The provider's message, redacted.
        message: String,
    },
    /// The replay recording has no turn left for this request.
    #[error("the replay recording {} has no turn left: all {turns} turn(s) were played", .file.display())]
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
            Self::Server { .. } => ErrorCategory::Server,
            Self::Network { .. } | Self::StreamCut { .. } => ErrorCategory::Network,
            Self::Rejected { .. }
            | Self::MalformedEvent { .. }
            | Self::StreamError { .. }
            | Self::ReplayExhausted { .. } => ErrorCategory::Protocol,
        }
    }
}
