//! The effective configuration of a session, and where each value came from.
//!
//! Why one file of this length: the configuration's types and `Config::resolve`, the one
//! function that layers them, sit together so each value's default, layer and origin read side
//! by side; the file format is in `raw` and the diagnostics in `diag`.
//!
//! Four layers, highest precedence first:
//!
//! 1. explicit command-line flags ([`Flags`]),
//! 2. the file given with `--config FILE`,
//! 3. `.bee/config.toml` in the current directory (the project),
//! 4. `$XDG_CONFIG_HOME/bee/config.toml`, by default `~/.config/bee/config.toml` (the user).
//!
//! Each key is taken from the highest layer that sets it; every value remembers its
//! [`Origin`] (a flag, a file and line, or the default), so `bee config show` can say where
//! it came from. A file is read into a raw type that refuses unknown keys and keeps spans
//! (`src/config/raw.rs`), then resolved: relative paths resolve against the directory of the file that
//! holds them (a flag's against the current directory), `~/` against the home directory.
//!
//! Errors name file, line, column and key ([`FileDiagnostic`]).

mod diag;
mod mcp;
mod raw;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use diag::{FileDiagnostic, FileDiagnostics, FileError, parse_toml, read_text};
pub use mcp::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, MAX_SERVER_NAME, McpServerConfig,
    valid_server_name,
};
pub(crate) use mcp::{FileContext, RawMcp, resolve as resolve_mcp_servers};
pub(crate) use raw::RawLimits;

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// A command-line flag, e.g. `--policy`.
    Flag {
        /// The flag as spelled.
        flag: String,
    },
    /// A configuration file.
    File {
        /// The file.
        path: PathBuf,
        /// 1-based line of the key.
        line: u32,
    },
    /// Nothing set it.
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag { flag } => write!(f, "flag {flag}"),
            Self::File { path, line } => write!(f, "{}:{line}", path.display()),
            Self::Default => f.write_str("default"),
        }
    }
}

/// A value and its origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
}

impl<T> Sourced<T> {
    /// The same origin with another value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Sourced<U> {
        Sourced {
            value: f(self.value),
            origin: self.origin,
        }
    }

    fn flag(value: T, flag: &str) -> Self {
        Self {
            value,
            origin: Origin::Flag {
                flag: flag.to_owned(),
            },
        }
    }

    pub(crate) fn default(value: T) -> Self {
        Self {
            value,
            origin: Origin::Default,
        }
    }
}

/// Budgets of one episode; `None` is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Limits {
    /// Model turns (`limits.turns`, `--max-turns`).
    pub turns: Option<Sourced<u32>>,
    /// Tokens, input plus output over all turns (`limits.tokens`, `--max-tokens`).
    pub tokens: Option<Sourced<u64>>,
    /// Wall-clock seconds (`limits.wall_seconds`, `--max-wall-seconds`).
    pub wall_seconds: Option<Sourced<u64>>,
    /// Cost in USD (`limits.cost_usd`, `--max-cost-usd`); an unknown cost counts as over.
    pub cost_usd: Option<Sourced<f64>>,
}

/// `[tools]`: the limits of every tool call and the tools the model is not offered.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolsConfig {
    /// Most bytes of a tool's output the model is given (`tools.output_cap_bytes`).
    pub output_cap_bytes: Option<Sourced<u64>>,
    /// How long a file tool may run, seconds (`tools.file_timeout_seconds`).
    pub file_timeout_seconds: Option<Sourced<u64>>,
    /// The shell's timeout when the model gives none, seconds
    /// (`tools.shell_timeout_seconds`).
    pub shell_timeout_seconds: Option<Sourced<u64>>,
    /// The longest shell timeout the model may ask for, seconds
    /// (`tools.shell_timeout_max_seconds`).
    pub shell_timeout_max_seconds: Option<Sourced<u64>>,
    /// Tools not offered to the model (`tools.disabled = ["shell"]`).
    pub disabled: Option<Sourced<Vec<String>>>,
    /// Tools whose calls run in a scope of their own under a narrower policy
    /// (`[tools.shell] policy = "policies/shell.toml"`): tool name → policy file. Each is
    /// proven within the session's policy before the session starts.
    pub policies: BTreeMap<String, Sourced<PathBuf>>,
}

/// `[agents]`: how far subagents may go.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgentsConfig {
    /// The deepest a subagent may be (`agents.max_depth`, default 2; 0 turns the `agent`
    /// tool off).
    pub max_depth: Option<Sourced<u32>>,
    /// Whether the model may pass a policy's text instead of a role (`agents.inline_policy`,
    /// default false).
    pub inline_policy: Option<Sourced<bool>>,
}

impl AgentsConfig {
    /// The settings, defaults filled in.
    #[must_use]
    pub fn settings(&self) -> crate::agents::AgentSettings {
        let d = crate::agents::AgentSettings::default();
        crate::agents::AgentSettings {
            max_depth: self.max_depth.as_ref().map_or(d.max_depth, |s| s.value),
            inline_policy: self
                .inline_policy
                .as_ref()
                .map_or(d.inline_policy, |s| s.value),
        }
    }
}

impl ToolsConfig {
    /// The limits of tool calls: each configured value, else the default
    /// ([`crate::tools::ToolLimits::default`]).
    #[must_use]
    pub fn limits(&self) -> crate::tools::ToolLimits {
        let d = crate::tools::ToolLimits::default();
        let secs = |v: &Option<Sourced<u64>>, default: std::time::Duration| {
            v.as_ref()
                .map_or(default, |s| std::time::Duration::from_secs(s.value))
        };
        crate::tools::ToolLimits {
            output_cap: self.output_cap_bytes.as_ref().map_or(d.output_cap, |s| {
                usize::try_from(s.value).unwrap_or(usize::MAX)
            }),
            file_timeout: secs(&self.file_timeout_seconds, d.file_timeout),
            shell_timeout: secs(&self.shell_timeout_seconds, d.shell_timeout),
            shell_timeout_max: secs(&self.shell_timeout_max_seconds, d.shell_timeout_max),
        }
    }
}

/// The scanners bee has adapters for, as `[security.scanners.NAME]` names them.
pub const SCANNERS: [&str; 2] = ["opengrep", "codeql"];

/// `[security.scanners.NAME]`: one operator-provisioned scanner.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ScannerConfig {
    /// `path`: the scanner's executable (Opengrep's binary, the CodeQL bundle's `codeql`),
    /// which the session's policy must pin (`exec.allow = ["!/path"]`).
    pub path: Option<Sourced<PathBuf>>,
    /// `rules` (Opengrep): a local rules file or directory; never `auto`, a registry name or
    /// a URL.
    pub rules: Option<Sourced<PathBuf>>,
    /// `bundle_version` (CodeQL): `codeql-bundle-v2.26.1` or `2.26.1`, as `X.Y.Z`.
    pub bundle_version: Option<Sourced<String>>,
    /// `timeout_seconds`: bee's own wall-clock limit on one scan.
    pub timeout_seconds: Option<Sourced<u64>>,
}

/// The effective configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// The policy file for tool scopes (`policy`, `--policy`).
    pub policy: Option<Sourced<PathBuf>>,
    /// The provider file (`provider`, `--provider`).
    pub provider: Option<Sourced<PathBuf>>,
    /// The directory the agent works in (`workspace`, `--workspace`; default: the current
    /// directory).
    pub workspace: Sourced<PathBuf>,
    /// Run tools as hardened host processes with no kernel scope (`host`, `--host`; default
    /// false). Never implied: see [`Config::require_policy_or_host`].
    pub host: Sourced<bool>,
    /// Where to write the audit log (`audit`, `--audit`); `None`: no audit file.
    pub audit: Option<Sourced<PathBuf>>,
    /// Where usage, cost and latency records go (`records_dir`, `--records-dir`; default
    /// `.bee/records` in the current directory).
    pub records_dir: Sourced<PathBuf>,
    /// Episode budgets.
    pub limits: Limits,
    /// `[tools]`: limits of tool calls, tools turned off, per-tool policies.
    pub tools: ToolsConfig,
    /// `[agents]`: subagents' depth and inline policies.
    pub agents: AgentsConfig,
    /// `repl.theme`: the theme of `bee repl` (a built-in one — `dark`, `light`, `ansi16`,
    /// `plain` — or a `[themes.NAME]` table); default `dark`.
    pub repl_theme: Option<Sourced<String>>,
    /// `repl.tui`: whether `bee repl` opens the full-screen TUI without `--tui` (a build with
    /// the `tui` feature; `--no-tui` overrides it); default false.
    pub repl_tui: Option<Sourced<bool>>,
    /// `repl.approve` (or `--approve`): whether the inline `bee repl` asks before every
    /// `shell` call, every path outside the workspace and every `agent` call; default false.
    pub repl_approve: Option<Sourced<bool>>,
    /// `[enforcement] engine` (or `--engine`): which engine enforces the policy.
    pub engine: Sourced<EngineChoice>,
    /// `[enforcement] service` (or `--service`): whether scopes are made by `bee serve`.
    pub service: Sourced<ServiceChoice>,
    /// `[themes.NAME]`: user themes, checked when their file was read.
    #[serde(skip)]
    pub themes: BTreeMap<String, Sourced<crate::render::Theme>>,
    /// `security.ledger`: the findings ledger (default `.bee/findings/ledger.jsonl` in the
    /// current directory).
    pub ledger: Sourced<PathBuf>,
    /// `[security.scanners.NAME]`: the operator's scanners (`opengrep`, `codeql`).
    pub scanners: BTreeMap<String, ScannerConfig>,
    /// `[mcp.servers.NAME]`: the MCP servers every session starts, each in a scope of its
    /// own.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// The files that were read, highest precedence first.
    pub files: Vec<PathBuf>,
}

/// The command-line layer. Flatten it into a command's arguments with `#[command(flatten)]`.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct Flags {
    /// A configuration file, above .bee/config.toml and ~/.config/bee/config.toml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The policy file that confines every tool call.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// The provider file (see docs/providers.md).
    #[arg(long, value_name = "FILE")]
    pub provider: Option<PathBuf>,
    /// The directory the agent works in.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Run tools as hardened host processes with NO kernel scope (needed when there is no
    /// policy).
    #[arg(long)]
    pub host: bool,
    /// Write an audit log to FILE.
    #[arg(long, value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// Where usage, cost and latency records go.
    #[arg(long, value_name = "DIR")]
    pub records_dir: Option<PathBuf>,
    /// Stop after N model turns.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,
    /// Stop after N tokens (input + output).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Stop after N seconds of wall-clock time.
    #[arg(long, value_name = "N")]
    pub max_wall_seconds: Option<u64>,
    /// Stop once the cost reaches USD (an unknown cost counts as reached).
    #[arg(long, value_name = "USD", value_parser = parse_usd)]
    pub max_cost_usd: Option<f64>,
    /// The enforcement engine: `auto` (the BPF LSM where `bee check` passes, the Landlock
    /// engine otherwise), `bpf-lsm` or `landlock`.
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<EngineChoice>,
    /// Who makes the scopes: `auto` (the `bee serve` service when its socket exists and bee
    /// is not root or `$BEE_SOCKET` names it, this process otherwise), `always` (the service)
    /// or `never` (this process).
    #[arg(long, value_name = "WHO")]
    pub service: Option<ServiceChoice>,
}

/// Which engine should enforce: `--engine`, `[enforcement] engine`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineChoice {
    /// The BPF LSM where this kernel runs bee's programs, the Landlock engine otherwise.
    #[default]
    Auto,
    /// bee's BPF LSM programs only.
    BpfLsm,
    /// The Landlock engine only.
    Landlock,
}

impl EngineChoice {
    /// `auto`, `bpf-lsm` or `landlock`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::BpfLsm => "bpf-lsm",
            Self::Landlock => "landlock",
        }
    }
}

/// Who makes a command's scopes: `--service`, `[enforcement] service`. `bee serve` for a
/// process without the privileges, or for one that names a service in `$BEE_SOCKET`; this
/// process otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServiceChoice {
    /// The service when its socket exists (`$BEE_SOCKET`, else `/run/bee/bee.sock`) and this
    /// process is not root or `$BEE_SOCKET` names it; this process otherwise.
    #[default]
    Auto,
    /// Only through the service: 69 when none answers.
    Always,
    /// Only in this process (root, or an operator's delegated cgroup and capabilities).
    Never,
}

impl ServiceChoice {
    /// `auto`, `always` or `never`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Always => "always",
            Self::Never => "never",
        }
    }

    /// Whether to go through the service whose socket is `socket`. For `auto`, the socket must
    /// exist, and a root process asks it only when `$BEE_SOCKET` names it: root can enforce
    /// in its own process, but one that names a service shares its engine (loaded and
    /// verified once) instead of loading its own for every command.
    pub fn use_service(self, socket: &std::path::Path) -> bool {
        self.decide(socket, false)
    }

    /// [`ServiceChoice::use_service`] for a command that learns (`--learn`): under `auto`,
    /// root learns in its own process even when `$BEE_SOCKET` names a service — the service
    /// grants learn mode only to a caller whose ceiling grants everything, and root's own
    /// process needs no ceiling — and anyone else asks the service.
    pub fn use_service_to_learn(self, socket: &std::path::Path) -> bool {
        self.decide(socket, true)
    }

    fn decide(self, socket: &std::path::Path, learning: bool) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Auto => {
                use std::os::unix::fs::FileTypeExt as _;
                let exists = std::fs::metadata(socket).is_ok_and(|m| m.file_type().is_socket());
                let root = nix::unistd::Uid::effective().is_root();
                let named =
                    std::env::var_os(crate::serve::SOCKET_ENV).is_some_and(|v| !v.is_empty());
                exists && (!root || (named && !learning))
            }
        }
    }
}

/// A finite amount of USD ≥ 0.
fn parse_usd(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not an amount of USD ≥ 0")),
    }
}

/// What resolution needs from the process: the current directory and where the user's
/// configuration lives. Tests build one by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// The current directory (absolute).
    pub cwd: PathBuf,
    /// The home directory, for `~/` and the default user configuration.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`, when set to an absolute path.
    pub xdg_config_home: Option<PathBuf>,
}

impl Env {
    /// The running process's environment (`$HOME`, `$XDG_CONFIG_HOME`, the current
    /// directory).
    ///
    /// # Errors
    /// When the current directory cannot be determined.
    pub fn from_process() -> std::io::Result<Self> {
        let abs = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        Ok(Self {
            cwd: std::env::current_dir()?,
            home: abs("HOME"),
            xdg_config_home: abs("XDG_CONFIG_HOME"),
        })
    }

    /// The user configuration file (XDG Base Directory specification): under
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub fn user_config(&self) -> Option<PathBuf> {
        self.xdg_config_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".config")))
            .map(|d| d.join("bee").join("config.toml"))
    }

    /// The project configuration file.
    pub fn project_config(&self) -> PathBuf {
        self.cwd.join(".bee").join("config.toml")
    }

    fn absolute(&self, base: &Path, p: &Path) -> PathBuf {
        if let (Ok(rest), Some(home)) = (p.strip_prefix("~"), &self.home) {
            return home.join(rest);
        }
        base.join(p)
    }
}

/// A hint for a path from a configuration file that does not exist, when the same relative
/// path does exist under `cwd`: relative paths resolve against the file's directory, so
/// `provider = "providers/x.toml"` in `.bee/config.toml` names `.bee/providers/x.toml`, and
/// the path meant was most likely the one under the project (`../providers/x.toml`).
pub fn relative_path_hint(key: &str, value: &Sourced<PathBuf>, cwd: &Path) -> Option<String> {
    let Origin::File { path: file, .. } = &value.origin else {
        return None;
    };
    let dir = file.parent()?;
    let rel = value.value.strip_prefix(dir).ok()?;
    let meant = cwd.join(rel);
    if value.value.exists() || !meant.exists() {
        return None;
    }
    // The file's directory is below `cwd` (`.bee/`): climb back up to it.
    let below = dir.strip_prefix(cwd).ok()?;
    let up = below
        .components()
        .map(|_| Path::new(".."))
        .collect::<PathBuf>()
        .join(rel);
    Some(format!(
        "`{key}` in {} is relative to that file's directory, {}; {} exists: write \
         `{key} = \"{}\"` (or an absolute path)",
        file.display(),
        dir.display(),
        meant.display(),
        up.display()
    ))
}

/// How tools will be confined, as [`Config::require_policy_or_host`] decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Confinement<'a> {
    /// Each tool call runs in a kernel scope under this policy.
    Policy(&'a Sourced<PathBuf>),
    /// Tools run as hardened host processes with no kernel scope, because `host` was set
    /// explicitly (here).
    Host(&'a Origin),
}

/// Why a session may not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// Neither a policy nor `host`.
    #[error(
        "refusing to run tools unconfined: no policy is configured. Pass --policy FILE (or set \
         `policy` in a configuration file), or pass --host to run tools as hardened host \
         processes with no kernel scope"
    )]
    NoPolicy,
    /// Both, which would leave it unclear whether tools are confined.
    #[error(
        "both a policy ({policy}) and host mode ({host}) are set; they exclude each other: \
         drop one"
    )]
    Both {
        /// Where the policy came from.
        policy: Origin,
        /// Where `host` came from.
        host: Origin,
    },
}

impl Config {
    /// Resolves the four layers for the running process.
    ///
    /// # Errors
    /// A [`FileError`] for an unreadable `--config` file or any invalid file.
    pub fn resolve(flags: &Flags) -> Result<Self, FileError> {
        let env = Env::from_process().map_err(|source| FileError::Read {
            what: "current directory",
            path: PathBuf::from("."),
            source,
        })?;
        Self::resolve_in(flags, &env)
    }

    /// Resolves the four layers against `env`. A missing `.bee/config.toml` or user file is
    /// skipped; a missing `--config` file is an error.
    ///
    /// # Errors
    /// A [`FileError`] for an unreadable `--config` file or any invalid file.
    pub fn resolve_in(flags: &Flags, env: &Env) -> Result<Self, FileError> {
        let mut config = Config {
            policy: None,
            provider: None,
            workspace: Sourced::default(env.cwd.clone()),
            host: Sourced::default(false),
            audit: None,
            records_dir: Sourced::default(env.cwd.join(".bee").join("records")),
            limits: Limits::default(),
            tools: ToolsConfig::default(),
            agents: AgentsConfig::default(),
            repl_theme: None,
            repl_tui: None,
            repl_approve: None,
            engine: Sourced::default(EngineChoice::Auto),
            service: Sourced::default(ServiceChoice::Auto),
            themes: BTreeMap::new(),
            ledger: Sourced::default(env.cwd.join(".bee").join("findings").join("ledger.jsonl")),
            scanners: BTreeMap::new(),
            mcp_servers: BTreeMap::new(),
            files: Vec::new(),
        };
        // Lowest precedence first; each layer overwrites what it sets.
        let mut layers: Vec<(PathBuf, bool)> = Vec::new();
        if let Some(user) = env.user_config() {
            layers.push((user, false));
        }
        layers.push((env.project_config(), false));
        if let Some(explicit) = &flags.config {
            layers.push((env.absolute(&env.cwd, explicit), true));
        }
        for (path, required) in layers {
            let text = match read_text(&path, "configuration") {
                Ok(t) => t,
                Err(FileError::Read { source, .. })
                    if !required && source.kind() == std::io::ErrorKind::NotFound =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            };
            raw::apply(&mut config, &path, &text, env)?;
            config.files.insert(0, path);
        }
        config.apply_flags(flags, env);
        Ok(config)
    }

    fn apply_flags(&mut self, f: &Flags, env: &Env) {
        let path = |p: &Path| env.absolute(&env.cwd, p);
        if let Some(p) = &f.policy {
            self.policy = Some(Sourced::flag(path(p), "--policy"));
        }
        if let Some(p) = &f.provider {
            self.provider = Some(Sourced::flag(path(p), "--provider"));
        }
        if let Some(p) = &f.workspace {
            self.workspace = Sourced::flag(path(p), "--workspace");
        }
        if f.host {
            self.host = Sourced::flag(true, "--host");
        }
        if let Some(p) = &f.audit {
            self.audit = Some(Sourced::flag(path(p), "--audit"));
        }
        if let Some(p) = &f.records_dir {
            self.records_dir = Sourced::flag(path(p), "--records-dir");
        }
        if let Some(n) = f.max_turns {
            self.limits.turns = Some(Sourced::flag(n, "--max-turns"));
        }
        if let Some(n) = f.max_tokens {
            self.limits.tokens = Some(Sourced::flag(n, "--max-tokens"));
        }
        if let Some(n) = f.max_wall_seconds {
            self.limits.wall_seconds = Some(Sourced::flag(n, "--max-wall-seconds"));
        }
        if let Some(n) = f.max_cost_usd {
            self.limits.cost_usd = Some(Sourced::flag(n, "--max-cost-usd"));
        }
        if let Some(e) = f.engine {
            self.engine = Sourced::flag(e, "--engine");
        }
        if let Some(s) = f.service {
            self.service = Sourced::flag(s, "--service");
        }
    }

    /// Decides how tools are confined: a policy, or host mode set explicitly. Neither is a
    /// refusal (bee never runs tools unconfined by accident), and so is both.
    ///
    /// # Errors
    /// [`Refusal`].
    pub fn require_policy_or_host(&self) -> Result<Confinement<'_>, Refusal> {
        match (&self.policy, self.host.value) {
            (Some(p), false) => Ok(Confinement::Policy(p)),
            (None, true) => Ok(Confinement::Host(&self.host.origin)),
            (None, false) => Err(Refusal::NoPolicy),
            (Some(p), true) => Err(Refusal::Both {
                policy: p.origin.clone(),
                host: self.host.origin.clone(),
            }),
        }
    }

    /// The theme `repl.theme` names: a user theme of that name, else a built-in one; `dark`
    /// when unset.
    ///
    /// # Errors
    /// The origin and the known names, for a name no theme has.
    pub fn theme(&self) -> Result<crate::render::Theme, String> {
        let Some(name) = &self.repl_theme else {
            return Ok(crate::render::Theme::dark());
        };
        if let Some(t) = self.themes.get(&name.value) {
            return Ok(t.value.clone());
        }
        crate::render::Theme::builtin(&name.value).ok_or_else(|| {
            let mut known: Vec<&str> = crate::render::BUILTIN_THEMES.to_vec();
            known.extend(self.themes.keys().map(String::as_str));
            format!(
                "{}: repl.theme: there is no theme `{}` (the themes are {})",
                name.origin,
                name.value,
                known.join(", ")
            )
        })
    }

    /// Every effective value as `(key, value, origin)`, in a fixed order, for display.
    /// Unset optional keys appear with the value `(unset)` and origin [`Origin::Default`].
    pub fn entries(&self) -> Vec<(String, String, Origin)> {
        fn path(v: &Option<Sourced<PathBuf>>) -> (String, Origin) {
            match v {
                Some(s) => (s.value.display().to_string(), s.origin.clone()),
                None => ("(unset)".to_owned(), Origin::Default),
            }
        }
        fn num<T: ToString>(v: &Option<Sourced<T>>) -> (String, Origin) {
            match v {
                Some(s) => (s.value.to_string(), s.origin.clone()),
                None => ("(unlimited)".to_owned(), Origin::Default),
            }
        }
        let mut out = Vec::new();
        let mut push = |key: &str, (value, origin): (String, Origin)| {
            out.push((key.to_owned(), value, origin));
        };
        push("policy", path(&self.policy));
        push("provider", path(&self.provider));
        push(
            "workspace",
            (
                self.workspace.value.display().to_string(),
                self.workspace.origin.clone(),
            ),
        );
        push(
            "host",
            (self.host.value.to_string(), self.host.origin.clone()),
        );
        push("audit", path(&self.audit));
        push(
            "records_dir",
            (
                self.records_dir.value.display().to_string(),
                self.records_dir.origin.clone(),
            ),
        );
        push("limits.turns", num(&self.limits.turns));
        push("limits.tokens", num(&self.limits.tokens));
        push("limits.wall_seconds", num(&self.limits.wall_seconds));
        push("limits.cost_usd", num(&self.limits.cost_usd));
        let limits = self.tools.limits();
        let or_default = |v: &Option<Sourced<u64>>, default: u64| match v {
            Some(s) => (s.value.to_string(), s.origin.clone()),
            None => (default.to_string(), Origin::Default),
        };
        push(
            "tools.output_cap_bytes",
            or_default(&self.tools.output_cap_bytes, limits.output_cap as u64),
        );
        push(
            "tools.file_timeout_seconds",
            or_default(
                &self.tools.file_timeout_seconds,
                limits.file_timeout.as_secs(),
            ),
        );
        push(
            "tools.shell_timeout_seconds",
            or_default(
                &self.tools.shell_timeout_seconds,
                limits.shell_timeout.as_secs(),
            ),
        );
        push(
            "tools.shell_timeout_max_seconds",
            or_default(
                &self.tools.shell_timeout_max_seconds,
                limits.shell_timeout_max.as_secs(),
            ),
        );
        push(
            "repl.theme",
            match &self.repl_theme {
                Some(s) => (s.value.clone(), s.origin.clone()),
                None => ("dark".to_owned(), Origin::Default),
            },
        );
        push(
            "enforcement.engine",
            (
                self.engine.value.as_str().to_owned(),
                self.engine.origin.clone(),
            ),
        );
        push(
            "enforcement.service",
            (
                self.service.value.as_str().to_owned(),
                self.service.origin.clone(),
            ),
        );
        push(
            "repl.tui",
            match &self.repl_tui {
                Some(s) => (s.value.to_string(), s.origin.clone()),
                None => ("false".to_owned(), Origin::Default),
            },
        );
        push(
            "repl.approve",
            match &self.repl_approve {
                Some(s) => (s.value.to_string(), s.origin.clone()),
                None => ("false".to_owned(), Origin::Default),
            },
        );
        for (name, theme) in &self.themes {
            push(
                &format!("themes.{name}"),
                ("(user theme)".to_owned(), theme.origin.clone()),
            );
        }
        push(
            "tools.disabled",
            match &self.tools.disabled {
                Some(s) => (format!("{:?}", s.value), s.origin.clone()),
                None => ("[]".to_owned(), Origin::Default),
            },
        );
        push(
            "security.ledger",
            (
                self.ledger.value.display().to_string(),
                self.ledger.origin.clone(),
            ),
        );
        for (name, s) in &self.scanners {
            let key = |k: &str| format!("security.scanners.{name}.{k}");
            for (k, v) in [("path", &s.path), ("rules", &s.rules)] {
                if let Some(v) = v {
                    push(&key(k), (v.value.display().to_string(), v.origin.clone()));
                }
            }
            if let Some(v) = &s.bundle_version {
                push(&key("bundle_version"), (v.value.clone(), v.origin.clone()));
            }
            if let Some(v) = &s.timeout_seconds {
                push(
                    &key("timeout_seconds"),
                    (v.value.to_string(), v.origin.clone()),
                );
            }
        }
        for (name, m) in &self.mcp_servers {
            let key = |k: &str| format!("mcp.servers.{name}.{k}");
            let origin = &m.command.origin;
            let mut command = m.command.value.clone();
            for a in &m.args {
                command.push(' ');
                command.push_str(a);
            }
            push(&key("command"), (command, origin.clone()));
            push(
                &key("policy"),
                (
                    m.policy.value.display().to_string(),
                    m.policy.origin.clone(),
                ),
            );
            let env: Vec<&str> = m.env.keys().map(String::as_str).collect();
            if !env.is_empty() {
                push(&key("env"), (env.join(", "), origin.clone()));
            }
            push(
                &key("timeout_seconds"),
                (
                    format!(
                        "{} (start-up {})",
                        m.timeout_seconds, m.startup_timeout_seconds
                    ),
                    origin.clone(),
                ),
            );
        }
        out
    }
}
