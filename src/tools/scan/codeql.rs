//! The CodeQL adapter: the bundle's own `codeql` CLI under its pin.
//!
//! 1. The language is checked by name first: databases are built only with
//!    `--build-mode=none`, which analyses [`LANGUAGES`]; any other is declined, named.
//! 2. `codeql version --format=json` must report the configured `bundle_version`; a mismatch
//!    (or no version configured) is an explicit unavailability, before anything is analysed.
//! 3. `codeql database create .bee-scan/codeql-db-LANG --language=LANG --build-mode=none
//!    --source-root=. --overwrite`, then `codeql database analyze … --format=sarif-latest
//!    --output=/dev/stdout` with the bundle's default suite for the language.
//!
//! All three steps share one wall-clock limit of bee's own (`timeout_seconds`, default 30
//! minutes). The SARIF is parsed into sightings; CodeQL's `primaryLocationLineHash` is kept
//! as the finding's alias.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Scan, failed, first_line, granted, tail, unfinished, workspace_path};
use crate::config::ScannerConfig;
use crate::findings::{Identity, Level, Location, Sighting};
use crate::sandbox::Sandbox;
use crate::tools::{Answer, Context};

/// The languages CodeQL analyses with `--build-mode=none`.
pub const LANGUAGES: [&str; 6] = ["actions", "csharp", "java", "javascript", "python", "ruby"];

/// The default wall-clock limit of one scan (every step).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// How long `codeql version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(60);

/// The language CodeQL calls `name`, or why it is declined.
///
/// # Errors
/// A language CodeQL cannot analyse without a build, or does not know.
pub fn language(name: &str) -> Result<&'static str, String> {
    let lower = name.trim().to_ascii_lowercase();
    let canonical = match lower.as_str() {
        "typescript" | "javascript-typescript" | "js" | "ts" => "javascript",
        "c#" | "cs" => "csharp",
        "py" => "python",
        "rb" => "ruby",
        "github-actions" => "actions",
        other => other,
    };
    if let Some(l) = LANGUAGES.iter().find(|l| **l == canonical) {
        return Ok(l);
    }
    let why = match canonical {
        "c" | "cpp" | "c++" | "c-cpp" | "go" | "swift" | "kotlin" | "java-kotlin" | "rust" => {
            "bee builds CodeQL databases only with --build-mode=none, and this language needs a \
             build (or is not analysable without one)"
        }
        _ => "CodeQL has no such language",
    };
    Err(format!(
        "codeql cannot analyse `{name}`: {why}; the languages are {}",
        LANGUAGES.join(", ")
    ))
}

/// The version `codeql version --format=json` reports.
///
/// # Errors
/// When the output is not that JSON.
pub fn reported_version(output: &[u8]) -> Result<String, String> {
    let v: serde_json::Value = serde_json::from_slice(output)
        .map_err(|e| format!("`codeql version --format=json` did not print JSON: {e}"))?;
    v.get("version")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| "`codeql version --format=json` printed no `version`".to_owned())
}

fn text_of(v: Option<&serde_json::Value>) -> Option<&str> {
    v?.get("text")?.as_str()
}

fn level_of(s: &str) -> Level {
    match s {
        "error" => Level::Error,
        "note" => Level::Note,
        "none" => Level::None,
        _ => Level::Warning,
    }
}

/// Parses a CodeQL SARIF log of a database made from `workspace`.
///
/// # Errors
/// What is wrong with the log.
pub fn parse(workspace: &Path, sarif: &[u8]) -> Result<Scan, String> {
    let log: serde_json::Value =
        serde_json::from_slice(sarif).map_err(|e| format!("the report is not JSON: {e}"))?;
    let runs = log
        .get("runs")
        .and_then(serde_json::Value::as_array)
        .ok_or("the report is not SARIF: it has no `runs` array")?;
    let mut scan = Scan::default();
    let mut seen: std::collections::HashMap<Identity, u32> = std::collections::HashMap::new();
    for (r, run) in runs.iter().enumerate() {
        let results = run
            .get("results")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| format!("the report is not SARIF: run {r} has no `results` array"))?;
        let rules = run
            .pointer("/tool/driver/rules")
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default();
        for note in run
            .pointer("/invocations/0/toolExecutionNotifications")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
        {
            if note.get("level").and_then(serde_json::Value::as_str) == Some("error") {
                let text = text_of(note.get("message")).unwrap_or("(no message)");
                scan.incomplete.push(first_line(text, 300));
            }
        }
        for (i, res) in results.iter().enumerate() {
            let rule_index = res
                .get("ruleIndex")
                .and_then(serde_json::Value::as_u64)
                .and_then(|i| usize::try_from(i).ok());
            let rule = rule_index.and_then(|i| rules.get(i));
            let Some(rule_id) = res
                .get("ruleId")
                .and_then(serde_json::Value::as_str)
                .or_else(|| rule?.get("id")?.as_str())
            else {
                scan.incomplete
                    .push(format!("run {r} result {i} names no rule; skipped"));
                continue;
            };
            let message = text_of(res.get("message")).unwrap_or("").to_owned();
            let Some(physical) = res.pointer("/locations/0/physicalLocation") else {
                scan.incomplete.push(format!(
                    "run {r} result {i} ({rule_id}) has no location; skipped"
                ));
                continue;
            };
            let Some(uri) = physical
                .pointer("/artifactLocation/uri")
                .and_then(serde_json::Value::as_str)
            else {
                scan.incomplete.push(format!(
                    "run {r} result {i} ({rule_id}) has no file; skipped"
                ));
                continue;
            };
            let uri = uri.strip_prefix("file://").unwrap_or(uri);
            let path = match workspace_path(workspace, uri) {
                Ok(p) => p,
                Err(why) => {
                    scan.notes
                        .push(format!("a result of {rule_id} skipped: {why}"));
                    continue;
                }
            };
            let region = physical.get("region");
            let num = |k: &str| {
                region
                    .and_then(|r| r.get(k))
                    .and_then(serde_json::Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
            };
            let snippet = text_of(region.and_then(|r| r.get("snippet")))
                .or_else(|| text_of(physical.pointer("/contextRegion/snippet")));
            let level = res
                .get("level")
                .and_then(serde_json::Value::as_str)
                .or_else(|| rule?.pointer("/defaultConfiguration/level")?.as_str())
                .map_or(Level::Warning, level_of);
            let base = Identity::new("codeql", rule_id, &path, snippet.unwrap_or(&message), 0);
            let occurrence = seen.entry(base.clone()).or_insert(0);
            let identity = Identity {
                occurrence: *occurrence,
                ..base
            };
            *occurrence += 1;
            let title = rule
                .and_then(|r| text_of(r.get("shortDescription")))
                .map_or_else(|| first_line(&message, 120), |t| first_line(t, 120));
            scan.sightings.push(Sighting {
                identity,
                alias: res
                    .pointer("/partialFingerprints/primaryLocationLineHash")
                    .and_then(serde_json::Value::as_str)
                    .map(|h| format!("codeql:{rule_id}:{path}:{h}")),
                title,
                message,
                location: Location {
                    path,
                    start_line: num("startLine").unwrap_or(1),
                    start_column: num("startColumn"),
                    end_line: num("endLine"),
                    end_column: num("endColumn"),
                },
                level,
                cvss: None,
            });
        }
    }
    Ok(scan)
}

/// Runs the configured CodeQL on the workspace for `language`.
pub(crate) fn run(
    sandbox: &Sandbox,
    settings: &ScannerConfig,
    language_arg: Option<&str>,
    ctx: &Context<'_>,
) -> Result<Scan, Answer> {
    let Some(name) = language_arg else {
        return Err(Answer::could_not_run(format!(
            "bad arguments for `scan`: codeql needs a `language` ({})",
            LANGUAGES.join(", ")
        )));
    };
    let language = language(name).map_err(Answer::could_not_run)?;
    let Some(version) = &settings.bundle_version else {
        return Err(Answer::could_not_run(
            "codeql has no `bundle_version` in [security.scanners.codeql]: bee runs only the \
             bundle the operator names (e.g. bundle_version = \"2.26.1\")"
                .to_owned(),
        ));
    };
    let binary = granted(sandbox, "codeql", settings)?;
    let timeout = settings
        .timeout_seconds
        .as_ref()
        .map_or(DEFAULT_TIMEOUT, |t| Duration::from_secs(t.value));
    scan_with(sandbox, &binary, &version.value, language, timeout, ctx)
}

/// One step of the scan: `codeql ARGS` within what is left of the limit; its output, or the
/// answer that stops the scan.
fn step(
    sandbox: &Sandbox,
    binary: &Path,
    args: &[&str],
    deadline: Instant,
    limit: Duration,
    ctx: &Context<'_>,
) -> Result<Vec<u8>, Answer> {
    let what = format!(
        "`codeql {}`",
        args.iter().take(2).copied().collect::<Vec<_>>().join(" ")
    );
    let left = deadline.saturating_duration_since(Instant::now());
    let spec = sandbox.command(binary).args(args);
    let run = sandbox
        .run_until(&spec, None, left, super::REPORT_CAP, ctx.stop)
        .map_err(|e| Answer::from_sandbox_error("codeql", e))?;
    if let Some(a) = unfinished(&what, &run, limit) {
        return Err(a);
    }
    if run.exit_code() != 0 {
        return Err(Answer {
            permission_error: !run.denials.is_empty(),
            denials: run.denials.clone(),
            ..failed(format!(
                "{what} exited with status {}; nothing was recorded\n{}",
                run.exit_code(),
                tail(&run.stderr.bytes, 15)
            ))
        });
    }
    Ok(run.stdout.bytes)
}

/// Runs `binary` — which the caller has checked against the session's pins ([`super::pinned`])
/// — for `language` (one of [`LANGUAGES`]): the version check, the database, the analysis.
///
/// # Errors
/// The answer for a version mismatch, a step that failed or timed out, an unusable report.
pub fn scan_with(
    sandbox: &Sandbox,
    binary: &Path,
    bundle_version: &str,
    language: &str,
    timeout: Duration,
    ctx: &Context<'_>,
) -> Result<Scan, Answer> {
    let deadline = Instant::now() + timeout;
    let out = step(
        sandbox,
        binary,
        &["version", "--format=json"],
        deadline.min(Instant::now() + VERSION_TIMEOUT),
        timeout.min(VERSION_TIMEOUT),
        ctx,
    )?;
    let reported = reported_version(&out).map_err(Answer::could_not_run)?;
    if reported != bundle_version {
        return Err(Answer::could_not_run(format!(
            "codeql is unavailable: the binary is CodeQL {reported}, and the configuration names \
             bundle {bundle_version} (security.scanners.codeql.bundle_version); nothing was \
             analysed"
        )));
    }
    let db = format!(".bee-scan/codeql-db-{language}");
    let lang = format!("--language={language}");
    step(
        sandbox,
        binary,
        &[
            "database",
            "create",
            &db,
            &lang,
            "--build-mode=none",
            "--source-root=.",
            "--overwrite",
        ],
        deadline,
        timeout,
        ctx,
    )?;
    let sarif = step(
        sandbox,
        binary,
        &[
            "database",
            "analyze",
            &db,
            "--format=sarif-latest",
            "--output=/dev/stdout",
        ],
        deadline,
        timeout,
        ctx,
    )?;
    parse(sandbox.workspace(), &sarif).map_err(|why| {
        failed(format!(
            "`codeql database analyze` finished and {why}; nothing was recorded"
        ))
    })
}
