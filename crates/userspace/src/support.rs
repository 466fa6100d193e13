//! Kernel support detection: can this process enforce with BPF LSM here?
//!
//! Why one file of this length: each check of the report reads one kernel fact and says what it
//! means for enforcement, in the order `bee check` prints them; the parsers are in
//! `support/parse.rs`, the tests the last 230 lines.
//!
//! [`SupportReport::detect`] reads the kernel's own files and then proves
//! support by loading and attaching a real LSM program. Each check is a
//! [`Gate`] with a verdict, a reason and a fix hint; enforcement is possible
//! only when every gate passes ([`SupportReport::is_supported`]). Listing
//! `bpf` in the LSM list is necessary but not sufficient: some kernels list
//! it and still refuse LSM programs at `BPF_PROG_LOAD` (EPERM), which only
//! the probe gate catches.

mod parse;
mod probe;

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use parse::{
    BPF_LSM_SINCE, Capabilities, HELPERS, KernelPiece, KernelVersion, LATE_HOOKS, Lockdown,
    MAP_TYPES, NAME_GRANTS, PieceKind, Requirement, RunAs, btf_names, cap, lowest_kernel_with,
    missing_kernel_pieces, parse_cap_eff, parse_cgroup2_mount, parse_lockdown, parse_lsm_list,
    required_capabilities, required_kernel_pieces,
};
pub use probe::{PROBE_HOOK, ProbeError, probe_lsm};

/// Where the kernel exposes its BTF.
pub const BTF_PATH: &str = "/sys/kernel/btf/vmlinux";
/// Where securityfs is mounted.
pub const SECURITYFS: &str = "/sys/kernel/security";

/// Errors reading the files support detection is based on.
#[derive(Debug, thiserror::Error)]
pub enum SupportError {
    /// A kernel file could not be read.
    #[error("reading `{path}` failed: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// securityfs was not mounted and mounting it failed.
    #[error("`mount -t securityfs securityfs {SECURITYFS}` failed: {detail}")]
    MountSecurityfs {
        /// The error or the mount command's stderr.
        detail: String,
    },
}

/// The checks, in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateId {
    /// Kernel BTF at [`BTF_PATH`] (needed for CO-RE and for LSM attach).
    Btf,
    /// The kernel has every helper, map type and LSM hook bee's programs use
    /// ([`required_kernel_pieces`]), by their names in its BTF.
    KernelFeatures,
    /// A cgroup v2 hierarchy is mounted (scopes are cgroups).
    Cgroup2,
    /// The effective capabilities hold every one of [`required_capabilities`].
    Capabilities,
    /// Lockdown does not forbid BPF reads of kernel memory.
    Lockdown,
    /// `bpf` is in the active LSM list.
    LsmList,
    /// A trivial LSM program actually loads and attaches.
    LsmProbe,
    /// bee's own programs pass this kernel's verifier ([`crate::engine::Engine::verify`]):
    /// a kernel can run the probe and still refuse them.
    Programs,
}

impl GateId {
    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            GateId::Btf => "btf",
            GateId::KernelFeatures => "kernel-features",
            GateId::Cgroup2 => "cgroup-v2",
            GateId::Capabilities => "capabilities",
            GateId::Lockdown => "lockdown",
            GateId::LsmList => "lsm-list",
            GateId::LsmProbe => "lsm-probe",
            GateId::Programs => "programs",
        }
    }
}

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// Which check.
    pub id: GateId,
    /// True when the check passed.
    pub passed: bool,
    /// What was found (pass or fail).
    pub reason: String,
    /// What to do about a failure; `None` when passed.
    pub fix: Option<String>,
}

impl Gate {
    fn pass(id: GateId, reason: impl Into<String>) -> Self {
        Self {
            id,
            passed: true,
            reason: reason.into(),
            fix: None,
        }
    }

    fn fail(id: GateId, reason: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            id,
            passed: false,
            reason: reason.into(),
            fix: Some(fix.into()),
        }
    }
}

/// What the running kernel and this process support, with one [`Gate`]
/// per check.
#[derive(Debug, Clone)]
pub struct SupportReport {
    /// `uname -r` (`/proc/sys/kernel/osrelease`), e.g. `6.1.0-57-cloud-amd64`.
    pub kernel_release: String,
    /// True when [`BTF_PATH`] exists.
    pub btf: bool,
    /// The pieces bee's programs need that this kernel lacks ([`required_kernel_pieces`]);
    /// empty when it has them all, or when its BTF could not be read (the gate then fails).
    pub missing_pieces: Vec<KernelPiece>,
    /// The lowest Linux release that has every piece of [`SupportReport::missing_pieces`].
    pub lowest_kernel: Option<KernelVersion>,
    /// The cgroup v2 mount point, from `/proc/self/mountinfo`.
    pub cgroup2_mount: Option<PathBuf>,
    /// The effective capabilities, from `/proc/self/status`.
    pub capabilities: Option<Capabilities>,
    /// Who launched commands run as, which decides [`SupportReport::required`].
    pub run_as: RunAs,
    /// The capabilities this process needs ([`required_capabilities`]).
    pub required: Vec<Requirement>,
    /// Those of [`SupportReport::required`] it lacks (all of them when `CapEff` is unreadable).
    pub missing: Vec<Requirement>,
    /// The lockdown mode; `None` when the lockdown LSM is absent.
    pub lockdown: Option<Lockdown>,
    /// The active LSMs in order, from `/sys/kernel/security/lsm`.
    pub lsms: Vec<String>,
    /// The verdicts, in [`GateId`] order.
    pub gates: Vec<Gate>,
}

fn read(path: &str) -> Result<String, SupportError> {
    fs::read_to_string(path).map_err(|source| SupportError::Read {
        path: PathBuf::from(path),
        source,
    })
}

/// Mounts securityfs on [`SECURITYFS`] unless its `lsm` file is already
/// there.
pub fn ensure_securityfs() -> Result<(), SupportError> {
    if Path::new(SECURITYFS).join("lsm").exists() {
        return Ok(());
    }
    let out = Command::new("mount")
        .args(["-t", "securityfs", "securityfs", SECURITYFS])
        .output()
        .map_err(|e| SupportError::MountSecurityfs {
            detail: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(SupportError::MountSecurityfs {
            detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

const FIX_KERNEL: &str = "use a kernel built with CONFIG_BPF_LSM=y and CONFIG_DEBUG_INFO_BTF=y \
    (Debian's 6.1 and 6.12 kernels are), booted with `lsm=…,bpf`";

impl SupportReport {
    /// Runs every check: the LSM probe, then bee's own programs through the verifier
    /// ([`GateId::Programs`]). Never fails: a check that cannot be carried out is a failed
    /// gate whose reason names the failing call.
    pub fn detect() -> Self {
        Self::detect_with(true)
    }

    /// Every check but [`GateId::Programs`], for callers that load the engine next (`bee
    /// exec`, `bee run`): [`crate::engine::Engine::load`] verifies the same programs, and
    /// its failure is theirs to report.
    pub fn detect_before_load() -> Self {
        Self::detect_with(false)
    }

    fn detect_with(programs: bool) -> Self {
        let kernel_release = read("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|e| format!("unknown ({e})"));
        let mut gates = Vec::new();

        let btf = Path::new(BTF_PATH).exists();
        gates.push(if btf {
            Gate::pass(GateId::Btf, format!("{BTF_PATH} present"))
        } else {
            Gate::fail(GateId::Btf, format!("{BTF_PATH} missing"), FIX_KERNEL)
        });

        let (missing_pieces, features_gate) = kernel_features_gate(&kernel_release);
        let lowest_kernel = lowest_kernel_with(&missing_pieces);
        gates.push(features_gate);

        let cgroup2_mount = read("/proc/self/mountinfo")
            .map(|m| parse_cgroup2_mount(&m))
            .unwrap_or(None);
        gates.push(match &cgroup2_mount {
            Some(p) => Gate::pass(
                GateId::Cgroup2,
                format!("cgroup2 mounted at {}", p.display()),
            ),
            None => Gate::fail(
                GateId::Cgroup2,
                "no cgroup2 mount in /proc/self/mountinfo",
                "mount the unified hierarchy: `mount -t cgroup2 none /sys/fs/cgroup`",
            ),
        });

        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        let run_as = RunAs::new(euid, std::env::var_os("SUDO_UID").is_some());
        let required = required_capabilities(run_as);
        let capabilities = read("/proc/self/status").map(|s| parse_cap_eff(&s));
        let (capabilities, missing, cap_gate) = capability_gate(capabilities, run_as, &required);
        gates.push(cap_gate);

        let securityfs = ensure_securityfs();
        let lockdown_path = format!("{SECURITYFS}/lockdown");
        let lockdown = read(&lockdown_path).ok().and_then(|t| parse_lockdown(&t));
        gates.push(match (lockdown, &securityfs) {
            (Some(Lockdown::Confidentiality), _) => Gate::fail(
                GateId::Lockdown,
                "lockdown=confidentiality forbids BPF reads of kernel memory",
                "boot with lockdown=integrity or none (or without Secure Boot's enforced lockdown)",
            ),
            (Some(mode), _) => Gate::pass(GateId::Lockdown, format!("lockdown mode {mode:?}")),
            (None, Ok(())) => Gate::pass(GateId::Lockdown, "lockdown LSM not active"),
            (None, Err(e)) => Gate::fail(
                GateId::Lockdown,
                e.to_string(),
                "mount securityfs on /sys/kernel/security (needs CAP_SYS_ADMIN)",
            ),
        });

        let lsm_path = format!("{SECURITYFS}/lsm");
        let lsms = read(&lsm_path).map(|t| parse_lsm_list(&t));
        gates.push(match &lsms {
            Ok(list) if list.iter().any(|l| l == "bpf") => {
                Gate::pass(GateId::LsmList, format!("active LSMs: {}", list.join(",")))
            }
            Ok(list) => Gate::fail(
                GateId::LsmList,
                format!("`bpf` not among active LSMs: {}", list.join(",")),
                "add bpf to the kernel command line: lsm=<current list>,bpf, then reboot",
            ),
            Err(e) => Gate::fail(
                GateId::LsmList,
                e.to_string(),
                "mount securityfs on /sys/kernel/security",
            ),
        });
        let lsms = lsms.unwrap_or_default();

        let probe = match probe_lsm() {
            Ok(()) => Gate::pass(
                GateId::LsmProbe,
                format!("an LSM program loaded and attached to {PROBE_HOOK}"),
            ),
            Err(err) => probe_failure(&err, &missing),
        };
        let probe_passed = probe.passed;
        gates.push(probe);
        if programs {
            gates.push(programs_gate(probe_passed));
        }

        Self {
            kernel_release,
            btf,
            missing_pieces,
            lowest_kernel,
            cgroup2_mount,
            capabilities,
            run_as,
            required,
            missing,
            lockdown,
            lsms,
            gates,
        }
    }

    /// A report of `gates` alone, as if nothing else had been read (no kernel release, BTF,
    /// cgroup2 mount, capabilities or LSMs): for code that decides on verdicts, to show how
    /// it treats each combination without the kernel at hand.
    pub fn from_gates(gates: Vec<Gate>) -> Self {
        Self {
            kernel_release: String::new(),
            btf: false,
            missing_pieces: Vec::new(),
            lowest_kernel: None,
            cgroup2_mount: None,
            capabilities: None,
            run_as: RunAs::Caller,
            required: Vec::new(),
            missing: Vec::new(),
            lockdown: None,
            lsms: Vec::new(),
            gates,
        }
    }

    /// True when enforcement is unavailable only because this process lacks capabilities:
    /// the capabilities gate failed, and every other failed gate is the LSM probe or bee's
    /// programs (which the kernel refuses without them). `bee exec` then exits with "permission denied" rather
    /// than "unavailable".
    pub fn lacks_only_capabilities(&self) -> bool {
        let mut failed = self.failures().map(|g| g.id).peekable();
        failed.peek().is_some()
            && self.gate(GateId::Capabilities).is_some_and(|g| !g.passed)
            && failed.all(|id| {
                matches!(
                    id,
                    GateId::Capabilities | GateId::LsmProbe | GateId::Programs
                )
            })
    }

    /// True when every gate passed: enforcement can be relied on.
    pub fn is_supported(&self) -> bool {
        !self.gates.is_empty() && self.gates.iter().all(|g| g.passed)
    }

    /// The gates that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Gate> {
        self.gates.iter().filter(|g| !g.passed)
    }

    /// The verdict of one check.
    pub fn gate(&self, id: GateId) -> Option<&Gate> {
        self.gates.iter().find(|g| g.id == id)
    }
}

/// The kernel-features gate: reads the kernel's BTF and looks for every piece bee's programs
/// need ([`required_kernel_pieces`] of the hooks in [`crate::engine::PROGRAMS`]). Returns the
/// pieces missing and the verdict, which names each with the release that added it and the
/// lowest release that has them all.
fn kernel_features_gate(release: &str) -> (Vec<KernelPiece>, Gate) {
    let required = required_kernel_pieces(crate::engine::PROGRAMS.iter().map(|&(_, hook)| hook));
    let blob = match fs::read(BTF_PATH) {
        Ok(b) => b,
        Err(e) => {
            return (
                Vec::new(),
                Gate::fail(
                    GateId::KernelFeatures,
                    format!("cannot read {BTF_PATH} to look for what bee's programs use: {e}"),
                    FIX_KERNEL,
                ),
            );
        }
    };
    let Some(names) = btf_names(&blob) else {
        return (
            Vec::new(),
            Gate::fail(
                GateId::KernelFeatures,
                format!("{BTF_PATH} is not BTF (no string section could be read)"),
                FIX_KERNEL,
            ),
        );
    };
    let missing = missing_kernel_pieces(&required, &names);
    let gate = features_verdict(release, required.len(), &missing);
    (missing, gate)
}

/// The kernel-features verdict for `missing` of `required` pieces on kernel `release`.
fn features_verdict(release: &str, required: usize, missing: &[KernelPiece]) -> Gate {
    let Some(lowest) = lowest_kernel_with(missing) else {
        return Gate::pass(
            GateId::KernelFeatures,
            format!(
                "the kernel has all {required} helpers, map types and LSM hooks bee's programs use"
            ),
        );
    };
    let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
    Gate::fail(
        GateId::KernelFeatures,
        format!(
            "kernel {release} lacks what bee's programs need: {}; the lowest kernel that has \
             it all is Linux {lowest}",
            list.join(", ")
        ),
        format!(
            "boot Linux {lowest} or newer (bee's programs cannot load here; \
             docs/kernel-testing.md lists the kernels tested)"
        ),
    )
}

/// The programs gate: when the probe passed, loads `bee.bpf.o` and has the verifier check
/// every program, without attaching any ([`crate::engine::Engine::verify`]).
fn programs_gate(probe_passed: bool) -> Gate {
    if !probe_passed {
        return Gate::fail(
            GateId::Programs,
            "not tried: the LSM probe failed",
            "fix what the lsm-probe gate names first",
        );
    }
    programs_verdict(crate::engine::Engine::verify(
        &crate::engine::EngineOptions::default(),
    ))
}

/// The programs verdict for the outcome of [`crate::engine::Engine::verify`].
fn programs_verdict(
    outcome: Result<crate::engine::Verification, crate::engine::EngineError>,
) -> Gate {
    match outcome {
        Ok(v) => {
            // What the load cost, where the kernel counts it (Linux 5.16+).
            let cost = match v.costliest() {
                Some((program, most)) if most > 0 => format!(
                    "; {} instructions verified, the most ({most}) for {program}",
                    v.total_insns()
                ),
                _ => String::new(),
            };
            Gate::pass(
                GateId::Programs,
                match v.dircache_refused {
                    None => format!(
                        "this kernel's verifier accepts all {} of bee's programs{cost}",
                        v.programs
                    ),
                    Some(why) => format!(
                        "this kernel's verifier accepts all {} of bee's programs with the \
                         directory cache compiled out (every path is resolved in full; \
                         {why}){cost}",
                        v.programs
                    ),
                },
            )
        }
        Err(e) => Gate::fail(
            GateId::Programs,
            format!("bee's programs cannot load here: {}", e.summary()),
            "boot a kernel bee is tested on (docs/kernel-testing.md, \"The kernel matrix\")",
        ),
    }
}

/// Names of requirements, joined: `CAP_BPF, CAP_PERFMON`.
fn cap_names(reqs: &[Requirement]) -> String {
    reqs.iter().map(|r| r.name).collect::<Vec<_>>().join(", ")
}

/// What to do about missing capabilities; the example grants the whole `required` set.
fn capability_fix(missing: &[Requirement], required: &[Requirement], run_as: RunAs) -> String {
    let short: Vec<String> = required.iter().map(|r| format!("+{}", r.short)).collect();
    let short = short.join(",");
    let how = match run_as {
        RunAs::Caller => format!(
            "have the operator start bee with {names} among its ambient capabilities, e.g. \
             `setpriv --reuid=USER --regid=USER --init-groups --inh-caps={short} \
             --ambient-caps={short} bee …` or systemd's AmbientCapabilities=, or run bee \
             through sudo",
            names = cap_names(missing)
        ),
        RunAs::Root => format!(
            "keep {names} in bee's bounding and effective sets (commands started as uid 0 must \
             be stripped of every capability), or run bee through sudo from your own user",
            names = cap_names(missing)
        ),
        RunAs::SudoCaller => format!(
            "keep {names} in bee's bounding and effective sets (commands are dropped to the \
             sudo caller)",
            names = cap_names(missing)
        ),
    };
    format!("{how}; docs/enforcement.md (\"Privileges\") says why each is needed")
}

/// The capabilities gate: the effective set against `required`. Returns the set read, the
/// requirements missing (all of them when the set cannot be read) and the verdict.
fn capability_gate(
    capabilities: Result<Option<Capabilities>, SupportError>,
    run_as: RunAs,
    required: &[Requirement],
) -> (Option<Capabilities>, Vec<Requirement>, Gate) {
    let who = match run_as {
        RunAs::Caller => "as a non-root user",
        RunAs::Root => "as uid 0, commands running as uid 0",
        RunAs::SudoCaller => "as uid 0, commands dropped to SUDO_UID",
    };
    match capabilities {
        Ok(Some(c)) => {
            let missing = c.missing(required);
            let gate = if missing.is_empty() {
                Gate::pass(
                    GateId::Capabilities,
                    format!(
                        "CapEff {:016x} holds {} (needed {who})",
                        c.effective,
                        cap_names(required)
                    ),
                )
            } else {
                Gate::fail(
                    GateId::Capabilities,
                    format!(
                        "CapEff {:016x} lacks {} (needed {who}: {})",
                        c.effective,
                        cap_names(&missing),
                        cap_names(required)
                    ),
                    capability_fix(&missing, required, run_as),
                )
            };
            (Some(c), missing, gate)
        }
        Ok(None) => (
            None,
            required.to_vec(),
            Gate::fail(
                GateId::Capabilities,
                "no readable CapEff line in /proc/self/status",
                "check that /proc is mounted",
            ),
        ),
        Err(e) => (
            None,
            required.to_vec(),
            Gate::fail(
                GateId::Capabilities,
                e.to_string(),
                "check that /proc is mounted",
            ),
        ),
    }
}

/// Turns a probe error into a failed gate with an errno-specific hint; `missing` are the
/// capabilities this process lacks (an EPERM is then theirs, not the kernel's).
fn probe_failure(err: &ProbeError, missing: &[Requirement]) -> Gate {
    let mut reason = err.to_string();
    // Show the whole chain: aya's outer errors often hide the OS error.
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        let msg = s.to_string();
        // aya appends "Verifier output: " and the log, empty when the kernel refused the
        // program before verifying it.
        let msg = msg
            .strip_suffix(". Verifier output: ")
            .map_or(msg.as_str(), |m| m)
            .to_owned();
        if !reason.contains(&msg) {
            reason.push_str(": ");
            reason.push_str(&msg);
        }
        source = s.source();
    }
    let lacking;
    let fix = match (err, err.errno()) {
        (_, Some(1)) if !missing.is_empty() => {
            lacking = format!(
                "the kernel refused it for lack of {} (see the capabilities gate)",
                cap_names(missing)
            );
            lacking.as_str()
        }
        (ProbeError::Load { .. }, Some(1)) => {
            "the kernel refuses trampoline-based BPF programs (EPERM before verification) even \
             though bpf may be listed; this happens on some virtualized kernels. Enforcement \
             needs a kernel that runs BPF LSM programs — see docs/kernel-testing.md"
        }
        (ProbeError::Load { .. }, Some(22)) => {
            "the kernel rejected the program (EINVAL): BPF LSM is likely not enabled; boot with \
             lsm=…,bpf on a CONFIG_BPF_LSM=y kernel"
        }
        (ProbeError::Btf { .. }, _) => FIX_KERNEL,
        _ => "run with CAP_BPF and CAP_PERFMON (or as root) on a BPF-LSM kernel",
    };
    Gate::fail(GateId::LsmProbe, reason, fix)
}

impl fmt::Display for SupportReport {
    /// A human-readable table: one line per gate, fix hints indented below.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "kernel {}", self.kernel_release)?;
        for gate in &self.gates {
            let verdict = if gate.passed { "pass" } else { "FAIL" };
            writeln!(f, "  {verdict} {:<15} {}", gate.id.name(), gate.reason)?;
            if let Some(fix) = &gate.fix {
                writeln!(f, "       fix: {fix}")?;
            }
        }
        write!(
            f,
            "BPF LSM enforcement {}",
            if self.is_supported() {
                "supported"
            } else {
                "NOT supported"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(gates: Vec<Gate>) -> SupportReport {
        SupportReport::from_gates(gates)
    }

    #[test]
    fn supported_only_when_every_gate_passes() {
        let ok = report(vec![
            Gate::pass(GateId::Btf, "present"),
            Gate::pass(GateId::LsmProbe, "loaded"),
        ]);
        assert!(ok.is_supported());
        assert_eq!(ok.failures().count(), 0);

        let probe_failed = report(vec![
            Gate::pass(GateId::LsmList, "bpf listed"),
            Gate::fail(GateId::LsmProbe, "EPERM", "use another kernel"),
        ]);
        assert!(!probe_failed.is_supported());
        assert_eq!(
            probe_failed.failures().map(|g| g.id).collect::<Vec<_>>(),
            vec![GateId::LsmProbe]
        );
        assert!(!report(Vec::new()).is_supported(), "no gates is no proof");
    }

    #[test]
    fn missing_capabilities_alone_are_a_permission_problem() {
        let gate = |id, passed| {
            if passed {
                Gate::pass(id, "ok")
            } else {
                Gate::fail(id, "no", "fix")
            }
        };
        let only_caps = report(vec![
            gate(GateId::Btf, true),
            gate(GateId::Capabilities, false),
            gate(GateId::LsmProbe, false),
        ]);
        assert!(only_caps.lacks_only_capabilities());
        let kernel_too = report(vec![
            gate(GateId::Capabilities, false),
            gate(GateId::LsmList, false),
            gate(GateId::LsmProbe, false),
        ]);
        assert!(!kernel_too.lacks_only_capabilities());
        let kernel_only = report(vec![
            gate(GateId::Capabilities, true),
            gate(GateId::LsmProbe, false),
        ]);
        assert!(!kernel_only.lacks_only_capabilities());
        assert!(!report(vec![gate(GateId::Capabilities, true)]).lacks_only_capabilities());
    }

    #[test]
    fn capability_gate_names_what_is_missing_and_how_to_grant_the_set() {
        let required = required_capabilities(RunAs::Caller);
        // CAP_BPF alone (bit 39).
        let caps = Capabilities { effective: 1 << 39 };
        let (_, missing, gate) = capability_gate(Ok(Some(caps)), RunAs::Caller, &required);
        assert_eq!(
            missing.iter().map(|r| r.name).collect::<Vec<_>>(),
            ["CAP_PERFMON"]
        );
        assert!(!gate.passed);
        assert!(
            gate.reason
                .contains("lacks CAP_PERFMON (needed as a non-root user: CAP_BPF, CAP_PERFMON)"),
            "{}",
            gate.reason
        );
        let fix = gate.fix.unwrap_or_default();
        assert!(fix.contains("--ambient-caps=+bpf,+perfmon"), "{fix}");
        let both = Capabilities { effective: 3 << 38 };
        let (_, missing, gate) = capability_gate(Ok(Some(both)), RunAs::Caller, &required);
        assert!(missing.is_empty() && gate.passed, "{gate:?}");
        let (_, missing, gate) = capability_gate(Ok(None), RunAs::Root, &required);
        assert_eq!(missing.len(), required.len());
        assert!(!gate.passed);
    }

    #[test]
    fn kernel_features_verdict_names_each_missing_piece_and_the_lowest_kernel() {
        let required = required_kernel_pieces(["file_open", "userns_create"]);
        let missing: Vec<KernelPiece> = required
            .iter()
            .filter(|p| p.name == "bpf_loop" || p.name == "userns_create")
            .cloned()
            .collect();
        let gate = features_verdict("5.10.0-46-cloud-amd64", required.len(), &missing);
        assert!(!gate.passed);
        assert_eq!(
            gate.reason,
            "kernel 5.10.0-46-cloud-amd64 lacks what bee's programs need: the bpf_loop helper \
             (Linux 5.17), the userns_create LSM hook (Linux 6.1); the lowest kernel that has it \
             all is Linux 6.1"
        );
        assert!(
            gate.fix
                .as_deref()
                .is_some_and(|f| f.starts_with("boot Linux 6.1 or newer")),
            "{gate:?}"
        );
        let gate = features_verdict("6.1.0-57-cloud-amd64", required.len(), &[]);
        assert!(gate.passed && gate.fix.is_none(), "{gate:?}");
    }

    #[test]
    fn every_program_hook_is_a_required_piece() {
        let required = required_kernel_pieces(crate::engine::PROGRAMS.iter().map(|&(_, h)| h));
        for (_, hook) in crate::engine::PROGRAMS {
            assert!(
                required
                    .iter()
                    .any(|p| p.kind == PieceKind::LsmHook && p.name == *hook),
                "{hook}"
            );
        }
        // Hooks bee attaches only where the kernel has them are not required.
        for (_, hook) in crate::engine::OPTIONAL_PROGRAMS {
            assert!(required.iter().all(|p| p.name != *hook), "{hook}");
        }
    }

    /// The helper ids that `object` (an ELF64 little-endian BPF object) calls: every
    /// `BPF_JMP | BPF_CALL` instruction with source register 0 in an executable section.
    fn helper_calls(object: &[u8]) -> std::collections::BTreeSet<u32> {
        let u16_at = |at: usize| u16::from_le_bytes([object[at], object[at + 1]]) as usize;
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&object[at..at + 8]);
            usize::try_from(u64::from_le_bytes(b)).unwrap_or(usize::MAX)
        };
        let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));
        let mut ids = std::collections::BTreeSet::new();
        for i in 0..shnum {
            let sh = shoff + i * shentsize;
            const SHF_EXECINSTR: usize = 0x4;
            if u64_at(sh + 8) & SHF_EXECINSTR == 0 {
                continue;
            }
            let (off, size) = (u64_at(sh + 0x18), u64_at(sh + 0x20));
            for insn in object[off..off + size].chunks_exact(8) {
                if insn[0] == 0x85 && insn[1] >> 4 == 0 {
                    let imm = i32::from_le_bytes([insn[4], insn[5], insn[6], insn[7]]);
                    ids.insert(u32::try_from(imm).unwrap_or(u32::MAX));
                }
            }
        }
        ids
    }

    #[test]
    fn the_helper_table_is_exactly_what_the_object_calls() {
        let called = helper_calls(bee_ebpf::BEE_OBJECT);
        let listed: std::collections::BTreeSet<u32> = HELPERS.iter().map(|h| h.0).collect();
        assert_eq!(
            called, listed,
            "bee.bpf.o calls helpers {called:?}; support::HELPERS lists {listed:?}"
        );
    }

    #[test]
    fn programs_verdict_says_whether_the_cache_was_compiled_out_and_why() {
        use crate::engine::{EngineError, Verification};
        let gate = programs_verdict(Ok(Verification {
            programs: 62,
            dircache_refused: None,
            verified_insns: vec![("bee_file_open", 0), ("bee_path_rename", 0)],
        }));
        assert!(gate.passed && gate.fix.is_none(), "{gate:?}");
        assert_eq!(
            gate.reason,
            "this kernel's verifier accepts all 62 of bee's programs"
        );
        let gate = programs_verdict(Ok(Verification {
            programs: 62,
            dircache_refused: None,
            verified_insns: vec![("bee_file_open", 46_324), ("bee_path_rename", 43_247)],
        }));
        assert_eq!(
            gate.reason,
            "this kernel's verifier accepts all 62 of bee's programs; 89571 instructions \
             verified, the most (46324) for bee_file_open"
        );
        let gate = programs_verdict(Ok(Verification {
            programs: 62,
            dircache_refused: Some("the verifier refuses it: R2 type=untrusted_ptr_".into()),
            verified_insns: Vec::new(),
        }));
        assert!(gate.passed, "{gate:?}");
        assert!(
            gate.reason.contains("directory cache compiled out")
                && gate
                    .reason
                    .ends_with("; the verifier refuses it: R2 type=untrusted_ptr_)"),
            "{}",
            gate.reason
        );
        let gate = programs_verdict(Err(EngineError::NotEnforcer {
            reason: "no program `bee_file_open`".into(),
        }));
        assert!(!gate.passed);
        assert_eq!(
            gate.reason,
            "bee's programs cannot load here: the embedded BPF object cannot enforce: no \
             program `bee_file_open`"
        );
        assert!(
            gate.fix
                .is_some_and(|f| f.contains("docs/kernel-testing.md"))
        );
        let gate = programs_gate(false);
        assert!(!gate.passed && gate.reason == "not tried: the LSM probe failed");
    }

    #[test]
    fn a_programs_gate_refused_for_lack_of_capabilities_is_a_permission_problem() {
        let gates = vec![
            Gate::fail(GateId::Capabilities, "no CAP_BPF", "grant it"),
            Gate::fail(GateId::LsmProbe, "EPERM", "see capabilities"),
            Gate::fail(GateId::Programs, "not tried", "probe first"),
        ];
        assert!(report(gates).lacks_only_capabilities());
    }

    #[test]
    fn display_lists_gates_and_fixes() {
        let text = report(vec![
            Gate::pass(GateId::Btf, "present"),
            Gate::fail(GateId::LsmProbe, "EPERM at load", "use another kernel"),
        ])
        .to_string();
        assert!(text.contains("pass btf"));
        assert!(text.contains("FAIL lsm-probe       EPERM at load"));
        assert!(text.contains("fix: use another kernel"));
        assert!(text.ends_with("BPF LSM enforcement NOT supported"));
    }
}
