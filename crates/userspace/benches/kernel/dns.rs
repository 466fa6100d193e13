//! Name grants: what a `connect` costs in a scope whose resolver's answers fill the kernel's
//! answers map (`bee_answers`), last in the boot.
//!
//! The phase drops the shared engine the other phases used and loads an [`Engine`] of its own,
//! so that it can write answers directly (`AnswerMap::admit`, as a scope's resolver does) with
//! no resolver and no DNS traffic. It attaches the DNS steering programs
//! (`Engine::enable_dns`; they then run on every connect of the machine, the rows *outside*
//! included) and starts three workers each round, every one in a fresh cgroup of the same
//! depth:
//!
//! - *outside*: no scope;
//! - *bee*: the minimal policy, whose only net rule grants UDP to `127.0.0.1` on the
//!   benchmark's port, without name grants;
//! - *bee + names*: the same plan installed with `SCOPE_DNS` (its DNS map entry names an idle
//!   loopback port: nothing is sent there), and 0, 1 or 4,096 answers of its own in the map (its quota,
//!   `SCOPE_ANSWERS_MAX`).
//!
//! Each connects its UDP socket (as the per-operation loop does) to three peers on the
//! benchmark's port: `127.0.0.1`, which the address rule grants; [`ANSWER`], which only an
//! answer covers (the first one admitted); [`NEITHER`], which nothing covers. The other answers
//! are further addresses of `127.64.0.0/16`. Loopback addresses all of them, so that a granted
//! connect succeeds on any guest without a route to set up (a UDP connect sends nothing).
//!
//! A denied connect writes a 4 KiB audit event into the 1 MiB ring buffer, so a sample is
//! [`ITERS`] connects (about 200 events fit) and the ring is drained after every sample; the
//! drained denials are counted per scope and must be exactly the expected ones (every connect's
//! result is checked in the worker too: success, or `EPERM` where a denial is expected).
//! Per round, for each answer count (the order reversing every other round), each peer,
//! [`SAMPLES`] samples per worker, the workers' order rotating.

use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use bee_common::scope::SCOPE_DNS;
use bee_common::{NetPortRule, NetValue, PROTO_UDP};
use bee_userspace::cgroup::{CgroupParent, ScopeCgroup, ScopeLimits};
use bee_userspace::engine::{
    AnswerMap, Engine, EngineOptions, SCOPE_ANSWERS_MAX, SharedEngine, dns_value,
};
use bee_userspace::plan::EnforcementPlan;

use crate::{Options, Res, Worker, median, out, percentile, program_stats};

/// The peer only an answer covers: the first answer admitted.
pub const ANSWER: [u8; 4] = [127, 64, 0, 1];
/// The peer nothing covers.
pub const NEITHER: [u8; 4] = [127, 65, 0, 1];
/// Connects per sample.
const ITERS: u64 = 200;
/// Samples per worker, peer and answer count in a round.
const SAMPLES: usize = 5;
/// The answer counts compared: none, one, and as many as one scope may hold.
const STATES: [usize; 3] = [0, 1, SCOPE_ANSWERS_MAX];
/// The answers' TTL.
const TTL: Duration = Duration::from_secs(3600);

/// The peers: worker op, table label.
const PEERS: [(&str, &str); 3] = [
    ("connect", "127.0.0.1: granted by the address rule"),
    ("connect_answer", "127.64.0.1: covered only by an answer"),
    (
        "connect_neither",
        "127.65.0.1: covered by neither (EPERM in a scope)",
    ),
];

/// The workers: table label, whether it is in a scope, whether with names.
const VARIANTS: [(&str, bool, bool); 3] = [
    ("outside", false, false),
    ("bee", true, false),
    ("bee + names", true, true),
];

/// The `i`-th answer's address: [`ANSWER`] and the addresses after it.
fn answer_addr(i: usize) -> IpAddr {
    let base = u32::from(Ipv4Addr::from(ANSWER));
    IpAddr::V4(Ipv4Addr::from(
        base.wrapping_add(u32::try_from(i).unwrap_or(u32::MAX)),
    ))
}

/// Whether variant `v`'s connect to peer `p` is denied with `answers` in the map.
fn denied(v: usize, p: usize, answers: usize) -> bool {
    let (_, scoped, names) = VARIANTS[v];
    scoped && (p == 2 || (p == 1 && !(names && answers > 0)))
}

/// Empties the scope's answers and admits `n`; returns (µs per admit, ms to empty the scope's
/// answers before).
fn set_answers(
    answers: &AnswerMap,
    cgroup: u64,
    n: usize,
    had: usize,
    ports: &NetValue,
) -> Res<(f64, f64)> {
    let t = Instant::now();
    let forgot = answers.forget_scope(cgroup);
    let forget_ms = t.elapsed().as_secs_f64() * 1e3;
    if forgot != had {
        return Err(format!("forget_scope removed {forgot} answers, the scope had {had}").into());
    }
    let t = Instant::now();
    for i in 0..n {
        answers.admit(cgroup, answer_addr(i), TTL, ports)?;
    }
    let admit_us = t.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64;
    Ok((admit_us, forget_ms))
}

/// Drains the ring buffer; denials per variant (by cgroup id).
fn drain(engine: &mut Engine, cgroups: &[ScopeCgroup]) -> Vec<u64> {
    let mut counts = vec![0u64; cgroups.len()];
    for e in engine.read_events(usize::MAX) {
        if e.error != 0
            && let Some(i) = cgroups.iter().position(|c| c.id() == e.cgroup_id)
        {
            counts[i] += 1;
        }
    }
    counts
}

/// Runs the phase (see the module docs) and prints its tables. Takes the shared engine to drop
/// it: one engine at a time.
pub fn name_grants(
    o: &Options,
    shared: SharedEngine,
    parent: &CgroupParent,
    plan: &EnforcementPlan,
    port: u16,
) -> Res<()> {
    crate::tax::unload(shared)?;
    let t = Instant::now();
    let mut engine = Engine::load(&EngineOptions::default())?;
    engine.enable_dns()?;
    eprintln!("kbench: Engine::load + enable_dns took {:?}", t.elapsed());
    // Where the scope's port-53 traffic would go; nothing is sent in this phase.
    let idle = UdpSocket::bind("127.0.0.1:0")?;
    let mut cgroups = Vec::new();
    let mut installs = Vec::new();
    let mut dns_cgroup = 0;
    for (_, scoped, names) in VARIANTS {
        let cg = parent.create_scope(&ScopeLimits::default())?;
        if names {
            engine.set_dns(cg.id(), dns_value(idle.local_addr()?.port(), false))?;
            installs.push(engine.install(plan, cg.id(), SCOPE_DNS)?);
            dns_cgroup = cg.id();
        } else if scoped {
            installs.push(engine.install(plan, cg.id(), 0)?);
        }
        cgroups.push(cg);
    }
    let answers = engine.answers()?;
    let mut ports = NetValue {
        count: 1,
        ..NetValue::default()
    };
    ports.rules[0] = NetPortRule {
        first: port,
        last: port,
        protocols: PROTO_UDP,
        _pad: [0; 3],
    };

    let (nv, np, ns) = (VARIANTS.len(), PEERS.len(), STATES.len());
    // samples[state][peer][variant]: ns per connect.
    let mut samples = vec![vec![vec![Vec::new(); nv]; np]; ns];
    let mut admit_us = Vec::new();
    let mut forget_ms = Vec::new();
    let mut had = 0;
    let run = |engine: &mut Engine,
               w: &mut Worker,
               v: usize,
               p: usize,
               answers: usize,
               iters: u64|
     -> Res<f64> {
        let deny = denied(v, p, answers);
        let ns = w.run_expect(PEERS[p].0, iters, if deny { "eperm" } else { "ok" })?;
        let counts = drain(engine, &cgroups);
        let want: Vec<u64> = (0..nv)
            .map(|i| if i == v && deny { iters } else { 0 })
            .collect();
        if counts != want {
            return Err(format!(
                "denials drained after {iters} connects of {} to {} with {answers} answers: \
                 {counts:?}, expected {want:?}",
                VARIANTS[v].0, PEERS[p].1
            )
            .into());
        }
        Ok(ns)
    };
    for round in 0..o.dns_rounds {
        let mut workers = Vec::new();
        for ((name, scoped, _), cg) in VARIANTS.iter().zip(&cgroups) {
            let variant = if *scoped { "bee" } else { "outside" };
            workers.push(Worker::start(name, variant, Some(cg), port)?);
        }
        let order: Vec<usize> = if round % 2 == 0 {
            (0..ns).collect()
        } else {
            (0..ns).rev().collect()
        };
        for (k, &s) in order.iter().enumerate() {
            let n = STATES[s];
            let (a, f) = set_answers(&answers, dns_cgroup, n, had, &ports)?;
            if had == STATES[ns - 1] {
                forget_ms.push(f);
            }
            if n == STATES[ns - 1] {
                admit_us.push(a);
            }
            had = n;
            if k == 0 {
                // Warm-up, discarded.
                for (v, w) in workers.iter_mut().enumerate() {
                    for p in 0..np {
                        run(&mut engine, w, v, p, n, ITERS / 4)?;
                    }
                }
            }
            for (p, per_variant) in samples[s].iter_mut().enumerate() {
                for i in 0..SAMPLES * nv {
                    let v = (i + round + p) % nv;
                    let t = run(&mut engine, &mut workers[v], v, p, n, ITERS)?;
                    per_variant[v].push(t);
                }
            }
        }
        for w in workers {
            w.stop()?;
        }
    }

    // With run-time statistics on, each connect once more per worker with 4,096 answers.
    set_answers(&answers, dns_cgroup, STATES[ns - 1], had, &ports)?;
    let breakdown = (|| -> Res<Vec<String>> {
        let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)?;
        let mut rows = Vec::new();
        for ((name, scoped, _), (v, cg)) in VARIANTS.iter().zip(cgroups.iter().enumerate()) {
            let variant = if *scoped { "bee" } else { "outside" };
            let mut w = Worker::start(name, variant, Some(cg), port)?;
            for (p, (_, peer)) in PEERS.iter().enumerate() {
                run(&mut engine, &mut w, v, p, STATES[ns - 1], ITERS / 4)?;
                // SAMPLES samples (the ring drained after each), the programs' counters summed.
                let mut sum = std::collections::BTreeMap::<String, (u64, u64)>::new();
                for _ in 0..SAMPLES {
                    let before = program_stats();
                    run(&mut engine, &mut w, v, p, STATES[ns - 1], ITERS)?;
                    for (prog, (cnt, t)) in program_stats() {
                        let (c0, t0) = before.get(&prog).copied().unwrap_or((0, 0));
                        let e = sum.entry(prog).or_default();
                        e.0 += cnt.saturating_sub(c0);
                        e.1 += t.saturating_sub(t0);
                    }
                }
                let connects = (ITERS * SAMPLES as u64) as f64;
                for (prog, (runs, t)) in sum {
                    if runs == 0 || !prog.starts_with("bee_") || prog.starts_with("bee_bpf") {
                        continue;
                    }
                    rows.push(format!(
                        "| {peer} | {name} | {prog} | {:.2} | {:.0} |",
                        runs as f64 / connects,
                        t as f64 / connects
                    ));
                }
            }
            w.stop()?;
        }
        Ok(rows)
    })();

    for installed in installs {
        engine.uninstall(installed)?;
    }
    for cg in cgroups {
        cg.remove()?;
    }
    drop(engine);

    out("");
    out(&format!(
        "### Name grants: UDP connect with 0, 1 and 4,096 answers in the scope (median of {} \
         rounds × {SAMPLES} samples of {ITERS} connects; DNS steering attached throughout)",
        o.dns_rounds
    ));
    out("");
    out("| Peer | answers | outside ns | bee ns | × | bee + names ns | × | bee + names p90 ns |");
    out("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (p, (_, label)) in PEERS.iter().enumerate() {
        for (s, n) in STATES.iter().enumerate() {
            let cell = &mut samples[s][p];
            let base = median(&mut cell[0]);
            let bee = median(&mut cell[1]);
            let names = median(&mut cell[2]);
            out(&format!(
                "| {label} | {n} | {base:.0} | {bee:.0} | {:.3} | {names:.0} | {:.3} | {:.0} |",
                bee / base,
                names / base,
                percentile(&mut cell[2], 90.0)
            ));
        }
    }
    out("");
    out("With 0 answers the scope's connects to 127.64.0.1 are denied; with 1 or 4,096 granted.");
    out("");
    out("| bee + names, × its own figure with 0 answers | 1 answer | 4,096 answers |");
    out("| --- | ---: | ---: |");
    for (p, (_, label)) in PEERS.iter().enumerate() {
        let zero = median(&mut samples[0][p][2]);
        out(&format!(
            "| {label} | {:.3} | {:.3} |",
            median(&mut samples[1][p][2]) / zero,
            median(&mut samples[2][p][2]) / zero
        ));
    }
    out("");
    out(&format!(
        "Filling 4,096 answers (`AnswerMap::admit`, one scope, one port rule each): p50 {:.1} µs \
         per answer, {:.1}–{:.1} µs over {} fills; emptying them (`forget_scope`): p50 {:.0} ms",
        median(&mut admit_us),
        admit_us.first().copied().unwrap_or(f64::NAN),
        admit_us.last().copied().unwrap_or(f64::NAN),
        admit_us.len(),
        median(&mut forget_ms)
    ));
    out("");
    out(
        "#### Where the time goes, 4,096 answers: BPF program run time per connect \
         (`BPF_STATS_RUN_TIME`)",
    );
    out("");
    match breakdown {
        Ok(rows) => {
            out("| Peer | worker | program | runs/connect | ns/connect in the program |");
            out("| --- | --- | --- | ---: | ---: |");
            for r in rows {
                out(&r);
            }
        }
        Err(e) => out(&format!("unavailable: {e}")),
    }
    Ok(())
}
