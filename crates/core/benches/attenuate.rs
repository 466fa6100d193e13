//! Attenuation of two 10,000-rule policies: a parent with every pattern kind, pins and net
//! blocks, and a child that narrows it (mostly covered syntactically, some rules only by a
//! union of parent rules, i.e. by automata) with a few grants that exceed it.
//!
//! `cargo bench -p bee-core --bench attenuate`

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};

use bee_core::attenuate::attenuate;
use bee_core::compiled::{
    COMPILED_FORMAT, CompiledPolicy, ExecRule, FileId, FsGrants, NetGrants, NetRule, Origin,
    PathRule,
};
use bee_core::glob::PathPattern;
use bee_core::net::{IpNet, PortRange, Protocol};
use criterion::{Criterion, criterion_group, criterion_main};

/// Rules of a policy under construction, by section.
#[derive(Default)]
struct Rules {
    read: Vec<String>,
    write: Vec<String>,
    exec: Vec<(String, Option<u64>)>,
    net: Vec<(IpNet, u16, u16, Vec<Protocol>)>,
    unix: Vec<String>,
}

impl Rules {
    fn len(&self) -> usize {
        self.read.len() + self.write.len() + self.exec.len() + self.net.len() + self.unix.len()
    }
}

fn origin(key: &str, i: usize, text: &str) -> Origin {
    Origin {
        key: format!("{key}[{i}]"),
        line: u32::try_from(i + 1).unwrap_or(u32::MAX),
        column: 1,
        text: text.to_owned(),
    }
}

fn path_rules(key: &str, texts: &[String]) -> Vec<PathRule> {
    texts
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            PathPattern::parse(t).ok().map(|pattern| PathRule {
                pattern,
                origin: origin(key, i, t),
            })
        })
        .collect()
}

fn compile(r: &Rules) -> CompiledPolicy {
    CompiledPolicy {
        format: COMPILED_FORMAT,
        version: 1,
        name: None,
        description: None,
        source: "bench.toml".to_owned(),
        base: "/".to_owned(),
        include: Vec::new(),
        fs: FsGrants {
            read: path_rules("fs.read", &r.read),
            write: path_rules("fs.write", &r.write),
            ..FsGrants::default()
        },
        exec: r
            .exec
            .iter()
            .enumerate()
            .filter_map(|(i, (t, pin))| {
                PathPattern::parse(t).ok().map(|pattern| ExecRule {
                    pattern,
                    pin: pin.map(|ino| FileId { dev: 2049, ino }),
                    origin: origin("exec", i, t),
                })
            })
            .collect(),
        exec_deny: Vec::new(),
        net: NetGrants {
            allow: r
                .net
                .iter()
                .enumerate()
                .map(|(i, (net, first, last, protocols))| NetRule {
                    net: *net,
                    ports: PortRange {
                        first: *first,
                        last: *last,
                    },
                    protocols: protocols.clone(),
                    origin: origin("net.allow", i, &net.to_string()),
                })
                .collect(),
            hosts: Vec::new(),
            unix: path_rules("net.unix", &r.unix),
        },
    }
}

fn v4(a: u8, b: u8, c: u8, d: u8, prefix_len: u8) -> IpNet {
    IpNet::V4 {
        addr: Ipv4Addr::new(a, b, c, d),
        prefix_len,
    }
}

fn v6(group: u16, prefix_len: u8) -> IpNet {
    IpNet::V6 {
        addr: Ipv6Addr::new(0x2001, 0xdb8, group, 0, 0, 0, 0, 0),
        prefix_len,
    }
}

/// Builds (parent, child), each with 10,000 rules.
fn policies() -> (CompiledPolicy, CompiledPolicy) {
    use Protocol::{Tcp, Udp};
    let (mut p, mut c) = (Rules::default(), Rules::default());
    // fs: 1,000 groups of 4 read and 2 write rules in the parent, narrowed in the child.
    for i in 0..1000usize {
        let u = i % 40;
        p.read.push(format!("/home/u{u}/proj{i}/**"));
        p.read.push(format!("/srv/app{i}/**/*.log"));
        p.read.push(format!("/opt/pkg{i}/lib*/**"));
        p.read.push(format!("/etc/conf{i}.d/main.conf"));
        p.write.push(format!("/work/r{i}/**/.cache"));
        p.write.push(format!("/data/d{i}/*.csv"));
        match i % 50 {
            // Covered only by the union of several parent rules: decided by automata.
            0 => {
                p.read.push(format!("/mnt/m{i}"));
                p.read.push(format!("/mnt/m{i}/*/**"));
                c.read.push(format!("/mnt/m{i}/**"));
                c.write.push(format!("/data/d{i}/*.csv"));
            }
            1 => {
                p.write.push(format!("/data/d{i}/*/**"));
                c.read.push(format!("/opt/pkg{i}/lib64/**/*.so"));
                c.write.push(format!("/data/d{i}/**/*.csv"));
            }
            // Exceeds the parent.
            2 => {
                c.read.push(format!("/home/u{u}/**"));
                c.write.push(format!("/data/d{i}/*"));
            }
            _ => {
                c.read.push(format!("/home/u{u}/proj{i}/src/**/*.rs"));
                c.write.push(format!("/work/r{i}/a/**/.cache"));
            }
        }
        c.read.push(format!("/home/u{u}/proj{i}/Cargo.toml"));
        c.read.push(format!("/srv/app{i}/**/*error.log"));
        c.read.push(format!("/opt/pkg{i}/lib64/**"));
        c.read.push(format!("/etc/conf{i}.d/main.conf"));
        c.write.push(format!("/data/d{i}/x{i}.csv"));
    }
    // exec: 1,000 parent rules, half pinned.
    for i in 0..500usize {
        p.exec.push((format!("/usr/lib/tool{i}/bin/*"), None));
        p.exec
            .push((format!("/usr/bin/t{i}"), Some(1000 + i as u64)));
        c.exec.push((format!("/usr/lib/tool{i}/bin/run"), None));
        let ino = if i % 100 == 7 { 1 } else { 1000 + i as u64 };
        c.exec.push((format!("/usr/bin/t{i}"), Some(ino)));
    }
    // net: 2,000 parent blocks (v4 and v6), the child's 1,800 narrower.
    for i in 0..1000usize {
        let (a, b) = ((i / 256) as u8, (i % 256) as u8);
        p.net.push((v4(10, a, b, 0, 24), 443, 443, vec![Tcp]));
        p.net.push((v6(i as u16, 48), 8000, 8100, vec![Tcp, Udp]));
        if i < 900 {
            c.net.push((v4(10, a, b, 16, 28), 443, 443, vec![Tcp]));
            let ports = if i % 100 == 3 {
                (8000, 8200)
            } else {
                (8050, 8060)
            };
            c.net.push((v6(i as u16, 64), ports.0, ports.1, vec![Udp]));
        }
    }
    // unix sockets: fill both to 10,000 rules.
    let mut i = 0usize;
    while p.len() < 10_000 {
        p.unix.push(format!("/run/user/{i}/**"));
        i += 1;
    }
    let mut j = 0usize;
    while c.len() < 10_000 {
        c.unix.push(format!("/run/user/{j}/bus"));
        j += 1;
    }
    (compile(&p), compile(&c))
}

fn bench(cr: &mut Criterion) {
    let (parent, child) = policies();
    let report = attenuate(&child, &parent);
    eprintln!(
        "parent rules {}, child rules {}, excess grants {}",
        count(&parent),
        count(&child),
        report.excess.len()
    );
    cr.bench_function("attenuate 10k child vs 10k parent", |b| {
        b.iter(|| attenuate(black_box(&child), black_box(&parent)));
    });
    cr.bench_function("attenuate 10k parent vs itself", |b| {
        b.iter(|| attenuate(black_box(&parent), black_box(&parent)));
    });
    // `bee policy diff` of the two 10k-rule policies: the proof both ways.
    let d = bee_core::diff(&parent, &child);
    eprintln!("diff: {} added, {} removed", d.added.len(), d.removed.len());
    cr.bench_function("diff 10k vs 10k", |b| {
        b.iter(|| bee_core::diff(black_box(&parent), black_box(&child)));
    });
    // The same with 1,000 carve-outs on each side and version 2's protected paths.
    let carve = |p: &CompiledPolicy, salt: usize| {
        let mut p = p.clone();
        p.version = 2;
        for i in 0..1_000 {
            let text = format!("/home/u{}/secrets{}/**", i % 100, (i + salt) % 17);
            if let Ok(pattern) = PathPattern::parse(&text) {
                p.fs.deny.push(PathRule {
                    pattern,
                    origin: origin("fs.deny", i, &text),
                });
            }
        }
        for (i, x) in bee_core::protected::protected(2).iter().enumerate() {
            if let Ok(pattern) = PathPattern::parse(x.pattern) {
                p.fs.protect.push(PathRule {
                    pattern,
                    origin: origin("protected", i, x.pattern),
                });
            }
        }
        p
    };
    let (cparent, cchild) = (carve(&parent, 0), carve(&child, 1));
    let d = bee_core::diff(&cparent, &cchild);
    eprintln!(
        "carved diff: {} added, {} removed",
        d.added.len(),
        d.removed.len()
    );
    cr.bench_function("diff 10k vs 10k, 1k carve-outs each", |b| {
        b.iter(|| bee_core::diff(black_box(&cparent), black_box(&cchild)));
    });
    // Broad child rules that no single parent rule covers: each is decided by automata
    // over the union of every parent rule below it (1,000 or more).
    let broad = compile(&Rules {
        read: vec![
            "/home/**".to_owned(),
            "/srv/**/*.log".to_owned(),
            "/opt/*/lib64/**".to_owned(),
        ],
        write: vec!["/data/**/*.csv".to_owned()],
        ..Rules::default()
    });
    eprintln!("broad child: {}", attenuate(&broad, &parent));
    cr.bench_function("attenuate 4 broad child rules vs 10k parent", |b| {
        b.iter(|| attenuate(black_box(&broad), black_box(&parent)));
    });
    // A broad child rule covered only by a union that includes 1,000 rules below it.
    let mut wide = parent.clone();
    for (i, text) in ["/home", "/home/*/**"].into_iter().enumerate() {
        if let Ok(pattern) = PathPattern::parse(text) {
            wide.fs.read.push(PathRule {
                pattern,
                origin: origin("fs.read", 10_000 + i, text),
            });
        }
    }
    let home = compile(&Rules {
        read: vec!["/home/**".to_owned()],
        ..Rules::default()
    });
    eprintln!(
        "covered broad child: {} excess",
        attenuate(&home, &wide).excess.len()
    );
    cr.bench_function(
        "attenuate a broad child rule covered by a 1k-rule union",
        |b| {
            b.iter(|| attenuate(black_box(&home), black_box(&wide)));
        },
    );
}

fn count(p: &CompiledPolicy) -> usize {
    p.fs.read.len() + p.fs.write.len() + p.exec.len() + p.net.allow.len() + p.net.unix.len()
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
