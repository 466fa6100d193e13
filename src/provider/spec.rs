//! `provider.toml`: which API, which model, where the key comes from, timeouts, retries and
//! prices. A raw, span-keeping type (unknown keys refused) is resolved into [`ProviderSpec`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bee_core::error::Source;
use serde::Deserialize;
use toml::Spanned;

use super::anthropic::Anthropic;
use super::http::Http;
use super::openai_chat::OpenAiChat;
use super::openai_responses::OpenAiResponses;
use super::price::{Price, PriceTable};
use super::replay::{Recording, Replay};
use super::retry::RetryPolicy;
use super::{Provider, ProviderError};
use crate::config::{FileDiagnostic, FileDiagnostics, FileError, parse_toml, read_text};

/// The wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// OpenAI Responses API.
    OpenAiResponses,
    /// OpenAI Chat Completions and compatible servers.
    OpenAiChat,
    /// Anthropic Messages API.
    Anthropic,
    /// Recorded turns played back from a file.
    Replay,
}

impl Kind {
    const ALL: [(&'static str, Kind); 4] = [
        ("openai-responses", Kind::OpenAiResponses),
        ("openai-chat", Kind::OpenAiChat),
        ("anthropic", Kind::Anthropic),
        ("replay", Kind::Replay),
    ];

    /// The spelling in `provider.toml`.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("", |(s, _)| s)
    }

    /// The default `base_url` (the public endpoint of the API).
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAiResponses | Self::OpenAiChat => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com/v1",
            Self::Replay => "",
        }
    }
}

/// Network time limits of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing the connection (`timeouts.connect_ms`, default 10 000 ms).
    pub connect: Duration,
    /// The longest silence while reading the answer, between two reads
    /// (`timeouts.read_ms`, default 120 000 ms).
    pub read: Duration,
    /// The whole call, retries and waits included (`timeouts.total_ms`, default 600 000 ms).
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            read: Duration::from_secs(120),
            total: Duration::from_secs(600),
        }
    }
}

/// The default `max_output_tokens` when neither the request nor the file gives one, in tokens.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;

/// The `anthropic-version` header sent by default (Anthropic API docs, "Versions").
pub const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";

/// A resolved provider file.
#[derive(Debug, Clone)]
pub struct ProviderSpec {
    /// The file it came from.
    pub path: PathBuf,
    /// The wire format.
    pub kind: Kind,
    /// The API base URL, without the endpoint path (e.g. `https://api.openai.com/v1`).
    pub base_url: String,
    /// The model name sent to the API.
    pub model: String,
    /// The NAME of the environment variable holding the API key; `None` sends no key (a local
    /// server).
    pub api_key_env: Option<String>,
    /// The `anthropic-version` header.
    pub anthropic_version: String,
    /// The output budget for requests that set none, in tokens.
    pub max_output_tokens: u32,
    /// Time limits.
    pub timeouts: Timeouts,
    /// Retries.
    pub retry: RetryPolicy,
    /// A price override for this model, in USD per million tokens.
    pub prices: Option<Price>,
    /// The recording, for `kind = "replay"` (its `file`, resolved against this file's
    /// directory, loaded and checked).
    pub recording: Option<Arc<Recording>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    kind: Spanned<String>,
    base_url: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    anthropic_version: Option<String>,
    max_output_tokens: Option<Spanned<u32>>,
    timeouts: Option<RawTimeouts>,
    retry: Option<RawRetry>,
    prices: Option<Spanned<Price>>,
    file: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTimeouts {
    connect_ms: Option<Spanned<u64>>,
    read_ms: Option<Spanned<u64>>,
    total_ms: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetry {
    max_attempts: Option<Spanned<u32>>,
    base_backoff_ms: Option<u64>,
    max_backoff_ms: Option<u64>,
}

impl ProviderSpec {
    /// Reads and resolves a provider file (and, for replay, its recording).
    ///
    /// # Errors
    /// [`FileError`] naming the file, line, column and key of every problem.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let text = read_text(path, "provider file")?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&path.display().to_string(), &text, dir)
    }

    /// Resolves provider-file text; `name` is used in diagnostics, relative paths resolve
    /// against `dir`.
    ///
    /// # Errors
    /// [`FileError::Invalid`] with every problem found.
    pub fn parse(name: &str, text: &str, dir: &Path) -> Result<Self, FileError> {
        let source = Source::new(name, text);
        let raw: RawSpec = parse_toml(&source).map_err(|d| {
            // A parse error shows the source line; if the file holds a key where the variable
            // name belongs, show the line with it masked.
            FileError::one(mask_key_line(*d, name, text))
        })?;
        // A key pasted where the variable name belongs must not reach a terminal through
        // any diagnostic's source excerpt: every diagnostic then shows a masked copy.
        let masked = raw
            .api_key_env
            .as_ref()
            .filter(|v| !is_env_name(v.get_ref()))
            .map(Spanned::span);
        let source = match &masked {
            Some(span) => Source::new(name, &mask(text, span.clone())),
            None => source,
        };
        let mut problems = Vec::new();
        let mut problem = |span: std::ops::Range<usize>, key: &str, msg: String, help: &str| {
            problems.push(FileDiagnostic::at(
                &source,
                span,
                Some(key.to_owned()),
                msg,
                (!help.is_empty()).then(|| help.to_owned()),
            ));
        };

        let known = Kind::ALL
            .iter()
            .find(|(s, _)| s == raw.kind.get_ref())
            .map(|(_, k)| *k);
        let kind = match known {
            Some(k) => k,
            None => {
                let names = Kind::ALL.iter().map(|(s, _)| *s);
                let known = names.clone().collect::<Vec<_>>().join(", ");
                let help = match bee_core::error::did_you_mean(raw.kind.get_ref(), names) {
                    Some(near) => format!("did you mean {near:?}? known kinds: {known}"),
                    None => format!("known kinds: {known}"),
                };
                problem(
                    raw.kind.span(),
                    "kind",
                    format!("unknown provider kind {:?}", raw.kind.get_ref()),
                    &help,
                );
                // Checked as an HTTP kind from here on; the error above already refuses it.
                Kind::OpenAiChat
            }
        };

        let base_url = match &raw.base_url {
            Some(u) => {
                if !(u.get_ref().starts_with("http://") || u.get_ref().starts_with("https://")) {
                    problem(
                        u.span(),
                        "base_url",
                        format!("{:?} is not an http:// or https:// URL", u.get_ref()),
                        "for example https://api.openai.com/v1",
                    );
                }
                u.get_ref().trim_end_matches('/').to_owned()
            }
            None => kind.default_base_url().to_owned(),
        };

        let model = match (&raw.model, kind) {
            (Some(m), _) if m.get_ref().trim().is_empty() => {
                problem(m.span(), "model", "the model name is empty".into(), "");
                String::new()
            }
            (Some(m), _) => m.get_ref().clone(),
            (None, Kind::Replay) => "replay".to_owned(),
            // Whether `model` is required depends on the kind, which is refused already.
            (None, _) if known.is_none() => String::new(),
            (None, _) => {
                problem(
                    0..0,
                    "model",
                    "missing key `model`".into(),
                    "name the model to call, e.g. model = \"gpt-5\"",
                );
                String::new()
            }
        };

        let api_key_env = raw.api_key_env.as_ref().map(|v| v.get_ref().clone());

        let mut timeouts = Timeouts::default();
        if let Some(t) = &raw.timeouts {
            for (field, key, slot) in [
                (&t.connect_ms, "timeouts.connect_ms", &mut timeouts.connect),
                (&t.read_ms, "timeouts.read_ms", &mut timeouts.read),
                (&t.total_ms, "timeouts.total_ms", &mut timeouts.total),
            ] {
                if let Some(v) = field {
                    if *v.get_ref() == 0 {
                        problem(
                            v.span(),
                            key,
                            "a timeout of 0 ms".into(),
                            "give milliseconds > 0",
                        );
                    }
                    *slot = Duration::from_millis(*v.get_ref());
                }
            }
        }

        let mut retry = RetryPolicy::default();
        if let Some(r) = &raw.retry {
            if let Some(n) = &r.max_attempts {
                if *n.get_ref() == 0 {
                    problem(
                        n.span(),
                        "retry.max_attempts",
                        "max_attempts counts the first attempt and must be at least 1".into(),
                        "1 means never retry",
                    );
                }
                retry.max_attempts = *n.get_ref();
            }
            if let Some(ms) = r.base_backoff_ms {
                retry.base_backoff = Duration::from_millis(ms);
            }
            if let Some(ms) = r.max_backoff_ms {
                retry.max_backoff = Duration::from_millis(ms);
            }
        }

        if let Some(p) = &raw.prices
            && let Err(msg) = p.get_ref().check()
        {
            problem(
                p.span(),
                "prices",
                msg,
                "prices are USD per million tokens, ≥ 0",
            );
        }

        let max_output_tokens = match &raw.max_output_tokens {
            Some(v) if *v.get_ref() == 0 => {
                problem(
                    v.span(),
                    "max_output_tokens",
                    "must be at least 1".into(),
                    "",
                );
                0
            }
            Some(v) => *v.get_ref(),
            None => DEFAULT_MAX_OUTPUT_TOKENS,
        };

        let mut recording_path = None;
        match (&raw.file, known) {
            (Some(f), Some(Kind::Replay)) => {
                recording_path = Some((dir.join(f.get_ref()), f.span()))
            }
            (None, Some(Kind::Replay)) => problem(
                raw.kind.span(),
                "file",
                "a replay provider needs `file`, the recording to play".into(),
                "file = \"turns.jsonl\" (relative to this provider file)",
            ),
            (Some(f), Some(_)) => problem(
                f.span(),
                "file",
                "`file` is only for kind = \"replay\"".into(),
                "remove it",
            ),
            _ => {}
        }

        if let Some(span) = masked {
            problems.push(FileDiagnostic::at(
                &source,
                span,
                Some("api_key_env".to_owned()),
                "api_key_env must be the NAME of an environment variable (letters, digits, _), not the key",
                Some("e.g. api_key_env = \"OPENAI_API_KEY\", and export the key in that variable".to_owned()),
            ));
        }

        if !problems.is_empty() {
            problems.sort_by_key(|p| (p.line, p.column));
            return Err(FileError::Invalid(FileDiagnostics {
                file: name.to_owned(),
                problems,
            }));
        }

        let recording = match recording_path {
            Some((path, _)) => Some(Arc::new(Recording::load(&path)?)),
            None => None,
        };

        Ok(Self {
            path: PathBuf::from(name),
            kind,
            base_url,
            model,
            api_key_env,
            anthropic_version: raw
                .anthropic_version
                .unwrap_or_else(|| DEFAULT_ANTHROPIC_VERSION.to_owned()),
            max_output_tokens,
            timeouts,
            retry,
            prices: raw.prices.map(Spanned::into_inner),
            recording,
        })
    }

    /// The shipped price table with this file's `[prices]` applied to its model.
    ///
    /// # Errors
    /// The TOML error if the shipped table is malformed (a test keeps it well-formed).
    pub fn price_table(&self) -> Result<PriceTable, toml::de::Error> {
        let mut table = PriceTable::shipped()?;
        if let Some(p) = self.prices {
            table.set(&self.model, p);
        }
        Ok(table)
    }

    /// Builds the provider, reading the API key from the process environment.
    ///
    /// # Errors
    /// [`ProviderError::MissingKey`] when `api_key_env` names an unset or empty variable.
    pub fn connect(&self) -> Result<Box<dyn Provider>, ProviderError> {
        self.connect_with(&|name| std::env::var(name).ok())
    }

    /// Builds the provider, reading the API key through `env` (tests pass a map).
    ///
    /// # Errors
    /// [`ProviderError::MissingKey`] when `api_key_env` names an unset or empty variable.
    pub fn connect_with(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Box<dyn Provider>, ProviderError> {
        if self.kind == Kind::Replay {
            return match &self.recording {
                Some(r) => Ok(Box::new(Replay::new(Arc::clone(r), &self.model))),
                None => Err(ProviderError::ReplayExhausted {
                    file: self.path.clone(),
                    turns: 0,
                }),
            };
        }
        let key = match &self.api_key_env {
            Some(name) => match env(name) {
                Some(k) if !k.trim().is_empty() => Some(k.trim().to_owned()),
                _ => return Err(ProviderError::MissingKey { env: name.clone() }),
            },
            None => None,
        };
        let http = Http::new(&self.timeouts, self.retry, self.api_key_env.clone(), key);
        Ok(match self.kind {
            Kind::OpenAiResponses => Box::new(OpenAiResponses::new(self, http)),
            Kind::OpenAiChat => Box::new(OpenAiChat::new(self, http)),
            Kind::Anthropic | Kind::Replay => Box::new(Anthropic::new(self, http)),
        })
    }
}

/// Whether `s` is a plausible environment variable name.
fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `text` with the bytes of `span` replaced by `*` (same length, so spans stay valid).
fn mask(text: &str, span: std::ops::Range<usize>) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        if span.contains(&i) && c != '"' && c != '\'' {
            out.extend(std::iter::repeat_n('*', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    out
}

/// A parse diagnostic, rebuilt on a copy of the text whose `api_key_env` value is masked,
/// so a key pasted there never reaches a terminal through an unrelated error.
fn mask_key_line(d: FileDiagnostic, name: &str, text: &str) -> FileDiagnostic {
    let Some(span) = api_key_env_value_span(text) else {
        return d;
    };
    let masked = mask(text, span);
    let source = Source::new(name, &masked);
    let offset = line_offset(&masked, d.line, d.column);
    FileDiagnostic::at(&source, offset..offset, d.key, d.message, d.help)
}

fn api_key_env_value_span(text: &str) -> Option<std::ops::Range<usize>> {
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("api_key_env")
            && let Some(eq) = rest.find('=')
        {
            let value_start = start + (line.len() - trimmed.len()) + "api_key_env".len() + eq + 1;
            let value_end = start + line.trim_end().len();
            return Some(value_start..value_end);
        }
        start += line.len();
    }
    None
}

fn line_offset(text: &str, line: u32, column: u32) -> usize {
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line as usize {
            return offset
                + l.char_indices()
                    .nth(column.saturating_sub(1) as usize)
                    .map_or(l.len(), |(b, _)| b);
        }
        offset += l.len();
    }
    offset
}
