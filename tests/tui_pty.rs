//! `bee repl --tui` in a pseudo-terminal, read byte for byte: a panic inside the TUI leaves
//! the real terminal usable — raw mode off, the alternate screen left, the cursor shown —
//! as `stty -a`, run in the same terminal after bee exits, shows. The panic is the debug
//! build's test hook (`BEE_TEST_TUI_PANIC`, honoured only under `debug_assertions`), so
//! these tests exist only in debug builds.

#![cfg(debug_assertions)]
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::process::Command;
use std::time::Duration;

use expectrl::process::unix::{PtyStream, UnixProcess};
use expectrl::{Expect, Session};

type Pty = Session<UnixProcess, PtyStream>;

/// Reads the terminal up to and with `what`, adding it to `bytes`.
fn upto(s: &mut Pty, what: &str, bytes: &mut Vec<u8>) {
    let c = s.expect(what).unwrap();
    bytes.extend_from_slice(c.as_bytes());
}

/// The first position of `needle` in `hay` at or after `from`.
fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

#[test]
fn a_panic_inside_the_tui_leaves_the_terminal_usable() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("ws")).unwrap();
    std::fs::create_dir_all(p.join("home")).unwrap();
    std::fs::write(
        p.join("provider.toml"),
        "kind = \"replay\"\nfile = \"turns.jsonl\"\nmodel = \"replay-model\"\n",
    )
    .unwrap();
    std::fs::write(p.join("turns.jsonl"), r#"{"text": "hi"}"#).unwrap();
    // The terminal's modes as a shell leaves them, then bee, then — in the same terminal —
    // its exit status and the terminal's modes again.
    let script = format!(
        "stty sane; stty -a; echo '[before bee]'; {bee} repl --tui --host --provider \
         provider.toml --workspace ws --records-dir {records}; echo \"[bee exited $?]\"; \
         stty -a; echo '[stty done]'",
        bee = env!("CARGO_BIN_EXE_bee"),
        records = p.join("records").display(),
    );
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", &script])
        .current_dir(p)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", p.join("home"))
        .env("XDG_STATE_HOME", p.join("state"))
        .env("XDG_CONFIG_HOME", p.join("config"))
        .env("TERM", "xterm-256color")
        .env("BEE_TEST_TUI_PANIC", "1");
    let mut s: Pty = Session::spawn(cmd).unwrap();
    s.get_process_mut().set_window_size(100, 30).unwrap();
    s.set_expect_timeout(Some(Duration::from_secs(30)));
    // Everything bee writes, kept whole; the test answers the terminal queries a terminal
    // would: the primary device attributes (no key disambiguation), the cursor position.
    let mut bytes = Vec::new();
    upto(&mut s, "[before bee]", &mut bytes);
    let before = String::from_utf8_lossy(&bytes).into_owned();
    bytes.clear();
    upto(&mut s, "\x1b[c", &mut bytes);
    s.send("\x1b[?62;22c").unwrap();
    upto(&mut s, "\x1b[6n", &mut bytes);
    s.send("\x1b[1;1R").unwrap();
    upto(&mut s, "[stty done]", &mut bytes);
    let text = String::from_utf8_lossy(&bytes);

    // The TUI was up (the alternate screen entered, a frame drawn), then it panicked, and the
    // hook put the terminal back before the message was printed.
    let entered = find(&bytes, b"\x1b[?1049h", 0).unwrap_or_else(|| unreachable!("{text:?}"));
    let panicked = find(&bytes, b"panicked", entered).unwrap_or_else(|| unreachable!("{text:?}"));
    assert!(text.contains("BEE_TEST_TUI_PANIC is set"), "{text:?}");
    assert!(
        find(&bytes, b"message", entered).is_some_and(|i| i < panicked),
        "{text:?}"
    );
    for (what, seq) in [
        ("alternate screen left", "\x1b[?1049l"),
        ("cursor shown", "\x1b[?25h"),
        ("mouse reporting off", "\x1b[?1000l"),
        ("bracketed paste off", "\x1b[?2004l"),
    ] {
        assert!(
            find(&bytes, seq.as_bytes(), entered).is_some_and(|i| i < panicked),
            "{what} ({seq:?}) before the panic message: {text:?}"
        );
    }
    assert!(text.contains("[bee exited 101]"), "{text:?}");
    // The shell's `stty -a` in the same terminal: canonical mode and echo are back on, and
    // every mode is as it was before bee started.
    let (_, after) = text.split_once("[bee exited 101]").unwrap();
    let after = after.trim_end_matches("[stty done]");
    let before = before.trim_end_matches("[before bee]");
    let flags = |modes: &str| -> Vec<String> {
        modes
            .split(|c: char| c.is_whitespace() || c == ';')
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (was, now) = (flags(before), flags(after));
    for flag in ["icanon", "echo", "isig", "icrnl", "opost"] {
        assert!(now.iter().any(|f| f == flag), "{flag} in {after:?}");
    }
    assert_eq!(now, was, "the modes before bee: {before:?}");
}
