//! A widget as styled lines at a width, through the theme's roles: the same lines go to the
//! inline REPL (as escape sequences) and into the TUI's cells. Text from the script is
//! untrusted and sanitized; every line fits the width (tables and code are cut with `…`).

use anstyle::Style;
use pulldown_cmark::Alignment;

use super::widget::Widget;
use crate::render::table::Table;
use crate::render::wrap::wrap;
use crate::render::{Line, Role, Theme, markdown_lines, sanitize, width as text_width};

/// The eight heights of a sparkline's bars.
const SPARKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// `widget` at `width` columns (at least 1).
#[must_use]
pub fn lines(widget: &Widget, theme: &Theme, width: usize) -> Vec<Line> {
    let width = width.max(1);
    let mut out = match widget {
        Widget::Text(t) => wrapped(t, Style::new(), width),
        Widget::Markdown(m) => markdown_lines(m, theme, width),
        Widget::Code { lang, source } => markdown_lines(&fenced(lang, source), theme, width),
        Widget::Table { header, rows } => table(header, rows, theme),
        Widget::List(items) => list(items, theme, width),
        Widget::Kv(pairs) => kv(pairs, theme, width),
        Widget::BarChart(bars) => bar_chart(bars, theme, width),
        Widget::Sparkline(points) => sparkline(points, theme),
        Widget::Gauge { label, ratio } => gauge(label, *ratio, theme, width),
    };
    for line in &mut out {
        line.truncate(width);
    }
    out
}

fn one_line(text: &str) -> String {
    sanitize(text).replace(['\n', '\t'], " ")
}

fn wrapped(text: &str, style: Style, width: usize) -> Vec<Line> {
    let mut lines = wrap(&vec![(sanitize(text), style)], width);
    if lines.is_empty() {
        lines.push(Line::default());
    }
    lines
}

/// `source` in a fence longer than any run of backticks inside it.
fn fenced(lang: &str, source: &str) -> String {
    let longest = source.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let lang = one_line(lang).replace('`', "");
    format!("{fence}{lang}\n{source}\n{fence}\n")
}

fn table(header: &[String], rows: &[Vec<String>], theme: &Theme) -> Vec<Line> {
    let mut t = Table::new(vec![Alignment::None; header.len()]);
    t.has_head = true;
    let strong = theme.style(Role::Strong);
    t.rows.push(
        header
            .iter()
            .map(|h| Line::styled(&one_line(h), strong))
            .collect(),
    );
    for row in rows {
        t.rows.push(
            row.iter()
                .map(|c| Line::styled(&one_line(c), Style::new()))
                .collect(),
        );
    }
    t.lines(theme.style(Role::Rule))
}

fn list(items: &[String], theme: &Theme, width: usize) -> Vec<Line> {
    let marker = theme.style(Role::ListMarker);
    let mut out = Vec::new();
    for item in items {
        for (i, l) in wrapped(item, Style::new(), width.saturating_sub(2).max(1))
            .into_iter()
            .enumerate()
        {
            let mut line = Line::styled(if i == 0 { "• " } else { "  " }, marker);
            line.append(&l);
            out.push(line);
        }
    }
    out
}

fn kv(pairs: &[(String, String)], theme: &Theme, width: usize) -> Vec<Line> {
    let keys: Vec<String> = pairs.iter().map(|(k, _)| one_line(k)).collect();
    let key_width = keys
        .iter()
        .map(|k| text_width(k))
        .max()
        .unwrap_or(0)
        .min(width / 2);
    let strong = theme.style(Role::Strong);
    let mut out = Vec::new();
    for (key, (_, value)) in keys.iter().zip(pairs) {
        let mut line = Line::styled(key, strong);
        line.truncate(key_width);
        let pad = key_width.saturating_sub(line.width()) + 2;
        line.push(&" ".repeat(pad), Style::new());
        line.push(&one_line(value), Style::new());
        out.push(line);
    }
    out
}

fn bar_chart(bars: &[(String, f64)], theme: &Theme, width: usize) -> Vec<Line> {
    let labels: Vec<String> = bars.iter().map(|(l, _)| one_line(l)).collect();
    let values: Vec<String> = bars.iter().map(|(_, v)| number(*v)).collect();
    let label_width = labels
        .iter()
        .map(|l| text_width(l))
        .max()
        .unwrap_or(0)
        .min(width / 3);
    let value_width = values.iter().map(|v| text_width(v)).max().unwrap_or(0);
    let room = width.saturating_sub(label_width + value_width + 2).max(1);
    let max = bars.iter().map(|(_, v)| *v).fold(0.0_f64, f64::max);
    let mut out = Vec::new();
    for ((label, value), (_, v)) in labels.iter().zip(&values).zip(bars) {
        let mut line = Line::styled(label, Style::new());
        line.truncate(label_width);
        line.push(
            &" ".repeat(label_width - line.width().min(label_width) + 1),
            Style::new(),
        );
        let cells = if max > 0.0 {
            // Rounded to whole cells; a value above zero shows at least a sliver.
            let n = (v / max * room as f64).round() as usize;
            if *v > 0.0 { n.max(1) } else { 0 }
        } else {
            0
        };
        line.push(&"█".repeat(cells.min(room)), theme.style(Role::Tool));
        line.push(" ", Style::new());
        line.push(value, theme.style(Role::Muted));
        out.push(line);
    }
    out
}

fn sparkline(points: &[f64], theme: &Theme) -> Vec<Line> {
    if points.is_empty() {
        return vec![Line::styled("(no points)", theme.style(Role::Muted))];
    }
    let lo = points.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = points.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = hi - lo;
    let spark: String = points
        .iter()
        .map(|p| {
            let i = if span > 0.0 {
                ((p - lo) / span * 7.0).round() as usize
            } else {
                3
            };
            SPARKS[i.min(7)]
        })
        .collect();
    let mut line = Line::styled(&spark, theme.style(Role::Tool));
    line.push(
        &format!("  {}..{}", number(lo), number(hi)),
        theme.style(Role::Muted),
    );
    vec![line]
}

fn gauge(label: &str, ratio: f64, theme: &Theme, width: usize) -> Vec<Line> {
    let label = one_line(label);
    let percent = format!(" {:>3.0}%", ratio * 100.0);
    let mut line = Line::default();
    if !label.is_empty() {
        line.push(&label, theme.style(Role::Strong));
        line.push(" ", Style::new());
        line.truncate(width / 2);
    }
    let room = width
        .saturating_sub(line.width() + text_width(&percent))
        .max(1);
    let filled = ((ratio * room as f64).round() as usize).min(room);
    line.push(&"█".repeat(filled), theme.style(Role::ToolOk));
    line.push(&"░".repeat(room - filled), theme.style(Role::Muted));
    line.push(&percent, Style::new());
    vec![line]
}

/// A value as people read it: integers without a fraction, others to two places.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(w: &Widget, width: usize) -> Vec<String> {
        lines(w, &Theme::plain(), width)
            .iter()
            .map(Line::render)
            .collect()
    }

    #[test]
    fn every_widget_fits_its_width() {
        let widgets = [
            Widget::Text("a long sentence that wraps across lines".into()),
            Widget::Markdown("# Title\n\n- one\n- two".into()),
            Widget::Code {
                lang: "rust".into(),
                source: "fn main() { println!(\"a very long line of code\"); }".into(),
            },
            Widget::table(
                vec!["name".into(), "value".into()],
                vec![vec!["漢字漢字漢字".into(), "a wide cell of text".into()]],
            )
            .unwrap(),
            Widget::List(vec!["first item that is long".into(), "second".into()]),
            Widget::Kv(vec![("key".into(), "a value that is long".into())]),
            Widget::BarChart(vec![("a".into(), 3.0), ("bb".into(), 10.0)]),
            Widget::Sparkline(vec![1.0, 5.0, 2.0, 8.0]),
            Widget::Gauge {
                label: "disk".into(),
                ratio: 0.5,
            },
        ];
        for w in &widgets {
            for width in [1, 12, 40] {
                for l in lines(w, &Theme::dark(), width) {
                    assert!(l.width() <= width, "{} at {width}: {l:?}", w.kind());
                }
            }
        }
    }

    #[test]
    fn charts_read_right() {
        assert_eq!(
            plain(&Widget::Sparkline(vec![0.0, 7.0, 3.5]), 40),
            ["▁█▅  0..7"]
        );
        assert_eq!(
            plain(
                &Widget::Gauge {
                    label: "cpu".into(),
                    ratio: 0.5
                },
                20
            ),
            ["cpu ██████░░░░░  50%"]
        );
        assert_eq!(
            plain(
                &Widget::BarChart(vec![("a".into(), 1.0), ("b".into(), 4.0)]),
                12
            ),
            ["a ██ 1", "b ████████ 4"]
        );
    }

    #[test]
    fn code_keeps_backticks_inside() {
        let out = plain(
            &Widget::Code {
                lang: "md".into(),
                source: "```\ninner\n```".into(),
            },
            40,
        );
        assert!(out.iter().any(|l| l.contains("```")), "{out:?}");
        assert!(out.iter().any(|l| l.contains("inner")), "{out:?}");
    }

    #[test]
    fn escapes_in_widgets_are_made_visible() {
        let out = plain(&Widget::List(vec!["\u{1b}[2Jboom".into()]), 40);
        assert_eq!(out, ["• ␛[2Jboom"]);
    }
}
