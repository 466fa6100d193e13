//! bee's tools in MCP's terms: a [`ToolDef`] as an MCP tool (its JSON Schema unchanged, with
//! annotations where they hold), and a [`ToolExecution`] as a `tools/call` result.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};

use crate::provider::ToolDef;
use crate::records::ToolState;
use crate::session::ToolExecution;

/// Tools that only read: the workspace's files (`read_file`, `list_dir`, `glob`, `grep`,
/// `ast_grep`), its history (`git_log`), the findings ledger (`list_findings`), or nothing
/// at all (`cvss`, which scores a vector).
const READ_ONLY: [&str; 8] = [
    "read_file",
    "list_dir",
    "glob",
    "grep",
    "ast_grep",
    "git_log",
    "cvss",
    "list_findings",
];

/// Tools that change files and may lose what was there: `write_file` replaces a file
/// (the same call twice leaves the same file), `edit_file` replaces text in one.
const OVERWRITES: [(&str, bool); 2] = [("write_file", true), ("edit_file", false)];

/// The hints MCP clients show for `name`; `None` where no hint is known to hold (the
/// shell, which may do anything its policy allows, keeps MCP's defaults).
#[must_use]
pub fn annotations(name: &str) -> Option<ToolAnnotations> {
    if READ_ONLY.contains(&name) {
        return Some(ToolAnnotations::new().read_only(true).open_world(false));
    }
    OVERWRITES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, idempotent)| {
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(*idempotent)
                .open_world(false)
        })
}

/// The MCP tool for `def`: the same name, description and JSON Schema the model providers
/// are given. A schema that is not a JSON object (none of bee's) becomes `{"type": "object"}`.
#[must_use]
pub fn tool(def: &ToolDef) -> Tool {
    let schema = match &def.parameters {
        serde_json::Value::Object(map) => map.clone(),
        _ => {
            let mut map = serde_json::Map::new();
            map.insert("type".to_owned(), serde_json::Value::from("object"));
            map
        }
    };
    let tool = Tool::new(def.name.clone(), def.description.clone(), Arc::new(schema));
    match annotations(&def.name) {
        Some(a) => tool.annotate(a),
        None => tool,
    }
}

/// The `tools/call` result of `exec`: its content, the same text bee's own model is given
/// (a denial's explanation included), as one text block. It is an error unless the call
/// completed with nothing refused: a command that ran on after the kernel refused it
/// something (`cat` of a file outside the policy exits 1, and completes) is an error too,
/// so that the client sees the refusal.
#[must_use]
pub fn result(exec: &ToolExecution) -> CallToolResult {
    let content = vec![ContentBlock::text(exec.content.clone())];
    let refused = exec.denials.iter().any(|d| !d.learn);
    if exec.state == ToolState::Completed && !refused {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::records::{DenialTarget, GrantKind};
    use crate::session::ToolDenial;
    use crate::tools::{Registry, ToolLimits};

    #[test]
    fn every_builtin_tool_keeps_its_schema() {
        let registry = Registry::standard(ToolLimits::default());
        let defs = registry.definitions();
        assert!(defs.iter().any(|d| d.name == "shell"));
        for def in &defs {
            let t = tool(def);
            assert_eq!(t.name, def.name);
            assert_eq!(t.description.as_deref(), Some(def.description.as_str()));
            assert_eq!(
                serde_json::Value::Object((*t.input_schema).clone()),
                def.parameters,
                "{}",
                def.name
            );
        }
    }

    #[test]
    fn hints_are_set_only_where_they_hold() {
        let registry = Registry::standard(ToolLimits::default());
        let tools: Vec<Tool> = registry.definitions().iter().map(tool).collect();
        let hint = |name: &str| {
            tools
                .iter()
                .find(|t| t.name == name)
                .and_then(|t| t.annotations.clone())
        };
        for name in ["read_file", "list_dir", "glob", "grep"] {
            assert_eq!(
                hint(name).and_then(|a| a.read_only_hint),
                Some(true),
                "{name}"
            );
        }
        let write = hint("write_file").unwrap_or_default();
        assert_eq!(write.read_only_hint, Some(false));
        assert_eq!(write.destructive_hint, Some(true));
        assert_eq!(hint("shell"), None);
    }

    fn execution(state: ToolState, content: &str) -> ToolExecution {
        ToolExecution {
            state,
            content: content.to_owned(),
            exit: None,
            denials: Vec::new(),
            duration: Duration::from_millis(3),
            subagent: None,
            lost_records: 0,
        }
    }

    #[test]
    fn a_denial_is_an_error_result_with_the_explanation() {
        let text = "denied by policy: open /tmp/secret for read: no fs.read grant covers it";
        let mut exec = execution(ToolState::Completed, text);
        exec.denials.push(ToolDenial {
            hook: bee_common::Hook::FileOpen.into(),
            explanation: text.to_owned(),
            target: DenialTarget::Path("/tmp/secret".to_owned()),
            missing: GrantKind::FsRead,
            learn: false,
        });
        let r = result(&exec);
        assert_eq!(r.is_error, Some(true));
        let json = serde_json::to_value(&r).unwrap_or_default();
        assert_eq!(json["content"][0]["type"], "text");
        assert_eq!(json["content"][0]["text"], text);
        assert_eq!(json["isError"], true);
    }

    #[test]
    fn a_completed_call_is_a_success_and_a_failed_one_an_error() {
        assert_eq!(
            result(&execution(ToolState::Completed, "hi\n")).is_error,
            Some(false)
        );
        assert_eq!(
            result(&execution(ToolState::Failed, "timed out")).is_error,
            Some(true)
        );
    }
}
