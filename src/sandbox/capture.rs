//! Capped capture of a child's output stream.

use std::io::{ErrorKind, Read};
use std::thread::JoinHandle;

/// The first bytes of an output stream, and how many there were in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes, at most the cap.
    pub bytes: Vec<u8>,
    /// How many bytes the stream carried.
    pub total: u64,
    /// True when `total` exceeds what was kept.
    pub truncated: bool,
}

impl Captured {
    /// Nothing captured.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The kept bytes as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// Reads `reader` to its end, keeping the first `cap` bytes and counting the rest.
    pub fn read_from(mut reader: impl Read, cap: usize) -> Self {
        let mut bytes = Vec::new();
        let mut total: u64 = 0;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    total = total.saturating_add(n as u64);
                    let room = cap.saturating_sub(bytes.len()).min(n);
                    bytes.extend_from_slice(chunk.get(..room).unwrap_or_default());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let truncated = total > bytes.len() as u64;
        Self {
            bytes,
            total,
            truncated,
        }
    }
}

/// Reads `reader` on a thread of its own.
pub(crate) fn spawn_reader<R: Read + Send + 'static>(
    reader: R,
    cap: usize,
) -> JoinHandle<Captured> {
    std::thread::spawn(move || Captured::read_from(reader, cap))
}
