//! `ast_grep`: structural search with ast-grep, in the scope like every file tool.
//!
//! Why one file of this length: one tool, its arguments, its grammar table and the matching it
//! does in the scope; splitting it would spread one request's path over several files.
//!
//! The pattern is parsed once, as code of the language, and refused when it does not parse
//! cleanly; a language whose grammar this build was not compiled with is refused by name
//! before ast-grep is asked for it (it panics on such a language). Files are read here, in
//! the scope, so the kernel decides each one; what could not be searched (unreadable, binary,
//! not UTF-8, too large, nested too deeply) is listed, so a search that covered nothing never
//! reads as one that found nothing.

use std::collections::BTreeMap;
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::str::FromStr;

use ast_grep_core::tree_sitter::StrDoc;
use ast_grep_core::{AstGrep, Doc, Language, Pattern};
use ast_grep_language::SupportLang;
use globset::GlobMatcher;
use serde::Deserialize;

use super::search::{glob_matcher, shown, walker};
use super::{Context, RunnerResponse, Target, cut, looks_binary};

/// The longest pattern accepted.
const MAX_PATTERN_BYTES: usize = 16 * 1024;
/// The deepest pattern accepted (matching recurses along the pattern).
const MAX_PATTERN_DEPTH: usize = 256;
/// Files larger than this are listed as not searched.
const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Files whose syntax tree is deeper than this are listed as not searched.
const MAX_TREE_DEPTH: usize = 4096;
/// The default and the largest `max_results`.
const DEFAULT_RESULTS: usize = 100;
const MAX_RESULTS: usize = 1000;
/// Characters of a match's first line shown.
const MATCH_CHARS: usize = 200;
/// Characters of a metavariable binding shown.
const BINDING_CHARS: usize = 120;
/// Stack of the thread that parses and matches: tree-sitter and ast-grep recurse in places.
const STACK_BYTES: usize = 64 * 1024 * 1024;
/// Words in a comment that ask a scanner to look away. Reported, never obeyed.
const SUPPRESSIONS: [&str; 10] = [
    "ast-grep-ignore",
    "nosemgrep",
    "nosec",
    "noqa",
    "nolint",
    "lgtm",
    "eslint-disable",
    "pylint: disable",
    "@ts-ignore",
    "codeql",
];

type TsNode<'r> = <StrDoc<SupportLang> as Doc>::Node<'r>;

/// The grammars this build was compiled with: the language, and the names it is asked by.
fn compiled() -> Vec<SupportLang> {
    vec![
        #[cfg(feature = "astgrep-rust")]
        SupportLang::Rust,
        #[cfg(feature = "astgrep-python")]
        SupportLang::Python,
        #[cfg(feature = "astgrep-javascript")]
        SupportLang::JavaScript,
        #[cfg(feature = "astgrep-typescript")]
        SupportLang::TypeScript,
        #[cfg(feature = "astgrep-typescript")]
        SupportLang::Tsx,
        #[cfg(feature = "astgrep-go")]
        SupportLang::Go,
        #[cfg(feature = "astgrep-java")]
        SupportLang::Java,
        #[cfg(feature = "astgrep-c")]
        SupportLang::C,
        #[cfg(feature = "astgrep-cpp")]
        SupportLang::Cpp,
    ]
}

/// The names of the languages this build searches, e.g. `["rust", "python"]`.
pub fn languages() -> Vec<String> {
    compiled()
        .iter()
        .map(|l| l.to_string().to_lowercase())
        .collect()
}

/// The bee feature that compiles `lang`'s grammar, if bee has one.
fn feature_of(lang: SupportLang) -> Option<&'static str> {
    Some(match lang {
        SupportLang::Rust => "astgrep-rust",
        SupportLang::Python => "astgrep-python",
        SupportLang::JavaScript => "astgrep-javascript",
        SupportLang::TypeScript | SupportLang::Tsx => "astgrep-typescript",
        SupportLang::Go => "astgrep-go",
        SupportLang::Java => "astgrep-java",
        SupportLang::C => "astgrep-c",
        SupportLang::Cpp => "astgrep-cpp",
        _ => return None,
    })
}

/// The language `name`, if this build has its grammar; otherwise why not.
fn language(name: &str) -> Result<SupportLang, RunnerResponse> {
    let searched = {
        let l = languages();
        if l.is_empty() {
            "this build has no grammar".to_owned()
        } else {
            format!("this build searches {}", l.join(", "))
        }
    };
    let lang = SupportLang::from_str(name.trim()).map_err(|_| {
        RunnerResponse::could_not_run(format!("`ast_grep` knows no language `{name}`; {searched}"))
    })?;
    if compiled().contains(&lang) {
        return Ok(lang);
    }
    let why = match feature_of(lang) {
        Some(f) => format!("bee was built without its grammar (feature `{f}`)"),
        None => "bee has no feature for its grammar".to_owned(),
    };
    Err(RunnerResponse::could_not_run(format!(
        "`ast_grep` cannot search {lang}: {why}; {searched}"
    )))
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Mode {
    #[default]
    Search,
    Dump,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AstGrepArgs {
    pattern: String,
    language: String,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    globs: Vec<String>,
    #[serde(default)]
    max_results: Option<usize>,
    #[serde(default)]
    mode: Mode,
}

/// Runs `ast_grep` on a thread with a deep stack, and turns a panic of the libraries into a
/// `failed` answer rather than a runner that dies without one.
pub(crate) fn ast_grep(cx: &Context<'_>, a: AstGrepArgs) -> RunnerResponse {
    let workspace = cx.workspace.to_owned();
    let (cap, unconfined) = (cx.cap, cx.unconfined);
    let worker = std::thread::Builder::new()
        .name("ast_grep".to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let cx = Context {
                workspace: &workspace,
                cap,
                unconfined,
            };
            catch_unwind(AssertUnwindSafe(|| run(&cx, a)))
        });
    match worker.map(std::thread::JoinHandle::join) {
        Ok(Ok(Ok(answer))) => answer,
        Ok(Ok(Err(_)) | Err(_)) => RunnerResponse::failed(
            "`ast_grep` stopped on an internal error of the search library (its message is in \
             the runner's standard error)"
                .to_owned(),
        ),
        Err(e) => RunnerResponse::could_not_run(format!("`ast_grep` could not start: {e}")),
    }
}

fn run(cx: &Context<'_>, a: AstGrepArgs) -> RunnerResponse {
    let lang = match language(&a.language) {
        Ok(l) => l,
        Err(r) => return r,
    };
    if a.pattern.len() > MAX_PATTERN_BYTES {
        return RunnerResponse::could_not_run(format!(
            "the pattern is {} bytes; `ast_grep` takes at most {MAX_PATTERN_BYTES}",
            a.pattern.len()
        ));
    }
    if a.mode == Mode::Dump {
        return dump(cx, &a.pattern, lang);
    }
    let pattern = match compile(&a.pattern, lang) {
        Ok(p) => p,
        Err(why) => return RunnerResponse::could_not_run(why),
    };
    let max = a.max_results.unwrap_or(DEFAULT_RESULTS);
    if max == 0 || max > MAX_RESULTS {
        return RunnerResponse::could_not_run(format!(
            "bad arguments for `ast_grep`: `max_results` is between 1 and {MAX_RESULTS}"
        ));
    }
    let mut filters = Vec::new();
    for g in &a.globs {
        match glob_matcher(g, "ast_grep") {
            Ok(m) => filters.push((m, g.contains('/'))),
            Err(r) => return r,
        }
    }
    let paths = if a.paths.is_empty() {
        vec![".".to_owned()]
    } else {
        a.paths.clone()
    };
    let mut vars: Vec<String> = pattern
        .defined_vars()
        .into_iter()
        .map(str::to_owned)
        .collect();
    vars.sort_unstable();
    let mut search = Search {
        lang,
        pattern: &pattern,
        vars,
        fixed: pattern.fixed_string().into_owned(),
        max,
        report: Report::default(),
    };
    let mut targets = Vec::new();
    for p in &paths {
        let t = match cx.target(p) {
            Ok(t) => t,
            Err(r) => return r,
        };
        match fs::metadata(&t.path) {
            Ok(m) if m.is_file() => search.file(cx, &t.path, m.len()),
            // A directory that cannot be listed fails like any other unreadable path.
            Ok(_) => match fs::read_dir(&t.path) {
                Ok(_) => search.tree(cx, &t, &filters),
                Err(e) if paths.len() == 1 => {
                    return RunnerResponse::io("search", &t, &e).noted(&t);
                }
                Err(e) => search.report.unreadable(t.shown.clone(), &e),
            },
            Err(e) if paths.len() == 1 => return RunnerResponse::io("search", &t, &e).noted(&t),
            Err(e) => search.report.unreadable(t.shown.clone(), &e),
        }
        targets.push(t);
    }
    let mut answer = search.report.finish(cx, &a.pattern, lang, max);
    for t in &targets {
        answer = answer.noted(t);
    }
    answer
}

/// Parses `src` as a pattern of `lang`: refused when it does not parse cleanly, is nested
/// too deeply, or is not one node.
fn compile(src: &str, lang: SupportLang) -> Result<Pattern, String> {
    let processed = lang.pre_process_pattern(src);
    let doc = StrDoc::try_new(&processed, lang)
        .map_err(|e| format!("the pattern could not be parsed as {lang}: {e}"))?;
    // ast-grep matches with the node it finds by descending through single children (a
    // top-level expression parses inside an ERROR or with a missing `;`, which is fine); that
    // node's own subtree must parse cleanly.
    let mut node = doc.tree.root_node();
    loop {
        let single = match node.child_count() {
            1 => true,
            2 => node
                .child(1)
                .is_some_and(|c| c.is_missing() || c.kind().is_empty()),
            _ => false,
        };
        match node.child(0) {
            Some(child) if single => node = child,
            _ => break,
        }
    }
    let scan = scan(node, doc.src.as_bytes(), MAX_PATTERN_DEPTH);
    if scan.too_deep {
        return Err(format!(
            "the pattern is nested more than {MAX_PATTERN_DEPTH} levels deep"
        ));
    }
    if let Some((line, column, what)) = scan.first_error {
        return Err(format!(
            "the pattern is not valid {lang}: {what} at line {line}, column {column} (the \
             pattern is code of the language, with `$NAME` metavariables; mode `dump` shows how \
             code parses)"
        ));
    }
    Pattern::try_new(src, lang).map_err(|e| format!("the pattern is not usable: {e}"))
}

/// What one walk over a syntax tree found.
#[derive(Debug, Default)]
struct Scan {
    too_deep: bool,
    /// 1-based line and column of the first syntax error, and what it is.
    first_error: Option<(usize, usize, String)>,
    /// Suppression comments: 1-based line, and the marker.
    suppressions: Vec<(usize, &'static str)>,
}

/// Walks the tree without recursion, up to `max_depth` levels.
fn scan(root: TsNode<'_>, src: &[u8], max_depth: usize) -> Scan {
    let mut out = Scan::default();
    let mut cursor = root.walk();
    let mut depth = 0usize;
    loop {
        let node = cursor.node();
        if out.first_error.is_none() && (node.is_error() || node.is_missing()) {
            let p = node.start_position();
            let what = if node.is_missing() {
                format!("a missing `{}`", node.kind())
            } else {
                "a syntax error".to_owned()
            };
            out.first_error = Some((p.row + 1, p.column + 1, what));
        }
        if node.kind().contains("comment") {
            let text = node.utf8_text(src).unwrap_or_default().to_lowercase();
            if let Some(marker) = SUPPRESSIONS.iter().find(|m| text.contains(*m)) {
                out.suppressions
                    .push((node.start_position().row + 1, marker));
            }
        }
        if depth < max_depth && cursor.goto_first_child() {
            depth += 1;
            continue;
        }
        if depth >= max_depth && node.child_count() > 0 {
            out.too_deep = true;
            return out;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return out;
            }
            depth -= 1;
        }
    }
}

/// One match, as shown.
#[derive(Debug)]
struct Hit {
    file: String,
    line: usize,
    column: usize,
    text: String,
    bindings: Vec<(String, String)>,
    suppression: Option<(usize, &'static str)>,
}

/// Everything a search saw.
#[derive(Debug, Default)]
struct Report {
    hits: Vec<Hit>,
    total: usize,
    files_searched: usize,
    files_matched: usize,
    /// Files with a syntax error: name, line, column.
    parse_errors: Vec<(String, usize, usize)>,
    /// Not searched, by reason: the files.
    skipped: BTreeMap<&'static str, Vec<String>>,
    /// Files or directories that could not be read, with the error.
    unreadable: Vec<(String, String)>,
    errno: Option<i32>,
    suppressions: usize,
}

impl Report {
    fn skip(&mut self, why: &'static str, file: String) {
        self.skipped.entry(why).or_default().push(file);
    }

    fn unreadable(&mut self, file: String, e: &std::io::Error) {
        self.errno = self.errno.or(e.raw_os_error());
        self.unreadable.push((file, e.to_string()));
    }

    fn not_searched(&self) -> usize {
        self.skipped.values().map(Vec::len).sum::<usize>() + self.unreadable.len()
    }

    fn finish(
        self,
        cx: &Context<'_>,
        pattern: &str,
        lang: SupportLang,
        max: usize,
    ) -> RunnerResponse {
        let mut notes = String::new();
        for (why, files) in &self.skipped {
            notes.push_str(&format!(
                "not searched ({why}): {} file(s): {}\n",
                files.len(),
                list(files)
            ));
        }
        if !self.unreadable.is_empty() {
            let first = &self.unreadable[0];
            notes.push_str(&format!(
                "could not be read: {} path(s); the first: {}: {}\n",
                self.unreadable.len(),
                first.0,
                first.1
            ));
        }
        if !self.parse_errors.is_empty() {
            let shown: Vec<String> = self
                .parse_errors
                .iter()
                .map(|(f, l, c)| format!("{f}:{l}:{c}"))
                .collect();
            notes.push_str(&format!(
                "did not parse cleanly (matches in these files may be missing): {} file(s): {}\n",
                shown.len(),
                list(&shown)
            ));
        }
        if self.files_searched == 0 {
            let body = format!(
                "`ast_grep` searched no file: no {lang} file was found and readable where it \
                 looked, so this is not a search that found nothing\n{notes}"
            );
            return if self.unreadable.is_empty() {
                RunnerResponse::could_not_run(body)
            } else {
                RunnerResponse {
                    errno: self.errno,
                    ..RunnerResponse::failed(body)
                }
            };
        }
        let incomplete = match self.not_searched() {
            0 => String::new(),
            n => format!(" — INCOMPLETE: {n} file(s) or path(s) were not searched (below)"),
        };
        let mut out = format!(
            "{} match(es) of `{}` ({lang}) in {} of {} file(s) searched{incomplete}\n",
            self.total,
            one_line(pattern, 80),
            self.files_matched,
            self.files_searched
        );
        let mut shown_hits = 0usize;
        for hit in &self.hits {
            let mut entry = format!("{}:{}:{}: {}\n", hit.file, hit.line, hit.column, hit.text);
            for (name, value) in &hit.bindings {
                entry.push_str(&format!("    {name} = {value}\n"));
            }
            if let Some((line, marker)) = hit.suppression {
                entry.push_str(&format!(
                    "    note: a `{marker}` comment on line {line} asks scanners to skip this; \
                     reported, not obeyed\n"
                ));
            }
            // Room is kept for the notes and the truncation line.
            if out.len() + entry.len() + notes.len() + 300 > cx.cap {
                break;
            }
            out.push_str(&entry);
            shown_hits += 1;
        }
        if shown_hits < self.total {
            let why = if shown_hits < self.hits.len() || shown_hits < max.min(self.total) {
                "the output limit"
            } else {
                "max_results"
            };
            out.push_str(&format!(
                "[truncated by {why}: showing {shown_hits} of {} matches; narrow the paths or \
                 the pattern{}]\n",
                self.total,
                if why == "max_results" {
                    format!(", or raise max_results (at most {MAX_RESULTS})")
                } else {
                    String::new()
                }
            ));
        }
        if self.suppressions > 0 {
            out.push_str(&format!(
                "{} suppression comment(s) in the files searched; they were not obeyed\n",
                self.suppressions
            ));
        }
        out.push_str(&notes);
        cut(&mut out, cx.cap);
        RunnerResponse::completed(out)
    }
}

/// The OS error number behind a walk's error (ignore wraps walkdir's, which wraps the OS's).
fn errno_of(e: &ignore::Error) -> Option<i32> {
    let io = e.io_error()?;
    if let Some(n) = io.raw_os_error() {
        return Some(n);
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = io.get_ref().map(|e| e as _);
    while let Some(c) = cause {
        if let Some(n) = c
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
        {
            return Some(n);
        }
        cause = c.source();
    }
    None
}

/// Up to five names, then how many more.
fn list(names: &[String]) -> String {
    let mut s = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 5 {
        s.push_str(&format!(", and {} more", names.len() - 5));
    }
    s
}

/// The first line of `text`, at most `chars` characters, marked when cut.
fn one_line(text: &str, chars: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    let mut s: String = first.chars().take(chars).collect();
    if s.len() < first.len() || text.lines().nth(1).is_some() {
        s.push_str(" …");
    }
    s
}

struct Search<'p> {
    lang: SupportLang,
    pattern: &'p Pattern,
    /// The pattern's metavariables, sorted.
    vars: Vec<String>,
    /// The pattern's longest literal token (empty when it has none).
    fixed: String,
    max: usize,
    report: Report,
}

impl Search<'_> {
    fn tree(&mut self, cx: &Context<'_>, t: &Target, filters: &[(GlobMatcher, bool)]) {
        for entry in walker(&t.path) {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    self.report.errno = self.report.errno.or(errno_of(&e));
                    self.report
                        .unreadable
                        .push((t.shown.clone(), e.to_string()));
                    continue;
                }
            };
            if !entry.file_type().is_some_and(|f| f.is_file()) {
                continue;
            }
            let path = entry.path();
            if SupportLang::from_path(path) != Some(self.lang) {
                continue;
            }
            if !filters.is_empty() {
                let rel = path.strip_prefix(&t.path).unwrap_or(path);
                let ok = filters.iter().any(|(m, by_path)| {
                    if *by_path {
                        m.is_match(rel)
                    } else {
                        m.is_match(Path::new(entry.file_name()))
                    }
                });
                if !ok {
                    continue;
                }
            }
            let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
            self.file(cx, path, len);
        }
    }

    fn file(&mut self, cx: &Context<'_>, path: &Path, len: u64) {
        let name = shown(cx, path);
        if len > MAX_FILE_BYTES {
            self.report.skip("larger than 8 MiB", name);
            return;
        }
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) => return self.report.unreadable(name, &e),
        };
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return self.report.skip("larger than 8 MiB", name);
        }
        if looks_binary(&bytes) {
            return self.report.skip("binary", name);
        }
        let Ok(text) = String::from_utf8(bytes) else {
            return self.report.skip("not UTF-8", name);
        };
        // Every match holds the pattern's longest literal token: a file without it has none,
        // and is searched without being parsed (the ast-grep CLI skips the matching of such
        // a file; this skips its parse as well).
        if !self.fixed.is_empty() && !text.contains(self.fixed.as_str()) {
            self.report.files_searched += 1;
            return;
        }
        let Ok(doc) = StrDoc::try_new(&text, self.lang) else {
            return self.report.skip("the parser gave no tree", name);
        };
        let scan = scan(doc.tree.root_node(), text.as_bytes(), MAX_TREE_DEPTH);
        if scan.too_deep {
            return self.report.skip("nested more than 4096 levels deep", name);
        }
        self.report.files_searched += 1;
        self.report.suppressions += scan.suppressions.len();
        if let Some((line, column, _)) = scan.first_error {
            self.report.parse_errors.push((name.clone(), line, column));
        }
        let root = AstGrep::doc(doc);
        let mut matched = false;
        for m in root.root().find_all(self.pattern) {
            matched = true;
            self.report.total += 1;
            if self.report.hits.len() >= self.max {
                continue;
            }
            let start = m.start_pos();
            let line = start.line() + 1;
            let env = m.get_env();
            let bindings = self
                .vars
                .iter()
                .map(String::as_str)
                .filter_map(|v| {
                    if let Some(node) = env.get_match(v) {
                        return Some((format!("${v}"), one_line(&node.text(), BINDING_CHARS)));
                    }
                    let nodes = env.get_multiple_matches(v);
                    let first = nodes.first()?;
                    let last = nodes.last()?;
                    let src = first.get_doc().get_source();
                    let text = src.get(first.range().start..last.range().end)?;
                    Some((format!("$$${v}"), one_line(text, BINDING_CHARS)))
                })
                .collect();
            let suppression = scan
                .suppressions
                .iter()
                .find(|(l, _)| *l == line || *l + 1 == line)
                .copied();
            self.report.hits.push(Hit {
                file: name.clone(),
                line,
                column: start.column(&m) + 1,
                text: one_line(&m.text(), MATCH_CHARS),
                bindings,
                suppression,
            });
        }
        if matched {
            self.report.files_matched += 1;
        }
    }
}

/// The syntax tree of `code`: named nodes with their field, kind and position, the text of
/// leaves, errors marked.
fn dump(cx: &Context<'_>, code: &str, lang: SupportLang) -> RunnerResponse {
    let Ok(doc) = StrDoc::try_new(code, lang) else {
        return RunnerResponse::failed(format!("the {lang} parser gave no tree for the code"));
    };
    let src = code.as_bytes();
    let mut out =
        format!("syntax tree of the code as {lang} (named nodes; `field:` names the role):\n");
    let mut cursor = doc.tree.root_node().walk();
    let mut depth = 0usize;
    let mut full = false;
    loop {
        let node = cursor.node();
        if node.is_named() || node.is_error() || node.is_missing() {
            let p = node.start_position();
            let e = node.end_position();
            let field = cursor
                .field_name()
                .map(|f| format!("{f}: "))
                .unwrap_or_default();
            let mark = if node.is_error() {
                "ERROR "
            } else if node.is_missing() {
                "MISSING "
            } else {
                ""
            };
            let leaf = if node.named_child_count() == 0 {
                format!(
                    " `{}`",
                    one_line(node.utf8_text(src).unwrap_or_default(), 60)
                )
            } else {
                String::new()
            };
            let line = format!(
                "{}{field}{mark}{} {}:{}-{}:{}{leaf}\n",
                "  ".repeat(depth.min(40)),
                node.kind(),
                p.row + 1,
                p.column + 1,
                e.row + 1,
                e.column + 1
            );
            if out.len() + line.len() > cx.cap.saturating_sub(100) {
                full = true;
                break;
            }
            out.push_str(&line);
        }
        if cursor.goto_first_child() {
            depth += 1;
            continue;
        }
        let mut done = false;
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                done = true;
                break;
            }
            depth -= 1;
        }
        if done {
            break;
        }
    }
    if full {
        out.push_str("[truncated by the output limit; dump a smaller snippet]\n");
    }
    if doc.tree.root_node().has_error() {
        out.push_str("note: the code has syntax errors (ERROR / MISSING nodes above)\n");
    }
    RunnerResponse::completed(out)
}

#[cfg(test)]
mod tests;
