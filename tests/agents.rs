//! Subagents through `bee run` with replayed models and a sandbox that records which policy
//! each call ran under: delegation and its records, refusals before anything starts,
//! concurrency, budgets shared with the parent, per-tool scopes, `bee metrics --by agent`.
//! (That the kernel enforces a subagent's policy is shown in the VM: `tests/kernel_cli.rs`.)

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

mod support;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::Buf;

use bee::app::Exit;
use bee::app::enforcement::Refusal;
use bee::app::run::{RunContext, SandboxFactory, parse_args, run_with};
use bee::config::{EngineChoice, Env, ServiceChoice};
use bee::episode::{Bounds, ExecutorError, Interrupt, ToolExecution, ToolExecutor, completed};
use bee::provider::{ToolCall, ToolDef};
use bee::records::{
    Enforcement, EventBody, GroupBy, MAIN_AGENT_GROUP, Outcome, RunSummary, STORE_FILE, Store,
    ToolState, read_transcript,
};
use bee::tools::Registry;
use bee_core::CompiledPolicy;

/// Every call any executor ran: the policy file its scope was made with, the tool, the
/// arguments.
#[derive(Default)]
struct Log {
    calls: Mutex<Vec<(String, String, String)>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
    delay: Duration,
}

struct Exec {
    policy: Option<CompiledPolicy>,
    tools: Vec<ToolDef>,
    log: Arc<Log>,
}

impl ToolExecutor for Exec {
    fn definitions(&self) -> Vec<ToolDef> {
        self.tools.clone()
    }
    fn call(&self, call: &ToolCall, bounds: &Bounds) -> ToolExecution {
        if !self.tools.iter().any(|t| t.name == call.name) {
            return ToolExecution::could_not_run(format!("unknown tool `{}`", call.name));
        }
        let source = self
            .policy
            .as_ref()
            .map_or("host".to_owned(), |p| p.source.clone());
        self.log.calls.lock().unwrap().push((
            source.clone(),
            call.name.clone(),
            call.arguments.clone(),
        ));
        let now = self.log.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.log.max_running.fetch_max(now, Ordering::SeqCst);
        let end = Instant::now() + self.log.delay;
        while Instant::now() < end && !bounds.interrupt.is_raised() {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.log.running.fetch_sub(1, Ordering::SeqCst);
        completed(&format!("{} ran under {source}", call.name))
    }
    fn check(&self, _command: &str, _bounds: &Bounds) -> ToolExecution {
        completed("ok")
    }
    fn enforcement(&self) -> Enforcement {
        Enforcement::Kernel
    }
    fn policies(&self) -> Option<(CompiledPolicy, CompiledPolicy)> {
        self.policy.clone().map(|p| (p.clone(), p))
    }
}

struct Factory(Arc<Log>);

impl SandboxFactory for Factory {
    fn enforcement(&self) -> Enforcement {
        Enforcement::Kernel
    }
    fn executor(
        &self,
        _workspace: &Path,
        policy: Option<CompiledPolicy>,
        tools: &Arc<Registry>,
    ) -> Result<Box<dyn ToolExecutor>, ExecutorError> {
        Ok(Box::new(Exec {
            policy,
            tools: tools.definitions(),
            log: Arc::clone(&self.0),
        }))
    }
}

/// A project: a workspace with `secret/`, a parent policy that reads everything in it, roles.
struct Project {
    dir: tempfile::TempDir,
}

const PARENT_POLICY: &str =
    "version = 1\n[fs]\nread = [\"./**\"]\nwrite = [\"./src/**\"]\n[exec]\nallow = [\"/bin/sh\"]\n";
const READ_ONLY: &str = "version = 1\n[fs]\nread = [\"./src/**\"]\n";
const WIDER: &str = "version = 1\n[fs]\nread = [\"./**\", \"/etc/**\"]\n";

impl Project {
    fn new(parent_turns: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().to_owned();
        for d in [
            "ws/src",
            "ws/secret",
            "home",
            "tmp",
            ".bee/agents",
            "policies",
        ] {
            std::fs::create_dir_all(p.join(d)).unwrap();
        }
        std::fs::write(p.join("ws/secret/x"), "s3cret\n").unwrap();
        std::fs::write(p.join("policy.toml"), PARENT_POLICY).unwrap();
        std::fs::write(p.join("policies/ro.toml"), READ_ONLY).unwrap();
        std::fs::write(p.join("policies/wider.toml"), WIDER).unwrap();
        let me = Self { dir };
        me.provider("provider.toml", "rec.jsonl", parent_turns);
        std::fs::write(
            p.join("scenario.toml"),
            "prompt = \"review it\"\nworkspace = \"ws\"\nworkspace_mode = \"in-place\"\npolicy = \"policy.toml\"\nname = \"ep\"\n",
        )
        .unwrap();
        me
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn provider(&self, file: &str, recording: &str, turns: &[&str]) {
        std::fs::write(
            self.path().join(file),
            format!(
                "kind = \"replay\"\nfile = \"{recording}\"\nmodel = \"m\"\n[prices]\ninput = 1.0\noutput = 1.0\n"
            ),
        )
        .unwrap();
        std::fs::write(self.path().join(recording), turns.join("\n")).unwrap();
    }

    /// A role file `.bee/agents/NAME.toml` with `body`, and its own replayed model.
    fn role(&self, name: &str, body: &str, turns: &[&str]) {
        let provider = format!("{name}-provider.toml");
        self.provider(&provider, &format!("{name}.jsonl"), turns);
        std::fs::write(
            self.path().join(format!(".bee/agents/{name}.toml")),
            format!("{body}\nprovider = \"../../{provider}\"\n"),
        )
        .unwrap();
    }

    fn config(&self, text: &str) {
        std::fs::write(self.path().join(".bee/config.toml"), text).unwrap();
    }

    fn records(&self) -> PathBuf {
        self.path().join(".bee/records")
    }

    fn run_dir(&self) -> PathBuf {
        let runs: Vec<PathBuf> = std::fs::read_dir(self.records())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        runs[0].clone()
    }

    fn events(&self, session: &str) -> Vec<EventBody> {
        read_transcript(&self.run_dir().join(format!("{session}.jsonl")))
            .unwrap()
            .events
            .into_iter()
            .map(|e| e.body)
            .collect()
    }

    fn run(&self, log: &Arc<Log>) -> (Exit, String, String) {
        self.run_until(log, Interrupt::new())
    }

    fn run_until(&self, log: &Arc<Log>, interrupt: Interrupt) -> (Exit, String, String) {
        let args =
            parse_args(["--scenario", "scenario.toml", "--provider", "provider.toml"]).unwrap();
        let out = Buf::default();
        let err = Buf::default();
        let l = Arc::clone(log);
        let factory = move |_: Enforcement,
                            _: EngineChoice,
                            _: ServiceChoice,
                            _: &[&CompiledPolicy]|
              -> Result<Box<dyn SandboxFactory>, Refusal> {
            Ok(Box::new(Factory(Arc::clone(&l))))
        };
        let status = run_with(
            &args,
            RunContext {
                env: Env {
                    cwd: self.path().to_owned(),
                    home: Some(self.path().join("home")),
                    xdg_config_home: None,
                },
                factory: &factory,
                out: Box::new(out.clone()),
                err: Box::new(err.clone()),
                terminal: false,
                interrupt,
                temp_dir: self.path().join("tmp"),
            },
        );
        (status, out.text(), err.text())
    }
}

fn agent_call(id: &str, role: &str, task: &str) -> String {
    serde_json::json!({"id": id, "name": "agent", "arguments": {"role": role, "task": task}})
        .to_string()
}

fn turn(calls: &[String], input: u64) -> String {
    format!(
        r#"{{"tool_calls": [{}], "usage": {{"input_tokens": {input}, "output_tokens": 10}}}}"#,
        calls.join(", ")
    )
}

const DONE: &str = r#"{"text": "done", "usage": {"input_tokens": 50, "output_tokens": 5}}"#;
const REVIEWER: &str = "description = \"Reviews the sources; reads only.\"\npolicy = \"../../policies/ro.toml\"\ntools = [\"read_file\", \"grep\"]";

fn tool_result(events: &[EventBody], call_id: &str) -> (ToolState, String) {
    events
        .iter()
        .find_map(|e| match e {
            EventBody::ToolResult(r) if r.call_id == call_id => Some((r.state, r.output.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {call_id}: {events:?}"))
}

#[test]
fn a_delegated_review_runs_under_the_roles_policy_and_is_linked_in_the_records() {
    let p = Project::new(&[
        &turn(&[agent_call("c1", "reviewer", "review src/")], 100),
        DONE,
    ]);
    p.role(
        "reviewer",
        REVIEWER,
        &[
            r#"{"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "src/lib.rs"}}], "usage": {"input_tokens": 30, "output_tokens": 3}}"#,
            r#"{"text": "src/ looks fine", "usage": {"input_tokens": 40, "output_tokens": 4}}"#,
        ],
    );
    let log = Arc::new(Log::default());
    let (status, out, err) = p.run(&log);
    assert_eq!(status, Exit::Ok, "{out}\n{err}");

    // The subagent's call ran in a scope of its own, under the role's policy.
    let calls = log.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].0.ends_with("policies/ro.toml"), "{calls:?}");
    assert_eq!(calls[0].1, "read_file");

    // The parent's transcript: the subagent record, then the answer as the tool result.
    let parent = p.events("ep");
    let sub = parent
        .iter()
        .find_map(|e| match e {
            EventBody::Subagent(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(sub.role, "reviewer");
    assert_eq!(sub.session_id.as_deref(), Some("ep.reviewer-1"));
    assert_eq!(sub.refused, None);
    let (state, output) = tool_result(&parent, "c1");
    assert_eq!(state, ToolState::Completed);
    assert!(output.starts_with("src/ looks fine"), "{output}");
    assert!(
        output.contains("[subagent ep.reviewer-1 (reviewer): 2 model call(s), 1 tool call(s)"),
        "{output}"
    );

    // The subagent's own transcript, linked to the parent and the call.
    let child = p.events("ep.reviewer-1");
    let EventBody::EpisodeStarted(started) = &child[0] else {
        panic!("{child:?}")
    };
    let link = started.parent.clone().unwrap();
    assert_eq!(
        (
            link.episode_id.as_str(),
            link.call_id.as_str(),
            link.role.as_str(),
            link.depth
        ),
        ("ep", "c1", "reviewer", 1)
    );
    assert!(
        started
            .policy
            .source
            .as_deref()
            .unwrap()
            .ends_with("ro.toml")
    );
    // It was offered the role's tools only.
    let EventBody::EpisodeFinished(f) = child.last().unwrap() else {
        panic!("{child:?}")
    };
    assert_eq!(f.outcome, Outcome::Ended);

    // The summary counts one episode and shows the tree.
    let summary = RunSummary::from_run_dir(&p.run_dir()).unwrap();
    assert_eq!(summary.episodes.len(), 2);
    assert!(
        out.contains("1 of 1 episode(s) passed; 1 subagent(s), 0 delegation(s) refused"),
        "{out}"
    );
    assert!(out.contains("  ep.reviewer-1 (reviewer)  ended"), "{out}");
    // Tokens of both count in the run's total: 100+10 + 50+5 + 30+3 + 40+4.
    assert_eq!(
        summary.totals.input_tokens + summary.totals.output_tokens,
        242
    );

    // bee metrics --by agent.
    let store = Store::open(&p.records().join(STORE_FILE)).unwrap();
    let report = store.report(GroupBy::Agent, None).unwrap();
    let keys: Vec<&str> = report.groups.iter().map(|g| g.key.as_str()).collect();
    assert_eq!(keys, [MAIN_AGENT_GROUP, "reviewer"]);
    let reviewer = &report.groups[1].stats;
    assert_eq!(reviewer.episodes, 1);
    assert_eq!(reviewer.model.as_ref().unwrap().calls, 2);
    assert_eq!(reviewer.tools.calls, 1);
    assert_eq!(reviewer.delegations.as_ref().unwrap().started, 1);
}

#[test]
fn a_widened_role_is_refused_with_its_counterexample_before_any_model_call() {
    let p = Project::new(&[
        &turn(&[agent_call("c1", "widener", "read /etc")], 100),
        DONE,
    ]);
    p.role(
        "widener",
        "description = \"Reads more than it should.\"\npolicy = \"../../policies/wider.toml\"",
        &[r#"{"text": "never sent"}"#],
    );
    let log = Arc::new(Log::default());
    let (status, out, err) = p.run(&log);
    assert_eq!(status, Exit::Ok, "{out}\n{err}");
    assert!(log.calls.lock().unwrap().is_empty());
    let parent = p.events("ep");
    let (state, output) = tool_result(&parent, "c1");
    assert_eq!(state, ToolState::CouldNotRun);
    assert!(
        output.contains("no subagent was started: refused: role `widener`")
            && output.contains("grants 1 capability that")
            && output.contains("policy.toml does not:")
            && output.contains("grants read of `/etc`"),
        "{output}"
    );
    let sub = parent.iter().find_map(|e| match e {
        EventBody::Subagent(s) => Some(s.clone()),
        _ => None,
    });
    let sub = sub.unwrap();
    assert_eq!(sub.session_id, None);
    assert!(sub.refused.unwrap().contains("`/etc/**`"));
    // No subagent session: one transcript only.
    assert_eq!(
        RunSummary::from_run_dir(&p.run_dir())
            .unwrap()
            .episodes
            .len(),
        1
    );
    assert!(
        out.contains("✗ widener (call c1): refused: role `widener`"),
        "{out}"
    );
    let report = Store::open(&p.records().join(STORE_FILE))
        .unwrap()
        .report(GroupBy::Agent, None)
        .unwrap();
    let widener = report.groups.iter().find(|g| g.key == "widener").unwrap();
    assert_eq!(widener.stats.episodes, 0);
    let d = widener.stats.delegations.as_ref().unwrap();
    assert_eq!((d.started, d.refused), (0, 1));
}

#[test]
fn bad_delegations_are_clear_results_and_start_nothing() {
    let calls = [
        agent_call("a", "nobody", "x"),
        agent_call("b", "broken", "x"),
        agent_call("c", "badpolicy", "x"),
        agent_call("d", "greedy", "x"),
        serde_json::json!({"id": "e", "name": "agent", "arguments": {"policy": "version = 1\n", "task": "x"}}).to_string(),
        serde_json::json!({"id": "f", "name": "agent", "arguments": {"role": "reviewer"}}).to_string(),
        serde_json::json!({"id": "g", "name": "agent", "arguments": {"role": "reviewer", "task": "  "}}).to_string(),
    ];
    let p = Project::new(&[&turn(&calls, 100), DONE]);
    p.role(
        "broken",
        "description = \"b\"\npolicy = \"../../policies/ro.toml\"\ntols = [\"shell\"]",
        &[],
    );
    std::fs::write(
        p.path().join("policies/bad.toml"),
        "version = 1\n[fs]\nread = 3\n",
    )
    .unwrap();
    p.role(
        "badpolicy",
        "description = \"b\"\npolicy = \"../../policies/bad.toml\"",
        &[],
    );
    p.role(
        "greedy",
        "description = \"g\"\npolicy = \"../../policies/ro.toml\"\ntools = [\"read_file\", \"fetch_url\"]",
        &[],
    );
    p.role("reviewer", REVIEWER, &[]);
    let log = Arc::new(Log::default());
    let (status, out, err) = p.run(&log);
    assert_eq!(status, Exit::Ok, "{out}\n{err}");
    assert!(err.contains("a role file is invalid"), "{err}");
    assert!(log.calls.lock().unwrap().is_empty());
    let parent = p.events("ep");
    let expect = [
        (
            "a",
            "there is no role `nobody`; the roles are badpolicy, broken, greedy, reviewer",
        ),
        ("b", "broken.toml:3:1: tols"),
        ("c", "role `badpolicy`: the policy is invalid"),
        (
            "d",
            "lists tools the calling session is not offered: fetch_url",
        ),
        (
            "e",
            "inline policies are not allowed here (agents.inline_policy = false)",
        ),
        ("f", "the arguments are not {role, task}"),
        ("g", "`task` is empty"),
    ];
    for (id, words) in expect {
        let (state, output) = tool_result(&parent, id);
        assert_eq!(state, ToolState::CouldNotRun, "{id}: {output}");
        assert!(output.contains(words), "{id}: {output}");
    }
    assert_eq!(
        RunSummary::from_run_dir(&p.run_dir())
            .unwrap()
            .episodes
            .len(),
        1
    );
}

#[test]
fn delegation_stops_at_the_depth_limit_and_refuses_cycles() {
    // The parent delegates to `lead`, which may delegate; `lead` asks for itself (a cycle)
    // and for `reviewer`, which would be at depth 2 of max 1… so the limit is 2 here and
    // `reviewer` asks for `lead` again at depth 3.
    let p = Project::new(&[&turn(&[agent_call("c1", "lead", "organise")], 10), DONE]);
    p.role(
        "lead",
        "description = \"Delegates.\"\npolicy = \"../../policy.toml\"\ntools = [\"read_file\", \"agent\"]",
        &[
            &turn(&[agent_call("l1", "lead", "again"), agent_call("l2", "helper", "help")], 10),
            r#"{"text": "lead done", "usage": {"input_tokens": 1, "output_tokens": 1}}"#,
        ],
    );
    p.role(
        "helper",
        "description = \"Helps.\"\npolicy = \"../../policies/ro.toml\"\ntools = [\"read_file\", \"agent\"]",
        &[
            &turn(&[agent_call("h1", "reviewer", "deeper")], 10),
            r#"{"text": "helper done", "usage": {"input_tokens": 1, "output_tokens": 1}}"#,
        ],
    );
    p.role("reviewer", REVIEWER, &[]);
    let log = Arc::new(Log::default());
    let (status, out, err) = p.run(&log);
    assert_eq!(status, Exit::Ok, "{out}\n{err}");
    let lead = p.events("ep.lead-1");
    let (state, output) = tool_result(&lead, "l1");
    assert_eq!(state, ToolState::CouldNotRun);
    assert!(
        output.contains("cyclic delegation: lead → lead"),
        "{output}"
    );
    let (state, output) = tool_result(&lead, "l2");
    assert_eq!(state, ToolState::Completed, "{output}");
    assert!(output.contains("helper done"), "{output}");
    // The helper is at depth 2 = agents.max_depth: it is not offered `agent`, and a call of
    // it anyway is refused by the limit.
    let helper = p.events("ep.lead-1.helper-1");
    let EventBody::EpisodeStarted(s) = &helper[0] else {
        panic!()
    };
    assert_eq!(s.parent.as_ref().unwrap().depth, 2);
    let (state, output) = tool_result(&helper, "h1");
    assert_eq!(state, ToolState::CouldNotRun);
    assert!(
        output.contains(
            "delegation too deep: this subagent would be at depth 3, and the limit is 2 \
             (agents.max_depth)"
        ),
        "{output}"
    );
    // The helper was not offered `agent` (it called it anyway), and its caller was told.
    let (_, lead_got) = tool_result(&lead, "l2");
    assert!(lead_got.contains("was not offered `agent`"), "{lead_got}");
}

#[test]
fn agent_calls_of_one_turn_run_at_the_same_time() {
    let p = Project::new(&[
        &turn(
            &[
                agent_call("c1", "reviewer", "one"),
                agent_call("c2", "reviewer", "two"),
            ],
            10,
        ),
        DONE,
    ]);
    p.role(
        "reviewer",
        REVIEWER,
        &[
            r#"{"tool_calls": [{"id": "r1", "name": "grep", "arguments": {"pattern": "x"}}], "usage": {"input_tokens": 1, "output_tokens": 1}}"#,
            r#"{"text": "ok", "usage": {"input_tokens": 1, "output_tokens": 1}}"#,
        ],
    );
    let log = Arc::new(Log {
        delay: Duration::from_millis(400),
        ..Log::default()
    });
    let (status, out, err) = p.run(&log);
    assert_eq!(status, Exit::Ok, "{out}\n{err}");
    assert_eq!(log.calls.lock().unwrap().len(), 2);
    assert_eq!(
        log.max_running.load(Ordering::SeqCst),
        2,
        "the two subagents overlapped"
    );
    let parent = p.events("ep");
    // Results are recorded in the calls' order.
    let results: Vec<&str> = parent
        .iter()
        .filter_map(|e| match e {
            EventBody::ToolResult(r) => Some(r.call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results, ["c1", "c2"]);
}

/// The tokens a session's transcript counts (input plus output over its model calls).
fn tokens_of(events: &[EventBody]) -> u64 {
    events
        .iter()
        .filter_map(|e| match e {
            EventBody::Usage(u) => Some(u.input_tokens.unwrap() + u.output_tokens.unwrap()),
            _ => None,
        })
        .sum()
}

#[test]
fn concurrent_subagents_cannot_outspend_their_parent() {
    // The parent may spend 12000 tokens; its first call takes 110, then two subagents run side
    // by side, each call taking 400 (390 in, 10 out, of an output budget of 50). Each call
    // reserves its worst case against the parent's limit before it is sent, so together they
    // never pass it (unreserved, each would check a total the other was about to raise); once
    // no call fits, each subagent is stopped by the parent's limit, and so is the parent.
    let p = Project::new(&[
        &turn(
            &[
                agent_call("c1", "reviewer", "spend"),
                agent_call("c2", "reviewer", "spend too"),
            ],
            100,
        ),
        DONE,
    ]);
    // A first call's worst case counts the request at one token per byte, tool definitions
    // included, and the review tools' make it larger in the builds that have them: the limit
    // leaves room for it in every build CI tests.
    p.config("[limits]\ntokens = 12000\n");
    let spend = r#"{"tool_calls": [{"name": "grep", "arguments": {"pattern": "x"}}], "usage": {"input_tokens": 390, "output_tokens": 10}}"#;
    p.role("reviewer", REVIEWER, &[spend; 20]);
    let provider = p.path().join("reviewer-provider.toml");
    let text = std::fs::read_to_string(&provider).unwrap();
    std::fs::write(&provider, format!("max_output_tokens = 50\n{text}")).unwrap();
    let log = Arc::new(Log {
        delay: Duration::from_millis(50),
        ..Log::default()
    });
    let (status, out, err) = p.run(&log);
    assert_eq!(status, Exit::Limit, "{out}\n{err}");
    let parent = p.events("ep");
    let children = [p.events("ep.reviewer-1"), p.events("ep.reviewer-2")];
    let total = tokens_of(&parent) + children.iter().map(|c| tokens_of(c)).sum::<u64>();
    assert!(total <= 12000, "{total} tokens of 12000");
    // They stopped when no call's worst case fitted any more, not long before.
    assert!(12000 - total < 1000, "{total} tokens of 12000");
    assert_eq!(
        log.max_running.load(Ordering::SeqCst),
        2,
        "the two subagents overlapped"
    );
    for (child, call) in children.iter().zip(["c1", "c2"]) {
        let hit = child
            .iter()
            .find_map(|e| match e {
                EventBody::LimitHit(h) => Some(h.clone()),
                _ => None,
            })
            .unwrap();
        assert!(
            hit.detail
                .contains("tokens of 12000 spent; the next model call may take up to")
                && hit.detail.contains("the limit of session ep"),
            "{}",
            hit.detail
        );
        let (state, output) = tool_result(&parent, call);
        assert_eq!(state, ToolState::Failed);
        assert!(
            output.contains("the subagent stopped at its tokens limit"),
            "{output}"
        );
    }
    let summary = RunSummary::from_run_dir(&p.run_dir()).unwrap();
    let parent = summary
        .episodes
        .iter()
        .find(|e| e.episode_id == "ep")
        .unwrap();
    assert_eq!(parent.outcome, Some(Outcome::Limit));
}

#[test]
fn a_tool_with_its_own_policy_runs_in_a_scope_under_it() {
    let p = Project::new(&[
        r#"{"tool_calls": [{"id": "s", "name": "shell", "arguments": {"command": "ls"}}, {"id": "r", "name": "read_file", "arguments": {"path": "src/a"}}], "usage": {"input_tokens": 1, "output_tokens": 1}}"#,
        DONE,
    ]);
    std::fs::write(
        p.path().join("policies/shell.toml"),
        "version = 1\n[fs]\nread = [\"./src/**\"]\n[exec]\nallow = [\"/bin/sh\"]\n",
    )
    .unwrap();
    p.config("[tools.shell]\npolicy = \"../policies/shell.toml\"\n");
    let log = Arc::new(Log::default());
    let (status, out, err) = p.run(&log);
    assert_eq!(status, Exit::Ok, "{out}\n{err}");
    let calls = log.calls.lock().unwrap().clone();
    assert!(
        calls[0].0.ends_with("policies/shell.toml") && calls[0].1 == "shell",
        "{calls:?}"
    );
    assert!(
        calls[1].0.ends_with("/policy.toml") && calls[1].1 == "read_file",
        "{calls:?}"
    );
    let EventBody::EpisodeStarted(s) = &p.events("ep")[0] else {
        panic!()
    };
    assert!(
        s.policy.tools["shell"].ends_with("shell.toml"),
        "{:?}",
        s.policy.tools
    );
}

#[test]
fn a_tool_policy_wider_than_the_sessions_is_refused_before_anything_runs() {
    let p = Project::new(&[DONE]);
    p.config("[tools.shell]\npolicy = \"../policies/wider.toml\"\n");
    let log = Arc::new(Log::default());
    let (status, _out, err) = p.run(&log);
    assert_eq!(status, Exit::DataErr);
    assert_eq!(status.code(), 65);
    assert!(
        err.contains(".bee/config.toml:2: tools.shell.policy: refused:")
            && err.contains("grants read of `/etc`"),
        "{err}"
    );
    assert!(
        !p.records().join(STORE_FILE).exists()
            || std::fs::read_dir(p.records())
                .unwrap()
                .all(|e| !e.unwrap().path().is_dir())
    );
    let p = Project::new(&[DONE]);
    p.config("[tools.nope]\npolicy = \"../policies/ro.toml\"\n");
    let (status, _out, err) = p.run(&log);
    assert_eq!(status, Exit::DataErr);
    assert!(
        err.contains("tools.nope.policy: there is no tool `nope`"),
        "{err}"
    );
}

/// `agent` is a registered tool like the others: `tools.disabled` takes it away (a call of it
/// is then an unknown tool, and nothing starts), and no `[tools.agent]` policy can confine it,
/// since it runs in bee itself.
#[test]
fn the_agent_tool_is_disabled_and_refused_a_policy_like_any_registered_tool() {
    let p = Project::new(&[&turn(&[agent_call("c1", "reviewer", "look")], 10), DONE]);
    p.role("reviewer", REVIEWER, &[DONE]);
    p.config("[tools]\ndisabled = [\"agent\"]\n");
    let log = Arc::new(Log::default());
    let (status, out, err) = p.run(&log);
    assert_eq!(status, Exit::Ok, "{out}\n{err}");
    let (state, output) = tool_result(&p.events("ep"), "c1");
    assert_eq!(state, ToolState::CouldNotRun);
    // Not answered by the delegation layer: it reached the executor as a tool it lacks.
    assert_eq!(output, "unknown tool `agent`");
    assert!(log.calls.lock().unwrap().is_empty());

    let p = Project::new(&[DONE]);
    p.role("reviewer", REVIEWER, &[DONE]);
    p.config("[tools.agent]\npolicy = \"../policies/ro.toml\"\n");
    let (status, _out, err) = p.run(&log);
    assert_eq!(status, Exit::DataErr);
    assert!(
        err.contains("tools.agent.policy: `agent` runs in bee itself, not in a scope"),
        "{err}"
    );
}

#[test]
fn an_inline_policy_gets_the_same_proof() {
    let wide = serde_json::json!({"id": "i1", "name": "agent", "arguments": {"policy": WIDER, "task": "x"}}).to_string();
    let p = Project::new(&[&turn(&[wide], 10), DONE]);
    p.config("[agents]\ninline_policy = true\n");
    let log = Arc::new(Log::default());
    let (status, out, err) = p.run(&log);
    assert_eq!(status, Exit::Ok, "{out}\n{err}");
    let (state, output) = tool_result(&p.events("ep"), "i1");
    assert_eq!(state, ToolState::CouldNotRun);
    assert!(
        output.contains("refused: the inline policy grants 1 capability that")
            && output.contains("`/etc`"),
        "{output}"
    );
    assert!(log.calls.lock().unwrap().is_empty());
}

#[test]
fn interrupting_the_run_ends_the_subagent_and_its_parent() {
    let p = Project::new(&[&turn(&[agent_call("c1", "reviewer", "slow")], 10), DONE]);
    p.role(
        "reviewer",
        REVIEWER,
        &[
            r#"{"tool_calls": [{"id": "r1", "name": "grep", "arguments": {"pattern": "x"}}], "usage": {"input_tokens": 1, "output_tokens": 1}}"#,
            r#"{"text": "never", "usage": {"input_tokens": 1, "output_tokens": 1}}"#,
        ],
    );
    let log = Arc::new(Log {
        delay: Duration::from_secs(30),
        ..Log::default()
    });
    let interrupt = Interrupt::new();
    let raiser = interrupt.clone();
    let watched = Arc::clone(&log);
    std::thread::spawn(move || {
        while watched.running.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        raiser.raise();
    });
    let started = Instant::now();
    let (status, out, err) = p.run_until(&log, interrupt);
    assert_eq!(status, Exit::Interrupted, "{out}\n{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let summary = RunSummary::from_run_dir(&p.run_dir()).unwrap();
    assert!(
        summary.complete,
        "every transcript ends with episode_finished"
    );
    for e in &summary.episodes {
        assert_eq!(e.outcome, Some(Outcome::Interrupted), "{}", e.episode_id);
    }
    assert_eq!(summary.episodes.len(), 2);
}

/// Copies a directory tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn the_delegation_example_delegates_twice_at_once_and_refuses_the_widening() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("delegation");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/delegation"),
        &root,
    );
    std::fs::create_dir_all(root.join("tmp")).unwrap();
    let log = Arc::new(Log {
        delay: Duration::from_millis(200),
        ..Log::default()
    });
    let args = parse_args(["--scenario", "scenario.toml", "--records", "records"]).unwrap();
    let l = Arc::clone(&log);
    let factory = move |_: Enforcement,
                        _: EngineChoice,
                        _: ServiceChoice,
                        _: &[&CompiledPolicy]|
          -> Result<Box<dyn SandboxFactory>, Refusal> {
        Ok(Box::new(Factory(Arc::clone(&l))))
    };
    let out = Buf::default();
    let err = Buf::default();
    let status = run_with(
        &args,
        RunContext {
            env: Env {
                cwd: root.clone(),
                home: Some(dir.path().to_owned()),
                xdg_config_home: None,
            },
            factory: &factory,
            out: Box::new(out.clone()),
            err: Box::new(err.clone()),
            terminal: false,
            interrupt: Interrupt::new(),
            temp_dir: root.join("tmp"),
        },
    );
    assert_eq!(status, Exit::Ok, "{}\n{}", out.text(), err.text());
    assert_eq!(
        log.max_running.load(Ordering::SeqCst),
        2,
        "reviewer and keeper overlapped"
    );
    let calls = log.calls.lock().unwrap().clone();
    assert!(
        calls
            .iter()
            .any(|(p, t, a)| p.ends_with("policies/reviewer.toml")
                && t == "read_file"
                && a.contains("secret/token.txt"))
    );
    assert!(
        calls
            .iter()
            .any(|(p, _, a)| p.ends_with("policies/keeper.toml") && a.contains("src/lib.rs"))
    );
    let report = Store::open(&root.join("records").join(STORE_FILE))
        .unwrap()
        .report(GroupBy::Agent, None)
        .unwrap();
    let keys: Vec<&str> = report.groups.iter().map(|g| g.key.as_str()).collect();
    assert_eq!(keys, [MAIN_AGENT_GROUP, "keeper", "reviewer", "widener"]);
    let d = |k: &str| {
        let g = report.groups.iter().find(|g| g.key == k).unwrap();
        let d = g.stats.delegations.clone().unwrap();
        (g.stats.episodes, d.started, d.refused)
    };
    assert_eq!(d("reviewer"), (1, 1, 0));
    assert_eq!(d("keeper"), (1, 1, 0));
    assert_eq!(d("widener"), (0, 0, 1));
}

#[test]
fn the_compilers_warnings_reach_the_run_and_the_caller_of_a_subagent() {
    let p = Project::new(&[&turn(&[agent_call("c1", "dup", "look at src/")], 10), DONE]);
    // The session's policy and the role's each give one rule twice: merged, with a warning.
    std::fs::write(
        p.path().join("policy.toml"),
        PARENT_POLICY.replace("read = [\"./**\"]", "read = [\"./**\", \"./**\"]"),
    )
    .unwrap();
    std::fs::write(
        p.path().join("policies/dup.toml"),
        "version = 1\n[fs]\nread = [\"./src/**\", \"./src/**\"]\n",
    )
    .unwrap();
    p.role(
        "dup",
        "description = \"Reads src.\"\npolicy = \"../../policies/dup.toml\"\ntools = [\"read_file\"]",
        &[r#"{"text": "read it", "usage": {"input_tokens": 1, "output_tokens": 1}}"#],
    );
    let log = Arc::new(Log::default());
    let (status, out, err) = p.run(&log);
    assert_eq!(status, Exit::Ok, "{out}\n{err}");
    // `bee run` says the session policy's warning once, as `bee validate` does.
    let warned: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warned.len(), 1, "{err}");
    assert!(warned[0].contains("policy.toml:3:"), "{err}");
    assert!(warned[0].contains("merged"), "{err}");
    // The subagent's caller is told of the role policy's warning in the result.
    let (state, output) = tool_result(&p.events("ep"), "c1");
    assert_eq!(state, ToolState::Completed, "{output}");
    let note = output
        .lines()
        .find(|l| l.starts_with("warning: "))
        .unwrap_or_else(|| panic!("no warning in {output}"));
    assert!(note.contains("dup.toml:3:"), "{note}");
}
