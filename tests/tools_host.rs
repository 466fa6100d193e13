//! The tools in host mode (`--host`): a plain cgroup, no kernel scope. Every file access is
//! made by `bee __tool` or `/bin/sh` in a child, never by the test process.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bee::provider::ToolCall;
use bee::records::Enforcement;
use bee::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use bee::tools::{Registry, ToolLimits, ToolOutcome, ToolState};
use serde_json::{Value, json};

fn sandbox(ws: &Path) -> Sandbox {
    let mut config = SandboxConfig::new(SandboxMode::Host, ws);
    config.runner = Some(PathBuf::from(env!("CARGO_BIN_EXE_bee")));
    Sandbox::new(config).unwrap()
}

fn workspace() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn call_with(tools: &Registry, sb: &Sandbox, name: &str, args: &Value) -> ToolOutcome {
    let call = ToolCall {
        id: "call_1".to_owned(),
        name: name.to_owned(),
        arguments: args.to_string(),
    };
    tools.call(sb, &call)
}

fn call(sb: &Sandbox, name: &str, args: Value) -> ToolOutcome {
    call_with(&Registry::standard(ToolLimits::default()), sb, name, &args)
}

fn assert_state(o: &ToolOutcome, state: ToolState) {
    assert_eq!(o.state, state, "content: {}", o.content);
}

#[test]
fn host_mode_is_visible_on_the_sandbox_and_every_result() {
    let ws = workspace();
    let sb = sandbox(ws.path());
    assert_eq!(sb.enforcement(), Enforcement::Host);
    assert!(
        sb.enforcement()
            .describe()
            .contains("NO kernel enforcement")
    );
    assert!(sb.policy().is_none() && sb.runner_grant().is_none());
    let o = call(&sb, "list_dir", json!({}));
    assert_eq!(o.enforcement, Enforcement::Host);
    assert!(o.denials.is_empty());
    sb.finish().unwrap();
}

#[test]
fn read_file_numbers_lines_and_pages_with_offset_and_limit() {
    let ws = workspace();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    fs::write(ws.path().join("a.txt"), text).unwrap();
    let sb = sandbox(ws.path());
    let o = call(&sb, "read_file", json!({"path": "a.txt"}));
    assert_state(&o, ToolState::Completed);
    assert!(o.content.starts_with("     1\tline 1\n     2\tline 2\n"));
    assert!(!o.content.contains("truncated"));
    let o = call(
        &sb,
        "read_file",
        json!({"path": "a.txt", "offset": 4, "limit": 2}),
    );
    assert_state(&o, ToolState::Completed);
    assert_eq!(
        o.content,
        "     4\tline 4\n     5\tline 5\n\
         [truncated: showing lines 4–5 of 10; read on with offset=6]\n"
    );
    let o = call(&sb, "read_file", json!({"path": "a.txt", "offset": 11}));
    assert_state(&o, ToolState::Failed);
    assert!(o.content.contains("past the end"), "{}", o.content);
    let o = call(&sb, "read_file", json!({"path": "a.txt", "offset": 0}));
    assert_state(&o, ToolState::CouldNotRun);
}

#[test]
fn read_file_output_cap_cuts_with_a_note() {
    let ws = workspace();
    let text: String = (1..=500).map(|i| format!("line number {i}\n")).collect();
    fs::write(ws.path().join("big.txt"), text).unwrap();
    let sb = sandbox(ws.path());
    let tools = Registry::standard(ToolLimits {
        output_cap: 1024,
        ..ToolLimits::default()
    });
    let o = call_with(&tools, &sb, "read_file", &json!({"path": "big.txt"}));
    assert_state(&o, ToolState::Completed);
    assert!(o.content.len() < 1024 + 200, "{}", o.content.len());
    assert!(
        o.content.contains("[truncated: showing lines 1–"),
        "{}",
        o.content
    );
    assert!(o.content.contains("of 500; read on with offset="));
}

#[test]
fn read_file_missing_fails_and_binary_is_not_shown() {
    let ws = workspace();
    fs::write(ws.path().join("bin"), [0u8, 1, 2, 3]).unwrap();
    let sb = sandbox(ws.path());
    let o = call(&sb, "read_file", json!({"path": "nope.txt"}));
    assert_state(&o, ToolState::Failed);
    assert!(
        o.content
            .starts_with("failed: read `nope.txt`: No such file"),
        "{}",
        o.content
    );
    let o = call(&sb, "read_file", json!({"path": "bin"}));
    assert_state(&o, ToolState::Completed);
    assert!(o.content.contains("binary file (4 bytes)"));
}

#[test]
fn paths_outside_the_workspace_are_attempted_and_reported() {
    let ws = workspace();
    let other = workspace();
    fs::write(other.path().join("x.txt"), "outside\n").unwrap();
    let sb = sandbox(ws.path());
    let path = other.path().join("x.txt");
    let o = call(&sb, "read_file", json!({"path": path}));
    // Host mode enforces nothing, so the read succeeds; the answer says it was outside.
    assert_state(&o, ToolState::Completed);
    assert!(o.content.starts_with("note: `"), "{}", o.content);
    assert!(o.content.contains("is outside the workspace"));
    assert!(o.content.contains("1\toutside"));
    let rel = format!(
        "../{}/x.txt",
        other.path().file_name().unwrap().to_string_lossy()
    );
    let o = call(&sb, "read_file", json!({"path": rel}));
    assert_state(&o, ToolState::Completed);
    assert!(o.content.contains("is outside the workspace"));
}

#[test]
fn write_file_creates_parents_only_when_asked() {
    let ws = workspace();
    let sb = sandbox(ws.path());
    let o = call(
        &sb,
        "write_file",
        json!({"path": "new.txt", "content": "hi\n"}),
    );
    assert_state(&o, ToolState::Completed);
    assert_eq!(o.content, "created `new.txt` (3 bytes)");
    assert_eq!(
        fs::read_to_string(ws.path().join("new.txt")).unwrap(),
        "hi\n"
    );
    let o = call(
        &sb,
        "write_file",
        json!({"path": "new.txt", "content": "again"}),
    );
    assert_eq!(o.content, "replaced `new.txt` (5 bytes)");
    let o = call(
        &sb,
        "write_file",
        json!({"path": "d/e/f.txt", "content": "x"}),
    );
    assert_state(&o, ToolState::Failed);
    assert!(o.content.contains("create_dirs: true"), "{}", o.content);
    assert!(!ws.path().join("d").exists());
    let o = call(
        &sb,
        "write_file",
        json!({"path": "d/e/f.txt", "content": "x", "create_dirs": true}),
    );
    assert_state(&o, ToolState::Completed);
    assert_eq!(
        fs::read_to_string(ws.path().join("d/e/f.txt")).unwrap(),
        "x"
    );
}

#[test]
fn edit_file_replaces_a_unique_string() {
    let ws = workspace();
    fs::write(ws.path().join("f.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    let sb = sandbox(ws.path());
    let o = call(
        &sb,
        "edit_file",
        json!({"path": "f.rs", "old_string": "fn b", "new_string": "fn c"}),
    );
    assert_state(&o, ToolState::Completed);
    assert_eq!(o.content, "replaced 1 occurrence in `f.rs` (line 2)");
    assert_eq!(
        fs::read_to_string(ws.path().join("f.rs")).unwrap(),
        "fn a() {}\nfn c() {}\n"
    );
}

#[test]
fn edit_file_refuses_an_ambiguous_string_and_says_where() {
    let ws = workspace();
    let text = "x = 1\ny = 2\nx = 1\n";
    fs::write(ws.path().join("f.txt"), text).unwrap();
    let sb = sandbox(ws.path());
    let o = call(
        &sb,
        "edit_file",
        json!({"path": "f.txt", "old_string": "x = 1", "new_string": "x = 3"}),
    );
    assert_state(&o, ToolState::Failed);
    assert!(o.content.contains("occurs 2 times"), "{}", o.content);
    assert!(o.content.contains("lines 1, 3"), "{}", o.content);
    assert!(o.content.contains("replace_all"));
    assert_eq!(fs::read_to_string(ws.path().join("f.txt")).unwrap(), text);
    let o = call(
        &sb,
        "edit_file",
        json!({"path": "f.txt", "old_string": "x = 1", "new_string": "x = 3", "replace_all": true}),
    );
    assert_state(&o, ToolState::Completed);
    assert_eq!(o.content, "replaced 2 occurrences in `f.txt` (lines 1, 3)");
    assert_eq!(
        fs::read_to_string(ws.path().join("f.txt")).unwrap(),
        "x = 3\ny = 2\nx = 3\n"
    );
}

#[test]
fn edit_file_refuses_an_absent_string_and_bad_arguments() {
    let ws = workspace();
    fs::write(ws.path().join("f.txt"), "abc\n").unwrap();
    let sb = sandbox(ws.path());
    let o = call(
        &sb,
        "edit_file",
        json!({"path": "f.txt", "old_string": "zzz", "new_string": "y"}),
    );
    assert_state(&o, ToolState::Failed);
    assert!(
        o.content.contains("was not found in `f.txt`"),
        "{}",
        o.content
    );
    let o = call(
        &sb,
        "edit_file",
        json!({"path": "f.txt", "old_string": "", "new_string": "y"}),
    );
    assert_state(&o, ToolState::CouldNotRun);
    let o = call(
        &sb,
        "edit_file",
        json!({"path": "f.txt", "old_string": "abc"}),
    );
    assert_state(&o, ToolState::CouldNotRun);
    assert!(
        o.content.contains("missing field `new_string`"),
        "{}",
        o.content
    );
    assert_eq!(
        fs::read_to_string(ws.path().join("f.txt")).unwrap(),
        "abc\n"
    );
}

#[test]
fn list_dir_marks_directories_and_links() {
    let ws = workspace();
    fs::create_dir(ws.path().join("src")).unwrap();
    fs::write(ws.path().join("b.txt"), "").unwrap();
    std::os::unix::fs::symlink("b.txt", ws.path().join("link")).unwrap();
    let sb = sandbox(ws.path());
    let o = call(&sb, "list_dir", json!({"path": "."}));
    assert_state(&o, ToolState::Completed);
    assert_eq!(o.content, "b.txt\nlink@\nsrc/\n");
    let o = call(&sb, "list_dir", json!({"path": "missing"}));
    assert_state(&o, ToolState::Failed);
}

#[test]
fn glob_matches_relative_paths_and_honours_gitignore() {
    let ws = workspace();
    fs::create_dir_all(ws.path().join("src/a")).unwrap();
    fs::create_dir_all(ws.path().join("target")).unwrap();
    fs::write(ws.path().join("src/main.rs"), "").unwrap();
    fs::write(ws.path().join("src/a/mod.rs"), "").unwrap();
    fs::write(ws.path().join("src/notes.md"), "").unwrap();
    fs::write(ws.path().join("target/gen.rs"), "").unwrap();
    fs::write(ws.path().join(".gitignore"), "target/\n").unwrap();
    let sb = sandbox(ws.path());
    let o = call(&sb, "glob", json!({"pattern": "**/*.rs"}));
    assert_state(&o, ToolState::Completed);
    assert_eq!(o.content, "src/a/mod.rs\nsrc/main.rs\n");
    let o = call(&sb, "glob", json!({"pattern": "*.rs", "path": "src"}));
    assert_eq!(o.content, "src/main.rs\n");
    let o = call(&sb, "glob", json!({"pattern": "*.zig"}));
    assert_eq!(o.content, "no paths match `*.zig`\n");
    let o = call(&sb, "glob", json!({"pattern": "a/[b"}));
    assert_state(&o, ToolState::CouldNotRun);
}

#[test]
fn grep_prints_matches_with_context_and_filters_by_glob() {
    let ws = workspace();
    fs::create_dir(ws.path().join("src")).unwrap();
    fs::write(
        ws.path().join("src/lib.rs"),
        "use a;\nfn alpha() {}\nfn beta() {}\n// end\n",
    )
    .unwrap();
    fs::write(ws.path().join("README.md"), "alpha release\n").unwrap();
    let sb = sandbox(ws.path());
    let o = call(&sb, "grep", json!({"pattern": "fn al", "context": 1}));
    assert_state(&o, ToolState::Completed);
    assert_eq!(
        o.content,
        "src/lib.rs-1-use a;\nsrc/lib.rs:2:fn alpha() {}\nsrc/lib.rs-3-fn beta() {}\n"
    );
    let o = call(
        &sb,
        "grep",
        json!({"pattern": "ALPHA", "case_insensitive": true, "glob": "*.md"}),
    );
    assert_eq!(o.content, "README.md:1:alpha release\n");
    let o = call(
        &sb,
        "grep",
        json!({"pattern": "alpha", "path": "src/lib.rs"}),
    );
    assert_eq!(o.content, "src/lib.rs:2:fn alpha() {}\n");
    let o = call(&sb, "grep", json!({"pattern": "gamma"}));
    assert_state(&o, ToolState::Completed);
    assert!(
        o.content.starts_with("no matches for `gamma`"),
        "{}",
        o.content
    );
    let o = call(&sb, "grep", json!({"pattern": "(unclosed"}));
    assert_state(&o, ToolState::CouldNotRun);
}

#[test]
fn grep_separates_groups_that_do_not_touch() {
    let ws = workspace();
    fs::write(ws.path().join("t.txt"), "a\nx\nb\nx\nc\nd\ne\nf\nx\n").unwrap();
    let sb = sandbox(ws.path());
    let o = call(&sb, "grep", json!({"pattern": "^x$", "context": 1}));
    assert_state(&o, ToolState::Completed);
    assert_eq!(
        o.content,
        "t.txt-1-a\nt.txt:2:x\nt.txt-3-b\nt.txt:4:x\nt.txt-5-c\n--\nt.txt-8-f\nt.txt:9:x\n"
    );
    let o = call(&sb, "grep", json!({"pattern": "^x$"}));
    assert_eq!(o.content, "t.txt:2:x\nt.txt:4:x\nt.txt:9:x\n");
}

#[test]
fn grep_output_cap_cuts_with_a_note() {
    let ws = workspace();
    let text: String = (1..=400).map(|i| format!("match {i}\n")).collect();
    fs::write(ws.path().join("m.txt"), text).unwrap();
    let sb = sandbox(ws.path());
    let tools = Registry::standard(ToolLimits {
        output_cap: 512,
        ..ToolLimits::default()
    });
    let o = call_with(&tools, &sb, "grep", &json!({"pattern": "match"}));
    assert_state(&o, ToolState::Completed);
    assert!(
        o.content
            .contains("[truncated: the output limit was reached"),
        "{}",
        o.content
    );
    assert!(o.content.len() < 512 + 200);
}

#[test]
fn shell_completes_or_fails_by_exit_status() {
    let ws = workspace();
    fs::write(ws.path().join("f"), "content").unwrap();
    let sb = sandbox(ws.path());
    let o = call(&sb, "shell", json!({"command": "cat f; echo err >&2"}));
    assert_state(&o, ToolState::Completed);
    assert_eq!(o.content, "exit status 0\n[stdout]\ncontent\n[stderr]\nerr");
    let o = call(&sb, "shell", json!({"command": "exit 3"}));
    assert_state(&o, ToolState::Failed);
    assert_eq!(o.content, "failed: exit status 3\n(no output)");
    let o = call(&sb, "shell", json!({"command": "no-such-command-here"}));
    assert_state(&o, ToolState::Failed);
    assert!(o.content.contains("exit status 127"));
    let o = call(&sb, "shell", json!({"command": "true", "timeout_secs": 0}));
    assert_state(&o, ToolState::CouldNotRun);
    let o = call(&sb, "shell", json!({"cmd": "true"}));
    assert_state(&o, ToolState::CouldNotRun);
}

#[test]
fn shell_output_cap_cuts_with_a_note() {
    let ws = workspace();
    let sb = sandbox(ws.path());
    let tools = Registry::standard(ToolLimits {
        output_cap: 100,
        ..ToolLimits::default()
    });
    let o = call_with(&tools, &sb, "shell", &json!({"command": "seq 1 10000"}));
    assert_state(&o, ToolState::Completed);
    assert!(
        o.content
            .contains("[stdout truncated: showing the first 100 of 48894 bytes]"),
        "{}",
        o.content
    );
}

fn alive(pid: u32) -> bool {
    // A killed process whose parent is gone is reaped by init; a zombie counts as dead.
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn shell_timeout_kills_the_process_group() {
    let ws = workspace();
    let sb = sandbox(ws.path());
    let start = std::time::Instant::now();
    let o = call(
        &sb,
        "shell",
        json!({"command": "sleep 60 & echo $!; sleep 60", "timeout_secs": 1}),
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    // A timeout has one meaning for every tool: it started and did not finish: failed.
    assert_state(&o, ToolState::Failed);
    assert!(
        o.content
            .starts_with("failed: timed out after 1 s; its process group was killed"),
        "{}",
        o.content
    );
    let pid: u32 = o
        .content
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(!alive(pid), "background sleep {pid} survived");
}

#[test]
fn an_interrupted_shell_call_is_stopped_with_its_processes() {
    let ws = workspace();
    let sb = sandbox(ws.path());
    let marker = ws.path().join("pid");
    let call = ToolCall {
        id: "call_1".to_owned(),
        name: "shell".to_owned(),
        arguments: json!({"command": format!("echo $$ > {}; sleep 60", marker.display())})
            .to_string(),
    };
    let start = std::time::Instant::now();
    let stop = || start.elapsed() > Duration::from_millis(500);
    let o = Registry::standard(ToolLimits::default()).call_until(&sb, &call, &stop);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_state(&o, ToolState::Failed);
    assert_eq!(
        o.content,
        "failed: the command was interrupted; its processes were killed"
    );
    let pid: u32 = std::fs::read_to_string(&marker)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "the interrupted shell {pid} survived");
}

#[test]
fn background_processes_do_not_outlive_the_call() {
    let ws = workspace();
    let sb = sandbox(ws.path());
    let o = call(
        &sb,
        "shell",
        json!({"command": "setsid sleep 60 >/dev/null 2>&1 & echo $!"}),
    );
    assert_state(&o, ToolState::Completed);
    let pid: u32 = o
        .content
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(!alive(pid), "background sleep {pid} survived the call");
}

#[test]
fn bad_calls_could_not_run() {
    let ws = workspace();
    let sb = sandbox(ws.path());
    let tools = Registry::standard(ToolLimits::default());
    let bad_json = ToolCall {
        id: "c".to_owned(),
        name: "read_file".to_owned(),
        arguments: "{\"path\": ".to_owned(),
    };
    let o = tools.call(&sb, &bad_json);
    assert_state(&o, ToolState::CouldNotRun);
    assert!(o.content.contains("not valid JSON"));
    let o = call(&sb, "format_disk", json!({}));
    assert_state(&o, ToolState::CouldNotRun);
    assert!(o.content.contains("there is no tool `format_disk`"));
    let o = call(&sb, "read_file", json!({"path": "a", "colour": "red"}));
    assert_state(&o, ToolState::CouldNotRun);
    assert!(
        o.content.contains("unknown field `colour`"),
        "{}",
        o.content
    );
    let item = o.to_item("c");
    assert!(matches!(
        item,
        bee::provider::Item::ToolResult { is_error: true, .. }
    ));
}

#[test]
fn a_missing_runner_could_not_run() {
    let ws = workspace();
    let mut config = SandboxConfig::new(SandboxMode::Host, ws.path());
    config.runner = Some(ws.path().join("no-such-bee"));
    let sb = Sandbox::new(config).unwrap();
    let o = call(&sb, "list_dir", json!({}));
    assert_state(&o, ToolState::CouldNotRun);
    assert!(
        o.content
            .starts_with("could not run: the tool runner could not start"),
        "{}",
        o.content
    );
}

/// The directory below bee's cgroup parent whose inode is `id`, if any.
fn cgroup_dir(id: u64) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mount = mountinfo
        .lines()
        .find(|l| l.contains(" - cgroup2 "))
        .and_then(|l| l.split(' ').nth(4))
        .unwrap();
    fs::read_dir(Path::new(mount).join("bee"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| fs::metadata(p).is_ok_and(|m| m.ino() == id))
}

#[test]
fn finish_removes_the_cgroup() {
    let ws = workspace();
    let sb = sandbox(ws.path());
    let id = sb.cgroup_id();
    assert!(cgroup_dir(id).is_some());
    let spec = sb.command("/bin/sh").args(["-c", "sleep 60 &"]);
    let out = sb.run(&spec, Duration::from_secs(5), 1024).unwrap();
    assert!(out.status.success());
    assert_eq!(out.enforcement, Enforcement::Host);
    sb.finish().unwrap();
    assert!(cgroup_dir(id).is_none());
}

#[test]
fn drop_removes_the_cgroup() {
    let ws = workspace();
    let sb = sandbox(ws.path());
    let id = sb.cgroup_id();
    drop(sb);
    assert!(cgroup_dir(id).is_none());
}

#[test]
fn calls_get_the_configured_limits_and_variables() {
    let ws = workspace();
    let mut config = SandboxConfig::new(SandboxMode::Host, ws.path());
    config.runner = Some(PathBuf::from(env!("CARGO_BIN_EXE_bee")));
    config.rlimits.nofile = Some(64);
    config.env.push(("BEE_TOOL_TEST".into(), "set".into()));
    let sb = Sandbox::new(config).unwrap();
    let o = call(
        &sb,
        "shell",
        json!({"command": "echo $BEE_TOOL_TEST; ulimit -n; pwd"}),
    );
    assert_state(&o, ToolState::Completed);
    let cwd = fs::canonicalize(ws.path()).unwrap();
    assert_eq!(
        o.content,
        format!("exit status 0\n[stdout]\nset\n64\n{}", cwd.display())
    );
}

#[test]
fn a_sandbox_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Sandbox>();
    shared::<Registry>();
}

#[test]
fn a_file_tool_that_runs_out_of_time_failed() {
    let ws = workspace();
    // Opening a FIFO that no one writes blocks the runner until it is killed, so the timeout
    // is what ends the call (a zero timeout would race a fast runner).
    let fifo = ws.path().join("pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo(3) reads a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let sb = sandbox(ws.path());
    let tools = Registry::standard(ToolLimits {
        file_timeout: Duration::from_secs(1),
        ..ToolLimits::default()
    });
    let o = call_with(&tools, &sb, "read_file", &json!({"path": "pipe"}));
    assert_state(&o, ToolState::Failed);
    assert_eq!(
        o.content,
        "failed: `read_file` timed out after 1 s and was killed"
    );
}

#[test]
fn a_failure_outside_the_workspace_is_noted_after_the_error() {
    let ws = workspace();
    let other = workspace();
    let sb = sandbox(ws.path());
    let path = other.path().join("missing.txt");
    let o = call(&sb, "read_file", json!({"path": path}));
    assert_state(&o, ToolState::Failed);
    let mut lines = o.content.lines();
    assert!(
        lines.next().unwrap().starts_with("failed: read `"),
        "{}",
        o.content
    );
    assert!(
        lines.next().unwrap().starts_with("note: `"),
        "{}",
        o.content
    );
}
