//! The inline REPL: the conversation printed in the terminal's own scrollback, one line
//! read at a time. It turns each line into an [`Input`] for the conversation's controller
//! ([`Chat`]) and draws each [`Reply`]; the commands that only draw (`/help`, `/cost`,
//! `/show`) it answers itself.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use super::approve;
use super::editor::{self, Input as Line, LineEditor};
use super::view::View;
use crate::agents::AgentExecutor;
use crate::app::Exit;
use crate::app::harness::conversation::slash::{COMMANDS, KEYS, Slash};
use crate::app::harness::conversation::{
    Chat, Input, Prepared, Reply, TurnInterrupt, UNCONFINED, allow,
};
use crate::app::harness::preflight::Refused;
use crate::records::LimitKind;
use crate::records::{Enforcement, nearest_rank};
use crate::render::{self, Role};
use crate::session::{Session, SessionError, ToolExecutor, TurnEnd, Update};

/// The inline REPL.
pub(super) fn inline(
    p: &Prepared,
    executor: Box<dyn ToolExecutor>,
    approve: bool,
) -> Result<(), Refused> {
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

/// Whether the inline REPL streams answers: only to a terminal that takes cursor movements,
/// for the live part of an answer is erased and drawn again. Elsewhere (`TERM` dumb or
/// unset, an output that is not a terminal) an answer is printed once, complete, and nothing
/// moves the cursor. `NO_COLOR` drops colours only: the answer still streams.
fn streams(stdout_terminal: bool, term: Option<&str>) -> bool {
    stdout_terminal && term.is_some_and(|t| !t.is_empty() && t != "dumb")
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
}
