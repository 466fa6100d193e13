//! The Opengrep adapter (Semgrep's CLI and JSON, which Opengrep kept).
//!
//! The argument vector is fixed here: `scan --config RULES --json --disable-nosem
//! --metrics=off --disable-version-check --quiet -- TARGETS…`. `RULES` is the operator's
//! local path (`auto`, registry names and URLs are refused when the configuration is read),
//! `--disable-nosem` makes `nosemgrep` comments in the scanned code ineffective, and `--`
//! keeps a target named like a flag a target.
//!
//! Exit statuses (Semgrep's, which Opengrep kept): 0 and 1 are a finished scan (1: results
//! with `--error`, not passed here); 2 and above are failures, each named. The JSON's
//! `errors` make the scan *incomplete* (files or rules skipped), never silently clean.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::{Scan, failed, first_line, granted, tail, unfinished, workspace_path};
use crate::config::ScannerConfig;
use crate::findings::{Identity, Level, Location, Sighting};
use crate::sandbox::Sandbox;
use crate::tools::{Answer, Context};

/// The default wall-clock limit of one scan.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Deserialize)]
struct Report {
    results: Vec<Match>,
    #[serde(default)]
    errors: Vec<serde_json::Value>,
    #[serde(default)]
    paths: Paths,
}

#[derive(Debug, Default, Deserialize)]
struct Paths {
    #[serde(default)]
    scanned: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct Match {
    check_id: String,
    path: String,
    start: Position,
    #[serde(default)]
    end: Option<Position>,
    #[serde(default)]
    extra: Extra,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct Position {
    line: u32,
    #[serde(default)]
    col: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
struct Extra {
    #[serde(default)]
    message: String,
    #[serde(default)]
    severity: String,
    #[serde(default)]
    lines: String,
    #[serde(default)]
    fingerprint: Option<String>,
    #[serde(default)]
    is_ignored: bool,
}

/// What Semgrep's (and Opengrep's) exit statuses mean.
fn exit_meaning(code: i32) -> &'static str {
    match code {
        2 => "a fatal error",
        3 => "code it could not parse (strict mode)",
        4 => "an invalid pattern in the rules",
        5 => "rules that are not valid YAML",
        7 => "rules it could not read or that are invalid",
        8 => "a language it does not know",
        13 => "an API token problem",
        c if c >= 128 => "killed by a signal",
        _ => "an error",
    }
}

fn level(severity: &str) -> Level {
    match severity.to_ascii_uppercase().as_str() {
        "ERROR" | "CRITICAL" | "HIGH" => Level::Error,
        "WARNING" | "MEDIUM" => Level::Warning,
        "INFO" | "LOW" | "INVENTORY" | "EXPERIMENT" => Level::Note,
        _ => Level::Warning,
    }
}

/// The prefix Semgrep and Opengrep put before the ids of rules loaded from `rules`: the
/// components of its directory (of the file's directory, for a file) joined with `.`, e.g.
/// `etc.bee.rules.` for `/etc/bee/rules`. Stripped, so that moving the rules keeps findings.
#[must_use]
pub fn rule_prefix(rules: &Path) -> String {
    let dir = if rules.is_dir() {
        rules
    } else {
        rules.parent().unwrap_or(rules)
    };
    let parts: Vec<String> = dir
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("{}.", parts.join("."))
    }
}

/// Parses an Opengrep/Semgrep JSON report of a scan run in `workspace`, stripping
/// `rule_prefix` ([`rule_prefix`]) from rule ids.
///
/// # Errors
/// What is wrong with the report.
pub fn parse(workspace: &Path, rule_prefix: &str, report: &[u8]) -> Result<Scan, String> {
    let report: Report = serde_json::from_slice(report)
        .map_err(|e| format!("the report is not Opengrep JSON: {e}"))?;
    let mut scan = Scan {
        scanned: report.paths.scanned.as_ref().map(Vec::len),
        ..Scan::default()
    };
    for e in &report.errors {
        let text = e
            .get("message")
            .and_then(serde_json::Value::as_str)
            .map_or_else(|| e.to_string(), str::to_owned);
        let level = e
            .get("level")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("error");
        scan.incomplete
            .push(format!("{level}: {}", first_line(&text, 300)));
    }
    // Occurrences are counted in file order per rule, path and matched text.
    let mut matches = report.results;
    matches.sort_by(|a, b| {
        (&a.path, a.start.line, a.start.col).cmp(&(&b.path, b.start.line, b.start.col))
    });
    let mut seen: std::collections::HashMap<Identity, u32> = std::collections::HashMap::new();
    for mut m in matches {
        if let Some(rest) = m.check_id.strip_prefix(rule_prefix)
            && !rest.is_empty()
        {
            m.check_id = rest.to_owned();
        }
        let path = match workspace_path(workspace, &m.path) {
            Ok(p) => p,
            Err(why) => {
                scan.notes
                    .push(format!("a result of {} skipped: {why}", m.check_id));
                continue;
            }
        };
        // Semgrep without a login prints "requires login" for the matched lines: then the
        // identity is the rule, path and occurrence alone.
        let text = if m.extra.lines == "requires login" {
            ""
        } else {
            m.extra.lines.as_str()
        };
        let base = Identity::new("opengrep", &m.check_id, &path, text, 0);
        let occurrence = seen.entry(base.clone()).or_insert(0);
        let identity = Identity {
            occurrence: *occurrence,
            ..base
        };
        *occurrence += 1;
        if m.extra.is_ignored {
            scan.notes.push(format!(
                "{path}:{}: a suppression comment asks to ignore {}; recorded anyway",
                m.start.line, m.check_id
            ));
        }
        let alias = m
            .extra
            .fingerprint
            .filter(|f| !f.is_empty() && f != "requires login")
            .map(|f| format!("opengrep:{f}"));
        scan.sightings.push(Sighting {
            identity,
            alias,
            title: first_line(&m.extra.message, 120),
            message: m.extra.message.clone(),
            location: Location {
                path,
                start_line: m.start.line.max(1),
                start_column: m.start.col,
                end_line: m.end.map(|e| e.line),
                end_column: m.end.and_then(|e| e.col),
            },
            level: level(&m.extra.severity),
            cvss: None,
        });
    }
    Ok(scan)
}

/// The argument vector of a scan of `targets` with `rules`.
#[must_use]
pub fn argv(rules: &Path, targets: &[String]) -> Vec<String> {
    let mut v: Vec<String> = [
        "scan",
        "--config",
        &rules.to_string_lossy(),
        "--json",
        "--disable-nosem",
        "--metrics=off",
        "--disable-version-check",
        "--quiet",
        "--",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    v.extend(targets.iter().cloned());
    v
}

/// Runs the configured Opengrep under its pin on `paths` (default the workspace).
pub(crate) fn run(
    sandbox: &Sandbox,
    settings: &ScannerConfig,
    paths: Option<&[String]>,
    ctx: &Context<'_>,
) -> Result<Scan, Answer> {
    let Some(rules_setting) = &settings.rules else {
        return Err(Answer::could_not_run(
            "opengrep has no `rules` in [security.scanners.opengrep]: the operator chooses the \
             rules (a local file or directory)"
                .to_owned(),
        ));
    };
    let targets = targets(paths)?;
    // Canonical: Semgrep skips rules below a directory whose name starts with `.`, `..`
    // included.
    let rules = std::fs::canonicalize(&rules_setting.value).map_err(|e| {
        Answer::could_not_run(format!(
            "{}: security.scanners.opengrep.rules: `{}` cannot be used: {e}",
            rules_setting.origin,
            rules_setting.value.display()
        ))
    })?;
    let binary = granted(sandbox, "opengrep", settings)?;
    let timeout = settings
        .timeout_seconds
        .as_ref()
        .map_or(DEFAULT_TIMEOUT, |t| Duration::from_secs(t.value));
    scan_with(sandbox, &binary, &rules, &targets, timeout, ctx)
}

/// The targets, each a workspace-relative path (default `.`).
fn targets(paths: Option<&[String]>) -> Result<Vec<String>, Answer> {
    match paths {
        None => Ok(vec![".".to_owned()]),
        Some([]) => Err(Answer::could_not_run(
            "bad arguments for `scan`: `paths` is empty (leave it out to scan the workspace)"
                .to_owned(),
        )),
        Some(list) => list
            .iter()
            .map(|p| {
                if p.trim() == "." {
                    return Ok(".".to_owned());
                }
                crate::findings::relative_path(p).map_err(|e| {
                    Answer::could_not_run(format!("bad arguments for `scan`: `paths`: {e}"))
                })
            })
            .collect(),
    }
}

/// Runs `binary` — which the caller has checked against the session's pins ([`super::pinned`])
/// — with `rules` (a canonical local path) on `targets`: the scan without the pin check.
///
/// # Errors
/// The answer for a scan that did not finish or whose report is unusable.
pub fn scan_with(
    sandbox: &Sandbox,
    binary: &Path,
    rules: &Path,
    targets: &[String],
    timeout: Duration,
    ctx: &Context<'_>,
) -> Result<Scan, Answer> {
    let spec = sandbox.command(binary).args(argv(rules, targets));
    let run = sandbox
        .run_until(&spec, None, timeout, super::REPORT_CAP, ctx.stop)
        .map_err(|e| Answer::from_sandbox_error("opengrep", e))?;
    if let Some(a) = unfinished("opengrep", &run, timeout) {
        return Err(a);
    }
    let code = run.exit_code();
    let with_denials = |a: Answer| Answer {
        permission_error: !run.denials.is_empty(),
        denials: run.denials.clone(),
        ..a
    };
    if code > 1 {
        return Err(with_denials(failed(format!(
            "opengrep exited with status {code} ({}); nothing was recorded\n{}",
            exit_meaning(code),
            tail(&run.stderr.bytes, 15)
        ))));
    }
    parse(sandbox.workspace(), &rule_prefix(rules), &run.stdout.bytes).map_err(|why| {
        with_denials(failed(format!(
            "opengrep exited with status {code} and {why}; nothing was recorded\n{}",
            tail(&run.stderr.bytes, 10)
        )))
    })
}
