//! `bee metrics` on a small records fixture: the table, the JSON shape and the exit statuses.

mod support;

use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use bee::records::{
    Cost, Enforcement, EpisodeRecorder, EpisodeStarted, EventBody, Limits, ModelCallEnded,
    ModelLatency, Outcome, PolicyRecord, PriceSource, STORE_FILE, StopReason, Store, Timestamp,
    ToolCall, ToolResult, ToolState, Usage,
};
use serde_json::{Value, json};
use support::{bee, code, stderr, stdout};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn json_of(o: &Output) -> Value {
    match serde_json::from_slice(&o.stdout) {
        Ok(v) => v,
        Err(e) => unreachable!("stdout is not JSON ({e}): {}", stdout(o)),
    }
}

fn episode(
    records: &Path,
    store: &Arc<Store>,
    run: &str,
    ep: &str,
    model: &str,
    cost: Cost,
) -> TestResult {
    let started = EpisodeStarted {
        run_id: run.into(),
        episode_id: ep.into(),
        scenario: "s".into(),
        model: model.into(),
        provider: "openai-compatible".into(),
        policy: PolicyRecord {
            source: Some("policies/cargo-test.toml".into()),
            enforcement: Enforcement::Kernel,
            engine: None,
            requested: None,
            installed: None,
            tools: std::collections::BTreeMap::new(),
        },
        workspace: "/tmp/ws".into(),
        limits: Limits::default(),
        run_started_at: Timestamp::now(),
        parent: None,
        content_hash: None,
    };
    let mut rec = EpisodeRecorder::start(records, started, Some(store.clone()))?;
    for (n, ms) in [(1, 100), (2, 300)] {
        rec.record(EventBody::Usage(Usage {
            model_call: n,
            model: model.into(),
            input_tokens: Some(1000),
            cached_input_tokens: Some(400),
            output_tokens: Some(100),
            reasoning_tokens: Some(10),
            cost: cost.clone(),
        }))?;
        rec.record(EventBody::ModelLatency(ModelLatency {
            model_call: n,
            first_token_ms: Some(ms / 2),
            total_ms: ms,
        }))?;
        rec.record(EventBody::ModelCallEnded(ModelCallEnded {
            model_call: n,
            stop_reason: Some(if n == 1 {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            }),
            error: None,
            refusal: None,
            cut_calls: Vec::new(),
            notes: Vec::new(),
        }))?;
    }
    rec.record(EventBody::ToolCall(ToolCall {
        call_id: "c1".into(),
        tool: "shell".into(),
        arguments: json!({"cmd": "cargo test"}),
    }))?;
    rec.record(EventBody::ToolResult(ToolResult {
        call_id: "c1".into(),
        state: ToolState::Completed,
        output: String::new(),
        truncated: None,
        exit: None,
        duration_ms: 40,
        // Run r2's call lost audit records: its denials are a lower bound.
        lost_records: if run == "r2" { 5 } else { 0 },
    }))?;
    rec.finish(Outcome::Passed, None)?;
    Ok(())
}

/// Run `r1` priced from the shipped table; run `r2` on a model without a price.
fn fixture() -> TestResult<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(Store::open(&dir.path().join(STORE_FILE))?);
    let priced = Cost::Known {
        usd: 0.125,
        source: PriceSource::ShippedTable("2026-11".into()),
    };
    episode(dir.path(), &store, "r1", "e1", "m-known", priced)?;
    let unknown = Cost::Unknown {
        model: "m-local".into(),
    };
    episode(dir.path(), &store, "r2", "e1", "m-local", unknown)?;
    Ok(dir)
}

fn arg(p: &Path) -> &str {
    p.to_str()
        .unwrap_or_else(|| unreachable!("temporary paths are UTF-8"))
}

#[test]
fn table_on_stdout() {
    let dir = fixture().unwrap();
    let o = bee(&["metrics", "--records", arg(dir.path())]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("RUN "), "{out}");
    assert!(lines[0].contains("PRICE SOURCE"), "{out}");
    assert!(
        lines[1].starts_with("r1 ") && lines[1].contains("$0.2500"),
        "{out}"
    );
    assert!(lines[1].contains("shipped table 2026-11"), "{out}");
    assert!(
        lines[1].contains("100/300"),
        "p50/p95 of two samples: {out}"
    );
    assert!(
        lines[2].starts_with("r2 ") && lines[2].contains("unknown"),
        "{out}"
    );
    assert!(
        !lines[2].contains("$0.0000"),
        "an unknown price is never $0: {out}"
    );
    assert!(
        lines[3].starts_with("total ") && lines[3].contains("unknown"),
        "{out}"
    );
    assert!(out.contains("m-local (no price)"), "{out}");
}

#[test]
fn table_by_tool() {
    let dir = fixture().unwrap();
    let o = bee(&["metrics", "--records", arg(dir.path()), "--by", "tool"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("TOOL "), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("shell ") && l.contains("40/40")),
        "{out}"
    );
    // The lost audit records stand beside the denials they may hide.
    assert!(
        out.lines()
            .any(|l| l.starts_with("shell ") && l.trim_end().ends_with("0 (5 lost)")),
        "{out}"
    );
}

#[test]
fn json_shape() {
    let dir = fixture().unwrap();
    let db = dir.path().join(STORE_FILE);
    let o = bee(&["metrics", "--db", arg(&db), "--by", "model", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["ok"], json!(true));
    assert_eq!(v["by"], json!("model"));
    assert_eq!(v["run"], Value::Null);
    assert_eq!(v["db"], json!(arg(&db)));
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    let known = &groups[0];
    assert_eq!(known["key"], json!("m-known"));
    assert_eq!(known["episodes"], json!(1));
    assert_eq!(
        known["model"]["tokens"],
        json!({"input": 2000, "cached_input": 800, "output": 200, "reasoning": 20})
    );
    assert_eq!(
        known["model"]["cost"],
        json!({"usd": 0.25, "known_usd": 0.25, "unknown_models": [], "unknown_token_calls": 0, "sources": ["shipped table 2026-11"]})
    );
    assert_eq!(
        known["model"]["stop_reasons"],
        json!({"end_turn": 1, "tool_use": 1})
    );
    assert_eq!(known["model"]["errors"], json!({}));
    assert_eq!(known["model"]["unknown_token_calls"], json!(0));
    assert_eq!(
        known["model"]["latency_ms"],
        json!({"samples": 2, "p50": 100, "p95": 300})
    );
    assert_eq!(
        known["model"]["first_token_ms"],
        json!({"samples": 2, "p50": 50, "p95": 150})
    );
    assert_eq!(
        known["tools"],
        json!({"calls": 1, "completed": 1, "could_not_run": 0, "failed": 0, "unfinished": 0,
               "duration_ms": {"samples": 1, "p50": 40, "p95": 40}, "denials": 0})
    );
    let local = &groups[1];
    assert_eq!(local["model"]["cost"]["usd"], Value::Null);
    assert_eq!(local["model"]["cost"]["unknown_models"], json!(["m-local"]));
    assert_eq!(v["total"]["episodes"], json!(2));
    assert_eq!(v["total"]["model"]["cost"]["usd"], Value::Null);
    assert_eq!(v["total"]["model"]["cost"]["known_usd"], json!(0.25));
}

#[test]
fn json_by_tool_has_no_model_figures_per_group() {
    let dir = fixture().unwrap();
    let o = bee(&[
        "metrics",
        "--records",
        arg(dir.path()),
        "--by",
        "tool",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["groups"][0]["key"], json!("shell"));
    assert_eq!(v["groups"][0]["model"], Value::Null);
    assert_eq!(v["groups"][0]["tools"]["calls"], json!(2));
    assert_eq!(v["groups"][0]["tools"]["lost_records"], json!(5));
    assert_eq!(v["total"]["model"]["calls"], json!(4));
}

#[test]
fn one_run() {
    let dir = fixture().unwrap();
    let o = bee(&[
        "metrics",
        "--records",
        arg(dir.path()),
        "--run",
        "r1",
        "--by",
        "episode",
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["run"], json!("r1"));
    assert_eq!(v["groups"][0]["key"], json!("r1/e1"));
    assert_eq!(v["groups"].as_array().unwrap().len(), 1);
    assert_eq!(v["total"]["model"]["cost"]["usd"], json!(0.25));
}

#[test]
fn rebuild_then_report() {
    let dir = fixture().unwrap();
    std::fs::remove_file(dir.path().join(STORE_FILE)).unwrap();
    let o = bee(&["metrics", "--records", arg(dir.path())]);
    assert_eq!(code(&o), 66, "{}", stderr(&o));
    assert!(stderr(&o).contains("--rebuild"), "{}", stderr(&o));
    let o = bee(&["metrics", "--rebuild", arg(dir.path()), "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["rebuilt"]["episodes"], json!(2));
    assert_eq!(v["total"]["episodes"], json!(2));
    // Rebuilt from the transcripts, the lost audit records are still there.
    assert_eq!(v["total"]["tools"]["lost_records"], json!(5));
    let o = bee(&["metrics", "--records", arg(dir.path())]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn missing_records_exit_66() {
    let dir = tempfile::tempdir().unwrap();
    let o = bee(&["metrics", "--records", arg(dir.path())]);
    assert_eq!(code(&o), 66, "{}", stderr(&o));
    let o = bee(&[
        "metrics",
        "--db",
        arg(&dir.path().join("nope.sqlite")),
        "--json",
    ]);
    assert_eq!(code(&o), 66);
    assert_eq!(json_of(&o)["ok"], json!(false));
    assert!(
        !dir.path().join("nope.sqlite").exists(),
        "reading never creates a store"
    );
    let o = bee(&["metrics", "--rebuild", arg(dir.path())]);
    assert_eq!(code(&o), 66, "{}", stderr(&o));
    let o = bee(&["metrics", "--rebuild", arg(&dir.path().join("absent"))]);
    assert_eq!(code(&o), 66, "{}", stderr(&o));
}

#[test]
fn no_records_of_a_run_exit_66() {
    let dir = fixture().unwrap();
    let o = bee(&["metrics", "--records", arg(dir.path()), "--run", "r9"]);
    assert_eq!(code(&o), 66);
    assert!(
        stderr(&o).contains("no records of run `r9`"),
        "{}",
        stderr(&o)
    );
    let empty = tempfile::tempdir().unwrap();
    drop(Store::open(&empty.path().join(STORE_FILE)).unwrap());
    let o = bee(&["metrics", "--records", arg(empty.path())]);
    assert_eq!(code(&o), 66, "{}", stderr(&o));
}

#[test]
fn corrupt_db_exit_65() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    std::fs::write(&db, vec![0x42; 4096]).unwrap();
    let o = bee(&["metrics", "--db", arg(&db)]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    let o = bee(&["metrics", "--db", arg(&db), "--json"]);
    assert_eq!(code(&o), 65);
    assert_eq!(json_of(&o)["ok"], json!(false));

    // A good header with its pages cut off.
    let fx = fixture().unwrap();
    let good = fx.path().join(STORE_FILE);
    let full = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.sqlite");
    std::fs::write(&cut, &full[..full.len().min(4096) / 2]).unwrap();
    let o = bee(&["metrics", "--db", arg(&cut)]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
}

#[test]
fn a_damaged_transcript_fails_the_rebuild_with_65() {
    let dir = fixture().unwrap();
    let t = dir.path().join("r1").join("e1.jsonl");
    let text = std::fs::read_to_string(&t).unwrap();
    std::fs::write(&t, text.replacen("\"seq\":2", "\"seq\":7", 1)).unwrap();
    let o = bee(&["metrics", "--rebuild", arg(dir.path())]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("e1.jsonl:2"), "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_64() {
    let o = bee(&["metrics", "--by", "color"]);
    assert_eq!(code(&o), 64);
    let o = bee(&["metrics", "--db", "a", "--records", "b"]);
    assert_eq!(code(&o), 64);
}

/// `bee metrics ARGS` with `COLUMNS` set to `columns`, or unset (stdout is a pipe: no limit).
fn metrics_at(columns: Option<&str>, args: &[&str]) -> Output {
    let mut c = std::process::Command::new(support::bee_exe());
    c.arg("metrics").args(args);
    match columns {
        Some(n) => c.env("COLUMNS", n),
        None => c.env_remove("COLUMNS"),
    };
    c.output()
        .unwrap_or_else(|e| unreachable!("cannot run bee: {e}"))
}

/// At 80 columns the table fits: the details go first, the counts and the cost stay, and a
/// line says what was left out. Without a width (a pipe, a script) every column is there.
#[test]
fn the_table_fits_an_80_column_terminal() {
    let dir = fixture().unwrap();
    let records = arg(dir.path());
    for by in ["run", "episode", "model", "tool"] {
        let o = metrics_at(Some("80"), &["--records", records, "--by", by]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let out = stdout(&o);
        for line in out.lines() {
            assert!(line.chars().count() <= 80, "{by}: {line:?} in\n{out}");
        }
        if by != "tool" {
            let head = out.lines().next().unwrap_or_default();
            for kept in [
                "MODEL CALLS",
                "INPUT",
                "OUTPUT",
                "COST",
                "TOOL CALLS",
                "DENIALS",
            ] {
                assert!(head.contains(kept), "{by}: {kept} in {head}");
            }
            assert!(!head.contains("MODEL CALLS BY STOP"), "{head}");
            let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(
                words.contains("left out to fit 80 columns: MODEL CALLS BY STOP, PRICE SOURCE"),
                "{out}"
            );
        }
    }
    let wide = metrics_at(None, &["--records", records]);
    let out = stdout(&wide);
    assert!(out.contains("MODEL CALLS BY STOP"), "{out}");
    assert!(!out.contains("left out"), "{out}");
    let max = out.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(
        max > 80,
        "the fixture's full table is wider than 80 columns: {max}"
    );
}

/// A run with a priced call and a call of unknown cost keeps the known part in the total.
#[test]
fn a_partly_unknown_total_keeps_its_known_part() {
    let dir = fixture().unwrap();
    let o = metrics_at(None, &["--records", arg(dir.path())]);
    let out = stdout(&o);
    let total = out
        .lines()
        .find(|l| l.starts_with("total "))
        .unwrap_or_default();
    assert!(total.contains("$0.2500 + ?"), "{out}");
    assert!(
        out.contains(
            "cost $0.2500 + unknown for m-local (no price): the known part is not a total"
        ),
        "{out}"
    );
}

#[test]
fn table_snapshots() {
    let dir = fixture().unwrap();
    for by in ["run", "episode", "model", "tool"] {
        let o = metrics_at(None, &["--records", arg(dir.path()), "--by", by]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        insta::assert_snapshot!(format!("table_by_{by}"), stdout(&o));
    }
}
