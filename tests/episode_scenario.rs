//! Scenario files: one episode, many with shared defaults, a directory of files, and errors
//! that name file, line, column and key.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use bee::config::FileError;
use bee::scenario::{Scenario, WorkspaceMode};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

fn problems(e: &FileError) -> Vec<String> {
    e.diagnostics()
        .unwrap()
        .problems
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn one_episode_from_top_level_keys_with_paths_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s/TASK.md", "fix it\n");
    let p = write(
        dir.path(),
        "s/demo.toml",
        r#"
prompt_file = "TASK.md"
workspace = "ws"
workspace_mode = "copy"
policy = "../policy.toml"
max_output_tokens = 1000

[limits]
turns = 3
tokens = 1000
wall_seconds = 60
cost_usd = 0.5

[success_check]
command = "cargo test --offline"
"#,
    );
    let s = Scenario::load(&p).unwrap();
    assert_eq!(s.episodes.len(), 1);
    let e = &s.episodes[0];
    assert_eq!(e.id, "demo");
    assert_eq!(e.scenario, "demo");
    assert_eq!(e.prompt, "fix it\n");
    assert_eq!(e.workspace, dir.path().join("s/ws"));
    assert_eq!(e.workspace_mode, WorkspaceMode::Copy);
    assert_eq!(
        e.policy.as_deref(),
        Some(dir.path().join("s/../policy.toml").as_path())
    );
    assert_eq!(e.limits.turns, Some(3));
    assert_eq!(e.limits.cost_usd, Some(0.5));
    assert_eq!(e.max_output_tokens, Some(1000));
    let check = e.success_check.as_ref().unwrap();
    assert_eq!(check.command, "cargo test --offline");
    assert_eq!(check.timeout, Duration::from_secs(600));
}

#[test]
fn episodes_share_the_top_level_defaults_and_override_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "batch.toml",
        r#"
workspace = "ws"
workspace_mode = "in-place"
prompt = "default task"
[limits]
turns = 5

[[episode]]
name = "a"

[[episode]]
name = "b"
prompt = "other task"
workspace_mode = "copy"
repeat = 2
[episode.limits]
turns = 9
"#,
    );
    let s = Scenario::load(&p).unwrap();
    let ids: Vec<&str> = s.episodes.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["a", "b-1", "b-2"]);
    assert_eq!(s.episodes[0].prompt, "default task");
    assert_eq!(s.episodes[0].workspace_mode, WorkspaceMode::InPlace);
    assert_eq!(s.episodes[0].limits.turns, Some(5));
    assert_eq!(s.episodes[1].prompt, "other task");
    assert_eq!(s.episodes[1].workspace_mode, WorkspaceMode::Copy);
    assert_eq!(s.episodes[2].limits.turns, Some(9));
    assert_eq!(s.episodes[2].scenario, "b");
}

#[test]
fn a_scenarios_directory_inherits_the_pointing_files_keys() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "cases/one.toml", "prompt = \"one\"\n");
    write(
        dir.path(),
        "cases/two.toml",
        "prompt = \"two\"\nworkspace = \"other\"\n",
    );
    write(dir.path(), "cases/ignored.txt", "not a scenario");
    let p = write(
        dir.path(),
        "all.toml",
        "scenarios = \"cases\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n",
    );
    let s = Scenario::load(&p).unwrap();
    let ids: Vec<&str> = s.episodes.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["one", "two"]);
    assert_eq!(s.episodes[0].workspace, dir.path().join("ws"));
    // A path is relative to the file that holds it.
    assert_eq!(s.episodes[1].workspace, dir.path().join("cases/other"));

    // Or the directory itself.
    let direct = Scenario::load(&dir.path().join("cases"));
    let e = direct.unwrap_err();
    assert!(problems(&e)[0].contains("workspace"), "{:?}", problems(&e));
}

#[test]
fn an_unknown_key_names_file_line_column_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "bad.toml",
        "prompt = \"x\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n\n[limits]\nturns = 3\nmax_turns = 4\n",
    );
    let e = Scenario::load(&p).unwrap_err();
    let d = &e.diagnostics().unwrap().problems[0];
    assert_eq!((d.line, d.column), (7, 1));
    assert_eq!(d.key.as_deref(), Some("limits.max_turns"));
    let text = d.to_string();
    assert!(
        text.starts_with(&format!("{}:7:1: limits.max_turns", p.display())),
        "{text}"
    );
    assert!(d.help.as_deref().unwrap().contains("turns"));
}

#[test]
fn an_unknown_key_in_an_episode_table_is_located_too() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "bad.toml",
        "workspace = \"ws\"\nworkspace_mode = \"copy\"\n[[episode]]\nname = \"a\"\nprompt = \"x\"\nprompts = \"y\"\n",
    );
    let e = Scenario::load(&p).unwrap_err();
    let d = &e.diagnostics().unwrap().problems[0];
    assert_eq!(d.line, 6);
    assert_eq!(d.key.as_deref(), Some("episode.prompts"));
}

#[test]
fn missing_and_invalid_values_are_each_reported() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "bad.toml",
        "workspace = \"ws\"\nworkspace_mode = \"clone\"\n[limits]\nturns = 0\ncost_usd = -1.0\n",
    );
    let e = Scenario::load(&p).unwrap_err();
    let all = problems(&e).join("\n");
    assert!(
        all.contains(":2:18: workspace_mode: unknown workspace mode \"clone\""),
        "{all}"
    );
    assert!(all.contains(":4:9: limits.turns"), "{all}");
    assert!(all.contains(":5:12: limits.cost_usd"), "{all}");
    assert!(all.contains("prompt"), "{all}");
}

#[test]
fn workspace_mode_must_be_explicit() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "s.toml", "prompt = \"x\"\nworkspace = \"ws\"\n");
    let e = Scenario::load(&p).unwrap_err();
    let d = &e.diagnostics().unwrap().problems[0];
    assert_eq!(d.key.as_deref(), Some("workspace_mode"));
    assert!(d.help.as_deref().unwrap().contains("in-place"));
}

#[test]
fn several_unnamed_episodes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "s.toml",
        "prompt = \"x\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n[[episode]]\n[[episode]]\nname = \"b\"\n",
    );
    let e = Scenario::load(&p).unwrap_err();
    let d = &e.diagnostics().unwrap().problems[0];
    assert_eq!(d.key.as_deref(), Some("episode[0].name"));
    assert_eq!(d.line, 4);
}

#[test]
fn prompt_and_prompt_file_exclude_each_other_and_a_missing_prompt_file_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "s.toml",
        "prompt = \"x\"\nprompt_file = \"T.md\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n",
    );
    let all = problems(&Scenario::load(&p).unwrap_err()).join("\n");
    assert!(all.contains("both `prompt` and `prompt_file`"), "{all}");

    let p = write(
        dir.path(),
        "t.toml",
        "prompt_file = \"missing.md\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n",
    );
    let all = problems(&Scenario::load(&p).unwrap_err()).join("\n");
    assert!(all.contains(":1:15: prompt_file: cannot read"), "{all}");
}

#[test]
fn duplicate_episode_names_and_bad_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "s.toml",
        "prompt = \"x\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n[[episode]]\nname = \"a\"\n[[episode]]\nname = \"a\"\n",
    );
    let all = problems(&Scenario::load(&p).unwrap_err()).join("\n");
    assert!(all.contains("two episodes are named \"a\""), "{all}");

    let p = write(
        dir.path(),
        "u.toml",
        "name = \"a/b\"\nprompt = \"x\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n",
    );
    let all = problems(&Scenario::load(&p).unwrap_err()).join("\n");
    assert!(all.contains(":1:8: name"), "{all}");
}

#[test]
fn a_missing_scenario_file_is_a_read_error() {
    let e = Scenario::load(Path::new("/nonexistent/scenario.toml")).unwrap_err();
    assert!(matches!(e, FileError::Read { .. }));
}

#[test]
fn the_demo_scenario_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let s = Scenario::load(&root.join("examples/demo/scenario.toml")).unwrap();
    assert_eq!(s.episodes.len(), 1);
    let e = &s.episodes[0];
    assert_eq!(e.id, "demo-roman");
    assert_eq!(e.workspace_mode, WorkspaceMode::Copy);
    assert!(e.workspace.join("Cargo.toml").is_file());
    assert!(e.policy.as_ref().unwrap().is_file());
    assert_eq!(
        e.success_check.as_ref().unwrap().command,
        "cargo test --offline"
    );
}
