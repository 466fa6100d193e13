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
//! the fields it reads (the kernel matrix of `docs/kernel-testing.md` is tested:
//! 6.1, 6.12, 6.12 with PREEMPT_RT, 7.x).
//!
//! # Kernel requirements
//! Loading needs `CONFIG_BPF_LSM=y`, `bpf` in the active LSM list, BTF at
//! `/sys/kernel/btf/vmlinux`, and CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN;
//! `docs/enforcement.md`, "Privileges"). Some kernels list `bpf` yet refuse LSM programs at
//! `BPF_PROG_LOAD`; only loading [`PROBE_OBJECT`] proves support.
#![no_std]
#![deny(missing_docs)]

/// Bytes aligned for an ELF64 parser (8-byte headers and instructions).
#[repr(C, align(8))]
struct Aligned<T: ?Sized>(T);

/// `bee.bpf.o`: bee's LSM programs and maps (`bpf/bee.bpf.c`, layouts in
/// `crates/common/include/bee_common.h`).
///
/// Programs are named `bee_<hook>` (`bee_bprm_check` for `bprm_check_security`); the list
/// with hooks is `bee_userspace::engine::PROGRAMS` (and `OPTIONAL_PROGRAMS`). Maps: `bee_scopes` (hash, cgroup id →
/// `bee_scope`), `bee_states` and `bee_globs` (arrays), `bee_edges_s`, `bee_edges_l`,
/// `bee_combos`, `bee_exec_pins` (hashes), `bee_net_v4`, `bee_net_v6` (LPM tries),
/// `bee_events` (ring buffer of `bee_event`), plus per-CPU scratch (`bee_pathbuf`,
/// `bee_evbuf`) and an all-zero event template (`bee_evzero`). `docs/enforcement.md` says
/// what each hook enforces.
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

/// Program name in [`PROBE_OBJECT`].
pub const PROG_PROBE: &str = "bee_probe";

/// `floor.bpf.o`: for benchmarks only. One LSM program per hook [`BEE_OBJECT`] attaches, named
/// `floor_<hook>` (`floor_file_open`), each returning 0 at once. Attached in place of bee's
/// programs, it measures what the kernel charges for any BPF program on those hooks (the
/// trampoline and the call), which no change to bee's programs can take away. bee never
/// attaches it.
pub static FLOOR_OBJECT: &[u8] = {
    static ALIGNED: &Aligned<[u8]> = &Aligned(*include_bytes!("../floor.bpf.o"));
    &ALIGNED.0
};

/// Prefix of [`FLOOR_OBJECT`]'s program names: the program on hook `file_open` is
/// `floor_file_open`.
pub const FLOOR_PREFIX: &str = "floor_";

/// `gate.bpf.o`: the Landlock engine's network gate, six cgroup `sock_addr` programs (no BPF
/// LSM needed): `bee_gate_connect4`, `bee_gate_connect6`, `bee_gate_sendmsg4`,
/// `bee_gate_sendmsg6` decide each TCP and UDP peer of a gated scope and steer its DNS;
/// `bee_gate_recvmsg4` and `bee_gate_recvmsg6` read the resolver's replies back as the name
/// server's. Maps: `bee_gate` (hash, cgroup id → `bee_gate_scope`), `bee_gate_v4`,
/// `bee_gate_v6` (LPM tries), `bee_dns`, `bee_answers`, `bee_dns_ports`, `bee_dns_peers` (as in
/// [`BEE_OBJECT`]) and `bee_gate_events` (ring buffer of `bee_event`). Loading needs
/// `CAP_BPF` and `CAP_NET_ADMIN` (or `CAP_SYS_ADMIN`).
pub static GATE_OBJECT: &[u8] = {
    static ALIGNED: &Aligned<[u8]> = &Aligned(*include_bytes!("../gate.bpf.o"));
    &ALIGNED.0
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_aligned_elf() {
        for obj in [BEE_OBJECT, PROBE_OBJECT, FLOOR_OBJECT, GATE_OBJECT] {
            assert_eq!(obj.as_ptr() as usize % 8, 0);
            assert!(obj.starts_with(b"\x7fELF"));
        }
    }
}
