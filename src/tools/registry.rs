//! The registry: the tools of a session, by name, each with where it runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use super::ToolOutcome;
use super::{Answer, Context, Placement, RUNNER_TOOLS, RunnerTool, ShellTool, Tool, ToolLimits};
use crate::provider::{ToolCall, ToolDef};
use crate::sandbox::Sandbox;

/// Why a tool could not be registered or removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Two tools with one name.
    #[error("a tool named `{0}` is registered already")]
    Duplicate(String),
    /// A name no tool has.
    #[error("there is no tool `{name}` (the tools are {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
}

/// The tools a session offers the model, in registration order, and the limits of their
/// calls. Built-in tools come from [`Registry::standard`]; optional ones (skills, and
/// feature-gated tools) are added with [`Registry::register`] where the session is set up.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    order: Vec<String>,
    limits: ToolLimits,
}

impl Registry {
    /// No tools, with `limits`.
    #[must_use]
    pub fn new(limits: ToolLimits) -> Self {
        Self {
            tools: BTreeMap::new(),
            order: Vec::new(),
            limits,
        }
    }

    /// bee's built-in tools: the six file tools (run as `bee __tool NAME`), the shell, and the
    /// review tools this build was compiled with (`ast_grep`, `git_log`, `cvss`; none by
    /// default).
    #[must_use]
    pub fn standard(limits: ToolLimits) -> Self {
        let mut r = Self::new(limits);
        let builtins = RUNNER_TOOLS
            .iter()
            .filter_map(|name| RunnerTool::new(name))
            .map(|t| Arc::new(t) as Arc<dyn Tool>)
            .chain(std::iter::once(Arc::new(ShellTool) as Arc<dyn Tool>))
            .chain(super::review::tools());
        for tool in builtins {
            // The built-in names are distinct.
            let _ = r.register(tool);
        }
        r
    }

    /// Adds `tool` after the others.
    ///
    /// # Errors
    /// [`RegistryError::Duplicate`] when its name is taken.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.definition().name;
        if self.tools.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        self.order.push(name.clone());
        self.tools.insert(name, tool);
        Ok(())
    }

    /// Removes the tool `name` (a tool the configuration disables).
    ///
    /// # Errors
    /// [`RegistryError::Unknown`] when no tool has that name.
    pub fn remove(&mut self, name: &str) -> Result<(), RegistryError> {
        if self.tools.remove(name).is_none() {
            return Err(RegistryError::Unknown {
                name: name.to_owned(),
                known: self.order.join(", "),
            });
        }
        self.order.retain(|n| n != name);
        Ok(())
    }

    /// The same limits with only the tools `keep` names, in this registry's order (names it
    /// does not have are ignored).
    #[must_use]
    pub fn retain(&self, keep: &[&str]) -> Self {
        let mut r = self.clone();
        r.order.retain(|n| keep.contains(&n.as_str()));
        r.tools.retain(|n, _| keep.contains(&n.as_str()));
        r
    }

    /// The same limits with only the tool `name`.
    #[must_use]
    pub fn only(&self, name: &str) -> Self {
        self.retain(&[name])
    }

    /// The limits of every call.
    #[must_use]
    pub fn limits(&self) -> &ToolLimits {
        &self.limits
    }

    /// The same tools with other limits (a call's, shortened by a deadline).
    #[must_use]
    pub fn with_limits(&self, limits: ToolLimits) -> Self {
        Self {
            limits,
            ..self.clone()
        }
    }

    /// The registered names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// Where the tool `name` runs, if it is registered.
    #[must_use]
    pub fn placement(&self, name: &str) -> Option<Placement> {
        self.tools.get(name).map(|t| t.placement())
    }

    /// The tools the session's own layer answers ([`Placement::Session`]: `agent`), in order;
    /// a session whose registry has one delegates.
    pub fn session_tools(&self) -> impl Iterator<Item = &str> {
        self.names()
            .filter(|n| self.placement(n) == Some(Placement::Session))
    }

    /// The definitions the model is given, in order.
    #[must_use]
    pub fn definitions(&self) -> Vec<ToolDef> {
        self.order
            .iter()
            .filter_map(|n| self.tools.get(n))
            .map(|t| t.definition())
            .collect()
    }

    /// Runs `call`: harness tools without the sandbox, the others in it.
    pub fn call(&self, sandbox: &Sandbox, call: &ToolCall) -> ToolOutcome {
        self.call_until(sandbox, call, &|| false)
    }

    /// Runs `call` as [`Registry::call`] does, stopping it as soon as `stop` answers true.
    pub fn call_until(
        &self,
        sandbox: &Sandbox,
        call: &ToolCall,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> ToolOutcome {
        let start = Instant::now();
        let answer = match (call.parsed_arguments(), self.tools.get(&call.name)) {
            (_, None) => Answer::could_not_run(format!(
                "there is no tool `{}`; the tools are {}",
                call.name,
                self.order.join(", ")
            )),
            (Err(e), Some(_)) => {
                Answer::could_not_run(format!("the arguments are not valid JSON: {e}"))
            }
            (Ok(args), Some(_)) if !args.is_object() => {
                Answer::could_not_run("the arguments must be a JSON object".to_owned())
            }
            (Ok(args), Some(tool)) => {
                let ctx = Context {
                    sandbox: matches!(tool.placement(), Placement::Runner | Placement::Command)
                        .then_some(sandbox),
                    limits: &self.limits,
                    stop,
                };
                tool.call(&args, &ctx)
            }
        };
        answer.into_outcome(sandbox.enforcement(), start.elapsed())
    }
}
