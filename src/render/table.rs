//! Markdown tables, rendered simply: cells padded to their column's width and separated by
//! ` │ `, a rule of `─┼─` under the header row. Long tables are not wrapped.

use anstyle::Style;
use pulldown_cmark::Alignment;

use super::text::Line;

/// A table being collected, cell by cell.
#[derive(Debug, Default)]
pub(crate) struct Table {
    pub(crate) aligns: Vec<Alignment>,
    /// Rows of cells; the first is the header when `has_head`.
    pub(crate) rows: Vec<Vec<Line>>,
    pub(crate) row: Vec<Line>,
    pub(crate) has_head: bool,
}

impl Table {
    pub(crate) fn new(aligns: Vec<Alignment>) -> Self {
        Self {
            aligns,
            ..Self::default()
        }
    }

    pub(crate) fn end_row(&mut self) {
        self.rows.push(std::mem::take(&mut self.row));
    }

    /// The table's lines; `rule` styles the separators.
    pub(crate) fn lines(&self, rule: Style) -> Vec<Line> {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c).map(Line::width))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut lines = Vec::new();
        for (i, row) in self.rows.iter().enumerate() {
            let mut line = Line::default();
            for (c, width) in widths.iter().enumerate() {
                if c > 0 {
                    line.push(" │ ", rule);
                }
                let empty = Line::default();
                let cell = row.get(c).unwrap_or(&empty);
                let pad = width.saturating_sub(cell.width());
                let (before, after) = match self.aligns.get(c) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                    _ => (0, pad),
                };
                line.push(&" ".repeat(before), Style::new());
                line.append(cell);
                line.push(&" ".repeat(after), Style::new());
            }
            line.trim_end();
            lines.push(line);
            if i == 0 && self.has_head {
                let mut sep = Line::default();
                let cells: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                sep.push(&cells.join("─┼─"), rule);
                lines.push(sep);
            }
        }
        lines
    }
}
