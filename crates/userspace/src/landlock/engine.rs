//! The Landlock engine as a [`scope::Enforcer`](crate::scope::Enforcer): it holds one plan per
//! installed scope and hands it to the launcher, which confines every process it starts into
//! the scope with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bee_common::AuditEvent;
use bee_core::CompiledPolicy;

use super::plan::{LandlockAbi, LandlockPlan};
use crate::plan::EnforcementPlan;
use crate::scope::{EnforceError, Enforcer, EngineKind, InstallId};

/// The Landlock engine: plans per scope, for the running kernel's ABI.
#[derive(Debug)]
pub struct LandlockEngine {
    abi: LandlockAbi,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    plans: HashMap<u64, Arc<LandlockPlan>>,
}

impl LandlockEngine {
    /// The engine for the running kernel.
    ///
    /// # Errors
    /// [`EnforceError::Unavailable`] when the kernel has no Landlock (not built in, or not
    /// enabled at boot), naming which.
    pub fn new() -> Result<Self, EnforceError> {
        let abi = super::abi_version().map_err(|e| EnforceError::Unavailable {
            reason: match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) => {
                    "Landlock is built into this kernel but not enabled at boot (add `landlock` to `lsm=`)".to_owned()
                }
                Some(libc::ENOSYS) => "this kernel has no Landlock (Linux 5.13+, CONFIG_SECURITY_LANDLOCK)".to_owned(),
                _ => format!("asking the kernel for its Landlock ABI failed: {e}"),
            },
        })?;
        Ok(Self::with_abi(LandlockAbi(abi)))
    }

    /// The engine for a given ABI (tests, and plans made for another kernel).
    pub fn with_abi(abi: LandlockAbi) -> Self {
        Self {
            abi,
            state: Mutex::new(State {
                next_id: 1,
                plans: HashMap::new(),
            }),
        }
    }

    /// The ABI plans are made for.
    pub fn abi(&self) -> LandlockAbi {
        self.abi
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a map of immutable plans: a panic elsewhere cannot leave it half-made.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Enforcer for LandlockEngine {
    fn engine(&self) -> EngineKind {
        EngineKind::Landlock
    }

    fn install(
        &self,
        _plan: &EnforcementPlan,
        _cgroup_id: u64,
        _flags: u32,
    ) -> Result<InstallId, EnforceError> {
        Err(EnforceError::Install {
            detail: "the Landlock engine plans from the policy (install_policy), not from BPF maps"
                .to_owned(),
        })
    }

    fn install_policy(
        &self,
        policy: &CompiledPolicy,
        _cgroup_id: u64,
        flags: u32,
    ) -> Result<InstallId, EnforceError> {
        if flags != 0 {
            return Err(EnforceError::Refused {
                detail: "the Landlock engine has no audit or learn mode: it reports no records of allowed or learned accesses".to_owned(),
            });
        }
        let plan = LandlockPlan::new(policy, self.abi).map_err(|e| EnforceError::Refused {
            detail: e.to_string(),
        })?;
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.plans.insert(id, Arc::new(plan));
        Ok(InstallId(id))
    }

    /// Processes already running keep the domain they were started with (a Landlock domain
    /// cannot change), so each sees the old policy whole; every process started afterwards
    /// is confined by the new one.
    fn replace_policy(&self, id: InstallId, policy: &CompiledPolicy) -> Result<(), EnforceError> {
        let plan = LandlockPlan::new(policy, self.abi).map_err(|e| EnforceError::Replace {
            detail: e.to_string(),
            new_in_force: false,
        })?;
        match self.lock().plans.get_mut(&id.0) {
            Some(slot) => {
                *slot = Arc::new(plan);
                Ok(())
            }
            None => Err(EnforceError::Replace {
                detail: format!("no scope is installed as {}", id.0),
                new_in_force: false,
            }),
        }
    }

    fn launch_plan(&self, id: InstallId) -> Option<Arc<LandlockPlan>> {
        self.lock().plans.get(&id.0).cloned()
    }

    fn uninstall(&self, id: InstallId) -> Result<(), EnforceError> {
        self.lock().plans.remove(&id.0);
        Ok(())
    }

    fn drain_events(&self, _cgroup_id: u64) -> Vec<AuditEvent> {
        Vec::new()
    }
}
