//! The metrics store: ingest through the recorder, rebuild from transcripts, every report
//! grouping on known data, unknown prices, concurrency and damaged databases.

use std::path::Path;
use std::sync::Arc;

use bee::records::{
    Cost, Denial, DenialTarget, Enforcement, EpisodeRecorder, EpisodeStarted, EventBody,
    ExitStatus, GrantKind, GroupBy, LimitHit, LimitKind, Limits, Message, ModelLatency, Outcome,
    PolicyRecord, PriceSource, Report, Role, STORE_FILE, Stats, Store, StoreError, SuccessCheck,
    Timestamp, ToolCall, ToolResult, ToolState, Usage, read_transcript,
};
use serde_json::json;

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn started(run: &str, episode: &str, model: &str) -> EpisodeStarted {
    EpisodeStarted {
        run_id: run.into(),
        episode_id: episode.into(),
        scenario: "fix-the-test".into(),
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
        limits: Limits {
            turns: Some(40),
            ..Limits::default()
        },
        run_started_at: Timestamp::now(),
        parent: None,
        content_hash: None,
    }
}

fn table(edition: &str, usd: f64) -> Cost {
    Cost::Known {
        usd,
        source: PriceSource::ShippedTable(edition.into()),
    }
}

fn model_call(
    rec: &mut EpisodeRecorder,
    n: u32,
    model: &str,
    tokens: [u64; 4],
    cost: Cost,
    ms: u64,
) -> TestResult {
    rec.record(EventBody::Usage(Usage {
        model_call: n,
        model: model.into(),
        input_tokens: Some(tokens[0]),
        cached_input_tokens: Some(tokens[1]),
        output_tokens: Some(tokens[2]),
        reasoning_tokens: Some(tokens[3]),
        cost,
    }))?;
    rec.record(EventBody::ModelLatency(ModelLatency {
        model_call: n,
        first_token_ms: Some(ms / 5),
        total_ms: ms,
    }))?;
    Ok(())
}

fn tool(
    rec: &mut EpisodeRecorder,
    id: &str,
    name: &str,
    state: ToolState,
    ms: u64,
    denials: u32,
) -> TestResult {
    rec.record(EventBody::ToolCall(ToolCall {
        call_id: id.into(),
        tool: name.into(),
        arguments: json!({"cmd": "cargo test"}),
    }))?;
    for i in 0..denials {
        rec.record(EventBody::Denial(Denial {
            call_id: id.into(),
            hook: bee_userspace::audit::HookName::parse("file_open"),
            explanation: format!("write to /etc/x{i} refused: no fs.write grant covers it"),
            target: DenialTarget::Path(format!("/etc/x{i}")),
            missing: GrantKind::FsWrite,
            learn: false,
        }))?;
    }
    rec.record(EventBody::ToolResult(ToolResult {
        call_id: id.into(),
        state,
        output: "ok".into(),
        truncated: None,
        exit: (state == ToolState::Completed).then_some(ExitStatus::Code(0)),
        duration_ms: ms,
        lost_records: 0,
    }))?;
    Ok(())
}

/// Two runs, three episodes, known latencies and costs (see the assertions).
fn fixture(records: &Path, store: Option<Arc<Store>>) -> TestResult {
    // r1/e1: m-known, two priced calls, three tool calls, two denials, one more in the success
    // check; passed.
    let mut rec = EpisodeRecorder::start(records, started("r1", "e1", "m-known"), store.clone())?;
    rec.record(EventBody::Message(Message {
        role: Role::User,
        text: "make the tests pass".into(),
    }))?;
    model_call(
        &mut rec,
        1,
        "m-known",
        [100, 20, 50, 10],
        table("2026-11", 0.01),
        100,
    )?;
    tool(&mut rec, "c1", "shell", ToolState::Completed, 10, 0)?;
    tool(&mut rec, "c2", "read_file", ToolState::CouldNotRun, 5, 0)?;
    tool(&mut rec, "c3", "shell", ToolState::Failed, 30, 2)?;
    model_call(
        &mut rec,
        2,
        "m-known",
        [200, 0, 80, 0],
        Cost::Known {
            usd: 0.02,
            source: PriceSource::Override,
        },
        300,
    )?;
    // The success check ran in a scope too and was refused one write.
    rec.record(EventBody::Denial(Denial {
        call_id: bee::records::SUCCESS_CHECK_CALL_ID.into(),
        hook: bee_userspace::audit::HookName::parse("path_unlink"),
        explanation: "unlink /etc/y: no fs.write grant covers it".into(),
        target: DenialTarget::Path("/etc/y".into()),
        missing: GrantKind::FsWrite,
        learn: false,
    }))?;
    rec.finish(
        Outcome::Passed,
        Some(SuccessCheck {
            passed: true,
            detail: "cargo test exited 0".into(),
        }),
    )?;

    // r1/e2: m-local, no price; one tool call; a turn limit.
    let mut rec = EpisodeRecorder::start(records, started("r1", "e2", "m-local"), store.clone())?;
    model_call(
        &mut rec,
        1,
        "m-local",
        [50, 0, 10, 0],
        Cost::Unknown {
            model: "m-local".into(),
        },
        200,
    )?;
    tool(&mut rec, "c1", "shell", ToolState::Completed, 20, 0)?;
    rec.record(EventBody::LimitHit(LimitHit {
        limit: LimitKind::Turns,
        detail: "1 turn of 1".into(),
    }))?;
    rec.finish(Outcome::Limit, None)?;

    // r2/e1: m-known, one priced call, then bee dies: no episode_finished.
    let mut rec = EpisodeRecorder::start(records, started("r2", "e1", "m-known"), store)?;
    model_call(
        &mut rec,
        1,
        "m-known",
        [10, 0, 5, 0],
        table("2026-11", 0.03),
        500,
    )?;
    drop(rec);
    Ok(())
}

fn group<'a>(r: &'a Report, key: &str) -> Option<&'a Stats> {
    r.groups.iter().find(|g| g.key == key).map(|g| &g.stats)
}

fn keys(r: &Report) -> Vec<&str> {
    r.groups.iter().map(|g| g.key.as_str()).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn live_store(dir: &Path) -> TestResult<Arc<Store>> {
    let store = Arc::new(Store::open(&dir.join(STORE_FILE))?);
    fixture(dir, Some(store.clone()))?;
    Ok(store)
}

#[test]
fn report_by_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = live_store(dir.path()).unwrap();
    let r = store.report(GroupBy::Run, None).unwrap();
    assert_eq!(keys(&r), ["r1", "r2"]);

    let r1 = group(&r, "r1").unwrap();
    assert_eq!(r1.episodes, 2);
    let m = r1.model.as_ref().unwrap();
    assert_eq!(m.calls, 3);
    assert_eq!(
        (
            m.tokens.input,
            m.tokens.cached_input,
            m.tokens.output,
            m.tokens.reasoning
        ),
        (350, 20, 140, 10)
    );
    assert_eq!(
        m.cost.usd(),
        None,
        "an unknown price makes the total unknown"
    );
    assert!(close(m.cost.known_usd, 0.03));
    assert_eq!(m.cost.unknown_models, ["m-local"]);
    // Latencies 100, 300, 200 ms.
    assert_eq!((m.latency_ms.p50, m.latency_ms.p95), (Some(200), Some(300)));
    assert_eq!(m.latency_ms.samples, 3);
    assert_eq!(
        (m.first_token_ms.p50, m.first_token_ms.p95),
        (Some(40), Some(60))
    );
    // Tool durations 10, 5, 30, 20 ms.
    let t = &r1.tools;
    assert_eq!(
        (t.calls, t.completed, t.could_not_run, t.failed),
        (4, 2, 1, 1)
    );
    assert_eq!((t.duration_ms.p50, t.duration_ms.p95), (Some(10), Some(30)));
    // Two in tool calls, one in the success check (which is no tool call).
    assert_eq!(t.denials, 3);

    let r2 = group(&r, "r2").unwrap();
    let m = r2.model.as_ref().unwrap();
    assert_eq!(m.cost.usd().map(|u| close(u, 0.03)), Some(true));
    assert_eq!((m.latency_ms.p50, m.latency_ms.p95), (Some(500), Some(500)));
    assert_eq!(r2.tools.calls, 0);
    assert_eq!(r2.tools.duration_ms.p50, None);

    assert_eq!(r.total.episodes, 3);
    let m = r.total.model.as_ref().unwrap();
    assert_eq!(m.calls, 4);
    assert_eq!(m.cost.usd(), None);
    assert!(close(m.cost.known_usd, 0.06));
    assert_eq!(
        m.cost.sources,
        [
            PriceSource::ShippedTable("2026-11".into()),
            PriceSource::Override
        ]
    );
}

#[test]
fn report_by_episode() {
    let dir = tempfile::tempdir().unwrap();
    let store = live_store(dir.path()).unwrap();
    let r = store.report(GroupBy::Episode, None).unwrap();
    assert_eq!(keys(&r), ["r1/e1", "r1/e2", "r2/e1"]);
    let e1 = group(&r, "r1/e1").unwrap();
    assert_eq!(e1.episodes, 1);
    let m = e1.model.as_ref().unwrap();
    assert_eq!(m.calls, 2);
    assert!(close(m.cost.usd().unwrap(), 0.03));
    // Two samples: p50 is the smaller, p95 the larger.
    assert_eq!((m.latency_ms.p50, m.latency_ms.p95), (Some(100), Some(300)));
    assert_eq!((e1.tools.calls, e1.tools.denials), (3, 3));
    let e2 = group(&r, "r1/e2").unwrap();
    assert_eq!(e2.model.as_ref().unwrap().cost.usd(), None);
    assert_eq!(e2.tools.duration_ms.p50, Some(20));
}

#[test]
fn report_by_model() {
    let dir = tempfile::tempdir().unwrap();
    let store = live_store(dir.path()).unwrap();
    let r = store.report(GroupBy::Model, None).unwrap();
    assert_eq!(keys(&r), ["m-known", "m-local"]);
    let known = group(&r, "m-known").unwrap();
    assert_eq!(known.episodes, 2);
    let m = known.model.as_ref().unwrap();
    assert_eq!(m.calls, 3);
    assert!(close(m.cost.usd().unwrap(), 0.06));
    assert_eq!((m.latency_ms.p50, m.latency_ms.p95), (Some(300), Some(500)));
    // Tool calls count under their episode's model: 10, 5, 30 ms.
    assert_eq!(known.tools.calls, 3);
    assert_eq!(
        (known.tools.duration_ms.p50, known.tools.duration_ms.p95),
        (Some(10), Some(30))
    );
    let local = group(&r, "m-local").unwrap();
    let m = local.model.as_ref().unwrap();
    assert_eq!(m.cost.usd(), None);
    assert_eq!(m.cost.known_usd, 0.0);
    assert_eq!(m.cost.unknown_models, ["m-local"]);
    assert_eq!(local.tools.calls, 1);
}

#[test]
fn report_by_tool() {
    let dir = tempfile::tempdir().unwrap();
    let store = live_store(dir.path()).unwrap();
    let r = store.report(GroupBy::Tool, None).unwrap();
    assert_eq!(keys(&r), ["(success check)", "read_file", "shell"]);
    let check = group(&r, bee::records::SUCCESS_CHECK_GROUP).unwrap();
    assert_eq!((check.tools.calls, check.tools.denials), (0, 1));
    assert_eq!(check.tools.duration_ms.p50, None);
    assert_eq!((r.total.tools.calls, r.total.tools.denials), (4, 3));
    let shell = group(&r, "shell").unwrap();
    assert!(shell.model.is_none(), "model calls have no tool");
    assert_eq!(
        (shell.tools.calls, shell.tools.completed, shell.tools.failed),
        (3, 2, 1)
    );
    // 10, 30, 20 ms.
    assert_eq!(
        (shell.tools.duration_ms.p50, shell.tools.duration_ms.p95),
        (Some(20), Some(30))
    );
    assert_eq!(shell.tools.denials, 2);
    let read = group(&r, "read_file").unwrap();
    assert_eq!(read.tools.could_not_run, 1);
    assert_eq!(read.tools.duration_ms.p95, Some(5));
    assert!(r.total.model.is_some());
}

#[test]
fn report_of_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = live_store(dir.path()).unwrap();
    let r = store.report(GroupBy::Episode, Some("r2")).unwrap();
    assert_eq!(keys(&r), ["r2/e1"]);
    assert_eq!(r.run.as_deref(), Some("r2"));
    assert!(close(r.total.model.unwrap().cost.usd().unwrap(), 0.03));
    let none = store.report(GroupBy::Run, Some("nope")).unwrap();
    assert!(none.groups.is_empty());
    assert_eq!(none.total.episodes, 0);
    assert_eq!(store.episode_count(Some("r1")).unwrap(), 2);
}

#[test]
fn rebuild_from_transcripts_matches_the_live_store() {
    let dir = tempfile::tempdir().unwrap();
    let live = live_store(dir.path()).unwrap();
    let rebuilt_path = dir.path().join("rebuilt.sqlite");
    let report = Store::rebuild(dir.path(), &rebuilt_path).unwrap();
    assert_eq!((report.runs, report.episodes), (2, 3));
    assert!(report.truncated.is_empty());
    let rebuilt = Store::open_read_only(&rebuilt_path).unwrap();
    for by in [
        GroupBy::Run,
        GroupBy::Episode,
        GroupBy::Model,
        GroupBy::Tool,
    ] {
        assert_eq!(
            live.report(by, None).unwrap(),
            rebuilt.report(by, None).unwrap(),
            "{by:?}"
        );
    }
    // Rebuilding over an existing store replaces it.
    let again = Store::rebuild(dir.path(), &rebuilt_path).unwrap();
    assert_eq!(again.events, report.events);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".rebuild."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn rebuild_reports_a_truncated_tail_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), None).unwrap();
    let path = dir.path().join("r2").join("e1.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"seq":99,"at":"2026-11-30T06:"#);
    std::fs::write(&path, bytes).unwrap();
    let db = dir.path().join(STORE_FILE);
    let report = Store::rebuild(dir.path(), &db).unwrap();
    assert_eq!(report.truncated, [path]);
    let store = Store::open_read_only(&db).unwrap();
    let r = store.report(GroupBy::Run, Some("r2")).unwrap();
    assert_eq!(r.total.model.unwrap().calls, 1);
}

#[test]
fn rebuild_of_an_empty_directory_finds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let err = Store::rebuild(dir.path(), &dir.path().join(STORE_FILE)).unwrap_err();
    assert!(matches!(err, StoreError::NoTranscripts { .. }), "{err}");
    assert!(!dir.path().join(STORE_FILE).exists());
}

#[test]
fn ingest_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let store = live_store(dir.path()).unwrap();
    let before = store.report(GroupBy::Episode, None).unwrap();
    let t = read_transcript(&dir.path().join("r1").join("e1.jsonl")).unwrap();
    assert_eq!(store.ingest_all("r1", "e1", &t.events).unwrap(), 0);
    assert!(!store.ingest("r1", "e1", &t.events[3]).unwrap());
    assert_eq!(store.report(GroupBy::Episode, None).unwrap(), before);
}

#[test]
fn concurrent_episodes_share_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join(STORE_FILE)).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let store = store.clone();
            let records = dir.path().to_owned();
            std::thread::spawn(move || {
                let episode = format!("e{i}");
                let mut rec =
                    EpisodeRecorder::start(&records, started("r", &episode, "m"), Some(store))
                        .unwrap();
                for n in 1..=10 {
                    model_call(
                        &mut rec,
                        n,
                        "m",
                        [10, 0, 1, 0],
                        table("2026-11", 0.5),
                        10 * u64::from(n),
                    )
                    .unwrap();
                    tool(
                        &mut rec,
                        &format!("c{n}"),
                        "shell",
                        ToolState::Completed,
                        1,
                        0,
                    )
                    .unwrap();
                }
                rec.finish(Outcome::Failed, None).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let r = store.report(GroupBy::Run, None).unwrap();
    let s = group(&r, "r").unwrap();
    assert_eq!(s.episodes, 4);
    let m = s.model.as_ref().unwrap();
    assert_eq!(m.calls, 40);
    assert_eq!(m.tokens.input, 400);
    assert!(close(m.cost.usd().unwrap(), 20.0));
    assert_eq!((m.latency_ms.p50, m.latency_ms.p95), (Some(50), Some(100)));
    assert_eq!(s.tools.calls, 40);
}

#[test]
fn a_file_that_is_not_sqlite_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.sqlite");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let err = Store::open_read_only(&path).unwrap_err();
    assert!(err.is_corrupt(), "{err}");
    let err = Store::open(&path).unwrap_err();
    assert!(err.is_corrupt(), "{err}");
}

#[test]
fn a_foreign_sqlite_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
    drop(conn);
    assert!(Store::open_read_only(&path).unwrap_err().is_corrupt());
    assert!(Store::open(&path).unwrap_err().is_corrupt());
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    assert!(Store::open_read_only(&empty).unwrap_err().is_corrupt());
}

#[test]
fn unknown_price_is_stored_as_null_not_zero() {
    let dir = tempfile::tempdir().unwrap();
    let store = live_store(dir.path()).unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(dir.path().join(STORE_FILE)).unwrap();
    let (usd, source): (Option<f64>, String) = conn
        .query_row(
            "SELECT cost_usd, price_source FROM model_calls WHERE model = 'm-local'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((usd, source.as_str()), (None, "unknown"));
}

#[test]
fn rebuild_refuses_a_transcript_filed_under_another_name() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), None).unwrap();
    std::fs::rename(
        dir.path().join("r1").join("e2.jsonl"),
        dir.path().join("r1").join("e9.jsonl"),
    )
    .unwrap();
    let err = Store::rebuild(dir.path(), &dir.path().join(STORE_FILE)).unwrap_err();
    assert!(
        err.to_string()
            .contains("names r1/e2, but the file is r1/e9.jsonl"),
        "{err}"
    );
    assert!(!dir.path().join(STORE_FILE).exists());
}

#[test]
fn a_reader_sees_what_an_open_writer_committed() {
    let dir = tempfile::tempdir().unwrap();
    let writer = live_store(dir.path()).unwrap();
    let mut wal = dir.path().join(STORE_FILE).into_os_string();
    wal.push("-wal");
    assert!(Path::new(&wal).exists(), "the store is in WAL mode");
    let reader = Store::open_read_only(&dir.path().join(STORE_FILE)).unwrap();
    assert_eq!(
        reader.report(GroupBy::Episode, None).unwrap(),
        writer.report(GroupBy::Episode, None).unwrap()
    );
    let mut rec =
        EpisodeRecorder::start(dir.path(), started("r3", "e1", "m"), Some(writer.clone())).unwrap();
    tool(&mut rec, "c1", "shell", ToolState::Completed, 7, 0).unwrap();
    assert_eq!(reader.episode_count(Some("r3")).unwrap(), 1);
}
