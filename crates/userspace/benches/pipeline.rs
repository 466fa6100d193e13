//! Both stages on one large policy: compile 10,000 rules from TOML (stage one), plan their
//! kernel maps (stage two), and the two together, as `bee validate` runs them; and the two
//! together on the same rules as a version 2 policy (its protected set) with 1,000 carve-outs
//! and 32 segment and postfix patterns.
//!
//! Run with `cargo bench -p bee-userspace --bench pipeline`; results go in docs/benchmarks.md.
//! Before measuring, it prints each policy's plan size and the bytes of its kernel map
//! contents (keys and values, without the maps' own overhead); `-- --list` prints only
//! those.
#![expect(
    clippy::panic,
    reason = "a benchmark whose input does not compile would measure nothing"
)]

use std::hint::black_box;
use std::mem::size_of;
use std::path::PathBuf;

use bee_common::{
    ComboKey, EdgeKeyLong, EdgeKeyShort, ExecPinKey, GlobValue, LpmKeyV4, LpmKeyV6, NetValue,
    StateValue,
};

use bee_core::compile::{CompileOptions, compile_str};
use bee_userspace::plan::EnforcementPlan;
use criterion::{Criterion, criterion_group, criterion_main};

/// A policy of `n` rules in the proportions a large real policy might have: mostly exact
/// files and subtrees, some postfix and segment patterns, a few bounded-star patterns (1 in
/// 1000) and network grants.
fn policy(n: usize) -> String {
    let mut read = Vec::new();
    let mut write = Vec::new();
    let mut exec = Vec::new();
    for i in 0..n {
        let (p, d) = (i % 53, i % 7);
        let rule = match i % 10 {
            0..=3 => format!("/srv/project{p}/src/module{d}/file{i}.rs"),
            4 | 5 => format!("/srv/project{p}/vendor/crate{i}/**"),
            6 => format!("/srv/project{p}/gen{i}/**/*.rs"),
            7 => format!("/srv/project{p}/tree{i}/**/Cargo.toml"),
            8 if i % 1000 == 8 => format!("/srv/project{p}/*/lib{i}/*.so"),
            _ => format!("~/cache/{p}/{i}"),
        };
        match i % 5 {
            0 => write.push(rule),
            1 if i % 10 == 1 => exec.push(rule),
            _ => read.push(rule),
        }
    }
    let list = |v: &[String]| {
        v.iter()
            .map(|r| format!("  \"{r}\",\n"))
            .collect::<String>()
    };
    format!(
        "version = 1\nname = \"large\"\n[fs]\nread = [\n{}]\nwrite = [\n{}]\n[exec]\nallow = [\n{}]\n\n[[net.allow]]\naddr = [\"10.0.0.0/8\", \"::1\"]\nports = [443, \"8000-8100\"]\nproto = \"tcp\"\n",
        list(&read),
        list(&write),
        list(&exec)
    )
}

/// [`policy`] as version 2 with 1,000 `fs.deny` carve-outs (subtrees and files inside the
/// granted trees) and 32 segment and postfix patterns: grants, carve-outs and protections.
fn policy_with_patterns(n: usize) -> String {
    let base = policy(n).replacen("version = 1", "version = 2", 1);
    let mut deny = Vec::new();
    for i in 0..1000 {
        let p = i % 53;
        deny.push(if i % 2 == 0 {
            format!("/srv/project{p}/vendor/crate{}/secrets/**", i * 10 + 4)
        } else {
            format!("/srv/project{p}/src/module{}/key{i}.pem", i % 7)
        });
    }
    let names = [
        "node_modules",
        "__pycache__",
        ".env",
        "dist",
        "build",
        "target",
        ".cache",
        "tmp",
    ];
    let mut write = Vec::new();
    let mut protect = Vec::new();
    for (k, name) in names.iter().enumerate() {
        write.push(format!("/srv/**/{name}/**"));
        deny.push(format!("/srv/project{k}/**/{name}"));
        protect.push(format!("/srv/**/{name}/hooks/**"));
        deny.push(format!("/srv/project{k}/**/*.k{k}"));
    }
    let list = |v: &[String]| {
        v.iter()
            .map(|r| format!("  \"{r}\",\n"))
            .collect::<String>()
    };
    base.replacen(
        "[fs]\n",
        &format!(
            "[fs]\ndeny = [\n{}]\nprotect = [\n{}]\n",
            list(&deny),
            list(&protect)
        ),
        1,
    )
    .replacen("write = [\n", &format!("write = [\n{}", list(&write)), 1)
}

/// The twelve-line policy of a small Python project, without its local include.
const PYTHON_PROJECT: &str = r#"version = 2
include = ["base", "python"]
[fs]
read  = ["./**"]
write = ["./.pytest_cache/**", "./**/__pycache__/**", "/tmp/**"]
deny  = ["./secrets/**", "./**/.env"]
[exec]
allow = ["/usr/bin/sh", "/usr/bin/dash", "./.venv/bin/python*", "./.venv/bin/pytest", "./.venv/lib/**/*.so"]
deny  = ["./**/*.sh"]
"#;

/// The bytes of `plan`'s kernel map contents: every entry's key and value.
fn map_bytes(plan: &EnforcementPlan) -> usize {
    let u = size_of::<u32>();
    plan.states().len() * size_of::<StateValue>()
        + plan.globs().len() * size_of::<GlobValue>()
        + plan.edges_short().len() * (size_of::<EdgeKeyShort>() + u)
        + plan.edges_long().len() * (size_of::<EdgeKeyLong>() + u)
        + plan.combos().len() * (size_of::<ComboKey>() + u)
        + plan.exec_pins().len() * (size_of::<ExecPinKey>() + u)
        + plan.net_v4().len() * (size_of::<LpmKeyV4>() + size_of::<NetValue>())
        + plan.net_v6().len() * (size_of::<LpmKeyV6>() + size_of::<NetValue>())
}

/// Prints the plan's size and map bytes of the policy `text`.
fn print_size(what: &str, text: &str, options: &CompileOptions) {
    let compiled = match compile_str("size.toml", text, options) {
        Ok(c) => c.policy,
        Err(e) => panic!("{what} must compile: {e}"),
    };
    let plan = match EnforcementPlan::new(&compiled) {
        Ok(p) => p,
        Err(e) => panic!("{what} must plan: {e}"),
    };
    let s = plan.stats();
    eprintln!(
        "{what}: {} states, {} short and {} long edges, {} globs, {} combos, {} exec pins, \
         {} + {} net prefixes: {} bytes of map contents",
        s.states,
        s.edges_short,
        s.edges_long,
        s.globs,
        s.combos,
        s.exec_pins,
        s.net_v4_prefixes,
        s.net_v6_prefixes,
        map_bytes(&plan)
    );
}

fn bench(c: &mut Criterion) {
    let patterns = policy_with_patterns(10_000);
    let text = policy(10_000);
    let options = CompileOptions {
        base: PathBuf::from("/srv"),
        home: Some(PathBuf::from("/home/u")),
    };
    let compiled = match compile_str("large.toml", &text, &options) {
        Ok(c) => c.policy,
        Err(e) => panic!("the generated policy must compile: {e}"),
    };
    if let Err(e) = EnforcementPlan::new(&compiled) {
        panic!("the generated policy must plan: {e}");
    }
    print_size("python project", PYTHON_PROJECT, &options);
    print_size("10k rules", &text, &options);
    print_size("10k rules, 1k carve-outs, 32 patterns", &patterns, &options);
    c.bench_function("compile 10k rules", |b| {
        b.iter(|| compile_str("large.toml", black_box(&text), &options))
    });
    c.bench_function("plan 10k rules", |b| {
        b.iter(|| EnforcementPlan::new(black_box(&compiled)))
    });
    let options2 = options.clone();
    match compile_str("patterns.toml", &patterns, &options) {
        Ok(c) => {
            if let Err(e) = EnforcementPlan::new(&c.policy) {
                panic!("the policy with carve-outs and patterns must plan: {e}");
            }
        }
        Err(e) => panic!("the policy with carve-outs and patterns must compile: {e}"),
    }
    c.bench_function("compile+plan 10k rules, 1k carve-outs, 32 patterns", |b| {
        b.iter(|| {
            let compiled = compile_str("patterns.toml", black_box(&patterns), &options2)?;
            EnforcementPlan::new(&compiled.policy).map_err(|e| e.to_string())?;
            Ok::<_, Box<dyn std::error::Error>>(())
        })
    });
    c.bench_function("compile+plan 10k rules", |b| {
        b.iter(|| {
            let compiled = compile_str("large.toml", black_box(&text), &options)?;
            EnforcementPlan::new(&compiled.policy).map_err(|e| e.to_string())?;
            Ok::<_, Box<dyn std::error::Error>>(())
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
