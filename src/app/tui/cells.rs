//! The conversation: cells that render themselves for a width and keep what they rendered,
//! so a long conversation is drawn by looking at the cells on screen only.

use ratatui::text::Line;

use super::super::harness::conversation::commands::Shown;
use super::style;
use crate::panels::{Widget, draw};
use crate::records::ToolState;
use crate::render::wrap::wrap;
use crate::render::{self, Role, Theme, lines, markdown_lines, sanitize};

/// Most lines of a tool's output shown when its cell is expanded.
const EXPANDED_LINES: usize = 200;

/// A tool call's end.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ToolEnd {
    /// Its state.
    pub(super) state: ToolState,
    /// How long it took, milliseconds.
    pub(super) ms: u64,
    /// What the model got.
    pub(super) output: String,
}

/// What a cell shows.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind {
    /// What the person sent.
    User(String),
    /// The model's answer: plain while it streams, Markdown once complete.
    Assistant {
        /// The text so far.
        text: String,
        /// Whether the message is complete.
        done: bool,
    },
    /// A tool call: one line, its result on a second; the output when expanded.
    Tool {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments in a few words.
        args: String,
        /// How it ended, once it has.
        end: Option<ToolEnd>,
        /// Whether its output is shown.
        expanded: bool,
        /// Whole seconds it has run, shown until it ends.
        running: u64,
    },
    /// A kernel denial.
    Denial(String),
    /// An error.
    Error(String),
    /// The model declined.
    Refusal(String),
    /// A note from bee.
    Notice(String),
    /// What a slash command shows.
    Shown(Vec<Shown>),
    /// A widget the render tool placed inline.
    Widget(Widget),
}

/// One cell and its rendering at the last width asked for.
#[derive(Debug, Clone)]
pub(super) struct Cell {
    /// What it shows.
    pub(super) kind: Kind,
    cache: Option<(usize, Vec<Line<'static>>)>,
}

impl Cell {
    /// A cell of `kind`.
    pub(super) fn new(kind: Kind) -> Self {
        Self { kind, cache: None }
    }

    /// The cell changed: render it again when next drawn.
    pub(super) fn touch(&mut self) {
        self.cache = None;
    }

    /// The cell's lines at `width`, rendered once per width and change.
    pub(super) fn lines(&mut self, theme: &Theme, width: usize) -> &[Line<'static>] {
        if self.cache.as_ref().is_none_or(|(w, _)| *w != width) {
            let lines = render_kind(&self.kind, theme, width)
                .iter()
                .map(style::line)
                .collect();
            self.cache = Some((width, lines));
        }
        self.cache.as_ref().map_or(&[], |(_, l)| l.as_slice())
    }

    /// How many rows the cell takes at `width`.
    pub(super) fn height(&mut self, theme: &Theme, width: usize) -> usize {
        self.lines(theme, width).len()
    }

    /// The cell's text, for yanking: what was said, without styling.
    pub(super) fn text(&self) -> String {
        match &self.kind {
            Kind::User(t) | Kind::Denial(t) | Kind::Error(t) | Kind::Refusal(t) => t.clone(),
            Kind::Notice(t) => t.clone(),
            Kind::Shown(lines) => lines
                .iter()
                .map(|l| match l {
                    Shown::Item(name, what) => format!("  {name}  {what}"),
                    Shown::Heading(t)
                    | Shown::Muted(t)
                    | Shown::Error(t)
                    | Shown::Unconfined(t) => t.clone(),
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Kind::Assistant { text, .. } => text.clone(),
            Kind::Tool {
                name, args, end, ..
            } => {
                let mut s = format!("{name} {args}");
                if let Some(e) = end {
                    s.push('\n');
                    s.push_str(&e.output);
                }
                s
            }
            Kind::Widget(w) => draw::lines(w, &Theme::plain(), 80)
                .iter()
                .map(render::Line::render)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

fn render_kind(kind: &Kind, theme: &Theme, width: usize) -> Vec<render::Line> {
    let width = width.max(1);
    let mut out = match kind {
        Kind::User(text) => {
            let mut v = Vec::new();
            for (i, l) in sanitize(text).split('\n').enumerate() {
                let mut line = render::Line::styled(
                    if i == 0 { "› " } else { "  " },
                    theme.style(Role::Prompt),
                );
                line.push(l, theme.style(Role::Strong));
                v.extend(wrap_line(line, width));
            }
            v.push(render::Line::default());
            v
        }
        Kind::Assistant { text, done: true } => {
            let mut v = markdown_lines(text, theme, width);
            v.push(render::Line::default());
            v
        }
        Kind::Assistant { text, done: false } => {
            wrap(&vec![(sanitize(text), anstyle::Style::new())], width)
                .into_iter()
                .flat_map(|l| wrap_line(l, width))
                .collect()
        }
        Kind::Tool {
            name,
            args,
            end,
            expanded,
            running,
            ..
        } => {
            let mut v = vec![lines::tool_call_line(theme, width, name, args)];
            match end {
                Some(e) => {
                    let first = e
                        .output
                        .lines()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("");
                    // A result that is not `completed` is wrapped, never cut.
                    let result = match e.state {
                        ToolState::Completed => {
                            vec![lines::tool_result_line(theme, width, e.state, e.ms, first)]
                        }
                        ToolState::Failed | ToolState::CouldNotRun => wrap_words(
                            &lines::tool_result_line(theme, usize::MAX, e.state, e.ms, first),
                            width,
                            4,
                        ),
                    };
                    v.extend(result);
                    if *expanded {
                        let muted = theme.style(Role::Muted);
                        for l in sanitize(&e.output).lines().take(EXPANDED_LINES) {
                            v.extend(output_rows(&l.replace('\t', "    "), muted, width));
                        }
                    }
                }
                None => v.extend(wrap_words(
                    &render::Line::styled(
                        &format!("  … running {running} s · Ctrl-C stops it"),
                        theme.style(Role::Muted),
                    ),
                    width,
                    4,
                )),
            }
            v
        }
        // Denials, errors and refusals are wrapped, never cut before what they are about.
        Kind::Denial(t) => wrap_words(&lines::denial_line(theme, usize::MAX, t), width, 2),
        Kind::Error(t) => wrap_words(&lines::error_line(theme, usize::MAX, t), width, 2),
        Kind::Refusal(t) => wrap_words(&lines::refusal_line(theme, usize::MAX, t), width, 2),
        Kind::Notice(t) => vec![lines::notice_line(theme, width, t)],
        Kind::Shown(shown) => {
            let mut v = Vec::new();
            for l in shown {
                let line = match l {
                    Shown::Item(name, what) => {
                        let mut line = render::Line::styled("  ", anstyle::Style::new());
                        line.push(&sanitize(name), theme.style(Role::Code));
                        line.push(&format!("  {}", sanitize(what)), anstyle::Style::new());
                        line
                    }
                    Shown::Heading(t) => {
                        render::Line::styled(&sanitize(t), theme.style(Role::Heading))
                    }
                    Shown::Muted(t) => render::Line::styled(&sanitize(t), theme.style(Role::Muted)),
                    Shown::Error(t) => render::Line::styled(&sanitize(t), theme.style(Role::Error)),
                    Shown::Unconfined(t) => {
                        render::Line::styled(&sanitize(t), theme.style(Role::Denial))
                    }
                };
                v.extend(wrap_line(line, width));
            }
            v.push(render::Line::default());
            v
        }
        Kind::Widget(w) => {
            let mut v = draw::lines(w, theme, width);
            v.push(render::Line::default());
            v
        }
    };
    if out.is_empty() {
        out.push(render::Line::default());
    }
    out
}

/// `line` cut into rows of `width` columns (characters kept whole).
/// A line of a tool's output under a four-column indent, wrapped (never cut) to `width`.
fn output_rows(text: &str, style: anstyle::Style, width: usize) -> Vec<render::Line> {
    let mut line = render::Line::styled("    ", anstyle::Style::new());
    line.push(text, style);
    wrap_words(&line, width, 4)
}

/// `line` wrapped to `width` columns — after a space when the row has one, else where the
/// row is full — its rows after the first indented by `indent` columns. Spaces inside a row
/// are kept as they are, so columns in a tool's output stay aligned.
fn wrap_words(line: &render::Line, width: usize, indent: usize) -> Vec<render::Line> {
    if line.width() <= width {
        return vec![line.clone()];
    }
    let chars: Vec<(char, anstyle::Style)> = line
        .runs()
        .iter()
        .flat_map(|(text, style)| text.chars().map(move |c| (c, *style)))
        .collect();
    let indent = indent.min(width / 2);
    let mut rows = Vec::new();
    let mut rest = chars.as_slice();
    while !rest.is_empty() {
        let room = if rows.is_empty() {
            width
        } else {
            width - indent
        };
        let mut used = 0;
        let mut full = rest.len();
        let mut space = None;
        for (i, (c, _)) in rest.iter().enumerate() {
            let w = render::width(c.encode_utf8(&mut [0; 4]));
            if used + w > room && i > 0 {
                full = i;
                break;
            }
            used += w;
            if *c == ' ' {
                space = Some(i + 1);
            }
        }
        let cut = match space {
            Some(s) if full < rest.len() && s < full => s,
            _ => full,
        };
        let mut row = render::Line::default();
        if !rows.is_empty() {
            row.push(&" ".repeat(indent), anstyle::Style::new());
        }
        for (c, style) in &rest[..cut] {
            row.push_char(*c, *style);
        }
        row.trim_end();
        rows.push(row);
        rest = &rest[cut..];
    }
    rows
}

fn wrap_line(line: render::Line, width: usize) -> Vec<render::Line> {
    if line.width() <= width {
        return vec![line];
    }
    let mut rows = Vec::new();
    let mut row = render::Line::default();
    let mut used = 0;
    for (text, style) in line.runs() {
        for c in text.chars() {
            let w = render::width(c.encode_utf8(&mut [0; 4]));
            if used + w > width && used > 0 {
                rows.push(std::mem::take(&mut row));
                used = 0;
            }
            row.push(c.encode_utf8(&mut [0; 4]), *style);
            used += w;
        }
    }
    rows.push(row);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_renders_once_per_width() {
        let mut c = Cell::new(Kind::Assistant {
            text: "word ".repeat(30),
            done: false,
        });
        let t = Theme::plain();
        assert_eq!(c.height(&t, 50), 3);
        assert_eq!(c.height(&t, 200), 1);
        if let Kind::Assistant { text, .. } = &mut c.kind {
            text.push_str("\nmore");
        }
        assert_eq!(c.height(&t, 200), 1, "the cache holds until touched");
        c.touch();
        assert_eq!(c.height(&t, 200), 2);
    }

    #[test]
    fn wide_characters_wrap_whole() {
        let rows = wrap_line(render::Line::styled("漢字漢字漢", anstyle::Style::new()), 4);
        let text: Vec<String> = rows.iter().map(render::Line::render).collect();
        assert_eq!(text, ["漢字", "漢字", "漢"]);
    }

    #[test]
    fn a_tool_cell_expands_to_its_output() {
        let mut c = Cell::new(Kind::Tool {
            id: "c1".into(),
            name: "shell".into(),
            args: "ls".into(),
            end: Some(ToolEnd {
                state: ToolState::Completed,
                ms: 12,
                output: "a\nb\nc".into(),
            }),
            expanded: false,
            running: 0,
        });
        let t = Theme::plain();
        assert_eq!(c.height(&t, 40), 2);
        if let Kind::Tool { expanded, .. } = &mut c.kind {
            *expanded = true;
        }
        c.touch();
        assert_eq!(c.height(&t, 40), 5);
        assert_eq!(c.text(), "shell ls\na\nb\nc");
    }

    #[test]
    fn expanded_output_and_errors_wrap_instead_of_being_cut() {
        let long = format!("{} END-OF-LINE", "word ".repeat(20));
        let kind = Kind::Tool {
            id: "c1".into(),
            name: "shell".into(),
            args: "make".into(),
            end: Some(ToolEnd {
                state: ToolState::Failed,
                ms: 12,
                output: format!("exit status 2: the key is at the very end, `{long}`\n{long}"),
            }),
            expanded: true,
            running: 0,
        };
        let rows: Vec<String> = render_kind(&kind, &Theme::plain(), 30)
            .iter()
            .map(|l| l.runs().iter().map(|(s, _)| s.as_str()).collect())
            .collect();
        assert!(rows.iter().all(|r| render::width(r) <= 30), "{rows:#?}");
        assert!(rows.iter().all(|r| !r.contains('…')), "{rows:#?}");
        // Every word is whole on a row: the result line's and the output's.
        let words = rows
            .iter()
            .flat_map(|r| r.split_whitespace())
            .filter(|w| w.contains("END-OF-LINE"))
            .count();
        assert_eq!(words, 3, "{rows:#?}");
        assert!(
            rows.iter().skip(2).all(|r| r.starts_with("    ")),
            "{rows:#?}"
        );
    }
}
