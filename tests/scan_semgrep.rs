//! The Opengrep adapter against the real Semgrep CLI (Opengrep's upstream, which speaks the
//! same command line and JSON and is on PyPI), on a small vulnerable fixture with local
//! rules. `BEE_SEMGREP` names the `semgrep` executable, or the tests install the pinned
//! release from PyPI on first use (`support::semgrep_exe`). Without either this test fails: it
//! is never skipped.

mod support;

use std::path::Path;
use std::time::Duration;

use bee::findings::{Ledger, Recorder};
use bee::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use bee::tools::scan::opengrep;
use bee::tools::{Context, ToolLimits};
use support::{copy_dir, semgrep_exe};

fn ok<T, E: std::fmt::Debug>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| unreachable!("{e:?}"))
}

#[test]
fn semgrep_scans_the_fixture_with_suppressions_disabled() {
    let semgrep = semgrep_exe();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/findings/opengrep");
    // Outside the repository: Semgrep scans only the files git tracks in a repository, and
    // skips directories named `tests`.
    let t = ok(tempfile::tempdir());
    let root = ok(std::fs::canonicalize(t.path()));
    copy_dir(&fixture.join("rules"), &root.join("rules"));
    copy_dir(&fixture.join("workspace"), &root.join("ws"));
    let ws = root.join("ws");
    let home = root.join("home");
    ok(std::fs::create_dir(&home));
    let mut config = SandboxConfig::new(SandboxMode::Host, &ws);
    config.env.push(("HOME".into(), home.into_os_string()));
    let sb = ok(Sandbox::new(config));
    let limits = ToolLimits::default();
    let ctx = Context {
        sandbox: Some(&sb),
        limits: &limits,
        stop: &|| false,
    };
    let rules = root.join("rules");
    let scan = opengrep::scan_with(
        &sb,
        &semgrep,
        &rules,
        &[".".to_owned()],
        Duration::from_secs(300),
        &ctx,
    );
    let scan = match scan {
        Ok(s) => s,
        Err(a) => unreachable!("{:?}: {}", a.state, a.body),
    };
    assert_eq!(scan.scanned, Some(1), "{scan:?}");
    assert!(scan.incomplete.is_empty(), "{:?}", scan.incomplete);
    let mut got: Vec<(String, u64)> = scan
        .sightings
        .iter()
        .map(|s| (s.identity.rule.clone(), u64::from(s.location.start_line)))
        .collect();
    got.sort();
    assert_eq!(got, support::scan::semgrep_results());
    assert!(
        scan.sightings
            .iter()
            .all(|s| s.location.path == "app/views.py")
    );

    // Recorded twice: three findings, each seen twice.
    let rec = Recorder::new(Ledger::in_project(&root), None).with_run("r1");
    ok(rec.record(&scan.sightings, "opengrep"));
    let again = ok(opengrep::scan_with(
        &sb,
        &semgrep,
        &rules,
        &["app".to_owned()],
        Duration::from_secs(300),
        &ctx,
    )
    .map_err(|a| a.body));
    ok(rec.record(&again.sightings, "opengrep"));
    let loaded = ok(rec.ledger.read());
    assert_eq!(loaded.findings.findings.len(), 3);
    assert!(loaded.findings.findings.values().all(|f| f.sightings == 2));

    // A rules path that is not there: Semgrep's own exit status, mapped.
    let missing = opengrep::scan_with(
        &sb,
        &semgrep,
        &root.join("no-such-rules"),
        &[".".to_owned()],
        Duration::from_secs(300),
        &ctx,
    );
    match missing {
        Ok(s) => unreachable!("scanned with missing rules: {s:?}"),
        Err(a) => assert!(a.body.contains("opengrep exited with status"), "{}", a.body),
    }
    ok(sb.finish());
}
