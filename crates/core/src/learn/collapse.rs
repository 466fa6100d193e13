//! Widening exact paths to `DIR/**` where the observed set covers a directory.
//!
//! A directory is *covered* when every entry it holds now (as [`FsView::list`] reports it) was
//! observed, itself or as a covered directory. Covered directories are replaced by `DIR/**`,
//! deepest first, unless the subtree could hold a protected path or a well-known secret
//! ([`super::sensitive`]), or the directory holds more than [`FsView`]'s listing limit.

use std::collections::BTreeSet;

use super::sensitive::{sensitive_name, subtree_refused, within};

/// What synthesis may ask of the filesystem. Kept behind a trait so that synthesis itself stays
/// pure and testable; the command line passes [`HostFs`].
pub trait FsView {
    /// The names in directory `dir` (absolute, normalised), or `None` when it is not a
    /// readable directory or holds more than a listing limit.
    fn list(&self, dir: &str) -> Option<Vec<String>>;
    /// Whether `path` exists now (without following a final symbolic link).
    fn exists(&self, path: &str) -> bool;
}

/// Entries read per directory at most; a larger directory is never widened.
pub const LIST_LIMIT: usize = 4096;

/// The host's filesystem.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostFs;

impl FsView for HostFs {
    fn list(&self, dir: &str) -> Option<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).ok()? {
            let entry = entry.ok()?;
            names.push(entry.file_name().into_string().ok()?);
            if names.len() > LIST_LIMIT {
                return None;
            }
        }
        Some(names)
    }

    fn exists(&self, path: &str) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }
}

/// The parent directory of a normalised absolute path (`None` for `/`).
pub(crate) fn parent(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => path.get(..i),
        None => None,
    }
}

fn child(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Splits `paths` into (exact paths, subtree roots): covered directories become roots, and the
/// paths below a root are dropped.
pub fn collapse(
    paths: &BTreeSet<String>,
    fs: &dyn FsView,
    home: Option<&str>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut covered: BTreeSet<String> = paths.clone();
    let mut roots: BTreeSet<String> = BTreeSet::new();
    // Candidate directories, deepest first (by segment count, then name).
    let mut pending: BTreeSet<(std::cmp::Reverse<usize>, String)> = paths
        .iter()
        .filter_map(|p| parent(p))
        .map(|d| (std::cmp::Reverse(depth(d)), d.to_owned()))
        .collect();
    let mut tried: BTreeSet<String> = BTreeSet::new();
    while let Some((_, dir)) = pending.pop_first() {
        if !tried.insert(dir.clone()) || subtree_refused(&dir, home) {
            continue;
        }
        let Some(names) = fs.list(&dir) else {
            continue;
        };
        if names.is_empty() || names.iter().any(|n| sensitive_name(n)) {
            continue;
        }
        if !names.iter().all(|n| covered.contains(&child(&dir, n))) {
            continue;
        }
        roots.retain(|r| !within(r, &dir));
        roots.insert(dir.clone());
        covered.insert(dir.clone());
        if let Some(up) = parent(&dir) {
            pending.insert((std::cmp::Reverse(depth(up)), up.to_owned()));
        }
    }
    let exact = paths
        .iter()
        .filter(|p| !roots.iter().any(|r| within(p, r)))
        .cloned()
        .collect();
    (exact, roots)
}

fn depth(path: &str) -> usize {
    path.split('/').filter(|s| !s.is_empty()).count()
}
