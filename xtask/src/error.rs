//! The one error type of the task runner.

use std::io;
use std::path::PathBuf;

/// Everything that can make a task fail. Each variant names what was being
/// done, so the message alone says where to look.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A host program could not be started at all (missing, not executable).
    #[error("could not start `{program}`: {source}")]
    Spawn {
        /// The program that was run.
        program: String,
        /// Why the spawn failed.
        source: io::Error,
    },
    /// A host program ran and reported failure.
    #[error("`{command}` failed ({status}){detail}")]
    Command {
        /// The command line, for the reader.
        command: String,
        /// The exit status as printed by the OS.
        status: String,
        /// Extra context (usually the tail of stderr), prefixed with ": ".
        detail: String,
    },
    /// A file system operation failed.
    #[error("{action} `{path}`: {source}")]
    Io {
        /// What was being done ("read", "create", …).
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Packages are missing and this process cannot install them.
    #[error("missing Debian packages {packages:?} and not running as root to install them; run `apt-get install {}` as root", packages.join(" "))]
    NotRoot {
        /// The package names that are missing.
        packages: Vec<String>,
    },
    /// No kernel package of a matrix entry is known to the archive.
    #[error(
        "kernel {kernel}: no Debian package matches `{pattern}` in {suites} (after `apt-get update` with the runner's own sources)"
    )]
    NoKernelPackage {
        /// The matrix entry (`6.12-rt`).
        kernel: String,
        /// The apt-cache search pattern used.
        pattern: String,
        /// The suites searched.
        suites: String,
    },
    /// Fetching a matrix entry's kernel failed (lists, download, unpacking).
    #[error("kernel {kernel}: fetching `{package}` failed: {cause}")]
    Kernel {
        /// The matrix entry.
        kernel: String,
        /// The package (or, before it was resolved, the pattern).
        package: String,
        /// What failed.
        cause: Box<Error>,
    },
    /// The unpacked kernel package has no `boot/vmlinuz-*`.
    #[error(
        "kernel package unpacked into `{dir}` has no boot/vmlinuz-* nor usr/lib/modules/*/vmlinuz"
    )]
    NoVmlinuz {
        /// The unpacked directory.
        dir: PathBuf,
    },
    /// The unpacked kernel package (and its modules package) has no overlayfs module.
    #[error(
        "kernel package unpacked into `{dir}` has no lib/modules/*/kernel/fs/overlayfs/overlay.ko \
         (nor .ko.xz, nor under usr/)"
    )]
    NoOverlayModule {
        /// The unpacked directory.
        dir: PathBuf,
    },
    /// A virtual machine did not run the command to the end.
    #[error("VM with kernel {kernel}: {reason}")]
    Vm {
        /// The matrix entry ("6.1", "6.12-rt").
        kernel: String,
        /// What went wrong (timeout, no boot, QEMU exit…).
        reason: String,
    },
    /// The guest kernel panicked; `console` holds the last console lines.
    #[error("VM with kernel {kernel}: kernel panic:\n{console}")]
    KernelPanic {
        /// The matrix entry.
        kernel: String,
        /// The last console lines, the oops among them.
        console: String,
    },
    /// The command inside a VM ran and exited non-zero.
    #[error("kernel {kernel}: guest command exited with {code}")]
    GuestFailed {
        /// The matrix entry.
        kernel: String,
        /// The guest command's exit code.
        code: i32,
    },
    /// Tests run inside the VMs did not all pass.
    #[error("kernel tests failed: {summary}")]
    Tests {
        /// Per-kernel counts and failures.
        summary: String,
    },
    /// The committed eBPF object differs from a fresh build.
    #[error(
        "`{committed}` is stale: a fresh build differs ({detail}); run `cargo xtask ebpf` and commit the result"
    )]
    StaleObject {
        /// The committed object path.
        committed: PathBuf,
        /// Size/offset of the first difference.
        detail: String,
    },
    /// Two builds of the same sources gave different bytes.
    #[error("the eBPF build is not deterministic: two builds of `{source_file}` differ")]
    NotDeterministic {
        /// The C source that was built.
        source_file: String,
    },
    /// Output from a tool could not be understood.
    #[error("could not parse output of `{program}`: {detail}")]
    Parse {
        /// The tool whose output was parsed.
        program: String,
        /// What was unexpected.
        detail: String,
    },
    /// The command line was inconsistent.
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// Whether this is a guest panic on an unclaimed `int3` (`Oops: int3`): the mark of a
    /// race in the live patching of kernel text, where a vCPU executes the breakpoint byte of
    /// a patch that another vCPU has already completed. Attaching and detaching BPF
    /// trampolines patches the `bpf_lsm_*` call sites while test processes call the hooks;
    /// under QEMU's multi-threaded TCG the race is seen rarely on 7.x guests
    /// (`docs/kernel-testing.md`, "Emulator faults"). No guest in the matrix sets kprobes,
    /// the only other owner of an `int3` in kernel text.
    pub fn is_text_patching_race(&self) -> bool {
        matches!(self, Error::KernelPanic { console, .. } if console.contains("Oops: int3"))
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds an [`Error::Io`] closure for `map_err`.
pub fn io_err(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}
