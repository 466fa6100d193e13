//! The episode loop end to end: the replay provider, a scripted executor, real transcripts.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bee::episode::{
    CheckSpec, EpisodeLimits, EpisodeReport, EpisodeSpec, Interrupt, Model, Rule, ScriptedExecutor,
    ToolDenial, ToolExecution, Update, completed, denied, run_episode,
};
use bee::provider::price::{Price, PriceTable};
use bee::provider::replay::{Recording, Replay};
use bee::provider::{
    ErrorCategory, Event as StreamEvent, Item, Provider, ProviderError, Request, Response,
    StopReason, Usage,
};
use bee::records::{
    Cost, DenialTarget, Enforcement, Event, EventBody, ExitStatus, GrantKind, LimitKind, Outcome,
    Role, Store, Timestamp, ToolState, read_transcript,
};

const MODEL: &str = "test-model";

fn recording(lines: &[&str]) -> Arc<Recording> {
    let text = lines.join("\n");
    Arc::new(Recording::parse(Path::new("test.jsonl"), &text, false).unwrap())
}

fn priced(usd_per_mtok: f64) -> Arc<PriceTable> {
    let mut t = PriceTable::default();
    t.set(
        MODEL,
        Price {
            input: usd_per_mtok,
            cached_input: None,
            output: usd_per_mtok,
            reasoning: None,
        },
    );
    Arc::new(t)
}

fn model(provider: Arc<dyn Provider>, prices: Arc<PriceTable>) -> Model {
    Model {
        provider,
        kind: "replay".to_owned(),
        prices,
        max_output_tokens: 8192,
    }
}

fn replay(lines: &[&str]) -> Model {
    model(Arc::new(Replay::new(recording(lines), MODEL)), priced(1.0))
}

fn spec(workspace: &Path) -> EpisodeSpec {
    EpisodeSpec {
        run_id: "run-1".to_owned(),
        episode_id: "ep".to_owned(),
        scenario: "test".to_owned(),
        prompt: "fix the bug".to_owned(),
        system_prompt: Some("be careful".to_owned()),
        limits: EpisodeLimits::default(),
        success_check: None,
        workspace: workspace.to_owned(),
        policy: Some("policy.toml".to_owned()),
        run_started_at: Timestamp::now(),
        max_output_tokens: None,
        context: Vec::new(),
        content_hash: None,
    }
}

fn run(spec: &EpisodeSpec, model: &Model, exec: &ScriptedExecutor, dir: &Path) -> EpisodeReport {
    run_episode(spec, model, exec, dir, None, &Interrupt::new(), &|_| {}).unwrap()
}

fn events(report: &EpisodeReport) -> Vec<EventBody> {
    read_transcript(&report.transcript)
        .unwrap()
        .events
        .into_iter()
        .map(|e| e.body)
        .collect()
}

fn kinds(report: &EpisodeReport) -> Vec<&'static str> {
    events(report).iter().map(EventBody::kind).collect()
}

fn exec() -> ScriptedExecutor {
    ScriptedExecutor::new(&["shell", "read_file"], Enforcement::Kernel)
}

const LS: &str = r#"{"text": "look", "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "ls"}}], "usage": {"input_tokens": 100, "output_tokens": 10}}"#;
const CAT: &str = r#"{"tool_calls": [{"id": "c2", "name": "read_file", "arguments": {"path": "/secret"}}], "usage": {"input_tokens": 200, "output_tokens": 20}}"#;
const DONE: &str = r#"{"text": "done", "usage": {"input_tokens": 300, "output_tokens": 30}}"#;

fn secret_denial() -> ToolDenial {
    ToolDenial {
        hook: bee_common::Hook::FileOpen.into(),
        explanation: "open /secret for read: no fs.read grant covers it".to_owned(),
        target: DenialTarget::Path("/secret".to_owned()),
        missing: GrantKind::FsRead,
        learn: false,
    }
}

/// A call during which the kernel lost audit records: its result says how many, and the
/// episode's totals carry them beside the denials they may hide.
#[test]
fn lost_audit_records_reach_the_tool_result_and_the_totals() {
    let dir = tempfile::tempdir().unwrap();
    let mut answer = denied(ToolState::CouldNotRun, None, secret_denial());
    answer.lost_records = 4;
    let exec = exec().rule(Rule::on("read_file", "/secret", answer));
    let report = run(&spec(dir.path()), &replay(&[CAT, DONE]), &exec, dir.path());
    let result = events(&report).into_iter().find_map(|e| match e {
        EventBody::ToolResult(r) => Some(r),
        _ => None,
    });
    assert_eq!(result.map(|r| r.lost_records), Some(4));
    assert_eq!((report.totals.denials, report.totals.lost_records), (1, 4));
    assert_eq!(
        report.totals.denials_said(),
        "1 denial(s) (and 4 audit record(s) lost: there may be more)"
    );
}

#[test]
fn an_episode_records_every_step_in_order_and_passes() {
    let dir = tempfile::tempdir().unwrap();
    let exec = exec().rule(Rule::on(
        "read_file",
        "/secret",
        denied(ToolState::CouldNotRun, None, secret_denial()),
    ));
    let m = replay(&[LS, CAT, DONE]);
    let report = run(&spec(dir.path()), &m, &exec, dir.path());
    assert_eq!(report.outcome, Outcome::Passed);
    assert_eq!(
        kinds(&report),
        [
            "episode_started",
            "message",
            "message",
            "message",
            "tool_call",
            "usage",
            "model_latency",
            "model_call_ended",
            "tool_result",
            "tool_call",
            "usage",
            "model_latency",
            "model_call_ended",
            "denial",
            "tool_result",
            "message",
            "usage",
            "model_latency",
            "model_call_ended",
            "episode_finished"
        ]
    );
    let evs = events(&report);
    let EventBody::EpisodeStarted(st) = &evs[0] else {
        panic!()
    };
    assert_eq!(st.policy.enforcement, Enforcement::Kernel);
    assert_eq!(st.model, MODEL);
    assert!(matches!(&evs[1], EventBody::Message(m) if m.role == Role::System));
    assert!(
        matches!(&evs[2], EventBody::Message(m) if m.role == Role::User && m.text == "fix the bug")
    );
    let denial = evs
        .iter()
        .find_map(|e| match e {
            EventBody::Denial(d) => Some(d),
            _ => None,
        })
        .unwrap();
    assert_eq!(denial.call_id, "c2");
    assert_eq!(denial.missing, GrantKind::FsRead);
    let result = evs
        .iter()
        .filter_map(|e| match e {
            EventBody::ToolResult(r) => Some(r),
            _ => None,
        })
        .nth(1)
        .unwrap();
    assert_eq!(result.state, ToolState::CouldNotRun);
    assert!(result.output.contains("no fs.read grant covers it"));
    // Costs: 1 USD per million tokens.
    let usd: Vec<f64> = evs
        .iter()
        .filter_map(|e| match e {
            EventBody::Usage(u) => match &u.cost {
                Cost::Known { usd, .. } => Some(*usd),
                Cost::Unknown { .. } | Cost::UnknownTokens => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(usd.len(), 3);
    assert!((usd[0] - 110e-6).abs() < 1e-12);
    assert_eq!(report.totals.model_calls, 3);
    assert_eq!(report.totals.tool_calls, 2);
    assert_eq!(report.totals.denials, 1);
    assert_eq!(report.totals.input_tokens, 600);
    // The calls reached the executor.
    assert_eq!(exec.calls().len(), 2);
}

/// A provider that checks what the loop sends back to the model.
#[derive(Debug)]
struct Inspecting {
    inner: Replay,
    seen: Mutex<Vec<Request>>,
}

impl Provider for Inspecting {
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn stream(
        &self,
        req: &Request,
        sink: &mut dyn FnMut(StreamEvent),
    ) -> Result<Response, ProviderError> {
        self.seen.lock().unwrap().push(req.clone());
        self.inner.stream(req, sink)
    }
}

#[test]
fn tool_results_and_denial_explanations_go_back_to_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let exec = exec().rule(Rule::on(
        "read_file",
        "/secret",
        denied(ToolState::CouldNotRun, None, secret_denial()),
    ));
    let p = Arc::new(Inspecting {
        inner: Replay::new(recording(&[CAT, DONE]), MODEL),
        seen: Mutex::new(Vec::new()),
    });
    let m = model(p.clone(), priced(1.0));
    let report = run(&spec(dir.path()), &m, &exec, dir.path());
    assert_eq!(report.outcome, Outcome::Passed);
    let seen = p.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].tools.len(), 2);
    let last = seen[1].items.last().unwrap();
    let Item::ToolResult {
        call_id,
        output,
        is_error,
    } = last
    else {
        panic!("{last:?}")
    };
    assert_eq!(call_id, "c2");
    assert!(*is_error);
    assert!(output.contains("denied by the sandbox policy"));
}

#[test]
fn the_success_check_decides_passed_or_failed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path());
    s.success_check = Some(CheckSpec {
        command: "cargo test --offline".to_owned(),
        timeout: Duration::from_secs(5),
    });
    let failing = ToolExecution {
        state: ToolState::Completed,
        content: "test result: FAILED. 3 passed; 1 failed".to_owned(),
        exit: Some(ExitStatus::Code(101)),
        denials: vec![],
        duration: Duration::from_millis(3),
        subagent: None,
        lost_records: 0,
    };
    let r = run(
        &s,
        &replay(&[DONE]),
        &exec().check_answer(failing),
        dir.path(),
    );
    assert_eq!(r.outcome, Outcome::Failed);
    let check = r.success_check.unwrap();
    assert!(!check.passed);
    assert!(
        check.detail.contains("exited with status 101"),
        "{}",
        check.detail
    );
    assert!(check.detail.contains("1 failed"));

    s.episode_id = "ep2".to_owned();
    let r = run(&s, &replay(&[DONE]), &exec(), dir.path());
    assert_eq!(r.outcome, Outcome::Passed);
    assert!(r.success_check.unwrap().passed);
}

#[test]
fn success_check_denials_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path());
    s.success_check = Some(CheckSpec {
        command: "make".to_owned(),
        timeout: Duration::from_secs(5),
    });
    let ex = exec().check_answer(denied(
        ToolState::Completed,
        Some(ExitStatus::Code(1)),
        secret_denial(),
    ));
    let r = run(&s, &replay(&[DONE]), &ex, dir.path());
    assert_eq!(r.outcome, Outcome::Failed);
    let d = events(&r)
        .into_iter()
        .find_map(|e| match e {
            EventBody::Denial(d) => Some(d),
            _ => None,
        })
        .unwrap();
    assert_eq!(d.call_id, bee::episode::SUCCESS_CHECK_CALL_ID);
}

fn limit_of(r: &EpisodeReport) -> (LimitKind, String) {
    assert_eq!(r.outcome, Outcome::Limit, "{r:?}");
    let l = r.limit.clone().unwrap();
    // The transcript says so, just before the end.
    let evs = events(r);
    assert!(matches!(&evs[evs.len() - 2], EventBody::LimitHit(h) if h.limit == l.limit));
    (l.limit, l.detail)
}

#[test]
fn turn_limit_stops_before_the_call_past_it_and_leaves_last_tools_unrun() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path());
    s.limits.turns = Some(2);
    let ex = exec();
    let r = run(&s, &replay(&[LS, LS, LS, DONE]), &ex, dir.path());
    let (kind, detail) = limit_of(&r);
    assert_eq!(kind, LimitKind::Turns);
    assert!(detail.starts_with("2 turns of 2"), "{detail}");
    assert!(detail.contains("not run"));
    assert_eq!(r.totals.model_calls, 2);
    assert_eq!(
        ex.calls().len(),
        1,
        "the second turn's tool call was not run"
    );
}

#[test]
fn token_limit_is_never_passed_and_caps_each_output_budget() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path());
    s.limits.tokens = Some(500);
    let p = Arc::new(Inspecting {
        inner: Replay::new(recording(&[LS, LS, LS, LS, DONE]), MODEL),
        seen: Mutex::new(Vec::new()),
    });
    let r = run(&s, &model(p.clone(), priced(1.0)), &exec(), dir.path());
    let (kind, detail) = limit_of(&r);
    assert_eq!(kind, LimitKind::Tokens);
    assert!(
        detail.contains("tokens of 500 spent; the next model call may take up to")
            && detail.ends_with("refusing to call the model"),
        "{detail}"
    );
    let spent = r.totals.input_tokens + r.totals.output_tokens;
    assert!(spent <= 500, "{spent} tokens of 500");
    let seen = p.seen.lock().unwrap();
    assert_eq!(seen.len() as u64, r.totals.model_calls);
    assert!(seen.len() >= 2, "{}", seen.len());
    // Each call (110 tokens, 100 of them input) was sent with an output budget that kept its
    // worst case under what was left, and the budgets shrink as the limit nears.
    for (i, req) in seen.iter().enumerate() {
        let before = 110 * i as u32;
        let cap = req.max_output_tokens.unwrap();
        assert!(
            before + 100 + cap <= 500,
            "call {i}: {before} spent, budget {cap}"
        );
        if i > 0 {
            assert!(cap < seen[i - 1].max_output_tokens.unwrap(), "call {i}");
        }
    }
}

#[test]
fn wall_limit_bounds_a_running_tool() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path());
    s.limits.wall = Some(Duration::from_millis(300));
    let ex = exec().rule(Rule::on("shell", "", completed("slow")).after(Duration::from_secs(30)));
    let t = Instant::now();
    let r = run(&s, &replay(&[LS, DONE]), &ex, dir.path());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let (kind, detail) = limit_of(&r);
    assert_eq!(kind, LimitKind::Wall);
    assert!(detail.contains("while tool call c1"), "{detail}");
    let result = events(&r)
        .into_iter()
        .find_map(|e| match e {
            EventBody::ToolResult(r) => Some(r),
            _ => None,
        })
        .unwrap();
    assert_eq!(result.state, ToolState::Failed);
}

/// A provider that answers after a delay.
#[derive(Debug)]
struct Slow(Duration);

impl Provider for Slow {
    fn model(&self) -> &str {
        MODEL
    }
    fn stream(
        &self,
        _: &Request,
        _: &mut dyn FnMut(StreamEvent),
    ) -> Result<Response, ProviderError> {
        std::thread::sleep(self.0);
        Ok(Response {
            items: vec![Item::AssistantText {
                text: "late".to_owned(),
            }],
            usage: Some(Usage::default()),
            stop: StopReason::EndTurn,
            refusal: None,
            cut_calls: Vec::new(),
            notes: Vec::new(),
            latency: bee::provider::Latency::default(),
            model: MODEL.to_owned(),
        })
    }
}

#[test]
fn wall_limit_bounds_waiting_for_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path());
    s.limits.wall = Some(Duration::from_millis(200));
    let t = Instant::now();
    let r = run(
        &s,
        &model(Arc::new(Slow(Duration::from_secs(5))), priced(1.0)),
        &exec(),
        dir.path(),
    );
    assert!(t.elapsed() < Duration::from_secs(3));
    let (kind, detail) = limit_of(&r);
    assert_eq!(kind, LimitKind::Wall);
    assert!(detail.contains("waiting for the model"), "{detail}");
}

#[test]
fn cost_limit_is_never_passed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path());
    // 110 tokens at 1000 USD per million tokens: 0.11 USD per turn; each call reserves its
    // worst case (input estimate plus output budget) first.
    s.limits.cost_usd = Some(0.5);
    let r = run(
        &s,
        &model(
            Arc::new(Replay::new(recording(&[LS, LS, LS, DONE]), MODEL)),
            priced(1000.0),
        ),
        &exec(),
        dir.path(),
    );
    let (kind, detail) = limit_of(&r);
    assert_eq!(kind, LimitKind::Cost);
    assert!(
        detail.contains(" of $0.5 spent; the next model call may cost up to"),
        "{detail}"
    );
    let usd = r.totals.cost.usd().unwrap();
    assert!(usd <= 0.5, "${usd} of $0.5");
    assert!(r.totals.model_calls >= 2, "{}", r.totals.model_calls);
}

#[test]
fn unknown_cost_with_a_cost_limit_refuses_to_call_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path());
    s.limits.cost_usd = Some(5.0);
    let m = model(
        Arc::new(Replay::new(recording(&[LS, DONE]), MODEL)),
        Arc::new(PriceTable::default()),
    );
    let r = run(&s, &m, &exec(), dir.path());
    let (kind, detail) = limit_of(&r);
    assert_eq!(kind, LimitKind::Cost);
    assert!(detail.contains("unknown"), "{detail}");
    assert!(detail.contains("refusing"), "{detail}");
    assert_eq!(r.totals.model_calls, 0);
}

#[test]
fn unknown_cost_without_a_cost_limit_stays_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(
        Arc::new(Replay::new(recording(&[DONE]), MODEL)),
        Arc::new(PriceTable::default()),
    );
    let r = run(&spec(dir.path()), &m, &exec(), dir.path());
    assert_eq!(r.outcome, Outcome::Passed);
    assert_eq!(r.totals.cost.usd(), None);
    assert_eq!(r.totals.cost.unknown_models, [MODEL]);
}

#[test]
fn an_exhausted_recording_is_a_provider_error_with_the_transcript_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(&spec(dir.path()), &replay(&[LS, CAT]), &exec(), dir.path());
    assert_eq!(r.outcome, Outcome::ProviderError);
    assert_eq!(
        r.provider_error.as_ref().unwrap().category,
        ErrorCategory::Protocol
    );
    let k = kinds(&r);
    assert_eq!(k.last(), Some(&"episode_finished"));
    // The third call failed before any answer: it is recorded with every count unknown.
    assert_eq!(
        k[k.len() - 5..],
        [
            "tool_result",
            "usage",
            "model_latency",
            "model_call_ended",
            "episode_finished"
        ]
    );
    let evs = events(&r);
    let EventBody::Usage(u) = &evs[evs.len() - 4] else {
        panic!("{:?}", evs[evs.len() - 4])
    };
    assert_eq!(
        (u.model_call, u.input_tokens, u.output_tokens),
        (3, None, None)
    );
    assert_eq!(r.totals.model_calls, 3);
}

/// Answers once, then cuts the stream after some text.
#[derive(Debug)]
struct CutsSecond(Replay);

impl Provider for CutsSecond {
    fn model(&self) -> &str {
        MODEL
    }
    fn stream(
        &self,
        req: &Request,
        sink: &mut dyn FnMut(StreamEvent),
    ) -> Result<Response, ProviderError> {
        if self.0.played() == 0 {
            return self.0.stream(req, sink);
        }
        Err(ProviderError::StreamCut {
            reason: "connection reset".to_owned(),
            events: 1,
            received: Box::new(Response {
                items: vec![Item::AssistantText {
                    text: "half a thou".to_owned(),
                }],
                usage: Some(Usage {
                    input_tokens: 377,
                    ..Usage::default()
                }),
                stop: StopReason::Unknown("incomplete".to_owned()),
                refusal: None,
                cut_calls: Vec::new(),
                notes: Vec::new(),
                latency: bee::provider::Latency::default(),
                model: MODEL.to_owned(),
            }),
        })
    }
}

#[test]
fn a_provider_failure_mid_episode_keeps_what_happened_and_the_partial_text() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(
        Arc::new(CutsSecond(Replay::new(recording(&[LS, DONE]), MODEL))),
        priced(1.0),
    );
    let r = run(&spec(dir.path()), &m, &exec(), dir.path());
    assert_eq!(r.outcome, Outcome::ProviderError);
    let p = r.provider_error.clone().unwrap();
    assert_eq!(p.category, ErrorCategory::Network);
    assert!(p.message.contains("cut"));
    let evs = events(&r);
    let n = evs.len();
    // The failed call is recorded like any other: its partial text, the input tokens the
    // provider had reported (its output count unknown, so its cost too), its latency and
    // its error with the category.
    assert!(matches!(&evs[n - 6], EventBody::ToolResult(_)));
    assert!(matches!(&evs[n - 5], EventBody::Message(m) if m.text == "half a thou"));
    match &evs[n - 4] {
        EventBody::Usage(u) => {
            assert_eq!(u.model_call, 2);
            assert_eq!(u.input_tokens, Some(377));
            assert_eq!(u.output_tokens, None);
            assert_eq!(u.cost, Cost::UnknownTokens);
        }
        other => panic!("expected usage, got {other:?}"),
    }
    assert!(matches!(&evs[n - 3], EventBody::ModelLatency(l) if l.model_call == 2));
    match &evs[n - 2] {
        EventBody::ModelCallEnded(m) => {
            assert_eq!(m.stop_reason, None);
            let e = m.error.as_ref().unwrap();
            assert_eq!(e.category, ErrorCategory::Network);
            assert!(e.message.contains("cut"));
        }
        other => panic!("expected model_call_ended, got {other:?}"),
    }
    assert!(
        matches!(&evs[n - 1], EventBody::EpisodeFinished(f) if f.outcome == Outcome::ProviderError)
    );
    let totals = &r.totals;
    assert_eq!(totals.model_calls, 2);
    assert_eq!(totals.unknown_token_calls, 1);
    assert_eq!(
        totals.cost.usd(),
        None,
        "a failed call's cost is unknown, never $0"
    );
}

#[test]
fn an_interrupt_during_a_tool_finishes_the_episode_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let ex = exec().rule(Rule::on("shell", "", completed("slow")).after(Duration::from_secs(30)));
    let interrupt = Interrupt::new();
    let raiser = interrupt.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        raiser.raise();
    });
    let r = run_episode(
        &spec(dir.path()),
        &replay(&[LS, DONE]),
        &ex,
        dir.path(),
        None,
        &interrupt,
        &|_| {},
    )
    .unwrap();
    t.join().unwrap();
    assert_eq!(r.outcome, Outcome::Interrupted);
    assert_eq!(kinds(&r).last(), Some(&"episode_finished"));
    assert_eq!(r.totals.model_calls, 1);
}

#[test]
fn every_event_reaches_the_observer_and_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("metrics.sqlite")).unwrap());
    let seen = Mutex::new(Vec::<Event>::new());
    let streamed = Mutex::new(String::new());
    let started = Mutex::new(Vec::<String>::new());
    let observer = |u: Update<'_>| match u {
        Update::Recorded(e) => seen.lock().unwrap().push(e.clone()),
        Update::Stream(StreamEvent::TextDelta { text }) => streamed.lock().unwrap().push_str(text),
        Update::Stream(_) => {}
        Update::ToolStarted(call) => started.lock().unwrap().push(call.id.clone()),
    };
    let r = run_episode(
        &spec(dir.path()),
        &replay(&[LS, DONE]),
        &exec(),
        dir.path(),
        Some(store),
        &Interrupt::new(),
        &observer,
    )
    .unwrap();
    let seen = seen.into_inner().unwrap();
    let on_disk = read_transcript(&r.transcript).unwrap().events;
    assert_eq!(seen.len(), on_disk.len());
    let seqs: Vec<u64> = seen.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=on_disk.len() as u64).collect::<Vec<_>>());
    let ro = Store::open_read_only(&dir.path().join("metrics.sqlite")).unwrap();
    assert_eq!(ro.schema_version().unwrap(), bee::records::SCHEMA_VERSION);
    // The model's text reached the observer as it streamed, before it was recorded, and the
    // tool call was announced before it ran.
    assert_eq!(streamed.into_inner().unwrap(), "lookdone");
    assert_eq!(started.into_inner().unwrap(), ["c1"]);
}

#[test]
fn host_mode_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path());
    s.policy = None;
    let ex = ScriptedExecutor::new(&["shell"], Enforcement::Host);
    let r = run(&s, &replay(&[DONE]), &ex, dir.path());
    let EventBody::EpisodeStarted(st) = &events(&r)[0] else {
        panic!()
    };
    assert_eq!(st.policy.enforcement, Enforcement::Host);
    assert_eq!(st.policy.source, None);
}

#[test]
fn invalid_tool_arguments_are_recorded_as_text() {
    #[derive(Debug)]
    struct BadArgs;
    impl Provider for BadArgs {
        fn model(&self) -> &str {
            MODEL
        }
        fn stream(
            &self,
            req: &Request,
            _: &mut dyn FnMut(StreamEvent),
        ) -> Result<Response, ProviderError> {
            let done = req
                .items
                .iter()
                .any(|i| matches!(i, Item::ToolResult { .. }));
            let items = if done {
                vec![Item::AssistantText {
                    text: "ok".to_owned(),
                }]
            } else {
                vec![Item::ToolCall(bee::provider::ToolCall {
                    id: "x".to_owned(),
                    name: "shell".to_owned(),
                    arguments: "{not json".to_owned(),
                })]
            };
            Ok(Response {
                items,
                usage: Some(Usage::default()),
                stop: StopReason::EndTurn,
                refusal: None,
                cut_calls: Vec::new(),
                notes: Vec::new(),
                latency: bee::provider::Latency::default(),
                model: MODEL.to_owned(),
            })
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        &spec(dir.path()),
        &model(Arc::new(BadArgs), priced(1.0)),
        &exec(),
        dir.path(),
    );
    assert_eq!(r.outcome, Outcome::Passed);
    let call = events(&r)
        .into_iter()
        .find_map(|e| match e {
            EventBody::ToolCall(c) => Some(c),
            _ => None,
        })
        .unwrap();
    assert_eq!(call.arguments, serde_json::json!("{not json"));
}
