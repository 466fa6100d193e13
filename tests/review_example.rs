//! The review example under `examples/review`, played back on this host with `--host` (no
//! kernel scope): every review tool answers what the recording's review relies on. The same
//! episode under the kernel is `kernel_review`.

mod support;

use support::{assert_review_results, bee_in, code, review_example, text, transcript_events};

#[test]
fn the_review_example_plays_with_every_review_tool() {
    let dir = tempfile::tempdir().unwrap();
    review_example(dir.path());
    // Host mode excludes a policy: the same scenario without its policy line.
    let scenario = std::fs::read_to_string(dir.path().join("scenario.toml")).unwrap();
    let host: String = scenario
        .lines()
        .filter(|l| !l.starts_with("policy ="))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.path().join("host.toml"), host).unwrap();
    let records = dir.path().join("records");
    let o = bee_in(
        dir.path(),
        &[
            "run",
            "--host",
            "--scenario",
            "host.toml",
            "--provider",
            "provider.toml",
            "--records-dir",
            &records.display().to_string(),
        ],
    );
    assert_eq!(code(&o), 0, "{}\n{}", text(&o.stdout), text(&o.stderr));
    let events = transcript_events(&records);
    assert_eq!(events[0]["policy"]["enforcement"], "host", "{}", events[0]);
    assert_review_results(&events);
    // On the host, /bin is readable and holds no Rust file: searched nothing, and says so.
    let r5 = events
        .iter()
        .find(|e| e["event"] == "tool_result" && e["call_id"] == "r5")
        .unwrap();
    assert_eq!(r5["state"], "could_not_run", "{r5}");
    assert!(
        r5["output"].as_str().unwrap().contains("searched no file"),
        "{r5}"
    );
    let last = events.last().unwrap();
    assert_eq!(last["event"], "episode_finished");
    assert_eq!(last["outcome"], "passed", "{last}");
}
