//! Standard input and output, line by line, between the client and the SDK's transport: a
//! line that is not a JSON-RPC message is answered here (the SDK would drop it in silence),
//! and every other line is passed on unchanged.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How much the pipes to and from the SDK hold before a writer waits.
const PIPE: usize = 64 * 1024;

/// JSON-RPC's code for a line that is not JSON.
pub const PARSE_ERROR: i64 = -32700;

/// JSON-RPC's code for JSON that is not a request, notification or response.
pub const INVALID_REQUEST: i64 = -32600;

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
            line.clear();
            match input.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
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
}
