//! `bee run` through `run_with`: exit statuses, concurrency and isolation, configuration
//! precedence, host mode and progress output, with a scripted sandbox.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::io::Write;

mod support;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::Buf;

use bee::app::Exit;
use bee::app::enforcement::Refusal;
use bee::app::run::{FactoryFn, RunContext, SandboxFactory, parse_args, run_with, sandbox_factory};
use bee::config::{EngineChoice, Env, ServiceChoice};
use bee::episode::{
    Bounds, ExecutorError, Interrupt, ScriptedExecutor, ToolExecution, ToolExecutor, completed,
};
use bee::provider::{ErrorCategory, ToolCall, ToolDef};
use bee::records::{
    Enforcement, EventBody, ExitStatus, Outcome, RunSummary, ToolState, read_transcript,
};
use bee::tools::Registry;
use bee_core::CompiledPolicy;

/// A project directory: a workspace, a policy, a provider with a recording, a scenario.
struct Project {
    dir: tempfile::TempDir,
}

const TOOL_TURN: &str = r#"{"text": "look", "tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}], "usage": {"input_tokens": 100, "output_tokens": 10}}"#;
const DONE: &str = r#"{"text": "done", "usage": {"input_tokens": 200, "output_tokens": 20}}"#;

impl Project {
    fn new(scenario: &str, recording: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("ws/src")).unwrap();
        std::fs::write(p.join("ws/seed.txt"), "seed\n").unwrap();
        std::fs::create_dir_all(p.join("home")).unwrap();
        std::fs::write(
            p.join("policy.toml"),
            "version = 1\n[fs]\nread = [\"./**\"]\nwrite = [\"./src/**\"]\n",
        )
        .unwrap();
        std::fs::write(
            p.join("provider.toml"),
            "kind = \"replay\"\nfile = \"rec.jsonl\"\nmodel = \"m\"\n[prices]\ninput = 1.0\noutput = 1.0\n",
        )
        .unwrap();
        std::fs::write(p.join("rec.jsonl"), recording.join("\n")).unwrap();
        std::fs::write(p.join("scenario.toml"), scenario).unwrap();
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn env(&self) -> Env {
        Env {
            cwd: self.path().to_owned(),
            home: Some(self.path().join("home")),
            xdg_config_home: None,
        }
    }

    fn records(&self) -> PathBuf {
        self.path().join(".bee/records")
    }

    /// The transcripts of the (only) run.
    fn run_dir(&self) -> PathBuf {
        let mut runs: Vec<PathBuf> = std::fs::read_dir(self.records())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        runs.pop().unwrap()
    }

    fn has_runs(&self) -> bool {
        std::fs::read_dir(self.records())
            .map(|d| d.filter_map(Result::ok).any(|e| e.path().is_dir()))
            .unwrap_or(false)
    }
}

const SCENARIO: &str = r#"
prompt = "fix it"
workspace = "ws"
workspace_mode = "copy"
policy = "policy.toml"
"#;

/// A sandbox whose executors append each call to `calls.log` in their own workspace and
/// answer with the workspace's path.
#[derive(Default)]
struct Fake {
    host: bool,
    workspaces: Mutex<Vec<PathBuf>>,
    policies: Mutex<Vec<Option<PathBuf>>>,
    check_fails: bool,
    delay: Duration,
    running: Arc<AtomicUsize>,
    max_running: Arc<AtomicUsize>,
}

struct WorkspaceExec {
    ws: PathBuf,
    inner: ScriptedExecutor,
    delay: Duration,
    running: Arc<AtomicUsize>,
    max_running: Arc<AtomicUsize>,
}

impl ToolExecutor for WorkspaceExec {
    fn definitions(&self) -> Vec<ToolDef> {
        self.inner.definitions()
    }
    fn call(&self, call: &ToolCall, bounds: &Bounds) -> ToolExecution {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(now, Ordering::SeqCst);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.ws.join("calls.log"))
            .unwrap();
        writeln!(f, "{}", call.id).unwrap();
        let end = std::time::Instant::now() + self.delay;
        while std::time::Instant::now() < end && !bounds.interrupt.is_raised() {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.running.fetch_sub(1, Ordering::SeqCst);
        completed(&format!("workspace {}", self.ws.display()))
    }
    fn check(&self, command: &str, bounds: &Bounds) -> ToolExecution {
        self.inner.check(command, bounds)
    }
    fn enforcement(&self) -> Enforcement {
        self.inner.enforcement()
    }
}

struct FakeRef(Arc<Fake>);

impl SandboxFactory for FakeRef {
    fn enforcement(&self) -> Enforcement {
        if self.0.host {
            Enforcement::Host
        } else {
            Enforcement::Kernel
        }
    }
    fn executor(
        &self,
        workspace: &Path,
        policy: Option<CompiledPolicy>,
        _tools: &Arc<Registry>,
    ) -> Result<Box<dyn ToolExecutor>, ExecutorError> {
        let me = &self.0;
        me.workspaces.lock().unwrap().push(workspace.to_owned());
        me.policies
            .lock()
            .unwrap()
            .push(policy.map(|p| PathBuf::from(p.source)));
        let mut inner = ScriptedExecutor::new(&["shell"], SandboxFactory::enforcement(self));
        if me.check_fails {
            inner = inner.check_answer(ToolExecution {
                state: ToolState::Completed,
                content: "1 failed".to_owned(),
                exit: Some(ExitStatus::Code(101)),
                denials: vec![],
                duration: Duration::ZERO,
                subagent: None,
                lost_records: 0,
            });
        }
        Ok(Box::new(WorkspaceExec {
            ws: workspace.to_owned(),
            inner,
            delay: me.delay,
            running: Arc::clone(&me.running),
            max_running: Arc::clone(&me.max_running),
        }))
    }
}

struct Outcome_ {
    status: Exit,
    out: String,
    err: String,
}

fn run(project: &Project, fake: &Arc<Fake>, args: &[&str], interrupt: Interrupt) -> Outcome_ {
    let mut argv = vec!["--scenario", "scenario.toml", "--provider", "provider.toml"];
    argv.extend_from_slice(args);
    let args = parse_args(argv).unwrap();
    let out = Buf::default();
    let err = Buf::default();
    let f = Arc::clone(fake);
    let factory = move |e: Enforcement,
                        _: EngineChoice,
                        _: ServiceChoice,
                        _: &[&CompiledPolicy]|
          -> Result<Box<dyn SandboxFactory>, Refusal> {
        let want = if f.host {
            Enforcement::Host
        } else {
            Enforcement::Kernel
        };
        assert_eq!(e, want);
        Ok(Box::new(FakeRef(Arc::clone(&f))))
    };
    let temp = project.path().join("tmp");
    std::fs::create_dir_all(&temp).unwrap();
    let status = run_with(
        &args,
        RunContext {
            env: project.env(),
            factory: &factory,
            out: Box::new(out.clone()),
            err: Box::new(err.clone()),
            terminal: false,
            interrupt,
            temp_dir: temp,
        },
    );
    Outcome_ {
        status,
        out: out.text(),
        err: err.text(),
    }
}

fn go(project: &Project, args: &[&str]) -> Outcome_ {
    run(project, &Arc::new(Fake::default()), args, Interrupt::new())
}

#[test]
fn all_passed_exits_0_and_writes_summary_store_and_one_line_per_event() {
    let p = Project::new(SCENARIO, &[TOOL_TURN, DONE]);
    let r = go(&p, &[]);
    assert_eq!(r.status, Exit::Ok, "{}", r.err);
    assert_eq!(r.status.code(), 0);
    let run_dir = p.run_dir();
    let summary = RunSummary::read(&run_dir.join("summary.json")).unwrap();
    assert!(summary.complete);
    assert_eq!(summary.episodes[0].outcome, Some(Outcome::Passed));
    assert!(p.records().join("metrics.sqlite").is_file());
    let lines: Vec<&str> = r.out.lines().collect();
    assert!(
        lines[0].starts_with("scenario   1 episode_started"),
        "{}",
        r.out
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("tool_call") && l.contains("shell"))
    );
    assert!(
        lines.last().unwrap().contains("1 of 1 episode(s) passed"),
        "{}",
        r.out
    );
    // The workspace copy was removed at the end.
    assert_eq!(std::fs::read_dir(p.path().join("tmp")).unwrap().count(), 0);
}

#[test]
fn a_failed_success_check_exits_1() {
    let p = Project::new(
        &format!("{SCENARIO}\n[success_check]\ncommand = \"make test\"\n"),
        &[DONE],
    );
    let fake = Arc::new(Fake {
        check_fails: true,
        ..Fake::default()
    });
    let r = run(&p, &fake, &[], Interrupt::new());
    assert_eq!(r.status, Exit::Failed);
    assert_eq!(r.status.code(), 1);
}

#[test]
fn a_limit_exits_3() {
    let p = Project::new(SCENARIO, &[TOOL_TURN, TOOL_TURN, DONE]);
    let r = go(&p, &["--max-turns", "1"]);
    assert_eq!(r.status, Exit::Limit);
    assert_eq!(r.status.code(), 3);
    assert!(r.out.contains("limit_hit turns"), "{}", r.out);
}

#[test]
fn a_provider_error_mid_episode_exits_by_its_category_with_the_transcript_finished() {
    // A recording that runs out is a protocol error: the answer bee needed never came.
    let p = Project::new(SCENARIO, &[TOOL_TURN]);
    let r = go(&p, &[]);
    assert_eq!(r.status, Exit::Provider(ErrorCategory::Protocol));
    assert_eq!(r.status.code(), 76);
    let run_dir = p.run_dir();
    let t = read_transcript(&run_dir.join("scenario.jsonl")).unwrap();
    let last = &t.events.last().unwrap().body;
    assert!(matches!(last, EventBody::EpisodeFinished(f) if f.outcome == Outcome::ProviderError));
}

#[test]
fn a_refusal_exits_2_and_is_shown_as_a_refusal() {
    let refusal = r#"{"refusal": "I can't help with that.", "usage": {"input_tokens": 50, "output_tokens": 8}}"#;
    let p = Project::new(SCENARIO, &[refusal]);
    let r = go(&p, &[]);
    assert_eq!(r.status, Exit::ModelRefused);
    assert_eq!(r.status.code(), 2);
    assert!(
        r.out
            .contains("stop refusal; refused: I can't help with that."),
        "{}",
        r.out
    );
    assert!(r.out.contains("  refused  "), "{}", r.out);
    let t = read_transcript(&p.run_dir().join("scenario.jsonl")).unwrap();
    assert!(matches!(&t.events.last().unwrap().body,
        EventBody::EpisodeFinished(f) if f.outcome == Outcome::Refused));
    // A refusal is not assistant text.
    assert!(
        !t.events
            .iter()
            .any(|e| matches!(&e.body, EventBody::Message(m) if m.text.contains("help")))
    );
}

#[test]
fn an_answer_cut_at_its_output_limit_exits_3_and_runs_none_of_its_calls() {
    let cut = r#"{"text": "writing", "tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}], "stop": "max_tokens", "usage": {"input_tokens": 100, "output_tokens": 64}}"#;
    let p = Project::new(SCENARIO, &[cut, DONE]);
    let r = go(&p, &[]);
    assert_eq!(r.status, Exit::Limit);
    assert_eq!(r.status.code(), 3);
    assert!(r.out.contains("limit_hit max_output_tokens"), "{}", r.out);
    let t = read_transcript(&p.run_dir().join("scenario.jsonl")).unwrap();
    let results: Vec<_> = t
        .events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolResult(res) => Some(res),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].state, ToolState::CouldNotRun);
    assert!(
        results[0].output.starts_with("not run: "),
        "{}",
        results[0].output
    );
}

#[test]
fn an_unknown_disabled_tool_is_an_invalid_configuration() {
    let p = Project::new(SCENARIO, &[DONE]);
    std::fs::write(
        p.path().join("bee.toml"),
        "[tools]\ndisabled = [\"shel\"]\n",
    )
    .unwrap();
    let r = go(&p, &["--config", "bee.toml"]);
    assert_eq!(r.status, Exit::DataErr);
    assert!(
        r.err.contains("tools.disabled: there is no tool `shel`"),
        "{}",
        r.err
    );
    assert!(r.err.contains("bee.toml:2"), "{}", r.err);
    assert!(!p.has_runs());
}

#[test]
fn a_missing_api_key_exits_77_before_any_episode() {
    let p = Project::new(SCENARIO, &[DONE]);
    std::fs::write(
        p.path().join("provider.toml"),
        "kind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\napi_key_env = \"BEE_TEST_KEY_THAT_IS_NEVER_SET\"\n",
    )
    .unwrap();
    let r = go(&p, &[]);
    assert_eq!(r.status, Exit::Auth);
    assert_eq!(r.status.code(), 77);
    assert!(
        r.err.contains("BEE_TEST_KEY_THAT_IS_NEVER_SET"),
        "{}",
        r.err
    );
    assert!(!p.has_runs());
}

#[test]
fn enforcement_unavailable_exits_69_before_any_model_call() {
    let p = Project::new(SCENARIO, &[DONE]);
    // The BPF LSM named: this host runs the Landlock engine, which `auto` would take.
    let bpf_lsm =
        |e: Enforcement, _: EngineChoice, s: ServiceChoice, policies: &[&CompiledPolicy]| {
            sandbox_factory(e, EngineChoice::BpfLsm, s, policies)
        };
    let (status, text) = run_with_factory(&p, &bpf_lsm);
    assert_eq!(status, Exit::Unavailable);
    assert_eq!(status.code(), 69);
    // This host's kernel lists bpf yet refuses LSM programs: the reason is the probe's.
    assert!(
        text.contains(
            "bee run: this kernel cannot enforce the policy; no episode was started, no model \
             was called"
        ),
        "{text}"
    );
    assert!(text.contains("bee run: lsm-probe failed: "), "{text}");
    assert!(text.contains("fix: "), "{text}");
    assert!(!p.has_runs());
}

/// The names in `dir`.
fn entries(dir: &Path) -> Vec<std::ffi::OsString> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    names
}

/// Runs the project's scenario with `factory`; returns the status and what went to stderr.
fn run_with_factory(p: &Project, factory: &FactoryFn<'_>) -> (Exit, String) {
    let args = parse_args(["--scenario", "scenario.toml", "--provider", "provider.toml"]).unwrap();
    let err = Buf::default();
    let status = run_with(
        &args,
        RunContext {
            env: p.env(),
            factory,
            out: Box::new(Buf::default()),
            err: Box::new(err.clone()),
            terminal: false,
            interrupt: Interrupt::new(),
            temp_dir: p.path().to_owned(),
        },
    );
    (status, err.text())
}

/// Runs with a factory that refuses as `refusal` does, counting how often it was asked.
fn refused_run(p: &Project, refusal: &Refusal) -> (Exit, String, usize) {
    let asked = AtomicUsize::new(0);
    let factory = |_: Enforcement,
                   _: EngineChoice,
                   _: ServiceChoice,
                   _: &[&CompiledPolicy]|
     -> Result<Box<dyn SandboxFactory>, Refusal> {
        asked.fetch_add(1, Ordering::SeqCst);
        Err(refusal.clone())
    };
    let (status, err) = run_with_factory(p, &factory);
    (status, err, asked.load(Ordering::SeqCst))
}

#[test]
fn missing_privileges_exit_77_before_any_episode_with_the_reason_and_fix() {
    let p = Project::new(SCENARIO, &[DONE]);
    let before = entries(p.path());
    let refusal = Refusal::no_permission("this process lacks the capabilities enforcement needs")
        .with_cause(
            "capabilities failed: CapEff 0000004000000000 lacks CAP_PERFMON",
            Some("grant CAP_PERFMON".to_owned()),
        );
    let (status, err, asked) = refused_run(&p, &refusal);
    assert_eq!(status, Exit::NoPerm);
    assert_eq!(status.code(), 77);
    assert_eq!(asked, 1);
    assert_eq!(
        err,
        "bee run: this process lacks the capabilities enforcement needs; no episode was \
         started, no model was called\n\
         bee run: capabilities failed: CapEff 0000004000000000 lacks CAP_PERFMON\n\
         \x20        fix: grant CAP_PERFMON\n"
    );
    assert!(!p.has_runs(), "an episode was started");
    assert_eq!(
        entries(p.path()),
        before,
        "a workspace copy or a record was made"
    );

    let (status, err, _) = refused_run(&p, &Refusal::unavailable("this kernel cannot enforce"));
    assert_eq!(status, Exit::Unavailable);
    assert!(err.contains("no model was called"), "{err}");
    assert!(!p.has_runs(), "an episode was started");
}

#[test]
fn no_policy_and_no_host_exits_64() {
    let p = Project::new(
        "prompt = \"x\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n",
        &[DONE],
    );
    let r = go(&p, &[]);
    assert_eq!(r.status, Exit::Usage);
    assert_eq!(r.status.code(), 64);
    assert!(r.err.contains("--host"), "{}", r.err);
    assert!(r.err.contains("no policy"), "{}", r.err);
}

#[test]
fn a_policy_and_host_together_exit_64() {
    let p = Project::new(SCENARIO, &[DONE]);
    let r = go(&p, &["--host"]);
    assert_eq!(r.status, Exit::Usage);
    assert!(r.err.contains("exclude each other"), "{}", r.err);
}

#[test]
fn no_provider_exits_64() {
    let p = Project::new(SCENARIO, &[DONE]);
    let args = parse_args(["--scenario", "scenario.toml"]).unwrap();
    let err = Buf::default();
    let fake = Arc::new(Fake::default());
    let factory = move |_: Enforcement,
                        _: EngineChoice,
                        _: ServiceChoice,
                        _: &[&CompiledPolicy]|
          -> Result<Box<dyn SandboxFactory>, Refusal> {
        Ok(Box::new(FakeRef(Arc::clone(&fake))))
    };
    let status = run_with(
        &args,
        RunContext {
            env: p.env(),
            factory: &factory,
            out: Box::new(Buf::default()),
            err: Box::new(err.clone()),
            terminal: false,
            interrupt: Interrupt::new(),
            temp_dir: p.path().to_owned(),
        },
    );
    assert_eq!(status, Exit::Usage);
    assert!(err.text().contains("--provider"));
}

#[test]
fn host_mode_says_so_and_records_it() {
    let p = Project::new(
        "prompt = \"x\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n",
        &[DONE],
    );
    let fake = Arc::new(Fake {
        host: true,
        ..Fake::default()
    });
    let r = run(&p, &fake, &["--host"], Interrupt::new());
    assert_eq!(r.status, Exit::Ok, "{}", r.err);
    assert!(r.err.contains("NO kernel scope"), "{}", r.err);
    let t = read_transcript(&p.run_dir().join("scenario.jsonl")).unwrap();
    let EventBody::EpisodeStarted(st) = &t.events[0].body else {
        panic!()
    };
    assert_eq!(st.policy.enforcement, Enforcement::Host);
    assert_eq!(st.policy.source, None);
    assert_eq!(fake.policies.lock().unwrap()[0], None);
}

#[test]
fn bad_and_missing_files_exit_65_and_66() {
    let p = Project::new(
        "prompt = \"x\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\nturns = 3\n",
        &[DONE],
    );
    let r = go(&p, &["--host"]);
    assert_eq!(r.status, Exit::DataErr);
    assert_eq!(r.status.code(), 65);
    assert!(r.err.contains("scenario.toml:4:1"), "{}", r.err);
    assert!(r.err.contains("turns"), "{}", r.err);

    let p = Project::new(SCENARIO, &[DONE]);
    let args = parse_args(["--scenario", "nope.toml", "--provider", "provider.toml"]).unwrap();
    let status = run_with(
        &args,
        RunContext {
            env: p.env(),
            factory: &sandbox_factory,
            out: Box::new(Buf::default()),
            err: Box::new(Buf::default()),
            terminal: false,
            interrupt: Interrupt::new(),
            temp_dir: p.path().to_owned(),
        },
    );
    assert_eq!(status, Exit::NoInput);
    assert_eq!(status.code(), 66);

    // A missing policy file, an invalid one, a missing workspace, a bad provider file.
    std::fs::remove_file(p.path().join("policy.toml")).unwrap();
    assert_eq!(go(&p, &[]).status, Exit::NoInput);
    std::fs::write(
        p.path().join("policy.toml"),
        "version = 1\n[fs]\nreed = []\n",
    )
    .unwrap();
    assert_eq!(go(&p, &[]).status, Exit::DataErr);
    std::fs::write(p.path().join("policy.toml"), "version = 1\n").unwrap();
    std::fs::write(
        p.path().join("provider.toml"),
        "kind = \"replay\"\nfile = \"rec.jsonl\"\nmodle = \"m\"\n",
    )
    .unwrap();
    let r = go(&p, &[]);
    assert_eq!(r.status, Exit::DataErr);
    assert!(r.err.contains("provider.toml:3:1"), "{}", r.err);
    std::fs::write(
        p.path().join("provider.toml"),
        "kind = \"replay\"\nfile = \"rec.jsonl\"\n",
    )
    .unwrap();
    assert_eq!(go(&p, &[]).status, Exit::Ok);
    std::fs::remove_dir_all(p.path().join("ws")).unwrap();
    assert_eq!(go(&p, &[]).status, Exit::NoInput);
}

#[test]
fn an_interrupt_exits_130_and_every_transcript_is_finished() {
    let p = Project::new(
        &format!("{SCENARIO}\nrepeat = 3\n"),
        &[TOOL_TURN, TOOL_TURN, DONE],
    );
    let fake = Arc::new(Fake {
        delay: Duration::from_secs(20),
        ..Fake::default()
    });
    let interrupt = Interrupt::new();
    let raiser = interrupt.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        raiser.raise();
    });
    let started = std::time::Instant::now();
    let r = run(&p, &fake, &["--concurrency", "2"], interrupt);
    t.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(r.status, Exit::Interrupted);
    assert_eq!(r.status.code(), 130);
    let summary = RunSummary::read(&p.run_dir().join("summary.json")).unwrap();
    assert!(summary.complete);
    // Two episodes were running and ended as interrupted; the third never started.
    assert_eq!(summary.episodes.len(), 2);
    assert!(
        summary
            .episodes
            .iter()
            .all(|e| e.outcome == Some(Outcome::Interrupted))
    );
}

#[test]
fn eight_concurrent_episodes_each_get_their_own_workspace_and_transcript() {
    let p = Project::new(
        &format!("{SCENARIO}\nrepeat = 8\n"),
        &[TOOL_TURN, TOOL_TURN, DONE],
    );
    let fake = Arc::new(Fake {
        delay: Duration::from_millis(150),
        ..Fake::default()
    });
    let r = run(
        &p,
        &fake,
        &["--concurrency", "8", "--keep-workspaces", "--json"],
        Interrupt::new(),
    );
    assert_eq!(r.status, Exit::Ok, "{}", r.err);
    assert!(
        fake.max_running.load(Ordering::SeqCst) > 1,
        "episodes did not overlap"
    );
    let workspaces = fake.workspaces.lock().unwrap().clone();
    assert_eq!(workspaces.len(), 8);
    let mut distinct = workspaces.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 8);
    let run_dir = p.run_dir();
    for i in 1..=8 {
        let id = format!("scenario-{i}");
        let t = read_transcript(&run_dir.join(format!("{id}.jsonl"))).unwrap();
        let EventBody::EpisodeStarted(st) = &t.events[0].body else {
            panic!()
        };
        assert_eq!(st.episode_id, id);
        let ws = PathBuf::from(&st.workspace);
        assert!(ws.starts_with(p.path().join("tmp")), "{}", ws.display());
        assert_ne!(ws, p.path().join("ws"));
        // Each copy holds the seed and only this episode's calls.
        assert_eq!(
            std::fs::read_to_string(ws.join("seed.txt")).unwrap(),
            "seed\n"
        );
        let log = std::fs::read_to_string(ws.join("calls.log")).unwrap();
        assert_eq!(log.lines().count(), 2, "{log}");
        // Every tool result in this transcript came from this episode's workspace.
        for e in &t.events {
            if let EventBody::ToolResult(res) = &e.body {
                assert_eq!(res.output, format!("workspace {}", ws.display()));
            }
        }
        assert!(
            matches!(&t.events.last().unwrap().body, EventBody::EpisodeFinished(f) if f.outcome == Outcome::Passed)
        );
    }
    // The original workspace was not touched.
    assert!(!p.path().join("ws/calls.log").exists());
    // JSON lines: every line parses; events name their episode; the last line is the result.
    let lines: Vec<serde_json::Value> = r
        .out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.last().unwrap();
    assert_eq!(last["exit"], 0);
    assert_eq!(last["summary"]["episodes"].as_array().unwrap().len(), 8);
    for l in &lines[..lines.len() - 1] {
        let id = l["episode"].as_str().unwrap();
        assert!(id.starts_with("scenario-"));
        assert!(
            l["event"]["event"].is_string() || l["finished"]["outcome"] == "passed",
            "{l}"
        );
    }
    let per_episode = lines
        .iter()
        .filter(|l| l["episode"] == "scenario-3" && l.get("event").is_some())
        .count();
    let on_disk = read_transcript(&run_dir.join("scenario-3.jsonl"))
        .unwrap()
        .events
        .len();
    assert_eq!(per_episode, on_disk);
}

fn recorded_turn_limit(p: &Project, args: &[&str]) -> Option<u32> {
    let records = tempfile::tempdir().unwrap();
    let mut all = vec!["--records-dir", records.path().to_str().unwrap()];
    all.extend_from_slice(args);
    let r = go(p, &all);
    assert_eq!(r.status, Exit::Ok, "{}", r.err);
    let run_dir = std::fs::read_dir(records.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let t = read_transcript(&run_dir.join("scenario.jsonl")).unwrap();
    match &t.events[0].body {
        EventBody::EpisodeStarted(st) => st.limits.turns,
        other => unreachable!("{other:?}"),
    }
}

#[test]
fn limits_come_from_flags_then_the_scenario_then_configuration_files() {
    let p = Project::new(SCENARIO, &[DONE]);
    std::fs::create_dir_all(p.path().join(".bee")).unwrap();
    std::fs::create_dir_all(p.path().join("home/.config/bee")).unwrap();
    std::fs::write(
        p.path().join("home/.config/bee/config.toml"),
        "[limits]\nturns = 40\ntokens = 4000\n",
    )
    .unwrap();
    // The user file alone.
    assert_eq!(recorded_turn_limit(&p, &[]), Some(40));
    // The project file is above the user file.
    std::fs::write(p.path().join(".bee/config.toml"), "[limits]\nturns = 30\n").unwrap();
    assert_eq!(recorded_turn_limit(&p, &[]), Some(30));
    // --config FILE is above the project file.
    std::fs::write(p.path().join("extra.toml"), "[limits]\nturns = 20\n").unwrap();
    assert_eq!(
        recorded_turn_limit(&p, &["--config", "extra.toml"]),
        Some(20)
    );
    // The scenario is above every configuration file.
    std::fs::write(
        p.path().join("scenario.toml"),
        format!("{SCENARIO}\n[limits]\nturns = 10\n"),
    )
    .unwrap();
    assert_eq!(
        recorded_turn_limit(&p, &["--config", "extra.toml"]),
        Some(10)
    );
    // A flag is above everything.
    assert_eq!(
        recorded_turn_limit(&p, &["--config", "extra.toml", "--max-turns", "5"]),
        Some(5)
    );
}

#[test]
fn the_policy_comes_from_a_flag_then_the_scenario_then_configuration() {
    let p = Project::new(
        "prompt = \"x\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n",
        &[DONE],
    );
    std::fs::create_dir_all(p.path().join(".bee")).unwrap();
    std::fs::write(
        p.path().join(".bee/config.toml"),
        "policy = \"../policy.toml\"\n",
    )
    .unwrap();
    std::fs::write(p.path().join("other.toml"), "version = 1\n").unwrap();
    let used = |args: &[&str], scenario_policy: Option<&str>| {
        let mut text = "prompt = \"x\"\nworkspace = \"ws\"\nworkspace_mode = \"copy\"\n".to_owned();
        if let Some(sp) = scenario_policy {
            text.push_str(&format!("policy = \"{sp}\"\n"));
        }
        std::fs::write(p.path().join("scenario.toml"), text).unwrap();
        let fake = Arc::new(Fake::default());
        let r = run(&p, &fake, args, Interrupt::new());
        assert_eq!(r.status, Exit::Ok, "{}", r.err);
        let used = fake.policies.lock().unwrap()[0].clone().unwrap();
        used.file_name().unwrap().to_str().unwrap().to_owned()
    };
    assert_eq!(used(&[], None), "policy.toml");
    assert_eq!(used(&[], Some("other.toml")), "other.toml");
    assert_eq!(
        used(&["--policy", "policy.toml"], Some("other.toml")),
        "policy.toml"
    );
}

#[test]
fn the_run_status_of_mixed_episodes_follows_the_documented_order() {
    use Exit::*;
    assert_eq!(Exit::of_run([]), Ok);
    let server = Provider(ErrorCategory::Server);
    assert_eq!(Exit::of_run([Ok, Failed]), Failed);
    assert_eq!(Exit::of_run([Failed, ModelRefused, Ok]), ModelRefused);
    assert_eq!(Exit::of_run([ModelRefused, Limit, Ok]), Limit);
    assert_eq!(Exit::of_run([Limit, Software]), Software);
    assert_eq!(Exit::of_run([Software, server]), server);
    assert_eq!(Exit::of_run([server, Auth]), Auth);
    assert_eq!(Exit::of_run([Auth, Unavailable]), Unavailable);
    assert_eq!(Exit::of_run([Unavailable, Interrupted]), Interrupted);
    for (status, code) in [
        (Ok, 0),
        (Failed, 1),
        (ModelRefused, 2),
        (Limit, 3),
        (Usage, 64),
        (DataErr, 65),
        (NoInput, 66),
        (Unavailable, 69),
        (Software, 70),
        (Provider(ErrorCategory::RateLimit), 75),
        (Provider(ErrorCategory::Overloaded), 75),
        (Provider(ErrorCategory::Server), 74),
        (Provider(ErrorCategory::Network), 74),
        (Provider(ErrorCategory::Protocol), 76),
        (Provider(ErrorCategory::NotFound), 78),
        (Auth, 77),
        (NoPerm, 77),
        (Interrupted, 130),
    ] {
        assert_eq!(status.code(), code, "{status:?}");
    }
}

#[test]
fn on_a_terminal_each_episode_has_one_line_redrawn_in_place() {
    let p = Project::new(&format!("{SCENARIO}\nrepeat = 2\n"), &[TOOL_TURN, DONE]);
    let args = parse_args([
        "--scenario",
        "scenario.toml",
        "--provider",
        "provider.toml",
        "--concurrency",
        "2",
    ])
    .unwrap();
    let out = Buf::default();
    let fake = Arc::new(Fake::default());
    let factory = move |_: Enforcement,
                        _: EngineChoice,
                        _: ServiceChoice,
                        _: &[&CompiledPolicy]|
          -> Result<Box<dyn SandboxFactory>, Refusal> {
        Ok(Box::new(FakeRef(Arc::clone(&fake))))
    };
    let temp = p.path().join("tmp");
    std::fs::create_dir_all(&temp).unwrap();
    let status = run_with(
        &args,
        RunContext {
            env: p.env(),
            factory: &factory,
            out: Box::new(out.clone()),
            err: Box::new(Buf::default()),
            terminal: true,
            interrupt: Interrupt::new(),
            temp_dir: temp,
        },
    );
    assert_eq!(status, Exit::Ok);
    let text = out.text();
    // Two lines, moved up over and redrawn.
    assert!(text.contains("\x1b[2A"), "{text:?}");
    // The last frame shows both episodes finished.
    let frames: Vec<&str> = text.split("\x1b[2A").collect();
    let last = frames.last().unwrap();
    assert!(last.contains("scenario-1  passed"), "{last:?}");
    assert!(last.contains("scenario-2  passed"), "{last:?}");
    assert!(text.trim_end().ends_with("(exit 0)"), "{text:?}");
}

#[test]
fn json_lines_say_how_each_episode_finished() {
    let p = Project::new(SCENARIO, &[TOOL_TURN]);
    let r = go(&p, &["--json"]);
    assert_eq!(r.status, Exit::Provider(ErrorCategory::Protocol));
    let finished: serde_json::Value = r
        .out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v.get("finished").is_some())
        .unwrap();
    assert_eq!(finished["finished"]["outcome"], "provider-error");
    let error = &finished["finished"]["provider_error"];
    assert_eq!(error["category"], "protocol");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("has ended: all")
    );
}
