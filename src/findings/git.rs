//! The commit a ledger event is made at: the repository's `HEAD`, read from `.git` without
//! running `git` (loose refs, `packed-refs`, linked work trees).

use std::path::{Path, PathBuf};

/// The git directory of the repository containing `dir`, and its common directory (where
/// refs live; the same unless it is a linked work tree).
fn git_dirs(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let mut here = Some(dir);
    while let Some(d) = here {
        let dot = d.join(".git");
        if dot.is_dir() {
            return Some((dot.clone(), dot));
        }
        if dot.is_file() {
            let text = std::fs::read_to_string(&dot).ok()?;
            let target = text.strip_prefix("gitdir:")?.trim();
            let gitdir = d.join(target);
            let common = std::fs::read_to_string(gitdir.join("commondir"))
                .ok()
                .map_or_else(|| gitdir.clone(), |c| gitdir.join(c.trim()));
            return Some((gitdir, common));
        }
        here = d.parent();
    }
    None
}

fn is_object_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit `HEAD` names in the repository containing `dir`, if there is one and it has a
/// commit.
#[must_use]
pub fn head_commit(dir: &Path) -> Option<String> {
    let (gitdir, common) = git_dirs(dir)?;
    let head = std::fs::read_to_string(gitdir.join("HEAD")).ok()?;
    let head = head.trim();
    let Some(name) = head.strip_prefix("ref:").map(str::trim) else {
        return is_object_id(head).then(|| head.to_owned());
    };
    for base in [&gitdir, &common] {
        if let Ok(id) = std::fs::read_to_string(base.join(name)) {
            let id = id.trim();
            if is_object_id(id) {
                return Some(id.to_owned());
            }
        }
    }
    let packed = std::fs::read_to_string(common.join("packed-refs")).ok()?;
    packed.lines().find_map(|l| {
        let (id, r) = l.split_once(' ')?;
        (r == name && is_object_id(id)).then(|| id.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_loose_packed_and_detached_heads() -> std::io::Result<()> {
        let t = tempfile::tempdir()?;
        let git = t.path().join(".git");
        std::fs::create_dir_all(git.join("refs/heads"))?;
        let sub = t.path().join("src/deep");
        std::fs::create_dir_all(&sub)?;
        assert_eq!(head_commit(&sub), None, "a ref with no commit yet");
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n")?;
        std::fs::write(
            git.join("packed-refs"),
            format!("# pack-refs with: peeled\n{b} refs/heads/main\n"),
        )?;
        assert_eq!(head_commit(&sub), Some(b.clone()));
        std::fs::write(git.join("refs/heads/main"), format!("{a}\n"))?;
        assert_eq!(head_commit(&sub), Some(a.clone()));
        std::fs::write(git.join("HEAD"), format!("{b}\n"))?;
        assert_eq!(head_commit(t.path()), Some(b));
        Ok(())
    }
}
