//! The findings ledger: `.bee/findings/ledger.jsonl`, append-only, one JSON event a line,
//! meant to be committed and reviewed in a pull request (feature `findings`).
//!
//! Why one file of this length: the ledger's event types and the fold that replays them into
//! findings are read together (a rule of the fold is a rule of the format); the tests are in
//! `tests.rs`.
//!
//! The ledger holds *events*, not rows. A finding's **sightings** (a scanner or the model saw
//! it, at a time, in a run, at a commit) and its **verdicts** (a person ruled on it with
//! `bee findings adjudicate`) are appended; a finding is what its events fold into
//! ([`Findings::fold`]).
//!
//! * **Identity excludes the line number**, so moved code keeps its finding: the tool, the
//!   rule, the repository-relative path, a hash of the matched text with its whitespace
//!   normalised, and an occurrence index (the n-th match of the same text by the same rule in
//!   the same file). The finding's id is a hash of that identity ([`Identity::id`]); a
//!   scanner's own fingerprint is kept as an alias, and a sighting whose identity is new but
//!   whose alias is known merges into the finding that has it.
//! * **Re-running merges**: a sighting of a known finding is one more sighting of it, never a
//!   second finding.
//! * **Only a person rules.** The state of a finding is its latest verdict, in ledger order;
//!   sightings never change it. A rediscovery after a verdict is counted
//!   ([`Finding::seen_since_verdict`]), never a reopening.
//! * Writers take an exclusive `flock(2)` and append each batch of lines with one write, so
//!   parallel episodes and subagents never interleave or lose a line; readers take a shared
//!   lock. A truncated last line (a writer that crashed mid-write) is reported and skipped,
//!   and the next append starts on a line of its own.

pub mod git;
mod ledger;
pub mod sarif;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::records::Timestamp;

pub use ledger::{Ledger, LedgerError, Recorded};

/// Where the ledger lives, relative to the project directory.
pub const LEDGER_PATH: &str = ".bee/findings/ledger.jsonl";

/// The ledger format written by this bee (`"v"` of every event).
pub const LEDGER_VERSION: u32 = 1;

/// The source name of findings the model records with `record_finding`.
pub const MODEL_TOOL: &str = "model";

/// Text with its layout taken out, which is what a match's hash is taken of, so that
/// re-indented or re-wrapped code keeps its finding: a run of whitespace between two word
/// characters (letters, digits, `_`) becomes one space, and any other is removed.
#[must_use]
pub fn normalise(text: &str) -> String {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut pending = false;
    for c in text.trim().chars() {
        if c.is_whitespace() {
            pending = true;
            continue;
        }
        if pending && word(c) && out.chars().next_back().is_some_and(word) {
            out.push(' ');
        }
        pending = false;
        out.push(c);
    }
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A repository-relative path as the ledger writes it: `/`-separated, no `.` or `..`
/// segment, never absolute.
///
/// # Errors
/// When `path` is empty, absolute, or climbs out with `..`.
pub fn relative_path(path: &str) -> Result<String, String> {
    let trimmed = path.trim();
    if trimmed.is_empty() {
        return Err("the path is empty".to_owned());
    }
    if trimmed.starts_with('/') {
        return Err(format!(
            "`{trimmed}` is absolute; a finding's path is relative to the repository"
        ));
    }
    let mut parts = Vec::new();
    for seg in trimmed.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                return Err(format!(
                    "`{trimmed}` leaves the repository (`..`); a finding's path is inside it"
                ));
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        return Err(format!("`{trimmed}` names no file"));
    }
    Ok(parts.join("/"))
}

/// What makes two sightings the same finding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// The tool that saw it: `opengrep`, `codeql`, or `model`.
    pub tool: String,
    /// The rule id (scanners) or category (the model).
    pub rule: String,
    /// The repository-relative path.
    pub path: String,
    /// SHA-256 (hex) of the matched text, its layout normalised ([`normalise`]).
    pub text_hash: String,
    /// Which of the matches of the same text by the same rule in the same file, from 0 in
    /// file order.
    pub occurrence: u32,
}

impl Identity {
    /// The identity of a match of `text`.
    #[must_use]
    pub fn new(tool: &str, rule: &str, path: &str, text: &str, occurrence: u32) -> Self {
        Self {
            tool: tool.to_owned(),
            rule: rule.to_owned(),
            path: path.to_owned(),
            text_hash: sha256_hex(normalise(text).as_bytes()),
            occurrence,
        }
    }

    /// The finding id: `F-` and 16 hex digits of a hash of the identity.
    #[must_use]
    pub fn id(&self) -> String {
        let key = format!(
            "{}\0{}\0{}\0{}\0{}",
            self.tool, self.rule, self.path, self.text_hash, self.occurrence
        );
        format!("F-{}", &sha256_hex(key.as_bytes())[..16])
    }
}

/// Where a sighting was, lines and columns 1-based (informative: not part of the identity).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Location {
    /// The repository-relative path.
    pub path: String,
    /// The first line.
    pub start_line: u32,
    /// The first column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_column: Option<u32>,
    /// The last line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u32>,
    /// The column after the last character.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_column: Option<u32>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.path, self.start_line)?;
        if let Some(c) = self.start_column {
            write!(f, ":{c}")?;
        }
        Ok(())
    }
}

/// A severity computed from a CVSS vector (never asserted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cvss {
    /// The vector as the `cvss` crate writes it.
    pub vector: String,
    /// `3.0`, `3.1` or `4.0`.
    pub version: String,
    /// The base score.
    pub score: f64,
    /// `none`, `low`, `medium`, `high` or `critical`.
    pub severity: String,
}

impl Cvss {
    /// Scores `vector`.
    ///
    /// # Errors
    /// The `cvss` tool's message for a vector that does not score.
    pub fn from_vector(vector: &str) -> Result<Self, String> {
        let s = crate::tools::cvss::score(vector)?;
        Ok(Self {
            vector: s.canonical,
            version: s.version.to_owned(),
            score: s.score,
            severity: s.severity.to_owned(),
        })
    }
}

/// SARIF's levels, which scanners report and CVSS severities map onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// A serious problem.
    Error,
    /// A problem.
    Warning,
    /// Worth a look.
    Note,
    /// Informational.
    None,
}

impl Level {
    /// The level of a CVSS severity: critical and high are errors, medium a warning, the rest
    /// notes.
    #[must_use]
    pub fn of_severity(severity: &str) -> Self {
        match severity {
            "critical" | "high" => Self::Error,
            "medium" => Self::Warning,
            _ => Self::Note,
        }
    }

    /// The SARIF spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Note => "note",
            Self::None => "none",
        }
    }
}

/// One sighting of a finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sighting {
    /// What makes it this finding.
    pub identity: Identity,
    /// The scanner's own fingerprint of the result, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// A one-line title.
    pub title: String,
    /// The scanner's message, or the model's evidence.
    pub message: String,
    /// Where it was seen this time.
    pub location: Location,
    /// The level: the scanner's, or the CVSS severity's.
    pub level: Level,
    /// The CVSS score, when a vector was given (the model's findings always have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cvss: Option<Cvss>,
}

/// What a person ruled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Not a problem: the tool was wrong.
    FalsePositive,
    /// A problem that will not be fixed.
    WontFix,
    /// A real problem.
    Confirmed,
    /// A problem that has been fixed.
    Fixed,
}

impl Verdict {
    /// Every verdict, as `bee findings adjudicate --state` spells it.
    pub const ALL: [Verdict; 4] = [
        Verdict::FalsePositive,
        Verdict::WontFix,
        Verdict::Confirmed,
        Verdict::Fixed,
    ];

    /// The spelling in the ledger and on the command line.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FalsePositive => "false-positive",
            Self::WontFix => "wont-fix",
            Self::Confirmed => "confirmed",
            Self::Fixed => "fixed",
        }
    }

    /// Parses the spelling of [`Verdict::as_str`].
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// A finding's state: open until a person rules, then the latest verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// No verdict yet.
    Open,
    /// See [`Verdict::FalsePositive`].
    FalsePositive,
    /// See [`Verdict::WontFix`].
    WontFix,
    /// See [`Verdict::Confirmed`].
    Confirmed,
    /// See [`Verdict::Fixed`].
    Fixed,
}

impl State {
    /// Every state, as `--state` spells it.
    pub const ALL: [State; 5] = [
        State::Open,
        State::FalsePositive,
        State::WontFix,
        State::Confirmed,
        State::Fixed,
    ];

    /// The spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::FalsePositive => "false-positive",
            Self::WontFix => "wont-fix",
            Self::Confirmed => "confirmed",
            Self::Fixed => "fixed",
        }
    }

    /// Parses the spelling of [`State::as_str`].
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl From<Verdict> for State {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::FalsePositive => Self::FalsePositive,
            Verdict::WontFix => Self::WontFix,
            Verdict::Confirmed => Self::Confirmed,
            Verdict::Fixed => Self::Fixed,
        }
    }
}

/// A person's ruling, as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ruling {
    /// The verdict.
    pub state: Verdict,
    /// Why.
    pub note: String,
}

/// What an event says.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// A tool or the model saw the finding.
    Sighting(Box<Sighting>),
    /// A person ruled on it.
    Verdict(Ruling),
}

impl Body {
    /// `sighting` or `verdict`.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Sighting(_) => "sighting",
            Self::Verdict(_) => "verdict",
        }
    }
}

/// One line of the ledger.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// This event's own id (`E-…`), unique in the ledger.
    pub event: String,
    /// The finding it is about.
    pub finding: String,
    /// When.
    pub at: Timestamp,
    /// Who or what: a scanner's name, `model`, or the person who ruled.
    pub by: String,
    /// The run (`bee run` / `bee repl` run id) a sighting was made in.
    pub run: Option<String>,
    /// The repository's `HEAD` commit at the time, when there is one.
    pub commit: Option<String>,
    /// What happened.
    pub body: Body,
}

/// An event as written: `kind` names which of `sighting` and `verdict` it carries.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    v: u32,
    event: String,
    kind: String,
    finding: String,
    at: Timestamp,
    by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sighting: Option<Sighting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    verdict: Option<Ruling>,
}

impl Event {
    /// The event as one line of JSON, without the newline.
    #[must_use]
    pub fn to_line(&self) -> String {
        let (sighting, verdict) = match &self.body {
            Body::Sighting(s) => (Some(s.as_ref().clone()), None),
            Body::Verdict(r) => (None, Some(r.clone())),
        };
        let raw = RawEvent {
            v: LEDGER_VERSION,
            event: self.event.clone(),
            kind: self.body.kind().to_owned(),
            finding: self.finding.clone(),
            at: self.at,
            by: self.by.clone(),
            run: self.run.clone(),
            commit: self.commit.clone(),
            sighting,
            verdict,
        };
        // Strings, numbers and maps with string keys always serialise.
        serde_json::to_string(&raw).unwrap_or_default()
    }

    /// Parses one line.
    ///
    /// # Errors
    /// What is wrong with it, naming the key where there is one.
    pub fn parse(line: &str) -> Result<Self, String> {
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let Some(obj) = value.as_object() else {
            return Err("not a JSON object".to_owned());
        };
        match obj.get("v").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(LEDGER_VERSION) => {}
            Some(v) => {
                return Err(format!(
                    "key `v`: format {v}, which this bee does not read (it reads {LEDGER_VERSION})"
                ));
            }
            None => return Err("key `v`: missing or not a number".to_owned()),
        }
        match obj.get("kind").and_then(serde_json::Value::as_str) {
            Some("sighting" | "verdict") => {}
            Some(other) => {
                return Err(format!(
                    "key `kind`: unknown event kind `{other}` (a ledger has `sighting` and \
                     `verdict` events)"
                ));
            }
            None => return Err("key `kind`: missing or not a string".to_owned()),
        }
        let raw: RawEvent = serde_json::from_value(value).map_err(|e| e.to_string())?;
        let body = match (raw.kind.as_str(), raw.sighting, raw.verdict) {
            ("sighting", Some(s), None) => Body::Sighting(Box::new(s)),
            ("verdict", None, Some(r)) => Body::Verdict(r),
            (kind, _, _) => {
                return Err(format!(
                    "a `{kind}` event carries exactly one key `{kind}` (and no other of \
                     `sighting`, `verdict`)"
                ));
            }
        };
        if !raw.finding.starts_with("F-") {
            return Err(format!(
                "key `finding`: `{}` is not a finding id (`F-…`)",
                raw.finding
            ));
        }
        Ok(Self {
            event: raw.event,
            finding: raw.finding,
            at: raw.at,
            by: raw.by,
            run: raw.run,
            commit: raw.commit,
            body,
        })
    }
}

/// A line of the ledger that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The line, 1-based.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
    /// True for a last line with no newline that does not parse: a writer that crashed.
    pub truncated: bool,
}

/// A verdict as a finding keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ruled {
    /// The verdict.
    pub state: Verdict,
    /// Why.
    pub note: String,
    /// Who.
    pub by: String,
    /// When.
    pub at: Timestamp,
    /// The commit at the time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// What the events of one finding fold into.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The id.
    pub id: String,
    /// Its identity (the first sighting's).
    pub identity: Identity,
    /// The scanners' fingerprints seen for it.
    pub aliases: BTreeSet<String>,
    /// The latest sighting.
    pub latest: Sighting,
    /// How many sightings.
    pub sightings: usize,
    /// When first and last seen.
    pub first_seen: Timestamp,
    /// See `first_seen`.
    pub last_seen: Timestamp,
    /// The runs it was seen in, in ledger order of their first sighting.
    pub runs: Vec<String>,
    /// The commit of the latest sighting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Open, or the latest verdict.
    pub state: State,
    /// Every verdict, oldest first.
    pub verdicts: Vec<Ruled>,
    /// Sightings after the latest verdict: a rediscovery, which never changes the state.
    pub seen_since_verdict: usize,
}

/// The findings of a ledger, by id, and the problems of the lines that were skipped.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Findings {
    /// By id.
    pub findings: BTreeMap<String, Finding>,
    /// The scanners' fingerprints, each with the finding that has it.
    pub aliases: BTreeMap<String, String>,
    /// The run of the latest sighting in the ledger.
    pub latest_run: Option<String>,
}

impl Findings {
    /// Folds `events` (in ledger order, each with its line) into findings. A verdict for a
    /// finding no sighting has introduced is a problem of its line, and skipped.
    #[must_use]
    pub fn fold<'a>(events: impl IntoIterator<Item = (usize, &'a Event)>) -> (Self, Vec<Problem>) {
        let mut out = Self::default();
        let mut problems = Vec::new();
        for (line, e) in events {
            match &e.body {
                Body::Sighting(s) => {
                    if let Some(alias) = &s.alias {
                        out.aliases
                            .entry(alias.clone())
                            .or_insert_with(|| e.finding.clone());
                    }
                    if let Some(run) = &e.run {
                        out.latest_run = Some(run.clone());
                    }
                    let f = out
                        .findings
                        .entry(e.finding.clone())
                        .or_insert_with(|| Finding {
                            id: e.finding.clone(),
                            identity: s.identity.clone(),
                            aliases: BTreeSet::new(),
                            latest: s.as_ref().clone(),
                            sightings: 0,
                            first_seen: e.at,
                            last_seen: e.at,
                            runs: Vec::new(),
                            commit: None,
                            state: State::Open,
                            verdicts: Vec::new(),
                            seen_since_verdict: 0,
                        });
                    f.sightings += 1;
                    f.latest = s.as_ref().clone();
                    f.first_seen = f.first_seen.min(e.at);
                    f.last_seen = f.last_seen.max(e.at);
                    f.commit.clone_from(&e.commit);
                    if let Some(alias) = &s.alias {
                        f.aliases.insert(alias.clone());
                    }
                    if let Some(run) = &e.run
                        && !f.runs.contains(run)
                    {
                        f.runs.push(run.clone());
                    }
                    if !f.verdicts.is_empty() {
                        f.seen_since_verdict += 1;
                    }
                }
                Body::Verdict(r) => match out.findings.get_mut(&e.finding) {
                    Some(f) => {
                        f.state = r.state.into();
                        f.seen_since_verdict = 0;
                        f.verdicts.push(Ruled {
                            state: r.state,
                            note: r.note.clone(),
                            by: e.by.clone(),
                            at: e.at,
                            commit: e.commit.clone(),
                        });
                    }
                    None => problems.push(Problem {
                        line,
                        message: format!(
                            "a verdict for `{}`, which no earlier sighting introduces; skipped",
                            e.finding
                        ),
                        truncated: false,
                    }),
                },
            }
        }
        (out, problems)
    }

    /// The finding `id`, or the one finding whose id starts with `id` (at least `F-` and four
    /// digits).
    ///
    /// # Errors
    /// When none has it, or several start with it.
    pub fn resolve(&self, id: &str) -> Result<&Finding, String> {
        if let Some(f) = self.findings.get(id) {
            return Ok(f);
        }
        let matches: Vec<&Finding> = if id.len() >= 6 {
            self.findings
                .values()
                .filter(|f| f.id.starts_with(id))
                .collect()
        } else {
            Vec::new()
        };
        match matches.as_slice() {
            [one] => Ok(one),
            [] => Err(format!(
                "there is no finding `{id}` in the ledger ({} finding(s); `bee findings list` \
                 shows them)",
                self.findings.len()
            )),
            many => Err(format!(
                "`{id}` is the start of {} finding ids ({}); give more of it",
                many.len(),
                many.iter()
                    .map(|f| f.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// The id a new sighting belongs to: its identity's, or — when that is new and the
    /// scanner's fingerprint is known — the finding that has the fingerprint.
    #[must_use]
    pub fn id_for(&self, s: &Sighting) -> String {
        let own = s.identity.id();
        if self.findings.contains_key(&own) {
            return own;
        }
        s.alias
            .as_ref()
            .and_then(|a| self.aliases.get(a))
            .cloned()
            .unwrap_or(own)
    }
}

#[cfg(test)]
mod tests;

/// Where a session's tools record findings: the ledger, the commit the session started at,
/// and the run.
#[derive(Debug)]
pub struct Recorder {
    /// The ledger.
    pub ledger: Ledger,
    /// The repository's `HEAD` when the session started.
    pub commit: Option<String>,
    /// The run id, set once: by [`Recorder::with_run`], or by the command that shares the
    /// cell ([`Recorder::in_run`]) when it knows its run id.
    run: Arc<OnceLock<String>>,
}

impl Recorder {
    /// Records into `ledger`, at `commit`, in no run until one is named.
    #[must_use]
    pub fn new(ledger: Ledger, commit: Option<String>) -> Self {
        Self {
            ledger,
            commit,
            run: Arc::default(),
        }
    }

    /// The same, in the run `run`.
    #[must_use]
    pub fn with_run(self, run: &str) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(run.to_owned());
        self.in_run(Arc::new(cell))
    }

    /// The same, in the run `cell` holds once its command sets it (`bee run` builds its tools
    /// before its records directory, and so its run id, is opened).
    #[must_use]
    pub fn in_run(self, cell: Arc<OnceLock<String>>) -> Self {
        Self { run: cell, ..self }
    }

    /// The run sightings are recorded in.
    #[must_use]
    pub fn run(&self) -> Option<&str> {
        self.run.get().map(String::as_str)
    }

    /// Records `sightings` made by `by` ([`Ledger::record`]).
    ///
    /// # Errors
    /// As [`Ledger::record`].
    pub fn record(&self, sightings: &[Sighting], by: &str) -> Result<Vec<Recorded>, LedgerError> {
        self.ledger
            .record(sightings, by, self.run(), self.commit.as_deref())
    }
}
