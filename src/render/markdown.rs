//! Markdown answers rendered for a terminal: styled by a [`Theme`], wrapped to a width.

use std::borrow::Cow;

use anstyle::Style;
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use super::table::Table;
use super::text::{Line, sanitize, width};
use super::theme::{Role, Theme, merge};
use super::wrap::{Inline, wrap};

/// Text is never wrapped narrower than this many columns, however deep the nesting.
const MIN_TEXT_WIDTH: usize = 10;

/// Renders a Markdown answer for a terminal `width` columns wide.
///
/// Paragraphs, headings (kept with their `#` markers), list items and quotes are wrapped at
/// word boundaries to `width` columns, counted by Unicode display width; a single word wider
/// than the line stands alone on its line. Lists get markers (`•`, `◦`, `▪` by depth;
/// `1.` for ordered lists), block quotes a `│ ` gutter, links their URL after the text in
/// the muted style (unless the text is the URL), fenced and indented code blocks are
/// indented by two columns under a muted `── language` line and kept verbatim (never
/// wrapped; tabs expanded to 4 columns), rules span the width, and tables are drawn with
/// ` │ ` between cells.
///
/// The text is untrusted: every control character in it, and so every escape sequence, is
/// made visible (see [`super::sanitize`]); the only escape sequences in the output are the
/// theme's styles, and with [`Theme::plain`] there are none. The output ends with exactly
/// one newline (an empty answer renders as `"\n"`).
#[must_use]
pub fn render_markdown(text: &str, theme: &Theme, width: usize) -> String {
    let lines = markdown_lines(text, theme, width);
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for line in &lines {
        out.push_str(&line.render());
        out.push('\n');
    }
    if out.is_empty() {
        out.push('\n');
    }
    out
}

/// The lines [`render_markdown`] writes, styled but not yet escape sequences (the TUI draws
/// them into its cells). Trailing blank lines are dropped; an empty answer has no lines.
#[must_use]
pub fn markdown_lines(text: &str, theme: &Theme, width: usize) -> Vec<Line> {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    // Carriage returns of CRLF line ends would otherwise show as `␍` in code blocks.
    let text: Cow<'_, str> = if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    };
    let mut r = Renderer {
        theme,
        width,
        out: Vec::new(),
        containers: Vec::new(),
        inline: Vec::new(),
        styles: Vec::new(),
        blank_pending: false,
        links: Vec::new(),
        code: None,
        table: None,
    };
    for event in Parser::new_ext(&text, options) {
        r.event(event);
    }
    r.flush();
    while r.out.last().is_some_and(Line::is_empty) {
        r.out.pop();
    }
    r.out
}

/// A block that prefixes the lines inside it.
enum Container {
    /// `│ ` before each line.
    Quote,
    /// A list; `next` is the next item's number for an ordered list.
    List { next: Option<u64> },
    /// An item: its marker on its first line, `indent` spaces on the others.
    Item { indent: usize, marker: Option<Line> },
}

struct CodeBlock {
    language: String,
    text: String,
}

struct Renderer<'t> {
    theme: &'t Theme,
    width: usize,
    out: Vec<Line>,
    containers: Vec<Container>,
    /// The paragraph (or heading, item text, table cell) being collected.
    inline: Inline,
    /// Inline styles in force, outermost first.
    styles: Vec<Style>,
    /// A blank line goes before the next block.
    blank_pending: bool,
    /// Open links: the URL and where the link's text starts in `inline`.
    links: Vec<(String, usize)>,
    code: Option<CodeBlock>,
    table: Option<Table>,
}

impl Renderer<'_> {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => match &mut self.code {
                Some(code) => code.text.push_str(&sanitize(&t)),
                None => self.text(&t, self.style()),
            },
            Event::Code(t) => {
                let style = merge(self.style(), self.theme.style(Role::Code));
                if self.theme.style(Role::Code).is_plain() {
                    self.text(&format!("`{t}`"), style);
                } else {
                    self.text(&t, style);
                }
            }
            Event::Html(t) | Event::InlineHtml(t) => self.text(&t, self.style()),
            Event::InlineMath(t) | Event::DisplayMath(t) => self.text(&t, self.style()),
            Event::FootnoteReference(t) => self.text(&format!("[^{t}]"), self.style()),
            Event::SoftBreak => self.text(" ", self.style()),
            Event::HardBreak => self.inline.push(("\n".to_owned(), Style::new())),
            Event::Rule => {
                self.block_start();
                let mut line = Line::default();
                line.push(&"─".repeat(self.avail()), self.theme.style(Role::Rule));
                self.write(line);
                self.block_end();
            }
            Event::TaskListMarker(done) => {
                let marker = if done { "[x] " } else { "[ ] " };
                self.inline
                    .push((marker.to_owned(), self.theme.style(Role::ListMarker)));
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock | Tag::MetadataBlock(_) => self.block_start(),
            Tag::Heading { level, .. } => {
                self.block_start();
                let style = self.theme.style(Role::Heading);
                self.styles.push(style);
                let hashes = "#".repeat(level as usize);
                self.inline.push((format!("{hashes} "), style));
            }
            Tag::BlockQuote(_) => {
                self.block_start();
                self.containers.push(Container::Quote);
                self.styles.push(self.theme.style(Role::Quote));
            }
            Tag::CodeBlock(kind) => {
                self.block_start();
                let language = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some(CodeBlock {
                    language: sanitize(&language),
                    text: String::new(),
                });
            }
            Tag::List(first) => {
                if self.in_item() {
                    self.flush();
                } else {
                    self.block_start();
                }
                self.containers.push(Container::List { next: first });
            }
            Tag::Item => self.item_start(),
            Tag::Table(aligns) => {
                self.block_start();
                self.table = Some(Table::new(aligns));
            }
            Tag::TableHead => {
                self.inline.clear();
                self.styles.push(self.theme.style(Role::Strong));
            }
            Tag::TableRow | Tag::TableCell => self.inline.clear(),
            Tag::Emphasis => self.styles.push(self.theme.style(Role::Emphasis)),
            Tag::Strong => self.styles.push(self.theme.style(Role::Strong)),
            Tag::Strikethrough => self.styles.push(if self.theme.is_plain() {
                Style::new()
            } else {
                Style::new().strikethrough()
            }),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.styles.push(self.theme.style(Role::Link));
                self.links.push((dest_url.to_string(), self.inline.len()));
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition => self.block_start(),
            Tag::Superscript | Tag::Subscript => self.styles.push(Style::new()),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph
            | TagEnd::HtmlBlock
            | TagEnd::MetadataBlock(_)
            | TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition => self.block_end(),
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.block_end();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.containers.pop();
                self.styles.pop();
                self.blank_pending = true;
            }
            TagEnd::CodeBlock => {
                if let Some(code) = self.code.take() {
                    self.code_block(&code);
                }
                self.block_end();
            }
            TagEnd::List(_) => {
                self.flush();
                self.containers.pop();
                self.blank_pending = !self.in_item();
            }
            TagEnd::Item => {
                self.flush();
                if matches!(
                    self.containers.last(),
                    Some(Container::Item {
                        marker: Some(_),
                        ..
                    })
                ) {
                    self.write(Line::default());
                }
                self.containers.pop();
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    for line in table.lines(self.theme.style(Role::Rule)) {
                        self.write(line);
                    }
                }
                self.block_end();
            }
            TagEnd::TableHead => {
                self.styles.pop();
                self.end_cell_row();
                if let Some(t) = &mut self.table {
                    t.has_head = true;
                }
            }
            TagEnd::TableRow => self.end_cell_row(),
            TagEnd::TableCell => {
                let cell = wrap(&self.inline, usize::MAX).into_iter().fold(
                    Line::default(),
                    |mut acc, l| {
                        if !acc.is_empty() {
                            acc.push(" ", Style::new());
                        }
                        acc.append(&l);
                        acc
                    },
                );
                self.inline.clear();
                if let Some(t) = &mut self.table {
                    t.row.push(cell);
                }
            }
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript => {
                self.styles.pop();
            }
            TagEnd::Link | TagEnd::Image => {
                self.styles.pop();
                if let Some((url, start)) = self.links.pop() {
                    self.link_end(&url, start);
                }
            }
        }
    }

    fn end_cell_row(&mut self) {
        if let Some(t) = &mut self.table {
            t.end_row();
        }
    }

    /// After a link's text, its URL in the muted style, unless the text says it already.
    fn link_end(&mut self, url: &str, start: usize) {
        let text: String = self
            .inline
            .get(start..)
            .unwrap_or_default()
            .iter()
            .map(|(t, _)| t.as_str())
            .collect();
        let shown = text.trim();
        if url.is_empty() || url == shown || url.strip_prefix("mailto:") == Some(shown) {
            return;
        }
        let muted = merge(self.style(), self.theme.style(Role::Muted));
        self.inline.push((" ".to_owned(), self.style()));
        self.inline.push((format!("({})", sanitize(url)), muted));
    }

    fn item_start(&mut self) {
        self.flush();
        if self.blank_pending {
            self.blank();
            self.blank_pending = false;
        }
        let depth = self
            .containers
            .iter()
            .filter(|c| matches!(c, Container::List { .. }))
            .count();
        let text = match self.containers.last_mut() {
            Some(Container::List { next: Some(n) }) => {
                let text = format!("{n}.");
                *n = n.saturating_add(1);
                text
            }
            _ => ["•", "◦", "▪"]
                .get(depth.saturating_sub(1) % 3)
                .copied()
                .unwrap_or("•")
                .to_owned(),
        };
        let mut marker = Line::default();
        marker.push(&text, self.theme.style(Role::ListMarker));
        marker.push(" ", Style::new());
        self.containers.push(Container::Item {
            indent: marker.width(),
            marker: Some(marker),
        });
    }

    fn code_block(&mut self, code: &CodeBlock) {
        let muted = self.theme.style(Role::Muted);
        let style = self.theme.style(Role::CodeBlock);
        if !code.language.is_empty() {
            let mut label = Line::default();
            label.push("  ", Style::new());
            label.push(&format!("── {}", code.language), muted);
            self.write(label);
        }
        for text in code.text.lines() {
            let mut line = Line::default();
            line.push("  ", Style::new());
            line.push(&expand_tabs(text), style);
            self.write(line);
        }
    }

    fn text(&mut self, text: &str, style: Style) {
        if !text.is_empty() {
            self.inline.push((sanitize(text), style));
        }
    }

    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::new(), |acc, s| merge(acc, *s))
    }

    fn in_item(&self) -> bool {
        self.containers
            .iter()
            .any(|c| matches!(c, Container::Item { .. }))
    }

    fn prefix_width(&self) -> usize {
        self.containers
            .iter()
            .map(|c| match c {
                Container::Quote => 2,
                Container::List { .. } => 0,
                Container::Item { indent, .. } => *indent,
            })
            .sum()
    }

    /// The columns left for text after the prefixes.
    fn avail(&self) -> usize {
        self.width
            .saturating_sub(self.prefix_width())
            .max(MIN_TEXT_WIDTH)
    }

    fn block_start(&mut self) {
        self.flush();
        if self.blank_pending {
            self.blank();
            self.blank_pending = false;
        }
    }

    fn block_end(&mut self) {
        self.flush();
        self.blank_pending = true;
    }

    /// Wraps and writes the collected inline text.
    fn flush(&mut self) {
        if self.inline.is_empty() || self.table.is_some() {
            return;
        }
        let inline = std::mem::take(&mut self.inline);
        for line in wrap(&inline, self.avail()) {
            self.write(line);
        }
    }

    /// Writes one line after the containers' prefixes; the first line of an item takes its
    /// marker.
    fn write(&mut self, line: Line) {
        let quote = self.theme.style(Role::Quote);
        let mut full = Line::default();
        for c in &mut self.containers {
            match c {
                Container::Quote => full.push("│ ", quote),
                Container::List { .. } => {}
                Container::Item { indent, marker } => match marker.take() {
                    Some(m) => full.append(&m),
                    None => full.push(&" ".repeat(*indent), Style::new()),
                },
            }
        }
        full.append(&line);
        full.trim_end();
        self.out.push(full);
    }

    /// A blank line: only the quotes' gutters.
    fn blank(&mut self) {
        if self.out.is_empty() {
            return;
        }
        let quote = self.theme.style(Role::Quote);
        let mut line = Line::default();
        for c in &self.containers {
            match c {
                Container::Quote => line.push("│ ", quote),
                Container::List { .. } => {}
                Container::Item { indent, .. } => line.push(&" ".repeat(*indent), Style::new()),
            }
        }
        line.trim_end();
        self.out.push(line);
    }
}

/// `text` with each tab replaced by the spaces up to the next multiple of 4 columns.
fn expand_tabs(text: &str) -> String {
    if !text.contains('\t') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut column = 0;
    for c in text.chars() {
        if c == '\t' {
            let n = 4 - column % 4;
            out.extend(std::iter::repeat_n(' ', n));
            column += n;
        } else {
            out.push(c);
            column += width(c.encode_utf8(&mut [0; 4]));
        }
    }
    out
}
