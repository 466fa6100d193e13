//! Property tests: the attenuation check agrees with brute-force enumeration over a small
//! universe of valid paths (and of peers), for random policies using every pattern kind.

use std::net::Ipv4Addr;

use bee_core::attenuate::{AttenuationReport, Witness, attenuate, diff};
use bee_core::compiled::{
    COMPILED_FORMAT, CompiledPolicy, ExecRule, FileId, FsGrants, HostRule, NetGrants, NetRule,
    Origin, PathRule,
};
use bee_core::glob::PathPattern;
use bee_core::host::HostPattern;
use bee_core::net::{IpNet, PortRange, Protocol};
use proptest::prelude::*;

const LITERALS: [&str; 4] = ["a", "b", "ab", ".x"];
const STARS: [&str; 3] = ["*", "a*", "*b"];
/// Segments of the universe: the pattern literals, the checker's representative byte `y`
/// (`x` is a literal), and names that end with the suffixes patterns use.
const UNIVERSE_SEGMENTS: [&str; 7] = ["a", "b", "ab", ".x", "y", "yb", "a.x"];

fn literal() -> impl Strategy<Value = &'static str> {
    prop::sample::select(LITERALS.to_vec())
}

fn any_segment() -> impl Strategy<Value = &'static str> {
    prop::sample::select([LITERALS.as_slice(), STARS.as_slice()].concat())
}

fn dir(segs: &[&str]) -> String {
    segs.iter().map(|s| format!("/{s}")).collect()
}

/// Pattern text of one of the six kinds, at most 4 segments deep.
fn pattern_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            prop::collection::vec(literal(), 0..=1),
            prop::collection::vec(literal(), 1..=2),
            any::<bool>()
        )
            .prop_map(|(root, tail, subtree)| format!(
                "{}/**{}{}",
                dir(&root),
                dir(&tail),
                if subtree { "/**" } else { "" }
            )),
        prop::collection::vec(literal(), 0..=4).prop_map(|s| {
            if s.is_empty() {
                "/".to_owned()
            } else {
                dir(&s)
            }
        }),
        prop::collection::vec(literal(), 0..=3).prop_map(|s| format!("{}/**", dir(&s))),
        (
            prop::collection::vec(literal(), 0..=3),
            prop::sample::select(vec!["b", ".x", "x", "ab"])
        )
            .prop_map(|(s, suffix)| format!("{}/**/*{suffix}", dir(&s))),
        (prop::collection::vec(literal(), 0..=3), literal())
            .prop_map(|(s, name)| format!("{}/**/{name}", dir(&s))),
        (
            prop::collection::vec(any_segment(), 0..=3),
            prop::sample::select(STARS.to_vec()),
            0..=3usize,
            any::<bool>()
        )
            .prop_map(|(mut s, star, at, subtree)| {
                let at = at.min(s.len());
                s.insert(at, star);
                format!("{}{}", dir(&s), if subtree { "/**" } else { "" })
            }),
    ]
}

fn origin(key: &str, i: usize) -> Origin {
    Origin {
        key: format!("{key}[{i}]"),
        line: u32::try_from(i + 1).unwrap_or(u32::MAX),
        column: 1,
        text: String::new(),
    }
}

fn parse(text: &str) -> PathPattern {
    match PathPattern::parse(text) {
        Ok(p) => p,
        Err(e) => unreachable!("generated `{text}`: {e}"),
    }
}

fn policy(read: &[String], allow: Vec<NetRule>) -> CompiledPolicy {
    CompiledPolicy {
        format: COMPILED_FORMAT,
        version: 1,
        name: None,
        description: None,
        source: String::new(),
        base: "/".to_owned(),
        include: Vec::new(),
        fs: FsGrants {
            read: read
                .iter()
                .enumerate()
                .map(|(i, t)| PathRule {
                    pattern: parse(t),
                    origin: origin("fs.read", i),
                })
                .collect(),
            write: Vec::new(),
            ..FsGrants::default()
        },
        exec: Vec::new(),
        exec_deny: Vec::new(),
        net: NetGrants {
            allow,
            hosts: Vec::new(),
            unix: Vec::new(),
        },
    }
}

/// Every valid path of depth at most 5 over [`UNIVERSE_SEGMENTS`].
fn universe() -> Vec<String> {
    let mut all = vec!["/".to_owned()];
    let mut layer = vec![String::new()];
    for _ in 0..5 {
        layer = layer
            .iter()
            .flat_map(|p| UNIVERSE_SEGMENTS.iter().map(move |s| format!("{p}/{s}")))
            .collect();
        all.extend(layer.iter().cloned());
    }
    all
}

fn is_valid_path(p: &str) -> bool {
    p == "/"
        || p.strip_prefix('/').is_some_and(|rest| {
            rest.split('/')
                .all(|s| !s.is_empty() && s != "." && s != ".." && !s.contains('\0'))
        })
}

fn excess_of<'r>(r: &'r AttenuationReport, key: &str) -> Option<&'r Witness> {
    r.excess
        .iter()
        .find(|e| e.child.origin.key == key)
        .map(|e| &e.witness)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn path_inclusion_matches_brute_force(
        child in prop::collection::vec(pattern_text(), 1..=3),
        parent in prop::collection::vec(pattern_text(), 0..=4),
    ) {
        let report = attenuate(&policy(&child, vec![]), &policy(&parent, vec![]));
        let parents: Vec<PathPattern> = parent.iter().map(|t| parse(t)).collect();
        let granted = |path: &str| parents.iter().any(|p| p.matches(path));
        let paths = universe();
        for (i, text) in child.iter().enumerate() {
            let c = parse(text);
            let key = format!("fs.read[{i}]");
            match excess_of(&report, &key) {
                // (2) a counterexample is a valid path the child grants and the parent not.
                Some(Witness::Path { path }) => {
                    prop_assert!(is_valid_path(path), "{path:?} is not a valid path");
                    prop_assert!(c.matches(path), "{text} does not match {path}");
                    prop_assert!(!granted(path), "{parent:?} grants {path}");
                }
                Some(other) => prop_assert!(false, "unexpected witness {other:?}"),
                // (1)/(3) proven covered: brute force finds nothing in child \ parent.
                None => {
                    let missed = paths.iter().find(|p| c.matches(p) && !granted(p));
                    prop_assert!(missed.is_none(), "{text} ⊄ {parent:?}: {missed:?}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// `bee policy diff`: each side's differences are exactly what brute force finds in one
    /// policy and not the other — nothing missed, and every counterexample real.
    #[test]
    fn policy_diff_matches_brute_force(
        old in prop::collection::vec(pattern_text(), 0..=3),
        new in prop::collection::vec(pattern_text(), 0..=3),
    ) {
        let d = diff(&policy(&old, vec![]), &policy(&new, vec![]));
        let olds: Vec<PathPattern> = old.iter().map(|t| parse(t)).collect();
        let news: Vec<PathPattern> = new.iter().map(|t| parse(t)).collect();
        let paths = universe();
        for (side, from, other, theirs) in [
            ("added", &news, &olds, &d.added),
            ("removed", &olds, &news, &d.removed),
        ] {
            let grants = |ps: &[PathPattern], path: &str| ps.iter().any(|p| p.matches(path));
            for (i, rule) in from.iter().enumerate() {
                let key = format!("fs.read[{i}]");
                match theirs.iter().find(|e| e.child.origin.key == key).map(|e| &e.witness) {
                    Some(Witness::Path { path }) => {
                        prop_assert!(rule.matches(path), "{side}: {rule} does not match {path}");
                        prop_assert!(!grants(other, path), "{side}: {path} is granted by both");
                    }
                    Some(w) => prop_assert!(false, "{side}: unexpected witness {w:?}"),
                    None => {
                        let missed = paths.iter().find(|p| rule.matches(p) && !grants(other, p));
                        prop_assert!(missed.is_none(), "{side}: {rule} differs at {missed:?}");
                    }
                }
            }
        }
        // Identical exactly when brute force sees the same grants on both sides.
        let same = paths.iter().all(|p| grants_any(&olds, p) == grants_any(&news, p));
        if !same {
            prop_assert!(!d.is_empty(), "{old:?} and {new:?} differ, the diff is empty");
        }
        if d.is_empty() {
            prop_assert!(same);
        }
    }
}

fn grants_any(ps: &[PathPattern], path: &str) -> bool {
    ps.iter().any(|p| p.matches(path))
}

/// A rule over the small universe 10.0.0.0/29 × ports 0..=7 × {tcp, udp}.
fn net_rule() -> impl Strategy<Value = (u8, u8, u16, u16, u8)> {
    (29..=32u8, 0..8u8, 0..8u16, 0..8u16, 1..=3u8)
}

fn to_rule((len, host, a, b, protos): (u8, u8, u16, u16, u8), i: usize) -> NetRule {
    let size = 1u8 << (32 - len);
    let base = host - host % size;
    let mut protocols = Vec::new();
    if protos & 1 != 0 {
        protocols.push(Protocol::Tcp);
    }
    if protos & 2 != 0 {
        protocols.push(Protocol::Udp);
    }
    NetRule {
        net: IpNet::V4 {
            addr: Ipv4Addr::new(10, 0, 0, base),
            prefix_len: len,
        },
        ports: PortRange {
            first: a.min(b),
            last: a.max(b),
        },
        protocols,
        origin: origin("net.allow", i),
    }
}

fn net_grants(r: &NetRule, p: Protocol, host: u8, port: u16) -> bool {
    let (lo, hi) = r.net.range();
    let addr = u128::from(Ipv4Addr::new(10, 0, 0, host).to_ipv6_mapped());
    r.protocols.contains(&p)
        && (lo..=hi).contains(&addr)
        && (r.ports.first..=r.ports.last).contains(&port)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn net_inclusion_matches_brute_force(
        child in prop::collection::vec(net_rule(), 1..=3),
        parent in prop::collection::vec(net_rule(), 0..=5),
    ) {
        let child: Vec<NetRule> = child.into_iter().enumerate().map(|(i, r)| to_rule(r, i)).collect();
        let parent: Vec<NetRule> = parent.into_iter().enumerate().map(|(i, r)| to_rule(r, i)).collect();
        let report = attenuate(&policy(&[], child.clone()), &policy(&[], parent.clone()));
        let granted = |p, host, port| parent.iter().any(|r| net_grants(r, p, host, port));
        for (i, c) in child.iter().enumerate() {
            match excess_of(&report, &format!("net.allow[{i}]")) {
                Some(Witness::Peer { protocol, address, port }) => {
                    let std::net::IpAddr::V4(v4) = address else {
                        unreachable!("{address} is not in the universe");
                    };
                    let [10, 0, 0, host] = v4.octets() else {
                        unreachable!("{address} is not in the universe");
                    };
                    prop_assert!(net_grants(c, *protocol, host, *port));
                    prop_assert!(!granted(*protocol, host, *port));
                }
                Some(other) => prop_assert!(false, "unexpected witness {other:?}"),
                None => {
                    for p in [Protocol::Tcp, Protocol::Udp] {
                        for host in 0..8u8 {
                            for port in 0..8u16 {
                                prop_assert!(
                                    !net_grants(c, p, host, port) || granted(p, host, port),
                                    "{c:?} grants {p} 10.0.0.{host}:{port}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Name patterns over two nested suffixes and a few labels.
const HOST_PATTERNS: [&str; 9] = [
    "e.com",
    "a.e.com",
    "b.e.com",
    "x.e.com",
    "a.a.e.com",
    "x.a.e.com",
    "*.e.com",
    "*.a.e.com",
    "*.b.e.com",
];
/// Labels of the name universe: the patterns' own, and some no pattern names.
const HOST_LABELS: [&str; 6] = ["a", "b", "x", "y", "x0", "zz"];

fn host_universe() -> Vec<String> {
    let mut names = vec!["e.com".to_owned()];
    for l in HOST_LABELS {
        names.push(format!("{l}.e.com"));
        for m in HOST_LABELS {
            names.push(format!("{m}.{l}.e.com"));
        }
    }
    names
}

/// A name rule over the universe × ports 0..=7 × {tcp, udp}.
fn host_rule() -> impl Strategy<Value = (usize, u16, u16, u8)> {
    (0..HOST_PATTERNS.len(), 0..8u16, 0..8u16, 1..=3u8)
}

fn to_host_rule((pattern, a, b, protos): (usize, u16, u16, u8), i: usize) -> HostRule {
    let mut protocols = Vec::new();
    if protos & 1 != 0 {
        protocols.push(Protocol::Tcp);
    }
    if protos & 2 != 0 {
        protocols.push(Protocol::Udp);
    }
    HostRule {
        host: match HostPattern::parse(HOST_PATTERNS[pattern]) {
            Ok(h) => h,
            Err(e) => unreachable!("{e}"),
        },
        ports: PortRange {
            first: a.min(b),
            last: a.max(b),
        },
        protocols,
        origin: origin("net.allow", i),
    }
}

fn host_grants(r: &HostRule, p: Protocol, name: &str, port: u16) -> bool {
    r.protocols.contains(&p)
        && r.host.matches(name)
        && (r.ports.first..=r.ports.last).contains(&port)
}

fn host_policy(hosts: Vec<HostRule>, allow: Vec<NetRule>) -> CompiledPolicy {
    let mut p = policy(&[], allow);
    p.net.hosts = hosts;
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn host_inclusion_matches_brute_force(
        child in prop::collection::vec(host_rule(), 1..=3),
        parent in prop::collection::vec(host_rule(), 0..=6),
        wide_addresses in any::<bool>(),
    ) {
        let child: Vec<HostRule> = child.into_iter().enumerate().map(|(i, r)| to_host_rule(r, i)).collect();
        let parent: Vec<HostRule> = parent.into_iter().enumerate().map(|(i, r)| to_host_rule(r, i)).collect();
        // An address grant of everything changes nothing: it never covers a name.
        let allow = if wide_addresses {
            vec![NetRule {
                net: IpNet::V4 { addr: Ipv4Addr::UNSPECIFIED, prefix_len: 0 },
                ports: PortRange { first: 0, last: u16::MAX },
                protocols: vec![Protocol::Tcp, Protocol::Udp],
                origin: origin("net.allow", 9),
            }]
        } else {
            Vec::new()
        };
        let report = attenuate(&host_policy(child.clone(), Vec::new()), &host_policy(parent.clone(), allow));
        let granted = |p, name: &str, port| parent.iter().any(|r| host_grants(r, p, name, port));
        let universe = host_universe();
        for (i, c) in child.iter().enumerate() {
            match excess_of(&report, &format!("net.allow[{i}]")) {
                Some(Witness::Host { protocol, name, port }) => {
                    prop_assert!(host_grants(c, *protocol, name, *port), "{c:?} does not grant {name}");
                    prop_assert!(!granted(*protocol, name, *port), "the parent grants {name}");
                    prop_assert_eq!(bee_core::host::normalize_name(name), Some(name.clone()));
                }
                Some(other) => prop_assert!(false, "unexpected witness {other:?}"),
                None => {
                    for p in [Protocol::Tcp, Protocol::Udp] {
                        for name in &universe {
                            for port in 0..8u16 {
                                prop_assert!(
                                    !host_grants(c, p, name, port) || granted(p, name, port),
                                    "{c:?} grants {p} {name}:{port}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// An exec rule: a pattern, or (with an inode) a pin of an exact path.
fn exec_rule() -> impl Strategy<Value = (String, Option<u64>)> {
    prop_oneof![
        pattern_text().prop_map(|t| (t, None)),
        (prop::collection::vec(literal(), 0..=3), 1..=2u64).prop_map(|(s, ino)| {
            (
                if s.is_empty() {
                    "/".to_owned()
                } else {
                    dir(&s)
                },
                Some(ino),
            )
        }),
    ]
}

fn exec_rules(rules: &[(String, Option<u64>)]) -> Vec<ExecRule> {
    rules
        .iter()
        .enumerate()
        .map(|(i, (t, pin))| ExecRule {
            pattern: parse(t),
            pin: pin.map(|ino| FileId { dev: 1, ino }),
            origin: origin("exec", i),
        })
        .collect()
}

/// Whether `rule` admits executing the file with inode `ino` at `path`.
fn admits(rule: &ExecRule, path: &str, ino: u64) -> bool {
    rule.pattern.matches(path) && rule.pin.is_none_or(|id| id.ino == ino)
}

/// An inode no generated rule pins.
const OTHER_INODE: u64 = 99;

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn exec_inclusion_matches_brute_force(
        child in prop::collection::vec(exec_rule(), 1..=3),
        parent in prop::collection::vec(exec_rule(), 0..=4),
    ) {
        let (child, parent) = (exec_rules(&child), exec_rules(&parent));
        let mut c = policy(&[], vec![]);
        c.exec = child.clone();
        let mut p = policy(&[], vec![]);
        p.exec = parent.clone();
        let report = attenuate(&c, &p);
        let granted = |path: &str, ino| parent.iter().any(|r| admits(r, path, ino));
        let paths = universe();
        for (i, rule) in child.iter().enumerate() {
            let file = match excess_of(&report, &format!("exec[{i}]")) {
                Some(Witness::Path { path }) => Some((path.clone(), OTHER_INODE)),
                Some(Witness::PinnedFile { path, file }) => Some((path.clone(), file.ino)),
                Some(Witness::FileOtherThan { path, pinned }) => {
                    prop_assert!(pinned.iter().all(|id| id.ino != OTHER_INODE));
                    Some((path.clone(), OTHER_INODE))
                }
                Some(other) => {
                    prop_assert!(false, "unexpected witness {other:?}");
                    None
                }
                None => None,
            };
            match file {
                Some((path, ino)) => {
                    prop_assert!(is_valid_path(&path), "{path:?} is not a valid path");
                    prop_assert!(admits(rule, &path, ino), "{rule:?} does not admit {path}");
                    prop_assert!(!granted(&path, ino), "the parent admits {path} inode {ino}");
                }
                None => {
                    for path in &paths {
                        for ino in [1, 2, OTHER_INODE] {
                            prop_assert!(
                                !admits(rule, path, ino) || granted(path, ino),
                                "{rule:?} admits {path} inode {ino}, the parent does not"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Any string over bytes that matter to paths and patterns (`/`, `.`, `*`, NUL, non-ASCII).
fn raw_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!["/", ".", "*", "\0", "a", "é", ""]),
        0..6,
    )
    .prop_map(|parts| parts.concat())
}

/// Patterns with arbitrary fields, well-formed or not (fields are public).
fn raw_pattern() -> impl Strategy<Value = PathPattern> {
    prop_oneof![
        raw_text().prop_map(|path| PathPattern::Exact { path }),
        raw_text().prop_map(|root| PathPattern::Subtree { root }),
        (raw_text(), raw_text()).prop_map(|(root, suffix)| PathPattern::Postfix { root, suffix }),
        (raw_text(), raw_text()).prop_map(|(root, name)| PathPattern::Segment { root, name }),
        (prop::collection::vec(raw_text(), 0..3), any::<bool>())
            .prop_map(|(segments, subtree)| PathPattern::BoundedStar { segments, subtree }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Malformed rules never panic; a path witness is still a real one.
    #[test]
    fn arbitrary_patterns_never_panic(
        child in prop::collection::vec(raw_pattern(), 1..=3),
        parent in prop::collection::vec(raw_pattern(), 0..=3),
    ) {
        let rules = |ps: &[PathPattern]| -> Vec<PathRule> {
            ps.iter()
                .enumerate()
                .map(|(i, pattern)| PathRule { pattern: pattern.clone(), origin: origin("fs.read", i) })
                .collect()
        };
        let mut c = policy(&[], vec![]);
        c.fs.read = rules(&child);
        let mut p = policy(&[], vec![]);
        p.fs.read = rules(&parent);
        let report = attenuate(&c, &p);
        for (i, pattern) in child.iter().enumerate() {
            if let Some(Witness::Path { path }) = excess_of(&report, &format!("fs.read[{i}]")) {
                prop_assert!(is_valid_path(path), "{path:?}");
                prop_assert!(pattern.matches(path), "{pattern:?} !~ {path:?}");
            }
        }
    }
}

/// A policy's write side with carve-outs: `(write, deny, protect, unprotect)`.
type Carved = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);

fn carved() -> impl Strategy<Value = Carved> {
    (
        prop::collection::vec(pattern_text(), 0..=3),
        prop::collection::vec(pattern_text(), 0..=2),
        prop::collection::vec(pattern_text(), 0..=2),
        prop::collection::vec(pattern_text(), 0..=1),
    )
}

fn carved_policy((write, deny, protect, unprotect): &Carved) -> CompiledPolicy {
    let rules = |key: &str, texts: &[String]| -> Vec<PathRule> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| PathRule {
                pattern: parse(t),
                origin: origin(key, i),
            })
            .collect()
    };
    let mut p = policy(&[], vec![]);
    p.fs.write = rules("fs.write", write);
    p.fs.deny = rules("fs.deny", deny);
    p.fs.protect = rules("fs.protect", protect);
    p.fs.unprotect = rules("fs.unprotect", unprotect);
    p
}

/// The reference meaning of a carved write side: (read, write) of `path`.
fn carved_grants((write, deny, protect, unprotect): &Carved, path: &str) -> (bool, bool) {
    let any = |texts: &[String]| texts.iter().any(|t| parse(t).matches(path));
    let granted = any(write) && !any(deny);
    let protected = any(protect) && !any(unprotect);
    (granted, granted && !protected)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// Carve-outs on both sides: a child rule is reported exactly when brute force finds a
    /// path it still grants that the parent (less its carve-outs) does not, for read and
    /// write; a child that drops a parent's carve-out is wider.
    #[test]
    fn carved_inclusion_matches_brute_force(child in carved(), parent in carved()) {
        let report = attenuate(&carved_policy(&child), &carved_policy(&parent));
        let paths = universe();
        for (i, text) in child.0.iter().enumerate() {
            let key = format!("fs.write[{i}]");
            let rule = parse(text);
            for (cap, pick) in [("read", 0usize), ("write", 1)] {
                let get = |c: &Carved, p: &str| {
                    let (r, w) = carved_grants(c, p);
                    if pick == 0 { r } else { w }
                };
                let found = report
                    .excess
                    .iter()
                    .find(|e| e.child.origin.key == key && e.capability.to_string() == cap)
                    .map(|e| &e.witness);
                match found {
                    Some(Witness::Path { path }) => {
                        prop_assert!(is_valid_path(path), "{path:?}");
                        prop_assert!(rule.matches(path), "{cap}: {text} does not match {path}");
                        prop_assert!(get(&child, path), "{cap}: the child does not grant {path}");
                        prop_assert!(!get(&parent, path), "{cap}: the parent grants {path}");
                    }
                    Some(w) => prop_assert!(false, "{cap}: unexpected witness {w:?}"),
                    None => {
                        let missed = paths
                            .iter()
                            .find(|p| rule.matches(p) && get(&child, p) && !get(&parent, p));
                        prop_assert!(missed.is_none(), "{cap}: {text} of {child:?} ⊄ {parent:?}: {missed:?}");
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// `bee policy diff` with carve-outs and protected paths on both sides: every rule's
    /// difference, for read and for write, is one brute force confirms, and a rule reported
    /// as no difference has none in the universe.
    #[test]
    fn carved_policy_diff_matches_brute_force(old in carved(), new in carved()) {
        let d = diff(&carved_policy(&old), &carved_policy(&new));
        let paths = universe();
        for (side, from, other, theirs) in [
            ("added", &new, &old, &d.added),
            ("removed", &old, &new, &d.removed),
        ] {
            for (i, text) in from.0.iter().enumerate() {
                let key = format!("fs.write[{i}]");
                let rule = parse(text);
                for (cap, pick) in [("read", 0usize), ("write", 1)] {
                    let get = |c: &Carved, p: &str| {
                        let (r, w) = carved_grants(c, p);
                        if pick == 0 { r } else { w }
                    };
                    let found = theirs
                        .iter()
                        .find(|e| e.child.origin.key == key && e.capability.to_string() == cap)
                        .map(|e| &e.witness);
                    match found {
                        Some(Witness::Path { path }) => {
                            prop_assert!(rule.matches(path), "{side} {cap}: {text} !~ {path}");
                            prop_assert!(get(from, path), "{side} {cap}: {path} not granted");
                            prop_assert!(!get(other, path), "{side} {cap}: both grant {path}");
                        }
                        Some(w) => prop_assert!(false, "{side} {cap}: unexpected witness {w:?}"),
                        None => {
                            let missed = paths
                                .iter()
                                .find(|p| rule.matches(p) && get(from, p) && !get(other, p));
                            prop_assert!(missed.is_none(), "{side} {cap}: {text} differs at {missed:?}");
                        }
                    }
                }
            }
        }
        let same = paths.iter().all(|p| carved_grants(&old, p) == carved_grants(&new, p));
        if d.is_empty() {
            prop_assert!(same, "{old:?} and {new:?} differ, the diff is empty");
        }
    }
}
