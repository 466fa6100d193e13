//! Scenario files as written: unknown keys refused, spans kept for errors.

use serde::Deserialize;
use toml::Spanned;

pub(super) use crate::config::RawLimits;

/// The keys an episode can set, at the top of a file (defaults) or in `[[episode]]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEpisode {
    pub name: Option<Spanned<String>>,
    pub prompt: Option<Spanned<String>>,
    pub prompt_file: Option<Spanned<String>>,
    pub system_prompt: Option<Spanned<String>>,
    pub system_prompt_file: Option<Spanned<String>>,
    pub workspace: Option<Spanned<String>>,
    pub workspace_mode: Option<Spanned<String>>,
    pub policy: Option<Spanned<String>>,
    pub max_output_tokens: Option<Spanned<u32>>,
    pub skills: Option<Spanned<Vec<String>>>,
    pub repeat: Option<Spanned<u32>>,
    pub limits: Option<RawLimits>,
    pub success_check: Option<Spanned<RawCheck>>,
    pub mcp: Option<crate::config::RawMcp>,
}

/// A whole file: the episode keys as defaults, plus `[[episode]]` and `scenarios`.
/// (serde cannot combine `flatten` with `deny_unknown_fields`, so the keys repeat.)
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub name: Option<Spanned<String>>,
    pub prompt: Option<Spanned<String>>,
    pub prompt_file: Option<Spanned<String>>,
    pub system_prompt: Option<Spanned<String>>,
    pub system_prompt_file: Option<Spanned<String>>,
    pub workspace: Option<Spanned<String>>,
    pub workspace_mode: Option<Spanned<String>>,
    pub policy: Option<Spanned<String>>,
    pub max_output_tokens: Option<Spanned<u32>>,
    pub skills: Option<Spanned<Vec<String>>>,
    pub repeat: Option<Spanned<u32>>,
    pub limits: Option<RawLimits>,
    pub success_check: Option<Spanned<RawCheck>>,
    pub mcp: Option<crate::config::RawMcp>,
    #[serde(default)]
    pub episode: Vec<Spanned<RawEpisode>>,
    pub scenarios: Option<Spanned<String>>,
}

impl RawFile {
    /// Splits the file into its defaults, its episodes and its `scenarios` directory.
    pub fn split(
        self,
    ) -> (
        RawEpisode,
        Vec<Spanned<RawEpisode>>,
        Option<Spanned<String>>,
    ) {
        let defaults = RawEpisode {
            name: self.name,
            prompt: self.prompt,
            prompt_file: self.prompt_file,
            system_prompt: self.system_prompt,
            system_prompt_file: self.system_prompt_file,
            workspace: self.workspace,
            workspace_mode: self.workspace_mode,
            policy: self.policy,
            max_output_tokens: self.max_output_tokens,
            skills: self.skills,
            repeat: self.repeat,
            limits: self.limits,
            success_check: self.success_check,
            mcp: self.mcp,
        };
        (defaults, self.episode, self.scenarios)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCheck {
    pub command: Option<Spanned<String>>,
    pub timeout_seconds: Option<Spanned<u64>>,
}
