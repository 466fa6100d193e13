//! Streams the providers really sent, replayed through a loopback server: the corpus under
//! `tests/fixtures/wire/` (recorded by the providers' own SDK test suites; see its `SOURCES`)
//! and hand-made streams for what the corpus lacks. Each stream is served whole and split at
//! pseudo-random 1–64-byte boundaries; the assembled events, stop reason, usage and the
//! outcome of an episode built on it are checked against `expected.json`, which was written
//! from the streams by a separate reader.
//!
//! The server handles a fixed list of connections and stops by itself after a deadline.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bee::episode::{
    EpisodeLimits, EpisodeReport, EpisodeSpec, Interrupt, Model, ScriptedExecutor, run_episode,
};
use bee::provider::price::PriceTable;
use bee::provider::{
    ErrorCategory, Event, Item, Provider, ProviderError, ProviderSpec, Request, Response,
    StopReason, Usage,
};
use bee::records::{Enforcement, EventBody, LimitKind, Outcome, Timestamp, read_transcript};
use serde_json::{Value, json};

const KEY: &str = "sk-test-wire-0123456789";

/// How a body is written: in one piece, or in chunks of 1–64 bytes drawn from a seed.
#[derive(Debug, Clone, Copy)]
enum Split {
    Whole,
    Seeded(u64),
}

const SPLITS: [Split; 4] = [
    Split::Whole,
    Split::Seeded(1),
    Split::Seeded(0x5eed),
    Split::Seeded(0xdead_beef),
];

/// xorshift64*: a small deterministic generator, so a failing split can be replayed.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn chunks(body: &[u8], split: Split) -> Vec<&[u8]> {
    match split {
        Split::Whole => vec![body],
        Split::Seeded(seed) => {
            let mut state = seed | 1;
            let mut out = Vec::new();
            let mut rest = body;
            while !rest.is_empty() {
                let n = usize::try_from(next(&mut state) % 64 + 1)
                    .unwrap()
                    .min(rest.len());
                let (head, tail) = rest.split_at(n);
                out.push(head);
                rest = tail;
            }
            out
        }
    }
}

/// Serves `bodies` as `text/event-stream` answers to successive connections; returns the
/// base URL and a channel of the request bodies received.
fn serve(bodies: Vec<Vec<u8>>, split: Split) -> (String, mpsc::Receiver<Value>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        for body in bodies {
            let stream = loop {
                match listener.accept() {
                    Ok((s, _)) => break s,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(_) => return,
                }
            };
            stream.set_nonblocking(false).unwrap();
            stream.set_nodelay(true).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut reader = BufReader::new(stream);
            let mut len = 0;
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                if let Some((n, v)) = h.split_once(':')
                    && n.eq_ignore_ascii_case("content-length")
                {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut request = vec![0; len];
            reader.read_exact(&mut request).unwrap();
            let _ = tx.send(serde_json::from_slice(&request).unwrap_or(Value::Null));
            let mut stream = reader.into_inner();
            let head =
                "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: text/event-stream\r\n\r\n";
            let _ = stream.write_all(head.as_bytes());
            for chunk in chunks(&body, split) {
                if stream.write_all(chunk).is_err() {
                    break;
                }
                let _ = stream.flush();
            }
        }
    });
    (format!("http://127.0.0.1:{port}/v1"), rx)
}

fn provider(kind: &str, base_url: &str) -> Box<dyn Provider> {
    let text = format!(
        "kind = \"{kind}\"\nbase_url = \"{base_url}\"\nmodel = \"configured-model\"\n\
         api_key_env = \"BEE_WIRE_KEY\"\n[retry]\nmax_attempts = 1\n"
    );
    let spec = ProviderSpec::parse("provider.toml", &text, Path::new("/")).unwrap();
    spec.connect_with(&|name| (name == "BEE_WIRE_KEY").then(|| KEY.to_owned()))
        .unwrap()
}

fn request() -> Request {
    Request {
        items: vec![Item::User {
            text: "what is the weather?".into(),
        }],
        tools: Vec::new(),
        max_output_tokens: Some(64),
    }
}

fn stream(kind: &str, body: &[u8], split: Split) -> (Result<Response, ProviderError>, Vec<Event>) {
    let (url, _rx) = serve(vec![body.to_vec()], split);
    let p = provider(kind, &url);
    let mut events = Vec::new();
    let r = p.stream(&request(), &mut |e| events.push(e));
    (r, events)
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wire")
}

fn expected() -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).unwrap();
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_object()
        .unwrap()
        .clone()
}

fn usage_of(v: &Value) -> Usage {
    let n = |k: &str| v[k].as_u64().unwrap();
    Usage {
        input_tokens: n("input_tokens"),
        cached_input_tokens: n("cached_input_tokens"),
        output_tokens: n("output_tokens"),
        reasoning_tokens: n("reasoning_tokens"),
    }
}

/// The concatenated text of the sink's deltas of one kind.
fn deltas(events: &[Event], refusal: bool) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::TextDelta { text } if !refusal => Some(text.as_str()),
            Event::RefusalDelta { text } if refusal => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Checks one assembled corpus stream against its expectation.
fn check(name: &str, want: &Value, r: &Response, events: &[Event], split: Split) {
    let at = format!("{name} ({split:?})");
    assert_eq!(r.stop.as_string(), want["stop"].as_str().unwrap(), "{at}");
    assert_eq!(
        events.last(),
        Some(&Event::Completed {
            stop: r.stop.clone()
        }),
        "{at}"
    );
    assert_eq!(r.usage, Some(usage_of(&want["usage"])), "{at}");
    assert_eq!(r.model, want["model"].as_str().unwrap(), "{at}");
    assert_eq!(r.text(), want["text"].as_str().unwrap(), "{at}");
    // The sink saw the same text, delta by delta; refusal text never counts as text.
    let streamed = deltas(events, false);
    assert_eq!(
        streamed.replace("\n\n", ""),
        r.text().replace("\n\n", ""),
        "{at}"
    );
    let calls: Vec<Value> = r
        .tool_calls()
        .map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
        .collect();
    assert_eq!(Value::from(calls), want["tool_calls"], "{at}");
    let finished: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallFinished { call } => Some(call.id.as_str()),
            _ => None,
        })
        .collect();
    let cut: Vec<&str> = r.cut_calls.iter().map(String::as_str).collect();
    for c in r.tool_calls() {
        assert_ne!(
            finished.contains(&c.id.as_str()),
            cut.contains(&c.id.as_str()),
            "{at}: {} is finished or cut, never both",
            c.id
        );
    }
    if let Some(want_cut) = want.get("cut_calls") {
        assert_eq!(
            Value::from(cut.iter().map(|c| Value::from(*c)).collect::<Vec<_>>()),
            *want_cut,
            "{at}"
        );
    }
    match (&want["refusal"], &want["refusal_detail"]) {
        (Value::String(text), _) => {
            let refusal = r.refusal.as_ref().unwrap();
            assert_eq!(&refusal.text, text, "{at}");
            assert_eq!(&deltas(events, true), text, "{at}");
        }
        (_, Value::String(detail)) => {
            assert_eq!(
                r.refusal.as_ref().unwrap().detail.as_ref(),
                Some(detail),
                "{at}"
            );
        }
        _ => assert_eq!(r.refusal, None, "{at}"),
    }
    let others = want
        .get("other_choices")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ignored = want
        .get("ignored_blocks")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    assert_eq!(
        r.notes.len(),
        usize::from(others > 0) + ignored,
        "{at}: {:?}",
        r.notes
    );
    let noted: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Note { text } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(noted, r.notes.iter().collect::<Vec<_>>(), "{at}");
}

fn corpus(dir: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(fixtures().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = format!("{dir}/{}", p.file_name().unwrap().to_str().unwrap());
            let mut body = std::fs::read(&p).unwrap();
            // Some fixture files were saved without the blank line that ends the stream's
            // last event (the API sends it); the standard drops an unterminated event, so
            // put it back rather than teach the reader to accept a cut stream.
            while !body.ends_with(b"\n\n") {
                body.push(b'\n');
            }
            (name, body)
        })
        .collect()
}

fn check_corpus(kind: &str, dir: &str) {
    let want = expected();
    let files = corpus(dir);
    assert!(files.len() >= 7, "{dir}: {} files", files.len());
    for (name, body) in &files {
        let w = &want[name];
        assert!(w.is_object(), "{name} has no expectation");
        for split in SPLITS {
            let (r, events) = stream(kind, body, split);
            assert!(r.is_ok(), "{name} ({split:?}): {r:?}");
            let r = r.unwrap();
            check(name, w, &r, &events, split);
        }
    }
}

#[test]
fn every_recorded_chat_stream_assembles_exactly() {
    check_corpus("openai-chat", "openai-chat");
}

#[test]
fn every_recorded_anthropic_stream_assembles_exactly() {
    check_corpus("anthropic", "anthropic");
}

#[test]
fn a_chat_stream_with_three_choices_keeps_choice_zero_and_says_so() {
    let want = expected();
    let name = want
        .keys()
        .find(|k| k.starts_with("openai-chat/a491adda"))
        .unwrap();
    let body = std::fs::read(fixtures().join(name)).unwrap();
    let (r, _) = stream("openai-chat", &body, Split::Seeded(7));
    let r = r.unwrap();
    assert!(r.text().contains("\"temperature\":65"), "{}", r.text());
    assert!(!r.text().contains("\"temperature\":61"), "{}", r.text());
    assert_eq!(r.notes.len(), 1);
    assert!(r.notes[0].contains("index 1, 2"), "{}", r.notes[0]);
}

// ---- episodes on the corpus: no refused, truncated or failed answer ends as `passed` ----

/// A model on `url`, with no prices (costs unknown) so the run needs no price table.
fn episode_model(kind: &str, url: &str) -> Model {
    Model {
        provider: Arc::from(provider(kind, url)),
        kind: kind.to_owned(),
        prices: Arc::new(PriceTable::default()),
        max_output_tokens: 64,
    }
}

fn episode(model: &Model, dir: &Path, limits: EpisodeLimits) -> EpisodeReport {
    let spec = EpisodeSpec {
        run_id: "wire".to_owned(),
        episode_id: "ep".to_owned(),
        scenario: "wire".to_owned(),
        prompt: "what is the weather?".to_owned(),
        system_prompt: None,
        limits,
        success_check: None,
        workspace: dir.to_owned(),
        policy: None,
        run_started_at: Timestamp::now(),
        max_output_tokens: None,
        context: Vec::new(),
        content_hash: None,
    };
    let exec = ScriptedExecutor::new(
        &[
            "get_weather",
            "GetWeatherArgs",
            "get_stock_price",
            "make_file",
        ],
        Enforcement::Host,
    );
    run_episode(&spec, model, &exec, dir, None, &Interrupt::new(), &|_| {}).unwrap()
}

fn transcript(r: &EpisodeReport) -> Vec<EventBody> {
    read_transcript(&r.transcript)
        .unwrap()
        .events
        .into_iter()
        .map(|e| e.body)
        .collect()
}

#[test]
fn episodes_on_the_corpus_end_as_the_streams_say() {
    let want = expected();
    for (kind, dir, plain) in [
        ("openai-chat", "openai-chat", "83b060ba"),
        ("anthropic", "anthropic", "basic_response"),
    ] {
        let files = corpus(dir);
        let (_, follow_up) = files.iter().find(|(n, _)| n.contains(plain)).unwrap();
        for (name, body) in &files {
            let stop = want[name]["stop"].as_str().unwrap();
            let tmp = tempfile::tempdir().unwrap();
            let (url, _rx) = serve(vec![body.clone(), follow_up.clone()], Split::Seeded(3));
            let r = episode(
                &episode_model(kind, &url),
                tmp.path(),
                EpisodeLimits::default(),
            );
            let evs = transcript(&r);
            let ended: Vec<_> = evs
                .iter()
                .filter_map(|e| match e {
                    EventBody::ModelCallEnded(m) => Some(m),
                    _ => None,
                })
                .collect();
            assert_eq!(
                ended[0]
                    .stop_reason
                    .as_ref()
                    .map(StopReason::as_string)
                    .as_deref(),
                Some(stop),
                "{name}"
            );
            match stop {
                "refusal" => {
                    assert_eq!(r.outcome, Outcome::Refused, "{name}");
                    assert!(r.refusal.is_some(), "{name}");
                    assert_eq!(ended.len(), 1, "{name}");
                }
                "max_tokens" => {
                    assert_eq!(r.outcome, Outcome::Limit, "{name}");
                    assert_eq!(r.limit.as_ref().unwrap().limit, LimitKind::MaxOutputTokens);
                    // A cut answer's tool calls are answered as not run, never dispatched.
                    for e in &evs {
                        if let EventBody::ToolResult(t) = e {
                            assert_eq!(t.state, bee::records::ToolState::CouldNotRun);
                            assert!(t.output.starts_with("not run: "), "{}", t.output);
                        }
                    }
                }
                "end_turn" | "tool_use" => assert_eq!(r.outcome, Outcome::Passed, "{name}"),
                other => panic!("{name}: unexpected stop {other}"),
            }
            // Every model call is counted with its tokens: the corpus reports them all.
            assert_eq!(r.totals.model_calls, ended.len() as u64, "{name}");
            assert_eq!(r.totals.unknown_token_calls, 0, "{name}");
        }
    }
}

// ---- hand-made streams for what the corpus lacks ----

fn sse(events: &[(&str, Value)]) -> Vec<u8> {
    let mut out = String::new();
    for (name, data) in events {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    out.into_bytes()
}

fn responses_created() -> (&'static str, Value) {
    (
        "response.created",
        json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-test"}}),
    )
}

fn for_every_split(
    kind: &str,
    body: &[u8],
    mut check: impl FnMut(Result<Response, ProviderError>, Vec<Event>),
) {
    for split in SPLITS {
        let (r, events) = stream(kind, body, split);
        check(r, events);
    }
}

#[test]
fn responses_incomplete_at_max_output_tokens_cuts_the_open_call() {
    let body = sse(&[
        responses_created(),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0,
            "item": {"type": "function_call", "call_id": "call_1", "name": "write_file", "arguments": ""}}),
        ),
        (
            "response.function_call_arguments.delta",
            json!({"type": "response.function_call_arguments.delta",
            "output_index": 0, "delta": "{\"path\": \"a.txt\", \"content\": \"hel"}),
        ),
        (
            "response.incomplete",
            json!({"type": "response.incomplete", "response": {"model": "gpt-test",
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {"input_tokens": 40, "output_tokens": 16}}}),
        ),
    ]);
    for_every_split("openai-responses", &body, |r, events| {
        let r = r.unwrap();
        assert_eq!(r.stop, StopReason::MaxTokens);
        assert_eq!(r.cut_calls, ["call_1"]);
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::ToolCallFinished { .. }))
        );
        assert_eq!(r.usage.unwrap().output_tokens, 16);
    });
}

#[test]
fn responses_content_filter_is_a_stop_of_its_own() {
    let body = sse(&[
        responses_created(),
        (
            "response.incomplete",
            json!({"type": "response.incomplete", "response": {
            "incomplete_details": {"reason": "content_filter"}, "usage": {"input_tokens": 9, "output_tokens": 0}}}),
        ),
    ]);
    let (r, _) = stream("openai-responses", &body, Split::Whole);
    let r = r.unwrap();
    assert_eq!(r.stop, StopReason::ContentFilter);
    assert!(
        r.refusal
            .unwrap()
            .detail
            .unwrap()
            .contains("content filter")
    );
}

#[test]
fn a_responses_error_event_keeps_its_nested_message_and_code() {
    let body = sse(&[
        responses_created(),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Partial"}),
        ),
        (
            "error",
            json!({"type": "error", "error": {"type": "server_error", "code": "server_error",
            "message": "The server had an error while processing your request."}}),
        ),
        (
            "response.failed",
            json!({"type": "response.failed", "response": {"status": "failed",
            "error": null, "usage": {"input_tokens": 31, "output_tokens": 2}}}),
        ),
    ]);
    for_every_split("openai-responses", &body, |r, events| {
        let e = r.unwrap_err();
        assert_eq!(e.category(), ErrorCategory::Server);
        let text = e.to_string();
        assert!(text.contains("The server had an error"), "{text}");
        assert!(text.contains("(server_error)"), "{text}");
        let received = e.received().unwrap();
        assert_eq!(received.text(), "Partial");
        assert_eq!(received.usage.unwrap().input_tokens, 31);
        assert!(matches!(
            events.last(),
            Some(Event::Error {
                category: ErrorCategory::Server,
                ..
            })
        ));
    });
}

#[test]
fn a_responses_error_event_at_the_top_level_or_alone_is_read_too() {
    // The reference's shape: code and message at the top level, and no response.failed.
    let body = sse(&[
        responses_created(),
        (
            "error",
            json!({"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.", "param": null}),
        ),
    ]);
    let (r, _) = stream("openai-responses", &body, Split::Seeded(11));
    let e = r.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::RateLimit);
    assert!(e.to_string().ends_with(": Slow down."), "{e}");
}

#[test]
fn responses_refusal_reasoning_and_two_messages_are_kept_apart() {
    let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": [],
        "encrypted_content": "gAAAAB-opaque"});
    let body = sse(&[
        responses_created(),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "message"}}),
        ),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 1, "delta": "First."}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 2, "item": {"type": "message"}}),
        ),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 2, "delta": "Second."}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 3, "item": {"type": "custom_tool_call", "name": "x"}}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"model": "gpt-test",
            "usage": {"input_tokens": 5, "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 3}}}}),
        ),
    ]);
    let (r, events) = stream("openai-responses", &body, Split::Seeded(5));
    let r = r.unwrap();
    assert_eq!(r.text(), "First.\n\nSecond.");
    assert_eq!(
        r.items
            .iter()
            .filter(|i| matches!(i, Item::AssistantText { .. }))
            .count(),
        2
    );
    assert!(r.items.contains(&Item::Reasoning {
        item: reasoning.clone()
    }));
    assert_eq!(r.notes.len(), 1);
    assert!(r.notes[0].contains("custom_tool_call"), "{}", r.notes[0]);
    assert!(events.iter().any(|e| matches!(e, Event::Note { .. })));

    // The reasoning item goes back in the next (stateless) request by its encrypted
    // content, without the server's id (`store: false` keeps no item to name).
    let follow_up = sse(&[
        responses_created(),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ),
    ]);
    let (url, rx) = serve(vec![follow_up], Split::Whole);
    let p = provider("openai-responses", &url);
    let mut req = request();
    req.items.extend(r.items.iter().cloned());
    p.stream(&req, &mut |_| {}).unwrap();
    let sent = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        sent["input"].as_array().unwrap().contains(
            &json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-opaque"})
        ),
        "{sent}"
    );
    assert!(!sent.to_string().contains("rs_1"), "{sent}");
    assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));

    let refusal = sse(&[
        responses_created(),
        (
            "response.refusal.delta",
            json!({"type": "response.refusal.delta", "output_index": 0, "delta": "I can't help"}),
        ),
        (
            "response.refusal.delta",
            json!({"type": "response.refusal.delta", "output_index": 0, "delta": " with that."}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"usage": {"input_tokens": 4, "output_tokens": 5}}}),
        ),
    ]);
    let (r, _) = stream("openai-responses", &refusal, Split::Seeded(9));
    let r = r.unwrap();
    assert_eq!(r.stop, StopReason::Refusal);
    assert_eq!(r.refusal.as_ref().unwrap().text, "I can't help with that.");
    assert_eq!(r.text(), "");
}

/// Every string in `v` (keys and values), to look for server item ids anywhere in a body.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => {
            for (k, x) in o {
                out.push(k.clone());
                strings(x, out);
            }
        }
        _ => {}
    }
}

#[test]
fn a_two_turn_reasoning_episode_sends_encrypted_reasoning_and_no_server_ids() {
    // Turn 1: reasoning (rs_…, with encrypted_content) and a function call (fc_…, call_…);
    // turn 2: reasoning and a message (msg_…). With `store: false` the API refuses any
    // server item id in a later request, so the second request must carry the reasoning's
    // encrypted content and the call's `call_id`, and none of those ids.
    let turns: Vec<Vec<u8>> = ["two_turn_reasoning_1.txt", "two_turn_reasoning_2.txt"]
        .iter()
        .map(|f| std::fs::read(fixtures().join("openai-responses").join(f)).unwrap())
        .collect();
    let first: Vec<Value> = String::from_utf8(turns[0].clone())
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let done = |kind: &str| -> Value {
        first
            .iter()
            .find(|e| e["type"] == "response.output_item.done" && e["item"]["type"] == kind)
            .unwrap()["item"]
            .clone()
    };
    let (reasoning, call) = (done("reasoning"), done("function_call"));
    let encrypted = reasoning["encrypted_content"].as_str().unwrap();
    assert!(reasoning["id"].as_str().unwrap().starts_with("rs_"));
    for split in [Split::Whole, Split::Seeded(13)] {
        let tmp = tempfile::tempdir().unwrap();
        let (url, rx) = serve(turns.clone(), split);
        let r = episode(
            &episode_model("openai-responses", &url),
            tmp.path(),
            EpisodeLimits::default(),
        );
        assert_eq!(r.outcome, Outcome::Passed, "{split:?}");
        assert_eq!(r.totals.model_calls, 2, "{split:?}");
        let _ = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let second = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let input = second["input"].as_array().unwrap();
        assert!(
            input.contains(
                &json!({"type": "reasoning", "summary": [], "encrypted_content": encrypted})
            ),
            "{second:#}"
        );
        let sent_call = input.iter().find(|i| i["type"] == "function_call").unwrap();
        assert_eq!(sent_call["call_id"], call["call_id"], "{second:#}");
        assert_eq!(sent_call["arguments"], call["arguments"], "{second:#}");
        assert!(input.iter().all(|i| i.get("id").is_none()), "{second:#}");
        let mut all = Vec::new();
        strings(&second, &mut all);
        for id in [&reasoning["id"], &call["id"]] {
            let id = id.as_str().unwrap();
            assert!(!all.iter().any(|s| s.contains(id)), "{id} in {second:#}");
        }
        assert!(
            !all.iter()
                .any(|s| s.starts_with("rs_") || s.starts_with("fc_")),
            "{second:#}"
        );
    }
}

#[test]
fn a_second_response_created_starts_the_answer_over() {
    let body = sse(&[
        responses_created(),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "stale"}),
        ),
        responses_created(),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "fresh"}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"usage": {"input_tokens": 2, "output_tokens": 1}}}),
        ),
    ]);
    let (r, events) = stream("openai-responses", &body, Split::Seeded(2));
    let r = r.unwrap();
    assert_eq!(r.text(), "fresh");
    assert!(events.contains(&Event::Restarted));
    assert!(r.notes[0].contains("restarted"), "{:?}", r.notes);
}

fn message_start(id: &str, input: u64) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "model": "claude-test",
            "usage": {"input_tokens": input, "output_tokens": 1}}}),
    )
}

#[test]
fn an_anthropic_overloaded_error_mid_stream_keeps_the_input_tokens_known_so_far() {
    let body = sse(&[
        message_start("msg_1", 377),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me"}}),
        ),
        (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ]);
    for_every_split("anthropic", &body, |r, _| {
        let e = r.unwrap_err();
        assert_eq!(e.category(), ErrorCategory::Overloaded);
        let got = e.received().unwrap();
        assert_eq!(got.text(), "Let me");
        assert_eq!(got.usage.unwrap().input_tokens, 377);
    });
}

#[test]
fn an_anthropic_restart_is_not_spliced_into_the_first_message() {
    let body = sse(&[
        message_start("msg_1", 10),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_old", "name": "shell", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"command\": \"rm -"}}),
        ),
        message_start("msg_2", 12),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_new", "name": "shell", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"command\": \"ls\"}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    for_every_split("anthropic", &body, |r, events| {
        let r = r.unwrap();
        let calls: Vec<_> = r.tool_calls().collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "toolu_new");
        assert_eq!(calls[0].arguments, "{\"command\": \"ls\"}");
        assert_eq!(r.usage.unwrap().input_tokens, 12);
        assert!(events.contains(&Event::Restarted));
    });
}

#[test]
fn chat_content_filter_and_error_finish_reasons_are_named() {
    for (reason, stop) in [
        ("content_filter", StopReason::ContentFilter),
        ("error", StopReason::Error),
        (
            "something_new",
            StopReason::Unknown("something_new".to_owned()),
        ),
    ] {
        let body = format!(
            "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
            json!({"model": "m", "choices": [{"index": 0, "delta": {"content": "par"}, "finish_reason": null}]}),
            json!({"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}],
                   "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
        );
        let (r, _) = stream("openai-chat", body.as_bytes(), Split::Whole);
        assert_eq!(r.unwrap().stop, stop, "{reason}");
    }
}

// ---- episodes on hand-made failures: every call accounted ----

#[test]
fn a_failed_call_is_in_the_records_with_its_latency_known_tokens_and_category() {
    let body = sse(&[
        message_start("msg_1", 377),
        (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let (url, _rx) = serve(vec![body], Split::Whole);
    let r = episode(
        &episode_model("anthropic", &url),
        tmp.path(),
        EpisodeLimits::default(),
    );
    assert_eq!(r.outcome, Outcome::ProviderError);
    assert_eq!(
        r.provider_error.as_ref().unwrap().category,
        ErrorCategory::Overloaded
    );
    assert_eq!(r.totals.model_calls, 1);
    assert_eq!(r.totals.input_tokens, 377);
    assert_eq!(r.totals.unknown_token_calls, 1);
    assert_eq!(r.totals.cost.usd(), None);
    let evs = transcript(&r);
    assert!(evs.iter().any(|e| matches!(e, EventBody::Usage(u)
        if u.input_tokens == Some(377) && u.output_tokens.is_none())));
    assert!(
        evs.iter()
            .any(|e| matches!(e, EventBody::ModelLatency(l) if l.model_call == 1))
    );
    assert!(evs.iter().any(|e| matches!(e, EventBody::ModelCallEnded(m)
        if m.error.as_ref().is_some_and(|x| x.category == ErrorCategory::Overloaded))));
}

#[test]
fn an_unknown_stop_reason_is_never_a_pass() {
    let body = format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"model": "m", "choices": [{"index": 0, "delta": {"content": "hm"}, "finish_reason": "weird"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
    );
    let tmp = tempfile::tempdir().unwrap();
    let (url, _rx) = serve(vec![body.into_bytes()], Split::Whole);
    let r = episode(
        &episode_model("openai-chat", &url),
        tmp.path(),
        EpisodeLimits::default(),
    );
    assert_eq!(r.outcome, Outcome::ProviderError);
    let p = r.provider_error.unwrap();
    assert_eq!(p.category, ErrorCategory::Protocol);
    assert!(p.message.contains("`weird`"), "{}", p.message);
}

#[test]
fn a_call_without_usage_cannot_be_proven_under_a_token_limit() {
    // A compatible server that reports no usage: the tokens are unknown, never 0, and a
    // token limit cannot be proven, so the episode stops before the next call.
    let tool_turn = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1",
            "function": {"name": "get_weather", "arguments": "{}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    );
    let tmp = tempfile::tempdir().unwrap();
    let (url, _rx) = serve(vec![tool_turn.into_bytes()], Split::Whole);
    let limits = EpisodeLimits {
        tokens: Some(100_000),
        ..EpisodeLimits::default()
    };
    let r = episode(&episode_model("openai-chat", &url), tmp.path(), limits);
    assert_eq!(r.outcome, Outcome::Limit);
    let hit = r.limit.unwrap();
    assert_eq!(hit.limit, LimitKind::Tokens);
    assert!(hit.detail.contains("no token counts"), "{}", hit.detail);
    assert_eq!(r.totals.unknown_token_calls, 1);
}
