//! The definitions of the review tools that run in the scope (`ast_grep`, `git_log`).

#[cfg(any(feature = "astgrep", feature = "gitlog"))]
use serde_json::json;

#[cfg(any(feature = "astgrep", feature = "gitlog"))]
use crate::provider::ToolDef;

/// `ast_grep`: its description names the languages this build was compiled with.
#[cfg(feature = "astgrep")]
pub(crate) fn ast_grep() -> ToolDef {
    let languages = crate::tools::runner::ast_grep_languages().join(", ");
    let languages = if languages.is_empty() {
        "none (this build has no grammar)".to_owned()
    } else {
        languages
    };
    ToolDef {
        name: crate::tools::runner::AST_GREP.to_owned(),
        description: format!(
            "Structural code search (ast-grep): a pattern is code of the language, with \
             metavariables `$NAME` (one node), `$$$NAME` (zero or more nodes) and `$_` (any \
             node, not captured), e.g. `$X.unwrap()` or `unsafe {{ $$$BODY }}`. Matches are \
             syntax nodes, so text in comments and string literals never matches; in Rust, \
             code inside macro invocations (`println!(...)`, `vec![...]`) is a token tree and \
             is not searched. Each match is shown as `path:line:column: text` with its \
             metavariable bindings. Files that do not parse cleanly are listed, and so are \
             suppression comments (nosemgrep, ast-grep-ignore, …) near a match: they are \
             reported, not obeyed. mode `dump` shows the syntax tree of `pattern` parsed as \
             code, to learn the node kinds. Languages in this build: {languages}."
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The pattern (mode `search`), or the code whose syntax tree to show (mode `dump`)."},
                "language": {"type": "string", "description": "The language of the pattern and of the files searched (e.g. `rust`, `python`)."},
                "paths": {"type": "array", "items": {"type": "string"}, "description": "Files or directories to search, relative to the workspace (default `.`). Directories are searched for files of the language; files named here are parsed as the language whatever their extension."},
                "globs": {"type": "array", "items": {"type": "string"}, "description": "Only files matching one of these globs (against the file name, or the path below the searched directory if the glob contains `/`)."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "The most matches to show (default 100); all are counted."},
                "mode": {"type": "string", "enum": ["search", "dump"], "description": "`search` (default) or `dump`."}
            },
            "required": ["pattern", "language"],
            "additionalProperties": false
        }),
    }
}

/// `git_log`.
#[cfg(feature = "gitlog")]
pub(crate) fn git_log() -> ToolDef {
    ToolDef {
        name: crate::tools::runner::GIT_LOG.to_owned(),
        description: "Read the repository's history (read-only). mode `log`: the commits that \
                      changed `path`, newest first, following renames (each with id, date, \
                      author and summary). mode `blame`: the commit that last changed one line \
                      of `path` as committed at `rev` (id, author, date, summary, and the \
                      path and line it had there)."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["log", "blame"], "description": "`log` (default) or `blame`."},
                "path": {"type": "string", "description": "A file or directory, relative to the workspace; `log` without it lists every commit."},
                "line": {"type": "integer", "minimum": 1, "description": "The line to blame (1-based; mode `blame`)."},
                "rev": {"type": "string", "description": "Where to start: a commit, branch or tag (default HEAD)."},
                "max_count": {"type": "integer", "minimum": 1, "maximum": 500, "description": "The most commits to list (default 20)."},
                "follow": {"type": "boolean", "description": "Follow renames in `log` (default true)."}
            },
            "additionalProperties": false
        }),
    }
}
