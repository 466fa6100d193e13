//! The tool runner: the file tools as they run inside the sandbox, as `bee __tool NAME`.
//!
//! The harness writes one [`RunnerRequest`] as JSON to the runner's standard input; the runner
//! does the work in its own process — where the kernel checks every open, create and rename
//! against the scope's policy — and prints one [`RunnerResponse`] as JSON. Paths are resolved
//! against the workspace; a path outside it is still attempted (the kernel decides, not the
//! harness; with `--host` nothing does), and the answer notes that it is outside.

#[cfg(feature = "astgrep")]
mod ast_grep;
mod files;
#[cfg(feature = "gitlog")]
mod git_log;
mod search;

use std::io;
use std::path::{Component, Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::ToolState;

/// What the harness asks of the runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerRequest {
    /// The workspace (absolute); relative paths resolve against it.
    pub workspace: PathBuf,
    /// Most bytes of content to return.
    pub output_cap: usize,
    /// The tool's arguments, as the model gave them.
    pub args: serde_json::Value,
    /// How long a tool that walks history may work before it answers with what it has (the
    /// harness kills the runner at its timeout, which is longer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_budget_ms: Option<u64>,
    /// The runner is a hardened host process with no kernel scope (`--host`): no policy
    /// decides what it may do, and its notes say so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unconfined: bool,
}

/// What the runner answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerResponse {
    /// The state.
    pub state: ToolState,
    /// The output, or what went wrong.
    pub content: String,
    /// The OS error number of a failed I/O operation, when that is why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
}

impl RunnerResponse {
    /// A completed answer.
    pub fn completed(content: String) -> Self {
        Self {
            state: ToolState::Completed,
            content,
            errno: None,
        }
    }

    /// A failed answer.
    pub fn failed(content: String) -> Self {
        Self {
            state: ToolState::Failed,
            content,
            errno: None,
        }
    }

    /// An answer for a tool that did not run.
    pub fn could_not_run(content: String) -> Self {
        Self {
            state: ToolState::CouldNotRun,
            content,
            errno: None,
        }
    }

    /// A failed I/O operation `op` on `target`.
    pub(crate) fn io(op: &str, target: &Target, e: &io::Error) -> Self {
        Self {
            state: ToolState::Failed,
            content: format!("{op} `{}`: {e}", target.shown),
            errno: e.raw_os_error(),
        }
    }

    /// Adds the outside-the-workspace note of `target`, if any: before the output of a
    /// completed call, after the error of one that was not.
    pub(crate) fn noted(mut self, target: &Target) -> Self {
        if let Some(note) = target.note() {
            self.content = match self.state {
                ToolState::Completed => format!("{note}\n{}", self.content),
                _ => format!("{}\n{note}", self.content.trim_end()),
            };
        }
        self
    }
}

/// The languages `ast_grep` searches in this build (its grammar features), e.g. `rust`.
#[cfg(feature = "astgrep")]
pub fn ast_grep_languages() -> Vec<String> {
    ast_grep::languages()
}

/// `read_file`: a text file's lines, numbered.
pub const READ_FILE: &str = "read_file";
/// `write_file`: creates or replaces a file.
pub const WRITE_FILE: &str = "write_file";
/// `edit_file`: replaces exact text in a file.
pub const EDIT_FILE: &str = "edit_file";
/// `list_dir`: a directory's entries.
pub const LIST_DIR: &str = "list_dir";
/// `glob`: files whose path matches a glob.
pub const GLOB: &str = "glob";
/// `grep`: file contents that match a regular expression.
pub const GREP: &str = "grep";
/// The runner's one tool the model is never offered: a workspace file's raw text for the
/// harness (project instructions), answered as `{"text": …, "total_bytes": N}`.
pub const READ_TEXT: &str = "read_text";
/// `ast_grep` (feature `astgrep`): structural code search.
#[cfg(feature = "astgrep")]
pub const AST_GREP: &str = "ast_grep";
/// `git_log` (feature `gitlog`): history and blame.
#[cfg(feature = "gitlog")]
pub const GIT_LOG: &str = "git_log";

/// One tool the runner serves: its name (`bee __tool NAME`) and the function that answers a
/// call of it. [`TOOLS`] holds every one; [`run`] dispatches by name through it.
#[derive(Clone, Copy)]
pub struct RunnerEntry {
    /// The tool's name, as the harness runs it and the model calls it.
    pub name: &'static str,
    run: fn(Call<'_>) -> RunnerResponse,
}

impl std::fmt::Debug for RunnerEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunnerEntry")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Every tool the runner serves, one registration each; a feature-gated tool is one
/// `#[cfg]`'d entry. The harness offers the model these under the same names
/// ([`super::RUNNER_TOOLS`] and the review tools), except [`READ_TEXT`].
pub static TOOLS: &[RunnerEntry] = &[
    RunnerEntry {
        name: READ_FILE,
        run: |c| c.with(files::read_file),
    },
    RunnerEntry {
        name: WRITE_FILE,
        run: |c| c.with(files::write_file),
    },
    RunnerEntry {
        name: EDIT_FILE,
        run: |c| c.with(files::edit_file),
    },
    RunnerEntry {
        name: LIST_DIR,
        run: |c| c.with(files::list_dir),
    },
    RunnerEntry {
        name: GLOB,
        run: |c| c.with(search::glob),
    },
    RunnerEntry {
        name: GREP,
        run: |c| c.with(search::grep),
    },
    RunnerEntry {
        name: READ_TEXT,
        run: |c| c.with(files::read_text),
    },
    #[cfg(feature = "astgrep")]
    RunnerEntry {
        name: AST_GREP,
        run: |c| c.with(ast_grep::ast_grep),
    },
    #[cfg(feature = "gitlog")]
    RunnerEntry {
        name: GIT_LOG,
        run: |c| {
            let budget = c.time_budget_ms;
            c.with(|cx, a| git_log::git_log(cx, a, budget))
        },
    },
];

/// Runs the tool `name` on the JSON request `input`: the [`TOOLS`] entry of that name, or
/// `could_not_run` (`the tool runner has no tool `NAME``) when there is none.
pub fn run(name: &str, input: &[u8]) -> RunnerResponse {
    let request: RunnerRequest = match serde_json::from_slice(input) {
        Ok(r) => r,
        Err(e) => {
            return RunnerResponse::could_not_run(format!(
                "the tool runner got a malformed request: {e}"
            ));
        }
    };
    if !request.workspace.is_absolute() {
        return RunnerResponse::could_not_run(format!(
            "the workspace `{}` is not absolute",
            request.workspace.display()
        ));
    }
    let Some(entry) = TOOLS.iter().find(|e| e.name == name) else {
        return RunnerResponse::could_not_run(format!("the tool runner has no tool `{name}`"));
    };
    (entry.run)(Call {
        name: entry.name,
        cx: Context {
            workspace: &request.workspace,
            cap: request.output_cap.max(256),
            unconfined: request.unconfined,
        },
        args: request.args,
        #[cfg(feature = "gitlog")]
        time_budget_ms: request.time_budget_ms,
    })
}

/// One call of a [`RunnerEntry`]: the tool's name, what every tool needs, the request's
/// arguments (not yet parsed) and, for the one tool that walks history, its time budget.
struct Call<'a> {
    name: &'static str,
    cx: Context<'a>,
    args: serde_json::Value,
    #[cfg(feature = "gitlog")]
    time_budget_ms: Option<u64>,
}

impl Call<'_> {
    /// Runs `f` with the arguments parsed as `A`; `could_not_run` (`bad arguments for
    /// `NAME`: …`) when they do not parse.
    fn with<A: DeserializeOwned>(
        self,
        f: impl FnOnce(&Context<'_>, A) -> RunnerResponse,
    ) -> RunnerResponse {
        match serde_json::from_value(self.args) {
            Ok(a) => f(&self.cx, a),
            Err(e) => {
                RunnerResponse::could_not_run(format!("bad arguments for `{}`: {e}", self.name))
            }
        }
    }
}

/// What every tool needs.
#[derive(Debug)]
pub(crate) struct Context<'a> {
    pub(crate) workspace: &'a Path,
    pub(crate) cap: usize,
    /// No kernel scope confines the runner (`--host`).
    pub(crate) unconfined: bool,
}

impl Context<'_> {
    /// Resolves a path argument against the workspace.
    pub(crate) fn target(&self, raw: &str) -> Result<Target, RunnerResponse> {
        if raw.is_empty() {
            return Err(RunnerResponse::could_not_run(
                "bad arguments: the path is empty".to_owned(),
            ));
        }
        if raw.contains('\0') {
            return Err(RunnerResponse::could_not_run(
                "bad arguments: the path contains a NUL byte".to_owned(),
            ));
        }
        let path = self.workspace.join(raw);
        let normal = normalize(&path);
        let outside = !normal.starts_with(self.workspace);
        let shown = match normal.strip_prefix(self.workspace) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => normal.display().to_string(),
        };
        Ok(Target {
            path,
            shown,
            outside,
            workspace: self.workspace.to_owned(),
            unconfined: self.unconfined,
        })
    }
}

/// A path argument, resolved.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The path operated on: the workspace joined with the argument.
    pub(crate) path: PathBuf,
    /// How answers name it: relative to the workspace when inside, else absolute.
    pub(crate) shown: String,
    /// True when it is (lexically) outside the workspace.
    pub(crate) outside: bool,
    workspace: PathBuf,
    unconfined: bool,
}

impl Target {
    fn note(&self) -> Option<String> {
        self.outside.then(|| {
            let who = if self.unconfined {
                "with the user's own authority: no policy confines this session (--host)"
            } else {
                "and the policy decides"
            };
            format!(
                "note: `{}` is outside the workspace `{}`; it was attempted anyway, {who}",
                self.shown,
                self.workspace.display()
            )
        })
    }
}

/// `path` with `.` and `..` resolved lexically (`..` at `/` stays at `/`).
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

/// Cuts `text` to at most `cap` bytes at a character boundary; true if it cut.
pub(crate) fn cut(text: &mut String, cap: usize) -> bool {
    if text.len() <= cap {
        return false;
    }
    let mut end = cap;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    true
}

/// True when `bytes` look binary: a NUL in the first 8 KiB.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_resolve_against_the_workspace_and_note_outside_paths() {
        let cx = Context {
            workspace: Path::new("/ws"),
            cap: 1000,
            unconfined: false,
        };
        let t = cx.target("src/a.rs").unwrap_or_else(|_| unreachable!());
        assert_eq!(t.path, PathBuf::from("/ws/src/a.rs"));
        assert_eq!(t.shown, "src/a.rs");
        assert!(!t.outside);
        let t = cx
            .target("../etc/passwd")
            .unwrap_or_else(|_| unreachable!());
        assert!(t.outside);
        assert_eq!(t.shown, "/etc/passwd");
        let t = cx.target("/etc/shadow").unwrap_or_else(|_| unreachable!());
        assert!(t.outside);
        assert!(
            t.note()
                .is_some_and(|n| n.contains("outside the workspace") && n.contains("policy"))
        );
        assert!(cx.target("").is_err());
        let host = Context {
            unconfined: true,
            ..cx
        };
        let note = host
            .target("/etc/shadow")
            .ok()
            .and_then(|t| t.note())
            .unwrap_or_default();
        assert!(note.contains("the user's own authority"), "{note}");
        assert!(!note.contains("policy decides"), "{note}");
    }

    #[test]
    fn every_tool_the_harness_runs_in_the_runner_is_registered_there() {
        use crate::tools::{Placement, Registry, ToolLimits};
        let registry = Registry::standard(ToolLimits::default());
        let in_runner: Vec<&str> = registry
            .names()
            .filter(|n| registry.placement(n) == Some(Placement::Runner))
            .collect();
        assert!(!in_runner.is_empty());
        for name in in_runner {
            assert!(
                TOOLS.iter().any(|e| e.name == name),
                "no runner entry for `{name}`"
            );
        }
        assert_eq!(
            run(
                "no_such_tool",
                br#"{"workspace": "/", "output_cap": 100, "args": {}}"#
            ),
            RunnerResponse::could_not_run("the tool runner has no tool `no_such_tool`".to_owned())
        );
    }

    #[test]
    fn cut_respects_char_boundaries() {
        let mut s = "aé".to_owned();
        assert!(cut(&mut s, 2));
        assert_eq!(s, "a");
    }
}
