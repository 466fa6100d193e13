//! The run summary: `summary.json` beside a run's transcripts, with each episode's outcome and
//! the run's totals. It is replaced atomically (a temporary file renamed over it), so a
//! reader sees the old summary or the new one, never half of one.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::event::{
    Enforcement, EventBody, LimitKind, ModelError, Outcome, ParentLink, Refusal, SuccessCheck,
    Totals,
};
use super::time::Timestamp;
use super::transcript::{Transcript, TranscriptError, read_transcript};

/// The file name of a run summary inside the run's directory.
pub const SUMMARY_FILE: &str = "summary.json";

/// What a run did, episode by episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run.
    pub run_id: String,
    /// When the run started, if any episode recorded it.
    pub started_at: Option<Timestamp>,
    /// When this summary was made.
    pub updated_at: Timestamp,
    /// Whether every episode's transcript ends with `episode_finished`.
    pub complete: bool,
    /// The episodes, sorted by id.
    pub episodes: Vec<EpisodeSummary>,
    /// The sum of the episodes' totals (`wall_ms` adds up episode wall times).
    pub totals: Totals,
    /// The shard this run ran, when the scenario was sharded (from `run.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::scenario::Shard>,
    /// Transcripts of interrupted attempts that `bee run --resume` set aside
    /// (`<session>.jsonl.partial-<n>`): kept beside the rerun, never counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<String>,
}

/// One episode of a [`RunSummary`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSummary {
    /// The episode.
    pub episode_id: String,
    /// Its transcript's file name, relative to the run directory.
    pub transcript: String,
    /// The scenario, when the transcript recorded its start.
    pub scenario: Option<String>,
    /// The model, when the transcript recorded its start.
    pub model: Option<String>,
    /// How tools were confined, when the transcript recorded its start.
    pub enforcement: Option<Enforcement>,
    /// The outcome; `None` when the transcript stops before `episode_finished` (the episode
    /// is still running, or bee was killed).
    pub outcome: Option<Outcome>,
    /// The success check, when it ran.
    pub success_check: Option<SuccessCheck>,
    /// The limit that ended the episode, if one did.
    pub limit: Option<LimitKind>,
    /// The last failed model call's error (the one that ends an episode as
    /// `provider-error`), if any.
    #[serde(default)]
    pub provider_error: Option<ModelError>,
    /// The refusal that ended the episode, if the model declined.
    #[serde(default)]
    pub refusal: Option<Refusal>,
    /// What the episode used: from `episode_finished`, or counted from the events so far.
    pub totals: Totals,
    /// Whether the transcript's last line was cut short.
    pub truncated_tail: bool,
    /// The session and tool call that started this one, when it is a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
    /// The `agent` calls of this session that started no subagent: role and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_subagents: Vec<RefusedSubagent>,
}

/// An `agent` call that started no subagent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedSubagent {
    /// The tool call.
    pub call_id: String,
    /// The role asked for.
    pub role: String,
    /// Why nothing started.
    pub reason: String,
}

impl EpisodeSummary {
    /// Summarises one transcript.
    #[must_use]
    pub fn from_transcript(episode_id: &str, file_name: &str, t: &Transcript) -> Self {
        let mut s = Self {
            episode_id: episode_id.to_owned(),
            transcript: file_name.to_owned(),
            scenario: None,
            model: None,
            enforcement: None,
            outcome: None,
            success_check: None,
            limit: None,
            provider_error: None,
            refusal: None,
            totals: Totals::default(),
            truncated_tail: t.truncated_tail.is_some(),
            parent: None,
            refused_subagents: Vec::new(),
        };
        let mut counted = Totals::default();
        let mut finished = None;
        for e in &t.events {
            counted.add(&e.body);
            match &e.body {
                EventBody::EpisodeStarted(st) => {
                    s.scenario = Some(st.scenario.clone());
                    s.model = Some(st.model.clone());
                    s.enforcement = Some(st.policy.enforcement);
                    s.parent = st.parent.as_deref().cloned();
                }
                EventBody::Subagent(a) => {
                    if let Some(reason) = &a.refused {
                        s.refused_subagents.push(RefusedSubagent {
                            call_id: a.call_id.clone(),
                            role: a.role.clone(),
                            reason: reason.clone(),
                        });
                    }
                }
                EventBody::LimitHit(l) => s.limit = Some(l.limit),
                EventBody::ModelCallEnded(m) => {
                    if m.error.is_some() {
                        s.provider_error.clone_from(&m.error);
                    }
                    if m.refusal.is_some() {
                        s.refusal.clone_from(&m.refusal);
                    }
                }
                EventBody::EpisodeFinished(f) => finished = Some(f),
                _ => {}
            }
        }
        match finished {
            Some(f) => {
                s.outcome = Some(f.outcome);
                s.success_check.clone_from(&f.success_check);
                s.totals = f.totals.clone();
            }
            None => {
                if let (Some(first), Some(last)) = (t.events.first(), t.events.last()) {
                    let ms = last.at.as_unix_millis() - first.at.as_unix_millis();
                    counted.wall_ms = u64::try_from(ms).unwrap_or(0);
                }
                s.totals = counted;
            }
        }
        s
    }
}

impl RunSummary {
    /// Summarises every transcript (`*.jsonl`) in a run directory; the run id is the
    /// directory's name.
    ///
    /// # Errors
    /// When the directory or a transcript cannot be read, or a transcript is damaged.
    pub fn from_run_dir(dir: &Path) -> Result<Self, TranscriptError> {
        let run_id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut episodes = Vec::new();
        let mut started_at = None;
        for (episode_id, path) in transcripts_in(dir)? {
            let t = read_transcript(&path)?;
            if let Some(EventBody::EpisodeStarted(st)) = t.events.first().map(|e| &e.body) {
                started_at = Some(
                    started_at.map_or(st.run_started_at, |s: Timestamp| s.min(st.run_started_at)),
                );
            }
            let file_name = format!("{episode_id}.jsonl");
            episodes.push(EpisodeSummary::from_transcript(&episode_id, &file_name, &t));
        }
        let mut summary = Self::new(run_id, started_at, episodes);
        summary.shard = super::manifest::RunManifest::read(dir)
            .ok()
            .and_then(|m| m.shard);
        let io = |source| TranscriptError::Io {
            path: dir.to_owned(),
            source,
        };
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let name = entry
                .map_err(io)?
                .file_name()
                .to_string_lossy()
                .into_owned();
            if name.contains(".jsonl.partial-") {
                summary.set_aside.push(name);
            }
        }
        summary.set_aside.sort();
        Ok(summary)
    }

    /// A summary of `episodes`, with totals and completeness computed from them.
    #[must_use]
    pub fn new(
        run_id: String,
        started_at: Option<Timestamp>,
        mut episodes: Vec<EpisodeSummary>,
    ) -> Self {
        episodes.sort_by(|a, b| a.episode_id.cmp(&b.episode_id));
        let mut totals = Totals::default();
        for e in &episodes {
            totals.merge(&e.totals);
        }
        Self {
            run_id,
            started_at,
            updated_at: Timestamp::now(),
            complete: episodes.iter().all(|e| e.outcome.is_some()),
            episodes,
            totals,
            shard: None,
            set_aside: Vec::new(),
        }
    }

    /// Writes the summary to `dir/summary.json`, replacing any previous one atomically:
    /// the JSON goes to a temporary file in `dir`, which is synced and renamed over the
    /// summary, and then the directory is synced. Returns the summary's path.
    ///
    /// # Errors
    /// When a file operation fails; the previous summary is then left as it was.
    pub fn write_atomic(&self, dir: &Path) -> Result<PathBuf, TranscriptError> {
        let path = dir.join(SUMMARY_FILE);
        let tmp = dir.join(format!(".{SUMMARY_FILE}.{}.tmp", std::process::id()));
        let mut json =
            serde_json::to_vec_pretty(self).map_err(|source| TranscriptError::Encode {
                path: path.clone(),
                seq: 0,
                source,
            })?;
        json.push(b'\n');
        let io = |p: &Path| {
            let p = p.to_owned();
            move |source| TranscriptError::Io { path: p, source }
        };
        // A fresh file, never one that is there: `O_CREAT|O_EXCL` does not follow a symbolic
        // link planted at the temporary name (a stale one from a killed run is removed first;
        // removing a link removes the link).
        let _ = std::fs::remove_file(&tmp);
        let written = File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(&json)?;
                f.sync_all()
            })
            .map_err(io(&tmp))
            .and_then(|()| std::fs::rename(&tmp, &path).map_err(io(&path)));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir))?;
        Ok(path)
    }

    /// Reads a `summary.json`.
    ///
    /// # Errors
    /// When it cannot be read or is not a summary.
    pub fn read(path: &Path) -> Result<Self, TranscriptError> {
        let bytes = std::fs::read(path).map_err(|source| TranscriptError::Io {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|e| TranscriptError::Malformed {
            path: path.to_owned(),
            line: e.line(),
            reason: e.to_string(),
        })
    }
}

/// The transcripts of a run directory as `(episode id, path)`, sorted by episode id.
///
/// # Errors
/// When the directory cannot be listed.
pub fn transcripts_in(dir: &Path) -> Result<Vec<(String, PathBuf)>, TranscriptError> {
    let io = |source| TranscriptError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|x| x == "jsonl")
            && path.is_file()
            && let Some(stem) = path.file_stem()
        {
            out.push((stem.to_string_lossy().into_owned(), path));
        }
    }
    out.sort();
    Ok(out)
}
