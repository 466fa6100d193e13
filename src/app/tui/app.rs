//! The screen's state and how keys and the session change it. Drawing is in [`super::draw`];
//! nothing here touches the terminal, so every state can be built in a test.
//!
//! Why one file of this length: it is the screen's one state machine (every key and every
//! session event changes `App`), kept apart from drawing so each state is built and tested
//! (`tests.rs`) without a terminal.

use std::time::Instant;

use ratatui::crossterm::event::KeyEvent;
use ratatui_textarea::{CursorMove, TextArea};

use super::super::harness::conversation::Input;
use super::super::harness::conversation::commands::Shown;
use super::super::harness::conversation::slash::Slash;
use super::cells::{Cell, Kind, ToolEnd};
use super::keys::{self, Action, Focus, KeyCtx, Overlay};
use crate::panels::{Board, Placement, draw};
use crate::provider;
use crate::records::{EventBody, Role as Author, Totals};
use crate::render::{self, Theme};
use crate::session::TurnEnd;

/// What the session thread tells the screen.
#[derive(Debug)]
pub(super) enum FromSession {
    /// A piece of the model's answer.
    Stream(provider::Event),
    /// A tool call starts.
    ToolStarted(provider::ToolCall),
    /// An event was recorded.
    Recorded(Box<EventBody>),
    /// What the render tool placed.
    Placements(Vec<Placement>),
    /// The turn ended.
    TurnEnded(TurnEnd),
    /// A note (AGENTS.md, skills).
    Note(String),
    /// What a slash command shows (`/skills`, `/agents`, `/policy`).
    Shown(Vec<Shown>),
    /// A question whose answer is the next line typed (`/allow`'s y/N).
    Ask(String),
    /// The session cannot go on.
    Failed(String),
}

/// The status line's fixed part.
#[derive(Debug, Clone, Default)]
pub(super) struct Status {
    /// `model via kind`.
    pub(super) model: String,
    /// `policy P (kernel-enforced)` or `--host (no kernel scope)`.
    pub(super) confinement: String,
}

/// The screen's state.
#[derive(Debug)]
pub(super) struct App {
    pub(super) theme: Theme,
    pub(super) cells: Vec<Cell>,
    /// Rows scrolled up from the end; 0 follows new output.
    pub(super) scroll: usize,
    /// The selected message, when the conversation has the focus.
    pub(super) selected: Option<usize>,
    /// The selected panel.
    pub(super) panel: usize,
    pub(super) focus: Focus,
    pub(super) overlay: Overlay,
    pub(super) input: TextArea<'static>,
    history: Vec<String>,
    history_at: Option<usize>,
    pub(super) board: Board,
    pub(super) status: Status,
    pub(super) totals: Totals,
    pub(super) busy: bool,
    pending_g: bool,
    pub(super) quit: bool,
    /// Text to put on the clipboard (OSC 52) after the next frame.
    pub(super) yank: Option<String>,
    /// A short-lived hint in the status line.
    pub(super) hint: Option<String>,
    /// The question the next line typed answers (`/allow`'s y/N), if one was asked.
    pub(super) asking: Option<String>,
    /// The conversation's size at the last frame (columns, rows).
    pub(super) view: (usize, usize),
    pub(super) dirty: bool,
    /// The tool calls running, by id, and since when.
    started: Vec<(String, Instant)>,
}

impl App {
    /// An empty screen.
    pub(super) fn new(theme: Theme, status: Status) -> Self {
        let mut input = TextArea::default();
        input.set_placeholder_text("Ask, or /help — Enter sends, Shift+Enter breaks the line");
        input.set_cursor_line_style(ratatui::style::Style::default());
        Self {
            theme,
            cells: Vec::new(),
            scroll: 0,
            selected: None,
            panel: 0,
            focus: Focus::Input,
            overlay: Overlay::None,
            input,
            history: Vec::new(),
            history_at: None,
            board: Board::default(),
            status,
            totals: Totals::default(),
            busy: false,
            pending_g: false,
            quit: false,
            yank: None,
            hint: None,
            asking: None,
            view: (80, 20),
            dirty: true,
            started: Vec::new(),
        }
    }

    fn push(&mut self, kind: Kind) {
        self.cells.push(Cell::new(kind));
        if self.scroll > 0 {
            // Keep the rows on screen still while new ones arrive below.
            let (w, _) = self.view;
            if let Some(c) = self.cells.last_mut() {
                self.scroll += c.height(&self.theme, w);
            }
        }
    }

    /// A note from bee in the conversation.
    /// A warning that tools run without a kernel scope, drawn as a denial is.
    pub(super) fn push_unconfined(&mut self, text: &str) {
        self.push(Kind::Shown(vec![Shown::Unconfined(text.to_owned())]));
        self.dirty = true;
    }

    pub(super) fn notice(&mut self, text: &str) {
        self.push(Kind::Notice(text.to_owned()));
        self.dirty = true;
    }

    fn input_text(&self) -> String {
        self.input.lines().join("\n")
    }

    fn set_input(&mut self, text: &str) {
        self.input = {
            let mut t = TextArea::new(text.split('\n').map(str::to_owned).collect());
            t.set_cursor_line_style(ratatui::style::Style::default());
            t.set_placeholder_text(self.input.placeholder_text().to_owned());
            t.move_cursor(CursorMove::Bottom);
            t.move_cursor(CursorMove::End);
            t
        };
    }

    fn key_ctx(&self) -> KeyCtx {
        KeyCtx {
            focus: self.focus,
            overlay: self.overlay,
            input_empty: self.input.is_empty(),
            input_lines: self.input.lines().len(),
            cursor_row: self.input.cursor().0,
            busy: self.busy,
        }
    }

    /// Handles a key; returns what to ask of the session.
    pub(super) fn key(&mut self, key: KeyEvent) -> Option<Input> {
        let action = keys::map(key, &self.key_ctx(), &mut self.pending_g);
        self.dirty = true;
        self.hint = None;
        self.act(action)
    }

    /// Scrolls by the mouse wheel (`up` towards older messages).
    pub(super) fn wheel(&mut self, up: bool) {
        self.act(if up {
            Action::ScrollUp(3)
        } else {
            Action::ScrollDown(3)
        });
        self.dirty = true;
    }

    /// Text pasted into the input.
    pub(super) fn paste(&mut self, text: &str) {
        self.focus = Focus::Input;
        self.input
            .insert_str(text.replace("\r\n", "\n").replace('\r', "\n"));
        self.dirty = true;
    }

    fn act(&mut self, action: Action) -> Option<Input> {
        match action {
            Action::Submit => return self.submit(),
            Action::Newline => self.input.insert_newline(),
            Action::Edit(k) => {
                self.input.input(k);
            }
            Action::TypeInInput(k) => {
                self.focus = Focus::Input;
                self.selected = None;
                self.input.input(k);
            }
            Action::CursorUp => self.input.move_cursor(CursorMove::Up),
            Action::CursorDown => self.input.move_cursor(CursorMove::Down),
            Action::ScrollUp(n) => self.scroll_by(isize::from(n as i16)),
            Action::ScrollDown(n) => self.scroll_by(-isize::from(n as i16)),
            Action::PageUp => self.scroll_by(self.page()),
            Action::PageDown => self.scroll_by(-self.page()),
            Action::Top => self.top(),
            Action::Bottom => {
                self.scroll = 0;
                if self.focus == Focus::Conversation && !self.cells.is_empty() {
                    self.selected = Some(self.cells.len() - 1);
                }
            }
            Action::SelectPrev | Action::SelectNext => {
                self.select(action == Action::SelectPrev);
            }
            Action::Toggle => self.toggle(),
            Action::HistoryPrev => self.history(true),
            Action::HistoryNext => self.history(false),
            Action::FocusNext => self.focus_next(),
            Action::FocusInput => {
                self.focus = Focus::Input;
                self.selected = None;
            }
            Action::PanelsOverlay => {
                self.overlay = Overlay::Panels;
                if self.board.is_empty() {
                    self.hint = Some("no panels yet".to_owned());
                }
            }
            Action::Help => self.overlay = Overlay::Help,
            Action::CloseOverlay => self.overlay = Overlay::None,
            Action::Yank => self.yank_selected(),
            Action::Interrupt => {}
            Action::ClearInput => self.set_input(""),
            Action::Quit => self.quit = true,
            Action::None => {}
        }
        None
    }

    fn page(&self) -> isize {
        isize::try_from(self.view.1.saturating_sub(2).max(1)).unwrap_or(1)
    }

    /// The conversation's height in rows at the current width (renders what was not).
    pub(super) fn total_height(&mut self) -> usize {
        let w = self.view.0;
        let theme = self.theme.clone();
        self.cells.iter_mut().map(|c| c.height(&theme, w)).sum()
    }

    fn scroll_by(&mut self, rows: isize) {
        // Past the top is clamped when the frame is drawn, which looks at the cells on
        // screen only.
        if rows >= 0 {
            self.scroll = self.scroll.saturating_add(rows.unsigned_abs());
        } else {
            self.scroll = self.scroll.saturating_sub(rows.unsigned_abs());
        }
    }

    fn top(&mut self) {
        self.scroll = self.total_height();
        if self.focus == Focus::Conversation && !self.cells.is_empty() {
            self.selected = Some(0);
        }
    }

    /// Rows from the end of the conversation to the end of cell `i`.
    fn rows_after(&mut self, i: usize) -> usize {
        let w = self.view.0;
        let theme = self.theme.clone();
        self.cells
            .iter_mut()
            .skip(i + 1)
            .map(|c| c.height(&theme, w))
            .sum()
    }

    fn select(&mut self, prev: bool) {
        if self.overlay == Overlay::Panels || self.focus == Focus::Panels {
            let n = self.board.panels().len();
            if n > 0 {
                self.panel = if prev {
                    self.panel.saturating_sub(1)
                } else {
                    (self.panel + 1).min(n - 1)
                };
            }
            return;
        }
        if self.cells.is_empty() {
            return;
        }
        let last = self.cells.len() - 1;
        let i = match self.selected {
            None => last,
            Some(i) if prev => i.saturating_sub(1),
            Some(i) => (i + 1).min(last),
        };
        self.selected = Some(i);
        self.scroll_to(i);
    }

    /// Scrolls so that cell `i` is on screen.
    fn scroll_to(&mut self, i: usize) {
        let w = self.view.0;
        let theme = self.theme.clone();
        let below = self.rows_after(i);
        let height = self.cells[i].height(&theme, w);
        let rows = self.view.1;
        if below < self.scroll {
            self.scroll = below;
        } else if below + height > self.scroll + rows {
            self.scroll = (below + height).saturating_sub(rows);
        }
    }

    /// `/show [N]`: expands the N-th tool call of the conversation (`None`: the last) and
    /// scrolls to it.
    fn show_tool(&mut self, n: Option<usize>) {
        let tools: Vec<usize> = (0..self.cells.len())
            .filter(|&i| matches!(self.cells[i].kind, Kind::Tool { .. }))
            .collect();
        let Some(&i) = n.map_or(tools.last(), |n| tools.get(n - 1)) else {
            let total = tools.len();
            self.push(Kind::Error(match n {
                Some(n) if total > 0 => {
                    format!("there is no tool call {n}: {total} so far (/show 1 to /show {total})")
                }
                _ => "no tool call yet in this conversation".to_owned(),
            }));
            return;
        };
        if let Kind::Tool { expanded, .. } = &mut self.cells[i].kind {
            *expanded = true;
        }
        self.cells[i].touch();
        self.scroll_to(i);
    }

    fn toggle(&mut self) {
        if let Some(cell) = self.selected.and_then(|i| self.cells.get_mut(i))
            && let Kind::Tool { expanded, .. } = &mut cell.kind
        {
            *expanded = !*expanded;
            cell.touch();
        }
    }

    fn focus_next(&mut self) {
        self.focus = match self.focus {
            Focus::Input if !self.cells.is_empty() => Focus::Conversation,
            Focus::Input | Focus::Conversation if !self.board.is_empty() => Focus::Panels,
            _ => Focus::Input,
        };
        self.selected = match self.focus {
            Focus::Conversation => Some(self.cells.len().saturating_sub(1)),
            _ => None,
        };
    }

    fn yank_selected(&mut self) {
        let text = if self.overlay == Overlay::Panels || self.focus == Focus::Panels {
            self.board.panels().get(self.panel).map(|p| {
                draw::lines(&p.widget, &Theme::plain(), 80)
                    .iter()
                    .map(render::Line::render)
                    .collect::<Vec<_>>()
                    .join("\n")
            })
        } else {
            self.selected
                .and_then(|i| self.cells.get(i))
                .map(Cell::text)
        };
        match text {
            Some(t) => {
                self.hint = Some(format!(
                    "yanked {} bytes to the clipboard (OSC 52)",
                    t.len()
                ));
                self.yank = Some(t);
            }
            None => self.hint = Some("nothing selected to yank (Tab to a message)".to_owned()),
        }
    }

    fn history(&mut self, back: bool) {
        if self.history.is_empty() {
            return;
        }
        let at = match (self.history_at, back) {
            (None, true) => Some(self.history.len() - 1),
            (None, false) => None,
            (Some(i), true) => Some(i.saturating_sub(1)),
            (Some(i), false) if i + 1 < self.history.len() => Some(i + 1),
            (Some(_), false) => None,
        };
        self.history_at = at;
        let text = at
            .and_then(|i| self.history.get(i))
            .cloned()
            .unwrap_or_default();
        self.set_input(&text);
    }

    fn submit(&mut self) -> Option<Input> {
        let text = self.input_text();
        if text.trim().is_empty() {
            return None;
        }
        if self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        self.history_at = None;
        self.set_input("");
        if self.asking.take().is_some() {
            self.hint = None;
            self.push(Kind::User(text.clone()));
            return Some(Input::Answer(
                crate::app::harness::conversation::allow::is_yes(&text),
            ));
        }
        let trimmed = text.trim();
        if let Some(cmd) = trimmed.strip_prefix('/')
            && !cmd.starts_with('/')
        {
            return self.slash(trimmed);
        }
        if self.busy {
            self.hint = Some("a turn is running: wait, or Ctrl-C to stop it".to_owned());
            self.set_input(&text);
            return None;
        }
        let message = trimmed.strip_prefix('/').unwrap_or(trimmed).to_owned();
        self.push(Kind::User(message.clone()));
        self.scroll = 0;
        self.busy = true;
        Some(Input::Send(message))
    }

    /// A slash command (`line` starts with one `/`): the screen's own (`/help`, `/cost`,
    /// `/clear`, `/quit`) are done here, those about the session's set-up are asked of the
    /// session thread.
    fn slash(&mut self, line: &str) -> Option<Input> {
        let busy = "a turn is running: wait, or Ctrl-C to stop it";
        match Slash::parse(line)? {
            Slash::Quit => self.quit = true,
            Slash::Help => self.overlay = Overlay::Help,
            Slash::Clear if !self.busy => {
                self.cells.clear();
                self.scroll = 0;
                self.selected = None;
                self.notice("the conversation is forgotten; the transcript and the limits go on");
                return Some(Input::Command(Slash::Clear));
            }
            Slash::Cost => {
                let t = &self.totals;
                let sources: Vec<String> = t.cost.sources.iter().map(ToString::to_string).collect();
                let text = format!(
                    "model calls {}; tokens: {} input ({} cached), {} output; cost {}{}",
                    t.model_calls,
                    t.input_tokens,
                    t.cached_input_tokens,
                    t.output_tokens,
                    t.cost,
                    if sources.is_empty() {
                        String::new()
                    } else {
                        format!(" (prices: {})", sources.join(", "))
                    }
                );
                self.notice(&text);
            }
            Slash::Show(n) => self.show_tool(n),
            Slash::Unknown(hint) => self.push(Kind::Error(hint)),
            Slash::Clear => self.hint = Some(busy.into()),
            _ if self.busy => self.hint = Some(busy.into()),
            cmd @ (Slash::Skills
            | Slash::Skill(_)
            | Slash::Agents
            | Slash::Policy
            | Slash::Allow(_)) => {
                return Some(Input::Command(cmd));
            }
        }
        None
    }

    /// Shows what the session thread says.
    pub(super) fn session(&mut self, ev: FromSession) {
        self.dirty = true;
        match ev {
            FromSession::Stream(provider::Event::TextDelta { text }) => self.stream(&text),
            FromSession::Stream(provider::Event::Restarted) => {
                if let Some(i) = self.streaming() {
                    self.cells.remove(i);
                }
            }
            FromSession::Stream(_) => {}
            FromSession::ToolStarted(call) => {
                self.started.push((call.id.clone(), Instant::now()));
                self.push(Kind::Tool {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    args: summary(&call.arguments),
                    end: None,
                    expanded: false,
                    running: 0,
                });
            }
            FromSession::Recorded(body) => self.recorded(*body),
            FromSession::Placements(ps) => {
                let now = Instant::now();
                for p in ps {
                    if let Placement::Inline(w) = &p {
                        self.push(Kind::Widget(w.clone()));
                    }
                    // The tool checked the board already: this cannot fail.
                    let _ = self.board.apply(&p, now);
                }
            }
            FromSession::TurnEnded(end) => {
                self.busy = false;
                self.started.clear();
                if let Some(i) = self.streaming() {
                    if let Kind::Assistant { done, .. } = &mut self.cells[i].kind {
                        *done = true;
                    }
                    self.cells[i].touch();
                }
                match end {
                    TurnEnd::Interrupted => self.notice(
                        "interrupted: the model call or tool call was stopped; the session goes on",
                    ),
                    TurnEnd::Limit(hit) => {
                        self.notice(&format!("limit {}: {}", hit.limit.as_str(), hit.detail))
                    }
                    _ => {}
                }
            }
            FromSession::Note(n) => self.notice(&n),
            FromSession::Shown(lines) => self.push(Kind::Shown(lines)),
            FromSession::Ask(question) => {
                self.notice(&question);
                self.hint = Some(question.clone());
                self.asking = Some(question);
            }
            FromSession::Failed(why) => {
                self.busy = false;
                self.push(Kind::Error(why));
            }
        }
    }

    fn streaming(&self) -> Option<usize> {
        match self.cells.last() {
            Some(Cell {
                kind: Kind::Assistant { done: false, .. },
                ..
            }) => Some(self.cells.len() - 1),
            _ => None,
        }
    }

    fn stream(&mut self, delta: &str) {
        match self.streaming() {
            Some(i) => {
                let old = self.cells[i].height(&self.theme, self.view.0);
                if let Kind::Assistant { text, .. } = &mut self.cells[i].kind {
                    text.push_str(delta);
                }
                self.cells[i].touch();
                if self.scroll > 0 {
                    let new = self.cells[i].height(&self.theme, self.view.0);
                    self.scroll += new.saturating_sub(old);
                }
            }
            None => self.push(Kind::Assistant {
                text: delta.to_owned(),
                done: false,
            }),
        }
    }

    fn recorded(&mut self, body: EventBody) {
        self.totals.add(&body);
        match body {
            EventBody::Message(m) if m.role == Author::Assistant => match self.streaming() {
                Some(i) => {
                    self.cells[i].kind = Kind::Assistant {
                        text: m.text,
                        done: true,
                    };
                    self.cells[i].touch();
                }
                None if !m.text.is_empty() => self.push(Kind::Assistant {
                    text: m.text,
                    done: true,
                }),
                None => {}
            },
            EventBody::Denial(d) => {
                self.push(Kind::Denial(format!(
                    "{} (missing {})",
                    d.explanation,
                    d.missing.as_str()
                )));
            }
            EventBody::ToolResult(r) => {
                let end = ToolEnd {
                    state: r.state,
                    ms: r.duration_ms,
                    output: r.output,
                };
                self.started.retain(|(id, _)| *id != r.call_id);
                let cell = self.cells.iter_mut().rev().find(
                    |c| matches!(&c.kind, Kind::Tool { id, end: None, .. } if *id == r.call_id),
                );
                if let Some(cell) = cell {
                    if let Kind::Tool { end: slot, .. } = &mut cell.kind {
                        *slot = Some(end);
                    }
                    cell.touch();
                }
            }
            EventBody::ModelCallEnded(m) => {
                if let Some(i) = self.streaming() {
                    if let Kind::Assistant { done, .. } = &mut self.cells[i].kind {
                        *done = true;
                    }
                    self.cells[i].touch();
                }
                if let Some(e) = &m.error {
                    self.push(Kind::Error(format!(
                        "provider {} error: {}",
                        e.category, e.message
                    )));
                }
                if let Some(r) = &m.refusal {
                    let text = match (&r.text, &r.detail) {
                        (t, Some(d)) if t.is_empty() => d.clone(),
                        (t, Some(d)) => format!("{t} ({d})"),
                        (t, None) => t.clone(),
                    };
                    self.push(Kind::Refusal(text));
                }
                for note in &m.notes {
                    self.push(Kind::Notice(note.clone()));
                }
            }
            _ => {}
        }
    }

    /// Removes expired panels and counts the seconds of running tool calls; true when the
    /// screen changed.
    pub(super) fn tick(&mut self, now: Instant) -> bool {
        let mut changed = self.board.expire(now);
        if changed {
            self.panel = self.panel.min(self.board.panels().len().saturating_sub(1));
            if self.board.is_empty() && self.focus == Focus::Panels {
                self.focus = Focus::Input;
            }
            self.dirty = true;
        }
        for (id, since) in &self.started {
            let secs = now.saturating_duration_since(*since).as_secs();
            // Running calls are at the end of the conversation.
            let cell = self
                .cells
                .iter_mut()
                .rev()
                .find(|c| matches!(&c.kind, Kind::Tool { id: i, end: None, .. } if i == id));
            if let Some(cell) = cell
                && let Kind::Tool { running, .. } = &mut cell.kind
                && *running != secs
            {
                *running = secs;
                cell.touch();
                self.dirty = true;
                changed = true;
            }
        }
        changed
    }
}

/// A tool call's arguments in a few words (as the inline REPL shows them).
fn summary(arguments: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null);
    for key in ["command", "path", "pattern", "name", "script"] {
        if let Some(s) = v.get(key).and_then(serde_json::Value::as_str) {
            return s.to_owned();
        }
    }
    arguments.to_owned()
}
