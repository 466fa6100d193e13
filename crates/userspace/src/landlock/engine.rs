//! The Landlock engine as a [`scope::Enforcer`](crate::scope::Enforcer): it holds one plan per
//! installed scope and hands it to the launcher, which confines every process it starts into
//! the scope with it; on ABI 7 it reports the denials Landlock logs ([`super::audit`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bee_common::AuditEvent;
use bee_core::CompiledPolicy;

use super::audit::Reports;
use super::plan::{LandlockAbi, LandlockPlan};
use crate::plan::EnforcementPlan;
use crate::scope::{EnforceError, Enforcer, EngineKind, InstallId};

/// The Landlock engine: plans per scope, for the running kernel's ABI.
#[derive(Debug)]
pub struct LandlockEngine {
    abi: LandlockAbi,
    state: Mutex<State>,
    /// The denial reports, or why there are none.
    reports: Result<Reports, String>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// Each installed scope's plan and cgroup id.
    plans: HashMap<u64, (Arc<LandlockPlan>, u64)>,
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
        let abi = LandlockAbi(abi);
        let reports = if abi.0 >= 7 {
            Reports::start()
        } else {
            Err(format!(
                "Landlock ABI {} logs no denials (audit records need ABI 7, Linux 6.15)",
                abi.0
            ))
        };
        Ok(Self {
            reports,
            ..Self::with_abi(abi)
        })
    }

    /// The engine for a given ABI (tests, and plans made for another kernel), without
    /// denial reports.
    pub fn with_abi(abi: LandlockAbi) -> Self {
        Self {
            abi,
            state: Mutex::new(State {
                next_id: 1,
                plans: HashMap::new(),
            }),
            reports: Err("the engine was made without reports".to_owned()),
        }
    }

    /// Whether denials are reported (`Ok`), or why not: the kernel's Landlock ABI is below 7,
    /// it has no audit, or bee lacks `CAP_AUDIT_READ` or `CAP_AUDIT_CONTROL`.
    pub fn reports_denials(&self) -> Result<(), &str> {
        self.reports.as_ref().map(|_| ()).map_err(String::as_str)
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
        cgroup_id: u64,
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
        state.plans.insert(id, (Arc::new(plan), cgroup_id));
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
            Some((slot, _)) => {
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
        self.lock()
            .plans
            .get(&id.0)
            .map(|(plan, _)| Arc::clone(plan))
    }

    fn launched(&self, id: InstallId, pid: u32) {
        let cgroup = self.lock().plans.get(&id.0).map(|(_, cgroup)| *cgroup);
        if let (Ok(reports), Some(cgroup)) = (&self.reports, cgroup) {
            reports.launched(pid, cgroup);
        }
    }

    fn uninstall(&self, id: InstallId) -> Result<(), EnforceError> {
        let removed = self.lock().plans.remove(&id.0);
        if let (Ok(reports), Some((_, cgroup))) = (&self.reports, removed) {
            reports.forget(cgroup);
        }
        Ok(())
    }

    /// The denials Landlock logged for the scope's processes (none without reports).
    fn drain_events(&self, cgroup_id: u64) -> Vec<AuditEvent> {
        match &self.reports {
            Ok(reports) => reports.drain(cgroup_id),
            Err(_) => Vec::new(),
        }
    }
}
