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

use std::collections::BTreeSet;

use bee_common::{DEAD_STATE, glob_segment_matches};

use super::paths::{FxMap, PathAutomaton};
use bee_common::{EdgeKeyLong, EdgeKeyShort};

/// What a state's transitions are, up to the classes of their targets.
#[derive(Hash, PartialEq, Eq)]
struct Signature {
    class: u32,
    default: u32,
    /// `(segment id, class)` of each literal edge that leads elsewhere than its fallback.
    literals: Vec<(u32, u32)>,
    /// The state's glob group and `(mask, class)` of each combo that leads elsewhere than
    /// the default; both empty when every combo does. (Two groups with the same star
    /// segments count as different: finer classes, never wrong ones.)
    group: Option<u32>,
    combos: Vec<(u32, u32)>,
}

/// A state's transitions, as the kernel walks them, computed once.
struct Moves {
    default: u32,
    /// `(segment id, target, fallback)`: the literal edge, and where the segment would go
    /// without it (glob combo or default).
    literals: Vec<(u32, u32, u32)>,
    group: u32,
    /// `(mask, target)` for every non-zero glob mask.
    combos: Vec<(u32, u32)>,
}

fn moves(a: &PathAutomaton) -> Vec<Moves> {
    let n = a.states.len();
    let mut symbols: FxMap<&[u8], u32> = FxMap::default();
    let mut edges: Vec<Vec<(u32, u32, &[u8])>> = (0..=n).map(|_| Vec::new()).collect();
    let names = a
        .edges_short
        .iter()
        .map(|(k, &next)| (k.state, k.name.get(..k.len as usize).unwrap_or(&[]), next))
        .chain(
            a.edges_long
                .iter()
                .map(|(k, &next)| (k.state, k.name.get(..k.len as usize).unwrap_or(&[]), next)),
        );
    for (state, name, next) in names {
        let fresh = symbols.len() as u32;
        let sym = *symbols.entry(name).or_insert(fresh);
        if let Some(e) = edges.get_mut(state as usize) {
            e.push((sym, next, name));
        }
    }
    (0..=n)
        .map(|id| {
            let Some(s) = id.checked_sub(1).and_then(|i| a.states.get(i)) else {
                return Moves {
                    default: DEAD_STATE,
                    literals: Vec::new(),
                    group: 0,
                    combos: Vec::new(),
                };
            };
            let globs: Vec<&[u8]> = (0..s.glob_count)
                .filter_map(|i| a.globs.get(s.glob_first.checked_add(i)? as usize))
                .map(|g| g.pattern())
                .collect();
            let target = |mask: u32| -> u32 {
                if mask == 0 {
                    return s.default_next;
                }
                a.combos
                    .get(&bee_common::ComboKey {
                        group: s.glob_first,
                        mask,
                    })
                    .copied()
                    .unwrap_or(s.default_next)
            };
            let literals = edges[id]
                .iter()
                .map(|&(sym, next, name)| {
                    let mut mask = 0u32;
                    for (i, g) in globs.iter().enumerate() {
                        if glob_segment_matches(g, name) {
                            mask |= 1 << i;
                        }
                    }
                    (sym, next, target(mask))
                })
                .collect();
            Moves {
                default: s.default_next,
                literals,
                group: s.glob_first,
                combos: (1u32..(1 << globs.len())).map(|m| (m, target(m))).collect(),
            }
        })
        .collect()
}

/// The class of each state, indexed by plan-local id (`classes[0]` is the dead state's, 0),
/// the states being first told apart by `bits(accept)`.
fn classes(a: &PathAutomaton, bits: impl Fn(u32) -> u32) -> Vec<u32> {
    let n = a.states.len();
    let moves = moves(a);
    let pinned: BTreeSet<u32> = a.pinned.values().copied().collect();

    // Initial partition: access bits, pinned states alone.
    let mut initial: FxMap<(u32, u32), u32> = FxMap::default();
    let mut class = vec![0u32; n + 1];
    for (i, s) in a.states.iter().enumerate() {
        let id = i + 1;
        let key = (
            bits(s.accept),
            if pinned.contains(&(id as u32)) {
                id as u32
            } else {
                0
            },
        );
        let next = initial.len() as u32 + 1;
        class[id] = *initial.entry(key).or_insert(next);
    }
    let mut count = initial.len();
    let mut next_class = vec![0u32; n + 1];
    loop {
        let cls = |s: u32| -> u32 { class.get(s as usize).copied().unwrap_or(0) };
        let mut seen: FxMap<Signature, u32> =
            FxMap::with_capacity_and_hasher(count * 2, Default::default());
        for id in 1..=n {
            let m = &moves[id];
            let default = cls(m.default);
            let mut literals: Vec<(u32, u32)> = m
                .literals
                .iter()
                .filter(|(_, next, fallback)| cls(*next) != cls(*fallback))
                .map(|(sym, next, _)| (*sym, cls(*next)))
                .collect();
            literals.sort_unstable();
            let combos: Vec<(u32, u32)> = m
                .combos
                .iter()
                .map(|&(mask, t)| (mask, cls(t)))
                .filter(|&(_, c)| c != default)
                .collect();
            let sig = Signature {
                class: class[id],
                default,
                literals,
                group: (!combos.is_empty()).then_some(m.group),
                combos,
            };
            let fresh = seen.len() as u32 + 1;
            next_class[id] = *seen.entry(sig).or_insert(fresh);
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
pub(crate) fn minimize(a: PathAutomaton) -> PathAutomaton {
    let classes = classes(&a, |b| b);
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
        return with_move_classes(a);
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
        .map(|(_, v)| bee_common::StateValue {
            default_next: map(v.default_next),
            glob_first: group.get(&v.glob_first).copied().unwrap_or(0),
            ..*v
        })
        .collect();
    let edges_short = a
        .edges_short
        .iter()
        .filter(|(k, _)| keep.get(k.state as usize).copied().unwrap_or(false))
        .map(|(k, &n)| {
            (
                EdgeKeyShort {
                    state: map(k.state),
                    ..*k
                },
                map(n),
            )
        })
        .collect();
    let edges_long = a
        .edges_long
        .iter()
        .filter(|(k, _)| keep.get(k.state as usize).copied().unwrap_or(false))
        .map(|(k, &n)| {
            (
                EdgeKeyLong {
                    state: map(k.state),
                    ..*k
                },
                map(n),
            )
        })
        .collect();
    with_move_classes(PathAutomaton {
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
                Some((bee_common::ComboKey { group: g, ..k }, map(n)))
            })
            .collect(),
        pinned: a.pinned.into_iter().map(|(r, s)| (r, map(s))).collect(),
    })
}

/// Sets each state's [`bee_common::StateValue::move_class`]: the classes of the automaton
/// refined with EXEC ignored wherever READ is granted. A directory may move between two
/// paths of one move class: below them every path grants the same, except that a readable
/// path may gain or lose EXEC. That is no new power: moving needs WRITE on both ends, so
/// whatever the agent wrote into the directory it could have written at the destination,
/// and what it did not write (files it found there) it can read, and runs confined either
/// way. Build tools need it: cargo makes `target/` under a temporary name and renames it
/// into place, and only `target/**` is executable.
fn with_move_classes(mut a: PathAutomaton) -> PathAutomaton {
    const EXEC_ANY: u32 = bee_common::ACCESS_EXEC | bee_common::ACCESS_EXEC_PINNED;
    let moves = classes(&a, |b| {
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
