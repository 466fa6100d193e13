//! Before anything runs under enforcement: can this kernel enforce, and may this process?
//!
//! Its length is its tests: the code is under 500 lines.
//!
//! `bee exec` and `bee run` ask the same questions, in this order, before they start a command
//! or an episode, and tell apart the two ways each can refuse:
//!
//! 1. [`check_support`]: every gate of [`SupportReport::detect_before_load`] (the last one
//!    loads and attaches a real LSM program);
//! 2. [`load_engine`]: the enforcement engine, pinned under [`DEFAULT_PIN_ROOT`];
//! 3. [`cgroup_parent`]: the bee parent cgroup, and whether this process may move a command
//!    into a scope below it.
//!
//! A refusal is [`Exit::NoPerm`] (77, `EX_NOPERM`) when enforcement would work but this
//! process lacks a privilege — capabilities, a writable pin directory, a cgroup it may create
//! scopes in and join — and [`Exit::Unavailable`] (69, `EX_UNAVAILABLE`) when this kernel
//! cannot enforce. Either way nothing has been started.
//!
//! Which engine enforces is chosen once, by [`open_enforcer`]: the BPF LSM where its support
//! gates pass, the Landlock engine otherwise (`auto`), or the one named (`--engine`).

use std::fmt::Write as _;
use std::sync::Arc;

use bee_core::CompiledPolicy;
use bee_userspace::cgroup::{CgroupError, CgroupParent};
use bee_userspace::engine::{DEFAULT_PIN_ROOT, EngineError, EngineOptions, SharedEngine};
use bee_userspace::landlock::LandlockEngine;
use bee_userspace::scope::{Enforcer, EngineKind};
use bee_userspace::support::SupportReport;

use super::Exit;

/// Why enforcement was refused before anything started, with the fixes that are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    exit: Exit,
    what: String,
    fix: Option<String>,
    causes: Vec<Cause>,
}

/// One reason behind a [`Refusal`] (e.g. a failed support gate), with its fix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cause {
    reason: String,
    fix: Option<String>,
}

impl Refusal {
    /// This kernel cannot enforce: [`Exit::Unavailable`]. `what` is one sentence without a
    /// final stop.
    pub fn unavailable(what: impl Into<String>) -> Self {
        Self::new(Exit::Unavailable, what)
    }

    /// Enforcement would work, but this process lacks a privilege: [`Exit::NoPerm`]. `what` is
    /// one sentence without a final stop.
    pub fn no_permission(what: impl Into<String>) -> Self {
        Self::new(Exit::NoPerm, what)
    }

    fn new(exit: Exit, what: impl Into<String>) -> Self {
        Self {
            exit,
            what: what.into(),
            fix: None,
            causes: Vec::new(),
        }
    }

    /// The same refusal with what to do about it.
    #[must_use]
    pub fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    /// The same refusal with one more reason behind it, and that reason's fix.
    #[must_use]
    pub fn with_cause(mut self, reason: impl Into<String>, fix: Option<String>) -> Self {
        self.causes.push(Cause {
            reason: reason.into(),
            fix,
        });
        self
    }

    /// [`Exit::NoPerm`] or [`Exit::Unavailable`].
    pub fn exit(&self) -> Exit {
        self.exit
    }

    /// True when only privileges are missing ([`Exit::NoPerm`]).
    pub fn is_permission(&self) -> bool {
        self.exit == Exit::NoPerm
    }

    /// What is wrong, in one sentence.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The first cause given ([`Refusal::with_cause`]), else [`Refusal::what`]: the most
    /// particular thing wrong, for one line.
    pub fn first_cause(&self) -> &str {
        self.causes.first().map_or(&self.what, |c| &c.reason)
    }

    /// The refusal for people, one line per fact, each ending in a newline: `{prefix}: {what};
    /// {consequence}`, its fix, then one line per cause with its fix. Fixes are indented to
    /// stand below the text after the prefix.
    pub fn render(&self, prefix: &str, consequence: &str) -> String {
        let indent = " ".repeat(prefix.chars().count() + 2);
        let mut s = format!("{prefix}: {}; {consequence}\n", self.what);
        if let Some(fix) = &self.fix {
            let _ = writeln!(s, "{indent}fix: {fix}");
        }
        for cause in &self.causes {
            let _ = writeln!(s, "{prefix}: {}", cause.reason);
            if let Some(fix) = &cause.fix {
                let _ = writeln!(s, "{indent}fix: {fix}");
            }
        }
        s
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

pub use crate::config::EngineChoice;

/// The enforcer [`open_enforcer`] chose, and why.
pub struct Opened {
    /// The engine, shared by every scope of this process.
    pub enforcer: Arc<dyn Enforcer + Send + Sync>,
    /// Which one it is.
    pub engine: EngineKind,
    /// Why `auto` passed over the BPF LSM, when it did (one sentence).
    pub passed_over: Option<String>,
    /// Why the engine's denials are not reported, when they are not (the Landlock engine
    /// without the kernel's audit records).
    pub unreported: Option<String>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("engine", &self.engine)
            .field("passed_over", &self.passed_over)
            .field("unreported", &self.unreported)
            .finish_non_exhaustive()
    }
}

impl Opened {
    /// [`check_name_grants`] of each policy where the BPF LSM enforces (the Landlock engine
    /// refuses name grants when it plans).
    ///
    /// # Errors
    /// As [`check_name_grants`].
    pub fn check_name_grants(&self, policies: &[&CompiledPolicy]) -> Result<(), Refusal> {
        if self.engine == EngineKind::BpfLsm {
            for p in policies {
                check_name_grants(p)?;
            }
        }
        Ok(())
    }

    /// One line for stderr when the choice was not the BPF LSM: which engine enforces, and
    /// why; and, when its denials are not reported, why not.
    pub fn banner(&self) -> Option<String> {
        (self.engine == EngineKind::Landlock).then(|| {
            let mut line = match &self.passed_over {
                Some(why) => {
                    format!("bee: engine: landlock (the BPF LSM cannot enforce here: {why})")
                }
                None => "bee: engine: landlock".to_owned(),
            };
            if let Some(why) = &self.unreported {
                line.push_str(&format!(
                    "\nbee: denials are enforced but not reported: {why}"
                ));
            }
            line
        })
    }
}

/// Opens the engine `choice` names for `policies` (every policy the process will enforce,
/// e.g. a scenario's episodes; empty when not known yet): for `auto`, the BPF LSM when its
/// support gates pass and its engine loads, else the Landlock engine.
///
/// # Errors
/// A [`Refusal`]: 77 when a privilege is missing, 69 when no engine the choice allows can
/// enforce here — for the Landlock engine, naming every rule of a policy it cannot enforce
/// exactly. `auto` never falls back to an engine that would enforce less: it refuses.
pub fn open_enforcer(
    choice: EngineChoice,
    policies: &[&CompiledPolicy],
) -> Result<Opened, Refusal> {
    let bpf = || -> Result<Opened, Refusal> {
        check_support()?;
        Ok(Opened {
            enforcer: Arc::new(load_engine()?),
            engine: EngineKind::BpfLsm,
            passed_over: None,
            unreported: None,
        })
    };
    let opened = match choice {
        EngineChoice::BpfLsm => bpf(),
        EngineChoice::Landlock => open_landlock(policies, None),
        EngineChoice::Auto => match bpf() {
            Ok(opened) => Ok(opened),
            // A missing privilege for the BPF LSM is the operator's to fix, not a reason to
            // switch engines behind their back.
            Err(r) if r.is_permission() => Err(r),
            Err(r) => open_landlock(policies, Some(r)),
        },
    };
    // An ordinary user in-process: the way that needs nothing of them is the service.
    opened.map_err(|r| {
        if !r.is_permission() || nix::unistd::Uid::effective().is_root() {
            return r;
        }
        let socket = crate::serve::socket_path();
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            // It answers, so this command was told not to ask it.
            r.with_cause(
                format!(
                    "bee is not root, and was told not to use the `bee serve` service that \
                     answers at {} (`--service never`, or `[enforcement] service`)",
                    socket.display()
                ),
                Some("drop `--service never` (or set `service = \"auto\"`) to be confined through it".to_owned()),
            )
        } else {
            r.with_cause(
                format!(
                    "bee is not root, and no `bee serve` service answers at {}",
                    socket.display()
                ),
                Some(
                    "ask an operator to start the service once (`systemctl enable --now \
                     bee.socket`, docs/serve.md): every user's commands are then confined \
                     through it, with no privilege of their own"
                        .to_owned(),
                ),
            )
        }
    })
}

/// The Landlock engine for `policies`, or why not. `bpf` is the BPF LSM's refusal when `auto`
/// is falling back: then the refusal is the BPF LSM's, with the Landlock engine's reasons
/// after its own (so that its first line says what the kernel lacks).
fn open_landlock(policies: &[&CompiledPolicy], bpf: Option<Refusal>) -> Result<Opened, Refusal> {
    // The failed gate, not "this kernel cannot enforce the policy", which the Landlock engine
    // about to enforce it would contradict.
    let passed_over = bpf.as_ref().map(|r| r.first_cause().to_owned());
    let combine = |landlock: Refusal| match &bpf {
        None => landlock,
        Some(b) => {
            let mut r = b
                .clone()
                .with_cause(landlock.what().to_owned(), landlock.fix.clone());
            for c in &landlock.causes {
                r = r.with_cause(format!("the Landlock engine: {}", c.reason), c.fix.clone());
            }
            r
        }
    };
    let engine = LandlockEngine::new().map_err(|e| {
        combine(Refusal::unavailable(format!(
            "the Landlock engine is unavailable: {e}"
        )))
    })?;
    if !holds_sys_admin() {
        return Err(combine(
            Refusal::no_permission(
                "the Landlock engine needs CAP_SYS_ADMIN for each scope's mount and PID namespaces",
            )
            .with_fix("run bee as root"),
        ));
    }
    if policies.is_empty() {
        // A service (no policy yet) loads the network gate now, as root: it plans each
        // caller's policy later with the caller's file-system identity, which may not make or
        // open the gate's pinned map. Where it cannot be had, the policies that need it are
        // refused then, naming why.
        let _ = engine.gate_support();
    }
    for p in policies {
        if let Err(e) = engine.plan(p) {
            let mut r = Refusal::unavailable(format!(
                "the Landlock engine cannot enforce {} exactly",
                p.source
            ))
            .with_fix(
                "change the rules below, or run bee where the BPF LSM enforces (`bee check` says where; `cargo xtask demo` runs the demo in a VM)",
            );
            for cause in e.causes() {
                r = r.with_cause(cause, None);
            }
            return Err(combine(r));
        }
    }
    Ok(Opened {
        unreported: engine.reports_denials().err().map(str::to_owned),
        enforcer: Arc::new(engine),
        engine: EngineKind::Landlock,
        passed_over,
    })
}

/// Whether this process holds `CAP_SYS_ADMIN` (what the Landlock engine's namespaces need).
pub fn holds_sys_admin() -> bool {
    use bee_userspace::support::parse_cap_eff;
    const CAP_SYS_ADMIN: u32 = 21;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_cap_eff(&s))
        .is_some_and(|c| c.has(CAP_SYS_ADMIN))
}

/// Proves that this kernel enforces and that this process holds what it needs to
/// ([`SupportReport::detect_before_load`], which loads a real LSM program; bee's own programs
/// are verified by [`load_engine`], which comes next).
///
/// # Errors
/// [`support_refusal`] of the report when a gate failed.
pub fn check_support() -> Result<(), Refusal> {
    support_refusal(&SupportReport::detect_before_load()).map_or(Ok(()), Err)
}

/// Refuses a policy with name grants when this process cannot load the DNS steering programs
/// ([`bee_userspace::support::NAME_GRANTS`]: CAP_NET_ADMIN, or CAP_SYS_ADMIN); a policy without
/// names passes whatever this process holds.
///
/// # Errors
/// [`Refusal::no_permission`] naming the capability and how to grant it.
pub fn check_name_grants(policy: &bee_core::CompiledPolicy) -> Result<(), Refusal> {
    use bee_userspace::support::{NAME_GRANTS, parse_cap_eff};
    if policy.net.hosts.is_empty() {
        return Ok(());
    }
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_cap_eff(&s));
    if caps.is_some_and(|c| c.meets(&NAME_GRANTS)) {
        return Ok(());
    }
    Err(
        Refusal::no_permission("the policy grants names, and this process cannot enforce them")
            .with_cause(
                format!("lacks {} ({})", NAME_GRANTS.name, NAME_GRANTS.why),
                Some(format!(
                    "run bee with {} too (e.g. `setpriv --inh-caps +{} --ambient-caps +{}`), or \
                     grant addresses (`addr`) instead of names",
                    NAME_GRANTS.name, NAME_GRANTS.short, NAME_GRANTS.short
                )),
            ),
    )
}

/// The refusal a support report amounts to, `None` when every gate passed: missing
/// capabilities alone ([`SupportReport::lacks_only_capabilities`]) are a permission problem,
/// any other failed gate means this kernel cannot enforce. Each failed gate is a cause.
pub fn support_refusal(report: &SupportReport) -> Option<Refusal> {
    if report.is_supported() {
        return None;
    }
    let refusal = if report.lacks_only_capabilities() {
        Refusal::no_permission("this process lacks the capabilities enforcement needs")
    } else {
        Refusal::unavailable("this kernel cannot enforce the policy")
    };
    Some(report.failures().fold(refusal, |r, gate| {
        r.with_cause(
            format!("{} failed: {}", gate.id.name(), gate.reason),
            gate.fix.clone(),
        )
    }))
}

/// Loads the enforcement engine for this process ([`SharedEngine`]).
///
/// # Errors
/// [`engine_refusal`] of the load error.
pub fn load_engine() -> Result<SharedEngine, Refusal> {
    SharedEngine::load(&EngineOptions::default()).map_err(|e| engine_refusal(&e))
}

/// The refusal an engine load error amounts to: a permission denied on the pin directory is a
/// permission problem; anything else (the kernel refuses the programs, bpffs is missing)
/// means enforcement is unavailable. `EACCES` from `BPF_PROG_LOAD` is the verifier refusing a
/// program (as Linux 7.3 refuses bee's, `docs/kernel-testing.md`), not a missing privilege.
pub fn engine_refusal(e: &EngineError) -> Refusal {
    let call = match e {
        EngineError::Program { call, .. } => Some(*call),
        _ => None,
    };
    if refused_by_verifier(call, has_os_error(e, libc::EACCES)) {
        return Refusal::unavailable(format!(
            "this kernel's verifier refuses bee's programs: {}",
            e.summary()
        ))
        .with_fix(
            "run bee on a kernel it is tested on (docs/kernel-testing.md, \"The kernel matrix\")",
        );
    }
    if is_permission_denied(e) {
        Refusal::no_permission(format!("the enforcement engine could not be loaded: {e}")).with_fix(
            format!(
                "bee pins its programs under {DEFAULT_PIN_ROOT}: make it a directory this user \
                 owns (as root, after each boot: `install -d -o USER -m 0700 \
                 {DEFAULT_PIN_ROOT}`)"
            ),
        )
    } else {
        Refusal::unavailable(format!(
            "enforcement is unavailable: the enforcement engine could not be loaded: {}",
            e.summary()
        ))
    }
}

/// Opens the bee parent cgroup and checks that this process may move a command into a scope
/// below it ([`CgroupParent::open_default`], [`CgroupParent::check_join`]).
///
/// # Errors
/// [`cgroup_refusal`] of the cgroup error.
pub fn cgroup_parent() -> Result<CgroupParent, Refusal> {
    CgroupParent::open_default()
        .and_then(|p| p.check_join().map(|()| p))
        .map_err(|e| cgroup_refusal(&e))
}

/// The refusal a cgroup error amounts to: a cgroup this process may not create or join is a
/// permission problem; anything else (no cgroup2 hierarchy) means enforcement is unavailable.
pub fn cgroup_refusal(e: &CgroupError) -> Refusal {
    if matches!(e, CgroupError::CannotJoin { .. }) || is_permission_denied(e) {
        Refusal::no_permission(e.to_string()).with_fix(
            "as root, delegate the bee cgroup to this user (`mkdir -p \
             /sys/fs/cgroup/bee/session`, then `chown USER` /sys/fs/cgroup/bee with its \
             cgroup.procs, cgroup.subtree_control and cgroup.threads, and the session cgroup), \
             and start bee from a cgroup inside it (`echo $$ > \
             /sys/fs/cgroup/bee/session/cgroup.procs`); docs/enforcement.md (\"Privileges\")",
        )
    } else {
        Refusal::unavailable(e.to_string())
    }
}

/// True when `err` or an error it wraps is an OS "permission denied" (`EACCES`).
/// Whether an engine error from `call` (`BPF_PROG_LOAD`, `BPF_LINK_CREATE`, …; `None` for
/// other errors) is the verifier refusing a program: `BPF_PROG_LOAD` failing with `EACCES`
/// (`eaccess`). `EPERM` there is a missing privilege instead.
fn refused_by_verifier(call: Option<&str>, eaccess: bool) -> bool {
    call == Some("BPF_PROG_LOAD") && eaccess
}

/// True when an OS error `errno` is among `err` and its sources.
fn has_os_error(err: &(dyn std::error::Error + 'static), errno: i32) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(errno))
        {
            return true;
        }
        current = e.source();
    }
    false
}

fn is_permission_denied(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
        {
            return true;
        }
        current = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::PathBuf;

    use bee_userspace::support::{Gate, GateId};

    use super::*;

    fn report(failed: &[GateId]) -> SupportReport {
        let all = [
            GateId::Btf,
            GateId::KernelFeatures,
            GateId::Cgroup2,
            GateId::Capabilities,
            GateId::Lockdown,
            GateId::LsmList,
            GateId::LsmProbe,
        ];
        SupportReport::from_gates(
            all.iter()
                .map(|&id| Gate {
                    id,
                    passed: !failed.contains(&id),
                    reason: format!("{} reason", id.name()),
                    fix: failed.contains(&id).then(|| format!("{} fix", id.name())),
                })
                .collect(),
        )
    }

    #[test]
    fn a_supported_report_is_no_refusal() {
        assert_eq!(support_refusal(&report(&[])), None);
    }

    #[test]
    fn missing_capabilities_alone_are_77_with_each_gate_and_fix() {
        let r = support_refusal(&report(&[GateId::Capabilities, GateId::LsmProbe]));
        let Some(r) = r else {
            unreachable!("a failed gate must refuse")
        };
        assert_eq!(r.exit(), Exit::NoPerm);
        assert!(r.is_permission());
        assert_eq!(
            r.render("bee", "`true` was not run"),
            "bee: this process lacks the capabilities enforcement needs; `true` was not run\n\
             bee: capabilities failed: capabilities reason\n     fix: capabilities fix\n\
             bee: lsm-probe failed: lsm-probe reason\n     fix: lsm-probe fix\n"
        );
    }

    #[test]
    fn a_kernel_gate_is_69_even_with_capabilities_missing() {
        for failed in [
            &[GateId::LsmProbe][..],
            &[GateId::Capabilities, GateId::LsmList, GateId::LsmProbe],
            &[GateId::Btf],
            &[GateId::KernelFeatures],
            &[GateId::Capabilities, GateId::KernelFeatures],
        ] {
            let r = support_refusal(&report(failed));
            assert_eq!(r.as_ref().map(Refusal::exit), Some(Exit::Unavailable));
            assert!(
                r.is_some_and(|r| r.what() == "this kernel cannot enforce the policy"),
                "{failed:?}"
            );
        }
    }

    #[test]
    fn a_cgroup_that_cannot_be_joined_or_written_is_77_anything_else_69() {
        let join = CgroupError::CannotJoin {
            own: PathBuf::from("/sys/fs/cgroup/user.slice"),
            parent: PathBuf::from("/sys/fs/cgroup/bee"),
            ancestor: PathBuf::from("/sys/fs/cgroup"),
        };
        let r = cgroup_refusal(&join);
        assert_eq!(r.exit(), Exit::NoPerm);
        assert!(
            r.render("bee run", "no model was called")
                .contains("\n         fix: as root, delegate the bee cgroup"),
            "{r:?}"
        );
        let mkdir = CgroupError::Io {
            op: "mkdir",
            path: PathBuf::from("/sys/fs/cgroup/bee"),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        assert_eq!(cgroup_refusal(&mkdir).exit(), Exit::NoPerm);
        let none = cgroup_refusal(&CgroupError::NoCgroup2);
        assert_eq!(none.exit(), Exit::Unavailable);
        assert_eq!(none.render("bee", "x").lines().count(), 1);
    }

    #[test]
    fn an_unwritable_pin_directory_is_77_a_refused_program_69() {
        let pin = EngineError::Syscall {
            call: "mkdir",
            path: PathBuf::from(DEFAULT_PIN_ROOT).join("x"),
            io_error: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        let r = engine_refusal(&pin);
        assert_eq!(r.exit(), Exit::NoPerm);
        assert!(r.render("bee", "x").contains("install -d -o USER"), "{r:?}");
        let other = EngineError::NotEnforcer {
            reason: "a stub".into(),
        };
        assert_eq!(engine_refusal(&other).exit(), Exit::Unavailable);
    }

    #[test]
    fn a_program_the_verifier_refuses_is_69_not_a_permission_problem() {
        assert!(refused_by_verifier(Some("BPF_PROG_LOAD"), true));
        assert!(!refused_by_verifier(Some("BPF_PROG_LOAD"), false), "EPERM");
        assert!(!refused_by_verifier(Some("BPF_LINK_CREATE"), true));
        assert!(!refused_by_verifier(None, true), "a pin directory's EACCES");
        let pin = EngineError::Syscall {
            call: "mkdir",
            path: PathBuf::from(DEFAULT_PIN_ROOT),
            io_error: io::Error::from_raw_os_error(libc::EACCES),
        };
        assert!(has_os_error(&pin, libc::EACCES));
        assert_eq!(engine_refusal(&pin).exit(), Exit::NoPerm);
    }
}
