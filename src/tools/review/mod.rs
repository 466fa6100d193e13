//! The review tools, each behind a default-off feature: `ast_grep` (feature `astgrep` and one
//! `astgrep-<lang>` per grammar) and `git_log` (`gitlog`) run in the scope as `bee __tool
//! NAME`, like the file tools; `cvss` (`cvss`) touches no file and runs in the harness, and so
//! do `record_finding` and `list_findings` (`findings`), which the session's set-up registers
//! with the project's ledger ([`findings`]).

#[cfg(feature = "cvss")]
pub mod cvss;
mod defs;
#[cfg(feature = "findings")]
pub mod findings;

use std::sync::Arc;

use super::Tool;

/// The review tools this build was compiled with, in a fixed order (none by default).
#[must_use]
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        #[cfg(feature = "astgrep")]
        runner(defs::ast_grep()),
        #[cfg(feature = "gitlog")]
        runner(defs::git_log()),
        #[cfg(feature = "cvss")]
        Arc::new(cvss::CvssTool),
    ]
}

/// A tool the runner serves, as `bee __tool NAME` in the scope.
#[cfg(any(feature = "astgrep", feature = "gitlog"))]
fn runner(def: crate::provider::ToolDef) -> Arc<dyn Tool> {
    Arc::new(super::RunnerTool::from_definition(def))
}
