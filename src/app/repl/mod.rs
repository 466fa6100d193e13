//! `bee repl`: chat with a sandboxed agent in the terminal, on the same session core as
//! `bee run` ([`crate::session`]).
//!
//! Set-up refuses exactly as `bee run` does, before any model call: 64 without a policy or
//! `--host` (or with both), 65/66 for a bad or missing file, 69 when the kernel cannot
//! enforce the policy, 77 when bee lacks a privilege or the API key is missing or refused.
//! Then every line the user types is a turn; lines that start with `/` are commands
//! ([`slash`]). The session writes the same records as an episode — a transcript flushed
//! after every event, the metrics store, the run summary — so `bee metrics` reports it and a
//! killed terminal loses nothing.

mod approve;
mod editor;
mod stream;
mod view;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use editor::{Input as Line, LineEditor};
use slash::{COMMANDS, KEYS, Slash};
use view::View;

use super::Exit;
use super::conversation::{
    Chat, Input, MIN_SIZE, Prepared, Reply, TurnInterrupt, UNCONFINED, allow, commands, prepare,
    slash,
};
use super::setup::Refused;
use crate::agents::AgentExecutor;
use crate::config::Flags;
use crate::panels::Surface;
use crate::records::LimitKind;
use crate::records::{Enforcement, nearest_rank};
use crate::render::{self, Role};
use crate::session::{Session, SessionError, ToolExecutor, TurnEnd, Update};

/// Arguments of `bee repl`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    flags: Flags,
    /// Opens the full-screen TUI (a build with the `tui` feature): the conversation, an
    /// input box, a status line and the model's panels. Without a terminal of at least
    /// 40×10 the inline REPL runs instead, with a note.
    #[arg(long)]
    tui: bool,
    /// Forces the inline REPL, whatever else asks for the TUI (`--tui`, `repl.tui = true`).
    #[arg(long)]
    no_tui: bool,
    /// Asks `run? [y/N]` before every `shell` call, every call with a path outside the
    /// workspace and every `agent` call (`repl.approve = true` in a configuration file);
    /// a call not approved does not run. Inline REPL only; without a terminal on standard
    /// input every such call is refused.
    #[arg(long)]
    approve: bool,
}

/// Runs `bee repl` for this process.
pub fn run(args: &Args) -> Exit {
    match repl(args) {
        Ok(()) => Exit::Ok,
        Err(Refused(status, why)) => {
            eprintln!("bee repl: {why}");
            status
        }
    }
}

fn repl(args: &Args) -> Result<(), Refused> {
    // `repl.tui` from the configuration; a configuration that does not resolve is reported
    // by `prepare`, with the same refusal as without it.
    let config = crate::config::Env::from_process()
        .ok()
        .and_then(|env| crate::config::Config::resolve_in(&args.flags, &env).ok());
    let configured = |key: fn(&crate::config::Config) -> Option<bool>| {
        config.as_ref().and_then(key).unwrap_or(false)
    };
    let asked_tui =
        (args.tui || configured(|c| c.repl_tui.as_ref().map(|s| s.value))) && !args.no_tui;
    let approve = args.approve || configured(|c| c.repl_approve.as_ref().map(|s| s.value));
    if approve && asked_tui {
        return Err(Refused(
            Exit::Usage,
            "--approve (repl.approve) asks its questions in the inline REPL only, and the \
             full-screen TUI was asked for (--tui or repl.tui): pass --no-tui, or drop \
             --approve"
                .to_owned(),
        ));
    }
    let tui = asked_tui && full_screen_here();
    let surface = if tui {
        Surface::Panels
    } else {
        Surface::Inline
    };
    let (prepared, executor) = prepare(&args.flags, surface)?;
    #[cfg(feature = "tui")]
    if tui {
        return super::tui::run(prepared, executor);
    }
    inline(&prepared, executor, approve)
}

/// Whether the full-screen TUI can run in this process; when not, says why in one line and
/// the inline REPL runs instead.
fn full_screen_here() -> bool {
    let size = terminal_size::terminal_size().map(|(w, h)| (w.0, h.0));
    let why = fallback(
        cfg!(feature = "tui"),
        std::io::stdout().is_terminal() && std::io::stdin().is_terminal(),
        std::env::var("TERM").ok().as_deref(),
        size,
    );
    if let Some(why) = &why {
        eprintln!("bee repl: {why}; using the inline REPL");
    }
    why.is_none()
}

/// Whether the inline REPL streams answers: only to a terminal that takes cursor movements,
/// for the live part of an answer is erased and drawn again. Elsewhere (`TERM` dumb or
/// unset, an output that is not a terminal) an answer is printed once, complete, and nothing
/// moves the cursor. `NO_COLOR` drops colours only: the answer still streams.
fn streams(stdout_terminal: bool, term: Option<&str>) -> bool {
    stdout_terminal && term.is_some_and(|t| !t.is_empty() && t != "dumb")
}

/// Why the full-screen TUI cannot run, if it cannot: a build without it, no terminal,
/// `TERM=dumb`, or a terminal smaller than [`MIN_SIZE`].
fn fallback(
    built: bool,
    terminal: bool,
    term: Option<&str>,
    size: Option<(u16, u16)>,
) -> Option<String> {
    if !built {
        return Some(
            "--tui needs a bee built with the `tui` feature (cargo build --features tui)".into(),
        );
    }
    if !terminal {
        return Some("--tui needs a terminal, and input or output is not one".into());
    }
    if term.is_none_or(|t| t == "dumb" || t.is_empty()) {
        return Some("--tui needs a capable terminal, and TERM is dumb or unset".into());
    }
    match size {
        Some((w, h)) if w >= MIN_SIZE.0 && h >= MIN_SIZE.1 => None,
        Some((w, h)) => Some(format!(
            "--tui needs at least {}×{} and the terminal is {w}×{h}",
            MIN_SIZE.0, MIN_SIZE.1
        )),
        None => Some("--tui cannot tell the terminal's size".into()),
    }
}

/// The inline REPL.
fn inline(p: &Prepared, executor: Box<dyn ToolExecutor>, approve: bool) -> Result<(), Refused> {
    let enforcement = p.enforcement;
    let policy_file = &p.policy_file;
    let stdout_terminal = std::io::stdout().is_terminal();
    let theme = render::choose(p.theme.clone(), stdout_terminal, &|k| std::env::var(k).ok());
    let view = View::new(
        Box::new(std::io::stdout()),
        theme,
        streams(stdout_terminal, std::env::var("TERM").ok().as_deref()),
        p.outbox.clone(),
    );
    for notice in p.start_notices() {
        view.styled(Role::Notice, &notice);
    }
    if enforcement == Enforcement::Host {
        view.styled(Role::Denial, UNCONFINED);
    }
    if p.agents {
        for problem in p.roles.problems() {
            view.styled(
                Role::Notice,
                &format!(
                    "a role file is invalid (an `agent` call for it will be refused): {problem}"
                ),
            );
        }
        for note in p.roles.notes() {
            view.styled(Role::Muted, note);
        }
    }
    let observer = |u: Update<'_>| view.update(u);
    let subagent_events = |id: &str, u: Update<'_>| view.subagent(id, u);
    let delegation = p.delegation(&subagent_events);
    let executor: Box<dyn ToolExecutor + '_> = if p.agents {
        Box::new(AgentExecutor::new(executor, &delegation, p.caller()))
    } else {
        executor
    };
    let terminal_in = std::io::stdin().is_terminal();
    let ask = |what: &str| {
        // The model wrote it: its control characters are shown, never obeyed.
        view.styled(
            Role::Notice,
            &format!("approve: {}", render::sanitize(what)),
        );
        let answer = view.ask(&view.theme().paint(Role::Prompt, approve::QUESTION));
        let yes = answer.as_deref().is_some_and(allow::is_yes);
        if !yes {
            view.styled(Role::Muted, "declined: the call does not run");
        }
        yes
    };
    let executor: Box<dyn ToolExecutor + '_> = if approve {
        view.styled(
            Role::Notice,
            if terminal_in {
                "--approve: bee asks before every shell command, every path outside the \
                 workspace and every subagent"
            } else {
                "--approve: standard input is not a terminal, so every shell command, path \
                 outside the workspace and subagent is refused without asking"
            },
        );
        let ask: approve::Ask<'_> = if terminal_in { Some(&ask) } else { None };
        Box::new(approve::Approving::new(executor, &p.spec.workspace, ask))
    } else {
        executor
    };
    let (mut chat, loaded) = Chat::start(p, executor.as_ref(), &observer, &|note| {
        view.styled(Role::Notice, note);
    })
    .map_err(|e| Refused(Exit::Software, e.to_string()))?;

    let turn = TurnInterrupt::default();
    let handler = turn.clone();
    ctrlc::set_handler(move || handler.raise())
        .map_err(|e| e.to_string())
        .and_then(|()| turn.watch_sigterm().map_err(|e| e.to_string()))
        .map_err(|e| {
            Refused(
                Exit::Software,
                format!("cannot install the Ctrl-C and SIGTERM handlers: {e}"),
            )
        })?;
    let mut editor = LineEditor::new(editor::history_path(&p.env))
        .map_err(|e| Refused(Exit::Software, format!("the terminal: {e}")))?;
    banner(
        &view,
        chat.session(),
        policy_file,
        enforcement,
        editor.history(),
    );
    view.styled(Role::Muted, &loaded);

    let terminated = converse(&mut chat, &mut editor, &turn, &view)
        .map_err(|e| Refused(Exit::Software, e.to_string()))?;
    if let Some(e) = &editor.history_error {
        view.styled(Role::Muted, &format!("the history could not be saved: {e}"));
    }
    let closing = chat
        .finish(terminated)
        .map_err(|e| Refused(Exit::Software, e.to_string()))?;
    view.styled(Role::Muted, &closing);
    Ok(())
}

/// Reads lines and gives them to the chat until the user quits; true when SIGTERM ended
/// the session.
///
/// # Errors
/// When the transcript refuses an event (the session cannot go on).
fn converse(
    chat: &mut Chat<'_>,
    editor: &mut LineEditor,
    turn: &TurnInterrupt,
    view: &View,
) -> Result<bool, SessionError> {
    let mut pending = None;
    loop {
        let input = match pending.take() {
            Some(input) => input,
            None => {
                let prompt = view.theme().paint(Role::Prompt, "› ");
                let line = match editor.read(&prompt) {
                    Ok(Line::Line(l)) => l,
                    Ok(Line::Quit) => return Ok(false),
                    Err(e) => {
                        view.styled(Role::Error, &format!("the terminal failed: {e}"));
                        return Ok(false);
                    }
                };
                if line.trim().is_empty() {
                    continue;
                }
                match Slash::parse(&line) {
                    Some(Slash::Quit) => return Ok(false),
                    Some(
                        cmd @ (Slash::Help | Slash::Cost | Slash::Show(_) | Slash::Unknown(_)),
                    ) => {
                        draw_only(&cmd, chat.session(), view);
                        continue;
                    }
                    Some(cmd) => Input::Command(cmd),
                    None => Input::Send(line.trim().strip_prefix('/').unwrap_or(&line).to_owned()),
                }
            }
        };
        let sent = matches!(input, Input::Send(_));
        let replies = chat.handle(input, turn);
        if sent {
            view.turn_ended();
        }
        for reply in replies? {
            if let Some(answer) = draw(reply, editor, view) {
                pending = Some(answer);
            }
        }
        if sent && turn.terminating() {
            view.styled(Role::Notice, "terminated (SIGTERM): the session ends");
            return Ok(true);
        }
    }
}

/// Draws one of the chat's replies; a question is asked on the prompt line, and its answer
/// is what to give the chat next.
fn draw(reply: Reply, editor: &mut LineEditor, view: &View) -> Option<Input> {
    match reply {
        Reply::Shown(shown) => view.show(&shown),
        Reply::SkillLoaded { text, note } => {
            view.markdown(&text);
            view.styled(Role::Notice, &note);
        }
        Reply::Ask(question) => {
            let answer = match editor.read(&view.theme().paint(Role::Prompt, question)) {
                Ok(Line::Line(l)) => l,
                Ok(Line::Quit) | Err(_) => String::new(),
            };
            return Some(Input::Answer(allow::is_yes(&answer)));
        }
        Reply::Cleared => view.styled(
            Role::Notice,
            "the conversation is forgotten; the transcript and the limits go on",
        ),
        Reply::TurnEnded(TurnEnd::Interrupted) => view.styled(
            Role::Notice,
            "interrupted: the model call or tool call was stopped; the session goes on",
        ),
        Reply::TurnEnded(TurnEnd::Limit(hit)) if hit.limit != LimitKind::MaxOutputTokens => {
            view.styled(
                Role::Notice,
                "the session's limit is reached: no more model calls (/cost shows what was \
                 spent; /quit ends the session)",
            );
        }
        Reply::TurnEnded(_) => {}
    }
    None
}

/// The commands that only draw: `/help`, `/cost`, `/show N` and an unknown one.
fn draw_only(cmd: &Slash, session: &Session<'_>, view: &View) {
    match cmd {
        Slash::Help => {
            view.styled(Role::Heading, "Commands");
            for (c, what) in COMMANDS {
                view.line(&format!("  {}  {what}", view.theme().paint(Role::Code, c)));
            }
            view.styled(Role::Heading, "Keys");
            for (k, what) in KEYS {
                view.line(&format!("  {}  {what}", view.theme().paint(Role::Code, k)));
            }
        }
        Slash::Cost => show_cost(session, view),
        Slash::Show(n) => view.show_call(*n),
        Slash::Unknown(hint) => view.styled(Role::Error, hint),
        _ => {}
    }
}

fn show_cost(session: &Session<'_>, view: &View) {
    let t = session.totals();
    view.line(&format!(
        "model calls {}  tokens: {} input ({} cached), {} output ({} reasoning)",
        t.model_calls, t.input_tokens, t.cached_input_tokens, t.output_tokens, t.reasoning_tokens
    ));
    if t.unknown_token_calls > 0 {
        view.styled(
            Role::Muted,
            &format!(
                "{} call(s) reported no token counts: the sums are lower bounds",
                t.unknown_token_calls
            ),
        );
    }
    let sources: Vec<String> = t.cost.sources.iter().map(ToString::to_string).collect();
    view.line(&format!(
        "cost {}{}",
        t.cost,
        if sources.is_empty() {
            String::new()
        } else {
            format!(" (prices: {})", sources.join(", "))
        }
    ));
    let (mut total, mut first) = view.latencies();
    total.sort_unstable();
    first.sort_unstable();
    let ms = |v: &[u64], p| nearest_rank(v, p).map_or("-".to_owned(), |x| format!("{x} ms"));
    view.line(&format!(
        "model latency p50 {} / p95 {}; first token p50 {}",
        ms(&total, 50),
        ms(&total, 95),
        ms(&first, 50)
    ));
}

fn banner(
    view: &View,
    session: &Session<'_>,
    policy: &Option<PathBuf>,
    enforcement: Enforcement,
    history: Option<&Path>,
) {
    let confined = match (enforcement, policy) {
        (Enforcement::Kernel, Some(p)) => format!("policy {} (kernel-enforced)", p.display()),
        _ => "--host (no kernel scope)".to_owned(),
    };
    view.styled(
        Role::Heading,
        &format!(
            "bee repl — {} via {}",
            session.model().provider.model(),
            session.model().kind
        ),
    );
    view.styled(
        Role::Muted,
        &format!(
            "{confined}; workspace {}; transcript {}",
            session.spec().workspace.display(),
            session.transcript().display()
        ),
    );
    let _ = history;
    view.styled(
        Role::Muted,
        "/help for commands; Ctrl-C stops a turn; Ctrl-D or /quit ends the session",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_stream_only_to_a_terminal_that_moves_its_cursor() {
        assert!(streams(true, Some("xterm-256color")));
        assert!(!streams(true, Some("dumb")));
        assert!(!streams(true, None));
        assert!(!streams(true, Some("")));
        assert!(!streams(false, Some("xterm")));
    }

    #[test]
    fn the_tui_falls_back_with_a_reason() {
        let ok = fallback(true, true, Some("xterm-256color"), Some((80, 24)));
        assert_eq!(ok, None);
        let why = |b, t, term, size| fallback(b, t, term, size).unwrap_or_default();
        assert!(why(false, true, Some("xterm"), Some((80, 24))).contains("--features tui"));
        assert!(why(true, false, Some("xterm"), Some((80, 24))).contains("needs a terminal"));
        assert!(why(true, true, Some("dumb"), Some((80, 24))).contains("TERM is dumb"));
        assert!(why(true, true, None, Some((80, 24))).contains("TERM"));
        assert!(why(true, true, Some("xterm"), Some((39, 24))).contains("40×10"));
        assert!(why(true, true, Some("xterm"), Some((80, 9))).contains("is 80×9"));
        assert_eq!(fallback(true, true, Some("xterm"), Some((40, 10))), None);
    }
}
