//! Path rules → one deterministic segment automaton, by subset construction.
//!
//! Why one file of this length: it is one construction — the NFA, the subset construction and
//! the builder that numbers the states — whose parts share their indices.
//!
//! Every path rule of a policy is lowered to a sequence of *elements* (a literal segment, a star
//! segment or `**`). The NFA's positions are "rule `r` has matched its first `i` elements"; a
//! position before a literal or star segment moves to the next position on a matching segment,
//! a position before `**` stays on any segment and is epsilon-skippable, and a position after
//! the last element accepts the rule's access bits. The DFA's states are epsilon-closed sets of
//! positions, numbered in breadth-first order from the start set (`/`), so the same policy
//! always gives the same ids.
//!
//! For each DFA state the planner emits what the kernel's walk ([`bee_common::walk()`]) consults:
//! a literal edge for every literal segment at the state (its target also includes the star and
//! `**` moves that segment triggers), the state's distinct star segments, one combo per non-zero
//! glob mask whose target differs from the default, and the default (only `**` moves).
//!
//! Star segments and combos belong to a *glob group* rather than to a state: the combos'
//! targets depend only on the state's `**` and star positions, which every state below a
//! `ROOT/**/*SUFFIX` rule shares, so those states point at one group's globs and combos.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use bee_common::{
    ACCESS_EXEC_PINNED, ComboKey, DEAD_STATE, EdgeKeyLong, EdgeKeyShort, GLOB_MAX,
    GLOBS_PER_STATE_MAX, GlobValue, NAME_MAX, StateValue, glob_segment_matches,
};
use bee_core::compiled::Origin;
use bee_core::glob::PathPattern;

use super::minimize::{Draft, Moves};
use super::{PlanError, PlanLimits, RuleUse};

/// One path rule to compile: a pattern, the access bits a match grants (or, for a
/// carve-out, takes away) and where it came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathInput<'a> {
    pub pattern: &'a PathPattern,
    pub accept: u32,
    pub role: Role,
    pub origin: &'a Origin,
}

/// What a rule's match does to a path's access bits. A state's bits are those its grants
/// give, less those its denials take, less those its protections take where no unprotection
/// also matches: the automaton of grant ∧ ¬carve-out, exact, since a state is the set of
/// rule positions every path reaching it shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    /// Grants `accept`.
    Grant,
    /// Takes `accept` away, always.
    Deny,
    /// Takes `accept` away unless an [`Role::Unprotect`] rule matches too.
    Protect,
    /// Lifts [`Role::Protect`] rules.
    Unprotect,
}

/// The automaton's map contents with plan-local ids: state `i + 1` is `states[i]`.
#[derive(Debug, Default)]
pub(crate) struct PathAutomaton {
    pub start: u32,
    pub states: Vec<StateValue>,
    pub globs: Vec<GlobValue>,
    pub edges_short: BTreeMap<EdgeKeyShort, u32>,
    pub edges_long: BTreeMap<EdgeKeyLong, u32>,
    pub combos: BTreeMap<ComboKey, u32>,
    /// For each input rule that accepts [`ACCESS_EXEC_PINNED`] (by index), the state its path
    /// ends in.
    pub pinned: BTreeMap<usize, u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Elem<'a> {
    /// A literal segment, as an index into [`Nfa::syms`].
    Literal(u32),
    Star(&'a str),
    AnyDepth,
}

/// What the paths below a position do, which is all a DFA state needs of it: the position's
/// element and the class of the position after it, or, after a rule's last element, what a
/// match does to the access bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Future<'a> {
    /// Before `Elem`, then the class of the next position.
    Next(Elem<'a>, u32),
    /// A match of a rule with this role, granting or taking these bits (0 for
    /// [`Role::Unprotect`], whose bits do not matter).
    End(Role, u32),
    /// A match of the pinned rule with this index: the planner must know where it ends.
    Pinned(u32),
}

/// The NFA: position `p` is before element `elem[p]` of rule `rule[p]` (`None` after the last).
struct Nfa<'a> {
    elem: Vec<Option<Elem<'a>>>,
    rule: Vec<u32>,
    starts: Vec<u32>,
    /// `canon[p]`: the first position whose [`Future`] chain equals `p`'s. Positions of one
    /// class accept exactly the same paths with the same effect, so a DFA state keeps one
    /// of them ([`Nfa::close`]): the subset construction then never builds the states
    /// that differ only by which of several equal rules a path is inside (every `DIR/**`
    /// read grant, every protected `/**/NAME/**`), which minimisation would merge anyway.
    canon: Vec<u32>,
    /// Distinct literal segments, numbered in order of first use.
    syms: Vec<&'a str>,
    /// The bytes of every distinct literal segment, one after the other: segment `s` is
    /// `sym_text[sym_ends[s - 1]..sym_ends[s]]`. The subset construction reads them in
    /// state order, which the rules' own strings, scattered over the heap, are not in.
    sym_text: Vec<u8>,
    sym_ends: Vec<u32>,
    sym_ids: FxMap<&'a str, u32>,
    /// `sym_uses[s]`: how many positions are before the literal segment `s`.
    sym_uses: Vec<u32>,
    /// The directories of rule roots seen so far, each with its segments' ids
    /// (`dir_syms[from..to]`).
    dirs: FxMap<&'a str, (u32, u32)>,
    dir_syms: Vec<u32>,
}

impl<'a> Nfa<'a> {
    fn new(inputs: &[PathInput<'a>], postfix_globs: &'a [String]) -> Result<Self, PlanError> {
        let mut nfa = Nfa {
            elem: Vec::with_capacity(inputs.len() * 8),
            rule: Vec::with_capacity(inputs.len() * 8),
            starts: Vec::with_capacity(inputs.len()),
            canon: Vec::new(),
            syms: Vec::with_capacity(inputs.len()),
            sym_text: Vec::new(),
            sym_ends: Vec::with_capacity(inputs.len()),
            sym_ids: FxMap::with_capacity_and_hasher(inputs.len() * 2, Default::default()),
            sym_uses: Vec::with_capacity(inputs.len()),
            dirs: FxMap::default(),
            dir_syms: Vec::new(),
        };
        let mut postfix_iter = postfix_globs.iter();
        for (r, input) in inputs.iter().enumerate() {
            let postfix = match input.pattern {
                PathPattern::Postfix { .. } => {
                    Some(postfix_iter.next().ok_or_else(|| PlanError::Internal {
                        what: "postfix star segments are out of step with the rules".to_owned(),
                    })?)
                }
                _ => None,
            };
            nfa.starts.push(nfa.elem.len() as u32);
            nfa.lower(r as u32, input, postfix.map(String::as_str))?;
            nfa.elem.push(None);
            nfa.rule.push(r as u32);
        }
        nfa.canon = nfa.classes(inputs);
        Ok(nfa)
    }

    /// The class of each position (see [`Nfa::canon`]), by hash-consing each rule's
    /// [`Future`]s from its end back to its start.
    ///
    /// A position before a literal segment no other position has is alone in its class, and
    /// so is every position before it in its rule (its future names that class): those are
    /// their own class without a look-up, which spares most of them (a rule's distinct
    /// file or directory name).
    fn classes(&self, inputs: &[PathInput<'a>]) -> Vec<u32> {
        let mut canon = vec![0u32; self.elem.len()];
        let mut seen: FxMap<Future<'a>, u32> = FxMap::default();
        for (r, &start) in self.starts.iter().enumerate() {
            let end = self
                .starts
                .get(r + 1)
                .map_or(self.elem.len(), |&s| s as usize);
            let mut alone = false;
            for p in (start as usize..end).rev() {
                let elem = self.elem.get(p).copied().flatten();
                if let Some(Elem::Literal(sym)) = elem {
                    alone |= self.sym_uses.get(sym as usize) == Some(&1);
                }
                if alone {
                    if let Some(slot) = canon.get_mut(p) {
                        *slot = p as u32;
                    }
                    continue;
                }
                let future = match elem {
                    Some(e) => Future::Next(e, canon.get(p + 1).copied().unwrap_or_default()),
                    None => match inputs.get(r) {
                        // A pinned grant's end is where its pins go. A carve-out takes the
                        // pinned bit away too, but that is a bit like any other.
                        Some(i) if i.role == Role::Grant && i.accept & ACCESS_EXEC_PINNED != 0 => {
                            Future::Pinned(r as u32)
                        }
                        Some(i) if i.role == Role::Unprotect => Future::End(Role::Unprotect, 0),
                        Some(i) => Future::End(i.role, i.accept),
                        None => Future::Pinned(r as u32),
                    },
                };
                if let Some(slot) = canon.get_mut(p) {
                    *slot = *seen.entry(future).or_insert(p as u32);
                }
            }
        }
        canon
    }

    /// Adds the epsilon moves (skipping `**`) to `set`, replaces each position by its class
    /// (see [`Nfa::canon`]), sorts and deduplicates it.
    fn close(&self, set: &mut Vec<u32>) {
        let mut i = 0;
        while let Some(&p) = set.get(i) {
            if let Some(Some(Elem::AnyDepth)) = self.elem.get(p as usize) {
                set.push(p + 1);
            }
            i += 1;
        }
        for p in set.iter_mut() {
            *p = self.canon.get(*p as usize).copied().unwrap_or(*p);
        }
        set.sort_unstable();
        set.dedup();
    }

    /// The bytes of the literal segment `sym`.
    fn sym_bytes(&self, sym: u32) -> &[u8] {
        let end = self.sym_ends.get(sym as usize).copied().unwrap_or(0);
        let start = sym
            .checked_sub(1)
            .and_then(|s| self.sym_ends.get(s as usize))
            .copied()
            .unwrap_or(0);
        self.sym_text
            .get(start as usize..end as usize)
            .unwrap_or_default()
    }

    /// Appends the elements of rule `r`; `postfix` is the `*SUFFIX` star segment of a postfix
    /// rule.
    fn lower(
        &mut self,
        r: u32,
        input: &PathInput<'a>,
        postfix: Option<&'a str>,
    ) -> Result<(), PlanError> {
        let root = match input.pattern {
            PathPattern::Exact { path } => path,
            PathPattern::Subtree { root }
            | PathPattern::Postfix { root, .. }
            | PathPattern::Segment { root, .. }
            | PathPattern::Nested { root, .. } => root,
            PathPattern::BoundedStar { segments, subtree } => {
                for s in segments {
                    if s.contains('*') {
                        self.star(r, input, s)?;
                    } else {
                        self.literal(r, input, s)?;
                    }
                }
                if *subtree {
                    self.push(r, Elem::AnyDepth);
                }
                return Ok(());
            }
        };
        self.root(r, input, root)?;
        match input.pattern {
            PathPattern::Subtree { .. } => self.push(r, Elem::AnyDepth),
            PathPattern::Postfix { .. } => {
                self.push(r, Elem::AnyDepth);
                if let Some(glob) = postfix {
                    self.star(r, input, glob)?;
                }
            }
            PathPattern::Segment { name, .. } => {
                self.push(r, Elem::AnyDepth);
                self.literal(r, input, name)?;
            }
            PathPattern::Nested { tail, subtree, .. } => {
                self.push(r, Elem::AnyDepth);
                for t in tail {
                    self.literal(r, input, t)?;
                }
                if *subtree {
                    self.push(r, Elem::AnyDepth);
                }
            }
            PathPattern::Exact { .. } | PathPattern::BoundedStar { .. } => {}
        }
        Ok(())
    }

    fn push(&mut self, r: u32, e: Elem<'a>) {
        self.elem.push(Some(e));
        self.rule.push(r);
    }

    /// Appends the literal segments of the normalised absolute path `root`. Rules often share
    /// a directory: its segments are looked up once, and the next rule below it reuses them.
    fn root(&mut self, r: u32, input: &PathInput<'a>, root: &'a str) -> Result<(), PlanError> {
        let (dir, last) = root.rsplit_once('/').unwrap_or(("", root));
        if let Some(&(from, to)) = self.dirs.get(dir) {
            for k in from..to {
                let sym = self.dir_syms.get(k as usize).copied().unwrap_or_default();
                if let Some(uses) = self.sym_uses.get_mut(sym as usize) {
                    *uses += 1;
                }
                self.push(r, Elem::Literal(sym));
            }
        } else {
            let from = self.dir_syms.len() as u32;
            for s in dir.split('/').filter(|s| !s.is_empty()) {
                let sym = self.literal(r, input, s)?;
                self.dir_syms.push(sym);
            }
            self.dirs.insert(dir, (from, self.dir_syms.len() as u32));
        }
        if !last.is_empty() {
            self.literal(r, input, last)?;
        }
        Ok(())
    }

    /// Appends the literal segment `s`, and returns its id.
    fn literal(&mut self, r: u32, input: &PathInput<'a>, s: &'a str) -> Result<u32, PlanError> {
        if s.len() > NAME_MAX {
            return Err(PlanError::SegmentTooLong {
                origin: input.origin.clone(),
                len: s.len(),
            });
        }
        let next = self.syms.len() as u32;
        let sym = *self.sym_ids.entry(s).or_insert(next);
        if sym == next {
            self.syms.push(s);
            self.sym_uses.push(0);
            self.sym_text.extend_from_slice(s.as_bytes());
            self.sym_ends.push(self.sym_text.len() as u32);
        }
        if let Some(uses) = self.sym_uses.get_mut(sym as usize) {
            *uses += 1;
        }
        self.push(r, Elem::Literal(sym));
        Ok(sym)
    }

    fn star(&mut self, r: u32, input: &PathInput<'a>, s: &'a str) -> Result<(), PlanError> {
        if s.len() > GLOB_MAX {
            return Err(PlanError::GlobTooLong {
                origin: input.origin.clone(),
                glob: s.to_owned(),
            });
        }
        self.push(r, Elem::Star(s));
        Ok(())
    }
}

/// The `*SUFFIX` star segments of the postfix rules among `inputs`, in order.
fn postfix_globs(inputs: &[PathInput<'_>]) -> Vec<String> {
    inputs
        .iter()
        .filter_map(|i| match i.pattern {
            PathPattern::Postfix { suffix, .. } => Some(format!("*{suffix}")),
            _ => None,
        })
        .collect()
}

/// A DFA state: a sorted, epsilon-closed set of NFA positions.
type Set = Rc<[u32]>;

/// FxHash (rustc's hasher): the sets hashed here are planner-internal, so a fast
/// non-cryptographic hash is enough.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A hash map keyed by FxHash, for the planner's internal keys.
pub(super) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

struct Builder<'n, 'a> {
    nfa: &'n Nfa<'a>,
    inputs: &'n [PathInput<'a>],
    limits: &'n PlanLimits,
    /// Open-addressing table of the states by their sets' hashes ([`set_hash`]): 0 for an
    /// empty slot, else a state id; at most half full.
    slots: Vec<u32>,
    /// `hashes[i]` is the hash of `sets[i]`.
    hashes: Vec<u64>,
    /// `sets[i]` is the position set of local state `i + 1`; states are processed in id
    /// order, which makes the numbering breadth-first.
    sets: Vec<Set>,
    /// How each state was first reached: parent state and segment, for diagnostics.
    via: Vec<(u32, &'a str)>,
}

impl<'a> Builder<'_, 'a> {
    /// Closes `buf` under the epsilon moves, and returns the id of that state (creating it if
    /// new). `buf` is left holding the closed set.
    fn intern(
        &mut self,
        buf: &mut Vec<u32>,
        parent: u32,
        label: &'a str,
    ) -> Result<u32, PlanError> {
        self.nfa.close(buf);
        self.intern_closed(buf, set_hash(buf), parent, label)
    }

    /// The id of the state `set`, closed and canonical ([`Nfa::close`]) and with the hash
    /// `hash` ([`set_hash`]), creating it if new.
    fn intern_closed(
        &mut self,
        set: &[u32],
        hash: u64,
        parent: u32,
        label: &'a str,
    ) -> Result<u32, PlanError> {
        if set.is_empty() {
            return Ok(DEAD_STATE);
        }
        let mask = self.slots.len().wrapping_sub(1);
        let mut slot = (hash >> 32) as usize & mask;
        while let Some(&id) = self.slots.get(slot) {
            if id == 0 {
                break;
            }
            let i = id as usize - 1;
            if self.hashes.get(i) == Some(&hash) && self.sets.get(i).is_some_and(|s| **s == *set) {
                return Ok(id);
            }
            slot = (slot + 1) & mask;
        }
        if self.sets.len() >= self.limits.max_states {
            return Err(self.too_large("states", self.sets.len() + 1, self.limits.max_states));
        }
        let id = self.sets.len() as u32 + 1;
        self.sets.push(Rc::from(set));
        self.hashes.push(hash);
        self.via.push((parent, label));
        if let Some(s) = self.slots.get_mut(slot) {
            *s = id;
        }
        if self.sets.len() * 2 > self.slots.len() {
            self.grow();
        }
        Ok(id)
    }

    /// Doubles the table of states and files them again.
    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(64);
        self.slots = vec![0; size];
        let mask = size - 1;
        for (i, &hash) in self.hashes.iter().enumerate() {
            let mut slot = (hash >> 32) as usize & mask;
            while self.slots.get(slot).is_some_and(|&id| id != 0) {
                slot = (slot + 1) & mask;
            }
            if let Some(s) = self.slots.get_mut(slot) {
                *s = i as u32 + 1;
            }
        }
    }

    /// An example path reaching `state`, with star segments as written.
    fn example_path(&self, mut state: u32) -> String {
        let mut labels = Vec::new();
        while let Some(&(parent, label)) = self.via.get(state.wrapping_sub(1) as usize) {
            if parent == DEAD_STATE {
                break;
            }
            labels.push(label);
            state = parent;
        }
        labels.reverse();
        bee_core::glob::join_segments(&labels)
    }

    /// The refusal for exceeding a size cap, naming the rules present in the most states: the
    /// policy's own rules before built-in protected paths and included fragments, since those
    /// are the ones its author can change.
    fn too_large(&self, what: &'static str, count: usize, cap: usize) -> PlanError {
        // A state holds one position per class: each stands for every rule of its class.
        let mut members: FxMap<u32, Vec<u32>> = FxMap::default();
        for (p, &c) in self.nfa.canon.iter().enumerate() {
            if let Some(&r) = self.nfa.rule.get(p) {
                members.entry(c).or_default().push(r);
            }
        }
        let mut uses: BTreeMap<u32, usize> = BTreeMap::new();
        let mut rules: Vec<u32> = Vec::new();
        for set in &self.sets {
            rules.clear();
            for p in set.iter() {
                rules.extend(members.get(p).into_iter().flatten());
            }
            rules.sort_unstable();
            rules.dedup();
            for &r in &rules {
                *uses.entry(r).or_default() += 1;
            }
        }
        let built_in = |r: u32| {
            self.inputs
                .get(r as usize)
                .is_none_or(|i| i.origin.key.starts_with("protected") || i.origin.key.contains(':'))
        };
        let mut ranked: Vec<(usize, u32)> = uses.into_iter().map(|(r, n)| (n, r)).collect();
        ranked.sort_by(|a, b| {
            built_in(a.1)
                .cmp(&built_in(b.1))
                .then(b.0.cmp(&a.0))
                .then(a.1.cmp(&b.1))
        });
        let rules = ranked
            .into_iter()
            .take(3)
            .filter_map(|(states, r)| {
                self.inputs.get(r as usize).map(|i| RuleUse {
                    origin: i.origin.clone(),
                    states,
                })
            })
            .collect();
        PlanError::TooLarge {
            what,
            count,
            cap,
            rules,
        }
    }
}

/// A position's share of the hash of a set that holds it (the finaliser of SplitMix64).
fn mix(p: u32) -> u64 {
    let mut z = u64::from(p).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The hash of a deduplicated set of positions: the sum of their [`mix`]es, so that the
/// hash of a union of two is found from the first's and the second's positions it adds.
fn set_hash(set: &[u32]) -> u64 {
    set.iter().fold(0u64, |h, &p| h.wrapping_add(mix(p)))
}

/// The sorted union of the sorted, deduplicated `a` and `b`, into `out`; returns the sum of
/// the [`mix`]es of the positions `b` adds to `a`.
fn merge(a: &[u32], b: &[u32], out: &mut Vec<u32>) -> u64 {
    out.clear();
    out.reserve(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    let mut added = 0u64;
    while let (Some(&x), Some(&y)) = (a.get(i), b.get(j)) {
        if x <= y {
            out.push(x);
            i += 1;
            j += usize::from(x == y);
        } else {
            out.push(y);
            added = added.wrapping_add(mix(y));
            j += 1;
        }
    }
    out.extend_from_slice(a.get(i..).unwrap_or(&[]));
    let rest = b.get(j..).unwrap_or(&[]);
    out.extend_from_slice(rest);
    added.wrapping_add(set_hash(rest))
}

/// Targets found so far, each by a state and a set of positions, where the target is a
/// function of the two: an edge's or combo's target is its state's default's set merged
/// with the moves the edge adds (closed and canonical, [`Nfa::close`]), so edges that share
/// both (the names of the `/**/NAME` rules, which every state below their `**` has an edge
/// for, share them most) find their target without merging and comparing the default's
/// whole set again; and a state's default is the closure of its `**` positions alone.
#[derive(Default)]
struct Targets {
    /// `(state, set_hash(positions))` → the positions (`moves[from..to]`) and the target.
    table: FxMap<(u32, u64), (u32, u32, u32)>,
    moves: Vec<u32>,
}

impl Targets {
    /// The target of the moves `moves` from a state whose default is `default`: the one
    /// recorded, else what `intern` finds, recorded. Unless `worth` says a look-up costs
    /// less than `intern` (as where the default's set is larger than the moves: the merge
    /// and the comparison are in its size), `intern` is called at once.
    fn target(
        &mut self,
        default: u32,
        worth: bool,
        moves: &[u32],
        intern: impl FnOnce() -> Result<u32, PlanError>,
    ) -> Result<u32, PlanError> {
        if !worth {
            return intern();
        }
        match self.table.entry((default, set_hash(moves))) {
            Entry::Occupied(e) => {
                let &(from, to, target) = e.get();
                if self.moves.get(from as usize..to as usize) == Some(moves) {
                    Ok(target)
                } else {
                    // Other moves of the same hash: not recorded.
                    intern()
                }
            }
            Entry::Vacant(e) => {
                let target = intern()?;
                let from = self.moves.len() as u32;
                self.moves.extend_from_slice(moves);
                e.insert((from, self.moves.len() as u32, target));
                Ok(target)
            }
        }
    }
}

/// Label of a default transition in example paths.
const ANY_SEGMENT: &str = "…";

/// Builds the automaton for `inputs`.
pub(crate) fn build(
    inputs: &[PathInput<'_>],
    limits: &PlanLimits,
) -> Result<PathAutomaton, PlanError> {
    let globs_text = postfix_globs(inputs);
    let nfa = Nfa::new(inputs, &globs_text)?;
    let mut out = Draft::default();
    let mut b = Builder {
        nfa: &nfa,
        inputs,
        limits,
        slots: vec![0; 1024],
        hashes: Vec::with_capacity(inputs.len() * 2),
        sets: Vec::with_capacity(inputs.len() * 2),
        via: Vec::with_capacity(inputs.len() * 2),
    };
    let mut buf: Vec<u32> = nfa.starts.clone();
    out.start = b.intern(&mut buf, DEAD_STATE, "")?;
    // Glob groups (see the module docs) by their positions → `glob_first`.
    let mut groups: FxMap<Vec<u32>, u32> = FxMap::default();
    // Literal edges so far; their keys are made for the states minimisation keeps.
    let mut edges = 0usize;
    let mut combos: Vec<(ComboKey, u32)> = Vec::new();
    // Buffers reused across states.
    let mut stays: Vec<u32> = Vec::new();
    let mut literals: Vec<(u32, u32)> = Vec::new();
    let mut stars: Vec<(&str, u32)> = Vec::new();
    let mut globs: Vec<&str> = Vec::new();
    let mut group: Vec<u32> = Vec::new();
    let mut extra: Vec<u32> = Vec::new();
    let mut literal_moves: Vec<(u32, u32, u32)> = Vec::new();
    let mut known = Targets::default();
    let mut defaults = Targets::default();
    // Each state's transitions, for minimisation (`moves[0]`: the dead state's), and each
    // glob group's combo targets by mask (`mask - 1`).
    let mut moves: Vec<Moves> = Vec::with_capacity(inputs.len() * 2);
    moves.push(Moves::default());
    let mut group_targets: FxMap<u32, Vec<u32>> = FxMap::default();

    let mut id = 1u32;
    while let Some(set) = b.sets.get(id as usize - 1).map(Rc::clone) {
        let mut accept = 0u32;
        let (mut denied, mut protected, mut unprotected) = (0u32, 0u32, false);
        stays.clear();
        literals.clear();
        literal_moves.clear();
        stars.clear();
        group.clear();
        for &p in set.iter() {
            match nfa.elem.get(p as usize).copied().flatten() {
                None => {
                    let rule = nfa.rule.get(p as usize).copied().unwrap_or_default() as usize;
                    let Some(input) = inputs.get(rule) else {
                        continue;
                    };
                    match input.role {
                        Role::Grant => {
                            accept |= input.accept;
                            if input.accept & ACCESS_EXEC_PINNED != 0 {
                                out.pinned.insert(rule, id);
                            }
                        }
                        Role::Deny => denied |= input.accept,
                        Role::Protect => protected |= input.accept,
                        Role::Unprotect => unprotected = true,
                    }
                }
                Some(Elem::AnyDepth) => {
                    stays.push(p);
                    group.push(p);
                }
                Some(Elem::Literal(s)) => literals.push((s, p + 1)),
                Some(Elem::Star(s)) => {
                    stars.push((s, p + 1));
                    group.push(p);
                }
            }
        }
        literals.sort_unstable();
        stars.sort_unstable();
        globs.clear();
        globs.extend(stars.iter().map(|(g, _)| *g));
        globs.dedup();
        if globs.len() > GLOBS_PER_STATE_MAX {
            let mut origins: Vec<Origin> = Vec::new();
            for &(_, next) in &stars {
                let rule = nfa.rule.get(next as usize).copied().unwrap_or_default();
                if let Some(i) = inputs.get(rule as usize) {
                    if !origins.contains(i.origin) {
                        origins.push(i.origin.clone());
                    }
                }
            }
            return Err(PlanError::TooManyGlobs {
                at: b.example_path(id),
                globs: globs.iter().map(|s| (*s).to_owned()).collect(),
                origins,
            });
        }

        // Many states share their `**` positions (every state below a subtree grant and
        // nothing else), and so their default.
        let default_next = defaults.target(DEAD_STATE, true, &stays, || {
            buf.clear();
            buf.extend_from_slice(&stays);
            b.intern(&mut buf, id, ANY_SEGMENT)
        })?;
        // Closing and canonicalising distribute over union: every literal edge's target is
        // the default's set merged with what its own moves close to.
        let (base, base_hash) = match default_next.checked_sub(1).map(|i| i as usize) {
            Some(i) => (
                b.sets.get(i).map_or_else(|| Rc::from([]), Rc::clone),
                b.hashes.get(i).copied().unwrap_or_default(),
            ),
            None => (Rc::from([]), 0),
        };

        for run in literals.chunk_by(|x, y| x.0 == y.0) {
            let Some(&segment) = run.first().and_then(|(sym, _)| nfa.syms.get(*sym as usize))
            else {
                continue;
            };
            let sym = run.first().map_or(0, |(sym, _)| *sym);
            let bytes = nfa.sym_bytes(sym);
            extra.clear();
            extra.extend(run.iter().map(|(_, next)| *next));
            // The glob mask of the segment: where it goes without this edge.
            let mut mask = 0u32;
            for (bit, glob) in globs.iter().enumerate() {
                if glob_segment_matches(glob.as_bytes(), bytes) {
                    mask |= 1 << bit;
                    extra.extend(stars.iter().filter(|(g, _)| g == glob).map(|(_, n)| *n));
                }
            }
            nfa.close(&mut extra);
            let next = known.target(default_next, base.len() > extra.len(), &extra, || {
                let added = merge(&base, &extra, &mut buf);
                b.intern_closed(&buf, base_hash.wrapping_add(added), id, segment)
            })?;
            // A segment has a key, short or long, when it is 1 to `NAME_MAX` bytes long.
            if !bytes.is_empty() && bytes.len() <= NAME_MAX {
                edges += 1;
                literal_moves.push((sym, next, mask));
            }
        }
        if edges > limits.max_edges {
            return Err(b.too_large("literal edges", edges, limits.max_edges));
        }

        let (glob_first, glob_count) = if globs.is_empty() {
            (0, 0)
        } else if let Some(&first) = groups.get(group.as_slice()) {
            // The group — the state's `**` and star positions, which alone decide the combos'
            // targets — was planned for an earlier state.
            (first, globs.len() as u32)
        } else {
            let first = out.globs.len() as u32;
            for g in &globs {
                out.globs.push(GlobValue::new(g.as_bytes()).ok_or_else(|| {
                    PlanError::Internal {
                        what: format!("star segment `{g}` does not fit the glob array"),
                    }
                })?);
            }
            if out.globs.len() > limits.max_globs {
                return Err(b.too_large("globs", out.globs.len(), limits.max_globs));
            }
            groups.insert(group.clone(), first);
            let mut targets = Vec::with_capacity((1 << globs.len()) - 1);
            for mask in 1u32..(1 << globs.len()) {
                extra.clear();
                let mut label = "";
                for (bit, glob) in globs.iter().enumerate() {
                    if mask & (1 << bit) != 0 {
                        extra.extend(stars.iter().filter(|(g, _)| g == glob).map(|(_, n)| *n));
                        if label.is_empty() {
                            label = glob;
                        }
                    }
                }
                nfa.close(&mut extra);
                let next = known.target(default_next, base.len() > extra.len(), &extra, || {
                    let added = merge(&base, &extra, &mut buf);
                    b.intern_closed(&buf, base_hash.wrapping_add(added), id, label)
                })?;
                if next != default_next {
                    combos.push((ComboKey { group: first, mask }, next));
                }
                targets.push(next);
            }
            group_targets.insert(first, targets);
            if combos.len() > limits.max_combos {
                return Err(b.too_large("glob combos", combos.len(), limits.max_combos));
            }
            (first, globs.len() as u32)
        };

        if !unprotected {
            denied |= protected;
        }
        out.states.push(StateValue {
            accept: accept & !denied,
            default_next,
            glob_first,
            glob_count,
            move_class: 0,
        });
        let targets = group_targets
            .get(&glob_first)
            .filter(|_| glob_count > 0)
            .map_or(&[][..], Vec::as_slice);
        let target = |mask: u32| -> u32 {
            mask.checked_sub(1)
                .and_then(|i| targets.get(i as usize))
                .copied()
                .unwrap_or(default_next)
        };
        moves.push(Moves {
            default: default_next,
            literals: literal_moves
                .iter()
                .map(|&(sym, next, mask)| (sym, next, target(mask)))
                .collect(),
            group: glob_first,
            combos: (1..=targets.len() as u32).map(|m| (m, target(m))).collect(),
        });
        id += 1;
    }
    out.combos = combos;
    Ok(super::minimize::minimize(out, moves, |sym| {
        nfa.sym_bytes(sym)
    }))
}
