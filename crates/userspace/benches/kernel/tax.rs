//! The host tax: what bee's attached programs cost the processes outside every scope.
//!
//! Once bee's engine is loaded, every process on the machine runs the early return of each
//! attached hook (its cgroup has no scope). This phase measures that against a kernel with no
//! bee program loaded at all, in the same boot, before the other phases:
//!
//! - each round starts one fresh worker in this process's own cgroup (no scope, no cgroup of
//!   the benchmark's) and has it run the per-operation loops and the workload twice: once in
//!   the state the kernel is in, then, after the engine was loaded or dropped, in the other;
//! - the state a round ends in is the next round's first, so the order alternates (not loaded
//!   → attached, attached → not loaded, …) and each round costs one `Engine::load` or one drop;
//! - the same worker process measures both states of a round, so its placement (address
//!   space, pages, translated code under TCG) cannot favour one of them;
//! - after a drop the phase waits until the kernel lists no bee program, and after a load it
//!   checks that the programs are there: "not loaded" means not loaded; then it pauses
//!   ([`SETTLE`]) and runs a discarded warm-up before measuring.
//!
//! The engine left loaded at the end is returned for the other phases.

use std::time::{Duration, Instant};

use bee_userspace::engine::{EngineOptions, SharedEngine};

use crate::targets::Targets;
use crate::{OPS, Options, Res, Worker, median, out, program_stats};

/// Samples per operation per state per round (the workload runs once per state per round).
const SAMPLES: usize = 2;

/// Pause after a load or a drop before the warm-up: the kernel finishes freeing what the
/// verifier and the dropped programs held (RCU callbacks, deferred frees) in the background.
const SETTLE: Duration = Duration::from_secs(2);

/// How long a dropped engine's programs may take to leave the kernel (they are freed after an
/// RCU grace period).
const UNLOAD_WAIT: Duration = Duration::from_secs(60);

/// bee's programs the kernel lists (`bee_` names), loaded by any process.
fn bee_programs() -> usize {
    aya::programs::loaded_programs()
        .flatten()
        .filter(|p| p.name_as_str().is_some_and(|n| n.starts_with("bee_")))
        .count()
}

/// Loads the engine and checks that its programs are listed.
fn load() -> Res<SharedEngine> {
    let t = Instant::now();
    let engine = SharedEngine::load(&EngineOptions::default())?;
    let n = bee_programs();
    eprintln!("kbench: Engine::load took {:?} ({n} programs)", t.elapsed());
    if n == 0 {
        return Err("the engine loaded but the kernel lists no bee program".into());
    }
    Ok(engine)
}

/// Drops the engine and waits until the kernel lists no bee program.
pub(crate) fn unload(engine: SharedEngine) -> Res<()> {
    let t = Instant::now();
    drop(engine);
    loop {
        let n = bee_programs();
        if n == 0 {
            eprintln!(
                "kbench: engine dropped; programs gone after {:?}",
                t.elapsed()
            );
            return Ok(());
        }
        if t.elapsed() > UNLOAD_WAIT {
            return Err(format!(
                "{n} bee programs still loaded {UNLOAD_WAIT:?} after the engine was dropped"
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Per state (0: not loaded, 1: attached): every sample, and each round's median.
#[derive(Debug, Default, Clone)]
struct Series {
    samples: [Vec<f64>; 2],
    rounds: [Vec<f64>; 2],
}

impl Series {
    fn add_round(&mut self, state: usize, mut round: Vec<f64>) {
        self.rounds[state].push(median(&mut round));
        self.samples[state].extend(round);
    }

    /// Ratio of the medians, attached / not loaded.
    fn ratio(&mut self) -> f64 {
        median(&mut self.samples[1]) / median(&mut self.samples[0])
    }

    /// Per-round ratios (attached / not loaded, same worker), sorted.
    fn paired(&self) -> Vec<f64> {
        let mut r: Vec<f64> = self.rounds[1]
            .iter()
            .zip(&self.rounds[0])
            .map(|(a, b)| a / b)
            .collect();
        r.sort_by(f64::total_cmp);
        r
    }
}

/// Runs the phase (see the module docs), prints its table, records the open+close and the
/// workload ratios in `targets`, and returns a loaded engine.
pub fn host_tax(o: &Options, port: u16, targets: &mut Targets) -> Res<SharedEngine> {
    let already = bee_programs();
    if already != 0 {
        return Err(format!(
            "{already} bee programs are loaded before the benchmark: the not-loaded baseline \
             needs a kernel without them"
        )
        .into());
    }
    if o.tax_rounds == 0 {
        return load();
    }
    let mut engine: Option<SharedEngine> = None;
    let mut ops: Vec<Series> = vec![Series::default(); OPS.len()];
    let mut work = Series::default();
    let toggle = |engine: &mut Option<SharedEngine>| -> Res<()> {
        match engine.take() {
            Some(e) => unload(e),
            None => load().map(|e| *engine = Some(e)),
        }
    };
    for _ in 0..o.tax_rounds {
        let mut worker = Worker::start("outside", "outside", None, port)?;
        for phase in 0..2 {
            let state = usize::from(engine.is_some());
            // Warm-up, discarded: the load (the verifier's work) or the drop just disturbed
            // the caches.
            for (op, _, iters) in OPS {
                worker.run(op, (iters / 10).max(1))?;
            }
            for (k, (op, _, iters)) in OPS.iter().enumerate() {
                let mut round = Vec::with_capacity(SAMPLES);
                for _ in 0..SAMPLES {
                    round.push(worker.run(op, *iters)?);
                }
                ops[k].add_round(state, round);
            }
            work.add_round(state, vec![worker.run("work", 1)?]);
            if phase == 0 {
                toggle(&mut engine)?;
                std::thread::sleep(SETTLE);
            }
        }
        worker.stop()?;
    }
    // The programs' own time per operation in the attached state: the part of the tax that
    // the statistics see (not the trampoline's entry and exit, nor the hook's call).
    let engine = match engine {
        Some(e) => e,
        None => load()?,
    };
    let own = own_time(port);

    out("");
    out(&format!(
        "### Host tax: a process outside every scope, bee's programs attached vs not loaded \
         ({} rounds, {SAMPLES} samples per state per round, order alternating, one worker per \
         round)",
        o.tax_rounds
    ));
    out("");
    out(
        "| Operation | not loaded | attached | × | × per round: median (min–max) | programs' own time per op (ns) |",
    );
    out("| --- | ---: | ---: | ---: | ---: | ---: |");
    let row = |label: &str, s: &mut Series, scale: f64, unit: &str, own: Option<f64>| {
        let base = median(&mut s.samples[0]) / scale;
        let with = median(&mut s.samples[1]) / scale;
        let mut paired = s.paired();
        let (lo, hi) = (
            paired.first().copied().unwrap_or(f64::NAN),
            paired.last().copied().unwrap_or(f64::NAN),
        );
        let mid = median(&mut paired);
        let own = own.map_or_else(|| "—".to_owned(), |ns| format!("{ns:.0}"));
        out(&format!(
            "| {label} | {base:.1} {unit} | {with:.1} {unit} | {:.3} | {mid:.3} ({lo:.3}–{hi:.3}) | {own} |",
            with / base
        ));
    };
    let own_of = |op: &str| own.as_ref().ok().and_then(|m| m.get(op).copied());
    for (k, (op, label, _)) in OPS.iter().enumerate() {
        row(label, &mut ops[k], 1.0, "ns", own_of(op));
    }
    row("workload script", &mut work, 1e6, "ms", own_of("work"));
    if let Err(e) = &own {
        out(&format!("Programs' own time: unavailable: {e}"));
    }
    let open = ops[0].ratio();
    targets.limit(
        "host tax: open+close outside a scope, attached ×",
        open,
        1.01,
    );
    targets.limit(
        "host tax: workload outside a scope, attached ×",
        work.ratio(),
        1.01,
    );
    if let Some(ns) = own_of("open") {
        let base = median(&mut ops[0].samples[0]);
        targets.reference(
            "host tax: open+close, estimated from the programs' own run time ×",
            1.0 + ns / base,
        );
    }
    Ok(engine)
}

/// ns per operation spent in bee's programs by a fresh worker outside every scope, with
/// `BPF_STATS_RUN_TIME` on (which costs time itself, hence after the timed rounds), per op
/// and for the workload (`work`).
fn own_time(port: u16) -> Res<std::collections::BTreeMap<String, f64>> {
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)?;
    let mut worker = Worker::start("outside", "outside", None, port)?;
    let mut m = std::collections::BTreeMap::new();
    let cases = OPS
        .iter()
        .map(|(op, _, iters)| (*op, *iters))
        .chain([("work", 1)]);
    for (op, iters) in cases {
        let before = program_stats();
        worker.run(op, iters)?;
        let after = program_stats();
        let ns: u64 = after
            .iter()
            // `bee_bpf` counts the statistics reads themselves (bpf(2) of this process).
            .filter(|(name, _)| name.starts_with("bee_") && !name.starts_with("bee_bpf"))
            .map(|(name, (_, ns))| ns.saturating_sub(before.get(name).map_or(0, |b| b.1)))
            .sum();
        m.insert(op.to_owned(), ns as f64 / iters as f64);
    }
    worker.stop()?;
    Ok(m)
}
