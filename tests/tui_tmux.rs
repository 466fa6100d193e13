//! `bee repl --tui` as a person uses it: the real binary in a real terminal (tmux), keys sent
//! with `send-keys`, the screen read with `capture-pane`, the replay provider playing the
//! model. Needs tmux (Debian's package; `.ci/run` installs it). Each test runs its own tmux
//! server on a socket of its own.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A tmux server of its own, with bee in its one pane.
struct Tmux {
    socket: String,
    dir: tempfile::TempDir,
}

fn tmux_at(socket: &str, args: &[&str]) -> Output {
    Command::new("tmux")
        .args(["-L", socket, "-f", "/dev/null"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("tmux could not run ({e}); install it: apt-get install tmux"))
}

impl Tmux {
    /// bee repl --tui on a recording of `turns`, in a `w`×`h` terminal.
    fn start(name: &str, turns: &[String], w: u16, h: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("ws")).unwrap();
        std::fs::create_dir_all(p.join("home")).unwrap();
        std::fs::write(
            p.join("provider.toml"),
            "kind = \"replay\"\nfile = \"turns.jsonl\"\nmodel = \"replay-model\"\n\
             [prices]\ninput = 1.0\noutput = 2.0\n",
        )
        .unwrap();
        std::fs::write(p.join("turns.jsonl"), turns.join("\n")).unwrap();
        let socket = format!("bee-tui-{name}-{}", std::process::id());
        let bee = env!("CARGO_BIN_EXE_bee");
        let cmd = format!(
            "cd {dir} && env -i PATH=/usr/bin:/bin HOME={dir}/home XDG_STATE_HOME={dir}/state \
             XDG_CONFIG_HOME={dir}/config TERM=xterm-256color {bee} repl --tui --host \
             --provider provider.toml --workspace ws --records-dir {dir}/records; \
             echo \"[bee exited $?]\"",
            dir = p.display()
        );
        let t = Self { socket, dir };
        let (w, h) = (w.to_string(), h.to_string());
        let out = t.tmux(&["new-session", "-d", "-x", &w, "-y", &h, &cmd]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        t.tmux(&["set-option", "-g", "remain-on-exit", "on"]);
        t.tmux(&["set-option", "-g", "window-size", "manual"]);
        t
    }

    fn tmux(&self, args: &[&str]) -> Output {
        tmux_at(&self.socket, args)
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        self.tmux(&args);
        std::thread::sleep(Duration::from_millis(150));
    }

    fn screen(&self) -> String {
        // With the lines scrolled off the top (the closing line, once back on the normal
        // screen), joined where the terminal wrapped them.
        let out = self.tmux(&["capture-pane", "-p", "-J", "-S", "-50", "-t", "0"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn format(&self, f: &str) -> String {
        let out = self.tmux(&["display-message", "-p", "-t", "0", f]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Waits until the screen shows `text` (or fails with the screen).
    fn wait_for(&self, text: &str) -> String {
        self.wait(|s| s.contains(text), &format!("`{text}`"))
    }

    fn wait_gone(&self, text: &str) -> String {
        self.wait(|s| !s.contains(text), &format!("no `{text}`"))
    }

    fn wait(&self, ok: impl Fn(&str) -> bool, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("waited for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The pid of bee: the pane runs `sh -c "cd … && env … bee …; echo …"`, so bee is the
    /// shell's child.
    fn bee_pid(&self) -> String {
        let shell = self.format("#{pane_pid}");
        let out = Command::new("pgrep")
            .args(["-P", &shell, "bee"])
            .output()
            .unwrap();
        let bee = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(!bee.is_empty(), "no bee under the pane's shell {shell}");
        bee
    }

    fn records(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

fn turn(v: serde_json::Value) -> String {
    v.to_string()
}

fn demo() -> Vec<String> {
    let script = "render_to_ttl(\"metrics\", table([\"file\", \"lines\"], [[\"main.rs\", 120], \
                  [\"lib.rs\", 48]]), 4); render_to(\"load\", sparkline([1, 5, 3, 8, 2])); \
                  render(gauge(\"coverage\", 0.75));";
    vec![
        turn(serde_json::json!({
            "text": "Let me measure the files and show you.",
            "pace_ms": 40,
            "tool_calls": [{"id": "r1", "name": "render", "arguments": {"script": script}}],
            "usage": {"input_tokens": 100, "output_tokens": 10}
        })),
        turn(serde_json::json!({
            "text": "# Measured\n\nThe **metrics** panel lasts four seconds.",
            "usage": {"input_tokens": 200, "output_tokens": 20}
        })),
    ]
}

#[test]
fn a_session_streams_shows_panels_that_expire_and_every_key_works() {
    let t = Tmux::start("demo", &demo(), 110, 32);
    t.wait_for("Type below and press Enter");
    assert_eq!(
        t.format("#{alternate_on}"),
        "1",
        "the TUI is on the alternate screen"
    );
    assert_eq!(t.format("#{mouse_any_flag}"), "1", "mouse reporting is on");
    t.keys(&["measure it", "Enter"]);
    // The answer streams word by word (the recording's pace_ms).
    t.wait_for("Let me");
    let s = t.wait_for("The metrics panel lasts four seconds.");
    assert!(s.contains("metrics · "), "a panel with its TTL:\n{s}");
    assert!(s.contains("main.rs │ 120"), "{s}");
    assert!(s.contains("▁▅▃█▂"), "the sparkline panel:\n{s}");
    assert!(s.contains("coverage"), "the inline gauge:\n{s}");
    assert!(s.contains("75%"), "{s}");
    assert!(s.contains("# Measured"), "{s}");
    t.wait_for("330 tokens · $0.0004");
    // The TTL runs out: the table's panel goes, the sparkline's stays.
    let s = t.wait_gone("metrics · ");
    assert!(s.contains("▁▅▃█▂"), "{s}");

    // Tab to the conversation: the newest message is selected.
    t.keys(&["Tab"]);
    assert!(t.screen().contains("▌"), "a selected message is marked");
    // ? opens the help, Esc closes it.
    t.keys(&["?"]);
    let s = t.wait_for("keys — Esc closes");
    assert!(
        s.contains("Shift-drag"),
        "the help names the terminal's selection:\n{s}"
    );
    t.keys(&["Escape"]);
    t.wait_gone("keys — Esc closes");
    // p shows the panels as an overlay (the conversation still has the focus).
    t.keys(&["p"]);
    t.wait_for("▁▅▃█▂  1..8                                       ");
    t.keys(&["Escape"]);
    // y yanks the selected message (OSC 52) and says so.
    t.keys(&["y"]);
    t.wait_for("yanked");
    // gg to the top, G to the end, PgUp, PgDn, the wheel's keys: nothing breaks.
    t.keys(&["g", "g"]);
    // The first cell: `--host` said out loud at the start.
    t.wait_for("▌--host: nothing is confined");
    t.wait_for("project instructions: none (no AGENTS.md); skills: none");
    t.keys(&["G"]);
    t.keys(&["PPage", "NPage", "Up", "Down"]);
    // Ctrl-P brings back the last input; Ctrl-C clears it.
    t.keys(&["Escape", "C-p"]);
    t.wait_for("│measure it");
    t.keys(&["C-c"]);
    t.wait_gone("│measure it");
    // Too small, then big again: a screen that says so, never a broken layout.
    t.tmux(&["resize-window", "-t", "0", "-x", "30", "-y", "8"]);
    t.wait_for("terminal too small");
    t.tmux(&["resize-window", "-t", "0", "-x", "110", "-y", "32"]);
    t.wait_for("# Measured");
    // q quits (from the conversation, with an empty input): the terminal is itself again.
    t.keys(&["Tab", "q"]);
    let s = t.wait_for("session ended");
    assert!(s.contains("2 model call(s), 1 tool call(s)"), "{s}");
    // The closing line comes before bee has finished exiting: wait for its status (the
    // shell's line, not tmux's pane status, which tmux 3.3 may leave unset).
    t.wait_for("[bee exited 0]");
    assert_eq!(
        t.format("#{alternate_on}"),
        "0",
        "the alternate screen is left"
    );
    assert_eq!(t.format("#{mouse_any_flag}"), "0", "mouse reporting is off");
    let runs = std::fs::read_dir(t.records().join("records"))
        .unwrap()
        .count();
    assert!(runs >= 1);
}

#[test]
fn sigterm_restores_the_terminal() {
    let t = Tmux::start("term", &demo(), 80, 24);
    t.wait_for("Type below and press Enter");
    let target = t.bee_pid();
    let killed = Command::new("kill")
        .args(["-TERM", &target])
        .status()
        .unwrap();
    assert!(killed.success());
    // bee ends the session (its closing line names the transcript) and exits 0.
    let s = t.wait_for("[bee exited 0]");
    assert!(s.contains("repl.jsonl"), "{s}");
    assert_eq!(
        t.format("#{alternate_on}"),
        "0",
        "the alternate screen is left"
    );
    assert_eq!(t.format("#{mouse_any_flag}"), "0", "mouse reporting is off");
}

/// A terminal that goes away (its window closed, the ssh connection lost) hangs up: bee ends
/// the session and exits instead of reading the dead terminal's end of file forever.
#[test]
fn a_hangup_ends_the_session() {
    let t = Tmux::start("hup", &demo(), 80, 24);
    t.wait_for("Type below and press Enter");
    let bee = t.bee_pid();
    t.tmux(&["kill-server"]);
    let proc = Path::new("/proc").join(&bee);
    let deadline = Instant::now() + Duration::from_secs(20);
    while proc.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !proc.exists(),
        "bee {bee} still runs after its terminal hung up"
    );
    // The session's records were finished: the run directory has its transcript.
    let runs: Vec<_> = std::fs::read_dir(t.records().join("records"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("repl.jsonl").exists())
        .collect();
    assert_eq!(runs.len(), 1, "one session's transcript");
}

#[test]
fn piped_output_falls_back_to_the_inline_repl() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("ws")).unwrap();
    std::fs::write(
        p.join("provider.toml"),
        "kind = \"replay\"\nfile = \"turns.jsonl\"\nmodel = \"m\"\n",
    )
    .unwrap();
    std::fs::write(p.join("turns.jsonl"), "{\"text\": \"hi\"}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bee"))
        .args(["repl", "--tui", "--host", "--provider", "provider.toml"])
        .args(["--workspace", "ws", "--records-dir", "records"])
        .current_dir(p)
        .env("HOME", p)
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--tui needs a terminal, and input or output is not one; using the inline REPL"
        ),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(0), "{err}");
}
