//! What a scope's drains collect (step 6 of the module's order, and the ticks while its
//! command runs).

use std::time::SystemTime;

use bee_core::CompiledPolicy;

use super::Enforcer;
use crate::audit::AuditRecord;

/// The most audit records a scope keeps for its report: the earliest, which usually hold the
/// cause. Later ones are still shown to the drain's `on_record` as they come (printed,
/// written to `--audit`), and counted in [`Collected::not_kept`]: a command that makes refused
/// calls in a loop would otherwise grow bee's memory without bound (about 0.5 KiB a record,
/// some 14 MB a second in a flood of seccomp refusals).
pub(crate) const RECORDS_MAX: usize = 65_536;

/// A scope's audit records, and how many of the kernel's audit records were lost while it
/// lived ([`Enforcer::drain_lost`]).
#[derive(Debug, Default)]
pub(super) struct Collected {
    /// The records kept, oldest first: at most [`RECORDS_MAX`].
    pub(super) records: Vec<AuditRecord>,
    /// Records shown to `on_record` but not kept, past [`RECORDS_MAX`].
    pub(super) not_kept: u64,
    /// Every record collected, kept or not.
    pub(super) seen: u64,
    /// Records lost, any of which may have been one of the scope's denials.
    pub(super) lost: u64,
}

impl Collected {
    /// Takes the audit events of cgroup `id` (none for 0), turns them into records and shows
    /// each to `on_record`; adds the records lost.
    pub(super) fn collect<E: Enforcer + ?Sized>(
        &mut self,
        enforcer: &E,
        policy: &CompiledPolicy,
        id: u64,
        on_record: &mut dyn FnMut(&AuditRecord),
    ) {
        if id == 0 {
            return;
        }
        let now = SystemTime::now();
        for event in enforcer.drain_events(id) {
            let record = AuditRecord::from_event(&event, policy, now);
            on_record(&record);
            self.keep(record);
        }
        self.lost += enforcer.drain_lost(id);
    }

    /// Keeps `record` (already shown) while fewer than [`RECORDS_MAX`] are kept; counts it.
    pub(super) fn keep(&mut self, record: AuditRecord) {
        self.seen += 1;
        if self.records.len() < RECORDS_MAX {
            self.records.push(record);
        } else {
            self.not_kept += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use bee_common::AuditEvent;
    use bee_core::compile::{CompileOptions, compile_str};

    use super::*;
    use crate::scope::tests::shadow_read;
    use crate::scope::{EnforceError, EnforcementPlan, InstallId};

    /// Gives `batch` denials of cgroup 7 at each drain, `drains` times.
    struct Flood {
        batch: usize,
        drains: Cell<usize>,
    }

    impl Enforcer for Flood {
        fn install(&self, _: &EnforcementPlan, _: u64, _: u32) -> Result<InstallId, EnforceError> {
            Err(EnforceError::Install {
                detail: "not used".into(),
            })
        }

        fn uninstall(&self, _: InstallId) -> Result<(), EnforceError> {
            Ok(())
        }

        fn drain_events(&self, cgroup_id: u64) -> Vec<AuditEvent> {
            if self.drains.get() == 0 {
                return Vec::new();
            }
            self.drains.set(self.drains.get() - 1);
            vec![shadow_read(cgroup_id); self.batch]
        }
    }

    #[test]
    fn a_flood_is_shown_whole_and_kept_only_up_to_the_bound() {
        let options = CompileOptions {
            base: "/".into(),
            home: None,
        };
        let Ok(compiled) = compile_str("p.toml", "version = 1\n", &options) else {
            unreachable!("an empty policy compiles")
        };
        let flood = Flood {
            batch: 4_096,
            drains: Cell::new(RECORDS_MAX / 4_096 + 3),
        };
        let mut collected = Collected::default();
        let mut shown = 0u64;
        for _ in 0..RECORDS_MAX / 4_096 + 4 {
            collected.collect(&flood, &compiled.policy, 7, &mut |_| shown += 1);
        }
        let total = (RECORDS_MAX + 3 * 4_096) as u64;
        assert_eq!(shown, total);
        assert_eq!(collected.seen, total);
        assert_eq!(collected.records.len(), RECORDS_MAX);
        assert_eq!(collected.not_kept, 3 * 4_096);
        assert!(
            collected.records[0]
                .explanation()
                .contains("open /etc/shadow for read"),
            "{}",
            collected.records[0].explanation()
        );
    }
}
