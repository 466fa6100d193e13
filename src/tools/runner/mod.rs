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

/// The runner's one tool the model is never offered: a workspace file's raw text for the
/// harness (project instructions), answered as `{"text": …, "total_bytes": N}`.
pub const READ_TEXT: &str = "read_text";

/// Runs the tool `name` on the JSON request `input`.
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
    let cx = Context {
        workspace: &request.workspace,
        cap: request.output_cap.max(256),
        unconfined: request.unconfined,
    };
    let args = request.args;
    match name {
        "read_file" => with_args(name, args, |a| files::read_file(&cx, a)),
        "write_file" => with_args(name, args, |a| files::write_file(&cx, a)),
        "edit_file" => with_args(name, args, |a| files::edit_file(&cx, a)),
        "list_dir" => with_args(name, args, |a| files::list_dir(&cx, a)),
        "glob" => with_args(name, args, |a| search::glob(&cx, a)),
        "grep" => with_args(name, args, |a| search::grep(&cx, a)),
        READ_TEXT => with_args(name, args, |a| files::read_text(&cx, a)),
        #[cfg(feature = "astgrep")]
        "ast_grep" => with_args(name, args, |a| ast_grep::ast_grep(&cx, a)),
        #[cfg(feature = "gitlog")]
        "git_log" => with_args(name, args, |a| {
            git_log::git_log(&cx, a, request.time_budget_ms)
        }),
        other => RunnerResponse::could_not_run(format!("the tool runner has no tool `{other}`")),
    }
}

fn with_args<A: DeserializeOwned>(
    name: &str,
    args: serde_json::Value,
    f: impl FnOnce(A) -> RunnerResponse,
) -> RunnerResponse {
    match serde_json::from_value(args) {
        Ok(a) => f(a),
        Err(e) => RunnerResponse::could_not_run(format!("bad arguments for `{name}`: {e}")),
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
    fn cut_respects_char_boundaries() {
        let mut s = "aé".to_owned();
        assert!(cut(&mut s, 2));
        assert_eq!(s, "a");
    }
}
