//! bee's kernel programs, as compiled BPF objects ready for a loader.
//!
//! The programs are written in C with CO-RE (`bpf/*.bpf.c`, built against
//! the committed `bpf/vmlinux.h`) and compiled by `cargo xtask ebpf` with
//! Debian's clang 19. The resulting objects are committed, so building bee
//! needs no clang and no BPF toolchain; `cargo xtask ebpf --check` fails
//! when a committed object no longer matches its sources.
//!
//! The objects are relocated against the running kernel's BTF at load time
//! (aya's `Ebpf::load`), so one object serves every kernel that has BTF and
//! the fields it reads (Linux 6.1 and 6.12 are tested).
//!
//! # Kernel requirements
//! Loading needs `CONFIG_BPF_LSM=y`, `bpf` in the active LSM list, BTF at
//! `/sys/kernel/btf/vmlinux`, and CAP_BPF + CAP_PERFMON + CAP_MAC_ADMIN (or
//! CAP_SYS_ADMIN). Some kernels list `bpf` yet refuse LSM programs at
//! `BPF_PROG_LOAD`; only loading [`PROBE_OBJECT`] proves support.
#![no_std]
#![deny(missing_docs)]

/// Bytes aligned for an ELF64 parser (8-byte headers and instructions).
#[repr(C, align(8))]
struct Aligned<T: ?Sized>(T);

/// `bee.bpf.o`: the LSM programs, maps and event layout of `bpf/bee.h`.
///
/// Programs (ELF section → aya program name):
/// - `lsm/file_open` → `bee_file_open`, hook `file_open`;
/// - `lsm/bprm_check_security` → `bee_bprm_check`, hook `bprm_check_security`.
///
/// Maps:
/// - `bee_scopes`: hash, key `u64` cgroup v2 id → `{ policy_id: u32, flags: u32 }`
///   (8 bytes), at most 4096 scopes; a task is enforced on only while its
///   cgroup is a key;
/// - `bee_placeholder_allow`: hash, key `{ dev: u64, ino: u64 }` (16 bytes,
///   `dev` in the kernel's `major << 20 | minor` encoding) → `u32` (unused);
///   the inodes scoped tasks may open and execute. A placeholder for the path
///   matcher, not a policy mechanism;
/// - `bee_events`: ring buffer (256 KiB) of 304-byte `bee_event` records
///   (`bpf/bee.h`): cgroup id, pid, hook, errno, policy id, flags, comm[16],
///   path[256];
/// - `bee_event_buf`: per-CPU scratch used to build one event.
///
/// A scoped open or exec of an inode not in the allow map returns `-EPERM`.
pub static BEE_OBJECT: &[u8] = {
    static ALIGNED: &Aligned<[u8]> = &Aligned(*include_bytes!("../bee.bpf.o"));
    &ALIGNED.0
};

/// `probe.bpf.o`: one LSM program, `bee_probe` on `file_open`, that
/// returns 0 (allows everything). Loading and attaching it is the support
/// check: it proves the kernel runs BPF LSM programs.
pub static PROBE_OBJECT: &[u8] = {
    static ALIGNED: &Aligned<[u8]> = &Aligned(*include_bytes!("../probe.bpf.o"));
    &ALIGNED.0
};

/// Program name of the `file_open` hook in [`BEE_OBJECT`].
pub const PROG_FILE_OPEN: &str = "bee_file_open";
/// Program name of the `bprm_check_security` hook in [`BEE_OBJECT`].
pub const PROG_BPRM_CHECK: &str = "bee_bprm_check";
/// Program name in [`PROBE_OBJECT`].
pub const PROG_PROBE: &str = "bee_probe";
/// Map name: cgroup id → scope.
pub const MAP_SCOPES: &str = "bee_scopes";
/// Map name: the placeholder inode allow set.
pub const MAP_PLACEHOLDER_ALLOW: &str = "bee_placeholder_allow";
/// Map name: the audit ring buffer.
pub const MAP_EVENTS: &str = "bee_events";

/// `bee_scope.flags` bit: also report allowed operations.
pub const SCOPE_AUDIT_ALLOWED: u32 = 1;
/// `bee_event.hook` of `file_open`.
pub const HOOK_FILE_OPEN: u32 = 1;
/// `bee_event.hook` of `bprm_check_security`.
pub const HOOK_BPRM_CHECK: u32 = 2;
/// `bee_event.flags` bit: `bpf_d_path` failed.
pub const EVENT_PATH_ERROR: u32 = 1;
/// Size of one `bee_event` record, in bytes.
pub const EVENT_SIZE: usize = 304;
/// Size of `bee_event.path`, NUL included, in bytes.
pub const EVENT_PATH_MAX: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_aligned_elf() {
        for obj in [BEE_OBJECT, PROBE_OBJECT] {
            assert_eq!(obj.as_ptr() as usize % 8, 0);
            assert!(obj.starts_with(b"\x7fELF"));
        }
    }
}
