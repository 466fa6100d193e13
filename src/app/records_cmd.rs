//! `bee records merge DIR… --into DIR`: the records of a sharded run's shards, combined.

use std::io::ErrorKind;
use std::path::PathBuf;

use crate::records::{MERGE_FILE, ManifestError, MergeError, MergeSummary, STORE_FILE, merge};
use serde_json::json;

use super::Exit;

/// Arguments of `bee records`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Combine the run directories of a scenario's shards into one records directory
    /// (transcripts, summaries, a metrics store and merge.json); duplicates are kept once.
    Merge(MergeArgs),
}

/// Arguments of `bee records merge`.
#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// Run directories, or records directories holding them.
    #[arg(value_name = "DIR", required = true)]
    sources: Vec<PathBuf>,
    /// The merged records directory: new or empty.
    #[arg(long, value_name = "DIR")]
    into: PathBuf,
    /// Print merge.json's contents on stdout instead of a report.
    #[arg(long)]
    json: bool,
}

/// Runs `bee records`.
pub fn run(args: &Args) -> Exit {
    let Sub::Merge(m) = &args.command;
    for s in &m.sources {
        if !s.is_dir() {
            eprintln!(
                "bee records merge: {}: no such directory (give run directories or records \
                 directories)",
                s.display()
            );
            return Exit::NoInput;
        }
    }
    match merge(&m.sources, &m.into) {
        Ok(summary) => {
            if m.json {
                match serde_json::to_string(&summary) {
                    Ok(s) => println!("{s}"),
                    Err(e) => {
                        eprintln!("bee records merge: {e}");
                        return Exit::Software;
                    }
                }
            } else {
                report(&summary, m);
            }
            Exit::Ok
        }
        Err(e) => {
            let exit = exit_for(&e);
            if m.json {
                println!("{}", json!({ "ok": false, "error": e.to_string() }));
            } else {
                let hint = match e {
                    MergeError::Manifest(ManifestError::Locked(_)) => "; wait for that run to end",
                    _ => "",
                };
                eprintln!("bee records merge: {e}{hint}; nothing was merged");
            }
            exit
        }
    }
}

fn report(s: &MergeSummary, m: &MergeArgs) {
    eprintln!(
        "merged {} episode(s) of {} run director{} into {} (shards present: {} of {})",
        s.episodes,
        s.runs.len(),
        if s.runs.len() == 1 { "y" } else { "ies" },
        m.into.display(),
        s.shards_present.len(),
        s.shard_count
    );
    if !s.shards_missing.is_empty() {
        let k: Vec<String> = s.shards_missing.iter().map(ToString::to_string).collect();
        eprintln!(
            "warning: shard(s) {} of {} missing: their episodes are not in the merge",
            k.join(", "),
            s.shard_count
        );
    }
    if !s.missing_episodes.is_empty() {
        eprintln!(
            "warning: {} episode(s) of present shards have no transcript: {}",
            s.missing_episodes.len(),
            s.missing_episodes.join(", ")
        );
    }
    if !s.unfinished_episodes.is_empty() {
        eprintln!(
            "warning: {} episode(s) did not finish (rerun their shard with --resume): {}",
            s.unfinished_episodes.len(),
            s.unfinished_episodes.join(", ")
        );
    }
    if !s.skipped_sessions.is_empty() {
        eprintln!(
            "left out {} bee repl session(s), which are not runs of a scenario: {}",
            s.skipped_sessions.len(),
            s.skipped_sessions.join(", ")
        );
    }
    for d in &s.duplicates {
        eprintln!(
            "duplicate: episode {} ran more than once; kept {}, left out {}",
            d.episode_id,
            d.kept,
            d.dropped.join(", ")
        );
    }
    eprintln!(
        "{}: the merged summary; `bee metrics --records {}` reports from {STORE_FILE}",
        m.into.join(MERGE_FILE).display(),
        m.into.display()
    );
}

fn exit_for(e: &MergeError) -> Exit {
    match e {
        MergeError::Mismatch(_)
        | MergeError::Manifest(ManifestError::Missing(_) | ManifestError::Malformed { .. })
        | MergeError::Transcript(crate::records::TranscriptError::Malformed { .. }) => {
            Exit::DataErr
        }
        MergeError::Manifest(ManifestError::Locked(_)) | MergeError::NotEmpty(_) => Exit::CantCreat,
        MergeError::NoRuns(_) => Exit::NoInput,
        MergeError::Io { source, .. } | MergeError::Manifest(ManifestError::Io { source, .. }) => {
            match source.kind() {
                ErrorKind::NotFound => Exit::NoInput,
                ErrorKind::PermissionDenied => Exit::NoPerm,
                ErrorKind::AlreadyExists => Exit::CantCreat,
                _ => Exit::IoErr,
            }
        }
        MergeError::Transcript(_) | MergeError::Store(_) => Exit::Software,
    }
}
