//! Shards: a scenario's episodes split over several `bee run` processes (a Kubernetes Indexed
//! Job's pods, a CI matrix's jobs), each running one shard.
//!
//! Shards are numbered from 1 (`--shard 1/4` … `--shard 4/4`, as CI matrices count);
//! Kubernetes' `JOB_COMPLETION_INDEX` counts from 0, and index `i` is shard `i + 1`.
//!
//! The assignment depends only on the episode ids and the shard count: every episode is
//! ranked by the SHA-256 of its id, and the episode of rank `r` (from 0) goes to shard
//! `r mod N + 1`. It is therefore the same on every machine and Rust version, the same when
//! the scenario file is reordered, puts every episode in exactly one shard, and gives shards
//! sizes that differ by at most one.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One shard of `count`: `index` is from 1 to `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// From 1.
    pub index: u32,
    /// How many shards there are, at least 1.
    pub count: u32,
}

/// Why a shard specification is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// Not `K/N` with two whole numbers.
    #[error("`{0}` is not a shard: write K/N, e.g. 2/4 for the second of four shards")]
    Syntax(String),
    /// `N` is 0.
    #[error("`{0}`: the shard count must be at least 1")]
    NoShards(String),
    /// `K` is 0 or above `N`.
    #[error("`{spec}`: shards are numbered 1 to {count}")]
    OutOfRange {
        /// What was given.
        spec: String,
        /// `N`.
        count: u32,
    },
    /// `JOB_COMPLETION_INDEX` is not a number, or not below the shard count.
    #[error(
        "JOB_COMPLETION_INDEX={index:?} does not fit {count} shard(s) (it counts from 0, so it \
         must be 0 to {}): check `--shards` against the Job's `completions`",
        count.saturating_sub(1)
    )]
    BadIndex {
        /// The variable's value.
        index: String,
        /// The declared shard count.
        count: u32,
    },
}

impl Shard {
    /// The shard of Kubernetes' 0-based `JOB_COMPLETION_INDEX` among `count` shards.
    ///
    /// # Errors
    /// [`ShardError::NoShards`] for a count of 0; [`ShardError::BadIndex`] for an index that
    /// is not a number below `count`.
    pub fn from_completion_index(index: &str, count: u32) -> Result<Self, ShardError> {
        if count == 0 {
            return Err(ShardError::NoShards(format!("--shards {count}")));
        }
        match index.trim().parse::<u32>() {
            Ok(i) if i < count => Ok(Self {
                index: i + 1,
                count,
            }),
            _ => Err(ShardError::BadIndex {
                index: index.to_owned(),
                count,
            }),
        }
    }

    /// Whether `episode_id` belongs to this shard, given all the scenario's ids.
    #[must_use]
    pub fn holds(&self, assignment: &BTreeMap<String, u32>, episode_id: &str) -> bool {
        assignment.get(episode_id) == Some(&self.index)
    }
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || ShardError::Syntax(s.to_owned());
        let (k, n) = s.split_once('/').ok_or_else(syntax)?;
        let k: u32 = k.trim().parse().map_err(|_| syntax())?;
        let n: u32 = n.trim().parse().map_err(|_| syntax())?;
        if n == 0 {
            return Err(ShardError::NoShards(s.to_owned()));
        }
        if k == 0 || k > n {
            return Err(ShardError::OutOfRange {
                spec: s.to_owned(),
                count: n,
            });
        }
        Ok(Self { index: k, count: n })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The SHA-256 of `bytes`, in lowercase hexadecimal.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every id's shard (from 1) among `count` shards; ids given twice count once. With a count
/// of 0 every id is in shard 1.
#[must_use]
pub fn assign<'a>(ids: impl IntoIterator<Item = &'a str>, count: u32) -> BTreeMap<String, u32> {
    let mut ranked: Vec<([u8; 32], &str)> = ids
        .into_iter()
        .map(|id| {
            let mut h = Sha256::new();
            h.update(b"bee shard v1\0");
            h.update(id.as_bytes());
            (h.finalize().into(), id)
        })
        .collect();
    ranked.sort_unstable();
    ranked.dedup();
    let count = count.max(1);
    ranked
        .into_iter()
        .zip((0..count).cycle())
        .map(|((_, id), r)| (id.to_owned(), r + 1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!("2/4".parse(), Ok(Shard { index: 2, count: 4 }));
        assert!(matches!(
            "3/2".parse::<Shard>(),
            Err(ShardError::OutOfRange { .. })
        ));
        assert!(matches!(
            "0/0".parse::<Shard>(),
            Err(ShardError::NoShards(_))
        ));
        assert!(matches!(
            "0/3".parse::<Shard>(),
            Err(ShardError::OutOfRange { .. })
        ));
        assert!(matches!("x".parse::<Shard>(), Err(ShardError::Syntax(_))));
        assert_eq!(
            Shard::from_completion_index("0", 4),
            Ok(Shard { index: 1, count: 4 })
        );
        assert!(Shard::from_completion_index("4", 4).is_err());
        assert!(Shard::from_completion_index("-1", 4).is_err());
    }

    #[test]
    fn the_assignment_is_pinned() {
        // A change here moves episodes between shards of existing batches.
        let a = assign(["a", "b", "c", "d", "e"], 2);
        let got: Vec<(&str, u32)> = a.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(got, [("a", 1), ("b", 1), ("c", 2), ("d", 2), ("e", 1)]);
        assert_eq!(sha256_hex(b"abc").len(), 64);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
