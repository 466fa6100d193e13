//! The renderer's styled lines as ratatui's: one conversion, so the TUI shows exactly the
//! roles and themes of the inline REPL.

use anstyle::{AnsiColor, Effects};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::render;

/// An anstyle style as a ratatui style.
pub(super) fn style(s: anstyle::Style) -> Style {
    let mut out = Style::default();
    if let Some(c) = s.get_fg_color() {
        out = out.fg(color(c));
    }
    if let Some(c) = s.get_bg_color() {
        out = out.bg(color(c));
    }
    let e = s.get_effects();
    for (effect, m) in [
        (Effects::BOLD, Modifier::BOLD),
        (Effects::DIMMED, Modifier::DIM),
        (Effects::ITALIC, Modifier::ITALIC),
        (Effects::UNDERLINE, Modifier::UNDERLINED),
        (Effects::INVERT, Modifier::REVERSED),
        (Effects::STRIKETHROUGH, Modifier::CROSSED_OUT),
    ] {
        if e.contains(effect) {
            out = out.add_modifier(m);
        }
    }
    out
}

fn color(c: anstyle::Color) -> Color {
    match c {
        anstyle::Color::Ansi(a) => match a {
            AnsiColor::Black => Color::Black,
            AnsiColor::Red => Color::Red,
            AnsiColor::Green => Color::Green,
            AnsiColor::Yellow => Color::Yellow,
            AnsiColor::Blue => Color::Blue,
            AnsiColor::Magenta => Color::Magenta,
            AnsiColor::Cyan => Color::Cyan,
            AnsiColor::White => Color::Gray,
            AnsiColor::BrightBlack => Color::DarkGray,
            AnsiColor::BrightRed => Color::LightRed,
            AnsiColor::BrightGreen => Color::LightGreen,
            AnsiColor::BrightYellow => Color::LightYellow,
            AnsiColor::BrightBlue => Color::LightBlue,
            AnsiColor::BrightMagenta => Color::LightMagenta,
            AnsiColor::BrightCyan => Color::LightCyan,
            AnsiColor::BrightWhite => Color::White,
        },
        anstyle::Color::Ansi256(n) => Color::Indexed(n.0),
        anstyle::Color::Rgb(rgb) => Color::Rgb(rgb.0, rgb.1, rgb.2),
    }
}

/// A renderer line as a ratatui line.
pub(super) fn line(l: &render::Line) -> Line<'static> {
    Line::from(
        l.runs()
            .iter()
            .map(|(text, s)| Span::styled(text.clone(), style(*s)))
            .collect::<Vec<_>>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{Role, Theme};

    #[test]
    fn roles_keep_their_colours_and_effects() {
        let dark = Theme::dark();
        let heading = style(dark.style(Role::Heading));
        assert!(heading.add_modifier.contains(Modifier::BOLD));
        assert!(heading.fg.is_some());
        assert_eq!(style(Theme::plain().style(Role::Heading)), Style::default());
        let l = render::Line::styled(
            "x",
            anstyle::Style::new().fg_color(Some(AnsiColor::Red.into())),
        );
        assert_eq!(line(&l).spans[0].style.fg, Some(Color::Red));
    }
}
