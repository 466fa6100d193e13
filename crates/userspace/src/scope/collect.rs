//! What a scope's drains collect (step 6 of the module's order, and the ticks while its
//! command runs).

use std::time::SystemTime;

use bee_core::CompiledPolicy;

use super::Enforcer;
use crate::audit::AuditRecord;

/// A scope's audit records, and how many of the kernel's audit records were lost while it
/// lived ([`Enforcer::drain_lost`]).
#[derive(Debug, Default)]
pub(super) struct Collected {
    /// The records, oldest first.
    pub(super) records: Vec<AuditRecord>,
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
            self.records.push(record);
        }
        self.lost += enforcer.drain_lost(id);
    }
}
