//! Episode workspaces: a fresh copy of a directory per episode, or the directory itself.

use std::io;
use std::path::{Path, PathBuf};

/// Copies `src` into a new directory `dst` (which must not exist): regular files with their
/// permissions, directories, and symbolic links as links (never followed). Other kinds of
/// file (sockets, devices, fifos) are skipped.
///
/// # Errors
/// The first I/O error, naming the path it concerned.
pub fn copy_workspace(src: &Path, dst: &Path) -> io::Result<()> {
    std::fs::create_dir(dst).map_err(|e| at(dst, e))?;
    copy_into(src, dst)
}

fn at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn copy_into(src: &Path, dst: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(src).map_err(|e| at(src, e))? {
        let entry = entry.map_err(|e| at(src, e))?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| at(&from, e))?;
        if kind.is_symlink() {
            let target = std::fs::read_link(&from).map_err(|e| at(&from, e))?;
            std::os::unix::fs::symlink(target, &to).map_err(|e| at(&to, e))?;
        } else if kind.is_dir() {
            std::fs::create_dir(&to).map_err(|e| at(&to, e))?;
            copy_into(&from, &to)?;
        } else if kind.is_file() {
            std::fs::copy(&from, &to).map_err(|e| at(&from, e))?;
        }
    }
    Ok(())
}

/// The directory an episode's copy goes to: `<temp>/bee-<run id>-<episode id>`.
#[must_use]
pub fn copy_path(temp: &Path, run_id: &str, episode_id: &str) -> PathBuf {
    temp.join(format!("bee-{run_id}-{episode_id}"))
}
