//! Carve-outs in the proof: a capability's language is its grants less what is carved out.
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

use super::automata::{self, Lazy};
use super::paths::{Outcome, PathSet, disjoint, rule_ref, well_formed};
use super::{Capability, Excess, Witness};
use crate::compiled::PathRule;
use crate::glob::PathPattern;

/// What one policy carves out of one capability's grants.
#[derive(Debug, Clone, Default)]
pub(crate) struct Carve<'a> {
    /// Rules that remove the capability outright.
    pub deny: Vec<&'a PathPattern>,
    /// Protected rules: removed unless an `unprotect` rule also matches.
    pub protect: Vec<&'a PathPattern>,
    /// Rules that lift protection.
    pub unprotect: Vec<&'a PathPattern>,
}

impl<'a> Carve<'a> {
    /// Whether nothing is carved out.
    pub(crate) fn is_empty(&self) -> bool {
        self.deny.is_empty() && self.protect.is_empty()
    }

    /// Whether the valid path `path` is carved out.
    pub(crate) fn matches(&self, path: &str) -> bool {
        self.deny.iter().any(|p| p.matches(path))
            || (self.protect.iter().any(|p| p.matches(path))
                && !self.unprotect.iter().any(|p| p.matches(path)))
    }

    /// The rules that may meet `g` (malformed ones are kept: they make the automaton fail,
    /// and the answer is then "unproven", never "covered").
    fn near(&self, g: &PathPattern) -> Carve<'a> {
        let keep = |v: &[&'a PathPattern]| -> Vec<&'a PathPattern> {
            v.iter()
                .copied()
                .filter(|p| !well_formed(p) || !disjoint(p, g))
                .collect()
        };
        Carve {
            deny: keep(&self.deny),
            protect: keep(&self.protect),
            unprotect: keep(&self.unprotect),
        }
    }
}

/// Automata of a product search, by role; each index is into the search's automaton list.
#[derive(Default)]
struct Roles {
    autos: Vec<Lazy>,
    literal: Vec<bool>,
}

/// Indices of one carve-out's unions (absent when the union is empty).
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

impl Roles {
    fn new() -> Self {
        Self {
            autos: Vec::new(),
            literal: vec![false; 256],
        }
    }

    fn add(&mut self, patterns: &[&PathPattern]) -> Result<Option<usize>, String> {
        if patterns.is_empty() {
            return Ok(None);
        }
        let mut set = [false; 256];
        let regexes: Vec<String> = patterns
            .iter()
            .map(|p| {
                automata::literal_bytes(p, &mut set);
                automata::regex(p)
            })
            .collect();
        for (b, on) in set.iter().enumerate() {
            self.literal[b] |= on;
        }
        self.autos.push(Lazy::new(&regexes)?);
        Ok(Some(self.autos.len() - 1))
    }

    fn carve(&mut self, c: &Carve<'_>) -> Result<CarveIdx, String> {
        Ok(CarveIdx {
            deny: self.add(&c.deny)?,
            protect: self.add(&c.protect)?,
            unprotect: self.add(&c.unprotect)?,
        })
    }

    fn alphabet(&self) -> Vec<u8> {
        let mut set = [false; 256];
        for (b, on) in self.literal.iter().enumerate() {
            set[b] = *on;
        }
        automata::alphabet(set)
    }
}

/// The shortest valid path `g` grants, the child's carve-out leaves, and `lost` calls lost:
/// given the parent's grant union index and carve-out indices and the acceptance flags.
fn witness(
    g: &PathPattern,
    child: &Carve<'_>,
    parent_grants: &[&PathPattern],
    parent: &Carve<'_>,
    lost: impl Fn(Option<usize>, CarveIdx, &[bool]) -> bool,
) -> Result<Option<String>, String> {
    let valid = automata::validity()?;
    let mut roles = Roles::new();
    roles.add(&[g])?;
    let c = roles.carve(child)?;
    let grants = roles.add(parent_grants)?;
    let p = roles.carve(parent)?;
    let alphabet = roles.alphabet();
    let found = automata::search(&mut roles.autos, valid, &alphabet, |a| {
        !c.carved(a) && lost(grants, p, a)
    })?;
    Ok(found.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// The shortest valid path `g` grants (less `child_carve`) that the parent — the grants
/// indexed in `set` (the same rules as `parent`, in order) less `parent_carve` — does not:
/// `Ok(None)` when there is none, `Err` when it cannot be decided.
pub(crate) fn excess<'a>(
    g: &'a PathPattern,
    child_carve: &Carve<'a>,
    set: &mut PathSet<'a>,
    parent: &[&'a PathPattern],
    parent_carve: &Carve<'a>,
) -> Result<Option<String>, String> {
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
            witness(g, &cc, &near, &Carve::default(), |grants, _, a| {
                !grants.is_some_and(|i| a[i])
            })
            .map_err(|e| format!("automaton for `{g}`: {e}"))?
        }
        Outcome::Unproven(reason) => return Err(reason),
    };
    match outside {
        Some(w) => Ok(Some(w)),
        None if pc.is_empty() => Ok(None),
        // Step 2: (g ∖ C_child) ∩ C_parent = ∅.
        None => witness(g, &cc, &[], &pc, |_, p, a| p.carved(a))
            .map_err(|e| format!("automaton for `{g}`: {e}")),
    }
}

/// Checks every child rule of one path capability against the parent's, carve-outs of both
/// sides included (see the module docs). With no carve-out on either side this is
/// [`super::paths::check_rules`].
pub(crate) fn check_rules<'a>(
    capability: Capability,
    child: &[&'a PathRule],
    child_carve: &Carve<'a>,
    parent: &[&'a PathRule],
    parent_carve: &Carve<'a>,
) -> Vec<Excess> {
    if child_carve.is_empty() && parent_carve.is_empty() {
        return super::paths::check_rules(capability, child, parent);
    }
    let patterns: Vec<&PathPattern> = parent.iter().map(|r| &r.pattern).collect();
    let mut set = PathSet::new(patterns.clone());
    let mut out = Vec::new();
    for c in child {
        let g = &c.pattern;
        let witness = match excess(g, child_carve, &mut set, &patterns, parent_carve) {
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
pub(crate) fn leaves_something(g: &PathPattern, carve: &Carve<'_>) -> Option<bool> {
    if let PathPattern::Exact { path } = g {
        return Some(!carve.matches(path));
    }
    let near = carve.near(g);
    if near.is_empty() {
        return Some(true);
    }
    witness(g, &near, &[], &Carve::default(), |_, _, _| true)
        .ok()
        .map(|w| w.is_some())
}

/// Whether the carve-out rule `d` meets some valid path one of `grants` matches (a carve-out
/// that meets none carves nothing): `None` when it cannot be decided.
pub(crate) fn meets_any(d: &PathPattern, grants: &[&PathPattern]) -> Option<bool> {
    if let PathPattern::Exact { path } = d {
        return Some(grants.iter().any(|g| g.matches(path)));
    }
    let near: Vec<&PathPattern> = grants
        .iter()
        .copied()
        .filter(|p| well_formed(p) && !disjoint(p, d))
        .collect();
    if near.is_empty() {
        return Some(false);
    }
    witness(
        d,
        &Carve::default(),
        &near,
        &Carve::default(),
        |grants, _, a| grants.is_some_and(|i| a[i]),
    )
    .ok()
    .map(|w| w.is_some())
}
