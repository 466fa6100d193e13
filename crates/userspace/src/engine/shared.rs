//! One [`Engine`] shared by every scope of a process, as a [`scope::Enforcer`].
//!
//! The engine is loaded once per process and serves many concurrent scopes. Its ring buffer
//! carries the audit events of all of them, so draining it for one scope routes the events of
//! the others into per-cgroup queues, where their own `drain_events` finds them later.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use bee_common::AuditEvent;

use super::{Engine, EngineError, EngineOptions, InstalledPolicy};
use crate::plan::EnforcementPlan;
use crate::scope::{EnforceError, Enforcer, InstallId};

/// Events kept per cgroup before the oldest are dropped (a scope that never drains must not
/// grow memory without bound); the count of dropped events is kept and reported.
const QUEUE_MAX: usize = 65_536;

/// An [`Engine`] behind a lock, implementing [`Enforcer`] for any number of scopes.
#[derive(Debug)]
pub struct SharedEngine {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    engine: Engine,
    installed: HashMap<u64, InstalledPolicy>,
    next_id: u64,
    queues: HashMap<u64, VecDeque<AuditEvent>>,
    dropped: HashMap<u64, u64>,
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
            }),
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
        let installed =
            state
                .engine
                .install(plan, cgroup_id, flags)
                .map_err(|e| EnforceError::Install {
                    detail: e.to_string(),
                })?;
        let id = state.next_id;
        state.next_id += 1;
        state.installed.insert(id, installed);
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
        let result = state
            .engine
            .uninstall(installed)
            .map_err(|e| EnforceError::Uninstall {
                detail: e.to_string(),
            });
        if result.is_ok() {
            state.queues.remove(&cgroup_id);
            state.dropped.remove(&cgroup_id);
        }
        result
    }

    fn replace(&self, id: InstallId, plan: &EnforcementPlan) -> Result<(), EnforceError> {
        let mut state = self.lock();
        let State {
            engine, installed, ..
        } = &mut *state;
        let current = installed
            .get_mut(&id.0)
            .ok_or_else(|| EnforceError::Replace {
                detail: format!("no installed plan has id {}", id.0),
                new_in_force: false,
            })?;
        let before = current.policy_id();
        engine.replace(current, plan).map_err(|e| {
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
        let events = state.engine.read_events(usize::MAX);
        let State {
            queues, dropped, ..
        } = &mut *state;
        for event in events {
            let queue = queues.entry(event.cgroup_id).or_default();
            if queue.len() >= QUEUE_MAX {
                queue.pop_front();
                *dropped.entry(event.cgroup_id).or_default() += 1;
            }
            queue.push_back(event);
        }
        queues.remove(&cgroup_id).map(Vec::from).unwrap_or_default()
    }
}
