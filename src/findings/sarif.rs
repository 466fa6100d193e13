//! The ledger as a SARIF 2.1.0 log: one run per tool that saw findings (`opengrep`,
//! `codeql`, and `bee` for the model's), each with its rules and results.
//!
//! * `partialFingerprints`: `beeFindingId/v1` (the ledger id), `beeMatchHash/v1` (the hash of
//!   the normalised matched text and its occurrence) and, when a scanner gave one, its own
//!   fingerprint as `scannerFingerprint/v1`.
//! * `suppressions`: every adjudicated finding has one, `kind: external` with the person's note
//!   as justification: `accepted` for `false-positive` and `wont-fix`, `rejected` for
//!   `confirmed` (a person looked and it stands); `fixed` is `accepted`, or `underReview` when
//!   the finding was seen again after the verdict.
//! * `baselineState`, against the ledger's latest run (the run of its last sighting): `new`
//!   when first seen in that run, `unchanged` when seen in it and before, `absent` when not seen
//!   in it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Finding, Findings, Level, MODEL_TOOL, State};

/// The schema a log names.
pub const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

fn driver_name(tool: &str) -> &str {
    if tool == MODEL_TOOL { "bee" } else { tool }
}

fn baseline(f: &Finding, latest_run: Option<&str>) -> &'static str {
    match latest_run {
        Some(run) if f.runs.iter().any(|r| r == run) => {
            if f.runs.len() == 1 {
                "new"
            } else {
                "unchanged"
            }
        }
        Some(_) => "absent",
        None => "new",
    }
}

fn suppression(f: &Finding) -> Option<Value> {
    let last = f.verdicts.last()?;
    let status = match f.state {
        State::Open => return None,
        State::FalsePositive | State::WontFix => "accepted",
        State::Confirmed => "rejected",
        State::Fixed if f.seen_since_verdict > 0 => "underReview",
        State::Fixed => "accepted",
    };
    Some(json!({
        "kind": "external",
        "status": status,
        "justification": format!("{}: {}", last.state.as_str(), last.note),
        "properties": {"by": last.by, "at": last.at.to_string()},
    }))
}

fn result(f: &Finding, rule_index: usize, latest_run: Option<&str>) -> Value {
    let s = &f.latest;
    let mut region = serde_json::Map::new();
    region.insert("startLine".to_owned(), json!(s.location.start_line.max(1)));
    if let Some(c) = s.location.start_column {
        region.insert("startColumn".to_owned(), json!(c.max(1)));
    }
    if let Some(l) = s.location.end_line {
        region.insert("endLine".to_owned(), json!(l.max(1)));
    }
    if let Some(c) = s.location.end_column {
        region.insert("endColumn".to_owned(), json!(c.max(1)));
    }
    let mut fingerprints = serde_json::Map::new();
    fingerprints.insert("beeFindingId/v1".to_owned(), json!(f.id));
    fingerprints.insert(
        "beeMatchHash/v1".to_owned(),
        json!(format!(
            "{}:{}",
            f.identity.text_hash, f.identity.occurrence
        )),
    );
    if let Some(alias) = f.aliases.iter().next() {
        fingerprints.insert("scannerFingerprint/v1".to_owned(), json!(alias));
    }
    let mut properties = serde_json::Map::new();
    properties.insert("state".to_owned(), json!(f.state.as_str()));
    properties.insert("sightings".to_owned(), json!(f.sightings));
    properties.insert("firstSeen".to_owned(), json!(f.first_seen.to_string()));
    properties.insert("lastSeen".to_owned(), json!(f.last_seen.to_string()));
    if let Some(c) = &s.cvss {
        properties.insert("cvssVector".to_owned(), json!(c.vector));
        properties.insert(
            "security-severity".to_owned(),
            json!(format!("{:.1}", c.score)),
        );
    }
    let mut r = serde_json::Map::new();
    r.insert("ruleId".to_owned(), json!(f.identity.rule));
    r.insert("ruleIndex".to_owned(), json!(rule_index));
    r.insert("level".to_owned(), json!(s.level.as_str()));
    r.insert(
        "message".to_owned(),
        json!({"text": if s.message.is_empty() { &s.title } else { &s.message }}),
    );
    r.insert(
        "locations".to_owned(),
        json!([{
            "physicalLocation": {
                "artifactLocation": {"uri": s.location.path, "uriBaseId": "%SRCROOT%"},
                "region": Value::Object(region),
            }
        }]),
    );
    r.insert(
        "partialFingerprints".to_owned(),
        Value::Object(fingerprints),
    );
    r.insert("baselineState".to_owned(), json!(baseline(f, latest_run)));
    if let Some(sup) = suppression(f) {
        r.insert("suppressions".to_owned(), json!([sup]));
    }
    r.insert("properties".to_owned(), Value::Object(properties));
    Value::Object(r)
}

/// The SARIF 2.1.0 log of every finding in `findings`.
#[must_use]
pub fn export(findings: &Findings) -> Value {
    // tool → rule → (index, the first finding's title and level)
    let mut by_tool: BTreeMap<&str, Vec<&Finding>> = BTreeMap::new();
    for f in findings.findings.values() {
        by_tool.entry(f.identity.tool.as_str()).or_default().push(f);
    }
    let latest_run = findings.latest_run.as_deref();
    let runs: Vec<Value> = by_tool
        .into_iter()
        .map(|(tool, list)| {
            let mut rules: Vec<(&str, &str, Level)> = Vec::new();
            let mut results = Vec::new();
            for f in list {
                let index = match rules.iter().position(|(id, _, _)| *id == f.identity.rule) {
                    Some(i) => i,
                    None => {
                        rules.push((&f.identity.rule, &f.latest.title, f.latest.level));
                        rules.len() - 1
                    }
                };
                results.push(result(f, index, latest_run));
            }
            let rules: Vec<Value> = rules
                .into_iter()
                .map(|(id, title, level)| {
                    json!({
                        "id": id,
                        "shortDescription": {"text": title},
                        "defaultConfiguration": {"level": level.as_str()},
                    })
                })
                .collect();
            let name = driver_name(tool);
            json!({
                "tool": {"driver": {
                    "name": name,
                    "informationUri": "https://github.com/bee-sandbox/bee",
                    "rules": rules,
                }},
                "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "the repository root"}}},
                "automationDetails": {"id": format!("bee-findings/{name}/")},
                "results": results,
            })
        })
        .collect();
    json!({
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": runs,
    })
}
