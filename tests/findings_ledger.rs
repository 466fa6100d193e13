//! The findings ledger under concurrent writers: 16 processes appending at once never
//! interleave or lose a line.

use std::path::PathBuf;
use std::process::Command;

use bee::findings::{Identity, Ledger, Level, Location, Sighting};

const WRITERS: usize = 16;
const EACH: usize = 24;
const CHILD: &str = "BEE_TEST_LEDGER_CHILD";

fn sighting(writer: usize, i: usize) -> Sighting {
    // Half the matches are shared by every writer (one finding each, many sightings), half
    // are the writer's own; messages of 5,000 bytes make each line longer than a pipe buffer (4 KiB).
    let text = if i.is_multiple_of(2) {
        format!("shared({i})")
    } else {
        format!("own({writer}, {i})")
    };
    Sighting {
        identity: Identity::new("opengrep", "rule", "src/a.py", &text, 0),
        alias: None,
        title: "t".to_owned(),
        message: "x".repeat(5000),
        location: Location {
            path: "src/a.py".to_owned(),
            start_line: 1,
            start_column: None,
            end_line: None,
            end_column: None,
        },
        level: Level::Note,
        cvss: None,
    }
}

/// Not a test on its own: the body of each writer process, which the parent runs with
/// `--ignored --exact child_writer`. Ignored so that it never counts as a passing test, and
/// failing when run without the variable the parent sets (by `--ignored`, say).
#[test]
#[ignore = "the body of a writer process of sixteen_processes_append_without_interleaving_or_loss, which runs it"]
fn child_writer() {
    let Ok(spec) = std::env::var(CHILD) else {
        panic!(
            "child_writer is the body of a writer process, run by \
             sixteen_processes_append_without_interleaving_or_loss (which sets {CHILD}); on its \
             own it tests nothing"
        );
    };
    let (path, writer) = spec.split_once('|').unwrap_or_else(|| unreachable!());
    let writer: usize = writer.parse().unwrap_or_else(|e| unreachable!("{e}"));
    let ledger = Ledger::at(PathBuf::from(path));
    for i in 0..EACH {
        ledger
            .record(
                &[sighting(writer, i)],
                "opengrep",
                Some(&format!("w{writer}")),
                None,
            )
            .unwrap_or_else(|e| unreachable!("{e}"));
    }
}

#[test]
fn sixteen_processes_append_without_interleaving_or_loss() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let path = dir.path().join(".bee/findings/ledger.jsonl");
    let exe = std::env::current_exe().unwrap_or_else(|e| unreachable!("{e}"));
    let children: Vec<_> = (0..WRITERS)
        .map(|w| {
            Command::new(&exe)
                .args([
                    "--ignored",
                    "--exact",
                    "child_writer",
                    "--test-threads",
                    "1",
                ])
                .env(CHILD, format!("{}|{w}", path.display()))
                .spawn()
                .unwrap_or_else(|e| unreachable!("{e}"))
        })
        .collect();
    for mut c in children {
        let status = c.wait().unwrap_or_else(|e| unreachable!("{e}"));
        assert!(status.success(), "a writer failed: {status}");
    }
    let loaded = Ledger::at(&path)
        .read()
        .unwrap_or_else(|e| unreachable!("{e}"));
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    assert_eq!(loaded.events.len(), WRITERS * EACH);
    // EACH/2 shared findings, and EACH/2 of each writer's own.
    assert_eq!(
        loaded.findings.findings.len(),
        EACH / 2 + WRITERS * EACH / 2
    );
    for f in loaded.findings.findings.values() {
        let expected = if f.latest.title == "t" && f.runs.len() > 1 {
            WRITERS
        } else {
            1
        };
        assert_eq!(f.sightings, expected, "{}", f.id);
    }
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(text.lines().count(), WRITERS * EACH);
    assert!(text.ends_with('\n'));
}
