//! One model call: sent on a thread of its own so that the deadline and an interrupt bound
//! the wait, its stream shown to the observer as it arrives, and its answer (or failure)
//! recorded — text, tool calls, usage, latency and how it ended.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::executor::Interrupt;
use super::log::Log;
use super::{Model, ProviderFailure, SessionError, Update};
use crate::provider::price::PriceSource as TablePriceSource;
use crate::provider::{self, Item, Provider, ProviderError, Request, Response};
use crate::records::{
    Cost, EventBody, Message, ModelCallEnded, ModelError, ModelLatency, PriceSource, Role,
    ToolCall, ToolResult, ToolState, Usage,
};

/// How often a wait for the model looks at the interrupt flag and the deadline.
const POLL: Duration = Duration::from_millis(50);

/// Why a model call gave no answer.
pub(super) enum CallEnd {
    Provider(ProviderError),
    Crashed,
    Deadline,
    Interrupted,
}

enum Msg {
    Stream(provider::Event),
    Done(Result<Response, ProviderError>),
}

/// Calls the model on a thread of its own, showing each stream event to `observer` as it
/// arrives; the wall deadline and an interrupt bound the wait, and a call left behind is
/// abandoned (its answer is dropped when it arrives).
pub(super) fn call_model(
    provider: &Arc<dyn Provider>,
    request: Request,
    deadline: Option<Instant>,
    interrupt: &Interrupt,
    observer: &(dyn Fn(Update<'_>) + Sync),
) -> Result<Response, CallEnd> {
    let (tx, rx) = mpsc::channel();
    let p = Arc::clone(provider);
    let spawned = std::thread::Builder::new()
        .name("bee-model-call".to_owned())
        .spawn(move || {
            let events = tx.clone();
            let result = p.stream(&request, &mut |e| {
                let _ = events.send(Msg::Stream(e));
            });
            let _ = tx.send(Msg::Done(result));
        });
    if spawned.is_err() {
        return Err(CallEnd::Crashed);
    }
    loop {
        let wait = deadline.map_or(POLL, |d| {
            d.saturating_duration_since(Instant::now()).min(POLL)
        });
        match rx.recv_timeout(wait) {
            Ok(Msg::Stream(e)) => observer(Update::Stream(&e)),
            Ok(Msg::Done(result)) => return result.map_err(CallEnd::Provider),
            Err(RecvTimeoutError::Disconnected) => return Err(CallEnd::Crashed),
            Err(RecvTimeoutError::Timeout) => {}
        }
        if interrupt.is_raised() {
            return Err(CallEnd::Interrupted);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(CallEnd::Deadline);
        }
    }
}

/// Records a model answer: its text, its tool calls, then its usage, latency and how it
/// ended. Returns the usage recorded, for the session's limits.
pub(super) fn record_response(
    response: &Response,
    call_no: u32,
    model: &Model,
    log: &mut Log<'_>,
) -> Result<Usage, SessionError> {
    for item in &response.items {
        match item {
            Item::AssistantText { text } if !text.is_empty() => {
                log.record(EventBody::Message(Message {
                    role: Role::Assistant,
                    text: text.clone(),
                }))?;
            }
            Item::ToolCall(c) => {
                let arguments = c
                    .parsed_arguments()
                    .unwrap_or_else(|_| serde_json::Value::String(c.arguments.clone()));
                log.record(EventBody::ToolCall(ToolCall {
                    call_id: c.id.clone(),
                    tool: c.name.clone(),
                    arguments,
                }))?;
            }
            _ => {}
        }
    }
    let usage = usage_record(call_no, &response.model, response.usage, model);
    log.record(EventBody::Usage(usage.clone()))?;
    log.record(EventBody::ModelLatency(ModelLatency {
        model_call: call_no,
        first_token_ms: response.latency.first_token.map(millis),
        total_ms: millis(response.latency.total),
    }))?;
    log.record(EventBody::ModelCallEnded(ModelCallEnded {
        model_call: call_no,
        stop_reason: Some(response.stop.clone()),
        error: None,
        refusal: response.refusal.clone(),
        cut_calls: response.cut_calls.clone(),
        notes: response.notes.clone(),
    }))?;
    Ok(usage)
}

/// The usage record of a call: every count known and the cost from the price table, or
/// every count unknown (the provider reported none) and the cost unknown with them.
fn usage_record(
    call_no: u32,
    answered_by: &str,
    usage: Option<provider::Usage>,
    model: &Model,
) -> Usage {
    let Some(u) = usage else {
        return Usage {
            model_call: call_no,
            model: answered_by.to_owned(),
            input_tokens: None,
            cached_input_tokens: None,
            output_tokens: None,
            reasoning_tokens: None,
            cost: Cost::UnknownTokens,
        };
    };
    let cost = match model.prices.lookup(answered_by) {
        Some((price, source)) => Cost::Known {
            usd: price.cost(&u),
            source: match source {
                TablePriceSource::Shipped { as_of, .. } => PriceSource::ShippedTable(as_of.clone()),
                TablePriceSource::Override => PriceSource::Override,
            },
        },
        None => Cost::Unknown {
            model: answered_by.to_owned(),
        },
    };
    Usage {
        model_call: call_no,
        model: answered_by.to_owned(),
        input_tokens: Some(u.input_tokens),
        cached_input_tokens: Some(u.cached_input_tokens),
        output_tokens: Some(u.output_tokens),
        reasoning_tokens: Some(u.reasoning_tokens),
        cost,
    }
}

/// Records a model call that gave no usable answer (failed, or abandoned at the deadline or
/// on an interrupt): the text received before the failure, the input tokens the provider had
/// reported (its output count is never final before the stream ends, so it is unknown), the
/// time spent, and the error. Returns the usage recorded, for the session's limits.
pub(super) fn record_failed_call(
    call_no: u32,
    configured_model: &str,
    received: Option<&Response>,
    sent: Instant,
    failure: Option<&ProviderFailure>,
    log: &mut Log<'_>,
) -> Result<Usage, SessionError> {
    let model_name = received.map_or_else(|| configured_model.to_owned(), |r| r.model.clone());
    if let Some(r) = received {
        let text = r.text();
        if !text.is_empty() {
            log.record(EventBody::Message(Message {
                role: Role::Assistant,
                text,
            }))?;
        }
    }
    let known = received.and_then(|r| r.usage);
    let usage = Usage {
        model_call: call_no,
        model: model_name,
        input_tokens: known.map(|u| u.input_tokens),
        cached_input_tokens: known.map(|u| u.cached_input_tokens),
        output_tokens: None,
        reasoning_tokens: None,
        cost: Cost::UnknownTokens,
    };
    log.record(EventBody::Usage(usage.clone()))?;
    log.record(EventBody::ModelLatency(ModelLatency {
        model_call: call_no,
        first_token_ms: received.and_then(|r| r.latency.first_token).map(millis),
        total_ms: millis(sent.elapsed()),
    }))?;
    log.record(EventBody::ModelCallEnded(ModelCallEnded {
        model_call: call_no,
        stop_reason: None,
        error: failure.map(|f| ModelError {
            category: f.category,
            message: f.message.clone(),
        }),
        refusal: None,
        cut_calls: Vec::new(),
        notes: received.map(|r| r.notes.clone()).unwrap_or_default(),
    }))?;
    Ok(usage)
}

/// Answers a tool call of a cut-off answer without running it.
pub(super) fn record_not_run(
    call: &provider::ToolCall,
    cut: &[String],
    log: &mut Log<'_>,
) -> Result<(), SessionError> {
    let why = if cut.contains(&call.id) {
        "its arguments were cut off"
    } else {
        "the answer it belongs to was cut off"
    };
    log.record(EventBody::ToolResult(ToolResult {
        call_id: call.id.clone(),
        state: ToolState::CouldNotRun,
        output: format!(
            "not run: {why} at the model's output limit (stop reason max_tokens); the turn \
             ends here"
        ),
        truncated: None,
        exit: None,
        duration_ms: 0,
        lost_records: 0,
    }))
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
