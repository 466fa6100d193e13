//! `bee findings list|adjudicate|export`: a person's side of the findings ledger. There is no
//! tool equivalent: only a person rules on a finding.

use std::path::PathBuf;

use serde_json::json;

use crate::config::{Config, Flags};
use crate::findings::{Ledger, LedgerError, Problem, State, Verdict, git::head_commit, sarif};
use crate::tools::findings::describe;

use super::Exit;

/// Arguments of `bee findings`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The ledger [default: `security.ledger` of the configuration, else
    /// .bee/findings/ledger.jsonl].
    #[arg(long, value_name = "FILE", global = true)]
    ledger: Option<PathBuf>,
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// List the findings with their state (open, or the latest verdict).
    List(ListArgs),
    /// Rule on a finding: append a person's verdict to the ledger. A later rediscovery
    /// appends a sighting and never changes it.
    Adjudicate(AdjudicateArgs),
    /// Write the findings as a SARIF 2.1.0 log.
    Export(ExportArgs),
}

/// `--state` of `list`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum StateArg {
    Open,
    FalsePositive,
    WontFix,
    Confirmed,
    Fixed,
}

impl From<StateArg> for State {
    fn from(s: StateArg) -> Self {
        match s {
            StateArg::Open => State::Open,
            StateArg::FalsePositive => State::FalsePositive,
            StateArg::WontFix => State::WontFix,
            StateArg::Confirmed => State::Confirmed,
            StateArg::Fixed => State::Fixed,
        }
    }
}

/// `--state` of `adjudicate`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum VerdictArg {
    FalsePositive,
    WontFix,
    Confirmed,
    Fixed,
}

impl From<VerdictArg> for Verdict {
    fn from(s: VerdictArg) -> Self {
        match s {
            VerdictArg::FalsePositive => Verdict::FalsePositive,
            VerdictArg::WontFix => Verdict::WontFix,
            VerdictArg::Confirmed => Verdict::Confirmed,
            VerdictArg::Fixed => Verdict::Fixed,
        }
    }
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    /// Only findings in this state.
    #[arg(long, value_enum)]
    state: Option<StateArg>,
    /// Print one JSON object on stdout instead of lines.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct AdjudicateArgs {
    /// The finding's id (`F-…`), or a unique start of it.
    #[arg(value_name = "ID")]
    id: String,
    /// The verdict.
    #[arg(long, value_enum)]
    state: VerdictArg,
    /// Why: kept in the ledger with the verdict.
    #[arg(long)]
    note: String,
    /// Who rules [default: the invoking user].
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
}

#[derive(Debug, clap::Args)]
struct ExportArgs {
    /// Where to write the SARIF 2.1.0 log (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    sarif: PathBuf,
}

/// The ledger the command works on.
fn ledger(args: &Args) -> Result<Ledger, Exit> {
    if let Some(p) = &args.ledger {
        return Ok(Ledger::at(p));
    }
    match Config::resolve(&Flags::default()) {
        Ok(c) => Ok(Ledger::at(c.ledger.value)),
        Err(e) => {
            eprintln!("bee findings: {e}");
            Err(Exit::DataErr)
        }
    }
}

/// Reports the skipped lines; true when one is more than a cut-short last line.
fn report(ledger: &Ledger, problems: &[Problem]) -> bool {
    for p in problems {
        let what = if p.truncated { "warning" } else { "error" };
        eprintln!(
            "bee findings: {what}: {}:{}: {}",
            ledger.path().display(),
            p.line,
            p.message
        );
    }
    problems.iter().any(|p| !p.truncated)
}

fn io_exit(e: &LedgerError) -> Exit {
    match e {
        LedgerError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            Exit::NoInput
        }
        LedgerError::Io { .. } => Exit::IoErr,
        LedgerError::Unknown { .. } => Exit::DataErr,
    }
}

/// The person ruling: `--by`, else `SUDO_USER`, else the user name of the real uid.
fn person(by: Option<&str>) -> String {
    if let Some(b) = by.map(str::trim).filter(|b| !b.is_empty()) {
        return b.to_owned();
    }
    if let Some(u) = std::env::var("SUDO_USER").ok().filter(|u| !u.is_empty()) {
        return u;
    }
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map_or_else(|| format!("uid {}", nix::unistd::getuid()), |u| u.name)
}

/// Runs `bee findings`.
pub fn run(args: &Args) -> Exit {
    let ledger = match ledger(args) {
        Ok(l) => l,
        Err(e) => return e,
    };
    match &args.command {
        Sub::List(a) => list(&ledger, a),
        Sub::Adjudicate(a) => adjudicate(&ledger, a),
        Sub::Export(a) => export(&ledger, a),
    }
}

fn list(ledger: &Ledger, a: &ListArgs) -> Exit {
    let loaded = match ledger.read() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bee findings list: {e}");
            return io_exit(&e);
        }
    };
    let bad = report(ledger, &loaded.problems);
    let state = a.state.map(State::from);
    let shown: Vec<_> = loaded
        .findings
        .findings
        .values()
        .filter(|f| state.is_none_or(|s| f.state == s))
        .collect();
    let out = if a.json {
        format!(
            "{}\n",
            json!({
                "ledger": ledger.path(),
                "findings": shown,
                "problems": loaded.problems,
            })
        )
    } else {
        let mut counts = std::collections::BTreeMap::new();
        for f in loaded.findings.findings.values() {
            *counts.entry(f.state.as_str()).or_insert(0) += 1;
        }
        let summary: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let mut text = format!(
            "{} finding(s) in {}{}\n",
            loaded.findings.findings.len(),
            ledger.path().display(),
            if summary.is_empty() {
                String::new()
            } else {
                format!(": {}", summary.join(", "))
            }
        );
        for f in &shown {
            text.push_str(&describe(f));
            text.push('\n');
        }
        text
    };
    match super::write_stdout(out.as_bytes()) {
        Exit::Ok if bad => Exit::DataErr,
        e => e,
    }
}

fn adjudicate(ledger: &Ledger, a: &AdjudicateArgs) -> Exit {
    if a.note.trim().is_empty() {
        eprintln!("bee findings adjudicate: --note is empty: say why, for the next reviewer");
        return Exit::Usage;
    }
    if !ledger.path().exists() {
        eprintln!(
            "bee findings adjudicate: {}: no ledger (no finding has been recorded)",
            ledger.path().display()
        );
        return Exit::NoInput;
    }
    let by = person(a.by.as_deref());
    let commit = std::env::current_dir().ok().and_then(|d| head_commit(&d));
    match ledger.adjudicate(&a.id, a.state.into(), a.note.trim(), &by, commit.as_deref()) {
        Ok(f) => {
            println!(
                "{}: {} (by {by}); {} sighting(s)",
                f.id,
                f.state.as_str(),
                f.sightings
            );
            Exit::Ok
        }
        Err(e) => {
            eprintln!("bee findings adjudicate: {e}");
            io_exit(&e)
        }
    }
}

fn export(ledger: &Ledger, a: &ExportArgs) -> Exit {
    let loaded = match ledger.read() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bee findings export: {e}");
            return io_exit(&e);
        }
    };
    let bad = report(ledger, &loaded.problems);
    let log = sarif::export(&loaded.findings);
    let text = match serde_json::to_string_pretty(&log) {
        Ok(t) => format!("{t}\n"),
        Err(e) => {
            eprintln!("bee findings export: {e}");
            return Exit::Software;
        }
    };
    let written = if a.sarif.as_os_str() == "-" {
        super::write_stdout(text.as_bytes())
    } else {
        match std::fs::write(&a.sarif, text) {
            Ok(()) => {
                eprintln!(
                    "bee findings export: {} finding(s) to {}",
                    loaded.findings.findings.len(),
                    a.sarif.display()
                );
                Exit::Ok
            }
            Err(e) => {
                eprintln!("bee findings export: {}: {e}", a.sarif.display());
                if e.kind() == std::io::ErrorKind::NotFound {
                    Exit::CantCreat
                } else {
                    Exit::IoErr
                }
            }
        }
    };
    match written {
        Exit::Ok if bad => Exit::DataErr,
        e => e,
    }
}
