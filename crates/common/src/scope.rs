//! The scope map: which policy governs a cgroup.

use core::mem::{align_of, size_of};

/// [`ScopeValue::flags`]: also report allowed accesses, not only denials.
pub const SCOPE_AUDIT_ALLOWS: u32 = 1;

/// [`ScopeValue::flags`]: learn mode. A denial that some policy could lift (a file, exec,
/// unix-socket or IP peer access with a resolved path or address) is reported with
/// `EVENT_LEARNED` and then allowed. Denials no policy can lift (`bpf(2)`, mounts, device
/// nodes, signals and tracing outside the scope, capabilities…), unresolved or truncated paths,
/// and writes to the kernel's own filesystems (cgroupfs, bpffs, sysfs, procfs, securityfs,
/// debugfs, tracefs) stay denied: learn mode never lets a scope leave its cgroup or touch
/// enforcement. Set only from the command line (`--learn`).
pub const SCOPE_LEARN: u32 = 2;

/// [`ScopeValue::flags`]: the policy grants names. Every TCP or UDP peer on port 53 is steered
/// to bee's resolver for this scope by the cgroup `connect`/`sendmsg` programs (the DNS map
/// says where), so the LSM lets port 53 through; port 853 is denied; and a peer no address
/// grant covers is allowed while a live answer of the scope's resolver covers it (the answers
/// map). Set only after the cgroup programs are attached and the DNS map entry is written.
pub const SCOPE_DNS: u32 = 4;

/// Slots of the scope filter (`bee_scope_slots`, an array of `u32` counts): slot
/// `cgroup_id % SCOPE_SLOTS` counts the scope-map entries whose cgroup id falls there. The
/// programs read it before the scope map: a zero count proves a task is in no scope without
/// the hash lookup, the early return every process on the host pays. The loader raises a
/// count before it inserts a scope entry and lowers it after it deleted one, so a count is
/// never below the entries it covers. A power of two.
pub const SCOPE_SLOTS: u32 = 4096;

/// The slot of `cgroup_id` in the scope filter (see [`SCOPE_SLOTS`]).
pub const fn scope_slot(cgroup_id: u64) -> u32 {
    (cgroup_id & (SCOPE_SLOTS as u64 - 1)) as u32
}

/// Value of the scope map, a hash map keyed by the cgroup v2 id (`u64`, as
/// `bpf_get_current_cgroup_id()` returns it and as `name_to_handle_at(2)` on the cgroup
/// directory reports it).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ScopeValue {
    /// Id of the policy: the first word of every LPM-trie key of the policy.
    pub policy_id: u32,
    /// `SCOPE_*` bits.
    pub flags: u32,
    /// Global id of the path automaton's start state (the state of `/`).
    pub start_state: u32,
    /// Install serial: never 0 and never reused by one engine (its maps). The kernel's
    /// directory cache keys its entries by it, so an entry filled under one install is never
    /// used under another that got the same policy id and states.
    pub install: u32,
}

const _: () = assert!(size_of::<ScopeValue>() == 16 && align_of::<ScopeValue>() == 4);

crate::pod!(ScopeValue);
