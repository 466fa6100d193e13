//! `bee repl --tui`: the full-screen chat (feature `tui`) on the same session core, set-up
//! and records as the inline REPL.
//!
//! Two threads: the session's, which runs turns and forwards what it records
//! ([`app::FromSession`]), and this one, which reads keys and draws. A frame is drawn only
//! when something changed, at most every [`FRAME`] (streamed text arrives at the terminal's
//! pace, not the model's), and ratatui writes only the cells that differ.
//!
//! - [`keys`]: the key map; [`app`]: the state; [`cells`]: the conversation's cells;
//!   [`draw`]: a frame; [`terminal`]: the terminal's modes and their restoration; [`style`]:
//!   the theme's roles as ratatui styles.

pub(crate) mod app;
pub mod bench;
pub(crate) mod cells;
pub(crate) mod draw;
pub(crate) mod keys;
mod style;
mod terminal;
#[cfg(test)]
mod tests;

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyEventKind, MouseEventKind};

use app::{App, FromSession, Status};
use terminal::Screen;

use super::Exit;
use super::harness::conversation::{
    Chat, Input, Prepared, Reply, TurnInterrupt, UNCONFINED, write_summary,
};
use super::harness::preflight::Refused;
use crate::agents::AgentExecutor;
use crate::render;
use crate::session::{ToolExecutor, Update};

/// The shortest time between two frames (about 60 a second).
pub(crate) const FRAME: Duration = Duration::from_millis(16);

/// Runs the TUI on the prepared session; returns when the user quits.
pub(crate) fn run(p: Prepared, executor: Box<dyn ToolExecutor>) -> Result<(), Refused> {
    let theme = render::choose(p.theme.clone(), std::io::stdout().is_terminal(), &|k| {
        std::env::var(k).ok()
    });
    let status = Status {
        model: p.model.provider.model().to_owned(),
        confinement: confinement(p.policy_file.as_deref(), p.policy.as_ref()),
    };
    let mut app = App::new(theme, status);
    if p.policy_file.is_none() {
        // Said out loud at the start, as the inline REPL does, not only in the status line.
        app.push_unconfined(UNCONFINED);
    }
    for notice in p.start_notices() {
        app.notice(&notice);
    }
    let term = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(&term))
            .map_err(|e| Refused(Exit::Software, format!("cannot watch for SIGTERM: {e}")))?;
    }
    let interrupt = TurnInterrupt::default();
    let (to_ui, from_session) = mpsc::channel();
    let (to_session, from_ui) = mpsc::channel();
    let ended = std::thread::scope(|scope| {
        let (prepared, turns) = (&p, &interrupt);
        let session = scope.spawn(move || converse(prepared, executor, &from_ui, &to_ui, turns));
        let shown = show(&mut app, &from_session, &to_session, &interrupt, &term);
        // The session thread ends when its channel closes; a running turn is stopped.
        interrupt.raise();
        drop(to_session);
        let ended = session
            .join()
            .unwrap_or_else(|_| Err("the session thread failed".to_owned()));
        shown
            .map_err(|e| format!("the terminal failed: {e}"))
            .and(ended)
    });
    write_summary(&p.run_dir);
    match ended {
        Ok(line) => {
            println!("{line}");
            Ok(())
        }
        Err(why) => Err(Refused(Exit::Software, why)),
    }
}

/// The screen's loop: keys in, frames out, until the user quits or SIGTERM.
fn show(
    app: &mut App,
    from_session: &Receiver<FromSession>,
    to_session: &Sender<Input>,
    interrupt: &TurnInterrupt,
    term: &AtomicBool,
) -> std::io::Result<()> {
    let mut screen = Screen::enter()?;
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    terminal.clear()?;
    let mut last = Instant::now() - FRAME;
    let mut session_gone = false;
    let mut drawn = false;
    while !app.quit && !term.load(Ordering::Relaxed) {
        loop {
            match from_session.try_recv() {
                Ok(ev) => app.session(ev),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    if !std::mem::replace(&mut session_gone, true) {
                        app.session(FromSession::Failed(
                            "the session has stopped (its records say why); q quits".to_owned(),
                        ));
                    }
                    break;
                }
            }
        }
        app.tick(Instant::now());
        if app.dirty && last.elapsed() >= FRAME {
            terminal.draw(|f| draw::draw(f, app))?;
            if !std::mem::replace(&mut drawn, true) {
                panic_if_asked();
            }
            app.dirty = false;
            last = Instant::now();
            if let Some(text) = app.yank.take() {
                terminal::osc52(&mut std::io::stdout(), &text)?;
            }
        }
        let wait = if app.dirty {
            FRAME.saturating_sub(last.elapsed())
        } else {
            Duration::from_millis(50)
        };
        if !event::poll(wait)? {
            continue;
        }
        match event::read()? {
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                let busy = app.busy;
                let before = app.quit;
                let ask = app.key(k);
                if busy && !before && is_ctrl_c(&k) {
                    interrupt.raise();
                }
                if let Some(ask) = ask
                    && to_session.send(ask).is_err()
                {
                    app.notice("the session has ended");
                }
            }
            Event::Mouse(m) => match m.kind {
                MouseEventKind::ScrollUp => app.wheel(true),
                MouseEventKind::ScrollDown => app.wheel(false),
                _ => {}
            },
            Event::Paste(text) => app.paste(&text),
            Event::Resize(..) => app.dirty = true,
            _ => {}
        }
    }
    screen.restore();
    Ok(())
}

/// The variable that makes a debug build panic after the TUI's first frame.
#[cfg(debug_assertions)]
const PANIC_VAR: &str = "BEE_TEST_TUI_PANIC";

/// A test hook: with [`PANIC_VAR`] set, a debug build panics once the TUI has drawn its first
/// frame (the terminal in raw mode, on the alternate screen), so that `tests/tui_pty.rs` can
/// show the panic hook leaves the real terminal usable. A release build has no such hook and
/// ignores the variable.
#[cfg(debug_assertions)]
#[expect(clippy::panic, reason = "a deliberate panic, asked for by a test")]
fn panic_if_asked() {
    if std::env::var_os(PANIC_VAR).is_some() {
        panic!("{PANIC_VAR} is set: a deliberate panic inside the TUI");
    }
}

/// Release builds: nothing (see the debug build's test hook).
#[cfg(not(debug_assertions))]
fn panic_if_asked() {}

fn is_ctrl_c(k: &event::KeyEvent) -> bool {
    k.code == event::KeyCode::Char('c') && k.modifiers.contains(event::KeyModifiers::CONTROL)
}

/// The session's thread: starts the session, runs a turn for each message, finishes the
/// session when the screen closes. Returns the closing line.
fn converse(
    p: &Prepared,
    executor: Box<dyn ToolExecutor>,
    from_ui: &Receiver<Input>,
    to_ui: &Sender<FromSession>,
    interrupt: &TurnInterrupt,
) -> Result<String, String> {
    // Subagents' work shows as one note when each ends; their transcripts have the rest.
    let subagent_events = |id: &str, u: Update<'_>| {
        if let Update::Recorded(e) = u
            && let crate::records::EventBody::EpisodeFinished(f) = &e.body
        {
            let _ = to_ui.send(FromSession::Note(format!(
                "subagent {id} finished: {}",
                f.outcome.as_str()
            )));
        }
    };
    let delegation = p.delegation(&subagent_events);
    let executor: Box<dyn ToolExecutor + '_> = if p.agents {
        Box::new(AgentExecutor::new(executor, &delegation, p.caller()))
    } else {
        executor
    };
    let outbox = p.outbox.clone();
    let observer = |u: Update<'_>| {
        let ev = match u {
            Update::Stream(e) => FromSession::Stream(e.clone()),
            Update::ToolStarted(c) => FromSession::ToolStarted(c.clone()),
            Update::Recorded(e) => {
                let is_result = matches!(e.body, crate::records::EventBody::ToolResult(_));
                let _ = to_ui.send(FromSession::Recorded(Box::new(e.body.clone())));
                if is_result {
                    let placed = outbox.take();
                    if !placed.is_empty() {
                        let _ = to_ui.send(FromSession::Placements(placed));
                    }
                }
                return;
            }
        };
        let _ = to_ui.send(ev);
    };
    let (mut chat, loaded) = Chat::start(p, executor.as_ref(), &observer, &|note| {
        let _ = to_ui.send(FromSession::Note(note.to_owned()));
    })
    .map_err(|e| e.to_string())?;
    let _ = to_ui.send(FromSession::Note(loaded));
    while let Ok(input) = from_ui.recv() {
        let sent = matches!(input, Input::Send(_));
        let replies = match chat.handle(input, interrupt) {
            Ok(replies) => replies,
            Err(e) if sent => {
                let _ = to_ui.send(FromSession::Failed(e.to_string()));
                return Err(e.to_string());
            }
            Err(e) => return Err(e.to_string()),
        };
        for reply in replies {
            let ev = match reply {
                Reply::Shown(shown) => FromSession::Shown(shown),
                Reply::SkillLoaded { note, .. } => FromSession::Note(note),
                Reply::Ask(question) => FromSession::Ask(question.trim().to_owned()),
                Reply::TurnEnded(end) => FromSession::TurnEnded(end),
                // The screen forgot its side when it asked.
                Reply::Cleared => continue,
            };
            let _ = to_ui.send(ev);
        }
    }
    chat.finish(false).map_err(|e| e.to_string())
}

/// The status line's confinement: the policy's `name` (its file's name when it has none),
/// kernel-enforced, or `--host`.
fn confinement(
    file: Option<&std::path::Path>,
    policy: Option<&bee_core::CompiledPolicy>,
) -> String {
    let Some(f) = file else {
        return "--host (not enforced)".to_owned();
    };
    let named = policy.and_then(|p| p.name.clone());
    let name = named.unwrap_or_else(|| {
        f.file_name().map_or_else(
            || f.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    });
    format!("policy {name} (kernel-enforced)")
}
