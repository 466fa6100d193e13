//! `bee repl` as a person uses it: the real binary in a pseudo-terminal, typing and reading
//! the screen, with the replay provider and `--host` (the kernel matrix runs the enforced
//! journey). Each test has its own HOME, XDG directories and records.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::process::Healthcheck;
use expectrl::process::unix::{PtyStream, UnixProcess, WaitStatus};
use expectrl::{ControlCode, Expect, Regex, Session};

type Pty = Session<UnixProcess, PtyStream>;

/// A directory with a provider, a recording, a workspace and a home of its own.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(turns: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("ws")).unwrap();
        std::fs::create_dir_all(p.join("home")).unwrap();
        std::fs::write(p.join("ws/notes.md"), "remember the milk\n").unwrap();
        std::fs::write(
            p.join("provider.toml"),
            "kind = \"replay\"\nfile = \"turns.jsonl\"\nmodel = \"replay-model\"\n\
             [prices]\ninput = 1.0\noutput = 2.0\n",
        )
        .unwrap();
        std::fs::write(p.join("turns.jsonl"), turns.join("\n")).unwrap();
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn records(&self) -> PathBuf {
        self.path().join("records")
    }

    fn command(&self, args: &[&str]) -> Command {
        let p = self.path();
        let mut c = Command::new(env!("CARGO_BIN_EXE_bee"));
        c.arg("repl")
            .args(args)
            .current_dir(p)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", p.join("home"))
            .env("XDG_STATE_HOME", p.join("state"))
            .env("XDG_CONFIG_HOME", p.join("config"))
            .env("TERM", "xterm")
            .env("NO_COLOR", "1")
            .env("COLUMNS", "100");
        c
    }

    /// `bee repl --host` on this fixture, in a pseudo-terminal.
    fn spawn(&self) -> Pty {
        self.spawn_with(&[])
    }

    /// [`Fixture::spawn`], with these variables set (or, with an empty value, removed).
    fn spawn_with(&self, env: &[(&str, &str)]) -> Pty {
        self.spawn_args(&[], env)
    }

    /// [`Fixture::spawn_with`], with these arguments after the usual ones.
    fn spawn_args(&self, more: &[&str], env: &[(&str, &str)]) -> Pty {
        let records = self.records();
        let mut cmd = self.command(&[
            "--host",
            "--provider",
            "provider.toml",
            "--workspace",
            "ws",
            "--records-dir",
            records.to_str().unwrap(),
        ]);
        cmd.args(more);
        for (k, v) in env {
            if v.is_empty() {
                cmd.env_remove(k);
            } else {
                cmd.env(k, v);
            }
        }
        let mut s = Session::spawn(cmd).unwrap();
        s.set_expect_timeout(Some(Duration::from_secs(20)));
        s
    }
}

/// Reads until `text`, and adds the bytes the terminal received, `text` included, to `seen`.
fn read_until(s: &mut Pty, text: &str, seen: &mut Vec<u8>) {
    let found = s.expect(text).unwrap();
    seen.extend_from_slice(found.before());
    for m in found.matches() {
        seen.extend_from_slice(m);
    }
}

/// A paced answer of several blocks: it streams word by word.
const BLOCKS: &str = r##"{"text": "# Title\n\nSome **bold** words here.\n\n- one\n- two\n\nThe END.", "pace_ms": 2, "usage": {"input_tokens": 10, "output_tokens": 10}}"##;

/// Under `TERM=dumb` nothing moves the cursor: no line counts a running tool's seconds, the
/// answer is not streamed but printed once, complete, and the terminal receives no escape
/// sequence at all.
#[test]
fn term_dumb_gets_no_cursor_control_and_the_answer_once() {
    let wait = r#"{"tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "sleep 1"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}"#;
    let f = Fixture::new(&[wait, BLOCKS]);
    let mut s = f.spawn_with(&[("TERM", "dumb"), ("NO_COLOR", "")]);
    let mut seen = Vec::new();
    read_until(&mut s, "› ", &mut seen);
    s.send_line("write").unwrap();
    read_until(&mut s, "The END.", &mut seen);
    read_until(&mut s, "› ", &mut seen);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
    let text = String::from_utf8_lossy(&seen);
    assert!(
        !seen.contains(&0x1b),
        "an escape sequence under TERM=dumb: {text:?}"
    );
    assert_eq!(text.matches("Some bold words here.").count(), 1, "{text:?}");
    assert!(text.contains("• one"), "{text:?}");
    assert!(!text.contains("**"), "{text:?}");
}

/// `NO_COLOR` drops the colours only: the answer still streams (its live part is erased and
/// printed rendered), and no colour reaches the terminal.
#[test]
fn no_color_streams_without_colours() {
    let f = Fixture::new(&[BLOCKS]);
    let mut s = f.spawn_with(&[("TERM", "xterm-256color"), ("NO_COLOR", "1")]);
    let mut seen = Vec::new();
    read_until(&mut s, "› ", &mut seen);
    s.send_line("write").unwrap();
    read_until(&mut s, "The END.", &mut seen);
    read_until(&mut s, "› ", &mut seen);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
    let text = String::from_utf8_lossy(&seen);
    assert!(
        text.contains("\x1b[J"),
        "the answer did not stream: {text:?}"
    );
    // A colour is `ESC [ … m`.
    let colour = text.split('\x1b').skip(1).find(|seq| {
        seq.strip_prefix('[').is_some_and(|rest| {
            let end = rest.find(|c: char| c.is_ascii_alphabetic());
            end.is_some_and(|i| rest[i..].starts_with('m'))
        })
    });
    assert_eq!(colour, None, "a colour under NO_COLOR: {text:?}");
}

fn prompt(s: &mut Pty) {
    s.expect("› ").unwrap();
}

fn exit_code(s: &Pty) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match s.get_process().get_status() {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            other => panic!("bee repl did not exit: {other:?}"),
        }
    }
}

const LOOK: &str = r#"{"text": "Let me look at the notes.", "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.md"}}], "usage": {"input_tokens": 100, "output_tokens": 10}}"#;
const SAY: &str = r#"{"text": "The notes say:\n\n- **remember** the `milk`\n\n# Done", "usage": {"input_tokens": 200, "output_tokens": 20}}"#;

#[test]
fn a_conversation_of_several_turns_with_tools_is_shown_and_recorded() {
    let f = Fixture::new(&[
        LOOK,
        SAY,
        r#"{"text": "You're welcome.", "usage": {"input_tokens": 300, "output_tokens": 5}}"#,
    ]);
    let mut s = f.spawn();
    s.expect("--host").unwrap();
    s.expect("/help").unwrap();
    prompt(&mut s);
    s.send_line("what do my notes say?").unwrap();
    s.expect("read_file").unwrap();
    s.expect("notes.md").unwrap();
    s.expect("remember the milk").unwrap();
    // The final answer, rendered as markdown: a bullet instead of `-`, no `**`.
    s.expect("The notes say:").unwrap();
    s.expect("• remember the `milk`").unwrap();
    s.expect("# Done").unwrap();
    prompt(&mut s);
    s.send_line("thanks").unwrap();
    s.expect("You're welcome.").unwrap();
    prompt(&mut s);
    s.send_line("/cost").unwrap();
    s.expect("model calls 3").unwrap();
    s.expect("tokens: 600 input").unwrap();
    s.expect("cost $0.0007").unwrap();
    prompt(&mut s);
    s.send(ControlCode::EndOfTransmission).unwrap();
    s.expect("session ended").unwrap();
    assert_eq!(exit_code(&s), 0);

    // The records: a transcript that bee metrics reports, closed as `ended`.
    let out = Command::new(env!("CARGO_BIN_EXE_bee"))
        .args(["metrics", "--records"])
        .arg(f.records())
        .args(["--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total"]["model"]["calls"], 3);
    assert_eq!(v["total"]["tools"]["calls"], 1);
    let runs: Vec<_> = std::fs::read_dir(f.records())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .collect();
    assert_eq!(runs.len(), 1);
    let transcript = std::fs::read_to_string(runs[0].path().join("repl.jsonl")).unwrap();
    assert!(transcript.contains(r#""outcome":"ended""#), "{transcript}");
    assert!(
        transcript.contains(r#""enforcement":"host""#),
        "{transcript}"
    );
}

#[test]
fn ctrl_c_stops_a_long_tool_call_and_the_session_goes_on() {
    let long = r#"{"tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "echo $$ > pid; sleep 60"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}"#;
    let after = r#"{"text": "Still here.", "usage": {"input_tokens": 20, "output_tokens": 5}}"#;
    let f = Fixture::new(&[long, after]);
    let mut s = f.spawn();
    prompt(&mut s);
    s.send_line("run the long thing").unwrap();
    s.expect("sleep 60").unwrap();
    // Wait until the command runs, then interrupt it.
    let pid_file = f.path().join("ws/pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pid_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = Instant::now();
    s.send(ControlCode::EndOfText).unwrap();
    s.expect("interrupted").unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    prompt(&mut s);
    // The command's processes are gone with its cgroup.
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(
        !Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "the interrupted shell {pid} survived"
    );
    // The session goes on.
    s.send_line("are you there?").unwrap();
    s.expect("Still here.").unwrap();
    prompt(&mut s);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
}

#[test]
fn slash_commands_never_reach_the_model() {
    // No turns at all: a line that reached the model would end in "has ended".
    let f = Fixture::new(&[r#"{"text": "unused"}"#]);
    let mut s = f.spawn();
    prompt(&mut s);
    s.send_line("/help").unwrap();
    s.expect("/policy").unwrap();
    s.expect("Ctrl-C").unwrap();
    prompt(&mut s);
    s.send_line("/cots").unwrap();
    s.expect("did you mean /cost?").unwrap();
    prompt(&mut s);
    s.send_line("/policy").unwrap();
    s.expect("NO kernel scope").unwrap();
    prompt(&mut s);
    // `/allow` without a kernel scope: nothing to allow, nothing asked.
    s.send_line("/allow").unwrap();
    s.expect("nothing to allow").unwrap();
    prompt(&mut s);
    s.send_line("/allow zero").unwrap();
    s.expect("the number of a recent denial").unwrap();
    prompt(&mut s);
    s.send_line("/skill nothing-here").unwrap();
    s.expect(Regex("no skill|not found|no skills")).unwrap();
    prompt(&mut s);
    s.send_line("/cost").unwrap();
    s.expect("model calls 0").unwrap();
    prompt(&mut s);
    // Ctrl-C on an empty line ends the session.
    s.send(ControlCode::EndOfText).unwrap();
    assert_eq!(exit_code(&s), 0);
}

#[test]
fn skills_load_and_a_provider_failure_ends_only_the_turn() {
    let f = Fixture::new(&[
        r#"{"text": "Reviewed.", "usage": {"input_tokens": 10, "output_tokens": 2}}"#,
    ]);
    let skill = f.path().join(".bee/skills/review");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: review\ndescription: Review a change for security problems.\n---\n\n\
         # Reviewing\n\nRead every **diff** first.\n",
    )
    .unwrap();
    let mut s = f.spawn();
    prompt(&mut s);
    s.send_line("/skills").unwrap();
    s.expect("review").unwrap();
    s.expect("Review a change for security problems.").unwrap();
    prompt(&mut s);
    s.send_line("/skill review").unwrap();
    s.expect("Read every diff first.").unwrap();
    s.expect("skill `review` is loaded").unwrap();
    prompt(&mut s);
    s.send_line("review it").unwrap();
    s.expect("Reviewed.").unwrap();
    prompt(&mut s);
    // The recording has ended: the provider fails, the turn ends with the error and
    // its category, and the session goes on.
    s.send_line("again").unwrap();
    s.expect("provider protocol error").unwrap();
    s.expect("has ended: all").unwrap();
    prompt(&mut s);
    s.send_line("/cost").unwrap();
    s.expect("model calls 2").unwrap();
    s.expect("reported no token counts").unwrap();
    // The failed call leaves the known cost standing, and is named as the gap.
    s.expect("cost $0.0000 + unknown for 1 call (tokens not reported)")
        .unwrap();
    prompt(&mut s);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
}

#[test]
fn history_is_kept_across_sessions() {
    let f = Fixture::new(&[r#"{"text": "one"}"#, r#"{"text": "two"}"#]);
    let mut s = f.spawn();
    prompt(&mut s);
    s.send_line("remember this line").unwrap();
    s.expect("one").unwrap();
    prompt(&mut s);
    s.send(ControlCode::EndOfTransmission).unwrap();
    assert_eq!(exit_code(&s), 0);
    assert!(f.path().join("state/bee/history").exists());

    // In a new session, the up arrow brings the last line back; so does Ctrl-P (DLE, 0x10).
    for key in ["\x1b[A", "\x10"] {
        let mut s = f.spawn();
        prompt(&mut s);
        s.send(key).unwrap();
        s.expect("remember this line").unwrap();
        // Ctrl-C clears the line; Ctrl-C on the empty line ends the session.
        s.send(ControlCode::EndOfText).unwrap();
        s.send(ControlCode::EndOfText).unwrap();
        assert_eq!(exit_code(&s), 0);
    }
}

#[test]
fn set_up_refuses_with_the_statuses_of_bee_run() {
    let f = Fixture::new(&[r#"{"text": "x"}"#]);
    let run = |args: &[&str]| {
        let out = f.command(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Neither a policy nor --host.
    let (code, err) = run(&["--provider", "provider.toml"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--host"), "{err}");
    // Both.
    std::fs::write(f.path().join("p.toml"), "version = 1\n").unwrap();
    let (code, err) = run(&[
        "--provider",
        "provider.toml",
        "--policy",
        "p.toml",
        "--host",
    ]);
    assert_eq!(code, 64, "{err}");
    // A provider file that does not exist, and one that is invalid.
    let (code, err) = run(&["--host", "--provider", "missing.toml"]);
    assert_eq!(code, 66, "{err}");
    std::fs::write(f.path().join("bad.toml"), "kind = \"nope\"\n").unwrap();
    let (code, err) = run(&["--host", "--provider", "bad.toml"]);
    assert_eq!(code, 65, "{err}");
    assert!(err.contains("bad.toml:1"), "{err}");
    // A theme that does not exist, named in the configuration.
    std::fs::write(f.path().join("bee.toml"), "[repl]\ntheme = \"neon\"\n").unwrap();
    let (code, err) = run(&[
        "--host",
        "--provider",
        "provider.toml",
        "--config",
        "bee.toml",
    ]);
    assert_eq!(code, 65, "{err}");
    assert!(
        err.contains("bee.toml:2: repl.theme: there is no theme `neon`"),
        "{err}"
    );
}

/// A delegation in the REPL: `/agents` lists the roles, a subagent's tool calls show as
/// indented lines under the `agent` call, and its answer comes back as the call's result.
#[test]
fn the_agent_delegates_and_the_subagents_work_is_shown() {
    let f = Fixture::new(&[
        r#"{"text": "Asking the reviewer.", "tool_calls": [{"id": "d1", "name": "agent", "arguments": {"role": "reviewer", "task": "read the notes"}}], "usage": {"input_tokens": 10, "output_tokens": 1}}"#,
        r#"{"text": "The reviewer says: milk.", "usage": {"input_tokens": 10, "output_tokens": 1}}"#,
    ]);
    let p = f.path();
    std::fs::create_dir_all(p.join(".bee/agents")).unwrap();
    std::fs::write(
        p.join(".bee/agents/reviewer.toml"),
        "description = \"Reads notes.\"\npolicy = \"../../ro.toml\"\ntools = [\"read_file\"]\n\
         provider = \"../../reviewer.toml\"\n",
    )
    .unwrap();
    std::fs::write(p.join("ro.toml"), "version = 1\n[fs]\nread = [\"./**\"]\n").unwrap();
    std::fs::write(
        p.join("reviewer.toml"),
        "kind = \"replay\"\nfile = \"reviewer.jsonl\"\nmodel = \"replay-model\"\n",
    )
    .unwrap();
    std::fs::write(
        p.join("reviewer.jsonl"),
        [
            r#"{"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.md"}}]}"#,
            r#"{"text": "The notes are about milk."}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let mut s = f.spawn();
    prompt(&mut s);
    s.send_line("/agents").unwrap();
    s.expect("reviewer").unwrap();
    s.expect("Reads notes.").unwrap();
    prompt(&mut s);
    s.send_line("ask the reviewer").unwrap();
    s.expect("agent").unwrap();
    s.expect("reviewer: read the notes").unwrap();
    s.expect("↳ repl.reviewer-1: read_file notes.md").unwrap();
    s.expect("↳ repl.reviewer-1: ended").unwrap();
    s.expect("The notes are about milk.").unwrap();
    s.expect("The reviewer says: milk.").unwrap();
    prompt(&mut s);
    s.send(ControlCode::EndOfTransmission).unwrap();
    s.expect("session ended").unwrap();
    assert_eq!(exit_code(&s), 0);
    let run = std::fs::read_dir(f.records())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let child = std::fs::read_to_string(run.join("repl.reviewer-1.jsonl")).unwrap();
    assert!(
        child.contains(r#""parent":{"episode_id":"repl","call_id":"d1""#),
        "{child}"
    );
}

#[test]
fn the_render_tool_shows_widgets_inline_and_panels_under_their_names() {
    let script = r#"render(table([\"file\", \"lines\"], [[\"a.rs\", 10], [\"b.rs\", 7]])); render_to_ttl(\"metrics\", sparkline([1, 5, 3]), 30); render(gauge(\"cpu\", 2.0));"#;
    let good =
        r#"render(kv(#{ model: \"replay\" })); render_to(\"metrics\", sparkline([1, 5, 3]));"#;
    let first = format!(
        r#"{{"tool_calls": [{{"id": "r1", "name": "render", "arguments": {{"script": "{script}"}}}}], "usage": {{"input_tokens": 10, "output_tokens": 5}}}}"#
    );
    let second = format!(
        r#"{{"tool_calls": [{{"id": "r2", "name": "render", "arguments": {{"script": "{good}"}}}}], "usage": {{"input_tokens": 10, "output_tokens": 5}}}}"#
    );
    let done = r#"{"text": "Shown.", "usage": {"input_tokens": 10, "output_tokens": 5}}"#;
    let f = Fixture::new(&[&first, &second, done]);
    let mut s = f.spawn();
    prompt(&mut s);
    s.send_line("show me").unwrap();
    // The bad gauge fails the whole script, with its place; nothing of it is shown.
    s.expect("failed").unwrap();
    s.expect("the script failed at line 1, column").unwrap();
    // The second script: the widget inline, the panel under its name, with the note.
    s.expect("model").unwrap();
    s.expect("replay").unwrap();
    s.expect("── panel metrics (shown inline: panels need bee repl --tui)")
        .unwrap();
    s.expect("▁█▅").unwrap();
    s.expect("Shown.").unwrap();
    prompt(&mut s);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
}

#[test]
fn tui_without_a_terminal_falls_back_with_a_note() {
    let f = Fixture::new(&[
        r#"{"text": "Inline here.", "usage": {"input_tokens": 1, "output_tokens": 1}}"#,
    ]);
    let records = f.records();
    let out = f
        .command(&[
            "--host",
            "--tui",
            "--provider",
            "provider.toml",
            "--workspace",
            "ws",
            "--records-dir",
            records.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("using the inline REPL"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// The recording docs/repl.md starts with (`providers/repl.toml`) plays through in any
/// workspace: tool calls that succeed, a long markdown answer, a table and a panel drawn by
/// `render`, a last answer that says the recording has ended, and then an error that says so
/// too.
#[test]
fn the_shipped_repl_recording_plays_through_and_ends_plainly() {
    let f = Fixture::new(&[r#"{"text": "unused"}"#]);
    std::fs::write(
        f.path().join("ws/README.md"),
        "# Widgets\n\nIt makes widgets.\n",
    )
    .unwrap();
    let provider = Path::new(env!("CARGO_MANIFEST_DIR")).join("providers/repl.toml");
    let records = f.records();
    let cmd = f.command(&[
        "--host",
        "--provider",
        provider.to_str().unwrap(),
        "--workspace",
        "ws",
        "--records-dir",
        records.to_str().unwrap(),
    ]);
    let mut s = Session::spawn(cmd).unwrap();
    s.set_expect_timeout(Some(Duration::from_secs(30)));
    prompt(&mut s);
    s.send_line("hello").unwrap();
    // Each tool result is shown by its first line: the listing's first entry, the file's.
    s.expect("list_dir").unwrap();
    s.expect("README.md").unwrap();
    s.expect("read_file").unwrap();
    s.expect("# Widgets").unwrap();
    s.expect("What just happened").unwrap();
    s.expect("Things to try").unwrap();
    prompt(&mut s);
    s.send_line("go on").unwrap();
    s.expect("render").unwrap();
    s.expect("a markdown answer").unwrap();
    s.expect("recording").unwrap();
    s.expect("One recorded answer is left").unwrap();
    prompt(&mut s);
    s.send_line("and then?").unwrap();
    s.expect("the recording has ended").unwrap();
    prompt(&mut s);
    s.send_line("more").unwrap();
    s.expect("repl-turns.jsonl has ended: all 6 recorded turn(s) were played")
        .unwrap();
    prompt(&mut s);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
}

/// A tool's output beyond its result line is one command away: `/show N` prints the N-th
/// call's whole output (`/show`, the last), and a result that is an error is never cut.
#[test]
fn show_prints_a_calls_whole_output_and_errors_are_never_cut() {
    let deep = "a-directory-with-a-long-name/".repeat(5);
    let missing = format!("{deep}missing-notes.md");
    let shell = r#"{"tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "for i in 1 2 3 4 5 6; do echo output-line-$i; done"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}"#;
    let read = serde_json::json!({
        "tool_calls": [{"id": "c2", "name": "read_file", "arguments": {"path": missing}}],
        "usage": {"input_tokens": 10, "output_tokens": 5}
    })
    .to_string();
    let done = r#"{"text": "Done.", "usage": {"input_tokens": 10, "output_tokens": 5}}"#;
    let f = Fixture::new(&[shell, &read, done]);
    let mut s = f.spawn();
    prompt(&mut s);
    s.send_line("run it").unwrap();
    // The result line says how much more there is, and how to see it.
    s.expect("exit status 0 · 8 lines: /show 1").unwrap();
    // The error is whole: the path to its end, and what follows it.
    s.expect(Regex(
        r"✗ failed · [0-9]+ ms · .*missing-notes\.md`: No such file",
    ))
    .unwrap();
    s.expect("Done.").unwrap();
    prompt(&mut s);
    s.send_line("/show 1").unwrap();
    s.expect("── tool call 1 · shell for i in").unwrap();
    s.expect("exit status 0").unwrap();
    for i in 1..=6 {
        s.expect(format!("output-line-{i}")).unwrap();
    }
    prompt(&mut s);
    s.send_line("/show").unwrap();
    s.expect("── tool call 2 · read_file").unwrap();
    s.expect("missing-notes.md").unwrap();
    prompt(&mut s);
    s.send_line("/show 3").unwrap();
    s.expect("there is no tool call 3: 2 so far").unwrap();
    prompt(&mut s);
    s.send_line("/show zero").unwrap();
    s.expect("/show takes the number of a tool call").unwrap();
    prompt(&mut s);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
}

/// The transcript of the fixture's one run.
fn transcript(f: &Fixture) -> String {
    let runs: Vec<_> = std::fs::read_dir(f.records())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .collect();
    assert_eq!(runs.len(), 1);
    std::fs::read_to_string(runs[0].path().join("repl.jsonl")).unwrap()
}

/// With `--host` the session says first that nothing is confined, then which project
/// instructions and skills it loaded — "none" when there are none.
#[test]
fn host_mode_says_nothing_is_confined_and_what_was_loaded() {
    let f = Fixture::new(&[r#"{"text": "unused"}"#]);
    let mut s = f.spawn();
    s.expect("--host: nothing is confined — tools run on this machine as you")
        .unwrap();
    s.expect("project instructions: none (no AGENTS.md); skills: none")
        .unwrap();
    prompt(&mut s);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);

    std::fs::write(f.path().join("ws/AGENTS.md"), "Run the tests first.\n").unwrap();
    for name in ["review", "deploy"] {
        let skill = f.path().join(".bee/skills").join(name);
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: The {name} skill.\n---\n\nDo it.\n"),
        )
        .unwrap();
    }
    let mut s = f.spawn();
    s.expect("nothing is confined").unwrap();
    s.expect("project instructions: AGENTS.md; skills: deploy, review")
        .unwrap();
    prompt(&mut s);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
}

/// A shell call, then an answer, twice.
const TOUCH_TWICE: [&str; 4] = [
    r#"{"tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "touch declined.txt"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}"#,
    r#"{"text": "First answer.", "usage": {"input_tokens": 10, "output_tokens": 5}}"#,
    r#"{"tool_calls": [{"id": "c2", "name": "shell", "arguments": {"command": "touch approved.txt"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}"#,
    r#"{"text": "Second answer.", "usage": {"input_tokens": 10, "output_tokens": 5}}"#,
];

/// `--approve` asks before a shell call: `n` declines it (the command does not run and the
/// model is told that the user declined), `y` runs it.
#[test]
fn approve_asks_before_a_shell_command_and_n_declines_it() {
    let f = Fixture::new(&TOUCH_TWICE);
    let mut s = f.spawn_args(&["--approve"], &[]);
    s.expect("--approve: bee asks before every shell command")
        .unwrap();
    prompt(&mut s);
    s.send_line("make the first file").unwrap();
    s.expect("approve: shell touch declined.txt").unwrap();
    s.expect("run? [y/N]").unwrap();
    s.send_line("n").unwrap();
    s.expect("declined: the call does not run").unwrap();
    s.expect("First answer.").unwrap();
    prompt(&mut s);
    assert!(!f.path().join("ws/declined.txt").exists());
    s.send_line("make the second file").unwrap();
    s.expect("approve: shell touch approved.txt").unwrap();
    s.expect("run? [y/N]").unwrap();
    s.send_line("y").unwrap();
    s.expect("Second answer.").unwrap();
    prompt(&mut s);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
    assert!(f.path().join("ws/approved.txt").exists());
    assert!(!f.path().join("ws/declined.txt").exists());
    let transcript = transcript(&f);
    assert!(
        transcript.contains("not run: the user declined `shell touch declined.txt`"),
        "{transcript}"
    );
}

/// Without a terminal on standard input `--approve` cannot ask, so it refuses every call it
/// would ask about, and says so; with the full-screen TUI asked for it refuses to start.
#[test]
fn approve_without_a_terminal_refuses_and_with_the_tui_does_not_start() {
    let f = Fixture::new(&TOUCH_TWICE[..2]);
    let records = f.records();
    let args = [
        "--host",
        "--provider",
        "provider.toml",
        "--workspace",
        "ws",
        "--records-dir",
        records.to_str().unwrap(),
        "--approve",
    ];
    let mut child = f
        .command(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"make the file\n/quit\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("refused without asking"), "{stdout}");
    assert!(stdout.contains("First answer."), "{stdout}");
    assert!(!f.path().join("ws/declined.txt").exists());
    assert!(
        transcript(&f).contains("there was no terminal to ask on"),
        "{stdout}"
    );

    let out = f
        .command(&[&args[..], &["--tui"]].concat())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("--no-tui"), "{stderr}");
}

/// `--approve` asks before a file tool reaches outside the workspace (and not inside it);
/// approved, it runs, and its note says that no policy confines it.
#[test]
fn approve_asks_before_a_path_outside_the_workspace() {
    let f = Fixture::new(&[
        r#"{"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.md"}}, {"id": "c2", "name": "read_file", "arguments": {"path": "../secret.txt"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}"#,
        r#"{"text": "Read both.", "usage": {"input_tokens": 10, "output_tokens": 5}}"#,
    ]);
    std::fs::write(f.path().join("secret.txt"), "the secret\n").unwrap();
    let mut s = f.spawn_args(&["--approve"], &[]);
    prompt(&mut s);
    s.send_line("read them").unwrap();
    s.expect("remember the milk").unwrap();
    s.expect("approve: read_file ../secret.txt (outside the workspace)")
        .unwrap();
    s.expect("run? [y/N]").unwrap();
    s.send_line("y").unwrap();
    s.expect("Read both.").unwrap();
    prompt(&mut s);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
    let transcript = transcript(&f);
    assert!(transcript.contains("the secret"), "{transcript}");
    assert!(
        transcript.contains("no policy confines this session (--host)"),
        "{transcript}"
    );
    assert!(!transcript.contains("policy decides"), "{transcript}");
}

/// The call in the question is the model's text: an escape sequence in it is shown, so it
/// cannot rewrite what the person approves.
#[test]
fn approve_shows_escape_sequences_in_the_call_instead_of_obeying_them() {
    let f = Fixture::new(&[
        r#"{"tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "touch evil.txt \u001b[2K\rshell ls"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}"#,
        r#"{"text": "Done.", "usage": {"input_tokens": 10, "output_tokens": 5}}"#,
    ]);
    let mut s = f.spawn_args(&["--approve"], &[]);
    prompt(&mut s);
    s.send_line("go").unwrap();
    s.expect("approve: shell touch evil.txt ␛[2K").unwrap();
    s.expect("run? [y/N]").unwrap();
    s.send_line("").unwrap();
    s.expect("Done.").unwrap();
    prompt(&mut s);
    s.send_line("/quit").unwrap();
    assert_eq!(exit_code(&s), 0);
    assert!(!f.path().join("ws/evil.txt").exists());
}
