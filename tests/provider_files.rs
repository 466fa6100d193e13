//! Provider files and replay recordings: resolution, defaults, errors with file:line:column
//! and key, the key never echoed, and replay playing turns in order.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::path::Path;
use std::time::Duration;

use bee::config::FileError;
use bee::provider::price::{Cost, PriceTable};
use bee::provider::{
    ErrorCategory, Event, Kind, ProviderError, ProviderSpec, Request, StopReason, Usage,
};

fn parse(text: &str) -> Result<ProviderSpec, FileError> {
    ProviderSpec::parse("provider.toml", text, Path::new("/etc/bee"))
}

fn problems(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e
            .diagnostics()
            .unwrap()
            .problems
            .iter()
            .map(|p| format!("{p} | {}", p.help.clone().unwrap_or_default()))
            .collect(),
    }
}

#[test]
fn a_full_file_resolves() {
    let spec = parse(
        r#"
kind = "openai-responses"
base_url = "https://example.test/v1/"
model = "gpt-5"
api_key_env = "OPENAI_API_KEY"
max_output_tokens = 1000

[timeouts]
connect_ms = 1500
read_ms = 30000
total_ms = 90000

[retry]
max_attempts = 2
base_backoff_ms = 100
max_backoff_ms = 5000

[prices]
input = 1.0
cached_input = 0.1
output = 4.0
reasoning = 4.0
"#,
    )
    .unwrap();
    assert_eq!(spec.kind, Kind::OpenAiResponses);
    assert_eq!(spec.base_url, "https://example.test/v1");
    assert_eq!(spec.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(spec.max_output_tokens, 1000);
    assert_eq!(spec.timeouts.connect, Duration::from_millis(1500));
    assert_eq!(spec.timeouts.total, Duration::from_secs(90));
    assert_eq!(spec.retry.max_attempts, 2);
    assert_eq!(spec.retry.max_backoff, Duration::from_secs(5));
    assert_eq!(spec.prices.unwrap().output, 4.0);
}

#[test]
fn defaults_fill_in() {
    let spec = parse("kind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n").unwrap();
    assert_eq!(spec.base_url, "https://api.anthropic.com/v1");
    assert_eq!(spec.anthropic_version, "2023-06-01");
    assert_eq!(spec.api_key_env, None);
    assert_eq!(spec.retry.max_attempts, 4);
}

#[test]
fn an_unknown_key_is_named_with_its_place_and_a_hint() {
    let p =
        problems("kind = \"anthropic\"\nmodel = \"m\"\n\n[retry]\nmax_attempts = 2\nbackoff = 3\n");
    assert_eq!(p.len(), 1);
    assert!(
        p[0].starts_with("provider.toml:6:1: retry.backoff: unknown field"),
        "{p:?}"
    );
    assert!(
        p[0].contains("known keys here") && p[0].contains("base_backoff_ms"),
        "{p:?}"
    );
    let p = problems("kind = \"anthropic\"\nmodel = \"m\"\ntemperature = 0.2\n");
    assert!(
        p[0].starts_with("provider.toml:3:1: temperature: unknown field"),
        "{p:?}"
    );
}

#[test]
fn an_unknown_kind_lists_the_known_ones() {
    let p = problems("kind = \"gemini\"\nmodel = \"m\"\n");
    assert!(
        p[0].starts_with("provider.toml:1:8: kind: unknown provider kind"),
        "{p:?}"
    );
    assert!(p[0].contains("openai-responses, openai-chat, anthropic, replay"));
}

#[test]
fn a_misspelt_kind_is_reported_alone_with_a_suggestion() {
    // Without a kind bee cannot say whether `model` is required: the kind is the problem.
    let p = problems("kind = \"replya\"\nfile = \"turns.jsonl\"\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("provider.toml:1:8: kind: unknown provider kind \"replya\""),
        "{p:?}"
    );
    assert!(p[0].contains("did you mean \"replay\"?"), "{p:?}");
    let p = problems("kind = \"anthropic\"\nmodle = \"m\"\n");
    assert!(p[0].contains("did you mean `model`?"), "{p:?}");
}

#[test]
fn several_problems_are_all_reported_in_order() {
    let p = problems(
        "kind = \"openai-chat\"\nbase_url = \"ftp://x\"\n[retry]\nmax_attempts = 0\n[prices]\ninput = -1.0\noutput = 1.0\n",
    );
    assert_eq!(p.len(), 4, "{p:?}");
    assert!(p[0].contains(": model: missing key"), "{p:?}");
    assert!(p[1].starts_with("provider.toml:2:12: base_url:"), "{p:?}");
    assert!(
        p[2].starts_with("provider.toml:4:16: retry.max_attempts:"),
        "{p:?}"
    );
    assert!(p[3].contains("prices.input = -1"), "{p:?}");
}

#[test]
fn a_key_pasted_into_api_key_env_is_refused_and_never_shown() {
    let key = "sk-proj-AbC123xyz789SECRET";
    let text = format!("kind = \"openai-chat\"\nmodel = \"m\"\napi_key_env = \"{key}\"\n");
    let e = parse(&text).unwrap_err();
    let problem = &e.diagnostics().unwrap().problems[0];
    assert_eq!(problem.line, 3);
    assert_eq!(problem.key.as_deref(), Some("api_key_env"));
    let rendered = format!(
        "{e}\n{e:?}\n{:?}",
        miette::Report::new(e.diagnostics().unwrap().clone())
    );
    assert!(!rendered.contains(key), "{rendered}");
    assert!(!rendered.contains("AbC123"), "{rendered}");

    // Also in the excerpts of other problems found with it.
    let text = format!("kind = \"gemini\"\napi_key_env = \"{key}\"\nmodel = \"m\"\n");
    let e = parse(&text).unwrap_err();
    assert_eq!(e.diagnostics().unwrap().problems.len(), 2);
    for d in &e.diagnostics().unwrap().problems {
        let rendered = format!("{:?}", miette::Report::new(d.clone()));
        assert!(!rendered.contains("AbC123"), "{rendered}");
    }

    // Also when an unrelated error is what gets reported.
    let text =
        format!("kind = \"openai-chat\"\nmodel = \"m\"\napi_key_env = \"{key}\"\nbogus = 1\n");
    let e = parse(&text).unwrap_err();
    let d = e.diagnostics().unwrap().clone();
    let rendered = format!("{e}\n{:?}", miette::Report::new(d));
    assert!(rendered.contains("bogus"), "{rendered}");
    assert!(!rendered.contains("AbC123"), "{rendered}");
}

#[test]
fn file_is_only_for_replay_and_replay_needs_it() {
    let p = problems("kind = \"anthropic\"\nmodel = \"m\"\nfile = \"x.jsonl\"\n");
    assert!(
        p[0].contains("file: `file` is only for kind = \"replay\""),
        "{p:?}"
    );
    let p = problems("kind = \"replay\"\n");
    assert!(
        p[0].contains("file: a replay provider needs `file`"),
        "{p:?}"
    );
}

#[test]
fn a_missing_provider_file_is_a_read_error() {
    let e = ProviderSpec::load(Path::new("/nonexistent/provider.toml")).unwrap_err();
    assert!(matches!(e, FileError::Read { .. }));
    assert!(e.to_string().contains("/nonexistent/provider.toml"));
}

fn replay(recording: &str, name: &str) -> Result<ProviderSpec, FileError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), recording).unwrap();
    std::fs::write(
        dir.path().join("provider.toml"),
        format!("kind = \"replay\"\nfile = \"{name}\"\n"),
    )
    .unwrap();
    ProviderSpec::load(&dir.path().join("provider.toml"))
}

#[test]
fn replay_plays_turns_in_order_then_runs_out() {
    let spec = replay(
        concat!(
            r#"{"text": "Let me look.", "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}], "usage": {"input_tokens": 100, "output_tokens": 20}}"#,
            "\n\n",
            r#"{"text": "Done."}"#,
            "\n"
        ),
        "turns.jsonl",
    )
    .unwrap();
    let p = spec.connect().unwrap();
    let mut events = Vec::new();
    let r1 = p
        .stream(&Request::default(), &mut |e| events.push(e))
        .unwrap();
    assert_eq!(r1.text(), "Let me look.");
    let call = r1.tool_calls().next().unwrap();
    assert_eq!(call.name, "read_file");
    assert_eq!(call.id, "call_0_0");
    assert_eq!(call.arguments, r#"{"path":"README.md"}"#);
    assert_eq!(r1.stop, StopReason::ToolUse);
    assert_eq!(r1.usage.unwrap().input_tokens, 100);
    assert!(matches!(events[0], Event::TextDelta { .. }));
    assert!(matches!(events[1], Event::ToolCallStarted { .. }));

    let r2 = p.stream(&Request::default(), &mut |_| {}).unwrap();
    assert_eq!(r2.text(), "Done.");
    assert_eq!(r2.stop, StopReason::EndTurn);
    // A turn without usage reports none: its tokens are unknown, not 0.
    assert_eq!(r2.usage, None);

    let e = p.stream(&Request::default(), &mut |_| {}).unwrap_err();
    assert!(
        matches!(e, ProviderError::ReplayExhausted { turns: 2, .. }),
        "{e:?}"
    );
    assert_eq!(e.category(), ErrorCategory::Protocol);
    assert!(e.to_string().contains("turns.jsonl"));
}

#[test]
fn replay_reads_toml_recordings() {
    let spec = replay(
        "[[turn]]\ntext = \"hi\"\n\n[[turn]]\n[[turn.tool_calls]]\nid = \"c9\"\nname = \"shell\"\narguments = { cmd = \"ls\" }\n",
        "turns.toml",
    )
    .unwrap();
    let p = spec.connect().unwrap();
    assert_eq!(
        p.stream(&Request::default(), &mut |_| {}).unwrap().text(),
        "hi"
    );
    let r = p.stream(&Request::default(), &mut |_| {}).unwrap();
    let call = r.tool_calls().next().unwrap();
    assert_eq!(
        (call.id.as_str(), call.arguments.as_str()),
        ("c9", r#"{"cmd":"ls"}"#)
    );
}

#[test]
fn a_malformed_recording_names_file_and_line() {
    let e = replay(
        "{\"text\": \"ok\"}\n{\"text\": \"bad\",}\n{\"txt\": \"typo\"}\n{}\n",
        "turns.jsonl",
    )
    .unwrap_err();
    let p: Vec<String> = e
        .diagnostics()
        .unwrap()
        .problems
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(p.len(), 3, "{p:?}");
    assert!(
        p[0].contains("turns.jsonl:2:") && p[0].contains("malformed turn"),
        "{p:?}"
    );
    assert!(
        p[1].contains("turns.jsonl:3:") && p[1].contains("unknown field `txt`"),
        "{p:?}"
    );
    assert!(
        p[2].contains("turns.jsonl:4:1") && p[2].contains("needs `text`"),
        "{p:?}"
    );

    let e = replay("[[turn]]\ntext = \"a\"\nextra = 1\n", "turns.toml").unwrap_err();
    assert!(
        e.to_string()
            .contains("turns.toml:3:1: turn.extra: unknown field"),
        "{e}"
    );

    let e = replay("\n", "turns.jsonl").unwrap_err();
    assert!(e.to_string().contains("no turns"), "{e}");
}

#[test]
fn a_price_override_wins_and_an_unknown_model_has_no_cost() {
    let spec = parse(
        "kind = \"openai-chat\"\nbase_url = \"http://localhost:11434/v1\"\nmodel = \"llama3.1:8b\"\n",
    )
    .unwrap();
    let table = PriceTable::shipped().unwrap();
    let usage = Usage {
        input_tokens: 1000,
        cached_input_tokens: 0,
        output_tokens: 1000,
        reasoning_tokens: 0,
    };
    assert_eq!(
        table.cost(&spec.model, &usage),
        Cost::Unknown {
            model: "llama3.1:8b".into()
        }
    );
    let spec =
        parse("kind = \"openai-chat\"\nmodel = \"gpt-5\"\n[prices]\ninput = 10.0\noutput = 20.0\n")
            .unwrap();
    let table = spec.price_table().unwrap();
    match table.cost("gpt-5", &usage) {
        Cost::Usd { usd } => assert!((usd - 0.03).abs() < 1e-12, "{usd}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_example_provider_files_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("providers");
    let mut kinds = Vec::new();
    for name in [
        "openai.toml",
        "openai-compatible-ollama.toml",
        "anthropic.toml",
        "replay.toml",
    ] {
        let spec = ProviderSpec::load(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        kinds.push(spec.kind);
    }
    assert_eq!(
        kinds,
        vec![
            Kind::OpenAiResponses,
            Kind::OpenAiChat,
            Kind::Anthropic,
            Kind::Replay
        ]
    );
    let replay = ProviderSpec::load(&dir.join("replay.toml")).unwrap();
    assert_eq!(replay.recording.as_ref().unwrap().turns.len(), 3);
    let shipped = PriceTable::shipped().unwrap();
    for name in ["openai.toml", "anthropic.toml"] {
        let spec = ProviderSpec::load(&dir.join(name)).unwrap();
        assert!(
            shipped.lookup(&spec.model).is_some(),
            "{name}: no shipped price"
        );
    }
}
