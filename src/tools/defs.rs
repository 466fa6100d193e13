//! The tool definitions the model is given: a name, a description and a JSON Schema each.

use serde_json::json;

use super::{SHELL_TOOL, runner};
use crate::provider::ToolDef;

fn def(name: &str, description: &str, parameters: serde_json::Value) -> ToolDef {
    ToolDef {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    }
}

/// The built-in tool `name`'s definition.
pub(crate) fn definition(name: &str) -> Option<ToolDef> {
    definitions().into_iter().find(|d| d.name == name)
}

/// Every built-in tool's definition, in a fixed order.
fn definitions() -> Vec<ToolDef> {
    vec![
        def(
            runner::READ_FILE,
            "Read a text file. Paths are relative to the workspace. Each line is shown with its \
             number and a tab, which are not part of the file. Long files are cut: the result \
             says which lines were shown and the offset to read on from.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace."},
                    "offset": {"type": "integer", "minimum": 1, "description": "The first line to show (1-based; default 1)."},
                    "limit": {"type": "integer", "minimum": 1, "description": "The most lines to show (default 2000)."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        def(
            runner::WRITE_FILE,
            "Write a file, replacing it if it exists. Missing parent directories are created \
             only with create_dirs.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace."},
                    "content": {"type": "string", "description": "The whole new content."},
                    "create_dirs": {"type": "boolean", "description": "Create missing parent directories (default false)."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        ),
        def(
            runner::EDIT_FILE,
            "Replace an exact string in a file. old_string must occur exactly once, unless \
             replace_all is set; otherwise nothing is changed and the result says how many \
             matches there are and on which lines.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace."},
                    "old_string": {"type": "string", "description": "The exact text to replace (not empty)."},
                    "new_string": {"type": "string", "description": "The text to put in its place."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        ),
        def(
            runner::LIST_DIR,
            "List a directory: one entry per line, directories ending in `/`, symbolic links \
             in `@`.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The directory, relative to the workspace (default `.`)."}
                },
                "additionalProperties": false
            }),
        ),
        def(
            runner::GLOB,
            "Find files whose path (relative to `path`) matches a glob such as `src/**/*.rs`. \
             Files ignored by .gitignore are skipped.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "The glob; `*` stays within a directory, `**` crosses directories."},
                    "path": {"type": "string", "description": "The directory to search, relative to the workspace (default `.`)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        def(
            runner::GREP,
            "Search file contents with a regular expression (Rust regex syntax). Prints \
             `path:line:text` for matches and `path-line-text` for context lines. Files \
             ignored by .gitignore and binary files are skipped.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "The regular expression."},
                    "path": {"type": "string", "description": "A file or directory to search, relative to the workspace (default `.`)."},
                    "glob": {"type": "string", "description": "Only files matching this glob (matched against the file name, or the relative path if it contains `/`)."},
                    "context": {"type": "integer", "minimum": 0, "maximum": 20, "description": "Lines of context before and after each match (default 0)."},
                    "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        def(
            SHELL_TOOL,
            "Run a command with /bin/sh -c in the workspace. Output is cut beyond a limit, and \
             the result says so. At the timeout the command and its process group are killed; \
             background processes do not outlive the call.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command."},
                    "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Seconds before it is killed (default 120)."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        ),
    ]
}
