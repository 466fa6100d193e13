//! What `cargo bench -p bee --features tui --bench tui` measures, run here because the
//! screen's state is private: frames drawn while an answer streams into a long conversation
//! beside live panels, through crossterm into a byte counter (the escape sequences a real
//! terminal would receive), and the conversation's memory.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use super::app::{App, FromSession, Status};
use super::draw::draw;
use crate::panels::{PanelName, Placement, Widget};
use crate::provider;
use crate::records::{EventBody, Message, Role as Author};
use crate::render::Theme;

/// Frame times and sizes of one run.
#[derive(Debug, Clone)]
pub struct Frames {
    /// How long each frame took to draw and write, in order.
    pub times: Vec<Duration>,
    /// Bytes written to the terminal by each frame.
    pub bytes: Vec<usize>,
}

#[derive(Debug, Clone, Default)]
struct Counter(Arc<AtomicUsize>);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.fetch_add(buf.len(), Ordering::Relaxed);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The screen with `messages` messages: people's questions and Markdown answers in turn.
fn conversation(messages: usize) -> App {
    let mut app = App::new(
        Theme::dark(),
        Status {
            model: "bench-model".into(),
            confinement: "dev.toml (kernel-enforced)".into(),
        },
    );
    for i in 0..messages {
        let text = if i % 2 == 0 {
            format!("question {i}: what does `src/lib.rs` export, and why?")
        } else {
            format!(
                "Answer {i}: the **library** exports `run` and `Config`.\n\n- one item\n- \
                 another item with a [link](https://example.com)\n\nA closing paragraph that \
                 is long enough to wrap on a terminal of ordinary width, as answers are."
            )
        };
        app.session(FromSession::Recorded(Box::new(EventBody::Message(
            Message {
                role: Author::Assistant,
                text,
            },
        ))));
    }
    app
}

fn panels(step: usize) -> Vec<Placement> {
    let name = |n: &str| PanelName::parse(n).unwrap_or_else(|_| unreachable_name());
    let points: Vec<f64> = (0..60).map(|i| ((i + step) % 17) as f64).collect();
    let widgets = [
        ("load", Widget::Sparkline(points)),
        (
            "files",
            Widget::Table {
                header: vec!["file".into(), "lines".into()],
                rows: (0..8)
                    .map(|i| vec![format!("f{i}.rs"), format!("{}", i * 10 + step % 7)])
                    .collect(),
            },
        ),
        (
            "coverage",
            Widget::Gauge {
                label: "cover".into(),
                ratio: (step % 100) as f64 / 100.0,
            },
        ),
        (
            "langs",
            Widget::BarChart(vec![
                ("rs".into(), 50.0),
                ("toml".into(), (step % 9) as f64),
            ]),
        ),
        (
            "todo",
            Widget::List(vec!["a".into(), "b".into(), format!("c {step}")]),
        ),
        (
            "env",
            Widget::Kv(vec![
                ("model".into(), "m".into()),
                ("step".into(), step.to_string()),
            ]),
        ),
        (
            "notes",
            Widget::Markdown(format!("**step** {step}\n\n- x\n- y")),
        ),
        (
            "code",
            Widget::Code {
                lang: "rust".into(),
                source: format!("let step = {step};"),
            },
        ),
    ];
    widgets
        .into_iter()
        .map(|(n, widget)| Placement::Panel {
            name: name(n),
            widget,
            ttl: Some(Duration::from_secs(3_600)),
        })
        .collect()
}

fn unreachable_name() -> PanelName {
    // The names above are valid; this keeps the benchmark free of panics.
    PanelName::parse("panel").unwrap_or_else(|_| unreachable_name())
}

/// Streams `frames` words into a conversation of `messages` messages with 8 live panels
/// (all updated every 10 frames), drawing one `width`×`height` frame per word.
///
/// # Errors
/// When a frame cannot be drawn.
pub fn streaming(messages: usize, frames: usize, width: u16, height: u16) -> io::Result<Frames> {
    let mut app = conversation(messages);
    app.session(FromSession::Placements(panels(0)));
    let counter = Counter::default();
    let written = Arc::clone(&counter.0);
    let mut terminal = Terminal::with_options(
        CrosstermBackend::new(counter),
        ratatui::TerminalOptions {
            viewport: ratatui::Viewport::Fixed(ratatui::layout::Rect::new(0, 0, width, height)),
        },
    )?;
    terminal.draw(|f| draw(f, &mut app))?;
    let mut out = Frames {
        times: Vec::with_capacity(frames),
        bytes: Vec::with_capacity(frames),
    };
    for i in 0..frames {
        let before = written.load(Ordering::Relaxed);
        let started = Instant::now();
        app.session(FromSession::Stream(provider::Event::TextDelta {
            text: format!("word{i} "),
        }));
        if i % 10 == 0 {
            app.session(FromSession::Placements(panels(i)));
        }
        terminal.draw(|f| draw(f, &mut app))?;
        out.times.push(started.elapsed());
        out.bytes.push(written.load(Ordering::Relaxed) - before);
    }
    Ok(out)
}

/// Pages up through a conversation of `messages` messages, one frame per page, from the end
/// to the top.
///
/// # Errors
/// When a frame cannot be drawn.
pub fn paging(messages: usize, pages: usize, width: u16, height: u16) -> io::Result<Frames> {
    let mut app = conversation(messages);
    let mut terminal = Terminal::with_options(
        CrosstermBackend::new(Counter::default()),
        ratatui::TerminalOptions {
            viewport: ratatui::Viewport::Fixed(ratatui::layout::Rect::new(0, 0, width, height)),
        },
    )?;
    terminal.draw(|f| draw(f, &mut app))?;
    let mut out = Frames {
        times: Vec::new(),
        bytes: Vec::new(),
    };
    let page_up = ratatui::crossterm::event::KeyEvent::new(
        ratatui::crossterm::event::KeyCode::PageUp,
        ratatui::crossterm::event::KeyModifiers::NONE,
    );
    for _ in 0..pages {
        let started = Instant::now();
        app.key(page_up);
        terminal.draw(|f| draw(f, &mut app))?;
        out.times.push(started.elapsed());
    }
    Ok(out)
}

/// A conversation of `messages` messages, drawn once at the end (so the cells on screen are
/// rendered), kept alive while `measure` runs: the caller measures its memory.
pub fn hold(messages: usize, render_all: bool, measure: &mut dyn FnMut()) {
    let mut app = conversation(messages);
    if render_all {
        app.view = (199, 40);
        let _ = app.total_height();
    }
    measure();
    drop(app);
}
