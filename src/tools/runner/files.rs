//! `read_file`, `write_file`, `edit_file` and `list_dir`.

use std::fs;

use serde::Deserialize;

use super::{Context, RunnerResponse, cut, looks_binary};

/// Lines shown when the model gives no limit.
const DEFAULT_LIMIT: usize = 2000;
/// Characters of one line shown before it is cut.
const LINE_CHARS: usize = 2000;
/// Entries `list_dir` shows at most.
const MAX_ENTRIES: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

pub(crate) fn read_file(cx: &Context<'_>, a: ReadArgs) -> RunnerResponse {
    let t = match cx.target(&a.path) {
        Ok(t) => t,
        Err(r) => return r,
    };
    if a.offset == Some(0) || a.limit == Some(0) {
        return RunnerResponse::could_not_run(
            "bad arguments for `read_file`: `offset` and `limit` start at 1".to_owned(),
        );
    }
    let bytes = match fs::read(&t.path) {
        Ok(b) => b,
        Err(e) => return RunnerResponse::io("read", &t, &e).noted(&t),
    };
    if looks_binary(&bytes) {
        return RunnerResponse::completed(format!(
            "`{}` is a binary file ({} bytes); not shown",
            t.shown,
            bytes.len()
        ))
        .noted(&t);
    }
    if bytes.is_empty() {
        return RunnerResponse::completed(format!("`{}` is empty", t.shown)).noted(&t);
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let first = a.offset.unwrap_or(1);
    if first > total {
        return RunnerResponse::failed(format!(
            "offset {first} is past the end of `{}`, which has {total} lines",
            t.shown
        ))
        .noted(&t);
    }
    let limit = a.limit.unwrap_or(DEFAULT_LIMIT);
    let mut out = String::new();
    let mut last = first - 1;
    let mut cut_lines = 0usize;
    for (i, line) in lines.iter().enumerate().skip(first - 1).take(limit) {
        let mut shown = (*line).to_owned();
        if shown.chars().count() > LINE_CHARS {
            shown = shown.chars().take(LINE_CHARS).collect();
            shown.push_str(" … [line cut]");
            cut_lines += 1;
        }
        let entry = format!("{:>6}\t{shown}\n", i + 1);
        if out.len() + entry.len() > cx.cap && last >= first {
            break;
        }
        out.push_str(&entry);
        last = i + 1;
    }
    cut(&mut out, cx.cap);
    if last < total {
        out.push_str(&format!(
            "[truncated: showing lines {first}–{last} of {total}; read on with offset={}]\n",
            last + 1
        ));
    }
    if cut_lines > 0 {
        out.push_str(&format!(
            "[{cut_lines} line(s) longer than {LINE_CHARS} characters were cut]\n"
        ));
    }
    RunnerResponse::completed(out).noted(&t)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadTextArgs {
    path: String,
}

/// A file's raw text, at most the output cap of it, for the harness.
pub(crate) fn read_text(cx: &Context<'_>, a: ReadTextArgs) -> RunnerResponse {
    use std::io::Read as _;
    let t = match cx.target(&a.path) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let file = match fs::File::open(&t.path) {
        Ok(f) => f,
        Err(e) => return RunnerResponse::io("read", &t, &e),
    };
    let total = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Vec::new();
    if let Err(e) = file.take(cx.cap as u64).read_to_end(&mut bytes) {
        return RunnerResponse::io("read", &t, &e);
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    cut(&mut text, cx.cap);
    RunnerResponse::completed(serde_json::json!({"text": text, "total_bytes": total}).to_string())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    path: String,
    content: String,
    #[serde(default)]
    create_dirs: bool,
}

pub(crate) fn write_file(cx: &Context<'_>, a: WriteArgs) -> RunnerResponse {
    let t = match cx.target(&a.path) {
        Ok(t) => t,
        Err(r) => return r,
    };
    if let Some(parent) = t.path.parent() {
        if a.create_dirs {
            if let Err(e) = fs::create_dir_all(parent) {
                return RunnerResponse::io("create the parent directories of", &t, &e).noted(&t);
            }
        } else if !parent.is_dir() {
            return RunnerResponse {
                errno: Some(libc::ENOENT),
                ..RunnerResponse::failed(format!(
                    "the parent directory of `{}` does not exist; pass create_dirs: true to \
                     create it",
                    t.shown
                ))
            }
            .noted(&t);
        }
    }
    let existed = t.path.exists();
    match fs::write(&t.path, a.content.as_bytes()) {
        Ok(()) => RunnerResponse::completed(format!(
            "{} `{}` ({} bytes)",
            if existed { "replaced" } else { "created" },
            t.shown,
            a.content.len()
        ))
        .noted(&t),
        Err(e) => RunnerResponse::io("write", &t, &e).noted(&t),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

pub(crate) fn edit_file(cx: &Context<'_>, a: EditArgs) -> RunnerResponse {
    let t = match cx.target(&a.path) {
        Ok(t) => t,
        Err(r) => return r,
    };
    if a.old_string.is_empty() {
        return RunnerResponse::could_not_run(
            "bad arguments for `edit_file`: `old_string` is empty".to_owned(),
        );
    }
    if a.old_string == a.new_string {
        return RunnerResponse::could_not_run(
            "bad arguments for `edit_file`: `old_string` and `new_string` are the same".to_owned(),
        );
    }
    let text = match fs::read(&t.path) {
        Ok(b) => match String::from_utf8(b) {
            Ok(s) => s,
            Err(_) => {
                return RunnerResponse::failed(format!(
                    "`{}` is not UTF-8 text; edit_file changes text files only",
                    t.shown
                ))
                .noted(&t);
            }
        },
        Err(e) => return RunnerResponse::io("read", &t, &e).noted(&t),
    };
    let starts: Vec<usize> = text.match_indices(&a.old_string).map(|(i, _)| i).collect();
    let line_of = |i: usize| text.get(..i).map_or(0, |s| s.matches('\n').count()) + 1;
    let lines: Vec<String> = starts.iter().map(|&i| line_of(i).to_string()).collect();
    match starts.len() {
        0 => {
            return RunnerResponse::failed(format!(
                "`old_string` was not found in `{}`; nothing was changed (it must match \
                 exactly, whitespace and line breaks included)",
                t.shown
            ))
            .noted(&t);
        }
        n if n > 1 && !a.replace_all => {
            let shown: Vec<&str> = lines.iter().take(20).map(String::as_str).collect();
            return RunnerResponse::failed(format!(
                "`old_string` occurs {n} times in `{}` (starting on lines {}{}); nothing was \
                 changed. Include more surrounding text to make it unique, or pass \
                 replace_all: true",
                t.shown,
                shown.join(", "),
                if n > 20 { ", …" } else { "" }
            ))
            .noted(&t);
        }
        _ => {}
    }
    let new = if a.replace_all {
        text.replace(&a.old_string, &a.new_string)
    } else {
        text.replacen(&a.old_string, &a.new_string, 1)
    };
    if let Err(e) = fs::write(&t.path, new.as_bytes()) {
        return RunnerResponse::io("write", &t, &e).noted(&t);
    }
    let n = starts.len();
    RunnerResponse::completed(format!(
        "replaced {n} occurrence{} in `{}` (line{} {})",
        if n == 1 { "" } else { "s" },
        t.shown,
        if n == 1 { "" } else { "s" },
        lines.join(", ")
    ))
    .noted(&t)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {
    #[serde(default)]
    path: Option<String>,
}

pub(crate) fn list_dir(cx: &Context<'_>, a: ListArgs) -> RunnerResponse {
    let t = match cx.target(a.path.as_deref().unwrap_or(".")) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let dir = match fs::read_dir(&t.path) {
        Ok(d) => d,
        Err(e) => return RunnerResponse::io("list", &t, &e).noted(&t),
    };
    let mut names = Vec::new();
    let mut unreadable = 0usize;
    for entry in dir {
        let Ok(entry) = entry else {
            unreadable += 1;
            continue;
        };
        let mut name = entry.file_name().to_string_lossy().into_owned();
        match entry.file_type() {
            Ok(ft) if ft.is_dir() => name.push('/'),
            Ok(ft) if ft.is_symlink() => name.push('@'),
            _ => {}
        }
        names.push(name);
    }
    names.sort();
    let total = names.len();
    if total == 0 && unreadable == 0 {
        return RunnerResponse::completed(format!("`{}` is empty", t.shown)).noted(&t);
    }
    let mut out = String::new();
    let mut shown = 0usize;
    for name in names.iter().take(MAX_ENTRIES) {
        if out.len() + name.len() + 1 > cx.cap {
            break;
        }
        out.push_str(name);
        out.push('\n');
        shown += 1;
    }
    if shown < total {
        out.push_str(&format!(
            "[truncated: showing {shown} of {total} entries]\n"
        ));
    }
    if unreadable > 0 {
        out.push_str(&format!("[{unreadable} entries could not be read]\n"));
    }
    RunnerResponse::completed(out).noted(&t)
}
