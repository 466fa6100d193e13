//! Shards, resumed runs and merged records.
//!
//! The assignment's properties by property test; then the real binary in host mode with the
//! replay provider: a batch of 40 episodes run as 4 shards in 4 processes, each killed with
//! SIGKILL mid-run and resumed, then merged; the merged metrics equal one unsharded run's.
//! And the bad inputs: clear errors, nothing lost or overwritten.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use bee::scenario::{Shard, assign};
use proptest::prelude::*;
use serde_json::Value;
use support::{bee_exe, code, stderr};

fn ids() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::btree_set("[a-z0-9-]{1,12}", 0..60)
        .prop_map(|s| s.into_iter().collect::<Vec<_>>())
}

proptest! {
    #[test]
    fn every_episode_is_in_exactly_one_shard(ids in ids(), count in 1u32..12) {
        let a = assign(ids.iter().map(String::as_str), count);
        prop_assert_eq!(a.len(), ids.len());
        let mut seen = BTreeSet::new();
        for index in 1..=count {
            let shard = Shard { index, count };
            for id in &ids {
                if shard.holds(&a, id) {
                    prop_assert!(seen.insert(id.clone()), "{} in two shards", id);
                }
            }
        }
        prop_assert_eq!(seen.len(), ids.len());
    }

    #[test]
    fn the_assignment_ignores_order(
        ids in ids(),
        count in 1u32..12,
        seed in any::<u64>(),
    ) {
        let mut shuffled = ids.clone();
        // A deterministic shuffle from the seed (Fisher–Yates with a xorshift generator).
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let j = usize::try_from(x % (i as u64 + 1)).unwrap();
            shuffled.swap(i, j);
        }
        prop_assert_eq!(
            assign(ids.iter().map(String::as_str), count),
            assign(shuffled.iter().map(String::as_str), count)
        );
    }

    #[test]
    fn shard_sizes_differ_by_at_most_one(ids in ids(), count in 1u32..12) {
        let a = assign(ids.iter().map(String::as_str), count);
        let mut sizes = vec![0usize; count as usize];
        for shard in a.values() {
            prop_assert!((1..=count).contains(shard));
            sizes[*shard as usize - 1] += 1;
        }
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        prop_assert!(max - min <= 1, "{:?}", sizes);
    }

    #[test]
    fn shard_specs_parse_only_in_range(k in 0u32..20, n in 0u32..20) {
        let parsed = format!("{k}/{n}").parse::<Shard>();
        if (1..=n).contains(&k) {
            prop_assert_eq!(parsed, Ok(Shard { index: k, count: n }));
        } else {
            prop_assert!(parsed.is_err());
        }
    }
}

/// A project with a scenario of `episodes` replayed episodes (each calls `shell` once, for
/// about 0.3 s, then answers), a priced replay provider and a workspace.
fn project(episodes: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("ws")).unwrap();
    std::fs::write(
        p.join("rec.jsonl"),
        concat!(
            r#"{"text": "Looking.", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 0.3; echo hi"}}], "usage": {"input_tokens": 100, "output_tokens": 10}}"#,
            "\n",
            r#"{"text": "Done.", "usage": {"input_tokens": 150, "output_tokens": 5}}"#,
            "\n"
        ),
    )
    .unwrap();
    std::fs::write(
        p.join("replay.toml"),
        "kind = \"replay\"\nfile = \"rec.jsonl\"\nmodel = \"m\"\n\n[prices]\ninput = 3.0\noutput = 15.0\n",
    )
    .unwrap();
    write_scenario(p, episodes, "go");
    dir
}

fn write_scenario(p: &Path, episodes: u32, prompt: &str) {
    std::fs::write(
        p.join("scenario.toml"),
        format!(
            "name = \"batch\"\nprompt = \"{prompt}\"\nworkspace = \"ws\"\nworkspace_mode = \"in-place\"\nrepeat = {episodes}\n"
        ),
    )
    .unwrap();
}

fn bee(p: &Path) -> Command {
    let mut c = Command::new(bee_exe());
    c.current_dir(p)
        .env("HOME", p)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("JOB_COMPLETION_INDEX");
    c
}

fn run_args<'a>(records: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "run",
        "--scenario",
        "scenario.toml",
        "--provider",
        "replay.toml",
        "--host",
        "--records",
        records,
    ];
    a.extend_from_slice(extra);
    a
}

fn output(mut c: Command) -> Output {
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn spawn(mut c: Command) -> Child {
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The one run directory under `records`.
fn run_dir(records: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(records)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|d| d.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.into_iter().next().unwrap()
}

fn transcripts(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        })
        .count()
    })
}

/// `bee metrics --json` for `records`, by `by`, with the timing figures (which differ from
/// run to run) left out and costs rounded to a billionth of a dollar.
fn metrics(p: &Path, records: &str, by: &str) -> Value {
    let mut c = bee(p);
    c.args(["metrics", "--records", records, "--by", by, "--json"]);
    let o = output(c);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let mut v: Value = serde_json::from_slice(&o.stdout).unwrap();
    fn strip(v: &mut Value) {
        if let Value::Object(m) = v {
            for k in ["latency_ms", "first_token_ms", "duration_ms", "db"] {
                m.remove(k);
            }
            // Sums of floating-point costs differ in the last bits with the order of rows.
            for k in ["usd", "known_usd"] {
                if let Some(usd) = m.get(k).and_then(Value::as_f64) {
                    m.insert(k.to_owned(), Value::from((usd * 1e9).round() / 1e9));
                }
            }
            m.values_mut().for_each(strip);
        } else if let Value::Array(a) = v {
            a.iter_mut().for_each(strip);
        }
    }
    strip(&mut v);
    v
}

#[test]
fn four_shards_killed_resumed_and_merged_equal_one_run() {
    let dir = project(40);
    let p = dir.path();

    // Four shards in four processes, as four pods or matrix jobs would run them.
    let records: Vec<String> = (1..=4).map(|k| format!("shard-{k}")).collect();
    let mut children: Vec<Child> = (1..=4)
        .map(|k| {
            let shard = format!("{k}/4");
            let mut c = bee(p);
            c.args(run_args(&records[k - 1], &["--shard", &shard]));
            spawn(c)
        })
        .collect();
    // Each is killed (SIGKILL: no orderly stop) once its second episode has started.
    let start = Instant::now();
    let mut killed = [false; 4];
    while killed.iter().any(|k| !k) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "shards too slow"
        );
        for (k, child) in children.iter_mut().enumerate() {
            let dirs = std::fs::read_dir(p.join(&records[k]))
                .map(|d| {
                    d.filter_map(Result::ok)
                        .map(|e| e.path())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let started = dirs.iter().map(|d| transcripts(d)).sum::<usize>();
            if !killed[k] && started >= 2 {
                child.kill().unwrap();
                child.wait().unwrap();
                killed[k] = true;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    // Resumed, in parallel again; the same command line plus --resume.
    let resumed: Vec<Child> = (1..=4)
        .map(|k| {
            let shard = format!("{k}/4");
            let mut c = bee(p);
            c.args(run_args(&records[k - 1], &["--shard", &shard, "--resume"]));
            c.stdout(Stdio::null()).stderr(Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    let mut set_aside = 0;
    for (k, child) in resumed.into_iter().enumerate() {
        let o = child.wait_with_output().unwrap();
        assert_eq!(code(&o), 0, "shard {}: {}", k + 1, stderr(&o));
        assert!(
            stderr(&o).contains("--resume: continuing run"),
            "{}",
            stderr(&o)
        );
        let summary: Value = serde_json::from_slice(
            &std::fs::read(run_dir(&p.join(&records[k])).join("summary.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(summary["complete"], Value::Bool(true));
        assert_eq!(summary["shard"]["index"], Value::from(k + 1));
        set_aside += summary["set_aside"].as_array().map_or(0, Vec::len);
        // The interrupted attempt is kept beside the rerun but not summarised.
        for e in summary["episodes"].as_array().unwrap() {
            assert!(e["transcript"].as_str().unwrap().ends_with(".jsonl"));
            assert_eq!(e["outcome"], Value::from("passed"));
        }
    }
    assert!(set_aside >= 1, "no episode was interrupted mid-way");

    // Merged.
    let mut c = bee(p);
    c.args(["records", "merge"])
        .args(&records)
        .args(["--into", "merged"]);
    let o = output(c);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let merge: Value =
        serde_json::from_slice(&std::fs::read(p.join("merged/merge.json")).unwrap()).unwrap();
    assert_eq!(merge["episodes"], Value::from(40));
    assert_eq!(merge["shards_present"], serde_json::json!([1, 2, 3, 4]));
    assert_eq!(merge["shards_missing"], serde_json::json!([]));
    assert_eq!(merge["duplicates"], serde_json::json!([]));
    assert_eq!(merge["complete"], Value::Bool(true));

    // One unsharded run of the same scenario.
    let mut c = bee(p);
    c.args(run_args("whole", &["--concurrency", "4"]));
    let o = output(c);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    let whole = metrics(p, "whole", "run");
    let merged = metrics(p, "merged", "run");
    assert_eq!(merged["total"], whole["total"]);
    assert_eq!(merged["total"]["episodes"], Value::from(40));
    assert_eq!(merged["total"]["model"]["calls"], Value::from(80));
    let by_episode = |v: &Value| -> BTreeMap<String, Value> {
        v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                // Keys are `<run id>/<episode id>`; the run ids differ.
                let key = g["key"].as_str().unwrap();
                let episode = key.split_once('/').map_or(key, |(_, e)| e).to_owned();
                let mut g = g.clone();
                g["key"] = Value::from(episode.clone());
                (episode, g)
            })
            .collect()
    };
    let (w, m) = (
        metrics(p, "whole", "episode"),
        metrics(p, "merged", "episode"),
    );
    assert_eq!(by_episode(&m), by_episode(&w));
    assert_eq!(by_episode(&m).len(), 40);
}

#[test]
fn a_duplicate_is_reported_and_counted_once_and_missing_shards_are_named() {
    let dir = project(6);
    let p = dir.path();
    for records in ["a", "b"] {
        let mut c = bee(p);
        c.args(run_args(records, &["--shard", "1/3"]));
        let o = output(c);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    let mut c = bee(p);
    c.args(["records", "merge", "a", "b", "a", "--into", "m", "--json"]);
    let o = output(c);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let shard_one = v["runs"][0]["episodes"].as_u64().unwrap();
    assert_eq!(v["episodes"].as_u64(), Some(shard_one));
    assert_eq!(
        v["duplicates"].as_array().unwrap().len() as u64,
        shard_one,
        "{v}"
    );
    assert_eq!(v["shards_missing"], serde_json::json!([2, 3]));
    assert_eq!(v["complete"], Value::Bool(false));
    let m = metrics(p, "m", "run");
    assert_eq!(m["total"]["episodes"].as_u64(), Some(shard_one));
}

/// `bee run` and `bee repl` share a records directory; a merge leaves the REPL's sessions
/// out and says so, instead of refusing the directory.
#[test]
fn repl_sessions_in_a_records_directory_are_left_out_and_named() {
    let dir = project(2);
    let p = dir.path();
    let o = output({
        let mut c = bee(p);
        c.args(run_args("rec", &[]));
        c
    });
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let mut c = bee(p);
    c.args([
        "repl",
        "--host",
        "--provider",
        "replay.toml",
        "--workspace",
        "ws",
        "--records-dir",
        "rec",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"/quit\n").unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let sessions = std::fs::read_dir(p.join("rec"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("repl.jsonl").is_file())
        .count();
    assert_eq!(sessions, 1, "the REPL wrote its session into rec");

    let mut c = bee(p);
    c.args(["records", "merge", "rec", "--into", "m", "--json"]);
    let o = output(c);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["episodes"].as_u64(), Some(2), "{v}");
    assert_eq!(
        v["skipped_sessions"].as_array().map(Vec::len),
        Some(1),
        "{v}"
    );
    assert_eq!(v["complete"], Value::Bool(true), "{v}");
}

#[test]
fn bad_shards_are_usage_errors() {
    let dir = project(4);
    let p = dir.path();
    let cases: [(&[&str], Option<&str>, &str); 5] = [
        (&["--shard", "3/2"], None, "numbered 1 to 2"),
        (&["--shard", "0/0"], None, "at least 1"),
        (&["--shards", "4"], None, "JOB_COMPLETION_INDEX"),
        (&["--shards", "4"], Some("4"), "does not fit 4 shard"),
        (
            &["--shard", "1/2"],
            Some("1"),
            "disagrees with JOB_COMPLETION_INDEX",
        ),
    ];
    for (flags, index, needle) in cases {
        let mut c = bee(p);
        c.args(run_args("r", flags));
        if let Some(i) = index {
            c.env("JOB_COMPLETION_INDEX", i);
        }
        let o = output(c);
        assert_eq!(code(&o), 64, "{flags:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{flags:?}: {}", stderr(&o));
    }
    assert!(!p.join("r").exists(), "a refused run wrote records");

    // JOB_COMPLETION_INDEX with --shards picks the shard, counted from 0.
    let mut c = bee(p);
    c.args(run_args("k", &["--shards", "2"]))
        .env("JOB_COMPLETION_INDEX", "1");
    let o = output(c);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run_dir(&p.join("k")).join("run.json")).unwrap())
            .unwrap();
    assert_eq!(
        manifest["shard"],
        serde_json::json!({"index": 2, "count": 2})
    );
}

fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .extension()
                .is_some_and(|x| x == "jsonl" || x == "json")
            {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn other_scenarios_older_bees_and_busy_directories_are_refused_without_loss() {
    let dir = project(3);
    let p = dir.path();
    let mut c = bee(p);
    c.args(run_args("r", &["--run-id", "one"]));
    let o = output(c);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let before = snapshot(&p.join("r"));

    // The same run id again, without --resume: 73.
    let mut c = bee(p);
    c.args(run_args("r", &["--run-id", "one"]));
    let o = output(c);
    assert_eq!(code(&o), 73, "{}", stderr(&o));
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));

    // Another shard resuming this run: 65.
    let mut c = bee(p);
    c.args(run_args(
        "r",
        &["--run-id", "one", "--resume", "--shard", "1/2"],
    ));
    let o = output(c);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("split into 1 shard"), "{}", stderr(&o));

    // The scenario changed: resuming is refused, 65.
    write_scenario(p, 3, "something else");
    let mut c = bee(p);
    c.args(run_args("r", &["--resume"]));
    let o = output(c);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("another scenario"), "{}", stderr(&o));
    assert_eq!(snapshot(&p.join("r")), before);

    // A run directory without run.json (an older bee): refused for resume and merge, 65.
    write_scenario(p, 3, "go");
    std::fs::create_dir_all(p.join("old/run0")).unwrap();
    std::fs::copy(
        p.join("r/one/batch-1.jsonl"),
        p.join("old/run0/batch-1.jsonl"),
    )
    .unwrap();
    let mut c = bee(p);
    c.args(run_args("old", &["--resume"]));
    let o = output(c);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("older than"), "{}", stderr(&o));
    let mut c = bee(p);
    c.args(["records", "merge", "r", "old", "--into", "m"]);
    let o = output(c);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(!p.join("m").exists());

    // A run directory made by another bee version: refused for resume and merge, 65.
    let mut c = bee(p);
    c.args(run_args("v", &["--run-id", "v"]));
    assert_eq!(code(&output(c)), 0);
    let manifest = p.join("v/v/run.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut m: Value = serde_json::from_str(&text).unwrap();
    m["bee_version"] = Value::from("0.0.1");
    std::fs::write(&manifest, m.to_string()).unwrap();
    let mut c = bee(p);
    c.args(run_args("v", &["--resume"]));
    let o = output(c);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("made by bee 0.0.1"), "{}", stderr(&o));
    let mut c = bee(p);
    c.args(["records", "merge", "r", "v", "--into", "m"]);
    let o = output(c);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("made by bee 0.0.1"), "{}", stderr(&o));
    assert!(!p.join("m").exists());

    // A merge never writes into a directory that holds anything: 73.
    std::fs::create_dir_all(p.join("full")).unwrap();
    std::fs::write(p.join("full/keep.txt"), "mine").unwrap();
    let mut c = bee(p);
    c.args(["records", "merge", "r", "--into", "full"]);
    let o = output(c);
    assert_eq!(code(&o), 73, "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(p.join("full/keep.txt")).unwrap(),
        "mine"
    );

    // Two processes on one run directory: the second is refused while the first runs, 73.
    write_scenario(p, 10, "go");
    let mut first = bee(p);
    first.args(run_args("busy", &["--run-id", "x"]));
    let mut first = spawn(first);
    let start = Instant::now();
    while transcripts(&p.join("busy/x")) == 0 {
        assert!(start.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut c = bee(p);
    c.args(run_args("busy", &["--run-id", "x", "--resume"]));
    let o = output(c);
    let merged = {
        let mut c = bee(p);
        c.args(["records", "merge", "busy", "--into", "m2"]);
        output(c)
    };
    assert!(first.wait().unwrap().success());
    assert_eq!(code(&o), 73, "{}", stderr(&o));
    assert!(stderr(&o).contains("run.lock"), "{}", stderr(&o));
    assert_eq!(code(&merged), 73, "{}", stderr(&merged));
    assert_eq!(snapshot(&p.join("r")), before);
}

/// A project whose episodes each start one subagent (role `helper`).
fn project_with_subagents(episodes: u32) -> tempfile::TempDir {
    let dir = project(episodes);
    let p = dir.path();
    std::fs::create_dir_all(p.join(".bee/agents")).unwrap();
    std::fs::write(
        p.join("rec.jsonl"),
        concat!(
            r#"{"tool_calls": [{"id": "c1", "name": "agent", "arguments": {"role": "helper", "task": "look"}}], "usage": {"input_tokens": 100, "output_tokens": 10}}"#,
            "\n",
            r#"{"text": "Done.", "usage": {"input_tokens": 150, "output_tokens": 5}}"#,
            "\n"
        ),
    )
    .unwrap();
    std::fs::write(
        p.join("helper.jsonl"),
        r#"{"text": "Looked.", "usage": {"input_tokens": 40, "output_tokens": 4}}"#,
    )
    .unwrap();
    std::fs::write(
        p.join("helper.toml"),
        "kind = \"replay\"\nfile = \"helper.jsonl\"\nmodel = \"h\"\n",
    )
    .unwrap();
    std::fs::write(p.join("ro.toml"), "version = 1\n[fs]\nread = [\"./**\"]\n").unwrap();
    std::fs::write(
        p.join(".bee/agents/helper.toml"),
        "description = \"Looks.\"\npolicy = \"../../ro.toml\"\ntools = [\"shell\"]\nprovider = \"../../helper.toml\"\n",
    )
    .unwrap();
    dir
}

/// An interrupted episode reruns with its subagents (their old transcripts set aside too);
/// a completed one keeps its subagents; a merge carries subagents with their episode.
#[test]
fn subagents_go_with_their_episode_on_resume_and_merge() {
    let dir = project_with_subagents(3);
    let p = dir.path();
    let mut c = bee(p);
    c.args(run_args("r", &["--run-id", "one"]));
    let o = output(c);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let run = p.join("r/one");
    assert!(run.join("batch-2.helper-1.jsonl").is_file());
    let kept = std::fs::read(run.join("batch-1.helper-1.jsonl")).unwrap();

    // batch-2 as if killed before it finished: its last line (episode_finished) gone.
    let t = std::fs::read_to_string(run.join("batch-2.jsonl")).unwrap();
    let cut: Vec<&str> = t.lines().collect();
    let cut = cut[..cut.len() - 1].join("\n") + "\n";
    std::fs::write(run.join("batch-2.jsonl"), &cut).unwrap();

    let mut c = bee(p);
    c.args(run_args("r", &["--resume"]));
    let o = output(c);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("2 of 3 episode(s) completed and kept, 1 to run"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(run.join("batch-2.jsonl.partial-1")).unwrap(),
        cut
    );
    assert!(run.join("batch-2.helper-1.jsonl.partial-1").is_file());
    assert!(run.join("batch-2.helper-1.jsonl").is_file());
    assert_eq!(
        std::fs::read(run.join("batch-1.helper-1.jsonl")).unwrap(),
        kept
    );

    let mut c = bee(p);
    c.args(run_args("whole", &[]));
    assert_eq!(code(&output(c)), 0);
    assert_eq!(
        metrics(p, "r", "run")["total"],
        metrics(p, "whole", "run")["total"]
    );
    assert_eq!(
        metrics(p, "r", "agent")["total"],
        metrics(p, "whole", "agent")["total"]
    );

    let mut c = bee(p);
    c.args(["records", "merge", "r", "--into", "m"]);
    let o = output(c);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for f in [
        "batch-2.helper-1.jsonl",
        "batch-2.helper-1.jsonl.partial-1",
        "batch-3.helper-1.jsonl",
    ] {
        assert!(p.join("m/one").join(f).is_file(), "{f}");
    }
    assert_eq!(
        metrics(p, "m", "agent")["groups"],
        metrics(p, "r", "agent")["groups"]
    );
}
