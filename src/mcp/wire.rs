//! Standard input and output, line by line, between the client and the SDK's transport: a
//! line that is not a JSON-RPC message is answered here (the SDK would drop it in silence),
//! and every other line is passed on unchanged.

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How much the pipes to and from the SDK hold before a writer waits.
const PIPE: usize = 64 * 1024;

/// JSON-RPC's code for a line that is not JSON.
pub const PARSE_ERROR: i64 = -32700;

/// JSON-RPC's code for JSON that is not a request, notification or response.
pub const INVALID_REQUEST: i64 = -32600;

/// JSON-RPC's code for a request whose parameters do not fit its method.
pub const INVALID_PARAMS: i64 = -32602;

/// The longest line bee reads, bytes: the SDK's own limit for a line
/// (`rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH`, 16 MiB), beyond which it would drop
/// the line in silence. A longer one is answered here with [`INVALID_REQUEST`] and dropped as
/// it streams in, never held whole. (A tool's arguments may be 1 MiB at most; a line up to
/// this cap with more is answered [`INVALID_PARAMS`] by the server, with its id.)
pub const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH - 1;

/// One line of standard input, as [`read_line`] read it.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The input ended.
    End,
    /// A line (in the buffer given), with its newline when it had one.
    Read,
    /// A line longer than [`MAX_LINE`], of this many bytes, dropped.
    TooLong(usize),
}

/// Reads one line into `line` (cleared first), holding at most [`MAX_LINE`] bytes of it.
///
/// # Errors
/// The input's error.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    line.clear();
    let mut dropped = 0usize;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (dropped, line.is_empty()) {
                (0, true) => Line::End,
                (0, false) => Line::Read,
                (n, _) => Line::TooLong(n),
            });
        }
        let (take, ends) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if dropped > 0 || line.len() + take > MAX_LINE {
            dropped += line.len() + take;
            line.clear();
        } else {
            line.extend_from_slice(&buf[..take]);
        }
        input.consume(take);
        if ends {
            return Ok(if dropped > 0 {
                Line::TooLong(dropped)
            } else {
                Line::Read
            });
        }
    }
}

/// The answer to a line of `bytes` bytes that was too long to read.
#[must_use]
pub fn too_long(bytes: usize) -> String {
    json!({"jsonrpc": "2.0", "id": Value::Null, "error": {"code": INVALID_REQUEST,
        "message": format!("the message is {bytes} bytes; bee reads at most {MAX_LINE} a line")}})
    .to_string()
}

/// The answer to `line`, when the SDK must not see it: `Some(None)` to skip it (a blank
/// line), `Some(Some(answer))` to answer it here, `None` to pass it on.
#[must_use]
pub fn screen(line: &[u8]) -> Option<Option<String>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Some(None);
    }
    let error = |id: &Value, code: i64, message: String| {
        Some(Some(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                .to_string(),
        ))
    };
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return error(&Value::Null, PARSE_ERROR, format!("not JSON: {e}")),
    };
    let Some(object) = value.as_object() else {
        let what = if value.is_array() {
            "a batch: MCP takes one message a line, and batches are not part of it"
        } else {
            "not a JSON-RPC message: it must be an object"
        };
        return error(&Value::Null, INVALID_REQUEST, what.to_owned());
    };
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    if object.get("jsonrpc") != Some(&Value::from("2.0")) {
        return error(&id, INVALID_REQUEST, "`jsonrpc` must be \"2.0\"".to_owned());
    }
    let is_message = object.get("method").is_some_and(Value::is_string)
        || object.contains_key("result")
        || object.contains_key("error");
    if !is_message {
        return error(
            &id,
            INVALID_REQUEST,
            "neither a request (no string `method`) nor a response".to_owned(),
        );
    }
    if object.get("method") == Some(&Value::from("tools/call")) {
        let params = object.get("params");
        let fits = params.and_then(Value::as_object).is_some_and(|p| {
            p.get("name").is_some_and(Value::is_string)
                && p.get("arguments")
                    .is_none_or(|a| a.is_object() || a.is_null())
        });
        if !fits {
            return error(
                &id,
                INVALID_PARAMS,
                "tools/call takes `name` (a string) and `arguments` (an object)".to_owned(),
            );
        }
    }
    None
}

/// The two ends the SDK's transport is given (what it reads, where it writes), and the task
/// that copies its answers to standard output: await it so that the last answer is out
/// before bee exits.
pub struct Wire {
    /// What the SDK reads: the client's messages.
    pub from_client: DuplexStream,
    /// Where the SDK writes its messages to the client.
    pub to_client: DuplexStream,
    /// Ends once the SDK has closed `to_client` and everything is written.
    pub written: JoinHandle<()>,
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wire").finish_non_exhaustive()
    }
}

/// Starts copying standard input to the SDK (screened) and the SDK's answers, with the
/// answers given here, to standard output. Standard input's end closes the SDK's input.
#[must_use]
pub fn stdio() -> Wire {
    let (mut to_sdk, from_client) = tokio::io::duplex(PIPE);
    let (to_client, from_sdk) = tokio::io::duplex(PIPE);
    let (answers, mut answered) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut input = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        loop {
            match read_line(&mut input, &mut line).await {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::TooLong(bytes)) => {
                    let _ = answers.send(too_long(bytes));
                    continue;
                }
                Ok(Line::Read) => {}
            }
            match screen(&line) {
                Some(None) => {}
                Some(Some(answer)) => {
                    let _ = answers.send(answer);
                }
                None => {
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                    if to_sdk.write_all(&line).await.is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping `to_sdk` here ends the SDK's input: the session closes.
    });
    let written = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        let mut from_sdk = BufReader::new(from_sdk);
        let mut line = Vec::new();
        loop {
            line.clear();
            let chunk = tokio::select! {
                n = from_sdk.read_until(b'\n', &mut line) => match n {
                    Ok(0) | Err(_) => break,
                    Ok(_) => std::mem::take(&mut line),
                },
                Some(answer) = answered.recv() => format!("{answer}\n").into_bytes(),
            };
            if out.write_all(&chunk).await.is_err() || out.flush().await.is_err() {
                return;
            }
        }
        // The SDK is done: the answers given here since go out too.
        while let Ok(answer) = answered.try_recv() {
            let _ = out.write_all(format!("{answer}\n").as_bytes()).await;
        }
        let _ = out.flush().await;
    });
    Wire {
        from_client,
        to_client,
        written,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> Option<i64> {
        let answer = screen(line.as_bytes())??;
        serde_json::from_str::<Value>(&answer).ok()?["error"]["code"].as_i64()
    }

    #[test]
    fn messages_pass_and_blank_lines_are_skipped() {
        assert_eq!(
            screen(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            None
        );
        assert_eq!(screen(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#), None);
        assert_eq!(screen(b"  \n"), Some(None));
    }

    #[test]
    fn what_is_not_a_message_is_answered_with_json_rpc_errors() {
        assert_eq!(code("this is not json {"), Some(PARSE_ERROR));
        assert_eq!(code("[1, 2]"), Some(INVALID_REQUEST));
        assert_eq!(code("42"), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"id":1,"method":"x"}"#), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), Some(INVALID_REQUEST));
        let answer = screen(br#"{"jsonrpc":"1.0","id":7,"method":"x"}"#)
            .flatten()
            .unwrap_or_default();
        assert!(answer.contains(r#""id":7"#), "{answer}");
    }

    #[test]
    fn a_tools_call_that_does_not_fit_is_invalid_params() {
        let call = |params: &str| {
            code(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#
            ))
        };
        assert_eq!(
            call(r#"{"name":"shell","arguments":["a"]}"#),
            Some(INVALID_PARAMS)
        );
        assert_eq!(call(r#"{"name":3}"#), Some(INVALID_PARAMS));
        assert_eq!(call("[]"), Some(INVALID_PARAMS));
        assert_eq!(
            call(r#"{"name":"shell","arguments":{"command":"true"}}"#),
            None
        );
        assert_eq!(call(r#"{"name":"list_dir"}"#), None);
    }

    #[test]
    fn a_line_longer_than_the_cap_is_dropped_without_being_held() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| unreachable!("{e}"));
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{\"a\":1}\nlast");
        let mut reader: &[u8] = &input;
        let mut line = Vec::new();
        runtime.block_on(async {
            let first = read_line(&mut reader, &mut line).await.ok();
            assert_eq!(first, Some(Line::TooLong(MAX_LINE + 11)));
            assert!(line.capacity() <= MAX_LINE + 8192, "{}", line.capacity());
            assert_eq!(
                read_line(&mut reader, &mut line).await.ok(),
                Some(Line::Read)
            );
            assert_eq!(line, b"{\"a\":1}\n");
            assert_eq!(
                read_line(&mut reader, &mut line).await.ok(),
                Some(Line::Read)
            );
            assert_eq!(line, b"last");
            assert_eq!(
                read_line(&mut reader, &mut line).await.ok(),
                Some(Line::End)
            );
        });
        assert!(too_long(5).contains("-32600"));
    }
}
