//! Equivalence classes of the path automaton's states, for moving directories.
//!
//! Moving a directory moves every path below it, and the kernel checks only the two ends of
//! a `rename(2)`. It lets a directory move only between two states of the same class: the
//! same access bits at the state and at every path below it, whatever the names. So a move
//! can neither carry files out of a carve-out (`.git` renamed, its `hooks` written, renamed
//! back) nor into a grant they lacked.
//!
//! Classes are computed by partition refinement (Moore's algorithm) over the automaton as
//! the kernel walks it: two states stay in one class while their access bits agree and, for
//! every segment, their next states are in one class. A segment's next state is its literal
//! edge if any, else the glob combo of the segment's mask, else the default; literal edges
//! and combos that lead where the fallback would (up to class) are left out of the
//! comparison, so states that differ only in such redundant entries share a class. A pinned
//! state is a class of its own (its pins are keyed by state). Equal classes imply equal
//! behaviour; the converse may fail only by splitting more than needed, which refuses a move,
//! never allows one. Class 0 is the dead state's; live states' classes start at 1.

use std::collections::{BTreeSet, HashMap};

use bee_common::{DEAD_STATE, glob_segment_matches};

use super::paths::PathAutomaton;

/// What a state's transitions are, up to the classes of their targets.
#[derive(Hash, PartialEq, Eq)]
struct Signature {
    class: u32,
    default: u32,
    /// `(segment, class)` of each literal edge that leads elsewhere than its fallback.
    literals: Vec<(Vec<u8>, u32)>,
    /// The star segments and `(mask, class)` of each combo that leads elsewhere than the
    /// default; both empty when every combo does.
    globs: Vec<Vec<u8>>,
    combos: Vec<(u32, u32)>,
}

/// The class of each state, indexed by plan-local id (`classes[0]` is the dead state's, 0).
pub(crate) fn classes(a: &PathAutomaton) -> Vec<u32> {
    let n = a.states.len();
    let mut edges: Vec<Vec<(&[u8], u32)>> = vec![Vec::new(); n + 1];
    for (k, &next) in &a.edges_short {
        if let Some(e) = edges.get_mut(k.state as usize) {
            e.push((k.name.get(..k.len as usize).unwrap_or(&[]), next));
        }
    }
    for (k, &next) in &a.edges_long {
        if let Some(e) = edges.get_mut(k.state as usize) {
            e.push((k.name.get(..k.len as usize).unwrap_or(&[]), next));
        }
    }
    let pinned: BTreeSet<u32> = a.pinned.values().copied().collect();
    let state = |id: usize| a.states.get(id.wrapping_sub(1));

    // Initial partition: access bits, pinned states alone.
    let mut initial: HashMap<(u32, u32), u32> = HashMap::new();
    let mut class = vec![0u32; n + 1];
    for id in 1..=n {
        let Some(s) = state(id) else { continue };
        let key = (
            s.accept,
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
    loop {
        let cls = |s: u32| -> u32 {
            if s == DEAD_STATE {
                0
            } else {
                class.get(s as usize).copied().unwrap_or(0)
            }
        };
        let mut seen: HashMap<Signature, u32> = HashMap::with_capacity(count);
        let mut next_class = vec![0u32; n + 1];
        for id in 1..=n {
            let Some(s) = state(id) else { continue };
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
            let fallback = |name: &[u8]| -> u32 {
                let mut mask = 0u32;
                for (i, g) in globs.iter().enumerate() {
                    if glob_segment_matches(g, name) {
                        mask |= 1 << i;
                    }
                }
                target(mask)
            };
            let mut literals: Vec<(Vec<u8>, u32)> = edges[id]
                .iter()
                .filter(|(name, next)| cls(*next) != cls(fallback(name)))
                .map(|(name, next)| (name.to_vec(), cls(*next)))
                .collect();
            literals.sort_unstable();
            let default = cls(s.default_next);
            let combos: Vec<(u32, u32)> = (1u32..(1 << globs.len()))
                .map(|mask| (mask, cls(target(mask))))
                .filter(|&(_, c)| c != default)
                .collect();
            let globs = if combos.is_empty() {
                Vec::new()
            } else {
                globs.iter().map(|g| g.to_vec()).collect()
            };
            let sig = Signature {
                class: class[id],
                default,
                literals,
                globs,
                combos,
            };
            let fresh = seen.len() as u32 + 1;
            next_class[id] = *seen.entry(sig).or_insert(fresh);
        }
        let refined = seen.len();
        class = next_class;
        if refined == count {
            return class;
        }
        count = refined;
    }
}
