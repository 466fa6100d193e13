//! The vocabulary every layer shares — records, tools, sessions, the sandbox and the UI —
//! with no dependency on any of them: how tool calls are confined ([`Enforcement`]), the
//! state a tool call ends in ([`ToolState`]), how an episode ended ([`Outcome`]), and what the
//! kernel decided ([`HookName`], [`Access`], [`Capability`], [`GrantKind`], defined beside the
//! audit records in `bee_userspace::audit`). Each serializes as the records have always
//! written it.

use std::fmt;

use serde::{Deserialize, Serialize};

pub use bee_userspace::audit::{Access, Capability, GrantKind, HookName};

/// How the tools of an episode were confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Each tool call ran in a cgroup scope whose policy the eBPF LSM programs enforced.
    Kernel,
    /// Tools ran as hardened host processes with no kernel scope (`--host`).
    Host,
}

impl Enforcement {
    /// `kernel` or `host`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kernel => "kernel",
            Self::Host => "host",
        }
    }

    /// One line for people, e.g. for the start of a session.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Self::Kernel => "kernel: every tool call runs in a kernel scope",
            Self::Host => {
                "host (--host): tools run as hardened host processes with NO kernel enforcement"
            }
        }
    }
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The three states every tool answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolState {
    /// The tool ran and did what it does (a command exiting non-zero still completed).
    Completed,
    /// The tool did not run: not granted, missing binary, bad arguments, timeout before start.
    CouldNotRun,
    /// The tool started and broke: a crash, a timeout, an unreadable result.
    Failed,
}

impl ToolState {
    /// `completed`, `could_not_run` or `failed`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::CouldNotRun => "could_not_run",
            Self::Failed => "failed",
        }
    }
}

/// The outcomes of an episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The success check passed.
    Passed,
    /// The success check failed.
    Failed,
    /// A limit ended the episode (an answer cut off at the output limit included).
    Limit,
    /// The model declined the task, or the provider's content filter stopped its answer.
    Refused,
    /// The provider failed and the episode could not go on.
    ProviderError,
    /// bee was interrupted.
    Interrupted,
    /// The kernel could not enforce the policy, so no tool ran.
    EnforcementUnavailable,
    /// An interactive session (`bee repl`) that the user ended.
    Ended,
}

impl Outcome {
    /// The outcome as written: `passed`, `failed`, `limit`, `refused`, `provider-error`,
    /// `interrupted`, `enforcement-unavailable` or `ended`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Limit => "limit",
            Self::Refused => "refused",
            Self::ProviderError => "provider-error",
            Self::Interrupted => "interrupted",
            Self::EnforcementUnavailable => "enforcement-unavailable",
            Self::Ended => "ended",
        }
    }
}
