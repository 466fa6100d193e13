//! Reading and appending the ledger file, under `flock(2)`.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::{Body, Event, Finding, Findings, LEDGER_PATH, Problem, Ruling, Sighting, State};
use super::{Verdict, sha256_hex};
use crate::records::Timestamp;

/// Why the ledger could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// A system call on the file failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// `adjudicate` was given an id the ledger does not have (or a prefix of several).
    #[error("{path}: {why}")]
    Unknown {
        /// The file.
        path: PathBuf,
        /// Which id, and what the ledger has.
        why: String,
    },
}

/// The ledger file of a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ledger {
    path: PathBuf,
}

/// The ledger as read: its events (each with its line), the findings they fold into, and
/// the lines that were skipped.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The events that parsed, with their 1-based lines, in ledger order.
    pub events: Vec<(usize, Event)>,
    /// The findings.
    pub findings: Findings,
    /// The skipped lines.
    pub problems: Vec<Problem>,
}

/// What became of one recorded sighting.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The finding it was merged into (or introduced).
    pub id: String,
    /// True when the ledger had no such finding before.
    pub new: bool,
    /// The finding's state: a sighting never changes it.
    pub state: State,
    /// The finding's latest verdict, when a person has ruled.
    pub verdict: Option<super::Ruled>,
}

fn io<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(std::io::Error) -> LedgerError + 'a {
    move |source| LedgerError::Io {
        path: path.to_owned(),
        op,
        source,
    }
}

/// Takes `lock` on `file`, retrying when a signal interrupts the wait.
fn lock(path: &Path, mut file: File, arg: FlockArg) -> Result<Flock<File>, LedgerError> {
    loop {
        match Flock::lock(file, arg) {
            Ok(l) => return Ok(l),
            Err((f, Errno::EINTR)) => file = f,
            Err((_, e)) => {
                return Err(LedgerError::Io {
                    path: path.to_owned(),
                    op: "flock",
                    source: std::io::Error::from(e),
                });
            }
        }
    }
}

/// A fresh event id: a hash of the time, the process, a counter and the finding.
fn event_id(finding: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let key = format!("{nanos}\0{}\0{n}\0{finding}", std::process::id());
    format!("E-{}", &sha256_hex(key.as_bytes())[..16])
}

/// Parses a ledger's bytes: each line that does not parse, repeats an event id or rules on
/// an unknown finding is a [`Problem`] and skipped; the others are folded.
#[must_use]
pub fn parse(bytes: &[u8]) -> Loaded {
    let mut events = Vec::new();
    let mut problems = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut chunks: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // The text after the last newline: empty for a well-formed file.
    let tail = chunks.pop().filter(|t| !t.is_empty());
    let last = chunks.len() + 1;
    let lines = chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| (i + 1, c, false))
        .chain(tail.map(|t| (last, t, true)));
    for (line, chunk, unterminated) in lines {
        let problem = |message: String| Problem {
            line,
            message,
            truncated: false,
        };
        let text = match std::str::from_utf8(chunk) {
            Ok(t) => t,
            Err(e) => {
                problems.push(Problem {
                    truncated: unterminated,
                    ..problem(format!("not UTF-8 ({e}); skipped"))
                });
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match Event::parse(text) {
            Ok(e) => {
                if let Some(first) = seen.get(&e.event) {
                    problems.push(problem(format!(
                        "duplicate event id `{}` (first on line {first}); skipped",
                        e.event
                    )));
                    continue;
                }
                seen.insert(e.event.clone(), line);
                events.push((line, e));
            }
            Err(why) if unterminated => problems.push(Problem {
                truncated: true,
                ..problem(format!(
                    "the last line is cut short (no newline; a writer stopped mid-line): {why}; \
                     skipped"
                ))
            }),
            Err(why) => problems.push(problem(format!("{why}; skipped"))),
        }
    }
    let (findings, more) = Findings::fold(events.iter().map(|(l, e)| (*l, e)));
    problems.extend(more);
    problems.sort_by_key(|p| p.line);
    Loaded {
        events,
        findings,
        problems,
    }
}

impl Ledger {
    /// The ledger at `path`.
    #[must_use]
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The ledger of the project in `dir` ([`LEDGER_PATH`] below it).
    #[must_use]
    pub fn in_project(dir: &Path) -> Self {
        Self::at(dir.join(LEDGER_PATH))
    }

    /// The file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the ledger under a shared lock (no writer is mid-line); a missing file is an
    /// empty ledger.
    ///
    /// # Errors
    /// [`LedgerError::Io`] when it exists and cannot be read.
    pub fn read(&self) -> Result<Loaded, LedgerError> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Loaded::default()),
            Err(e) => return Err(io(&self.path, "open")(e)),
        };
        let mut file = lock(&self.path, file, FlockArg::LockShared)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(io(&self.path, "read"))?;
        Ok(parse(&bytes))
    }

    /// Opens the ledger for appending (creating it and its directory), takes the exclusive
    /// lock, reads it, lets `plan` choose the events to add, and appends them with one write.
    fn append<T>(
        &self,
        plan: impl FnOnce(&Loaded) -> Result<(Vec<Event>, T), String>,
    ) -> Result<T, LedgerError> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir, "create directory"))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&self.path)
            .map_err(io(&self.path, "open"))?;
        let mut file = lock(&self.path, file, FlockArg::LockExclusive)?;
        file.seek(SeekFrom::Start(0))
            .map_err(io(&self.path, "seek"))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(io(&self.path, "read"))?;
        let loaded = parse(&bytes);
        let (events, out) = plan(&loaded).map_err(|why| LedgerError::Unknown {
            path: self.path.clone(),
            why,
        })?;
        if events.is_empty() {
            return Ok(out);
        }
        let mut buf = String::new();
        // A line cut short by a crash stays a line of its own (reported, skipped).
        if bytes.last().is_some_and(|b| *b != b'\n') {
            buf.push('\n');
        }
        for e in &events {
            buf.push_str(&e.to_line());
            buf.push('\n');
        }
        file.write_all(buf.as_bytes())
            .map_err(io(&self.path, "write"))?;
        file.sync_data().map_err(io(&self.path, "sync"))?;
        Ok(out)
    }

    /// Appends a sighting for each of `sightings`, merged into the findings the ledger has
    /// (by identity, or by the scanner's fingerprint): never a duplicate finding, never a
    /// changed verdict.
    ///
    /// # Errors
    /// [`LedgerError::Io`].
    pub fn record(
        &self,
        sightings: &[Sighting],
        by: &str,
        run: Option<&str>,
        commit: Option<&str>,
    ) -> Result<Vec<Recorded>, LedgerError> {
        self.append(|loaded| {
            let at = Timestamp::now();
            let mut events = Vec::new();
            let mut out = Vec::new();
            let mut batch = loaded.findings.clone();
            for s in sightings {
                let id = batch.id_for(s);
                let known: Option<&Finding> = loaded.findings.findings.get(&id);
                out.push(Recorded {
                    id: id.clone(),
                    new: known.is_none(),
                    state: known.map_or(State::Open, |f| f.state),
                    verdict: known.and_then(|f| f.verdicts.last().cloned()),
                });
                let e = Event {
                    event: event_id(&id),
                    finding: id,
                    at,
                    by: by.to_owned(),
                    run: run.map(str::to_owned),
                    commit: commit.map(str::to_owned),
                    body: Body::Sighting(Box::new(s.clone())),
                };
                // Later sightings of the batch see this one (one scan's duplicates merge).
                let (one, _) = Findings::fold([(0, &e)]);
                for (k, v) in one.findings {
                    batch.findings.entry(k).or_insert(v);
                }
                for (k, v) in one.aliases {
                    batch.aliases.entry(k).or_insert(v);
                }
                events.push(e);
            }
            Ok((events, out))
        })
    }

    /// Appends a person's verdict on the finding `id` (or the one whose id starts with it),
    /// and returns the finding as it now is.
    ///
    /// # Errors
    /// [`LedgerError::Unknown`] when no finding has that id; [`LedgerError::Io`].
    pub fn adjudicate(
        &self,
        id: &str,
        state: Verdict,
        note: &str,
        by: &str,
        commit: Option<&str>,
    ) -> Result<Finding, LedgerError> {
        self.append(|loaded| {
            let f = loaded.findings.resolve(id)?;
            let e = Event {
                event: event_id(&f.id),
                finding: f.id.clone(),
                at: Timestamp::now(),
                by: by.to_owned(),
                run: None,
                commit: commit.map(str::to_owned),
                body: Body::Verdict(Ruling {
                    state,
                    note: note.to_owned(),
                }),
            };
            let mut after = loaded
                .events
                .iter()
                .map(|(l, e)| (*l, e))
                .collect::<Vec<_>>();
            after.push((0, &e));
            let (folded, _) = Findings::fold(after);
            let now = folded
                .findings
                .get(&f.id)
                .cloned()
                .ok_or_else(|| format!("`{}` vanished while ruling", f.id))?;
            Ok((vec![e], now))
        })
    }
}
