//! The render pipeline: widgets the model builds with a small script, and where they are
//! shown. The inline REPL and the full-screen TUI share all of it.
//!
//! ```text
//! render tool ──▶ script (Rhai, limited) ──▶ placements ──▶ Outbox ──▶ REPL / TUI
//!                                              │                      draw::lines
//!                                              └──▶ Board (the tool's view of the panels)
//! ```
//!
//! - [`widget`]: the widgets (`text`, `markdown`, `code`, `table`, `list`, `kv`, `bar_chart`,
//!   `sparkline`, `gauge`) and the checks their contents pass.
//! - [`placement`]: where a widget goes (inline, or a named panel with an optional time to
//!   live) and the rules for panel names and lifetimes.
//! - [`script`]: the script engine: no I/O, no modules, limits on operations, time, depth
//!   and sizes; an error carries its line and column.
//! - [`draw`]: a widget as styled lines at a width, through the theme's roles.
//! - [`board`]: the named panels and when they expire.
//! - [`tool`]: the `render` harness tool and the [`Outbox`] it hands placements to.

pub mod board;
pub mod draw;
pub mod placement;
pub mod script;
pub mod tool;
pub mod widget;

pub use board::{Board, Panel};
pub use placement::{PanelName, Placement};
pub use script::{ScriptError, ScriptLimits};
pub use tool::{Outbox, RENDER_TOOL, RenderTool, Surface};
pub use widget::Widget;
