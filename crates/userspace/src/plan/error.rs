//! Why a policy cannot be planned.

use bee_common::{GLOB_MAX, GLOBS_PER_STATE_MAX, NAME_MAX, NET_RULES_MAX};
use bee_core::compiled::Origin;
use serde::Serialize;

use super::Placement;

/// A rule and the number of automaton states it takes part in, for size refusals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleUse {
    /// The rule.
    pub origin: Origin,
    /// Number of automaton states holding one of its positions.
    pub states: usize,
}

/// Why a [`bee_core::CompiledPolicy`] cannot be enforced exactly. Each refusal names the rule
/// (its key, line and text) and what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A literal path segment is longer than any file name can be.
    #[error(
        "{}: a path segment of {len} bytes is longer than Linux file names can be ({NAME_MAX} \
         bytes, NAME_MAX), so the rule could never match; shorten or remove it",
        rule(.origin)
    )]
    SegmentTooLong {
        /// The rule.
        origin: Origin,
        /// The segment's length in bytes.
        len: usize,
    },
    /// A star segment does not fit the kernel's glob buffer.
    #[error(
        "{}: the star segment `{glob}` is {} bytes; the kernel matcher holds at most \
         {GLOB_MAX}. Use a shorter pattern (e.g. `*SUFFIX` with a shorter suffix) or a \
         subtree (`DIR/**`)",
        rule(.origin),
        .glob.len()
    )]
    GlobTooLong {
        /// The rule.
        origin: Origin,
        /// The star segment.
        glob: String,
    },
    /// Too many different star segments could match the segment after one directory.
    #[error(
        "below `{at}`, {} different star segments ({}) could match the next path segment; the \
         kernel matcher tries at most {GLOBS_PER_STATE_MAX} per directory. Rules: {}. Merge \
         them into fewer patterns (e.g. one `DIR/**` or `DIR/*`)",
        .globs.len(),
        .globs.join(", "),
        rules(.origins)
    )]
    TooManyGlobs {
        /// An example directory (star segments as written) where the limit is exceeded.
        at: String,
        /// The star segments.
        globs: Vec<String>,
        /// The rules they come from.
        origins: Vec<Origin>,
    },
    /// The path automaton exceeds a size cap ([`super::PlanLimits`]).
    #[error(
        "the path automaton needs more than {cap} {what} (reached {count}); the rules in the \
         most states are {}. Replace groups of related rules with a subtree (`DIR/**`) or \
         fewer star segments",
        uses(.rules)
    )]
    TooLarge {
        /// Which entries: `states`, `literal edges`, `globs` or `glob combos`.
        what: &'static str,
        /// How many were needed when the cap was hit.
        count: usize,
        /// The cap.
        cap: usize,
        /// Up to three rules taking part in the most states.
        rules: Vec<RuleUse>,
    },
    /// A pinned executable that is not one exact path.
    #[error(
        "{}: a pinned executable (`!`) must be one exact path, not the pattern `{pattern}`; \
         remove the `!` or name a single file",
        rule(.origin)
    )]
    PinNotExact {
        /// The rule.
        origin: Origin,
        /// The pattern as lowered.
        pattern: String,
    },
    /// A pinned file's device number has no kernel `dev_t` encoding.
    #[error(
        "{}: the pinned file's device {dev:#x} (`st_dev`) has a major number above 4095 or a \
         minor above 2^20-1, which the kernel's dev_t cannot hold; pin a file on another \
         file system or drop the pin",
        rule(.origin)
    )]
    DeviceNotEncodable {
        /// The rule.
        origin: Origin,
        /// `st_dev` as resolved at compile time.
        dev: u64,
    },
    /// Too many distinct port rules apply to one address block.
    #[error(
        "peers in {block} are covered by grants needing {count} port rules after merging; the \
         kernel checks at most {NET_RULES_MAX} per address block. Grants: {}. Use fewer, wider \
         port ranges for overlapping blocks",
        rules(.origins)
    )]
    TooManyPortRules {
        /// The address block (CIDR).
        block: String,
        /// Port rules needed after merging.
        count: usize,
        /// The grants covering the block.
        origins: Vec<Origin>,
    },
    /// Too many distinct address blocks.
    #[error(
        "the policy grants {count} distinct address blocks, over the cap of {cap}; merge hosts \
         into wider blocks (CIDR)"
    )]
    TooManyNetPrefixes {
        /// Distinct blocks (IPv4 and IPv6).
        count: usize,
        /// The cap.
        cap: usize,
    },
    /// Relocation would overflow a 32-bit id.
    #[error("placing the plan at {placement:?} overflows a 32-bit state or glob id")]
    IdOverflow {
        /// The requested placement.
        placement: Placement,
    },
    /// A planner invariant failed; this is a bug in bee.
    #[error("internal planner error (a bug in bee): {what}")]
    Internal {
        /// What went wrong.
        what: String,
    },
}

/// `` `fs.read[2]` (line 3: `~/src/**`) ``.
fn rule(o: &Origin) -> String {
    format!("`{}` (line {}: `{}`)", o.key, o.line, o.text)
}

fn rules(origins: &[Origin]) -> String {
    origins.iter().map(rule).collect::<Vec<_>>().join(", ")
}

fn uses(rules: &[RuleUse]) -> String {
    rules
        .iter()
        .map(|u| format!("{} in {} states", rule(&u.origin), u.states))
        .collect::<Vec<_>>()
        .join(", ")
}
