//! `scan`: the operator's scanners — Opengrep ([`opengrep`]) and CodeQL ([`codeql`]) — run
//! in the session's scope, their reports parsed into sightings for the findings ledger
//! (feature `scanners`).
//!
//! A scanner's value is its curated rules, and its risk is that it is a large program run on
//! untrusted code. So:
//!
//! * it runs only as the file the policy **pins** (`exec.allow = ["!/opt/opengrep/opengrep"]`):
//!   before each scan the binary's device and inode are compared with the pin, and a
//!   substituted file is refused by name (the kernel refuses it too);
//! * the model chooses *what* to scan (paths, a language), never flags: the argument vector is
//!   built here from typed inputs, with the operator's rules and settings;
//! * nothing found is never confused with nothing scanned: a missing, ungranted or substituted
//!   binary, a version mismatch, a timeout, a crash or an unparseable report is `could_not_run`
//!   or `failed` with the reason.

pub mod codeql;
pub mod opengrep;

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bee_core::CompiledPolicy;
use bee_core::glob::PathPattern;
use serde::Deserialize;
use serde_json::json;

use crate::config::{Config, ScannerConfig};
use crate::findings::{Recorder, Sighting, relative_path};
use crate::provider::ToolDef;
use crate::sandbox::{RunOutput, Sandbox};
use crate::tools::{Answer, Context, Placement, RunEnd, Tool, ToolState};

/// The most bytes of a scanner's report (standard output) bee reads; a longer one is a
/// failure, never a silently cut report.
pub const REPORT_CAP: usize = 64 * 1024 * 1024;

/// What a scan found.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// The results, as sightings.
    pub sightings: Vec<Sighting>,
    /// How many files the scanner says it scanned, when it says.
    pub scanned: Option<usize>,
    /// What the scanner could not do (files it skipped, rules that failed): the scan is
    /// incomplete when there are any.
    pub incomplete: Vec<String>,
    /// Other things worth knowing (a result outside the workspace, ignored).
    pub notes: Vec<String>,
}

/// An answer in the `failed` state.
pub(crate) fn failed(body: String) -> Answer {
    Answer {
        state: ToolState::Failed,
        ..Answer::could_not_run(body)
    }
}

/// The scanner at `binary`, checked against the policy's pins: the canonical path, if the
/// policy pins it and the file there is still the pinned one.
///
/// # Errors
/// Why it may not run, in words: no policy (host mode), no such file, no pin for it, or a
/// file that is not the pinned one (its device and inode changed).
pub fn pinned(policy: Option<&CompiledPolicy>, binary: &Path) -> Result<PathBuf, String> {
    let Some(policy) = policy else {
        return Err(format!(
            "a scanner runs only as a file the session's policy pins (`exec.allow = \
             [\"!{}\"]`), and this session has no policy (--host)",
            binary.display()
        ));
    };
    let canonical = std::fs::canonicalize(binary)
        .map_err(|e| format!("the scanner `{}` cannot be found: {e}", binary.display()))?;
    let text = canonical.to_string_lossy();
    let pin = policy.exec.iter().find_map(|r| match (&r.pattern, r.pin) {
        (PathPattern::Exact { path }, Some(pin)) if *path == text => Some((pin, &r.origin)),
        _ => None,
    });
    let Some((pin, origin)) = pin else {
        return Err(format!(
            "the policy {} does not pin the scanner `{text}`: add \"!{text}\" to exec.allow (an \
             unpinned grant is not enough: the pin is what detects a substituted binary)",
            policy.source
        ));
    };
    let meta = std::fs::metadata(&canonical)
        .map_err(|e| format!("the scanner `{text}` cannot be examined: {e}"))?;
    if (meta.dev(), meta.ino()) != (pin.dev, pin.ino) {
        return Err(format!(
            "the scanner `{text}` is not the file the policy pinned ({}:{} {}): it is device \
             {} inode {}, the pin is device {} inode {} — the binary was replaced after the \
             policy was compiled",
            policy.source,
            origin.line,
            origin.key,
            meta.dev(),
            meta.ino(),
            pin.dev,
            pin.ino
        ));
    }
    Ok(canonical)
}

/// A path a scanner reported, as a repository-relative path: relative ones normalised,
/// absolute ones below the workspace made relative.
pub(crate) fn workspace_path(workspace: &Path, reported: &str) -> Result<String, String> {
    let p = Path::new(reported);
    if p.is_absolute() {
        let rel = p
            .strip_prefix(workspace)
            .map_err(|_| format!("`{reported}` is outside the workspace"))?;
        return relative_path(&rel.to_string_lossy());
    }
    relative_path(reported)
}

/// The first line of `text`, at most `max` characters.
pub(crate) fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    if line.chars().count() > max {
        let cut: String = line.chars().take(max).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

/// The last `n` lines of a captured stream, for an explanation.
pub(crate) fn tail(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Why a finished run is not a report: a timeout, an interruption, a report over the cap.
pub(crate) fn unfinished(what: &str, run: &RunOutput, timeout: Duration) -> Option<Answer> {
    let end = RunEnd::of(run);
    match end {
        RunEnd::Interrupted => {
            return Some(Answer {
                denials: run.denials.clone(),
                ..crate::tools::interrupted(what)
            });
        }
        RunEnd::TimedOut => {
            return Some(Answer {
                state: end.state(None),
                denials: run.denials.clone(),
                permission_error: !run.denials.is_empty(),
                ..failed(format!(
                    "{what} did not finish within bee's limit of {}; its processes were killed \
                     and nothing was recorded",
                    crate::tools::seconds(timeout)
                ))
            });
        }
        RunEnd::Exited(_) => {}
    }
    if run.stdout.truncated {
        return Some(failed(format!(
            "{what} wrote a report of {} bytes, over bee's limit of {REPORT_CAP}; nothing was \
             recorded",
            run.stdout.total
        )));
    }
    None
}

/// The `scan` tool.
#[derive(Debug)]
pub struct ScanTool {
    opengrep: Option<ScannerConfig>,
    codeql: Option<ScannerConfig>,
    recorder: Arc<Recorder>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    scanner: String,
    #[serde(default)]
    paths: Option<Vec<String>>,
    #[serde(default)]
    language: Option<String>,
}

impl ScanTool {
    /// The tool with the configuration's scanners, recording with `recorder`.
    #[must_use]
    pub fn from_config(config: &Config, recorder: Arc<Recorder>) -> Self {
        Self::new(
            config.scanners.get("opengrep").cloned(),
            config.scanners.get("codeql").cloned(),
            recorder,
        )
    }

    /// The tool with these scanners.
    #[must_use]
    pub fn new(
        opengrep: Option<ScannerConfig>,
        codeql: Option<ScannerConfig>,
        recorder: Arc<Recorder>,
    ) -> Self {
        Self {
            opengrep,
            codeql,
            recorder,
        }
    }

    fn configured(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.opengrep.is_some() {
            out.push("opengrep");
        }
        if self.codeql.is_some() {
            out.push("codeql");
        }
        out
    }

    /// Records `scan`'s sightings and tells the model what they are.
    fn report(&self, scanner: &str, scan: Scan, ctx: &Context<'_>) -> Answer {
        let recorded = if scan.sightings.is_empty() {
            Vec::new()
        } else {
            match self.recorder.record(&scan.sightings, scanner) {
                Ok(r) => r,
                Err(e) => {
                    return failed(format!(
                        "{scanner} ran, and its {} result(s) could not be recorded: the \
                         findings ledger: {e}",
                        scan.sightings.len()
                    ));
                }
            }
        };
        let new = recorded.iter().filter(|r| r.new).count();
        let mut body = String::new();
        if !scan.incomplete.is_empty() {
            let _ = writeln!(
                body,
                "INCOMPLETE: {scanner} reported {} problem(s); results may be missing",
                scan.incomplete.len()
            );
        }
        let files = scan
            .scanned
            .map(|n| format!(" in {n} file(s) scanned"))
            .unwrap_or_default();
        if recorded.is_empty() {
            let _ = writeln!(body, "{scanner}: no results{files}");
        } else {
            let _ = writeln!(
                body,
                "{scanner}: {} result(s){files}: {new} new finding(s), {} already in the ledger",
                recorded.len(),
                recorded.len() - new
            );
        }
        let cap = ctx.limits.output_cap;
        for (r, s) in recorded.iter().zip(&scan.sightings) {
            let verdict = r
                .verdict
                .as_ref()
                .map(|v| format!(" (a person ruled it {}: {})", v.state.as_str(), v.note))
                .unwrap_or_default();
            let line = format!(
                "{} [{}] {} {} {}: {}{verdict}\n",
                r.id,
                r.state.as_str(),
                s.level.as_str(),
                s.identity.rule,
                s.location,
                s.title
            );
            if body.len() + line.len() > cap {
                let _ = writeln!(
                    body,
                    "[… more results; list_findings shows every finding in the ledger]"
                );
                break;
            }
            body.push_str(&line);
        }
        for p in scan.incomplete.iter().chain(&scan.notes).take(20) {
            let _ = writeln!(body, "note: {p}");
        }
        if scan.scanned == Some(0) {
            return failed(format!(
                "{scanner} ran and scanned no file: the paths hold nothing its rules cover\n{body}"
            ));
        }
        Answer::completed(body)
    }
}

impl Tool for ScanTool {
    fn definition(&self) -> ToolDef {
        let configured = self.configured();
        let configured = if configured.is_empty() {
            "none (the operator has configured no scanner)".to_owned()
        } else {
            configured.join(", ")
        };
        ToolDef {
            name: "scan".to_owned(),
            description: format!(
                "Run a security scanner the operator provisioned on the workspace, and record \
                 its results in the findings ledger (list_findings shows them with any \
                 person's verdict). `opengrep`: the operator's rules, on `paths` (default the \
                 whole workspace). `codeql`: the bundle's default queries for one `language` \
                 (actions, csharp, java, javascript, python, ruby: languages analysable \
                 without a build). You choose what to scan; the rules and flags are the \
                 operator's. Suppression comments in the code are not obeyed. Configured \
                 scanners: {configured}."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "scanner": {"type": "string", "enum": ["opengrep", "codeql"], "description": "Which scanner."},
                    "paths": {"type": "array", "items": {"type": "string"}, "description": "opengrep: files or directories to scan, relative to the workspace (default: all of it)."},
                    "language": {"type": "string", "description": "codeql: the language to analyse."}
                },
                "required": ["scanner"],
                "additionalProperties": false
            }),
        }
    }

    fn placement(&self) -> Placement {
        Placement::Command
    }

    fn call(&self, args: &serde_json::Value, ctx: &Context<'_>) -> Answer {
        let Some(sandbox) = ctx.sandbox else {
            return Answer::could_not_run("`scan` needs a sandbox".to_owned());
        };
        let args: Args = match serde_json::from_value(args.clone()) {
            Ok(a) => a,
            Err(e) => return Answer::could_not_run(format!("bad arguments for `scan`: {e}")),
        };
        let (settings, name) = match args.scanner.as_str() {
            "opengrep" => (&self.opengrep, "opengrep"),
            "codeql" => (&self.codeql, "codeql"),
            other => {
                return Answer::could_not_run(format!(
                    "bad arguments for `scan`: no scanner `{other}` (bee has opengrep and codeql)"
                ));
            }
        };
        let Some(settings) = settings else {
            return Answer::could_not_run(format!(
                "{name} is not configured: the operator sets it up in \
                 [security.scanners.{name}] (configured: {})",
                self.configured().join(", ")
            ));
        };
        let outcome = match name {
            "opengrep" => {
                if args.language.is_some() {
                    return Answer::could_not_run(
                        "bad arguments for `scan`: `language` is for codeql; opengrep's rules \
                         name their languages"
                            .to_owned(),
                    );
                }
                opengrep::run(sandbox, settings, args.paths.as_deref(), ctx)
            }
            _ => {
                if args.paths.is_some() {
                    return Answer::could_not_run(
                        "bad arguments for `scan`: codeql analyses the whole workspace; `paths` \
                         is for opengrep"
                            .to_owned(),
                    );
                }
                codeql::run(sandbox, settings, args.language.as_deref(), ctx)
            }
        };
        match outcome {
            Ok(scan) => self.report(name, scan, ctx),
            Err(answer) => answer,
        }
    }
}

/// The scanner's binary under the session's pins, or the answer refusing to run it.
pub(crate) fn granted(
    sandbox: &Sandbox,
    name: &str,
    settings: &ScannerConfig,
) -> Result<PathBuf, Answer> {
    let Some(path) = &settings.path else {
        return Err(Answer::could_not_run(format!(
            "{name} has no `path` in [security.scanners.{name}]: the operator names the \
             binary, and the policy pins it"
        )));
    };
    pinned(sandbox.requested_policy(), &path.value).map_err(Answer::could_not_run)
}

#[cfg(test)]
mod tests;
