//! What the HTTP wire formats share: the ureq agent, the retry loop, status mapping, key
//! redaction and the SSE read loop.

use std::io::{BufReader, Read};
use std::time::{Duration, Instant, SystemTime};

use serde::de::DeserializeOwned;

use super::retry::{RetryPolicy, parse_retry_after};
use super::sse::{SseEvent, SseReader};
use super::{Assembler, ProviderError, Timeouts};

/// The longest provider message kept in an error, in characters.
const DETAIL_CHARS: usize = 300;

/// An API key. It is only ever written into a request header; `Debug` does not show it.
pub(crate) struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A configured HTTP client for one provider.
#[derive(Debug)]
pub(crate) struct Http {
    agent: ureq::Agent,
    retry: RetryPolicy,
    key: Option<Secret>,
    key_env: Option<String>,
    total: Duration,
}

impl Http {
    pub(crate) fn new(
        timeouts: &Timeouts,
        retry: RetryPolicy,
        key_env: Option<String>,
        key: Option<String>,
    ) -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(timeouts.connect))
            .timeout_per_read(Some(timeouts.read))
            .timeout_global(Some(timeouts.total))
            .user_agent(concat!("bee/", env!("CARGO_PKG_VERSION")))
            .build();
        Self {
            agent: config.into(),
            retry,
            key: key.map(Secret),
            key_env,
            total: timeouts.total,
        }
    }

    /// The key, for the request header only.
    pub(crate) fn key(&self) -> Option<&str> {
        self.key.as_ref().map(|k| k.0.as_str())
    }

    /// `text` with the key removed and cut to a readable length.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        if let Some(k) = self.key()
            && !k.is_empty()
        {
            text = text.replace(k, "<redacted>");
        }
        let text = text.trim();
        if text.chars().count() > DETAIL_CHARS {
            let cut: String = text.chars().take(DETAIL_CHARS).collect();
            format!("{cut}…")
        } else {
            text.to_owned()
        }
    }

    /// [`Http::post`] with the key as an OpenAI-style `Authorization: Bearer` header (none
    /// when no key is configured, as for local servers).
    pub(crate) fn post_bearer(
        &self,
        url: &str,
        body: &str,
        model: &str,
        started: Instant,
    ) -> Result<ureq::BodyReader<'static>, ProviderError> {
        let headers: Vec<(&str, String)> = self
            .key()
            .map(|key| ("authorization", format!("Bearer {key}")))
            .into_iter()
            .collect();
        self.post(url, &headers, body, model, started)
    }

    /// POSTs `body` to `url` and returns the body reader of the first 2xx answer, retrying
    /// 429, 5xx and connection failures as the policy allows.
    pub(crate) fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &str,
        model: &str,
        started: Instant,
    ) -> Result<ureq::BodyReader<'static>, ProviderError> {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let mut req = self
                .agent
                .post(url)
                .header("content-type", "application/json")
                .header("accept", "text/event-stream");
            for (name, value) in headers {
                req = req.header(*name, value.as_str());
            }
            let (failure, retry_after) = match req.send(body) {
                Ok(mut resp) => {
                    let status = resp.status().as_u16();
                    if (200..300).contains(&status) {
                        let json = resp
                            .headers()
                            .get("content-type")
                            .and_then(|v| v.to_str().ok())
                            .is_some_and(|v| v.starts_with("application/json"));
                        if json {
                            // A server that ignored `stream: true` (or answers errors with 200).
                            let body = resp.body_mut().read_to_string().unwrap_or_default();
                            return Err(ProviderError::NotAStream {
                                url: url.to_owned(),
                                detail: self.detail(&body),
                            });
                        }
                        return Ok(resp.into_body().into_reader());
                    }
                    let retry_after = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| parse_retry_after(v, SystemTime::now()));
                    let detail = self.detail(&resp.body_mut().read_to_string().unwrap_or_default());
                    let failure = match status {
                        401 | 403 => {
                            return Err(ProviderError::Auth {
                                status,
                                env: self.key_env.clone(),
                                url: url.to_owned(),
                                detail,
                            });
                        }
                        404 => {
                            return Err(ProviderError::NotFound {
                                url: url.to_owned(),
                                model: model.to_owned(),
                                detail,
                            });
                        }
                        429 => ProviderError::RateLimited {
                            attempts: attempt,
                            retry_after,
                            detail,
                        },
                        408 | 500..=599 => ProviderError::Server {
                            status,
                            attempts: attempt,
                            detail,
                        },
                        _ => {
                            return Err(ProviderError::Rejected {
                                status,
                                url: url.to_owned(),
                                detail,
                            });
                        }
                    };
                    (failure, retry_after)
                }
                Err(e) => {
                    let failure = ProviderError::Network {
                        url: url.to_owned(),
                        attempts: attempt,
                        message: self.redact(&e.to_string()),
                    };
                    let transient = matches!(
                        e,
                        ureq::Error::Io(_)
                            | ureq::Error::Timeout(_)
                            | ureq::Error::ConnectionFailed
                            | ureq::Error::HostNotFound
                            | ureq::Error::Protocol(_)
                    );
                    if !transient {
                        return Err(failure);
                    }
                    (failure, None)
                }
            };
            let Some(wait) = self.retry.delay(attempt, retry_after) else {
                return Err(failure);
            };
            if started.elapsed() + wait >= self.total {
                return Err(failure);
            }
            std::thread::sleep(wait);
        }
    }

    /// The provider's error message from an error body (`{"error": {"message": …}}` in both
    /// OpenAI's and Anthropic's APIs), else the body itself; redacted.
    fn detail(&self, body: &str) -> String {
        let message = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| {
                let e = v.get("error")?;
                e.get("message")
                    .and_then(|m| m.as_str())
                    .or_else(|| e.as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| body.to_owned());
        self.redact(&message)
    }

    /// Parses an event's JSON data.
    pub(crate) fn parse<T: DeserializeOwned>(
        &self,
        event: &str,
        data: &str,
    ) -> Result<T, ProviderError> {
        serde_json::from_str(data).map_err(|e| ProviderError::MalformedEvent {
            event: event.to_owned(),
            message: e.to_string(),
            data: self.redact(data),
        })
    }
}

/// Reads SSE events from `body` into `on` until it reports the terminal event. The end of
/// the stream or a read error before that is a [`ProviderError::StreamCut`].
pub(crate) fn drive(
    body: impl Read,
    asm: &mut Assembler<'_>,
    http: &Http,
    mut on: impl FnMut(&mut Assembler<'_>, &SseEvent) -> Result<bool, ProviderError>,
) -> Result<(), ProviderError> {
    let mut reader = SseReader::new(BufReader::new(body));
    loop {
        match reader.next_event() {
            Ok(Some(event)) => {
                if on(asm, &event)? {
                    return Ok(());
                }
            }
            Ok(None) => return Err(asm.cut("the connection closed")),
            Err(e) => return Err(asm.cut(http.redact(&e.to_string()))),
        }
    }
}

/// Joins a base URL and a path without doubling the slash.
pub(crate) fn join(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path)
}
