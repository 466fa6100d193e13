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

use std::sync::Arc;

use editor::{Input, LineEditor};
use slash::{COMMANDS, KEYS, Slash};
use view::View;

use super::Exit;
use super::conversation::{
    MIN_SIZE, Prepared, TurnInterrupt, UNCONFINED, allow, closing, commands, loaded, prepare,
    project_instructions, slash, write_summary,
};
use super::setup::Refused;
use crate::agents::AgentExecutor;
use crate::config::Flags;
use crate::panels::Surface;
use crate::records::LimitKind;
use crate::records::{Enforcement, Outcome, nearest_rank};
use crate::render::{self, Role};
use crate::session::{Session, ToolExecutor, TurnEnd, Update};

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
    let (policy_file, run_dir) = (&p.policy_file, &p.run_dir);
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
    let mut session = Session::start(
        p.spec.clone(),
        p.model.clone(),
        executor.as_ref(),
        &p.records_dir,
        Some(Arc::clone(&p.store)),
        &observer,
    )
    .map_err(|e| Refused(Exit::Software, e.to_string()))?;
    let instructions = project_instructions(&mut session, executor.as_ref(), &|note| {
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
    banner(&view, &session, policy_file, enforcement, editor.history());
    view.styled(Role::Muted, &loaded(&instructions, &p.skills));

    let ctx = Ctx {
        prepared: p,
        view: &view,
        run_dir,
        executor: executor.as_ref(),
    };
    let outcome = converse(&mut session, &mut editor, &turn, &ctx)?;
    if let Some(e) = &editor.history_error {
        view.styled(Role::Muted, &format!("the history could not be saved: {e}"));
    }
    let transcript = session.transcript().to_owned();
    let finished = session
        .finish(outcome, None)
        .map_err(|e| Refused(Exit::Software, e.to_string()))?;
    write_summary(run_dir);
    view.styled(Role::Muted, &closing(&finished.totals, &transcript));
    Ok(())
}

/// What the conversation loop needs besides the session.
struct Ctx<'a> {
    prepared: &'a Prepared,
    view: &'a View,
    run_dir: &'a Path,
    executor: &'a dyn ToolExecutor,
}

/// Reads and answers lines until the user quits; returns the session's outcome.
fn converse(
    session: &mut Session<'_>,
    editor: &mut LineEditor,
    turn: &TurnInterrupt,
    ctx: &Ctx<'_>,
) -> Result<Outcome, Refused> {
    let view = ctx.view;
    let mut limited = false;
    loop {
        let prompt = view.theme().paint(Role::Prompt, "› ");
        let line = match editor.read(&prompt) {
            Ok(Input::Line(l)) => l,
            Ok(Input::Quit) => break,
            Err(e) => {
                view.styled(Role::Error, &format!("the terminal failed: {e}"));
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let message = match Slash::parse(&line) {
            Some(Slash::Quit) => break,
            Some(Slash::Allow(n)) => {
                allow_inline(n, session, editor, ctx)
                    .map_err(|e| Refused(Exit::Software, e.to_string()))?;
                continue;
            }
            Some(cmd) => {
                command(cmd, session, ctx).map_err(|e| Refused(Exit::Software, e.to_string()))?;
                continue;
            }
            None => line.trim().strip_prefix('/').unwrap_or(&line).to_owned(),
        };
        let end = turn.turn(|interrupt| session.send(&message, interrupt));
        view.turn_ended();
        let end = end.map_err(|e| Refused(Exit::Software, e.to_string()))?;
        if turn.terminating() {
            view.styled(Role::Notice, "terminated (SIGTERM): the session ends");
            write_summary(ctx.run_dir);
            return Ok(Outcome::Interrupted);
        }
        match end {
            TurnEnd::Done | TurnEnd::Refused(_) | TurnEnd::Provider(_) => {}
            TurnEnd::Interrupted => {
                view.styled(
                    Role::Notice,
                    "interrupted: the model call or tool call was stopped; the session goes on",
                );
            }
            TurnEnd::Limit(hit) => {
                if hit.limit != LimitKind::MaxOutputTokens {
                    limited = true;
                    view.styled(
                        Role::Notice,
                        "the session's limit is reached: no more model calls (/cost shows \
                         what was spent; /quit ends the session)",
                    );
                }
            }
        }
        write_summary(ctx.run_dir);
    }
    Ok(if limited {
        Outcome::Limit
    } else {
        Outcome::Ended
    })
}

/// Runs a slash command.
///
/// # Errors
/// When the transcript refuses what a command adds (a loaded skill).
fn command(
    cmd: Slash,
    session: &mut Session<'_>,
    ctx: &Ctx<'_>,
) -> Result<(), crate::session::SessionError> {
    let view = ctx.view;
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
        Slash::Agents | Slash::Skills | Slash::Skill(_) | Slash::Policy => {
            match commands::answer(ctx.prepared, ctx.executor, session, &cmd)? {
                Some(commands::Answer::Shown(shown)) => view.show(&shown),
                Some(commands::Answer::SkillLoaded { text, note }) => {
                    view.markdown(&text);
                    view.styled(Role::Notice, &note);
                }
                None => {}
            }
        }
        // Asks a question: the conversation loop runs it.
        Slash::Allow(_) => {}
        Slash::Cost => show_cost(session, view),
        Slash::Show(n) => view.show_call(n),
        Slash::Clear => {
            session.clear();
            view.styled(
                Role::Notice,
                "the conversation is forgotten; the transcript and the limits go on",
            );
        }
        Slash::Quit => {}
        Slash::Unknown(hint) => view.styled(Role::Error, &hint),
    }
    Ok(())
}

/// `/allow N` in the inline REPL: the proposal, then the question on the prompt line, then the
/// change on yes.
///
/// # Errors
/// When the transcript refuses the change's record.
fn allow_inline(
    n: usize,
    session: &mut Session<'_>,
    editor: &mut LineEditor,
    ctx: &Ctx<'_>,
) -> Result<(), crate::session::SessionError> {
    let view = ctx.view;
    let (shown, pending) = allow::proposal(ctx.executor, n);
    view.show(&shown);
    let Some(pending) = pending else {
        return Ok(());
    };
    let answer = match editor.read(&view.theme().paint(Role::Prompt, allow::QUESTION)) {
        Ok(Input::Line(l)) => l,
        Ok(Input::Quit) | Err(_) => String::new(),
    };
    if !allow::is_yes(&answer) {
        view.styled(
            Role::Notice,
            "not applied: the policy in force is unchanged",
        );
        return Ok(());
    }
    let shown = allow::apply(ctx.executor, session, pending, ctx.run_dir)?;
    view.show(&shown);
    Ok(())
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
