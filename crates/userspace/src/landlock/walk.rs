//! The matches of a pattern that matches by name below its root ([`Target::Walk`]), found
//! when a call starts by walking the root: Landlock rules bind to files, so each call grants
//! the files that match then.
//!
//! The walk follows no symbolic link (bee's semantics match no path through one), descends
//! into no match of a pattern ending in `/**` (the match's tree is granted whole), and stops
//! with an error past [`WALK_MAX`] entries rather than grant part of the matches: a pattern
//! rooted too high (`/**/*.so`) refuses the call and says so.
//!
//! [`Target::Walk`]: super::plan::Target::Walk

use std::os::unix::ffi::OsStrExt as _;

use bee_core::glob::PathPattern;

/// The most directory entries one walk (of one root, for all its patterns) looks at.
pub const WALK_MAX: usize = 200_000;

/// A walk looked at more than [`WALK_MAX`] entries below `root`: the call is refused rather
/// than granted part of the matches.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "walking {root} for the matches of a pattern that matches by name looked at more than {WALK_MAX} entries"
)]
pub struct TooLarge {
    /// The root walked (`/` for the whole file system).
    pub root: String,
    /// The patterns walked for, as indices into what [`matches_each`] was given.
    pub patterns: Vec<usize>,
}

/// For each of `patterns`, in their order, the existing paths below its root that it
/// matches, sorted; a match of a pattern ending in `/**` is not descended into. A directory
/// that cannot be read (gone, or not the caller's to read) is passed over: nothing in it is
/// granted. The patterns with the same root share one walk of it (and its [`WALK_MAX`]).
///
/// # Errors
/// [`TooLarge`]: a walk looked at more than [`WALK_MAX`] entries.
pub fn matches_each(patterns: &[&PathPattern]) -> Result<Vec<Vec<String>>, TooLarge> {
    let mut found = vec![Vec::new(); patterns.len()];
    let mut roots: Vec<String> = patterns.iter().map(|p| root_of(p)).collect();
    roots.sort();
    roots.dedup();
    for root in roots {
        // The patterns of this root, up to 64 a walk (one bit each below).
        let group: Vec<usize> = (0..patterns.len())
            .filter(|&i| root_of(patterns[i]) == root)
            .collect();
        for chunk in group.chunks(64) {
            walk(&root, patterns, chunk, &mut found)?;
        }
    }
    for f in &mut found {
        f.sort();
    }
    Ok(found)
}

/// The directory a pattern's walk starts at, as `{dir}/{name}` paths are made from it: ""
/// for `/`.
fn root_of(pattern: &PathPattern) -> String {
    let prefix = pattern.literal_prefix();
    if prefix.is_empty() {
        String::new()
    } else {
        format!("/{}", prefix.join("/"))
    }
}

/// Walks `root` once for the patterns `group` (indices into `patterns`, at most 64), adding
/// each one's matches to its entry of `found`.
fn walk(
    root: &str,
    patterns: &[&PathPattern],
    group: &[usize],
    found: &mut [Vec<String>],
) -> Result<(), TooLarge> {
    let subtree: Vec<bool> = group
        .iter()
        .map(|&i| matches!(patterns[i], PathPattern::Nested { subtree: true, .. }))
        .collect();
    let all: u64 = if group.len() == 64 {
        u64::MAX
    } else {
        (1u64 << group.len()) - 1
    };
    // Each directory to read, with the patterns (bits) that matched it or a directory above
    // it as a tree: nothing below is theirs to grant again.
    let mut pending = vec![(root.to_owned(), 0u64)];
    let mut seen = 0usize;
    while let Some((dir, covered)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(if dir.is_empty() { "/" } else { &dir }) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > WALK_MAX {
                return Err(TooLarge {
                    root: if root.is_empty() { "/" } else { root }.to_owned(),
                    patterns: group.to_vec(),
                });
            }
            let name = entry.file_name();
            let Ok(name) = std::str::from_utf8(name.as_bytes()) else {
                // bee's patterns and paths are UTF-8: such a name matches no rule.
                continue;
            };
            let path = format!("{dir}/{name}");
            let mut now_covered = covered;
            for (bit, &i) in group.iter().enumerate() {
                if covered & (1 << bit) == 0 && patterns[i].matches(&path) {
                    found[i].push(path.clone());
                    if subtree[bit] {
                        now_covered |= 1 << bit;
                    }
                }
            }
            // `DirEntry::file_type` does not follow a symbolic link.
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && now_covered != all {
                pending.push((path, now_covered));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> PathPattern {
        PathPattern::parse(text).unwrap()
    }

    /// The matches of one pattern, walked alone.
    fn matches(pattern: &PathPattern) -> Result<Vec<String>, TooLarge> {
        Ok(matches_each(&[pattern])?.pop().unwrap_or_default())
    }

    /// Files by suffix and by name at any depth, trees by a nested tail (not descended
    /// into), never through a symbolic link.
    #[test]
    fn a_walk_finds_each_match_below_its_root_and_none_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_str().unwrap();
        for dir in ["a/b/c", "a/node_modules/x/node_modules", "d"] {
            std::fs::create_dir_all(t.path().join(dir)).unwrap();
        }
        for file in [
            "top.so",
            "a/b/c/deep.so",
            "a/b/not.so.txt",
            "d/Cargo.toml",
            "a/b/Cargo.toml",
        ] {
            std::fs::write(t.path().join(file), "").unwrap();
        }
        std::os::unix::fs::symlink(t.path().join("a"), t.path().join("d/link")).unwrap();
        std::os::unix::fs::symlink("/usr/lib", t.path().join("d/lib.so")).unwrap();
        let rel = |paths: Vec<String>| -> Vec<String> {
            paths
                .into_iter()
                .map(|p| p.strip_prefix(root).unwrap().to_owned())
                .collect()
        };
        let so = matches(&pattern(&format!("{root}/**/*.so"))).unwrap();
        // The link named `lib.so` is a match by name (the launch looks it up without
        // following it, and grants nothing there); nothing is found through `d/link`.
        assert_eq!(rel(so), ["/a/b/c/deep.so", "/d/lib.so", "/top.so"]);
        let cargo = matches(&pattern(&format!("{root}/**/Cargo.toml"))).unwrap();
        assert_eq!(rel(cargo), ["/a/b/Cargo.toml", "/d/Cargo.toml"]);
        let nm = matches(&pattern(&format!("{root}/**/node_modules/**"))).unwrap();
        assert_eq!(rel(nm), ["/a/node_modules"]);
        // One walk for several patterns of a root finds what each finds alone.
        let (so, nm) = (
            pattern(&format!("{root}/**/*.so")),
            pattern(&format!("{root}/**/node_modules/**")),
        );
        let each = matches_each(&[&so, &nm]).unwrap();
        assert_eq!(each, [matches(&so).unwrap(), matches(&nm).unwrap()]);
        // A walk past its limit names its root and patterns.
        let huge = pattern("/**/*.no-such-suffix");
        let err = matches_each(&[&so, &huge]).unwrap_err();
        assert_eq!(
            (err.root.as_str(), err.patterns.as_slice()),
            ("/", &[1][..])
        );
        assert!(
            matches(&pattern(&format!("{root}/gone/**/*.so")))
                .unwrap()
                .is_empty()
        );
    }
}
