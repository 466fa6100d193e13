//! `bee check`: can this kernel, and this process, enforce bee policies?
//!
//! Runs every gate of [`SupportReport::detect`] — the last one loads and attaches a real LSM
//! program — and prints each with its verdict, what was found and, for a failure, the fix.

use bee_userspace::support::SupportReport;
use serde_json::json;

use super::Exit;

/// Arguments of `bee check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `bee check`: 0 when enforcement works here, 65 when it does not.
pub fn run(args: &Args) -> Exit {
    let report = SupportReport::detect();
    if args.json {
        println!("{}", to_json(&report));
    } else {
        println!("{report}");
    }
    if report.is_supported() {
        Exit::Ok
    } else {
        Exit::DataErr
    }
}

/// The report as JSON: `supported`, `kernel`, the `capabilities` bee needs here (`required`)
/// and those it lacks (`missing`), the `kernel_features` bee's programs need that this kernel
/// lacks (`missing`, each with the release that added it) and the `lowest_kernel` that has
/// them all (`null` when none is missing), and one object per gate.
pub fn to_json(report: &SupportReport) -> serde_json::Value {
    json!({
        "supported": report.is_supported(),
        "kernel": report.kernel_release,
        "capabilities": {
            "required": report.required.iter().map(|r| r.name).collect::<Vec<_>>(),
            "missing": report.missing.iter().map(|r| r.name).collect::<Vec<_>>(),
        },
        "kernel_features": {
            "missing": report.missing_pieces.iter().map(|p| json!({
                "piece": p.name,
                "btf_name": p.btf_name,
                "since": p.since.to_string(),
            })).collect::<Vec<_>>(),
            "lowest_kernel": report.lowest_kernel.map(|v| v.to_string()),
        },
        "gates": report.gates.iter().map(|g| json!({
            "gate": g.id.name(),
            "passed": g.passed,
            "reason": g.reason,
            "fix": g.fix,
        })).collect::<Vec<_>>(),
    })
}
