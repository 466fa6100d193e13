//! `bee repl --approve` (`repl.approve = true`): the person approves, one by one, the tool
//! calls that reach beyond the workspace — every `shell` command, every call whose `path`
//! argument lies outside the workspace, and every `agent` call (a subagent's own calls are
//! not asked about) — before they run. A call not approved does not run: the model gets a
//! result saying that the user declined it.
//!
//! The question is asked on the terminal; when standard input is not one, every such call is
//! refused without asking (fail closed). Meant for `--host`, where nothing else stands
//! between the model and the machine; with a policy it asks as well, before the kernel's
//! checks.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use bee_core::CompiledPolicy;

use crate::agents::AGENT_TOOL;
use crate::provider::{ToolCall, ToolDef};
use crate::records::Enforcement;
use crate::session::{Bounds, ReadText, ToolExecution, ToolExecutor};

/// The question asked under the call's description.
pub(crate) const QUESTION: &str = "run? [y/N] ";

/// How the person is asked: the call's description in, `true` for yes. `None` when there is
/// no one to ask (standard input is not a terminal).
pub(crate) type Ask<'a> = Option<&'a (dyn Fn(&str) -> bool + Sync)>;

/// A tool executor that asks before the calls [`needs_approval`] names.
pub(crate) struct Approving<'a> {
    inner: Box<dyn ToolExecutor + 'a>,
    workspace: PathBuf,
    ask: Ask<'a>,
    /// One question at a time, whatever runs concurrently.
    asking: Mutex<()>,
}

impl<'a> Approving<'a> {
    /// Wraps `inner`, whose workspace is `workspace`; `ask` asks the person.
    pub(crate) fn new(inner: Box<dyn ToolExecutor + 'a>, workspace: &Path, ask: Ask<'a>) -> Self {
        Self {
            inner,
            workspace: workspace.to_owned(),
            ask,
            asking: Mutex::new(()),
        }
    }
}

/// What a call that needs approval does, in a few words (`shell ls -l`, `read_file
/// /etc/shadow (outside the workspace)`); `None` when the call needs none.
pub(crate) fn needs_approval(call: &ToolCall, workspace: &Path) -> Option<String> {
    let args: serde_json::Value =
        serde_json::from_str(&call.arguments).unwrap_or(serde_json::Value::Null);
    let text = |key: &str| args.get(key).and_then(serde_json::Value::as_str);
    if call.name == "shell" {
        return Some(format!(
            "shell {}",
            text("command").unwrap_or(&call.arguments)
        ));
    }
    if call.name == AGENT_TOOL {
        return Some(format!(
            "agent {}: {} (the subagent's own tool calls are not asked about)",
            text("role").unwrap_or("(inline policy)"),
            text("task").unwrap_or(&call.arguments)
        ));
    }
    let path = text("path")?;
    outside(workspace, path).then(|| format!("{} {path} (outside the workspace)", call.name))
}

/// Whether `path` (relative to `workspace`, or absolute) lies outside it: lexically, or once
/// symbolic links are resolved, as far as it exists.
fn outside(workspace: &Path, path: &str) -> bool {
    let joined = workspace.join(path);
    if !normalize(&joined).starts_with(normalize(workspace)) {
        return true;
    }
    let Ok(root) = std::fs::canonicalize(workspace) else {
        return false;
    };
    // The deepest part of the path that exists, with its links resolved.
    joined
        .ancestors()
        .find_map(|p| std::fs::canonicalize(p).ok())
        .is_some_and(|real| !real.starts_with(&root))
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

impl ToolExecutor for Approving<'_> {
    fn definitions(&self) -> Vec<ToolDef> {
        self.inner.definitions()
    }

    fn call(&self, call: &ToolCall, bounds: &Bounds) -> ToolExecution {
        let Some(what) = needs_approval(call, &self.workspace) else {
            return self.inner.call(call, bounds);
        };
        let Some(ask) = self.ask else {
            return ToolExecution::could_not_run(format!(
                "not run: the user declined `{what}` — bee repl --approve asks before this \
                 call and there was no terminal to ask on, so it was refused. Do not try to \
                 get around it: say what you needed and why."
            ));
        };
        let yes = {
            let _one = self.asking.lock();
            ask(&what)
        };
        if yes && !bounds.interrupt.is_raised() {
            return self.inner.call(call, bounds);
        }
        ToolExecution::could_not_run(format!(
            "not run: the user declined `{what}`. Do not try to get around it: say what you \
             needed and why, or ask them."
        ))
    }

    fn concurrent(&self, tool: &str) -> bool {
        // Calls that are asked about are asked one at a time, in order.
        tool != AGENT_TOOL && self.inner.concurrent(tool)
    }

    fn check(&self, command: &str, bounds: &Bounds) -> ToolExecution {
        self.inner.check(command, bounds)
    }

    fn enforcement(&self) -> Enforcement {
        self.inner.enforcement()
    }

    fn policies(&self) -> Option<(CompiledPolicy, CompiledPolicy)> {
        self.inner.policies()
    }

    fn engine(&self) -> Option<bee_userspace::scope::EngineKind> {
        self.inner.engine()
    }

    fn tool_policies(&self) -> std::collections::BTreeMap<String, String> {
        self.inner.tool_policies()
    }

    fn recent_denials(&self) -> Vec<bee_userspace::audit::AuditRecord> {
        self.inner.recent_denials()
    }

    fn bound(&self) -> Option<(CompiledPolicy, String)> {
        self.inner.bound()
    }

    fn replace_policy(&self, policy: &CompiledPolicy) -> Result<(), String> {
        self.inner.replace_policy(policy)
    }

    fn read_text(&self, path: &str, cap: usize) -> Result<ReadText, String> {
        self.inner.read_text(path, cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "c1".to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    #[test]
    fn shell_agent_and_paths_outside_the_workspace_need_approval() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = ws.path();
        let asks = |name, args| needs_approval(&call(name, args), ws);
        assert_eq!(
            asks("shell", r#"{"command": "touch x"}"#).as_deref(),
            Some("shell touch x")
        );
        assert!(asks("agent", r#"{"role": "r", "task": "t"}"#).is_some());
        assert_eq!(
            asks("read_file", r#"{"path": "/etc/shadow"}"#).as_deref(),
            Some("read_file /etc/shadow (outside the workspace)")
        );
        assert!(asks("list_dir", r#"{"path": "../.."}"#).is_some());
        assert_eq!(asks("read_file", r#"{"path": "notes.md"}"#), None);
        assert_eq!(asks("list_dir", r#"{"path": "./a/../b"}"#), None);
        assert_eq!(asks("render", r#"{"script": "x"}"#), None);
        // A link inside the workspace that leads out of it is outside.
        std::os::unix::fs::symlink("/etc", ws.join("etc")).unwrap_or_else(|e| panic!("{e}"));
        assert!(asks("read_file", r#"{"path": "etc/hostname"}"#).is_some());
    }
}
