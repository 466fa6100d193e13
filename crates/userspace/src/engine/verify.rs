//! Loading `bee.bpf.o` and having the kernel's verifier check its LSM programs, before anything
//! is attached: [`load_and_verify`] for [`Engine::load`](super::Engine::load) and
//! [`Engine::verify`](super::Engine::verify).

use aya::programs::Lsm;
use aya::{Btf, Ebpf, EbpfLoader};

use super::{EngineError, EngineOptions, OPTIONAL_PROGRAMS, PROGRAMS, maps};

/// The `.rodata` constant of `bee.bpf.o` that compiles the directory cache in (1) or out (0).
const CFG_DIRCACHE: &str = "bee_cfg_dircache";

/// `bee.bpf.o` loaded and its LSM programs verified, nothing attached yet.
pub(super) struct Verified {
    pub(super) ebpf: Ebpf,
    /// `(program, hook)` of every program loaded: [`PROGRAMS`] and the available
    /// [`OPTIONAL_PROGRAMS`].
    pub(super) programs: Vec<(&'static str, &'static str)>,
    pub(super) dircache_refused: Option<String>,
}

/// Loads the object (maps created, CO-RE relocated) with the directory cache compiled in or
/// out.
fn load_object(options: &EngineOptions, btf: &Btf, dircache: bool) -> Result<Ebpf, EngineError> {
    let cfg = u32::from(dircache);
    let mut loader = EbpfLoader::new();
    loader.btf(Some(btf));
    for (name, size) in maps::sizes(options) {
        loader.map_max_entries(name, size);
    }
    loader.override_global(CFG_DIRCACHE, &cfg, true);
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
    ebpf.program_mut(program)
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

/// Has the kernel verify (`BPF_PROG_LOAD`) every LSM program; returns those loaded. An
/// optional program whose hook the kernel lacks is left out.
fn verify_programs(
    ebpf: &mut Ebpf,
    btf: &Btf,
) -> Result<Vec<(&'static str, &'static str)>, EngineError> {
    let mut loaded = Vec::with_capacity(PROGRAMS.len() + OPTIONAL_PROGRAMS.len());
    let required = PROGRAMS.iter().map(|&(p, h)| (p, h, true));
    let optional = OPTIONAL_PROGRAMS.iter().map(|&(p, h)| (p, h, false));
    for (program, hook, needed) in required.chain(optional) {
        match lsm_program(ebpf, program, hook)?.load(hook, btf) {
            Ok(()) => loaded.push((program, hook)),
            Err(aya::programs::ProgramError::Btf(aya::BtfError::UnknownBtfTypeName { .. }))
                if !needed => {}
            Err(source) => {
                return Err(EngineError::Program {
                    call: "BPF_PROG_LOAD",
                    program,
                    hook,
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(loaded)
}

/// Loads and verifies the programs with the directory cache; when the verifier refuses one,
/// loads them again without it (the cache only saves work: without it every path is resolved
/// and walked in full). An error of the second load is returned as it is; the first one's is
/// kept as the reason the cache is off.
pub(super) fn load_and_verify(options: &EngineOptions, btf: &Btf) -> Result<Verified, EngineError> {
    let mut ebpf = load_object(options, btf, true)?;
    let first = match verify_programs(&mut ebpf, btf) {
        Ok(programs) => {
            return Ok(Verified {
                ebpf,
                programs,
                dircache_refused: None,
            });
        }
        Err(e @ EngineError::Program { .. }) => e,
        Err(e) => return Err(e),
    };
    drop(ebpf);
    let mut ebpf = load_object(options, btf, false)?;
    let programs = verify_programs(&mut ebpf, btf)?;
    Ok(Verified {
        ebpf,
        programs,
        dircache_refused: Some(first.summary()),
    })
}
