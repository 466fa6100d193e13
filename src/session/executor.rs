//! What the episode loop needs from the tools: their definitions, a way to run one call, and
//! how they are confined. The real tool set (`src/tools/`, run in a `Sandbox`) is adapted to
//! [`ToolExecutor`] where the application builds an episode; tests use
//! [`ScriptedExecutor`](super::ScriptedExecutor).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bee_userspace::audit::{Access, AuditRecord, HookName, Verdict};

use crate::provider::{ToolCall, ToolDef};
use crate::records::{
    Denial, DenialTarget, Enforcement, ExitStatus, GrantKind, PolicyRecord, ToolState,
};

/// A flag set when the run is interrupted (Ctrl-C). Cloning shares the flag.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// A flag that is not set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag; every clone sees it.
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the flag is set.
    #[must_use]
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// The flag itself, for a signal handler to set (`signal_hook::flag::register`).
    #[must_use]
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

/// How long a tool call may run: it must stop (and report [`ToolState::Failed`] with a
/// timeout) by `deadline`, and stop as soon as it can once `interrupt` is raised. A call that
/// spends model tokens itself (a subagent) spends them from `budget`.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// The instant the call must be over by; `None` is no time limit.
    pub deadline: Option<Instant>,
    /// The run's interrupt flag.
    pub interrupt: Interrupt,
    /// The calling session's budget (`None` for the success check, which calls no model).
    pub budget: Option<Arc<super::Budget>>,
}

impl Bounds {
    /// Time left before the deadline (`None`: unbounded; zero once passed).
    #[must_use]
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }
}

/// An operation the kernel refused to a tool call, as the episode records it (the call id
/// is added by the loop).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDenial {
    /// The LSM hook that refused (`file_open`, `bprm_check_security`, `socket_connect`, …).
    pub hook: HookName,
    /// One line for people: what was refused and why.
    pub explanation: String,
    /// The file or peer the operation was aimed at.
    pub target: DenialTarget,
    /// The kind of grant that would have allowed it.
    pub missing: GrantKind,
    /// Learn mode: the policy refused it and learn mode allowed it.
    pub learn: bool,
}

impl ToolDenial {
    /// The transcript's `denial` event of this denial, in the call `call_id`.
    #[must_use]
    pub fn event(&self, call_id: &str) -> Denial {
        Denial {
            call_id: call_id.to_owned(),
            hook: self.hook.clone(),
            explanation: self.explanation.clone(),
            target: self.target.clone(),
            missing: self.missing,
            learn: self.learn,
        }
    }

    /// The denial an audit record describes; `None` for an allowed access.
    #[must_use]
    pub fn from_audit(record: &AuditRecord) -> Option<Self> {
        if record.verdict != Verdict::Deny {
            return None;
        }
        let target = match (record.addr, record.port) {
            _ if record.hook == bee_common::Hook::DnsQuery => {
                DenialTarget::Name(record.path.clone().unwrap_or_default())
            }
            _ if record.hook == bee_common::Hook::Seccomp => DenialTarget::Call(
                record
                    .syscall
                    .clone()
                    .or_else(|| record.path.clone())
                    .unwrap_or_default(),
            ),
            (Some(addr), Some(port)) => {
                DenialTarget::Peer(std::net::SocketAddr::new(addr, port).to_string())
            }
            _ if record.grant == Some(GrantKind::NetUnix) => DenialTarget::Peer(
                record
                    .path
                    .clone()
                    .unwrap_or_else(|| "@abstract".to_owned()),
            ),
            _ => DenialTarget::Path(record.path.clone().unwrap_or_default()),
        };
        let has = |a: Access| record.access.contains(&a);
        let missing = match record.grant {
            Some(grant) => grant,
            None if has(Access::Exec) => GrantKind::Exec,
            None if has(Access::Write) => GrantKind::FsWrite,
            None if has(Access::Net) => GrantKind::Net,
            None => GrantKind::FsRead,
        };
        Some(Self {
            hook: record.hook.clone(),
            explanation: record.explanation(),
            target,
            missing,
            learn: record.learn,
        })
    }
}

/// How one tool call (or the success check) ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolExecution {
    /// Which of the three states it ended in.
    pub state: ToolState,
    /// What goes back to the model. A denial must be explained here in words the model can
    /// act on (the executor writes it; the loop passes it on unchanged).
    pub content: String,
    /// How the tool's process exited, when there was one.
    pub exit: Option<ExitStatus>,
    /// What the kernel refused during the call.
    pub denials: Vec<ToolDenial>,
    /// How long the call took.
    pub duration: Duration,
    /// The subagent an `agent` call started, or why none was; the session records it
    /// before the call's result.
    pub subagent: Option<crate::records::Subagent>,
    /// Audit records the kernel lost while the call ran (`Sandbox::take_lost_records`):
    /// `denials` may then be incomplete, and `content` says so.
    pub lost_records: u64,
}

impl ToolExecution {
    /// A call that did not run, with the reason as its content.
    #[must_use]
    pub fn could_not_run(reason: impl Into<String>) -> Self {
        Self {
            state: ToolState::CouldNotRun,
            content: reason.into(),
            exit: None,
            denials: Vec::new(),
            duration: Duration::ZERO,
            subagent: None,
            lost_records: 0,
        }
    }
}

/// The tools of one episode, bound to its workspace and confinement (one per episode: its
/// own workspace copy and its own scope).
pub trait ToolExecutor: Send + Sync {
    /// The tools the model may call.
    fn definitions(&self) -> Vec<ToolDef>;

    /// Runs one call within `bounds`. Never panics on bad input: invalid arguments and
    /// unknown tools are [`ToolState::CouldNotRun`] with a reason.
    fn call(&self, call: &ToolCall, bounds: &Bounds) -> ToolExecution;

    /// Whether calls of `tool` may run at the same time as each other (subagents, each in a
    /// scope of its own). The session runs consecutive calls of such tools in one turn
    /// together and every other call alone, in order. By default none may.
    fn concurrent(&self, tool: &str) -> bool {
        let _ = tool;
        false
    }

    /// Runs the scenario's success check: `command` through `/bin/sh -c` in the workspace,
    /// confined exactly like a tool call. It passed when it completed with exit code 0.
    fn check(&self, command: &str, bounds: &Bounds) -> ToolExecution;

    /// How calls are confined: [`Enforcement::Kernel`] (a scope per call) or
    /// [`Enforcement::Host`] (explicit `--host`).
    fn enforcement(&self) -> Enforcement;

    /// The policy of the scope tool calls run in: as requested (compiled from its file) and
    /// as installed (with bee's tool-runner grant); `None` when nothing is enforced.
    fn policies(&self) -> Option<(bee_core::CompiledPolicy, bee_core::CompiledPolicy)> {
        None
    }

    /// The engine that enforces the scope (`bpf-lsm`, `landlock`); `None` when nothing is
    /// enforced.
    fn engine(&self) -> Option<bee_userspace::scope::EngineKind> {
        None
    }

    /// Tools whose calls run in a scope of their own under a narrower policy: tool name →
    /// the policy's source (its file). Empty by default.
    fn tool_policies(&self) -> std::collections::BTreeMap<String, String> {
        std::collections::BTreeMap::new()
    }

    /// What an `episode_started` event records of this executor's confinement; `source` is
    /// the policy file as given (`None` in host mode).
    fn policy_record(&self, source: Option<String>) -> PolicyRecord {
        let policies = self.policies();
        PolicyRecord {
            source,
            enforcement: self.enforcement(),
            engine: self.engine().map(Into::into),
            requested: (policies.as_ref()).and_then(|(r, _)| serde_json::to_value(r).ok()),
            installed: (policies.as_ref()).and_then(|(_, i)| serde_json::to_value(i).ok()),
            tools: self.tool_policies(),
        }
    }

    /// The kernel's most recent denials in the scope tool calls run in, oldest first, at most
    /// [`RECENT_DENIALS`] (what `/allow` offers). Empty by default.
    fn recent_denials(&self) -> Vec<AuditRecord> {
        Vec::new()
    }

    /// The policy this executor's scope must stay within, with its name in refusals: a
    /// subagent's caller's policy. `None` for a top-level session.
    fn bound(&self) -> Option<(bee_core::CompiledPolicy, String)> {
        None
    }

    /// Replaces the policy of the scope tool calls run in (as requested: bee's runner grant
    /// is added again) on the live scope, atomically for every check (`/allow`).
    ///
    /// # Errors
    /// Why not, in words, saying which policy is in force. By default: this executor cannot.
    fn replace_policy(&self, policy: &bee_core::CompiledPolicy) -> Result<(), String> {
        let _ = policy;
        Err("this executor cannot change its policy; the old one stays in force".to_owned())
    }

    /// Reads the workspace file `path` (relative to the workspace) as text for the harness
    /// (project instructions, say), through the same confinement as a tool call, keeping at
    /// most `cap` bytes.
    ///
    /// # Errors
    /// Why it could not be read, in words (a denial's explanation among them). An executor
    /// that cannot read files says so.
    fn read_text(&self, path: &str, cap: usize) -> Result<ReadText, String> {
        let _ = (path, cap);
        Err("this executor cannot read workspace files".to_owned())
    }
}

/// How many denials [`ToolExecutor::recent_denials`] keeps.
pub const RECENT_DENIALS: usize = 20;

/// A workspace file read for the harness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadText {
    /// Its text (invalid UTF-8 replaced), at most the cap asked for, cut on a character
    /// boundary.
    pub text: String,
    /// The file's whole size, bytes.
    pub total_bytes: usize,
}
