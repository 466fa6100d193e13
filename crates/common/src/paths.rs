//! The path automaton's maps.
//!
//! A policy's path rules are one deterministic automaton over path *segments*. Its states are
//! dense `u32` ids ([`crate::DEAD_STATE`] is 0); the maps are:
//!
//! | map | kind | key | value |
//! |---|---|---|---|
//! | states | array | state id | [`StateValue`] |
//! | short edges | hash | [`EdgeKeyShort`] | next state (`u32`) |
//! | long edges | hash | [`EdgeKeyLong`] | next state (`u32`) |
//! | globs | array | glob index | [`GlobValue`] |
//! | combos | hash | [`ComboKey`] (glob group, mask) | next state (`u32`) |
//! | exec pins | hash | [`ExecPinKey`] | policy id (`u32`) |
//!
//! [`crate::walk()`] is the reference walk over these maps.

use core::mem::{align_of, size_of};

use crate::access::{GLOB_MAX, NAME_MAX, SHORT_SEGMENT_MAX};

/// One automaton state.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StateValue {
    /// `ACCESS_*` bits granted to a path whose walk ends here.
    pub accept: u32,
    /// Next state for a segment with no literal edge that matches none of the state's globs.
    pub default_next: u32,
    /// Index in the glob array of the state's first star segment; also the key of its combos
    /// ([`ComboKey::group`]), since states share a glob group only if their combos agree.
    pub glob_first: u32,
    /// Number of star segments to try (0..=8); bit `i` of the mask is glob `glob_first + i`.
    pub glob_count: u32,
    /// The state's move class within its policy (1 and up; 0 for none): below two paths of
    /// one move class every path grants the same, except that readable paths may differ in
    /// EXEC. `path_rename` moves a directory only between two paths of one move class.
    pub move_class: u32,
}

const _: () = assert!(size_of::<StateValue>() == 20 && align_of::<StateValue>() == 4);

/// Key of a literal edge for a segment of at most [`SHORT_SEGMENT_MAX`] bytes.
///
/// `name` holds the segment's bytes followed by zeros; `len` is its length, so that names
/// which differ only in trailing NULs (impossible in paths, but cheap to rule out) differ.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EdgeKeyShort {
    /// Source state.
    pub state: u32,
    /// Segment length in bytes (1..=48).
    pub len: u32,
    /// Segment bytes, zero-filled.
    pub name: [u8; SHORT_SEGMENT_MAX],
}

const _: () = assert!(size_of::<EdgeKeyShort>() == 56 && align_of::<EdgeKeyShort>() == 4);

/// Key of a literal edge for a segment of 49..=255 bytes; laid out like [`EdgeKeyShort`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EdgeKeyLong {
    /// Source state.
    pub state: u32,
    /// Segment length in bytes (49..=255).
    pub len: u32,
    /// Segment bytes, zero-filled; 256 rather than 255 keeps the size a multiple of 4.
    pub name: [u8; NAME_MAX + 1],
}

const _: () = assert!(size_of::<EdgeKeyLong>() == 264 && align_of::<EdgeKeyLong>() == 4);

/// Copies `segment` into a zero-filled array, or `None` if it does not fit.
fn padded<const N: usize>(segment: &[u8]) -> Option<[u8; N]> {
    let mut name = [0u8; N];
    name.get_mut(..segment.len())?.copy_from_slice(segment);
    Some(name)
}

impl EdgeKeyShort {
    /// The key for `segment` leaving `state`; `None` if the segment is empty or longer than
    /// [`SHORT_SEGMENT_MAX`].
    pub fn new(state: u32, segment: &[u8]) -> Option<Self> {
        if segment.is_empty() {
            return None;
        }
        Some(Self {
            state,
            len: segment.len() as u32,
            name: padded(segment)?,
        })
    }

    /// The segment bytes.
    pub fn segment(&self) -> &[u8] {
        self.name.get(..self.len as usize).unwrap_or(&[])
    }
}

impl EdgeKeyLong {
    /// The key for `segment` leaving `state`; `None` unless the segment is longer than
    /// [`SHORT_SEGMENT_MAX`] and at most [`NAME_MAX`] bytes.
    pub fn new(state: u32, segment: &[u8]) -> Option<Self> {
        if segment.len() <= SHORT_SEGMENT_MAX || segment.len() > NAME_MAX {
            return None;
        }
        Some(Self {
            state,
            len: segment.len() as u32,
            name: padded(segment)?,
        })
    }

    /// The segment bytes.
    pub fn segment(&self) -> &[u8] {
        self.name.get(..self.len as usize).unwrap_or(&[])
    }
}

/// One star segment (`*.rs`, `lib*`, `*`) in the glob array.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GlobValue {
    /// Pattern length in bytes (1..=60).
    pub len: u32,
    /// Pattern bytes, zero-filled; `*` matches any run of bytes.
    pub pattern: [u8; GLOB_MAX],
}

const _: () = assert!(size_of::<GlobValue>() == 64 && align_of::<GlobValue>() == 4);

impl GlobValue {
    /// The entry for `pattern`; `None` if it is empty or longer than [`GLOB_MAX`].
    pub fn new(pattern: &[u8]) -> Option<Self> {
        if pattern.is_empty() {
            return None;
        }
        Some(Self {
            len: pattern.len() as u32,
            pattern: padded(pattern)?,
        })
    }

    /// The pattern bytes.
    pub fn pattern(&self) -> &[u8] {
        self.pattern.get(..self.len as usize).unwrap_or(&[])
    }
}

/// Key of the combo map: the next state for a segment with no literal edge whose glob mask is
/// `mask` (bit `i` set iff glob `glob_first + i` matches).
///
/// Combos are keyed by the state's glob group ([`StateValue::glob_first`]), not by the state:
/// the target of a mask depends only on the state's star-segment and `**` positions, which many
/// states share (every state below `/home/**/*.md` carries the same `**` and `*.md`), so the
/// planner gives such states one glob group and writes their combos once. A missing entry means
/// [`StateValue::default_next`]; the planner omits combos that lead there.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ComboKey {
    /// The state's [`StateValue::glob_first`] (a glob array index).
    pub group: u32,
    /// Glob mask, non-zero, below `1 << glob_count`.
    pub mask: u32,
}

const _: () = assert!(size_of::<ComboKey>() == 8 && align_of::<ComboKey>() == 4);

/// Key of the exec-pin map: the file `(dev, ino)` may be executed when the walk of its path
/// ends in `state` (which accepts [`crate::ACCESS_EXEC_PINNED`]). The value is the policy id.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ExecPinKey {
    /// Global id of the state where the pinned path's walk ends.
    pub state: u32,
    /// Device in the kernel's internal encoding, `MAJOR << 20 | MINOR` (`MKDEV` in
    /// `include/linux/kdev_t.h`), as in `inode->i_sb->s_dev`; not `stat(2)`'s `st_dev`.
    pub dev: u32,
    /// Inode number (`inode->i_ino`, `stat(2)`'s `st_ino`).
    pub ino: u64,
}

const _: () = assert!(size_of::<ExecPinKey>() == 16 && align_of::<ExecPinKey>() == 8);

crate::pod!(
    StateValue,
    EdgeKeyShort,
    EdgeKeyLong,
    GlobValue,
    ComboKey,
    ExecPinKey
);
