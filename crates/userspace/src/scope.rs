//! Scopes: one command, confined by one policy, from cgroup creation to teardown.
//!
//! A scope ties the pieces together in a fixed order:
//!
//! 1. create the scope cgroup ([`CgroupParent::create_scope`]);
//! 2. install the [`EnforcementPlan`] for the cgroup's id ([`Enforcer::install`]) — before any
//!    process is in the cgroup, so the command's very first `execve` is checked;
//! 3. launch the command inside the cgroup ([`LaunchSpec::spawn`]);
//! 4. wait for it (with a timeout, and a stop question, that kill the whole scope:
//!    [`wait_and_kill`]);
//! 5. kill whatever is left in the cgroup and wait until it is empty ([`ScopeCgroup::empty`]);
//! 6. collect the audit events of the scope ([`Enforcer::drain_events`]);
//! 7. uninstall the plan ([`Enforcer::uninstall`]) — only once the cgroup is empty: entries
//!    removed while a process still runs in the scope would leave it unconfined, so when the
//!    cgroup cannot be emptied the entries stay installed (and the cgroup stays) and the
//!    teardown reports [`ScopeError::Teardown`];
//! 8. remove the cgroup.
//!
//! Steps 5–8 run on every path: after a normal exit, after a failed launch or a failed wait,
//! and when a [`Scope`] is dropped without being finished.
//!
//! The kernel side is behind the [`Enforcer`] trait, so the lifecycle is tested on any host
//! with a fake, and the BPF engine plugs in where the kernel can enforce.

use std::time::Duration;

use bee_common::AuditEvent;
use bee_core::CompiledPolicy;

use crate::audit::AuditRecord;
use crate::cgroup::{CgroupError, CgroupParent, ScopeCgroup, ScopeLimits};
use crate::landlock::LandlockPlan;
use crate::launch::{LaunchError, LaunchSpec, Launched, Outcome};
use crate::plan::EnforcementPlan;

mod collect;
mod lease;
mod wait;

use collect::Collected;

pub use lease::ScopeLease;
pub use wait::{KillTarget, WaitLimits, wait_and_kill};

/// Which kernel mechanism enforces a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EngineKind {
    /// bee's BPF LSM programs, deciding for the scope's cgroup (`bpf-lsm`).
    BpfLsm,
    /// A Landlock ruleset, private namespaces and a seccomp filter, applied to each process the
    /// launcher starts (`landlock`).
    Landlock,
}

impl EngineKind {
    /// The name used in configuration, flags and records: `bpf-lsm` or `landlock`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BpfLsm => "bpf-lsm",
            Self::Landlock => "landlock",
        }
    }

    /// The engine [`EngineKind::as_str`] names; `None` for any other text.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::BpfLsm, Self::Landlock]
            .into_iter()
            .find(|e| e.as_str() == name)
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Starts `spec` in `cgroup`, the cgroup of the scope installed on `enforcer` as `id`: with
/// the engine's [`Enforcer::launch_plan`] when it confines at launch (Landlock), handing it
/// the launch ([`Enforcer::launched`]); as it is otherwise.
///
/// # Errors
/// As [`LaunchSpec::spawn`].
pub fn spawn_into<E: Enforcer + ?Sized>(
    enforcer: &E,
    id: Option<InstallId>,
    spec: &LaunchSpec,
    cgroup: &ScopeCgroup,
) -> Result<Launched, LaunchError> {
    match id.and_then(|id| Some((id, enforcer.launch_plan(id)?))) {
        Some((id, plan)) => {
            let mut launched = spec.clone().landlock(plan).spawn(cgroup)?;
            enforcer.launched(id, &mut launched);
            Ok(launched)
        }
        None => spec.spawn(cgroup),
    }
}

/// The handle of an installed plan, returned by [`Enforcer::install`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstallId(pub u64);

/// Why the enforcer could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnforceError {
    /// The kernel cannot enforce here (no BPF LSM, programs not loaded, no engine built in).
    #[error("enforcement is unavailable: {reason}")]
    Unavailable {
        /// Why.
        reason: String,
    },
    /// The engine cannot enforce this policy exactly; nothing was installed.
    #[error("{detail}")]
    Refused {
        /// Which rules, and why.
        detail: String,
    },
    /// Writing the plan's entries into the kernel maps failed.
    #[error("installing the enforcement plan failed: {detail}")]
    Install {
        /// What failed.
        detail: String,
    },
    /// Replacing a live scope's plan failed ([`Enforcer::replace`]).
    #[error("replacing the enforcement plan of a live scope failed: {detail}")]
    Replace {
        /// What failed, and whether the old or the new policy is in force.
        detail: String,
        /// The new policy is in force (the switch happened; what failed came after it).
        new_in_force: bool,
    },
    /// Removing an installed plan's entries failed.
    #[error("removing the enforcement plan failed: {detail}")]
    Uninstall {
        /// What failed.
        detail: String,
    },
}

/// The kernel side of a scope: whatever loads the programs and owns the maps.
///
/// An implementation must make [`Enforcer::install`] effective before it returns (a process
/// that joins the cgroup afterwards is confined), and must keep enforcing until
/// [`Enforcer::uninstall`]. An engine that confines each process at launch rather than by
/// cgroup (Landlock) plans from the policy itself ([`Enforcer::install_policy`]) and hands the
/// launcher its plan ([`Enforcer::launch_plan`]); every launch into the scope must carry it.
pub trait Enforcer {
    /// The mechanism behind this enforcer.
    fn engine(&self) -> EngineKind {
        EngineKind::BpfLsm
    }

    /// Installs `policy` for `cgroup`, in which nothing runs yet, planning it as this engine
    /// needs (the Landlock engine attaches its network gate to the cgroup when the policy
    /// needs it). The default plans the BPF maps ([`EnforcementPlan::new`]) and calls
    /// [`Enforcer::install`].
    ///
    /// # Errors
    /// [`EnforceError::Refused`] when the policy cannot be planned; as `install` otherwise.
    fn install_policy(
        &self,
        policy: &CompiledPolicy,
        cgroup: &ScopeCgroup,
        flags: u32,
    ) -> Result<InstallId, EnforceError> {
        let plan = EnforcementPlan::new(policy).map_err(|e| EnforceError::Refused {
            detail: e.to_string(),
        })?;
        self.install(&plan, cgroup.id(), flags)
    }

    /// The plan every process launched into scope `id` must be confined by at launch; `None`
    /// for engines that decide by cgroup.
    fn launch_plan(&self, id: InstallId) -> Option<std::sync::Arc<LandlockPlan>> {
        let _ = id;
        None
    }

    /// Tells the engine that the launcher started `launched` into scope `id` with its
    /// [`Enforcer::launch_plan`]: the Landlock engine attributes the domain that process
    /// creates to the scope, and takes the listener of its seccomp filter
    /// ([`Launched::take_seccomp_listener`]) to answer and report the filter's refusals. The
    /// default does nothing.
    fn launched(&self, id: InstallId, launched: &mut Launched) {
        let _ = (id, launched);
    }

    /// Installs `plan` for the cgroup with id `cgroup_id` (the scope map entry plus the plan's
    /// own entries), with `SCOPE_*` `flags`.
    ///
    /// # Errors
    /// [`EnforceError`]; nothing stays installed then.
    fn install(
        &self,
        plan: &EnforcementPlan,
        cgroup_id: u64,
        flags: u32,
    ) -> Result<InstallId, EnforceError>;

    /// Removes everything `install` added for `id`, the scope map entry first.
    ///
    /// # Errors
    /// [`EnforceError::Uninstall`].
    fn uninstall(&self, id: InstallId) -> Result<(), EnforceError>;

    /// Replaces the plan installed as `id` with `plan`, atomically for every check of the
    /// scope (the old policy whole or the new one whole, then only the new one); `id` stays
    /// the handle of the scope. The default refuses: an enforcer that cannot do it atomically
    /// must not do it at all.
    ///
    /// # Errors
    /// [`EnforceError::Replace`], saying which policy is in force.
    fn replace(&self, id: InstallId, plan: &EnforcementPlan) -> Result<(), EnforceError> {
        let _ = (id, plan);
        Err(EnforceError::Replace {
            detail: "this enforcer cannot change a live policy; the old one stays in force"
                .to_owned(),
            new_in_force: false,
        })
    }

    /// Replaces the policy of scope `id` with `policy`, planned as this engine needs, with
    /// [`Enforcer::replace`]'s guarantee. The default plans the BPF maps and calls
    /// [`Enforcer::replace`].
    ///
    /// # Errors
    /// [`EnforceError::Refused`] when the policy cannot be planned (the old one stays);
    /// as `replace` otherwise.
    fn replace_policy(&self, id: InstallId, policy: &CompiledPolicy) -> Result<(), EnforceError> {
        let plan = EnforcementPlan::new(policy).map_err(|e| EnforceError::Refused {
            detail: e.to_string(),
        })?;
        self.replace(id, &plan)
    }

    /// Takes the audit events received so far for `cgroup_id`, oldest first.
    fn drain_events(&self, cgroup_id: u64) -> Vec<AuditEvent>;

    /// How many of the kernel's audit records were lost while the scope with cgroup
    /// `cgroup_id` lived, as far as its last [`Enforcer::drain_events`] knew, and not said
    /// by an earlier call: each may have been one of its denials, so what was drained may be
    /// incomplete. The default, 0: an engine that cannot tell.
    fn drain_lost(&self, cgroup_id: u64) -> u64 {
        let _ = cgroup_id;
        0
    }
}

/// Why a scope failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// Creating or managing the cgroup failed.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// The enforcer refused the plan; the command was not started.
    #[error(transparent)]
    Enforce(#[from] EnforceError),
    /// The command could not be launched (it did not run).
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// Tearing the scope down failed. When `still_populated`, processes survived the kill and
    /// the plan was left installed so that they stay confined.
    #[error("tearing down the scope failed{}: {detail}", if *.still_populated { " (processes survive; the plan stays installed)" } else { "" })]
    Teardown {
        /// True when the cgroup could not be emptied.
        still_populated: bool,
        /// What failed.
        detail: String,
    },
}

/// How a scope runs its command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScopeOptions {
    /// `SCOPE_*` flags for the scope map entry (e.g. `SCOPE_AUDIT_ALLOWS`).
    pub flags: u32,
    /// Limits of the scope cgroup.
    pub limits: ScopeLimits,
    /// How long the command may run; then the whole scope is killed (zero: at once, however
    /// fast the command is). `None`: no limit.
    pub timeout: Option<Duration>,
    /// How long to wait for the cgroup to empty after killing it.
    pub kill_wait: Duration,
    /// How often audit events are collected while the command runs.
    pub poll: Duration,
}

impl Default for ScopeOptions {
    /// No flags, no limits, no timeout; 5 s for the kill, events every 50 ms.
    fn default() -> Self {
        Self {
            flags: 0,
            limits: ScopeLimits::default(),
            timeout: None,
            kill_wait: Duration::from_secs(5),
            poll: Duration::from_millis(50),
        }
    }
}

/// How a scope ended.
#[derive(Debug)]
pub struct ScopeReport {
    /// The scope's cgroup id.
    pub cgroup_id: u64,
    /// How the command ended.
    pub outcome: Outcome,
    /// The audit records of the scope, oldest first.
    pub records: Vec<AuditRecord>,
    /// How many of the kernel's audit records were lost while the scope lived
    /// ([`Enforcer::drain_lost`]): when not 0, `records` may miss denials
    /// ([`crate::audit::lost_records_explanation`] says so).
    pub lost_records: u64,
    /// Records shown to the drain's `on_record` but not kept in `records`: a scope keeps its
    /// earliest 65,536 (`RECORDS_MAX`), so that a flood cannot grow bee's memory.
    pub records_not_kept: u64,
}

/// A scope with its plan installed, ready to run a command. Dropping it tears it down.
#[derive(Debug)]
pub struct Scope<'a, E: Enforcer + ?Sized> {
    enforcer: &'a E,
    policy: &'a CompiledPolicy,
    options: ScopeOptions,
    lease: ScopeLease,
    collected: Collected,
}

impl<'a, E: Enforcer + ?Sized> Scope<'a, E> {
    /// Creates the cgroup below `parent` and installs `plan` (compiled from `policy`) for it.
    ///
    /// # Errors
    /// [`ScopeError::Cgroup`] or [`ScopeError::Enforce`]; the cgroup is removed again.
    pub fn create(
        enforcer: &'a E,
        parent: &CgroupParent,
        policy: &'a CompiledPolicy,
        plan: &EnforcementPlan,
        options: ScopeOptions,
    ) -> Result<Self, ScopeError> {
        Self::create_with(enforcer, parent, policy, options, |cgroup, flags| {
            enforcer.install(plan, cgroup.id(), flags)
        })
    }

    /// Creates the cgroup below `parent` and installs `policy` for it the way `enforcer`'s
    /// engine plans it ([`Enforcer::install_policy`]).
    ///
    /// # Errors
    /// As [`Scope::create`]; [`EnforceError::Refused`] when the engine cannot enforce the
    /// policy exactly.
    pub fn create_for_policy(
        enforcer: &'a E,
        parent: &CgroupParent,
        policy: &'a CompiledPolicy,
        options: ScopeOptions,
    ) -> Result<Self, ScopeError> {
        Self::create_with(enforcer, parent, policy, options, |cgroup, flags| {
            enforcer.install_policy(policy, cgroup, flags)
        })
    }

    /// The cgroup, then `install(cgroup, flags)`; the cgroup goes again when it fails.
    fn create_with(
        enforcer: &'a E,
        parent: &CgroupParent,
        policy: &'a CompiledPolicy,
        options: ScopeOptions,
        install: impl FnOnce(&ScopeCgroup, u32) -> Result<InstallId, EnforceError>,
    ) -> Result<Self, ScopeError> {
        let cgroup = parent.create_scope(&options.limits)?;
        let install = install(&cgroup, options.flags)?;
        Ok(Self {
            enforcer,
            policy,
            options,
            lease: ScopeLease::new(cgroup, Some(install)),
            collected: Collected::default(),
        })
    }

    /// The scope's cgroup id.
    pub fn cgroup_id(&self) -> u64 {
        self.lease.cgroup().map_or(0, ScopeCgroup::id)
    }

    /// The scope's cgroup.
    pub fn cgroup(&self) -> Option<&ScopeCgroup> {
        self.lease.cgroup()
    }

    /// Launches `spec` inside the scope. Several commands may be launched into one scope.
    ///
    /// # Errors
    /// [`ScopeError::Launch`] (the command did not run).
    pub fn spawn(&self, spec: &LaunchSpec) -> Result<Launched, ScopeError> {
        let cgroup = self.lease.cgroup().ok_or_else(torn_down)?;
        Ok(spawn_into(
            self.enforcer,
            self.lease.install_id(),
            spec,
            cgroup,
        )?)
    }

    /// Launches `spec`, waits for it and tears the scope down; `on_record` sees each audit
    /// record as it is collected.
    ///
    /// # Errors
    /// As [`Scope::spawn`] and [`Scope::finish`]; the scope is torn down in every case.
    pub fn run(
        self,
        spec: &LaunchSpec,
        on_record: &mut dyn FnMut(&AuditRecord),
    ) -> Result<ScopeReport, ScopeError> {
        self.run_until(spec, on_record, &|| false)
    }

    /// As [`Scope::run`], and the wait asks `stop` at each of its polls
    /// ([`ScopeOptions::poll`]): once `stop` answers true, the whole scope is killed as at the
    /// timeout, torn down the same way, and the report's outcome is
    /// [`interrupted`](crate::launch::Outcome::interrupted) (a signal to its owner, say).
    ///
    /// # Errors
    /// As [`Scope::run`]; the scope is torn down in every case.
    pub fn run_until(
        mut self,
        spec: &LaunchSpec,
        on_record: &mut dyn FnMut(&AuditRecord),
        stop: &dyn Fn() -> bool,
    ) -> Result<ScopeReport, ScopeError> {
        match self.spawn(spec) {
            Ok(mut launched) => self.end(&mut launched, on_record, stop),
            Err(e) => {
                // A launch the kernel refused (the command's own `execve`) leaves its denial
                // in the scope's events: report it before the scope goes.
                let (before, cgroup_id) = (self.collected.seen, self.cgroup_id());
                let torn = self.teardown(on_record);
                // The Landlock engine's refusal of a program no exec grant covers is not
                // logged by the kernel: it is made from the policy, a bare name as the file it
                // names on the command's `PATH` (bee runs as the command's own user here).
                if self.collected.seen == before
                    && self.enforcer.engine() == EngineKind::Landlock
                    && let ScopeError::Launch(launch) = &e
                    && let Some(record) = crate::landlock::audit::unlogged::exec_refusal_on_path(
                        self.policy,
                        spec,
                        launch,
                        cgroup_id,
                    )
                {
                    on_record(&record);
                    self.collected.keep(record);
                }
                torn.and(Err(e))
            }
        }
    }

    /// Waits for `launched` (killing the scope at the timeout), then tears the scope down and
    /// returns how the command ended with the scope's audit records.
    ///
    /// # Errors
    /// A wait or teardown error; the scope is torn down (as far as it safely can be) anyway.
    pub fn finish(
        self,
        launched: &mut Launched,
        on_record: &mut dyn FnMut(&AuditRecord),
    ) -> Result<ScopeReport, ScopeError> {
        self.end(launched, on_record, &|| false)
    }

    /// [`Scope::finish`], stopped early once `stop` answers true ([`Scope::run_until`]).
    fn end(
        mut self,
        launched: &mut Launched,
        on_record: &mut dyn FnMut(&AuditRecord),
        stop: &dyn Fn() -> bool,
    ) -> Result<ScopeReport, ScopeError> {
        let cgroup_id = self.cgroup_id();
        let waited = self.wait(launched, on_record, stop);
        let torn = self.teardown(on_record);
        let outcome = waited?;
        torn?;
        Ok(ScopeReport {
            cgroup_id,
            outcome,
            records: std::mem::take(&mut self.collected.records),
            lost_records: self.collected.lost,
            records_not_kept: self.collected.not_kept,
        })
    }

    /// Step 4 of the module's order: waits for `launched`, collecting audit records while it
    /// runs, and kills the whole scope at the timeout or once `stop` answers true
    /// ([`wait_and_kill`]).
    fn wait(
        &mut self,
        launched: &mut Launched,
        on_record: &mut dyn FnMut(&AuditRecord),
        stop: &dyn Fn() -> bool,
    ) -> Result<Outcome, ScopeError> {
        let id = self.cgroup_id();
        let cgroup = self.lease.cgroup().ok_or_else(torn_down)?;
        let limits = WaitLimits {
            timeout: self.options.timeout,
            poll: Some(self.options.poll),
            kill: KillTarget::Cgroup,
            kill_wait: self.options.kill_wait,
        };
        let (enforcer, policy, collected) = (self.enforcer, self.policy, &mut self.collected);
        let mut tick = || {
            collected.collect(enforcer, policy, id, on_record);
            stop()
        };
        match wait_and_kill(launched, cgroup, &limits, &mut tick) {
            Ok(outcome) => Ok(outcome),
            Err(LaunchError::Cgroup(e)) => Err(ScopeError::Cgroup(e)),
            Err(e) => Err(ScopeError::Launch(e)),
        }
    }

    /// Steps 5–8 of the module's order ([`ScopeLease::teardown`]). Idempotent.
    fn teardown(&mut self, on_record: &mut dyn FnMut(&AuditRecord)) -> Result<(), ScopeError> {
        let id = self.cgroup_id();
        let (enforcer, policy, collected) = (self.enforcer, self.policy, &mut self.collected);
        let mut drain = || collected.collect(enforcer, policy, id, on_record);
        self.lease
            .teardown(Some(enforcer), self.options.kill_wait, &mut drain)
    }
}

/// The error of a scope used after its teardown.
fn torn_down() -> ScopeError {
    ScopeError::Teardown {
        still_populated: false,
        detail: "the scope was already torn down".to_owned(),
    }
}

impl<E: Enforcer + ?Sized> Drop for Scope<'_, E> {
    fn drop(&mut self) {
        let _ = self.teardown(&mut |_| {});
    }
}

#[cfg(test)]
mod tests;
