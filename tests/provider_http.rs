//! The HTTP providers against a local server on 127.0.0.1 that speaks each protocol with
//! canned SSE bodies: streaming, tool-call assembly, usage, retries, cuts and errors.
//!
//! The server handles a fixed list of connections and stops by itself after a deadline.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bee::provider::{
    ErrorCategory, Event, Item, Provider, ProviderError, ProviderSpec, Request, StopReason,
    ToolCall, ToolDef, Usage,
};
use serde_json::{Value, json};

const KEY: &str = "sk-test-0123456789abcdef-SECRET";

/// One canned answer.
struct Canned {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn sse(body: &str) -> Canned {
    Canned {
        status: 200,
        headers: vec![("content-type", "text/event-stream".into())],
        body: body.to_owned(),
    }
}

fn status(status: u16, body: &str) -> Canned {
    Canned {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_owned(),
    }
}

/// A request the server received.
#[derive(Debug)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
    body: Value,
    at: Instant,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Serves `answers` to successive connections on a fresh loopback port; returns the base URL
/// (`http://127.0.0.1:PORT/v1`) and a channel of the requests seen.
fn serve(answers: Vec<Canned>) -> (String, mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        for answer in answers {
            let stream = loop {
                match listener.accept() {
                    Ok((s, _)) => break s,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(_) => return,
                }
            };
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut headers = Vec::new();
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                if let Some((n, v)) = h.split_once(':') {
                    headers.push((n.trim().to_owned(), v.trim().to_owned()));
                }
            }
            let len = headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                .map_or(0, |(_, v)| v.parse::<usize>().unwrap());
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let seen = Seen {
                line: line.trim_end().to_owned(),
                headers,
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                at: Instant::now(),
            };
            let _ = tx.send(seen);
            let mut stream = reader.into_inner();
            let mut head = format!("HTTP/1.1 {} X\r\nconnection: close\r\n", answer.status);
            for (n, v) in &answer.headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(answer.body.as_bytes());
            let _ = stream.flush();
        }
    });
    (format!("http://127.0.0.1:{port}/v1"), rx)
}

fn provider(kind: &str, base_url: &str, extra: &str) -> Box<dyn Provider> {
    let text = format!(
        "kind = \"{kind}\"\nbase_url = \"{base_url}\"\nmodel = \"test-model\"\n\
         api_key_env = \"BEE_TEST_KEY\"\n\
         [retry]\nmax_attempts = 3\nbase_backoff_ms = 10\nmax_backoff_ms = 2000\n{extra}"
    );
    let spec = ProviderSpec::parse("provider.toml", &text, Path::new("/")).unwrap();
    spec.connect_with(&|name| (name == "BEE_TEST_KEY").then(|| KEY.to_owned()))
        .unwrap()
}

fn request() -> Request {
    Request {
        items: vec![
            Item::System {
                text: "be brief".into(),
            },
            Item::User {
                text: "list files".into(),
            },
            Item::ToolCall(ToolCall {
                id: "call_prev".into(),
                name: "shell".into(),
                arguments: r#"{"cmd":"pwd"}"#.into(),
            }),
            Item::ToolResult {
                call_id: "call_prev".into(),
                output: "/work".into(),
                is_error: false,
            },
        ],
        tools: vec![ToolDef {
            name: "shell".into(),
            description: "run a command".into(),
            parameters: json!({"type": "object", "properties": {"cmd": {"type": "string"}}}),
        }],
        max_output_tokens: Some(256),
    }
}

fn run(p: &dyn Provider) -> (Result<bee::provider::Response, ProviderError>, Vec<Event>) {
    let mut events = Vec::new();
    let r = p.stream(&request(), &mut |e| events.push(e));
    (r, events)
}

fn recv(rx: &mpsc::Receiver<Seen>) -> Seen {
    rx.recv_timeout(Duration::from_secs(10)).unwrap()
}

const RESPONSES_STREAM: &str = r#"event: response.created
data: {"type":"response.created","response":{"id":"resp_1","model":"test-model-2025"}}

event: response.output_item.added
data: {"type":"response.output_item.added","output_index":0,"item":{"type":"message","role":"assistant"}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","output_index":0,"delta":"Hello"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","output_index":0,"delta":", world"}

event: response.output_item.added
data: {"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"call_A","name":"shell","arguments":""}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"cmd\":"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","output_index":1,"delta":"\"ls\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","call_id":"call_A","name":"shell","arguments":"{\"cmd\":\"ls\"}"}}

event: response.completed
data: {"type":"response.completed","response":{"id":"resp_1","model":"test-model-2025","status":"completed","usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":100},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":12},"total_tokens":150}}}

"#;

#[test]
fn responses_streams_text_and_tool_calls_with_usage() {
    let (url, rx) = serve(vec![sse(RESPONSES_STREAM)]);
    let p = provider("openai-responses", &url, "");
    let (r, events) = run(p.as_ref());
    let r = r.unwrap();
    let seen = recv(&rx);
    assert_eq!(seen.line, "POST /v1/responses HTTP/1.1");
    assert_eq!(
        seen.header("authorization"),
        Some(&*format!("Bearer {KEY}"))
    );
    assert_eq!(seen.body["stream"], true);
    assert_eq!(seen.body["max_output_tokens"], 256);
    assert_eq!(seen.body["input"][2]["type"], "function_call");
    assert_eq!(seen.body["input"][3]["type"], "function_call_output");
    assert_eq!(seen.body["tools"][0]["name"], "shell");

    assert_eq!(r.text(), "Hello, world");
    let calls: Vec<_> = r.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_A");
    assert_eq!(calls[0].parsed_arguments().unwrap(), json!({"cmd": "ls"}));
    assert_eq!(r.stop, StopReason::ToolUse);
    assert_eq!(r.model, "test-model-2025");
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 120,
            cached_input_tokens: 100,
            output_tokens: 30,
            reasoning_tokens: 12
        })
    );
    assert!(r.latency.first_token.unwrap() <= r.latency.total);
    assert_eq!(
        events.first(),
        Some(&Event::TextDelta {
            text: "Hello".into()
        })
    );
    assert!(events.contains(&Event::ToolCallArgumentsDelta {
        id: "call_A".into(),
        delta: "\"ls\"}".into()
    }));
    assert!(matches!(
        events.last(),
        Some(Event::Completed {
            stop: StopReason::ToolUse
        })
    ));
}

const CHAT_STREAM: &str = r#"data: {"id":"c1","object":"chat.completion.chunk","model":"test-model","choices":[{"index":0,"delta":{"role":"assistant","content":"Sure"}}]}

data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"shell","arguments":""}}]}}]}

data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"read","arguments":"{\"pa"}}]}}]}

data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\":\"ls\"}"}}]}}]}

data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"th\":\"a\"}"}}]}}]}

data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"c1","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":10},"completion_tokens_details":{"reasoning_tokens":0}}}

data: [DONE]

"#;

#[test]
fn chat_assembles_tool_calls_by_index_and_reads_the_usage_chunk() {
    let (url, rx) = serve(vec![sse(CHAT_STREAM)]);
    let p = provider("openai-chat", &url, "");
    let (r, _) = run(p.as_ref());
    let r = r.unwrap();
    let seen = recv(&rx);
    assert_eq!(seen.line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(seen.body["stream_options"]["include_usage"], true);
    assert_eq!(seen.body["messages"][2]["tool_calls"][0]["id"], "call_prev");
    assert_eq!(seen.body["messages"][3]["role"], "tool");
    assert_eq!(r.text(), "Sure");
    let calls: Vec<_> = r.tool_calls().cloned().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_1", "shell")
    );
    assert_eq!(calls[0].arguments, r#"{"cmd":"ls"}"#);
    assert_eq!(calls[1].arguments, r#"{"path":"a"}"#);
    assert_eq!(r.stop, StopReason::ToolUse);
    assert_eq!(r.usage.unwrap().input_tokens, 50);
    assert_eq!(r.usage.unwrap().cached_input_tokens, 10);
    assert_eq!(r.usage.unwrap().output_tokens, 20);
}

/// vLLM / Ollama shapes: `choices: null`, no tool-call ids, the whole call in one fragment,
/// usage inside the last choice chunk, `usage: null` elsewhere.
const CHAT_QUIRKS: &str = r#"data: {"model":"llama3","choices":null,"usage":null}

data: {"model":"llama3","choices":[{"index":0,"delta":{"content":"ok"}}],"usage":null}

data: {"model":"llama3","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}}]}}],"usage":null}

data: {"model":"llama3","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":7,"completion_tokens":3}}]}

data: [DONE]

"#;

#[test]
fn chat_accepts_compatible_server_quirks() {
    let (url, _rx) = serve(vec![sse(CHAT_QUIRKS)]);
    let p = provider("openai-chat", &url, "");
    let (r, events) = run(p.as_ref());
    let r = r.unwrap();
    assert_eq!(r.text(), "ok");
    let calls: Vec<_> = r.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_0");
    assert_eq!(calls[0].name, "shell");
    assert_eq!(
        r.stop,
        StopReason::ToolUse,
        "a call with finish_reason stop is still tool use"
    );
    assert_eq!(r.usage.unwrap().input_tokens, 7);
    assert_eq!(r.usage.unwrap().output_tokens, 3);
    assert_eq!(r.model, "llama3");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ToolCallFinished { .. }))
    );
}

const ANTHROPIC_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"usage":{"input_tokens":40,"cache_read_input_tokens":200,"cache_creation_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type":"ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"shell","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"cmd\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"ls\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":25}}

event: message_stop
data: {"type":"message_stop"}

"#;

#[test]
fn anthropic_streams_text_and_tool_use_with_cache_reads() {
    let (url, rx) = serve(vec![sse(ANTHROPIC_STREAM)]);
    let p = provider("anthropic", &url, "");
    let (r, events) = run(p.as_ref());
    let r = r.unwrap();
    let seen = recv(&rx);
    assert_eq!(seen.line, "POST /v1/messages HTTP/1.1");
    assert_eq!(seen.header("x-api-key"), Some(KEY));
    assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(seen.header("authorization"), None);
    assert_eq!(seen.body["system"], "be brief");
    assert_eq!(seen.body["max_tokens"], 256);
    assert_eq!(seen.body["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(
        seen.body["messages"][1]["content"][0]["input"]["cmd"],
        "pwd"
    );
    assert_eq!(
        seen.body["messages"][2]["content"][0]["type"],
        "tool_result"
    );
    assert_eq!(seen.body["tools"][0]["input_schema"]["type"], "object");

    assert_eq!(r.text(), "Let me check.");
    let calls: Vec<_> = r.tool_calls().collect();
    assert_eq!(calls[0].id, "toolu_1");
    assert_eq!(calls[0].parsed_arguments().unwrap(), json!({"cmd": "ls"}));
    assert_eq!(r.stop, StopReason::ToolUse);
    assert_eq!(r.model, "claude-test");
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 240,
            cached_input_tokens: 200,
            output_tokens: 25,
            reasoning_tokens: 0
        })
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::Usage { .. }))
            .count(),
        2
    );
}

#[test]
fn a_429_with_retry_after_waits_then_succeeds() {
    let mut limited = status(429, r#"{"error":{"message":"slow down"}}"#);
    limited.headers.push(("retry-after", "1".into()));
    let (url, rx) = serve(vec![limited, sse(RESPONSES_STREAM)]);
    let p = provider("openai-responses", &url, "");
    let started = Instant::now();
    let (r, _) = run(p.as_ref());
    let elapsed = started.elapsed();
    assert_eq!(r.unwrap().text(), "Hello, world");
    let first = recv(&rx);
    let second = recv(&rx);
    let gap = second.at - first.at;
    assert!(gap >= Duration::from_millis(950), "waited only {gap:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
}

#[test]
fn a_500_is_retried() {
    let (url, rx) = serve(vec![status(500, "oops"), sse(ANTHROPIC_STREAM)]);
    let p = provider("anthropic", &url, "");
    let (r, _) = run(p.as_ref());
    assert_eq!(r.unwrap().text(), "Let me check.");
    recv(&rx);
    recv(&rx);
}

#[test]
fn retries_stop_at_max_attempts() {
    let (url, _rx) = serve(vec![
        status(503, "busy"),
        status(502, "busy"),
        status(500, r#"{"error":{"message":"still busy"}}"#),
    ]);
    let p = provider("openai-chat", &url, "");
    let (r, _) = run(p.as_ref());
    let e = r.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Server);
    let text = e.to_string();
    assert!(
        text.contains("3 attempt") && text.contains("still busy"),
        "{text}"
    );
}

#[test]
fn a_retry_after_beyond_max_backoff_is_not_waited_for() {
    let mut limited = status(429, "{}");
    limited.headers.push(("retry-after", "3600".into()));
    let (url, _rx) = serve(vec![limited]);
    let p = provider("openai-responses", &url, "");
    let started = Instant::now();
    let (r, _) = run(p.as_ref());
    let e = r.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::RateLimit);
    assert!(e.to_string().contains("Retry-After 3600s"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_stream_cut_midway_keeps_what_arrived() {
    let cut = RESPONSES_STREAM
        .split("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":1")
        .next()
        .unwrap();
    let (url, _rx) = serve(vec![sse(cut)]);
    let p = provider("openai-responses", &url, "");
    let (r, events) = run(p.as_ref());
    match r.unwrap_err() {
        ProviderError::StreamCut {
            received,
            events: n,
            ..
        } => {
            assert_eq!(received.text(), "Hello, world");
            assert_eq!(n, events.len());
            assert!(received.latency.first_token.is_some());
        }
        other => panic!("expected StreamCut, got {other:?}"),
    }
}

#[test]
fn a_chat_stream_without_done_is_cut() {
    let cut = CHAT_STREAM.replace("data: [DONE]\n\n", "");
    let (url, _rx) = serve(vec![sse(&cut)]);
    let p = provider("openai-chat", &url, "");
    let e = run(p.as_ref()).0.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Network);
    assert!(matches!(e, ProviderError::StreamCut { .. }), "{e:?}");
}

#[test]
fn malformed_event_json_names_the_event() {
    let body = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}\n\n";
    let (url, _rx) = serve(vec![sse(&format!(
        "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"model\":\"m\"}}}}\n\n{body}"
    ))]);
    let p = provider("anthropic", &url, "");
    let e = run(p.as_ref()).0.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Protocol);
    let text = e.to_string();
    assert!(
        text.contains("malformed content_block_delta event"),
        "{text}"
    );
}

#[test]
fn an_error_event_in_the_stream_fails_the_call() {
    let body = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let (url, _rx) = serve(vec![sse(body)]);
    let p = provider("anthropic", &url, "");
    let (r, events) = run(p.as_ref());
    let e = r.unwrap_err();
    // Anthropic's `overloaded_error` is sorted as such, for a scheduler to retry later.
    assert_eq!(e.category(), ErrorCategory::Overloaded);
    let text = e.to_string();
    assert!(text.contains("(overloaded_error)"), "{text}");
    assert!(text.ends_with(": Overloaded"), "{text}");
    assert!(matches!(
        events.last(),
        Some(Event::Error {
            category: ErrorCategory::Overloaded,
            ..
        })
    ));
}

#[test]
fn a_401_names_the_variable_and_never_the_key() {
    // The provider echoes the key it was sent, as some APIs do.
    let body = format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}."}}}}"#);
    for kind in ["openai-responses", "openai-chat", "anthropic"] {
        let (url, _rx) = serve(vec![status(401, &body)]);
        let p = provider(kind, &url, "");
        assert!(
            !format!("{p:?}").contains(KEY),
            "{kind}: Debug shows the key"
        );
        let e = run(p.as_ref()).0.unwrap_err();
        assert_eq!(e.category(), ErrorCategory::Auth);
        let shown = format!("{e} {e:?}");
        assert!(shown.contains("BEE_TEST_KEY"), "{shown}");
        assert!(shown.contains("Incorrect API key provided"), "{shown}");
        assert!(!shown.contains(KEY), "{kind}: the key leaked: {shown}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
    }
}

#[test]
fn a_403_is_an_auth_error_too() {
    let (url, _rx) = serve(vec![status(403, "{}")]);
    let p = provider("openai-chat", &url, "");
    assert_eq!(
        run(p.as_ref()).0.unwrap_err().category(),
        ErrorCategory::Auth
    );
}

#[test]
fn a_404_names_the_url_and_the_model() {
    let (url, _rx) = serve(vec![status(
        404,
        r#"{"error":{"message":"model not found"}}"#,
    )]);
    let p = provider("openai-chat", &url, "");
    let e = run(p.as_ref()).0.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::NotFound);
    let text = e.to_string();
    assert!(text.contains(&format!("{url}/chat/completions")), "{text}");
    assert!(text.contains("test-model"), "{text}");
}

#[test]
fn a_400_is_a_rejected_request() {
    let (url, _rx) = serve(vec![status(400, r#"{"error":{"message":"bad tools"}}"#)]);
    let p = provider("anthropic", &url, "");
    let e = run(p.as_ref()).0.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Protocol);
    assert!(e.to_string().contains("bad tools"));
}

#[test]
fn no_listener_is_a_network_error_after_the_retries() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let p = provider("openai-chat", &format!("http://127.0.0.1:{port}/v1"), "");
    let e = run(p.as_ref()).0.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Network);
    assert!(e.to_string().contains("3 attempt"), "{e}");
}

#[test]
fn a_missing_key_variable_is_an_auth_error_naming_it() {
    let text = "kind = \"anthropic\"\nmodel = \"m\"\napi_key_env = \"BEE_TEST_NO_SUCH_KEY\"\n";
    let spec = ProviderSpec::parse("p.toml", text, Path::new("/")).unwrap();
    let e = spec.connect_with(&|_| None).unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Auth);
    assert!(e.to_string().contains("BEE_TEST_NO_SUCH_KEY"));
}

#[test]
fn a_silent_server_hits_the_read_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        // Accept and read the request, then say nothing until the client gives up.
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf);
        std::thread::sleep(Duration::from_millis(1500));
    });
    let extra = "[timeouts]\nread_ms = 300\n";
    let text = format!(
        "kind = \"openai-chat\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\n\
         [retry]\nmax_attempts = 1\n{extra}"
    );
    let p = ProviderSpec::parse("p.toml", &text, Path::new("/"))
        .unwrap()
        .connect_with(&|_| None)
        .unwrap();
    let started = Instant::now();
    let e = run(p.as_ref()).0.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Network, "{e}");
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );
    handle.join().unwrap();
}

#[test]
fn a_chunked_body_cut_before_its_last_chunk_is_a_stream_cut() {
    let first = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":3}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"partial\"}}\n\n";
    let mut answer = sse(&format!("{:x}\r\n{first}\r\n", first.len()));
    answer.headers.push(("transfer-encoding", "chunked".into()));
    let (url, _rx) = serve(vec![answer]);
    let p = provider("anthropic", &url, "");
    match run(p.as_ref()).0.unwrap_err() {
        ProviderError::StreamCut {
            received, events, ..
        } => {
            assert_eq!(received.text(), "partial");
            assert_eq!(received.usage.unwrap().input_tokens, 3);
            assert_eq!(events, 2);
        }
        other => panic!("expected StreamCut, got {other:?}"),
    }
}

#[test]
fn a_json_answer_instead_of_a_stream_is_a_protocol_error() {
    let (url, _rx) = serve(vec![status(200, r#"{"id":"x","choices":[]}"#)]);
    let p = provider("openai-chat", &url, "");
    let e = run(p.as_ref()).0.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Protocol);
    assert!(e.to_string().contains("not an event stream"), "{e}");
}

#[test]
fn a_408_is_retried_like_a_server_error() {
    let (url, rx) = serve(vec![status(408, ""), sse(CHAT_STREAM)]);
    let p = provider("openai-chat", &url, "");
    assert_eq!(run(p.as_ref()).0.unwrap().text(), "Sure");
    recv(&rx);
    recv(&rx);
}
