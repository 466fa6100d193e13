//! One [`Engine`] shared by every scope of a process, as a [`scope::Enforcer`].
//!
//! The engine is loaded once per process and serves many concurrent scopes. Its ring buffer
//! carries the audit events of all of them, so draining it for one scope routes the events of
//! the others into per-cgroup queues, where their own `drain_events` finds them later. A scope
//! whose policy grants names gets its own resolver (module `names`), whose refusals join the
//! scope's events.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bee_common::AuditEvent;
use bee_common::scope::SCOPE_DNS;

use super::names::{Refusals, ScopeNames};
use super::{Engine, EngineError, EngineOptions, InstalledPolicy};
use crate::plan::EnforcementPlan;
use crate::scope::{EnforceError, Enforcer, InstallId};

/// Events kept per cgroup until a drain takes them (a scope that never drains must not grow
/// memory without bound); beyond it the newest are dropped and counted. The earliest are
/// kept: the first refusal is the likeliest cause of what failed after it, and a flood
/// repeats itself.
const QUEUE_MAX: usize = 65_536;

/// An [`Engine`] behind a lock, implementing [`Enforcer`] for any number of scopes.
#[derive(Debug)]
pub struct SharedEngine {
    state: Mutex<State>,
    /// The resolvers' refusals; their threads add to it without the state's lock.
    refusals: Refusals,
}

#[derive(Debug)]
struct State {
    engine: Engine,
    installed: HashMap<u64, InstalledPolicy>,
    next_id: u64,
    queues: HashMap<u64, VecDeque<AuditEvent>>,
    dropped: HashMap<u64, u64>,
    /// The resolvers of scopes with name grants, by install id.
    names: HashMap<u64, ScopeNames>,
    /// For each scope (by cgroup id), the engine's count of lost events when it was
    /// installed or last asked ([`Enforcer::drain_lost`]).
    told: HashMap<u64, u64>,
}

impl SharedEngine {
    /// Loads the engine ([`Engine::load`]) and wraps it.
    ///
    /// # Errors
    /// [`EngineError`] from loading: the kernel cannot enforce, or the object is not bee's.
    pub fn load(options: &EngineOptions) -> Result<Self, EngineError> {
        Engine::load(options).map(Self::new)
    }

    /// Wraps an already loaded engine.
    pub fn new(engine: Engine) -> Self {
        Self {
            state: Mutex::new(State {
                engine,
                installed: HashMap::new(),
                next_id: 1,
                queues: HashMap::new(),
                dropped: HashMap::new(),
                names: HashMap::new(),
                told: HashMap::new(),
            }),
            refusals: Arc::default(),
        }
    }

    /// How many events of `cgroup_id` were dropped because its queue was full.
    pub fn dropped_events(&self, cgroup_id: u64) -> u64 {
        self.lock().dropped.get(&cgroup_id).copied().unwrap_or(0)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held cannot leave the maps half-written (every engine
        // call cleans up after itself), so the state is still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Enforcer for SharedEngine {
    fn install(
        &self,
        plan: &EnforcementPlan,
        cgroup_id: u64,
        flags: u32,
    ) -> Result<InstallId, EnforceError> {
        let mut state = self.lock();
        let names = if plan.names().is_empty() {
            None
        } else {
            let names = ScopeNames::start_on(&mut state.engine, plan, cgroup_id, &self.refusals)
                .map_err(|detail| EnforceError::Install { detail })?;
            Some(names)
        };
        let flags = if names.is_some() {
            flags | SCOPE_DNS
        } else {
            flags
        };
        let installed = match state.engine.install(plan, cgroup_id, flags) {
            Ok(installed) => installed,
            Err(e) => {
                if let Some(names) = names {
                    let _ = state.engine.clear_dns(cgroup_id);
                    names.stop();
                }
                return Err(EnforceError::Install {
                    detail: e.to_string(),
                });
            }
        };
        let id = state.next_id;
        state.next_id += 1;
        state.installed.insert(id, installed);
        let lost = state.engine.events_lost();
        state.told.entry(cgroup_id).or_insert(lost);
        if let Some(names) = names {
            state.names.insert(id, names);
        }
        Ok(InstallId(id))
    }

    fn uninstall(&self, id: InstallId) -> Result<(), EnforceError> {
        let mut state = self.lock();
        let installed = state
            .installed
            .remove(&id.0)
            .ok_or_else(|| EnforceError::Uninstall {
                detail: format!("no installed plan has id {}", id.0),
            })?;
        let cgroup_id = installed.cgroup_id();
        // The resolver first: an answer it was about to write would outlive the uninstall.
        // Until the scope entry goes, its port-53 traffic reaches a closed port (fails closed).
        if let Some(names) = state.names.remove(&id.0) {
            names.stop();
        }
        let result = state
            .engine
            .uninstall(installed)
            .map_err(|e| EnforceError::Uninstall {
                detail: e.to_string(),
            });
        if result.is_ok() {
            state.queues.remove(&cgroup_id);
            state.dropped.remove(&cgroup_id);
            state.told.remove(&cgroup_id);
            self.refusals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&cgroup_id);
        }
        result
    }

    fn replace(&self, id: InstallId, plan: &EnforcementPlan) -> Result<(), EnforceError> {
        let mut state = self.lock();
        let State {
            engine,
            installed,
            names,
            ..
        } = &mut *state;
        let current = installed
            .get_mut(&id.0)
            .ok_or_else(|| EnforceError::Replace {
                detail: format!("no installed plan has id {}", id.0),
                new_in_force: false,
            })?;
        let scope_names = names.get(&id.0);
        if scope_names.is_none() && !plan.names().is_empty() {
            return Err(EnforceError::Replace {
                detail: "name grants cannot be added to a running scope (it has no resolver); \
                         the old policy stays in force"
                    .to_owned(),
                new_in_force: false,
            });
        }
        let before = current.policy_id();
        let replaced = engine.replace(current, plan);
        if current.policy_id() != before {
            if let Some(n) = scope_names {
                n.regrant(plan.names());
            }
        }
        replaced.map_err(|e| {
            let new_in_force = current.policy_id() != before;
            EnforceError::Replace {
                detail: if new_in_force {
                    format!(
                        "{}; the new policy is in force, the old one's entries were left behind",
                        e.summary()
                    )
                } else {
                    format!("{}; the old policy stays in force", e.summary())
                },
                new_in_force,
            }
        })
    }

    fn drain_events(&self, cgroup_id: u64) -> Vec<AuditEvent> {
        let mut state = self.lock();
        let mut events = state.engine.read_events(usize::MAX);
        if let Some(refused) = self
            .refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&cgroup_id)
        {
            events.extend(refused);
        }
        let State {
            queues, dropped, ..
        } = &mut *state;
        route(queues, dropped, events, QUEUE_MAX);
        queues.remove(&cgroup_id).map(Vec::from).unwrap_or_default()
    }

    /// The events of any scope that the ring buffer had no room for since the scope with
    /// cgroup `cgroup_id` was installed, or last asked ([`Engine::events_lost`]).
    fn drain_lost(&self, cgroup_id: u64) -> u64 {
        let mut state = self.lock();
        let now = state.engine.events_lost();
        state
            .told
            .get_mut(&cgroup_id)
            .map_or(0, |told| super::events::lost_since(told, now))
    }
}

/// Queues each of `events` for its scope, in order; an event for a scope that has `max`
/// queued already is dropped and counted in `dropped`.
fn route(
    queues: &mut HashMap<u64, VecDeque<AuditEvent>>,
    dropped: &mut HashMap<u64, u64>,
    events: Vec<AuditEvent>,
    max: usize,
) {
    for event in events {
        let queue = queues.entry(event.cgroup_id).or_default();
        if queue.len() >= max {
            *dropped.entry(event.cgroup_id).or_default() += 1;
        } else {
            queue.push_back(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(cgroup_id: u64, pid: u32) -> AuditEvent {
        let mut e = AuditEvent::zeroed();
        e.cgroup_id = cgroup_id;
        e.pid = pid;
        e
    }

    /// A flooding scope keeps its earliest events and drops only its own.
    #[test]
    fn a_flood_keeps_the_earliest_events_and_only_its_own_scopes() {
        let (mut queues, mut dropped) = (HashMap::new(), HashMap::new());
        let mut events = vec![event(8, 1)];
        events.extend((0..10).map(|i| event(7, 100 + i)));
        events.push(event(8, 2));
        route(&mut queues, &mut dropped, events, 4);
        let pids = |q: &VecDeque<AuditEvent>| q.iter().map(|e| e.pid).collect::<Vec<_>>();
        assert_eq!(pids(&queues[&7]), [100, 101, 102, 103]);
        assert_eq!(pids(&queues[&8]), [1, 2]);
        assert_eq!((dropped.get(&7), dropped.get(&8)), (Some(&6), None));
    }
}
