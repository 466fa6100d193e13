//! Stage two: [`CompiledPolicy`] → [`EnforcementPlan`], the exact contents of the kernel maps.
//!
//! * Path rules (`fs.read`, `fs.write`, `exec`, `net.unix`) become one deterministic automaton
//!   over path segments (module `paths`), walked by the kernel as [`bee_common::walk()`] does.
//! * Pinned executables become exec-pin entries keyed by the automaton state their path ends in
//!   and the file's kernel `(dev, ino)` ([`exec`]).
//! * Network grants become LPM-trie entries with their port rules pushed down (module `net`).
//!
//! Planning is deterministic: the same policy gives the same plan, entry for entry. A plan uses
//! plan-local ids (states from 1, globs from 0, policy id 0); [`EnforcementPlan::relocated`]
//! moves it to where the loader places it in the shared maps. Anything the kernel matcher could
//! not enforce exactly is refused with a [`PlanError`] naming the rule.

mod error;
mod exec;
mod minimize;
mod names;
pub(crate) mod net;
mod paths;
mod protect;

use std::collections::BTreeMap;

use bee_common::{
    ACCESS_EXEC, ACCESS_EXEC_PINNED, ACCESS_READ, ACCESS_UNIX, ACCESS_WRITE, ComboKey, DEAD_STATE,
    EdgeKeyLong, EdgeKeyShort, ExecPinKey, GlobValue, LpmKeyV4, LpmKeyV6, NetValue,
    SHORT_SEGMENT_MAX, ScopeValue, SegmentAutomaton, StateValue, WalkError,
};
use bee_core::CompiledPolicy;
use bee_core::compiled::ExecRule;
use bee_core::glob::PathPattern;
use serde::Serialize;

pub use error::{PlanError, RuleUse};
pub use exec::kernel_dev;
pub use names::NamePlan;

use paths::{PathInput, Role};

/// Size caps for one policy's plan; exceeding one is a [`PlanError::TooLarge`] (or
/// [`PlanError::TooManyNetPrefixes`]). The loader sizes the shared maps from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlanLimits {
    /// Automaton states (entries of the state array), excluding the dead state.
    pub max_states: usize,
    /// Literal edges, short and long together.
    pub max_edges: usize,
    /// Glob array entries.
    pub max_globs: usize,
    /// Combo map entries.
    pub max_combos: usize,
    /// LPM-trie entries, IPv4 and IPv6 together.
    pub max_net_prefixes: usize,
}

impl Default for PlanLimits {
    /// 65,536 states, 262,144 edges, 4,096 globs, 65,536 combos and 16,384 address blocks:
    /// about 20 MiB of map memory at most, far above what hand-written policies need.
    fn default() -> Self {
        Self {
            max_states: 1 << 16,
            max_edges: 1 << 18,
            max_globs: 1 << 12,
            max_combos: 1 << 16,
            max_net_prefixes: 1 << 14,
        }
    }
}

/// Where the loader places a plan in the shared maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Placement {
    /// The policy id (first word of the LPM keys, value of the exec-pin entries).
    pub policy_id: u32,
    /// Added to every non-dead state id: the plan's states become
    /// `state_base + 1 ..= state_base + states`.
    pub state_base: u32,
    /// Added to every glob index: the plan's globs become `glob_base .. glob_base + globs`.
    pub glob_base: u32,
}

/// Entry counts of a plan, for `bee validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct PlanStats {
    /// Automaton states (state array entries), excluding the dead state.
    pub states: usize,
    /// Literal edges for segments of at most 48 bytes.
    pub edges_short: usize,
    /// Literal edges for segments of 49..=255 bytes.
    pub edges_long: usize,
    /// Glob array entries.
    pub globs: usize,
    /// Combo map entries.
    pub combos: usize,
    /// Exec-pin map entries.
    pub exec_pins: usize,
    /// IPv4 LPM-trie entries.
    pub net_v4_prefixes: usize,
    /// IPv6 LPM-trie entries.
    pub net_v6_prefixes: usize,
}

/// The exact contents of the kernel maps for one policy.
///
/// State ids are `placement.state_base + 1 ..` (0 is the dead state), glob indices
/// `placement.glob_base ..`, and the LPM keys and exec-pin values carry
/// `placement.policy_id`. A fresh plan has the default (all-zero) placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnforcementPlan {
    placement: Placement,
    start_state: u32,
    states: Vec<StateValue>,
    globs: Vec<GlobValue>,
    edges_short: BTreeMap<EdgeKeyShort, u32>,
    edges_long: BTreeMap<EdgeKeyLong, u32>,
    combos: BTreeMap<ComboKey, u32>,
    exec_pins: BTreeMap<ExecPinKey, u32>,
    net_v4: BTreeMap<LpmKeyV4, NetValue>,
    net_v6: BTreeMap<LpmKeyV6, NetValue>,
    names: NamePlan,
}

impl EnforcementPlan {
    /// Plans `policy` with the default [`PlanLimits`].
    ///
    /// # Errors
    /// [`PlanError`] when a rule cannot be enforced exactly by the kernel matcher or the plan
    /// exceeds a limit; the error names the rule and what to change.
    pub fn new(policy: &CompiledPolicy) -> Result<Self, PlanError> {
        Self::with_limits(policy, &PlanLimits::default())
    }

    /// Plans `policy` within `limits`.
    ///
    /// # Errors
    /// As [`EnforcementPlan::new`].
    pub fn with_limits(policy: &CompiledPolicy, limits: &PlanLimits) -> Result<Self, PlanError> {
        fn input(rule: &bee_core::compiled::PathRule, accept: u32) -> PathInput<'_> {
            carve(rule, accept, Role::Grant)
        }
        fn carve(rule: &bee_core::compiled::PathRule, accept: u32, role: Role) -> PathInput<'_> {
            PathInput {
                pattern: &rule.pattern,
                accept,
                role,
                origin: &rule.origin,
            }
        }
        fn exec_input(rule: &ExecRule, accept: u32) -> PathInput<'_> {
            PathInput {
                pattern: &rule.pattern,
                accept,
                role: Role::Grant,
                origin: &rule.origin,
            }
        }
        let protected = protect::narrowed(&policy.fs.protect, &policy.fs.write);
        let mut inputs: Vec<PathInput<'_>> = Vec::new();
        inputs.extend(policy.fs.read.iter().map(|r| input(r, ACCESS_READ)));
        inputs.extend(
            policy
                .fs
                .write
                .iter()
                .map(|r| input(r, ACCESS_READ | ACCESS_WRITE)),
        );
        inputs.extend(policy.net.unix.iter().map(|r| input(r, ACCESS_UNIX)));
        inputs.extend(
            policy
                .exec
                .iter()
                .filter(|r| r.pin.is_none())
                .map(|r| exec_input(r, ACCESS_EXEC)),
        );
        let pinned: Vec<&ExecRule> = policy.exec.iter().filter(|r| r.pin.is_some()).collect();
        for rule in &pinned {
            if !matches!(rule.pattern, PathPattern::Exact { .. }) {
                return Err(PlanError::PinNotExact {
                    origin: rule.origin.clone(),
                    pattern: rule.pattern.to_string(),
                });
            }
        }
        let pin_offset = inputs.len();
        inputs.extend(pinned.iter().map(|r| exec_input(r, ACCESS_EXEC_PINNED)));
        // Carve-outs (bee_core::compiled::FsGrants): after every grant, so the grants keep
        // their indices.
        const EXEC_ANY: u32 = ACCESS_EXEC | ACCESS_EXEC_PINNED;
        let fs = &policy.fs;
        inputs.extend(fs.deny.iter().map(|r| {
            carve(
                r,
                ACCESS_READ | ACCESS_WRITE | EXEC_ANY | ACCESS_UNIX,
                Role::Deny,
            )
        }));
        inputs.extend(
            policy
                .exec_deny
                .iter()
                .map(|r| carve(r, EXEC_ANY, Role::Deny)),
        );
        inputs.extend(protected.iter().map(|(pattern, origin)| PathInput {
            pattern,
            accept: ACCESS_WRITE,
            role: Role::Protect,
            origin,
        }));
        inputs.extend(fs.unprotect.iter().map(|r| carve(r, 0, Role::Unprotect)));

        let automaton = paths::build(&inputs, limits)?;
        let ends: BTreeMap<usize, u32> = automaton
            .pinned
            .iter()
            .filter_map(|(&i, &s)| Some((i.checked_sub(pin_offset)?, s)))
            .collect();
        if ends.len() != pinned.len() {
            return Err(PlanError::Internal {
                what: "a pinned executable's path has no accepting state".to_owned(),
            });
        }
        let exec_pins = exec::pins(&pinned, &ends)?;
        let network = net::build(&policy.net.allow, limits)?;
        Ok(Self {
            placement: Placement::default(),
            start_state: automaton.start,
            states: automaton.states,
            globs: automaton.globs,
            edges_short: automaton.edges_short,
            edges_long: automaton.edges_long,
            combos: automaton.combos,
            exec_pins,
            net_v4: network.v4,
            net_v6: network.v6,
            names: NamePlan::new(&policy.net.hosts, &policy.net.allow),
        })
    }

    /// The same plan moved to `to`: state ids, glob indices and policy ids rewritten.
    ///
    /// # Errors
    /// [`PlanError::IdOverflow`] if an id would not fit in 32 bits.
    pub fn relocated(&self, to: Placement) -> Result<Self, PlanError> {
        let overflow = || PlanError::IdOverflow { placement: to };
        let from = self.placement;
        let state = |s: u32| -> Result<u32, PlanError> {
            if s == DEAD_STATE {
                return Ok(DEAD_STATE);
            }
            s.checked_sub(from.state_base)
                .and_then(|local| local.checked_add(to.state_base))
                .ok_or_else(overflow)
        };
        let last = u32::try_from(self.states.len()).map_err(|_| overflow())?;
        state(from.state_base.saturating_add(last))?;
        let glob_last = u32::try_from(self.globs.len()).map_err(|_| overflow())?;
        to.glob_base.checked_add(glob_last).ok_or_else(overflow)?;
        let glob = |g: u32| -> Result<u32, PlanError> {
            g.checked_sub(from.glob_base)
                .and_then(|local| local.checked_add(to.glob_base))
                .ok_or_else(overflow)
        };
        let states = self
            .states
            .iter()
            .map(|v| {
                Ok(StateValue {
                    accept: v.accept,
                    default_next: state(v.default_next)?,
                    glob_first: if v.glob_count == 0 {
                        0
                    } else {
                        glob(v.glob_first)?
                    },
                    glob_count: v.glob_count,
                    move_class: v.move_class,
                })
            })
            .collect::<Result<_, PlanError>>()?;
        let edges_short = self
            .edges_short
            .iter()
            .map(|(k, &n)| {
                Ok((
                    EdgeKeyShort {
                        state: state(k.state)?,
                        ..*k
                    },
                    state(n)?,
                ))
            })
            .collect::<Result<_, PlanError>>()?;
        let edges_long = self
            .edges_long
            .iter()
            .map(|(k, &n)| {
                Ok((
                    EdgeKeyLong {
                        state: state(k.state)?,
                        ..*k
                    },
                    state(n)?,
                ))
            })
            .collect::<Result<_, PlanError>>()?;
        let combos = self
            .combos
            .iter()
            .map(|(k, &n)| {
                Ok((
                    ComboKey {
                        group: glob(k.group)?,
                        ..*k
                    },
                    state(n)?,
                ))
            })
            .collect::<Result<_, PlanError>>()?;
        let exec_pins = self
            .exec_pins
            .keys()
            .map(|k| {
                Ok((
                    ExecPinKey {
                        state: state(k.state)?,
                        ..*k
                    },
                    to.policy_id,
                ))
            })
            .collect::<Result<_, PlanError>>()?;
        Ok(Self {
            placement: to,
            start_state: state(self.start_state)?,
            states,
            globs: self.globs.clone(),
            edges_short,
            edges_long,
            combos,
            exec_pins,
            net_v4: self
                .net_v4
                .iter()
                .map(|(k, v)| {
                    (
                        LpmKeyV4 {
                            policy_id: to.policy_id,
                            ..*k
                        },
                        *v,
                    )
                })
                .collect(),
            net_v6: self
                .net_v6
                .iter()
                .map(|(k, v)| {
                    (
                        LpmKeyV6 {
                            policy_id: to.policy_id,
                            ..*k
                        },
                        *v,
                    )
                })
                .collect(),
            names: self.names.clone(),
        })
    }

    /// Where the plan is placed (all zero for a fresh plan).
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// The start state (the state of `/`); [`DEAD_STATE`] if the policy has no path rules.
    pub fn start_state(&self) -> u32 {
        self.start_state
    }

    /// The scope map value for a cgroup governed by this plan, with `flags` (`SCOPE_*`).
    pub fn scope_value(&self, flags: u32) -> ScopeValue {
        ScopeValue {
            policy_id: self.placement.policy_id,
            flags,
            start_state: self.start_state,
            install: 0,
        }
    }

    /// State array entries as `(state id, value)`, ids ascending and contiguous.
    pub fn states(&self) -> impl ExactSizeIterator<Item = (u32, &StateValue)> {
        let base = self.placement.state_base;
        self.states
            .iter()
            .enumerate()
            .map(move |(i, v)| (base.wrapping_add(i as u32).wrapping_add(1), v))
    }

    /// Glob array entries as `(index, value)`, indices ascending and contiguous.
    pub fn globs(&self) -> impl ExactSizeIterator<Item = (u32, &GlobValue)> {
        let base = self.placement.glob_base;
        self.globs
            .iter()
            .enumerate()
            .map(move |(i, v)| (base.wrapping_add(i as u32), v))
    }

    /// Literal edges for segments of at most 48 bytes: key → next state.
    pub fn edges_short(&self) -> &BTreeMap<EdgeKeyShort, u32> {
        &self.edges_short
    }

    /// Literal edges for segments of 49..=255 bytes: key → next state.
    pub fn edges_long(&self) -> &BTreeMap<EdgeKeyLong, u32> {
        &self.edges_long
    }

    /// Combo entries: `(glob group, mask)` → next state; only those differing from the
    /// default.
    pub fn combos(&self) -> &BTreeMap<ComboKey, u32> {
        &self.combos
    }

    /// Exec-pin entries: `(state, kernel dev, ino)` → policy id.
    pub fn exec_pins(&self) -> &BTreeMap<ExecPinKey, u32> {
        &self.exec_pins
    }

    /// IPv4 LPM-trie entries.
    pub fn net_v4(&self) -> &BTreeMap<LpmKeyV4, NetValue> {
        &self.net_v4
    }

    /// IPv6 LPM-trie entries.
    pub fn net_v6(&self) -> &BTreeMap<LpmKeyV6, NetValue> {
        &self.net_v6
    }

    /// The name grants, for the scope's resolver (empty without `host` rules: no resolver).
    pub fn names(&self) -> &NamePlan {
        &self.names
    }

    /// Entry counts per map.
    pub fn stats(&self) -> PlanStats {
        PlanStats {
            states: self.states.len(),
            edges_short: self.edges_short.len(),
            edges_long: self.edges_long.len(),
            globs: self.globs.len(),
            combos: self.combos.len(),
            exec_pins: self.exec_pins.len(),
            net_v4_prefixes: self.net_v4.len(),
            net_v6_prefixes: self.net_v6.len(),
        }
    }

    /// The `ACCESS_*` bits the kernel grants `path` (a normalised absolute path), by walking
    /// this plan's automaton from its start state.
    ///
    /// # Errors
    /// [`WalkError`] as [`bee_common::walk()`] (the kernel denies in those cases).
    pub fn path_access(&self, path: &str) -> Result<u32, WalkError> {
        bee_common::walk(self, self.start_state, path.as_bytes())
    }
}

impl SegmentAutomaton for EnforcementPlan {
    fn state(&self, id: u32) -> Option<StateValue> {
        let local = id.checked_sub(self.placement.state_base)?.checked_sub(1)?;
        self.states.get(local as usize).copied()
    }

    fn edge(&self, state: u32, segment: &[u8]) -> Option<u32> {
        if segment.len() <= SHORT_SEGMENT_MAX {
            self.edges_short
                .get(&EdgeKeyShort::new(state, segment)?)
                .copied()
        } else {
            self.edges_long
                .get(&EdgeKeyLong::new(state, segment)?)
                .copied()
        }
    }

    fn glob(&self, index: u32) -> Option<&GlobValue> {
        let local = index.checked_sub(self.placement.glob_base)?;
        self.globs.get(local as usize)
    }

    fn combo(&self, group: u32, mask: u32) -> Option<u32> {
        self.combos.get(&ComboKey { group, mask }).copied()
    }
}
