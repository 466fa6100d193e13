//! `cargo xtask bench-agents`: how long a subagent takes to start — from the
//! caller's `agent` tool call to the subagent's first model request, which
//! covers reading the role, the attenuation proof, the subagent's scope and its
//! provider connection. It builds bee, writes replay recordings for a caller
//! whose turns each make 1 or 8 `agent` calls (the 8 run at once) next to the
//! fixtures of `bench/agents/` (a role, `worker`, whose recording answers at
//! once without tools), and boots one QEMU guest that runs each recording in
//! kernel mode and with `--host`, then times `bee validate` of the worker's
//! policy with and without `--parent`, alternately. The host-mode runs and the
//! validations also run on this host for reference. The figures come from the
//! transcripts' timestamps; it prints the tables docs/benchmarks.md ("Subagent
//! start, in the VM") reads.
//!
//! Its length is its tests: the code is under 600 lines.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::demo::build_bee;
use crate::error::{Error, Result};
use crate::initramfs::shell_quote;
use crate::vmbench::{self, DAY_MS, Guest, at_ms};

/// Prefix of every result line the script prints.
const MARK: &str = "abench-";

/// The token counts every recorded turn reports (the limits need them).
const USAGE: &str = r#"{"input_tokens": 10, "output_tokens": 5}"#;

/// Concurrent `agent` calls per caller turn, one recording each.
const WIDTHS: &[usize] = &[1, 8];

/// `cargo xtask bench-agents`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Caller turns of one `agent` call each.
    #[arg(long, default_value_t = 30)]
    pub turns1: usize,
    /// Caller turns of eight concurrent `agent` calls each.
    #[arg(long, default_value_t = 5)]
    pub turns8: usize,
    /// `bee validate` runs timed with `--parent` and as many without,
    /// alternately.
    #[arg(long, default_value_t = 20)]
    pub validations: usize,
    /// The guest.
    #[command(flatten)]
    pub guest: Guest,
}

/// A replay recording of `turns` caller turns, each making `width` `agent`
/// calls for the `worker` role, then a closing text turn.
pub fn recording(turns: usize, width: usize) -> String {
    let mut out = String::new();
    for t in 1..=turns {
        let calls: Vec<String> = (1..=width)
            .map(|k| {
                format!(
                    r#"{{"id": "a{t}-{k}", "name": "agent", "arguments": {{"role": "worker", "task": "Answer."}}}}"#
                )
            })
            .collect();
        let _ = writeln!(
            out,
            r#"{{"tool_calls": [{}], "usage": {USAGE}}}"#,
            calls.join(", ")
        );
    }
    let _ = writeln!(out, r#"{{"text": "Done.", "usage": {USAGE}}}"#);
    out
}

/// Copies `bench/agents/` to `<target>/bench-agents/fixtures` and writes the
/// callers' recordings there; returns the directory.
fn fixtures(args: &Args) -> Result<PathBuf> {
    vmbench::fixtures(
        "agents",
        &[
            ("recording-x1.jsonl", recording(args.turns1, 1)),
            ("recording-x8.jsonl", recording(args.turns8, 8)),
        ],
    )
}

/// The script both the guest and this host run (busybox or dash `sh`): each
/// `bee run` timed with /proc/uptime with its exit status and the events of
/// every transcript of the run that the figures need (subagents' included),
/// then the `bee validate` runs, alternating with and without `--parent`;
/// one marked line each.
fn script(bee: &Path, dir: &Path, args: &Args, vm: bool) -> String {
    let bee = shell_quote(&bee.to_string_lossy());
    let dir = shell_quote(&dir.to_string_lossy());
    let mut s = format!(
        "B={bee}\ncd {dir} || exit 1\nR=$(mktemp -d)\n\
         t() {{ cut -d' ' -f1 /proc/uptime; }}\n\
         run() {{\n\
           label=$1; shift\n\
           w0=$(date +%s); s=$(t); \"$B\" run --records \"$R/$label\" \"$@\" >\"$R/$label.out\" 2>&1; rc=$?; e=$(t); w1=$(date +%s)\n\
           echo \"{MARK}run $label $rc $s $e $w0 $w1\"\n\
           [ $rc = 0 ] || tail -n 20 \"$R/$label.out\"\n\
           for f in \"$R/$label\"/*/*.jsonl; do\n\
             n=$(basename \"$f\" .jsonl)\n\
             grep -E '\"event\":\"(episode_started|tool_call|subagent|episode_finished)\"|\"role\":\"user\"' \"$f\" \
               | sed -e 's/,\"requested\":{{.*}},\"installed\":.*,\"tools\":/,\"tools\":/' -e \"s/^/{MARK}tx $label $n /\"\n\
           done\n\
         }}\n\
         val() {{\n\
           label=$1; shift\n\
           s=$(t); \"$B\" validate \"$@\" >/dev/null 2>&1; rc=$?; e=$(t)\n\
           echo \"{MARK}val $label $rc $s $e\"\n\
         }}\n"
    );
    if vm {
        s.push_str("\"$B\" check >/dev/null 2>&1 || { \"$B\" check; exit 1; }\n");
    }
    for w in WIDTHS {
        if vm {
            let _ = writeln!(
                s,
                "run k{w} --scenario scenario-kernel.toml --provider provider-x{w}.toml"
            );
        }
        let _ = writeln!(
            s,
            "run h{w} --scenario scenario-host.toml --provider provider-x{w}.toml --host"
        );
    }
    let _ = write!(
        s,
        "i=0\nwhile [ $i -lt {n} ]; do\n\
           val parent --policy worker-policy.toml --parent policy.toml --base workspace\n\
           val alone --policy worker-policy.toml --base workspace\n\
           i=$((i+1))\n\
         done\n\
         rm -rf \"$R\"\nexit 0\n",
        n = args.validations
    );
    s
}

/// One subagent's start, from the transcripts (ms).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Start {
    /// The caller's `agent` `tool_call` to the subagent's `episode_started`:
    /// role, proof, scope and provider, before its transcript exists.
    pub to_started: f64,
    /// The caller's `agent` `tool_call` to the subagent's first `user`
    /// message, recorded just before its first model request.
    pub to_request: f64,
}

/// One `bee run` of the script.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunResult {
    /// Exit status of `bee run`.
    pub rc: i32,
    /// Wall time, seconds.
    pub wall: f64,
    /// The clock (seconds since the epoch, whole) before and after `bee run`.
    pub clock: (f64, f64),
    /// The printed events of each transcript, by session id (file stem).
    pub transcripts: BTreeMap<String, Vec<serde_json::Value>>,
}

/// `b - a` for times of day, across midnight.
fn since(a: f64, b: f64) -> f64 {
    (b - a).rem_euclid(DAY_MS)
}

fn event<'a>(events: &'a [serde_json::Value], kind: &str) -> Option<&'a serde_json::Value> {
    events.iter().find(|e| e["event"] == kind)
}

impl RunResult {
    /// Every subagent's start, matched to its caller's `agent` call through
    /// `episode_started.parent`.
    pub fn starts(&self) -> Vec<Start> {
        let mut calls = BTreeMap::new();
        for (id, events) in &self.transcripts {
            for e in events {
                if e["event"] == "tool_call"
                    && e["tool"] == "agent"
                    && let (Some(call), Some(t)) = (e["call_id"].as_str(), at_ms(e))
                {
                    calls.insert((id.clone(), call.to_owned()), t);
                }
            }
        }
        let mut out = Vec::new();
        for events in self.transcripts.values() {
            let Some(started) = event(events, "episode_started") else {
                continue;
            };
            let parent = &started["parent"];
            let (Some(caller), Some(call)) =
                (parent["episode_id"].as_str(), parent["call_id"].as_str())
            else {
                continue;
            };
            let Some(&t0) = calls.get(&(caller.to_owned(), call.to_owned())) else {
                continue;
            };
            let request = events
                .iter()
                .find(|e| e["event"] == "message" && e["role"] == "user");
            if let (Some(s), Some(r)) = (at_ms(started), request.and_then(at_ms)) {
                out.push(Start {
                    to_started: since(t0, s),
                    to_request: since(t0, r),
                });
            }
        }
        out
    }

    /// Seconds of `bee run` before the top-level episode's `episode_started`
    /// and after its `episode_finished`. The clock around `bee run` was read
    /// in whole seconds, so each is taken at the middle of its second: ±0.5 s.
    pub fn outside(&self) -> Option<(f64, f64)> {
        let top = self
            .transcripts
            .values()
            .find(|ev| event(ev, "episode_started").is_some_and(|e| e["parent"].is_null()))?;
        let start = epoch_s(event(top, "episode_started")?)?;
        let end = epoch_s(event(top, "episode_finished")?)?;
        Some((start - self.clock.0 - 0.5, self.clock.1 + 0.5 - end))
    }

    /// `agent` calls the callers made.
    fn agent_calls(&self) -> usize {
        self.transcripts
            .values()
            .flatten()
            .filter(|e| e["event"] == "tool_call" && e["tool"] == "agent")
            .count()
    }

    /// The enforcement each transcript's `episode_started` records.
    fn enforcements(&self) -> Vec<String> {
        self.transcripts
            .values()
            .filter_map(|ev| event(ev, "episode_started"))
            .map(|e| {
                e["policy"]["enforcement"]
                    .as_str()
                    .unwrap_or("?")
                    .to_owned()
            })
            .collect()
    }
}

/// Seconds since the epoch of an event's `at` (`YYYY-MM-DDTHH:MM:SS.mmmZ`).
pub fn epoch_s(ev: &serde_json::Value) -> Option<f64> {
    let (date, _) = ev["at"].as_str()?.split_once('T')?;
    let mut d = date.split('-').map(str::parse::<i64>);
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    // Days from 1970-01-01 to the civil date (Howard Hinnant's `days_from_civil`).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + at_ms(ev)? / 1000.0)
}

/// Nearest-rank percentile `q` (0–1] of `xs`; `None` when empty.
pub fn percentile(xs: &[f64], q: f64) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = (q * v.len() as f64).ceil().max(1.0) as usize;
    v.get(rank.min(v.len()) - 1).copied()
}

/// What one script printed.
#[derive(Debug, Default, PartialEq)]
pub struct Results {
    /// Runs by label (`k1`, `h8`, …).
    pub runs: Vec<(String, RunResult)>,
    /// `bee validate` runs by label (`parent`, `alone`): their milliseconds
    /// (10 ms steps of /proc/uptime).
    pub validations: BTreeMap<String, Vec<f64>>,
    /// `bee validate` runs that failed, by label.
    pub validation_failures: BTreeMap<String, u64>,
}

impl Results {
    fn run(&self, label: &str) -> Option<&RunResult> {
        self.runs.iter().find(|(l, _)| l == label).map(|(_, r)| r)
    }

    fn entry(&mut self, label: &str) -> &mut RunResult {
        if let Some(i) = self.runs.iter().position(|(l, _)| l == label) {
            return &mut self.runs[i].1;
        }
        self.runs.push((label.to_owned(), RunResult::default()));
        let last = self.runs.len() - 1;
        &mut self.runs[last].1
    }

    /// Reads the marked lines (anything before the mark is ignored).
    pub fn parse(lines: &[String]) -> Result<Self> {
        let mut r = Results::default();
        let bad = |detail: String| Error::Parse {
            program: "the subagent benchmark".into(),
            detail,
        };
        for line in lines {
            let Some(at) = line.find(MARK) else { continue };
            let rest = &line[at + MARK.len()..];
            let mut words = rest.splitn(3, ' ');
            let kind = words.next().unwrap_or_default();
            let a = words.next().unwrap_or_default().trim();
            let tail = words.next().unwrap_or_default();
            let num = |s: &str| {
                s.trim()
                    .parse::<f64>()
                    .map_err(|e| bad(format!("{line}: {e}")))
            };
            match kind {
                "run" => {
                    let f: Vec<&str> = tail.split_whitespace().collect();
                    if f.len() != 5 {
                        return Err(bad(format!("malformed: {line}")));
                    }
                    let e = r.entry(a);
                    e.rc = f[0]
                        .parse()
                        .map_err(|_| bad(format!("malformed: {line}")))?;
                    e.wall = num(f[2])? - num(f[1])?;
                    e.clock = (num(f[3])?, num(f[4])?);
                }
                "tx" => {
                    let Some((id, json)) = tail.split_once(' ') else {
                        return Err(bad(format!("malformed: {line}")));
                    };
                    let v: serde_json::Value =
                        serde_json::from_str(json).map_err(|e| bad(format!("{a} {id}: {e}")))?;
                    r.entry(a)
                        .transcripts
                        .entry(id.to_owned())
                        .or_default()
                        .push(v);
                }
                "val" => {
                    let f: Vec<&str> = tail.split_whitespace().collect();
                    if f.len() != 3 {
                        return Err(bad(format!("malformed: {line}")));
                    }
                    if f[0] != "0" {
                        *r.validation_failures.entry(a.to_owned()).or_default() += 1;
                    }
                    r.validations
                        .entry(a.to_owned())
                        .or_default()
                        .push((num(f[2])? - num(f[1])?) * 1000.0);
                }
                _ => {}
            }
        }
        Ok(r)
    }

    /// Mean and median milliseconds of the `bee validate` runs of a label,
    /// and how many there were.
    fn validation_ms(&self, label: &str) -> Option<(f64, f64, usize)> {
        let xs = self.validations.get(label).filter(|v| !v.is_empty())?;
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        Some((mean, percentile(xs, 0.5)?, xs.len()))
    }

    /// Runs that failed or did not run as they should have.
    fn problems(&self, want: &[(&str, &str)]) -> Vec<String> {
        let mut p = Vec::new();
        for (label, enforcement) in want {
            let Some(r) = self.run(label) else {
                p.push(format!("{label}: no result"));
                continue;
            };
            if r.rc != 0 {
                p.push(format!("{label}: `bee run` exited {}", r.rc));
            }
            let other: Vec<String> = r
                .enforcements()
                .into_iter()
                .filter(|e| e != enforcement)
                .collect();
            if !other.is_empty() {
                p.push(format!(
                    "{label}: enforcement {other:?} in transcripts, not only {enforcement}"
                ));
            }
            let (calls, starts) = (r.agent_calls(), r.starts().len());
            if calls == 0 || starts != calls {
                p.push(format!(
                    "{label}: {calls} `agent` calls but {starts} subagents started"
                ));
            }
        }
        for (label, failed) in &self.validation_failures {
            p.push(format!("validate {label}: {failed} runs failed"));
        }
        p
    }
}

/// `x` rounded to a whole number, without a `-0`.
fn whole(x: f64) -> String {
    format!("{:.0}", x.round() + 0.0)
}

/// p50 / p95 of one field of a run's starts, as a cell.
fn cell(r: Option<&RunResult>, f: fn(&Start) -> f64) -> (String, Option<(f64, f64)>) {
    let xs: Vec<f64> = r
        .map(|r| r.starts().iter().map(f).collect())
        .unwrap_or_default();
    match (percentile(&xs, 0.5), percentile(&xs, 0.95)) {
        (Some(a), Some(b)) => (format!("{a:.0} / {b:.0} ({})", xs.len()), Some((a, b))),
        _ => ("-".into(), None),
    }
}

/// The Markdown tables.
pub fn table(guest: &Results, local: &Results, release: &str) -> String {
    let mut s = String::new();
    type Field = fn(&Start) -> f64;
    let parts: [(&str, Field); 2] = [
        ("`agent` call → the subagent's first model request", |x| {
            x.to_request
        }),
        (
            "of which `agent` call → the subagent's `episode_started` (role, proof, scope, provider)",
            |x| x.to_started,
        ),
    ];
    for (title, f) in parts {
        let _ = writeln!(s, "{title} (ms p50 / p95 (subagents)):\n");
        let _ = writeln!(
            s,
            "| concurrent `agent` calls | VM {release} kernel | VM {release} `--host` | kernel/host p50 / p95 | this host `--host` |"
        );
        let _ = writeln!(s, "| --- | --- | --- | --- | --- |");
        for w in WIDTHS {
            let (k, kp) = cell(guest.run(&format!("k{w}")), f);
            let (h, hp) = cell(guest.run(&format!("h{w}")), f);
            let (l, _) = cell(local.run(&format!("h{w}")), f);
            let ratio = match (kp, hp) {
                (Some(a), Some(b)) if b.0 > 0.0 && b.1 > 0.0 => {
                    format!("{:.2} / {:.2}", a.0 / b.0, a.1 / b.1)
                }
                _ => "-".into(),
            };
            let _ = writeln!(s, "| {w} | {k} | {h} | {ratio} | {l} |");
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "`bee run` wall time, s [of which before the caller's `episode_started` + after its \
         `episode_finished`, ±0.5 s]:\n"
    );
    let _ = writeln!(
        s,
        "| concurrent `agent` calls | VM kernel | VM `--host` | this host `--host` |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- |");
    let wall = |r: &Results, l: String| match r.run(&l) {
        Some(r) => match r.outside() {
            Some((a, b)) => format!("{:.1} [{} + {}]", r.wall, whole(a), whole(b)),
            None => format!("{:.1}", r.wall),
        },
        None => "-".into(),
    };
    for w in WIDTHS {
        let _ = writeln!(
            s,
            "| {w} | {} | {} | {} |",
            wall(guest, format!("k{w}")),
            wall(guest, format!("h{w}")),
            wall(local, format!("h{w}"))
        );
    }
    let _ = writeln!(
        s,
        "\n`bee validate --policy worker-policy.toml`, a whole process, run alternately with and \
         without `--parent` (ms mean / p50 (runs)):\n"
    );
    let _ = writeln!(s, "| | VM {release} | this host |");
    let _ = writeln!(s, "| --- | --- | --- |");
    let v = |r: &Results, l: &str| match r.validation_ms(l) {
        Some((mean, p50, n)) => format!("{mean:.1} / {p50:.0} ({n})"),
        None => "-".into(),
    };
    for (label, name) in [
        ("parent", "with `--parent policy.toml` (the proof)"),
        ("alone", "without `--parent`"),
    ] {
        let _ = writeln!(s, "| {name} | {} | {} |", v(guest, label), v(local, label));
    }
    let diff = |r: &Results| match (r.validation_ms("parent"), r.validation_ms("alone")) {
        (Some((a, pa, _)), Some((b, pb, _))) => format!("{:.1} / {}", a - b, whole(pa - pb)),
        _ => "-".into(),
    };
    let _ = writeln!(
        s,
        "| difference: the proof and the parent's compilation | {} | {} |",
        diff(guest),
        diff(local)
    );
    s
}

/// Runs `cargo xtask bench-agents`; 0 when every run completed as it should.
pub fn run(args: &Args) -> Result<i32> {
    if args.turns1 == 0 || args.turns8 == 0 || args.validations == 0 {
        return Err(Error::Usage(
            "--turns1, --turns8 and --validations must be at least 1".into(),
        ));
    }
    let start = Instant::now();
    let bee = build_bee()?;
    let dir = fixtures(args)?;
    eprintln!("xtask: fixtures in {}", dir.display());

    // This host, for reference: --host only (it cannot enforce).
    let local = Results::parse(&vmbench::run_here(&dir, &script(&bee, &dir, args, false))?)?;
    let outcome = vmbench::run_in_guest(
        args.guest,
        &bee,
        &dir,
        "bee-abench",
        script(&bee, &dir, args, true),
    )?;
    let guest = Results::parse(&outcome.lines)?;

    println!();
    println!(
        "==== bee bench-agents: kernel {} in QEMU ({} s boot, {} s of runs); this host {} ====",
        outcome.release,
        outcome.boot_time.as_secs(),
        outcome.run_time.as_secs(),
        vmbench::host_release()
    );
    println!();
    print!("{}", table(&guest, &local, &outcome.release));
    let labels: Vec<(String, &str)> = WIDTHS
        .iter()
        .flat_map(|w| [(format!("k{w}"), "kernel"), (format!("h{w}"), "host")])
        .collect();
    let want: Vec<(&str, &str)> = labels.iter().map(|(l, e)| (l.as_str(), *e)).collect();
    let mut problems = guest.problems(&want);
    let host_want: Vec<(&str, &str)> = want
        .iter()
        .copied()
        .filter(|(l, _)| l.starts_with('h'))
        .collect();
    problems.extend(
        local
            .problems(&host_want)
            .into_iter()
            .map(|p| format!("this host: {p}")),
    );
    println!("\n(took {:.0} s)", start.elapsed().as_secs_f64());
    if problems.is_empty() {
        Ok(0)
    } else {
        for p in &problems {
            println!("bench-agents: FAIL: {p}");
        }
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_make_the_calls_at_once_then_end_with_text() {
        let r = recording(2, 3);
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines.len(), 3);
        for l in &lines {
            assert!(serde_json::from_str::<serde_json::Value>(l).is_ok(), "{l}");
        }
        let turn: serde_json::Value = serde_json::from_str(lines[1]).unwrap_or_default();
        let calls = turn["tool_calls"].as_array().cloned().unwrap_or_default();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[2]["id"], "a2-3");
        assert_eq!(calls[0]["arguments"]["role"], "worker");
        assert!(lines[2].starts_with(r#"{"text": "Done.", "usage": "#));
    }

    #[test]
    fn timestamps_read_as_seconds_since_the_epoch() {
        let ev = |at: &str| serde_json::json!({ "at": at });
        assert_eq!(epoch_s(&ev("1970-01-01T00:00:01.500Z")), Some(1.5));
        assert_eq!(
            epoch_s(&ev("2000-03-01T00:00:00.000Z")),
            Some(951_868_800.0)
        );
        assert_eq!(
            epoch_s(&ev("2026-12-01T23:59:59.000Z")),
            Some(1_796_169_599.0)
        );
        assert_eq!(epoch_s(&ev("nonsense")), None);
    }

    #[test]
    fn whole_numbers_have_no_negative_zero() {
        assert_eq!(whole(-0.3), "0");
        assert_eq!(whole(-0.6), "-1");
        assert_eq!(whole(12.5), "13");
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let xs: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&xs, 0.5), Some(10.0));
        assert_eq!(percentile(&xs, 0.95), Some(19.0));
        assert_eq!(percentile(&[7.0], 0.95), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn subagents_are_matched_to_their_calls() {
        let lines: Vec<String> = [
            "[6.12] abench-run k1 0 10.50 12.75 1764633595 1764633602",
            r#"abench-tx k1 ep {"seq":1,"at":"2026-12-01T23:59:59.900Z","event":"episode_started","episode_id":"ep","policy":{"enforcement":"kernel"}}"#,
            r#"abench-tx k1 ep {"seq":3,"at":"2026-12-01T23:59:59.950Z","event":"tool_call","call_id":"a1-1","tool":"agent","arguments":{}}"#,
            r#"abench-tx k1 ep.worker-1 {"seq":1,"at":"2026-12-02T00:00:00.010Z","event":"episode_started","episode_id":"ep.worker-1","policy":{"enforcement":"kernel"},"parent":{"episode_id":"ep","call_id":"a1-1","role":"worker","depth":1}}"#,
            r#"abench-tx k1 ep.worker-1 {"seq":3,"at":"2026-12-02T00:00:00.030Z","event":"message","role":"user","text":"Answer."}"#,
            "abench-val parent 0 1.00 1.10",
            "abench-val alone 1 1.10 1.15",
            "abench-val parent 0 1.15 1.35",
            "abench-val alone 0 1.35 1.40",
            "abench-val parent 0 1.40 1.70",
            "noise",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let r = Results::parse(&lines).unwrap_or_default();
        let k = r.run("k1").cloned().unwrap_or_default();
        assert_eq!(k.rc, 0);
        assert!((k.wall - 2.25).abs() < 1e-9);
        // The caller's transcript has no `episode_finished` here.
        assert_eq!(k.outside(), None);
        let starts = k.starts();
        assert_eq!(starts.len(), 1);
        assert!((starts[0].to_started - 60.0).abs() < 1e-6, "{starts:?}");
        assert!((starts[0].to_request - 80.0).abs() < 1e-6, "{starts:?}");
        let (mean, p50, n) = r.validation_ms("parent").unwrap_or_default();
        assert_eq!(n, 3);
        assert!(
            (mean - 200.0).abs() < 1e-6 && (p50 - 200.0).abs() < 1e-6,
            "{mean} {p50}"
        );
        assert_eq!(r.validation_ms("alone").map(|v| v.2), Some(2));
        assert!(
            r.problems(&[("k1", "kernel")]).len() == 1,
            "{:?}",
            r.problems(&[("k1", "kernel")])
        );
        assert_eq!(r.problems(&[("k1", "host")]).len(), 2);
    }
}
