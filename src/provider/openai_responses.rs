//! OpenAI Responses API: `POST {base_url}/responses` with `stream: true`.
//!
//! Facts from the API reference ("Responses", "Streaming events"): input items are messages
//! (`role` + `content`), `function_call` (`call_id`, `name`, `arguments` as JSON text) and
//! `function_call_output` (`call_id`, `output`); the stream's events carry their name in
//! `type`: `response.output_item.added` / `.done` (a `function_call` item with `call_id` and
//! `name`), `response.output_text.delta`, `response.function_call_arguments.delta` (by
//! `output_index`), and the terminal `response.completed` / `response.incomplete` /
//! `response.failed` with `usage` (`input_tokens`, `input_tokens_details.cached_tokens`,
//! `output_tokens`, `output_tokens_details.reasoning_tokens`).
//!
//! Also handled: `response.refusal.delta` (refusal text, kept apart from assistant text);
//! `response.incomplete` with `incomplete_details.reason` `max_output_tokens` or
//! `content_filter`; the `error` event (its message and code nested under `error`, or at the
//! top level) and the `response.failed` that may follow it; a second `response.created`
//! (the answer starts over); `reasoning` output items, which are kept verbatim with their
//! `encrypted_content` (asked for with `include`) and sent back in later requests, since
//! bee's requests are stateless (`store: false`). An output item of another type is ignored
//! with a note.
//!
//! With `store: false` the API keeps no output item, so a request naming one by its server
//! `id` (`rs_…`, `fc_…`, `msg_…`) is refused ("Item with id … not found"). Requests therefore
//! carry no server item id: messages and function calls are rebuilt from their content and
//! `call_id`, and a reasoning item goes back as its `summary`, `content` and
//! `encrypted_content` only (`reasoning_input`).

use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{Http, drive, join};
use super::{
    Assembler, ErrorCategory, Event, Item, Provider, ProviderError, ProviderSpec, Request,
    Response, StopReason, Usage,
};

/// A provider speaking the Responses API.
#[derive(Debug)]
pub struct OpenAiResponses {
    url: String,
    model: String,
    http: Http,
}

impl OpenAiResponses {
    pub(crate) fn new(spec: &ProviderSpec, http: Http) -> Self {
        Self {
            url: join(&spec.base_url, "responses"),
            model: spec.model.clone(),
            http,
        }
    }
}

/// The request body for `req`.
pub fn body(model: &str, req: &Request) -> Value {
    let input: Vec<Value> = req
        .items
        .iter()
        .filter_map(|item| match item {
            Item::System { text } => Some(json!({"role": "system", "content": text})),
            Item::User { text } => Some(json!({"role": "user", "content": text})),
            Item::AssistantText { text } => Some(json!({"role": "assistant", "content": text})),
            Item::ToolCall(c) => Some(json!({
                "type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments,
            })),
            Item::ToolResult {
                call_id, output, ..
            } => {
                Some(json!({"type": "function_call_output", "call_id": call_id, "output": output}))
            }
            Item::Reasoning { item } => reasoning_input(item),
        })
        .collect();
    let mut body = json!({
        "model": model, "input": input, "stream": true, "store": false,
        "include": ["reasoning.encrypted_content"],
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function", "name": t.name, "description": t.description,
                    "parameters": t.parameters,
                })
            })
            .collect();
    }
    if let Some(n) = req.max_output_tokens {
        body["max_output_tokens"] = json!(n);
    }
    body
}

/// The input item that sends back the reasoning output item `item`: its `type`, `summary`
/// (required by the API, empty when absent), `content` when present and `encrypted_content`,
/// and never its server `id` or `status` (the API refuses an id it did not store). `None`
/// for an item without `encrypted_content`: without the id there is nothing the API could
/// read, so it is left out of the request.
fn reasoning_input(item: &Value) -> Option<Value> {
    let encrypted = item.get("encrypted_content").filter(|v| v.is_string())?;
    let mut out = json!({
        "type": "reasoning",
        "summary": item.get("summary").cloned().unwrap_or_else(|| json!([])),
        "encrypted_content": encrypted,
    });
    if let Some(content) = item.get("content").filter(|v| !v.is_null()) {
        out["content"] = content.clone();
    }
    Some(out)
}

#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Deserialize)]
struct ItemEvent {
    output_index: u64,
    item: OutputItem,
}

#[derive(Debug, Deserialize)]
struct OutputItem {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    call_id: String,
    #[serde(default)]
    name: String,
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    output_index: u64,
    delta: String,
}

#[derive(Debug, Deserialize)]
struct Terminal {
    response: TerminalResponse,
}

#[derive(Debug, Deserialize)]
struct TerminalResponse {
    #[serde(default)]
    model: String,
    usage: Option<WireUsage>,
    incomplete_details: Option<Incomplete>,
    error: Option<WireError>,
}

#[derive(Debug, Deserialize)]
struct Incomplete {
    reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireError {
    #[serde(default)]
    message: String,
    #[serde(default)]
    code: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

/// The `error` event: `{"type": "error", "error": {"type", "code", "message"}}` as the API
/// sends it, or with `code` and `message` at the top level as its reference shows.
#[derive(Debug, Deserialize)]
struct ErrorEvent {
    error: Option<WireError>,
    #[serde(default)]
    message: String,
    #[serde(default)]
    code: Option<String>,
}

impl ErrorEvent {
    fn into_error(self) -> WireError {
        match self.error {
            Some(e) => e,
            None => WireError {
                message: self.message,
                code: self.code,
                kind: None,
            },
        }
    }
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Debug, Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Debug, Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            input_tokens: u.input_tokens,
            cached_input_tokens: u.input_tokens_details.map_or(0, |d| d.cached_tokens),
            output_tokens: u.output_tokens,
            reasoning_tokens: u.output_tokens_details.map_or(0, |d| d.reasoning_tokens),
        }
    }
}

/// An output item kept whole (a `reasoning` item, sent back by its encrypted content).
#[derive(Debug, Deserialize)]
struct RawItemEvent {
    item: Value,
}

/// The stream error for a provider-reported failure.
fn fail(asm: &mut Assembler<'_>, http: &Http, error: WireError) -> ProviderError {
    let code = error.code.or(error.kind);
    let category = ErrorCategory::of_stream_error(code.as_deref().unwrap_or(""));
    let message = if error.message.is_empty() {
        "the response failed and the provider gave no message".to_owned()
    } else {
        http.redact(&error.message)
    };
    asm.stream_error(category, code, message)
}

impl Provider for OpenAiResponses {
    fn model(&self) -> &str {
        &self.model
    }

    fn stream(
        &self,
        req: &Request,
        sink: &mut dyn FnMut(Event),
    ) -> Result<Response, ProviderError> {
        let started = Instant::now();
        let body = body(&self.model, req).to_string();
        let reader = self
            .http
            .post_bearer(&self.url, &body, &self.model, started)?;
        let mut asm = Assembler::new(sink, started, &self.model);
        let http = &self.http;
        let mut created = false;
        let mut pending: Option<WireError> = None;
        let driven = drive(reader, &mut asm, http, |asm, ev| {
            let name = ev.event.as_deref().unwrap_or("message");
            let envelope: Envelope = http.parse(name, &ev.data)?;
            let kind = envelope.kind.as_str();
            match kind {
                "response.created" => {
                    if created {
                        asm.restart();
                    }
                    created = true;
                }
                "response.output_item.added" => {
                    let e: ItemEvent = http.parse(kind, &ev.data)?;
                    match e.item.kind.as_str() {
                        "function_call" => asm.tool_started(
                            &e.output_index.to_string(),
                            &e.item.call_id,
                            &e.item.name,
                        ),
                        "message" => asm.text_break(),
                        "reasoning" => {}
                        other => asm.note(format!(
                            "an output item of type `{other}` was ignored (bee does not use it)"
                        )),
                    }
                }
                "response.output_text.delta" => {
                    let e: Delta = http.parse(kind, &ev.data)?;
                    asm.text(&e.delta);
                }
                "response.refusal.delta" => {
                    let e: Delta = http.parse(kind, &ev.data)?;
                    asm.refusal(&e.delta);
                }
                "response.function_call_arguments.delta" => {
                    let e: Delta = http.parse(kind, &ev.data)?;
                    asm.tool_arguments(&e.output_index.to_string(), &e.delta);
                }
                "response.output_item.done" => {
                    let e: ItemEvent = http.parse(kind, &ev.data)?;
                    match e.item.kind.as_str() {
                        "function_call" => asm.tool_finished(
                            &e.output_index.to_string(),
                            e.item.arguments.as_deref(),
                        ),
                        "reasoning" => {
                            let whole: RawItemEvent = http.parse(kind, &ev.data)?;
                            asm.opaque(whole.item);
                        }
                        _ => {}
                    }
                }
                "response.completed" | "response.incomplete" => {
                    let e: Terminal = http.parse(kind, &ev.data)?;
                    asm.model(&e.response.model);
                    if let Some(u) = e.response.usage {
                        asm.usage(u.into());
                    }
                    let stop = match e.response.incomplete_details.and_then(|d| d.reason) {
                        Some(r) if r == "max_output_tokens" => StopReason::MaxTokens,
                        Some(r) if r == "content_filter" => StopReason::ContentFilter,
                        Some(r) => StopReason::Unknown(r),
                        None if kind == "response.incomplete" => {
                            StopReason::Unknown("incomplete".to_owned())
                        }
                        None => StopReason::EndTurn,
                    };
                    asm.complete(stop);
                    return Ok(true);
                }
                "response.failed" => {
                    let e: Terminal = http.parse(kind, &ev.data)?;
                    if let Some(u) = e.response.usage {
                        asm.usage(u.into());
                    }
                    let error = e
                        .response
                        .error
                        .filter(|e| !e.message.is_empty())
                        .or(pending.take())
                        .unwrap_or_default();
                    return Err(fail(asm, http, error));
                }
                "error" => {
                    // A `response.failed` may follow with the final word; wait for it.
                    let e: ErrorEvent = http.parse(kind, &ev.data)?;
                    pending = Some(e.into_error());
                }
                _ => {}
            }
            Ok(false)
        });
        match (driven, pending) {
            (Ok(()), _) => {}
            // The stream ended after an error event and before `response.failed`.
            (Err(ProviderError::StreamCut { .. }), Some(error)) => {
                return Err(fail(&mut asm, http, error));
            }
            (Err(e), _) => return Err(e),
        }
        Ok(asm.response())
    }
}
