//! Access bits and size limits shared by the planner and the kernel programs.
//!
//! The access bits are used twice: as the accept set of an automaton state (which accesses a
//! path is granted) and as [`crate::AuditEvent::access`] (which access was attempted).

/// Read a file or list a directory (`fs.read`, implied by `fs.write`).
pub const ACCESS_READ: u32 = 1;
/// Modify, create, delete, rename, link, truncate, chmod or chown (`fs.write`). A state that
/// accepts `ACCESS_WRITE` always accepts [`ACCESS_READ`] too.
pub const ACCESS_WRITE: u32 = 2;
/// Execute (or map executable) a file matched by an unpinned `exec` rule.
pub const ACCESS_EXEC: u32 = 4;
/// Connect (or send) to a pathname unix socket matched by `net.unix`.
pub const ACCESS_UNIX: u32 = 8;
/// An exact pinned `exec` path ends in this state: execution is allowed only if the file's
/// `(dev, ino)` is pinned for this state in the exec-pin map ([`crate::ExecPinKey`]).
pub const ACCESS_EXEC_PINNED: u32 = 16;
/// IP egress (connect or sendmsg to an address). Only used in audit events, never in an
/// accept set: network grants live in the LPM tries.
pub const ACCESS_NET: u32 = 32;
/// Every bit an automaton state may accept.
pub const ACCEPT_MASK: u32 =
    ACCESS_READ | ACCESS_WRITE | ACCESS_EXEC | ACCESS_UNIX | ACCESS_EXEC_PINNED;

/// The dead state: accepts nothing and every edge leads back to it. Plan-local and global
/// state ids both reserve 0 for it.
pub const DEAD_STATE: u32 = 0;

/// Longest path the walk accepts, in bytes including the leading `/` (`PATH_MAX`, 4096,
/// `include/uapi/linux/limits.h`, counts the terminating NUL, so a path has at most 4095 bytes).
pub const PATH_MAX: usize = 4096;
/// Longest path segment in bytes (`NAME_MAX`, `include/uapi/linux/limits.h`).
pub const NAME_MAX: usize = 255;
/// Longest segment stored in [`crate::EdgeKeyShort`]; longer ones use [`crate::EdgeKeyLong`].
pub const SHORT_SEGMENT_MAX: usize = 48;
/// Longest star segment (`*.rs`) in bytes, the size of [`crate::GlobValue::pattern`].
pub const GLOB_MAX: usize = 60;
/// Most distinct star segments that may be tried at one automaton state: the glob mask of a
/// segment is a `u32` with one bit per star segment, and the planner writes one combo entry per
/// non-empty mask, so 8 bounds both the kernel's loop and the combo entries (255) per state.
pub const GLOBS_PER_STATE_MAX: usize = 8;
/// Most port rules in one [`crate::NetValue`].
pub const NET_RULES_MAX: usize = 16;

/// [`crate::NetPortRule::protocols`] bit for TCP.
pub const PROTO_TCP: u8 = 1;
/// [`crate::NetPortRule::protocols`] bit for UDP.
pub const PROTO_UDP: u8 = 2;
