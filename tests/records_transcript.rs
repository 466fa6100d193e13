//! Transcripts and run summaries: round trips, crashes mid-write, damage, atomic summaries.

use std::io::Write;
use std::path::Path;

use bee::records::{
    Cost, Denial, DenialTarget, Enforcement, EpisodeFinished, EpisodeRecorder, EpisodeStarted,
    EventBody, ExitStatus, GrantKind, LimitHit, LimitKind, Limits, Message, ModelLatency, Outcome,
    PolicyRecord, PriceSource, RecordError, Role, RunSummary, SUMMARY_FILE, SuccessCheck,
    Timestamp, ToolCall, ToolResult, ToolState, Totals, TranscriptError, TranscriptWriter,
    Truncation, Usage, read_transcript, transcript_path,
};
use serde_json::json;

fn started(run: &str, episode: &str) -> EpisodeStarted {
    EpisodeStarted {
        run_id: run.into(),
        episode_id: episode.into(),
        scenario: "fix-the-test".into(),
        model: "m".into(),
        provider: "anthropic".into(),
        policy: PolicyRecord {
            source: None,
            enforcement: Enforcement::Host,
            engine: None,
            requested: None,
            installed: None,
            tools: std::collections::BTreeMap::new(),
        },
        workspace: "/tmp/ws".into(),
        limits: Limits {
            turns: Some(10),
            tokens: Some(100_000),
            wall_ms: Some(600_000),
            cost_usd: Some(2.5),
        },
        run_started_at: Timestamp::now(),
        parent: None,
        content_hash: None,
    }
}

/// One event of every kind.
fn every_kind() -> Vec<EventBody> {
    vec![
        EventBody::EpisodeStarted(started("r", "e")),
        EventBody::Message(Message {
            role: Role::System,
            text: "you are in a sandbox".into(),
        }),
        EventBody::Message(Message {
            role: Role::Assistant,
            text: "running the tests \u{1f41d}\nsecond line".into(),
        }),
        EventBody::Usage(Usage {
            model_call: 1,
            model: "m".into(),
            input_tokens: Some(1200),
            cached_input_tokens: Some(1000),
            output_tokens: Some(80),
            reasoning_tokens: Some(20),
            cost: Cost::Known {
                usd: 0.001_25,
                source: PriceSource::ShippedTable("2026-11".into()),
            },
        }),
        EventBody::ModelLatency(ModelLatency {
            model_call: 1,
            first_token_ms: None,
            total_ms: 950,
        }),
        EventBody::ToolCall(ToolCall {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!({"cmd": "cat /etc/shadow", "timeout_ms": 1000}),
        }),
        EventBody::Denial(Denial {
            call_id: "c1".into(),
            hook: bee_common::Hook::FileOpen.into(),
            explanation: "read of /etc/shadow refused: no fs.read grant covers it".into(),
            target: DenialTarget::Path("/etc/shadow".into()),
            missing: GrantKind::FsRead,
            learn: false,
        }),
        EventBody::Denial(Denial {
            call_id: "c1".into(),
            hook: bee_common::Hook::SocketConnect.into(),
            explanation: "tcp connect to 1.1.1.1:443 refused: no net.allow grant".into(),
            target: DenialTarget::Peer("1.1.1.1:443".into()),
            missing: GrantKind::Net,
            learn: false,
        }),
        EventBody::ToolResult(ToolResult {
            call_id: "c1".into(),
            state: ToolState::Completed,
            output: "cat: /etc/shadow: Permission denied".into(),
            truncated: Some(Truncation {
                total_bytes: 70_000,
                note: "kept the last 16 KiB".into(),
            }),
            exit: Some(ExitStatus::Code(1)),
            duration_ms: 12,
            lost_records: 7,
        }),
        EventBody::Usage(Usage {
            model_call: 2,
            model: "m2".into(),
            input_tokens: Some(10),
            cached_input_tokens: Some(0),
            output_tokens: Some(1),
            reasoning_tokens: Some(0),
            cost: Cost::Unknown { model: "m2".into() },
        }),
        EventBody::LimitHit(LimitHit {
            limit: LimitKind::Cost,
            detail: "$2.50 of $2.50".into(),
        }),
        EventBody::EpisodeFinished(EpisodeFinished {
            outcome: Outcome::Limit,
            success_check: Some(SuccessCheck {
                passed: false,
                detail: "not run to the end".into(),
            }),
            totals: Totals::default(),
        }),
    ]
}

#[test]
fn round_trip_of_every_event_kind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r").join("e.jsonl");
    let mut w = TranscriptWriter::create(&path).unwrap();
    let written: Vec<_> = every_kind()
        .into_iter()
        .map(|b| w.append(b).unwrap())
        .collect();
    w.finish().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), written.len(), "one event a line");
    assert!(text.ends_with('\n'));
    let t = read_transcript(&path).unwrap();
    assert_eq!(t.events, written);
    assert!(t.truncated_tail.is_none());
    assert!(t.is_finished());
    let seqs: Vec<u64> = t.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=12).collect::<Vec<_>>());
}

#[test]
fn an_existing_transcript_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.jsonl");
    std::fs::write(&path, b"keep").unwrap();
    assert!(matches!(
        TranscriptWriter::create(&path),
        Err(TranscriptError::Io { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"keep");
}

fn write_events(path: &Path, n: usize) -> Result<(), TranscriptError> {
    let mut w = TranscriptWriter::create(path)?;
    for b in every_kind().into_iter().take(n) {
        w.append(b)?;
    }
    Ok(())
}

#[test]
fn a_crash_mid_line_is_tolerated_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.jsonl");
    write_events(&path, 4).unwrap();
    let whole = std::fs::read(&path).unwrap();
    // The fifth line, cut off in the middle as a crash during write(2) would leave it.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(br#"{"seq":5,"at":"2026-11-30T06:15:02.118Z","event":"model_lat"#)
        .unwrap();
    drop(f);
    let t = read_transcript(&path).unwrap();
    assert_eq!(t.events.len(), 4);
    let tail = t.truncated_tail.clone().unwrap();
    assert_eq!(tail.line, 5);
    assert_eq!(
        tail.bytes,
        std::fs::read(&path).unwrap().len() - whole.len()
    );
    assert!(!t.is_finished());
}

#[test]
fn a_damaged_complete_line_is_an_error_with_its_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.jsonl");
    write_events(&path, 3).unwrap();
    let mut text = std::fs::read_to_string(&path).unwrap();
    text = text.replacen("\"event\":\"message\"", "\"event\":\"mesage\"", 1);
    std::fs::write(&path, &text).unwrap();
    match read_transcript(&path) {
        Err(TranscriptError::Malformed { line, .. }) => assert_eq!(line, 2),
        other => panic!("expected a malformed line, got {other:?}"),
    }
}

#[test]
fn a_sequence_gap_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.jsonl");
    write_events(&path, 3).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let without_second: Vec<&str> = text
        .lines()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, l)| l)
        .collect();
    std::fs::write(&path, without_second.join("\n") + "\n").unwrap();
    let err = read_transcript(&path).unwrap_err();
    assert!(
        err.to_string()
            .contains("sequence number 3 where 2 was due"),
        "{err}"
    );
}

#[test]
fn the_recorder_leaves_everything_so_far_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut rec = EpisodeRecorder::start(dir.path(), started("r", "e"), None).unwrap();
    let path = transcript_path(dir.path(), "r", "e");
    assert_eq!(rec.transcript_path(), path);
    for (i, body) in every_kind().into_iter().skip(1).take(8).enumerate() {
        rec.record(body).unwrap();
        // Readable after every event, while the writer is still open.
        assert_eq!(read_transcript(&path).unwrap().events.len(), i + 2);
    }
    assert_eq!(rec.totals().model_calls, 1);
    assert_eq!(rec.totals().denials, 2);
    // The provider fails and bee goes down without finishing the episode.
    drop(rec);
    let t = read_transcript(&path).unwrap();
    assert_eq!(t.events.len(), 9);
    assert!(!t.is_finished());
}

#[test]
fn finish_records_the_totals() {
    let dir = tempfile::tempdir().unwrap();
    let mut rec = EpisodeRecorder::start(dir.path(), started("r", "e"), None).unwrap();
    for body in every_kind().into_iter().skip(1).take(10) {
        rec.record(body).unwrap();
    }
    let done = rec.finish(Outcome::Limit, None).unwrap();
    let EventBody::EpisodeFinished(f) = done.body else {
        panic!("not episode_finished: {done:?}");
    };
    assert_eq!(f.outcome, Outcome::Limit);
    assert_eq!(
        (f.totals.model_calls, f.totals.tool_calls, f.totals.denials),
        (2, 1, 2)
    );
    assert_eq!(f.totals.input_tokens, 1210);
    // The tool result's lost audit records: the denials counted are a lower bound.
    assert_eq!(f.totals.lost_records, 7);
    assert_eq!(
        f.totals.denials_said(),
        "2 denial(s) (and 7 audit record(s) lost: there may be more)"
    );
    assert_eq!(f.totals.cost.usd(), None, "m2 has no price");
    assert_eq!(f.totals.cost.unknown_models, ["m2"]);
    assert!(
        read_transcript(&transcript_path(dir.path(), "r", "e"))
            .unwrap()
            .is_finished()
    );
}

#[test]
fn ids_that_cannot_name_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["", "..", ".hidden", "a/b", "tab\there"] {
        assert!(
            EpisodeRecorder::start(dir.path(), started("r", bad), None).is_err(),
            "{bad:?}"
        );
        assert!(
            EpisodeRecorder::start(dir.path(), started(bad, "e"), None).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn summary_of_a_run_with_an_unfinished_episode() {
    let dir = tempfile::tempdir().unwrap();
    let mut rec = EpisodeRecorder::start(dir.path(), started("r", "a"), None).unwrap();
    for body in every_kind().into_iter().skip(1).take(8) {
        rec.record(body).unwrap();
    }
    rec.finish(Outcome::Passed, None).unwrap();
    let mut rec = EpisodeRecorder::start(dir.path(), started("r", "b"), None).unwrap();
    for body in every_kind().into_iter().skip(1).take(3) {
        rec.record(body).unwrap();
    }
    drop(rec);

    let run_dir = dir.path().join("r");
    let s = RunSummary::from_run_dir(&run_dir).unwrap();
    assert_eq!(s.run_id, "r");
    assert!(!s.complete);
    assert_eq!(s.episodes.len(), 2);
    assert_eq!(s.episodes[0].outcome, Some(Outcome::Passed));
    assert_eq!(s.episodes[0].enforcement, Some(Enforcement::Host));
    assert_eq!(s.episodes[1].outcome, None);
    assert_eq!(
        s.episodes[1].totals.model_calls, 1,
        "counted from the events"
    );
    assert_eq!(s.totals.model_calls, 2);
    assert_eq!(s.totals.denials, 2);

    let path = s.write_atomic(&run_dir).unwrap();
    assert_eq!(path, run_dir.join(SUMMARY_FILE));
    assert_eq!(RunSummary::read(&path).unwrap(), s);
}

#[test]
fn summary_rewrites_are_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("r");
    let mut rec = EpisodeRecorder::start(dir.path(), started("r", "a"), None).unwrap();
    for body in every_kind().into_iter().skip(1).take(8) {
        rec.record(body).unwrap();
    }
    rec.finish(Outcome::Passed, None).unwrap();
    let summary = RunSummary::from_run_dir(&run_dir).unwrap();
    summary.write_atomic(&run_dir).unwrap();
    let path = run_dir.join(SUMMARY_FILE);

    // A reader never sees a half-written summary while a writer replaces it over and over.
    let writer_dir = run_dir.clone();
    let writer = std::thread::spawn(move || {
        let mut s = summary;
        for i in 0..100 {
            s.episodes[0].episode_id = "x".repeat(i % 50 + 1);
            s.write_atomic(&writer_dir).unwrap();
        }
    });
    let mut reads = 0;
    while !writer.is_finished() {
        RunSummary::read(&path).unwrap();
        reads += 1;
    }
    writer.join().unwrap();
    assert!(reads > 0);
    let names: Vec<String> = std::fs::read_dir(&run_dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(
        names,
        ["a.jsonl", "summary.json"],
        "no temporary file left behind"
    );
}

#[test]
fn an_event_that_cannot_be_encoded_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.jsonl");
    let mut w = TranscriptWriter::create(&path).unwrap();
    w.append(EventBody::EpisodeStarted(started("r", "e")))
        .unwrap();
    let nan = EventBody::Usage(Usage {
        model_call: 1,
        model: "m".into(),
        input_tokens: Some(1),
        cached_input_tokens: Some(0),
        output_tokens: Some(1),
        reasoning_tokens: Some(0),
        cost: Cost::Known {
            usd: f64::NAN,
            source: PriceSource::Override,
        },
    });
    assert!(matches!(
        w.append(nan),
        Err(TranscriptError::Encode { seq: 2, .. })
    ));
    assert_eq!(w.next_seq(), 2);
    let t = read_transcript(&path).unwrap();
    assert_eq!(t.events.len(), 1);
    assert!(t.truncated_tail.is_none());
}

#[test]
fn start_and_finish_events_go_through_start_and_finish_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut rec = EpisodeRecorder::start(dir.path(), started("r", "e"), None).unwrap();
    let kinds = every_kind();
    for body in [kinds[0].clone(), kinds[kinds.len() - 1].clone()] {
        assert!(matches!(
            rec.record(body),
            Err(RecordError::OutOfPlace { .. })
        ));
    }
    rec.finish(Outcome::Interrupted, None).unwrap();
    let t = read_transcript(&transcript_path(dir.path(), "r", "e")).unwrap();
    assert_eq!(t.events.len(), 2);
    assert!(t.is_finished());
}

/// A symbolic link planted at the summary's temporary name is not followed: the summary is
/// written to a fresh file and the link's target stays as it was.
#[test]
fn a_link_at_the_summarys_temporary_name_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("r");
    let rec = EpisodeRecorder::start(dir.path(), started("r", "a"), None).unwrap();
    rec.finish(Outcome::Passed, None).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "original\n").unwrap();
    let tmp = run_dir.join(format!(".{SUMMARY_FILE}.{}.tmp", std::process::id()));
    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    let summary = RunSummary::from_run_dir(&run_dir).unwrap();
    let path = summary.write_atomic(&run_dir).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n");
    assert_eq!(RunSummary::read(&path).unwrap(), summary);
    assert!(std::fs::symlink_metadata(&tmp).is_err());
}
