//! The Landlock engine as a [`scope::Enforcer`](crate::scope::Enforcer): it holds one plan per
//! installed scope and hands it to the launcher, which confines every process it starts into
//! the scope with it; on ABI 7 it reports the denials Landlock logs ([`super::audit`]). A
//! policy with network rules Landlock alone cannot decide (addresses, UDP, names) has its
//! scope's peers decided by the network gate ([`super::gate`]), loaded the first time one
//! needs it and attached to each such scope's cgroup before anything runs there.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bee_common::AuditEvent;
use bee_core::CompiledPolicy;

use super::audit::Reports;
use super::gate::NetGate;
use super::plan::{GateSupport, LandlockAbi, LandlockPlan, LandlockRefusal};
use super::seccomp::notify::Supervisor;
use crate::cgroup::ScopeCgroup;
use crate::launch::Launched;
use crate::plan::EnforcementPlan;
use crate::scope::{EnforceError, Enforcer, EngineKind, InstallId};

/// The Landlock engine: plans per scope, for the running kernel's ABI.
#[derive(Debug)]
pub struct LandlockEngine {
    abi: LandlockAbi,
    state: Mutex<State>,
    /// The denial reports, or why there are none.
    reports: Result<Reports, String>,
    /// The network gate, once a policy needed it, or why it cannot be had.
    gate: OnceLock<Result<Mutex<NetGate>, String>>,
    /// The answerer of the seccomp filters' refusals, from the first launch on, or why it
    /// cannot run (the launches' refusals are then answered `ENOSYS` by the kernel,
    /// unreported).
    seccomp: OnceLock<Result<Supervisor, String>>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// Each installed scope.
    plans: HashMap<u64, Installed>,
}

#[derive(Debug)]
struct Installed {
    plan: Arc<LandlockPlan>,
    cgroup_id: u64,
    /// The cgroup's directory, for a live change that needs the gate attached.
    cgroup: PathBuf,
    /// Whether the gate is attached to the cgroup (it then decides the scope's peers for as
    /// long as the cgroup lives, whatever plan follows).
    gated: bool,
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
        // Built with the native tests only: a command-line test makes the kernel drop records.
        #[cfg(feature = "landlock-tests")]
        if let (Ok(r), Some(bytes)) = (
            &reports,
            std::env::var("BEE_TEST_AUDIT_RECEIVE_BUFFER")
                .ok()
                .and_then(|b| b.parse().ok()),
        ) {
            let _ = r.set_receive_buffer(bytes);
        }
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
            gate: OnceLock::new(),
            seccomp: OnceLock::new(),
        }
    }

    /// The network gate, loaded on first use ([`NetGate::load`]).
    fn gate(&self) -> Result<&Mutex<NetGate>, &str> {
        self.gate
            .get_or_init(|| NetGate::load().map(Mutex::new))
            .as_ref()
            .map_err(String::as_str)
    }

    fn lock_gate(gate: &Mutex<NetGate>) -> MutexGuard<'_, NetGate> {
        // A panic while the gate was written leaves at worst a scope refused every peer.
        gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the network gate can be had here: loading it is the test.
    pub fn gate_support(&self) -> GateSupport {
        match self.gate() {
            Ok(_) => GateSupport::Available,
            Err(why) => GateSupport::Unavailable(why.to_owned()),
        }
    }

    /// Plans `policy`: without the gate first, so that it is loaded only for a policy that
    /// needs it.
    ///
    /// # Errors
    /// As [`LandlockPlan::new`].
    pub fn plan(&self, policy: &CompiledPolicy) -> Result<LandlockPlan, LandlockRefusal> {
        let unloaded = GateSupport::Unavailable("not loaded".to_owned());
        match LandlockPlan::new(policy, self.abi, &unloaded) {
            Err(e) if e.gate.is_some() => LandlockPlan::new(policy, self.abi, &self.gate_support()),
            planned => planned,
        }
    }

    /// Writes `policy`'s network rules into the gate for `cgroup_id`, and attaches the gate
    /// to `cgroup` unless it is already.
    fn gate_scope(
        &self,
        cgroup_id: u64,
        cgroup: &std::path::Path,
        policy: &CompiledPolicy,
        attached: bool,
    ) -> Result<(), String> {
        let gate = self.gate().map_err(str::to_owned)?;
        let mut gate = Self::lock_gate(gate);
        gate.admit(cgroup_id, policy)?;
        if !attached {
            if let Err(e) = gate.attach(cgroup) {
                gate.forget(cgroup_id);
                return Err(e);
            }
        }
        Ok(())
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

    /// Whether every process of the installed scope with cgroup `cgroup_id` has exited: its
    /// cgroup says `populated 0` (`cgroup.events`). `false` for a scope not installed, or a
    /// cgroup that cannot be read.
    fn ended(&self, cgroup_id: u64) -> bool {
        let Some(dir) = self
            .lock()
            .plans
            .values()
            .find(|i| i.cgroup_id == cgroup_id)
            .map(|i| i.cgroup.clone())
        else {
            return false;
        };
        crate::cgroup::events_populated(&dir).is_ok_and(|p| p == Some(false))
    }

    /// Makes the receive buffer of the denial reports' socket `bytes` (see
    /// [`Reports::set_receive_buffer`]), so that a test can make the kernel drop records.
    ///
    /// # Errors
    /// The engine has no reports, or the kernel refused.
    #[cfg(feature = "landlock-tests")]
    pub fn set_audit_receive_buffer(&self, bytes: i32) -> Result<(), String> {
        let reports = self.reports.as_ref().map_err(String::clone)?;
        reports.set_receive_buffer(bytes).map_err(|e| e.to_string())
    }

    /// Holds the denial reports' reader off its socket while `held` (see
    /// [`Reports::hold_reader`]), so that a test can make the kernel drop chosen records.
    ///
    /// # Errors
    /// The engine has no reports.
    #[cfg(feature = "landlock-tests")]
    pub fn hold_audit_reader(&self, held: bool) -> Result<(), String> {
        let reports = self.reports.as_ref().map_err(String::clone)?;
        reports.hold_reader(held);
        Ok(())
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
        cgroup: &ScopeCgroup,
        flags: u32,
    ) -> Result<InstallId, EnforceError> {
        if flags != 0 {
            return Err(EnforceError::Refused {
                detail: "the Landlock engine has no audit or learn mode: it reports no records of allowed or learned accesses".to_owned(),
            });
        }
        let plan = self.plan(policy).map_err(|e| EnforceError::Refused {
            detail: e.to_string(),
        })?;
        let gated = plan.gated();
        if gated {
            self.gate_scope(cgroup.id(), cgroup.path(), policy, false)
                .map_err(|detail| EnforceError::Install { detail })?;
        }
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.plans.insert(
            id,
            Installed {
                plan: Arc::new(plan),
                cgroup_id: cgroup.id(),
                cgroup: cgroup.path().to_path_buf(),
                gated,
            },
        );
        Ok(InstallId(id))
    }

    /// Processes already running keep the Landlock domain they were started with (a domain
    /// cannot change), so each sees the old policy's file rules whole; every process started
    /// afterwards is confined by the new one. A gated scope's peers are decided by the new
    /// policy's network rules at once, for every process (the old domain's TCP ports still
    /// bound them).
    fn replace_policy(&self, id: InstallId, policy: &CompiledPolicy) -> Result<(), EnforceError> {
        let plan = self.plan(policy).map_err(|e| EnforceError::Replace {
            detail: e.to_string(),
            new_in_force: false,
        })?;
        let (cgroup_id, cgroup, gated) = match self.lock().plans.get(&id.0) {
            Some(i) => (i.cgroup_id, i.cgroup.clone(), i.gated),
            None => {
                return Err(EnforceError::Replace {
                    detail: format!("no scope is installed as {}", id.0),
                    new_in_force: false,
                });
            }
        };
        if gated || plan.gated() {
            self.gate_scope(cgroup_id, &cgroup, policy, gated)
                .map_err(|detail| EnforceError::Replace {
                    detail: format!(
                        "{detail}; the scope's network is refused every peer until it ends"
                    ),
                    new_in_force: false,
                })?;
        }
        if let Some(i) = self.lock().plans.get_mut(&id.0) {
            i.plan = Arc::new(plan);
            i.gated = gated || i.gated;
        }
        Ok(())
    }

    fn launch_plan(&self, id: InstallId) -> Option<Arc<LandlockPlan>> {
        self.lock().plans.get(&id.0).map(|i| Arc::clone(&i.plan))
    }

    /// Attributes the launch's Landlock domain to its scope, and serves its seccomp
    /// filter's listener. A listener the engine cannot serve (an unknown scope, a supervisor
    /// that cannot run) is closed: the kernel then answers the refused calls `ENOSYS`.
    fn launched(&self, id: InstallId, launched: &mut Launched) {
        let cgroup = self.lock().plans.get(&id.0).map(|i| i.cgroup_id);
        if let (Ok(reports), Some(cgroup)) = (&self.reports, cgroup) {
            reports.launched(launched.id(), cgroup);
        }
        if let (Some(listener), Some(cgroup)) = (launched.take_seccomp_listener(), cgroup)
            && let Ok(supervisor) = self.seccomp.get_or_init(Supervisor::start)
        {
            supervisor.watch(listener, cgroup);
        }
    }

    fn uninstall(&self, id: InstallId) -> Result<(), EnforceError> {
        let Some(removed) = self.lock().plans.remove(&id.0) else {
            return Ok(());
        };
        if let Ok(reports) = &self.reports {
            reports.forget(removed.cgroup_id);
        }
        if let Some(Ok(supervisor)) = self.seccomp.get() {
            supervisor.forget(removed.cgroup_id);
        }
        if removed.gated {
            if let Ok(gate) = self.gate() {
                Self::lock_gate(gate).forget(removed.cgroup_id);
            }
        }
        Ok(())
    }

    /// The denials Landlock logged for the scope's processes (none without reports), the
    /// calls its seccomp filters refused, then the network gate's and the scope resolver's
    /// refusals. Once the scope's processes have all exited, the drain waits for the kernel to
    /// deliver everything they logged ([`Reports::drain`]).
    fn drain_events(&self, cgroup_id: u64) -> Vec<AuditEvent> {
        let mut events = match &self.reports {
            Ok(reports) => reports.drain(cgroup_id, self.ended(cgroup_id)),
            Err(_) => Vec::new(),
        };
        if let Some(Ok(supervisor)) = self.seccomp.get() {
            events.extend(supervisor.drain(cgroup_id));
        }
        if let Some(Ok(gate)) = self.gate.get() {
            events.extend(Self::lock_gate(gate).drain(cgroup_id));
        }
        events
    }

    /// The kernel's audit records lost while the scope lived ([`Reports::lost`]), and the
    /// network gate's refusals its ring buffer had no room for ([`NetGate::lost`]).
    fn drain_lost(&self, cgroup_id: u64) -> u64 {
        let audit = self.reports.as_ref().map_or(0, |r| r.lost(cgroup_id));
        let gate = match self.gate.get() {
            Some(Ok(gate)) => Self::lock_gate(gate).lost(cgroup_id),
            _ => 0,
        };
        audit + gate
    }
}
