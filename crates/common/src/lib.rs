//! Map layouts shared between bee's user space and its kernel programs, and the path matcher
//! the kernel programs implement.
//!
//! Every type here is `#[repr(C)]`, `Copy` and free of implicit padding: where the C layout
//! would insert padding, an explicit `_pad` field is written instead, so that every byte of a
//! map key is defined (hash and LPM-trie maps compare keys bytewise) and so that the layout is
//! the same for clang's BPF target and the host. Each type has a compile-time size and
//! alignment check, and `include/bee_common.h` mirrors the layouts for the C programs
//! (`tests/c_layout.rs` compiles it with the host C compiler and compares every offset).
//!
//! The crate is `no_std` so that the same matcher can be reasoned about (and tested) next to
//! the C code that mirrors it. With the `user` feature, every map type implements `aya::Pod`.
#![no_std]

pub mod access;
pub mod event;
pub mod net;
pub mod paths;
pub mod scope;
pub mod walk;

pub use access::*;
pub use event::{AuditEvent, Hook};
pub use net::{
    AnswerKey, AnswerValue, DnsValue, GateScope, LpmKeyV4, LpmKeyV6, NetPortRule, NetValue,
};
pub use paths::{ComboKey, EdgeKeyLong, EdgeKeyShort, ExecPinKey, GlobValue, StateValue};
pub use scope::ScopeValue;
pub use walk::{SegmentAutomaton, WalkError, glob_segment_matches, walk, walk_state};

/// Implements `aya::Pod` for plain-old-data map types when the `user` feature is on.
macro_rules! pod {
    ($($t:ty),* $(,)?) => {
        $(
            #[cfg(feature = "user")]
            // SAFETY: the type is `#[repr(C)]`, `Copy`, has no implicit padding (checked by the
            // size assertion next to its definition) and every bit pattern is a valid value.
            unsafe impl aya::Pod for $t {}
        )*
    };
}
pub(crate) use pod;
