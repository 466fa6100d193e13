//! `cargo xtask bench-harness`: what bee's harness adds to a tool call when the
//! model costs nothing. It builds bee, writes replay recordings of cheap tool
//! calls (`read_file` of a small file, `list_dir`, `shell` running `true`)
//! next to the fixtures of `bench/harness/`, and boots one QEMU guest that
//! runs, in order: the recording in kernel mode, the same recording with
//! `--host`, a loop of plain `/bin/sh -c true` spawns, and sixteen copies of a
//! shorter recording at `--concurrency 1`, `4` and `16` in kernel mode. The
//! host-mode recording and the spawn loop also run on this host for
//! reference. It prints one table; docs/benchmarks.md ("Harness") reads it.
//!
//! Its length is its tests: the code is under 600 lines.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::demo::build_bee;
use crate::error::{Error, Result};
use crate::initramfs::shell_quote;
use crate::vmbench::{self, DAY_MS, Guest, at_ms};

/// Prefix of every result line the guest prints.
const MARK: &str = "hbench-";

/// The tools each recording cycles through, with their arguments.
const CALLS: &[(&str, &str)] = &[
    ("read_file", r#"{"path":"notes.txt"}"#),
    ("list_dir", r#"{"path":"."}"#),
    ("shell", r#"{"command":"true"}"#),
];

/// The concurrency levels of the throughput runs.
const LEVELS: &[u32] = &[1, 4, 16];

/// `cargo xtask bench-harness`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Tool calls in the per-call recording (kernel vs host).
    #[arg(long, default_value_t = 99)]
    pub calls: usize,
    /// Tool calls in each of the sixteen episodes of the throughput runs.
    #[arg(long, default_value_t = 24)]
    pub burst: usize,
    /// Plain `/bin/sh -c true` spawns timed for the baseline.
    #[arg(long, default_value_t = 200)]
    pub spawns: usize,
    /// The guest.
    #[command(flatten)]
    pub guest: Guest,
}

/// A replay recording of `n` tool calls, one per turn, cycling through
/// [`CALLS`], then a closing text turn.
pub fn recording(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let (name, args) = CALLS[i % CALLS.len()];
        let _ = writeln!(
            out,
            r#"{{"tool_calls": [{{"id": "c{}", "name": "{name}", "arguments": {args}}}]}}"#,
            i + 1
        );
    }
    out.push_str("{\"text\": \"Done.\"}\n");
    out
}

/// Copies `bench/harness/` to `<target>/bench-harness/fixtures` and writes
/// the two recordings there; returns the directory.
fn fixtures(args: &Args) -> Result<PathBuf> {
    vmbench::fixtures(
        "harness",
        &[
            ("recording-calls.jsonl", recording(args.calls)),
            ("recording-burst.jsonl", recording(args.burst)),
        ],
    )
}

/// The script both the guest and this host run (busybox or dash `sh`):
/// each `bee run` timed with /proc/uptime, its enforcement, its exit status
/// and `bee metrics --by tool --json`, one marked line each.
fn script(bee: &Path, dir: &Path, args: &Args, vm: bool) -> String {
    let bee = shell_quote(&bee.to_string_lossy());
    let dir = shell_quote(&dir.to_string_lossy());
    let mut s = format!(
        "B={bee}\ncd {dir} || exit 1\nR=$(mktemp -d)\n\
         t() {{ cut -d' ' -f1 /proc/uptime; }}\n\
         run() {{\n\
           label=$1; shift\n\
           s=$(t); \"$B\" run --records \"$R/$label\" \"$@\" >\"$R/$label.out\" 2>&1; rc=$?; e=$(t)\n\
           echo \"{MARK}run $label $rc $s $e\"\n\
           echo \"{MARK}enf $label $(cat \"$R/$label\"/*/*.jsonl | grep -o '\"enforcement\": *\"[a-z]*\"' | sort | uniq -c | tr -s ' \\n' '  ')\"\n\
           echo \"{MARK}metrics $label $(\"$B\" metrics --records \"$R/$label\" --by tool --json | tr -d '\\n')\"\n\
           [ $rc = 0 ] || tail -n 20 \"$R/$label.out\"\n\
           case $label in c*) ;; *) cat \"$R/$label\"/*/*.jsonl | sed \"s/^/{MARK}tx $label /\" ;; esac\n\
         }}\n\
         spawn() {{\n\
           s=$(t); i=0; while [ $i -lt {n} ]; do /bin/sh -c true; i=$((i+1)); done; e=$(t)\n\
           echo \"{MARK}spawn {n} $s $e\"\n\
         }}\n",
        n = args.spawns
    );
    if vm {
        s.push_str(
            "\"$B\" check >/dev/null 2>&1 || { \"$B\" check; exit 1; }\n\
             run kernel --scenario scenario-kernel.toml --provider provider-calls.toml\n\
             run host --scenario scenario-host.toml --provider provider-calls.toml --host\n\
             spawn\n",
        );
        for c in LEVELS {
            let _ = writeln!(
                s,
                "run c{c} --scenario scenario-kernel-x16.toml --provider provider-burst.toml --concurrency {c}"
            );
        }
    } else {
        s.push_str(
            "run host --scenario scenario-host.toml --provider provider-calls.toml --host\nspawn\n",
        );
    }
    s.push_str("rm -rf \"$R\"\nexit 0\n");
    s
}

/// p50, p95 and samples of one tool.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pct {
    /// Median duration, ms.
    pub p50: f64,
    /// 95th percentile, ms.
    pub p95: f64,
    /// Completed calls.
    pub completed: u64,
    /// Calls.
    pub calls: u64,
    /// Denials.
    pub denials: u64,
}

/// One `bee run` of the script.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunResult {
    /// Exit status of `bee run`.
    pub rc: i32,
    /// Wall time, seconds.
    pub wall: f64,
    /// The enforcement counts, as `uniq -c` printed them.
    pub enforcement: String,
    /// Per tool.
    pub tools: Vec<(String, Pct)>,
    /// The transcript's events, when printed.
    pub events: Vec<serde_json::Value>,
}

impl RunResult {
    fn tool(&self, name: &str) -> Option<Pct> {
        self.tools.iter().find(|(k, _)| k == name).map(|(_, p)| *p)
    }
    fn calls(&self) -> u64 {
        self.tools.iter().map(|(_, p)| p.calls).sum()
    }
}

/// Where an episode's wall time went, from its transcript's timestamps (ms).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Breakdown {
    /// `episode_started` to the first `tool_call`.
    pub setup: f64,
    /// Sum of `tool_call` to its `tool_result`.
    pub in_calls: f64,
    /// Sum of the `duration_ms` the results record.
    pub recorded: f64,
    /// Sum of `tool_result` to the next `tool_call`: the turn loop, model included.
    pub between: f64,
    /// Last `tool_result` to `episode_finished`.
    pub finish: f64,
    /// Tool calls.
    pub calls: u64,
}

impl Breakdown {
    /// From one episode's events, in order; `None` without the events needed.
    pub fn of(events: &[serde_json::Value]) -> Option<Self> {
        let mut b = Breakdown::default();
        let mut start = None;
        let mut last_result: Option<f64> = None;
        let mut open_call: Option<f64> = None;
        let mut end = None;
        let mut day = 0.0;
        let mut prev = f64::MIN;
        for ev in events {
            let Some(mut t) = at_ms(ev) else { continue };
            t += day;
            if t < prev {
                day += DAY_MS;
                t += DAY_MS;
            }
            prev = t;
            match ev["event"].as_str() {
                Some("episode_started") => start = Some(t),
                Some("tool_call") => {
                    match last_result {
                        Some(r) => b.between += t - r,
                        None => b.setup = t - start?,
                    }
                    open_call = Some(t);
                }
                Some("tool_result") => {
                    b.in_calls += t - open_call?;
                    b.recorded += ev["duration_ms"].as_f64().unwrap_or(0.0);
                    b.calls += 1;
                    last_result = Some(t);
                }
                Some("episode_finished") => end = Some(t),
                _ => {}
            }
        }
        b.finish = end? - last_result?;
        Some(b)
    }
}

/// What one script printed.
#[derive(Debug, Default, PartialEq)]
pub struct Results {
    /// Runs by label.
    pub runs: Vec<(String, RunResult)>,
    /// Spawns and their seconds.
    pub spawn: Option<(u64, f64)>,
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
            program: "the harness benchmark".into(),
            detail,
        };
        for line in lines {
            let Some(at) = line.find(MARK) else { continue };
            let rest = &line[at + MARK.len()..];
            let mut words = rest.splitn(3, ' ');
            let kind = words.next().unwrap_or_default();
            let a = words.next().unwrap_or_default();
            let tail = words.next().unwrap_or_default();
            let num = |s: &str| {
                s.trim()
                    .parse::<f64>()
                    .map_err(|e| bad(format!("{line}: {e}")))
            };
            match kind {
                "run" => {
                    let f: Vec<&str> = tail.split_whitespace().collect();
                    if f.len() != 3 {
                        return Err(bad(format!("malformed: {line}")));
                    }
                    let e = r.entry(a);
                    e.rc = f[0]
                        .parse()
                        .map_err(|_| bad(format!("malformed: {line}")))?;
                    e.wall = num(f[2])? - num(f[1])?;
                }
                "enf" => r.entry(a).enforcement = tail.trim().to_owned(),
                "tx" => {
                    let v: serde_json::Value =
                        serde_json::from_str(tail).map_err(|e| bad(format!("{a}: {e}")))?;
                    r.entry(a).events.push(v);
                }
                "metrics" => {
                    let v: serde_json::Value =
                        serde_json::from_str(tail).map_err(|e| bad(format!("{a}: {e}")))?;
                    let mut tools = Vec::new();
                    for g in v["groups"].as_array().into_iter().flatten() {
                        let t = &g["tools"];
                        let d = &t["duration_ms"];
                        tools.push((
                            g["key"].as_str().unwrap_or("?").to_owned(),
                            Pct {
                                p50: d["p50"].as_f64().unwrap_or(f64::NAN),
                                p95: d["p95"].as_f64().unwrap_or(f64::NAN),
                                completed: t["completed"].as_u64().unwrap_or(0),
                                calls: t["calls"].as_u64().unwrap_or(0),
                                denials: t["denials"].as_u64().unwrap_or(0),
                            },
                        ));
                    }
                    r.entry(a).tools = tools;
                }
                "spawn" => {
                    let f: Vec<&str> = tail.split_whitespace().collect();
                    if f.len() != 2 {
                        return Err(bad(format!("malformed: {line}")));
                    }
                    let n = a.parse().map_err(|_| bad(format!("malformed: {line}")))?;
                    r.spawn = Some((n, num(f[1])? - num(f[0])?));
                }
                _ => {}
            }
        }
        Ok(r)
    }

    /// Mean milliseconds per plain spawn.
    fn spawn_ms(&self) -> Option<f64> {
        self.spawn
            .filter(|(n, _)| *n > 0)
            .map(|(n, s)| s * 1000.0 / n as f64)
    }

    /// Runs that failed or did not run as they should have.
    fn problems(&self, want: &[(&str, &str)]) -> Vec<String> {
        let mut p = Vec::new();
        for (label, enforcement) in want {
            match self.run(label) {
                None => p.push(format!("{label}: no result")),
                Some(r) => {
                    if r.rc != 0 {
                        p.push(format!("{label}: `bee run` exited {}", r.rc));
                    }
                    if !r.enforcement.contains(&format!("\"{enforcement}\""))
                        || r.enforcement.contains(if *enforcement == "kernel" {
                            "\"host\""
                        } else {
                            "\"kernel\""
                        })
                    {
                        p.push(format!(
                            "{label}: enforcement was {:?}, not only {enforcement}",
                            r.enforcement
                        ));
                    }
                    let bad: u64 = r
                        .tools
                        .iter()
                        .map(|(_, t)| t.calls - t.completed.min(t.calls) + t.denials)
                        .sum();
                    if bad > 0 {
                        p.push(format!(
                            "{label}: {bad} tool calls did not complete cleanly"
                        ));
                    }
                }
            }
        }
        p
    }
}

fn ms(p: Option<Pct>) -> String {
    match p {
        Some(p) => format!("{:.0} / {:.0} ({})", p.p50, p.p95, p.calls),
        None => "-".into(),
    }
}

fn ratio(a: Option<Pct>, b: Option<Pct>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b.p50 > 0.0 && b.p95 > 0.0 => {
            format!("{:.2} / {:.2}", a.p50 / b.p50, a.p95 / b.p95)
        }
        _ => "-".into(),
    }
}

/// The Markdown tables.
pub fn table(guest: &Results, local: &Results, release: &str) -> String {
    let mut s = String::new();
    let (k, h, l) = (guest.run("kernel"), guest.run("host"), local.run("host"));
    let calls = k.map(RunResult::calls).unwrap_or(0);
    let _ = writeln!(
        s,
        "Per tool call, model excluded ({calls} calls in one episode; ms p50 / p95 (calls)):\n"
    );
    let _ = writeln!(
        s,
        "| tool | VM {release} kernel | VM {release} --host | kernel/host p50 / p95 | this host --host |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- |");
    for (tool, _) in CALLS {
        let pk = k.and_then(|r| r.tool(tool));
        let ph = h.and_then(|r| r.tool(tool));
        let pl = l.and_then(|r| r.tool(tool));
        let _ = writeln!(
            s,
            "| `{tool}` | {} | {} | {} | {} |",
            ms(pk),
            ms(ph),
            ratio(pk, ph),
            ms(pl)
        );
    }
    let sp = |r: &Results| match (r.spawn, r.spawn_ms()) {
        (Some((n, _)), Some(m)) => format!("{m:.1} (mean of {n})"),
        _ => "-".into(),
    };
    let _ = writeln!(
        s,
        "| plain `/bin/sh -c true`, no bee | {} | (same) | | {} |",
        sp(guest),
        sp(local)
    );
    let _ = writeln!(
        s,
        "\nWhere the episode's time went, from the transcript's timestamps (ms; per call in brackets):\n"
    );
    let _ = writeln!(
        s,
        "| | VM kernel | VM --host | kernel/host | this host --host |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- |");
    let bd = |r: Option<&RunResult>| r.and_then(|r| Breakdown::of(&r.events));
    let (bk, bh, bl) = (bd(k), bd(h), bd(l));
    type Field = fn(&Breakdown) -> f64;
    let rows: [(&str, Field, bool); 5] = [
        ("start to first tool call", |b| b.setup, false),
        ("inside tool calls (call to result)", |b| b.in_calls, true),
        ("  of which recorded `duration_ms`", |b| b.recorded, true),
        ("between calls (result to next call)", |b| b.between, true),
        ("last result to episode end", |b| b.finish, false),
    ];
    for (name, f, per_call) in rows {
        let cell = |b: Option<Breakdown>| match b {
            Some(b) if per_call && b.calls > 0 => {
                format!("{:.0} [{:.1}]", f(&b), f(&b) / b.calls as f64)
            }
            Some(b) => format!("{:.0}", f(&b)),
            None => "-".into(),
        };
        let r = match (bk, bh) {
            (Some(a), Some(b)) if f(&b) > 0.0 => format!("{:.2}", f(&a) / f(&b)),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {r} | {} |",
            cell(bk),
            cell(bh),
            cell(bl)
        );
    }
    let _ = writeln!(
        s,
        "\nThroughput, kernel mode, 16 episodes in one run (VM {release}):\n"
    );
    let _ = writeln!(
        s,
        "| --concurrency | tool calls | wall s | tool calls/s | vs 1 | shell p50 / p95 ms |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- |");
    let base = guest.run("c1").map(|r| r.calls() as f64 / r.wall.max(1e-9));
    for c in LEVELS {
        if let Some(r) = guest.run(&format!("c{c}")) {
            let rate = r.calls() as f64 / r.wall.max(1e-9);
            let vs = base
                .filter(|b| *b > 0.0)
                .map(|b| format!("{:.2}x", rate / b))
                .unwrap_or_else(|| "-".into());
            let shell = r
                .tool("shell")
                .map(|p| format!("{:.0} / {:.0}", p.p50, p.p95))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                "| {c} | {} | {:.1} | {rate:.1} | {vs} | {shell} |",
                r.calls(),
                r.wall
            );
        }
    }
    s
}

/// Runs `cargo xtask bench-harness`; 0 when every run completed as it should.
pub fn run(args: &Args) -> Result<i32> {
    if args.calls == 0 || args.burst == 0 {
        return Err(Error::Usage(
            "--calls and --burst must be at least 1".into(),
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
        "bee-hbench",
        script(&bee, &dir, args, true),
    )?;
    let guest = Results::parse(&outcome.lines)?;

    println!();
    println!(
        "==== bee bench-harness: kernel {} in QEMU ({} s boot, {} s of runs); this host {} ====",
        outcome.release,
        outcome.boot_time.as_secs(),
        outcome.run_time.as_secs(),
        vmbench::host_release()
    );
    println!();
    print!("{}", table(&guest, &local, &outcome.release));
    let mut want: Vec<(String, &str)> = vec![("kernel".into(), "kernel"), ("host".into(), "host")];
    want.extend(LEVELS.iter().map(|c| (format!("c{c}"), "kernel")));
    let want: Vec<(&str, &str)> = want.iter().map(|(l, e)| (l.as_str(), *e)).collect();
    let mut problems = guest.problems(&want);
    problems.extend(
        local
            .problems(&[("host", "host")])
            .into_iter()
            .map(|p| format!("this host: {p}")),
    );
    println!("\n(took {:.0} s)", start.elapsed().as_secs_f64());
    if problems.is_empty() {
        Ok(0)
    } else {
        for p in &problems {
            println!("bench-harness: FAIL: {p}");
        }
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_cycle_the_tools_and_end_with_text() {
        let r = recording(4);
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines.len(), 5);
        for l in &lines {
            assert!(serde_json::from_str::<serde_json::Value>(l).is_ok(), "{l}");
        }
        assert!(lines[0].contains("read_file") && lines[3].contains("read_file"));
        assert!(lines[2].contains("\"shell\""));
        assert_eq!(lines[4], r#"{"text": "Done."}"#);
    }

    #[test]
    fn marked_lines_parse() {
        let lines: Vec<String> = [
            "[6.12] hbench-run kernel 0 10.50 12.75",
            r#"[6.12] hbench-enf kernel  1 "enforcement":"kernel" "#,
            r#"[6.12] hbench-metrics kernel {"groups":[{"key":"shell","tools":{"calls":3,"completed":3,"denials":0,"duration_ms":{"p50":4,"p95":9,"samples":3}}}]}"#,
            "hbench-spawn 200 1.00 3.00",
            "noise",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let r = Results::parse(&lines).unwrap_or_default();
        let k = r.run("kernel").cloned().unwrap_or_default();
        assert_eq!(k.rc, 0);
        assert!((k.wall - 2.25).abs() < 1e-9);
        assert_eq!(k.tool("shell").map(|p| p.p95), Some(9.0));
        assert_eq!(r.spawn_ms(), Some(10.0));
        assert!(r.problems(&[("kernel", "kernel")]).is_empty());
        assert_eq!(r.problems(&[("kernel", "host")]).len(), 1);
    }

    #[test]
    fn a_breakdown_splits_the_episode() {
        let ev = |at: &str, rest: &str| -> serde_json::Value {
            serde_json::from_str(&format!(r#"{{"at":"2026-11-30T{at}Z",{rest}}}"#))
                .unwrap_or_default()
        };
        let events = vec![
            ev("23:59:59.900", r#""event":"episode_started""#),
            ev("23:59:59.950", r#""event":"tool_call""#),
            ev("00:00:00.050", r#""event":"tool_result","duration_ms":80"#),
            ev("00:00:00.060", r#""event":"tool_call""#),
            ev("00:00:00.100", r#""event":"tool_result","duration_ms":30"#),
            ev("00:00:00.130", r#""event":"episode_finished""#),
        ];
        let b = Breakdown::of(&events).unwrap_or_default();
        assert_eq!(b.calls, 2);
        assert!((b.setup - 50.0).abs() < 1e-6, "{b:?}");
        assert!((b.in_calls - 140.0).abs() < 1e-6, "{b:?}");
        assert!((b.recorded - 110.0).abs() < 1e-6, "{b:?}");
        assert!((b.between - 10.0).abs() < 1e-6, "{b:?}");
        assert!((b.finish - 30.0).abs() < 1e-6, "{b:?}");
    }
}
