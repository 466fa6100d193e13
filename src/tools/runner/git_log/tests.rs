//! `git_log` against a repository built here with known history (renames, a shallow clone,
//! a corrupted object store, a long history) and against this repository's own history.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use super::super::{RunnerResponse, run as run_tool};
use crate::tools::ToolState;

fn call(workspace: &Path, args: serde_json::Value) -> RunnerResponse {
    call_with_budget(workspace, args, None)
}

fn call_with_budget(workspace: &Path, args: serde_json::Value, ms: Option<u64>) -> RunnerResponse {
    let mut request = json!({"workspace": workspace, "output_cap": 64 * 1024, "args": args});
    if let Some(ms) = ms {
        request["time_budget_ms"] = json!(ms);
    }
    run_tool(
        "git_log",
        &serde_json::to_vec(&request).unwrap_or_else(|_| unreachable!()),
    )
}

/// Runs git in `dir` with a fixed identity and date, and returns its output.
fn git(dir: &Path, args: &[&str], day: u32) -> String {
    let date = format!("2026-01-{day:02}T12:00:00Z");
    let out = Command::new("git")
        .args(["-c", "init.defaultBranch=main", "-c", "core.autocrlf=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Ada")
        .env("GIT_AUTHOR_EMAIL", "ada@example.org")
        .env("GIT_COMMITTER_NAME", "Ada")
        .env("GIT_COMMITTER_EMAIL", "ada@example.org")
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .output()
        .unwrap_or_else(|e| unreachable!("git: {e}"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap_or_else(|e| unreachable!("{e}"));
}

/// A repository with: c1 adds a.txt, c2 changes its line 2, c3 renames it to b.txt, c4
/// changes b.txt's line 3, c5 adds other.txt. Returns the five commit ids.
fn fixture(dir: &Path) -> Vec<String> {
    git(dir, &["init", "-q"], 1);
    let mut ids = Vec::new();
    let mut commit = |msg: &str, day: u32| {
        git(dir, &["add", "-A"], day);
        git(dir, &["commit", "-q", "-m", msg], day);
        ids.push(git(dir, &["rev-parse", "HEAD"], day));
    };
    write(dir, "a.txt", "one\ntwo\nthree\nfour\nfive\n");
    commit("c1: add a.txt", 1);
    write(dir, "a.txt", "one\nTWO\nthree\nfour\nfive\n");
    commit("c2: shout line two", 2);
    git(dir, &["mv", "a.txt", "b.txt"], 3);
    commit("c3: rename a.txt to b.txt", 3);
    write(dir, "b.txt", "one\nTWO\nTHREE\nfour\nfive\n");
    commit("c4: shout line three", 4);
    write(dir, "other.txt", "x\n");
    commit("c5: add other.txt", 5);
    ids
}

fn completed(r: &RunnerResponse) -> &str {
    assert_eq!(r.state, ToolState::Completed, "{}", r.content);
    &r.content
}

/// The commit ids of a log, in order.
fn ids(r: &RunnerResponse) -> Vec<String> {
    completed(r)
        .lines()
        .filter(|l| {
            l.len() > 40
                && l.as_bytes()[40] == b' '
                && l[..40].bytes().all(|b| b.is_ascii_hexdigit())
        })
        .map(|l| l[..40].to_owned())
        .collect()
}

#[test]
fn log_follows_renames_newest_first() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let c = fixture(dir.path());
    let r = call(dir.path(), json!({"path": "b.txt"}));
    assert_eq!(
        ids(&r),
        [c[3].clone(), c[2].clone(), c[1].clone(), c[0].clone()],
        "{}",
        r.content
    );
    let text = completed(&r);
    assert!(text.contains("renamed a.txt → b.txt"), "{text}");
    assert!(text.contains("added a.txt"), "{text}");
    assert!(
        text.contains("2026-01-04 12:00:00 +0000 Ada <ada@example.org>"),
        "{text}"
    );
    assert!(text.contains("    c4: shout line three"), "{text}");
    // Without following, history starts at the rename.
    let r = call(dir.path(), json!({"path": "b.txt", "follow": false}));
    assert_eq!(ids(&r), [c[3].clone(), c[2].clone()], "{}", r.content);
    // The whole history, capped.
    let r = call(dir.path(), json!({"max_count": 2}));
    assert_eq!(ids(&r), [c[4].clone(), c[3].clone()], "{}", r.content);
    assert!(r.content.contains("raise max_count"), "{}", r.content);
    // A path no commit changed is answered, and said to be absent.
    let r = call(dir.path(), json!({"path": "never.txt"}));
    assert!(completed(&r).contains("no commit among the 5 examined changed the path"));
    // From another revision.
    let r = call(dir.path(), json!({"path": "a.txt", "rev": c[1]}));
    assert_eq!(ids(&r), [c[1].clone(), c[0].clone()], "{}", r.content);
}

#[test]
fn blame_names_the_commit_of_one_line() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let c = fixture(dir.path());
    let blame = |line: u32| {
        call(
            dir.path(),
            json!({"mode": "blame", "path": "b.txt", "line": line}),
        )
    };
    let r = blame(3);
    let text = completed(&r);
    assert!(text.starts_with("b.txt:3: THREE\n"), "{text}");
    assert!(
        text.contains(&format!("last changed by {} 2026-01-04", c[3])),
        "{text}"
    );
    assert!(text.contains("there: b.txt:3"), "{text}");
    // Line 2 was last changed before the rename, under the old name.
    let text = completed(&blame(2)).to_owned();
    assert!(
        text.contains(&format!("last changed by {}", c[1])),
        "{text}"
    );
    assert!(text.contains("there: a.txt:2"), "{text}");
    assert!(completed(&blame(1)).contains(&format!("last changed by {}", c[0])));
    // Lines that do not exist, and bad arguments, are refused.
    let r = blame(99);
    assert_eq!(r.state, ToolState::CouldNotRun, "{}", r.content);
    assert!(r.content.contains("has 5 line(s)"), "{}", r.content);
    let r = call(dir.path(), json!({"mode": "blame", "path": "b.txt"}));
    assert_eq!(r.state, ToolState::CouldNotRun, "{}", r.content);
    let r = call(
        dir.path(),
        json!({"mode": "blame", "path": "gone.txt", "line": 1}),
    );
    assert_eq!(r.state, ToolState::CouldNotRun, "{}", r.content);
    assert!(r.content.contains("does not exist"), "{}", r.content);
}

#[test]
fn not_a_repository_and_bad_revisions_could_not_run() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let r = call(dir.path(), json!({}));
    assert_eq!(r.state, ToolState::CouldNotRun, "{}", r.content);
    assert!(
        r.content.contains("is not in a git repository"),
        "{}",
        r.content
    );
    fixture(dir.path());
    let r = call(dir.path(), json!({"rev": "no-such-branch"}));
    assert_eq!(r.state, ToolState::CouldNotRun, "{}", r.content);
    assert!(
        r.content
            .contains("`no-such-branch` does not name a commit"),
        "{}",
        r.content
    );
    let r = call(dir.path(), json!({"max_count": 0}));
    assert_eq!(r.state, ToolState::CouldNotRun, "{}", r.content);
}

#[test]
fn shallow_clones_say_where_their_history_stops() {
    let origin = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let c = fixture(origin.path());
    let clone = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let url = format!("file://{}", origin.path().display());
    git(clone.path(), &["clone", "-q", "--depth", "2", &url, "."], 6);
    let r = call(clone.path(), json!({"path": "b.txt"}));
    let text = completed(&r);
    assert_eq!(ids(&r), [c[3].clone()], "{text}");
    assert!(text.contains("shallow clone"), "{text}");
}

#[test]
fn a_corrupted_object_store_fails_with_what_was_found() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let c = fixture(dir.path());
    // Remove c2's commit object (loose objects: no pack was made).
    let object = dir
        .path()
        .join(".git/objects")
        .join(&c[1][..2])
        .join(&c[1][2..]);
    std::fs::remove_file(&object).unwrap_or_else(|e| unreachable!("{}: {e}", object.display()));
    let r = call(dir.path(), json!({"path": "b.txt"}));
    assert_eq!(r.state, ToolState::Failed, "{}", r.content);
    assert!(r.content.contains(&c[3]), "{}", r.content);
    assert!(r.content.contains("INCOMPLETE"), "{}", r.content);
}

#[test]
fn a_truncated_pack_fails_without_a_panic() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    fixture(dir.path());
    git(dir.path(), &["gc", "-q"], 6);
    let packs = dir.path().join(".git/objects/pack");
    for entry in std::fs::read_dir(&packs).unwrap_or_else(|e| unreachable!("{e}")) {
        let path = entry.unwrap_or_else(|e| unreachable!("{e}")).path();
        if path.extension().is_some_and(|e| e == "pack") {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| unreachable!("{e}"));
            std::fs::write(&path, &bytes[..bytes.len() / 2])
                .unwrap_or_else(|e| unreachable!("{e}"));
        }
    }
    for args in [
        json!({"path": "b.txt"}),
        json!({"mode": "blame", "path": "b.txt", "line": 1}),
    ] {
        let r = call(dir.path(), args);
        assert_eq!(r.state, ToolState::Failed, "{}", r.content);
    }
}

#[test]
fn a_walk_past_its_budget_answers_with_what_it_has() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    // 3,000 commits through fast-import, each changing one file.
    git(dir.path(), &["init", "-q"], 1);
    let mut stream = String::new();
    for i in 0..3000 {
        let body = format!("{i}\n");
        stream.push_str(&format!(
            "commit refs/heads/main\ncommitter Ada <ada@example.org> {} +0000\ndata 2\nc\nM 100644 inline f.txt\ndata {}\n{body}\n",
            1_700_000_000 + i,
            body.len()
        ));
    }
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| unreachable!("{e}"));
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write as _;
        stdin
            .write_all(stream.as_bytes())
            .unwrap_or_else(|e| unreachable!("{e}"));
    }
    assert!(child.wait().is_ok_and(|s| s.success()));
    git(dir.path(), &["checkout", "-q", "main"], 1);
    let r = call_with_budget(dir.path(), json!({"path": "other.txt"}), Some(1));
    assert_eq!(r.state, ToolState::Completed, "{}", r.content);
    assert!(
        r.content.contains("INCOMPLETE: stopped after examining"),
        "{}",
        r.content
    );
    let r = call(dir.path(), json!({"path": "f.txt", "max_count": 500}));
    assert_eq!(ids(&r).len(), 500, "{}", r.content);
}

/// This repository's own history (CI runs on a full clone of it): the limit checks moved
/// from `src/episode/` to `src/session/` in f9fbd5a, and were added in da235cc.
#[test]
fn this_repository_history_and_blame() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let r = call(
        repo,
        json!({"path": "src/session/limits.rs", "rev": "f9fbd5a412f71d91afd78376744100e9f668ef81"}),
    );
    assert_eq!(
        ids(&r),
        [
            "f9fbd5a412f71d91afd78376744100e9f668ef81",
            "3350e9d600da7e650bea98ef4074374cbd8bdc06",
            "da235cc5684a5a5d06b15660868d60bd45b84f70"
        ],
        "{}",
        r.content
    );
    assert!(
        r.content
            .contains("renamed src/episode/limits.rs → src/session/limits.rs")
    );
    let r = call(
        repo,
        json!({"mode": "blame", "path": "src/session/limits.rs", "line": 2, "rev": "f9fbd5a412f71d91afd78376744100e9f668ef81"}),
    );
    let text = completed(&r);
    assert!(
        text.contains("last changed by da235cc5684a5a5d06b15660868d60bd45b84f70"),
        "{text}"
    );
    assert!(
        text.contains("episode: the limit checks in a module of their own"),
        "{text}"
    );
    assert!(text.contains("there: src/episode/limits.rs:2"), "{text}");
}
