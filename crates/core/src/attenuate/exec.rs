//! Exec grants: unpinned patterns against the parent's unpinned patterns, and pinned files
//! against the parent's unpinned patterns or its pins of the same path and inode.

use std::collections::HashMap;

use super::carve::{self, Carve};
use super::paths::{PathSet, is_valid_path};
use super::{Capability, Excess, RuleRef, Witness, pattern_text};
use crate::compiled::{ExecRule, FileId};
use crate::glob::PathPattern;

fn rule_ref(r: &ExecRule) -> RuleRef {
    let rule = match r.pin {
        Some(id) => format!(
            "!{} (dev {} inode {})",
            pattern_text(&r.pattern),
            id.dev,
            id.ino
        ),
        None => pattern_text(&r.pattern),
    };
    RuleRef {
        origin: r.origin.clone(),
        rule,
    }
}

/// Checks every child exec rule against the parent's.
///
/// A child pin `(p, id)` admits one file; the parent admits it through an unpinned rule
/// matching `p` or a pin of `p` with the same `id`. An unpinned child rule admits every file
/// at its paths, which a parent pin never covers, so it must be covered by the parent's
/// unpinned rules alone. A pinned rule that is not an exact path is malformed: a child one
/// is refused, a parent one grants nothing. Carve-outs (`exec.deny`, `fs.deny`) are taken
/// from both sides: a child rule grants what its carve-out leaves, a parent rule what the
/// parent's leaves.
pub(crate) fn check<'a>(
    child: &'a [ExecRule],
    child_carve: &Carve<'a>,
    parent: &'a [ExecRule],
    parent_carve: &Carve<'a>,
) -> Vec<Excess> {
    let unpinned: Vec<&ExecRule> = parent.iter().filter(|r| r.pin.is_none()).collect();
    let patterns: Vec<&PathPattern> = unpinned.iter().map(|r| &r.pattern).collect();
    let mut set = PathSet::new(patterns.clone());
    let mut searcher = carve::Searcher::default();
    let mut pins: HashMap<&str, Vec<&ExecRule>> = HashMap::new();
    for r in parent {
        if let (Some(_), PathPattern::Exact { path }) = (r.pin, &r.pattern) {
            pins.entry(path.as_str()).or_default().push(r);
        }
    }
    let pinned_ids =
        |rules: &[&ExecRule]| -> Vec<FileId> { rules.iter().filter_map(|r| r.pin).collect() };
    let mut out = Vec::new();
    for c in child {
        let (witness, nearest): (Witness, Option<&ExecRule>) = match (c.pin, &c.pattern) {
            (Some(id), PathPattern::Exact { path }) if is_valid_path(path) => {
                let parent_pins = pins
                    .get(path.as_str())
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                if child_carve.matches(path)
                    || (!parent_carve.matches(path)
                        && (set.matches(path) || parent_pins.iter().any(|r| r.pin == Some(id))))
                {
                    continue;
                }
                let nearest = parent_pins
                    .first()
                    .copied()
                    .or_else(|| set.nearest(path).and_then(|i| unpinned.get(i).copied()));
                (
                    Witness::PinnedFile {
                        path: path.clone(),
                        file: id,
                    },
                    nearest,
                )
            }
            (Some(_), pattern) => (
                Witness::Unproven {
                    reason: format!(
                        "a pinned rule must be an exact normalised path, not `{pattern}`"
                    ),
                },
                None,
            ),
            (None, pattern) => match carve::excess(
                &mut searcher,
                pattern,
                child_carve,
                &mut set,
                &patterns,
                parent_carve,
            ) {
                Ok(None) => continue,
                Ok(Some(path)) => {
                    let path = file_below(pattern, path, |p| {
                        !child_carve.matches(p)
                            && !pins.contains_key(p)
                            && (parent_carve.matches(p) || !set.matches(p))
                    });
                    match pins
                        .get(path.as_str())
                        .filter(|_| !parent_carve.matches(&path))
                    {
                        Some(rules) => (
                            Witness::FileOtherThan {
                                pinned: pinned_ids(rules),
                                path,
                            },
                            rules.first().copied(),
                        ),
                        None => {
                            let nearest = set.nearest(&path).and_then(|i| unpinned.get(i).copied());
                            (Witness::Path { path }, nearest)
                        }
                    }
                }
                Err(reason) => (Witness::Unproven { reason }, None),
            },
        };
        out.push(Excess {
            capability: Capability::Exec,
            child: rule_ref(c),
            witness,
            nearest_parent: nearest.map(rule_ref),
        });
    }
    out
}

/// A file to show for an exec grant whose shortest counterexample is the directory a
/// subtree rule names (`/usr/bin` for `/usr/bin/**`, `/opt/x/lib` for `/opt/*/lib/**`): a
/// directory is never executed, so a file in it reads truer. `excess` says whether a path is
/// one the child grants and the parent does not; when the file is not, the directory stays
/// the counterexample.
fn file_below(pattern: &PathPattern, path: String, excess: impl Fn(&str) -> bool) -> String {
    let at_the_top = match pattern {
        PathPattern::Subtree { root } => *root == path,
        PathPattern::Nested {
            root,
            tail,
            subtree: true,
        } => PathPattern::Nested {
            root: root.clone(),
            tail: tail.clone(),
            subtree: false,
        }
        .matches(&path),
        PathPattern::BoundedStar {
            segments,
            subtree: true,
        } => PathPattern::BoundedStar {
            segments: segments.clone(),
            subtree: false,
        }
        .matches(&path),
        _ => false,
    };
    if !at_the_top {
        return path;
    }
    let file = if path == "/" {
        "/x".to_owned()
    } else {
        format!("{path}/x")
    };
    if excess(&file) { file } else { path }
}
