//! `ast_grep` against files with known match counts, this repository's own sources, and
//! bad input: each answer is one of the three states, and none that searched nothing reads
//! as a search that found nothing.

use std::path::Path;

use serde_json::json;

use super::super::{RunnerResponse, run as run_tool};
use crate::tools::ToolState;

fn call(workspace: &Path, args: serde_json::Value) -> RunnerResponse {
    let request = json!({"workspace": workspace, "output_cap": 64 * 1024, "args": args});
    run_tool(
        "ast_grep",
        &serde_json::to_vec(&request).unwrap_or_else(|_| unreachable!()),
    )
}

#[cfg(any(
    feature = "astgrep-rust",
    feature = "astgrep-python",
    feature = "astgrep-javascript",
    feature = "astgrep-typescript",
    feature = "astgrep-go",
    feature = "astgrep-java",
    feature = "astgrep-c",
    feature = "astgrep-cpp"
))]
fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap_or_else(|e| unreachable!("{e}"));
}

/// The `N match(es)` count of the first line of a completed search.
#[cfg(any(
    feature = "astgrep-rust",
    feature = "astgrep-python",
    feature = "astgrep-javascript",
    feature = "astgrep-typescript",
    feature = "astgrep-go",
    feature = "astgrep-java",
    feature = "astgrep-c",
    feature = "astgrep-cpp"
))]
fn count(r: &RunnerResponse) -> usize {
    assert_eq!(r.state, ToolState::Completed, "{}", r.content);
    r.content
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| unreachable!("{}", r.content))
}

#[test]
fn unknown_and_uncompiled_languages_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    for (language, needle) in [
        ("cobol", "knows no language `cobol`"),
        ("kotlin", "no feature for its grammar"),
        #[cfg(not(feature = "astgrep-go"))]
        ("go", "built without its grammar (feature `astgrep-go`)"),
        #[cfg(not(feature = "astgrep-rust"))]
        ("rust", "built without its grammar (feature `astgrep-rust`)"),
    ] {
        let r = call(dir.path(), json!({"pattern": "x", "language": language}));
        assert_eq!(r.state, ToolState::CouldNotRun, "{}", r.content);
        assert!(r.content.contains(needle), "{needle}: {}", r.content);
    }
}

#[cfg(feature = "astgrep-rust")]
const RUST: &str = r#"
fn main() {
    let a = x.unwrap();                 // 1
    let b = y.unwrap().len();           // 2
    // z.unwrap() in a comment is not code
    /* w.unwrap() in a block comment */
    let s = "v.unwrap() in a string literal";
    let r = r"u.unwrap() in a raw string";
    println!("{}", t.unwrap());         // a macro body is a token tree: not searched
    let v = vec![q.unwrap()];           // the same
    if let Some(c) = f(p.unwrap()) {}   // 3
}
"#;

#[cfg(feature = "astgrep-rust")]
#[test]
fn rust_matches_code_only_and_binds_metavariables() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    write(dir.path(), "a.rs", RUST);
    let r = call(
        dir.path(),
        json!({"pattern": "$X.unwrap()", "language": "rust"}),
    );
    assert_eq!(count(&r), 3, "{}", r.content);
    assert!(r.content.contains("a.rs:3:13: x.unwrap()"), "{}", r.content);
    assert!(r.content.contains("    $X = y"), "{}", r.content);
    assert!(!r.content.contains("z.unwrap"), "{}", r.content);
    assert!(!r.content.contains("v.unwrap"), "{}", r.content);
    // The macro-body limitation, as documented: `t` and `q` are inside macros.
    assert!(!r.content.contains("t.unwrap"), "{}", r.content);
    // A multi-node metavariable binds the span of its nodes.
    let r = call(
        dir.path(),
        json!({"pattern": "fn $F() { $$$BODY }", "language": "rs"}),
    );
    assert_eq!(count(&r), 1, "{}", r.content);
    assert!(
        r.content.contains("$$$BODY = let a = x.unwrap();"),
        "{}",
        r.content
    );
}

#[cfg(feature = "astgrep-python")]
#[test]
fn python_matches_code_only() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    write(
        dir.path(),
        "a.py",
        "import os\n\
         eval(user_input)\n\
         # eval(in_a_comment)\n\
         s = \"eval(in_a_string)\"\n\
         d = '''eval(in_a_docstring)'''\n\
         def f(x):\n    return eval(x + '1')\n\
         os.system(cmd)\n",
    );
    let r = call(
        dir.path(),
        json!({"pattern": "eval($A)", "language": "python"}),
    );
    assert_eq!(count(&r), 2, "{}", r.content);
    assert!(
        r.content.contains("a.py:2:1: eval(user_input)"),
        "{}",
        r.content
    );
    assert!(r.content.contains("$A = x + '1'"), "{}", r.content);
    let r = call(
        dir.path(),
        json!({"pattern": "os.system($$$)", "language": "py"}),
    );
    assert_eq!(count(&r), 1, "{}", r.content);
}

/// The other grammars, when a build selects them: one known count each, with the comment
/// and string-literal negatives.
#[cfg(any(
    feature = "astgrep-javascript",
    feature = "astgrep-typescript",
    feature = "astgrep-go",
    feature = "astgrep-java",
    feature = "astgrep-c",
    feature = "astgrep-cpp"
))]
#[test]
fn other_grammars_have_known_counts() {
    let cases: Vec<(&str, &str, &str, &str)> = vec![
        #[cfg(feature = "astgrep-javascript")]
        (
            "javascript",
            "a.js",
            "eval($A)",
            "eval(a);\n// eval(b)\nconst s = 'eval(c)';\nf(eval(d));\n",
        ),
        #[cfg(feature = "astgrep-typescript")]
        (
            "typescript",
            "a.ts",
            "eval($A)",
            "const x: number = eval(a);\n/* eval(b) */\nlet s = `eval(c)`;\neval(d);\n",
        ),
        // Go: in a pattern, `pkg.F(x)` with one argument parses as a type conversion, so a
        // pattern for a qualified call names two arguments or more (`exec.Command($$$)`
        // finds none of these; docs/tools.md).
        #[cfg(feature = "astgrep-go")]
        (
            "go",
            "a.go",
            "exec.Command($CMD, $$$ARGS)",
            "package main\nfunc f() {\n\texec.Command(\"sh\", \"-c\", x)\n\t// exec.Command(\"sh\", \"-c\", y)\n\ts := \"exec.Command(a, b)\"\n\texec.Command(name, arg)\n}\n",
        ),
        #[cfg(feature = "astgrep-java")]
        (
            "java",
            "A.java",
            "Runtime.getRuntime().exec($A)",
            "class A { void f() {\n Runtime.getRuntime().exec(cmd);\n // Runtime.getRuntime().exec(x);\n String s = \"Runtime.getRuntime().exec(y)\";\n Runtime.getRuntime().exec(other);\n} }\n",
        ),
        #[cfg(feature = "astgrep-c")]
        (
            "c",
            "a.c",
            "strcpy($A, $B)",
            "void f(char *d, char *s) {\n  strcpy(d, s);\n  /* strcpy(x, y); */\n  const char *t = \"strcpy(a, b)\";\n  strcpy(d, t);\n}\n",
        ),
        #[cfg(feature = "astgrep-cpp")]
        (
            "cpp",
            "a.cpp",
            "strcpy($A, $B)",
            "void f(char *d, char *s) {\n  strcpy(d, s);\n  // strcpy(x, y);\n  auto t = \"strcpy(a, b)\";\n  strcpy(d, t);\n}\n",
        ),
    ];
    for (lang, file, pattern, code) in cases {
        let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        write(dir.path(), file, code);
        let r = call(dir.path(), json!({"pattern": pattern, "language": lang}));
        assert_eq!(count(&r), 2, "{lang}: {}", r.content);
    }
}

#[cfg(feature = "astgrep-rust")]
#[test]
fn this_repository_finds_a_function_where_its_text_is() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = "src/tools/runner/mod.rs";
    let text = std::fs::read_to_string(repo.join(file)).unwrap_or_else(|e| unreachable!("{e}"));
    let line = text
        .lines()
        .position(|l| l.starts_with("fn normalize("))
        .map(|i| i + 1)
        .unwrap_or_else(|| unreachable!());
    let r = call(
        repo,
        json!({"pattern": "fn normalize($$$P) -> PathBuf { $$$B }", "language": "rust", "paths": ["src/tools"]}),
    );
    assert_eq!(count(&r), 1, "{}", r.content);
    assert!(
        r.content
            .contains(&format!("{file}:{line}:1: fn normalize(")),
        "{}",
        r.content
    );
    // Every `.unwrap()` call found in src/ is where its line's text has it: the structural
    // search never invents a match, and skips those in comments and strings that grep finds.
    let r = call(
        repo,
        json!({"pattern": "$X.unwrap()", "language": "rust", "paths": ["src"], "max_results": 1000}),
    );
    let n = count(&r);
    assert!(n > 0, "{}", r.content);
    assert!(!r.content.contains("INCOMPLETE"), "{}", r.content);
    let mut checked = 0;
    let mut sources = std::collections::HashMap::new();
    for entry in r.content.lines().skip(1) {
        // `file:line:column: text`, the text the match's first line (` …` when cut).
        let mut parts = entry.splitn(4, ':');
        let (Some(file), Some(line), Some(column), Some(text)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (Ok(line), Ok(column)) = (line.parse::<usize>(), column.parse::<usize>()) else {
            continue;
        };
        let source = sources.entry(file.to_owned()).or_insert_with(|| {
            std::fs::read_to_string(repo.join(file)).unwrap_or_else(|e| unreachable!("{file}: {e}"))
        });
        let at = source
            .lines()
            .nth(line - 1)
            .unwrap_or_else(|| unreachable!("{entry}"));
        let text = text.strip_prefix(' ').unwrap_or(text);
        let whole = !text.ends_with(" …");
        let text = text.strip_suffix(" …").unwrap_or(text);
        let from: String = at.chars().skip(column - 1).collect();
        assert!(from.starts_with(text), "{entry}: the line is {at:?}");
        assert!(!at.trim_start().starts_with("//"), "{entry}: a comment");
        if whole {
            assert!(text.ends_with(".unwrap()"), "{entry}");
        }
        checked += 1;
    }
    assert!(checked > 0, "{}", r.content);
    assert!(checked <= n, "{}", r.content);
    // grep finds more: those in comments and string literals (in this file, say).
    let grep = |dir: &Path| -> usize {
        fn walk(dir: &Path, n: &mut usize) {
            for e in std::fs::read_dir(dir).unwrap_or_else(|e| unreachable!("{e}")) {
                let p = e.unwrap_or_else(|e| unreachable!("{e}")).path();
                if p.is_dir() {
                    walk(&p, n);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    *n += text.lines().filter(|l| l.contains(".unwrap()")).count();
                }
            }
        }
        let mut n = 0;
        walk(dir, &mut n);
        n
    };
    assert!(grep(&repo.join("src")) > n, "{}", r.content);
}

#[cfg(feature = "astgrep-rust")]
#[test]
fn bad_patterns_and_languages_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    write(dir.path(), "a.rs", RUST);
    let refused = |args: serde_json::Value, needle: &str| {
        let r = call(dir.path(), args);
        assert_eq!(r.state, ToolState::CouldNotRun, "{}", r.content);
        assert!(r.content.contains(needle), "{needle}: {}", r.content);
    };
    refused(
        json!({"pattern": "$X.unwrap(", "language": "rust"}),
        "not valid Rust",
    );
    refused(
        json!({"pattern": "x", "language": "cobol"}),
        "knows no language `cobol`",
    );
    refused(
        json!({"pattern": "x", "language": "kotlin"}),
        "no feature for its grammar",
    );
    #[cfg(not(feature = "astgrep-go"))]
    refused(
        json!({"pattern": "x", "language": "go"}),
        "feature `astgrep-go`",
    );
    // A 1 MB pattern is refused by size, before any parse.
    let huge = "a + ".repeat(256 * 1024) + "a";
    refused(json!({"pattern": huge, "language": "rust"}), "bytes");
    // A pattern nested past the limit within the size limit.
    let deep = format!("{}a{}", "(".repeat(4000), ")".repeat(4000));
    refused(
        json!({"pattern": deep, "language": "rust"}),
        "nested more than",
    );
    refused(
        json!({"pattern": "a", "language": "rust", "max_results": 0}),
        "max_results",
    );
    refused(
        json!({"pattern": "a", "language": "rust", "globs": ["["]}),
        "ast_grep",
    );
}

#[cfg(feature = "astgrep-rust")]
#[test]
fn what_was_not_searched_is_listed() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    write(dir.path(), "a.rs", RUST);
    std::fs::write(dir.path().join("bin.rs"), b"fn main() {}\0\x01\x02")
        .unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::write(
        dir.path().join("latin1.rs"),
        b"fn main() { let s = \"\xe9\"; }",
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    // A 50 MB file (sparse): listed, never read.
    let big =
        std::fs::File::create(dir.path().join("big.rs")).unwrap_or_else(|e| unreachable!("{e}"));
    big.set_len(50 * 1024 * 1024)
        .unwrap_or_else(|e| unreachable!("{e}"));
    // Nesting deeper than the limit: listed, not searched, in bounded time.
    let deep = format!(
        "fn f() {{ {}x.unwrap(){} }}",
        "{".repeat(20_000),
        "}".repeat(20_000)
    );
    write(dir.path(), "deep.rs", &deep);
    write(dir.path(), "broken.rs", "fn g() { y.unwrap() \nfn (((\n");
    write(
        dir.path(),
        "quiet.rs",
        "fn h() {\n    // nosemgrep: rust.unwrap\n    z.unwrap();\n}\n",
    );
    let started = std::time::Instant::now();
    let r = call(
        dir.path(),
        json!({"pattern": "$X.unwrap()", "language": "rust"}),
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // a.rs's three and quiet.rs's one; broken.rs's call sits inside the parse error.
    assert_eq!(count(&r), 4, "{}", r.content);
    for needle in [
        "INCOMPLETE: 4 file(s)",
        "not searched (binary): 1 file(s): bin.rs",
        "not searched (not UTF-8): 1 file(s): latin1.rs",
        "not searched (larger than 8 MiB): 1 file(s): big.rs",
        "not searched (nested more than 4096 levels deep): 1 file(s): deep.rs",
        "did not parse cleanly (matches in these files may be missing): 1 file(s): broken.rs:",
        "a `nosemgrep` comment on line 2 asks scanners to skip this; reported, not obeyed",
    ] {
        assert!(r.content.contains(needle), "{needle}: {}", r.content);
    }
}

#[cfg(feature = "astgrep-rust")]
#[test]
fn nothing_searched_is_never_nothing_found() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    write(dir.path(), "a.py", "print(1)\n");
    let r = call(
        dir.path(),
        json!({"pattern": "$X.unwrap()", "language": "rust"}),
    );
    assert_eq!(r.state, ToolState::CouldNotRun, "{}", r.content);
    assert!(r.content.contains("searched no file"), "{}", r.content);
    let r = call(
        dir.path(),
        json!({"pattern": "$X.unwrap()", "language": "rust", "paths": ["missing"]}),
    );
    assert_eq!(r.state, ToolState::Failed, "{}", r.content);
    assert_eq!(r.errno, Some(libc::ENOENT));
    // A search that covered files and found nothing says how many it searched.
    write(dir.path(), "b.rs", "fn main() {}\n");
    let r = call(
        dir.path(),
        json!({"pattern": "$X.unwrap()", "language": "rust"}),
    );
    assert_eq!(count(&r), 0);
    assert!(
        r.content.contains("in 0 of 1 file(s) searched"),
        "{}",
        r.content
    );
}

#[cfg(feature = "astgrep-rust")]
#[test]
fn results_are_capped_with_a_note() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    write(dir.path(), "a.rs", &"fn f() { a.unwrap(); }\n".repeat(50));
    let r = call(
        dir.path(),
        json!({"pattern": "$X.unwrap()", "language": "rust", "max_results": 10}),
    );
    assert_eq!(count(&r), 50);
    assert!(
        r.content.contains("showing 10 of 50 matches"),
        "{}",
        r.content
    );
    assert!(r.content.contains("raise max_results"), "{}", r.content);
}

#[cfg(feature = "astgrep-rust")]
#[test]
fn dump_shows_node_kinds_and_errors() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let r = call(
        dir.path(),
        json!({"pattern": "let a = b.unwrap();", "language": "rust", "mode": "dump"}),
    );
    assert_eq!(r.state, ToolState::Completed, "{}", r.content);
    assert!(
        r.content.contains("let_declaration 1:1-1:20"),
        "{}",
        r.content
    );
    assert!(
        r.content.contains("function: field_expression"),
        "{}",
        r.content
    );
    assert!(
        r.content
            .contains("field: field_identifier 1:11-1:17 `unwrap`"),
        "{}",
        r.content
    );
    let r = call(
        dir.path(),
        json!({"pattern": "fn (", "language": "rust", "mode": "dump"}),
    );
    assert!(r.content.contains("syntax errors"), "{}", r.content);
}
