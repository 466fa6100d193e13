//! The enforcement engine: loads bee's LSM programs once per process, pins them, and installs
//! and removes per-cgroup policies in the shared kernel maps.
//!
//! Why one file of this length: `Engine` owns the loaded object and its maps, and each method
//! changes them under the same invariants (placement, quiescence, release); the maps' layouts,
//! DNS and names are submodules.
//!
//! ```text
//! Engine::load(&EngineOptions)        load + verify bee.bpf.o (kernel BTF parsed once),
//!                                     attach every LSM program, pin links and maps
//! engine.install(&plan, cgroup, fl)   place the plan (policy id, state and glob ranges),
//!                                     write every map entry, then the scope entry LAST
//! engine.uninstall(installed)         remove the scope entry FIRST, then the rest
//! engine.replace(&installed, &plan)   a live policy change: the new plan's entries under a
//!                                     new policy id, the scope entry switched in one update,
//!                                     a grace period, then the old entries freed
//! engine.read_events(limit)           drain the audit ring buffer
//! ```
//!
//! # Threads
//! Every method that changes the maps takes `&mut self`; `Engine` is `Send`, so share it
//! between threads as `Mutex<Engine>` (one writer at a time keeps the id allocators and the
//! install order consistent). Only one `Engine` may be loaded per process
//! ([`EngineError::AlreadyLoaded`]).
//!
//! # Pinning and SIGKILL
//! Links and maps are pinned under `<pin_root>/<pid>-<starttime>/{links,maps}/` (bpffs,
//! default `/sys/fs/bpf/bee`). If this process dies without uninstalling, the pins keep the
//! programs attached and the maps alive, so the processes of a live scope stay confined (fail
//! closed). The next [`Engine::load`] looks at every other instance directory: one whose owner
//! still runs is left alone; one whose owner is gone is removed only when none of the cgroups
//! in its scope map still has processes, and kept (still enforcing) otherwise.
//! `docs/enforcement.md` explains the choice.
//!
//! # Kernel requirements
//! As [`crate::support`]: BPF LSM active, kernel BTF, cgroup v2, CAP_BPF + CAP_PERFMON (or
//! CAP_SYS_ADMIN), bpffs mounted at the pin root's parent and the pin root writable by this
//! process (`docs/enforcement.md`, "Privileges"). Linux 6.1 or newer (task storage, `bpf_loop`,
//! the `userns_create` hook); tested on Debian's 6.1, 6.12, 6.12 with `preempt=full`, 6.12 with
//! `PREEMPT_RT` and 7.3 (`docs/kernel-testing.md`, "The kernel matrix").

pub mod alloc;
pub(crate) mod dns;
mod error;
pub mod events;
mod grace;
pub(crate) mod maps;
pub(crate) mod names;
mod pins;
mod rename_lock;
mod shared;
mod verify;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use aya::programs::links::{FdLink, PinnedLink};
use aya::{Btf, Ebpf};
use bee_common::AuditEvent;
use bee_common::scope::SCOPE_DNS;

use crate::plan::{EnforcementPlan, Placement};
use verify::{Verified, load_and_verify, lsm_program};

pub use alloc::RangeAlloc;
pub use dns::{
    AnswerMap, DNS_PROGRAMS, SCOPE_ANSWERS_MAX, SCOPE_ANSWERS_MIN, answer_key, boot_time_ns,
    dns_value, scope_quota,
};
pub use error::EngineError;
pub use maps::map_names;
pub use names::{UPSTREAM_ENV, refusal_event};
pub use shared::SharedEngine;

/// Every program of `bee.bpf.o` with its LSM hook (`include/linux/lsm_hook_defs.h`).
pub const PROGRAMS: &[(&str, &str)] = &[
    ("bee_file_open", "file_open"),
    ("bee_file_receive", "file_receive"),
    ("bee_bprm_check", "bprm_check_security"),
    ("bee_mmap_file", "mmap_file"),
    ("bee_file_mprotect", "file_mprotect"),
    ("bee_path_unlink", "path_unlink"),
    ("bee_path_rmdir", "path_rmdir"),
    ("bee_path_mkdir", "path_mkdir"),
    ("bee_path_mknod", "path_mknod"),
    ("bee_path_symlink", "path_symlink"),
    ("bee_path_rename", "path_rename"),
    ("bee_path_link", "path_link"),
    ("bee_path_notify", "path_notify"),
    ("bee_path_truncate", "path_truncate"),
    ("bee_path_chmod", "path_chmod"),
    ("bee_path_chown", "path_chown"),
    ("bee_socket_connect", "socket_connect"),
    ("bee_socket_sendmsg", "socket_sendmsg"),
    ("bee_socket_create", "socket_create"),
    ("bee_unix_stream_connect", "unix_stream_connect"),
    ("bee_unix_may_send", "unix_may_send"),
    ("bee_bpf", "bpf"),
    ("bee_sb_mount", "sb_mount"),
    ("bee_sb_umount", "sb_umount"),
    ("bee_sb_pivotroot", "sb_pivotroot"),
    ("bee_move_mount", "move_mount"),
    ("bee_userns_create", "userns_create"),
    ("bee_ptrace_access_check", "ptrace_access_check"),
    ("bee_task_kill", "task_kill"),
    ("bee_file_fcntl", "file_fcntl"),
    ("bee_file_ioctl", "file_ioctl"),
    ("bee_socket_bind", "socket_bind"),
    ("bee_socket_listen", "socket_listen"),
    ("bee_socket_accept", "socket_accept"),
    ("bee_netlink_send", "netlink_send"),
    ("bee_task_alloc", "task_alloc"),
    ("bee_perf_event_open", "perf_event_open"),
    ("bee_inode_setattr", "inode_setattr"),
    ("bee_inode_setxattr", "inode_setxattr"),
    ("bee_inode_removexattr", "inode_removexattr"),
    ("bee_capable", "capable"),
    ("bee_syslog", "syslog"),
    ("bee_key_permission", "key_permission"),
    ("bee_ipc_permission", "ipc_permission"),
    ("bee_shm_shmctl", "shm_shmctl"),
    ("bee_msg_queue_msgctl", "msg_queue_msgctl"),
    ("bee_sem_semctl", "sem_semctl"),
    ("bee_shm_alloc", "shm_alloc_security"),
    ("bee_msg_queue_alloc", "msg_queue_alloc_security"),
    ("bee_sem_alloc", "sem_alloc_security"),
    ("bee_shm_free", "shm_free_security"),
    ("bee_msg_queue_free", "msg_queue_free_security"),
    ("bee_sem_free", "sem_free_security"),
    ("bee_task_setnice", "task_setnice"),
    ("bee_task_setioprio", "task_setioprio"),
    ("bee_task_setscheduler", "task_setscheduler"),
    ("bee_task_setrlimit", "task_setrlimit"),
];

/// Programs for hooks that not every kernel has, attached where the kernel's BTF has the hook's
/// `bpf_lsm_*` function. Where it is missing the operation reaches a hook of [`PROGRAMS`]
/// instead: POSIX ACLs got `inode_set_acl`/`inode_remove_acl` in 6.2; before, they are
/// extended attributes (`inode_setxattr`, `inode_removexattr`).
/// 32-bit ioctls got `file_ioctl_compat` in 6.8; before, they reach `file_ioctl`.
/// `uring_override_creds` exists where io_uring is built in (Linux 5.12 and later); where it
/// is not, there is no io_uring personality to refuse.
pub const OPTIONAL_PROGRAMS: &[(&str, &str)] = &[
    ("bee_inode_set_acl", "inode_set_acl"),
    ("bee_inode_remove_acl", "inode_remove_acl"),
    ("bee_file_ioctl_compat", "file_ioctl_compat"),
    ("bee_uring_override_creds", "uring_override_creds"),
];

/// The LSM programs that keep the kernel's directory cache sound (`docs/enforcement.md`, "The
/// directory cache"): `(program, hook)`. The `inode_free_security` program deletes an inode's
/// entry before its memory can be reused. (Moves need no program: the cache reads the kernel's
/// `rename_lock` sequence.)
pub const CACHE_PROGRAMS: &[(&str, &str)] = &[("bee_inode_free", "inode_free_security")];

/// Default bpffs directory for pins.
pub const DEFAULT_PIN_ROOT: &str = "/sys/fs/bpf/bee";

/// Sizes of the shared maps (entries) and where to pin. Every policy installed at the same time
/// shares these maps; [`EnforcementPlan::stats`] tells what one policy takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// bpffs directory holding one subdirectory per engine instance.
    pub pin_root: PathBuf,
    /// Scopes (cgroups) at once.
    pub max_scopes: u32,
    /// State array entries (all policies together, plus the dead state 0).
    pub max_states: u32,
    /// Short literal edges.
    pub max_edges_short: u32,
    /// Long literal edges.
    pub max_edges_long: u32,
    /// Glob array entries.
    pub max_globs: u32,
    /// Combo entries.
    pub max_combos: u32,
    /// Exec-pin entries.
    pub max_exec_pins: u32,
    /// IPv4 LPM-trie entries.
    pub max_net_v4: u32,
    /// IPv6 LPM-trie entries.
    pub max_net_v6: u32,
    /// Ring buffer size in bytes (a power of two, a multiple of the page size); one event is
    /// 4,176 bytes plus an 8-byte header.
    pub ring_bytes: u32,
    /// Live resolver answers (address × scope) of all scopes with name grants together.
    pub max_answers: u32,
}

impl Default for EngineOptions {
    /// 1,024 scopes; 262,144 states; 1,048,576 short and 65,536 long edges; 16,384 globs;
    /// 262,144 combos; 65,536 exec pins and IPv4/IPv6 blocks each; a 4 MiB ring buffer;
    /// 65,536 live resolver answers. The
    /// hash maps and tries allocate on insert (`BPF_F_NO_PREALLOC`); the arrays take
    /// 4 MiB (states) and 1 MiB (globs) up front.
    fn default() -> Self {
        Self {
            pin_root: PathBuf::from(DEFAULT_PIN_ROOT),
            max_scopes: 1024,
            max_states: 1 << 18,
            max_edges_short: 1 << 20,
            max_edges_long: 1 << 16,
            max_globs: 1 << 14,
            max_combos: 1 << 18,
            max_exec_pins: 1 << 16,
            max_net_v4: 1 << 16,
            max_net_v6: 1 << 16,
            ring_bytes: 4 << 20,
            max_answers: 1 << 16,
        }
    }
}

/// One policy in the kernel maps, governing one cgroup. Pass it back to
/// [`Engine::uninstall`]; dropping it leaves the policy installed (and enforcing).
#[derive(Debug)]
pub struct InstalledPolicy {
    cgroup_id: u64,
    flags: u32,
    plan: EnforcementPlan,
    states: u32,
    globs: u32,
}

impl InstalledPolicy {
    /// The governed cgroup (v2 id).
    pub fn cgroup_id(&self) -> u64 {
        self.cgroup_id
    }

    /// The scope's `SCOPE_*` flags.
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// The policy id (first word of its LPM keys, `policy_id` of its audit events).
    pub fn policy_id(&self) -> u32 {
        self.plan.placement().policy_id
    }

    /// Where the plan was placed.
    pub fn placement(&self) -> Placement {
        self.plan.placement()
    }

    /// The relocated plan: exactly the entries written.
    pub fn plan(&self) -> &EnforcementPlan {
        &self.plan
    }
}

/// Set while an [`Engine`] lives in this process.
static LOADED: AtomicBool = AtomicBool::new(false);

/// The loaded programs, their pinned links and the shared maps. See the module docs.
#[derive(Debug)]
pub struct Engine {
    /// Keeps the programs (and the aya objects) alive.
    ebpf: Ebpf,
    _links: Vec<PinnedLink>,
    /// The DNS steering programs' links, once [`Engine::enable_dns`] attached them.
    dns_links: Vec<PinnedLink>,
    /// The handle on the answers map every scope's resolver writes through, once opened.
    answers: Option<std::sync::Arc<AnswerMap>>,
    maps: maps::Maps,
    instance_dir: PathBuf,
    policy_ids: RangeAlloc,
    states: RangeAlloc,
    globs: RangeAlloc,
    scopes: BTreeMap<u64, u32>,
    stale: Vec<PathBuf>,
    /// The next `bee_scope.install` (never 0, never reused).
    next_install: u32,
    /// Grace periods since `bee_scopes` elements were switched (see [`grace`]): an element
    /// replaced since the last one may still be read by an in-flight check of its live scope,
    /// so the map is not written until one has passed.
    graces: grace::Graces,
    dircache: bool,
    dircache_refused: Option<String>,
}

/// What [`Engine::verify`] proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// LSM programs the verifier accepted ([`PROGRAMS`] and the [`OPTIONAL_PROGRAMS`] whose
    /// hook the kernel has).
    pub programs: usize,
    /// Why the directory cache had to be compiled out (see [`Engine::dircache_refused`]);
    /// `None` when the programs verified with it.
    pub dircache_refused: Option<String>,
    /// `(program, instructions)` for every program accepted, in the order of [`PROGRAMS`] then
    /// [`OPTIONAL_PROGRAMS`]: how many instructions the verifier processed for it
    /// (`bpf_prog_info`'s `verified_insns`, Linux 5.16+; `0` where the kernel does not say).
    /// Their sum is what a load costs: the verifier's time grows with it
    /// (`docs/enforcement.md`, "Verification cost").
    pub verified_insns: Vec<(&'static str, u32)>,
}

impl Verification {
    /// The instructions the verifier processed over every program.
    #[must_use]
    pub fn total_insns(&self) -> u64 {
        self.verified_insns.iter().map(|&(_, n)| u64::from(n)).sum()
    }

    /// The program whose verification processed the most instructions, and how many.
    #[must_use]
    pub fn costliest(&self) -> Option<(&'static str, u32)> {
        self.verified_insns.iter().copied().max_by_key(|&(_, n)| n)
    }
}

const _: fn() = || {
    fn send<T: Send>() {}
    send::<Engine>();
};

impl Engine {
    /// Loads `bee.bpf.o` ([`bee_ebpf::BEE_OBJECT`]) with the kernel's BTF (parsed once, used
    /// for relocation and attach), attaches every program of [`PROGRAMS`] (and of
    /// [`OPTIONAL_PROGRAMS`] whose hook the kernel has), pins links and maps
    /// under `options.pin_root`, and cleans up stale pins of dead instances (see the module
    /// docs).
    ///
    /// # Errors
    /// [`EngineError`] naming the failing step. Nothing stays attached after an error.
    pub fn load(options: &EngineOptions) -> Result<Self, EngineError> {
        if LOADED.swap(true, Ordering::SeqCst) {
            return Err(EngineError::AlreadyLoaded);
        }
        let result = Self::load_inner(options);
        if result.is_err() {
            LOADED.store(false, Ordering::SeqCst);
        }
        result
    }

    fn load_inner(options: &EngineOptions) -> Result<Self, EngineError> {
        check_object(bee_ebpf::BEE_OBJECT)?;
        crate::bpffs::ensure_mounted(&options.pin_root).map_err(|io_error| {
            EngineError::Syscall {
                call: "mount (the BPF file system)",
                path: PathBuf::from(crate::bpffs::MOUNT_POINT),
                io_error,
            }
        })?;
        let stale = pins::clean_stale(&options.pin_root)?;
        let btf = Btf::from_sys_fs().map_err(|e| EngineError::Btf(Box::new(e)))?;
        let Verified {
            mut ebpf,
            programs,
            dircache_refused,
            ..
        } = load_and_verify(options, &btf)?;
        let graces = grace::Graces::new().map_err(|io_error| EngineError::Syscall {
            call: "BPF_MAP_CREATE (the grace-period map of maps)",
            path: PathBuf::new(),
            io_error,
        })?;
        let instance_dir = pins::create_instance_dir(&options.pin_root)?;
        let built = Self::attach_and_pin(&mut ebpf, &programs, &instance_dir);
        let (mut links, mut maps) = match built {
            Ok(v) => v,
            Err(e) => {
                let _ = pins::remove_instance_dir(&instance_dir);
                return Err(e);
            }
        };
        // The directory cache is an optimisation: without its tracing programs, or compiled
        // out because this kernel's verifier refused it, it stays off and every path is
        // resolved in full.
        let dircache = dircache_refused.is_none()
            && match Self::attach_cache_programs(&mut ebpf, &btf, &instance_dir) {
                Ok(cache_links) => {
                    links.extend(cache_links);
                    maps.enable_dircache().is_ok()
                }
                Err(_) => false,
            };
        Ok(Self {
            ebpf,
            _links: links,
            dns_links: Vec::new(),
            answers: None,
            maps,
            instance_dir,
            policy_ids: RangeAlloc::new(1, u32::MAX),
            // State 0 is the dead state, never allocated.
            states: RangeAlloc::new(1, options.max_states),
            globs: RangeAlloc::new(0, options.max_globs),
            scopes: BTreeMap::new(),
            stale,
            next_install: 1,
            graces,
            dircache,
            dircache_refused,
        })
    }

    /// Loads `bee.bpf.o` and has this kernel's verifier check every program, as
    /// [`Engine::load`] does, without attaching or pinning anything; everything is unloaded
    /// again before this returns. This is the proof `bee check` gives that `bee exec` will
    /// load here: a kernel may run a trivial LSM program and still refuse bee's.
    ///
    /// # Errors
    /// As [`Engine::load`]: the [`EngineError`] of the first step that failed (for a program
    /// the verifier refuses, its `BPF_PROG_LOAD` with the verifier's log).
    pub fn verify(options: &EngineOptions) -> Result<Verification, EngineError> {
        check_object(bee_ebpf::BEE_OBJECT)?;
        let btf = Btf::from_sys_fs().map_err(|e| EngineError::Btf(Box::new(e)))?;
        let verified = load_and_verify(options, &btf)?;
        let names = verified.programs.iter().map(|&(program, _)| program);
        Ok(Verification {
            programs: verified.programs.len(),
            verified_insns: names.zip(verified.verified_insns).collect(),
            dircache_refused: verified.dircache_refused,
        })
    }

    /// `rename_lock`'s address as `/proc/kallsyms` shows it to this process: the address the
    /// directory cache reads its move sequence from (`docs/enforcement.md`, "The directory
    /// cache").
    ///
    /// # Errors
    /// Why there is none, as a sentence (no `CAP_SYSLOG`, `kernel.kptr_restrict`, no such
    /// symbol or more than one).
    pub fn rename_lock_address() -> Result<u64, String> {
        rename_lock::address()
    }

    /// Whether bee's programs, loaded with `address` as `rename_lock`'s, read a move sequence
    /// there: two reads with no rename between agree and are even, and two renames of a scratch
    /// file (in the temporary directory, else the working directory) move it on by at least 4.
    /// [`Engine::load`] makes this check before it turns the directory cache on. Nothing is
    /// attached.
    ///
    /// # Errors
    /// Why not, as a sentence.
    pub fn check_rename_sequence_at(address: u64) -> Result<(), String> {
        let btf = Btf::from_sys_fs().map_err(|e| format!("kernel BTF: {e}"))?;
        verify::check_rename_lock_at(&EngineOptions::default(), &btf, address)
    }

    /// Attaches and pins [`CACHE_PROGRAMS`]. On error the cache stays off.
    fn attach_cache_programs(
        ebpf: &mut Ebpf,
        btf: &Btf,
        dir: &Path,
    ) -> Result<Vec<PinnedLink>, EngineError> {
        let links_dir = dir.join("links");
        let mut links = Vec::with_capacity(CACHE_PROGRAMS.len());
        for &(program, hook) in CACHE_PROGRAMS {
            let err = |call: &'static str| {
                move |source: aya::programs::ProgramError| EngineError::Program {
                    call,
                    program,
                    hook,
                    source: Box::new(source),
                }
            };
            lsm_program(ebpf, program, hook)?
                .load(hook, btf)
                .map_err(err("BPF_PROG_LOAD"))?;
            links.push(attach_and_pin_program(ebpf, program, hook, &links_dir)?);
        }
        Ok(links)
    }

    /// Says where scope `cgroup_id`'s DNS traffic goes (`bee_dns`): call it before
    /// [`Engine::install`] with `SCOPE_DNS`, after [`Engine::enable_dns`]. [`Engine::uninstall`]
    /// removes it with the scope's answers.
    ///
    /// # Errors
    /// A map error.
    pub fn set_dns(
        &mut self,
        cgroup_id: u64,
        value: bee_common::DnsValue,
    ) -> Result<(), EngineError> {
        self.maps.insert_dns(cgroup_id, value)
    }

    /// Removes scope `cgroup_id`'s DNS map entry and its answers, for a scope whose install
    /// failed after [`Engine::set_dns`] ([`Engine::uninstall`] does it for installed ones).
    ///
    /// # Errors
    /// A map error.
    pub fn clear_dns(&mut self, cgroup_id: u64) -> Result<(), EngineError> {
        self.maps.remove_dns(cgroup_id)
    }

    /// Whether the kernel's directory cache is on: compiled in (see [`Engine::dircache_refused`])
    /// and its program ([`CACHE_PROGRAMS`], on `inode_free_security`) attached. When off, every
    /// path is resolved in full.
    pub fn dircache_enabled(&self) -> bool {
        self.dircache
    }

    /// How many directories the kernel's directory cache holds now (entries of `bee_dircache`,
    /// kept until the directory's inode is freed), or `None` when the map cannot be read.
    /// For diagnostics and tests: `docs/enforcement.md`, "The directory cache".
    pub fn dircache_len(&self) -> Option<usize> {
        /// `struct bee_dircache` (`crates/ebpf/bpf/bee.h`) as plain words: 656 bytes.
        #[derive(Clone, Copy)]
        #[repr(C)]
        struct Entry([u64; 82]);
        // SAFETY: plain integers, no padding, any bit pattern is a valid value.
        unsafe impl aya::Pod for Entry {}
        let map = self.ebpf.map("bee_dircache")?;
        let map: aya::maps::HashMap<&aya::maps::MapData, u64, Entry> =
            aya::maps::HashMap::try_from(map).ok()?;
        Some(map.keys().filter(Result::is_ok).count())
    }

    /// Why the directory cache was compiled out of the programs, as a sentence: this kernel's
    /// verifier refused them with it (`the verifier refuses it: …`), `/proc/kallsyms` gave
    /// this process no address for `rename_lock` (`rename_lock has no known address: …`; it
    /// needs `CAP_SYSLOG`), or what the programs read there did not move with renames
    /// (`rename_lock's address failed its check: …`). `None` when it was not (on every kernel
    /// of the matrix since the cache is keyed by inode address; Linux 7.3 refused the inode
    /// storage it used before, reached through `d_parent`).
    pub fn dircache_refused(&self) -> Option<&str> {
        self.dircache_refused.as_deref()
    }

    /// Attaches and pins the verified LSM `programs` and pins the maps.
    fn attach_and_pin(
        ebpf: &mut Ebpf,
        programs: &[(&'static str, &'static str)],
        dir: &Path,
    ) -> Result<(Vec<PinnedLink>, maps::Maps), EngineError> {
        let maps = maps::Maps::take(ebpf, &dir.join("maps"))?;
        let links_dir = dir.join("links");
        let mut links = Vec::with_capacity(programs.len());
        for &(program, hook) in programs {
            links.push(attach_and_pin_program(ebpf, program, hook, &links_dir)?);
        }
        Ok((links, maps))
    }

    /// Installs `plan` for `cgroup_id` with scope `flags` (`bee_common::SCOPE_*`): allocates a
    /// policy id and state/glob ranges, writes every entry, and writes the scope entry last, so
    /// a task of the cgroup is governed only once the whole policy is in place.
    ///
    /// # Errors
    /// [`EngineError::ScopeExists`], [`EngineError::Full`], or a map error; on error nothing of
    /// the plan stays in the maps.
    pub fn install(
        &mut self,
        plan: &EnforcementPlan,
        cgroup_id: u64,
        flags: u32,
    ) -> Result<InstalledPolicy, EngineError> {
        if self.scopes.contains_key(&cgroup_id) {
            return Err(EngineError::ScopeExists { cgroup_id });
        }
        if flags & SCOPE_DNS != 0 && !(self.dns_enabled() && self.maps.has_dns(cgroup_id)) {
            // Port 53 is let through only because these steer it: never one without the other.
            return Err(EngineError::NoDnsSteering { cgroup_id });
        }
        let (placement, states, globs, install) = self.place(plan)?;
        let (policy_id, state_first, glob_first) = (
            placement.policy_id,
            placement.state_base + 1,
            placement.glob_base,
        );
        let installed = plan
            .relocated(placement)
            .map_err(|e| EngineError::Plan(Box::new(e)))
            .and_then(|relocated| {
                self.maps.write_plan(&relocated)?;
                self.quiesce(Some(cgroup_id))?;
                self.maps
                    .insert_scope(cgroup_id, &relocated, flags, install)?;
                Ok(relocated)
            });
        match installed {
            Ok(relocated) => {
                self.scopes.insert(cgroup_id, policy_id);
                Ok(InstalledPolicy {
                    cgroup_id,
                    flags,
                    plan: relocated,
                    states,
                    globs,
                })
            }
            Err(e) => {
                if let Ok(relocated) = plan.relocated(placement) {
                    let _ = self.maps.remove_plan(&relocated);
                }
                self.release(policy_id, state_first, states, glob_first, globs);
                Err(e)
            }
        }
    }

    /// Removes a policy: the scope entry first (the cgroup's tasks are no longer governed and
    /// can no longer reach the other entries), then every other entry, then frees its ids.
    /// Never waits.
    ///
    /// Meant for a cgroup whose tasks are gone (`Scope::teardown` kills them and waits until
    /// the cgroup is empty first). A task still in it is not confined from here on, and a
    /// check it has in flight may be decided by this policy, by another one installed
    /// meanwhile, or by none (`docs/enforcement.md`, "Live policy changes").
    ///
    /// # Errors
    /// A map error. If removing the scope entry fails, the policy stays installed (and
    /// enforcing); later failures leave unreachable entries behind but free nothing.
    pub fn uninstall(&mut self, installed: InstalledPolicy) -> Result<(), EngineError> {
        // No grace period: the deleted element goes back to the free list, and the next insert
        // may reuse it while a check of this cgroup still reads it; such a check is then
        // decided by another policy or by none, as one that came a moment later would be
        // (see `Graces`). Only a new install for this same cgroup waits.
        self.maps.remove_scope(installed.cgroup_id)?;
        self.scopes.remove(&installed.cgroup_id);
        self.graces.deleted(installed.cgroup_id);
        if installed.flags & SCOPE_DNS != 0 {
            self.maps.remove_dns(installed.cgroup_id)?;
        }
        self.maps.remove_plan(&installed.plan)?;
        let p = installed.plan.placement();
        self.release(
            p.policy_id,
            p.state_base + 1,
            installed.states,
            p.glob_base,
            installed.globs,
        );
        Ok(())
    }

    /// Allocates what `plan` needs: an install serial, a policy id, its states and globs.
    /// Returns the placement, the state and glob counts and the serial; on error nothing stays
    /// allocated (a serial is never given back).
    fn place(&mut self, plan: &EnforcementPlan) -> Result<(Placement, u32, u32, u32), EngineError> {
        let stats = plan.stats();
        let states = count("states", stats.states)?;
        let globs = count("globs", stats.globs)?;
        // Install serials are never reused (the directory cache keys its entries by them):
        // when they run out, this engine installs nothing more.
        let install = self.next_install;
        let next_install = install.checked_add(1).ok_or(EngineError::Full {
            what: "install serials",
            needed: 1,
            free: 0,
        })?;
        let policy_id = alloc(&mut self.policy_ids, "policy ids", 1)?;
        self.next_install = next_install;
        let state_first = match alloc(&mut self.states, "states", states) {
            Ok(s) => s,
            Err(e) => {
                self.policy_ids.release(policy_id, 1);
                return Err(e);
            }
        };
        let glob_first = match alloc(&mut self.globs, "globs", globs) {
            Ok(g) => g,
            Err(e) => {
                self.policy_ids.release(policy_id, 1);
                self.states.release(state_first, states);
                return Err(e);
            }
        };
        let placement = Placement {
            policy_id,
            // States are placed at state_base + 1 ..= state_base + states.
            state_base: state_first.saturating_sub(1),
            glob_base: glob_first,
        };
        Ok((placement, states, globs, install))
    }

    /// Waits for a grace period if a `bee_scopes` element was switched since the last one, so
    /// that the next write into the map cannot reuse an element an in-flight check of a live
    /// scope still reads (`docs/enforcement.md`, "Live policy changes"). For an insert of
    /// `inserting`'s entry, also when that cgroup's entry was deleted since the last one (its
    /// tasks' checks may still read the deleted element); a deleted element of another cgroup
    /// is never waited for.
    fn quiesce(&mut self, inserting: Option<u64>) -> Result<(), EngineError> {
        self.graces.settle(inserting).map_err(EngineError::Grace)
    }

    /// Replaces the policy of a live scope with `plan`, atomically for every check: each one
    /// decides under the old policy whole or the new one whole, and once this returns, only
    /// under the new one. The new plan's entries are written under a new policy id, install
    /// serial and state/glob ranges, none of which the old policy's checks can reach; then the
    /// cgroup's `bee_scopes` entry is switched to them in one `BPF_MAP_UPDATE_ELEM`
    /// (`BPF_EXIST`); then, after an RCU grace period (every check that may have read the old
    /// entry has returned), the old policy's entries are removed and its ids freed. The scope's
    /// flags stay as they were. `docs/enforcement.md`, "Live policy changes", gives the
    /// argument.
    ///
    /// On success `installed` describes the new policy. Takes one grace period (more when an
    /// uninstall's background one has not ended yet); `docs/benchmarks.md` has the time.
    ///
    /// # Errors
    /// [`EngineError::NoScope`] when `installed` is not this engine's scope of its cgroup,
    /// [`EngineError::Full`], or a map error: before the switch, the old policy stays in force
    /// and nothing of the new one stays in the maps. [`EngineError::Grace`] or a map error
    /// after the switch: the new policy is in force and `installed` describes it; the old
    /// policy's entries stay behind, unreachable, and its ids are not reused.
    pub fn replace(
        &mut self,
        installed: &mut InstalledPolicy,
        plan: &EnforcementPlan,
    ) -> Result<(), EngineError> {
        let cgroup_id = installed.cgroup_id;
        if self.scopes.get(&cgroup_id) != Some(&installed.policy_id()) {
            return Err(EngineError::NoScope { cgroup_id });
        }
        let (placement, states, globs, install) = self.place(plan)?;
        let written = plan
            .relocated(placement)
            .map_err(|e| EngineError::Plan(Box::new(e)))
            .and_then(|relocated| {
                self.maps.write_plan(&relocated)?;
                self.quiesce(None)?;
                self.maps
                    .switch_scope(cgroup_id, &relocated, installed.flags, install)?;
                Ok(relocated)
            });
        let relocated = match written {
            Ok(r) => r,
            Err(e) => {
                if let Ok(relocated) = plan.relocated(placement) {
                    let _ = self.maps.remove_plan(&relocated);
                }
                self.release(
                    placement.policy_id,
                    placement.state_base + 1,
                    states,
                    placement.glob_base,
                    globs,
                );
                return Err(e);
            }
        };
        // The switch unlinked the old element: it and the old policy's entries stay as they
        // are until every check that may hold them has returned.
        self.graces.switched();
        self.scopes.insert(cgroup_id, placement.policy_id);
        let old = std::mem::replace(
            installed,
            InstalledPolicy {
                cgroup_id,
                flags: installed.flags,
                plan: relocated,
                states,
                globs,
            },
        );
        self.quiesce(None)?;
        self.maps.remove_plan(&old.plan)?;
        let p = old.plan.placement();
        self.release(
            p.policy_id,
            p.state_base + 1,
            old.states,
            p.glob_base,
            old.globs,
        );
        Ok(())
    }

    fn release(&mut self, policy_id: u32, state_first: u32, states: u32, glob: u32, globs: u32) {
        self.policy_ids.release(policy_id, 1);
        self.states.release(state_first, states);
        self.globs.release(glob, globs);
    }

    /// Drains up to `limit` audit events from the ring buffer, oldest first. Records that are
    /// not a whole [`AuditEvent`] are skipped.
    pub fn read_events(&mut self, limit: usize) -> Vec<AuditEvent> {
        self.maps.read_events(limit)
    }

    /// The events of every scope that the ring buffer had no room for since the programs
    /// were loaded (`bee_events_lost`, counted by the programs): each may have been any
    /// scope's denial.
    pub fn events_lost(&self) -> u64 {
        self.maps.events_lost()
    }

    /// The cgroups that currently have a scope in this engine.
    pub fn scoped_cgroups(&self) -> impl Iterator<Item = u64> + '_ {
        self.scopes.keys().copied()
    }

    /// This instance's pin directory.
    pub fn instance_dir(&self) -> &Path {
        &self.instance_dir
    }

    /// Pin directories of dead instances that [`Engine::load`] kept because their scopes still
    /// had processes (they keep enforcing until a later load finds them empty).
    pub fn stale_kept(&self) -> &[PathBuf] {
        &self.stale
    }
}

/// Attaches the loaded LSM `program` (on `hook`), takes its link and pins it as
/// `links_dir/<program>`: one step of [`Engine::load`] for every program it attaches.
fn attach_and_pin_program(
    ebpf: &mut Ebpf,
    program: &'static str,
    hook: &'static str,
    links_dir: &Path,
) -> Result<PinnedLink, EngineError> {
    let err = |call: &'static str| {
        move |source: aya::programs::ProgramError| EngineError::Program {
            call,
            program,
            hook,
            source: Box::new(source),
        }
    };
    let prog = lsm_program(ebpf, program, hook)?;
    let id = prog.attach().map_err(err("BPF_LINK_CREATE"))?;
    let fd_link = FdLink::from(prog.take_link(id).map_err(err("take_link"))?);
    let path = links_dir.join(program);
    fd_link.pin(&path).map_err(|source| EngineError::Pin {
        path,
        source: Box::new(source),
    })
}

/// Removes the pin directories under `pin_root` left by dead engine instances whose scopes
/// have no processes left, as [`Engine::load`] does; returns the dead instances kept because a
/// scope still has processes.
///
/// # Errors
/// [`EngineError::Syscall`] when the directory cannot be read or a pin cannot be removed.
pub fn clean_stale_pins(pin_root: &Path) -> Result<Vec<PathBuf>, EngineError> {
    pins::clean_stale(pin_root)
}

impl Drop for Engine {
    /// With no scope installed, unpins everything (the programs detach once this process's
    /// descriptors close). With scopes still installed, leaves the pins: their processes stay
    /// confined until a later [`Engine::load`] finds their cgroups empty.
    fn drop(&mut self) {
        if self.scopes.is_empty() {
            let _ = pins::remove_instance_dir(&self.instance_dir);
        }
        LOADED.store(false, Ordering::SeqCst);
    }
}

fn count(what: &'static str, n: usize) -> Result<u32, EngineError> {
    u32::try_from(n).map_err(|_| EngineError::Full {
        what,
        needed: n as u64,
        free: 0,
    })
}

fn alloc(a: &mut RangeAlloc, what: &'static str, n: u32) -> Result<u32, EngineError> {
    a.alloc(n).ok_or(EngineError::Full {
        what,
        needed: u64::from(n),
        free: a.free_count(),
    })
}

/// Refuses objects that are not the enforcer: empty, not ELF, or missing a program.
fn check_object(object: &[u8]) -> Result<(), EngineError> {
    if !object.starts_with(b"\x7fELF") {
        return Err(EngineError::NotEnforcer {
            reason: "not an ELF object (a stub?)".into(),
        });
    }
    for (program, _) in PROGRAMS.iter().chain(OPTIONAL_PROGRAMS).chain(DNS_PROGRAMS) {
        if memchr::memmem::find(object, program.as_bytes()).is_none() {
            return Err(EngineError::NotEnforcer {
                reason: format!("no program `{program}`"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stubs_are_refused() {
        assert!(matches!(
            check_object(&[]),
            Err(EngineError::NotEnforcer { .. })
        ));
        assert!(matches!(
            check_object(b"\x7fELF\x02\x01"),
            Err(EngineError::NotEnforcer { .. })
        ));
        assert!(check_object(bee_ebpf::BEE_OBJECT).is_ok());
    }

    /// The benchmarks' floor stands for bee's programs only while it has one on every hook bee
    /// attaches: each program's name is in the object's string table.
    #[test]
    fn the_floor_object_has_a_program_on_every_hook() {
        let obj = bee_ebpf::FLOOR_OBJECT;
        let hooks = PROGRAMS
            .iter()
            .chain(OPTIONAL_PROGRAMS)
            .chain(CACHE_PROGRAMS)
            .map(|&(_, hook)| hook);
        for hook in hooks {
            let name = format!("{}{hook}\0", bee_ebpf::FLOOR_PREFIX);
            assert!(
                obj.windows(name.len()).any(|w| w == name.as_bytes()),
                "floor.bpf.o has no program {name:?}"
            );
        }
    }
}
