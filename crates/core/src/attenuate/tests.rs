//! Unit tests: one per pattern kind and per edge case of the inclusion check.

use super::*;
use crate::compiled::{ExecRule, FsGrants, HostRule, NetGrants, NetRule};
use crate::host::HostPattern;
use crate::net::PortRange;

fn pattern(s: &str) -> PathPattern {
    match PathPattern::parse(s) {
        Ok(p) => p,
        Err(e) => unreachable!("{s}: {e}"),
    }
}

fn origin(key: &str, i: usize, text: &str) -> Origin {
    Origin {
        key: format!("{key}[{i}]"),
        line: u32::try_from(i).unwrap_or(0) + 1,
        column: 1,
        text: text.to_owned(),
    }
}

fn path_rules(key: &str, texts: &[&str]) -> Vec<PathRule> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| PathRule {
            pattern: pattern(t),
            origin: origin(key, i, t),
        })
        .collect()
}

/// A policy under construction.
#[derive(Default)]
struct P {
    read: Vec<&'static str>,
    write: Vec<&'static str>,
    exec: Vec<(&'static str, Option<(u64, u64)>)>,
    net: Vec<(&'static str, &'static str, Vec<Protocol>)>,
    hosts: Vec<(&'static str, &'static str, Vec<Protocol>)>,
    unix: Vec<&'static str>,
}

impl P {
    fn read(mut self, r: &[&'static str]) -> Self {
        self.read.extend_from_slice(r);
        self
    }
    fn write(mut self, r: &[&'static str]) -> Self {
        self.write.extend_from_slice(r);
        self
    }
    fn exec(mut self, p: &'static str) -> Self {
        self.exec.push((p, None));
        self
    }
    fn pin(mut self, p: &'static str, dev: u64, ino: u64) -> Self {
        self.exec.push((p, Some((dev, ino))));
        self
    }
    fn net(mut self, net: &'static str, ports: &'static str, protocols: &[Protocol]) -> Self {
        self.net.push((net, ports, protocols.to_vec()));
        self
    }
    fn host(mut self, host: &'static str, ports: &'static str, protocols: &[Protocol]) -> Self {
        self.hosts.push((host, ports, protocols.to_vec()));
        self
    }
    fn unix(mut self, r: &[&'static str]) -> Self {
        self.unix.extend_from_slice(r);
        self
    }
    fn build(self) -> CompiledPolicy {
        CompiledPolicy {
            format: crate::compiled::COMPILED_FORMAT,
            version: 1,
            name: None,
            description: None,
            source: "test.toml".to_owned(),
            base: "/".to_owned(),
            include: Vec::new(),
            fs: FsGrants {
                read: path_rules("fs.read", &self.read),
                write: path_rules("fs.write", &self.write),
                ..FsGrants::default()
            },
            exec: self
                .exec
                .iter()
                .enumerate()
                .map(|(i, (p, pin))| ExecRule {
                    pattern: pattern(p),
                    pin: pin.map(|(dev, ino)| FileId { dev, ino }),
                    origin: origin("exec", i, p),
                })
                .collect(),
            exec_deny: Vec::new(),
            net: NetGrants {
                allow: self
                    .net
                    .iter()
                    .enumerate()
                    .map(|(i, (n, ports, protocols))| NetRule {
                        net: match n.parse() {
                            Ok(n) => n,
                            Err(e) => unreachable!("{n}: {e}"),
                        },
                        ports: match ports.parse::<PortRange>() {
                            Ok(p) => p,
                            Err(e) => unreachable!("{ports}: {e}"),
                        },
                        protocols: protocols.clone(),
                        origin: origin("net.allow", i, n),
                    })
                    .collect(),
                hosts: self
                    .hosts
                    .iter()
                    .enumerate()
                    .map(|(i, (h, ports, protocols))| HostRule {
                        host: match HostPattern::parse(h) {
                            Ok(h) => h,
                            Err(e) => unreachable!("{h}: {e}"),
                        },
                        ports: match ports.parse::<PortRange>() {
                            Ok(p) => p,
                            Err(e) => unreachable!("{ports}: {e}"),
                        },
                        protocols: protocols.clone(),
                        origin: origin("net.allow", i, h),
                    })
                    .collect(),
                unix: path_rules("net.unix", &self.unix),
            },
        }
    }
}

use Protocol::{Tcp, Udp};

fn reads(child: &[&'static str], parent: &[&'static str]) -> AttenuationReport {
    attenuate(
        &P::default().read(child).build(),
        &P::default().read(parent).build(),
    )
}

/// The single path witness of a report (and that the child matches it and no parent does).
fn witness(r: &AttenuationReport, child: &str, parent: &[&str]) -> String {
    assert_eq!(r.excess.len(), 1, "{r}");
    let Some(Excess {
        witness: Witness::Path { path },
        ..
    }) = r.excess.first()
    else {
        unreachable!("expected a path witness: {r:?}")
    };
    assert!(paths::is_valid_path(path), "{path}");
    assert!(pattern(child).matches(path), "{child} !~ {path}");
    assert!(!parent.iter().any(|p| pattern(p).matches(path)), "{path}");
    path.clone()
}

#[test]
fn identical_policies_are_subsets() {
    let all = [
        "/etc/hosts",
        "/usr/**",
        "/src/**/*.rs",
        "/w/**/.git",
        "/a/*/b",
        "/usr/lib/python3.*/**",
    ];
    assert!(reads(&all, &all).is_subset());
}

#[test]
fn subtree_includes_its_root() {
    assert!(reads(&["/a"], &["/a/**"]).is_subset());
    let r = reads(&["/a/**"], &["/a/*/**"]);
    assert_eq!(witness(&r, "/a/**", &["/a/*/**"]), "/a");
}

#[test]
fn star_segments_cover_the_subtree_below_but_not_its_root() {
    let parent = ["/a/*", "/a/*/**"];
    let r = reads(&["/a/**"], &parent);
    assert_eq!(witness(&r, "/a/**", &parent), "/a");
    assert!(reads(&["/a/**"], &["/a/*", "/a/*/**", "/a"]).is_subset());
    assert!(reads(&["/a/**"], &["/a/*/**", "/a"]).is_subset());
}

#[test]
fn root_subtree() {
    assert!(reads(&["/**"], &["/**"]).is_subset());
    assert!(reads(&["/etc/**", "/**/*.rs", "/*"], &["/**"]).is_subset());
    let r = reads(&["/**"], &["/*/**"]);
    assert_eq!(witness(&r, "/**", &["/*/**"]), "/");
}

#[test]
fn postfix_needs_a_segment_below_its_root() {
    assert!(reads(&["/src/**/*.rs"], &["/src/*/**"]).is_subset());
    assert!(reads(&["/src/a/**/*.rs"], &["/src/**/*s"]).is_subset());
    assert!(reads(&["/src/x.rs", "/src/*/y.rs"], &["/src/**/*.rs"]).is_subset());
    let r = reads(&["/src/**/*.rs"], &["/src/*.rs"]);
    let w = witness(&r, "/src/**/*.rs", &["/src/*.rs"]);
    assert_eq!(w.matches('/').count(), 3, "{w}");
    // The root itself is not below the root.
    assert!(reads(&["/src/**/*.rs"], &["/src/*/**", "/src/*.rs"]).is_subset());
    witness(
        &reads(&["/src"], &["/src/**/*.rs"]),
        "/src",
        &["/src/**/*.rs"],
    );
}

#[test]
fn segment_kind() {
    assert!(reads(&["/w/a/**/.git"], &["/w/**/.git"]).is_subset());
    assert!(reads(&["/w/**/.git"], &["/w/**/*git"]).is_subset());
    let r = reads(&["/w/**/.git"], &["/w/*/.git"]);
    assert_eq!(witness(&r, "/w/**/.git", &["/w/*/.git"]), "/w/.git");
    // The name `.git` ends with the suffix `.git`.
    assert!(reads(&["/w/**/.git"], &["/w/**/*.git"]).is_subset());
    let r = reads(&["/w/**/.git"], &["/w/**/*x.git"]);
    assert_eq!(witness(&r, "/w/**/.git", &["/w/**/*x.git"]), "/w/.git");
}

#[test]
fn bounded_star_kind() {
    assert!(reads(&["/a/*b"], &["/a/*"]).is_subset());
    assert!(reads(&["/home/*/src/**"], &["/home/**"]).is_subset());
    assert!(reads(&["/a/x*y/**"], &["/a/x*/**"]).is_subset());
    let r = reads(&["/a/*"], &["/a/*b"]);
    witness(&r, "/a/*", &["/a/*b"]);
    // `*` matches one non-empty segment, never `.` or `..`, so `/a/*` is covered by names
    // starting with a dot plus names starting with anything else.
    let r = reads(&["/a/*/c"], &["/a/.*/c"]);
    witness(&r, "/a/*/c", &["/a/.*/c"]);
}

#[test]
fn a_star_needs_at_least_one_byte() {
    // `/a/*b` never matches `/a/b`'s sibling `/a/` (empty segment), but does match `/a/b`.
    assert!(reads(&["/a/b"], &["/a/*b"]).is_subset());
    let r = reads(&["/a/*b"], &["/a/?b".replace('?', "x").leak()]);
    witness(&r, "/a/*b", &["/a/xb"]);
}

#[test]
fn literals_are_escaped() {
    assert!(reads(&["/a+b/c(d)"], &["/a+b/**"]).is_subset());
    witness(
        &reads(&["/a+b/**"], &["/a+b/x.*"]),
        "/a+b/**",
        &["/a+b/x.*"],
    );
    witness(&reads(&["/ab"], &["/a.*"]), "/ab", &["/a.*"]);
}

#[test]
fn exact_child_gets_itself_as_witness() {
    let r = reads(&["/home/u/.ssh/id_rsa"], &["/home/u/src/**"]);
    assert_eq!(
        witness(&r, "/home/u/.ssh/id_rsa", &["/home/u/src/**"]),
        "/home/u/.ssh/id_rsa"
    );
}

#[test]
fn message_names_both_rules() {
    let r = reads(&["/home/a/src/**", "/home/**"], &["/home/a/src/**"]);
    assert_eq!(r.excess.len(), 1);
    assert_eq!(
        r.to_string(),
        "fs.read[1] (line 2) `/home/**` grants read of `/home`, which the parent does not \
         grant; nearest parent rule fs.read[0] (line 1) `/home/a/src/**`\n"
    );
    let r = reads(&["/opt/x"], &["/home/**"]);
    assert!(
        r.to_string().ends_with("the parent has no rule near it\n"),
        "{r}"
    );
}

#[test]
fn every_excess_grant_is_listed() {
    let child = P::default()
        .read(&["/a/**", "/b", "/c/**/*.rs"])
        .write(&["/d/**"])
        .exec("/usr/bin/*")
        .net("10.0.0.0/8", "443", &[Tcp])
        .unix(&["/run/x.sock"])
        .build();
    let r = attenuate(&child, &P::default().build());
    let caps: Vec<Capability> = r.excess.iter().map(|e| e.capability).collect();
    assert_eq!(
        caps,
        [
            Capability::FsRead,
            Capability::FsRead,
            Capability::FsRead,
            Capability::FsRead,
            Capability::FsWrite,
            Capability::Exec,
            Capability::NetIp,
            Capability::NetUnix,
        ]
    );
    assert!(
        matches!(r.clone().into_result(), Err(AttenuationError { excess }) if excess.len() == 8)
    );
    let json = serde_json::to_string(&r).unwrap_or_default();
    assert!(json.contains(r#""capability":"net_ip""#), "{json}");
    assert!(json.contains(r#""kind":"peer""#), "{json}");
}

#[test]
fn write_implies_read() {
    let parent = P::default().write(&["/x/**"]).build();
    assert!(attenuate(&P::default().read(&["/x/y"]).build(), &parent).is_subset());
    let parent = P::default().read(&["/tmp/**"]).build();
    let r = attenuate(&P::default().write(&["/tmp/**"]).build(), &parent);
    assert_eq!(r.excess.len(), 1);
    assert_eq!(r.excess[0].capability, Capability::FsWrite);
    // A child write the parent does not even read is excess twice.
    let r = attenuate(&P::default().write(&["/etc/x"]).build(), &parent);
    assert_eq!(r.excess.len(), 2);
}

#[test]
fn pins() {
    let git = "/usr/bin/git";
    let child = P::default().pin(git, 1, 2).build();
    assert!(attenuate(&child, &P::default().pin(git, 1, 2).build()).is_subset());
    assert!(attenuate(&child, &P::default().exec("/usr/bin/*").build()).is_subset());
    assert!(attenuate(&child, &P::default().exec("/usr/**").build()).is_subset());
    let r = attenuate(&child, &P::default().pin(git, 1, 3).build());
    assert_eq!(r.excess.len(), 1);
    assert!(matches!(&r.excess[0].witness, Witness::PinnedFile { file, .. } if file.ino == 2));
    assert!(
        r.to_string()
            .contains("nearest parent rule exec[0] (line 1) `!/usr/bin/git (dev 1 inode 3)`"),
        "{r}"
    );
    // An unpinned child admits any file at the path; a parent pin admits one.
    let r = attenuate(
        &P::default().exec(git).build(),
        &P::default().pin(git, 1, 3).build(),
    );
    assert!(
        r.to_string()
            .contains("grants executing a file other than dev 1 inode 3 at `/usr/bin/git`"),
        "{r}"
    );
    let r = attenuate(
        &P::default().exec("/usr/bin/*").build(),
        &P::default().pin(git, 1, 3).exec("/usr/bin/g*").build(),
    );
    assert_eq!(r.excess.len(), 1, "{r}");
}

fn net_excess(child: P, parent: P) -> Vec<String> {
    attenuate(&child.build(), &parent.build())
        .excess
        .iter()
        .map(|e| e.witness.to_string())
        .collect()
}

#[test]
fn port_ranges_split_across_parent_rules() {
    let child = || P::default().net("10.0.0.0/8", "1000-2000", &[Tcp]);
    let both =
        P::default()
            .net("10.0.0.0/8", "1000-1499", &[Tcp])
            .net("0.0.0.0/0", "1500-2000", &[Tcp]);
    assert!(net_excess(child(), both).is_empty());
    let gap =
        P::default()
            .net("10.0.0.0/8", "1000-1499", &[Tcp])
            .net("10.0.0.0/8", "1501-2000", &[Tcp]);
    assert_eq!(net_excess(child(), gap), ["`tcp 10.0.0.0:1500`"]);
}

#[test]
fn protocols_split_across_parent_rules() {
    let child = || P::default().net("192.168.1.0/24", "53", &[Tcp, Udp]);
    let both =
        P::default()
            .net("192.168.0.0/16", "53", &[Udp])
            .net("192.168.1.0/24", "0-65535", &[Tcp]);
    assert!(net_excess(child(), both).is_empty());
    let tcp_only = P::default().net("192.168.0.0/16", "53", &[Tcp]);
    assert_eq!(net_excess(child(), tcp_only), ["`udp 192.168.1.0:53`"]);
}

#[test]
fn address_blocks_split_across_parent_rules() {
    let child = || P::default().net("10.0.0.0/8", "443", &[Tcp]);
    let halves = P::default()
        .net("10.0.0.0/9", "443", &[Tcp])
        .net("10.128.0.0/10", "443", &[Tcp])
        .net("10.192.0.0/10", "400-500", &[Tcp]);
    assert!(net_excess(child(), halves).is_empty());
    let hole = P::default()
        .net("10.0.0.0/9", "443", &[Tcp])
        .net("10.128.0.0/10", "443", &[Tcp])
        .net("10.192.0.0/11", "443", &[Tcp]);
    assert_eq!(net_excess(child(), hole), ["`tcp 10.224.0.0:443`"]);
}

#[test]
fn v4_and_v6_share_one_space() {
    let v4 = || P::default().net("10.1.2.3", "443", &[Tcp]);
    assert!(net_excess(v4(), P::default().net("::/0", "443", &[Tcp])).is_empty());
    assert!(net_excess(v4(), P::default().net("::ffff:10.0.0.0/104", "443", &[Tcp])).is_empty());
    assert!(net_excess(v4(), P::default().net("::fffe:0:0/95", "443", &[Tcp])).is_empty());
    let r = net_excess(
        P::default().net("::/0", "443", &[Tcp]),
        P::default().net("0.0.0.0/0", "443", &[Tcp]),
    );
    assert_eq!(r, ["`tcp [::]:443`"]);
    let r = net_excess(
        P::default().net("::ffff:0:0/96", "443", &[Tcp]),
        P::default().net("0.0.0.0/1", "443", &[Tcp]),
    );
    assert_eq!(r, ["`tcp 128.0.0.0:443`"]);
}

#[test]
fn net_message_names_the_smallest_containing_parent_block() {
    let r = attenuate(
        &P::default().net("10.1.2.3", "443", &[Tcp]).build(),
        &P::default()
            .net("10.0.0.0/8", "80", &[Tcp])
            .net("10.1.0.0/16", "22", &[Udp])
            .build(),
    );
    assert_eq!(
        r.to_string(),
        "net.allow[0] (line 1) `tcp 10.1.2.3/32 port 443` grants connecting to \
         `tcp 10.1.2.3:443`, which the parent does not grant; nearest parent rule \
         net.allow[0] (line 1) `tcp 10.0.0.0/8 port 80`\n"
    );
}

#[test]
fn unix_sockets() {
    let child = P::default()
        .unix(&["/run/user/1/bus", "/tmp/**/*.sock"])
        .build();
    let parent = P::default().unix(&["/run/user/*/bus", "/tmp/**"]).build();
    assert!(attenuate(&child, &parent).is_subset());
    let r = attenuate(&parent, &child);
    assert_eq!(r.excess.len(), 2, "{r}");
    assert!(r.excess.iter().all(|e| e.capability == Capability::NetUnix));
}

#[test]
fn malformed_rules_never_panic_and_fail_closed() {
    let mut child = P::default().build();
    let mut parent = P::default().read(&["/**"]).build();
    let bad = [
        PathPattern::BoundedStar {
            segments: vec![],
            subtree: true,
        },
        PathPattern::BoundedStar {
            segments: vec![String::new()],
            subtree: false,
        },
        PathPattern::Exact {
            path: "relative".to_owned(),
        },
        PathPattern::Subtree {
            root: "/a/../b".to_owned(),
        },
        PathPattern::Postfix {
            root: "/a".to_owned(),
            suffix: "x/y".to_owned(),
        },
    ];
    for (i, p) in bad.iter().enumerate() {
        let rule = PathRule {
            pattern: p.clone(),
            origin: origin("fs.read", i, "?"),
        };
        child.fs.read.push(rule.clone());
        parent.fs.read.push(rule);
    }
    let r = attenuate(&child, &parent);
    assert_eq!(r.excess.len(), bad.len(), "{r}");
    assert!(
        r.excess
            .iter()
            .all(|e| matches!(e.witness, Witness::Unproven { .. }))
    );
    // Malformed parent rules grant nothing, well-formed ones still count.
    let r = attenuate(&P::default().read(&["/a/b"]).build(), &parent);
    assert!(r.is_subset());
    let mut wide = P::default().net("10.0.0.0/8", "1", &[Tcp]).build();
    wide.net.allow[0].net = crate::net::IpNet::V4 {
        addr: std::net::Ipv4Addr::new(10, 0, 0, 1),
        prefix_len: 40,
    };
    let r = attenuate(&wide, &wide);
    assert_eq!(r.excess.len(), 1);
    wide.net.allow[0].net = crate::net::IpNet::V4 {
        addr: std::net::Ipv4Addr::new(10, 0, 0, 1),
        prefix_len: 8,
    };
    assert_eq!(attenuate(&wide, &wide).excess.len(), 1);
    let mut none = P::default().net("10.0.0.0/8", "1", &[]).build();
    assert_eq!(attenuate(&none, &none).excess.len(), 1);
    none.net.allow[0].ports = PortRange { first: 9, last: 1 };
    assert_eq!(attenuate(&none, &none).excess.len(), 1);
}

#[test]
fn non_ascii_literals() {
    let r = reads(&["/é/**"], &["/é/*/**"]);
    assert_eq!(witness(&r, "/é/**", &["/é/*/**"]), "/é");
    let r = reads(&["/*é"], &["/é"]);
    assert_eq!(witness(&r, "/*é", &["/é"]), "/xé");
    assert!(reads(&["/données/a.txt"], &["/donn*/**"]).is_subset());
}

#[test]
fn the_representative_byte_avoids_literals() {
    // `x` is a literal here, so the witness uses another byte.
    let r = reads(&["/*"], &["/x", "/.*"]);
    let w = witness(&r, "/*", &["/x", "/.*"]);
    assert_eq!(w, "/y");
}

#[test]
fn host_wildcard_child_is_not_within_an_exact_parent() {
    // The issue's example: `*.example.com` under a parent granting `api.example.com` only.
    let r = attenuate(
        &P::default().host("*.example.com", "443", &[Tcp]).build(),
        &P::default().host("api.example.com", "443", &[Tcp]).build(),
    );
    assert_eq!(r.excess.len(), 1, "{r}");
    let e = &r.excess[0];
    assert_eq!(e.capability, Capability::NetHost);
    let Witness::Host {
        protocol,
        name,
        port,
    } = &e.witness
    else {
        unreachable!("{:?}", e.witness)
    };
    assert_eq!((*protocol, *port), (Tcp, 443));
    assert!(
        name.ends_with(".example.com") && name != "api.example.com",
        "{name}"
    );
    assert!(HostPattern::parse("*.example.com").is_ok_and(|w| w.matches(name)));
    assert_eq!(
        r.to_string(),
        "net.allow[0] (line 1) `tcp *.example.com port 443` grants resolving and connecting to \
         `tcp x.example.com:443`, which the parent does not grant; nearest parent rule \
         net.allow[0] (line 1) `tcp api.example.com port 443`\n"
    );
    // The witness avoids the parent's exact names.
    let r = attenuate(
        &P::default().host("*.example.com", "443", &[Tcp]).build(),
        &P::default()
            .host("x.example.com", "443", &[Tcp])
            .host("a.example.com", "443", &[Tcp])
            .build(),
    );
    assert_eq!(net_excess_of(&r), ["`tcp b.example.com:443`"]);
}

fn net_excess_of(r: &AttenuationReport) -> Vec<String> {
    r.excess.iter().map(|e| e.witness.to_string()).collect()
}

#[test]
fn host_coverage() {
    let exact = || P::default().host("static.crates.io", "443", &[Tcp]);
    // Exact by exact, exact by a wildcard one label above, wildcard by the same wildcard.
    assert!(
        net_excess(
            exact(),
            P::default().host("static.crates.io", "443", &[Tcp])
        )
        .is_empty()
    );
    assert!(
        net_excess(
            exact(),
            P::default().host("*.crates.io", "0-65535", &[Tcp, Udp])
        )
        .is_empty()
    );
    assert!(
        net_excess(
            P::default().host("*.crates.io", "443", &[Tcp]),
            P::default().host("*.crates.io", "443", &[Tcp])
        )
        .is_empty()
    );
    // A wildcard covers one label only, and never its own suffix.
    assert_eq!(
        net_excess(
            P::default().host("a.static.crates.io", "443", &[Tcp]),
            P::default().host("*.crates.io", "443", &[Tcp])
        ),
        ["`tcp a.static.crates.io:443`"]
    );
    assert_eq!(
        net_excess(
            P::default().host("crates.io", "443", &[Tcp]),
            P::default().host("*.crates.io", "443", &[Tcp])
        ),
        ["`tcp crates.io:443`"]
    );
    // A narrower wildcard is not inside a wider one: names add exactly one label.
    assert_eq!(
        net_excess(
            P::default().host("*.static.crates.io", "443", &[Tcp]),
            P::default().host("*.crates.io", "443", &[Tcp])
        ),
        ["`tcp x.static.crates.io:443`"]
    );
    // Ports and protocols split across parent rules, an exact one and a wildcard.
    let split = || {
        P::default().host("static.crates.io", "1-442", &[Tcp]).host(
            "*.crates.io",
            "443-1000",
            &[Tcp, Udp],
        )
    };
    assert!(
        net_excess(
            P::default().host("static.crates.io", "1-1000", &[Tcp]),
            split()
        )
        .is_empty()
    );
    assert_eq!(
        net_excess(
            P::default().host("static.crates.io", "1-1000", &[Tcp, Udp]),
            split()
        ),
        ["`udp static.crates.io:1`"]
    );
    assert_eq!(
        net_excess(P::default().host("*.crates.io", "1-1000", &[Tcp]), split()),
        ["`tcp x.crates.io:1`"]
    );
}

#[test]
fn address_grants_never_cover_name_grants() {
    let r = attenuate(
        &P::default().host("crates.io", "443", &[Tcp]).build(),
        &P::default()
            .net("0.0.0.0/0", "0-65535", &[Tcp, Udp])
            .net("::/0", "0-65535", &[Tcp, Udp])
            .build(),
    );
    assert_eq!(net_excess_of(&r), ["`tcp crates.io:443`"]);
    assert!(r.excess[0].nearest_parent.is_none());
    // Nor the other way round.
    let r = attenuate(
        &P::default().net("10.0.0.1", "443", &[Tcp]).build(),
        &P::default()
            .host("*.example.com", "0-65535", &[Tcp, Udp])
            .build(),
    );
    assert_eq!(r.excess.len(), 1);
    assert_eq!(r.excess[0].capability, Capability::NetIp);
}

#[test]
fn malformed_host_rules_fail_closed() {
    let rule = |host: HostPattern, first: u16, last: u16, protocols: Vec<Protocol>| HostRule {
        host,
        ports: PortRange { first, last },
        protocols,
        origin: origin("net.allow", 0, "x"),
    };
    let good = HostPattern::Exact("crates.io".into());
    let bad = [
        rule(HostPattern::Exact("Crates.io".into()), 443, 443, vec![Tcp]),
        rule(HostPattern::Exact("a..b".into()), 443, 443, vec![Tcp]),
        rule(HostPattern::Wildcard("com".into()), 443, 443, vec![Tcp]),
        rule(HostPattern::Exact(String::new()), 443, 443, vec![Tcp]),
        rule(good.clone(), 444, 443, vec![Tcp]),
        rule(good.clone(), 443, 443, vec![]),
    ];
    for b in &bad {
        let mut child = P::default().build();
        child.net.hosts.push(b.clone());
        let mut parent = P::default().build();
        parent.net.hosts.push(rule(
            HostPattern::Wildcard("crates.io".into()),
            0,
            65535,
            vec![Tcp, Udp],
        ));
        parent
            .net
            .hosts
            .push(rule(good.clone(), 0, 65535, vec![Tcp, Udp]));
        let r = attenuate(&child, &parent);
        assert!(
            matches!(
                r.excess.as_slice(),
                [Excess {
                    witness: Witness::Unproven { .. },
                    ..
                }]
            ),
            "{b:?}: {r}"
        );
        // A malformed parent rule grants nothing.
        let mut parent = P::default().build();
        parent.net.hosts.push(b.clone());
        let mut child = P::default().build();
        child.net.hosts.push(rule(
            HostPattern::Exact("crates.io".into()),
            443,
            443,
            vec![Tcp],
        ));
        let r = attenuate(&child, &parent);
        assert_eq!(r.excess.len(), 1, "{b:?}");
    }
}

#[test]
fn an_exec_subtree_is_shown_by_a_file_in_it_not_its_directory() {
    let r = attenuate(
        &P::default().exec("/usr/bin/**").build(),
        &P::default().build(),
    );
    assert_eq!(witness(&r, "/usr/bin/**", &[]), "/usr/bin/x");
    // When the parent grants that file, the directory is still a counterexample.
    let r = attenuate(
        &P::default().exec("/usr/bin/**").build(),
        &P::default().exec("/usr/bin/*").build(),
    );
    assert_eq!(witness(&r, "/usr/bin/**", &["/usr/bin/*"]), "/usr/bin");
    let r = attenuate(
        &P::default().exec("/opt/*/lib/**").build(),
        &P::default().build(),
    );
    assert_eq!(witness(&r, "/opt/*/lib/**", &[]), "/opt/x/lib/x");
}
