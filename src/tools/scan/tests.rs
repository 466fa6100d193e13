//! The scanner adapters against stand-in executables (shell scripts that print recorded
//! reports), in host-mode sandboxes; the pin check against compiled policies.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bee_core::{CompileOptions, CompiledPolicy, compile_str};

use super::*;
use crate::findings::{Ledger, Level};
use crate::sandbox::{SandboxConfig, SandboxMode};
use crate::tools::ToolLimits;

const SEMGREP_JSON: &str =
    include_str!("../../../tests/fixtures/findings/opengrep/semgrep-1.185.0.json");
const CODEQL_SARIF: &str = include_str!("../../../tests/fixtures/findings/codeql-valid.sarif");

fn ok<T, E: std::fmt::Debug>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| unreachable!("{e:?}"))
}

/// Writes an executable shell script `dir/name` (a new file each time) running `body`.
///
/// The executable itself is written by `install(1)`, not by this process: a descriptor
/// open for writing here could be inherited by a child another test thread forks at that
/// moment, and while that child lives, executing the script fails with `ETXTBSY`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    let source = dir.join(format!(".{name}.source"));
    ok(std::fs::write(&source, format!("#!/bin/sh\n{body}\n")));
    let installed = ok(std::process::Command::new("install")
        .args(["-m", "0755"])
        .arg(&source)
        .arg(&p)
        .status());
    assert!(installed.success(), "install {}: {installed}", p.display());
    p
}

fn policy(dir: &Path, exec: &str) -> CompiledPolicy {
    let text = format!("version = 1\n[exec]\nallow = [{exec}]\n");
    let options = CompileOptions {
        base: dir.to_owned(),
        home: None,
    };
    ok(compile_str("scan.toml", &text, &options)).policy
}

fn host(ws: &Path) -> Sandbox {
    ok(Sandbox::new(SandboxConfig::new(SandboxMode::Host, ws)))
}

fn ctx_with<'a>(limits: &'a ToolLimits, stop: &'a (dyn Fn() -> bool + Sync)) -> Context<'a> {
    Context {
        sandbox: None,
        limits,
        stop,
    }
}

fn err(r: Result<Scan, Answer>) -> Answer {
    match r {
        Ok(s) => unreachable!("scanned: {s:?}"),
        Err(a) => a,
    }
}

#[test]
fn only_a_pinned_unchanged_binary_is_granted() {
    let t = ok(tempfile::tempdir());
    let dir = ok(std::fs::canonicalize(t.path()));
    let og = script(&dir, "opengrep", "exit 0");
    let pinned_policy = policy(&dir, &format!("\"!{}\"", og.display()));
    assert_eq!(ok(pinned(Some(&pinned_policy), &og)), og);

    let e = pinned(None, &og).unwrap_err();
    assert!(e.contains("no policy (--host)"), "{e}");
    let unpinned = policy(&dir, &format!("\"{}\"", og.display()));
    let e = pinned(Some(&unpinned), &og).unwrap_err();
    assert!(
        e.contains(&format!("add \"!{}\" to exec.allow", og.display())),
        "{e}"
    );
    let e = pinned(Some(&pinned_policy), &dir.join("missing")).unwrap_err();
    assert!(e.contains("cannot be found"), "{e}");

    // Substituted by rename: same path, another inode.
    let other = script(&dir, "evil", "exit 0");
    ok(std::fs::rename(&other, &og));
    let e = pinned(Some(&pinned_policy), &og).unwrap_err();
    assert!(e.contains("is not the file the policy pinned"), "{e}");
    assert!(e.contains("replaced after the policy was compiled"), "{e}");
}

#[test]
fn the_tool_refuses_in_host_mode_and_without_configuration() {
    let t = ok(tempfile::tempdir());
    let ws = ok(std::fs::canonicalize(t.path()));
    let og = script(&ws, "opengrep", "exit 0");
    let rec = Arc::new(Recorder::new(Ledger::in_project(&ws), None));
    let settings = ScannerConfig {
        path: Some(crate::config::Sourced::default(og)),
        rules: Some(crate::config::Sourced::default(ws.clone())),
        ..ScannerConfig::default()
    };
    let tool = ScanTool::new(Some(settings), None, rec);
    let sb = host(&ws);
    let limits = ToolLimits::default();
    let ctx = Context {
        sandbox: Some(&sb),
        ..ctx_with(&limits, &|| false)
    };
    let a = tool.call(&json!({"scanner": "opengrep"}), &ctx);
    assert_eq!(a.state, ToolState::CouldNotRun);
    assert!(a.body.contains("no policy (--host)"), "{}", a.body);
    let a = tool.call(&json!({"scanner": "codeql", "language": "python"}), &ctx);
    assert_eq!(a.state, ToolState::CouldNotRun);
    assert!(a.body.contains("codeql is not configured"), "{}", a.body);
    let a = tool.call(
        &json!({"scanner": "opengrep", "flags": ["--config", "auto"]}),
        &ctx,
    );
    assert_eq!(a.state, ToolState::CouldNotRun);
    assert!(a.body.contains("unknown field `flags`"), "{}", a.body);
    let a = tool.call(&json!({"scanner": "opengrep", "paths": ["../etc"]}), &ctx);
    assert!(a.body.contains(".."), "{}", a.body);
    let missing = ScanTool::new(
        Some(ScannerConfig {
            rules: Some(crate::config::Sourced::default(ws.join("no-rules"))),
            ..ScannerConfig::default()
        }),
        None,
        Arc::new(Recorder::new(Ledger::in_project(&ws), None)),
    );
    let a = missing.call(&json!({"scanner": "opengrep"}), &ctx);
    assert_eq!(a.state, ToolState::CouldNotRun);
    assert!(
        a.body.contains("security.scanners.opengrep.rules: `"),
        "{}",
        a.body
    );
    assert!(a.body.contains("No such file"), "{}", a.body);
    assert!(
        tool.definition()
            .description
            .contains("Configured scanners: opengrep.")
    );
    ok(sb.finish());
}

#[test]
fn recorded_semgrep_json_parses_with_the_rules_prefix_stripped() {
    let ws = Path::new("/work/ws");
    let scan = ok(opengrep::parse(
        ws,
        "tmp.sgt.rules.",
        SEMGREP_JSON.as_bytes(),
    ));
    assert_eq!(scan.scanned, Some(1));
    assert!(scan.incomplete.is_empty());
    let got: Vec<(String, u32, u32, Level)> = scan
        .sightings
        .iter()
        .map(|s| {
            (
                s.identity.rule.clone(),
                s.location.start_line,
                s.identity.occurrence,
                s.level,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("python-eval-of-input".to_owned(), 6, 0, Level::Error),
            ("python-sql-format".to_owned(), 15, 0, Level::Warning),
            // Semgrep without a login hides the matched lines: the occurrence tells them apart.
            ("python-eval-of-input".to_owned(), 21, 1, Level::Error),
        ]
    );
    assert!(scan.sightings.iter().all(|s| s.alias.is_none()));
    assert_eq!(
        opengrep::rule_prefix(Path::new("/tmp/sgt/rules/python.yaml")),
        "tmp.sgt.rules."
    );
}

#[test]
fn opengrep_lines_and_fingerprints_make_the_identity_and_alias() {
    let mut v: serde_json::Value = ok(serde_json::from_str(SEMGREP_JSON));
    // Opengrep has no login gate: it prints the lines and a fingerprint.
    for (i, r) in ok(v["results"].as_array_mut().ok_or("results"))
        .iter_mut()
        .enumerate()
    {
        r["extra"]["lines"] = json!(format!("    return eval(expression_{i})"));
        r["extra"]["fingerprint"] = json!(format!("{i:0>32}"));
        r["path"] = json!(format!("/work/ws/./app/views.py"));
    }
    v["results"][0]["path"] = json!("/elsewhere/x.py");
    let scan = ok(opengrep::parse(
        Path::new("/work/ws"),
        "",
        v.to_string().as_bytes(),
    ));
    assert_eq!(scan.sightings.len(), 2);
    assert!(
        scan.notes[0].contains("outside the workspace"),
        "{:?}",
        scan.notes
    );
    assert_eq!(scan.sightings[0].identity.path, "app/views.py");
    assert_eq!(scan.sightings[0].identity.occurrence, 0);
    assert_eq!(
        scan.sightings[0].alias.as_deref(),
        Some("opengrep:00000000000000000000000000000001")
    );
}

fn opengrep_stand_in(dir: &Path, body: &str) -> PathBuf {
    script(dir, "opengrep", body)
}

#[test]
fn the_opengrep_adapter_runs_a_stand_in_and_maps_its_exits() {
    let t = ok(tempfile::tempdir());
    let ws = ok(std::fs::canonicalize(t.path()));
    let bin = ok(tempfile::tempdir());
    let bin = ok(std::fs::canonicalize(bin.path()));
    let report = bin.join("report.json");
    ok(std::fs::write(&report, SEMGREP_JSON));
    let rules = bin.join("rules");
    ok(std::fs::create_dir(&rules));
    let args = bin.join("argv");
    let sb = host(&ws);
    let limits = ToolLimits::default();
    let ctx = Context {
        sandbox: Some(&sb),
        ..ctx_with(&limits, &|| false)
    };
    let targets = vec!["app".to_owned(), "--config=auto".to_owned()];
    let run = |body: &str, timeout: Duration| {
        let og = opengrep_stand_in(&bin, body);
        opengrep::scan_with(&sb, &og, &rules, &targets, timeout, &ctx)
    };
    let scan = ok(run(
        &format!(
            "printf '%s\\n' \"$@\" > {}; cat {}",
            args.display(),
            report.display()
        ),
        Duration::from_secs(30),
    ));
    assert_eq!(scan.sightings.len(), 3);
    let argv = ok(std::fs::read_to_string(&args));
    let expected = format!(
        "scan\n--config\n{}\n--json\n--disable-nosem\n--metrics=off\n--disable-version-check\n--quiet\n--\napp\n--config=auto\n",
        rules.display()
    );
    assert_eq!(argv, expected);

    let a = err(run(
        "echo 'rules: oops' >&2; exit 7",
        Duration::from_secs(30),
    ));
    assert_eq!(a.state, ToolState::Failed, "{}", a.body);
    assert!(
        a.body.contains("status 7 (rules it could not read"),
        "{}",
        a.body
    );
    assert!(a.body.contains("rules: oops"), "{}", a.body);
    let a = err(run(
        "echo 'Fatal error' >&2; exit 2",
        Duration::from_secs(30),
    ));
    assert!(a.body.contains("status 2 (a fatal error)"), "{}", a.body);
    let a = err(run(
        "echo '{\"results\": [' ; exit 0",
        Duration::from_secs(30),
    ));
    assert_eq!(a.state, ToolState::Failed, "{}", a.body);
    assert!(a.body.contains("not Opengrep JSON"), "{}", a.body);
    let a = err(run(
        &format!("head -c {} /dev/zero", REPORT_CAP + 1),
        Duration::from_secs(60),
    ));
    assert_eq!(a.state, ToolState::Failed, "{}", a.body);
    assert!(a.body.contains("over bee's limit"), "{}", a.body);
    // Last: once a timeout has written the scope's `cgroup.kill`, some kernels (6.18 here)
    // kill every later `clone3(CLONE_INTO_CGROUP)` child of that scope at birth — a defect
    // below the adapter, reported separately.
    let a = err(run("exec sleep 30", Duration::from_millis(300)));
    assert_eq!(a.state, ToolState::Failed, "{}", a.body);
    assert!(
        a.body.contains("did not finish within bee's limit"),
        "{}",
        a.body
    );
    ok(sb.finish());
}

#[test]
fn scanning_nothing_is_not_finding_nothing() {
    let t = ok(tempfile::tempdir());
    let ws = ok(std::fs::canonicalize(t.path()));
    let rec = Arc::new(Recorder::new(Ledger::in_project(&ws), None).with_run("r1"));
    let tool = ScanTool::new(None, None, Arc::clone(&rec));
    let limits = ToolLimits::default();
    let ctx = ctx_with(&limits, &|| false);
    let empty = ok(opengrep::parse(
        &ws,
        "",
        br#"{"results": [], "errors": [], "paths": {"scanned": []}}"#,
    ));
    let a = tool.report("opengrep", empty, &ctx);
    assert_eq!(a.state, ToolState::Failed, "{}", a.body);
    assert!(a.body.contains("scanned no file"), "{}", a.body);
    let partial = ok(opengrep::parse(
        &ws,
        "",
        br#"{"results": [], "errors": [{"level": "warn", "message": "Syntax error at line app.py:3"}], "paths": {"scanned": ["app.py"]}}"#,
    ));
    let a = tool.report("opengrep", partial, &ctx);
    assert_eq!(a.state, ToolState::Completed);
    assert!(
        a.body
            .starts_with("INCOMPLETE: opengrep reported 1 problem(s)"),
        "{}",
        a.body
    );
    assert!(
        a.body.contains("no results in 1 file(s) scanned"),
        "{}",
        a.body
    );

    // Results are recorded, and a second scan merges.
    let scan = ok(opengrep::parse(
        &ws,
        "tmp.sgt.rules.",
        SEMGREP_JSON.as_bytes(),
    ));
    let a = tool.report("opengrep", scan.clone(), &ctx);
    assert!(
        a.body
            .contains("3 result(s) in 1 file(s) scanned: 3 new finding(s)"),
        "{}",
        a.body
    );
    let a = tool.report("opengrep", scan, &ctx);
    assert!(
        a.body.contains("0 new finding(s), 3 already in the ledger"),
        "{}",
        a.body
    );
    assert_eq!(ok(rec.ledger.read()).findings.findings.len(), 3);
}

fn codeql_stand_in(dir: &Path, version: &str, log: &Path, sarif: &Path) -> PathBuf {
    script(
        dir,
        "codeql",
        &format!(
            r#"echo "$@" >> {log}
case "$1 $2" in
  "version --format=json") printf '{{"productName":"CodeQL","vendor":"GitHub","version":"{version}","sha":"0123abcd","branches":["codeql-cli-{version}"],"copyright":"Copyright (C) 2019-2026 GitHub, Inc.","unpackedLocation":"/opt/codeql","configFileLocation":"/root/.config/codeql/config","configFileFound":false,"features":{{"analysisSummaryV2":true}}}}\n' ;;
  "database create") mkdir -p "$3" ;;
  "database analyze") for a in "$@"; do case "$a" in --output=*) cat {sarif} > "${{a#--output=}}" ;; esac; done ;;
  *) echo "unexpected: $*" >&2; exit 2 ;;
esac"#,
            log = log.display(),
            sarif = sarif.display()
        ),
    )
}

#[test]
fn the_codeql_adapter_checks_the_version_then_builds_without_a_build() {
    let t = ok(tempfile::tempdir());
    let ws = ok(std::fs::canonicalize(t.path()));
    let bin = ok(tempfile::tempdir());
    let bin = ok(std::fs::canonicalize(bin.path()));
    let sarif = bin.join("results.sarif");
    ok(std::fs::write(&sarif, CODEQL_SARIF));
    let log = bin.join("log");
    let sb = host(&ws);
    let limits = ToolLimits::default();
    let ctx = Context {
        sandbox: Some(&sb),
        ..ctx_with(&limits, &|| false)
    };
    let codeql = codeql_stand_in(&bin, "2.26.1", &log, &sarif);
    let scan = ok(codeql::scan_with(
        &sb,
        &codeql,
        "2.26.1",
        "javascript",
        Duration::from_secs(60),
        &ctx,
    ));
    let calls = ok(std::fs::read_to_string(&log));
    assert_eq!(
        calls,
        "version --format=json\n\
         database create .bee-scan/codeql-db-javascript --language=javascript --build-mode=none --source-root=. --overwrite\n\
         database analyze .bee-scan/codeql-db-javascript --format=sarif-latest --output=/dev/stdout\n"
    );
    // Both runs of the recorded log: LGTM's and the CodeQL CLI's.
    assert_eq!(scan.sightings.len(), 3);
    let s = &scan.sightings[2];
    assert_eq!(s.identity.rule, "js/inconsistent-use-of-new");
    assert_eq!(s.location.path, "src/promiseUtils.js");
    assert_eq!(s.level, Level::Note);
    assert_eq!(
        s.alias.as_deref(),
        Some("codeql:js/inconsistent-use-of-new:src/promiseUtils.js:5061c3315a741b7d:1")
    );
    assert_eq!(s.title, "Inconsistent use of 'new'");
    // The same unused variable in both runs is one identity, twice: occurrences 0 and 1.
    assert_eq!(scan.sightings[0].identity.occurrence, 0);
    assert_eq!(scan.sightings[1].identity.occurrence, 1);

    // A mismatch is an explicit unavailability, before any database is built.
    ok(std::fs::write(&log, ""));
    let a = err(codeql::scan_with(
        &sb,
        &codeql,
        "2.25.0",
        "python",
        Duration::from_secs(60),
        &ctx,
    ));
    assert_eq!(a.state, ToolState::CouldNotRun);
    assert!(a.body.contains("the binary is CodeQL 2.26.1"), "{}", a.body);
    assert!(a.body.contains("bundle 2.25.0"), "{}", a.body);
    assert_eq!(ok(std::fs::read_to_string(&log)), "version --format=json\n");

    // Invalid SARIF.
    ok(std::fs::write(
        &sarif,
        r#"{"version": "2.1.0", "runs": [{"results": 42}]}"#,
    ));
    let a = err(codeql::scan_with(
        &sb,
        &codeql,
        "2.26.1",
        "python",
        Duration::from_secs(60),
        &ctx,
    ));
    assert_eq!(a.state, ToolState::Failed, "{}", a.body);
    assert!(a.body.contains("no `results` array"), "{}", a.body);

    // A hung analysis meets bee's own limit (last: see the Opengrep test).
    let slow = script(
        &bin,
        "codeql-slow",
        r#"case "$1" in version) printf '{"version":"2.26.1"}' ;; *) exec sleep 30 ;; esac"#,
    );
    let a = err(codeql::scan_with(
        &sb,
        &slow,
        "2.26.1",
        "python",
        Duration::from_millis(500),
        &ctx,
    ));
    assert_eq!(a.state, ToolState::Failed, "{}", a.body);
    assert!(
        a.body.contains("`codeql database create` did not finish"),
        "{}",
        a.body
    );

    ok(sb.finish());
}

#[test]
fn codeql_languages_are_declined_by_name() {
    assert_eq!(codeql::language("TypeScript"), Ok("javascript"));
    assert_eq!(codeql::language("python"), Ok("python"));
    assert_eq!(codeql::language("c#"), Ok("csharp"));
    for l in ["cpp", "go", "swift", "rust", "kotlin"] {
        let e = codeql::language(l).unwrap_err();
        assert!(e.contains(&format!("cannot analyse `{l}`")), "{e}");
        assert!(e.contains("--build-mode=none"), "{e}");
    }
    assert!(
        codeql::language("cobol")
            .unwrap_err()
            .contains("no such language")
    );
    assert!(codeql::reported_version(b"CodeQL 2.26.1").is_err());
    assert_eq!(
        ok(codeql::reported_version(
            br#"{"productName":"CodeQL","version":"2.26.1"}"#
        )),
        "2.26.1"
    );
}

#[test]
fn a_declined_language_never_runs_the_binary() {
    let t = ok(tempfile::tempdir());
    let ws = ok(std::fs::canonicalize(t.path()));
    let rec = Arc::new(Recorder::new(Ledger::in_project(&ws), None));
    let settings = ScannerConfig {
        path: Some(crate::config::Sourced::default(ws.join("codeql"))),
        bundle_version: Some(crate::config::Sourced::default("2.26.1".to_owned())),
        ..ScannerConfig::default()
    };
    let tool = ScanTool::new(None, Some(settings), rec);
    let sb = host(&ws);
    let limits = ToolLimits::default();
    let ctx = Context {
        sandbox: Some(&sb),
        ..ctx_with(&limits, &|| false)
    };
    let a = tool.call(&json!({"scanner": "codeql", "language": "go"}), &ctx);
    assert_eq!(a.state, ToolState::CouldNotRun);
    assert!(a.body.contains("cannot analyse `go`"), "{}", a.body);
    let a = tool.call(&json!({"scanner": "codeql"}), &ctx);
    assert!(a.body.contains("needs a `language`"), "{}", a.body);
    ok(sb.finish());
}

#[test]
fn scanner_findings_export_to_a_valid_sarif_log() {
    let t = ok(tempfile::tempdir());
    let ws = ok(std::fs::canonicalize(t.path()));
    let rec = Recorder::new(Ledger::in_project(&ws), None).with_run("r1");
    let og = ok(opengrep::parse(
        &ws,
        "tmp.sgt.rules.",
        SEMGREP_JSON.as_bytes(),
    ));
    let cq = ok(codeql::parse(&ws, CODEQL_SARIF.as_bytes()));
    ok(rec.record(&og.sightings, "opengrep"));
    ok(rec.record(&cq.sightings, "codeql"));
    let loaded = ok(rec.ledger.read());
    let id = loaded
        .findings
        .findings
        .keys()
        .next()
        .cloned()
        .unwrap_or_default();
    ok(rec
        .ledger
        .adjudicate(&id, crate::findings::Verdict::Fixed, "patched", "bob", None));
    let log = crate::findings::sarif::export(&ok(rec.ledger.read()).findings);
    let schema: serde_json::Value = ok(serde_json::from_str(include_str!(
        "../../../tests/fixtures/findings/sarif-schema-2.1.0.json"
    )));
    let validator = ok(jsonschema::draft4::new(&schema));
    let errors: Vec<String> = validator.iter_errors(&log).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let names: Vec<&str> = log["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["tool"]["driver"]["name"].as_str())
        .collect();
    assert_eq!(names, ["codeql", "opengrep"]);
    // The two runs of the recorded log report one unused variable with one fingerprint: the
    // alias merges them into one finding.
    assert_eq!(log["runs"][0]["results"].as_array().map(Vec::len), Some(2));
}
