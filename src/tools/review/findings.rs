//! `record_finding` and `list_findings`: the model's side of the findings ledger (feature
//! `findings`). Both run in the harness: the ledger is bee's, never the scope's, so that the
//! code under review — and a model it has talked round — can neither forge a verdict nor
//! erase a finding. The model records sightings; only a person rules (`bee findings
//! adjudicate`).

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use crate::findings::{
    Cvss, Finding, Identity, Level, Location, MODEL_TOOL, Recorder, Sighting, State, relative_path,
};
use crate::provider::ToolDef;
use crate::tools::{Answer, Context, Placement, Tool, ToolState};

const MAX_TITLE: usize = 200;
const MAX_RULE: usize = 100;
const MAX_SNIPPET: usize = 4096;
const MAX_EVIDENCE: usize = 8192;

/// `record_finding`.
#[derive(Debug, Clone)]
pub struct RecordFinding {
    recorder: Arc<Recorder>,
}

/// `list_findings`.
#[derive(Debug, Clone)]
pub struct ListFindings {
    recorder: Arc<Recorder>,
}

impl RecordFinding {
    /// The tool, recording with `recorder`.
    #[must_use]
    pub fn new(recorder: Arc<Recorder>) -> Self {
        Self { recorder }
    }
}

impl ListFindings {
    /// The tool, reading `recorder`'s ledger.
    #[must_use]
    pub fn new(recorder: Arc<Recorder>) -> Self {
        Self { recorder }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordArgs {
    title: String,
    rule: String,
    path: String,
    line: u32,
    #[serde(default)]
    end_line: Option<u32>,
    snippet: String,
    evidence: String,
    cvss_vector: String,
    #[serde(default)]
    occurrence: u32,
}

fn failed(body: String) -> Answer {
    Answer {
        state: ToolState::Failed,
        ..Answer::could_not_run(body)
    }
}

fn check(args: &RecordArgs) -> Result<String, String> {
    let bad = |m: String| Err(format!("bad arguments for `record_finding`: {m}"));
    for (key, v, max) in [
        ("title", &args.title, MAX_TITLE),
        ("rule", &args.rule, MAX_RULE),
        ("snippet", &args.snippet, MAX_SNIPPET),
        ("evidence", &args.evidence, MAX_EVIDENCE),
    ] {
        if v.trim().is_empty() {
            return bad(format!("`{key}` is empty"));
        }
        if v.len() > max {
            return bad(format!("`{key}` is {} bytes; at most {max}", v.len()));
        }
    }
    if args.title.contains('\n') {
        return bad("`title` is one line".to_owned());
    }
    if !args
        .rule
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./:".contains(&b))
    {
        return bad(format!(
            "`rule` `{}` is a short name (letters, digits, `-_./:`), e.g. `sql-injection` or \
             `CWE-89`",
            args.rule
        ));
    }
    if args.line == 0 {
        return bad("`line` is 1-based".to_owned());
    }
    if args.end_line.is_some_and(|e| e < args.line) {
        return bad("`end_line` is before `line`".to_owned());
    }
    relative_path(&args.path).or_else(|e| bad(format!("`path`: {e}")))
}

impl Tool for RecordFinding {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "record_finding".to_owned(),
            description: "Record a security finding in the project's findings ledger, where a \
                          person reviews it. Give the code as it appears at the location \
                          (`snippet`: it identifies the finding, so moved code keeps it), your \
                          evidence, and a CVSS vector: the severity is computed from the \
                          vector, never chosen. Recording the same finding again merges into it; \
                          a person's verdict on it is shown and never changed by you."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string", "description": "One line: what is wrong."},
                    "rule": {"type": "string", "description": "The category or rule, e.g. `sql-injection` or `CWE-89`."},
                    "path": {"type": "string", "description": "The file, relative to the workspace."},
                    "line": {"type": "integer", "minimum": 1, "description": "The first line of the snippet."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "The last line of the snippet."},
                    "snippet": {"type": "string", "description": "The code at the location, as it appears in the file."},
                    "evidence": {"type": "string", "description": "Why it is a problem: the data flow, the missing check, how to reach it."},
                    "cvss_vector": {"type": "string", "description": "A CVSS 3.0, 3.1 or 4.0 vector, e.g. `CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N`."},
                    "occurrence": {"type": "integer", "minimum": 0, "description": "When the same snippet occurs several times in the file: which one, from 0 (default 0)."}
                },
                "required": ["title", "rule", "path", "line", "snippet", "evidence", "cvss_vector"],
                "additionalProperties": false
            }),
        }
    }

    fn placement(&self) -> Placement {
        Placement::Harness
    }

    fn call(&self, args: &serde_json::Value, _ctx: &Context<'_>) -> Answer {
        let args: RecordArgs = match serde_json::from_value(args.clone()) {
            Ok(a) => a,
            Err(e) => {
                return Answer::could_not_run(format!("bad arguments for `record_finding`: {e}"));
            }
        };
        let path = match check(&args) {
            Ok(p) => p,
            Err(e) => return Answer::could_not_run(e),
        };
        let cvss = match Cvss::from_vector(&args.cvss_vector) {
            Ok(c) => c,
            Err(why) => return failed(format!("the CVSS vector does not score: {why}")),
        };
        let sighting = Sighting {
            identity: Identity::new(
                MODEL_TOOL,
                &args.rule,
                &path,
                &args.snippet,
                args.occurrence,
            ),
            alias: None,
            title: args.title.trim().to_owned(),
            message: args.evidence.trim().to_owned(),
            location: Location {
                path: path.clone(),
                start_line: args.line,
                start_column: None,
                end_line: args.end_line,
                end_column: None,
            },
            level: Level::of_severity(&cvss.severity),
            cvss: Some(cvss.clone()),
        };
        let recorded = match self.recorder.record(&[sighting], MODEL_TOOL) {
            Ok(mut r) if r.len() == 1 => r.remove(0),
            Ok(_) => return failed("the ledger recorded nothing".to_owned()),
            Err(e) => return failed(format!("the findings ledger: {e}")),
        };
        let mut body = if recorded.new {
            format!("recorded {} (new, state open)", recorded.id)
        } else {
            format!(
                "merged into {}: already in the ledger, state {}",
                recorded.id,
                recorded.state.as_str()
            )
        };
        let _ = write!(
            body,
            "\nseverity {} (CVSS {} base score {:.1}), {path}:{}\n",
            cvss.severity, cvss.version, cvss.score, args.line
        );
        if let Some(v) = &recorded.verdict {
            let _ = writeln!(
                body,
                "a person ruled it {} ({}): {} — recording it again does not change that",
                v.state.as_str(),
                v.by,
                v.note
            );
        }
        Answer::completed(body)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    max_results: Option<usize>,
}

/// One finding as `list_findings` and `bee findings list` show it.
#[must_use]
pub fn describe(f: &Finding) -> String {
    let s = &f.latest;
    let severity = s.cvss.as_ref().map_or_else(
        || s.level.as_str().to_owned(),
        |c| format!("{} {:.1}", c.severity, c.score),
    );
    let mut out = format!(
        "{} [{}] {} {} {} {}: {} (seen {}×)",
        f.id,
        f.state.as_str(),
        severity,
        f.identity.tool,
        f.identity.rule,
        s.location,
        s.title,
        f.sightings
    );
    if let Some(v) = f.verdicts.last() {
        let _ = write!(
            out,
            "\n    verdict: {} by {} at {}: {}",
            v.state.as_str(),
            v.by,
            v.at,
            v.note
        );
        if f.seen_since_verdict > 0 {
            let _ = write!(
                out,
                "\n    seen {} more time(s) since the verdict",
                f.seen_since_verdict
            );
        }
    }
    out
}

impl Tool for ListFindings {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "list_findings".to_owned(),
            description: "List the findings in the project's findings ledger, with their \
                          state (`open`, or a person's verdict: `false-positive`, `wont-fix`, \
                          `confirmed`, `fixed`) and the verdict's note. Filters narrow the list."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "state": {"type": "string", "enum": State::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>(), "description": "Only findings in this state."},
                    "tool": {"type": "string", "description": "Only findings of this tool (`model`, `opengrep`, `codeql`)."},
                    "rule": {"type": "string", "description": "Only findings of this rule or category."},
                    "path": {"type": "string", "description": "Only findings in this file or below this directory."},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 500, "description": "The most findings to show (default 50)."}
                },
                "additionalProperties": false
            }),
        }
    }

    fn placement(&self) -> Placement {
        Placement::Harness
    }

    fn call(&self, args: &serde_json::Value, _ctx: &Context<'_>) -> Answer {
        let args: ListArgs = match serde_json::from_value(args.clone()) {
            Ok(a) => a,
            Err(e) => {
                return Answer::could_not_run(format!("bad arguments for `list_findings`: {e}"));
            }
        };
        let state = match args.state.as_deref().map(|s| (s, State::parse(s))) {
            Some((s, None)) => {
                return Answer::could_not_run(format!(
                    "bad arguments for `list_findings`: unknown state `{s}`"
                ));
            }
            Some((_, state)) => state,
            None => None,
        };
        let max = args.max_results.unwrap_or(50);
        if !(1..=500).contains(&max) {
            return Answer::could_not_run(
                "bad arguments for `list_findings`: `max_results` is 1 to 500".to_owned(),
            );
        }
        let prefix = match args.path.as_deref().map(relative_path).transpose() {
            Ok(p) => p,
            Err(e) => {
                return Answer::could_not_run(format!(
                    "bad arguments for `list_findings`: `path`: {e}"
                ));
            }
        };
        let loaded = match self.recorder.ledger.read() {
            Ok(l) => l,
            Err(e) => return failed(format!("the findings ledger: {e}")),
        };
        let matching: Vec<&Finding> = loaded
            .findings
            .findings
            .values()
            .filter(|f| state.is_none_or(|s| f.state == s))
            .filter(|f| args.tool.as_ref().is_none_or(|t| &f.identity.tool == t))
            .filter(|f| args.rule.as_ref().is_none_or(|r| &f.identity.rule == r))
            .filter(|f| {
                prefix.as_ref().is_none_or(|p| {
                    f.identity.path == *p || f.identity.path.starts_with(&format!("{p}/"))
                })
            })
            .collect();
        let mut body = format!(
            "{} of {} finding(s) in the ledger match",
            matching.len(),
            loaded.findings.findings.len()
        );
        if matching.len() > max {
            let _ = write!(body, "; showing the first {max}");
        }
        body.push('\n');
        for f in matching.iter().take(max) {
            body.push_str(&describe(f));
            body.push('\n');
        }
        if !loaded.problems.is_empty() {
            let _ = writeln!(
                body,
                "note: {} line(s) of the ledger could not be read and were skipped",
                loaded.problems.len()
            );
        }
        Answer::completed(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{Ledger, Verdict};
    use crate::tools::ToolLimits;

    fn call(tool: &dyn Tool, args: serde_json::Value) -> Answer {
        let limits = ToolLimits::default();
        let ctx = Context {
            sandbox: None,
            limits: &limits,
            stop: &|| false,
        };
        tool.call(&args, &ctx)
    }

    fn finding() -> serde_json::Value {
        json!({
            "title": "SQL built from a request parameter",
            "rule": "sql-injection",
            "path": "./src/db.py",
            "line": 12,
            "snippet": "cur.execute(\"SELECT * FROM t WHERE id = %s\" % request.args[\"id\"])",
            "evidence": "request.args reaches execute unescaped",
            "cvss_vector": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:N"
        })
    }

    #[test]
    fn recording_scores_merges_and_shows_verdicts() {
        let t = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let ledger = Ledger::in_project(t.path());
        let rec = Arc::new(Recorder::new(ledger.clone(), Some("c0ffee".to_owned())).with_run("r1"));
        let record = RecordFinding::new(Arc::clone(&rec));
        let a = call(&record, finding());
        assert_eq!(a.state, ToolState::Completed, "{}", a.body);
        assert!(a.body.contains("(new, state open)"), "{}", a.body);
        assert!(
            a.body
                .contains("severity critical (CVSS 3.1 base score 9.1)"),
            "{}",
            a.body
        );
        let loaded = ledger.read().unwrap_or_else(|e| unreachable!("{e}"));
        let (id, f) = loaded
            .findings
            .findings
            .iter()
            .next()
            .unwrap_or_else(|| unreachable!());
        assert_eq!(f.identity.path, "src/db.py");
        assert_eq!(f.commit.as_deref(), Some("c0ffee"));
        assert_eq!(f.latest.level, Level::Error);

        // Moved down ten lines and re-indented: the same finding.
        let mut moved = finding();
        moved["line"] = json!(22);
        moved["snippet"] =
            json!("cur.execute(  \"SELECT * FROM t WHERE id = %s\"\n   % request.args[\"id\"])");
        let b = call(&record, moved);
        assert!(
            b.body.starts_with(&format!("merged into {id}")),
            "{}",
            b.body
        );
        ledger
            .adjudicate(
                id,
                Verdict::FalsePositive,
                "ids are integers",
                "alice",
                None,
            )
            .unwrap_or_else(|e| unreachable!("{e}"));
        let c = call(&record, finding());
        assert!(c.body.contains("state false-positive"), "{}", c.body);
        assert!(
            c.body
                .contains("ruled it false-positive (alice): ids are integers"),
            "{}",
            c.body
        );

        let list = ListFindings::new(rec);
        let l = call(&list, json!({"state": "false-positive"}));
        assert!(l.body.starts_with("1 of 1 finding(s)"), "{}", l.body);
        assert!(
            l.body.contains("verdict: false-positive by alice"),
            "{}",
            l.body
        );
        assert!(
            l.body.contains("seen 1 more time(s) since the verdict"),
            "{}",
            l.body
        );
        let l = call(&list, json!({"state": "open"}));
        assert!(l.body.starts_with("0 of 1"), "{}", l.body);
        let l = call(&list, json!({"path": "src"}));
        assert!(l.body.starts_with("1 of 1"), "{}", l.body);
        let l = call(&list, json!({"state": "closed"}));
        assert_eq!(l.state, ToolState::CouldNotRun);
    }

    #[test]
    fn severity_is_computed_and_bad_input_refused() {
        let t = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let rec = Arc::new(Recorder::new(Ledger::in_project(t.path()), None));
        let record = RecordFinding::new(rec);
        let mut bad = finding();
        bad["cvss_vector"] = json!("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H");
        let a = call(&record, bad);
        assert_eq!(a.state, ToolState::Failed);
        assert!(a.body.contains("metric A"), "{}", a.body);
        let mut sev = finding();
        sev["severity"] = json!("critical");
        assert_eq!(call(&record, sev).state, ToolState::CouldNotRun);
        for (key, value, why) in [
            ("path", json!("/etc/passwd"), "absolute"),
            ("path", json!("../x.py"), ".."),
            ("line", json!(0), "1-based"),
            ("snippet", json!("  "), "`snippet` is empty"),
            ("rule", json!("sql injection!"), "short name"),
        ] {
            let mut a = finding();
            a[key] = value;
            let out = call(&record, a);
            assert_eq!(out.state, ToolState::CouldNotRun, "{key}");
            assert!(out.body.contains(why), "{key}: {}", out.body);
        }
        assert!(!t.path().join(crate::findings::LEDGER_PATH).exists());
    }
}
