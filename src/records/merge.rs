//! Merging the records of a sharded run: `bee records merge DIR… --into DIR`.
//!
//! Each shard's run directory is copied into the merged records directory under its own run
//! id (transcripts name their run, so they are not renamed), a summary is written for each,
//! the metrics store is built from them, and `merge.json` says what the merge holds: which
//! shards were found and which were missing, which episodes ran twice (only one copy is
//! kept, so nothing is counted twice) and which are missing or unfinished.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::event::Totals;
use super::manifest::{MANIFEST_FILE, ManifestError, RunLock, RunManifest};
use super::sessions::{Session, sessions_by_episode};
use super::store::{STORE_FILE, Store, StoreError};
use super::summary::{RunSummary, transcripts_in};
use super::transcript::TranscriptError;
use crate::scenario::Shard;

/// The merged summary's file name, at the top of the merged records directory.
pub const MERGE_FILE: &str = "merge.json";

/// What a merge holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeSummary {
    /// The scenario every run ran.
    pub scenario_hash: String,
    /// The bee that made the runs.
    pub bee_version: String,
    /// How many shards the scenario was split into (1 when unsharded).
    pub shard_count: u32,
    /// The shards some run directory held, from 1.
    pub shards_present: Vec<u32>,
    /// The shards no run directory held: their episodes are not in the merge.
    pub shards_missing: Vec<u32>,
    /// How many episodes the scenario has, all shards together.
    pub scenario_episodes: usize,
    /// The run directories merged.
    pub runs: Vec<MergedRun>,
    /// How many top-level episodes the merge holds (one copy each).
    pub episodes: usize,
    /// Episodes of present shards that no run directory holds a transcript of.
    pub missing_episodes: Vec<String>,
    /// Episodes whose transcript stops before `episode_finished`, or that were interrupted.
    pub unfinished_episodes: Vec<String>,
    /// Episodes found in more than one run directory.
    pub duplicates: Vec<Duplicate>,
    /// The sum of the kept sessions' totals (subagents included).
    pub totals: Totals,
    /// Whether every shard and every episode is present and finished.
    pub complete: bool,
    /// Directories of the records directories given that were left out because they are
    /// `bee repl` sessions, not runs of a scenario (they share the default records
    /// directory with `bee run`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_sessions: Vec<String>,
}

/// One run directory of a merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedRun {
    /// Its run id (the directory's name, here and in the source).
    pub run_id: String,
    /// Where it came from.
    pub source: String,
    /// Its shard, if the scenario was sharded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// How many of its top-level episodes were kept.
    pub episodes: usize,
}

/// An episode found in more than one run directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Duplicate {
    /// The episode.
    pub episode_id: String,
    /// The run directory whose copy was kept: the first (in the order given) that finished
    /// it, or the first at all when none did.
    pub kept: String,
    /// The run directories whose copies were left out.
    pub dropped: Vec<String>,
}

/// Why a merge was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A source is not a readable run directory, or its manifest does not fit.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The runs are of different scenarios, bees or shard counts.
    #[error("{0}")]
    Mismatch(String),
    /// A transcript could not be read or copied.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// The merged metrics store could not be built.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A source does not exist or cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// No run directory was found in the sources.
    #[error("no run directory (a directory with {MANIFEST_FILE}) in {0}")]
    NoRuns(String),
    /// `--into` exists and is not empty: a merge never writes over records.
    #[error("{0}: the directory is not empty; merge into a new or empty directory")]
    NotEmpty(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> MergeError + '_ {
    move |source| MergeError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The session id of a `bee repl` session: its transcript is `repl.jsonl` at the top of its
/// run directory, which has no manifest.
pub const REPL_SESSION_ID: &str = "repl";

/// The run directories of a source: itself when it holds `run.json`, otherwise its
/// subdirectories that hold transcripts (each must then have a manifest), leaving out — and
/// adding to `skipped` — those of `bee repl` sessions (a transcript `repl.jsonl` and no
/// manifest).
fn run_dirs(source: &Path, skipped: &mut Vec<String>) -> Result<Vec<PathBuf>, MergeError> {
    if source.join(MANIFEST_FILE).is_file() {
        return Ok(vec![source.to_owned()]);
    }
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(source).map_err(io(source))? {
        let path = entry.map_err(io(source))?.path();
        if !path.is_dir() {
            continue;
        }
        if path.join(MANIFEST_FILE).is_file() {
            dirs.push(path);
        } else if path.join(format!("{REPL_SESSION_ID}.jsonl")).is_file() {
            skipped.push(path.display().to_string());
        } else if !transcripts_in(&path)?.is_empty() {
            dirs.push(path);
        }
    }
    dirs.sort();
    skipped.sort();
    Ok(dirs)
}

fn is_empty_dir(dir: &Path) -> Result<bool, MergeError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(io(dir)(e)),
    }
}

fn copy_new(from: &Path, to: &Path) -> Result<(), MergeError> {
    if to.exists() {
        return Err(io(to)(std::io::Error::from(
            std::io::ErrorKind::AlreadyExists,
        )));
    }
    std::fs::copy(from, to).map(drop).map_err(io(to))
}

struct Run {
    dir: PathBuf,
    run_id: String,
    manifest: RunManifest,
    episodes: BTreeMap<String, Vec<Session>>,
}

/// Merges the run directories found in `sources` (run directories, or records directories
/// holding them) into the records directory `into`, which must be new or empty.
///
/// # Errors
/// [`MergeError::Mismatch`] for runs of different scenarios, bees or shard counts;
/// [`MergeError::Manifest`] for a run directory without a manifest or still being written;
/// [`MergeError::NotEmpty`] for an `into` that holds anything; I/O and store errors.
pub fn merge(sources: &[PathBuf], into: &Path) -> Result<MergeSummary, MergeError> {
    let mut runs = Vec::new();
    let mut locks = Vec::new();
    let mut seen = BTreeSet::new();
    let mut skipped_sessions = Vec::new();
    for source in sources {
        for dir in run_dirs(source, &mut skipped_sessions)? {
            // The same directory named twice is one run, not a duplicate.
            if !seen.insert(std::fs::canonicalize(&dir).map_err(io(&dir))?) {
                continue;
            }
            let manifest = RunManifest::read(&dir)?;
            locks.push(RunLock::probe(&dir)?);
            let run_id = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let episodes = sessions_by_episode(&dir)?;
            runs.push(Run {
                dir,
                run_id,
                manifest,
                episodes,
            });
        }
    }
    let Some(first) = runs.first() else {
        let names: Vec<String> = sources.iter().map(|s| s.display().to_string()).collect();
        return Err(MergeError::NoRuns(names.join(", ")));
    };
    let reference = first.manifest.clone();
    for r in &runs[1..] {
        if let Some(why) = reference.mismatch(&r.manifest, &r.dir) {
            return Err(MergeError::Mismatch(format!(
                "{why} (the first run merged, {}, is of scenario {})",
                first.dir.display(),
                reference.scenario
            )));
        }
    }
    if !is_empty_dir(into)? {
        return Err(MergeError::NotEmpty(into.to_owned()));
    }

    // Which copy of each episode is kept: the first finished one, else the first.
    let mut copies: BTreeMap<&str, Vec<(usize, bool)>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        for (id, sessions) in &r.episodes {
            let completed = sessions.first().is_some_and(Session::completed);
            copies.entry(id.as_str()).or_default().push((i, completed));
        }
    }
    let mut kept: BTreeMap<String, usize> = BTreeMap::new();
    let mut duplicates = Vec::new();
    let mut unfinished = Vec::new();
    for (id, c) in &copies {
        let (keep, completed) = c.iter().find(|(_, done)| *done).unwrap_or(&c[0]);
        kept.insert((*id).to_owned(), *keep);
        if !completed {
            unfinished.push((*id).to_owned());
        }
        if c.len() > 1 {
            duplicates.push(Duplicate {
                episode_id: (*id).to_owned(),
                kept: runs[*keep].dir.display().to_string(),
                dropped: c
                    .iter()
                    .filter(|(i, _)| i != keep)
                    .map(|(i, _)| runs[*i].dir.display().to_string())
                    .collect(),
            });
        }
    }

    std::fs::create_dir_all(into).map_err(io(into))?;
    let mut merged_runs = Vec::new();
    let mut totals = Totals::default();
    let mut written = BTreeSet::new();
    for (i, r) in runs.iter().enumerate() {
        let dest = into.join(&r.run_id);
        std::fs::create_dir_all(&dest).map_err(io(&dest))?;
        if !dest.join(MANIFEST_FILE).exists() {
            copy_new(&r.dir.join(MANIFEST_FILE), &dest.join(MANIFEST_FILE))?;
        }
        let mut n = 0;
        for (id, sessions) in &r.episodes {
            if kept.get(id) != Some(&i) {
                continue;
            }
            n += 1;
            for s in sessions {
                copy_new(&s.path, &dest.join(format!("{}.jsonl", s.id)))?;
            }
        }
        // Interrupted attempts set aside by --resume: kept, never counted.
        for entry in std::fs::read_dir(&r.dir).map_err(io(&r.dir))? {
            let path = entry.map_err(io(&r.dir))?.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if let Some(name) = name.filter(|n| n.contains(".jsonl.partial-")) {
                let to = dest.join(&name);
                if !to.exists() {
                    copy_new(&path, &to)?;
                }
            }
        }
        written.insert(dest);
        merged_runs.push(MergedRun {
            run_id: r.run_id.clone(),
            source: r.dir.display().to_string(),
            shard: r.manifest.shard,
            episodes: n,
        });
    }
    for dest in &written {
        let summary = RunSummary::from_run_dir(dest)?;
        summary.write_atomic(dest)?;
        totals.merge(&summary.totals);
    }
    if !kept.is_empty() {
        Store::rebuild(into, &into.join(STORE_FILE))?;
    }

    let shard_count = reference.shard.map_or(1, |s| s.count);
    let present: BTreeSet<u32> = runs
        .iter()
        .map(|r| r.manifest.shard.map_or(1, |s| s.index))
        .collect();
    let shards_missing: Vec<u32> = (1..=shard_count).filter(|k| !present.contains(k)).collect();
    let expected: BTreeSet<&String> = runs.iter().flat_map(|r| &r.manifest.episodes).collect();
    let missing_episodes: Vec<String> = expected
        .into_iter()
        .filter(|id| !kept.contains_key(*id))
        .cloned()
        .collect();
    let summary = MergeSummary {
        skipped_sessions,
        scenario_hash: reference.scenario_hash.clone(),
        bee_version: reference.bee_version.clone(),
        shard_count,
        shards_present: present.into_iter().collect(),
        complete: shards_missing.is_empty() && missing_episodes.is_empty() && unfinished.is_empty(),
        shards_missing,
        scenario_episodes: reference.scenario_episodes,
        runs: merged_runs,
        episodes: kept.len(),
        missing_episodes,
        unfinished_episodes: unfinished,
        duplicates,
        totals,
    };
    let path = into.join(MERGE_FILE);
    let mut json = serde_json::to_vec_pretty(&summary).map_err(|e| io(&path)(e.into()))?;
    json.push(b'\n');
    std::fs::write(&path, json).map_err(io(&path))?;
    drop(locks);
    Ok(summary)
}
