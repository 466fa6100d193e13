//! The sandbox `bee run` gives its episodes: bee's tools in a kernel scope, or — only with
//! an explicit `--host` — in hardened host processes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bee_common::scope::SCOPE_LEARN;
use bee_core::CompiledPolicy;
use bee_userspace::scope::{Enforcer, EngineKind};

use super::super::enforcement::{self, EngineChoice, Refusal};
use super::SandboxFactory;
use crate::episode::{AuditObserver, AuditSink, ExecutorError, SandboxExecutor, ToolExecutor};
use crate::records::Enforcement;
use crate::sandbox::own_state::StatePath;
use crate::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use crate::serve::client::Client;
use crate::tools::Registry;

/// Builds one [`SandboxExecutor`] per episode.
pub(super) struct Factory {
    /// The engine in kernel mode (the BPF LSM's or Landlock's); `None` in host mode.
    engine: Option<Arc<dyn Enforcer + Send + Sync>>,
    /// The `--audit` file every executor appends its calls' records to.
    audit: Option<AuditSink>,
    /// Learn mode (`--learn`): every executor's records go here, its scopes learn.
    learn: Option<AuditObserver>,
    /// The `bee serve` socket every episode's scope is made through, instead of `engine`,
    /// and the engine that service enforces with.
    service: Option<(PathBuf, EngineKind)>,
    /// bee's own state outside the workspace's `.bee/`, protected in every scope.
    state: Vec<StatePath>,
}

impl std::fmt::Debug for Factory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Factory")
            .field("kernel", &self.engine.is_some())
            .finish()
    }
}

impl Factory {
    /// Kernel mode: proves that this kernel enforces (by loading a program, not by reading
    /// the LSM list), loads the engine once for every episode of the run, and checks that
    /// episodes' scopes can be created and joined — the same checks, with the same refusals,
    /// as `bee exec` ([`enforcement`]).
    pub(super) fn kernel(
        choice: EngineChoice,
        policies: &[&CompiledPolicy],
    ) -> Result<Self, Refusal> {
        let opened = enforcement::open_enforcer(choice, policies)?;
        enforcement::cgroup_parent()?;
        // Name grants need the DNS steering programs' privilege, asked after the cgroup as
        // before the engine choice existed.
        opened.check_name_grants(policies)?;
        if let Some(banner) = opened.banner() {
            eprintln!("{banner}");
        }
        Ok(Self {
            engine: Some(opened.enforcer),
            audit: None,
            learn: None,
            service: None,
            state: Vec::new(),
        })
    }

    /// Kernel mode through the `bee serve` service at `socket`: it must answer, enforce with
    /// the engine `choice` allows, and have a ceiling for this user (each episode's policy is
    /// then proven within it as its scope is made).
    pub(super) fn service(socket: PathBuf, choice: EngineChoice) -> Result<Self, Refusal> {
        let client = Client::connect(&socket).map_err(|e| {
            let refusal = match e.status() {
                77 => Refusal::no_permission(e.to_string()),
                _ => Refusal::unavailable(e.to_string()),
            };
            refusal.with_fix("ask the operator to start the service (`systemctl enable --now bee.socket`, docs/serve.md), or run bee as root")
        })?;
        let w = &client.welcome;
        if choice != EngineChoice::Auto && choice.as_str() != w.engine {
            return Err(Refusal::unavailable(format!(
                "the service at {} enforces with {}, not {}",
                socket.display(),
                w.engine,
                choice.as_str()
            )));
        }
        let engine = EngineKind::parse(&w.engine).ok_or_else(|| {
            Refusal::unavailable(format!(
                "the service at {} enforces with an engine this bee does not know: {}",
                socket.display(),
                w.engine
            ))
        })?;
        if w.ceiling.is_empty() {
            return Err(Refusal::no_permission(format!(
                "the service at {} has no ceiling for uid {}: it grants nothing",
                socket.display(),
                w.uid
            ))
            .with_fix("ask the operator for a ceiling in /etc/bee/ceilings (docs/serve.md)"));
        }
        eprintln!(
            "bee: engine: {} through the service at {} (bounded by {})",
            w.engine,
            socket.display(),
            w.ceiling.join(", ")
        );
        Ok(Self {
            engine: None,
            audit: None,
            learn: None,
            service: Some((socket, engine)),
            state: Vec::new(),
        })
    }

    /// Host mode (`--host`): no kernel scope at all.
    pub(super) fn host() -> Self {
        Self {
            engine: None,
            audit: None,
            learn: None,
            service: None,
            state: Vec::new(),
        }
    }
}

impl SandboxFactory for Factory {
    fn enforcement(&self) -> Enforcement {
        if self.engine.is_some() || self.service.is_some() {
            Enforcement::Kernel
        } else {
            Enforcement::Host
        }
    }

    fn executor(
        &self,
        workspace: &Path,
        policy: Option<CompiledPolicy>,
        tools: &Arc<Registry>,
    ) -> Result<Box<dyn ToolExecutor>, ExecutorError> {
        let sandbox = self.sandbox(workspace, policy)?;
        Ok(Box::new(
            SandboxExecutor::new(sandbox, Arc::clone(tools))
                .with_audit(self.audit.clone())
                .with_observer(self.learn.clone()),
        ))
    }

    fn sandbox(
        &self,
        workspace: &Path,
        policy: Option<CompiledPolicy>,
    ) -> Result<Sandbox, ExecutorError> {
        let mode = match (&self.service, &self.engine, policy) {
            (Some((socket, _)), _, Some(policy)) => SandboxMode::Service {
                socket: socket.clone(),
                policy,
            },
            (None, Some(engine), Some(policy)) => SandboxMode::Enforced {
                enforcer: Arc::clone(engine) as Arc<dyn Enforcer + Send + Sync>,
                policy,
            },
            (Some(_), _, None) | (None, Some(_), None) => {
                return Err("kernel mode needs a policy for every episode"
                    .to_owned()
                    .into());
            }
            (None, None, _) => SandboxMode::Host,
        };
        let mut config = SandboxConfig::new(mode, workspace);
        config.state.clone_from(&self.state);
        if self.learn.is_some() {
            config.scope_flags |= SCOPE_LEARN;
        }
        Sandbox::new(config).map_err(|e| ExecutorError {
            status: e.status(),
            message: format!("the sandbox could not be created: {e}"),
        })
    }

    fn audit_sink(&self) -> Option<AuditSink> {
        self.audit.clone()
    }

    fn keep_from_scopes(&mut self, state: Vec<StatePath>) {
        self.state = state;
    }

    fn write_audit_to(&mut self, path: &Path) -> Result<(), String> {
        // Appended to, never truncated: an audit trail keeps what earlier runs wrote.
        let file = std::fs::File::options()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        self.audit = Some(Arc::new(std::sync::Mutex::new(file)));
        Ok(())
    }

    fn learn_with(&mut self, observer: AuditObserver) -> Result<(), ExecutorError> {
        let engine = match (&self.engine, &self.service) {
            (Some(engine), _) => engine.engine(),
            (None, Some((_, engine))) => *engine,
            (None, None) => {
                return Err(ExecutorError::usage(
                    "--host runs no kernel scope, so nothing can be learned",
                ));
            }
        };
        if engine == EngineKind::Landlock {
            // As `bee exec --learn` refuses it: before any model call, not per episode.
            return Err(ExecutorError::from(
                "learn mode needs the BPF LSM: the Landlock engine reports no denials to learn from"
                    .to_owned(),
            ));
        }
        self.learn = Some(observer);
        Ok(())
    }
}
