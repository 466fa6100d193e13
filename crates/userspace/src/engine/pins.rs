//! The bpffs pin directories: one per engine instance, `<root>/<pid>-<starttime>/`.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use aya::maps::{HashMap, MapData};
use bee_common::ScopeValue;

use super::EngineError;
use super::maps::map_names;
use crate::cgroup::start_time;

fn sys(call: &'static str, path: &Path) -> impl FnOnce(io::Error) -> EngineError {
    let path = path.to_owned();
    move |io_error| EngineError::Syscall {
        call,
        path,
        io_error,
    }
}

/// This process's instance directory name.
fn instance_name() -> String {
    let pid = std::process::id().to_string();
    let start = start_time("self").unwrap_or_default();
    format!("{pid}-{start}")
}

/// Whether the instance named `name` belongs to a process that still runs.
fn owner_alive(name: &str) -> bool {
    let Some((pid, start)) = name.split_once('-') else {
        return false;
    };
    start_time(pid).is_some_and(|s| start.parse() == Ok(s))
}

/// Creates (replacing a leftover of the same name) this process's instance directory with its
/// `links/` subdirectory.
pub(super) fn create_instance_dir(root: &Path) -> Result<PathBuf, EngineError> {
    let dir = root.join(instance_name());
    if dir.exists() {
        remove_instance_dir(&dir)?;
    }
    let links = dir.join("links");
    fs::create_dir_all(&links).map_err(sys("mkdir", &links))?;
    Ok(dir)
}

/// Unpins everything in an instance directory and removes it.
pub(super) fn remove_instance_dir(dir: &Path) -> Result<(), EngineError> {
    for sub in ["links", "maps"] {
        let d = dir.join(sub);
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            fs::remove_file(&p).map_err(sys("unlink", &p))?;
        }
        fs::remove_dir(&d).map_err(sys("rmdir", &d))?;
    }
    fs::remove_dir(dir).map_err(sys("rmdir", dir))
}

/// Whether some cgroup with id `id` (the inode number of its directory) under `root` still has
/// processes (`populated 1` in `cgroup.events`).
fn cgroup_populated(root: &Path, id: u64) -> bool {
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        if fs::metadata(&dir).is_ok_and(|m| m.ino() == id) {
            return crate::cgroup::events_populated(&dir)
                .map(|p| p == Some(true))
                // Unreadable: assume it may hold processes (keep confining).
                .unwrap_or(true);
        }
        if let Ok(entries) = fs::read_dir(&dir) {
            stack.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
    false
}

/// The cgroup ids in an instance's pinned scope map, or `None` if it cannot be read.
fn pinned_scopes(dir: &Path) -> Option<Vec<u64>> {
    let data = MapData::from_pin(dir.join("maps").join(map_names::SCOPES)).ok()?;
    let map: HashMap<MapData, u64, ScopeValue> =
        HashMap::try_from(aya::maps::Map::HashMap(data)).ok()?;
    map.keys().collect::<Result<Vec<_>, _>>().ok()
}

/// Removes the instance directories under `root` whose owner died and whose scopes have no
/// processes left; returns the dead instances kept because a scope still has processes (or
/// its scope map could not be read). Creates `root` if needed.
pub(super) fn clean_stale(root: &Path) -> Result<Vec<PathBuf>, EngineError> {
    fs::create_dir_all(root).map_err(sys("mkdir", root))?;
    let cgroup_root = fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|m| crate::support::parse_cgroup2_mount(&m));
    let mut kept = Vec::new();
    for entry in fs::read_dir(root).map_err(sys("readdir", root))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if owner_alive(&name) {
            continue;
        }
        let dir = entry.path();
        let live = match (pinned_scopes(&dir), &cgroup_root) {
            (Some(ids), Some(cg)) => ids.iter().any(|&id| cgroup_populated(cg, id)),
            _ => true,
        };
        if live {
            kept.push(dir);
        } else {
            remove_instance_dir(&dir)?;
        }
    }
    Ok(kept)
}
