//! User themes: a TOML table such as
//! `[themes.mine] base = "dark", heading = "bold #ff8800", link = "underline blue"`.

use std::ops::Range;

use bee_core::error::Source;
use toml::Spanned;
use toml::de::DeTable;

use super::style::{StyleError, parse_style, style_words_hint};
use super::theme::{BUILTIN_THEMES, Role, Theme};
use crate::config::{FileDiagnostic, FileDiagnostics};

/// Builds a theme from a user's table: `base` names the built-in theme it starts from
/// (`dark` when absent; one of [`BUILTIN_THEMES`]), and each role's key
/// ([`Role::key`], e.g. `heading`, `code_block`) replaces that role's style with a style
/// string (see [`parse_style`]).
///
/// `source` is the whole file the table was read from and `table` the table with its span
/// in that file; the span is used to find the table's name (for example `themes.mine`) and
/// the line and column of each key and value.
///
/// # Errors
/// Every unknown key, unknown base, value that is not a string, and bad style word (an
/// unknown colour, a bad `#rrggbb`), each with its file, line, column and key
/// (`themes.mine.heding`) and a hint listing the valid names.
pub fn user_theme(source: &Source, table: &Spanned<toml::Table>) -> Result<Theme, FileDiagnostics> {
    let located = Located::find(source, table.span());
    let mut theme = Theme::dark();
    let mut problems = Vec::new();
    let mut problem = |span: Range<usize>, key: &str, message: String, help: String| {
        problems.push(FileDiagnostic::at(
            source,
            span,
            Some(located.key_path(key)),
            message,
            Some(help),
        ));
    };

    // The base first, so that the roles the table sets are applied on top of it.
    if let Some(value) = table.get_ref().get("base") {
        let span = located.value_span("base", table.span());
        match value.as_str().map(|b| (b, Theme::builtin(b))) {
            Some((_, Some(base))) => theme = base,
            Some((name, None)) => problem(
                span,
                "base",
                format!("unknown base theme `{name}`"),
                format!("built-in themes: {}", BUILTIN_THEMES.join(", ")),
            ),
            None => problem(
                span,
                "base",
                format!("`base` takes a theme's name, not {}", value.type_str()),
                format!("built-in themes: {}", BUILTIN_THEMES.join(", ")),
            ),
        }
    }

    for (key, value) in table.get_ref() {
        if key == "base" {
            continue;
        }
        let Some(role) = Role::from_key(key) else {
            let span = located.key_span(key, table.span());
            let mut help = String::new();
            if let Some(near) = nearest(key) {
                help = format!("did you mean `{near}`? ");
            }
            help.push_str(&format!("theme keys: base, {}", role_keys().join(", ")));
            problem(span, key, format!("unknown theme key `{key}`"), help);
            continue;
        };
        let span = located.value_span(key, table.span());
        let Some(text) = value.as_str() else {
            problem(
                span,
                key,
                format!("a style is a string, not {}", value.type_str()),
                format!(
                    "for example `{key} = \"bold #ff8800\"`; {}",
                    style_words_hint()
                ),
            );
            continue;
        };
        match parse_style(text) {
            Ok(style) => theme.set(role, style),
            Err(e) => {
                let span = word_span(source, span, text, &e);
                problem(span, key, e.to_string(), style_words_hint());
            }
        }
    }

    if problems.is_empty() {
        return Ok(theme);
    }
    problems.sort_by_key(|p| (p.line, p.column));
    Err(FileDiagnostics {
        file: source.name.clone(),
        problems,
    })
}

fn role_keys() -> Vec<&'static str> {
    Role::ALL.iter().map(|r| r.key()).collect()
}

/// The theme key closest to a misspelt `key`, when it is close (at most two edits).
fn nearest(key: &str) -> Option<&'static str> {
    std::iter::once("base")
        .chain(role_keys())
        .map(|k| (edit_distance(key, k), k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row.first().copied().unwrap_or(0);
        if let Some(first) = row.first_mut() {
            *first = i + 1;
        }
        for (j, cb) in b.iter().enumerate() {
            let above = row.get(j + 1).copied().unwrap_or(0);
            let left = row.get(j).copied().unwrap_or(0);
            let cost = diagonal + usize::from(ca != *cb);
            diagonal = above;
            if let Some(cell) = row.get_mut(j + 1) {
                *cell = cost.min(above + 1).min(left + 1);
            }
        }
    }
    row.last().copied().unwrap_or(0)
}

/// The span of the bad word inside a string value's span, when the value is written as a
/// plain string whose text contains the word; else the value's span.
fn word_span(source: &Source, value: Range<usize>, text: &str, e: &StyleError) -> Range<usize> {
    let raw = source.text.get(value.clone()).unwrap_or_default();
    let Some(word) = text.get(e.offset..e.offset + e.len) else {
        return value;
    };
    match raw.find(word) {
        Some(at) => value.start + at..value.start + at + word.len(),
        None => value,
    }
}

/// The table as the parser saw it in the file: its dotted name and the spans of its keys
/// and values. Empty when the span does not lead back to a table of the file (then every
/// problem points at the table itself and names the key alone).
#[derive(Default)]
struct Located {
    path: Option<String>,
    keys: Vec<(String, Range<usize>, Range<usize>)>,
}

impl Located {
    fn find(source: &Source, span: Range<usize>) -> Self {
        let Ok(root) = DeTable::parse(&source.text) else {
            return Self::default();
        };
        let mut found = Self::default();
        search(root.get_ref(), &span, "", &mut found);
        found
    }

    fn key_path(&self, key: &str) -> String {
        match &self.path {
            Some(p) => format!("{p}.{}", quote_key(key)),
            None => quote_key(key),
        }
    }

    fn key_span(&self, key: &str, fallback: Range<usize>) -> Range<usize> {
        self.keys
            .iter()
            .find(|(k, _, _)| k == key)
            .map_or(fallback, |(_, s, _)| s.clone())
    }

    fn value_span(&self, key: &str, fallback: Range<usize>) -> Range<usize> {
        self.keys
            .iter()
            .find(|(k, _, _)| k == key)
            .map_or(fallback, |(_, _, s)| s.clone())
    }
}

fn search(table: &DeTable<'_>, span: &Range<usize>, prefix: &str, found: &mut Located) -> bool {
    for (key, value) in table {
        let Some(inner) = value.get_ref().as_table() else {
            continue;
        };
        let path = if prefix.is_empty() {
            quote_key(key.get_ref())
        } else {
            format!("{prefix}.{}", quote_key(key.get_ref()))
        };
        if value.span() == *span {
            found.path = Some(path);
            found.keys = inner
                .iter()
                .map(|(k, v)| (k.get_ref().to_string(), k.span(), v.span()))
                .collect();
            return true;
        }
        if search(inner, span, &path, found) {
            return true;
        }
    }
    false
}

/// A key as written in a dotted path: bare when it can be, quoted otherwise.
fn quote_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_key_suggests_small_misspellings_only() {
        assert_eq!(nearest("heding"), Some("heading"));
        assert_eq!(nearest("codeblock"), Some("code_block"));
        assert_eq!(nearest("toolok"), Some("tool_ok"));
        assert_eq!(nearest("background"), None);
    }

    #[test]
    fn keys_are_quoted_when_not_bare() {
        assert_eq!(quote_key("mine"), "mine");
        assert_eq!(quote_key("my theme"), "\"my theme\"");
    }
}
