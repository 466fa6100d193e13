//! Untrusted text made safe for a terminal, display widths, and styled lines.

use anstyle::Style;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::theme::paint;

/// `text` with every control character a terminal could act on made visible: C0 controls
/// (ESC becomes `␛`, CR `␍`, …) as their Unicode control pictures, DEL as `␡`, and C1
/// controls (U+0080–U+009F, among them the one-character CSI) as `�`. Newlines and tabs
/// are kept; callers decide what they mean. So `"\x1b[2J"` from a model reaches the
/// terminal as the harmless text `␛[2J`.
#[must_use]
pub fn sanitize(text: &str) -> String {
    text.chars().map(visible).collect()
}

fn visible(c: char) -> char {
    match c {
        '\n' | '\t' => c,
        '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'),
        '\u{7f}' => '\u{2421}',
        '\u{80}'..='\u{9f}' => '\u{fffd}',
        _ => c,
    }
}

/// The width of `text` in terminal columns.
#[must_use]
pub fn width(text: &str) -> usize {
    UnicodeWidthStr::width(text)
}

pub(crate) fn char_width(c: char) -> usize {
    UnicodeWidthChar::width(c).unwrap_or(0)
}

/// One line of styled text: runs of text, each with a style. Text pushed here must be
/// sanitized and hold no newline. The renderer's output before it becomes escape sequences:
/// the inline REPL writes [`Line::render`], the full-screen TUI maps the runs to its cells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Line {
    runs: Vec<(String, Style)>,
}

impl Line {
    /// A line of one run.
    #[must_use]
    pub fn styled(text: &str, style: Style) -> Self {
        let mut l = Self::default();
        l.push(text, style);
        l
    }

    /// The runs of text and their styles, left to right.
    #[must_use]
    pub fn runs(&self) -> &[(String, Style)] {
        &self.runs
    }

    /// Appends `text` (sanitized, no newline) in `style`.
    pub fn push(&mut self, text: &str, style: Style) {
        if text.is_empty() {
            return;
        }
        match self.runs.last_mut() {
            Some((last, s)) if *s == style => last.push_str(text),
            _ => self.runs.push((text.to_owned(), style)),
        }
    }

    pub(crate) fn push_char(&mut self, c: char, style: Style) {
        let mut buf = [0; 4];
        self.push(c.encode_utf8(&mut buf), style);
    }

    pub(crate) fn append(&mut self, other: &Self) {
        for (text, style) in &other.runs {
            self.push(text, *style);
        }
    }

    /// True when the line holds no text.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The width in terminal columns.
    #[must_use]
    pub fn width(&self) -> usize {
        self.runs.iter().map(|(t, _)| width(t)).sum()
    }

    /// Cuts the line to at most `max` columns, ending it with `…` when anything was cut.
    pub fn truncate(&mut self, max: usize) {
        if self.width() <= max {
            return;
        }
        let budget = max.saturating_sub(1);
        let mut used = 0;
        let mut kept = Self::default();
        let mut last_style = Style::new();
        'runs: for (text, style) in &self.runs {
            last_style = *style;
            for c in text.chars() {
                let w = char_width(c);
                if used + w > budget {
                    break 'runs;
                }
                used += w;
                kept.push_char(c, *style);
            }
        }
        if max > 0 {
            kept.push("…", last_style);
        }
        *self = kept;
    }

    /// Removes trailing spaces.
    pub(crate) fn trim_end(&mut self) {
        while let Some((text, _)) = self.runs.last_mut() {
            let trimmed = text.trim_end_matches(' ').len();
            text.truncate(trimmed);
            if !text.is_empty() {
                break;
            }
            self.runs.pop();
        }
    }

    /// The line with its escape sequences, and no newline.
    #[must_use]
    pub fn render(&self) -> String {
        self.runs.iter().map(|(t, s)| paint(*s, t)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible() {
        assert_eq!(sanitize("a\x1b[2Jb"), "a␛[2Jb");
        assert_eq!(sanitize("\r\x07\x7f\u{9b}31m"), "␍␇␡\u{fffd}31m");
        assert_eq!(sanitize("tab\tnew\nline é 漢"), "tab\tnew\nline é 漢");
    }

    #[test]
    fn truncate_counts_columns() {
        let mut l = Line::default();
        l.push("漢字漢字", Style::new());
        l.truncate(5);
        assert_eq!(l.render(), "漢字…");
        assert_eq!(l.width(), 5);
        let mut l = Line::default();
        l.push("abc", Style::new());
        l.truncate(3);
        assert_eq!(l.render(), "abc");
        l.truncate(2);
        assert_eq!(l.render(), "a…");
    }
}
