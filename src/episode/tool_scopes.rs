//! Per-tool scopes: calls of a tool the configuration gives a narrower policy
//! (`[tools.shell] policy = "…"`) run in a scope of their own under that policy; every other
//! call runs in the session's scope. Executors that bring tools of their own (an MCP server's,
//! in a scope of its own) join with theirs.

use std::collections::BTreeMap;

use crate::provider::{ToolCall, ToolDef};
use crate::records::Enforcement;
use crate::session::{Bounds, ReadText, ToolExecution, ToolExecutor};

/// A session's executor with some tools routed to executors of their own. The session sees
/// one executor: the tools, the success check, project instructions and the policy it
/// records are the session scope's.
pub struct ToolScopes<'a> {
    session: Box<dyn ToolExecutor + 'a>,
    /// Tool name → (its policy's source, the executor of its scope).
    scoped: BTreeMap<String, (String, Box<dyn ToolExecutor + 'a>)>,
    /// Executors offering tools the session's does not (MCP servers), each with its tools'
    /// names.
    joined: Vec<(Vec<String>, Box<dyn ToolExecutor + 'a>)>,
    /// The policy the session's scope must stay within, and its name (a subagent's caller's).
    bound: Option<(bee_core::CompiledPolicy, String)>,
}

impl std::fmt::Debug for ToolScopes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolScopes")
            .field("scoped", &self.scoped.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl<'a> ToolScopes<'a> {
    /// Routes nothing yet: every call goes to `session`.
    #[must_use]
    pub fn new(session: Box<dyn ToolExecutor + 'a>) -> Self {
        Self {
            session,
            scoped: BTreeMap::new(),
            joined: Vec::new(),
            bound: None,
        }
    }

    /// The session's scope must stay within `parent` (named `name` in refusals): a subagent's
    /// caller's policy. `/allow`-style changes are proven against it
    /// ([`ToolExecutor::bound`]).
    #[must_use]
    pub fn bounded_by(mut self, parent: bee_core::CompiledPolicy, name: String) -> Self {
        self.bound = Some((parent, name));
        self
    }

    /// Runs calls of `tool` through `executor` (a scope under the policy from `source`).
    #[must_use]
    pub fn route(
        mut self,
        tool: &str,
        source: String,
        executor: Box<dyn ToolExecutor + 'a>,
    ) -> Self {
        self.scoped.insert(tool.to_owned(), (source, executor));
        self
    }

    /// Offers `executor`'s tools beside the session's and runs their calls through it (an
    /// MCP server in a scope of its own). The caller keeps names apart: a name the session
    /// or an earlier executor offers stays theirs.
    #[must_use]
    pub fn join(mut self, executor: Box<dyn ToolExecutor + 'a>) -> Self {
        let names = executor.definitions().into_iter().map(|d| d.name).collect();
        self.joined.push((names, executor));
        self
    }

    /// The executor `tool`'s calls go to.
    fn for_tool(&self, tool: &str) -> &dyn ToolExecutor {
        if let Some((_, x)) = self.scoped.get(tool) {
            return x.as_ref();
        }
        self.joined
            .iter()
            .find(|(names, _)| names.iter().any(|n| n == tool))
            .map_or(self.session.as_ref(), |(_, x)| x.as_ref())
    }
}

impl ToolExecutor for ToolScopes<'_> {
    fn definitions(&self) -> Vec<ToolDef> {
        let mut defs = self.session.definitions();
        for (_, x) in &self.joined {
            defs.extend(x.definitions());
        }
        defs
    }

    fn call(&self, call: &ToolCall, bounds: &Bounds) -> ToolExecution {
        self.for_tool(&call.name).call(call, bounds)
    }

    fn concurrent(&self, tool: &str) -> bool {
        self.for_tool(tool).concurrent(tool)
    }

    fn check(&self, command: &str, bounds: &Bounds) -> ToolExecution {
        self.session.check(command, bounds)
    }

    fn enforcement(&self) -> Enforcement {
        self.session.enforcement()
    }

    fn policies(&self) -> Option<(bee_core::CompiledPolicy, bee_core::CompiledPolicy)> {
        self.session.policies()
    }

    fn engine(&self) -> Option<bee_userspace::scope::EngineKind> {
        self.session.engine()
    }

    fn tool_policies(&self) -> BTreeMap<String, String> {
        let mut all = self.session.tool_policies();
        for (tool, (source, _)) in &self.scoped {
            all.insert(tool.clone(), source.clone());
        }
        for (_, x) in &self.joined {
            all.extend(x.tool_policies());
        }
        all
    }

    fn read_text(&self, path: &str, cap: usize) -> Result<ReadText, String> {
        self.session.read_text(path, cap)
    }

    fn recent_denials(&self) -> Vec<bee_userspace::audit::AuditRecord> {
        self.session.recent_denials()
    }

    fn bound(&self) -> Option<(bee_core::CompiledPolicy, String)> {
        self.bound.clone().or_else(|| self.session.bound())
    }

    fn replace_policy(&self, policy: &bee_core::CompiledPolicy) -> Result<(), String> {
        if let Some((parent, name)) = self.bound() {
            let proof = bee_core::attenuate(policy, &parent);
            if !proof.is_subset() {
                return Err(format!(
                    "{}; the old policy stays in force",
                    proof.refusal("the new policy", &name)
                ));
            }
        }
        self.session.replace_policy(policy)
    }
}
