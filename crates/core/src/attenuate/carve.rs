//! Carve-outs in the proof: a capability's language is its grants less what is carved out.
//!
//! Why one file of this length: it is one algorithm (is a grant's language, less its carve-
//! outs, inside the parent's?), whose index, search and sampling share their invariants.
//!
//! For one capability a policy grants `G ∖ C`, where `G` is the union of its grant rules and
//! the carve-out `C = D ∪ (P ∖ U)`: `D` the rules that deny outright (`fs.deny`,
//! `exec.deny`), `P` the protected paths (built-in and `fs.protect`, write only) and `U` the
//! `fs.unprotect` rules that lift protection. A child rule `g` is within the parent when
//! `g ∖ C_child ⊆ G_parent ∖ C_parent`, decided in two steps:
//!
//! 1. `g ⊆ G_parent` by the plain check ([`PathSet::check`]); a counterexample the child's own
//!    carve-out removes does not count, and then the whole question goes to the product
//!    search;
//! 2. `(g ∖ C_child) ∩ C_parent = ∅`: nothing the child still grants falls in the parent's
//!    carve-out (a child that drops a parent's carve-out is wider, and the path in the
//!    carve-out is the witness).
//!
//! Both are searches of one product automaton ([`automata::search`]) over the rules that can
//! meet `g` (the others are syntactically disjoint from it), so the answer stays exact.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::HashMap;

use rustc_hash::FxHashMap;

use super::automata::{self, Lazy};
use super::paths::{Outcome, PathSet, disjoint, is_valid_path, rule_ref, well_formed};
use super::{Capability, Excess, Witness};
use crate::compiled::{CompiledPolicy, PathRule};
use crate::glob::{PathPattern, join_segments, split_segments};

/// What one policy carves out of one capability's grants.
#[derive(Debug, Clone, Default)]
pub(crate) struct Carve<'a> {
    /// Rules that remove the capability outright.
    pub deny: Vec<&'a PathPattern>,
    /// Protected rules: removed unless an `unprotect` rule also matches.
    pub protect: Vec<&'a PathPattern>,
    /// Rules that lift protection.
    pub unprotect: Vec<&'a PathPattern>,
    /// The three lists indexed by literal prefix ([`Carve::indexed`]); without it, lookups
    /// scan the lists.
    index: Option<Box<[PrefixIndex<'a>; 3]>>,
}

/// A policy's carve-outs, per capability (see [`crate::compiled::FsGrants`]).
pub(crate) struct Carves<'a> {
    /// `fs.deny`.
    pub read: Carve<'a>,
    /// `fs.deny`, and the protected paths less `fs.unprotect`.
    pub write: Carve<'a>,
    /// `exec.deny` and `fs.deny`.
    pub exec: Carve<'a>,
}

impl<'a> Carves<'a> {
    /// The carve-outs of `p`, indexed.
    pub(crate) fn of(p: &'a CompiledPolicy) -> Self {
        let pats = |rules: &'a [PathRule]| -> Vec<&'a PathPattern> {
            rules.iter().map(|r| &r.pattern).collect()
        };
        let deny = pats(&p.fs.deny);
        let mut exec = pats(&p.exec_deny);
        exec.extend(&deny);
        Self {
            read: Carve::indexed(deny.clone(), Vec::new(), Vec::new()),
            write: Carve::indexed(deny, pats(&p.fs.protect), pats(&p.fs.unprotect)),
            exec: Carve::indexed(exec, Vec::new(), Vec::new()),
        }
    }
}

/// Rules by literal prefix (joined, `/` for none): a rule can match a path only if its
/// literal prefix is a segment-prefix of the path, and can meet a pattern only if its prefix
/// is on the path to the pattern's literal prefix or below it.
#[derive(Debug, Clone, Default)]
struct PrefixIndex<'a> {
    /// Each rule's joined literal prefix and number, sorted by prefix (then number).
    by_prefix: Vec<(Cow<'a, str>, usize)>,
    /// For each distinct prefix, its entries' range in `by_prefix`: [`PrefixIndex::at`]
    /// is asked about every prefix of every path looked up, most of them absent.
    ranges: FxHashMap<Cow<'a, str>, (usize, usize)>,
}

/// The joined literal prefix of `p` as [`PrefixIndex`] files it. A malformed rule (never
/// from the compiler) is a candidate everywhere, so that the automata refuse it rather than
/// the index hide it; so is one whose literal prefix has a `*` (neither does the compiler
/// make it), which [`disjoint`] reads as a wildcard.
fn prefix_key(p: &PathPattern) -> Cow<'_, str> {
    let everywhere = Cow::Borrowed("/");
    if !well_formed(p) {
        return everywhere;
    }
    // A well-formed root or exact path is normalised: it is its segments joined.
    match p {
        PathPattern::Exact { path: root }
        | PathPattern::Subtree { root }
        | PathPattern::Postfix { root, .. }
        | PathPattern::Segment { root, .. }
        | PathPattern::Nested { root, .. } => {
            if root.contains('*') {
                everywhere
            } else {
                Cow::Borrowed(root.as_str())
            }
        }
        PathPattern::BoundedStar { .. } => Cow::Owned(join_segments(&p.literal_prefix())),
    }
}

impl<'a> PrefixIndex<'a> {
    fn new(patterns: &[&'a PathPattern]) -> Self {
        let mut by_prefix: Vec<(Cow<'a, str>, usize)> = patterns
            .iter()
            .enumerate()
            .map(|(i, p)| (prefix_key(p), i))
            .collect();
        by_prefix.sort_unstable();
        let mut ranges: FxHashMap<Cow<'a, str>, (usize, usize)> = FxHashMap::default();
        let mut lo = 0;
        for run in by_prefix.chunk_by(|a, b| a.0 == b.0) {
            if let Some((key, _)) = run.first() {
                ranges.insert(key.clone(), (lo, lo + run.len()));
            }
            lo += run.len();
        }
        Self { by_prefix, ranges }
    }

    /// The entries whose prefix is in `from..to` (`to` unbounded when `None`).
    fn range(&self, from: &str, to: Option<&str>) -> &[(Cow<'a, str>, usize)] {
        let lo = self.by_prefix.partition_point(|(k, _)| k.as_ref() < from);
        let hi = match to {
            Some(to) => self.by_prefix.partition_point(|(k, _)| k.as_ref() < to),
            None => self.by_prefix.len(),
        };
        self.by_prefix.get(lo..hi.max(lo)).unwrap_or_default()
    }

    /// The entries whose prefix is `key`.
    fn at(&self, key: &str) -> &[(Cow<'a, str>, usize)] {
        match self.ranges.get(key) {
            Some(&(lo, hi)) => self.by_prefix.get(lo..hi).unwrap_or_default(),
            None => &[],
        }
    }

    /// Whether a rule whose literal prefix is a segment-prefix of the valid path `path`
    /// passes `hit`: [`PrefixIndex::candidates`] of its segments, without building them.
    /// A valid path's segment-prefixes are its own prefixes that end before a `/`.
    fn any_at(&self, path: &str, mut hit: impl FnMut(usize) -> bool) -> bool {
        let ends = path
            .match_indices('/')
            .map(|(i, _)| i)
            .filter(|&i| i > 0)
            .chain((path.len() > 1).then_some(path.len()));
        std::iter::once("/")
            .chain(ends.filter_map(|i| path.get(..i)))
            .any(|key| self.at(key).iter().any(|&(_, i)| hit(i)))
    }

    /// Rules whose literal prefix is a segment-prefix of `segs` (or, with `below`, also
    /// lies below `segs`).
    fn candidates(&self, segs: &[&str], below: bool, out: &mut Vec<usize>) {
        let mut at = String::from("/");
        out.extend(self.at(&at).iter().map(|(_, i)| *i));
        for (k, seg) in segs.iter().enumerate() {
            if k > 0 {
                at.push('/');
            }
            at.push_str(seg);
            out.extend(self.at(&at).iter().map(|(_, i)| *i));
        }
        if below {
            let below = if at == "/" {
                // Every key but `/` itself, which sorts first.
                self.range("/\0", None)
            } else {
                let from = format!("{at}/");
                at.push('0');
                self.range(&from, Some(&at))
            };
            out.extend(below.iter().map(|(_, i)| *i));
        }
    }
}

/// Whether a literal prefix has a `*` (only in patterns the compiler does not make).
fn has_star(segs: &[&str]) -> bool {
    segs.iter().any(|s| s.contains('*'))
}

/// Grant rules, indexed by literal prefix (see [`PrefixIndex`]) on the first lookup, for
/// [`meets_any`]: asked about every carve-out rule of a policy, a scan of all grants per
/// rule would take time in the product of their counts.
pub(crate) struct Grants<'a> {
    patterns: Vec<&'a PathPattern>,
    /// Whether lookups go through the index; without it every rule is a candidate (the scan
    /// the index stands in for).
    indexed: bool,
    index: OnceCell<PrefixIndex<'a>>,
}

impl<'a> Grants<'a> {
    /// `patterns`, indexed when first looked up.
    pub(crate) fn indexed(patterns: Vec<&'a PathPattern>) -> Self {
        Self {
            patterns,
            indexed: true,
            index: OnceCell::new(),
        }
    }

    /// `patterns`, scanned whole on every lookup, and [`carves_nothing`] without its
    /// shortcut: the reference the index is tested against.
    pub(crate) fn scanned(patterns: Vec<&'a PathPattern>) -> Self {
        Self {
            patterns,
            indexed: false,
            index: OnceCell::new(),
        }
    }

    /// Whether one of the rules matches `path`: [`Grants::candidates`] of its segments,
    /// tried in place for a valid path.
    fn any_matches(&self, path: &str) -> bool {
        if !self.indexed || path.contains('*') || !is_valid_path(path) {
            return self
                .candidates(&split_segments(path), false)
                .iter()
                .any(|g| g.matches(path));
        }
        let index = self.index.get_or_init(|| PrefixIndex::new(&self.patterns));
        index.any_at(path, |i| {
            self.patterns.get(i).is_some_and(|g| g.matches(path))
        })
    }

    /// The rules, in order, that may match a path whose segments are `segs` (or, with
    /// `below`, also a path below them); a superset of those that do.
    fn candidates(&self, segs: &[&str], below: bool) -> Vec<&'a PathPattern> {
        if !self.indexed || has_star(segs) {
            return self.patterns.clone();
        }
        let index = self.index.get_or_init(|| PrefixIndex::new(&self.patterns));
        let mut at = Vec::new();
        index.candidates(segs, below, &mut at);
        at.sort_unstable();
        at.dedup();
        at.into_iter()
            .filter_map(|i| self.patterns.get(i).copied())
            .collect()
    }
}

impl<'a> Carve<'a> {
    /// A carve-out whose lookups go through an index (for the policies' own carve-outs,
    /// asked once per rule of the other side).
    pub(crate) fn indexed(
        deny: Vec<&'a PathPattern>,
        protect: Vec<&'a PathPattern>,
        unprotect: Vec<&'a PathPattern>,
    ) -> Self {
        let index = Box::new([
            PrefixIndex::new(&deny),
            PrefixIndex::new(&protect),
            PrefixIndex::new(&unprotect),
        ]);
        Self {
            deny,
            protect,
            unprotect,
            index: Some(index),
        }
    }

    /// List `which`: 0 deny, 1 protect, 2 unprotect.
    fn list(&self, which: usize) -> &[&'a PathPattern] {
        match which {
            0 => &self.deny,
            1 => &self.protect,
            _ => &self.unprotect,
        }
    }

    /// The rules of list `which` (0 deny, 1 protect, 2 unprotect) that `keep` keeps, among
    /// the candidates the index gives for `segs` (every rule without an index).
    fn pick(
        &self,
        which: usize,
        segs: &[&str],
        below: bool,
        keep: impl Fn(&PathPattern) -> bool,
    ) -> Vec<&'a PathPattern> {
        let list = self.list(which);
        if list.is_empty() {
            return Vec::new();
        }
        match &self.index {
            Some(index) => {
                let mut at = Vec::new();
                index[which].candidates(segs, below, &mut at);
                at.sort_unstable();
                at.dedup();
                at.into_iter()
                    .filter_map(|i| list.get(i).copied())
                    .filter(|p| keep(p))
                    .collect()
            }
            None => list.iter().copied().filter(|p| keep(p)).collect(),
        }
    }
    /// Whether nothing is carved out.
    pub(crate) fn is_empty(&self) -> bool {
        self.deny.is_empty() && self.protect.is_empty()
    }

    /// Whether the valid path `path` is carved out.
    pub(crate) fn matches(&self, path: &str) -> bool {
        if self.is_empty() {
            return false;
        }
        let valid = is_valid_path(path);
        let any = |which: usize| match (&self.index, self.list(which)) {
            (_, []) => false,
            (Some(index), list) if valid => {
                index[which].any_at(path, |i| list.get(i).is_some_and(|p| p.matches(path)))
            }
            _ => !self
                .pick(which, &split_segments(path), false, |p| p.matches(path))
                .is_empty(),
        };
        any(0) || (any(1) && !any(2))
    }

    /// `self` without the rules `other` carves out alike (see [`excess`]): a deny rule
    /// `other` also denies, and, if `other` unprotects nothing `self` keeps protected, a
    /// protected rule `other` also protects.
    fn less(&self, other: &Carve<'a>) -> Carve<'a> {
        let lifts_nothing_more = other.unprotect.iter().all(|u| self.unprotect.contains(u));
        Carve {
            deny: self
                .deny
                .iter()
                .copied()
                .filter(|d| !other.deny.contains(d))
                .collect(),
            protect: self
                .protect
                .iter()
                .copied()
                .filter(|p| !(lifts_nothing_more && other.protect.contains(p)))
                .collect(),
            unprotect: self.unprotect.clone(),
            index: None,
        }
    }

    /// The rules that may meet `g` (malformed ones are kept: they make the automaton fail,
    /// and the answer is then "unproven", never "covered").
    fn near(&self, g: &PathPattern) -> Carve<'a> {
        let segs = g.literal_prefix();
        let keep = |p: &PathPattern| !well_formed(p) || !disjoint(p, g);
        Carve {
            deny: self.pick(0, &segs, true, keep),
            protect: self.pick(1, &segs, true, keep),
            unprotect: self.pick(2, &segs, true, keep),
            index: None,
        }
    }
}

/// Indices of one carve-out's unions in a [`Searcher`]'s roles (absent when empty).
#[derive(Clone, Copy, Default)]
struct CarveIdx {
    deny: Option<usize>,
    protect: Option<usize>,
    unprotect: Option<usize>,
}

impl CarveIdx {
    /// Whether the path the acceptance flags `a` describe is carved out.
    fn carved(self, a: &[bool]) -> bool {
        let on = |i: Option<usize>| i.is_some_and(|i| a[i]);
        on(self.deny) || (on(self.protect) && !on(self.unprotect))
    }
}

/// Product searches over unions of patterns, each union's lazy DFA built once and reused
/// (most rules of a policy meet the same few carve-outs, such as the protected paths).
/// Unions are keyed by the addresses of their patterns, which the caller borrows for the
/// searcher's whole life.
#[derive(Default)]
pub(crate) struct Searcher {
    store: Vec<Lazy>,
    index: HashMap<Vec<usize>, Result<Built, String>>,
    /// Whether searches explore the whole product, without cutting off what the child's
    /// deny rules cover (the reference the cut is tested against).
    exhaustive: bool,
}

/// A union built once: its index in the store and the bytes its patterns name.
type Built = (usize, [bool; 256]);

/// One search's roles: automaton indices, and the bytes their patterns name.
struct Roles {
    roles: Vec<usize>,
    literal: [bool; 256],
}

impl Searcher {
    /// A searcher that explores every product state (see [`automata::search`]'s vetoes).
    #[cfg(test)]
    pub(crate) fn exhaustive() -> Self {
        Self {
            exhaustive: true,
            ..Self::default()
        }
    }

    /// Adds the union of `patterns` as the next role (`None` for the empty union).
    fn add(&mut self, r: &mut Roles, patterns: &[&PathPattern]) -> Result<Option<usize>, String> {
        if patterns.is_empty() {
            return Ok(None);
        }
        let key: Vec<usize> = patterns
            .iter()
            .map(|p| std::ptr::from_ref(*p) as usize)
            .collect();
        let store = &mut self.store;
        let entry = self.index.entry(key).or_insert_with(|| {
            let mut set = [false; 256];
            let regexes: Vec<String> = patterns
                .iter()
                .map(|p| {
                    automata::literal_bytes(p, &mut set);
                    automata::regex(p)
                })
                .collect();
            let lazy = Lazy::new(&regexes)?;
            store.push(lazy);
            Ok((store.len() - 1, set))
        });
        let (i, set) = entry.as_ref().map_err(Clone::clone)?;
        for (b, on) in set.iter().enumerate() {
            r.literal[b] |= on;
        }
        r.roles.push(*i);
        Ok(Some(r.roles.len() - 1))
    }

    fn carve(&mut self, r: &mut Roles, c: &Carve<'_>) -> Result<CarveIdx, String> {
        Ok(CarveIdx {
            deny: self.add(r, &c.deny)?,
            protect: self.add(r, &c.protect)?,
            unprotect: self.add(r, &c.unprotect)?,
        })
    }

    /// The shortest valid path `g` grants, the child's carve-out leaves, and `lost` calls
    /// lost, given the parent's grant union role, carve-out roles and the acceptance flags.
    fn witness(
        &mut self,
        g: &PathPattern,
        child: &Carve<'_>,
        parent_grants: &[&PathPattern],
        parent: &Carve<'_>,
        lost: impl Fn(Option<usize>, CarveIdx, &[bool]) -> bool,
    ) -> Result<Option<String>, String> {
        let valid = automata::validity()?;
        let mut r = Roles {
            roles: Vec::new(),
            literal: [false; 256],
        };
        self.add(&mut r, &[g])?;
        let c = self.carve(&mut r, child)?;
        let grants = self.add(&mut r, parent_grants)?;
        let p = self.carve(&mut r, parent)?;
        let alphabet = automata::alphabet(r.literal);
        // What the child denies is never a witness.
        let vetoes: Vec<usize> = c.deny.filter(|_| !self.exhaustive).into_iter().collect();
        let found = automata::search(&mut self.store, &r.roles, &vetoes, valid, &alphabet, |a| {
            !c.carved(a) && lost(grants, p, a)
        })?;
        Ok(found.map(|b| String::from_utf8_lossy(&b).into_owned()))
    }
}

/// The shortest valid path `g` grants (less `child_carve`) that the parent — the grants
/// indexed in `set` (the same rules as `parent`, in order) less `parent_carve` — does not:
/// `Ok(None)` when there is none, `Err` when it cannot be decided.
pub(crate) fn excess<'a>(
    searcher: &mut Searcher,
    g: &'a PathPattern,
    child_carve: &Carve<'a>,
    set: &mut PathSet<'a>,
    parent: &[&'a PathPattern],
    parent_carve: &Carve<'a>,
) -> Result<Option<String>, String> {
    if let PathPattern::Exact { path } = g {
        if !is_valid_path(path) {
            return Err(format!("`{g}` is not a normalised pattern"));
        }
        let granted = set.matches(path) && !parent_carve.matches(path);
        return Ok((!child_carve.matches(path) && !granted).then(|| path.clone()));
    }
    let (cc, pc) = (child_carve.near(g), parent_carve.near(g));
    // Step 1: g ∖ C_child ⊆ G_parent.
    let outside = match set.check(g) {
        Outcome::Covered => None,
        Outcome::Counterexample(w) if !cc.matches(&w) => Some(w),
        Outcome::Counterexample(_) => {
            let near: Vec<&PathPattern> = parent
                .iter()
                .copied()
                .filter(|p| !well_formed(p) || !disjoint(p, g))
                .collect();
            searcher
                .witness(g, &cc, &near, &Carve::default(), |grants, _, a| {
                    !grants.is_some_and(|i| a[i])
                })
                .map_err(|e| format!("automaton for `{g}`: {e}"))?
        }
        Outcome::Unproven(reason) => return Err(reason),
    };
    // What both sides carve out alike cannot be in g ∖ C_child: the parent's deny rules the
    // child also has, and (when the child lifts nothing the parent keeps) its protected
    // rules the child also has.
    let pc = pc.less(&cc);
    match outside {
        Some(w) => Ok(Some(w)),
        None if pc.is_empty() => Ok(None),
        // Step 2: (g ∖ C_child) ∩ C_parent = ∅.
        None => searcher
            .witness(g, &cc, &[], &pc, |_, p, a| p.carved(a))
            .map_err(|e| format!("automaton for `{g}`: {e}")),
    }
}

/// Checks every child rule of one path capability against the parent's, carve-outs of both
/// sides included (see the module docs); with none on either side, [`excess`] is the plain
/// check of [`PathSet::check`].
pub(crate) fn check_rules<'a>(
    capability: Capability,
    child: &[&'a PathRule],
    child_carve: &Carve<'a>,
    parent: &[&'a PathRule],
    parent_carve: &Carve<'a>,
) -> Vec<Excess> {
    let patterns: Vec<&PathPattern> = parent.iter().map(|r| &r.pattern).collect();
    let mut set = PathSet::new(patterns.clone());
    let mut searcher = Searcher::default();
    let mut out = Vec::new();
    for c in child {
        let g = &c.pattern;
        let witness = match excess(
            &mut searcher,
            g,
            child_carve,
            &mut set,
            &patterns,
            parent_carve,
        ) {
            Ok(None) => continue,
            Ok(Some(path)) => Witness::Path { path },
            Err(reason) => Witness::Unproven { reason },
        };
        let nearest = match &witness {
            Witness::Path { path } => set.nearest(path),
            _ => set.nearest(&crate::glob::join_segments(&g.literal_prefix())),
        };
        out.push(Excess {
            capability,
            child: rule_ref(c),
            witness,
            nearest_parent: nearest.and_then(|i| parent.get(i)).map(|r| rule_ref(r)),
        });
    }
    out
}

/// Whether some valid path matched by `g` is left by `carve`: `None` when it cannot be
/// decided (an automaton over its limit).
pub(crate) fn leaves_something(
    searcher: &mut Searcher,
    g: &PathPattern,
    carve: &Carve<'_>,
) -> Option<bool> {
    if let PathPattern::Exact { path } = g {
        return Some(!carve.matches(path));
    }
    let near = carve.near(g);
    if near.is_empty() {
        return Some(true);
    }
    searcher
        .witness(g, &near, &[], &Carve::default(), |_, _, _| true)
        .ok()
        .map(|w| w.is_some())
}

/// Whether the carve-out rule `d` meets some valid path one of `grants` matches (a carve-out
/// that meets none carves nothing): `None` when it cannot be decided.
///
/// Only the grants the index gives as candidates are looked at: a grant that can match a
/// path has a literal prefix that is a segment-prefix of it, and a grant whose literal
/// prefix neither leads to nor lies below `d`'s is [`disjoint`] from it.
pub(crate) fn meets_any(
    searcher: &mut Searcher,
    d: &PathPattern,
    grants: &Grants<'_>,
) -> Option<bool> {
    if let PathPattern::Exact { path } = d {
        return Some(grants.any_matches(path));
    }
    let near: Vec<&PathPattern> = grants
        .candidates(&d.literal_prefix(), true)
        .into_iter()
        .filter(|p| well_formed(p) && !disjoint(p, d))
        .collect();
    if near.is_empty() {
        return Some(false);
    }
    searcher
        .witness(
            d,
            &Carve::default(),
            &near,
            &Carve::default(),
            |grants, _, a| grants.is_some_and(|i| a[i]),
        )
        .ok()
        .map(|w| w.is_some())
}

/// `rel` (relative, `/`-separated) below the normalised directory `dir`.
fn below(dir: &str, rel: &str) -> String {
    if dir == "/" {
        format!("/{rel}")
    } else {
        format!("{dir}/{rel}")
    }
}

/// A segment with each `*` filled with `x`.
fn filled(seg: &str) -> String {
    seg.replace('*', "x")
}

/// A few paths `p` matches, its wildcards filled in (none need be valid: callers check).
fn samples(p: &PathPattern) -> Vec<String> {
    match p {
        PathPattern::Exact { path } => vec![path.clone()],
        PathPattern::Subtree { root } => vec![root.clone(), below(root, "x")],
        PathPattern::Postfix { root, suffix } => vec![below(root, &format!("x{suffix}"))],
        PathPattern::Segment { root, name } => vec![below(root, name)],
        PathPattern::Nested { root, tail, .. } => vec![below(root, &tail.join("/"))],
        PathPattern::BoundedStar { segments, .. } => {
            let segs: Vec<String> = segments.iter().map(|s| filled(s)).collect();
            vec![format!("/{}", segs.join("/"))]
        }
    }
}

/// Paths below which (and at which) `p` matches everything: the subtree shapes' tops.
fn tops(p: &PathPattern) -> Vec<String> {
    match p {
        PathPattern::Subtree { root } => vec![root.clone()],
        PathPattern::Nested {
            subtree: true,
            root,
            tail,
        } => vec![below(root, &tail.join("/"))],
        PathPattern::BoundedStar {
            subtree: true,
            segments,
        } => {
            let segs: Vec<String> = segments.iter().map(|s| filled(s)).collect();
            vec![format!("/{}", segs.join("/"))]
        }
        _ => Vec::new(),
    }
}

/// Relative paths a `**` pattern matches at any depth below its root.
fn tails(p: &PathPattern) -> Vec<String> {
    match p {
        PathPattern::Postfix { suffix, .. } => vec![format!("x{suffix}")],
        PathPattern::Segment { name, .. } => vec![name.clone()],
        PathPattern::Nested { tail, .. } => vec![tail.join("/")],
        _ => Vec::new(),
    }
}

/// How many of the grants near a carve-out rule [`meets_by_sample`] tries.
const SAMPLED_GRANTS: usize = 64;

/// Whether a sample path shows that `d` meets one of `grants`: a valid path both match,
/// among `d`'s samples, the near grants' samples, and each one's subtree top with the
/// other's tail below it. `true` proves that [`meets_any`] does not answer `Some(false)`;
/// `false` proves nothing.
fn meets_by_sample(d: &PathPattern, grants: &Grants<'_>) -> bool {
    let in_both = |s: &str, g: &PathPattern| is_valid_path(s) && d.matches(s) && g.matches(s);
    for s in samples(d) {
        if is_valid_path(&s) && d.matches(&s) && grants.any_matches(&s) {
            return true;
        }
    }
    let near = grants.candidates(&d.literal_prefix(), true);
    near.iter().take(SAMPLED_GRANTS).any(|g| {
        let crossed = |a: &PathPattern, b: &PathPattern| {
            tops(a)
                .into_iter()
                .flat_map(|t| tails(b).into_iter().map(move |r| below(&t, &r)))
                .collect::<Vec<_>>()
        };
        samples(g)
            .into_iter()
            .chain(crossed(g, d))
            .chain(crossed(d, g))
            .any(|s| in_both(&s, g))
    })
}

/// Whether the carve-out rule `d` provably meets none of `grants`: `meets_any(..) ==
/// Some(false)`, with a sample path ([`meets_by_sample`]) sparing the automaton when the
/// grants are indexed.
pub(crate) fn carves_nothing(
    searcher: &mut Searcher,
    d: &PathPattern,
    grants: &Grants<'_>,
) -> bool {
    // An exact path meets a grant when one matches it, which is what `meets_any` asks; the
    // samples could show no more (a path both match is that path). The reference (scanned)
    // takes the way through `meets_any`, which the tests hold this to.
    if let (true, PathPattern::Exact { path }) = (grants.indexed, d) {
        return !grants.any_matches(path);
    }
    if grants.indexed && meets_by_sample(d, grants) {
        return false;
    }
    meets_any(searcher, d, grants) == Some(false)
}

/// Whether `carve` provably leaves nothing of `g`: `leaves_something(..) == Some(false)`,
/// with (when `sample`) a sample path of `g` that `carve` leaves sparing the automaton.
pub(crate) fn grants_nothing(
    searcher: &mut Searcher,
    g: &PathPattern,
    carve: &Carve<'_>,
    sample: bool,
) -> bool {
    let left = |s: &str| is_valid_path(s) && g.matches(s) && !carve.matches(s);
    // An exact path is its own sample, not copied.
    let shown = || match g {
        PathPattern::Exact { path } => left(path),
        _ => samples(g).iter().any(|s| left(s)),
    };
    if sample && shown() {
        return false;
    }
    leaves_something(searcher, g, carve) == Some(false)
}
