//! The metrics store: an SQLite database (`metrics.sqlite`) fed from transcript events.
//!
//! Why one file of this length: the schema (`schema_v*.sql`), the ingest and the queries change
//! together under one `SCHEMA_VERSION`; the tests are the last 100 lines.
//!
//! The transcripts are the source of truth; the store is an index over them that
//! [`Store::rebuild`] can recreate at any time. Ingesting is idempotent: each episode row keeps
//! the last sequence number it took in, and older events are skipped.
//!
//! # Locking
//!
//! A [`Store`] holds one connection behind a mutex and is `Send + Sync`: the concurrent
//! episodes of a run share one handle (`Arc<Store>`), and each [`Store::ingest`] takes the
//! mutex for one short transaction, so there is one writer per process. The database is in
//! WAL mode, so `bee metrics` in another process reads while a run writes; a second writing
//! process waits up to [`BUSY_TIMEOUT`] for the write lock.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction, params};

use super::event::{Cost, Event, EventBody, ExitStatus, StopReason};

/// `model_calls.price_source` of a call whose model has no price.
pub(crate) const PRICE_UNKNOWN: &str = "unknown";

/// `model_calls.price_source` of a call whose token counts were not all reported.
pub(crate) const TOKENS_UNKNOWN: &str = "unknown tokens";
use super::summary::transcripts_in;
use super::transcript::{TranscriptError, read_transcript};

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: u32 = 4;

/// How long a writer waits for another process's write lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The store's file name inside a records directory.
pub const STORE_FILE: &str = "metrics.sqlite";

/// The migrations, in order: migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    include_str!("schema_v1.sql"),
    include_str!("schema_v2.sql"),
    include_str!("schema_v3.sql"),
    include_str!("schema_v4.sql"),
];

/// Why the store could not be opened, written or read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file does not exist (opening for reading never creates one).
    #[error("{path}: no metrics database here")]
    Missing {
        /// The path looked at.
        path: PathBuf,
    },
    /// There are no transcripts to build a store from.
    #[error("{path}: no transcripts (<run id>/<episode id>.jsonl) here")]
    NoTranscripts {
        /// The records directory.
        path: PathBuf,
    },
    /// The file is not an SQLite database, is damaged, or is not a bee metrics database.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The database.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The database was written by a newer bee.
    #[error("{path}: schema version {found} is newer than this bee knows ({supported})")]
    NewerSchema {
        /// The database.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// [`SCHEMA_VERSION`].
        supported: u32,
    },
    /// An SQLite operation failed.
    #[error("{path}: {context}: {source}")]
    Sqlite {
        /// The database.
        path: PathBuf,
        /// What bee was doing.
        context: &'static str,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A transcript could not be read.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// A thread panicked while holding the store's connection.
    #[error("{path}: the store's lock was poisoned by a panic")]
    Poisoned {
        /// The database.
        path: PathBuf,
    },
}

impl StoreError {
    /// Whether the database itself is at fault (damaged, foreign or from a newer bee).
    #[must_use]
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Self::Corrupt { .. } | Self::NewerSchema { .. })
    }
}

pub(crate) fn sql_error<'p>(
    path: &'p Path,
    context: &'static str,
) -> impl FnOnce(rusqlite::Error) -> StoreError + 'p {
    move |source| match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_owned(),
            reason: format!("not a usable SQLite database ({source})"),
        },
        _ => StoreError::Sqlite {
            path: path.to_owned(),
            context,
            source,
        },
    }
}

/// A handle on a metrics database. See the module documentation for the locking.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
}

/// What [`Store::rebuild`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RebuildReport {
    /// Run directories with at least one transcript.
    pub runs: usize,
    /// Transcripts read.
    pub episodes: usize,
    /// Events taken in.
    pub events: usize,
    /// Transcripts whose last line was cut short and left out.
    pub truncated: Vec<PathBuf>,
}

impl Store {
    /// Opens the database at `path` for writing, creating it (and its directory) if needed,
    /// and brings its schema up to [`SCHEMA_VERSION`].
    ///
    /// # Errors
    /// When the file cannot be opened, is not a bee metrics database, or is from a newer bee.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.to_owned(),
                source,
            })?;
        }
        let mut conn = Connection::open(path).map_err(sql_error(path, "opening"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sql_error(path, "setting the busy timeout"))?;
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            .map_err(sql_error(path, "switching to WAL"))?;
        conn.execute_batch("PRAGMA synchronous=NORMAL")
            .map_err(sql_error(path, "setting synchronous"))?;
        migrate(&mut conn, path)?;
        Ok(Self {
            conn: Mutex::new(conn),
            path: path.to_owned(),
        })
    }

    /// Opens an existing database for reading only; never creates or changes a file.
    ///
    /// # Errors
    /// [`StoreError::Missing`] when there is no file; [`StoreError::Corrupt`] or
    /// [`StoreError::NewerSchema`] when it is not a database this bee can read.
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        if !path.is_file() {
            return Err(StoreError::Missing {
                path: path.to_owned(),
            });
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(sql_error(path, "opening"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sql_error(path, "setting the busy timeout"))?;
        let version = schema_version(&conn, path)?;
        match version {
            None => {
                return Err(StoreError::Corrupt {
                    path: path.to_owned(),
                    reason: "not a bee metrics database (no schema_version table)".to_owned(),
                });
            }
            Some(found) if found > SCHEMA_VERSION => {
                return Err(StoreError::NewerSchema {
                    path: path.to_owned(),
                    found,
                    supported: SCHEMA_VERSION,
                });
            }
            Some(found) if found < SCHEMA_VERSION => {
                return Err(StoreError::Corrupt {
                    path: path.to_owned(),
                    reason: format!(
                        "schema version {found} is older than {SCHEMA_VERSION}; open it for \
                         writing once (or rebuild it) to migrate"
                    ),
                });
            }
            Some(_) => {}
        }
        conn.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0))
            .map_err(sql_error(path, "checking"))
            .and_then(|ok| {
                if ok == "ok" {
                    Ok(())
                } else {
                    Err(StoreError::Corrupt {
                        path: path.to_owned(),
                        reason: format!("damaged: {ok}"),
                    })
                }
            })?;
        Ok(Self {
            conn: Mutex::new(conn),
            path: path.to_owned(),
        })
    }

    /// The database's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version recorded in the database.
    ///
    /// # Errors
    /// When it cannot be read.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.with_conn(|conn, path| Ok(schema_version(conn, path)?.unwrap_or(0)))
    }

    pub(crate) fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut Connection, &Path) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().map_err(|_| StoreError::Poisoned {
            path: self.path.clone(),
        })?;
        f(&mut conn, &self.path)
    }

    /// Takes in one event of the episode `episode_id` of run `run_id`, in one transaction.
    /// Returns `false` when the event was already taken in (its sequence number is not
    /// past the episode's last one).
    ///
    /// # Errors
    /// When the database refuses the write.
    pub fn ingest(
        &self,
        run_id: &str,
        episode_id: &str,
        event: &Event,
    ) -> Result<bool, StoreError> {
        self.with_conn(|conn, path| {
            let tx = conn
                .transaction()
                .map_err(sql_error(path, "starting a transaction"))?;
            let applied = apply(&tx, run_id, episode_id, event)
                .map_err(sql_error(path, "recording an event"))?;
            tx.commit().map_err(sql_error(path, "committing"))?;
            Ok(applied)
        })
    }

    /// Takes in a sequence of events of one episode, in one transaction; returns how many
    /// were new.
    ///
    /// # Errors
    /// When the database refuses the write; nothing is then written.
    pub fn ingest_all<'a>(
        &self,
        run_id: &str,
        episode_id: &str,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<usize, StoreError> {
        self.with_conn(|conn, path| {
            let tx = conn
                .transaction()
                .map_err(sql_error(path, "starting a transaction"))?;
            let mut n = 0;
            for event in events {
                if apply(&tx, run_id, episode_id, event)
                    .map_err(sql_error(path, "recording an event"))?
                {
                    n += 1;
                }
            }
            tx.commit().map_err(sql_error(path, "committing"))?;
            Ok(n)
        })
    }

    /// Removes everything recorded of the sessions `episode_ids` of run `run_id`, in one
    /// transaction: `bee run --resume` does so before rerunning an interrupted episode (and
    /// its subagents), whose transcript it has set aside, so that the rerun is taken in from
    /// its first event and the interrupted attempt is not counted.
    ///
    /// # Errors
    /// When the database refuses the write; nothing is then removed.
    pub fn forget(&self, run_id: &str, episode_ids: &[String]) -> Result<(), StoreError> {
        self.with_conn(|conn, path| {
            let tx = conn
                .transaction()
                .map_err(sql_error(path, "starting a transaction"))?;
            for id in episode_ids {
                for table in [
                    "model_calls",
                    "tool_calls",
                    "denials",
                    "subagents",
                    "episodes",
                ] {
                    tx.execute(
                        &format!("DELETE FROM {table} WHERE run_id = ?1 AND episode_id = ?2"),
                        params![run_id, id],
                    )
                    .map_err(sql_error(path, "forgetting an interrupted episode"))?;
                }
            }
            tx.commit().map_err(sql_error(path, "committing"))?;
            Ok(())
        })
    }

    /// Builds a fresh store at `db_path` from the transcripts under `records_dir`
    /// (`<run id>/<episode id>.jsonl`). The new database is built beside `db_path` under a
    /// temporary name and renamed over it when complete, so a failure leaves the old store as
    /// it was. Run it while no run is writing to `db_path`.
    ///
    /// # Errors
    /// [`StoreError::NoTranscripts`] when there is nothing to read; a transcript or database
    /// error otherwise.
    pub fn rebuild(records_dir: &Path, db_path: &Path) -> Result<RebuildReport, StoreError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        let mut runs = Vec::new();
        let entries = std::fs::read_dir(records_dir).map_err(io(records_dir))?;
        for entry in entries {
            let path = entry.map_err(io(records_dir))?.path();
            if path.is_dir() {
                let transcripts = transcripts_in(&path)?;
                if !transcripts.is_empty() {
                    let run_id = path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    runs.push((run_id, transcripts));
                }
            }
        }
        if runs.is_empty() {
            return Err(StoreError::NoTranscripts {
                path: records_dir.to_owned(),
            });
        }
        runs.sort();
        let file_name = db_path
            .file_name()
            .map_or_else(|| STORE_FILE.into(), |n| n.to_string_lossy().into_owned());
        let tmp = db_path.with_file_name(format!(".{file_name}.rebuild.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let built = (|| {
            let store = Store::open(&tmp)?;
            let mut report = RebuildReport {
                runs: runs.len(),
                ..RebuildReport::default()
            };
            for (run_id, transcripts) in &runs {
                for (episode_id, path) in transcripts {
                    let t = read_transcript(path)?;
                    if let Some(EventBody::EpisodeStarted(s)) = t.events.first().map(|e| &e.body)
                        && (&s.run_id, &s.episode_id) != (run_id, episode_id)
                    {
                        return Err(StoreError::Transcript(TranscriptError::Malformed {
                            path: path.clone(),
                            line: 1,
                            reason: format!(
                                "episode_started names {}/{}, but the file is {run_id}/{episode_id}.jsonl",
                                s.run_id, s.episode_id
                            ),
                        }));
                    }
                    if t.truncated_tail.is_some() {
                        report.truncated.push(path.clone());
                    }
                    report.events += store.ingest_all(run_id, episode_id, &t.events)?;
                    report.episodes += 1;
                }
            }
            // Fold the WAL into the main file so that one file can be renamed into place.
            store.with_conn(|conn, path| {
                conn.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0))
                    .map_err(sql_error(path, "leaving WAL mode"))
            })?;
            Ok::<_, StoreError>(report)
        })();
        let report = match built {
            Ok(r) => r,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        // The old database's WAL and shared-memory files belong to the old database.
        for suffix in ["-wal", "-shm"] {
            let mut side = db_path.as_os_str().to_owned();
            side.push(suffix);
            match std::fs::remove_file(&side) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(Path::new(&side))(e)),
            }
        }
        std::fs::rename(&tmp, db_path).map_err(io(db_path))?;
        Ok(report)
    }
}

fn schema_version(conn: &Connection, path: &Path) -> Result<Option<u32>, StoreError> {
    let has_table: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .map_err(sql_error(path, "reading the schema"))?;
    if !has_table {
        return Ok(None);
    }
    conn.query_row("SELECT max(version) FROM schema_version", [], |r| {
        r.get::<_, Option<u32>>(0)
    })
    .map(|v| Some(v.unwrap_or(0)))
    .map_err(sql_error(path, "reading the schema version"))
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sql_error(path, "starting the migration"))?;
    let tables: i64 = tx
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(sql_error(path, "reading the schema"))?;
    let current = match schema_version(&tx, path)? {
        Some(v) => v,
        None if tables == 0 => 0,
        None => {
            return Err(StoreError::Corrupt {
                path: path.to_owned(),
                reason: "not a bee metrics database (tables but no schema_version)".to_owned(),
            });
        }
    };
    if current > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_owned(),
            found: current,
            supported: SCHEMA_VERSION,
        });
    }
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
             version    INTEGER PRIMARY KEY,
             applied_at TEXT NOT NULL
         )",
    )
    .map_err(sql_error(path, "creating schema_version"))?;
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = u32::try_from(i + 1).unwrap_or(u32::MAX);
        if version <= current {
            continue;
        }
        tx.execute_batch(sql)
            .map_err(sql_error(path, "migrating the schema"))?;
        tx.execute(
            "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)",
            params![version, super::time::Timestamp::now().to_string()],
        )
        .map_err(sql_error(path, "recording the schema version"))?;
    }
    tx.commit()
        .map_err(sql_error(path, "committing the migration"))
}

/// Saturates: SQLite integers are signed 64-bit.
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn apply(tx: &Transaction<'_>, run: &str, ep: &str, event: &Event) -> rusqlite::Result<bool> {
    let seq = int(event.seq);
    let at = event.at.to_string();
    let last: Option<i64> = tx
        .query_row(
            "SELECT last_seq FROM episodes WHERE run_id = ?1 AND episode_id = ?2",
            params![run, ep],
            |r| r.get(0),
        )
        .optional()?;
    match last {
        Some(last) if seq <= last => return Ok(false),
        Some(_) => {}
        None => {
            tx.execute(
                "INSERT OR IGNORE INTO runs (run_id, started_at) VALUES (?1, ?2)",
                params![run, at],
            )?;
            tx.execute(
                "INSERT INTO episodes (run_id, episode_id, last_seq) VALUES (?1, ?2, 0)",
                params![run, ep],
            )?;
        }
    }
    match &event.body {
        EventBody::EpisodeStarted(s) => {
            tx.execute(
                "INSERT INTO runs (run_id, started_at) VALUES (?1, ?2)
                 ON CONFLICT (run_id) DO UPDATE SET started_at = min(started_at, excluded.started_at)",
                params![run, s.run_started_at.to_string()],
            )?;
            tx.execute(
                "UPDATE episodes SET scenario = ?3, model = ?4, provider = ?5, policy_source = ?6,
                     enforcement = ?7, workspace = ?8, started_at = ?9
                 WHERE run_id = ?1 AND episode_id = ?2",
                params![
                    run,
                    ep,
                    s.scenario,
                    s.model,
                    s.provider,
                    s.policy.source,
                    s.policy.enforcement.as_str(),
                    s.workspace,
                    at
                ],
            )?;
            if let Some(p) = &s.parent {
                tx.execute(
                    "UPDATE episodes SET parent_episode = ?3, parent_call = ?4, agent_role = ?5,
                         depth = ?6
                     WHERE run_id = ?1 AND episode_id = ?2",
                    params![run, ep, p.episode_id, p.call_id, p.role, p.depth],
                )?;
            }
        }
        EventBody::Subagent(a) => {
            tx.execute(
                "INSERT OR REPLACE INTO subagents (run_id, episode_id, call_id, role,
                     agent_episode, refused, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![run, ep, a.call_id, a.role, a.session_id, a.refused, at],
            )?;
        }
        EventBody::Message(_) => {}
        EventBody::ToolCall(c) => {
            tx.execute(
                "INSERT INTO tool_calls (run_id, episode_id, call_id, tool, at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (run_id, episode_id, call_id) DO UPDATE SET tool = excluded.tool, at = excluded.at",
                params![run, ep, c.call_id, c.tool, at],
            )?;
        }
        EventBody::ToolResult(r) => {
            let (code, signal) = match r.exit {
                Some(ExitStatus::Code(c)) => (Some(c), None),
                Some(ExitStatus::Signal(s)) => (None, Some(s)),
                None => (None, None),
            };
            tx.execute(
                "INSERT INTO tool_calls (run_id, episode_id, call_id, state, exit_code, exit_signal,
                     duration_ms, output_truncated, lost_records)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (run_id, episode_id, call_id) DO UPDATE SET state = excluded.state,
                     exit_code = excluded.exit_code, exit_signal = excluded.exit_signal,
                     duration_ms = excluded.duration_ms, output_truncated = excluded.output_truncated,
                     lost_records = excluded.lost_records",
                params![
                    run,
                    ep,
                    r.call_id,
                    r.state.as_str(),
                    code,
                    signal,
                    int(r.duration_ms),
                    r.truncated.is_some(),
                    int(r.lost_records)
                ],
            )?;
        }
        EventBody::Denial(d) => {
            tx.execute(
                "INSERT INTO denials (run_id, episode_id, seq, call_id, hook, explanation,
                     target_kind, target, missing, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    run,
                    ep,
                    seq,
                    d.call_id,
                    d.hook.as_str(),
                    d.explanation,
                    d.target.kind(),
                    d.target.value(),
                    d.missing.as_str(),
                    at
                ],
            )?;
            tx.execute(
                "INSERT INTO tool_calls (run_id, episode_id, call_id, denials) VALUES (?1, ?2, ?3, 1)
                 ON CONFLICT (run_id, episode_id, call_id) DO UPDATE SET denials = denials + 1",
                params![run, ep, d.call_id],
            )?;
        }
        EventBody::Usage(u) => {
            let (usd, source) = match &u.cost {
                Cost::Known { usd, source } => (Some(*usd), source.to_string()),
                Cost::Unknown { .. } => (None, PRICE_UNKNOWN.to_owned()),
                Cost::UnknownTokens => (None, TOKENS_UNKNOWN.to_owned()),
            };
            tx.execute(
                "INSERT INTO model_calls (run_id, episode_id, call_index, model, input_tokens,
                     cached_input_tokens, output_tokens, reasoning_tokens, cost_usd, price_source, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT (run_id, episode_id, call_index) DO UPDATE SET model = excluded.model,
                     input_tokens = excluded.input_tokens,
                     cached_input_tokens = excluded.cached_input_tokens,
                     output_tokens = excluded.output_tokens,
                     reasoning_tokens = excluded.reasoning_tokens,
                     cost_usd = excluded.cost_usd, price_source = excluded.price_source",
                params![
                    run,
                    ep,
                    u.model_call,
                    u.model,
                    u.input_tokens.map(int),
                    u.cached_input_tokens.map(int),
                    u.output_tokens.map(int),
                    u.reasoning_tokens.map(int),
                    usd,
                    source,
                    at
                ],
            )?;
        }
        EventBody::ModelLatency(l) => {
            tx.execute(
                "INSERT INTO model_calls (run_id, episode_id, call_index, first_token_ms, total_ms, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (run_id, episode_id, call_index) DO UPDATE SET
                     first_token_ms = excluded.first_token_ms, total_ms = excluded.total_ms",
                params![run, ep, l.model_call, l.first_token_ms.map(int), int(l.total_ms), at],
            )?;
        }
        EventBody::ModelCallEnded(m) => {
            tx.execute(
                "INSERT INTO model_calls (run_id, episode_id, call_index, stop_reason, error, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (run_id, episode_id, call_index) DO UPDATE SET
                     stop_reason = excluded.stop_reason, error = excluded.error",
                params![
                    run,
                    ep,
                    m.model_call,
                    m.stop_reason.as_ref().map(StopReason::as_string),
                    m.error.as_ref().map(|e| e.category.as_str()),
                    at
                ],
            )?;
        }
        EventBody::LimitHit(l) => {
            tx.execute(
                "UPDATE episodes SET limit_hit = ?3 WHERE run_id = ?1 AND episode_id = ?2",
                params![run, ep, l.limit.as_str()],
            )?;
        }
        EventBody::EpisodeFinished(f) => {
            tx.execute(
                "UPDATE episodes SET outcome = ?3, success_check = ?4, finished_at = ?5, wall_ms = ?6
                 WHERE run_id = ?1 AND episode_id = ?2",
                params![
                    run,
                    ep,
                    f.outcome.as_str(),
                    f.success_check.as_ref().map(|c| c.passed),
                    at,
                    int(f.totals.wall_ms)
                ],
            )?;
        }
    }
    tx.execute(
        "UPDATE episodes SET last_seq = ?3 WHERE run_id = ?1 AND episode_id = ?2",
        params![run, ep, seq],
    )?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_store_has_the_current_schema_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sqlite");
        let s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        drop(s);
        let s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        drop(s);
        let r = Store::open_read_only(&path).unwrap();
        assert_eq!(r.schema_version().unwrap(), SCHEMA_VERSION);
    }

    #[test]
    fn newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sqlite");
        drop(Store::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.execute(
            "INSERT INTO schema_version (version, applied_at) VALUES (99, 'x')",
            [],
        )
        .unwrap();
        drop(conn);
        assert!(matches!(
            Store::open(&path),
            Err(StoreError::NewerSchema { found: 99, .. })
        ));
        assert!(Store::open_read_only(&path).unwrap_err().is_corrupt());
    }

    #[test]
    fn a_version_1_store_is_migrated_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sqlite");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
             INSERT INTO schema_version VALUES (1, 'then');",
        )
        .unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.execute(
            "INSERT INTO model_calls (run_id, episode_id, call_index, input_tokens) VALUES ('r', 'e', 1, 5)",
            [],
        )
        .unwrap();
        drop(conn);
        // Reading never migrates: it says how to.
        assert!(Store::open_read_only(&path).unwrap_err().is_corrupt());
        let s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let row: (i64, Option<String>, Option<String>) = s
            .with_conn(|c, p| {
                c.query_row(
                    "SELECT input_tokens, stop_reason, error FROM model_calls",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .map_err(sql_error(p, "test"))
            })
            .unwrap();
        assert_eq!(row, (5, None, None));
        // Version 3: episodes know their parent; subagent calls have a table.
        let n: i64 = s
            .with_conn(|c, p| {
                c.query_row(
                    "SELECT count(*) FROM episodes WHERE depth = 0 AND agent_role IS NULL",
                    [],
                    |r| r.get(0),
                )
                .map_err(sql_error(p, "test"))
            })
            .unwrap();
        assert_eq!(n, 0);
        let n: i64 = s
            .with_conn(|c, p| {
                c.query_row("SELECT count(*) FROM subagents", [], |r| r.get(0))
                    .map_err(sql_error(p, "test"))
            })
            .unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn read_only_open_never_creates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.sqlite");
        assert!(matches!(
            Store::open_read_only(&path),
            Err(StoreError::Missing { .. })
        ));
        assert!(!path.exists());
    }
}
