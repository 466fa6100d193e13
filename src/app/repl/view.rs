//! What `bee repl` shows while a turn runs: the assistant's text as it streams (on a terminal,
//! each finished block printed once as markdown, see [`super::stream`]), then tool calls,
//! their results, kernel denials, refusals, errors and notes, one compact line each.
//!
//! The view is the session's observer ([`Update`]); it is called on the session's thread.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::stream::{Answer, Screen};
use crate::app::harness::conversation::commands::Shown;

use crate::panels::{Outbox, Placement, draw};
use crate::provider;
use crate::records::{EventBody, Role as Author, ToolResult, ToolState, Truncation};
use crate::render::{Role, Theme, lines, render_markdown, sanitize, width as text_width};
use crate::session::Update;

/// How the view writes.
pub(super) struct View {
    out: Arc<Mutex<Out>>,
    state: Mutex<State>,
    theme: Theme,
    /// Whether the output is a terminal that takes cursor movements: the answer streams.
    live: bool,
    /// What the render tool placed, shown after its result.
    outbox: Outbox,
}

#[derive(Default)]
struct State {
    /// The answer streaming since the last complete message.
    answer: Answer,
    /// The session's tool calls, in order: `/show N` is the N-th.
    calls: Vec<Call>,
    /// Model latency of every call so far, milliseconds.
    latencies: Vec<u64>,
    first_tokens: Vec<u64>,
}

/// The output, and the status line it keeps under running tool calls.
struct Out {
    write: Box<dyn Write + Send>,
    /// Whether a status line may be drawn (and erased): the output takes cursor movements.
    live: bool,
    /// The style of the status line.
    muted: anstyle::Style,
    /// Tool calls running now.
    running: usize,
    /// Since when a tool call has been running.
    since: Option<Instant>,
    /// The status line on screen, the cursor at its end (empty: none).
    drawn: String,
    /// Whether the last text written ended a line: only then may a status line go under it.
    at_line_start: bool,
}

impl Out {
    /// Writes `text` above the status line: the line is erased first, and drawn again when
    /// `text` ends a line.
    fn write(&mut self, text: &str) {
        self.erase();
        let _ = self.write.write_all(text.as_bytes());
        if !text.is_empty() {
            self.at_line_start = text.ends_with('\n');
        }
        self.status();
        let _ = self.write.flush();
    }

    fn erase(&mut self) {
        if !self.drawn.is_empty() {
            // ECHOCTL's `^C`, echoed at the line's end, goes with it.
            let _ = self.write.write_all(b"\r\x1b[K");
            self.drawn.clear();
        }
    }

    /// Draws the status line (when tool calls run and it changed): how long they have run,
    /// and that Ctrl-C stops them.
    fn status(&mut self) {
        let shown = self.live && self.running > 0 && self.at_line_start;
        let Some(since) = self.since.filter(|_| shown) else {
            self.erase();
            return;
        };
        let secs = since.elapsed().as_secs();
        let text = if self.running == 1 {
            format!("  ⋯ running {secs} s · Ctrl-C stops it")
        } else {
            format!(
                "  ⋯ {} tool calls running {secs} s · Ctrl-C stops them",
                self.running
            )
        };
        if text == self.drawn {
            return;
        }
        let width = terminal_size::terminal_size().map_or(80, |(w, _)| usize::from(w.0));
        let mut line = crate::render::Line::styled(&text, self.muted);
        line.truncate(width.saturating_sub(1).max(1));
        let _ = write!(self.write, "\r\x1b[K{}", line.render());
        let _ = self.write.flush();
        self.drawn = text;
    }
}

/// A tool call of the session, kept for `/show`.
struct Call {
    /// The provider's call id.
    id: String,
    /// The tool and its arguments in a few words.
    title: String,
    /// How it ended, once it has.
    end: Option<CallEnd>,
}

/// How a tool call ended.
struct CallEnd {
    state: ToolState,
    ms: u64,
    output: String,
    truncated: Option<Truncation>,
}

impl View {
    pub(super) fn new(
        out: Box<dyn Write + Send>,
        theme: Theme,
        live: bool,
        outbox: Outbox,
    ) -> Self {
        let out = Arc::new(Mutex::new(Out {
            write: out,
            live,
            muted: theme.style(Role::Muted),
            running: 0,
            since: None,
            drawn: String::new(),
            at_line_start: true,
        }));
        if live {
            // Keeps the status line's seconds going while a tool call runs; it ends with the
            // view.
            let weak = Arc::downgrade(&out);
            std::thread::spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_millis(250));
                    let Some(out) = weak.upgrade() else { break };
                    if let Ok(mut o) = out.lock() {
                        o.status();
                    }
                }
            });
        }
        Self {
            out,
            state: Mutex::new(State::default()),
            theme,
            live,
            outbox,
        }
    }

    /// Shows what the render tool placed: inline widgets as they are, a panel's widget
    /// under the panel's name (this screen has no panels), panel removals as a note.
    fn placements(&self) {
        let width = self.width();
        for p in self.outbox.take() {
            let widget = match &p {
                Placement::Inline(w) => Some(w),
                Placement::Panel { name, widget, ttl } => {
                    let ttl = ttl.map_or(String::new(), |t| {
                        format!(", for {}", crate::render::lines::duration(millis(t)))
                    });
                    self.styled(
                        Role::Heading,
                        &format!("── panel {name}{ttl} (shown inline: panels need bee repl --tui)"),
                    );
                    Some(widget)
                }
                Placement::Remove(name) => {
                    self.styled(Role::Muted, &format!("── panel {name} removed"));
                    None
                }
                Placement::Clear => {
                    self.styled(Role::Muted, "── panels cleared");
                    None
                }
            };
            if let Some(w) = widget {
                let mut text = String::new();
                for line in draw::lines(w, &self.theme, width) {
                    text.push_str(&line.render());
                    text.push('\n');
                }
                self.print(&text);
            }
        }
    }

    /// The theme in use.
    pub(super) fn theme(&self) -> &Theme {
        &self.theme
    }

    /// The terminal's width in columns (80 when unknown), at least 20.
    pub(super) fn width(&self) -> usize {
        self.screen().width
    }

    /// The terminal's size: 80×24 when unknown, at least 20 columns.
    fn screen(&self) -> Screen {
        let (width, height) = terminal_size::terminal_size()
            .map_or((80, 24), |(w, h)| (usize::from(w.0), usize::from(h.0)));
        Screen {
            width: width.max(20),
            height: if height == 0 { 24 } else { height },
        }
    }

    /// Writes `text` as is and flushes.
    pub(super) fn print(&self, text: &str) {
        if let Ok(mut out) = self.out.lock() {
            out.write(text);
        }
    }

    /// Asks a question on the terminal: `prompt` is written (the status line gives way) and a
    /// line is read from standard input, which is in the terminal's line mode while a turn
    /// runs. `None` at the end of input or on an error.
    pub(super) fn ask(&self, prompt: &str) -> Option<String> {
        self.print(prompt);
        let mut line = String::new();
        let read = std::io::stdin().read_line(&mut line);
        if let Ok(mut out) = self.out.lock() {
            // The answer's Enter ended the line.
            out.at_line_start = true;
        }
        match read {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    }

    /// Counts a tool call as started (`true`) or ended: the status line is shown while any
    /// runs.
    fn running(&self, started: bool) {
        if let Ok(mut out) = self.out.lock() {
            if started {
                if out.running == 0 {
                    out.since = Some(Instant::now());
                }
                out.running += 1;
            } else {
                out.running = out.running.saturating_sub(1);
            }
            if out.running == 0 {
                out.since = None;
                out.erase();
            }
        }
    }

    /// The turn ended: no tool call runs any more.
    pub(super) fn turn_ended(&self) {
        if let Ok(mut out) = self.out.lock() {
            out.running = 0;
            out.since = None;
            out.erase();
            let _ = out.write.flush();
        }
    }

    /// Writes one line.
    pub(super) fn line(&self, text: &str) {
        self.print(&format!("{text}\n"));
    }

    /// A line of `style`.
    pub(super) fn styled(&self, role: Role, text: &str) {
        self.line(&self.theme.paint(role, text));
    }

    /// Writes what a command shows ([`Shown`]), each line in its role's style.
    pub(super) fn show(&self, lines: &[Shown]) {
        for l in lines {
            match l {
                Shown::Heading(t) => self.styled(Role::Heading, t),
                Shown::Item(name, what) => {
                    self.line(&format!("  {}  {what}", self.theme.paint(Role::Code, name)));
                }
                Shown::Muted(t) => self.styled(Role::Muted, t),
                Shown::Error(t) => self.styled(Role::Error, t),
                Shown::Unconfined(t) => self.styled(Role::Denial, t),
            }
        }
    }

    /// Renders markdown (a loaded skill, say) with the theme.
    pub(super) fn markdown(&self, text: &str) {
        self.print(&render_markdown(text, &self.theme, self.width()));
    }

    /// Model latencies so far, milliseconds: to the end of each call and to its first token.
    pub(super) fn latencies(&self) -> (Vec<u64>, Vec<u64>) {
        self.state
            .lock()
            .map(|s| (s.latencies.clone(), s.first_tokens.clone()))
            .unwrap_or_default()
    }

    /// Shows one update of the session.
    pub(super) fn update(&self, u: Update<'_>) {
        match u {
            Update::Stream(provider::Event::TextDelta { text }) => self.stream(text),
            Update::Stream(provider::Event::Restarted) => self.restart(),
            Update::Stream(_) => {}
            Update::ToolStarted(call) => {
                if let Ok(mut s) = self.state.lock() {
                    s.calls.push(Call {
                        id: call.id.clone(),
                        title: format!("{} {}", call.name, summary(&call.arguments)),
                        end: None,
                    });
                }
                let line = lines::tool_call(
                    &self.theme,
                    self.width(),
                    &call.name,
                    &summary(&call.arguments),
                );
                self.running(true);
                self.line(&line);
            }
            Update::Recorded(e) => self.recorded(&e.body),
        }
    }

    /// Shows one update of a subagent `id`, compactly: its tool calls, denials and end.
    /// (Its answer comes back as the `agent` call's result.)
    pub(super) fn subagent(&self, id: &str, u: Update<'_>) {
        let Update::Recorded(e) = u else { return };
        match &e.body {
            EventBody::ToolCall(c) => self.styled(
                Role::Muted,
                &format!("  ↳ {id}: {} {}", c.tool, summary(&c.arguments.to_string())),
            ),
            EventBody::Denial(d) => {
                let what = format!("{id}: {} (missing {})", d.explanation, d.missing.as_str());
                self.line(&lines::denial(&self.theme, usize::MAX, &what));
            }
            EventBody::LimitHit(l) => self.styled(
                Role::Muted,
                &format!("  ↳ {id}: limit {}: {}", l.limit.as_str(), l.detail),
            ),
            EventBody::EpisodeFinished(f) => {
                self.styled(Role::Muted, &format!("  ↳ {id}: {}", f.outcome.as_str()))
            }
            _ => {}
        }
    }

    fn stream(&self, text: &str) {
        if !self.live {
            return;
        }
        let screen = self.screen();
        let render = |t: &str| render_markdown(t, &self.theme, screen.width);
        let out = match self.state.lock() {
            Ok(mut s) => s.answer.push(text, screen, &render),
            Err(_) => return,
        };
        self.print(&out);
    }

    /// The provider started its answer over: the live part is erased (what was printed for
    /// good stays, with a note).
    fn restart(&self) {
        let (out, printed) = match self.state.lock() {
            Ok(mut s) => s.answer.restart(self.width()),
            Err(_) => return,
        };
        self.print(&out);
        if printed {
            self.styled(
                Role::Muted,
                "(the provider started its answer over: it follows in full)",
            );
        }
    }

    /// Ends the streaming answer: what is not printed yet is printed as markdown, from
    /// `text` (the complete message) or, without it, from what streamed. Returns whether
    /// anything had streamed.
    fn finish(&self, text: Option<&str>) -> bool {
        let width = self.width();
        let render = |t: &str| render_markdown(t, &self.theme, width);
        let (out, streamed) = match self.state.lock() {
            Ok(s) if s.answer.is_empty() => return false,
            Ok(mut s) => (s.answer.finish(text, width, &render), true),
            Err(_) => return false,
        };
        self.print(&out);
        streamed
    }

    /// A tool call's result: one line, numbered for `/show` when the output holds more than
    /// that line. A result that is not `completed` is never cut: the terminal wraps it.
    fn result(&self, r: &ToolResult) {
        self.running(false);
        let number = self.state.lock().ok().and_then(|mut s| {
            let i = s.calls.iter().rposition(|c| c.id == r.call_id)?;
            s.calls[i].end = Some(CallEnd {
                state: r.state,
                ms: r.duration_ms,
                output: r.output.clone(),
                truncated: r.truncated.clone(),
            });
            Some(i + 1)
        });
        let first = r
            .output
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let count = r.output.trim().lines().count();
        let whole = lines::tool_result_line(&self.theme, usize::MAX, r.state, r.duration_ms, first);
        let completed = r.state == ToolState::Completed;
        let cut = completed && whole.width() > self.width();
        let hint = match number {
            Some(n) if count > 1 || cut || r.truncated.is_some() => {
                let lines = if count == 1 { "line" } else { "lines" };
                format!(" · {count} {lines}: /show {n}")
            }
            _ => String::new(),
        };
        let mut line = if completed {
            let width = self.width().saturating_sub(text_width(&hint));
            lines::tool_result_line(&self.theme, width, r.state, r.duration_ms, first)
        } else {
            whole
        };
        line.push(&hint, self.theme.style(Role::Muted));
        self.line(&line.render());
    }

    /// `/show N`: the whole output of the session's N-th tool call (`None`: the last), as
    /// the model got it, under a line that names the call.
    pub(super) fn show_call(&self, n: Option<usize>) {
        let text = {
            let Ok(s) = self.state.lock() else { return };
            let total = s.calls.len();
            if total == 0 {
                drop(s);
                self.styled(Role::Muted, "no tool call yet in this session");
                return;
            }
            let i = n.map_or(total - 1, |n| n - 1);
            let Some(call) = s.calls.get(i) else {
                drop(s);
                self.styled(
                    Role::Error,
                    &format!(
                        "there is no tool call {}: {total} so far (/show 1 to /show {total})",
                        i + 1
                    ),
                );
                return;
            };
            let title: String = sanitize(&call.title).replace('\n', " ");
            let title = match title.char_indices().nth(80) {
                Some((cut, _)) => format!("{}…", &title[..cut]),
                None => title,
            };
            let Some(end) = &call.end else {
                drop(s);
                self.styled(
                    Role::Muted,
                    &format!("tool call {} is still running", i + 1),
                );
                return;
            };
            let heading = self.theme.paint(
                Role::Heading,
                &format!(
                    "── tool call {} · {title} · {} · {}",
                    i + 1,
                    end.state.as_str().replace('_', " "),
                    lines::duration(end.ms)
                ),
            );
            let mut text = format!("{heading}\n{}", sanitize(&end.output));
            if !text.ends_with('\n') {
                text.push('\n');
            }
            if let Some(t) = &end.truncated {
                text.push_str(&self.theme.paint(
                    Role::Muted,
                    &format!(
                        "(cut short for the model, whose copy this is: {}; the whole was {} bytes)",
                        t.note, t.total_bytes
                    ),
                ));
                text.push('\n');
            }
            text
        };
        self.print(&text);
    }

    fn recorded(&self, body: &EventBody) {
        match body {
            EventBody::Message(m) if m.role == Author::Assistant && !self.finish(Some(&m.text)) => {
                self.markdown(&m.text);
            }
            EventBody::Denial(d) => {
                let what = format!("{} (missing {})", d.explanation, d.missing.as_str());
                self.line(&lines::denial(&self.theme, usize::MAX, &what));
            }
            EventBody::ToolResult(r) => {
                self.result(r);
                self.placements();
            }
            EventBody::ModelLatency(l) => {
                if let Ok(mut s) = self.state.lock() {
                    s.latencies.push(l.total_ms);
                    s.first_tokens.extend(l.first_token_ms);
                }
            }
            EventBody::ModelCallEnded(m) => {
                if self.finish(None) && m.error.is_some() {
                    self.styled(Role::Muted, "(the partial answer above was recorded)");
                }
                if let Some(e) = &m.error {
                    let what = format!("provider {} error: {}", e.category, e.message);
                    // An error is shown whole (the terminal wraps it), never cut.
                    self.line(&lines::error(&self.theme, usize::MAX, &what));
                }
                if let Some(r) = &m.refusal {
                    let text = match (&r.text, &r.detail) {
                        (t, Some(d)) if t.is_empty() => d.clone(),
                        (t, Some(d)) => format!("{t} ({d})"),
                        (t, None) => t.clone(),
                    };
                    self.line(&lines::refusal(&self.theme, usize::MAX, &text));
                }
                for note in &m.notes {
                    self.line(&lines::notice(&self.theme, self.width(), note));
                }
            }
            EventBody::LimitHit(l) => {
                let what = format!("limit {}: {}", l.limit.as_str(), l.detail);
                self.line(&lines::notice(&self.theme, self.width(), &what));
            }
            _ => {}
        }
    }
}

/// A tool call's arguments in a few words: the command of a shell call, the path of a file
/// tool, else the JSON.
fn summary(arguments: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null);
    if let (Some(role), Some(task)) = (
        v.get("role").and_then(serde_json::Value::as_str),
        v.get("task").and_then(serde_json::Value::as_str),
    ) {
        return format!("{role}: {task}");
    }
    for key in ["command", "path", "pattern", "name", "script"] {
        if let Some(s) = v.get(key).and_then(serde_json::Value::as_str) {
            return s.to_owned();
        }
    }
    arguments.to_owned()
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
