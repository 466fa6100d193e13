//! The terminal while the TUI runs: raw mode, the alternate screen, mouse reporting,
//! bracketed paste and (where the terminal has it) key disambiguation, so Shift+Enter is
//! told from Enter. [`Screen`] undoes all of it when dropped — on a normal exit, an error,
//! a panic (unwinding drops it; a panic hook restores first in any case) and SIGTERM (the
//! loop sees the flag and returns).

use std::io::{self, Write};
use std::sync::Once;

use ratatui::crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    KeyboardEnhancementFlags, PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
    supports_keyboard_enhancement,
};
use ratatui::crossterm::{cursor, execute};

/// Writes the sequences that put the terminal back as it was (without raw mode).
///
/// # Errors
/// When `out` cannot be written.
pub(super) fn leave<W: Write>(out: &mut W, enhanced: bool) -> io::Result<()> {
    if enhanced {
        execute!(out, PopKeyboardEnhancementFlags)?;
    }
    execute!(
        out,
        DisableBracketedPaste,
        DisableMouseCapture,
        LeaveAlternateScreen,
        cursor::Show
    )
}

/// The terminal in the TUI's modes; restored when dropped.
#[derive(Debug)]
pub(super) struct Screen {
    out: Box<dyn WriteSend>,
    raw: bool,
    enhanced: bool,
    restored: bool,
}

/// A writer that may move between threads.
pub(super) trait WriteSend: Write + Send + std::fmt::Debug {}
impl<T: Write + Send + std::fmt::Debug> WriteSend for T {}

impl Screen {
    /// Puts the real terminal in the TUI's modes, and installs the panic hook.
    ///
    /// # Errors
    /// When the terminal refuses a mode (what was set is undone).
    pub(super) fn enter() -> io::Result<Self> {
        install_panic_hook();
        enable_raw_mode()?;
        let enhanced = supports_keyboard_enhancement().unwrap_or(false);
        let mut screen = Self {
            out: Box::new(io::stdout()),
            raw: true,
            enhanced,
            restored: false,
        };
        execute!(
            screen.out,
            EnterAlternateScreen,
            EnableMouseCapture,
            EnableBracketedPaste
        )?;
        if enhanced {
            execute!(
                screen.out,
                PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
            )?;
        }
        Ok(screen)
    }

    /// A screen over `out` with no raw mode (tests: what it writes is what it would send).
    #[cfg(test)]
    pub(super) fn over(out: Box<dyn WriteSend>) -> Self {
        Self {
            out,
            raw: false,
            enhanced: true,
            restored: false,
        }
    }

    /// Restores the terminal (once).
    pub(super) fn restore(&mut self) {
        if std::mem::replace(&mut self.restored, true) {
            return;
        }
        let _ = leave(&mut self.out, self.enhanced);
        if self.raw {
            let _ = disable_raw_mode();
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.restore();
    }
}

/// On a panic, the terminal is restored before the message is printed, so the message is
/// readable and the shell usable even if the process aborts.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = leave(&mut io::stdout(), true);
            let _ = disable_raw_mode();
            previous(info);
        }));
    });
}

/// Puts `text` on the terminal's clipboard with OSC 52 (works over SSH where the terminal
/// allows it).
pub(super) fn osc52(out: &mut dyn Write, text: &str) -> io::Result<()> {
    write!(out, "\x1b]52;c;{}\x07", base64(text.as_bytes()))?;
    out.flush()
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                s.push(char::from(A[((n >> shift) & 63) as usize]));
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Debug, Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_panic_inside_the_tui_restores_the_terminal() {
        let out = Shared::default();
        let seen = out.clone();
        let result = std::panic::catch_unwind(move || {
            let _screen = Screen::over(Box::new(out));
            panic!("a bug in a frame");
        });
        assert!(result.is_err());
        let written = String::from_utf8(seen.0.lock().unwrap().clone()).unwrap();
        assert!(
            written.contains("\x1b[?1049l"),
            "alternate screen left: {written:?}"
        );
        assert!(
            written.contains("\x1b[?1000l"),
            "mouse reporting off: {written:?}"
        );
        assert!(
            written.contains("\x1b[?2004l"),
            "bracketed paste off: {written:?}"
        );
        assert!(written.contains("\x1b[?25h"), "cursor shown: {written:?}");
        assert!(
            written.contains("\x1b[<1u"),
            "key flags popped: {written:?}"
        );
    }

    #[test]
    fn restoring_happens_once() {
        let out = Shared::default();
        let seen = out.clone();
        let mut s = Screen::over(Box::new(out));
        s.restore();
        let n = seen.0.lock().unwrap().len();
        drop(s);
        assert_eq!(seen.0.lock().unwrap().len(), n);
    }

    #[test]
    fn osc52_carries_base64() {
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
        assert_eq!(base64(b"M"), "TQ==");
        assert_eq!(base64("漢".as_bytes()), "5ryi");
        let mut out = Vec::new();
        osc52(&mut out, "hi").unwrap();
        assert_eq!(out, b"\x1b]52;c;aGk=\x07");
    }
}
