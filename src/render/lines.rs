//! The REPL's one-line messages: tool calls and results, denials, errors, refusals, notices.
//!
//! Each function returns one styled line without a newline, at most `width` columns wide
//! (cut with `…`): as escape sequences for the inline REPL, or as a [`Line`] (the `*_line`
//! functions) for the full-screen TUI. Every text argument is untrusted (tool names and arguments come from the
//! model, paths from the file system): control characters are made visible as by
//! [`super::sanitize`], and newlines and tabs become spaces.

use anstyle::Style;

use super::text::{Line, sanitize};
use super::theme::{Role, Theme};
use crate::records::ToolState;

/// A tool call about to run: `▸ NAME ARGS`, the arguments muted.
#[must_use]
pub fn tool_call_line(theme: &Theme, width: usize, name: &str, args_summary: &str) -> Line {
    let mut line = Line::default();
    line.push("▸ ", theme.style(Role::Tool));
    line.push(&one_line(name), theme.style(Role::Tool));
    if !args_summary.trim().is_empty() {
        line.push(" ", Style::new());
        line.push(&one_line(args_summary), theme.style(Role::Muted));
    }
    fit(line, width)
}

/// A tool call's result, indented under its call: `  ✓ 12 ms · FIRST_LINE` when it
/// completed, `  ✗ failed · 2.5 s · FIRST_LINE` or `  ✗ could not run · …` when not.
/// `duration_ms` is in milliseconds; `first_line` (the output's first line) may be empty.
#[must_use]
pub fn tool_result_line(
    theme: &Theme,
    width: usize,
    state: ToolState,
    duration_ms: u64,
    first_line: &str,
) -> Line {
    let mut line = Line::default();
    let muted = theme.style(Role::Muted);
    match state {
        ToolState::Completed => line.push("  ✓ ", theme.style(Role::ToolOk)),
        ToolState::Failed => line.push("  ✗ failed", theme.style(Role::Error)),
        ToolState::CouldNotRun => line.push("  ✗ could not run", theme.style(Role::Error)),
    }
    if state != ToolState::Completed {
        line.push(" · ", muted);
    }
    line.push(&duration(duration_ms), muted);
    let first = one_line(first_line);
    if !first.trim().is_empty() {
        line.push(" · ", muted);
        line.push(first.trim(), Style::new());
    }
    fit(line, width)
}

/// An operation the kernel refused: `✗ denied: EXPLANATION`, for example
/// `✗ denied: open /home/u/.ssh/id_rsa for read: no fs.read grant covers it`.
#[must_use]
pub fn denial_line(theme: &Theme, width: usize, explanation: &str) -> Line {
    labelled(theme, width, Role::Denial, "✗ denied: ", explanation)
}

/// An error: `error: TEXT`.
#[must_use]
pub fn error_line(theme: &Theme, width: usize, text: &str) -> Line {
    labelled(theme, width, Role::Error, "error: ", text)
}

/// The model declined: `⊘ refused: TEXT`.
#[must_use]
pub fn refusal_line(theme: &Theme, width: usize, text: &str) -> Line {
    labelled(theme, width, Role::Refusal, "⊘ refused: ", text)
}

/// A note from bee: `· TEXT`, all in the notice style.
#[must_use]
pub fn notice_line(theme: &Theme, width: usize, text: &str) -> Line {
    let mut line = Line::default();
    line.push("· ", theme.style(Role::Notice));
    line.push(&one_line(text), theme.style(Role::Notice));
    fit(line, width)
}

/// [`tool_call_line`], rendered with its escape sequences.
#[must_use]
pub fn tool_call(theme: &Theme, width: usize, name: &str, args_summary: &str) -> String {
    tool_call_line(theme, width, name, args_summary).render()
}

/// [`tool_result_line`], rendered with its escape sequences.
#[must_use]
pub fn tool_result(
    theme: &Theme,
    width: usize,
    state: ToolState,
    duration_ms: u64,
    first_line: &str,
) -> String {
    tool_result_line(theme, width, state, duration_ms, first_line).render()
}

/// [`denial_line`], rendered with its escape sequences.
#[must_use]
pub fn denial(theme: &Theme, width: usize, explanation: &str) -> String {
    denial_line(theme, width, explanation).render()
}

/// [`error_line`], rendered with its escape sequences.
#[must_use]
pub fn error(theme: &Theme, width: usize, text: &str) -> String {
    error_line(theme, width, text).render()
}

/// [`refusal_line`], rendered with its escape sequences.
#[must_use]
pub fn refusal(theme: &Theme, width: usize, text: &str) -> String {
    refusal_line(theme, width, text).render()
}

/// [`notice_line`], rendered with its escape sequences.
#[must_use]
pub fn notice(theme: &Theme, width: usize, text: &str) -> String {
    notice_line(theme, width, text).render()
}

/// A duration for people: `850 ms`, `2.5 s`, `3 min 05 s`.
#[must_use]
pub fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{}.{} s", ms / 1_000, ms % 1_000 / 100),
        _ => format!("{} min {:02} s", ms / 60_000, ms % 60_000 / 1_000),
    }
}

fn labelled(theme: &Theme, width: usize, role: Role, label: &str, text: &str) -> Line {
    let mut line = Line::default();
    line.push(label, theme.style(role));
    line.push(one_line(text).trim(), Style::new());
    fit(line, width)
}

fn one_line(text: &str) -> String {
    sanitize(text).replace(['\n', '\t'], " ")
}

fn fit(mut line: Line, width: usize) -> Line {
    line.trim_end();
    line.truncate(width);
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(0), "0 ms");
        assert_eq!(duration(999), "999 ms");
        assert_eq!(duration(2_549), "2.5 s");
        assert_eq!(duration(185_000), "3 min 05 s");
    }
}
