use proptest::prelude::*;

use super::ledger::parse;
use super::*;

fn sighting(tool: &str, rule: &str, path: &str, text: &str, occurrence: u32) -> Sighting {
    Sighting {
        identity: Identity::new(tool, rule, path, text, occurrence),
        alias: None,
        title: format!("{rule} in {path}"),
        message: format!("matched `{text}`"),
        location: Location {
            path: path.to_owned(),
            start_line: 3,
            start_column: Some(5),
            end_line: None,
            end_column: None,
        },
        level: Level::Warning,
        cvss: None,
    }
}

fn ledger() -> (tempfile::TempDir, Ledger) {
    let t = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let l = Ledger::in_project(t.path());
    (t, l)
}

fn read(l: &Ledger) -> ledger::Loaded {
    l.read().unwrap_or_else(|e| unreachable!("{e}"))
}

#[test]
fn identity_ignores_whitespace_and_line_but_not_occurrence() {
    let a = Identity::new("opengrep", "r", "src/a.rs", "let x =\n    foo( 1 );", 0);
    let b = Identity::new("opengrep", "r", "src/a.rs", "  let x = foo( 1 );  ", 0);
    assert_eq!(a, b);
    assert_eq!(a.id(), b.id());
    assert!(a.id().starts_with("F-") && a.id().len() == 18);
    let c = Identity::new("opengrep", "r", "src/a.rs", "let x = foo( 1 );", 1);
    assert_ne!(a.id(), c.id());
    let d = Identity::new("opengrep", "r", "src/b.rs", "let x = foo( 1 );", 0);
    assert_ne!(a.id(), d.id());
}

#[test]
fn normalising_removes_layout_only() {
    assert_eq!(normalise("  f( a,\n\tb )  "), "f(a,b)");
    assert_eq!(normalise("return   x"), "return x");
    assert_ne!(normalise("return x"), normalise("returnx"));
    assert_eq!(normalise("a\r\n  .b()"), "a.b()");
}

#[test]
fn relative_paths_are_normalised_and_escapes_refused() {
    assert_eq!(relative_path("./src//a.rs").as_deref(), Ok("src/a.rs"));
    assert!(relative_path("/etc/passwd").is_err_and(|e| e.contains("absolute")));
    assert!(relative_path("src/../../x").is_err_and(|e| e.contains("..")));
    assert!(relative_path(" ").is_err());
}

#[test]
fn rerunning_merges_and_verdicts_stick() {
    let (_t, l) = ledger();
    let s = sighting("opengrep", "sqli", "src/db.py", "cur.execute(q % x)", 0);
    let first = l.record(std::slice::from_ref(&s), "opengrep", Some("run-1"), None);
    let first = first.unwrap_or_else(|e| unreachable!("{e}"));
    assert!(first[0].new);
    let second = l
        .record(std::slice::from_ref(&s), "opengrep", Some("run-2"), None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    assert!(!second[0].new);
    assert_eq!(first[0].id, second[0].id);
    let loaded = read(&l);
    assert_eq!(loaded.findings.findings.len(), 1);
    assert_eq!(loaded.events.len(), 2);
    let f = &loaded.findings.findings[&first[0].id];
    assert_eq!(f.sightings, 2);
    assert_eq!(f.runs, ["run-1", "run-2"]);
    assert_eq!(f.state, State::Open);

    let ruled = l
        .adjudicate(
            &first[0].id[..8],
            Verdict::FalsePositive,
            "q is a constant",
            "alice",
            None,
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(ruled.state, State::FalsePositive);

    // A third run: one more sighting, the verdict unchanged and reported.
    let third = l
        .record(&[s], "opengrep", Some("run-3"), None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(third[0].state, State::FalsePositive);
    assert_eq!(
        third[0].verdict.as_ref().map(|v| v.note.as_str()),
        Some("q is a constant")
    );
    let f = &read(&l).findings.findings[&first[0].id];
    assert_eq!(
        (f.state, f.sightings, f.seen_since_verdict),
        (State::FalsePositive, 3, 1)
    );
    assert_eq!(f.verdicts[0].by, "alice");
}

#[test]
fn a_known_scanner_fingerprint_merges_a_changed_match() {
    let (_t, l) = ledger();
    let mut a = sighting("codeql", "py/sql-injection", "app.py", "execute(q)", 0);
    a.alias = Some("fp-123".to_owned());
    let mut b = sighting("codeql", "py/sql-injection", "app.py", "execute(query)", 0);
    b.alias = Some("fp-123".to_owned());
    let r = l
        .record(&[a], "codeql", Some("r1"), None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    let r2 = l
        .record(&[b], "codeql", Some("r2"), None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(r[0].id, r2[0].id);
    assert!(!r2[0].new);
    assert_eq!(read(&l).findings.findings.len(), 1);
}

#[test]
fn adjudicating_an_unknown_id_is_an_error_and_writes_nothing() {
    let (_t, l) = ledger();
    l.record(
        &[sighting("model", "xss", "a.js", "x", 0)],
        "model",
        None,
        None,
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let before = std::fs::read(l.path()).unwrap_or_default();
    let e = l.adjudicate("F-0000000000000000", Verdict::Fixed, "n", "bob", None);
    assert!(
        matches!(&e, Err(LedgerError::Unknown { why, .. }) if why.contains("no finding `F-0000000000000000`")),
        "{e:?}"
    );
    assert_eq!(std::fs::read(l.path()).unwrap_or_default(), before);
}

#[test]
fn broken_lines_are_reported_with_their_line_and_skipped() {
    let (_t, l) = ledger();
    let s = sighting("opengrep", "r", "a.py", "eval(x)", 0);
    l.record(std::slice::from_ref(&s), "opengrep", Some("r1"), None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    let good = std::fs::read_to_string(l.path()).unwrap_or_default();
    let dup = good.clone();
    let unknown = good.replace("\"kind\":\"sighting\"", "\"kind\":\"retraction\"");
    let orphan = r#"{"v":1,"event":"E-1","kind":"verdict","finding":"F-ffffffffffffffff","at":"2026-01-01T00:00:00.000Z","by":"x","verdict":{"state":"fixed","note":""}}"#;
    let text = format!("{good}{{not json\n{dup}{unknown}{orphan}\n");
    std::fs::write(l.path(), &text).unwrap_or_else(|e| unreachable!("{e}"));
    let loaded = read(&l);
    assert_eq!(loaded.findings.findings.len(), 1);
    let messages: Vec<(usize, &str)> = loaded
        .problems
        .iter()
        .map(|p| (p.line, p.message.as_str()))
        .collect();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert!(messages[0].0 == 2 && messages[0].1.starts_with("not JSON"));
    assert!(messages[1].0 == 3 && messages[1].1.contains("duplicate event id"));
    assert!(messages[2].0 == 4 && messages[2].1.contains("unknown event kind `retraction`"));
    assert!(messages[3].0 == 5 && messages[3].1.contains("no earlier sighting"));
    assert!(loaded.problems.iter().all(|p| !p.truncated));
}

#[test]
fn a_truncated_last_line_is_reported_and_the_next_append_starts_a_new_line() {
    let (_t, l) = ledger();
    let s = sighting("opengrep", "r", "a.py", "eval(x)", 0);
    l.record(std::slice::from_ref(&s), "opengrep", Some("r1"), None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    let good = std::fs::read_to_string(l.path()).unwrap_or_default();
    let cut = &good[..good.len() / 2];
    std::fs::write(l.path(), format!("{good}{cut}")).unwrap_or_else(|e| unreachable!("{e}"));
    let loaded = read(&l);
    assert_eq!(loaded.problems.len(), 1);
    assert!(loaded.problems[0].truncated && loaded.problems[0].line == 2);
    assert!(loaded.problems[0].message.contains("cut short"));
    // The next writer keeps the broken line as it is, on a line of its own.
    l.record(&[s], "opengrep", Some("r2"), None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    let loaded = read(&l);
    assert_eq!(loaded.events.len(), 2);
    assert_eq!(loaded.problems.len(), 1);
    assert_eq!(loaded.problems[0].line, 2);
    assert!(
        !loaded.problems[0].truncated,
        "now terminated: a broken line"
    );
    let text = std::fs::read_to_string(l.path()).unwrap_or_default();
    assert!(text.contains(&format!("{cut}\n")));
}

#[test]
fn events_round_trip_and_unknown_keys_are_refused() {
    let (_t, l) = ledger();
    l.record(
        &[sighting("model", "xss", "a.js", "x", 0)],
        "model",
        Some("r"),
        Some("abc"),
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let text = std::fs::read_to_string(l.path()).unwrap_or_default();
    let line = text.trim_end();
    let e = Event::parse(line).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(e.to_line(), line);
    let extra = line.replacen('{', "{\"colour\":1,", 1);
    assert!(Event::parse(&extra).is_err_and(|e| e.contains("colour")));
    let v2 = line.replacen("\"v\":1", "\"v\":2", 1);
    assert!(Event::parse(&v2).is_err_and(|e| e.contains("format 2")));
}

#[test]
fn sarif_export_marks_suppressions_and_baselines() {
    let (_t, l) = ledger();
    let a = sighting("opengrep", "sqli", "db.py", "execute(q)", 0);
    let b = sighting("opengrep", "eval", "x.py", "eval(y)", 0);
    let mut m = sighting(MODEL_TOOL, "authz", "api.py", "def delete(): pass", 0);
    m.cvss = Some(
        Cvss::from_vector("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H")
            .unwrap_or_else(|e| unreachable!("{e}")),
    );
    m.level = Level::of_severity("critical");
    let r1 = l
        .record(&[a.clone(), b], "opengrep", Some("r1"), None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    l.record(&[m], MODEL_TOOL, Some("r1"), None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    l.record(&[a], "opengrep", Some("r2"), None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    l.adjudicate(&r1[0].id, Verdict::WontFix, "legacy", "alice", None)
        .unwrap_or_else(|e| unreachable!("{e}"));
    let log = sarif::export(&read(&l).findings);
    assert_eq!(log["version"], "2.1.0");
    let runs = log["runs"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = runs
        .iter()
        .filter_map(|r| r["tool"]["driver"]["name"].as_str())
        .collect();
    assert_eq!(names, ["bee", "opengrep"]);
    let model = &runs[0]["results"][0];
    assert_eq!(model["level"], "error");
    assert_eq!(model["properties"]["security-severity"], "9.8");
    assert_eq!(model["baselineState"], "absent");
    let og = runs[1]["results"].as_array().cloned().unwrap_or_default();
    let sqli = og
        .iter()
        .find(|r| r["ruleId"] == "sqli")
        .cloned()
        .unwrap_or_default();
    assert_eq!(sqli["baselineState"], "unchanged");
    assert_eq!(sqli["suppressions"][0]["status"], "accepted");
    assert_eq!(sqli["suppressions"][0]["justification"], "wont-fix: legacy");
    assert_eq!(sqli["partialFingerprints"]["beeFindingId/v1"], r1[0].id);
    let eval = og
        .iter()
        .find(|r| r["ruleId"] == "eval")
        .cloned()
        .unwrap_or_default();
    assert!(eval.get("suppressions").is_none());
    assert_eq!(eval["baselineState"], "absent");
}

fn arb_sighting() -> impl Strategy<Value = Sighting> {
    (
        prop::sample::select(vec!["opengrep", "codeql", "model"]),
        prop::sample::select(vec!["r1", "r2"]),
        prop::sample::select(vec!["a.py", "src/b.rs"]),
        prop::sample::select(vec!["eval(x)", "eval( x )", "exec(y)", "  q  "]),
        0u32..2,
        proptest::option::of(prop::sample::select(vec!["fp-1", "fp-2"])),
    )
        .prop_map(|(tool, rule, path, text, occ, alias)| {
            let mut s = sighting(tool, rule, path, text, occ);
            s.alias = alias.map(str::to_owned);
            s
        })
}

#[derive(Debug, Clone)]
enum Op {
    See(Vec<Sighting>),
    Rule(usize, Verdict),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        prop::collection::vec(arb_sighting(), 1..4).prop_map(Op::See),
        (0usize..8, prop::sample::select(Verdict::ALL.to_vec())).prop_map(|(i, v)| Op::Rule(i, v)),
    ]
}

fn apply(l: &Ledger, ops: &[Op], run: &str) -> Vec<(String, Verdict)> {
    let mut rulings = Vec::new();
    for op in ops {
        match op {
            Op::See(s) => {
                l.record(s, "t", Some(run), None)
                    .unwrap_or_else(|e| unreachable!("{e}"));
            }
            Op::Rule(i, v) => {
                let ids: Vec<String> = read(l).findings.findings.keys().cloned().collect();
                if let Some(id) = ids.get(i % ids.len().max(1)) {
                    l.adjudicate(id, *v, "n", "p", None)
                        .unwrap_or_else(|e| unreachable!("{e}"));
                    rulings.push((id.clone(), *v));
                }
            }
        }
    }
    rulings
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Recording the same sightings again adds sightings and no finding: the ids, identities
    /// and states are what they were.
    #[test]
    fn merging_is_idempotent(ops in prop::collection::vec(arb_op(), 1..8)) {
        let (_t, l) = ledger();
        apply(&l, &ops, "first");
        let before = read(&l).findings;
        let again: Vec<Sighting> = ops.iter().filter_map(|o| match o {
            Op::See(s) => Some(s.clone()),
            Op::Rule(..) => None,
        }).flatten().collect();
        l.record(&again, "t", Some("second"), None).unwrap_or_else(|e| unreachable!("{e}"));
        let after = read(&l);
        prop_assert!(after.problems.is_empty());
        let after = after.findings;
        prop_assert_eq!(before.findings.keys().collect::<Vec<_>>(), after.findings.keys().collect::<Vec<_>>());
        for (id, f) in &before.findings {
            prop_assert_eq!(f.state, after.findings[id].state);
            prop_assert_eq!(&f.identity, &after.findings[id].identity);
        }
        // And the number of findings is the number of distinct identities modulo aliases.
        let ids: std::collections::BTreeSet<String> = again.iter().map(|s| s.identity.id()).collect();
        prop_assert!(after.findings.len() <= ids.len());
    }

    /// Whatever is seen after it, a finding's state is its latest verdict.
    #[test]
    fn verdicts_stick(ops in prop::collection::vec(arb_op(), 1..8), later in prop::collection::vec(arb_sighting(), 0..6)) {
        let (_t, l) = ledger();
        let rulings = apply(&l, &ops, "one");
        l.record(&later, "scanner", Some("two"), None).unwrap_or_else(|e| unreachable!("{e}"));
        let loaded = read(&l);
        let mut latest = std::collections::BTreeMap::new();
        for (id, v) in rulings {
            latest.insert(id, v);
        }
        for (id, f) in &loaded.findings.findings {
            match latest.get(id) {
                Some(v) => prop_assert_eq!(f.state, State::from(*v)),
                None => prop_assert_eq!(f.state, State::Open),
            }
        }
    }

    /// Parsing never panics on arbitrary bytes, and every non-empty line is an event or a
    /// problem.
    #[test]
    fn any_bytes_parse_into_events_or_problems(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let loaded = parse(&bytes);
        let lines = bytes.split(|b| *b == b'\n').filter(|l| !String::from_utf8_lossy(l).trim().is_empty()).count();
        prop_assert_eq!(loaded.events.len() + loaded.problems.len(), lines);
    }
}
