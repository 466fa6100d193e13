//! Assembling a streamed answer: every wire format feeds the same [`Assembler`], which passes
//! [`Event`]s to the caller's sink and builds the [`Response`].

use std::time::{Duration, Instant};

use super::{
    ErrorCategory, Event, Item, Latency, ProviderError, Refusal, Response, StopReason, ToolCall,
    Usage,
};

/// Builds a [`Response`] from wire-format callbacks and forwards each [`Event`] to a sink.
///
/// Tool calls are keyed by the wire format's own handle (a choice index, an output index, a
/// content block index) so argument deltas find their call even when calls interleave.
pub struct Assembler<'s> {
    sink: &'s mut dyn FnMut(Event),
    started: Instant,
    first_token: Option<Duration>,
    slots: Vec<Slot>,
    usage: Option<Usage>,
    stop: Option<StopReason>,
    refusal: Option<Refusal>,
    notes: Vec<String>,
    model: String,
    events: usize,
}

impl std::fmt::Debug for Assembler<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembler")
            .field("events", &self.events)
            .field("usage", &self.usage)
            .field("stop", &self.stop)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
enum Slot {
    Text(String),
    Tool {
        key: String,
        call: ToolCall,
        done: bool,
    },
    Opaque(serde_json::Value),
}

impl<'s> Assembler<'s> {
    /// Starts assembling; `started` is when the request was first sent, `model` the
    /// configured model (replaced by [`Assembler::model`] when the provider names one).
    pub fn new(sink: &'s mut dyn FnMut(Event), started: Instant, model: &str) -> Self {
        Self {
            sink,
            started,
            first_token: None,
            slots: Vec::new(),
            usage: None,
            stop: None,
            refusal: None,
            notes: Vec::new(),
            model: model.to_owned(),
            events: 0,
        }
    }

    fn emit(&mut self, event: Event) {
        self.events += 1;
        (self.sink)(event);
    }

    fn token(&mut self) {
        if self.first_token.is_none() {
            self.first_token = Some(self.started.elapsed());
        }
    }

    /// The model the provider says answered.
    pub fn model(&mut self, model: &str) {
        if !model.is_empty() {
            self.model = model.to_owned();
        }
    }

    /// More assistant text.
    pub fn text(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        self.token();
        match self.slots.last_mut() {
            Some(Slot::Text(t)) => t.push_str(delta),
            _ => self.slots.push(Slot::Text(delta.to_owned())),
        }
        self.emit(Event::TextDelta {
            text: delta.to_owned(),
        });
    }

    /// Ends the current text item: the next text starts a new [`Item::AssistantText`] (a
    /// second message item of a Responses answer).
    pub fn text_break(&mut self) {
        if matches!(self.slots.last(), Some(Slot::Text(_))) {
            self.slots.push(Slot::Text(String::new()));
        }
    }

    /// More refusal text (the model declines; see [`Refusal`]).
    pub fn refusal(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        self.token();
        self.refusal
            .get_or_insert_with(|| Refusal {
                text: String::new(),
                detail: None,
            })
            .text
            .push_str(delta);
        self.emit(Event::RefusalDelta {
            text: delta.to_owned(),
        });
    }

    /// The provider's explanation of a refusal (Anthropic's `stop_details`).
    pub fn refusal_detail(&mut self, detail: String) {
        self.refusal
            .get_or_insert_with(|| Refusal {
                text: String::new(),
                detail: None,
            })
            .detail = Some(detail);
    }

    /// An output item kept verbatim and sent back in later requests ([`Item::Reasoning`]).
    pub fn opaque(&mut self, item: serde_json::Value) {
        self.slots.push(Slot::Opaque(item));
    }

    /// Something noticed and not used; recorded in [`Response::notes`] and sent to the sink.
    pub fn note(&mut self, text: String) {
        if self.notes.contains(&text) {
            return;
        }
        self.notes.push(text.clone());
        self.emit(Event::Note { text });
    }

    /// The provider started its answer over: what was assembled so far is dropped (usage
    /// included: the new message reports its own), and the sink is told.
    pub fn restart(&mut self) {
        let dropped = self.slots.len();
        self.slots.clear();
        self.usage = None;
        self.stop = None;
        self.refusal = None;
        self.emit(Event::Restarted);
        self.note(format!(
            "the provider restarted its answer mid-stream; {dropped} item(s) received before \
             the restart were dropped"
        ));
    }

    fn open(&self, key: &str) -> Option<usize> {
        self.slots
            .iter()
            .rposition(|s| matches!(s, Slot::Tool { key: k, done: false, .. } if k == key))
    }

    /// A tool call starts; `id` may be empty (some compatible servers send none), and then
    /// `call_<n>` is used, `n` counting the calls of this response from 0.
    pub fn tool_started(&mut self, key: &str, id: &str, name: &str) {
        if self.open(key).is_some() {
            return;
        }
        self.token();
        let n = self
            .slots
            .iter()
            .filter(|s| matches!(s, Slot::Tool { .. }))
            .count();
        let id = if id.is_empty() {
            format!("call_{n}")
        } else {
            id.to_owned()
        };
        self.slots.push(Slot::Tool {
            key: key.to_owned(),
            call: ToolCall {
                id: id.clone(),
                name: name.to_owned(),
                arguments: String::new(),
            },
            done: false,
        });
        self.emit(Event::ToolCallStarted {
            id,
            name: name.to_owned(),
        });
    }

    /// More of the arguments of the open call `key` (started implicitly if need be).
    pub fn tool_arguments(&mut self, key: &str, delta: &str) {
        if self.open(key).is_none() {
            self.tool_started(key, "", "");
        }
        if delta.is_empty() {
            return;
        }
        let Some(i) = self.open(key) else { return };
        let id = match &mut self.slots[i] {
            Slot::Tool { call, .. } => {
                call.arguments.push_str(delta);
                call.id.clone()
            }
            Slot::Text(_) | Slot::Opaque(_) => return,
        };
        self.emit(Event::ToolCallArgumentsDelta {
            id,
            delta: delta.to_owned(),
        });
    }

    /// Names the open call `key` if it was started without a name (a compatible server
    /// that sends the name in a later fragment).
    pub fn tool_name(&mut self, key: &str, name: &str) {
        let Some(i) = self.open(key) else { return };
        if let Slot::Tool { call, .. } = &mut self.slots[i]
            && call.name.is_empty()
        {
            name.clone_into(&mut call.name);
        }
    }

    /// The call `key` is complete; `arguments`, when the provider repeats the whole text,
    /// replaces what the deltas built.
    pub fn tool_finished(&mut self, key: &str, arguments: Option<&str>) {
        let Some(i) = self.open(key) else { return };
        let call = match &mut self.slots[i] {
            Slot::Tool { call, done, .. } => {
                *done = true;
                if let Some(a) = arguments {
                    a.clone_into(&mut call.arguments);
                }
                call.clone()
            }
            Slot::Text(_) | Slot::Opaque(_) => return,
        };
        self.emit(Event::ToolCallFinished { call });
    }

    /// Finishes every open call, in the order they started (for wire formats whose calls
    /// end with the choice, not one by one).
    pub fn finish_open_tools(&mut self) {
        for k in self.open_keys() {
            self.tool_finished(&k, None);
        }
    }

    fn open_keys(&self) -> Vec<String> {
        self.slots
            .iter()
            .filter_map(|s| match s {
                Slot::Tool {
                    key, done: false, ..
                } => Some(key.clone()),
                _ => None,
            })
            .collect()
    }

    /// Replaces the token counts.
    pub fn usage(&mut self, usage: Usage) {
        self.usage = Some(usage);
        self.emit(Event::Usage { usage });
    }

    /// The terminal event arrived.
    ///
    /// - An `EndTurn` with tool calls becomes `ToolUse` (the Responses API and some
    ///   compatible servers say only "completed"/"stop"); one with refusal text becomes
    ///   `Refusal` (OpenAI ends a refusal with `stop`).
    /// - With `MaxTokens` the calls still open were cut off: they are not finished, and
    ///   their ids go to [`Response::cut_calls`]. Any other reason finishes them.
    /// - A refusal or content filter always carries a [`Refusal`], with a detail in words
    ///   when the provider sent no text.
    pub fn complete(&mut self, stop: StopReason) {
        if stop != StopReason::MaxTokens {
            self.finish_open_tools();
        }
        let has_tools = self.slots.iter().any(|s| matches!(s, Slot::Tool { .. }));
        let refused = self.refusal.as_ref().is_some_and(|r| !r.text.is_empty());
        let stop = match stop {
            StopReason::EndTurn if refused => StopReason::Refusal,
            StopReason::EndTurn if has_tools => StopReason::ToolUse,
            other => other,
        };
        if matches!(stop, StopReason::Refusal | StopReason::ContentFilter) && self.refusal.is_none()
        {
            self.refusal = Some(Refusal {
                text: String::new(),
                detail: Some(match stop {
                    StopReason::ContentFilter => {
                        "the provider's content filter stopped the answer".to_owned()
                    }
                    _ => "the model declined, and the provider gave no text".to_owned(),
                }),
            });
        }
        self.stop = Some(stop.clone());
        self.emit(Event::Completed { stop });
    }

    /// Whether the terminal event arrived.
    pub fn is_complete(&self) -> bool {
        self.stop.is_some()
    }

    /// Reports an error event to the sink and returns the error to fail with, carrying what
    /// was received so far.
    pub fn stream_error(
        &mut self,
        category: ErrorCategory,
        code: Option<String>,
        message: String,
    ) -> ProviderError {
        self.emit(Event::Error {
            category,
            message: message.clone(),
        });
        ProviderError::StreamError {
            category,
            code,
            message,
            received: Box::new(self.response()),
        }
    }

    /// How many events went to the sink.
    pub fn events(&self) -> usize {
        self.events
    }

    /// What has been received so far (complete or not).
    pub fn response(&self) -> Response {
        let cut_calls = if self.stop.as_ref() == Some(&StopReason::MaxTokens) {
            self.slots
                .iter()
                .filter_map(|s| match s {
                    Slot::Tool {
                        call, done: false, ..
                    } => Some(call.id.clone()),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        let items = self
            .slots
            .iter()
            .filter_map(|s| match s {
                Slot::Text(text) if text.is_empty() => None,
                Slot::Text(text) => Some(Item::AssistantText { text: text.clone() }),
                Slot::Tool { call, .. } => Some(Item::ToolCall(call.clone())),
                Slot::Opaque(item) => Some(Item::Reasoning { item: item.clone() }),
            })
            .collect();
        Response {
            items,
            usage: self.usage,
            stop: self
                .stop
                .clone()
                .unwrap_or_else(|| StopReason::Unknown("incomplete".to_owned())),
            refusal: self.refusal.clone(),
            cut_calls,
            notes: self.notes.clone(),
            latency: Latency {
                first_token: self.first_token,
                total: self.started.elapsed(),
            },
            model: self.model.clone(),
        }
    }

    /// The error for a stream that ended before its terminal event.
    pub fn cut(&self, reason: impl Into<String>) -> ProviderError {
        ProviderError::StreamCut {
            reason: reason.into(),
            events: self.events,
            received: Box::new(self.response()),
        }
    }
}
