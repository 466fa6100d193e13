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

use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{Http, drive, join};
use super::{
    Assembler, Event, Item, Provider, ProviderError, ProviderSpec, Request, Response, StopReason,
    Usage,
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
        .map(|item| match item {
            Item::System { text } => json!({"role": "system", "content": text}),
            Item::User { text } => json!({"role": "user", "content": text}),
            Item::AssistantText { text } => json!({"role": "assistant", "content": text}),
            Item::ToolCall(c) => json!({
                "type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments,
            }),
            Item::ToolResult {
                call_id, output, ..
            } => json!({"type": "function_call_output", "call_id": call_id, "output": output}),
        })
        .collect();
    let mut body = json!({"model": model, "input": input, "stream": true, "store": false});
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

#[derive(Debug, Deserialize)]
struct WireError {
    #[serde(default)]
    message: String,
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
        drive(reader, &mut asm, http, |asm, ev| {
            let name = ev.event.as_deref().unwrap_or("message");
            let envelope: Envelope = http.parse(name, &ev.data)?;
            let kind = envelope.kind.as_str();
            match kind {
                "response.output_item.added" => {
                    let e: ItemEvent = http.parse(kind, &ev.data)?;
                    if e.item.kind == "function_call" {
                        asm.tool_started(
                            &e.output_index.to_string(),
                            &e.item.call_id,
                            &e.item.name,
                        );
                    }
                }
                "response.output_text.delta" => {
                    let e: Delta = http.parse(kind, &ev.data)?;
                    asm.text(&e.delta);
                }
                "response.function_call_arguments.delta" => {
                    let e: Delta = http.parse(kind, &ev.data)?;
                    asm.tool_arguments(&e.output_index.to_string(), &e.delta);
                }
                "response.output_item.done" => {
                    let e: ItemEvent = http.parse(kind, &ev.data)?;
                    if e.item.kind == "function_call" {
                        asm.tool_finished(&e.output_index.to_string(), e.item.arguments.as_deref());
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
                        Some(r) => StopReason::Other(r),
                        None => StopReason::EndTurn,
                    };
                    asm.complete(stop);
                    return Ok(true);
                }
                "response.failed" => {
                    let e: Terminal = http.parse(kind, &ev.data)?;
                    let message = e.response.error.map(|e| e.message).unwrap_or_default();
                    return Err(asm.stream_error(http.redact(&message)));
                }
                "error" => {
                    let e: WireError = http.parse(kind, &ev.data)?;
                    return Err(asm.stream_error(http.redact(&e.message)));
                }
                _ => {}
            }
            Ok(false)
        })?;
        Ok(asm.response())
    }
}
