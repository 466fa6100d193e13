//! The `skill` tool: a harness-side tool (no sandbox, no workspace access) that answers with
//! a skill's instructions, which were read when the skills were discovered.

use std::sync::Arc;

use super::{SkillSet, skill_tool_def};
use crate::provider::ToolDef;
use crate::tools::{Answer, Context, Placement, Tool};

/// The `skill` tool over a set of skills.
#[derive(Debug, Clone)]
pub struct SkillTool {
    skills: Arc<SkillSet>,
}

impl SkillTool {
    /// The tool for `skills`.
    #[must_use]
    pub fn new(skills: Arc<SkillSet>) -> Self {
        Self { skills }
    }
}

impl Tool for SkillTool {
    fn definition(&self) -> ToolDef {
        skill_tool_def()
    }

    fn placement(&self) -> Placement {
        Placement::Harness
    }

    fn call(&self, args: &serde_json::Value, _ctx: &Context<'_>) -> Answer {
        match self.skills.call(args) {
            Ok(instructions) => Answer::completed(instructions),
            Err(why) => Answer::could_not_run(why),
        }
    }
}
