//! The tool definitions the model is given, and the runner's JSON protocol as `bee __tool`
//! speaks it.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::io::Write as _;
use std::process::{Command, Stdio};

use bee::provider::ToolDef;
use bee::tools::{RUNNER_TOOLS, Registry, RunnerResponse, SHELL_TOOL, ToolLimits, ToolState};
use serde_json::{Value, json};

#[test]
fn every_tool_has_an_object_schema_whose_required_fields_exist() {
    let defs = Registry::standard(ToolLimits::default()).definitions();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    let mut expected: Vec<&str> = RUNNER_TOOLS.to_vec();
    expected.push(SHELL_TOOL);
    // The review tools a build selects, after the built-in ones; none by default.
    let review: Vec<&str> = vec![
        #[cfg(feature = "astgrep")]
        "ast_grep",
        #[cfg(feature = "gitlog")]
        "git_log",
        #[cfg(feature = "cvss")]
        "cvss",
    ];
    expected.extend(review);
    assert_eq!(names, expected);
    for def in &defs {
        assert!(!def.description.is_empty(), "{}", def.name);
        let p = &def.parameters;
        assert_eq!(p["type"], "object", "{}", def.name);
        assert_eq!(p["additionalProperties"], false, "{}", def.name);
        let props = p["properties"].as_object().unwrap();
        for (key, prop) in props {
            assert!(prop["type"].is_string(), "{}.{key}", def.name);
            assert!(prop["description"].is_string(), "{}.{key}", def.name);
        }
        for req in p["required"].as_array().into_iter().flatten() {
            assert!(
                props.contains_key(req.as_str().unwrap()),
                "{}: {req}",
                def.name
            );
        }
        let text = serde_json::to_string(def).unwrap();
        let back: ToolDef = serde_json::from_str(&text).unwrap();
        assert_eq!(&back, def);
    }
}

#[test]
fn required_fields_are_the_ones_without_defaults() {
    let required = |name: &str| -> Vec<String> {
        let defs = Registry::standard(ToolLimits::default()).definitions();
        let def = defs.iter().find(|d| d.name == name).unwrap();
        def.parameters["required"]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    assert_eq!(required("read_file"), ["path"]);
    assert_eq!(required("write_file"), ["path", "content"]);
    assert_eq!(required("edit_file"), ["path", "old_string", "new_string"]);
    assert!(required("list_dir").is_empty());
    assert_eq!(required("glob"), ["pattern"]);
    assert_eq!(required("grep"), ["pattern"]);
    assert_eq!(required("shell"), ["command"]);
}

fn runner(tool: &str, input: &[u8]) -> (i32, RunnerResponse) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bee"))
        .args(["__tool", tool])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    let resp = serde_json::from_slice(&out.stdout).unwrap();
    (out.status.code().unwrap_or(-1), resp)
}

#[test]
fn the_runner_answers_malformed_json_with_could_not_run() {
    let (code, resp) = runner("read_file", b"{not json");
    assert_eq!(code, 0);
    assert_eq!(resp.state, ToolState::CouldNotRun);
    assert!(
        resp.content.contains("malformed request"),
        "{}",
        resp.content
    );
    let (_, resp) = runner("read_file", b"");
    assert_eq!(resp.state, ToolState::CouldNotRun);
}

#[test]
fn the_runner_refuses_unknown_tools_and_relative_workspaces() {
    let req = json!({"workspace": "/tmp", "output_cap": 1000, "args": {}});
    let (_, resp) = runner("shell", req.to_string().as_bytes());
    assert_eq!(resp.state, ToolState::CouldNotRun);
    assert!(resp.content.contains("no tool `shell`"));
    let req = json!({"workspace": "tmp", "output_cap": 1000, "args": {}});
    let (_, resp) = runner("list_dir", req.to_string().as_bytes());
    assert_eq!(resp.state, ToolState::CouldNotRun);
    assert!(resp.content.contains("not absolute"));
}

#[test]
fn the_runner_reports_the_errno_of_a_failed_operation() {
    let ws = tempfile::tempdir().unwrap();
    let req = json!({"workspace": ws.path(), "output_cap": 1000, "args": {"path": "missing"}});
    let (_, resp) = runner("read_file", req.to_string().as_bytes());
    assert_eq!(resp.state, ToolState::Failed);
    assert_eq!(resp.errno, Some(libc::ENOENT));
}

#[test]
fn states_serialise_in_snake_case() {
    let states: Vec<Value> = [
        ToolState::Completed,
        ToolState::CouldNotRun,
        ToolState::Failed,
    ]
    .iter()
    .map(|s| serde_json::to_value(s).unwrap())
    .collect();
    assert_eq!(
        states,
        [json!("completed"), json!("could_not_run"), json!("failed")]
    );
    assert_eq!(ToolState::CouldNotRun.as_str(), "could_not_run");
}
