//! A run directory's manifest (`run.json`) and lock (`run.lock`).
//!
//! The manifest says which scenario (by hash), which shard and which bee made the run, so that
//! `bee run --resume` and `bee records merge` refuse a directory of another scenario, another
//! shard or another bee instead of mixing their records. The lock (an exclusive `flock(2)`
//! held while a run writes the directory; the kernel drops it when the process ends, however
//! it ends) keeps two processes from writing one run directory.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use crate::scenario::Shard;

/// The manifest's file name inside a run directory.
pub const MANIFEST_FILE: &str = "run.json";

/// The lock's file name inside a run directory.
pub const LOCK_FILE: &str = "run.lock";

/// The manifest format this bee writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;

/// This bee's version, as manifests record it.
pub const BEE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What made a run directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunManifest {
    /// [`MANIFEST_FORMAT`] when written.
    pub format: u32,
    /// The bee that made the run.
    pub bee_version: String,
    /// The scenario file or directory, as given.
    pub scenario: String,
    /// The SHA-256 over every episode's id and content hash, all shards' episodes included:
    /// the same for every shard of one scenario.
    pub scenario_hash: String,
    /// The shard this run ran, if the scenario was sharded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// How many episodes the scenario has, all shards together.
    pub scenario_episodes: usize,
    /// The top-level episodes this run is to run (this shard's), sorted.
    pub episodes: Vec<String>,
}

/// Why a manifest or lock could not be read or written, or does not fit.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The run directory has no manifest: an older bee made it, or it is not a run.
    #[error(
        "{0}: no {MANIFEST_FILE}: this run directory was made by a bee older than {BEE_VERSION} \
         or is not a run directory; it can be neither resumed nor merged"
    )]
    Missing(PathBuf),
    /// The manifest is not one.
    #[error("{path}: not a run manifest: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Another process holds the run directory's lock.
    #[error("{0}: another bee process is writing this run directory (it holds {LOCK_FILE})")]
    Locked(PathBuf),
}

impl RunManifest {
    /// Reads `dir/run.json`.
    ///
    /// # Errors
    /// [`ManifestError::Missing`] when there is none; `Io` or `Malformed` otherwise.
    pub fn read(dir: &Path) -> Result<Self, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ManifestError::Missing(dir.to_owned()));
            }
            Err(source) => return Err(ManifestError::Io { path, source }),
        };
        serde_json::from_slice(&bytes).map_err(|e| ManifestError::Malformed {
            path,
            reason: e.to_string(),
        })
    }

    /// Writes `dir/run.json`; an existing manifest is never replaced.
    ///
    /// # Errors
    /// When the file exists or cannot be written.
    pub fn write_new(&self, dir: &Path) -> Result<(), ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let io = |source| ManifestError::Io {
            path: path.clone(),
            source,
        };
        let mut json = serde_json::to_vec_pretty(self).map_err(|e| io(e.into()))?;
        json.push(b'\n');
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io)?;
        f.write_all(&json).map_err(io)?;
        f.sync_all().map_err(io)
    }

    /// Why a run with this manifest cannot take records of `other` (another format, bee,
    /// scenario or shard count), in words naming `dir`; `None` when it can.
    #[must_use]
    pub fn mismatch(&self, other: &Self, dir: &Path) -> Option<String> {
        let dir = dir.display();
        if self.format != other.format || self.bee_version != other.bee_version {
            return Some(format!(
                "{dir} was made by bee {} (manifest format {}); this is bee {} (format {}): \
                 finish or merge it with that bee",
                other.bee_version, other.format, self.bee_version, self.format
            ));
        }
        if self.scenario_hash != other.scenario_hash {
            return Some(format!(
                "{dir} holds a run of another scenario ({} as it was then, hash {}) than {} \
                 (hash {})",
                other.scenario,
                short(&other.scenario_hash),
                self.scenario,
                short(&self.scenario_hash)
            ));
        }
        let count = |m: &Self| m.shard.map_or(1, |s| s.count);
        if count(self) != count(other) {
            return Some(format!(
                "{dir} holds a run split into {} shard(s); this one is split into {}",
                count(other),
                count(self)
            ));
        }
        None
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The exclusive lock on a run directory, held until dropped (or the process ends).
#[derive(Debug)]
pub struct RunLock {
    _lock: Flock<File>,
}

impl RunLock {
    /// Takes `dir/run.lock` without waiting.
    ///
    /// # Errors
    /// [`ManifestError::Locked`] when another process holds it; `Io` when the file cannot be
    /// opened or locked.
    pub fn take(dir: &Path) -> Result<Self, ManifestError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| ManifestError::Io {
                path: path.clone(),
                source,
            })?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Ok(Self { _lock: lock }),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(ManifestError::Locked(dir.to_owned())),
            Err((_, errno)) => Err(ManifestError::Io {
                path,
                source: errno.into(),
            }),
        }
    }

    /// Checks that no process is writing `dir`, for a reader (`bee records merge`): takes a
    /// shared lock on `dir/run.lock`, if there is one, without creating anything.
    ///
    /// # Errors
    /// [`ManifestError::Locked`] while a run holds the lock; `Io` when it cannot be taken.
    pub fn probe(dir: &Path) -> Result<Option<Self>, ManifestError> {
        let path = dir.join(LOCK_FILE);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ManifestError::Io { path, source }),
        };
        match Flock::lock(file, FlockArg::LockSharedNonblock) {
            Ok(lock) => Ok(Some(Self { _lock: lock })),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(ManifestError::Locked(dir.to_owned())),
            Err((_, errno)) => Err(ManifestError::Io {
                path,
                source: errno.into(),
            }),
        }
    }
}
