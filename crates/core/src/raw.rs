//! The policy file as TOML: serde types that keep every value's byte span.
//!
//! Unknown keys are errors at every level (`deny_unknown_fields`). Values whose type is a
//! choice (a port or a list of ports, one protocol or several) are read as [`toml::Value`] and
//! interpreted by [`crate::compile`], so their errors can name the key and the accepted forms.

use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPolicy {
    pub version: Option<Spanned<toml::Value>>,
    pub name: Option<Spanned<String>>,
    pub description: Option<Spanned<String>>,
    #[serde(default)]
    pub include: Vec<Spanned<String>>,
    #[serde(default)]
    pub fs: RawFs,
    #[serde(default)]
    pub exec: RawExec,
    #[serde(default)]
    pub net: RawNet,
}

/// An included fragment: a policy's tables without `version` or `name`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFragment {
    #[expect(
        dead_code,
        reason = "documentation for people; read so that it is not refused"
    )]
    pub description: Option<Spanned<String>>,
    #[serde(default)]
    pub include: Vec<Spanned<String>>,
    #[serde(default)]
    pub fs: RawFs,
    #[serde(default)]
    pub exec: RawExec,
    #[serde(default)]
    pub net: RawNet,
}

/// `[fs]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFs {
    #[serde(default)]
    pub read: Vec<Spanned<String>>,
    #[serde(default)]
    pub write: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    #[serde(default)]
    pub protect: Vec<Spanned<String>>,
    #[serde(default)]
    pub unprotect: Vec<Spanned<String>>,
}

/// `[exec]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExec {
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
}

/// `[net]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNet {
    #[serde(default)]
    pub allow: Vec<Spanned<RawNetRule>>,
    #[serde(default)]
    pub unix: Vec<Spanned<String>>,
}

/// One `[[net.allow]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNetRule {
    pub addr: Option<Spanned<toml::Value>>,
    pub host: Option<Spanned<toml::Value>>,
    pub ports: Option<Spanned<toml::Value>>,
    pub proto: Option<Spanned<toml::Value>>,
}
