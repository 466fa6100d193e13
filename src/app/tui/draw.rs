//! One frame: the conversation, the panels' column, the input box and the status line, or
//! an overlay (help, panels), or the "terminal too small" screen. Only the cells on screen
//! are rendered (each once per width and change); ratatui then writes only the terminal
//! cells that differ from the last frame.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::app::App;
use super::keys::{Focus, Overlay};
use super::style;
use crate::app::harness::conversation::MIN_SIZE;
use crate::panels::{Panel, draw as widgets};
use crate::render::Role;

/// The narrowest screen that shows the panels beside the conversation.
pub(super) const PANEL_COLUMN_MIN: u16 = 100;

/// The keys, for the help overlay.
pub(super) const HELP: [(&str, &str); 16] = [
    (
        "Enter",
        "send the input; a line starting with / is a command: /help, /skills, /skill NAME, /agents, /policy, /allow [N], /show [N], /cost, /clear, /quit",
    ),
    ("Shift+Enter, Alt+Enter", "a new line in the input"),
    (
        "↑ ↓, mouse wheel",
        "scroll the conversation (in a multi-line input, move the cursor first)",
    ),
    ("PgUp PgDn", "page the conversation"),
    ("Ctrl-P Ctrl-N", "the previous / next input"),
    ("Tab", "focus: input → conversation → panels"),
    (
        "Esc",
        "closes an overlay; from the input to the conversation, and back",
    ),
    (
        "↑ ↓ (conversation)",
        "select a message; Enter expands or folds a tool call",
    ),
    ("gg G", "the top / the end of the conversation"),
    (
        "p",
        "the panels as an overlay; there, and in the column, ↑ ↓ ← → j k (Tab) switch panels",
    ),
    (
        "y",
        "yank the selected message or panel to the clipboard (OSC 52, works over SSH)",
    ),
    ("? F1", "this help"),
    ("q", "quit (outside the input: there it is typed)"),
    ("Ctrl-C", "stop the turn; else clear the input; else quit"),
    ("Ctrl-D", "quit, when the input is empty"),
    (
        "Shift-drag",
        "select text with the mouse (the terminal's own selection: mouse reporting is on for the wheel)",
    ),
];

/// Draws `app` into `frame`.
pub(super) fn draw(frame: &mut Frame<'_>, app: &mut App) {
    let area = frame.area();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        too_small(frame, area);
        return;
    }
    let input_rows = u16::try_from(app.input.lines().len().clamp(1, 6)).unwrap_or(6) + 2;
    let [main, input, status] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(input_rows),
        Constraint::Length(1),
    ])
    .areas(area);
    let column = !app.board.is_empty() && area.width >= PANEL_COLUMN_MIN;
    let (conversation, panels) = if column {
        let [c, p] = Layout::horizontal([Constraint::Min(40), Constraint::Length(area.width / 3)])
            .areas(main);
        (c, Some(p))
    } else {
        (main, None)
    };
    draw_conversation(frame, app, conversation);
    if let Some(p) = panels {
        draw_panels(frame, app, p);
    }
    draw_input(frame, app, input);
    draw_status(frame, app, status, column);
    match app.overlay {
        Overlay::None => {}
        Overlay::Help => help(frame, app, area),
        Overlay::Panels => {
            let r = centered(area, 90, 90);
            frame.render_widget(Clear, r);
            if app.board.is_empty() {
                let block = titled(app, " panels ", true);
                frame.render_widget(
                    Paragraph::new("No panels yet: the model makes them with the render tool.")
                        .block(block),
                    r,
                );
            } else {
                draw_panels(frame, app, r);
            }
        }
    }
}

fn too_small(frame: &mut Frame<'_>, area: Rect) {
    let text = format!(
        "terminal too small: {}×{} (bee needs {}×{}); enlarge it, or Ctrl-C to quit",
        area.width, area.height, MIN_SIZE.0, MIN_SIZE.1
    );
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
}

fn titled(app: &App, title: &str, focused: bool) -> Block<'static> {
    let border = if focused {
        style::style(app.theme.style(Role::Prompt))
    } else {
        style::style(app.theme.style(Role::Rule))
    };
    Block::default()
        .borders(Borders::ALL)
        .border_style(border)
        .title(Span::styled(
            title.to_owned(),
            style::style(app.theme.style(Role::Heading)),
        ))
}

fn draw_conversation(frame: &mut Frame<'_>, app: &mut App, area: Rect) {
    // One column of gutter marks the selected message.
    let width = usize::from(area.width.saturating_sub(1)).max(1);
    let rows = usize::from(area.height);
    if app.view.0 != width {
        // A new width: the scroll position in rows means something else now; keep the end.
        app.scroll = 0;
    }
    app.view = (width, rows);
    let mut shown = visible(app, width, rows);
    if shown.len() < rows && app.scroll > 0 {
        // Scrolled past the top (every cell was walked, so their heights are known): stop
        // with the first row at the top.
        app.scroll = app.total_height().saturating_sub(rows);
        shown = visible(app, width, rows);
    }
    let theme = app.theme.clone();
    shown.reverse();
    // Until the person first sends something (bee's own notes may be there already).
    if !app
        .cells
        .iter()
        .any(|c| matches!(c.kind, super::cells::Kind::User(_)))
    {
        shown.push(Line::styled(
            " Type below and press Enter. ? or F1 shows the keys.",
            style::style(theme.style(Role::Muted)),
        ));
    }
    // Bottom-aligned: blank rows above a short conversation.
    let pad = rows.saturating_sub(shown.len());
    let mut lines = vec![Line::default(); pad];
    lines.extend(shown);
    frame.render_widget(Paragraph::new(lines), area);
}

/// The rows on screen, bottom first: skip `app.scroll` rows from the end, take `rows`.
fn visible(app: &mut App, width: usize, rows: usize) -> Vec<Line<'static>> {
    let theme = app.theme.clone();
    let marker = style::style(theme.style(Role::Prompt));
    let mut skip = app.scroll;
    let mut shown: Vec<Line<'static>> = Vec::with_capacity(rows);
    for (i, cell) in app.cells.iter_mut().enumerate().rev() {
        if shown.len() >= rows {
            break;
        }
        let selected = app.selected == Some(i) && app.focus == Focus::Conversation;
        let lines = cell.lines(&theme, width);
        let keep = lines.len().saturating_sub(skip);
        skip = skip.saturating_sub(lines.len());
        for line in lines[..keep].iter().rev() {
            if shown.len() >= rows {
                break;
            }
            let mut spans = vec![if selected {
                Span::styled("▌", marker)
            } else {
                Span::raw(" ")
            }];
            spans.extend(line.spans.iter().cloned());
            shown.push(Line::from(spans));
        }
    }
    shown
}

fn panel_title(p: &Panel, now: Instant) -> String {
    match p.expires {
        Some(e) => format!(
            " {} · {} s ",
            p.name,
            e.saturating_duration_since(now).as_secs_f64().ceil()
        ),
        None => format!(" {} ", p.name),
    }
}

fn draw_panels(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let now = Instant::now();
    let panels = app.board.panels();
    let n = u32::try_from(panels.len()).unwrap_or(1).max(1);
    let areas = Layout::vertical(vec![Constraint::Ratio(1, n); panels.len()]).split(area);
    let focused = app.focus == Focus::Panels || app.overlay == Overlay::Panels;
    for (i, (p, r)) in panels.iter().zip(areas.iter()).enumerate() {
        let block = titled(app, &panel_title(p, now), focused && i == app.panel);
        let inner = block.inner(*r);
        let lines: Vec<Line<'static>> =
            widgets::lines(&p.widget, &app.theme, usize::from(inner.width))
                .iter()
                .map(style::line)
                .collect();
        frame.render_widget(Paragraph::new(lines).block(block), *r);
    }
}

fn draw_input(frame: &mut Frame<'_>, app: &mut App, area: Rect) {
    let focused = app.focus == Focus::Input && app.overlay == Overlay::None;
    let title = if app.busy {
        " working… (Ctrl-C stops the turn) "
    } else {
        " message "
    };
    let block = titled(app, title, focused);
    app.input.set_block(block);
    app.input.set_cursor_style(if focused {
        Style::default().add_modifier(Modifier::REVERSED)
    } else {
        Style::default()
    });
    frame.render_widget(&app.input, area);
}

fn draw_status(frame: &mut Frame<'_>, app: &App, area: Rect, column: bool) {
    frame.render_widget(
        Paragraph::new(Line::from(status_spans(
            app,
            column,
            usize::from(area.width),
        ))),
        area,
    );
}

/// The status line's fields, in order, for `width` columns: when they do not all fit, the
/// least important go first — the prices' source, the tokens, the model, the cost, a hint,
/// the panels, the denials — so what is left is whole. How tools are confined always stays.
fn status_spans(app: &App, column: bool, width: usize) -> Vec<Span<'static>> {
    let t = &app.totals;
    let muted = style::style(app.theme.style(Role::Muted));
    let notice = style::style(app.theme.style(Role::Notice));
    let host = app.status.confinement.starts_with("--host");
    // (rank, spans): the highest rank is dropped first.
    let mut fields: Vec<(u8, Vec<Span<'static>>)> = vec![(
        0,
        vec![Span::styled(
            format!(" {}", app.status.confinement),
            style::style(
                app.theme
                    .style(if host { Role::Denial } else { Role::ToolOk }),
            ),
        )],
    )];
    fields.push((
        1,
        vec![Span::styled(
            format!(" · {} denial(s)", t.denials),
            if t.denials > 0 {
                style::style(app.theme.style(Role::Denial))
            } else {
                muted
            },
        )],
    ));
    let n = app.board.panels().len();
    if n > 0 && !column {
        fields.push((2, vec![Span::styled(format!(" · p: {n} panel(s)"), notice)]));
    }
    fields.push((
        5,
        vec![
            Span::styled(" · ", muted),
            Span::styled(
                app.status.model.clone(),
                style::style(app.theme.style(Role::Heading)),
            ),
        ],
    ));
    fields.push((
        6,
        vec![Span::styled(
            format!(" · {} tokens", t.input_tokens + t.output_tokens),
            muted,
        )],
    ));
    fields.push((4, vec![Span::styled(format!(" · {}", t.cost), muted)]));
    let sources: Vec<String> = t.cost.sources.iter().map(ToString::to_string).collect();
    if !sources.is_empty() {
        fields.push((
            7,
            vec![Span::styled(format!(" ({})", sources.join(", ")), muted)],
        ));
    }
    if let Some(h) = &app.hint {
        fields.push((3, vec![Span::styled(format!(" · {h}"), notice)]));
    }
    let used = |f: &[(u8, Vec<Span<'static>>)]| -> usize {
        f.iter()
            .flat_map(|(_, spans)| spans.iter().map(Span::width))
            .sum()
    };
    while used(&fields) > width {
        let Some(last) = fields
            .iter()
            .enumerate()
            .filter(|(_, (rank, _))| *rank > 0)
            .max_by_key(|(_, (rank, _))| *rank)
            .map(|(i, _)| i)
        else {
            break;
        };
        fields.remove(last);
    }
    fields.into_iter().flat_map(|(_, spans)| spans).collect()
}

fn help(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let r = centered(area, 90, 90);
    frame.render_widget(Clear, r);
    let code = style::style(app.theme.style(Role::Code));
    let lines: Vec<Line<'static>> = HELP
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:<24}"), code),
                Span::raw((*what).to_owned()),
            ])
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(titled(app, " keys — Esc closes ", true)),
        r,
    );
}

/// A rectangle of `w`% × `h`% in the middle of `area`.
fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let width = area.width * w / 100;
    let height = area.height * h / 100;
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}
