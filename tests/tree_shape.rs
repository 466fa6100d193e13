//! The shape of the source tree: a file of product code over 600 lines says at its top why
//! it is one file, and a file that blames its length on its tests has no more than 600 lines
//! of code before them.

#![expect(
    clippy::expect_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::path::{Path, PathBuf};

/// The longest file that needs no reason.
const LONGEST: usize = 600;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            // Test and benchmark code is not product code.
            if !matches!(
                path.file_name().and_then(|n| n.to_str()),
                Some("tests" | "benches" | "target")
            ) {
                sources(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

fn product_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    sources(&root.join("xtask/src"), &mut files);
    let crates = std::fs::read_dir(root.join("crates")).expect("the crates directory");
    for krate in crates.flatten() {
        sources(&krate.path().join("src"), &mut files);
    }
    files.sort();
    files
}

#[test]
fn a_long_file_says_why_it_is_one_file() {
    let files = product_files();
    assert!(
        files.len() > 100,
        "the walk found only {} files: it is not looking at the tree",
        files.len()
    );
    let mut unexplained = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file is readable");
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() <= LONGEST {
            continue;
        }
        // The module's own documentation, at its top.
        let head = lines
            .iter()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| l.trim_start_matches("//!").trim())
            .collect::<Vec<_>>()
            .join(" ");
        if head.contains("Its length is its tests") {
            let code = lines
                .iter()
                .position(|l| l.trim() == "#[cfg(test)]")
                .unwrap_or(lines.len());
            if code > LONGEST {
                unexplained.push(format!(
                    "{}: {code} lines before its tests, yet it blames its length on them",
                    file.display()
                ));
            }
        } else if !head.contains("Why one file") {
            unexplained.push(format!(
                "{}: {} lines and no reason at its top",
                file.display(),
                lines.len()
            ));
        }
    }
    assert!(unexplained.is_empty(), "{}", unexplained.join("\n"));
}
