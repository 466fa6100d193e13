//! `bee metrics`: tokens, cost, latency and denials from the metrics store.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::records::{
    DEFAULT_RECORDS_DIR, GroupBy, Percentiles, RebuildReport, Report, STORE_FILE, Stats, Store,
    StoreError, TranscriptError,
};
use rusqlite::ErrorCode;
use serde_json::json;

use super::Exit;

/// Arguments of `bee metrics`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The metrics database to read (with --rebuild: to write).
    #[arg(long, value_name = "FILE", conflicts_with = "records")]
    db: Option<PathBuf>,
    /// A records directory; its metrics.sqlite is read [default: .bee/records].
    #[arg(long, value_name = "DIR")]
    records: Option<PathBuf>,
    /// Rebuild the store from the transcripts under DIR (into DIR/metrics.sqlite, or --db
    /// FILE), then report. Run it while no run is writing records.
    #[arg(long, value_name = "DIR", conflicts_with = "records")]
    rebuild: Option<PathBuf>,
    /// Only this run.
    #[arg(long, value_name = "ID")]
    run: Option<String>,
    /// One row per run, episode, model, tool or agent role (`(main)`: top-level sessions).
    #[arg(long, value_enum, default_value_t = By::Run)]
    by: By,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

/// `--by`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum By {
    Run,
    Episode,
    Model,
    Tool,
    Agent,
}

impl From<By> for GroupBy {
    fn from(b: By) -> Self {
        match b {
            By::Run => GroupBy::Run,
            By::Episode => GroupBy::Episode,
            By::Model => GroupBy::Model,
            By::Tool => GroupBy::Tool,
            By::Agent => GroupBy::Agent,
        }
    }
}

/// Runs `bee metrics`.
pub fn run(args: &Args) -> Exit {
    let db = match (&args.db, &args.rebuild, &args.records) {
        (Some(db), _, _) => db.clone(),
        (None, Some(dir), _) => dir.join(STORE_FILE),
        (None, None, Some(dir)) => dir.join(STORE_FILE),
        (None, None, None) => Path::new(DEFAULT_RECORDS_DIR).join(STORE_FILE),
    };
    let rebuilt = match &args.rebuild {
        Some(dir) => match Store::rebuild(dir, &db) {
            Ok(r) => {
                if !args.json {
                    for path in &r.truncated {
                        eprintln!(
                            "warning: {}: the last line was cut short (a crash mid-write) and left out",
                            path.display()
                        );
                    }
                    eprintln!(
                        "rebuilt {} from {} transcript{} of {} run{} ({} events)",
                        db.display(),
                        r.episodes,
                        plural(r.episodes),
                        r.runs,
                        plural(r.runs),
                        r.events
                    );
                }
                Some(r)
            }
            Err(e) => return fail(args.json, exit_for(&e), &e.to_string()),
        },
        None => None,
    };
    let store = match Store::open_read_only(&db) {
        Ok(s) => s,
        Err(e @ StoreError::Missing { .. }) => {
            let mut message = e.to_string();
            if let Some(dir) = db.parent().filter(|d| d.is_dir()) {
                message.push_str(&format!(
                    "; if {} holds transcripts, `bee metrics --rebuild {}` builds it",
                    dir.display(),
                    dir.display()
                ));
            }
            return fail(args.json, Exit::NoInput, &message);
        }
        Err(e) => return fail(args.json, exit_for(&e), &e.to_string()),
    };
    let by = GroupBy::from(args.by);
    let report = match store.report(by, args.run.as_deref()) {
        Ok(r) => r,
        Err(e) => return fail(args.json, exit_for(&e), &e.to_string()),
    };
    if report.total.episodes == 0 {
        let message = match &args.run {
            Some(run) => format!("{}: no records of run `{run}`", db.display()),
            None => format!("{}: no records", db.display()),
        };
        return fail(args.json, Exit::NoInput, &message);
    }
    if args.json {
        println!("{}", to_json(&db, &report, rebuilt.as_ref()));
    } else {
        print!("{}", render_table(&report, terminal_width()));
    }
    Exit::Ok
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn exit_for(e: &StoreError) -> Exit {
    match e {
        StoreError::Missing { .. } | StoreError::NoTranscripts { .. } => Exit::NoInput,
        StoreError::Corrupt { .. } | StoreError::NewerSchema { .. } => Exit::DataErr,
        StoreError::Transcript(TranscriptError::Malformed { .. }) => Exit::DataErr,
        StoreError::Transcript(TranscriptError::Io { source, .. })
        | StoreError::Io { source, .. } => match source.kind() {
            ErrorKind::PermissionDenied => Exit::NoPerm,
            ErrorKind::NotFound => Exit::NoInput,
            _ => Exit::Software,
        },
        StoreError::Sqlite { source, .. } => match source.sqlite_error_code() {
            Some(ErrorCode::CannotOpen) => Exit::NoInput,
            Some(ErrorCode::PermissionDenied | ErrorCode::ReadOnly) => Exit::NoPerm,
            _ => Exit::Software,
        },
        StoreError::Transcript(TranscriptError::Encode { .. }) | StoreError::Poisoned { .. } => {
            Exit::Software
        }
    }
}

fn to_json(db: &Path, report: &Report, rebuilt: Option<&RebuildReport>) -> serde_json::Value {
    let mut v = json!({ "ok": true, "db": db.display().to_string() });
    if let (Some(obj), Ok(serde_json::Value::Object(r))) =
        (v.as_object_mut(), serde_json::to_value(report))
    {
        obj.extend(r);
    }
    if let Some(r) = rebuilt {
        v["rebuilt"] = json!({
            "runs": r.runs,
            "episodes": r.episodes,
            "events": r.events,
            "truncated": r.truncated.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        });
    }
    v
}

fn fail(json: bool, exit: Exit, message: &str) -> Exit {
    if json {
        println!("{}", json!({ "ok": false, "error": message }));
    } else {
        eprintln!("bee: {message}");
    }
    exit
}

fn pct(p: &Percentiles) -> String {
    match (p.p50, p.p95) {
        (Some(a), Some(b)) => format!("{a}/{b}"),
        _ => "-".to_owned(),
    }
}

fn cost_cells(stats: &Stats) -> [String; 2] {
    let Some(m) = &stats.model else {
        return ["-".to_owned(), "-".to_owned()];
    };
    // A partly unknown cost keeps its known part; the line under the table names the gap.
    let cost = match m.cost.usd() {
        Some(usd) => format!("${usd:.4}"),
        None if !m.cost.sources.is_empty() => format!("${:.4} + ?", m.cost.known_usd),
        None => "unknown".to_owned(),
    };
    let mut sources: Vec<String> = m.cost.sources.iter().map(ToString::to_string).collect();
    if !m.cost.unknown_models.is_empty() {
        sources.push("unknown".to_owned());
    }
    if m.cost.unknown_token_calls > 0 {
        sources.push("unknown tokens".to_owned());
    }
    let sources = if sources.is_empty() {
        "-".to_owned()
    } else {
        sources.join(", ")
    };
    [cost, sources]
}

/// The width to fit the table to: `COLUMNS` when set to a number, else the terminal's when
/// stdout is one; `None` (no limit) when output goes elsewhere, for scripts.
fn terminal_width() -> Option<usize> {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return Some(n);
    }
    terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| usize::from(w.0))
}

/// The columns left out first when a table is wider than the terminal, lowest priority
/// first: the details before the counts. The key, calls, tokens in and out, the cost, tool
/// calls and denials always stay.
const DROP_ORDER: &[&str] = &[
    "MODEL CALLS BY STOP",
    "PRICE SOURCE",
    "TOOL MS P50/P95",
    "REASONING",
    "CACHED",
    "MODEL MS P50/P95",
    "EPISODES",
    "REFUSED",
    "DELEGATED",
    "UNFINISHED",
    "COULD NOT RUN",
    "MS P50/P95",
];

/// The denials of a row, and the audit records lost beside them (`3 (7 lost)`): the count is
/// then a lower bound.
fn denials_cell(t: &crate::records::ToolStats) -> String {
    if t.lost_records == 0 {
        t.denials.to_string()
    } else {
        format!("{} ({} lost)", t.denials, t.lost_records)
    }
}

/// Renders a report as a plain-text table, one row per group and a total row; with a
/// `width`, low-priority columns ([`DROP_ORDER`]) are left out until the table fits, and a
/// line under it names them.
fn render_table(report: &Report, width: Option<usize>) -> String {
    let by_tool = report.by == GroupBy::Tool;
    let by_agent = report.by == GroupBy::Agent;
    let mut head: Vec<&str> = if by_tool {
        vec![
            "TOOL",
            "CALLS",
            "COMPLETED",
            "COULD NOT RUN",
            "FAILED",
            "UNFINISHED",
            "MS P50/P95",
            "DENIALS",
        ]
    } else {
        vec![
            match report.by {
                GroupBy::Run => "RUN",
                GroupBy::Episode => "EPISODE",
                GroupBy::Agent => "AGENT",
                _ => "MODEL",
            },
            "EPISODES",
            "MODEL CALLS",
            "INPUT",
            "CACHED",
            "OUTPUT",
            "REASONING",
            "COST",
            "PRICE SOURCE",
            "MODEL MS P50/P95",
            "TOOL CALLS",
            "TOOL MS P50/P95",
            "DENIALS",
            "MODEL CALLS BY STOP",
        ]
    };
    if by_agent {
        head.extend(["DELEGATED", "REFUSED"]);
    }
    let row = |key: &str, s: &Stats| -> Vec<String> {
        let t = &s.tools;
        if by_tool {
            vec![
                key.to_owned(),
                t.calls.to_string(),
                t.completed.to_string(),
                t.could_not_run.to_string(),
                t.failed.to_string(),
                t.unfinished.to_string(),
                pct(&t.duration_ms),
                denials_cell(t),
            ]
        } else {
            let m = s.model.clone().unwrap_or_default();
            let [cost, source] = cost_cells(s);
            let mut cells = vec![
                key.to_owned(),
                s.episodes.to_string(),
                m.calls.to_string(),
                m.tokens.input.to_string(),
                m.tokens.cached_input.to_string(),
                m.tokens.output.to_string(),
                m.tokens.reasoning.to_string(),
                cost,
                source,
                pct(&m.latency_ms),
                t.calls.to_string(),
                pct(&t.duration_ms),
                denials_cell(t),
                stops(&m),
            ];
            if let Some(d) = &s.delegations {
                cells.extend([d.started.to_string(), d.refused.to_string()]);
            }
            cells
        }
    };
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|h| (*h).to_owned()).collect()];
    rows.extend(report.groups.iter().map(|g| row(&g.key, &g.stats)));
    rows.push(row("total", &report.total));
    let left = |col: usize| col == 0 || (!by_tool && (col == 8 || col == 13));
    let widths: Vec<usize> = (0..head.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut shown: Vec<usize> = (0..head.len()).collect();
    let mut dropped: Vec<&str> = Vec::new();
    if let Some(limit) = width {
        let wide = |shown: &[usize]| -> usize {
            shown.iter().map(|&c| widths[c]).sum::<usize>() + 2 * shown.len().saturating_sub(1)
        };
        for name in DROP_ORDER {
            if wide(&shown) <= limit {
                break;
            }
            if let Some(i) = shown.iter().position(|&c| head[c] == *name) {
                shown.remove(i);
                dropped.push(name);
            }
        }
    }
    let mut out = String::new();
    for r in &rows {
        let cells: Vec<String> = shown
            .iter()
            .map(|&c| {
                let cell = &r[c];
                if left(c) {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    let mut notes = Vec::new();
    if !dropped.is_empty() {
        notes.push(format!(
            "left out to fit {} columns: {} (a wider terminal or --json shows them)",
            width.unwrap_or_default(),
            dropped.join(", ")
        ));
    }
    if let Some(m) = &report.total.model {
        if by_tool {
            notes.push(format!(
                "model calls: {}; tokens: {} input ({} cached), {} output ({} reasoning); cost: {}",
                m.calls,
                m.tokens.input,
                m.tokens.cached_input,
                m.tokens.output,
                m.tokens.reasoning,
                m.cost
            ));
        } else if m.cost.usd().is_none() {
            notes.push(format!("cost {}: the known part is not a total", m.cost));
        }
        if m.unknown_token_calls > 0 {
            notes.push(format!(
                "tokens not reported for {} model call(s) (failed or abandoned calls, or a \
                 provider that sends no usage): the token sums are lower bounds",
                m.unknown_token_calls
            ));
        }
    }
    for note in notes {
        for line in wrap(&note, width) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// `text` in lines of at most `width` characters, broken between words (a word longer than
/// the width stands alone); one line when there is no width.
fn wrap(text: &str, width: Option<usize>) -> Vec<String> {
    let Some(width) = width else {
        return vec![text.to_owned()];
    };
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The model calls of a group by how they ended: `end_turn 3, tool_use 5, failed
/// (overloaded) 1`; `-` when there are none.
fn stops(m: &crate::records::ModelStats) -> String {
    let mut parts: Vec<String> = m
        .stop_reasons
        .iter()
        .map(|(stop, n)| format!("{stop} {n}"))
        .collect();
    parts.extend(
        m.errors
            .iter()
            .map(|(category, n)| format!("failed ({category}) {n}")),
    );
    let counted: u64 = m.stop_reasons.values().chain(m.errors.values()).sum();
    if counted < m.calls {
        parts.push(format!("unrecorded {}", m.calls - counted));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(", ")
    }
}
