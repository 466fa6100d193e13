//! The sandbox: where an episode's tool calls run.
//!
//! Why one file of this length: `Sandbox` owns one scope for a whole session — its creation,
//! each call's child in it, a live change of policy and the teardown — and those steps share
//! the scope's state and the order it is torn down in; the scope through `bee serve` is
//! `remote.rs`.
//!
//! A [`Sandbox`] is made once per episode from an explicit [`SandboxMode`]:
//!
//! * [`SandboxMode::Enforced`]: the policy is widened by the [`RunnerGrant`] (and nothing
//!   else), planned, and installed for one fresh scope cgroup. Every tool call is a new child
//!   spawned into that cgroup through the hardened launcher, so the kernel decides each of its
//!   file accesses, executions and connections.
//! * [`SandboxMode::Host`]: only when the user asked for it (`--host`). Tools run as hardened
//!   host processes in a plain cgroup, with **no** kernel scope. The mode is on the sandbox
//!   ([`Sandbox::enforcement`]) and on every [`RunOutput`], so callers can say so up front and in
//!   their records.
//!
//! Calls run one at a time. A call's processes never outlive it: when its command exits or
//! times out, whatever it left in the cgroup is killed before [`Sandbox::run`] returns, and the
//! audit events drained then are the call's own. The scope is torn down ([`ScopeLease`], the one teardown bee has) by
//! [`Sandbox::finish`], or on drop: kill what remains, uninstall the plan (only once the cgroup
//! is empty, so that survivors stay confined), remove the cgroup.

mod capture;
mod long_lived;
pub mod own_state;
mod remote;
pub mod runner_grant;

use std::ffi::OsString;
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use bee_common::scope::SCOPE_LEARN;
use bee_core::CompiledPolicy;
use bee_userspace::audit::{AuditRecord, Verdict};
use bee_userspace::cgroup::{CgroupError, CgroupParent, ScopeLimits};
use bee_userspace::launch::{Credentials, LaunchError, LaunchSpec, Rlimits, StdioMode};
use bee_userspace::plan::{EnforcementPlan, PlanError};
use bee_userspace::scope::{
    EnforceError, Enforcer, EngineKind, KillTarget, ScopeError, ScopeLease, WaitLimits,
    wait_and_kill,
};

use crate::records::Enforcement;

pub use capture::Captured;
pub use long_lived::LongLived;
pub use runner_grant::{RUNNER_ORIGIN_KEY, RunnerGrant, RunnerGrantError};

/// How an episode's tool calls are isolated.
pub enum SandboxMode {
    /// One kernel scope for the episode, confined by `policy` (plus the [`RunnerGrant`]).
    Enforced {
        /// The kernel side: installs the plan and reports audit events.
        enforcer: Arc<dyn Enforcer + Send + Sync>,
        /// The episode's compiled policy, before the runner grant is added.
        policy: CompiledPolicy,
    },
    /// Hardened host processes in a plain cgroup, with no kernel enforcement. Only for an
    /// explicit `--host`.
    Host,
    /// One kernel scope for the episode made by the `bee serve` service at `socket`, which
    /// proves `policy` (plus the [`RunnerGrant`]) within this user's ceiling: for a bee with
    /// no privilege of its own.
    Service {
        /// The service's socket.
        socket: PathBuf,
        /// The episode's compiled policy, before the runner grant is added.
        policy: CompiledPolicy,
    },
}

impl fmt::Debug for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxMode::Enforced { policy, .. } => f
                .debug_struct("Enforced")
                .field("policy", &policy.source)
                .finish_non_exhaustive(),
            SandboxMode::Host => f.write_str("Host"),
            SandboxMode::Service { socket, policy } => f
                .debug_struct("Service")
                .field("socket", socket)
                .field("policy", &policy.source)
                .finish(),
        }
    }
}

/// How often [`Sandbox::run_until`] asks whether to stop.
pub const STOP_POLL: Duration = Duration::from_millis(50);

/// Everything a sandbox is made from.
#[derive(Debug)]
pub struct SandboxConfig {
    /// The isolation mode.
    pub mode: SandboxMode,
    /// The workspace: the working directory of every call, which relative tool paths name.
    pub workspace: PathBuf,
    /// The bee executable that runs file tools (`bee __tool`); `None`: this process's own
    /// executable (`/proc/self/exe`).
    pub runner: Option<PathBuf>,
    /// The cgroup below which the episode's cgroup is made; `None`: bee's default parent.
    pub cgroup_parent: Option<PathBuf>,
    /// Limits of the episode's cgroup.
    pub limits: ScopeLimits,
    /// `SCOPE_*` flags of the scope (enforced mode; through the service, only `SCOPE_LEARN`
    /// is asked for, and the service grants it only within the caller's ceiling).
    pub scope_flags: u32,
    /// The user tool calls run as; `None`: bee's own.
    pub credentials: Option<Credentials>,
    /// Resource limits of every call's command.
    pub rlimits: Rlimits,
    /// Variables set for every call, over the passed ones (e.g. the invoking user's `HOME`
    /// when bee runs through `sudo`).
    pub env: Vec<(OsString, OsString)>,
    /// How long to wait for killed processes to be gone.
    pub kill_wait: Duration,
    /// bee's own state that the configuration put outside the workspace's `.bee/` (a
    /// ledger, records directory or audit file): protected in every policy the sandbox
    /// installs, like `.bee/` itself ([`own_state::protect`]).
    pub state: Vec<own_state::StatePath>,
}

/// Makes `policy` the one a scope installs: widened by the runner `grant` (the one widening)
/// and narrowed by bee's own state in `workspace` and in `state` ([`own_state::protect`]).
fn installed(
    policy: &mut CompiledPolicy,
    grant: &RunnerGrant,
    workspace: &Path,
    state: &[own_state::StatePath],
) -> Result<(), SandboxError> {
    grant.apply(policy);
    own_state::protect(policy, workspace, state).map_err(|e| SandboxError::Workspace {
        why: format!("bee's own state (its `.bee` directory, a ledger, records or audit file) cannot be made: {e}"),
        path: workspace.to_owned(),
    })
}

impl SandboxConfig {
    /// A configuration with defaults: bee's own executable as runner, the default cgroup
    /// parent, no limits or flags, bee's credentials, 5 s for kills.
    pub fn new(mode: SandboxMode, workspace: impl Into<PathBuf>) -> Self {
        Self {
            mode,
            workspace: workspace.into(),
            runner: None,
            cgroup_parent: None,
            limits: ScopeLimits::default(),
            scope_flags: 0,
            credentials: None,
            rlimits: Rlimits::default(),
            env: Vec::new(),
            kill_wait: Duration::from_secs(5),
            state: Vec::new(),
        }
    }
}

/// Why the sandbox could not be made or could not run a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The workspace is not an absolute path to a directory.
    #[error("the workspace `{path}` {why}")]
    Workspace {
        /// The workspace as given.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The runner grant could not be worked out.
    #[error(transparent)]
    RunnerGrant(#[from] RunnerGrantError),
    /// The widened policy cannot be enforced.
    #[error("the policy with the tool runner grant cannot be enforced: {0}")]
    Plan(#[from] PlanError),
    /// Creating, killing or removing the cgroup failed.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// The enforcer refused the plan.
    #[error(transparent)]
    Enforce(#[from] EnforceError),
    /// The command could not be launched (it did not run). `denials` are the scope's denials
    /// meanwhile (e.g. its `execve`).
    #[error("{source}")]
    Launch {
        /// The launcher's error.
        #[source]
        source: LaunchError,
        /// Denials recorded for the attempt.
        denials: Vec<AuditRecord>,
    },
    /// Waiting for the command failed.
    #[error("{0}")]
    Wait(#[source] LaunchError),
    /// The sandbox was already torn down.
    #[error("the sandbox was already torn down")]
    Finished,
    /// The sandbox has no kernel scope whose policy could change (`--host`).
    #[error("there is no kernel scope: --host runs tools with no policy to change")]
    NoScope,
    /// Processes of the sandbox survived a kill. The plan stays installed and the cgroup stays,
    /// so that they stay confined.
    #[error("tearing down the sandbox failed (processes survive; the plan stays installed): {0}")]
    Survivors(String),
    /// The `bee serve` service could not be reached, refused, or went away.
    #[error(transparent)]
    Service(#[from] crate::serve::client::ClientError),
}

impl SandboxError {
    /// The sysexits status a command reports for this error: the service's own for its
    /// refusals (65 beyond the ceiling, 77 no ceiling, 69 unreachable), 65 for a policy that
    /// cannot be enforced, 69 otherwise.
    #[must_use]
    pub fn status(&self) -> u8 {
        match self {
            Self::Service(e) => e.status(),
            Self::Plan(_) | Self::Enforce(EnforceError::Refused { .. }) => 65,
            _ => 69,
        }
    }
}

/// How one command ended in the sandbox.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// How it was confined: in a kernel scope, or (`--host`) not at all.
    pub enforcement: Enforcement,
    /// Its wait status.
    pub status: ExitStatus,
    /// True when it ran out of time and was killed with its process group (and everything
    /// else it left in the cgroup).
    pub timed_out: bool,
    /// True when it was stopped early (the run was interrupted) and killed the same way.
    pub interrupted: bool,
    /// Its standard output, capped.
    pub stdout: Captured,
    /// Its standard error, capped.
    pub stderr: Captured,
    /// From launch to the last of its processes gone.
    pub duration: Duration,
    /// The denials the kernel reported for the scope during the call, oldest first (always
    /// empty in host mode).
    pub denials: Vec<AuditRecord>,
    /// Allowed accesses the kernel reported during the call, when the scope audits allows
    /// (`SCOPE_AUDIT_ALLOWS` in [`SandboxConfig::scope_flags`]); else empty.
    pub allowed: Vec<AuditRecord>,
    /// How many of the kernel's audit records were lost while the call ran
    /// ([`Enforcer::drain_lost`], or the service's count): when not 0, `denials` may be
    /// incomplete. Also added up for [`Sandbox::take_lost_records`].
    pub lost_records: u64,
}

impl RunOutput {
    /// The exit code in the shell's convention (128 + signal for a signal).
    pub fn exit_code(&self) -> i32 {
        bee_userspace::launch::exit_code(self.status)
    }
}

/// The place where an episode's tool calls run. See the module documentation.
pub struct Sandbox {
    enforcement: Enforcement,
    enforcer: Option<Arc<dyn Enforcer + Send + Sync>>,
    policy: Option<CompiledPolicy>,
    requested: Option<CompiledPolicy>,
    plan: Option<EnforcementPlan>,
    grant: Option<RunnerGrant>,
    workspace: PathBuf,
    runner: PathBuf,
    credentials: Option<Credentials>,
    rlimits: Rlimits,
    env: Vec<(OsString, OsString)>,
    kill_wait: Duration,
    state: Vec<own_state::StatePath>,
    cgroup_id: u64,
    scope: Scope,
    /// The audit records lost during runs since [`Sandbox::take_lost_records`].
    lost: AtomicU64,
}

/// Where the sandbox's scope is held.
enum Scope {
    /// In this process: the cgroup and the installed plan, taken down in one place
    /// ([`ScopeLease`]).
    Local(Mutex<ScopeLease>),
    /// In the `bee serve` service, over a connection of this sandbox.
    Service(remote::Remote),
}

/// The cgroup parent scopes are made under: `path`, or bee's default. The first time in a
/// process, the scopes that ended bee processes left there are swept
/// ([`CgroupParent::sweep_stale_once`]): housekeeping, which `bee check` reports.
fn open_parent(path: Option<&Path>) -> Result<CgroupParent, SandboxError> {
    let parent = match path {
        Some(p) => CgroupParent::open(p)?,
        None => CgroupParent::open_default()?,
    };
    let _swept = parent.sweep_stale_once();
    Ok(parent)
}

/// The lease, locked. A panic while holding the lock leaves nothing half-done that matters
/// here: the state is the cgroup and install handles, which stay valid.
fn lock(lease: &Mutex<ScopeLease>) -> MutexGuard<'_, ScopeLease> {
    lease.lock().unwrap_or_else(|e| e.into_inner())
}

impl fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sandbox")
            .field("enforcement", &self.enforcement)
            .field("workspace", &self.workspace)
            .field("runner", &self.runner)
            .field("cgroup_id", &self.cgroup_id)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// Makes the episode's sandbox: in enforced mode, widens the policy by the
    /// [`RunnerGrant`], plans it, creates the scope cgroup and installs the plan; in host mode,
    /// creates a plain cgroup.
    ///
    /// # Errors
    /// [`SandboxError`]; nothing is left behind then.
    pub fn new(config: SandboxConfig) -> Result<Self, SandboxError> {
        let workspace = config.workspace;
        let state = config.state;
        if !workspace.is_absolute() || !workspace.is_dir() {
            return Err(SandboxError::Workspace {
                why: "is not an absolute path to a directory".to_owned(),
                path: workspace,
            });
        }
        let runner = match config.runner {
            Some(r) => r,
            None => {
                std::fs::canonicalize("/proc/self/exe").map_err(|source| RunnerGrantError::Io {
                    op: "canonicalize",
                    path: PathBuf::from("/proc/self/exe"),
                    source,
                })?
            }
        };
        // The policy in force: the one asked for, widened by the runner's grant and with
        // bee's own state protected; `None` in host mode.
        let confine = |mut policy: CompiledPolicy| -> Result<_, SandboxError> {
            let grant = RunnerGrant::detect(&runner)?;
            let requested = policy.clone();
            installed(&mut policy, &grant, &workspace, &state)?;
            Ok((policy, requested, grant))
        };
        let mut plan = None;
        let (enforcer, confined, scope) = match config.mode {
            SandboxMode::Service { socket, policy } => {
                let (policy, requested, grant) = confine(policy)?;
                let learn = config.scope_flags & SCOPE_LEARN != 0;
                let remote = remote::Remote::create(&socket, &policy, &requested.source, learn)?;
                let id = remote.scope();
                (
                    None,
                    Some((policy, requested, grant)),
                    (id, Scope::Service(remote)),
                )
            }
            SandboxMode::Enforced { enforcer, policy } => {
                let parent = open_parent(config.cgroup_parent.as_deref())?;
                let (policy, requested, grant) = confine(policy)?;
                // The BPF LSM's maps; the Landlock engine plans from the policy itself.
                if enforcer.engine() == EngineKind::BpfLsm {
                    plan = Some(EnforcementPlan::new(&policy)?);
                }
                let cgroup = parent.create_scope(&config.limits)?;
                let install = match &plan {
                    Some(p) => enforcer.install(p, cgroup.id(), config.scope_flags)?,
                    None => enforcer.install_policy(&policy, &cgroup, config.scope_flags)?,
                };
                let id = cgroup.id();
                let lease = ScopeLease::new(cgroup, Some(install));
                (
                    Some(enforcer),
                    Some((policy, requested, grant)),
                    (id, Scope::Local(Mutex::new(lease))),
                )
            }
            SandboxMode::Host => {
                let cgroup =
                    open_parent(config.cgroup_parent.as_deref())?.create_scope(&config.limits)?;
                let id = cgroup.id();
                (
                    None,
                    None,
                    (id, Scope::Local(Mutex::new(ScopeLease::new(cgroup, None)))),
                )
            }
        };
        let (policy, requested, grant) = match confined {
            Some((p, r, g)) => (Some(p), Some(r), Some(g)),
            None => (None, None, None),
        };
        let (cgroup_id, scope) = scope;
        Ok(Self {
            enforcement: if policy.is_some() {
                Enforcement::Kernel
            } else {
                Enforcement::Host
            },
            enforcer,
            policy,
            requested,
            plan,
            grant,
            workspace,
            runner,
            credentials: config.credentials,
            rlimits: config.rlimits,
            env: config.env,
            kill_wait: config.kill_wait,
            state,
            cgroup_id,
            scope,
            lost: AtomicU64::new(0),
        })
    }

    /// The engine that enforces the scope; `None` in host mode.
    pub fn engine(&self) -> Option<EngineKind> {
        if let Scope::Service(remote) = &self.scope {
            return Some(remote.engine());
        }
        self.enforcer.as_ref().map(|e| e.engine())
    }

    /// How every call in this sandbox is confined.
    pub fn enforcement(&self) -> Enforcement {
        self.enforcement
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The bee executable that runs file tools.
    pub fn runner(&self) -> &Path {
        &self.runner
    }

    /// The episode cgroup's id (the scope's id in audit records).
    pub fn cgroup_id(&self) -> u64 {
        self.cgroup_id
    }

    /// The policy in force, runner grant included (enforced mode).
    pub fn policy(&self) -> Option<&CompiledPolicy> {
        self.policy.as_ref()
    }

    /// The policy as it was given, before the runner grant (enforced mode).
    pub fn requested_policy(&self) -> Option<&CompiledPolicy> {
        self.requested.as_ref()
    }

    /// The installed plan (enforced mode).
    pub fn plan(&self) -> Option<&EnforcementPlan> {
        self.plan.as_ref()
    }

    /// The runner grant added to the policy (enforced mode).
    pub fn runner_grant(&self) -> Option<&RunnerGrant> {
        self.grant.as_ref()
    }

    /// Replaces the policy of the live scope with `requested` (as given, before the runner
    /// grant, which is added again): plans it and has the enforcer switch the scope to it
    /// atomically ([`Enforcer::replace`]: every check sees the old policy whole or the new one
    /// whole). Calls running meanwhile keep running, under whichever policy each check finds.
    ///
    /// # Errors
    /// [`SandboxError::NoScope`] in host mode, [`SandboxError::Finished`] after teardown,
    /// [`SandboxError::Plan`] when the new policy cannot be planned, and
    /// [`SandboxError::Enforce`] when the switch fails; in each case the old policy stays in
    /// force, except after an [`EnforceError::Replace`] with `new_in_force` (the switch
    /// happened, freeing the old entries failed): then [`Sandbox::policy`] is the new one.
    pub fn replace_policy(&mut self, requested: CompiledPolicy) -> Result<(), SandboxError> {
        if let (Scope::Service(remote), Some(grant)) = (&self.scope, self.grant.as_ref()) {
            let mut policy = requested.clone();
            installed(&mut policy, grant, &self.workspace, &self.state)?;
            remote.replace(&policy)?;
            self.requested = Some(requested);
            self.policy = Some(policy);
            return Ok(());
        }
        let (Some(enforcer), Some(grant), Scope::Local(lease)) =
            (self.enforcer.clone(), self.grant.as_ref(), &self.scope)
        else {
            return Err(SandboxError::NoScope);
        };
        let mut policy = requested.clone();
        installed(&mut policy, grant, &self.workspace, &self.state)?;
        let plan = match enforcer.engine() {
            EngineKind::BpfLsm => Some(EnforcementPlan::new(&policy)?),
            EngineKind::Landlock => None,
        };
        let id = lock(lease).install_id().ok_or(SandboxError::Finished)?;
        let switched = match &plan {
            Some(plan) => enforcer.replace(id, plan),
            None => enforcer.replace_policy(id, &policy),
        };
        if let Ok(())
        | Err(EnforceError::Replace {
            new_in_force: true, ..
        }) = &switched
        {
            self.requested = Some(requested);
            self.policy = Some(policy);
            self.plan = plan;
        }
        Ok(switched?)
    }

    /// A launch of `program` as tool calls get it: in the workspace, as the sandbox's user,
    /// with its resource limits, the default environment pass-list and its variables.
    pub fn command(&self, program: impl Into<OsString>) -> LaunchSpec {
        let mut spec = LaunchSpec::new(program)
            .current_dir(&self.workspace)
            .credentials(self.credentials.clone())
            .rlimits(self.rlimits);
        for (k, v) in &self.env {
            spec = spec.env(k, v);
        }
        spec
    }

    /// Runs `spec` in the sandbox with standard input from `/dev/null`. See
    /// [`Sandbox::run_with_input`].
    ///
    /// # Errors
    /// As [`Sandbox::run_with_input`].
    pub fn run(
        &self,
        spec: &LaunchSpec,
        timeout: Duration,
        output_cap: usize,
    ) -> Result<RunOutput, SandboxError> {
        self.run_inner(spec, None, timeout, output_cap, None)
    }

    /// Runs `spec` in the sandbox's cgroup, writes `input` to its standard input, and captures
    /// up to `output_cap` bytes of each of its standard output and error. At `timeout` its
    /// process group is killed (a zero `timeout` gives it no time at all: it is killed at once
    /// and reported as timed out, however fast it is). When it has exited, whatever it left in
    /// the cgroup is killed
    /// too, and the scope's audit events are drained into [`RunOutput::denials`].
    ///
    /// # Errors
    /// [`SandboxError::Launch`] when it did not start (with the denials of the attempt),
    /// [`SandboxError::Wait`], [`SandboxError::Survivors`] when its processes could not be
    /// killed, [`SandboxError::Finished`] after teardown.
    pub fn run_with_input(
        &self,
        spec: &LaunchSpec,
        input: &[u8],
        timeout: Duration,
        output_cap: usize,
    ) -> Result<RunOutput, SandboxError> {
        self.run_inner(spec, Some(input), timeout, output_cap, None)
    }

    /// As [`Sandbox::run_with_input`] (`input` optional), and also stopped — killed like at
    /// the timeout, and reported with [`RunOutput::interrupted`] — as soon as `stop` answers
    /// true; it is asked every [`STOP_POLL`].
    ///
    /// # Errors
    /// As [`Sandbox::run_with_input`].
    pub fn run_until(
        &self,
        spec: &LaunchSpec,
        input: Option<&[u8]>,
        timeout: Duration,
        output_cap: usize,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<RunOutput, SandboxError> {
        self.run_inner(spec, input, timeout, output_cap, Some(stop))
    }

    fn run_inner(
        &self,
        spec: &LaunchSpec,
        input: Option<&[u8]>,
        timeout: Duration,
        output_cap: usize,
        stop: Option<&(dyn Fn() -> bool + Sync)>,
    ) -> Result<RunOutput, SandboxError> {
        let ran = match &self.scope {
            Scope::Local(lease) => self.run_local(lease, spec, input, timeout, output_cap, stop),
            Scope::Service(remote) => remote.run(spec, input, timeout, output_cap, stop),
        };
        if let Ok(out) = &ran {
            self.lost.fetch_add(out.lost_records, Ordering::Relaxed);
        }
        ran
    }

    /// The audit records lost during this sandbox's runs since the last call (0 in host
    /// mode), and while its long-lived processes ran as far as [`Sandbox::denials`] has
    /// read: when not 0, the denials of those runs may be incomplete. The executor takes it
    /// after each tool call, which holds the sandbox alone.
    pub fn take_lost_records(&self) -> u64 {
        self.lost.swap(0, Ordering::Relaxed)
    }

    fn run_local(
        &self,
        lease: &Mutex<ScopeLease>,
        spec: &LaunchSpec,
        input: Option<&[u8]>,
        timeout: Duration,
        output_cap: usize,
        stop: Option<&(dyn Fn() -> bool + Sync)>,
    ) -> Result<RunOutput, SandboxError> {
        let state = lock(lease);
        let cgroup = state.cgroup().ok_or(SandboxError::Finished)?;
        let spec = spec
            .clone()
            .stdin(if input.is_some() {
                StdioMode::Piped
            } else {
                StdioMode::Null
            })
            .stdout(StdioMode::Piped)
            .stderr(StdioMode::Piped);
        let start = Instant::now();
        // An engine that confines at launch (Landlock) gets its plan onto every call.
        let spawned = match &self.enforcer {
            Some(e) => bee_userspace::scope::spawn_into(&**e, state.install_id(), &spec, cgroup),
            None => spec.spawn(cgroup),
        };
        let mut launched = match spawned {
            Ok(l) => l,
            Err(source) => {
                return Err(SandboxError::Launch {
                    source,
                    denials: self.drain().0,
                });
            }
        };
        let writer = launched.take_stdin().zip(input).map(|(mut w, data)| {
            let data = data.to_vec();
            // A command that does not read its input closes the pipe: EPIPE is fine.
            std::thread::spawn(move || {
                let _ = w.write_all(&data);
            })
        });
        let out = launched
            .take_stdout()
            .map(|r| capture::spawn_reader(r, output_cap));
        let err = launched
            .take_stderr()
            .map(|r| capture::spawn_reader(r, output_cap));
        let limits = WaitLimits {
            timeout: Some(timeout),
            poll: stop.map(|_| STOP_POLL),
            kill: KillTarget::ProcessGroupAndCgroup,
            kill_wait: self.kill_wait,
        };
        let waited = wait_and_kill(&mut launched, cgroup, &limits, &mut || {
            stop.is_some_and(|stop| stop())
        });
        // A call's processes never outlive it.
        let emptied = cgroup.empty(self.kill_wait);
        let (denials, allowed) = self.drain();
        let lost_records = self
            .enforcer
            .as_ref()
            .map_or(0, |e| e.drain_lost(self.cgroup_id));
        if let Err(e) = emptied {
            // Readers could block on pipes the survivors hold: leave them.
            return Err(SandboxError::Survivors(e.to_string()));
        }
        let stdout = join(out);
        let stderr = join(err);
        if let Some(w) = writer {
            let _ = w.join();
        }
        let ended = waited.map_err(SandboxError::Wait)?;
        Ok(RunOutput {
            enforcement: self.enforcement,
            status: ended.status,
            timed_out: ended.timed_out,
            interrupted: ended.interrupted,
            stdout,
            stderr,
            duration: start.elapsed(),
            denials,
            allowed,
            lost_records,
        })
    }

    /// Starts `spec` in the sandbox's cgroup and leaves it running, with its standard input,
    /// output and error piped: a long-lived process (an MCP server) that its caller talks to
    /// while it runs. It is confined like any call (an engine that confines at launch gets
    /// its plan onto it), and it is killed with whatever else is in the scope when the sandbox
    /// is torn down; [`Sandbox::denials`] gives what the kernel refused it meanwhile.
    ///
    /// # Errors
    /// [`SandboxError::Launch`] when it did not start (with the denials of the attempt),
    /// [`SandboxError::Finished`] after teardown, [`SandboxError::Service`] when the
    /// service refused it.
    pub fn start(&self, spec: &LaunchSpec) -> Result<LongLived, SandboxError> {
        let lease = match &self.scope {
            Scope::Local(lease) => lease,
            Scope::Service(remote) => return remote.start(spec),
        };
        let state = lock(lease);
        let cgroup = state.cgroup().ok_or(SandboxError::Finished)?;
        let spec = spec
            .clone()
            .stdin(StdioMode::Piped)
            .stdout(StdioMode::Piped)
            .stderr(StdioMode::Piped);
        let spawned = match &self.enforcer {
            Some(e) => bee_userspace::scope::spawn_into(&**e, state.install_id(), &spec, cgroup),
            None => spec.spawn(cgroup),
        };
        spawned
            .map(LongLived::local)
            .map_err(|source| SandboxError::Launch {
                source,
                denials: self.drain().0,
            })
    }

    /// The denials the kernel reported for the scope since the last call or drain, oldest
    /// first (allows are dropped); empty in host mode. For a process left running by
    /// [`Sandbox::start`], whose denials no call drains. The audit records the kernel lost
    /// meanwhile are added up for [`Sandbox::take_lost_records`].
    #[must_use]
    pub fn denials(&self) -> Vec<AuditRecord> {
        let denials = match &self.scope {
            Scope::Service(remote) => remote.denials(true),
            Scope::Local(_) => self.drain().0,
        };
        self.note_lost();
        denials
    }

    /// As [`Sandbox::denials`], without waiting for the service to send what the kernel
    /// reported last: the denials that have come so far.
    #[must_use]
    pub fn pending_denials(&self) -> Vec<AuditRecord> {
        let denials = match &self.scope {
            Scope::Service(remote) => remote.denials(false),
            Scope::Local(_) => self.drain().0,
        };
        self.note_lost();
        denials
    }

    /// Adds the records lost while long-lived processes ran, as far as the last drain knew,
    /// to the count [`Sandbox::take_lost_records`] gives.
    fn note_lost(&self) {
        let lost = match &self.scope {
            Scope::Service(remote) => remote.take_lost(),
            Scope::Local(_) => self
                .enforcer
                .as_ref()
                .map_or(0, |e| e.drain_lost(self.cgroup_id)),
        };
        self.lost.fetch_add(lost, Ordering::Relaxed);
    }

    /// The records reported for the scope since the last drain: denials, then allows.
    fn drain(&self) -> (Vec<AuditRecord>, Vec<AuditRecord>) {
        let (Some(enforcer), Some(policy)) = (&self.enforcer, &self.policy) else {
            return (Vec::new(), Vec::new());
        };
        let now = SystemTime::now();
        enforcer
            .drain_events(self.cgroup_id)
            .iter()
            .map(|e| AuditRecord::from_event(e, policy, now))
            .partition(|r| r.verdict == Verdict::Deny)
    }

    /// Tears the sandbox down: kills what remains, uninstalls the plan, removes the cgroup.
    /// Returns the denials that came in after the last call (allows are not kept).
    ///
    /// # Errors
    /// [`SandboxError::Survivors`] when processes survived the kill (the plan then stays
    /// installed and the cgroup stays); [`SandboxError::Enforce`] or
    /// [`SandboxError::Cgroup`] when uninstalling or removing failed.
    pub fn finish(self) -> Result<Vec<AuditRecord>, SandboxError> {
        self.teardown()
    }

    fn teardown(&self) -> Result<Vec<AuditRecord>, SandboxError> {
        let lease = match &self.scope {
            Scope::Local(lease) => lease,
            Scope::Service(remote) => return remote.close().map(|()| Vec::new()),
        };
        let mut state = lock(lease);
        let mut late = Vec::new();
        let torn = state.teardown(self.enforcer.as_deref(), self.kill_wait, &mut || {
            late = self.drain().0;
        });
        match torn {
            Ok(()) => Ok(late),
            Err(ScopeError::Teardown { detail, .. }) => Err(SandboxError::Survivors(detail)),
            Err(ScopeError::Enforce(e)) => Err(SandboxError::Enforce(e)),
            Err(ScopeError::Cgroup(e)) => Err(SandboxError::Cgroup(e)),
            Err(ScopeError::Launch(e)) => Err(SandboxError::Wait(e)),
            // A teardown fails in one of the ways above; anything else is said as it is,
            // conservatively (as if processes survived, so nothing is assumed gone).
            Err(other) => Err(SandboxError::Survivors(other.to_string())),
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

fn join(handle: Option<JoinHandle<Captured>>) -> Captured {
    handle
        .and_then(|h| h.join().ok())
        .unwrap_or_else(Captured::empty)
}
