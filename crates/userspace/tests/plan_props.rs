//! Property: walking the planned automaton grants exactly the union of the rules' access bits
//! less what the carve-outs take, with `PathPattern::matches` as the reference semantics; and
//! paths that end in one state of the (minimised) automaton grant alike below them. Realistic
//! policies — many literal rules, up to 32 segment and postfix patterns, version 2's protected
//! set, carve-outs and unprotections — all plan within the kernel's default limits.

mod plan_support;

use std::collections::BTreeSet;

use bee_common::{
    ACCEPT_MASK, ACCESS_EXEC, ACCESS_EXEC_PINNED, ACCESS_READ, ACCESS_UNIX, ACCESS_WRITE,
    DEAD_STATE, ExecPinKey, GLOBS_PER_STATE_MAX, glob_segment_matches, walk_state,
};
use bee_core::CompiledPolicy;
use bee_core::compiled::FileId;
use bee_core::glob::PathPattern;
use bee_userspace::plan::{EnforcementPlan, Placement};
use plan_support::*;
use proptest::prelude::*;

const LITERALS: &[&str] = &["a", "b", "ab", "c.rs"];
const STARS: &[&str] = &["*", "a*", "*b", "*.rs", "a*b"];
const SUFFIXES: &[&str] = &["b", ".rs", "ab"];
const PATH_SEGMENTS: &[&str] = &["a", "b", "ab", "ba", "c.rs", "x", "aab"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Unix,
    Exec,
    Pinned,
    Deny,
    ExecDeny,
    Protect,
    Unprotect,
}

impl Kind {
    fn accept(self) -> u32 {
        match self {
            Kind::Read => ACCESS_READ,
            Kind::Write => ACCESS_READ | ACCESS_WRITE,
            Kind::Unix => ACCESS_UNIX,
            Kind::Exec => ACCESS_EXEC,
            Kind::Pinned => ACCESS_EXEC_PINNED,
            Kind::Deny | Kind::ExecDeny | Kind::Protect | Kind::Unprotect => 0,
        }
    }
}

/// The reference semantics (`bee_core::compiled::FsGrants`): grants less carve-outs.
fn expected_access(lowered: &[(Kind, PathPattern, u64)], path: &str) -> u32 {
    let hit = |k: Kind| {
        lowered
            .iter()
            .any(|(kind, p, _)| *kind == k && p.matches(path))
    };
    let granted = lowered
        .iter()
        .filter(|(_, p, _)| p.matches(path))
        .fold(0, |acc, (k, _, _)| acc | k.accept());
    let exec = ACCESS_EXEC | ACCESS_EXEC_PINNED;
    let mut denied = 0;
    if hit(Kind::Deny) {
        denied |= ACCESS_READ | ACCESS_WRITE | exec | ACCESS_UNIX;
    }
    if hit(Kind::ExecDeny) {
        denied |= exec;
    }
    if hit(Kind::Protect) && !hit(Kind::Unprotect) {
        denied |= ACCESS_WRITE;
    }
    granted & !denied
}

fn join(segs: &[&str]) -> String {
    segs.iter().map(|s| format!("/{s}")).collect()
}

fn literal() -> impl Strategy<Value = &'static str> {
    prop::sample::select(LITERALS)
}

fn literals(max: usize) -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(literal(), 0..=max)
}

/// Pattern text of one of the six kinds over the tiny alphabet.
fn pattern_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            literals(1),
            prop::collection::vec(literal(), 1..=2),
            any::<bool>()
        )
            .prop_map(|(root, tail, subtree)| format!(
                "{}/**{}{}",
                join(&root),
                join(&tail),
                if subtree { "/**" } else { "" }
            )),
        literals(3).prop_map(|s| if s.is_empty() {
            "/".to_owned()
        } else {
            join(&s)
        }),
        literals(2).prop_map(|s| format!("{}/**", join(&s))),
        (literals(2), prop::sample::select(SUFFIXES))
            .prop_map(|(s, suffix)| format!("{}/**/*{suffix}", join(&s))),
        (literals(2), literal()).prop_map(|(s, name)| format!("{}/**/{name}", join(&s))),
        (
            prop::collection::vec(prop_oneof![literal(), prop::sample::select(STARS)], 1..=3),
            prop::sample::select(STARS),
            0usize..3,
            any::<bool>()
        )
            .prop_map(|(mut segs, star, at, subtree)| {
                let at = at.min(segs.len());
                segs.insert(at, star);
                format!("{}{}", join(&segs), if subtree { "/**" } else { "" })
            }),
    ]
}

fn exact_text() -> impl Strategy<Value = String> {
    prop::collection::vec(literal(), 1..=3).prop_map(|s| join(&s))
}

fn rule() -> impl Strategy<Value = (Kind, String, u64)> {
    prop_oneof![
        4 => (prop::sample::select(vec![Kind::Read, Kind::Write, Kind::Unix, Kind::Exec]),
              pattern_text(), Just(0u64)),
        1 => (Just(Kind::Pinned), exact_text(), 1u64..4),
        2 => (prop::sample::select(vec![Kind::Deny, Kind::ExecDeny, Kind::Protect, Kind::Unprotect]),
              pattern_text(), Just(0u64)),
    ]
}

fn build(rules: &[(Kind, String, u64)]) -> (CompiledPolicy, Vec<(Kind, PathPattern, u64)>) {
    let mut pol = policy();
    let mut lowered = Vec::new();
    for (kind, text, ino) in rules {
        let pin = (*kind == Kind::Pinned).then_some(FileId {
            dev: 0x801,
            ino: *ino,
        });
        match kind {
            Kind::Read => read(&mut pol, text),
            Kind::Write => write(&mut pol, text),
            Kind::Unix => unix(&mut pol, text),
            Kind::Exec | Kind::Pinned => exec(&mut pol, text, pin),
            Kind::Deny => deny(&mut pol, text),
            Kind::ExecDeny => exec_deny(&mut pol, text),
            Kind::Protect => protect(&mut pol, text),
            Kind::Unprotect => unprotect(&mut pol, text),
        }
        lowered.push((*kind, pattern(text), *ino));
    }
    (pol, lowered)
}

/// Every path of up to four segments over `PATH_SEGMENTS`.
fn all_paths() -> Vec<String> {
    let mut out = vec!["/".to_owned()];
    let mut frontier: Vec<Vec<&str>> = vec![Vec::new()];
    for _ in 0..4 {
        let mut next = Vec::new();
        for p in &frontier {
            for s in PATH_SEGMENTS {
                let mut q = p.clone();
                q.push(s);
                out.push(join(&q));
                next.push(q);
            }
        }
        frontier = next;
    }
    out
}

/// What the kernel relies on besides the language: every id in range, combos only for real
/// glob groups and masks, write states also readable.
fn check_invariants(plan: &EnforcementPlan) -> Result<(), TestCaseError> {
    let base = plan.placement().state_base;
    let states = plan.states().len() as u32;
    let live = |s: u32| s == DEAD_STATE || (s > base && s <= base + states);
    let glob_base = plan.placement().glob_base;
    let globs = plan.globs().len() as u32;
    prop_assert!(live(plan.start_state()));
    let mut groups = BTreeSet::new();
    for (id, v) in plan.states() {
        prop_assert!(id > base && id <= base + states);
        prop_assert!(live(v.default_next));
        prop_assert_eq!(v.accept & !ACCEPT_MASK, 0);
        if v.accept & ACCESS_WRITE != 0 {
            prop_assert!(v.accept & ACCESS_READ != 0);
        }
        prop_assert!(v.glob_count as usize <= GLOBS_PER_STATE_MAX);
        if v.glob_count > 0 {
            prop_assert!(
                v.glob_first >= glob_base && v.glob_first + v.glob_count <= glob_base + globs
            );
            groups.insert((v.glob_first, v.glob_count));
        }
    }
    for (k, &next) in plan.edges_short() {
        prop_assert!(live(k.state) && k.state != DEAD_STATE && live(next));
    }
    for (k, &next) in plan.combos() {
        let count = groups
            .iter()
            .find(|(first, _)| *first == k.group)
            .map(|g| g.1);
        prop_assert!(count.is_some(), "combo for unknown group {}", k.group);
        prop_assert!(k.mask != 0 && k.mask < 1 << count.unwrap_or(0));
        prop_assert!(live(next) && next != DEAD_STATE);
    }
    for k in plan.exec_pins().keys() {
        prop_assert!(live(k.state) && k.state != DEAD_STATE);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// The kernel-side matcher and the policy language's agree on every star segment.
    #[test]
    fn glob_matchers_agree(
        pattern in "[ab*.]{1,6}",
        name in "[ab.]{0,8}",
    ) {
        prop_assert_eq!(
            glob_segment_matches(pattern.as_bytes(), name.as_bytes()),
            bee_core::glob::segment_matches(pattern.as_bytes(), name.as_bytes())
        );
    }

    #[test]
    fn walk_equals_the_union_of_matching_rules(
        rules in prop::collection::vec(rule(), 0..8),
        base in 0u32..1000,
    ) {
        let (pol, lowered) = build(&rules);
        let plan = EnforcementPlan::new(&pol);
        prop_assert!(plan.is_ok(), "{:?}", plan.err());
        let Ok(plan) = plan else { return Ok(()) };
        // Walk a relocated copy too: relocation must not change the language.
        let moved = plan.relocated(Placement { policy_id: 1, state_base: base, glob_base: base });
        prop_assert!(moved.is_ok());
        let Ok(moved) = moved else { return Ok(()) };
        check_invariants(&plan)?;
        check_invariants(&moved)?;
        for path in all_paths() {
            let expected = expected_access(&lowered, &path);
            prop_assert_eq!(plan.path_access(&path), Ok(expected), "{}", path);
            prop_assert_eq!(moved.path_access(&path), Ok(expected), "{}", path);
            // The pinned check: the pin entries of the final state are exactly the pins of
            // the pinned rules naming this path.
            let state = walk_state(&plan, plan.start_state(), path.as_bytes());
            prop_assert!(state.is_ok());
            let state = state.unwrap_or_default();
            let mut pinned: Vec<u64> = lowered
                .iter()
                .filter(|(k, p, _)| *k == Kind::Pinned && p.matches(&path))
                .map(|(_, _, ino)| *ino)
                .collect();
            pinned.sort_unstable();
            pinned.dedup();
            let entries: Vec<u64> = plan
                .exec_pins()
                .keys()
                .filter(|k| k.state == state)
                .map(|k: &ExecPinKey| k.ino)
                .collect();
            prop_assert_eq!(entries, pinned, "{}", path);
        }
    }

    /// Two paths that end in one state grant alike at every path below them; two paths of
    /// one move class grant alike below them but for EXEC on readable paths. The kernel lets
    /// a directory move only within a move class, so nothing below gains or loses more.
    #[test]
    fn paths_of_one_move_class_grant_alike_below(
        rules in prop::collection::vec(rule(), 0..8),
    ) {
        let (pol, lowered) = build(&rules);
        let plan = EnforcementPlan::new(&pol);
        prop_assert!(plan.is_ok(), "{:?}", plan.err());
        let Ok(plan) = plan else { return Ok(()) };
        let paths = all_paths();
        let short: Vec<&String> = paths.iter().filter(|p| p.matches('/').count() <= 2).collect();
        let suffixes: Vec<&str> = short.iter().map(|p| p.as_str()).filter(|p| *p != "/").collect();
        let exec = ACCESS_EXEC | ACCESS_EXEC_PINNED;
        let movable = |b: u32| if b & (ACCESS_READ | ACCESS_WRITE) != 0 { b & !exec } else { b };
        // `d` followed by the suffix `s` (`""` for `d` itself, else `/…`).
        let join_at = |d: &str, s: &str| match (d, s) {
            (_, "") => d.to_owned(),
            ("/", _) => s.to_owned(),
            _ => format!("{d}{s}"),
        };
        let mut first_state: std::collections::BTreeMap<u32, &str> = Default::default();
        let mut first_class: std::collections::BTreeMap<u32, &str> = Default::default();
        for dir in &short {
            let state = walk_state(&plan, plan.start_state(), dir.as_bytes()).unwrap_or(DEAD_STATE);
            if state == DEAD_STATE {
                continue;
            }
            let Some(class) = plan.states().find(|(id, _)| *id == state).map(|(_, v)| v.move_class) else {
                return Err(TestCaseError::fail(format!("no state {state}")));
            };
            prop_assert!(class > 0);
            let same = *first_state.entry(state).or_insert(dir.as_str());
            let moved = *first_class.entry(class).or_insert(dir.as_str());
            for s in std::iter::once("").chain(suffixes.iter().copied()) {
                let here = expected_access(&lowered, &join_at(dir, s));
                prop_assert_eq!(
                    here,
                    expected_access(&lowered, &join_at(same, s)),
                    "{} and {} end in state {} but differ at {}", dir, same, state, s
                );
                prop_assert_eq!(
                    movable(here),
                    movable(expected_access(&lowered, &join_at(moved, s))),
                    "{} and {} share move class {} but differ at {}", dir, moved, class, s
                );
            }
        }
    }
}

/// Names real trees are made of, for realistic policies.
const REAL_NAMES: &[&str] = &[
    "src",
    "lib",
    "bin",
    "tests",
    "docs",
    "target",
    "node_modules",
    "__pycache__",
    ".venv",
    ".git",
    "hooks",
    "secrets",
    ".env",
    "build",
    "dist",
    "vendor",
    ".cache",
    "pkg",
    "cmd",
];
/// Star segments real policies use.
const REAL_STARS: &[&str] = &["*.sh", "*.so", "*.py", "*.pyc", "*.rs", "*.pem", "*.key"];
/// The roots of a realistic policy: the workspace, the temporary directory, the system.
const REAL_ROOTS: &[&str] = &["/w/proj", "/tmp", "/usr", "/usr/lib", "/home/u"];
/// Version 2's built-in protected patterns (`bee_core::protected`).
const V2_PROTECTED: &[&str] = &[
    "/**/.git",
    "/**/.git/hooks/**",
    "/**/.git/config",
    "/**/.git/config.worktree",
    "/**/.git/commondir",
    "/**/.git/modules/**",
    "/**/.git/worktrees/**",
    "/**/.husky/**",
    "/**/.pre-commit-config.yaml",
    "/**/lefthook.yml",
    "/**/.bee/**",
    "/**/.envrc",
    "/**/.vscode/**",
    "/**/.devcontainer/**",
    "/**/.idea/**",
];

fn real_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(REAL_NAMES)
}

fn real_root() -> impl Strategy<Value = &'static str> {
    prop::sample::select(REAL_ROOTS)
}

/// A segment or postfix pattern: `ROOT/**/NAME`, `ROOT/**/NAME/**`, `ROOT/**/A/B/**`,
/// `ROOT/**/*.ext`.
fn real_glob() -> impl Strategy<Value = String> {
    prop_oneof![
        (real_root(), real_name()).prop_map(|(r, n)| format!("{r}/**/{n}")),
        (real_root(), real_name()).prop_map(|(r, n)| format!("{r}/**/{n}/**")),
        (real_root(), real_name(), real_name()).prop_map(|(r, a, b)| format!("{r}/**/{a}/{b}/**")),
        (real_root(), prop::sample::select(REAL_STARS)).prop_map(|(r, g)| format!("{r}/**/{g}")),
    ]
}

/// An exact path or a subtree below a root: the literal rules of a policy.
fn real_literal() -> impl Strategy<Value = String> {
    (
        real_root(),
        prop::collection::vec(real_name(), 0..=3),
        any::<bool>(),
        0u32..50,
    )
        .prop_map(|(r, names, subtree, n)| {
            let mut path = format!("{r}{}", join(&names));
            if !subtree {
                path.push_str(&format!("/f{n}"));
            } else {
                path.push_str("/**");
            }
            path
        })
}

fn real_rule(glob: bool) -> BoxedStrategy<(Kind, String, u64)> {
    let text = if glob {
        real_glob().boxed()
    } else {
        real_literal().boxed()
    };
    (
        prop::sample::select(vec![
            Kind::Read,
            Kind::Read,
            Kind::Write,
            Kind::Exec,
            Kind::Deny,
            Kind::ExecDeny,
            Kind::Protect,
            Kind::Unprotect,
        ]),
        text,
    )
        .prop_map(|(k, t)| (k, t, 0))
        .boxed()
}

/// Paths through the realistic trees, up to six segments.
fn real_path() -> impl Strategy<Value = String> {
    (
        real_root(),
        prop::collection::vec(
            prop_oneof![
                real_name().prop_map(str::to_owned),
                prop::sample::select(&["run.sh", "a.so", "m.py", "m.pyc", "k.pem", "x", "f3"][..])
                    .prop_map(str::to_owned),
            ],
            0..=6,
        ),
    )
        .prop_map(|(r, segs)| {
            let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
            format!("{r}{}", join(&segs))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A realistic policy plans within the default limits and decides as the reference
    /// semantics say: up to 32 segment and postfix patterns (grants, carve-outs,
    /// protections and unprotections) over up to 200 literal rules, with version 2's
    /// protected set.
    #[test]
    fn realistic_policies_plan_and_decide_exactly(
        globs in prop::collection::vec(real_rule(true), 0..=32),
        literals in prop::collection::vec(real_rule(false), 0..=200),
        paths in prop::collection::vec(real_path(), 64),
    ) {
        let mut rules: Vec<(Kind, String, u64)> = V2_PROTECTED
            .iter()
            .map(|p| (Kind::Protect, (*p).to_owned(), 0))
            .collect();
        rules.extend(globs);
        rules.extend(literals);
        let (pol, lowered) = build(&rules);
        let plan = EnforcementPlan::new(&pol);
        prop_assert!(plan.is_ok(), "{:?}", plan.err());
        let Ok(plan) = plan else { return Ok(()) };
        check_invariants(&plan)?;
        for path in &paths {
            prop_assert_eq!(plan.path_access(path), Ok(expected_access(&lowered, path)), "{}", path);
        }
    }
}
