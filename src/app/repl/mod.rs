//! `bee repl`: chat with a sandboxed agent in the terminal, on the same session core as
//! `bee run` ([`crate::session`]).
//!
//! Set-up refuses exactly as `bee run` does, before any model call: 64 without a policy or
//! `--host` (or with both), 65/66 for a bad or missing file, 69 when the kernel cannot
//! enforce the policy, 77 when bee lacks a privilege or the API key is missing or refused.
//! Then every line the user types is a turn; lines that start with `/` are commands
//! (`conversation::slash`). The session writes the same records as an episode — a
//! transcript flushed after every event, the metrics store, the run summary — so `bee
//! metrics` reports it and a killed terminal loses nothing.
//!
//! This module is the command: it prepares the session and chooses its screen, the inline
//! REPL ([`inline`], with its line editor, view and `--approve`) or the full-screen TUI
//! (`app::tui`). Both draw the same controller's replies (`conversation::Chat`).

mod approve;
mod editor;
mod inline;
mod stream;
mod view;

use std::io::IsTerminal;

use super::Exit;
use super::harness::conversation::{MIN_SIZE, prepare};
use super::harness::preflight::Refused;
use crate::config::Flags;
use crate::panels::Surface;

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
    inline::inline(&prepared, executor, approve)
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

#[cfg(test)]
mod tests {
    use super::*;

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
