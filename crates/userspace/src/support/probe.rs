//! The decisive support gate: load and attach a real LSM program.

use std::io;

use aya::programs::{Lsm, ProgramError};
use aya::{Btf, BtfError, EbpfError, EbpfLoader};

/// The hook the probe program attaches to.
pub const PROBE_HOOK: &str = "file_open";

/// Why the LSM probe failed; each variant names the call that failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The kernel's BTF could not be read or parsed.
    #[error("Btf::from_sys_fs (reading /sys/kernel/btf/vmlinux) failed")]
    Btf {
        /// aya's error.
        #[source]
        source: BtfError,
    },
    /// The probe object could not be parsed, relocated or its maps created.
    #[error("EbpfLoader::load of probe.bpf.o failed")]
    Object {
        /// aya's error.
        #[source]
        source: EbpfError,
    },
    /// The probe object lacks its program (a build problem).
    #[error("probe.bpf.o has no program `{name}`")]
    MissingProgram {
        /// The program name looked up.
        name: &'static str,
    },
    /// The program is not an LSM program (a build problem).
    #[error("program `{name}` is not an LSM program")]
    NotLsm {
        /// The program name.
        name: &'static str,
        /// aya's error.
        #[source]
        source: ProgramError,
    },
    /// `BPF_PROG_LOAD` refused the program.
    #[error("BPF_PROG_LOAD of an LSM program on `{hook}` failed")]
    Load {
        /// The LSM hook.
        hook: &'static str,
        /// aya's error (with the verifier log, if any).
        #[source]
        source: ProgramError,
    },
    /// Attaching the loaded program failed.
    #[error("attaching the LSM program to `{hook}` (BPF_LINK_CREATE) failed")]
    Attach {
        /// The LSM hook.
        hook: &'static str,
        /// aya's error.
        #[source]
        source: ProgramError,
    },
}

/// The OS error inside an aya program error, if there is one.
fn program_io_error(err: &ProgramError) -> Option<&io::Error> {
    match err {
        ProgramError::LoadError { io_error, .. } => Some(io_error),
        ProgramError::SyscallError(e) => Some(&e.io_error),
        _ => None,
    }
}

impl ProbeError {
    /// The errno the kernel returned, when the failure was a syscall.
    pub fn errno(&self) -> Option<i32> {
        match self {
            ProbeError::Load { source, .. } | ProbeError::Attach { source, .. } => {
                program_io_error(source).and_then(io::Error::raw_os_error)
            }
            ProbeError::Btf { .. }
            | ProbeError::Object { .. }
            | ProbeError::MissingProgram { .. }
            | ProbeError::NotLsm { .. } => None,
        }
    }
}

/// Loads [`bee_ebpf::PROBE_OBJECT`], loads its LSM program on
/// [`PROBE_HOOK`] and attaches it, then detaches it again (the program
/// allows everything, so nothing is enforced meanwhile).
///
/// Success proves that this kernel runs BPF LSM programs for this process.
pub fn probe_lsm() -> Result<(), ProbeError> {
    let btf = Btf::from_sys_fs().map_err(|source| ProbeError::Btf { source })?;
    // Hand the parsed BTF to the loader: parsing the kernel's BTF is the
    // slow part of loading, and `Ebpf::load` would parse it a second time.
    let mut ebpf = EbpfLoader::new()
        .btf(Some(&btf))
        .load(bee_ebpf::PROBE_OBJECT)
        .map_err(|source| ProbeError::Object { source })?;
    let name = bee_ebpf::PROG_PROBE;
    let program: &mut Lsm = ebpf
        .program_mut(name)
        .ok_or(ProbeError::MissingProgram { name })?
        .try_into()
        .map_err(|source| ProbeError::NotLsm { name, source })?;
    program
        .load(PROBE_HOOK, &btf)
        .map_err(|source| ProbeError::Load {
            hook: PROBE_HOOK,
            source,
        })?;
    let link = program.attach().map_err(|source| ProbeError::Attach {
        hook: PROBE_HOOK,
        source,
    })?;
    program.detach(link).map_err(|source| ProbeError::Attach {
        hook: PROBE_HOOK,
        source,
    })
}
