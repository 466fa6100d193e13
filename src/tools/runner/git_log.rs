//! `git_log`: a repository's history through gix, read-only, in the scope like every file
//! tool (`.git` is a directory of files the policy must grant).
//!
//! The repository is opened isolated: no system, global or user configuration, no
//! environment overrides; only the repository's own files are read. Nothing is written and no
//! `git` is run.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::revision::walk::Sorting;
use gix::traverse::commit::simple::CommitTimeOrder;
use gix::{ObjectId, Repository};
use serde::Deserialize;

use super::{Context, RunnerResponse, Target, cut};

/// Default and largest `max_count`.
const DEFAULT_COUNT: usize = 20;
const MAX_COUNT: usize = 500;
/// The most commits one `log` examines, whatever its time budget.
const MAX_EXAMINED: usize = 1_000_000;
/// The time budget when the harness gives none.
const DEFAULT_BUDGET: Duration = Duration::from_secs(30);
/// Object cache for the walk: trees are looked up again for each parent.
const OBJECT_CACHE_BYTES: usize = 64 * 1024 * 1024;
/// Entries remembered per walk before the memo is emptied (bounds its memory).
const MEMO_ENTRIES: usize = 100_000;

#[derive(Debug, Default, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Mode {
    #[default]
    Log,
    Blame,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GitLogArgs {
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    line: Option<u32>,
    #[serde(default)]
    rev: Option<String>,
    #[serde(default)]
    max_count: Option<usize>,
    #[serde(default)]
    follow: Option<bool>,
}

/// Runs `git_log`; `budget_ms` is how long a walk may take before it answers with what it
/// has.
pub(crate) fn git_log(cx: &Context<'_>, a: GitLogArgs, budget_ms: Option<u64>) -> RunnerResponse {
    let budget = budget_ms.map_or(DEFAULT_BUDGET, Duration::from_millis);
    let target = match a.path.as_deref().map(|p| cx.target(p)).transpose() {
        Ok(t) => t,
        Err(r) => return r,
    };
    let start_dir = target.as_ref().map_or_else(
        || cx.workspace.to_owned(),
        |t| existing_dir(&t.path, cx.workspace),
    );
    let repo = match open(&start_dir) {
        Ok(r) => r,
        Err(r) => return note(r, target.as_ref()),
    };
    let rel = match &target {
        Some(t) => match relative(&repo, &t.path) {
            Ok(r) => Some(r),
            Err(r) => return note(r, Some(t)),
        },
        None => None,
    };
    let rev = a.rev.as_deref().unwrap_or("HEAD");
    let tip = match repo
        .rev_parse_single(rev)
        .map_err(|e| e.to_string())
        .and_then(|id| id.object().map_err(|e| e.to_string()))
        .and_then(|o| o.peel_to_commit().map_err(|e| e.to_string()))
    {
        Ok(c) => c.id,
        Err(e) => {
            return note(
                RunnerResponse::could_not_run(format!(
                    "`{rev}` does not name a commit in {}: {e}",
                    repo_name(&repo)
                )),
                target.as_ref(),
            );
        }
    };
    let answer = match a.mode {
        Mode::Log => {
            let max = a.max_count.unwrap_or(DEFAULT_COUNT);
            if max == 0 || max > MAX_COUNT {
                return RunnerResponse::could_not_run(format!(
                    "bad arguments for `git_log`: `max_count` is between 1 and {MAX_COUNT}"
                ));
            }
            log(&repo, tip, rel, max, a.follow.unwrap_or(true), budget)
        }
        Mode::Blame => match (rel, a.line) {
            (Some(rel), Some(line)) if line > 0 => blame(&repo, tip, rel.as_ref(), line),
            (None, _) => RunnerResponse::could_not_run(
                "bad arguments for `git_log`: `blame` needs `path`".to_owned(),
            ),
            _ => RunnerResponse::could_not_run(
                "bad arguments for `git_log`: `blame` needs `line` (1 or more)".to_owned(),
            ),
        },
    };
    let mut answer = note(answer, target.as_ref());
    cut(&mut answer.content, cx.cap);
    answer
}

fn note(r: RunnerResponse, t: Option<&Target>) -> RunnerResponse {
    match t {
        Some(t) => r.noted(t),
        None => r,
    }
}

/// The deepest existing directory at or above `path` (a path of the history may be gone
/// from the work tree), but not above the workspace.
fn existing_dir(path: &Path, workspace: &Path) -> PathBuf {
    let mut p = path;
    loop {
        if p.is_dir() || p == workspace {
            return p.to_owned();
        }
        match p.parent() {
            Some(parent) => p = parent,
            None => return workspace.to_owned(),
        }
    }
}

/// The repository containing `dir`, opened isolated.
fn open(dir: &Path) -> Result<Repository, RunnerResponse> {
    let options = gix::open::Options::isolated();
    let mut repo = gix::ThreadSafeRepository::discover_opts(
        dir,
        gix::discover::upwards::Options::default(),
        gix::sec::trust::Mapping {
            full: options.clone(),
            reduced: options,
        },
    )
    .map(gix::Repository::from)
    .map_err(|e| {
        let errno = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .and_then(std::io::Error::raw_os_error);
        RunnerResponse {
            errno,
            ..RunnerResponse::could_not_run(format!(
                "`{}` is not in a git repository that can be read here: {e}",
                dir.display()
            ))
        }
    })?;
    repo.object_cache_size_if_unset(OBJECT_CACHE_BYTES);
    Ok(repo)
}

fn repo_name(repo: &Repository) -> String {
    repo.workdir()
        .unwrap_or_else(|| repo.git_dir())
        .display()
        .to_string()
}

/// `path` relative to the repository's work tree, with `/` separators.
fn relative(repo: &Repository, path: &Path) -> Result<BString, RunnerResponse> {
    let Some(workdir) = repo.workdir() else {
        return Err(RunnerResponse::could_not_run(format!(
            "{} is a bare repository; `git_log` reads repositories with a work tree",
            repo.git_dir().display()
        )));
    };
    let normal = super::normalize(path);
    let rel = normal
        .strip_prefix(workdir)
        .ok()
        .map(Path::to_owned)
        .or_else(|| {
            let root = std::fs::canonicalize(workdir).ok()?;
            normal.strip_prefix(root).ok().map(Path::to_owned)
        });
    let Some(rel) = rel else {
        return Err(RunnerResponse::could_not_run(format!(
            "`{}` is outside the repository at {}",
            path.display(),
            workdir.display()
        )));
    };
    let text = rel.to_string_lossy().replace('\\', "/");
    Ok(BString::from(text))
}

/// One listed commit.
struct Listed {
    id: ObjectId,
    what: String,
}

/// What a tree holds at a path, per commit, remembered for the walk.
struct Entries<'r> {
    repo: &'r Repository,
    memo: HashMap<(ObjectId, BString), Option<ObjectId>>,
}

impl Entries<'_> {
    fn at(&mut self, commit: ObjectId, path: &BStr) -> Result<Option<ObjectId>, String> {
        let key = (commit, path.to_owned());
        if let Some(found) = self.memo.get(&key) {
            return Ok(*found);
        }
        let tree = self
            .repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(|e| format!("reading commit {commit}: {e}"))?;
        let fs_path = gix::path::from_bstr(path)
            .map_err(|e| format!("the path `{path}` cannot be a file name here: {e}"))?;
        let found = tree
            .lookup_entry_by_path(fs_path)
            .map_err(|e| format!("reading the tree of {commit}: {e}"))?
            .map(|e| e.object_id());
        if self.memo.len() >= MEMO_ENTRIES {
            self.memo.clear();
        }
        self.memo.insert(key, found);
        Ok(found)
    }
}

/// The commits reachable from `tip` that changed `path` (every commit without one), newest
/// first, following renames.
fn log(
    repo: &Repository,
    tip: ObjectId,
    path: Option<BString>,
    max: usize,
    follow: bool,
    budget: Duration,
) -> RunnerResponse {
    let started = Instant::now();
    let walk = match repo
        .rev_walk([tip])
        .sorting(Sorting::ByCommitTime(CommitTimeOrder::NewestFirst))
        .all()
    {
        Ok(w) => w,
        Err(e) => {
            return RunnerResponse::failed(format!(
                "the history of {tip} could not be walked: {e}"
            ));
        }
    };
    let mut entries = Entries {
        repo,
        memo: HashMap::new(),
    };
    // The boundary commits of a shallow clone: their parents are not in the repository.
    let boundary: HashSet<ObjectId> = repo
        .shallow_commits()
        .ok()
        .flatten()
        .map(|c| c.iter().copied().collect())
        .unwrap_or_default();
    let absent = match &path {
        Some(p) => matches!(entries.at(tip, p.as_ref()), Ok(None)),
        None => false,
    };
    let mut path = path;
    let mut listed: Vec<Listed> = Vec::new();
    let mut examined = 0usize;
    let mut stopped: Option<String> = None;
    let mut error: Option<String> = None;
    let mut roots = 0usize;
    for info in walk {
        if listed.len() >= max {
            stopped = Some(format!(
                "[showing the newest {max} commits; older ones may exist: raise max_count (at \
                 most {MAX_COUNT})]"
            ));
            break;
        }
        if examined >= MAX_EXAMINED || started.elapsed() > budget {
            stopped = Some(format!(
                "[INCOMPLETE: stopped after examining {examined} commits in {:.1} s; older \
                 history was not searched]",
                started.elapsed().as_secs_f64()
            ));
            break;
        }
        let info = match info {
            Ok(i) => i,
            Err(e) => {
                error = Some(format!("the walk stopped: {e}"));
                break;
            }
        };
        examined += 1;
        let parents: Vec<ObjectId> = if boundary.contains(&info.id) {
            Vec::new()
        } else {
            info.parent_ids.iter().copied().collect()
        };
        if parents.is_empty() {
            roots += 1;
        }
        let Some(p) = path.clone() else {
            listed.push(Listed {
                id: info.id,
                what: String::new(),
            });
            continue;
        };
        let here = match entries.at(info.id, p.as_ref()) {
            Ok(h) => h,
            Err(e) => {
                error = Some(e);
                break;
            }
        };
        let mut before = Vec::with_capacity(parents.len());
        for parent in &parents {
            match entries.at(*parent, p.as_ref()) {
                Ok(b) => before.push(b),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        if error.is_some() {
            break;
        }
        // A merge is listed only when the path differs from every parent.
        let changed = if before.is_empty() {
            here.is_some()
        } else {
            before.iter().all(|b| *b != here)
        };
        if !changed {
            continue;
        }
        let what = match (before.first().copied().flatten(), here) {
            (_, None) => format!("deleted {p}"),
            (None, Some(_)) if before.is_empty() => format!("added {p}"),
            (None, Some(_)) => {
                let source = if follow {
                    renamed_from(repo, parents[0], info.id, p.as_ref())
                } else {
                    None
                };
                match source {
                    Some(old) => {
                        let w = format!("renamed {old} → {p}");
                        path = Some(old);
                        w
                    }
                    None => format!("added {p}"),
                }
            }
            (Some(_), Some(_)) => format!("modified {p}"),
        };
        listed.push(Listed { id: info.id, what });
    }
    let mut answer = render_log(repo, &listed, examined, roots, stopped, error);
    if absent {
        answer.content.push_str(&format!(
            "note: the path does not exist in {tip}, where the walk started\n"
        ));
    }
    answer
}

/// The path `path` had in `parent`, when `commit` renamed it.
fn renamed_from(
    repo: &Repository,
    parent: ObjectId,
    commit: ObjectId,
    path: &BStr,
) -> Option<BString> {
    let old = repo.find_commit(parent).ok()?.tree().ok()?;
    let new = repo.find_commit(commit).ok()?.tree().ok()?;
    let mut options =
        gix::diff::Options::default().with_rewrites(Some(gix::diff::Rewrites::default()));
    options.track_path();
    let changes = repo.diff_tree_to_tree(&old, &new, options).ok()?;
    changes.into_iter().find_map(|c| match c {
        gix::object::tree::diff::ChangeDetached::Rewrite {
            source_location,
            location,
            copy: false,
            ..
        } if location.as_bstr() == path => Some(source_location),
        _ => None,
    })
}

fn render_log(
    repo: &Repository,
    listed: &[Listed],
    examined: usize,
    roots: usize,
    stopped: Option<String>,
    error: Option<String>,
) -> RunnerResponse {
    let mut out = String::new();
    for l in listed {
        out.push_str(&describe(repo, l.id));
        if !l.what.is_empty() {
            out.push_str(&format!("    {}\n", l.what));
        }
    }
    if listed.is_empty() && error.is_none() {
        out.push_str(&format!(
            "no commit among the {examined} examined changed the path{}\n",
            if stopped.is_some() {
                " (the walk was cut short, below)"
            } else {
                ""
            }
        ));
    }
    if let Some(s) = stopped {
        out.push_str(&s);
        out.push('\n');
    }
    if repo.is_shallow().unwrap_or(false) {
        out.push_str(&format!(
            "note: the repository is a shallow clone: its history stops at {roots} boundary \
             commit(s), so a commit shown as adding a path may only be where this copy of the \
             history begins\n"
        ));
    }
    match error {
        Some(e) if listed.is_empty() => {
            RunnerResponse::failed(format!("{e}\n{out}").trim_end().to_owned() + "\n")
        }
        Some(e) => {
            out.push_str(&format!(
                "INCOMPLETE: {e}; the commits above were found before it\n"
            ));
            RunnerResponse::failed(out)
        }
        None => RunnerResponse::completed(out),
    }
}

/// `id date author <email>` and the summary, as two lines.
fn describe(repo: &Repository, id: ObjectId) -> String {
    let Ok(commit) = repo.find_commit(id) else {
        return format!("{id} (the commit could not be read)\n");
    };
    let (name, email, date) = match commit.author() {
        Ok(a) => (
            a.name.to_str_lossy().trim().to_owned(),
            a.email.to_str_lossy().trim().to_owned(),
            a.time()
                .ok()
                .and_then(|t| t.format(gix::date::time::format::ISO8601).ok())
                .unwrap_or_else(|| "(no date)".to_owned()),
        ),
        Err(_) => (
            "(no author)".to_owned(),
            String::new(),
            "(no date)".to_owned(),
        ),
    };
    let summary = commit
        .message()
        .map(|m| m.summary().to_str_lossy().into_owned())
        .unwrap_or_default();
    format!("{id} {date} {name} <{email}>\n    {summary}\n")
}

/// The commit that last changed line `line` of `path` as committed at `tip`.
fn blame(repo: &Repository, tip: ObjectId, path: &BStr, line: u32) -> RunnerResponse {
    let mut entries = Entries {
        repo,
        memo: HashMap::new(),
    };
    let blob = match entries.at(tip, path) {
        Ok(Some(id)) => id,
        Ok(None) => {
            return RunnerResponse::could_not_run(format!(
                "`{path}` does not exist in {tip} (blame reads the committed file)"
            ));
        }
        Err(e) => return RunnerResponse::failed(e),
    };
    let lines = match repo.find_object(blob) {
        Ok(o) if o.kind == gix::object::Kind::Blob => o.data.lines().count(),
        Ok(_) => {
            return RunnerResponse::could_not_run(format!(
                "`{path}` is a directory in {tip}; blame takes a file"
            ));
        }
        Err(e) => return RunnerResponse::failed(format!("reading `{path}` in {tip}: {e}")),
    };
    if line as usize > lines {
        return RunnerResponse::could_not_run(format!(
            "`{path}` has {lines} line(s) in {tip}; there is no line {line}"
        ));
    }
    let ranges = match gix::blame::BlameRanges::from_one_based_inclusive_range(line..=line) {
        Ok(r) => r,
        Err(e) => return RunnerResponse::could_not_run(format!("line {line}: {e}")),
    };
    let options = gix::repository::blame_file::Options {
        ranges,
        rewrites: Some(gix::diff::Rewrites::default()),
        ..Default::default()
    };
    let outcome = match repo.blame_file(path, tip, options) {
        Ok(o) => o,
        Err(e) => return RunnerResponse::failed(format!("blame of `{path}`: {e}")),
    };
    let Some(entry) = outcome.entries.first() else {
        return RunnerResponse::failed(format!("blame of `{path}` line {line} gave no commit"));
    };
    let text = outcome
        .blob
        .lines()
        .nth(line as usize - 1)
        .map(|l| l.to_str_lossy().into_owned())
        .unwrap_or_default();
    let offset = line - 1 - entry.start_in_blamed_file;
    let source_line = entry.start_in_source_file + offset + 1;
    let source_path = entry
        .source_file_name
        .as_ref()
        .map_or_else(|| path.to_string(), ToString::to_string);
    let mut out = format!("{path}:{line}: {}\n", text.trim_end());
    out.push_str(&format!(
        "last changed by {}",
        describe(repo, entry.commit_id)
    ));
    out.push_str(&format!("    there: {source_path}:{source_line}\n"));
    if repo.is_shallow().unwrap_or(false) {
        out.push_str(
            "note: the repository is a shallow clone: a line blamed on its oldest commit may be \
             older than this copy of the history\n",
        );
    }
    RunnerResponse::completed(out)
}

#[cfg(test)]
mod tests;
