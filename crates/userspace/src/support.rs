//! Kernel support detection: can this process enforce with BPF LSM here?
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
    Capabilities, Lockdown, Requirement, RunAs, cap, parse_cap_eff, parse_cgroup2_mount,
    parse_lockdown, parse_lsm_list, required_capabilities,
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
}

impl GateId {
    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            GateId::Btf => "btf",
            GateId::Cgroup2 => "cgroup-v2",
            GateId::Capabilities => "capabilities",
            GateId::Lockdown => "lockdown",
            GateId::LsmList => "lsm-list",
            GateId::LsmProbe => "lsm-probe",
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
    /// Runs every check, the LSM probe last. Never fails: a check that
    /// cannot be carried out is a failed gate whose reason names the
    /// failing call.
    pub fn detect() -> Self {
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

        gates.push(match probe_lsm() {
            Ok(()) => Gate::pass(
                GateId::LsmProbe,
                format!("an LSM program loaded and attached to {PROBE_HOOK}"),
            ),
            Err(err) => probe_failure(&err, &missing),
        });

        Self {
            kernel_release,
            btf,
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
    /// the capabilities gate failed, and every other failed gate is the LSM probe (which the
    /// kernel refuses without them). `bee exec` then exits with "permission denied" rather
    /// than "unavailable".
    pub fn lacks_only_capabilities(&self) -> bool {
        let mut failed = self.failures().map(|g| g.id).peekable();
        failed.peek().is_some()
            && self.gate(GateId::Capabilities).is_some_and(|g| !g.passed)
            && failed.all(|id| matches!(id, GateId::Capabilities | GateId::LsmProbe))
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
            writeln!(f, "  {verdict} {:<13} {}", gate.id.name(), gate.reason)?;
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
    fn display_lists_gates_and_fixes() {
        let text = report(vec![
            Gate::pass(GateId::Btf, "present"),
            Gate::fail(GateId::LsmProbe, "EPERM at load", "use another kernel"),
        ])
        .to_string();
        assert!(text.contains("pass btf"));
        assert!(text.contains("FAIL lsm-probe     EPERM at load"));
        assert!(text.contains("fix: use another kernel"));
        assert!(text.ends_with("BPF LSM enforcement NOT supported"));
    }
}
