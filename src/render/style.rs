//! Style strings of user themes: words such as `bold #ff8800` or `underline bright-blue`.

use anstyle::{AnsiColor, Color, RgbColor, Style};

/// The 16 colour names a style string takes, with their ANSI colours.
pub const COLOUR_NAMES: [(&str, AnsiColor); 16] = [
    ("black", AnsiColor::Black),
    ("red", AnsiColor::Red),
    ("green", AnsiColor::Green),
    ("yellow", AnsiColor::Yellow),
    ("blue", AnsiColor::Blue),
    ("magenta", AnsiColor::Magenta),
    ("cyan", AnsiColor::Cyan),
    ("white", AnsiColor::White),
    ("bright-black", AnsiColor::BrightBlack),
    ("bright-red", AnsiColor::BrightRed),
    ("bright-green", AnsiColor::BrightGreen),
    ("bright-yellow", AnsiColor::BrightYellow),
    ("bright-blue", AnsiColor::BrightBlue),
    ("bright-magenta", AnsiColor::BrightMagenta),
    ("bright-cyan", AnsiColor::BrightCyan),
    ("bright-white", AnsiColor::BrightWhite),
];

/// The attribute words a style string takes.
pub const ATTRIBUTES: [&str; 4] = ["bold", "italic", "underline", "dim"];

/// What is wrong with one word of a style string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StyleErrorKind {
    /// Neither an attribute, a colour name nor `#rrggbb`.
    #[error("unknown colour or attribute `{0}`")]
    Unknown(String),
    /// Starts with `#` but is not six hexadecimal digits.
    #[error("`{0}` is not a colour: `#` takes six hexadecimal digits (#rrggbb)")]
    BadHex(String),
    /// A second colour: a style has one foreground colour.
    #[error("`{0}` is a second colour: a style has one colour")]
    SecondColour(String),
}

/// A bad word in a style string, with its byte offset in the string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}")]
pub struct StyleError {
    /// What is wrong.
    pub kind: StyleErrorKind,
    /// Byte offset of the word in the style string.
    pub offset: usize,
    /// Length of the word, bytes.
    pub len: usize,
}

/// Parses a style string: words separated by whitespace, each `bold`, `italic`, `underline`,
/// `dim`, one of [`COLOUR_NAMES`] or `#rrggbb` (case-insensitive), at most one colour. The
/// empty string is the empty style (the role is not styled).
///
/// # Errors
/// The first word that is none of these, or a second colour.
pub fn parse_style(text: &str) -> Result<Style, StyleError> {
    let mut style = Style::new();
    let mut colour: Option<Color> = None;
    for (offset, word) in words(text) {
        let lower = word.to_ascii_lowercase();
        let error = |kind| StyleError {
            kind,
            offset,
            len: word.len(),
        };
        let found = match lower.as_str() {
            "bold" => {
                style = style.bold();
                continue;
            }
            "italic" => {
                style = style.italic();
                continue;
            }
            "underline" => {
                style = style.underline();
                continue;
            }
            "dim" => {
                style = style.dimmed();
                continue;
            }
            hex if hex.starts_with('#') => Color::Rgb(
                parse_hex(hex).ok_or_else(|| error(StyleErrorKind::BadHex(word.into())))?,
            ),
            name => colour_name(name)
                .map(Color::Ansi)
                .ok_or_else(|| error(StyleErrorKind::Unknown(word.into())))?,
        };
        if colour.is_some() {
            return Err(error(StyleErrorKind::SecondColour(word.into())));
        }
        colour = Some(found);
    }
    Ok(style.fg_color(colour))
}

/// The ANSI colour called `name` (one of [`COLOUR_NAMES`]).
#[must_use]
pub fn colour_name(name: &str) -> Option<AnsiColor> {
    COLOUR_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| *c)
}

/// A one-line list of the words a style string takes, for hints.
#[must_use]
pub fn style_words_hint() -> String {
    let colours: Vec<&str> = COLOUR_NAMES.iter().map(|(n, _)| *n).collect();
    format!(
        "a style is words: {}, a colour ({}) or #rrggbb",
        ATTRIBUTES.join(", "),
        colours.join(", ")
    )
}

fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split(char::is_whitespace)
        .filter(|w| !w.is_empty())
        .map(move |w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
}

fn parse_hex(word: &str) -> Option<RgbColor> {
    let digits = word.strip_prefix('#')?;
    if digits.len() != 6 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let byte = |i: usize| u8::from_str_radix(digits.get(i..i + 2)?, 16).ok();
    Some(RgbColor(byte(0)?, byte(2)?, byte(4)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_combine() {
        assert_eq!(
            parse_style("bold #ff8800"),
            Ok(Style::new()
                .bold()
                .fg_color(Some(Color::Rgb(RgbColor(0xff, 0x88, 0)))))
        );
        assert_eq!(
            parse_style("  Underline  bright-blue italic dim "),
            Ok(Style::new()
                .underline()
                .italic()
                .dimmed()
                .fg_color(Some(Color::Ansi(AnsiColor::BrightBlue))))
        );
        assert_eq!(parse_style(""), Ok(Style::new()));
    }

    #[test]
    fn bad_words_are_located() {
        let e = parse_style("bold bluee");
        assert_eq!(
            e,
            Err(StyleError {
                kind: StyleErrorKind::Unknown("bluee".into()),
                offset: 5,
                len: 5
            })
        );
        for hex in ["#ff88", "#gg8800", "#ff88001", "#"] {
            assert!(
                matches!(
                    parse_style(hex),
                    Err(StyleError {
                        kind: StyleErrorKind::BadHex(_),
                        ..
                    })
                ),
                "{hex}"
            );
        }
        assert!(matches!(
            parse_style("red blue"),
            Err(StyleError {
                kind: StyleErrorKind::SecondColour(_),
                offset: 4,
                ..
            })
        ));
    }
}
