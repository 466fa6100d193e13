//! Loading `bee.bpf.o` and having the kernel's verifier check its LSM programs, before anything
//! is attached: [`load_and_verify`] for [`Engine::load`](super::Engine::load) and
//! [`Engine::verify`](super::Engine::verify).

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::panic;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread;

use aya::programs::{Lsm, Program};
use aya::{Btf, Ebpf, EbpfLoader};

use super::{EngineError, EngineOptions, OPTIONAL_PROGRAMS, PROGRAMS, maps, rename_lock};

/// The `.rodata` constant of `bee.bpf.o` that compiles the directory cache in (1) or out (0).
const CFG_DIRCACHE: &str = "bee_cfg_dircache";

/// The `.rodata` constant of `bee.bpf.o` that holds `rename_lock`'s address ([`rename_lock`]).
const CFG_RENAME_LOCK: &str = "bee_cfg_rename_lock";

/// `bee.bpf.o` loaded and its LSM programs verified, nothing attached yet.
pub(super) struct Verified {
    pub(super) ebpf: Ebpf,
    /// `(program, hook)` of every program loaded: [`PROGRAMS`] and the available
    /// [`OPTIONAL_PROGRAMS`].
    pub(super) programs: Vec<(&'static str, &'static str)>,
    /// The instructions the verifier processed for each of `programs`, in the same order:
    /// `bpf_prog_info`'s `verified_insns` (Linux 5.16+), `0` where the kernel does not say.
    pub(super) verified_insns: Vec<u32>,
    pub(super) dircache_refused: Option<String>,
}

impl Verified {
    fn new(ebpf: Ebpf, loaded: Vec<Loaded>, dircache_refused: Option<String>) -> Self {
        let (programs, verified_insns) = loaded.into_iter().unzip();
        Self {
            ebpf,
            programs,
            verified_insns,
            dircache_refused,
        }
    }
}

/// Loads the object (maps created, CO-RE relocated) with the directory cache compiled in (given
/// `rename_lock`'s address) or out (`None`).
fn load_object(
    options: &EngineOptions,
    btf: &Btf,
    rename_lock: Option<u64>,
) -> Result<Ebpf, EngineError> {
    let cfg = u32::from(rename_lock.is_some());
    let address = rename_lock.unwrap_or(0);
    let mut loader = EbpfLoader::new();
    loader.btf(Some(btf));
    for (name, size) in maps::sizes(options) {
        loader.map_max_entries(name, size);
    }
    loader.override_global(CFG_DIRCACHE, &cfg, true);
    loader.override_global(CFG_RENAME_LOCK, &address, true);
    // aya 0.14 has no type for task storage (the per-task path and event buffers, which only
    // the programs use): create those maps without one.
    loader.allow_unsupported_maps();
    loader
        .load(bee_ebpf::BEE_OBJECT)
        .map_err(|e| EngineError::Load(Box::new(e)))
}

/// The LSM program `program` of `ebpf`.
pub(super) fn lsm_program<'e>(
    ebpf: &'e mut Ebpf,
    program: &'static str,
    hook: &'static str,
) -> Result<&'e mut Lsm, EngineError> {
    as_lsm(ebpf.program_mut(program), program, hook)
}

/// `found`, the program named `program` in the object, as an LSM program: an error when the
/// object has no such program or it is of another type.
fn as_lsm<'e>(
    found: Option<&'e mut Program>,
    program: &'static str,
    hook: &'static str,
) -> Result<&'e mut Lsm, EngineError> {
    found
        .ok_or_else(|| EngineError::NotEnforcer {
            reason: format!("no program `{program}`"),
        })?
        .try_into()
        .map_err(|source| EngineError::Program {
            call: "BPF_PROG_LOAD",
            program,
            hook,
            source: Box::new(source),
        })
}

/// At most this many programs are verified at once. The kernel verifies privileged loads in
/// parallel (`bpf_verifier_lock` is taken only for unprivileged ones), and each verification
/// holds its own state in kernel memory while it runs, so the number stays small.
const MAX_VERIFIERS: usize = 4;

/// `(program, hook, required)`, for [`PROGRAMS`] then [`OPTIONAL_PROGRAMS`].
type Wanted = (&'static str, &'static str, bool);

/// `((program, hook), verified instructions)` of one program [`verify_programs`] loaded.
type Loaded = ((&'static str, &'static str), u32);

/// One LSM program waiting for `BPF_PROG_LOAD`: its index in the [`Wanted`] list, and the
/// program itself.
type Job<'e> = (usize, &'e mut Lsm);

/// What one job gave: loaded, with the instructions the verifier processed
/// (`Ok(Some(n))`, [`Verified::verified_insns`]), an optional hook this kernel lacks
/// (`Ok(None)`), or the refusal.
type Outcome = (usize, Result<Option<u32>, EngineError>);

/// Has the kernel verify (`BPF_PROG_LOAD`) every LSM program; returns those loaded, in the
/// order of [`PROGRAMS`] then [`OPTIONAL_PROGRAMS`], each with the instructions its
/// verification processed. An optional program whose hook the kernel lacks is left out.
///
/// The programs are verified on up to [`MAX_VERIFIERS`] threads (one per CPU): verification
/// is most of a load, and a load one program after another kept one CPU busy. After a refusal
/// no further program is started; of the refusals seen, the one earliest in that order is
/// returned, so the first program is always tried and a kernel that refuses it is always
/// reported by it.
fn verify_programs(ebpf: &mut Ebpf, btf: &Btf) -> Result<Vec<Loaded>, EngineError> {
    let required = PROGRAMS.iter().map(|&(p, h)| (p, h, true));
    let optional = OPTIONAL_PROGRAMS.iter().map(|&(p, h)| (p, h, false));
    let wanted: Vec<Wanted> = required.chain(optional).collect();
    // `programs_mut` borrows every program at once, each one apart from the others.
    let mut by_name: HashMap<&str, &mut Program> = ebpf.programs_mut().collect();
    let mut jobs: Vec<Job<'_>> = Vec::with_capacity(wanted.len());
    for (index, &(program, hook, _)) in wanted.iter().enumerate() {
        let lsm = as_lsm(by_name.remove(program), program, hook)?;
        jobs.push((index, lsm));
    }
    let threads = thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(MAX_VERIFIERS)
        .min(jobs.len().max(1));
    let queue = Mutex::new(jobs.into_iter());
    let refused = AtomicBool::new(false);
    let mut outcomes: Vec<Outcome> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| s.spawn(|| verify_queued(&wanted, &queue, &refused, btf)))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|panic| panic::resume_unwind(panic)))
            .collect()
    });
    outcomes.sort_by_key(|&(index, _)| index);
    let mut loaded = Vec::with_capacity(outcomes.len());
    for (index, outcome) in outcomes {
        if let Some(insns) = outcome? {
            let (program, hook, _) = wanted[index];
            loaded.push(((program, hook), insns));
        }
    }
    Ok(loaded)
}

/// One verifier thread of [`verify_programs`]: takes jobs from `queue` until it is empty or
/// a program was refused (`refused`, set here on a refusal).
fn verify_queued(
    wanted: &[Wanted],
    queue: &Mutex<std::vec::IntoIter<Job<'_>>>,
    refused: &AtomicBool,
    btf: &Btf,
) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    while !refused.load(Ordering::SeqCst) {
        // Held only to take the next job; no job can panic while holding it.
        let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
        let Some((index, lsm)) = next else {
            break;
        };
        let (program, hook, needed) = wanted[index];
        let outcome =
            match lsm.load(hook, btf) {
                // A kernel before 5.16 has no count; aya then gives `None`.
                Ok(()) => Ok(Some(
                    lsm.info()
                        .ok()
                        .and_then(|info| info.verified_instruction_count())
                        .unwrap_or(0),
                )),
                Err(aya::programs::ProgramError::Btf(aya::BtfError::UnknownBtfTypeName {
                    ..
                })) if !needed => Ok(None),
                Err(source) => {
                    refused.store(true, Ordering::SeqCst);
                    Err(EngineError::Program {
                        call: "BPF_PROG_LOAD",
                        program,
                        hook,
                        source: Box::new(source),
                    })
                }
            };
        outcomes.push((index, outcome));
    }
    outcomes
}

/// Loads the object with `address` as `rename_lock`'s and runs [`rename_lock::check`] on it;
/// nothing is attached, and everything is unloaded again. For diagnostics and tests.
pub(super) fn check_rename_lock_at(
    options: &EngineOptions,
    btf: &Btf,
    address: u64,
) -> Result<(), String> {
    let mut ebpf = load_object(options, btf, Some(address)).map_err(|e| e.summary())?;
    rename_lock::check(&mut ebpf)
}

/// Loads and verifies the programs with the directory cache; when the verifier refuses one,
/// loads them again without it (the cache only saves work: without it every path is resolved
/// and walked in full). An error of the second load is returned as it is; the first one's is
/// kept as the reason the cache is off. Without `rename_lock`'s address, or when the sequence
/// read there does not behave as one ([`rename_lock::check`]), the cache cannot know when a
/// directory moved, and the programs are loaded without it.
pub(super) fn load_and_verify(options: &EngineOptions, btf: &Btf) -> Result<Verified, EngineError> {
    let without_cache = |why: String| -> Result<Verified, EngineError> {
        let mut ebpf = load_object(options, btf, None)?;
        let loaded = verify_programs(&mut ebpf, btf)?;
        Ok(Verified::new(ebpf, loaded, Some(why)))
    };
    // The cache's reasoning about the order of its reads holds on x86-64 (loads are not
    // reordered with loads), the only architecture bee's object is built for.
    if !cfg!(target_arch = "x86_64") {
        return without_cache("it relies on x86-64's load ordering".into());
    }
    let address = match rename_lock::address() {
        Ok(address) => address,
        Err(why) => return without_cache(format!("rename_lock has no known address: {why}")),
    };
    let mut ebpf = load_object(options, btf, Some(address))?;
    if let Err(why) = rename_lock::check(&mut ebpf) {
        drop(ebpf);
        return without_cache(format!("rename_lock's address failed its check: {why}"));
    }
    let first = match verify_programs(&mut ebpf, btf) {
        Ok(loaded) => return Ok(Verified::new(ebpf, loaded, None)),
        Err(e @ EngineError::Program { .. }) => e,
        Err(e) => return Err(e),
    };
    drop(ebpf);
    without_cache(format!("the verifier refuses it: {}", first.summary()))
}
