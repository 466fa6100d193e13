//! The `agent` tool's registration: its definition (the roles by name and description) and
//! its placement, [`Placement::Session`]. Its calls are answered by the layer that serves a
//! delegating session, [`AgentExecutor`](super::AgentExecutor), which finds them by this
//! registration; a session without that layer answers them `could_not_run`.

use std::sync::Arc;

use serde_json::json;

use super::{AGENT_TOOL, AgentSettings, Roles};
use crate::provider::ToolDef;
use crate::tools::{Answer, Context, Placement, Tool};

/// The `agent` tool, registered where a session may delegate ([`crate::tools::Registry`]).
#[derive(Debug, Clone)]
pub struct AgentTool {
    roles: Arc<Roles>,
    settings: AgentSettings,
}

impl AgentTool {
    /// The tool that offers `roles`, with inline policies as `settings` allow.
    #[must_use]
    pub fn new(roles: Arc<Roles>, settings: AgentSettings) -> Self {
        Self { roles, settings }
    }
}

impl Tool for AgentTool {
    /// The `agent` tool as the model sees it: the roles by name and description.
    fn definition(&self) -> ToolDef {
        let mut text = String::from(
            "Start a subagent: another agent with a sandbox of its own, whose policy bee first \
             proves grants nothing yours does not. It works on `task` alone, with no view of \
             this conversation, and its final answer comes back as this tool's result. \
             Several agent calls in one turn run at the same time. Its tokens, cost and time \
             count against your limits.",
        );
        if self.roles.iter().next().is_some() {
            text.push_str("\n\nRoles:");
            for role in self.roles.iter() {
                let words: Vec<&str> = role.description.split_whitespace().collect();
                text.push_str(&format!("\n- {}: {}", role.name, words.join(" ")));
            }
        }
        let mut properties = json!({
            "role": {"type": "string", "description": "The role's name."},
            "task": {"type": "string", "description": "What the subagent must do, with everything it needs to know."},
        });
        if self.settings.inline_policy {
            text.push_str(
                "\n\nInstead of a role you may pass `policy`: the TOML text of a bee policy \
                 (paths relative to the workspace). It gets the same proof.",
            );
            properties["policy"] = json!({"type": "string", "description": "A bee policy's TOML text, instead of a role."});
        }
        ToolDef {
            name: AGENT_TOOL.to_owned(),
            description: text,
            parameters: json!({
                "type": "object",
                "properties": properties,
                "required": ["task"],
                "additionalProperties": false,
            }),
        }
    }

    fn placement(&self) -> Placement {
        Placement::Session
    }

    /// Only reached in a session that does not delegate (its executor has no
    /// [`AgentExecutor`](super::AgentExecutor) layer): nothing is started.
    fn call(&self, _args: &serde_json::Value, _ctx: &Context<'_>) -> Answer {
        Answer::could_not_run(
            "no subagent was started: this session cannot delegate (no `agent` layer serves it)"
                .to_owned(),
        )
    }
}
