//! The `scan` tool end to end in enforced mode with a fake [`Enforcer`] (it installs nothing:
//! the kernel's side is `cargo xtask test`'s): the session's policy pins stand-in scanners,
//! the tool checks the pins, runs them, records their results in the ledger and answers; a
//! substituted binary, a CodeQL version mismatch and a declined language never get that far.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bee::config::{Origin, ScannerConfig, Sourced};
use bee::findings::{Ledger, Recorder};
use bee::provider::ToolCall;
use bee::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use bee::tools::scan::ScanTool;
use bee::tools::{Registry, ToolLimits, ToolOutcome, ToolState};
use bee_core::{CompileOptions, compile_str};
use bee_userspace::plan::EnforcementPlan;
use bee_userspace::scope::{EnforceError, Enforcer, InstallId};
use serde_json::{Value, json};
use support::bee_exe;

const SEMGREP_JSON: &str = include_str!("fixtures/findings/opengrep/semgrep-1.185.0.json");
const CODEQL_SARIF: &str = include_str!("fixtures/findings/codeql-valid.sarif");

#[derive(Debug, Default)]
struct Fake;

impl Enforcer for Fake {
    fn install(
        &self,
        _: &EnforcementPlan,
        cgroup_id: u64,
        _: u32,
    ) -> Result<InstallId, EnforceError> {
        Ok(InstallId(cgroup_id))
    }

    fn uninstall(&self, _: InstallId) -> Result<(), EnforceError> {
        Ok(())
    }

    fn drain_events(&self, _: u64) -> Vec<bee_common::AuditEvent> {
        Vec::new()
    }
}

fn src<T>(value: T) -> Sourced<T> {
    Sourced {
        value,
        origin: Origin::Default,
    }
}

fn ok<T, E: std::fmt::Debug>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| unreachable!("{e:?}"))
}

/// Writes an executable shell script at `path` (a new file each time) running `body`.
///
/// The executable itself is written by `install(1)`, not by this process: a descriptor
/// open for writing here could be inherited by a child another test thread forks at that
/// moment, and while that child lives, executing the script fails with `ETXTBSY`.
fn script(path: &Path, body: &str) {
    let source = path.with_extension("source");
    ok(std::fs::write(&source, format!("#!/bin/sh\n{body}\n")));
    let installed = ok(std::process::Command::new("install")
        .args(["-m", "0755"])
        .arg(&source)
        .arg(path)
        .status());
    assert!(
        installed.success(),
        "install {}: {installed}",
        path.display()
    );
}

struct World {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    ws: PathBuf,
    bin: PathBuf,
}

impl World {
    fn new() -> Self {
        let ws_dir = ok(tempfile::tempdir());
        let bin_dir = ok(tempfile::tempdir());
        let ws = ok(std::fs::canonicalize(ws_dir.path()));
        let bin = ok(std::fs::canonicalize(bin_dir.path()));
        ok(std::fs::write(bin.join("report.json"), SEMGREP_JSON));
        ok(std::fs::write(bin.join("results.sarif"), CODEQL_SARIF));
        ok(std::fs::create_dir(bin.join("rules")));
        script(
            &bin.join("opengrep"),
            &format!("cat {}", bin.join("report.json").display()),
        );
        script(
            &bin.join("codeql"),
            &format!(
                r#"case "$1 $2" in
  "version --format=json") printf '{{"productName":"CodeQL","version":"2.26.1"}}' ;;
  "database create") : ;;
  "database analyze") cat {} ;;
esac"#,
                bin.join("results.sarif").display()
            ),
        );
        Self {
            _dirs: (ws_dir, bin_dir),
            ws,
            bin,
        }
    }

    /// A sandbox whose policy pins both stand-ins (compiled now: the pins are these inodes).
    fn sandbox(&self) -> Sandbox {
        let text = format!(
            "version = 1\n[fs]\nread = [\"./**\", \"{0}/**\"]\n[exec]\nallow = [\"!{0}/opengrep\", \"!{0}/codeql\", \"/bin/**\", \"/usr/**\"]\n",
            self.bin.display()
        );
        let options = CompileOptions {
            base: self.ws.clone(),
            home: None,
        };
        let policy = ok(compile_str("scan.toml", &text, &options)).policy;
        let mode = SandboxMode::Enforced {
            enforcer: Arc::new(Fake),
            policy,
        };
        let mut config = SandboxConfig::new(mode, &self.ws);
        config.runner = Some(bee_exe());
        ok(Sandbox::new(config))
    }

    fn registry(&self) -> Registry {
        let rec = Arc::new(Recorder::new(Ledger::in_project(&self.ws), None).with_run("run-1"));
        let opengrep = ScannerConfig {
            path: Some(src(self.bin.join("opengrep"))),
            rules: Some(src(self.bin.join("rules"))),
            ..ScannerConfig::default()
        };
        let codeql = ScannerConfig {
            path: Some(src(self.bin.join("codeql"))),
            bundle_version: Some(src("2.26.1".to_owned())),
            ..ScannerConfig::default()
        };
        let mut r = Registry::new(ToolLimits::default());
        ok(r.register(Arc::new(ScanTool::new(Some(opengrep), Some(codeql), rec))));
        r
    }
}

fn call(r: &Registry, sb: &Sandbox, args: Value) -> ToolOutcome {
    let call = ToolCall {
        id: "call_1".to_owned(),
        name: "scan".to_owned(),
        arguments: args.to_string(),
    };
    r.call(sb, &call)
}

#[test]
fn pinned_scanners_run_and_their_results_are_recorded() {
    let w = World::new();
    let sb = w.sandbox();
    let r = w.registry();
    let o = call(&r, &sb, json!({"scanner": "opengrep"}));
    assert_eq!(o.state, ToolState::Completed, "{}", o.content);
    assert!(
        o.content
            .starts_with("opengrep: 3 result(s) in 1 file(s) scanned: 3 new finding(s)"),
        "{}",
        o.content
    );
    let o = call(&r, &sb, json!({"scanner": "opengrep", "paths": ["app"]}));
    assert!(
        o.content
            .contains("0 new finding(s), 3 already in the ledger"),
        "{}",
        o.content
    );
    let o = call(
        &r,
        &sb,
        json!({"scanner": "codeql", "language": "javascript"}),
    );
    assert_eq!(o.state, ToolState::Completed, "{}", o.content);
    assert!(o.content.contains("codeql: 3 result(s)"), "{}", o.content);
    let loaded = ok(Ledger::in_project(&w.ws).read());
    assert_eq!(loaded.findings.findings.len(), 5);
    ok(sb.finish());
}

#[test]
fn a_substituted_scanner_is_refused_by_name() {
    let w = World::new();
    let sb = w.sandbox();
    let r = w.registry();
    // Swapped by rename after the policy was compiled: the same path, another inode.
    for name in ["opengrep", "codeql"] {
        let evil = w.bin.join("evil");
        script(&evil, "echo '{\"version\": \"2.26.1\", \"results\": []}'");
        ok(std::fs::rename(&evil, w.bin.join(name)));
    }
    let o = call(&r, &sb, json!({"scanner": "opengrep"}));
    assert_eq!(o.state, ToolState::CouldNotRun, "{}", o.content);
    assert!(
        o.content.contains("is not the file the policy pinned"),
        "{}",
        o.content
    );
    let o = call(&r, &sb, json!({"scanner": "codeql", "language": "python"}));
    assert_eq!(o.state, ToolState::CouldNotRun, "{}", o.content);
    assert!(
        o.content.contains("is not the file the policy pinned"),
        "{}",
        o.content
    );
    assert!(
        !Ledger::in_project(&w.ws).path().exists(),
        "nothing recorded"
    );
    ok(sb.finish());
}

#[test]
fn a_codeql_version_mismatch_and_a_declined_language_are_unavailability() {
    let w = World::new();
    let sb = w.sandbox();
    let rec = Arc::new(Recorder::new(Ledger::in_project(&w.ws), None));
    let codeql = ScannerConfig {
        path: Some(src(w.bin.join("codeql"))),
        bundle_version: Some(src("2.25.0".to_owned())),
        ..ScannerConfig::default()
    };
    let mut r = Registry::new(ToolLimits::default());
    ok(r.register(Arc::new(ScanTool::new(None, Some(codeql), rec))));
    let o = call(&r, &sb, json!({"scanner": "codeql", "language": "python"}));
    assert_eq!(o.state, ToolState::CouldNotRun, "{}", o.content);
    assert!(
        o.content.contains("the binary is CodeQL 2.26.1"),
        "{}",
        o.content
    );
    let o = call(&r, &sb, json!({"scanner": "codeql", "language": "cpp"}));
    assert_eq!(o.state, ToolState::CouldNotRun, "{}", o.content);
    assert!(o.content.contains("cannot analyse `cpp`"), "{}", o.content);
    let o = call(&r, &sb, json!({"scanner": "opengrep"}));
    assert!(
        o.content.contains("opengrep is not configured"),
        "{}",
        o.content
    );
    ok(sb.finish());
}
