//! Every provider file and replay recording shown in README.md and docs/*.md, and every
//! recording shipped in `providers/`, through the loaders a session uses — and each recorded
//! tool call checked against the schema of the tool it calls, so an example a reader copies
//! runs (a call the tool would refuse, like `shell` with `cmd`, fails here).

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::path::{Path, PathBuf};

use bee::panels::{Outbox, RenderTool, Surface};
use bee::provider::replay::{Recording, Turn};
use bee::provider::{ProviderSpec, ToolDef};
use bee::tools::{Registry, Tool, ToolLimits};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One fenced block: its file, the line of its opening fence, its language and its text.
struct Block {
    file: String,
    line: usize,
    lang: String,
    text: String,
}

/// Every fenced block of README.md and docs/*.md.
fn blocks() -> Vec<Block> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        let mut open: Option<Block> = None;
        for (i, line) in text.lines().enumerate() {
            let fence = line.trim_start().strip_prefix("```");
            match (open.take(), fence) {
                (None, Some(lang)) => {
                    open = Some(Block {
                        file: name.clone(),
                        line: i + 1,
                        lang: lang.trim().to_owned(),
                        text: String::new(),
                    });
                }
                (Some(b), Some(_)) => out.push(b),
                (Some(mut b), None) => {
                    b.text.push_str(line.trim_start_matches("  "));
                    b.text.push('\n');
                    open = Some(b);
                }
                (None, None) => {}
            }
        }
    }
    out
}

/// The tools a recorded call may name: the built-in ones and `render`.
fn tools() -> Vec<ToolDef> {
    let mut defs = Registry::standard(ToolLimits::default()).definitions();
    defs.push(RenderTool::new(Surface::Inline, Outbox::default()).definition());
    defs
}

/// Each recorded call names a tool and gives arguments its schema accepts: an object with
/// every required key, no key the schema lacks, and strings where it wants strings.
fn check_calls(what: &str, turns: &[Turn]) {
    let defs = tools();
    for (n, turn) in turns.iter().enumerate() {
        for call in &turn.tool_calls {
            let at = format!("{what}, turn {}: {}", n + 1, call.name);
            let def = defs
                .iter()
                .find(|d| d.name == call.name)
                .unwrap_or_else(|| panic!("{at}: no such tool"));
            let args = call
                .arguments
                .as_object()
                .unwrap_or_else(|| panic!("{at}: the arguments are not an object"));
            let props = def.parameters["properties"].as_object().unwrap();
            for req in def.parameters["required"].as_array().into_iter().flatten() {
                let req = req.as_str().unwrap();
                assert!(args.contains_key(req), "{at}: missing `{req}` in {args:?}");
            }
            for (key, value) in args {
                let prop = props
                    .get(key)
                    .unwrap_or_else(|| panic!("{at}: `{key}` is no argument of the tool"));
                if prop["type"] == "string" {
                    assert!(value.is_string(), "{at}: `{key}` must be a string");
                }
            }
        }
    }
}

fn is_recording_line(line: &str) -> bool {
    let line = line.trim();
    ["{\"text\"", "{\"tool_calls\"", "{\"refusal\""]
        .iter()
        .any(|p| line.starts_with(p))
}

#[test]
fn every_documented_provider_file_and_recording_is_accepted() {
    let (mut providers, mut recordings) = (0, 0);
    for b in blocks() {
        let what = format!("{}:{} ({})", b.file, b.line, b.lang);
        let top_kind = b.text.lines().any(|l| l.starts_with("kind ="));
        if b.lang == "toml" && top_kind {
            // A provider file, in a directory of its own; a replay one gets a recording.
            let dir = tempfile::tempdir().unwrap();
            let table: toml::Table =
                toml::from_str(&b.text).unwrap_or_else(|e| panic!("{what}: {e}"));
            if let Some(Value::String(file)) =
                table.get("file").map(|v| serde_json::to_value(v).unwrap())
            {
                std::fs::write(dir.path().join(file), "{\"text\": \"hi\"}\n").unwrap();
            }
            let path = dir.path().join("provider.toml");
            std::fs::write(&path, &b.text).unwrap();
            if let Err(e) = ProviderSpec::load(&path) {
                panic!("{what}: {e}");
            }
            providers += 1;
        } else if b.lang == "toml" && b.text.contains("[[turn]]") {
            let r = Recording::parse(Path::new("turns.toml"), &b.text, true)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            check_calls(&what, &r.turns);
            recordings += 1;
        } else if b.text.lines().any(is_recording_line) {
            let r = Recording::parse(Path::new("turns.jsonl"), &b.text, false)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            check_calls(&what, &r.turns);
            recordings += 1;
        }
    }
    // The extraction finds what docs/providers.md shows: a provider file, a recording in
    // each form.
    assert!(providers >= 1, "no provider file found in the docs");
    assert!(recordings >= 2, "no recordings found in the docs");
}

#[test]
fn every_shipped_provider_file_loads_and_its_recording_calls_tools_as_they_accept() {
    let dir = root().join("providers");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    names.sort();
    let mut replays = 0;
    for path in names {
        let spec = ProviderSpec::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Some(r) = &spec.recording {
            check_calls(&r.path.display().to_string(), &r.turns);
            replays += 1;
        }
    }
    assert!(replays >= 2, "replay.toml and repl.toml");
}

/// The failure this test exists for: `shell` called with `cmd` is refused.
#[test]
fn a_call_the_tool_would_refuse_is_caught() {
    let r = Recording::parse(
        Path::new("t.jsonl"),
        "{\"tool_calls\": [{\"name\": \"shell\", \"arguments\": {\"cmd\": \"ls\"}}]}\n",
        false,
    )
    .unwrap();
    let caught = std::panic::catch_unwind(|| check_calls("t.jsonl", &r.turns));
    assert!(caught.is_err());
}
