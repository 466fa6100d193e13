//! Greedy word wrapping of styled text.

use anstyle::Style;

use super::text::{Line, char_width};

/// Styled inline text: runs of sanitized text, `\n` where a line must break.
pub(crate) type Inline = Vec<(String, Style)>;

/// Wraps `inline` into lines of at most `width` columns, breaking at whitespace. Runs of
/// whitespace become one space (in the style of the first of them); a word wider than
/// `width` is kept whole on a line of its own, so that a long URL stays one piece.
pub(crate) fn wrap(inline: &Inline, width: usize) -> Vec<Line> {
    let mut w = Wrapper {
        width,
        ..Wrapper::default()
    };
    for (text, style) in inline {
        for c in text.chars() {
            if c == '\n' {
                w.place_word();
                w.break_line();
            } else if c.is_whitespace() {
                w.place_word();
                if w.space.is_none() && !w.line.is_empty() {
                    w.space = Some(*style);
                }
            } else {
                w.word.push_char(c, *style);
                w.word_width += char_width(c);
            }
        }
    }
    w.place_word();
    if !w.line.is_empty() {
        w.break_line();
    }
    w.lines
}

#[derive(Default)]
struct Wrapper {
    width: usize,
    lines: Vec<Line>,
    line: Line,
    line_width: usize,
    word: Line,
    word_width: usize,
    /// The style of the whitespace before the pending word, if there was any.
    space: Option<Style>,
}

impl Wrapper {
    fn place_word(&mut self) {
        if self.word.is_empty() {
            return;
        }
        if !self.line.is_empty() {
            if self.line_width + 1 + self.word_width <= self.width {
                self.line.push(" ", self.space.unwrap_or_default());
                self.line_width += 1;
            } else {
                self.break_line();
            }
        }
        self.line.append(&self.word);
        self.line_width += self.word_width;
        self.word = Line::default();
        self.word_width = 0;
        self.space = None;
    }

    fn break_line(&mut self) {
        self.lines.push(std::mem::take(&mut self.line));
        self.line_width = 0;
        self.space = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str, width: usize) -> Vec<String> {
        wrap(&vec![(text.to_owned(), Style::new())], width)
            .iter()
            .map(Line::render)
            .collect()
    }

    #[test]
    fn breaks_at_spaces_within_width() {
        assert_eq!(
            plain("the quick  brown fox jumps over", 10),
            ["the quick", "brown fox", "jumps over"]
        );
    }

    #[test]
    fn long_words_stand_alone_and_hard_breaks_break() {
        assert_eq!(
            plain("see https://example.com/a/long/path now", 10),
            ["see", "https://example.com/a/long/path", "now"]
        );
        assert_eq!(plain("one\ntwo three", 40), ["one", "two three"]);
    }

    #[test]
    fn wide_characters_count_double() {
        assert_eq!(plain("漢字 漢字 漢字", 9), ["漢字 漢字", "漢字"]);
    }
}
