//! The line editor of `bee repl`: rustyline (termios, no full-screen backend) with history
//! kept per user, multi-line input, and Ctrl-C that clears a line or, on an empty one, ends
//! the session.

use std::path::{Path, PathBuf};

use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{
    Cmd, ConditionalEventHandler, Config, Editor, Event, EventContext, EventHandler, KeyCode,
    KeyEvent, Modifiers, Movement, RepeatCount,
};

use crate::config::Env;

/// The most lines kept in the history file.
const HISTORY_SIZE: usize = 10_000;

/// What one read gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Input {
    /// A line (or several, joined with `\n`), trimmed of the continuation backslashes.
    Line(String),
    /// Ctrl-C on an empty line, or Ctrl-D: the user is done.
    Quit,
}

/// The history file: `$XDG_STATE_HOME/bee/history`, else `~/.local/state/bee/history`.
pub(super) fn history_path(env: &Env) -> Option<PathBuf> {
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| env.home.as_ref().map(|h| h.join(".local").join("state")))
        .map(|d| d.join("bee").join("history"))
}

/// A line that ends in `\` continues on the next one.
struct Helper;

impl Validator for Helper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Completer for Helper {
    type Candidate = String;
}

impl Hinter for Helper {
    type Hint = String;
}

impl Highlighter for Helper {}

impl rustyline::Helper for Helper {}

/// Ctrl-C: clears a line that holds text (as shells do); on an empty line it ends the
/// session.
struct CtrlC;

impl ConditionalEventHandler for CtrlC {
    fn handle(
        &self,
        _evt: &Event,
        _n: RepeatCount,
        _positive: bool,
        ctx: &EventContext<'_>,
    ) -> Option<Cmd> {
        if ctx.line().is_empty() {
            Some(Cmd::Interrupt)
        } else {
            Some(Cmd::Kill(Movement::WholeBuffer))
        }
    }
}

/// The editor, with the history loaded.
pub(super) struct LineEditor {
    editor: Editor<Helper, FileHistory>,
    history: Option<PathBuf>,
    /// Why the history cannot be saved, once (said once, then the session goes on).
    pub(super) history_error: Option<String>,
}

impl LineEditor {
    /// An editor whose history lives at `history` (created when missing).
    ///
    /// # Errors
    /// When the terminal cannot be set up.
    pub(super) fn new(history: Option<PathBuf>) -> rustyline::Result<Self> {
        let config = Config::builder()
            .max_history_size(HISTORY_SIZE)?
            .history_ignore_dups(true)?
            .auto_add_history(false)
            .build();
        let mut editor: Editor<Helper, FileHistory> = Editor::with_config(config)?;
        editor.set_helper(Some(Helper));
        editor.bind_sequence(
            KeyEvent(KeyCode::Char('C'), Modifiers::CTRL),
            EventHandler::Conditional(Box::new(CtrlC)),
        );
        let mut history_error = None;
        if let Some(path) = &history {
            if let Some(dir) = path.parent()
                && let Err(e) = std::fs::create_dir_all(dir)
            {
                history_error = Some(format!("{}: {e}", dir.display()));
            }
            match editor.load_history(path) {
                Ok(()) => {}
                Err(ReadlineError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => history_error = Some(format!("{}: {e}", path.display())),
            }
        }
        Ok(Self {
            editor,
            history,
            history_error,
        })
    }

    /// Reads one input with `prompt`, adding it to the history (saved at once, so a killed
    /// terminal keeps it).
    ///
    /// # Errors
    /// When the terminal fails.
    pub(super) fn read(&mut self, prompt: &str) -> rustyline::Result<Input> {
        match self.editor.readline(prompt) {
            Ok(line) => {
                let text = join_continued(&line);
                if !text.trim().is_empty() {
                    let _ = self.editor.add_history_entry(line.as_str());
                    self.save();
                }
                Ok(Input::Line(text))
            }
            Err(ReadlineError::Interrupted | ReadlineError::Eof) => Ok(Input::Quit),
            Err(e) => Err(e),
        }
    }

    fn save(&mut self) {
        let Some(path) = &self.history else { return };
        if let Err(e) = self.editor.append_history(path) {
            self.history_error
                .get_or_insert_with(|| format!("{}: {e}", path.display()));
        }
    }

    /// The history file.
    pub(super) fn history(&self) -> Option<&Path> {
        self.history.as_deref()
    }
}

/// Joins continued lines: a `\` at the end of a line becomes a line break.
fn join_continued(input: &str) -> String {
    input
        .split('\n')
        .map(|l| l.strip_suffix('\\').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continued_lines_join_without_their_backslashes() {
        assert_eq!(join_continued("a\\\nb\\\nc"), "a\nb\nc");
        assert_eq!(join_continued("plain"), "plain");
    }
}
