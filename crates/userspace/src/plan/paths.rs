//! Path rules → one deterministic segment automaton, by subset construction.
//!
//! Every path rule of a policy is lowered to a sequence of *elements* (a literal segment, a star
//! segment or `**`). The NFA's positions are "rule `r` has matched its first `i` elements"; a
//! position before a literal or star segment moves to the next position on a matching segment,
//! a position before `**` stays on any segment and is epsilon-skippable, and a position after
//! the last element accepts the rule's access bits. The DFA's states are epsilon-closed sets of
//! positions, numbered in breadth-first order from the start set (`/`), so the same policy
//! always gives the same ids.
//!
//! For each DFA state the planner emits what the kernel's walk ([`bee_common::walk`]) consults:
//! a literal edge for every literal segment at the state (its target also includes the star and
//! `**` moves that segment triggers), the state's distinct star segments, one combo per non-zero
//! glob mask whose target differs from the default, and the default (only `**` moves).

use std::collections::{BTreeMap, HashMap, VecDeque};

use bee_common::{
    ACCESS_EXEC_PINNED, ComboKey, DEAD_STATE, EdgeKeyLong, EdgeKeyShort, GLOB_MAX,
    GLOBS_PER_STATE_MAX, GlobValue, NAME_MAX, SHORT_SEGMENT_MAX, StateValue, glob_segment_matches,
};
use bee_core::compiled::Origin;
use bee_core::glob::{PathPattern, split_segments};

use super::{PlanError, PlanLimits, RuleUse};

/// One path rule to compile: a pattern, the access bits a match grants and where it came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathInput<'a> {
    pub pattern: &'a PathPattern,
    pub accept: u32,
    pub origin: &'a Origin,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elem<'a> {
    Literal(&'a str),
    Star(&'a str),
    AnyDepth,
}

/// The NFA: position `p` is before element `elems[p]` of rule `rule[p]` (`None` after the last).
struct Nfa<'a> {
    elem: Vec<Option<Elem<'a>>>,
    rule: Vec<u32>,
    starts: Vec<u32>,
}

/// The elements of one rule; `postfix` is the `*SUFFIX` star segment of a postfix rule.
fn lower<'a>(input: &PathInput<'a>, postfix: Option<&'a str>) -> Result<Vec<Elem<'a>>, PlanError> {
    let literals = |root: &'a str| split_segments(root).into_iter().map(Elem::Literal);
    let elems: Vec<Elem<'a>> = match input.pattern {
        PathPattern::Exact { path } => literals(path).collect(),
        PathPattern::Subtree { root } => literals(root).chain([Elem::AnyDepth]).collect(),
        PathPattern::Postfix { root, .. } => literals(root)
            .chain([Elem::AnyDepth])
            .chain(postfix.map(Elem::Star))
            .collect(),
        PathPattern::Segment { root, name } => literals(root)
            .chain([Elem::AnyDepth, Elem::Literal(name.as_str())])
            .collect(),
        PathPattern::BoundedStar { segments, subtree } => segments
            .iter()
            .map(|s| {
                if s.contains('*') {
                    Elem::Star(s.as_str())
                } else {
                    Elem::Literal(s.as_str())
                }
            })
            .chain(subtree.then_some(Elem::AnyDepth))
            .collect(),
    };
    for e in &elems {
        match *e {
            Elem::Literal(s) if s.len() > NAME_MAX => {
                return Err(PlanError::SegmentTooLong {
                    origin: input.origin.clone(),
                    len: s.len(),
                });
            }
            Elem::Star(s) if s.len() > GLOB_MAX => {
                return Err(PlanError::GlobTooLong {
                    origin: input.origin.clone(),
                    glob: s.to_owned(),
                });
            }
            _ => {}
        }
    }
    Ok(elems)
}

impl<'a> Nfa<'a> {
    fn new(inputs: &[PathInput<'a>], postfix_globs: &'a [String]) -> Result<Self, PlanError> {
        let mut nfa = Nfa {
            elem: Vec::new(),
            rule: Vec::new(),
            starts: Vec::new(),
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
            let elems = lower(input, postfix.map(String::as_str))?;
            nfa.starts.push(nfa.elem.len() as u32);
            let r = r as u32;
            for e in elems {
                nfa.elem.push(Some(e));
                nfa.rule.push(r);
            }
            nfa.elem.push(None);
            nfa.rule.push(r);
        }
        Ok(nfa)
    }

    /// Adds the epsilon moves (skipping `**`) and sorts.
    fn close(&self, mut set: Vec<u32>) -> Vec<u32> {
        let mut i = 0;
        while let Some(&p) = set.get(i) {
            if let Some(Some(Elem::AnyDepth)) = self.elem.get(p as usize) {
                set.push(p + 1);
            }
            i += 1;
        }
        set.sort_unstable();
        set.dedup();
        set
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

struct Builder<'n, 'a> {
    nfa: &'n Nfa<'a>,
    inputs: &'n [PathInput<'a>],
    limits: &'n PlanLimits,
    ids: HashMap<Vec<u32>, u32>,
    /// `sets[i]` is the position set of local state `i + 1`.
    sets: Vec<Vec<u32>>,
    /// How each state was first reached: parent state and segment, for diagnostics.
    via: Vec<(u32, String)>,
    queue: VecDeque<u32>,
}

impl Builder<'_, '_> {
    fn intern(&mut self, set: Vec<u32>, parent: u32, label: &str) -> Result<u32, PlanError> {
        if set.is_empty() {
            return Ok(DEAD_STATE);
        }
        if let Some(&id) = self.ids.get(&set) {
            return Ok(id);
        }
        if self.sets.len() >= self.limits.max_states {
            return Err(self.too_large("states", self.sets.len() + 1, self.limits.max_states));
        }
        let id = self.sets.len() as u32 + 1;
        self.ids.insert(set.clone(), id);
        self.sets.push(set);
        self.via.push((parent, label.to_owned()));
        self.queue.push_back(id);
        Ok(id)
    }

    /// An example path reaching `state`, with star segments as written.
    fn example_path(&self, mut state: u32) -> String {
        let mut labels = Vec::new();
        while let Some((parent, label)) = self.via.get(state.wrapping_sub(1) as usize) {
            if *parent == DEAD_STATE {
                break;
            }
            labels.push(label.as_str());
            state = *parent;
        }
        labels.reverse();
        bee_core::glob::join_segments(&labels)
    }

    /// The refusal for exceeding a size cap, naming the rules present in the most states.
    fn too_large(&self, what: &'static str, count: usize, cap: usize) -> PlanError {
        let mut uses: BTreeMap<u32, usize> = BTreeMap::new();
        for set in &self.sets {
            let mut rules: Vec<u32> = set
                .iter()
                .filter_map(|&p| self.nfa.rule.get(p as usize).copied())
                .collect();
            rules.dedup();
            for r in rules {
                *uses.entry(r).or_default() += 1;
            }
        }
        let mut ranked: Vec<(usize, u32)> = uses.into_iter().map(|(r, n)| (n, r)).collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
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

/// Builds the automaton for `inputs`.
pub(crate) fn build(
    inputs: &[PathInput<'_>],
    limits: &PlanLimits,
) -> Result<PathAutomaton, PlanError> {
    let globs_text = postfix_globs(inputs);
    let nfa = Nfa::new(inputs, &globs_text)?;
    let mut out = PathAutomaton::default();
    let mut b = Builder {
        nfa: &nfa,
        inputs,
        limits,
        ids: HashMap::new(),
        sets: Vec::new(),
        via: Vec::new(),
        queue: VecDeque::new(),
    };
    let start = nfa.close(nfa.starts.clone());
    out.start = b.intern(start, DEAD_STATE, "")?;
    let mut glob_lists: HashMap<Vec<&str>, u32> = HashMap::new();

    while let Some(id) = b.queue.pop_front() {
        let Some(set) = b.sets.get(id as usize - 1).cloned() else {
            break;
        };
        let mut accept = 0u32;
        let mut stays: Vec<u32> = Vec::new();
        let mut literals: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        let mut stars: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for &p in &set {
            let rule = nfa.rule.get(p as usize).copied().unwrap_or_default();
            match nfa.elem.get(p as usize).copied().flatten() {
                None => {
                    let Some(input) = inputs.get(rule as usize) else {
                        continue;
                    };
                    accept |= input.accept;
                    if input.accept & ACCESS_EXEC_PINNED != 0 {
                        out.pinned.insert(rule as usize, id);
                    }
                }
                Some(Elem::AnyDepth) => stays.push(p),
                Some(Elem::Literal(s)) => literals.entry(s).or_default().push(p + 1),
                Some(Elem::Star(s)) => stars.entry(s).or_default().push(p + 1),
            }
        }
        if stars.len() > GLOBS_PER_STATE_MAX {
            let mut origins: Vec<Origin> = Vec::new();
            for p in stars.values().flatten() {
                let rule = nfa.rule.get(*p as usize).copied().unwrap_or_default();
                if let Some(i) = inputs.get(rule as usize) {
                    if !origins.contains(i.origin) {
                        origins.push(i.origin.clone());
                    }
                }
            }
            return Err(PlanError::TooManyGlobs {
                at: b.example_path(id),
                globs: stars.keys().map(|s| (*s).to_owned()).collect(),
                origins,
            });
        }

        let default_next = b.intern(nfa.close(stays.clone()), id, "…")?;

        for (segment, nexts) in &literals {
            let mut target = stays.clone();
            target.extend(nexts);
            for (glob, gnexts) in &stars {
                if glob_segment_matches(glob.as_bytes(), segment.as_bytes()) {
                    target.extend(gnexts);
                }
            }
            let next = b.intern(nfa.close(target), id, segment)?;
            let bytes = segment.as_bytes();
            if bytes.len() <= SHORT_SEGMENT_MAX {
                if let Some(key) = EdgeKeyShort::new(id, bytes) {
                    out.edges_short.insert(key, next);
                }
            } else if let Some(key) = EdgeKeyLong::new(id, bytes) {
                out.edges_long.insert(key, next);
            }
        }
        let edges = out.edges_short.len() + out.edges_long.len();
        if edges > limits.max_edges {
            return Err(b.too_large("literal edges", edges, limits.max_edges));
        }

        let (glob_first, glob_count) = if stars.is_empty() {
            (0, 0)
        } else {
            let list: Vec<&str> = stars.keys().copied().collect();
            let first = match glob_lists.get(&list) {
                Some(&first) => first,
                None => {
                    let first = out.globs.len() as u32;
                    for g in &list {
                        out.globs.push(GlobValue::new(g.as_bytes()).ok_or_else(|| {
                            PlanError::Internal {
                                what: format!("star segment `{g}` does not fit the glob array"),
                            }
                        })?);
                    }
                    if out.globs.len() > limits.max_globs {
                        return Err(b.too_large("globs", out.globs.len(), limits.max_globs));
                    }
                    glob_lists.insert(list.clone(), first);
                    first
                }
            };
            let nexts: Vec<&Vec<u32>> = stars.values().collect();
            for mask in 1u32..(1 << list.len()) {
                let mut target = stays.clone();
                let mut label = "";
                for (bit, gnexts) in nexts.iter().enumerate() {
                    if mask & (1 << bit) != 0 {
                        target.extend(gnexts.iter());
                        if label.is_empty() {
                            label = list.get(bit).copied().unwrap_or("*");
                        }
                    }
                }
                let next = b.intern(nfa.close(target), id, label)?;
                if next != default_next {
                    out.combos.insert(ComboKey { state: id, mask }, next);
                }
            }
            if out.combos.len() > limits.max_combos {
                return Err(b.too_large("glob combos", out.combos.len(), limits.max_combos));
            }
            (first, list.len() as u32)
        };

        out.states.push(StateValue {
            accept,
            default_next,
            glob_first,
            glob_count,
        });
    }
    Ok(out)
}
