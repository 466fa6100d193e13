//! Progress of `bee run`: live lines on a terminal, one line per event on a pipe, or JSON
//! lines.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use super::Exit;
use crate::episode::EpisodeReport;
use crate::records::{Cost, EpisodeSummary, Event, EventBody, Outcome, Refusal, Role, RunSummary};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    /// A terminal: one line per episode, redrawn in place.
    Live,
    /// A pipe: one line per event.
    Lines,
    /// `--json`: one JSON object per line.
    Json,
}

struct ProgressState {
    out: Box<dyn Write + Send>,
    ids: Vec<String>,
    lines: Vec<String>,
    drawn: usize,
}

/// Progress output, shared by the episode threads.
pub(super) struct Progress {
    style: Style,
    state: Mutex<ProgressState>,
}

impl Progress {
    pub(super) fn new(out: Box<dyn Write + Send>, style: Style, ids: Vec<String>) -> Self {
        let lines = ids.iter().map(|id| format!("{id}  waiting")).collect();
        Self {
            style,
            state: Mutex::new(ProgressState {
                out,
                ids,
                lines,
                drawn: 0,
            }),
        }
    }

    fn with(&self, f: impl FnOnce(&mut ProgressState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
    }

    fn set_line(&self, id: &str, line: String) {
        self.with(|s| {
            match s.ids.iter().position(|x| x == id) {
                Some(i) => s.lines[i] = line,
                // A subagent: a line of its own, from its first event on.
                None => {
                    s.ids.push(id.to_owned());
                    s.lines.push(line);
                }
            }
            redraw(s);
        });
    }

    pub(super) fn started(&self, id: &str, workspace: &Path) {
        match self.style {
            Style::Live => self.set_line(id, format!("{id}  started in {}", workspace.display())),
            Style::Lines | Style::Json => {}
        }
    }

    pub(super) fn note(&self, id: &str, note: &str) {
        match self.style {
            Style::Live => self.set_line(id, format!("{id}  {note}")),
            Style::Lines => self.with(|s| {
                let _ = writeln!(s.out, "{id} note {note}");
            }),
            Style::Json => self.with(|s| {
                let v = serde_json::json!({"episode": id, "note": note});
                let _ = writeln!(s.out, "{v}");
            }),
        }
    }

    pub(super) fn event(&self, id: &str, e: &Event) {
        match self.style {
            Style::Live => {
                let totals_line = live_line(id, e);
                if let Some(line) = totals_line {
                    self.set_line(id, line);
                }
            }
            Style::Lines => self.with(|s| {
                let _ = writeln!(s.out, "{id} {:>3} {}", e.seq, describe(&e.body));
            }),
            Style::Json => self.with(|s| {
                let v = serde_json::json!({"episode": id, "event": e});
                let _ = writeln!(s.out, "{v}");
            }),
        }
    }

    pub(super) fn finished(&self, report: &EpisodeReport) {
        let id = &report.episode_id;
        let mut line = format!(
            "{id}  {}  {} turn(s), {} tool call(s), {}, {} tokens, {}",
            report.outcome.as_str(),
            report.totals.model_calls,
            report.totals.tool_calls,
            report.totals.denials_said(),
            report.totals.input_tokens + report.totals.output_tokens,
            report.totals.cost
        );
        if let Some(l) = &report.limit {
            line.push_str(&format!("; limit {}: {}", l.limit.as_str(), l.detail));
        }
        if let Some(p) = &report.provider_error {
            line.push_str(&format!("; provider {} error: {}", p.category, p.message));
        }
        if let Some(r) = &report.refusal {
            line.push_str(&format!("; refused: {}", refusal_words(r)));
        }
        if let Some(c) = &report.success_check {
            line.push_str(&format!("; check: {}", c.detail));
        }
        match self.style {
            Style::Live => self.set_line(id, line),
            Style::Lines => self.with(|s| {
                let _ = writeln!(s.out, "{line}");
            }),
            Style::Json => self.with(|s| {
                let v = serde_json::json!({
                    "episode": id,
                    "finished": {
                        "outcome": report.outcome,
                        "limit": report.limit,
                        "provider_error": report.provider_error.as_ref().map(|p| serde_json::json!({
                            "category": p.category,
                            "message": p.message,
                        })),
                        "refusal": report.refusal,
                        "success_check": report.success_check,
                        "transcript": report.transcript.display().to_string(),
                    },
                });
                let _ = writeln!(s.out, "{v}");
            }),
        }
    }

    pub(super) fn done(&self, summary: &RunSummary, status: Exit, run_dir: &Path) {
        self.with(|s| match self.style {
            Style::Json => {
                let v = serde_json::json!({
                    "summary": summary,
                    "exit": status.code(),
                    "run_dir": run_dir.display().to_string(),
                });
                let _ = writeln!(s.out, "{v}");
            }
            Style::Live | Style::Lines => {
                let top: Vec<_> = summary
                    .episodes
                    .iter()
                    .filter(|e| e.parent.is_none())
                    .collect();
                let passed = top
                    .iter()
                    .filter(|e| e.outcome == Some(Outcome::Passed))
                    .count();
                let tree = subagent_tree(summary);
                for line in &tree {
                    let _ = writeln!(s.out, "{line}");
                }
                let subagents = summary.episodes.len() - top.len();
                let refused: usize = summary
                    .episodes
                    .iter()
                    .map(|e| e.refused_subagents.len())
                    .sum();
                let agents = if subagents + refused > 0 {
                    format!("; {subagents} subagent(s), {refused} delegation(s) refused")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    s.out,
                    "run {}: {passed} of {} episode(s) passed{agents}; cost {}; records in {} \
                     (exit {})",
                    summary.run_id,
                    top.len(),
                    summary.totals.cost,
                    run_dir.display(),
                    status.code()
                );
            }
        });
    }
}

/// The sessions of a run as a tree, when any delegated: each episode, then its subagents
/// (indented by depth) and the delegations refused, each with how it ended.
fn subagent_tree(summary: &RunSummary) -> Vec<String> {
    let delegated = summary
        .episodes
        .iter()
        .any(|e| e.parent.is_some() || !e.refused_subagents.is_empty());
    if !delegated {
        return Vec::new();
    }
    let mut out = Vec::new();
    let roots = summary.episodes.iter().filter(|e| e.parent.is_none());
    for root in roots {
        tree_node(summary, root, 0, &mut out);
    }
    out
}

fn tree_node(summary: &RunSummary, e: &EpisodeSummary, depth: usize, out: &mut Vec<String>) {
    let indent = "  ".repeat(depth);
    let role = e
        .parent
        .as_ref()
        .map_or_else(String::new, |p| format!(" ({})", p.role));
    out.push(format!(
        "{indent}{}{role}  {}  {} model call(s), {} tool call(s), {}, {}",
        e.episode_id,
        e.outcome.map_or("running", Outcome::as_str),
        e.totals.model_calls,
        e.totals.tool_calls,
        e.totals.denials_said(),
        e.totals.cost
    ));
    for child in summary.episodes.iter().filter(|c| {
        c.parent
            .as_ref()
            .is_some_and(|p| p.episode_id == e.episode_id)
    }) {
        tree_node(summary, child, depth + 1, out);
    }
    for r in &e.refused_subagents {
        let first = r.reason.lines().next().unwrap_or("");
        out.push(format!(
            "{indent}  ✗ {} (call {}): {}",
            r.role,
            r.call_id,
            shorten(first, 120)
        ));
    }
}

fn redraw(s: &mut ProgressState) {
    let mut text = String::new();
    if s.drawn > 0 {
        text.push_str(&format!("\x1b[{}A", s.drawn));
    }
    // A line that wraps would throw off the cursor movement: cut each to the width.
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(100)
        .max(20);
    for line in &s.lines {
        text.push_str("\r\x1b[2K");
        text.push_str(&shorten(line, width - 2));
        text.push('\n');
    }
    s.drawn = s.lines.len();
    let _ = s.out.write_all(text.as_bytes());
    let _ = s.out.flush();
}

fn live_line(id: &str, e: &Event) -> Option<String> {
    match &e.body {
        EventBody::EpisodeStarted(_) | EventBody::EpisodeFinished(_) => None,
        body => Some(format!(
            "{id}  #{}  {}",
            e.seq,
            shorten(&describe(body), 100)
        )),
    }
}

/// A token count, or `?` when the provider did not report it.
fn count(n: Option<u64>) -> String {
    n.map_or_else(|| "?".to_owned(), |n| n.to_string())
}

/// A refusal in words: its text, then the provider's explanation.
fn refusal_words(r: &Refusal) -> String {
    match (&r.text, &r.detail) {
        (t, Some(d)) if t.is_empty() => d.clone(),
        (t, Some(d)) => format!("{t} ({d})"),
        (t, None) => t.clone(),
    }
}

fn shorten(s: &str, max: usize) -> String {
    let one_line = s.replace('\n', " ⏎ ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let cut: String = one_line.chars().take(max).collect();
    format!("{cut}…")
}

/// One event in a few words.
fn describe(body: &EventBody) -> String {
    match body {
        EventBody::EpisodeStarted(s) => format!(
            "episode_started scenario={} model={} enforcement={} workspace={}",
            s.scenario,
            s.model,
            s.policy.enforcement.as_str(),
            s.workspace
        ),
        EventBody::Message(m) => format!(
            "message {}: {}",
            match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
            },
            shorten(&m.text, 120)
        ),
        EventBody::ToolCall(c) => format!(
            "tool_call {} {} {}",
            c.call_id,
            c.tool,
            shorten(&c.arguments.to_string(), 100)
        ),
        EventBody::ToolResult(r) => format!(
            "tool_result {} {} {}ms: {}",
            r.call_id,
            r.state.as_str(),
            r.duration_ms,
            shorten(&r.output, 100)
        ),
        EventBody::Denial(d) => format!("denial {} {}: {}", d.call_id, d.hook, d.explanation),
        EventBody::Usage(u) => format!(
            "usage call {}: {} in, {} out tokens, {}",
            u.model_call,
            count(u.input_tokens),
            count(u.output_tokens),
            match &u.cost {
                Cost::Known { usd, .. } => format!("${usd:.4}"),
                Cost::Unknown { model } => format!("cost unknown (no price for {model})"),
                Cost::UnknownTokens => "cost unknown (tokens not reported)".to_owned(),
            }
        ),
        EventBody::ModelLatency(l) => {
            format!("model_latency call {}: {}ms", l.model_call, l.total_ms)
        }
        EventBody::ModelCallEnded(m) => {
            let mut line = format!("model_call_ended call {}: ", m.model_call);
            match (&m.stop_reason, &m.error) {
                (_, Some(e)) => line.push_str(&format!("{} error: {}", e.category, e.message)),
                (Some(stop), None) => line.push_str(&format!("stop {stop}")),
                (None, None) => line.push_str("abandoned"),
            }
            if let Some(r) = &m.refusal {
                line.push_str(&format!("; refused: {}", refusal_words(r)));
            }
            if !m.cut_calls.is_empty() {
                line.push_str(&format!("; cut off mid-call: {}", m.cut_calls.join(", ")));
            }
            for note in &m.notes {
                line.push_str(&format!("; note: {note}"));
            }
            line
        }
        EventBody::LimitHit(l) => format!("limit_hit {}: {}", l.limit.as_str(), l.detail),
        EventBody::Subagent(a) => match (&a.session_id, &a.refused) {
            (_, Some(why)) => format!(
                "subagent {} {}: refused: {}",
                a.call_id,
                a.role,
                shorten(why, 200)
            ),
            (Some(id), None) => format!("subagent {} {}: session {id}", a.call_id, a.role),
            (None, None) => format!("subagent {} {}", a.call_id, a.role),
        },
        EventBody::EpisodeFinished(f) => format!("episode_finished {}", f.outcome.as_str()),
    }
}
