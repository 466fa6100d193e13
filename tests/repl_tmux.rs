//! The inline `bee repl` in a real terminal (tmux), read back through its scrollback: what a
//! person can scroll up to after an answer. Needs tmux (Debian's package; `.ci/run` installs
//! it). Each test runs its own tmux server on a socket of its own.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A tmux server of its own, with the inline bee repl in its one pane.
struct Tmux {
    socket: String,
    _dir: tempfile::TempDir,
}

impl Tmux {
    /// bee repl --host on a recording of `turns`, in a `w`×`h` terminal.
    fn start(name: &str, turns: &[String], w: u16, h: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("ws")).unwrap();
        std::fs::create_dir_all(p.join("home")).unwrap();
        std::fs::write(
            p.join("provider.toml"),
            "kind = \"replay\"\nfile = \"turns.jsonl\"\nmodel = \"replay-model\"\n",
        )
        .unwrap();
        std::fs::write(p.join("turns.jsonl"), turns.join("\n")).unwrap();
        let socket = format!("bee-repl-{name}-{}", std::process::id());
        let cmd = format!(
            "cd {dir} && env -i PATH=/usr/bin:/bin HOME={dir}/home XDG_STATE_HOME={dir}/state \
             XDG_CONFIG_HOME={dir}/config TERM=xterm-256color {bee} repl --host \
             --provider provider.toml --workspace ws --records-dir {dir}/records; \
             echo \"[bee exited $?]\"",
            dir = p.display(),
            bee = env!("CARGO_BIN_EXE_bee"),
        );
        let t = Self { socket, _dir: dir };
        let (w, h) = (w.to_string(), h.to_string());
        let out = t.tmux(&["new-session", "-d", "-x", &w, "-y", &h, &cmd]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        t.tmux(&["set-option", "-g", "remain-on-exit", "on"]);
        t.tmux(&["set-option", "-g", "window-size", "manual"]);
        t.tmux(&["set-option", "-g", "history-limit", "10000"]);
        t
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!("tmux could not run ({e}); install it: apt-get install tmux")
            })
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        self.tmux(&args);
        std::thread::sleep(Duration::from_millis(150));
    }

    /// The whole scrollback and the screen, row by row, as the terminal holds them.
    fn scrollback(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-S", "-", "-E", "-", "-t", "0"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the scrollback satisfies `ok` (or fails with it).
    fn wait(&self, ok: impl Fn(&str) -> bool, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.scrollback();
            if ok(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("waited for {what}; the scrollback:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the answer to end: `last` shown, and the prompt back under it.
    fn wait_answer(&self, last: &str) -> String {
        self.wait(
            |s| {
                s.find(last)
                    .is_some_and(|i| s[i..].lines().any(|l| l.trim_end() == "›"))
            },
            &format!("`{last}` and the prompt"),
        )
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

/// A recorded answer streamed word by word.
fn paced(text: &str) -> String {
    serde_json::json!({
        "text": text,
        "pace_ms": 1,
        "usage": {"input_tokens": 10, "output_tokens": 10}
    })
    .to_string()
}

/// Asserts that each of `marks` is in `scrollback` exactly once.
fn once_each(scrollback: &str, marks: &[String]) {
    for m in marks {
        let n = scrollback.matches(m.as_str()).count();
        assert_eq!(
            n, 1,
            "`{m}` is in the scrollback {n} time(s):\n{scrollback}"
        );
    }
}

/// A 180-line answer on a 40-row terminal: every line is in the scrollback once, rendered
/// (no raw copy streamed above it).
#[test]
fn a_long_answer_is_in_the_scrollback_once() {
    let mut text = String::from("# Report\n\n");
    let mut marks = Vec::new();
    for i in 1..=60 {
        text.push_str(&format!(
            "Paragraph p{i:03} says **something** about the build.\n\n"
        ));
        marks.push(format!("p{i:03} "));
    }
    for i in 1..=30 {
        text.push_str(&format!("- item i{i:03} of the list\n"));
        marks.push(format!("i{i:03} "));
    }
    text.push_str("\n```rust\n");
    for i in 1..=60 {
        text.push_str(&format!("let c{i:03} = {i};\n"));
        marks.push(format!("c{i:03} "));
    }
    text.push_str("```\n\nThe end of the report.");
    assert!(text.lines().count() >= 180);
    let t = Tmux::start("long", &[paced(&text)], 120, 40);
    t.wait(|s| s.lines().any(|l| l.trim_end() == "›"), "the prompt");
    t.keys(&["report", "Enter"]);
    let s = t.wait_answer("The end of the report.");
    once_each(&s, &marks);
    // Only the rendered copy: no markdown source.
    for raw in ["**", "```", "- item"] {
        assert!(!s.contains(raw), "`{raw}` in the scrollback:\n{s}");
    }
    assert!(s.contains("• item i001 of the list"), "{s}");
    assert!(s.contains("── rust"), "{s}");
}

/// A 20-line answer on a 60×15 terminal, its lines wider than the screen: each is in the
/// scrollback once, wrapped at word boundaries.
#[test]
fn a_narrow_terminal_keeps_one_copy_wrapped_at_words() {
    let mut text = String::new();
    let mut marks = Vec::new();
    for i in 1..=20 {
        let words: Vec<String> = [
            "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
            "juliet",
        ]
        .iter()
        .map(|w| format!("{w}{i:02}"))
        .collect();
        text.push_str(&format!("{}\n\n", words.join(" ")));
        marks.extend(words);
    }
    text.push_str("Done.");
    let t = Tmux::start("narrow", &[paced(&text)], 60, 15);
    t.wait(|s| s.lines().any(|l| l.trim_end() == "›"), "the prompt");
    t.keys(&["go", "Enter"]);
    let s = t.wait_answer("Done.");
    // A word cut by the terminal's wrapping would not be found whole.
    once_each(&s, &marks);
}

/// While a tool call runs, a line under it counts the seconds and says that Ctrl-C stops it;
/// Ctrl-C then leaves no `^C` behind, in the result line or anywhere, and the session goes on.
#[test]
fn a_running_tool_shows_its_time_and_ctrl_c_leaves_no_trace() {
    let long = serde_json::json!({
        "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "sleep 30"}}],
        "usage": {"input_tokens": 10, "output_tokens": 5}
    })
    .to_string();
    let after = paced("Still here.");
    let t = Tmux::start("running", &[long, after], 100, 20);
    t.wait(|s| s.lines().any(|l| l.trim_end() == "›"), "the prompt");
    t.keys(&["run it", "Enter"]);
    t.wait(|s| s.contains("▸ shell sleep 30"), "the call");
    let s = t.wait(
        |s| s.contains("  ⋯ running 2 s · Ctrl-C stops it"),
        "the running line at 2 s",
    );
    // It is the line right under the call.
    let lines: Vec<&str> = s.lines().collect();
    let call = lines
        .iter()
        .position(|l| l.contains("▸ shell sleep 30"))
        .unwrap();
    assert!(lines[call + 1].starts_with("  ⋯ running"), "{s}");
    t.keys(&["C-c"]);
    let s = t.wait(|s| s.contains("interrupted"), "the interruption");
    assert!(!s.contains("^C"), "Ctrl-C was echoed:\n{s}");
    assert!(!s.contains("⋯ running"), "the running line stayed:\n{s}");
    let lines: Vec<&str> = s.lines().collect();
    let call = lines
        .iter()
        .position(|l| l.contains("▸ shell sleep 30"))
        .unwrap();
    assert!(
        lines[call + 1].starts_with("  ✗ "),
        "the result under its call:\n{s}"
    );
    t.wait(|s| s.lines().any(|l| l.trim_end() == "›"), "the prompt");
    t.keys(&["are you there", "Enter"]);
    t.wait_answer("Still here.");
}
