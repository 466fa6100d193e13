//! Decoding ring-buffer records into [`AuditEvent`]s, and telling a scope of the records its
//! ring buffer lost.

use bee_common::AuditEvent;

/// The records lost since a scope was last told, given the programs' count `now` (one counter
/// since load, of every scope) and `told`, the count when it was last told (or began), which
/// becomes `now`.
pub(crate) fn lost_since(told: &mut u64, now: u64) -> u64 {
    let lost = now.saturating_sub(*told);
    *told = now;
    lost
}

/// The event in `record` (one ring-buffer record, `struct bee_event` of `bee_common.h`), or
/// `None` if the record is not exactly one event long.
pub fn decode(record: &[u8]) -> Option<AuditEvent> {
    if record.len() != size_of::<AuditEvent>() {
        return None;
    }
    let mut ev = AuditEvent::zeroed();
    // SAFETY: `AuditEvent` is `repr(C)` plain old data with no padding and no invalid bit
    // patterns, and `record` holds exactly `size_of::<AuditEvent>()` bytes; the copy goes into
    // an owned, aligned value.
    unsafe {
        std::ptr::copy_nonoverlapping(
            record.as_ptr(),
            (&raw mut ev).cast::<u8>(),
            size_of::<AuditEvent>(),
        );
    }
    Some(ev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_exact_records_only() {
        let mut ev = AuditEvent::zeroed();
        ev.cgroup_id = 42;
        ev.error = -1;
        ev.path[..4].copy_from_slice(b"/etc");
        ev.path_len = 4;
        // SAFETY: reading the bytes of a plain-old-data value.
        let bytes = unsafe {
            std::slice::from_raw_parts((&raw const ev).cast::<u8>(), size_of::<AuditEvent>())
        };
        let back = decode(bytes).unwrap();
        assert_eq!(back, ev);
        assert_eq!(back.path(), b"/etc");
        assert!(decode(&bytes[1..]).is_none());
    }
}
