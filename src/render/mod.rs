//! The REPL's terminal renderer: assistant messages (Markdown) and the one-line messages
//! around them, styled by a [`Theme`] of semantic [`Role`]s.
//!
//! - [`theme`]: roles, the built-in themes (`dark`, `light`, `ansi16`, `plain`);
//!   [`user_theme`] builds one from a `[themes.NAME]` table of the configuration.
//! - [`choose`]: the colour policy (`NO_COLOR`, not a terminal, `TERM=dumb` → plain).
//! - [`render_markdown`]: an answer, wrapped to the terminal's width.
//! - [`lines`]: tool calls, results, denials, errors, refusals, notices.
//!
//! Everything here is pure: strings in, strings out, no terminal access. Text from the model
//! or from tools is untrusted and goes through [`sanitize`], so it cannot carry escape
//! sequences to the terminal.

pub mod lines;
mod markdown;
pub mod style;
pub(crate) mod table;
mod text;
pub mod theme;
mod user;
pub(crate) mod wrap;

pub use markdown::{markdown_lines, render_markdown};
pub use style::parse_style;
pub use text::{Line, sanitize, width};
pub use theme::{BUILTIN_THEMES, Role, Theme};
pub use user::user_theme;

/// The theme to render with: `theme` itself, or [`Theme::plain`] when colour is unwanted or
/// cannot work: `NO_COLOR` is set to a non-empty value (<https://no-color.org>), standard
/// output is not a terminal, or `TERM` is `dumb`. `env` reads an environment variable
/// (`|k| std::env::var(k).ok()` in production).
#[must_use]
pub fn choose(
    theme: Theme,
    stdout_is_terminal: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Theme {
    let no_color = env("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = env("TERM").is_some_and(|t| t == "dumb");
    if no_color || dumb || !stdout_is_terminal {
        Theme::plain()
    } else {
        theme
    }
}
