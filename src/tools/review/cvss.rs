//! `cvss`: the base score and severity of a CVSS 3.0, 3.1 or 4.0 vector, computed by the
//! RustSec `cvss` crate. It touches no file, so it runs in the harness.
//!
//! The severity a review reports is always computed here from a vector, never taken from the
//! model: a vector that does not parse, or that leaves out a base metric, is a `failed` call
//! naming the metric, never a guess.

use std::str::FromStr;

use serde::Deserialize;
use serde_json::json;

use crate::provider::ToolDef;
use crate::tools::{Answer, Context, Placement, Tool, ToolState};

/// The longest vector accepted: every 4.0 metric spelt out is about 300 bytes.
const MAX_VECTOR_BYTES: usize = 1024;

/// The `cvss` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct CvssTool;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    vector: String,
}

/// What a vector scores.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// `3.0`, `3.1` or `4.0`.
    pub version: &'static str,
    /// The base score (4.0: the score of the metrics given, see `nomenclature`).
    pub score: f64,
    /// `none`, `low`, `medium`, `high` or `critical`.
    pub severity: &'static str,
    /// 4.0 only: which metric groups the score covers (`CVSS-B`, `CVSS-BT`, …).
    pub nomenclature: Option<String>,
    /// The vector as the crate writes it back (metrics in canonical order).
    pub canonical: String,
}

/// The base metrics every 3.x vector must name; the crate scores a missing one as zero.
const V3_BASE: [&str; 8] = ["AV", "AC", "PR", "UI", "S", "C", "I", "A"];

/// Scores `vector`, or says what is wrong with it (naming the metric where there is one).
///
/// # Errors
/// The parser's message for a vector that is not CVSS 3.0, 3.1 or 4.0, has an unknown,
/// invalid, repeated or missing metric.
pub fn score(vector: &str) -> Result<Scored, String> {
    let vector = vector.trim();
    if vector.len() > MAX_VECTOR_BYTES {
        return Err(format!(
            "the vector is {} bytes; a CVSS vector is at most a few hundred",
            vector.len()
        ));
    }
    if vector.is_empty() {
        return Err("the vector is empty".to_owned());
    }
    if !vector.starts_with("CVSS:") {
        return Err(format!(
            "`{vector}` has no version prefix: a vector starts with `CVSS:3.0/`, `CVSS:3.1/` or \
             `CVSS:4.0/` (CVSS 2.0 vectors, which have none, are not scored)"
        ));
    }
    let parsed = cvss::Cvss::from_str(vector).map_err(|e| format!("{e} in `{vector}`"))?;
    match parsed {
        cvss::Cvss::CvssV30(v) | cvss::Cvss::CvssV31(v) => {
            let present: Vec<&str> = v.metrics().map(|(m, _)| m.name()).collect();
            if let Some(missing) = V3_BASE.iter().find(|m| !present.contains(m)) {
                return Err(format!(
                    "missing mandatory CVSSv3 base metric {missing} in `{vector}` (a 3.x vector \
                     names all of {})",
                    V3_BASE.join(", ")
                ));
            }
            let s = v.base_score();
            Ok(Scored {
                version: if v.minor_version == 0 { "3.0" } else { "3.1" },
                score: s.value(),
                severity: s.severity().as_str(),
                nomenclature: None,
                canonical: v.to_string(),
            })
        }
        cvss::Cvss::CvssV40(v) => Ok(Scored {
            version: "4.0",
            score: v.score().value(),
            severity: v.score().severity().as_str(),
            nomenclature: Some(v.nomenclature().to_string()),
            canonical: v.to_string(),
        }),
        // `Cvss` is non-exhaustive; 2.0 is not compiled in.
        _ => Err(format!("`{vector}` is not a CVSS 3.0, 3.1 or 4.0 vector")),
    }
}

impl Tool for CvssTool {
    fn definition(&self) -> ToolDef {
        ToolDef {
            name: "cvss".to_owned(),
            description: "Compute the CVSS base score and severity of a vector (CVSS 3.0, 3.1 \
                          or 4.0), e.g. `CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N`. Use it \
                          for every severity you report: the severity is computed from the \
                          vector, never chosen. An invalid vector fails, naming the bad metric."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "vector": {"type": "string", "description": "The vector, starting `CVSS:3.0/`, `CVSS:3.1/` or `CVSS:4.0/`."}
                },
                "required": ["vector"],
                "additionalProperties": false
            }),
        }
    }

    fn placement(&self) -> Placement {
        Placement::Harness
    }

    fn call(&self, args: &serde_json::Value, _ctx: &Context<'_>) -> Answer {
        let args: Args = match serde_json::from_value(args.clone()) {
            Ok(a) => a,
            Err(e) => return Answer::could_not_run(format!("bad arguments for `cvss`: {e}")),
        };
        match score(&args.vector) {
            Ok(s) => {
                let groups = s
                    .nomenclature
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default();
                Answer::completed(format!(
                    "CVSS {} base score {:.1}{groups}, severity {}\nvector: {}\n",
                    s.version, s.score, s.severity, s.canonical
                ))
            }
            Err(why) => Answer {
                state: ToolState::Failed,
                ..Answer::could_not_run(why)
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(v: &str) -> Scored {
        score(v).unwrap_or_else(|e| unreachable!("{v}: {e}"))
    }

    fn err(v: &str) -> String {
        match score(v) {
            Ok(s) => unreachable!("{v} scored {s:?}"),
            Err(e) => e,
        }
    }

    /// FIRST, "CVSS v3.1: Examples": the base vectors and scores published there.
    #[test]
    fn first_v3_1_examples() {
        for (vector, expected, severity) in [
            // CVE-2013-1937, phpMyAdmin reflected XSS.
            (
                "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N",
                6.1,
                "medium",
            ),
            // CVE-2014-0160, OpenSSL Heartbleed.
            ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N", 7.5, "high"),
            // CVE-2014-6271, GNU Bash Shellshock.
            (
                "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H",
                9.8,
                "critical",
            ),
            // CVE-2014-2005, Sophos Disk Encryption: physical access.
            (
                "CVSS:3.1/AV:P/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H",
                6.8,
                "medium",
            ),
            // CVE-2016-1645, Google Chrome PDFium.
            ("CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:U/C:H/I:H/A:H", 8.8, "high"),
        ] {
            let s = ok(vector);
            assert_eq!(
                (s.version, s.score, s.severity),
                ("3.1", expected, severity),
                "{vector}"
            );
        }
        assert_eq!(
            ok("CVSS:3.0/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N").version,
            "3.0"
        );
    }

    /// FIRST, "CVSS v4.0: Examples": the same vulnerabilities scored with 4.0.
    #[test]
    fn first_v4_0_examples() {
        for (vector, expected, severity) in [
            // CVE-2014-0160, Heartbleed.
            (
                "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:N/VA:N/SC:N/SI:N/SA:N",
                8.7,
                "high",
            ),
            // CVE-2014-6271, Shellshock.
            (
                "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:H/SI:H/SA:H",
                10.0,
                "critical",
            ),
            // CVE-2013-1937, phpMyAdmin reflected XSS.
            (
                "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:A/VC:N/VI:N/VA:N/SC:L/SI:L/SA:N",
                5.1,
                "medium",
            ),
            // CVE-2016-5729, Lenovo BIOS: local, high privileges.
            (
                "CVSS:4.0/AV:L/AC:L/AT:N/PR:H/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N",
                8.4,
                "high",
            ),
        ] {
            let s = ok(vector);
            assert_eq!(
                (s.version, s.score, s.severity),
                ("4.0", expected, severity),
                "{vector}"
            );
            assert_eq!(s.nomenclature.as_deref(), Some("CVSS-B"));
        }
    }

    #[test]
    fn bad_vectors_name_the_metric() {
        assert!(err("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N").contains("metric A"));
        let dup = err("CVSS:3.1/AV:N/AV:L/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N");
        assert!(dup.contains("duplicate") && dup.contains("AV"), "{dup}");
        assert!(err("CVSS:3.1/AV:Q/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N").contains("AV"));
        assert!(err("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:N/VA:N/SC:N/SI:N").contains("SA"));
        let dup = err("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VC:H/VI:N/VA:N/SC:N/SI:N/SA:N");
        assert!(dup.contains("duplicate") && dup.contains("VC"), "{dup}");
        assert!(err("CVSS:3.1/AV:N/XX:Y").contains("XX"));
        assert!(err("CVSS:2.0/AV:N").contains("2.0"));
        assert!(err("AV:N/AC:L/Au:N/C:P/I:N/A:N").contains("prefix"));
        assert!(err("").contains("empty"));
        assert!(err(&"CVSS:3.1/AV:N".repeat(100_000)).contains("bytes"));
    }
}
