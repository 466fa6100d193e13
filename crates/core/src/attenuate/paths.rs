//! Inclusion of path-pattern sets: a trie of parent rules by literal prefix, cheap sound
//! syntactic covers, and an exact automaton check over the parent rules that can matter.

use std::collections::HashMap;

use super::automata::{self, Lazy};
use super::{RuleRef, pattern_text};
use crate::compiled::PathRule;
use crate::glob::{PathPattern, segment_matches, split_segments};
use rustc_hash::FxHashMap;

/// Whether `p` is a valid normalised absolute path: `/`, or `/`-separated segments that are
/// not empty, `.` or `..` and have no NUL byte.
pub(crate) fn is_valid_path(p: &str) -> bool {
    let Some(rest) = p.strip_prefix('/') else {
        return false;
    };
    if rest.is_empty() {
        return true;
    }
    // One pass over the bytes: each segment's length and how many of its bytes are dots
    // (a segment that is one or two dots and nothing else is `.` or `..`).
    let bad = |len: usize, dots: usize| len == 0 || (dots == len && len <= 2);
    let (mut len, mut dots) = (0, 0);
    for &b in rest.as_bytes() {
        match b {
            b'/' if bad(len, dots) => return false,
            b'/' => (len, dots) = (0, 0),
            0 => return false,
            b'.' => (len, dots) = (len + 1, dots + 1),
            _ => len += 1,
        }
    }
    !bad(len, dots)
}

/// A literal segment, suffix or name as the compiler produces them.
fn is_segment_text(s: &str) -> bool {
    !s.is_empty() && !s.contains('/') && !s.contains('\0')
}

/// Whether a pattern has the shape the compiler produces (normalised roots, non-empty
/// segments). Only well-formed patterns have the meaning the automata give them.
pub(crate) fn well_formed(p: &PathPattern) -> bool {
    match p {
        PathPattern::Exact { path } => is_valid_path(path),
        PathPattern::Subtree { root } => is_valid_path(root),
        PathPattern::Postfix { root, suffix: s } | PathPattern::Segment { root, name: s } => {
            is_valid_path(root) && is_segment_text(s)
        }
        PathPattern::Nested { root, tail, .. } => {
            is_valid_path(root)
                && !tail.is_empty()
                && tail.iter().all(|s| is_segment_text(s) && !s.contains('*'))
        }
        PathPattern::BoundedStar { segments, .. } => {
            !segments.is_empty() && segments.iter().all(|s| is_segment_text(s))
        }
    }
}

fn seg_prefix(prefix: &[&str], of: &[&str]) -> bool {
    prefix.len() <= of.len() && prefix.iter().zip(of).all(|(a, b)| a == b)
}

/// The segments at fixed positions from the root, and whether the matched paths may have
/// more segments than that (`None` for the `**` kinds' minimum of one more).
struct Positional<'p> {
    segs: Vec<&'p str>,
    /// Matched paths have exactly `segs.len()` segments.
    fixed: bool,
    /// Matched paths have at least this many segments.
    min_len: usize,
}

fn positional(p: &PathPattern) -> Positional<'_> {
    match p {
        PathPattern::Exact { path } => {
            let segs = split_segments(path);
            let n = segs.len();
            Positional {
                segs,
                fixed: true,
                min_len: n,
            }
        }
        PathPattern::Subtree { root } => {
            let segs = split_segments(root);
            let n = segs.len();
            Positional {
                segs,
                fixed: false,
                min_len: n,
            }
        }
        PathPattern::Postfix { root, .. } | PathPattern::Segment { root, .. } => {
            let segs = split_segments(root);
            let n = segs.len() + 1;
            Positional {
                segs,
                fixed: false,
                min_len: n,
            }
        }
        PathPattern::Nested { root, tail, .. } => {
            let segs = split_segments(root);
            let n = segs.len() + tail.len();
            Positional {
                segs,
                fixed: false,
                min_len: n,
            }
        }
        PathPattern::BoundedStar { segments, subtree } => Positional {
            segs: segments.iter().map(String::as_str).collect(),
            fixed: !subtree,
            min_len: segments.len(),
        },
    }
}

/// Whether one segment pattern `p` (literal or with `*`) matches every name `c` matches.
fn segment_covers(p: &str, c: &str) -> bool {
    p == c || p == "*" || (!c.contains('*') && segment_matches(p.as_bytes(), c.as_bytes()))
}

/// Whether two segment patterns can match a common name (a sound over-approximation).
fn segments_may_meet(a: &str, b: &str) -> bool {
    match (a.contains('*'), b.contains('*')) {
        (false, false) => a == b,
        (true, false) => segment_matches(a.as_bytes(), b.as_bytes()),
        (false, true) => segment_matches(b.as_bytes(), a.as_bytes()),
        (true, true) => true,
    }
}

/// Sound test that `p` and `c` match no common path; `false` means "may intersect".
pub(crate) fn disjoint(p: &PathPattern, c: &PathPattern) -> bool {
    let (a, b) = (positional(p), positional(c));
    if (a.fixed && b.min_len > a.segs.len()) || (b.fixed && a.min_len > b.segs.len()) {
        return true;
    }
    if a.fixed && b.fixed && a.segs.len() != b.segs.len() {
        return true;
    }
    a.segs
        .iter()
        .zip(&b.segs)
        .any(|(x, y)| !segments_may_meet(x, y))
}

/// Sound syntactic cover: `true` only if every path `c` matches is matched by `p`. `clp` is
/// `c`'s literal prefix.
fn covers(p: &PathPattern, c: &PathPattern, clp: &[&str]) -> bool {
    if p == c {
        return true;
    }
    let last_tail = |segments: &[String]| {
        segments
            .last()
            .and_then(|s| s.rsplit('*').next())
            .map(str::to_owned)
    };
    match p {
        PathPattern::Subtree { root } => seg_prefix(&split_segments(root), clp),
        PathPattern::Postfix { root, suffix } => {
            let r = split_segments(root);
            match c {
                PathPattern::Postfix {
                    root: cr,
                    suffix: cs,
                } => seg_prefix(&r, &split_segments(cr)) && cs.ends_with(suffix.as_str()),
                PathPattern::Segment { root: cr, name } => {
                    seg_prefix(&r, &split_segments(cr)) && name.ends_with(suffix.as_str())
                }
                PathPattern::BoundedStar {
                    segments,
                    subtree: false,
                } => {
                    segments.len() > r.len()
                        && seg_prefix(&r, clp)
                        && last_tail(segments).is_some_and(|t| t.ends_with(suffix.as_str()))
                }
                _ => false,
            }
        }
        PathPattern::Segment { root, name } => {
            let r = split_segments(root);
            match c {
                PathPattern::Segment { root: cr, name: n } => {
                    n == name && seg_prefix(&r, &split_segments(cr))
                }
                PathPattern::BoundedStar {
                    segments,
                    subtree: false,
                } => {
                    segments.len() > r.len()
                        && seg_prefix(&r, clp)
                        && segments
                            .last()
                            .is_some_and(|l| l == name && !l.contains('*'))
                }
                _ => false,
            }
        }
        PathPattern::BoundedStar {
            segments: ps,
            subtree: psub,
        } => {
            let cp = positional(c);
            let positional_kind = matches!(
                c,
                PathPattern::Exact { .. }
                    | PathPattern::Subtree { .. }
                    | PathPattern::BoundedStar { .. }
            );
            let fits = if *psub {
                ps.len() <= cp.segs.len()
            } else {
                cp.fixed && ps.len() == cp.segs.len()
            };
            positional_kind && fits && ps.iter().zip(&cp.segs).all(|(p, c)| segment_covers(p, c))
        }
        PathPattern::Nested { .. } | PathPattern::Exact { .. } => false,
    }
}

#[derive(Debug, Default)]
struct Node<'a> {
    children: FxHashMap<&'a str, usize>,
    /// Rules whose literal prefix ends here.
    here: Vec<usize>,
    /// Whether a subtree rule is rooted here.
    subtree_here: bool,
    /// The first rule at or below this node.
    first_below: Option<usize>,
}

/// What a set of parent patterns says about one child pattern.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Every valid path the child matches is matched by the set.
    Covered,
    /// A valid path the child matches and the set does not.
    Counterexample(String),
    /// Could not be decided (malformed child or automaton too large): refuse.
    Unproven(String),
}

/// A set of (parent) path patterns, indexed by literal prefix, that answers inclusion
/// questions exactly.
#[derive(Debug)]
pub(crate) struct PathSet<'a> {
    patterns: Vec<&'a PathPattern>,
    nodes: Vec<Node<'a>>,
    /// Parent-union DFAs by the sorted set of rules they unite.
    unions: FxHashMap<Vec<usize>, Result<Lazy, String>>,
    /// Outcomes of the automaton check by child pattern.
    outcomes: HashMap<&'a PathPattern, Outcome>,
}

impl<'a> PathSet<'a> {
    /// Indexes `patterns`; positions in it are the rule numbers the methods return.
    /// Malformed patterns are kept in place but never match anything.
    pub(crate) fn new(patterns: Vec<&'a PathPattern>) -> Self {
        let mut nodes = vec![Node::default()];
        for (i, p) in patterns.iter().enumerate() {
            if !well_formed(p) {
                continue;
            }
            let mut at = 0;
            nodes[at].first_below.get_or_insert(i);
            for seg in p.literal_prefix() {
                let next = nodes.len();
                let child = *nodes[at].children.entry(seg).or_insert(next);
                if child == next {
                    nodes.push(Node::default());
                }
                at = child;
                nodes[at].first_below.get_or_insert(i);
            }
            nodes[at].here.push(i);
            nodes[at].subtree_here |= matches!(p, PathPattern::Subtree { .. });
        }
        Self {
            patterns,
            nodes,
            unions: FxHashMap::default(),
            outcomes: HashMap::new(),
        }
    }

    /// The trie node of `segs`, with every rule on the way (including at the node), or
    /// `None` for the node if the walk leaves the trie. The flag tells whether a subtree
    /// rule was passed.
    fn walk(&self, segs: &[&str]) -> (Option<usize>, Vec<usize>, bool) {
        let mut at = 0;
        let mut rules = self.nodes[0].here.clone();
        let mut subtree = self.nodes[0].subtree_here;
        for seg in segs {
            match self.nodes[at].children.get(*seg) {
                Some(&n) => at = n,
                None => return (None, rules, subtree),
            }
            rules.extend_from_slice(&self.nodes[at].here);
            subtree |= self.nodes[at].subtree_here;
        }
        (Some(at), rules, subtree)
    }

    /// Whether some pattern in the set matches the valid path `path`.
    pub(crate) fn matches(&self, path: &str) -> bool {
        let (_, rules, _) = self.walk(&split_segments(path));
        rules.iter().any(|&i| self.patterns[i].matches(path))
    }

    /// Whether one of the rules numbered `rules` matches `path`.
    fn matches_in(&self, rules: &[usize], path: &str) -> bool {
        rules.iter().any(|&i| self.patterns[i].matches(path))
    }

    /// The rule nearest to `path`: the first rule whose literal prefix shares the most
    /// leading segments with it (at least one, or the rule's prefix is `/`).
    pub(crate) fn nearest(&self, path: &str) -> Option<usize> {
        let mut at = 0;
        let mut best = self.nodes[0].here.first().copied();
        for seg in split_segments(path) {
            match self.nodes[at].children.get(seg) {
                Some(&n) => {
                    at = n;
                    best = self.nodes[at].first_below.or(best);
                }
                None => break,
            }
        }
        best
    }

    /// Decides whether every valid path `child` matches is matched by the set.
    pub(crate) fn check(&mut self, child: &'a PathPattern) -> Outcome {
        if !well_formed(child) {
            return Outcome::Unproven(format!("`{child}` is not a normalised pattern"));
        }
        if let PathPattern::Exact { path } = child {
            return if self.matches(path) {
                Outcome::Covered
            } else {
                Outcome::Counterexample(path.clone())
            };
        }
        let lp = child.literal_prefix();
        let (node, mut relevant, subtree) = self.walk(&lp);
        if subtree {
            return Outcome::Covered;
        }
        // Only a rule whose literal prefix is a segment-prefix of the child's can cover it
        // alone: a rule with a deeper prefix misses the child's paths that differ in the
        // first wildcard segment (or, for `**` kinds, the paths at the child's prefix).
        if relevant
            .iter()
            .any(|&i| covers(self.patterns[i], child, &lp))
        {
            return Outcome::Covered;
        }
        relevant.retain(|&i| !disjoint(self.patterns[i], child));
        if let Some(node) = node {
            // Rules strictly below the child's literal prefix can still help a union, unless
            // a rule above them already covers them.
            let ancestors = relevant.len();
            let mut stack: Vec<usize> = self.nodes[node].children.values().copied().collect();
            while let Some(n) = stack.pop() {
                for &i in &self.nodes[n].here {
                    let p = self.patterns[i];
                    if disjoint(p, child) {
                        continue;
                    }
                    let plp = p.literal_prefix();
                    let redundant = relevant[..ancestors]
                        .iter()
                        .any(|&a| covers(self.patterns[a], p, &plp));
                    if !redundant {
                        relevant.push(i);
                    }
                }
                stack.extend(self.nodes[n].children.values().copied());
            }
        }
        if let Some(o) = self.outcomes.get(child) {
            return o.clone();
        }
        relevant.sort_unstable();
        let o = self.decide_by_automata(child, relevant);
        self.outcomes.insert(child, o.clone());
        o
    }

    fn decide_by_automata(&mut self, child: &PathPattern, relevant: Vec<usize>) -> Outcome {
        let unproven = |e: String| Outcome::Unproven(format!("automaton for `{child}`: {e}"));
        let valid = match automata::validity() {
            Ok(v) => v,
            Err(e) => return unproven(e),
        };
        let mut child_dfa = match Lazy::new(&[automata::regex(child)]) {
            Ok(d) => d,
            Err(e) => return unproven(e),
        };
        let mut literal = [false; 256];
        automata::literal_bytes(child, &mut literal);
        for &i in &relevant {
            automata::literal_bytes(self.patterns[i], &mut literal);
        }
        let alphabet = automata::alphabet(literal);
        // The child's shortest valid path is often already a witness: then the union of
        // the parent rules need not be built.
        match automata::counterexample(&mut child_dfa, None, valid, &alphabet) {
            Ok(None) => return Outcome::Covered,
            Ok(Some(bytes)) => {
                if let Ok(path) = String::from_utf8(bytes) {
                    if !self.matches_in(&relevant, &path) {
                        return Outcome::Counterexample(path);
                    }
                }
            }
            Err(e) => return unproven(e),
        }
        let parent = if relevant.is_empty() {
            None
        } else {
            let patterns = &self.patterns;
            let union = self.unions.entry(relevant).or_insert_with_key(|rel| {
                let regexes: Vec<String> =
                    rel.iter().map(|&i| automata::regex(patterns[i])).collect();
                Lazy::new(&regexes)
            });
            match union {
                Ok(d) => Some(d),
                Err(e) => return unproven(e.clone()),
            }
        };
        match automata::counterexample(&mut child_dfa, parent, valid, &alphabet) {
            Ok(None) => Outcome::Covered,
            Ok(Some(bytes)) => {
                Outcome::Counterexample(String::from_utf8_lossy(&bytes).into_owned())
            }
            Err(e) => unproven(e),
        }
    }
}

/// A [`RuleRef`] for a path rule.
pub(crate) fn rule_ref(r: &PathRule) -> RuleRef {
    RuleRef {
        origin: r.origin.clone(),
        rule: pattern_text(&r.pattern),
    }
}

#[cfg(test)]
mod tests {
    use super::is_valid_path;

    /// The definition [`is_valid_path`] computes in one pass.
    fn by_segments(p: &str) -> bool {
        p == "/"
            || p.strip_prefix('/').is_some_and(|rest| {
                rest.split('/')
                    .all(|s| !s.is_empty() && s != "." && s != ".." && !s.contains('\0'))
            })
    }

    #[test]
    fn a_valid_path_is_found_in_one_pass_as_by_its_segments() {
        // Every string of up to seven bytes from `/`, `.`, `a` and NUL.
        let mut strings = vec![String::new()];
        let mut from = 0;
        for _ in 0..7 {
            let end = strings.len();
            for i in from..end {
                for c in ['/', '.', 'a', '\0'] {
                    let mut s = strings[i].clone();
                    s.push(c);
                    strings.push(s);
                }
            }
            from = end;
        }
        assert_eq!(strings.len(), (4usize.pow(8) - 1) / 3);
        for s in &strings {
            assert_eq!(is_valid_path(s), by_segments(s), "{s:?}");
        }
    }
}
