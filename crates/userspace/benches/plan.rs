//! Planning time for a realistic 10,000-rule policy (with and without 1,000 carve-outs and
//! the protected paths of language version 2), and the reference walk's cost per path.
//!
//! `cargo bench -p bee-userspace --bench plan`

use std::hint::black_box;
use std::time::Duration;

use bee_core::CompiledPolicy;
use bee_core::compiled::{
    COMPILED_FORMAT, ExecRule, FileId, FsGrants, NetGrants, NetRule, Origin, PathRule,
};
use bee_core::glob::PathPattern;
use bee_core::net::{IpNet, PortRange, Protocol};
use bee_userspace::plan::EnforcementPlan;
use criterion::{Criterion, criterion_group, criterion_main};

fn origin(key: String, text: &str) -> Origin {
    Origin {
        key,
        line: 1,
        column: 1,
        text: text.to_owned(),
    }
}

fn rules(key: &str, texts: &[String]) -> Vec<PathRule> {
    texts
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            Some(PathRule {
                pattern: PathPattern::parse(t).ok()?,
                origin: origin(format!("{key}[{i}]"), t),
            })
        })
        .collect()
}

/// A developer workstation's policy: toolchains and system trees by subtree, a large project
/// listed file by file, a dependency cache by crate, generated outputs, pinned tools and a few
/// hundred network grants — 10,000 rules in all.
fn workstation_policy() -> CompiledPolicy {
    let mut read: Vec<String> = [
        "/usr/**",
        "/lib/**",
        "/lib64/**",
        "/etc/ssl/**",
        "/etc/hosts",
        "/etc/resolv.conf",
        "/opt/toolchain/**",
        "/usr/lib/python3.*/**",
        "/home/dev/proj/**/*.toml",
        "/home/dev/**/*.md",
        "/home/dev/**/.git",
        "/home/dev/.config/*/settings.json",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for m in 0..200 {
        for f in 0..30 {
            read.push(format!("/home/dev/proj/src/mod{m}/file{f}.rs"));
        }
    }
    for i in 0..1000 {
        read.push(format!(
            "/home/dev/.cargo/registry/src/index.crates.io-6f17d22bba15001f/crate-{i}-1.0.{}/**",
            i % 7
        ));
    }
    let mut write: Vec<String> = [
        "/home/dev/proj/target/**",
        "/tmp/**",
        "/home/dev/proj/crates/*/src/**",
        "/home/dev/proj/**/*.snap",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for a in 0..50 {
        for b in 0..30 {
            write.push(format!("/var/cache/dev/bucket-{a}/entry-{b}.json"));
        }
    }
    let mut exec = Vec::new();
    for i in 0..200 {
        let t = format!("/usr/bin/tool{i}");
        exec.push(ExecRule {
            pattern: PathPattern::Exact { path: t.clone() },
            pin: Some(FileId {
                dev: 0x801,
                ino: 1000 + i,
            }),
            origin: origin(format!("exec[{i}]"), &t),
        });
    }
    for i in 0..99 {
        let t = format!("/usr/local/bin/x{i}");
        exec.push(ExecRule {
            pattern: PathPattern::Exact { path: t.clone() },
            pin: None,
            origin: origin(format!("exec[{}]", 200 + i), &t),
        });
    }
    let unix: Vec<String> = (0..10).map(|i| format!("/run/user/1000/sock{i}")).collect();
    let mut allow = Vec::new();
    for i in 0..1230u32 {
        let (net, ports) = match i % 3 {
            0 => (format!("10.{}.{}.0/24", i / 256, i % 256), (443, 443)),
            1 => (format!("10.{}.0.0/16", i % 200), (8000, 8100)),
            _ => (format!("2001:db8:{:x}::/48", i), (53, 53)),
        };
        let Ok(block) = net.parse::<IpNet>() else {
            continue;
        };
        allow.push(NetRule {
            net: block,
            ports: PortRange {
                first: ports.0,
                last: ports.1,
            },
            protocols: vec![Protocol::Tcp],
            origin: origin(format!("net.allow[{i}]"), &net),
        });
    }
    CompiledPolicy {
        format: COMPILED_FORMAT,
        version: 1,
        name: Some("workstation".to_owned()),
        description: None,
        source: "bench.toml".to_owned(),
        base: "/home/dev/proj".to_owned(),
        include: Vec::new(),
        fs: FsGrants {
            read: rules("fs.read", &read),
            write: rules("fs.write", &write),
            ..FsGrants::default()
        },
        exec,
        exec_deny: Vec::new(),
        net: NetGrants {
            allow,
            hosts: Vec::new(),
            unix: rules("net.unix", &unix),
        },
    }
}

/// The workstation policy with 1,000 `fs.deny` carve-outs inside its grants (a secrets file
/// per project module, and key files) and version 2's protected paths. (With `secrets/**`
/// subtrees instead, under `/home/dev/**/*.md`'s tree, the automaton before minimisation
/// needs more glob groups than the plan allows, and the policy is refused: see
/// `docs/benchmarks.md`.)
fn with_carve_outs(policy: &CompiledPolicy, subtrees: bool) -> CompiledPolicy {
    let mut p = policy.clone();
    p.version = 2;
    let mut deny: Vec<String> = (0..900)
        .map(|m| {
            if subtrees {
                format!("/home/dev/proj/src/mod{m}/secrets/**")
            } else {
                format!("/home/dev/proj/src/mod{m}/.env")
            }
        })
        .collect();
    deny.extend((0..100).map(|m| format!("/home/dev/proj/src/mod{m}/key.pem")));
    p.fs.deny = rules("fs.deny", &deny);
    let protect: Vec<String> = bee_core::protected::protected(2)
        .iter()
        .map(|x| x.pattern.to_owned())
        .collect();
    p.fs.protect = rules("protected", &protect);
    p
}

fn bench(c: &mut Criterion) {
    let policy = workstation_policy();
    let count = policy.fs.read.len()
        + policy.fs.write.len()
        + policy.exec.len()
        + policy.net.allow.len()
        + policy.net.unix.len();
    match EnforcementPlan::new(&policy) {
        Ok(plan) => eprintln!("{count} rules → {:?}", plan.stats()),
        Err(e) => eprintln!("{count} rules → refused: {e}"),
    }
    if let Err(e) = EnforcementPlan::new(&with_carve_outs(&policy, true)) {
        eprintln!("with 900 subtree carve-outs: refused: {e}");
    }
    let carved = with_carve_outs(&policy, false);
    match EnforcementPlan::new(&carved) {
        Ok(plan) => eprintln!(
            "{count} rules + {} carve-outs + {} protected → {:?}",
            carved.fs.deny.len(),
            carved.fs.protect.len(),
            plan.stats()
        ),
        Err(e) => eprintln!("carved → refused: {e}"),
    }
    let mut g = c.benchmark_group("plan");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    g.bench_function("10k_rules", |b| {
        b.iter(|| EnforcementPlan::new(black_box(&policy)))
    });
    g.bench_function("10k_rules_1k_carve_outs", |b| {
        b.iter(|| EnforcementPlan::new(black_box(&carved)))
    });
    g.finish();

    if let Ok(plan) = EnforcementPlan::new(&policy) {
        let paths = [
            "/home/dev/proj/src/mod117/file29.rs",
            "/usr/lib/python3.11/site-packages/numpy/core/multiarray.py",
            "/home/dev/proj/crates/core/src/glob.rs",
            "/home/dev/notes/todo.md",
            "/etc/shadow",
        ];
        let mut g = c.benchmark_group("walk");
        g.sample_size(20).measurement_time(Duration::from_secs(2));
        g.bench_function("5_paths", |b| {
            b.iter(|| {
                paths
                    .iter()
                    .map(|p| plan.path_access(black_box(p)).unwrap_or(0))
                    .fold(0, |a, x| a | x)
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
