//! The `render` tool: a harness-side tool (no sandbox, no workspace access) that runs the
//! model's script and hands what it placed to the screen through an [`Outbox`].
//!
//! It is registered only in interactive sessions (`bee repl`, inline or full-screen): a
//! headless `bee run` has nobody to show a widget to, so the model is not offered the tool.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::json;

use super::board::Board;
use super::placement::Placement;
use super::script::{self, ScriptLimits};
use crate::provider::ToolDef;
use crate::tools::{Answer, Context, Placement as Runs, Tool, ToolState};

/// The tool's name.
pub const RENDER_TOOL: &str = "render";

/// Where the placements are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// The full-screen TUI: panels are a column beside the conversation.
    Panels,
    /// The inline REPL: a panel's widget is printed in the conversation under its name.
    Inline,
}

/// Placements on their way from the tool to the screen. The tool puts a script's
/// placements in when it completes; the screen takes them when it shows the tool's result.
#[derive(Debug, Clone, Default)]
pub struct Outbox(Arc<Mutex<Vec<Placement>>>);

impl Outbox {
    /// Takes every placement waiting, oldest first.
    #[must_use]
    pub fn take(&self) -> Vec<Placement> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }

    fn put(&self, placements: Vec<Placement>) {
        if let Ok(mut v) = self.0.lock() {
            v.extend(placements);
        }
    }
}

/// The `render` tool.
#[derive(Debug)]
pub struct RenderTool {
    surface: Surface,
    outbox: Outbox,
    board: Mutex<Board>,
    limits: ScriptLimits,
}

impl RenderTool {
    /// The tool for `surface`, handing placements to `outbox`.
    #[must_use]
    pub fn new(surface: Surface, outbox: Outbox) -> Self {
        Self {
            surface,
            outbox,
            board: Mutex::new(Board::default()),
            limits: ScriptLimits::default(),
        }
    }

    fn run(&self, source: &str) -> Result<String, String> {
        let placements =
            script::run(source, &self.limits).map_err(|e| format!("the script failed at {e}"))?;
        let now = Instant::now();
        let mut board = self
            .board
            .lock()
            .map_err(|_| "the panels' state is unusable after an earlier failure".to_owned())?;
        board.expire(now);
        let mut next = board.clone();
        for p in &placements {
            next.apply(p, now)?;
        }
        *board = next;
        let inline = placements
            .iter()
            .filter(|p| matches!(p, Placement::Inline(_)))
            .count();
        let mut reply = format!(
            "rendered {inline} inline widget(s) and {} panel change(s); panels now: {}",
            placements.len() - inline,
            board.summary(now)
        );
        if self.surface == Surface::Inline && placements.len() > inline {
            reply.push_str(
                " (this is the inline REPL: a panel's widget is shown in the conversation \
                 under the panel's name)",
            );
        }
        self.outbox.put(placements);
        Ok(reply)
    }
}

impl Tool for RenderTool {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: RENDER_TOOL.to_owned(),
            description: "Shows the person widgets: tables, charts, gauges, code, lists. \
                          The input is a Rhai script (no I/O). Widgets: text(s), \
                          markdown(s), code(lang, s), table([header…], [[cell…]…]), \
                          list([item…]), kv(#{key: value}), bar_chart(#{label: n}), \
                          sparkline([n…]), gauge(label, fraction 0..1). Place them with \
                          render(w) (in the conversation), render_to(panel, w), \
                          render_to_ttl(panel, w, seconds), remove_panel(panel), \
                          clear_panels(). Panels are named side areas that stay while the \
                          conversation goes on; reuse a name to update one. Example: \
                          render_to_ttl(\"metrics\", sparkline([3, 5, 2, 8]), 60);"
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "script": {
                        "type": "string",
                        "description": "The Rhai script that builds and places the widgets."
                    }
                },
                "required": ["script"],
                "additionalProperties": false
            }),
        }
    }

    fn placement(&self) -> Runs {
        Runs::Harness
    }

    fn call(&self, args: &serde_json::Value, _ctx: &Context<'_>) -> Answer {
        let Some(source) = args.get("script").and_then(serde_json::Value::as_str) else {
            return Answer::could_not_run(
                "the argument `script` (a string holding the Rhai script) is missing".to_owned(),
            );
        };
        match self.run(source) {
            Ok(reply) => Answer::completed(reply),
            Err(why) => Answer {
                state: ToolState::Failed,
                ..Answer::could_not_run(why)
            },
        }
    }
}
