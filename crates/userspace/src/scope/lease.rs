//! A scope's cgroup and installed plan, held until the one teardown every owner of a scope
//! uses (steps 5–8 of [`crate::scope`]'s order).

use std::time::Duration;

use crate::cgroup::ScopeCgroup;

use super::{Enforcer, InstallId, ScopeError};

/// A scope's cgroup and the plan installed for it, held until teardown: the one place that
/// takes a scope down (steps 5–8 of [`crate::scope`]'s order), used by [`super::Scope`] and by every
/// other owner of a scope (the harness's sandbox).
#[derive(Debug)]
pub struct ScopeLease {
    cgroup: Option<ScopeCgroup>,
    install: Option<InstallId>,
}

impl ScopeLease {
    /// Holds `cgroup` and, when a plan is installed for it, `install`.
    pub fn new(cgroup: ScopeCgroup, install: Option<InstallId>) -> Self {
        Self {
            cgroup: Some(cgroup),
            install,
        }
    }

    /// The installed plan's handle, until teardown (`None` without a kernel scope).
    pub fn install_id(&self) -> Option<InstallId> {
        self.install
    }

    /// The cgroup, until teardown.
    pub fn cgroup(&self) -> Option<&ScopeCgroup> {
        self.cgroup.as_ref()
    }

    /// Kills whatever is in the cgroup and waits (up to `kill_wait`) until it is empty,
    /// calls `drain` (the scope's last audit events), then uninstalls the plan from
    /// `enforcer` and removes the cgroup. Idempotent.
    ///
    /// When the cgroup cannot be emptied, the plan stays installed and the cgroup stays (it is
    /// forgotten, not removed), so that survivors stay confined.
    ///
    /// # Errors
    /// [`ScopeError::Teardown`] with `still_populated` when processes survived;
    /// [`ScopeError::Enforce`] or [`ScopeError::Cgroup`] when uninstalling or removing failed.
    pub fn teardown<E: Enforcer + ?Sized>(
        &mut self,
        enforcer: Option<&E>,
        kill_wait: Duration,
        drain: &mut dyn FnMut(),
    ) -> Result<(), ScopeError> {
        let Some(cgroup) = self.cgroup.as_ref() else {
            return Ok(());
        };
        let emptied = cgroup.empty(kill_wait);
        drain();
        if let Err(e) = emptied {
            // Keep the plan installed and the cgroup in place: survivors stay confined.
            self.install = None;
            if let Some(cg) = self.cgroup.take() {
                std::mem::forget(cg);
            }
            return Err(ScopeError::Teardown {
                still_populated: true,
                detail: e.to_string(),
            });
        }
        let uninstalled = match (self.install.take(), enforcer) {
            (Some(id), Some(e)) => e.uninstall(id),
            _ => Ok(()),
        };
        let removed = match self.cgroup.take() {
            Some(cg) => cg.remove(),
            None => Ok(()),
        };
        uninstalled?;
        removed?;
        Ok(())
    }
}
