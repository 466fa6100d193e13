//! A role file: `.bee/agents/NAME.toml` (or the user's `agents/NAME.toml`).
//!
//! ```toml
//! description = "Reviews code for security bugs. Reads only; never edits."
//! policy = "../../policies/review.toml"   # relative to this file
//! tools = ["read_file", "grep", "glob", "list_dir"]
//! # mcp_servers = ["docs"]              # configured MCP servers it is offered, whole
//! instructions = "Report each finding with file and line."
//! # provider = "reviewer-provider.toml"  # another provider file
//! # model = "gpt-5-mini"                 # another model of the provider
//! [limits]
//! turns = 20
//! tokens = 200000
//! ```
//!
//! Unknown keys are refused, and every problem names the file, line and key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bee_core::error::Source;
use serde::Deserialize;
use toml::Spanned;

use crate::config::{FileDiagnostic, FileDiagnostics, FileError, RawLimits, parse_toml, read_text};
use crate::session::EpisodeLimits;

/// A role a subagent can play: what it is for, what confines it, what it may use.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRole {
    /// The name (the file stem): lower-case letters, digits, `-` and `_`.
    pub name: String,
    /// What the role is for, in one or two sentences: the model picks roles by it.
    pub description: String,
    /// The role's policy file (absolute).
    pub policy: PathBuf,
    /// The tools the subagent is offered; `None`: every tool of the calling session but
    /// `agent`. Naming `agent` lets the subagent delegate in turn (within the depth limit).
    pub tools: Option<Vec<String>>,
    /// The configured MCP servers (`[mcp.servers.NAME]`) the subagent is offered, each
    /// started for it in a scope of its own under the server's policy, which must be within
    /// the role's; none by default.
    pub mcp_servers: Vec<String>,
    /// Instructions added to the subagent's system prompt.
    pub instructions: Option<String>,
    /// Another provider file for the subagent (absolute); `None`: the caller's.
    pub provider: Option<PathBuf>,
    /// Another model of the provider; `None`: the provider file's.
    pub model: Option<String>,
    /// The subagent's own hard limits (it also spends from its caller's).
    pub limits: EpisodeLimits,
    /// The role file.
    pub file: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRole {
    description: Spanned<String>,
    policy: Spanned<String>,
    tools: Option<Spanned<Vec<String>>>,
    mcp_servers: Option<Spanned<Vec<String>>>,
    instructions: Option<String>,
    provider: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    limits: Option<RawLimits>,
}

/// Whether `name` can name a role (and a transcript): 1–64 of `a-z`, `0-9`, `-`, `_`,
/// starting with a letter or digit.
#[must_use]
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !name.starts_with(['-', '_'])
}

impl AgentRole {
    /// Reads the role file `path`; `home` resolves `~/` in its paths.
    ///
    /// # Errors
    /// [`FileError`] naming the file, line and key of every problem: an unknown key, a
    /// missing `description` or `policy`, an empty value, a file name that is no role name.
    pub fn load(path: &Path, home: Option<&Path>) -> Result<Self, FileError> {
        let text = read_text(path, "role file")?;
        Self::parse(path, &text, home)
    }

    /// Parses role-file text as if read from `path`.
    ///
    /// # Errors
    /// As [`AgentRole::load`].
    pub fn parse(path: &Path, text: &str, home: Option<&Path>) -> Result<Self, FileError> {
        let source = Source::new(path.display().to_string(), text);
        let raw: RawRole = parse_toml(&source).map_err(|d| FileError::one(*d))?;
        let mut problems = Vec::new();
        let mut problem = |span: std::ops::Range<usize>, key: &str, message: &str, help: &str| {
            problems.push(FileDiagnostic::at(
                &source,
                span,
                Some(key.to_owned()),
                message,
                (!help.is_empty()).then(|| help.to_owned()),
            ));
        };
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !valid_name(&name) {
            problem(
                0..0,
                "(file name)",
                &format!("`{name}` is not a role name"),
                "name role files with lower-case letters, digits, `-` and `_` (reviewer.toml)",
            );
        }
        if raw.description.get_ref().trim().is_empty() {
            problem(
                raw.description.span(),
                "description",
                "the description is empty",
                "say what the role is for: the model chooses roles by their descriptions",
            );
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: &str| match (p.strip_prefix("~/"), home) {
            (Some(rest), Some(h)) => h.join(rest),
            _ => dir.join(p),
        };
        if raw.policy.get_ref().trim().is_empty() {
            problem(raw.policy.span(), "policy", "the path is empty", "");
        }
        if let Some(tools) = &raw.tools {
            let mut seen = std::collections::BTreeSet::new();
            for t in tools.get_ref() {
                if !seen.insert(t.as_str()) {
                    problem(tools.span(), "tools", &format!("`{t}` is listed twice"), "");
                }
            }
        }
        if let Some(servers) = &raw.mcp_servers {
            let mut seen = std::collections::BTreeSet::new();
            for s in servers.get_ref() {
                if !seen.insert(s.as_str()) {
                    problem(
                        servers.span(),
                        "mcp_servers",
                        &format!("`{s}` is listed twice"),
                        "",
                    );
                } else if !crate::config::valid_server_name(s) {
                    problem(
                        servers.span(),
                        "mcp_servers",
                        &format!("`{s}` cannot name a server"),
                        "name a [mcp.servers.NAME] of the configuration",
                    );
                }
            }
        }
        if let Some(p) = raw
            .provider
            .as_ref()
            .filter(|p| p.get_ref().trim().is_empty())
        {
            problem(p.span(), "provider", "the path is empty", "");
        }
        if let Some(m) = raw.model.as_ref().filter(|m| m.get_ref().trim().is_empty()) {
            problem(
                m.span(),
                "model",
                "the model is empty",
                "remove the key for the provider file's model",
            );
        }
        if let Some(l) = &raw.limits {
            l.check(|span, key, message, help| problem(span, key, message, help));
        }
        if !problems.is_empty() {
            return Err(FileError::Invalid(FileDiagnostics {
                file: path.display().to_string(),
                problems,
            }));
        }
        let limits = raw
            .limits
            .as_ref()
            .map_or_else(EpisodeLimits::default, |l| EpisodeLimits {
                turns: l.turns.as_ref().map(|v| *v.get_ref()),
                tokens: l.tokens.as_ref().map(|v| *v.get_ref()),
                wall: l
                    .wall_seconds
                    .as_ref()
                    .map(|v| Duration::from_secs(*v.get_ref())),
                cost_usd: l.cost_usd.as_ref().map(|v| *v.get_ref()),
            });
        Ok(Self {
            name,
            description: raw.description.into_inner().trim().to_owned(),
            policy: resolve(raw.policy.get_ref()),
            tools: raw.tools.map(Spanned::into_inner),
            mcp_servers: raw.mcp_servers.map(Spanned::into_inner).unwrap_or_default(),
            instructions: raw.instructions.filter(|i| !i.trim().is_empty()),
            provider: raw.provider.map(|p| resolve(p.get_ref())),
            model: raw.model.map(Spanned::into_inner),
            limits,
            file: path.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(name: &str, text: &str) -> Result<AgentRole, String> {
        AgentRole::parse(&Path::new("/p/.bee/agents").join(name), text, None)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_full_role_resolves_its_paths_against_its_file() {
        let r = parse(
            "reviewer.toml",
            "description = \"Reads.\"\npolicy = \"../../policies/ro.toml\"\n\
             tools = [\"read_file\", \"grep\"]\nprovider = \"p.toml\"\nmodel = \"m2\"\n\
             [limits]\nturns = 3\ncost_usd = 0.5\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.name, "reviewer");
        assert_eq!(r.policy, Path::new("/p/.bee/agents/../../policies/ro.toml"));
        assert_eq!(
            r.provider.as_deref(),
            Some(Path::new("/p/.bee/agents/p.toml"))
        );
        assert_eq!(
            r.tools.as_deref(),
            Some(&["read_file".to_owned(), "grep".to_owned()][..])
        );
        assert_eq!(r.limits.turns, Some(3));
        assert_eq!(r.limits.cost_usd, Some(0.5));
    }

    #[test]
    fn unknown_keys_missing_keys_and_bad_values_name_line_and_key() {
        let e = parse(
            "r.toml",
            "description = \"x\"\npolicy = \"p.toml\"\npolcy = \"q\"\n",
        )
        .unwrap_err();
        assert!(e.contains("polcy") && e.contains(":3:"), "{e}");
        let e = parse("r.toml", "description = \"x\"\n").unwrap_err();
        assert!(e.contains("policy"), "{e}");
        let e = parse(
            "r.toml",
            "description = \" \"\npolicy = \"p\"\n[limits]\nturns = 0\n",
        )
        .unwrap_err();
        assert!(
            e.contains("description") && e.contains("limits.turns"),
            "{e}"
        );
        let e = parse("Bad Name.toml", "description = \"x\"\npolicy = \"p\"\n").unwrap_err();
        assert!(e.contains("not a role name"), "{e}");
    }

    #[test]
    fn role_names() {
        for ok in ["reviewer", "a", "sec-review_2"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "Reviewer", "-x", "a b", "a/b", "..", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
