//! Shards and resumed runs: which episodes this process runs, what identifies each one's
//! content, and which run directory it writes (new, or resumed with `--resume`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Args, Exit, Planned};
use crate::app::harness::preflight::{Refused, run_id};
use crate::records::{
    BEE_VERSION, MANIFEST_FORMAT, ManifestError, RunLock, RunManifest, Store, transcripts_in,
};
use crate::scenario::{Shard, sha256_hex};
use crate::skills::SkillSet;

/// The shard this process runs: `--shard K/N`, or `JOB_COMPLETION_INDEX` with `--shards N`.
pub(super) fn shard_of(args: &Args) -> Result<Option<Shard>, Refused> {
    let usage = |why: String| Refused(Exit::Usage, why);
    let index = args.job_completion_index.as_deref();
    match (args.shard, args.shards, index) {
        (Some(s), _, Some(i)) if i.trim().parse::<u32>().ok().map(|i| i + 1) != Some(s.index) => {
            Err(usage(format!(
                "--shard {s} disagrees with JOB_COMPLETION_INDEX={i:?} (which counts from 0, \
                 so shard {s} is index {}); drop one of them",
                s.index - 1
            )))
        }
        (Some(s), _, _) => Ok(Some(s)),
        (None, Some(n), Some(i)) => Shard::from_completion_index(i, n)
            .map(Some)
            .map_err(|e| usage(format!("--shards {n}: {e}"))),
        (None, Some(n), None) => Err(usage(format!(
            "--shards {n} takes this process's shard from JOB_COMPLETION_INDEX (set in a \
             Kubernetes Indexed Job's pods), which is not set; use --shard K/N elsewhere"
        ))),
        (None, None, _) => Ok(None),
    }
}

/// What identifies an episode's content: every input that shapes what the agent is asked
/// and how the result is judged. The workspace's path is left out (it differs between
/// machines) and so are its files.
#[derive(Serialize)]
struct Definition<'a> {
    format: u32,
    id: &'a str,
    scenario: &'a str,
    prompt: &'a str,
    system_prompt: Option<&'a str>,
    workspace_mode: &'a str,
    policy_sha256: Option<String>,
    turns: Option<u32>,
    tokens: Option<u64>,
    wall_seconds: Option<u64>,
    cost_usd: Option<f64>,
    success_check: Option<(&'a str, u64)>,
    max_output_tokens: Option<u32>,
    skills: Vec<(&'a str, &'a str, &'a str)>,
    /// The scenario's own MCP servers: name, command, arguments, policy's SHA-256 (left
    /// out when there are none, so that earlier hashes hold).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    mcp_servers: Vec<(&'a str, &'a str, &'a [String], String)>,
}

/// The SHA-256 of an episode's definition (see [`Definition`]).
pub(super) fn content_hash(ep: &Planned, skills: &SkillSet) -> Result<String, Refused> {
    let policy_sha256 = match &ep.policy {
        Some(p) => Some(sha256_hex(&std::fs::read(p).map_err(|e| {
            Refused(
                Exit::NoInput,
                format!("episode {}: {}: {e}", ep.def.id, p.display()),
            )
        })?)),
        None => None,
    };
    let d = &ep.def;
    let mut mcp_servers = Vec::new();
    for (name, server) in &d.mcp_servers {
        let policy = std::fs::read(&server.policy.value).map_err(|e| {
            Refused(
                Exit::NoInput,
                format!("episode {}: {}: {e}", d.id, server.policy.value.display()),
            )
        })?;
        mcp_servers.push((
            name.as_str(),
            server.command.value.as_str(),
            server.args.as_slice(),
            sha256_hex(&policy),
        ));
    }
    let definition = Definition {
        format: 1,
        id: &d.id,
        scenario: &d.scenario,
        prompt: &d.prompt,
        system_prompt: d.system_prompt.as_deref(),
        workspace_mode: d.workspace_mode.as_str(),
        policy_sha256,
        turns: ep.limits.turns,
        tokens: ep.limits.tokens,
        wall_seconds: ep.limits.wall.map(|w| w.as_secs()),
        cost_usd: ep.limits.cost_usd,
        success_check: d
            .success_check
            .as_ref()
            .map(|c| (c.command.as_str(), c.timeout.as_secs())),
        max_output_tokens: d.max_output_tokens,
        skills: d
            .skills
            .iter()
            .filter_map(|name| skills.get(name))
            .map(|s| (s.name.as_str(), s.description.as_str(), s.body.as_str()))
            .collect(),
        mcp_servers,
    };
    let json = serde_json::to_vec(&definition).map_err(|e| {
        Refused(
            Exit::Software,
            format!("episode {}: hashing its definition: {e}", d.id),
        )
    })?;
    Ok(sha256_hex(&json))
}

/// The SHA-256 over every episode's id and content hash, in id order.
pub(super) fn scenario_hash(hashes: &BTreeMap<String, String>) -> String {
    let mut text = String::from("bee scenario v1\n");
    for (id, hash) in hashes {
        text.push_str(&format!("{id}\t{hash}\n"));
    }
    sha256_hex(text.as_bytes())
}

/// The run directory this process writes, locked, with the episodes it skips.
pub(super) struct RunDir {
    pub run_id: String,
    pub dir: PathBuf,
    /// Held until the run ends.
    pub _lock: RunLock,
    /// Completed episodes of a resumed run: not run again.
    pub completed: BTreeSet<String>,
    /// The statuses of the completed episodes, for the run's exit status.
    pub completed_statuses: Vec<Exit>,
    /// What to say on stderr before the run starts.
    pub notes: Vec<String>,
}

fn cant_create(why: String) -> Refused {
    Refused(Exit::CantCreat, why)
}

fn manifest_refusal(e: ManifestError) -> Refused {
    match e {
        ManifestError::Locked(_) => cant_create(format!(
            "{e}; give each shard its own run directory (a records directory or --run-id of \
             its own)"
        )),
        ManifestError::Missing(_) | ManifestError::Malformed { .. } => {
            Refused(Exit::DataErr, e.to_string())
        }
        ManifestError::Io { .. } => Refused(Exit::Software, e.to_string()),
    }
}

/// Opens the run directory: a new one (named by `--run-id`, or a fresh id), or with
/// `--resume` the one to continue.
pub(super) fn open(
    args: &Args,
    records_dir: &Path,
    manifest: &RunManifest,
    hashes: &BTreeMap<String, String>,
    store: &Store,
) -> Result<RunDir, Refused> {
    std::fs::create_dir_all(records_dir)
        .map_err(|e| cant_create(format!("{}: {e}", records_dir.display())))?;
    if args.resume
        && let Some(dir) = resumable(args, records_dir, manifest)?
    {
        return resume(&dir, manifest, hashes, store);
    }
    let run_id = args.run_id.clone().unwrap_or_else(run_id);
    crate::records::check_id(&run_id)
        .map_err(|e| Refused(Exit::Usage, format!("--run-id: {e}")))?;
    let dir = records_dir.join(&run_id);
    if let Err(e) = std::fs::create_dir(&dir) {
        let hint = if e.kind() == std::io::ErrorKind::AlreadyExists {
            "; add --resume to continue that run, or choose another --run-id"
        } else {
            ""
        };
        return Err(cant_create(format!("{}: {e}{hint}", dir.display())));
    }
    let lock = RunLock::take(&dir).map_err(manifest_refusal)?;
    manifest.write_new(&dir).map_err(manifest_refusal)?;
    let mut notes = Vec::new();
    if args.resume {
        notes.push(format!(
            "--resume: no earlier run of this scenario{} in {}; starting run {run_id}",
            manifest
                .shard
                .map(|s| format!(" (shard {s})"))
                .unwrap_or_default(),
            records_dir.display()
        ));
    }
    Ok(RunDir {
        run_id,
        dir,
        _lock: lock,
        completed: BTreeSet::new(),
        completed_statuses: Vec::new(),
        notes,
    })
}

/// The run directory `--resume` continues: `--run-id`'s, when it exists; otherwise the newest
/// run directory of this shard in the records directory. `None`: nothing to resume.
fn resumable(
    args: &Args,
    records_dir: &Path,
    manifest: &RunManifest,
) -> Result<Option<PathBuf>, Refused> {
    if let Some(id) = &args.run_id {
        let dir = records_dir.join(id);
        return Ok(dir.is_dir().then_some(dir));
    }
    let read =
        |e: std::io::Error| Refused(Exit::NoInput, format!("{}: {e}", records_dir.display()));
    let mut ours = Vec::new();
    let mut older = None;
    for entry in std::fs::read_dir(records_dir).map_err(read)? {
        let dir = entry.map_err(read)?.path();
        if !dir.is_dir() {
            continue;
        }
        match RunManifest::read(&dir) {
            Ok(m) if m.shard == manifest.shard => ours.push(dir),
            Ok(_) => {}
            Err(ManifestError::Missing(_)) => {
                if transcripts_in(&dir).is_ok_and(|t| !t.is_empty()) {
                    older = Some(dir);
                }
            }
            Err(e) => return Err(manifest_refusal(e)),
        }
    }
    ours.sort();
    match (ours.pop(), older) {
        (Some(dir), _) => Ok(Some(dir)),
        (None, Some(dir)) => Err(manifest_refusal(ManifestError::Missing(dir))),
        (None, None) => Ok(None),
    }
}

fn resume(
    dir: &Path,
    manifest: &RunManifest,
    hashes: &BTreeMap<String, String>,
    store: &Store,
) -> Result<RunDir, Refused> {
    let found = RunManifest::read(dir).map_err(manifest_refusal)?;
    if let Some(why) = manifest.mismatch(&found, dir) {
        return Err(Refused(
            Exit::DataErr,
            format!(
                "--resume: {why}; resume it with that scenario and bee, or use another records directory"
            ),
        ));
    }
    if found.shard != manifest.shard {
        let name =
            |s: Option<Shard>| s.map_or_else(|| "no shard".to_owned(), |s| format!("shard {s}"));
        return Err(Refused(
            Exit::DataErr,
            format!(
                "--resume: {} holds {}; this process runs {}: give each shard its own run \
                 directory",
                dir.display(),
                name(found.shard),
                name(manifest.shard)
            ),
        ));
    }
    let lock = RunLock::take(dir).map_err(manifest_refusal)?;
    let run_id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let software = |e: String| Refused(Exit::Software, format!("--resume: {e}"));
    let episodes = crate::records::sessions_by_episode(dir).map_err(|e| software(e.to_string()))?;
    let mut completed = BTreeSet::new();
    let mut completed_statuses = Vec::new();
    let mut set_aside = 0;
    for (id, sessions) in &episodes {
        let Some(top) = sessions.first() else {
            continue;
        };
        let Some(planned) = hashes.get(id) else {
            continue;
        };
        if top.completed() && top.content_hash() == Some(planned.as_str()) {
            completed.insert(id.clone());
            completed_statuses.push(status_of(top));
            continue;
        }
        // Interrupted (or of another definition): set aside, marked, and forgotten by the
        // store; the episode runs again from the start.
        for s in sessions {
            let partial = partial_path(&s.path);
            std::fs::rename(&s.path, &partial)
                .map_err(|e| software(format!("setting aside {}: {e}", s.path.display())))?;
            set_aside += 1;
        }
        let ids: Vec<String> = sessions.iter().map(|s| s.id.clone()).collect();
        store
            .forget(&run_id, &ids)
            .map_err(|e| software(e.to_string()))?;
    }
    let mut notes = vec![format!(
        "--resume: continuing run {run_id} ({}): {} of {} episode(s) completed and kept, {} to \
         run",
        dir.display(),
        completed.len(),
        manifest.episodes.len(),
        manifest.episodes.len() - completed.len()
    )];
    if set_aside > 0 {
        notes.push(format!(
            "--resume: {set_aside} transcript(s) of interrupted attempts set aside as \
             <session>.jsonl.partial-<n> (kept, never counted)"
        ));
    }
    Ok(RunDir {
        run_id,
        dir: dir.to_owned(),
        _lock: lock,
        completed,
        completed_statuses,
        notes,
    })
}

/// `<file>.partial-<n>` for the first `n` from 1 that names no file.
fn partial_path(path: &Path) -> PathBuf {
    let mut n = 1;
    loop {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".partial-{n}"));
        let p = PathBuf::from(name);
        if !p.exists() {
            return p;
        }
        n += 1;
    }
}

/// The status of a completed episode, from its transcript.
fn status_of(s: &crate::records::Session) -> Exit {
    let summary = crate::records::EpisodeSummary::from_transcript(&s.id, "", &s.transcript);
    match summary.outcome {
        None => Exit::Ok,
        Some(outcome) => Exit::of_outcome(outcome, summary.provider_error.map(|e| e.category)),
    }
}

/// The manifest of a new run.
pub(super) fn manifest(
    args: &Args,
    shard: Option<Shard>,
    hashes: &BTreeMap<String, String>,
    episodes: &[String],
) -> RunManifest {
    let mut episodes = episodes.to_vec();
    episodes.sort();
    RunManifest {
        format: MANIFEST_FORMAT,
        bee_version: BEE_VERSION.to_owned(),
        scenario: args.scenario.display().to_string(),
        scenario_hash: scenario_hash(hashes),
        shard,
        scenario_episodes: hashes.len(),
        episodes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_paths_count_up() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("a.jsonl");
        assert_eq!(partial_path(&t), dir.path().join("a.jsonl.partial-1"));
        std::fs::write(dir.path().join("a.jsonl.partial-1"), "").unwrap();
        assert_eq!(partial_path(&t), dir.path().join("a.jsonl.partial-2"));
    }
}
