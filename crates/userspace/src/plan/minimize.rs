//! Minimising the path automaton: states that grant alike at themselves and at every path
//! below them become one state.
//!
//! Two reasons. Carve-outs anchored nowhere (the protected paths, `/**/.git/hooks/**`) make
//! the subset construction track their positions in every state, though inside a carved
//! subtree nothing they say matters any more; merged, the automaton is about as small as
//! without them. And moving a directory moves every path below it, while the kernel checks
//! only the two ends of a `rename(2)`: it lets a directory move only between two paths that
//! end in the *same* state, which after minimisation means the same grants at every path
//! below, whatever the names — so no file leaves a carve-out or enters a grant it lacked.
//!
//! Equivalence is computed by partition refinement (Moore's algorithm) over the automaton as
//! the kernel walks it: two states stay in one class while their access bits agree and, for
//! every segment, their next states are in one class. A segment's next state is its literal
//! edge if any, else the glob combo of the segment's mask, else the default; literal edges
//! and combos that lead where the fallback would (up to class) are left out of the
//! comparison. A pinned state stays a class of its own (its pins are keyed by state). Merged
//! states are always equivalent; some equivalent states may stay apart (two glob sets that
//! happen to accept the same names), which only refuses a move, never allows one.

use std::collections::BTreeMap;

use bee_common::{
    ComboKey, DEAD_STATE, EdgeKeyLong, EdgeKeyShort, GlobValue, SHORT_SEGMENT_MAX, StateValue,
};

use super::paths::{FxMap, PathAutomaton};

/// The subset construction's automaton, before minimisation: a [`PathAutomaton`] whose
/// combos are still the vector they were pushed to, in key order (keys are unique; were one
/// repeated, the last would count, as in a map built from them), and whose literal edges
/// are only in its states' [`Moves`]: most of them belong to states minimisation merges
/// away, so no key or map is made for them.
#[derive(Debug, Default)]
pub(crate) struct Draft {
    pub start: u32,
    pub states: Vec<StateValue>,
    pub globs: Vec<GlobValue>,
    pub combos: Vec<(ComboKey, u32)>,
    /// As [`PathAutomaton::pinned`].
    pub pinned: BTreeMap<usize, u32>,
}

impl Draft {
    /// The automaton as it is, its combos in a map and its edges those of `moves`.
    fn into_automaton<'n>(self, moves: &[Moves], name: impl Fn(u32) -> &'n [u8]) -> PathAutomaton {
        let (edges_short, edges_long) = edges(moves, name);
        PathAutomaton {
            start: self.start,
            states: self.states,
            globs: self.globs,
            edges_short,
            edges_long,
            combos: self.combos.into_iter().collect(),
            pinned: self.pinned,
        }
    }
}

/// The literal edges of `moves` (`moves[id]` state `id`'s, `moves[0]` the dead state's),
/// keyed by state and segment (`name` gives a segment id's bytes): short keys for segments
/// of up to [`SHORT_SEGMENT_MAX`] bytes, long ones above. Each state's edges are sorted
/// before the next state's are added, so the buffers are in key order (the state is the
/// key's first field) and the maps are built from them in one pass.
fn edges<'n>(
    moves: &[Moves],
    name: impl Fn(u32) -> &'n [u8],
) -> (BTreeMap<EdgeKeyShort, u32>, BTreeMap<EdgeKeyLong, u32>) {
    let count = moves.iter().map(|m| m.literals.len()).sum();
    let mut short: Vec<(EdgeKeyShort, u32)> = Vec::with_capacity(count);
    let mut long: Vec<(EdgeKeyLong, u32)> = Vec::new();
    for (id, m) in moves.iter().enumerate().skip(1) {
        let (short_from, long_from) = (short.len(), long.len());
        for &(sym, next, _) in &m.literals {
            let bytes = name(sym);
            if bytes.len() <= SHORT_SEGMENT_MAX {
                short.extend(EdgeKeyShort::new(id as u32, bytes).map(|k| (k, next)));
            } else {
                long.extend(EdgeKeyLong::new(id as u32, bytes).map(|k| (k, next)));
            }
        }
        if let Some(new) = short.get_mut(short_from..) {
            new.sort_unstable();
        }
        if let Some(new) = long.get_mut(long_from..) {
            new.sort_unstable();
        }
    }
    (short.into_iter().collect(), long.into_iter().collect())
}

/// A state's transitions, as the kernel walks them: what the subset construction found for
/// each state, so that refinement neither looks up edges by name nor matches globs again.
#[derive(Debug, Clone, Default)]
pub(crate) struct Moves {
    /// The default (no literal edge, no glob matches).
    pub default: u32,
    /// `(segment id, target, fallback)` of each literal edge, ascending by segment id: the
    /// edge, and where the segment would go without it (glob combo or default).
    pub literals: Vec<(u32, u32, u32)>,
    /// The state's glob group (`glob_first`, 0 without globs).
    pub group: u32,
    /// `(mask, target)` for every non-zero glob mask.
    pub combos: Vec<(u32, u32)>,
}

/// The class of each state, indexed by plan-local id (`classes[0]` is the dead state's, 0),
/// the states being first told apart by `bits(accept)`; `moves` is indexed the same way.
///
/// A state's signature — its class, the class of its default, `(segment id, class)` of each
/// literal edge that leads elsewhere than its fallback, and, when some combo leads elsewhere
/// than the default, the glob group and `(mask, class)` of each such combo — is written
/// into one buffer, and states with equal signatures stay in one class. (Two groups with the
/// same star segments count as different: finer classes, never wrong ones.)
fn classes(
    states: &[StateValue],
    pinned_at: &BTreeMap<usize, u32>,
    moves: &[Moves],
    bits: impl Fn(u32) -> u32,
) -> Vec<u32> {
    let n = states.len();
    let mut pinned = vec![false; n + 1];
    for &s in pinned_at.values() {
        if let Some(p) = pinned.get_mut(s as usize) {
            *p = true;
        }
    }

    // Initial partition: access bits, pinned states alone.
    let mut initial: FxMap<(u32, u32), u32> = FxMap::default();
    let mut class = vec![0u32; n + 1];
    for (i, s) in states.iter().enumerate() {
        let id = i + 1;
        let key = (
            bits(s.accept),
            if pinned.get(id).copied().unwrap_or(false) {
                id as u32
            } else {
                0
            },
        );
        let next = initial.len() as u32 + 1;
        if let Some(c) = class.get_mut(id) {
            *c = *initial.entry(key).or_insert(next);
        }
    }
    let mut count = initial.len();
    let mut next_class = vec![0u32; n + 1];
    let mut words: Vec<u32> = Vec::new();
    let mut ends: Vec<usize> = Vec::with_capacity(n + 1);
    loop {
        let cls = |s: u32| -> u32 { class.get(s as usize).copied().unwrap_or(0) };
        words.clear();
        ends.clear();
        for (id, m) in moves.iter().enumerate().take(n + 1).skip(1) {
            let default = cls(m.default);
            words.push(cls(id as u32));
            words.push(default);
            let count_at = words.len();
            words.push(0);
            for &(sym, next, fallback) in &m.literals {
                let c = cls(next);
                if c != cls(fallback) {
                    words.push(sym);
                    words.push(c);
                }
            }
            let literals = (words.len() - count_at - 1) as u32;
            if let Some(w) = words.get_mut(count_at) {
                *w = literals;
            }
            let group_at = words.len();
            words.push(m.group);
            for &(mask, target) in &m.combos {
                let c = cls(target);
                if c != default {
                    words.push(mask);
                    words.push(c);
                }
            }
            if words.len() == group_at + 1 {
                words.truncate(group_at);
            }
            ends.push(words.len());
        }
        let mut seen: FxMap<&[u32], u32> =
            FxMap::with_capacity_and_hasher(count * 2, Default::default());
        let mut from = 0;
        for (id, &to) in ends.iter().enumerate() {
            let sig = words.get(from..to).unwrap_or(&[]);
            from = to;
            let fresh = seen.len() as u32 + 1;
            if let Some(c) = next_class.get_mut(id + 1) {
                *c = *seen.entry(sig).or_insert(fresh);
            }
        }
        let refined = seen.len();
        std::mem::swap(&mut class, &mut next_class);
        if refined == count {
            return class;
        }
        count = refined;
    }
}

/// Merges the equivalent states of `a`: each class keeps its first state (in id order, so
/// the start state stays 1), renumbered densely; edges of merged-away states are dropped, and
/// every target points at its class's state.
///
/// `moves[id]` are state `id`'s transitions (`moves[0]` the dead state's), and `name` gives
/// the bytes of a segment id.
pub(crate) fn minimize<'n>(
    a: Draft,
    moves: Vec<Moves>,
    name: impl Fn(u32) -> &'n [u8],
) -> PathAutomaton {
    let classes = classes(&a.states, &a.pinned, &moves, |b| b);
    let mut new_id = vec![DEAD_STATE; a.states.len() + 1];
    let mut of_class: FxMap<u32, u32> = FxMap::default();
    let mut keep = vec![false; a.states.len() + 1];
    for id in 1..=a.states.len() {
        let next = of_class.len() as u32 + 1;
        let n = *of_class.entry(classes[id]).or_insert(next);
        keep[id] = n == next;
        new_id[id] = n;
    }
    if of_class.len() == a.states.len() {
        let automaton = a.into_automaton(&moves, name);
        return with_move_classes(automaton, &moves);
    }
    let map = |s: u32| -> u32 { new_id.get(s as usize).copied().unwrap_or(DEAD_STATE) };
    // Glob groups still used, renumbered in order of first use.
    let mut globs = Vec::new();
    let mut group: FxMap<u32, u32> = FxMap::default();
    for (i, v) in a.states.iter().enumerate() {
        if !keep[i + 1] || v.glob_count == 0 || group.contains_key(&v.glob_first) {
            continue;
        }
        group.insert(v.glob_first, globs.len() as u32);
        let first = v.glob_first as usize;
        globs.extend_from_slice(
            a.globs
                .get(first..first + v.glob_count as usize)
                .unwrap_or(&[]),
        );
    }
    let states = a
        .states
        .iter()
        .enumerate()
        .filter(|(i, _)| keep[i + 1])
        .map(|(_, v)| StateValue {
            default_next: map(v.default_next),
            glob_first: group.get(&v.glob_first).copied().unwrap_or(0),
            ..*v
        })
        .collect();
    // The kept states' moves, with their targets and groups renumbered.
    let moves: Vec<Moves> = moves
        .into_iter()
        .enumerate()
        .filter(|&(id, _)| id == 0 || keep.get(id).copied().unwrap_or(false))
        .map(|(_, m)| Moves {
            default: map(m.default),
            literals: m
                .literals
                .iter()
                .map(|&(sym, next, fallback)| (sym, map(next), map(fallback)))
                .collect(),
            group: group.get(&m.group).copied().unwrap_or(0),
            combos: m.combos.iter().map(|&(mask, t)| (mask, map(t))).collect(),
        })
        .collect();
    let (edges_short, edges_long) = edges(&moves, name);
    let automaton = PathAutomaton {
        start: map(a.start),
        states,
        globs,
        edges_short,
        edges_long,
        combos: a
            .combos
            .into_iter()
            .filter_map(|(k, n)| {
                let g = *group.get(&k.group)?;
                Some((ComboKey { group: g, ..k }, map(n)))
            })
            .collect(),
        pinned: a.pinned.into_iter().map(|(r, s)| (r, map(s))).collect(),
    };
    with_move_classes(automaton, &moves)
}

/// Sets each state's [`bee_common::StateValue::move_class`]: the classes of the automaton
/// refined with EXEC ignored wherever READ is granted. A directory may move between two
/// paths of one move class: below them every path grants the same, except that a readable
/// path may gain or lose EXEC. That is no new power: moving needs WRITE on both ends, so
/// whatever the agent wrote into the directory it could have written at the destination,
/// and what it did not write (files it found there) it can read, and runs confined either
/// way. Build tools need it: cargo makes `target/` under a temporary name and renames it
/// into place, and only `target/**` is executable.
fn with_move_classes(mut a: PathAutomaton, moves: &[Moves]) -> PathAutomaton {
    const EXEC_ANY: u32 = bee_common::ACCESS_EXEC | bee_common::ACCESS_EXEC_PINNED;
    let moves = classes(&a.states, &a.pinned, moves, |b| {
        if b & (bee_common::ACCESS_READ | bee_common::ACCESS_WRITE) != 0 {
            b & !EXEC_ANY
        } else {
            b
        }
    });
    for (s, &c) in a.states.iter_mut().zip(moves.iter().skip(1)) {
        s.move_class = c;
    }
    a
}
