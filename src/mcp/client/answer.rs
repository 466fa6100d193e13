//! What a server's call says back: its result as text for the model, its standard error's
//! last lines and its denials for a reason, and the audit file.

use std::sync::{Arc, Mutex};

use bee_userspace::audit::{AuditRecord, write_jsonl};
use rmcp::model::CallToolResult;

use crate::episode::AuditSink;
use crate::tools::denial;

/// Most bytes of a server's standard error kept (its last ones), for the reason a server
/// that failed gives.
const STDERR_TAIL: usize = 4096;

/// Keeps the last [`STDERR_TAIL`] bytes of `err` in `tail`, on a thread of its own until the
/// pipe closes.
pub(super) fn keep_tail(mut err: impl std::io::Read + Send + 'static, tail: Arc<Mutex<Vec<u8>>>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Ok(mut t) = tail.lock() {
                t.extend_from_slice(&buf[..n]);
                let over = t.len().saturating_sub(STDERR_TAIL);
                t.drain(..over);
            }
        }
    });
}

/// Appends `records` to the `--audit` file, when there is one.
pub(super) fn write_audit(audit: Option<&AuditSink>, records: &[AuditRecord]) {
    let Some(audit) = audit else { return };
    if let Ok(mut out) = audit.lock() {
        for record in records {
            // A failed write must not end the session; the transcript keeps call denials.
            if write_jsonl(&mut *out, record).is_err() {
                break;
            }
        }
        let _ = std::io::Write::flush(&mut *out);
    }
}

pub(super) fn stderr_note(tail: &Mutex<Vec<u8>>) -> String {
    let text = tail
        .lock()
        .map(|t| String::from_utf8_lossy(&t).trim().to_owned())
        .unwrap_or_default();
    if text.is_empty() {
        String::new()
    } else {
        format!("\nits last output on stderr:\n{text}")
    }
}

pub(super) fn denial_note(denials: &[AuditRecord]) -> String {
    if denials.is_empty() {
        return String::new();
    }
    format!("\n{}", denial::denial_lines(denials).join("\n"))
}

/// The text of a tool result for the model: its text content, what else it holds named.
pub(super) fn result_text(result: &CallToolResult, cap: usize) -> String {
    let mut parts = Vec::new();
    for block in &result.content {
        let v = serde_json::to_value(block).unwrap_or_default();
        match v["type"].as_str() {
            Some("text") => parts.push(v["text"].as_str().unwrap_or_default().to_owned()),
            Some("resource_link") | Some("resource") => parts.push(format!(
                "[resource {}]",
                v["uri"]
                    .as_str()
                    .or_else(|| v["resource"]["uri"].as_str())
                    .unwrap_or("?")
            )),
            Some(kind) => parts.push(format!(
                "[{kind} content, {}]",
                v["mimeType"].as_str().unwrap_or("no type")
            )),
            None => {}
        }
    }
    if parts.is_empty()
        && let Some(s) = &result.structured_content
    {
        parts.push(s.to_string());
    }
    let mut text = parts.join("\n");
    if text.len() > cap {
        let mut end = cap;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(&format!("\n[output truncated at {cap} bytes]"));
    }
    text
}
