//! Errors of the enforcement engine. Each names the call or object that failed.

use std::io;
use std::path::PathBuf;

use crate::plan::PlanError;

/// Why the engine could not load, install, uninstall or read.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// An [`super::Engine`] is already loaded in this process; share it instead (the object is
    /// loaded and verified once per process).
    #[error("a bee enforcement engine is already loaded in this process")]
    AlreadyLoaded,
    /// The embedded object is not the enforcer (a stub or an object missing a program or
    /// map): refusing, since it could not enforce.
    #[error("the embedded BPF object cannot enforce: {reason}")]
    NotEnforcer {
        /// What is missing.
        reason: String,
    },
    /// Reading the kernel BTF (`/sys/kernel/btf/vmlinux`) failed.
    #[error("reading the kernel BTF failed: {0}")]
    Btf(#[source] Box<aya::BtfError>),
    /// `EbpfLoader::load` (map creation, CO-RE relocation) failed.
    #[error("loading the BPF object failed: {0}")]
    Load(#[source] Box<aya::EbpfError>),
    /// Loading (verifying) or attaching one LSM program failed.
    #[error("{call} of program `{program}` on LSM hook `{hook}` failed: {source}")]
    Program {
        /// `BPF_PROG_LOAD` or `BPF_LINK_CREATE`.
        call: &'static str,
        /// Program name.
        program: &'static str,
        /// LSM hook.
        hook: &'static str,
        /// aya's error (with the verifier log when loading).
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    /// Pinning a map or link in bpffs failed.
    #[error("BPF_OBJ_PIN of `{}` failed: {source}", path.display())]
    Pin {
        /// The pin path.
        path: PathBuf,
        /// aya's error.
        #[source]
        source: Box<aya::pin::PinError>,
    },
    /// A map operation failed.
    #[error("{call} on map `{map}` failed: {source}")]
    Map {
        /// What was done (`BPF_MAP_UPDATE_ELEM`, `BPF_MAP_DELETE_ELEM`, open).
        call: &'static str,
        /// Map name.
        map: &'static str,
        /// aya's error.
        #[source]
        source: Box<aya::maps::MapError>,
    },
    /// A file-system call on the pin directory or on cgroupfs failed.
    #[error("{call} `{}` failed: {io_error}", path.display())]
    Syscall {
        /// The call (`mkdir`, `unlink`, `readdir`…).
        call: &'static str,
        /// Its path argument.
        path: PathBuf,
        /// The OS error.
        #[source]
        io_error: io::Error,
    },
    /// Relocating the plan failed.
    #[error("placing the policy in the kernel maps failed: {0}")]
    Plan(#[source] Box<PlanError>),
    /// `SCOPE_DNS` asked for a scope whose DNS is not steered: the steering programs are not
    /// attached or the scope has no DNS map entry.
    #[error(
        "cgroup {cgroup_id}: name grants need the DNS steering programs attached and the scope's resolver set first"
    )]
    NoDnsSteering {
        /// The cgroup.
        cgroup_id: u64,
    },
    /// The shared maps have no room for the plan.
    #[error("no room in the kernel maps: {what} needs {needed} entries, {free} free")]
    Full {
        /// The map or id space.
        what: &'static str,
        /// Entries the plan needs.
        needed: u64,
        /// Entries free.
        free: u64,
    },
    /// The cgroup already has a scope in this engine.
    #[error("cgroup {cgroup_id} already has a scope")]
    ScopeExists {
        /// The cgroup v2 id.
        cgroup_id: u64,
    },
    /// The cgroup has no scope in this engine (a replace of a policy that is not installed).
    #[error("cgroup {cgroup_id} has no scope in this engine")]
    NoScope {
        /// The cgroup v2 id.
        cgroup_id: u64,
    },
    /// Waiting for an RCU grace period (`BPF_MAP_UPDATE_ELEM` of the engine's private map of
    /// maps) failed: no in-flight check is known to have finished, so nothing it may read was
    /// rewritten or freed.
    #[error(
        "waiting for the running checks to finish (BPF_MAP_UPDATE_ELEM of a map of maps) \
         failed: {0}"
    )]
    Grace(#[source] io::Error),
}

impl EngineError {
    /// The error in one line: for a program the verifier refused, the call, the program, the
    /// hook, the OS error and the two lines of the verifier's log that say why (the last two
    /// without its statistics, or the error and the `Verification failed:` line that newer
    /// verifiers follow it with) instead of the whole log; any other error as it displays, with its
    /// sources.
    pub fn summary(&self) -> String {
        if let EngineError::Program {
            call,
            program,
            hook,
            source,
        } = self
            && let aya::programs::ProgramError::LoadError {
                io_error,
                verifier_log,
            } = source.as_ref()
        {
            let log = verifier_log.to_string();
            let lines: Vec<&str> = log
                .lines()
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with("processed ")
                        && !l.starts_with("verification time")
                        && !l.starts_with("stack depth")
                        && !l.starts_with("subprog ")
                })
                .collect();
            // Newer verifiers follow the error with an explanation that starts
            // `Verification failed:`; the error is the line before it.
            let end = lines
                .iter()
                .position(|l| l.starts_with("Verification failed"))
                .map_or(lines.len(), |i| i + 1);
            let tail = lines[end.saturating_sub(2)..end].join(" / ");
            return format!(
                "{call} of program `{program}` on LSM hook `{hook}` failed: {io_error}; the \
                 verifier: {tail}"
            );
        }
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(s) = source {
            let msg = s.to_string();
            if !text.contains(&msg) {
                text.push_str(": ");
                text.push_str(&msg);
            }
            source = s.source();
        }
        text
    }
}
