//! OpenAI Chat Completions: `POST {base_url}/chat/completions` with `stream: true` and
//! `stream_options: {include_usage: true}` — the format most compatible servers (vLLM,
//! Ollama, llama.cpp) speak.
//!
//! Facts from the API reference ("Chat Completions", "The chat completion chunk object"):
//! each `data:` line is a chunk whose `choices[].delta` carries `content` and `tool_calls`
//! fragments keyed by `index` (the first fragment of a call has `id` and `function.name`,
//! later ones `function.arguments` pieces); `finish_reason` ends a choice; with
//! `include_usage` a last chunk has `choices: []` and `usage` (`prompt_tokens`,
//! `prompt_tokens_details.cached_tokens`, `completion_tokens`,
//! `completion_tokens_details.reasoning_tokens`); `data: [DONE]` ends the stream.
//!
//! Compatible servers differ, and all of these are accepted: `choices: null` or missing,
//! `usage` inside the chunk of the last choice, tool calls without `id` (then `call_<n>`),
//! a whole tool call in one fragment, `usage: null` on every chunk.
//!
//! A refusal streams as `delta.refusal` text and still ends with `finish_reason: "stop"`; it
//! becomes [`StopReason::Refusal`] with the text kept apart from assistant text. bee never
//! asks for `n > 1`, but a server may interleave several choices (`choices[].index` 0, 1, …):
//! only choice 0 is assembled, and the others are reported in a note.

use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{Http, drive, join};
use super::{
    Assembler, ErrorCategory, Event, Item, Provider, ProviderError, ProviderSpec, Request,
    Response, StopReason, Usage,
};

/// A provider speaking Chat Completions.
#[derive(Debug)]
pub struct OpenAiChat {
    url: String,
    model: String,
    http: Http,
}

impl OpenAiChat {
    pub(crate) fn new(spec: &ProviderSpec, http: Http) -> Self {
        Self {
            url: join(&spec.base_url, "chat/completions"),
            model: spec.model.clone(),
            http,
        }
    }
}

/// The request body for `req`. Consecutive assistant text and tool calls become one
/// assistant message; `max_tokens` carries the output budget (the spelling compatible servers
/// accept).
pub fn body(model: &str, req: &Request) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for item in &req.items {
        match item {
            Item::System { text } => messages.push(json!({"role": "system", "content": text})),
            Item::User { text } => messages.push(json!({"role": "user", "content": text})),
            Item::AssistantText { text } => {
                if let Some(last) = open_assistant(&mut messages) {
                    let prev = last["content"].as_str().unwrap_or_default().to_owned();
                    last["content"] = json!(prev + text.as_str());
                } else {
                    messages.push(json!({"role": "assistant", "content": text}));
                }
            }
            Item::ToolCall(c) => {
                let call = json!({
                    "id": c.id, "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                });
                match open_assistant(&mut messages) {
                    Some(last) => match last["tool_calls"].as_array_mut() {
                        Some(calls) => calls.push(call),
                        None => last["tool_calls"] = json!([call]),
                    },
                    None => messages
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            Item::ToolResult {
                call_id, output, ..
            } => messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": output})),
            // Chat Completions has no way to send reasoning back.
            Item::Reasoning { .. } => {}
        }
    }
    let mut body = json!({
        "model": model, "messages": messages, "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                }})
            })
            .collect();
    }
    if let Some(n) = req.max_output_tokens {
        body["max_tokens"] = json!(n);
    }
    body
}

/// The last message, if it is an assistant message that can take more.
fn open_assistant(messages: &mut [Value]) -> Option<&mut Value> {
    messages.last_mut().filter(|m| m["role"] == "assistant")
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    model: String,
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    /// Which choice this is; absent (some compatible servers) means 0.
    index: Option<u64>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
    /// Some servers put usage inside the choice.
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    content: Option<String>,
    refusal: Option<String>,
    tool_calls: Option<Vec<ToolDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolDelta {
    index: Option<u64>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Debug, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            input_tokens: u.prompt_tokens,
            cached_input_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            output_tokens: u.completion_tokens,
            reasoning_tokens: u
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
        }
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::ContentFilter,
        "error" => StopReason::Error,
        other => StopReason::Unknown(other.to_owned()),
    }
}

impl Provider for OpenAiChat {
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
        let mut stop: Option<StopReason> = None;
        let mut others = std::collections::BTreeSet::new();
        drive(reader, &mut asm, http, |asm, ev| {
            if ev.data.trim() == "[DONE]" {
                if !others.is_empty() {
                    let list: Vec<String> = others.iter().map(u64::to_string).collect();
                    asm.note(format!(
                        "the stream carried {} choice(s) besides choice 0 (index {}); only \
                         choice 0 was used",
                        others.len(),
                        list.join(", ")
                    ));
                }
                asm.complete(stop.take().unwrap_or(StopReason::EndTurn));
                return Ok(true);
            }
            let value: Value = http.parse("chat.completion.chunk", &ev.data)?;
            if let Some(err) = value.get("error") {
                let field = |k: &str| err.get(k).and_then(Value::as_str).map(str::to_owned);
                let message = field("message").unwrap_or_else(|| err.to_string());
                let code = field("code").or_else(|| field("type"));
                let category = ErrorCategory::of_stream_error(code.as_deref().unwrap_or(""));
                return Err(asm.stream_error(category, code, http.redact(&message)));
            }
            let chunk: Chunk =
                serde_json::from_value(value).map_err(|e| ProviderError::MalformedEvent {
                    event: "chat.completion.chunk".to_owned(),
                    message: e.to_string(),
                    data: http.redact(&ev.data),
                })?;
            asm.model(&chunk.model);
            let mut usage = chunk.usage;
            for choice in chunk.choices.unwrap_or_default() {
                let index = choice.index.unwrap_or(0);
                if index != 0 {
                    others.insert(index);
                    usage = usage.or(choice.usage);
                    continue;
                }
                if let Some(delta) = choice.delta {
                    if let Some(text) = delta.content {
                        asm.text(&text);
                    }
                    if let Some(text) = delta.refusal {
                        asm.refusal(&text);
                    }
                    for (n, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                        let key = call.index.unwrap_or(n as u64).to_string();
                        let function = call.function.unwrap_or(FunctionDelta {
                            name: None,
                            arguments: None,
                        });
                        let id = call.id.unwrap_or_default();
                        let name = function.name.unwrap_or_default();
                        asm.tool_started(&key, &id, &name);
                        asm.tool_name(&key, &name);
                        if let Some(args) = function.arguments {
                            asm.tool_arguments(&key, &args);
                        }
                    }
                }
                if let Some(reason) = choice.finish_reason {
                    stop = Some(stop_reason(&reason));
                    if stop != Some(StopReason::MaxTokens) {
                        asm.finish_open_tools();
                    }
                }
                if choice.usage.is_some() {
                    usage = usage.or(choice.usage);
                }
            }
            if let Some(u) = usage {
                asm.usage(u.into());
            }
            Ok(false)
        })?;
        Ok(asm.response())
    }
}
