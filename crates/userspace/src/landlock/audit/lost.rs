//! The audit records lost on the way to the reader, counted so that a report that may be
//! incomplete says so.
//!
//! Records are lost in two places, both shared by every scope:
//!
//! - the kernel's queue: when its backlog is full (`backlog_limit`), or its rate limit is
//!   reached, the kernel drops the record and counts it in `struct audit_status.lost`
//!   (`AUDIT_GET`), a counter since boot that [`Losses::kernel`] follows;
//! - the reader's socket: `kauditd` copies each record to the multicast group whether or not
//!   the reader keeps up, and drops what a full receive buffer cannot take. The reader's next
//!   read fails with `ENOBUFS` ([`Losses::overrun`], once for a run of drops), and the
//!   socket's own count of drops ([`Losses::socket`]) says how many.
//!
//! A record lost may have been any scope's, so each scope live while one was lost is told:
//! [`Losses::take`] gives the records lost since the scope's previous take (or since it
//! began, [`Losses::begin`]).

use std::collections::HashMap;

/// What the reader knows of the records lost, and what each scope has been told of.
#[derive(Debug, Default)]
pub(super) struct Losses {
    /// `ENOBUFS` errors the reader met: at least one record lost each.
    overruns: u64,
    /// The socket's drops as last read.
    dropped: u64,
    /// The kernel's `lost` counter when first read, and its growth since (wrapping).
    kernel_start: Option<u32>,
    kernel_grown: u64,
    /// For each scope (by cgroup id), the total lost when it was last told (or began).
    told: HashMap<u64, u64>,
    /// For each scope (by cgroup id), the total lost when it began.
    began: HashMap<u64, u64>,
}

impl Losses {
    /// Every record known lost since the reader started.
    pub(super) fn total(&self) -> u64 {
        self.overruns.max(self.dropped) + self.kernel_grown
    }

    /// The reader's read failed with `ENOBUFS`.
    pub(super) fn overrun(&mut self) {
        self.overruns += 1;
    }

    /// Whether the socket has lost records, so that its count of drops is worth reading.
    pub(super) fn socket_overran(&self) -> bool {
        self.overruns > 0
    }

    /// The socket's count of drops, `dropped`, as just read.
    pub(super) fn socket(&mut self, dropped: u64) {
        self.dropped = self.dropped.max(dropped);
    }

    /// The kernel's `lost` counter, `lost`, as just read; the first reading is the baseline.
    pub(super) fn kernel(&mut self, lost: u32) {
        match self.kernel_start {
            None => self.kernel_start = Some(lost),
            Some(start) => {
                self.kernel_grown = self.kernel_grown.max(u64::from(lost.wrapping_sub(start)));
            }
        }
    }

    /// Whether the scope with cgroup `cgroup_id` is followed.
    pub(super) fn follows(&self, cgroup_id: u64) -> bool {
        self.told.contains_key(&cgroup_id)
    }

    /// Starts following the scope with cgroup `cgroup_id` (unless it is already): records lost
    /// from now on may be its.
    pub(super) fn begin(&mut self, cgroup_id: u64) {
        let total = self.total();
        self.told.entry(cgroup_id).or_insert(total);
        self.began.entry(cgroup_id).or_insert(total);
    }

    /// Whether records are known lost since the scope with cgroup `cgroup_id` began (`false`
    /// for a scope not followed).
    pub(super) fn lost_since_began(&self, cgroup_id: u64) -> bool {
        self.began
            .get(&cgroup_id)
            .is_some_and(|began| self.total() > *began)
    }

    /// Whether records are known lost since some scope followed now began.
    pub(super) fn lost_since_any_began(&self) -> bool {
        let total = self.total();
        self.began.values().any(|began| total > *began)
    }

    /// The records lost since the scope with cgroup `cgroup_id` was last told (or began),
    /// which it is now told of; 0 for a scope not followed.
    pub(super) fn take(&mut self, cgroup_id: u64) -> u64 {
        let total = self.total();
        self.told
            .get_mut(&cgroup_id)
            .map_or(0, |told| total - std::mem::replace(told, total))
    }

    /// Stops following the scope with cgroup `cgroup_id`.
    pub(super) fn forget(&mut self, cgroup_id: u64) {
        self.told.remove(&cgroup_id);
        self.began.remove(&cgroup_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each scope is told of the records lost while it lived, once; a scope that began after
    /// a loss is not told of it.
    #[test]
    fn each_scope_is_told_once_of_what_was_lost_while_it_lived() {
        let mut l = Losses::default();
        l.kernel(1000);
        l.begin(7);
        l.kernel(1003);
        assert_eq!(l.total(), 3);
        l.begin(8);
        assert!(l.lost_since_began(7) && !l.lost_since_began(8));
        assert!(l.lost_since_any_began());
        // Two overruns, then the socket's count says five records were dropped.
        l.overrun();
        l.overrun();
        assert_eq!(l.take(8), 2);
        assert!(l.lost_since_began(8));
        l.socket(5);
        assert_eq!(l.take(7), 3 + 5);
        assert_eq!(l.take(7), 0);
        assert_eq!(l.take(8), 3);
        // Beginning again changes nothing; an unknown scope is told nothing.
        l.begin(7);
        assert_eq!(l.take(7), 0);
        assert_eq!(l.take(9), 0);
        l.forget(7);
        assert!(!l.follows(7) && l.follows(8));
        assert!(!l.lost_since_began(7) && !l.lost_since_began(9));
        l.forget(8);
        assert!(!l.lost_since_any_began());
    }

    /// The kernel's counter wraps; a smaller count of drops read later (a reading that
    /// failed halfway) never lowers what was counted.
    #[test]
    fn counters_wrap_and_never_go_back() {
        let mut l = Losses::default();
        l.kernel(u32::MAX - 1);
        l.begin(1);
        l.kernel(2);
        assert_eq!(l.take(1), 4);
        l.socket(10);
        l.socket(3);
        l.kernel(1);
        assert_eq!(l.total(), 10 + 4);
        assert!(!l.socket_overran());
        l.overrun();
        assert!(l.socket_overran());
    }
}
