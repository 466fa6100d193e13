//! Semantic roles and the themes that style them.
//!
//! The renderer never names a colour: it asks the [`Theme`] for the style of a [`Role`]
//! (a heading, a link, a kernel denial, …). The built-in themes are [`Theme::dark`] and
//! [`Theme::light`] (256-colour palette), [`Theme::ansi16`] (only the 16 basic ANSI colours,
//! for limited terminals) and [`Theme::plain`], which styles nothing and so writes no escape
//! sequence at all.

use anstyle::{Ansi256Color, AnsiColor, Color, Effects, Style};

/// What a piece of rendered text is, independent of how it looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// A Markdown heading (`# …`).
    Heading,
    /// Emphasised text (`*…*`).
    Emphasis,
    /// Strong text (`**…**`).
    Strong,
    /// Inline code (`` `…` ``).
    Code,
    /// The lines of a fenced or indented code block.
    CodeBlock,
    /// A link's text.
    Link,
    /// A block quote: its `│ ` gutter and its text.
    Quote,
    /// The marker of a list item (`•`, `1.`).
    ListMarker,
    /// A horizontal rule, and the lines of a table.
    Rule,
    /// A tool-call line of the REPL.
    Tool,
    /// A tool result that completed.
    ToolOk,
    /// An operation the kernel refused.
    Denial,
    /// An error: a failed tool call, a provider failure.
    Error,
    /// The model declined to answer.
    Refusal,
    /// Secondary text: URLs after links, code-block languages, durations.
    Muted,
    /// The REPL's input prompt.
    Prompt,
    /// A note from bee itself (a limit reached, a session saved).
    Notice,
}

impl Role {
    /// Every role, in declaration order.
    pub const ALL: [Self; 17] = [
        Self::Heading,
        Self::Emphasis,
        Self::Strong,
        Self::Code,
        Self::CodeBlock,
        Self::Link,
        Self::Quote,
        Self::ListMarker,
        Self::Rule,
        Self::Tool,
        Self::ToolOk,
        Self::Denial,
        Self::Error,
        Self::Refusal,
        Self::Muted,
        Self::Prompt,
        Self::Notice,
    ];

    /// The role's key in a user theme: its name in snake_case (`code_block`, `tool_ok`).
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Self::Heading => "heading",
            Self::Emphasis => "emphasis",
            Self::Strong => "strong",
            Self::Code => "code",
            Self::CodeBlock => "code_block",
            Self::Link => "link",
            Self::Quote => "quote",
            Self::ListMarker => "list_marker",
            Self::Rule => "rule",
            Self::Tool => "tool",
            Self::ToolOk => "tool_ok",
            Self::Denial => "denial",
            Self::Error => "error",
            Self::Refusal => "refusal",
            Self::Muted => "muted",
            Self::Prompt => "prompt",
            Self::Notice => "notice",
        }
    }

    /// The role whose [`Role::key`] is `key`, if any.
    #[must_use]
    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.key() == key)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A style for each [`Role`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Theme {
    styles: [Style; Role::ALL.len()],
}

/// The names [`Theme::builtin`] knows, in the order they are listed to users.
pub const BUILTIN_THEMES: [&str; 4] = ["dark", "light", "ansi16", "plain"];

fn fg(n: u8) -> Style {
    Style::new().fg_color(Some(Color::Ansi256(Ansi256Color(n))))
}

fn ansi(c: AnsiColor) -> Style {
    Style::new().fg_color(Some(Color::Ansi(c)))
}

impl Theme {
    /// The theme that styles nothing: rendering with it writes no escape sequence.
    #[must_use]
    pub fn plain() -> Self {
        Self {
            styles: [Style::new(); Role::ALL.len()],
        }
    }

    /// For dark backgrounds, from the 256-colour palette.
    #[must_use]
    pub fn dark() -> Self {
        Self::from_fn(|role| match role {
            Role::Heading => fg(75).bold(),
            Role::Emphasis => Style::new().italic(),
            Role::Strong => Style::new().bold(),
            Role::Code => fg(180),
            Role::CodeBlock => fg(187),
            Role::Link => fg(75).underline(),
            Role::Quote => fg(246).italic(),
            Role::ListMarker => fg(214),
            Role::Rule | Role::Muted => fg(244),
            Role::Tool => fg(81),
            Role::ToolOk => fg(114),
            Role::Denial => fg(203).bold(),
            Role::Error => fg(203),
            Role::Refusal => fg(215),
            Role::Prompt => fg(141).bold(),
            Role::Notice => fg(110),
        })
    }

    /// For light backgrounds, from the 256-colour palette.
    #[must_use]
    pub fn light() -> Self {
        Self::from_fn(|role| match role {
            Role::Heading => fg(25).bold(),
            Role::Emphasis => Style::new().italic(),
            Role::Strong => Style::new().bold(),
            Role::Code => fg(130),
            Role::CodeBlock => fg(238),
            Role::Link => fg(25).underline(),
            Role::Quote => fg(242).italic(),
            Role::ListMarker => fg(130),
            Role::Rule => fg(248),
            Role::Muted => fg(243),
            Role::Tool => fg(31),
            Role::ToolOk => fg(28),
            Role::Denial => fg(160).bold(),
            Role::Error => fg(160),
            Role::Refusal => fg(166),
            Role::Prompt => fg(91).bold(),
            Role::Notice => fg(24),
        })
    }

    /// Only the 16 basic ANSI colours, whose shades the terminal's own palette decides.
    #[must_use]
    pub fn ansi16() -> Self {
        Self::from_fn(|role| match role {
            Role::Heading => ansi(AnsiColor::Cyan).bold(),
            Role::Emphasis => Style::new().italic(),
            Role::Strong => Style::new().bold(),
            Role::Code | Role::ListMarker => ansi(AnsiColor::Yellow),
            Role::CodeBlock => ansi(AnsiColor::Green),
            Role::Link => ansi(AnsiColor::Cyan).underline(),
            Role::Quote => Style::new().italic().dimmed(),
            Role::Rule | Role::Muted => ansi(AnsiColor::BrightBlack),
            Role::Tool => ansi(AnsiColor::Cyan),
            Role::ToolOk => ansi(AnsiColor::Green),
            Role::Denial => ansi(AnsiColor::Red).bold(),
            Role::Error => ansi(AnsiColor::Red),
            Role::Refusal => ansi(AnsiColor::Yellow),
            Role::Prompt => ansi(AnsiColor::Magenta).bold(),
            Role::Notice => ansi(AnsiColor::BrightBlue),
        })
    }

    /// The built-in theme called `name` (one of [`BUILTIN_THEMES`]), if any.
    #[must_use]
    pub fn builtin(name: &str) -> Option<Self> {
        match name {
            "dark" => Some(Self::dark()),
            "light" => Some(Self::light()),
            "ansi16" => Some(Self::ansi16()),
            "plain" => Some(Self::plain()),
            _ => None,
        }
    }

    fn from_fn(f: impl Fn(Role) -> Style) -> Self {
        Self {
            styles: Role::ALL.map(f),
        }
    }

    /// The style of `role`.
    #[must_use]
    pub fn style(&self, role: Role) -> Style {
        self.styles.get(role.index()).copied().unwrap_or_default()
    }

    /// Replaces the style of `role`.
    pub fn set(&mut self, role: Role, style: Style) {
        if let Some(s) = self.styles.get_mut(role.index()) {
            *s = style;
        }
    }

    /// Whether no role has a style, so that rendering writes no escape sequence.
    #[must_use]
    pub fn is_plain(&self) -> bool {
        self.styles.iter().all(|s| s.is_plain())
    }

    /// `text` in the style of `role`, followed by a reset; `text` alone when the role has
    /// no style. `text` is written as given: sanitize untrusted text first
    /// ([`super::sanitize`]).
    #[must_use]
    pub fn paint(&self, role: Role, text: &str) -> String {
        paint(self.style(role), text)
    }
}

/// `text` between `style`'s escape sequence and its reset; `text` alone for a plain style.
pub(crate) fn paint(style: Style, text: &str) -> String {
    if style.is_plain() || text.is_empty() {
        text.to_owned()
    } else {
        format!("{}{text}{}", style.render(), style.render_reset())
    }
}

/// `inner` inside `outer`: the inner colour where it has one, the effects of both.
pub(crate) fn merge(outer: Style, inner: Style) -> Style {
    let colour = inner.get_fg_color().or(outer.get_fg_color());
    let effects: Effects = outer.get_effects() | inner.get_effects();
    Style::new().fg_color(colour).effects(effects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_are_unique() {
        for role in Role::ALL {
            assert_eq!(Role::from_key(role.key()), Some(role));
        }
        let mut keys: Vec<_> = Role::ALL.iter().map(|r| r.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), Role::ALL.len());
    }

    #[test]
    fn only_plain_is_plain() {
        assert!(Theme::plain().is_plain());
        for name in ["dark", "light", "ansi16"] {
            assert!(
                Theme::builtin(name).is_some_and(|t| !t.is_plain()),
                "{name}"
            );
        }
    }

    #[test]
    fn ansi16_uses_only_basic_colours() {
        let t = Theme::ansi16();
        for role in Role::ALL {
            assert!(
                matches!(t.style(role).get_fg_color(), None | Some(Color::Ansi(_))),
                "{role:?}"
            );
        }
    }

    #[test]
    fn merge_keeps_inner_colour_and_both_effects() {
        let m = merge(fg(1).bold(), fg(2).italic());
        assert_eq!(m, fg(2).bold().italic());
        assert_eq!(merge(fg(1), Style::new().italic()), fg(1).italic());
    }
}
