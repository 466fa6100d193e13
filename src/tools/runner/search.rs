//! `glob` and `grep`: walks that honour `.gitignore` files inside the searched tree (not
//! those of its ancestors, nor the user's global one, which lie outside what a policy
//! usually grants).

use std::fs;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use ignore::{Walk, WalkBuilder};
use regex::RegexBuilder;
use serde::Deserialize;

use super::{Context, RunnerResponse, Target, cut, looks_binary};

/// Paths `glob` shows at most.
const MAX_PATHS: usize = 1000;
/// Characters of a matching line shown before it is cut.
const LINE_CHARS: usize = 500;

pub(super) fn walker(root: &Path) -> Walk {
    WalkBuilder::new(root)
        .hidden(false)
        .parents(false)
        .git_global(false)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
}

/// Errors met during a walk: how many, and the first.
#[derive(Debug, Default)]
struct WalkErrors {
    count: usize,
    first: Option<String>,
}

impl WalkErrors {
    fn add(&mut self, e: &ignore::Error) {
        self.count += 1;
        self.first.get_or_insert_with(|| e.to_string());
    }

    fn note(&self) -> Option<String> {
        self.first.as_ref().map(|first| {
            format!(
                "[{} path(s) could not be read; the first: {first}]",
                self.count
            )
        })
    }
}

pub(super) fn shown(cx: &Context<'_>, path: &Path) -> String {
    match path.strip_prefix(cx.workspace) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

pub(super) fn glob_matcher(pattern: &str, tool: &str) -> Result<GlobMatcher, RunnerResponse> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| RunnerResponse::could_not_run(format!("bad arguments for `{tool}`: {e}")))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GlobArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

pub(crate) fn glob(cx: &Context<'_>, a: GlobArgs) -> RunnerResponse {
    let t = match cx.target(a.path.as_deref().unwrap_or(".")) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let matcher = match glob_matcher(&a.pattern, "glob") {
        Ok(m) => m,
        Err(r) => return r,
    };
    if let Err(e) = fs::read_dir(&t.path) {
        return RunnerResponse::io("search", &t, &e).noted(&t);
    }
    let mut errors = WalkErrors::default();
    let mut found = Vec::new();
    for entry in walker(&t.path) {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                errors.add(&e);
                continue;
            }
        };
        if entry.depth() == 0 {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(&t.path) else {
            continue;
        };
        if matcher.is_match(rel) {
            let mut name = shown(cx, entry.path());
            if entry.file_type().is_some_and(|f| f.is_dir()) {
                name.push('/');
            }
            found.push(name);
        }
    }
    found.sort();
    let total = found.len();
    let mut out = String::new();
    let mut listed = 0usize;
    for name in found.iter().take(MAX_PATHS) {
        if out.len() + name.len() + 1 > cx.cap {
            break;
        }
        out.push_str(name);
        out.push('\n');
        listed += 1;
    }
    if total == 0 {
        out.push_str(&format!("no paths match `{}`\n", a.pattern));
    } else if listed < total {
        out.push_str(&format!(
            "[truncated: showing {listed} of {total} paths; narrow the pattern]\n"
        ));
    }
    if let Some(note) = errors.note() {
        out.push_str(&note);
        out.push('\n');
    }
    RunnerResponse::completed(out).noted(&t)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrepArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    context: Option<usize>,
    #[serde(default)]
    case_insensitive: bool,
}

/// What a grep has produced so far.
#[derive(Debug, Default)]
struct Hits {
    out: String,
    matches: usize,
    files_matched: usize,
    files_searched: usize,
    full: bool,
}

pub(crate) fn grep(cx: &Context<'_>, a: GrepArgs) -> RunnerResponse {
    let t = match cx.target(a.path.as_deref().unwrap_or(".")) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let context = a.context.unwrap_or(0);
    if context > 20 {
        return RunnerResponse::could_not_run(
            "bad arguments for `grep`: `context` may be at most 20".to_owned(),
        );
    }
    let re = match RegexBuilder::new(&a.pattern)
        .case_insensitive(a.case_insensitive)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return RunnerResponse::could_not_run(format!("bad arguments for `grep`: {e}"));
        }
    };
    let filter = match a.glob.as_deref().map(|g| glob_matcher(g, "grep")) {
        Some(Ok(m)) => Some((m, a.glob.as_deref().is_some_and(|g| g.contains('/')))),
        Some(Err(r)) => return r,
        None => None,
    };
    let meta = match fs::metadata(&t.path) {
        Ok(m) => m,
        Err(e) => return RunnerResponse::io("search", &t, &e).noted(&t),
    };
    let mut hits = Hits::default();
    let mut errors = WalkErrors::default();
    if meta.is_file() {
        if let Err(e) = search_file(cx, &re, &t.path, context, &mut hits) {
            return RunnerResponse::io("read", &t, &e).noted(&t);
        }
    } else {
        for entry in walker(&t.path) {
            if hits.full {
                break;
            }
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    errors.add(&e);
                    continue;
                }
            };
            if !entry.file_type().is_some_and(|f| f.is_file()) {
                continue;
            }
            if let Some((m, by_path)) = &filter {
                let rel = entry.path().strip_prefix(&t.path).unwrap_or(entry.path());
                let subject = if *by_path {
                    rel
                } else {
                    Path::new(entry.file_name())
                };
                if !m.is_match(subject) {
                    continue;
                }
            }
            if let Err(e) = search_file(cx, &re, entry.path(), context, &mut hits) {
                errors.count += 1;
                errors
                    .first
                    .get_or_insert_with(|| format!("{}: {e}", shown(cx, entry.path())));
            }
        }
    }
    finish_grep(cx, &t, &a.pattern, hits, &errors)
}

fn finish_grep(
    cx: &Context<'_>,
    t: &Target,
    pattern: &str,
    mut hits: Hits,
    errors: &WalkErrors,
) -> RunnerResponse {
    if hits.matches == 0 {
        hits.out = format!(
            "no matches for `{pattern}` ({} file(s) searched)\n",
            hits.files_searched
        );
    } else if hits.full {
        cut(&mut hits.out, cx.cap);
        if !hits.out.ends_with('\n') {
            hits.out.push('\n');
        }
        hits.out.push_str(&format!(
            "[truncated: the output limit was reached after {} matching line(s) in {} file(s); \
             narrow the pattern, the path or the glob]\n",
            hits.matches, hits.files_matched
        ));
    }
    if let Some(note) = errors.note() {
        hits.out.push_str(&note);
        hits.out.push('\n');
    }
    RunnerResponse::completed(hits.out).noted(t)
}

fn search_file(
    cx: &Context<'_>,
    re: &regex::Regex,
    path: &Path,
    context: usize,
    hits: &mut Hits,
) -> std::io::Result<()> {
    let bytes = fs::read(path)?;
    hits.files_searched += 1;
    if looks_binary(&bytes) {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let matching: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| re.is_match(l))
        .map(|(i, _)| i)
        .collect();
    if matching.is_empty() {
        return Ok(());
    }
    hits.files_matched += 1;
    let name = shown(cx, path);
    let mut last_printed: Option<usize> = None;
    for &m in &matching {
        let from = m.saturating_sub(context);
        let to = (m + context).min(lines.len().saturating_sub(1));
        // With context, `--` separates groups that do not touch, in a file and between files.
        let from = match last_printed {
            Some(l) if l + 1 >= from => l + 1,
            Some(_) if context > 0 => {
                hits.out.push_str("--\n");
                from
            }
            None if context > 0 && hits.files_matched > 1 => {
                hits.out.push_str("--\n");
                from
            }
            _ => from,
        };
        for i in from..=to {
            let line = lines.get(i).copied().unwrap_or_default();
            let mut line: String = line.chars().take(LINE_CHARS).collect();
            if line.len() < lines.get(i).map_or(0, |l| l.len()) {
                line.push_str(" … [line cut]");
            }
            let sep = if matching.binary_search(&i).is_ok() {
                hits.matches += 1;
                ':'
            } else {
                '-'
            };
            let entry = format!("{name}{sep}{}{sep}{line}\n", i + 1);
            if hits.out.len() + entry.len() > cx.cap {
                hits.full = true;
                return Ok(());
            }
            hits.out.push_str(&entry);
            last_printed = Some(i);
        }
    }
    Ok(())
}
