//! Protected patterns narrowed to where writing is granted, before they enter the automaton.
//!
//! The built-in protected paths are anchored nowhere (`/**/.git/hooks/**`): planned as
//! written, every state of the automaton would carry their positions, multiplying states and
//! edges by the protected set's size. They only ever take WRITE away, and WRITE is granted
//! only below the literal prefix `L` of some write rule, so each such pattern is planned as
//! its part below each `L` — exactly the same bits everywhere:
//!
//! * `L/**/T` (and `L/**/T/**`): the tail `T` anywhere below `L`;
//! * `L/T[k..]` (and `…/**`) for each `k` where `L` itself ends with `T[..k]`: a tail that
//!   begins inside `L`;
//! * `L` (or `L/**`) when `L` ends with the whole tail;
//! * `L/**` when the pattern ends in `/**` and the whole tail lies inside `L`, ending before
//!   its last segment: every path the write rule reaches is then protected.
//!
//! An exact write rule contributes only its own path, when a protected pattern matches it.
//! Patterns anchored below `/`, and any pattern when a write rule's prefix is `/`, are planned
//! as written.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use bee_core::compiled::{Origin, PathRule};
use bee_core::glob::{PathPattern, join_segments};

use super::paths::FxHasher;

/// A hash set keyed by FxHash, for the planner's internal keys.
type FxSet<T> = HashSet<T, BuildHasherDefault<FxHasher>>;

/// The patterns to plan for `protect`, given the policy's write rules.
pub(crate) fn narrowed<'a>(
    protect: &'a [PathRule],
    write: &[PathRule],
) -> Vec<(PathPattern, &'a Origin)> {
    if protect.is_empty() {
        return Vec::new();
    }
    // An exact write rule needs no pattern below it: only whether its own path is protected.
    let mut roots: Vec<Vec<&str>> = write
        .iter()
        .filter(|r| !matches!(r.pattern, PathPattern::Exact { .. }))
        .map(|r| r.pattern.literal_prefix())
        .collect();
    roots.sort_by_key(Vec::len);
    roots.dedup();
    // Shortest first, so a root is kept unless a kept root is a segment-prefix of it: one
    // look-up per prefix of each root, not a scan of the kept ones.
    let mut kept: Vec<Vec<&str>> = Vec::new();
    let mut kept_set: FxSet<Vec<&str>> = FxSet::default();
    for r in roots {
        if !(0..=r.len()).any(|n| r.get(..n).is_some_and(|p| kept_set.contains(p))) {
            kept_set.insert(r.clone());
            kept.push(r);
        }
    }
    let mut out = Vec::new();
    for w in write {
        if let PathPattern::Exact { path } = &w.pattern {
            if let Some(rule) = protect.iter().find(|p| p.pattern.matches(path)) {
                out.push((w.pattern.clone(), &rule.origin));
            }
        }
    }
    for rule in protect {
        let (tail, subtree): (Vec<&str>, bool) = match &rule.pattern {
            PathPattern::Nested {
                root,
                tail,
                subtree,
            } if root == "/" => (tail.iter().map(String::as_str).collect(), *subtree),
            PathPattern::Segment { root, name } if root == "/" => (vec![name.as_str()], false),
            other => {
                out.push((other.clone(), &rule.origin));
                continue;
            }
        };
        if kept.iter().any(Vec::is_empty) {
            out.push((rule.pattern.clone(), &rule.origin));
            continue;
        }
        for l in &kept {
            let root = join_segments(l);
            // The tail ends strictly inside `L` (`L` ending with the tail is the `k = len`
            // case below): with `/**`, all of `L` and below is protected.
            let inside = subtree
                && l.len() > tail.len()
                && l[..l.len() - 1]
                    .windows(tail.len())
                    .any(|w| w == tail.as_slice());
            if inside {
                out.push((PathPattern::Subtree { root }, &rule.origin));
                continue;
            }
            out.push((anywhere_below(&root, &tail, subtree), &rule.origin));
            for k in 1..=tail.len() {
                if l.len() >= k && l.ends_with(&tail[..k]) {
                    let mut segs = l.clone();
                    segs.extend_from_slice(&tail[k..]);
                    let path = join_segments(&segs);
                    out.push((
                        if subtree {
                            PathPattern::Subtree { root: path }
                        } else {
                            PathPattern::Exact { path }
                        },
                        &rule.origin,
                    ));
                }
            }
        }
    }
    out
}

/// `ROOT/**/T` (with `subtree`, `ROOT/**/T/**`) in its canonical kind.
fn anywhere_below(root: &str, tail: &[&str], subtree: bool) -> PathPattern {
    match tail {
        [name] if !subtree => PathPattern::Segment {
            root: root.to_owned(),
            name: (*name).to_owned(),
        },
        _ => PathPattern::Nested {
            root: root.to_owned(),
            tail: tail.iter().map(|s| (*s).to_owned()).collect(),
            subtree,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> PathRule {
        PathRule {
            pattern: PathPattern::parse(text).unwrap_or_else(|e| unreachable!("{e}")),
            origin: Origin {
                key: "k".to_owned(),
                line: 1,
                column: 1,
                text: text.to_owned(),
            },
        }
    }

    #[test]
    fn narrows_to_each_outermost_write_prefix_and_keeps_the_meaning() {
        let protect = [
            rule("/**/.git/hooks/**"),
            rule("/**/.envrc"),
            rule("/w/x/**"),
        ];
        let write = [rule("/w/**"), rule("/w/a/**"), rule("/v/.git/**")];
        let got: Vec<String> = narrowed(&protect, &write)
            .iter()
            .map(|(p, _)| p.to_string())
            .collect();
        assert_eq!(
            got,
            [
                "/w/**/.git/hooks/**",
                "/v/.git/**/.git/hooks/**",
                "/v/.git/hooks/**",
                "/w/**/.envrc",
                "/v/.git/**/.envrc",
                "/w/x/**",
            ]
        );
        let universe = [
            "/w/.git/hooks/a",
            "/v/.git/hooks",
            "/v/.git/hooks/x",
            "/v/.git/a/.git/hooks/b",
            "/w/.envrc",
            "/v/.git/.envrc",
            "/w/.git/config",
            "/z/.git/hooks/a",
        ];
        let written = |p: &str| write.iter().any(|r| r.pattern.matches(p));
        let planned = narrowed(&protect, &write);
        for p in universe {
            let full = protect.iter().any(|r| r.pattern.matches(p));
            let part = planned.iter().any(|(n, _)| n.matches(p));
            if written(p) {
                assert_eq!(full, part, "{p}");
            }
        }
        // With no write rule there is nothing to protect.
        assert_eq!(narrowed(&protect[..2], &[]).len(), 0);
    }

    #[test]
    fn a_tail_inside_the_write_prefix_protects_all_of_it() {
        // `/**/ab/**` matches `/ab/a` and everything below: `ab` lies inside `/ab/a`.
        let protect = [rule("/**/ab/**"), rule("/**/x/y/**"), rule("/**/ab")];
        let write = [rule("/ab/a/**"), rule("/q/x/y/z/*.rs")];
        let planned = narrowed(&protect, &write);
        let got: Vec<String> = planned.iter().map(|(p, _)| p.to_string()).collect();
        assert!(got.contains(&"/ab/a/**".to_owned()), "{got:?}");
        assert!(got.contains(&"/q/x/y/z/**".to_owned()), "{got:?}");
        for p in [
            "/ab/a",
            "/ab/a/b",
            "/ab/a/ab",
            "/q/x/y/z/m.rs",
            "/ab/a/c/ab",
        ] {
            let full = protect.iter().any(|r| r.pattern.matches(p));
            let part = planned.iter().any(|(n, _)| n.matches(p));
            assert_eq!(full, part, "{p}");
        }
    }
}
