//! Assembling a streamed answer: every wire format feeds the same [`Assembler`], which passes
//! [`Event`]s to the caller's sink and builds the [`Response`].

use std::time::{Duration, Instant};

use super::{Event, Item, Latency, ProviderError, Response, StopReason, ToolCall, Usage};

/// Builds a [`Response`] from wire-format callbacks and forwards each [`Event`] to a sink.
///
/// Tool calls are keyed by the wire format's own handle (a choice index, an output index, a
/// content block index) so argument deltas find their call even when calls interleave.
pub struct Assembler<'s> {
    sink: &'s mut dyn FnMut(Event),
    started: Instant,
    first_token: Option<Duration>,
    slots: Vec<Slot>,
    usage: Usage,
    stop: Option<StopReason>,
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
            usage: Usage::default(),
            stop: None,
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
            Slot::Text(_) => return,
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
        if let Slot::Tool { call, .. } = &mut self.slots[i] {
            if call.name.is_empty() {
                name.clone_into(&mut call.name);
            }
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
            Slot::Text(_) => return,
        };
        self.emit(Event::ToolCallFinished { call });
    }

    /// Finishes every open call, in the order they started.
    pub fn finish_open_tools(&mut self) {
        let keys: Vec<String> = self
            .slots
            .iter()
            .filter_map(|s| match s {
                Slot::Tool {
                    key, done: false, ..
                } => Some(key.clone()),
                _ => None,
            })
            .collect();
        for k in keys {
            self.tool_finished(&k, None);
        }
    }

    /// Replaces the token counts.
    pub fn usage(&mut self, usage: Usage) {
        self.usage = usage;
        self.emit(Event::Usage { usage });
    }

    /// The counts so far (Anthropic reports input and output in different events).
    pub fn current_usage(&self) -> Usage {
        self.usage
    }

    /// The terminal event arrived. An `EndTurn` with tool calls becomes `ToolUse` (the
    /// Responses API and some compatible servers say only "completed"/"stop").
    pub fn complete(&mut self, stop: StopReason) {
        self.finish_open_tools();
        let has_tools = self.slots.iter().any(|s| matches!(s, Slot::Tool { .. }));
        let stop = if stop == StopReason::EndTurn && has_tools {
            StopReason::ToolUse
        } else {
            stop
        };
        self.stop = Some(stop.clone());
        self.emit(Event::Completed { stop });
    }

    /// Whether the terminal event arrived.
    pub fn is_complete(&self) -> bool {
        self.stop.is_some()
    }

    /// Reports an error event to the sink and returns the error to fail with.
    pub fn stream_error(&mut self, message: String) -> ProviderError {
        self.emit(Event::Error {
            message: message.clone(),
        });
        ProviderError::StreamError { message }
    }

    /// How many events went to the sink.
    pub fn events(&self) -> usize {
        self.events
    }

    /// What has been received so far (complete or not).
    pub fn response(&self) -> Response {
        let items = self
            .slots
            .iter()
            .map(|s| match s {
                Slot::Text(text) => Item::AssistantText { text: text.clone() },
                Slot::Tool { call, .. } => Item::ToolCall(call.clone()),
            })
            .collect();
        Response {
            items,
            usage: self.usage,
            stop: self
                .stop
                .clone()
                .unwrap_or_else(|| StopReason::Other("incomplete".to_owned())),
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
