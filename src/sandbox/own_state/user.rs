//! The user's configuration directory as bee's own state. Everything bee reads there (its
//! `config.toml`, skills, roles) steers every later bee of that user, so none of it may be
//! within a scope's write reach — neither the directory, nor what it holds through symbolic
//! links (dotfile managers link files and skills into place), nor a link on the way to it
//! that a scope could replace with a directory of its own.

use std::io;
use std::path::{Path, PathBuf};

use bee_core::CompiledPolicy;

use super::{StatePath, lexical, one_name, protect_one, real_path};

/// The most entries looked at below the directory (its links and their targets included).
const MAX_ENTRIES: usize = 4096;
/// The most directory levels looked at below it.
const MAX_DEPTH: usize = 8;

/// Protects the configuration directory `dir` (absolute, as the user names it).
///
/// # Errors
/// A symbolic link on the way to `dir` that a write grant covers (a scope could put a
/// directory of its own there); a file in it with a second name (a hard link), or more than
/// [`MAX_ENTRIES`] entries; and [`protect_one`]'s errors.
pub(super) fn protect(policy: &mut CompiledPolicy, dir: &Path) -> io::Result<()> {
    let dir = lexical(dir);
    for at in dir.ancestors() {
        let is_link = std::fs::symlink_metadata(at).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && writes(policy, at) {
            return Err(io::Error::other(format!(
                "bee's user configuration `{}` is reached through the symbolic link `{}`, which \
                 the policy lets a scope replace: set XDG_CONFIG_HOME to the real directory, \
                 or leave the link out of the policy's write grants",
                dir.display(),
                at.display()
            )));
        }
    }
    let Some(real) = real_path(&dir) else {
        return Ok(());
    };
    protect_one(policy, &StatePath::Dir(real.clone()), &["x"], true)?;
    let mut stack: Vec<(PathBuf, usize)> = vec![(real.clone(), 0)];
    let mut seen = 0usize;
    while let Some((at, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(io::Error::other(format!(
                    "bee's user configuration `{}` holds more than {MAX_ENTRIES} entries",
                    real.display()
                )));
            }
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                // Where it leads, whether that exists yet or not (a scope could make it).
                let Some(target) = std::fs::read_link(&path)
                    .ok()
                    .map(|t| at.join(t))
                    .and_then(|t| real_path(&lexical(&t)))
                else {
                    continue;
                };
                if target.starts_with(&real) {
                    continue;
                }
                if target.is_dir() {
                    protect_one(policy, &StatePath::Dir(target.clone()), &["x"], true)?;
                    if depth < MAX_DEPTH {
                        stack.push((target, depth + 1));
                    }
                } else {
                    protect_one(policy, &StatePath::File(target), &["x"], true)?;
                }
            } else if meta.is_dir() {
                if depth < MAX_DEPTH {
                    stack.push((path, depth + 1));
                }
            } else {
                one_name(&path, &meta)?;
            }
        }
    }
    Ok(())
}

/// Whether a write grant of `policy` covers `path`.
fn writes(policy: &CompiledPolicy, path: &Path) -> bool {
    path.to_str()
        .is_some_and(|p| policy.fs.write.iter().any(|w| w.pattern.matches(p)))
}
