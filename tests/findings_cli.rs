//! `bee findings` and the findings tools end to end: a replayed review episode records
//! findings, a second run merges instead of duplicating, `bee findings adjudicate` rules on
//! one, a third run cannot undo it, and `bee findings export --sarif` writes a log that the
//! SARIF 2.1.0 schema validates.

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::{bee_in, code, stderr, stdout};

const SCHEMA: &str = include_str!("fixtures/findings/sarif-schema-2.1.0.json");

fn ok<T, E: std::fmt::Debug>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| unreachable!("{e:?}"))
}

/// `examples/findings`, copied into `dir`: a replayed review that records two findings, then
/// lists the ledger.
fn episode(dir: &Path) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/findings");
    for f in [
        "scenario.toml",
        "provider.toml",
        "recording.jsonl",
        "workspace/app.py",
    ] {
        ok(std::fs::create_dir_all(dir.join(f).parent().unwrap_or(dir)));
        ok(std::fs::copy(example.join(f), dir.join(f)));
    }
}

fn run_episode(dir: &Path) {
    let o = bee_in(
        dir,
        &[
            "run",
            "--host",
            "--scenario",
            "scenario.toml",
            "--provider",
            "provider.toml",
        ],
    );
    assert_eq!(code(&o), 0, "{}\n{}", stdout(&o), stderr(&o));
}

fn list_json(dir: &Path) -> Value {
    let o = bee_in(dir, &["findings", "list", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    ok(serde_json::from_str(&stdout(&o)))
}

fn validate(log: &Value) {
    let schema: Value = ok(serde_json::from_str(SCHEMA));
    let validator = ok(jsonschema::draft4::new(&schema));
    let errors: Vec<String> = validator
        .iter_errors(log)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "the SARIF log is invalid:\n{}",
        errors.join("\n")
    );
}

#[test]
fn review_runs_merge_a_person_rules_and_the_export_validates() {
    let t = ok(tempfile::tempdir());
    let dir = t.path();
    episode(dir);
    run_episode(dir);
    let first = list_json(dir);
    let findings = first["findings"].as_array().cloned().unwrap_or_default();
    assert_eq!(findings.len(), 2, "{first}");
    assert!(findings.iter().all(|f| f["state"] == "open"));

    // Second run: merged, not duplicated.
    run_episode(dir);
    let second = list_json(dir);
    let findings = second["findings"].as_array().cloned().unwrap_or_default();
    assert_eq!(findings.len(), 2, "{second}");
    assert!(findings.iter().all(|f| f["sightings"] == 2), "{second}");
    let sqli = findings
        .iter()
        .find(|f| f["identity"]["rule"] == "sql-injection")
        .cloned()
        .unwrap_or_default();
    let id = sqli["id"].as_str().unwrap_or_default().to_owned();

    // A person rules.
    let o = bee_in(
        dir,
        &[
            "findings",
            "adjudicate",
            &id[..10],
            "--state",
            "false-positive",
            "--note",
            "name is checked against an allow-list upstream",
            "--by",
            "alice",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with(&format!("{id}: false-positive (by alice)")),
        "{}",
        stdout(&o)
    );

    // Third run: the model records it again and is told about the verdict; it stands.
    run_episode(dir);
    let third = list_json(dir);
    let sqli = third["findings"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["id"] == id.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(sqli["state"], "false-positive", "{third}");
    assert_eq!(sqli["sightings"], 3);
    assert_eq!(sqli["seen_since_verdict"], 1);
    let transcript = ok(std::fs::read_dir(dir.join(".bee/records")))
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .flat_map(|e| ok(std::fs::read_dir(e.path())).filter_map(Result::ok))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    assert!(
        transcript.contains("a person ruled it false-positive (alice)"),
        "the third run's model was not told about the verdict"
    );

    let o = bee_in(dir, &["findings", "list", "--state", "open"]);
    assert_eq!(code(&o), 0);
    let text = stdout(&o);
    assert!(text.starts_with("2 finding(s) in "), "{text}");
    assert!(text.contains("1 false-positive, 1 open"), "{text}");
    assert!(
        text.contains("code-injection") && !text.contains("sql-injection"),
        "{text}"
    );

    let o = bee_in(dir, &["findings", "export", "--sarif", "out.sarif"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let log: Value = ok(serde_json::from_str(&ok(std::fs::read_to_string(
        dir.join("out.sarif"),
    ))));
    validate(&log);
    let results = log["runs"][0]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(log["runs"][0]["tool"]["driver"]["name"], "bee");
    let ruled = results
        .iter()
        .find(|r| r["partialFingerprints"]["beeFindingId/v1"] == id.as_str())
        .cloned()
        .unwrap_or_default();
    assert_eq!(ruled["suppressions"][0]["status"], "accepted");
    assert_eq!(ruled["baselineState"], "unchanged");
    assert_eq!(ruled["properties"]["security-severity"], "9.1");
}

#[test]
fn bad_input_is_a_clear_error_and_loses_nothing() {
    let t = ok(tempfile::tempdir());
    let dir = t.path();
    // No ledger yet.
    let o = bee_in(dir, &["findings", "list"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).starts_with("0 finding(s)"), "{}", stdout(&o));
    let o = bee_in(
        dir,
        &[
            "findings",
            "adjudicate",
            "F-1234",
            "--state",
            "fixed",
            "--note",
            "x",
        ],
    );
    assert_eq!(code(&o), 66, "{}", stderr(&o));

    episode(dir);
    run_episode(dir);
    let ledger = dir.join(".bee/findings/ledger.jsonl");
    let good = ok(std::fs::read_to_string(&ledger));
    // A hand edit: a broken line, an unknown kind; then a crash mid-line.
    let first = good.lines().next().unwrap_or_default();
    let unknown = first.replace("\"kind\":\"sighting\"", "\"kind\":\"retraction\"");
    let edited = format!("{good}{{\"v\":1,\n{unknown}\n{}", &first[..40]);
    ok(std::fs::write(&ledger, &edited));
    let o = bee_in(dir, &["findings", "list"]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    let err = stderr(&o);
    let path = ".bee/findings/ledger.jsonl";
    assert!(
        err.contains(&format!("error: {}:3: not JSON", dir.join(path).display())),
        "{err}"
    );
    assert!(
        err.contains(":4: key `kind`: unknown event kind `retraction`"),
        "{err}"
    );
    assert!(
        err.contains("warning: ") && err.contains(":5: the last line is cut short"),
        "{err}"
    );
    assert!(stdout(&o).starts_with("2 finding(s)"), "{}", stdout(&o));

    // Unknown id: 65, and the ledger is untouched.
    let o = bee_in(
        dir,
        &[
            "findings",
            "adjudicate",
            "F-ffffffffffffffff",
            "--state",
            "fixed",
            "--note",
            "x",
        ],
    );
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("there is no finding `F-ffffffffffffffff`"),
        "{}",
        stderr(&o)
    );
    assert_eq!(ok(std::fs::read_to_string(&ledger)), edited);
    // Usage errors: a verdict that does not exist, an empty note.
    let o = bee_in(
        dir,
        &[
            "findings",
            "adjudicate",
            "F-1",
            "--state",
            "open",
            "--note",
            "x",
        ],
    );
    assert_eq!(code(&o), 64);
    let o = bee_in(
        dir,
        &[
            "findings",
            "adjudicate",
            "F-1",
            "--state",
            "fixed",
            "--note",
            " ",
        ],
    );
    assert_eq!(code(&o), 64);
    // A ruling still appends after the broken lines, which stay as they were.
    let id = list_json_lenient(dir);
    let o = bee_in(
        dir,
        &[
            "findings",
            "adjudicate",
            &id,
            "--state",
            "confirmed",
            "--note",
            "real",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let after = ok(std::fs::read_to_string(&ledger));
    assert!(
        after.starts_with(&format!("{edited}\n")),
        "a byte of the ledger was lost"
    );
    let o = bee_in(dir, &["findings", "export", "--sarif", "-"]);
    assert_eq!(
        code(&o),
        65,
        "broken lines make the export a data error too"
    );
    let log: Value = ok(serde_json::from_str(&stdout(&o)));
    validate(&log);
    assert!(log["runs"][0]["results"].as_array().is_some_and(|r| {
        r.iter()
            .any(|r| r["suppressions"][0]["status"] == "rejected")
    }));
}

/// The first finding's id, from a ledger with broken lines (list exits 65 then).
fn list_json_lenient(dir: &Path) -> String {
    let o = bee_in(dir, &["findings", "list", "--json"]);
    let v: Value = ok(serde_json::from_str(&stdout(&o)));
    v["findings"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The validation above can fail: the schema refuses what SARIF 2.1.0 does not allow.
#[test]
fn the_schema_refuses_invalid_logs() {
    let schema: Value = ok(serde_json::from_str(SCHEMA));
    let validator = ok(jsonschema::draft4::new(&schema));
    for bad in [
        json!({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": 42}]}),
        json!({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"ruleId": "r"}]}]}),
        json!({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [
            {"message": {"text": "m"}, "baselineState": "reopened"}]}]}),
        json!({"version": "2.0.0", "runs": []}),
    ] {
        assert!(!validator.is_valid(&bad), "accepted: {bad}");
    }
}
