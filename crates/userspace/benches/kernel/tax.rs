//! The host tax: what bee's attached programs cost the processes outside every scope.
//!
//! Once bee's engine is loaded, every process on the machine runs the early return of each
//! attached hook (its cgroup has no scope). This phase measures that against a kernel with no
//! BPF program on those hooks, and against the floor any BPF LSM pays there: the no-op programs
//! of `floor.bpf.o` ([`bee_ebpf::FLOOR_OBJECT`]) on the same hooks. It runs in the same boot,
//! before the other phases:
//!
//! - each round starts one fresh worker in this process's own cgroup (no scope, no cgroup of
//!   the benchmark's) and has it run the per-operation loops and the workload three times: in
//!   the state the kernel is in, then in the two others, one load or drop between them;
//! - the state a round ends in is the next round's first, and the order rotates (not loaded →
//!   floor → attached, attached → not loaded → floor, floor → attached → not loaded), so each
//!   state takes each place in a round once every three rounds;
//! - the same worker process measures every state of a round, so its placement (address
//!   space, pages, translated code under TCG) cannot favour one of them;
//! - after a drop the phase waits until the kernel lists none of the dropped programs, and
//!   after a load it checks that they are there: "not loaded" means not loaded; then it
//!   pauses ([`SETTLE`]) and runs a discarded warm-up before measuring.
//!
//! The engine left loaded at the end is returned for the other phases.

use std::time::{Duration, Instant};

use aya::Ebpf;
use aya::programs::{Lsm, ProgramError};
use bee_userspace::engine::{
    CACHE_PROGRAMS, EngineOptions, OPTIONAL_PROGRAMS, PROGRAMS, SharedEngine,
};

use crate::targets::Targets;
use crate::{OPS, Options, Res, Worker, median, out, program_stats};

/// Samples per operation per state per round (the workload runs once per state per round).
const SAMPLES: usize = 2;

/// Pause after a load or a drop before the warm-up: the kernel finishes freeing what the
/// verifier and the dropped programs held (RCU callbacks, deferred frees) in the background.
const SETTLE: Duration = Duration::from_secs(2);

/// How long dropped programs may take to leave the kernel (they are freed after an RCU grace
/// period).
const UNLOAD_WAIT: Duration = Duration::from_secs(60);

/// The states a round measures, by index into a [`Series`].
const NOT_LOADED: usize = 0;
const FLOOR: usize = 1;
const ATTACHED: usize = 2;

/// What each state is called in messages.
const STATE_NAMES: [&str; 3] = ["nothing", "the floor", "bee's engine"];

/// Each round's order, by round number modulo 3: every round starts where the last one ended.
const ORDERS: [[usize; 3]; 3] = [
    [NOT_LOADED, FLOOR, ATTACHED],
    [ATTACHED, NOT_LOADED, FLOOR],
    [FLOOR, ATTACHED, NOT_LOADED],
];

/// Programs the kernel lists whose names start with `prefix`, loaded by any process.
fn programs_named(prefix: &str) -> usize {
    aya::programs::loaded_programs()
        .flatten()
        .filter(|p| p.name_as_str().is_some_and(|n| n.starts_with(prefix)))
        .count()
}

/// bee's programs the kernel lists (`bee_` names).
fn bee_programs() -> usize {
    programs_named("bee_")
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

/// Loads and attaches the floor: a no-op program on every hook the engine attaches, by the
/// engine's rules (an optional hook the kernel lacks is left out, as the engine leaves it).
fn load_floor() -> Res<Ebpf> {
    let t = Instant::now();
    let btf = aya::Btf::from_sys_fs()?;
    let mut ebpf = Ebpf::load(bee_ebpf::FLOOR_OBJECT)?;
    let hooks = PROGRAMS
        .iter()
        .chain(CACHE_PROGRAMS)
        .map(|&(_, h)| (h, true))
        .chain(OPTIONAL_PROGRAMS.iter().map(|&(_, h)| (h, false)));
    let mut attached = 0;
    for (hook, needed) in hooks {
        let name = format!("{}{hook}", bee_ebpf::FLOOR_PREFIX);
        let prog: &mut Lsm = ebpf
            .program_mut(&name)
            .ok_or_else(|| format!("floor.bpf.o has no program {name}"))?
            .try_into()?;
        match prog.load(hook, &btf) {
            Ok(()) => {}
            Err(ProgramError::Btf(aya::BtfError::UnknownBtfTypeName { .. })) if !needed => {
                continue;
            }
            Err(e) => return Err(format!("{name}: BPF_PROG_LOAD: {e}").into()),
        }
        prog.attach()?;
        attached += 1;
    }
    let n = programs_named(bee_ebpf::FLOOR_PREFIX);
    eprintln!(
        "kbench: the floor loaded in {:?} ({attached} programs attached, {n} listed)",
        t.elapsed()
    );
    if n < attached {
        return Err(format!("{attached} floor programs attached, the kernel lists {n}").into());
    }
    Ok(ebpf)
}

/// Waits until the kernel lists no program named `prefix…`, `what` having been dropped.
fn wait_gone(prefix: &str, what: &str, t: Instant) -> Res<()> {
    loop {
        let n = programs_named(prefix);
        if n == 0 {
            eprintln!(
                "kbench: {what} dropped; programs gone after {:?}",
                t.elapsed()
            );
            return Ok(());
        }
        if t.elapsed() > UNLOAD_WAIT {
            return Err(format!(
                "{n} {prefix}… programs still loaded {UNLOAD_WAIT:?} after the {what} was dropped"
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Drops the engine and waits until the kernel lists no bee program.
pub(crate) fn unload(engine: SharedEngine) -> Res<()> {
    let t = Instant::now();
    drop(engine);
    wait_gone("bee_", "engine", t)
}

/// What is loaded: nothing, the floor, or bee's engine.
#[derive(Default)]
struct Loaded {
    floor: Option<Ebpf>,
    engine: Option<SharedEngine>,
}

impl Loaded {
    /// The state index of what is loaded.
    fn state(&self) -> usize {
        match (&self.floor, &self.engine) {
            (Some(_), _) => FLOOR,
            (None, Some(_)) => ATTACHED,
            (None, None) => NOT_LOADED,
        }
    }

    /// Drops what is loaded, waits until it is gone, and loads what `state` needs.
    fn switch(&mut self, state: usize) -> Res<()> {
        if let Some(floor) = self.floor.take() {
            let t = Instant::now();
            drop(floor);
            wait_gone(bee_ebpf::FLOOR_PREFIX, "floor", t)?;
        }
        if let Some(engine) = self.engine.take() {
            unload(engine)?;
        }
        match state {
            FLOOR => self.floor = Some(load_floor()?),
            ATTACHED => self.engine = Some(load()?),
            _ => {}
        }
        Ok(())
    }
}

/// Per state ([`NOT_LOADED`], [`FLOOR`], [`ATTACHED`]): every sample, and each round's median.
#[derive(Debug, Default, Clone)]
struct Series {
    samples: [Vec<f64>; 3],
    rounds: [Vec<f64>; 3],
}

impl Series {
    fn add_round(&mut self, state: usize, mut round: Vec<f64>) {
        self.rounds[state].push(median(&mut round));
        self.samples[state].extend(round);
    }

    /// The median of every sample of `state`.
    fn median(&self, state: usize) -> f64 {
        median(&mut self.samples[state].clone())
    }

    /// Ratio of the medians, `a` / `b`.
    fn ratio(&self, a: usize, b: usize) -> f64 {
        self.median(a) / self.median(b)
    }

    /// Per-round ratios `a` / `b` (same worker): median, min and max.
    fn paired(&self, a: usize, b: usize) -> (f64, f64, f64) {
        let mut r: Vec<f64> = self.rounds[a]
            .iter()
            .zip(&self.rounds[b])
            .map(|(x, y)| x / y)
            .collect();
        r.sort_by(f64::total_cmp);
        let (lo, hi) = (
            r.first().copied().unwrap_or(f64::NAN),
            r.last().copied().unwrap_or(f64::NAN),
        );
        (median(&mut r), lo, hi)
    }
}

/// Runs the phase (see the module docs), prints its table, records the open+close and the
/// workload ratios in `targets`, and returns a loaded engine.
pub fn host_tax(o: &Options, port: u16, targets: &mut Targets) -> Res<SharedEngine> {
    for prefix in ["bee_", bee_ebpf::FLOOR_PREFIX] {
        let already = programs_named(prefix);
        if already != 0 {
            return Err(format!(
                "{already} {prefix}… programs are loaded before the benchmark: the not-loaded \
                 baseline needs a kernel without them"
            )
            .into());
        }
    }
    if o.tax_rounds == 0 {
        return load();
    }
    let mut loaded = Loaded::default();
    let mut ops: Vec<Series> = vec![Series::default(); OPS.len()];
    let mut work = Series::default();
    for r in 0..o.tax_rounds {
        let mut worker = Worker::start("outside", "outside", None, port)?;
        for (place, &state) in ORDERS[r % 3].iter().enumerate() {
            if place > 0 {
                loaded.switch(state)?;
                std::thread::sleep(SETTLE);
            }
            if loaded.state() != state {
                return Err(format!(
                    "round {r}: meant to measure {}, but {} is loaded",
                    STATE_NAMES[state],
                    STATE_NAMES[loaded.state()]
                )
                .into());
            }
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
        }
        worker.stop()?;
    }
    // The programs' own time per operation, each set attached alone: the part of the tax
    // that the statistics see (not the trampoline's entry and exit, nor the hook's call).
    loaded.switch(FLOOR)?;
    let floor_own = own_time(port, bee_ebpf::FLOOR_PREFIX);
    loaded.switch(ATTACHED)?;
    let own = own_time(port, "bee_");
    let engine = loaded.engine.take().ok_or("the engine is not loaded")?;

    out("");
    out(&format!(
        "### Host tax: a process outside every scope, with no program on bee's hooks, with a \
         no-op program on each (the floor), and with bee's attached ({} rounds, {SAMPLES} \
         samples per state per round, order rotating, one worker per round)",
        o.tax_rounds
    ));
    out("");
    out(
        "| Operation | not loaded | floor | attached | floor × | attached × | attached / floor × per round: median (min–max) | own time per op, floor / bee (ns) |",
    );
    out("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let own_of = |m: &Res<std::collections::BTreeMap<String, f64>>, op: &str| {
        m.as_ref().ok().and_then(|m| m.get(op).copied())
    };
    let row = |label: &str, s: &Series, scale: f64, unit: &str, op: &str| {
        let [base, floor, with] = [NOT_LOADED, FLOOR, ATTACHED].map(|k| s.median(k) / scale);
        let (mid, lo, hi) = s.paired(ATTACHED, FLOOR);
        let ns = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), |ns| format!("{ns:.0}"));
        out(&format!(
            "| {label} | {base:.1} {unit} | {floor:.1} {unit} | {with:.1} {unit} | {:.3} | {:.3} \
             | {mid:.3} ({lo:.3}–{hi:.3}) | {} / {} |",
            floor / base,
            with / base,
            ns(own_of(&floor_own, op)),
            ns(own_of(&own, op)),
        ));
    };
    for (k, (op, label, _)) in OPS.iter().enumerate() {
        row(label, &ops[k], 1.0, "ns", op);
    }
    row("workload script", &work, 1e6, "ms", "work");
    for (what, m) in [("floor", &floor_own), ("bee", &own)] {
        if let Err(e) = m {
            out(&format!("Programs' own time ({what}): unavailable: {e}"));
        }
    }
    targets.limit(
        "host tax: open+close outside a scope, attached ×",
        ops[0].ratio(ATTACHED, NOT_LOADED),
        1.01,
    );
    targets.limit(
        "host tax: workload outside a scope, attached ×",
        work.ratio(ATTACHED, NOT_LOADED),
        1.01,
    );
    for (what, s) in [("open+close", &ops[0]), ("workload", &work)] {
        targets.reference(
            &format!("host tax floor: {what}, no-op programs on the same hooks ×"),
            s.ratio(FLOOR, NOT_LOADED),
        );
        targets.reference(
            &format!("host tax above the floor: {what}, attached / no-op ×"),
            s.ratio(ATTACHED, FLOOR),
        );
    }
    if let Some(ns) = own_of(&own, "open") {
        let base = ops[0].median(NOT_LOADED);
        targets.reference(
            "host tax: open+close, estimated from the programs' own run time ×",
            1.0 + ns / base,
        );
    }
    Ok(engine)
}

/// ns per operation spent in the programs named `prefix…` by a fresh worker outside every
/// scope, with `BPF_STATS_RUN_TIME` on (which costs time itself, hence after the timed
/// rounds), per op and for the workload (`work`).
fn own_time(port: u16, prefix: &str) -> Res<std::collections::BTreeMap<String, f64>> {
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)?;
    let mut worker = Worker::start("outside", "outside", None, port)?;
    let mut m = std::collections::BTreeMap::new();
    let cases = OPS
        .iter()
        .map(|(op, _, iters)| (*op, *iters))
        .chain([("work", 1)]);
    // The program on the `bpf` hook counts the statistics reads themselves (bpf(2) of this
    // process).
    let bpf_hook = format!("{prefix}bpf");
    for (op, iters) in cases {
        let before = program_stats();
        worker.run(op, iters)?;
        let after = program_stats();
        let ns: u64 = after
            .iter()
            .filter(|(name, _)| name.starts_with(prefix) && !name.starts_with(&bpf_hook))
            .map(|(name, (_, ns))| ns.saturating_sub(before.get(name).map_or(0, |b| b.1)))
            .sum();
        m.insert(op.to_owned(), ns as f64 / iters as f64);
    }
    worker.stop()?;
    Ok(m)
}
