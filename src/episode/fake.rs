//! A scripted [`ToolExecutor`] for tests and for checking recordings without a kernel: each
//! call is answered by the first rule whose tool name and argument text match, so denials
//! can be synthesised exactly where a policy would produce them.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::provider::{ToolCall, ToolDef};
use crate::records::{Enforcement, ExitStatus, ToolState};
use crate::session::{Bounds, ToolDenial, ToolExecution, ToolExecutor};

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The tool it answers; `None` answers any tool.
    pub tool: Option<String>,
    /// A string the call's argument JSON text must contain; `None` matches any call.
    pub contains: Option<String>,
    /// The answer.
    pub answer: ToolExecution,
    /// How long the call takes before answering (bounded by the call's deadline).
    pub delay: Duration,
}

impl Rule {
    /// A rule answering calls of `tool` whose arguments contain `contains`.
    #[must_use]
    pub fn on(tool: &str, contains: &str, answer: ToolExecution) -> Self {
        Self {
            tool: Some(tool.to_owned()),
            contains: (!contains.is_empty()).then(|| contains.to_owned()),
            answer,
            delay: Duration::ZERO,
        }
    }

    /// The same rule, taking `delay` before it answers.
    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A completed call with `content` and exit code 0.
#[must_use]
pub fn completed(content: &str) -> ToolExecution {
    ToolExecution {
        state: ToolState::Completed,
        content: content.to_owned(),
        exit: Some(ExitStatus::Code(0)),
        denials: Vec::new(),
        duration: Duration::from_millis(1),
        subagent: None,
        lost_records: 0,
    }
}

/// A call the kernel refused: `state`, the denial's explanation as content, one denial.
#[must_use]
pub fn denied(state: ToolState, exit: Option<ExitStatus>, denial: ToolDenial) -> ToolExecution {
    ToolExecution {
        state,
        content: format!("denied by the sandbox policy: {}", denial.explanation),
        exit,
        denials: vec![denial],
        duration: Duration::from_millis(1),
        subagent: None,
        lost_records: 0,
    }
}

/// Answers calls from [`Rule`]s; unmatched calls complete with `"ok"`. Remembers every call.
#[derive(Debug)]
pub struct ScriptedExecutor {
    tools: Vec<ToolDef>,
    rules: Vec<Rule>,
    check: ToolExecution,
    enforcement: Enforcement,
    calls: Mutex<Vec<ToolCall>>,
}

impl ScriptedExecutor {
    /// An executor offering tools named `tools` (with empty object schemas), confined as
    /// `enforcement`, whose success check passes.
    #[must_use]
    pub fn new(tools: &[&str], enforcement: Enforcement) -> Self {
        Self {
            tools: tools
                .iter()
                .map(|t| ToolDef {
                    name: (*t).to_owned(),
                    description: format!("the {t} tool"),
                    parameters: serde_json::json!({"type": "object"}),
                })
                .collect(),
            rules: Vec::new(),
            check: completed("check passed"),
            enforcement,
            calls: Mutex::new(Vec::new()),
        }
    }

    /// Adds a rule (rules are tried in the order added).
    #[must_use]
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Sets the success check's answer.
    #[must_use]
    pub fn check_answer(mut self, answer: ToolExecution) -> Self {
        self.check = answer;
        self
    }

    /// The calls made so far, in order.
    pub fn calls(&self) -> Vec<ToolCall> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

fn wait(delay: Duration, bounds: &Bounds) -> bool {
    let end = Instant::now() + delay;
    loop {
        let now = Instant::now();
        if bounds.interrupt.is_raised() || bounds.deadline.is_some_and(|d| now >= d) {
            return false;
        }
        if now >= end {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5).min(end - now));
    }
}

impl ToolExecutor for ScriptedExecutor {
    fn definitions(&self) -> Vec<ToolDef> {
        self.tools.clone()
    }

    fn call(&self, call: &ToolCall, bounds: &Bounds) -> ToolExecution {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(call.clone());
        }
        let rule = self.rules.iter().find(|r| {
            r.tool.as_ref().is_none_or(|t| *t == call.name)
                && r.contains
                    .as_ref()
                    .is_none_or(|c| call.arguments.contains(c.as_str()))
        });
        let Some(rule) = rule else {
            return completed("ok");
        };
        let started = Instant::now();
        if !wait(rule.delay, bounds) {
            return ToolExecution {
                state: ToolState::Failed,
                content: "stopped: the episode's time ran out or it was interrupted".to_owned(),
                exit: Some(ExitStatus::Signal(9)),
                denials: Vec::new(),
                duration: started.elapsed(),
                subagent: None,
                lost_records: 0,
            };
        }
        rule.answer.clone()
    }

    fn check(&self, _command: &str, _bounds: &Bounds) -> ToolExecution {
        self.check.clone()
    }

    fn enforcement(&self) -> Enforcement {
        self.enforcement
    }
}
