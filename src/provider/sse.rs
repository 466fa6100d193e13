//! A small Server-Sent Events reader (the `text/event-stream` format of the WHATWG HTML
//! standard, §9.2), enough for model APIs: `event:` and `data:` fields, comments, multi-line
//! data, CRLF or LF line ends.

use std::io::{self, BufRead, Read};

/// The longest line accepted, in bytes; a longer one is an error rather than unbounded memory.
pub const MAX_LINE: usize = 16 << 20;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; `None` for the default `message` type.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Reads events from a byte stream.
#[derive(Debug)]
pub struct SseReader<R> {
    reader: R,
    line: Vec<u8>,
}

impl<R: BufRead> SseReader<R> {
    /// Wraps a buffered reader.
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            line: Vec::new(),
        }
    }

    /// The next event; `Ok(None)` at the end of the stream. An event not yet terminated by a
    /// blank line when the stream ends is dropped, as the standard says.
    ///
    /// # Errors
    /// I/O errors, and [`io::ErrorKind::InvalidData`] for a line longer than [`MAX_LINE`].
    pub fn next_event(&mut self) -> io::Result<Option<SseEvent>> {
        let mut event: Option<String> = None;
        let mut data: Option<String> = None;
        loop {
            self.line.clear();
            let n = self
                .reader
                .by_ref()
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut self.line)?;
            if n == 0 {
                return Ok(None);
            }
            if self.line.len() > MAX_LINE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "an event-stream line is longer than 16 MiB",
                ));
            }
            let ended = self.line.last() == Some(&b'\n');
            let text = String::from_utf8_lossy(&self.line);
            let text = text.trim_end_matches('\n').trim_end_matches('\r');
            if text.is_empty() {
                if !ended {
                    return Ok(None);
                }
                if let Some(data) = data.take() {
                    return Ok(Some(SseEvent {
                        event: event.take(),
                        data,
                    }));
                }
                event = None;
                continue;
            }
            if !ended {
                // A last line without its newline: the stream ended mid-event.
                return Ok(None);
            }
            if text.starts_with(':') {
                continue;
            }
            let (field, value) = match text.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (text, ""),
            };
            match field {
                "event" => event = Some(value.to_owned()),
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<SseEvent> {
        let mut r = SseReader::new(text.as_bytes());
        let mut out = Vec::new();
        while let Some(e) = r.next_event().unwrap() {
            out.push(e);
        }
        out
    }

    #[test]
    fn events_comments_multiline_and_crlf() {
        let events = all(": hello\r\nevent: a\r\ndata: 1\r\ndata:2\r\n\r\ndata: x\n\n\n");
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: Some("a".into()),
                    data: "1\n2".into()
                },
                SseEvent {
                    event: None,
                    data: "x".into()
                },
            ]
        );
    }

    #[test]
    fn an_unterminated_event_is_dropped() {
        assert_eq!(all("data: 1\n\ndata: 2\n").len(), 1);
        assert_eq!(all("data: 1\n\ndata: 2").len(), 1);
    }
}
