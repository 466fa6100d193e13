//! Scenarios: which task an agent gets, in which workspace, under which policy and limits,
//! and how success is checked.
//!
//! A `scenario.toml` describes one episode with top-level keys, or many with `[[episode]]`
//! tables (the top-level keys are then their shared defaults), or names a directory of
//! scenario files with `scenarios = "DIR"` (each file inheriting this file's top-level keys).
//! Relative paths resolve against the directory of the file that holds them. Unknown keys
//! are errors naming the file, line, column and key. See `docs/episodes.md`.
//!
//! ```toml
//! name = "fix-roman"
//! prompt = "The test suite fails. Find the bug and fix it."   # or prompt_file = "TASK.md"
//! system_prompt = "You are a careful engineer."               # optional (or system_prompt_file)
//! workspace = "crate"
//! workspace_mode = "copy"          # "copy": a fresh temporary copy per episode; "in-place"
//! policy = "policy.toml"
//!
//! [limits]                         # hard limits; each optional
//! turns = 20
//! tokens = 200000
//! wall_seconds = 600
//! cost_usd = 1.0
//!
//! [success_check]                  # optional
//! command = "cargo test --offline"
//! timeout_seconds = 600            # default 600
//!
//! [mcp.servers.docs]               # optional: beside the configuration's (docs/mcp.md)
//! command = "/usr/bin/node"
//! args = ["server.js"]
//! policy = "docs-server.toml"      # within `policy`
//! ```

mod raw;
mod shard;

pub use shard::{Shard, ShardError, assign, sha256_hex};

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bee_core::error::Source;
use toml::Spanned;

use crate::config::{
    FileContext, FileDiagnostic, FileDiagnostics, FileError, McpServerConfig, Origin, parse_toml,
    read_text,
};
use crate::episode::CheckSpec;
use raw::{RawEpisode, RawFile};

/// The success check's time limit when the scenario gives none, in seconds.
pub const DEFAULT_CHECK_TIMEOUT_SECONDS: u64 = 600;

/// How an episode gets its workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkspaceMode {
    /// Copy the directory into a fresh temporary directory for each episode.
    Copy,
    /// Work in the directory itself (episodes of one run then share it).
    InPlace,
}

impl WorkspaceMode {
    /// `copy` or `in-place`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Copy => "copy",
            Self::InPlace => "in-place",
        }
    }
}

/// The hard limits a scenario sets; `None` is unset (a flag or a configuration file may set
/// it; otherwise no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScenarioLimits {
    /// Model turns.
    pub turns: Option<u32>,
    /// Tokens, input plus output.
    pub tokens: Option<u64>,
    /// Wall-clock seconds.
    pub wall_seconds: Option<u64>,
    /// Cost in USD.
    pub cost_usd: Option<f64>,
}

/// One episode of a scenario, fully resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeDef {
    /// Unique within the scenario; names the transcript (`name`, or `name-N` when repeated).
    pub id: String,
    /// The scenario's name (`name`; by default the file's stem).
    pub scenario: String,
    /// The file that defined it.
    pub file: PathBuf,
    /// The task.
    pub prompt: String,
    /// Instructions before the task.
    pub system_prompt: Option<String>,
    /// The workspace directory (absolute when the scenario file's path is).
    pub workspace: PathBuf,
    /// Copy or in place.
    pub workspace_mode: WorkspaceMode,
    /// The policy file.
    pub policy: Option<PathBuf>,
    /// Hard limits.
    pub limits: ScenarioLimits,
    /// The success check.
    pub success_check: Option<CheckSpec>,
    /// Output budget per model call, in tokens.
    pub max_output_tokens: Option<u32>,
    /// Skills loaded into the conversation before the task (`skills = ["review"]`), by name;
    /// `bee run` refuses a name no skill has.
    pub skills: Vec<String>,
    /// `[mcp.servers.NAME]`: MCP servers the episode starts beside the configuration's (a
    /// name the configuration has too is this one), each in a scope of its own.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
}

/// A loaded scenario: its episodes, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The file or directory given.
    pub path: PathBuf,
    /// The episodes.
    pub episodes: Vec<EpisodeDef>,
}

impl Scenario {
    /// Loads a scenario file, or every `*.toml` file of a directory (sorted by name).
    ///
    /// # Errors
    /// [`FileError::Read`] for a file that cannot be read; [`FileError::Invalid`] naming
    /// file, line, column and key of every problem.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let mut episodes = Vec::new();
        if path.is_dir() {
            for file in toml_files(path)? {
                episodes.extend(load_file(&file, &Layer::default(), false)?);
            }
        } else {
            episodes = load_file(path, &Layer::default(), true)?;
        }
        let mut seen = BTreeSet::new();
        for e in &episodes {
            if !seen.insert(e.id.clone()) {
                let source = Source::new(e.file.display().to_string(), "");
                return Err(FileError::one(FileDiagnostic::at(
                    &source,
                    0..0,
                    Some("name".to_owned()),
                    format!("two episodes are named {:?}", e.id),
                    Some("give each episode a distinct `name`".to_owned()),
                )));
            }
        }
        Ok(Self {
            path: path.to_owned(),
            episodes,
        })
    }
}

fn toml_files(dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    let read = |source| FileError::Read {
        what: "scenario directory",
        path: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let p = entry.map_err(read)?.path();
        if p.is_file() && p.extension().is_some_and(|e| e == "toml") {
            files.push(p);
        }
    }
    files.sort();
    Ok(files)
}

/// Resolved values of one layer (a file's top level, or one `[[episode]]`).
#[derive(Debug, Clone, Default)]
struct Layer {
    name: Option<String>,
    prompt: Option<String>,
    system_prompt: Option<String>,
    workspace: Option<PathBuf>,
    workspace_mode: Option<WorkspaceMode>,
    policy: Option<PathBuf>,
    max_output_tokens: Option<u32>,
    skills: Option<Vec<String>>,
    repeat: Option<u32>,
    limits: ScenarioLimits,
    check_command: Option<String>,
    check_timeout: Option<u64>,
    mcp_servers: BTreeMap<String, McpServerConfig>,
}

impl Layer {
    /// `self` with every value `top` sets replaced.
    fn under(&self, top: &Layer) -> Layer {
        fn pick<T: Clone>(top: &Option<T>, base: &Option<T>) -> Option<T> {
            top.clone().or_else(|| base.clone())
        }
        Layer {
            name: pick(&top.name, &self.name),
            prompt: pick(&top.prompt, &self.prompt),
            system_prompt: pick(&top.system_prompt, &self.system_prompt),
            workspace: pick(&top.workspace, &self.workspace),
            workspace_mode: pick(&top.workspace_mode, &self.workspace_mode),
            policy: pick(&top.policy, &self.policy),
            max_output_tokens: pick(&top.max_output_tokens, &self.max_output_tokens),
            skills: pick(&top.skills, &self.skills),
            repeat: pick(&top.repeat, &self.repeat),
            limits: ScenarioLimits {
                turns: pick(&top.limits.turns, &self.limits.turns),
                tokens: pick(&top.limits.tokens, &self.limits.tokens),
                wall_seconds: pick(&top.limits.wall_seconds, &self.limits.wall_seconds),
                cost_usd: pick(&top.limits.cost_usd, &self.limits.cost_usd),
            },
            check_command: pick(&top.check_command, &self.check_command),
            check_timeout: pick(&top.check_timeout, &self.check_timeout),
            mcp_servers: {
                let mut servers = self.mcp_servers.clone();
                servers.extend(top.mcp_servers.clone());
                servers
            },
        }
    }
}

struct Resolver {
    source: Source,
    dir: PathBuf,
    problems: Vec<FileDiagnostic>,
}

impl FileContext for Resolver {
    fn origin_of(&self, span: &Range<usize>) -> Origin {
        Origin::File {
            path: PathBuf::from(&self.source.name),
            line: self.source.line_column(span.start).0,
        }
    }

    fn path_of(&mut self, v: &Spanned<String>, key: &str) -> Option<PathBuf> {
        self.path(&Some(v.clone()), key)
    }

    fn problem_at(&mut self, span: Range<usize>, key: &str, message: &str, help: &str) {
        self.problem(span, key, message, help);
    }
}

impl Resolver {
    fn problem(&mut self, span: Range<usize>, key: &str, message: impl Into<String>, help: &str) {
        self.problems.push(FileDiagnostic::at(
            &self.source,
            span,
            Some(key.to_owned()),
            message,
            (!help.is_empty()).then(|| help.to_owned()),
        ));
    }

    fn path(&mut self, v: &Option<Spanned<String>>, key: &str) -> Option<PathBuf> {
        let v = v.as_ref()?;
        if v.get_ref().trim().is_empty() {
            self.problem(v.span(), key, "the path is empty", "");
            return None;
        }
        Some(self.dir.join(v.get_ref()))
    }

    /// `text` or the contents of `file`; both is an error.
    fn text(
        &mut self,
        text: &Option<Spanned<String>>,
        file: &Option<Spanned<String>>,
        key: &str,
    ) -> Option<String> {
        match (text, file) {
            (Some(t), None) => Some(t.get_ref().clone()),
            (None, Some(f)) => {
                let path = self.path(file, &format!("{key}_file"))?;
                match std::fs::read_to_string(&path) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        self.problem(
                            f.span(),
                            &format!("{key}_file"),
                            format!("cannot read {}: {e}", path.display()),
                            "the path is relative to this file",
                        );
                        None
                    }
                }
            }
            (Some(t), Some(_)) => {
                self.problem(
                    t.span(),
                    key,
                    format!("both `{key}` and `{key}_file` are set"),
                    "keep one of them",
                );
                None
            }
            (None, None) => None,
        }
    }

    fn layer(&mut self, raw: &RawEpisode) -> Layer {
        let mut layer = Layer {
            name: raw.name.as_ref().map(|n| n.get_ref().clone()),
            prompt: self.text(&raw.prompt, &raw.prompt_file, "prompt"),
            system_prompt: self.text(&raw.system_prompt, &raw.system_prompt_file, "system_prompt"),
            workspace: self.path(&raw.workspace, "workspace"),
            policy: self.path(&raw.policy, "policy"),
            max_output_tokens: raw.max_output_tokens.as_ref().map(|v| *v.get_ref()),
            skills: raw.skills.as_ref().map(|v| v.get_ref().clone()),
            repeat: raw.repeat.as_ref().map(|v| *v.get_ref()),
            ..Layer::default()
        };
        if let Some(n) = &raw.name
            && let Err(e) = crate::records::check_id(n.get_ref())
        {
            self.problem(n.span(), "name", e.to_string(), "names become file names");
        }
        if let Some(m) = &raw.workspace_mode {
            layer.workspace_mode = match m.get_ref().as_str() {
                "copy" => Some(WorkspaceMode::Copy),
                "in-place" => Some(WorkspaceMode::InPlace),
                other => {
                    self.problem(
                        m.span(),
                        "workspace_mode",
                        format!("unknown workspace mode {other:?}"),
                        "known values here: \"copy\", \"in-place\"",
                    );
                    None
                }
            };
        }
        if let Some(r) = raw.repeat.as_ref().filter(|r| *r.get_ref() == 0) {
            self.problem(
                r.span(),
                "repeat",
                "repeat = 0 runs nothing",
                "remove it to run once",
            );
        }
        if let Some(l) = &raw.limits {
            l.check(|span, key, message, help| self.problem(span, key, message, help));
            layer.limits.turns = l.turns.as_ref().map(|v| *v.get_ref());
            layer.limits.tokens = l.tokens.as_ref().map(|v| *v.get_ref());
            layer.limits.wall_seconds = l.wall_seconds.as_ref().map(|v| *v.get_ref());
            layer.limits.cost_usd = l.cost_usd.as_ref().map(|v| *v.get_ref());
        }
        if let Some(m) = &raw.mcp {
            crate::config::resolve_mcp_servers(self, &mut layer.mcp_servers, m);
        }
        if let Some(c) = &raw.success_check {
            let span = c.span();
            let c = c.get_ref();
            match &c.command {
                Some(cmd) if cmd.get_ref().trim().is_empty() => {
                    self.problem(
                        cmd.span(),
                        "success_check.command",
                        "the command is empty",
                        "",
                    );
                }
                Some(cmd) => layer.check_command = Some(cmd.get_ref().clone()),
                None => self.problem(
                    span,
                    "success_check.command",
                    "a success check needs a `command`",
                    "e.g. command = \"cargo test --offline\"",
                ),
            }
            layer.check_timeout = c.timeout_seconds.as_ref().map(|v| *v.get_ref());
        }
        layer
    }

    /// The episode(s) a fully merged layer defines; `span` locates it for errors.
    fn episodes(
        &mut self,
        layer: &Layer,
        span: Range<usize>,
        file: &Path,
        stem: &str,
    ) -> Vec<EpisodeDef> {
        let mut missing = |key: &str, help: &str| {
            self.problems.push(FileDiagnostic::at(
                &self.source,
                span.clone(),
                Some(key.to_owned()),
                format!("the episode has no `{key}`"),
                Some(help.to_owned()),
            ));
        };
        let (Some(prompt), Some(workspace), Some(mode)) =
            (&layer.prompt, &layer.workspace, layer.workspace_mode)
        else {
            if layer.prompt.is_none() {
                missing(
                    "prompt",
                    "set `prompt = \"…\"` or `prompt_file = \"TASK.md\"`",
                );
            }
            if layer.workspace.is_none() {
                missing(
                    "workspace",
                    "set `workspace = \"DIR\"` (relative to this file)",
                );
            }
            if layer.workspace_mode.is_none() {
                missing(
                    "workspace_mode",
                    "set `workspace_mode = \"copy\"` (a fresh copy per episode) or \"in-place\"",
                );
            }
            return Vec::new();
        };
        let name = layer.name.clone().unwrap_or_else(|| stem.to_owned());
        let repeat = layer.repeat.unwrap_or(1).max(1);
        (1..=repeat)
            .map(|i| EpisodeDef {
                id: if repeat > 1 {
                    format!("{name}-{i}")
                } else {
                    name.clone()
                },
                scenario: name.clone(),
                file: file.to_owned(),
                prompt: prompt.clone(),
                system_prompt: layer.system_prompt.clone(),
                workspace: workspace.clone(),
                workspace_mode: mode,
                policy: layer.policy.clone(),
                skills: layer.skills.clone().unwrap_or_default(),
                limits: layer.limits,
                success_check: layer.check_command.as_ref().map(|command| CheckSpec {
                    command: command.clone(),
                    timeout: Duration::from_secs(
                        layer.check_timeout.unwrap_or(DEFAULT_CHECK_TIMEOUT_SECONDS),
                    ),
                }),
                max_output_tokens: layer.max_output_tokens,
                mcp_servers: layer.mcp_servers.clone(),
            })
            .collect()
    }
}

fn load_file(path: &Path, inherited: &Layer, top: bool) -> Result<Vec<EpisodeDef>, FileError> {
    let text = read_text(path, "scenario file")?;
    let source = Source::new(path.display().to_string(), &text);
    let raw: RawFile = parse_toml(&source).map_err(|d| FileError::one(*d))?;
    let (defaults, episodes, scenarios) = raw.split();
    let mut r = Resolver {
        source,
        dir: path.parent().map_or_else(PathBuf::new, Path::to_owned),
        problems: Vec::new(),
    };
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = inherited.under(&r.layer(&defaults));
    let mut out = Vec::new();
    let mut included = None;
    if let Some(dir) = &scenarios {
        if !top {
            r.problem(
                dir.span(),
                "scenarios",
                "a scenario file read from a `scenarios` directory cannot name another",
                "list all scenario files in one directory",
            );
        } else {
            match r.path(&scenarios, "scenarios") {
                Some(d) if d.is_dir() => included = Some(d),
                Some(d) => r.problem(
                    dir.span(),
                    "scenarios",
                    format!("{} is not a directory", d.display()),
                    "the path is relative to this file",
                ),
                None => {}
            }
        }
    }
    if episodes.is_empty() && scenarios.is_none() {
        out = r.episodes(&base, 0..0, path, &stem);
    }
    for (i, e) in episodes.iter().enumerate() {
        let layer = base.under(&r.layer(e.get_ref()));
        let named = e.get_ref().name.is_some() || (episodes.len() == 1 && base.name.is_some());
        if !named {
            r.problem(
                e.span(),
                &format!("episode[{i}].name"),
                "an `[[episode]]` of several needs a `name`",
                "names become transcript file names",
            );
            continue;
        }
        out.extend(r.episodes(&layer, e.span(), path, &stem));
    }
    if !r.problems.is_empty() {
        return Err(FileError::Invalid(FileDiagnostics {
            file: path.display().to_string(),
            problems: r.problems,
        }));
    }
    if let Some(dir) = included {
        for file in toml_files(&dir)? {
            out.extend(load_file(&file, &base, false)?);
        }
    }
    Ok(out)
}
