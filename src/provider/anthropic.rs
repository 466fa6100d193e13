//! Anthropic Messages API: `POST {base_url}/messages` with `stream: true`, headers
//! `x-api-key` and `anthropic-version`.
//!
//! Facts from the API reference ("Messages", "Streaming Messages"): `system` is a top-level
//! field; messages alternate `user` / `assistant`, with `tool_use` blocks (`id`, `name`,
//! `input` object) in assistant messages and `tool_result` blocks (`tool_use_id`, `content`,
//! `is_error`) in user messages; `max_tokens` is required. The stream is `message_start`
//! (`message.usage.input_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`),
//! `content_block_start` (`text` or `tool_use` with `id` and `name`), `content_block_delta`
//! (`text_delta` / `input_json_delta` with `partial_json`), `content_block_stop`,
//! `message_delta` (`delta.stop_reason`, cumulative `usage.output_tokens`), `message_stop`;
//! `ping` and `error` may appear anywhere.
//!
//! `stop_reason` may also be `refusal` (with `stop_details`: category and explanation),
//! `pause_turn`, or `model_context_window_exceeded`; see [`StopReason`] for the mapping. A
//! second `message_start` in one stream (a provider-side retry or fallback) starts the
//! answer over: nothing of the first attempt is kept.

use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{Http, drive, join};
use super::{
    Assembler, ErrorCategory, Event, Item, Provider, ProviderError, ProviderSpec, Request,
    Response, StopReason, Usage,
};

/// A provider speaking the Messages API.
#[derive(Debug)]
pub struct Anthropic {
    url: String,
    model: String,
    version: String,
    max_output_tokens: u32,
    http: Http,
}

impl Anthropic {
    pub(crate) fn new(spec: &ProviderSpec, http: Http) -> Self {
        Self {
            url: join(&spec.base_url, "messages"),
            model: spec.model.clone(),
            version: spec.anthropic_version.clone(),
            max_output_tokens: spec.max_output_tokens,
            http,
        }
    }
}

/// The request body for `req`. System items join into `system`; consecutive items of one
/// role merge into one message; tool-call arguments that are not a JSON object are sent as
/// `{"_raw": "<text>"}` (the API requires an object).
pub fn body(model: &str, req: &Request, default_max_tokens: u32) -> Value {
    let mut system: Vec<&str> = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    let mut push = |role: &str, block: Value| match messages.last_mut() {
        Some(last) if last["role"] == role => {
            if let Some(content) = last["content"].as_array_mut() {
                content.push(block);
            }
        }
        _ => messages.push(json!({"role": role, "content": [block]})),
    };
    for item in &req.items {
        match item {
            Item::System { text } => system.push(text),
            Item::User { text } => push("user", json!({"type": "text", "text": text})),
            Item::AssistantText { text } => {
                push("assistant", json!({"type": "text", "text": text}));
            }
            Item::ToolCall(c) => {
                let input = match c.parsed_arguments() {
                    Ok(v @ Value::Object(_)) => v,
                    _ => json!({"_raw": c.arguments}),
                };
                push(
                    "assistant",
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                );
            }
            // Only the Responses API sends reasoning items back.
            Item::Reasoning { .. } => {}
            Item::ToolResult {
                call_id,
                output,
                is_error,
            } => push(
                "user",
                json!({"type": "tool_result", "tool_use_id": call_id, "content": output,
                       "is_error": is_error}),
            ),
        }
    }
    let mut body = json!({
        "model": model,
        "max_tokens": req.max_output_tokens.unwrap_or(default_max_tokens),
        "messages": messages,
        "stream": true,
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Deserialize)]
struct MessageStart {
    message: StartMessage,
}

#[derive(Debug, Deserialize)]
struct StartMessage {
    #[serde(default)]
    model: String,
    usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct BlockStart {
    index: u64,
    content_block: Block,
}

#[derive(Debug, Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    text: String,
}

#[derive(Debug, Deserialize)]
struct BlockDelta {
    index: u64,
    delta: DeltaBody,
}

#[derive(Debug, Deserialize)]
struct DeltaBody {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    partial_json: String,
}

#[derive(Debug, Deserialize)]
struct BlockStop {
    index: u64,
}

#[derive(Debug, Deserialize)]
struct MessageDelta {
    delta: StopDelta,
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct StopDelta {
    stop_reason: Option<String>,
    /// With `stop_reason: "refusal"`: `{"type": "refusal", "category": …, "explanation": …}`.
    stop_details: Option<StopDetails>,
}

#[derive(Debug, Deserialize)]
struct StopDetails {
    category: Option<String>,
    explanation: Option<String>,
}

impl StopDetails {
    /// `<category>: <explanation>`, or whichever of the two is present.
    fn describe(self) -> Option<String> {
        match (self.category, self.explanation) {
            (Some(c), Some(e)) => Some(format!("{c}: {e}")),
            (c, e) => c.or(e),
        }
    }
}

#[derive(Debug, Deserialize)]
struct ErrorEvent {
    error: ErrorBody,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

impl WireUsage {
    /// Takes every count `newer` reports (later events repeat or update them).
    fn update(&mut self, newer: &WireUsage) {
        let fields = [
            (&mut self.input_tokens, newer.input_tokens),
            (&mut self.output_tokens, newer.output_tokens),
            (
                &mut self.cache_read_input_tokens,
                newer.cache_read_input_tokens,
            ),
            (
                &mut self.cache_creation_input_tokens,
                newer.cache_creation_input_tokens,
            ),
        ];
        for (slot, value) in fields {
            if value.is_some() {
                *slot = value;
            }
        }
    }

    /// In [`Usage`] terms: input is uncached + cache reads + cache writes.
    fn usage(&self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        Usage {
            input_tokens: self.input_tokens.unwrap_or(0)
                + read
                + self.cache_creation_input_tokens.unwrap_or(0),
            cached_input_tokens: read,
            output_tokens: self.output_tokens.unwrap_or(0),
            reasoning_tokens: 0,
        }
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "refusal" => StopReason::Refusal,
        "pause_turn" => StopReason::Pause,
        other => StopReason::Unknown(other.to_owned()),
    }
}

impl Provider for Anthropic {
    fn model(&self) -> &str {
        &self.model
    }

    fn stream(
        &self,
        req: &Request,
        sink: &mut dyn FnMut(Event),
    ) -> Result<Response, ProviderError> {
        let started = Instant::now();
        let body = body(&self.model, req, self.max_output_tokens).to_string();
        let mut headers = vec![("anthropic-version", self.version.clone())];
        if let Some(key) = self.http.key() {
            headers.push(("x-api-key", key.to_owned()));
        }
        let reader = self
            .http
            .post(&self.url, &headers, &body, &self.model, started)?;
        let mut asm = Assembler::new(sink, started, &self.model);
        let http = &self.http;
        let mut stop = StopReason::EndTurn;
        let mut counts = WireUsage::default();
        let mut started = false;
        drive(reader, &mut asm, http, |asm, ev| {
            let name = ev.event.as_deref().unwrap_or("message");
            let envelope: Envelope = http.parse(name, &ev.data)?;
            let kind = envelope.kind.as_str();
            match kind {
                "message_start" => {
                    let e: MessageStart = http.parse(kind, &ev.data)?;
                    if started {
                        // A provider-side retry or fallback: the new message replaces the
                        // old one, usage and stop reason included.
                        asm.restart();
                        stop = StopReason::EndTurn;
                        counts = WireUsage::default();
                    }
                    started = true;
                    asm.model(&e.message.model);
                    if let Some(u) = e.message.usage {
                        counts.update(&u);
                        asm.usage(counts.usage());
                    }
                }
                "content_block_start" => {
                    let e: BlockStart = http.parse(kind, &ev.data)?;
                    match e.content_block.kind.as_str() {
                        "tool_use" => asm.tool_started(
                            &e.index.to_string(),
                            &e.content_block.id,
                            &e.content_block.name,
                        ),
                        "text" => asm.text(&e.content_block.text),
                        // Thinking blocks are not sent back (bee does not ask for them).
                        "thinking" | "redacted_thinking" => {}
                        other => asm.note(format!(
                            "a content block of type `{other}` was ignored (bee does not use it)"
                        )),
                    }
                }
                "content_block_delta" => {
                    let e: BlockDelta = http.parse(kind, &ev.data)?;
                    match e.delta.kind.as_str() {
                        "text_delta" => asm.text(&e.delta.text),
                        "input_json_delta" => {
                            asm.tool_arguments(&e.index.to_string(), &e.delta.partial_json);
                        }
                        _ => {}
                    }
                }
                "content_block_stop" => {
                    let e: BlockStop = http.parse(kind, &ev.data)?;
                    asm.tool_finished(&e.index.to_string(), None);
                }
                "message_delta" => {
                    let e: MessageDelta = http.parse(kind, &ev.data)?;
                    if let Some(r) = e.delta.stop_reason {
                        stop = stop_reason(&r);
                    }
                    if stop == StopReason::Refusal
                        && let Some(detail) = e.delta.stop_details.and_then(StopDetails::describe)
                    {
                        asm.refusal_detail(detail);
                    }
                    if let Some(u) = e.usage {
                        counts.update(&u);
                        asm.usage(counts.usage());
                    }
                }
                "message_stop" => {
                    asm.complete(stop.clone());
                    return Ok(true);
                }
                "error" => {
                    let e: ErrorEvent = http.parse(kind, &ev.data)?;
                    let category = ErrorCategory::of_stream_error(&e.error.kind);
                    let code = Some(e.error.kind).filter(|k| !k.is_empty());
                    return Err(asm.stream_error(category, code, http.redact(&e.error.message)));
                }
                _ => {}
            }
            Ok(false)
        })?;
        Ok(asm.response())
    }
}
