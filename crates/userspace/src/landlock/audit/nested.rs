//! Domains a scope's own program creates: a program bee confines may call
//! `landlock_restrict_self` itself (an agent sandboxing its own tools), nesting a domain in
//! bee's. Landlock logs a denial against the youngest layer that refused it, so a denial
//! bee's domain would also have made is logged against the nested one, whose creation record
//! names the program, not bee's executable. Such a domain is taken for the scope's when its
//! creator's pid is, as the record is read, a process in a live scope's cgroup: a pid another
//! program's process had and a scope's process has since been given (reused) would have to be
//! reused between the record's logging and its reading. Its denials are reported with
//! [`bee_common::event::EVENT_NESTED`].

use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::State;
use crate::cgroup::process_cgroup_dir;
use crate::support::parse_cgroup2_mount;

impl State {
    /// The cgroup id of the live scope (one with a launch) that process `pid` is in now;
    /// `None` for a process in no such scope, or one gone.
    pub(super) fn live_scope_of_pid(&self, pid: u32) -> Option<u64> {
        let id = match self.cgroup_of {
            Some(cgroup_of) => cgroup_of(pid),
            None => cgroup_of_pid(pid),
        }?;
        self.launches.values().any(|c| *c == id).then_some(id)
    }
}

/// The id of the cgroup (v2) process `pid` is in: its directory's inode number, as bee's
/// scopes are numbered, below the cgroup2 mount `/proc/self/mountinfo` names (read once).
fn cgroup_of_pid(pid: u32) -> Option<u64> {
    static MOUNT: OnceLock<Option<PathBuf>> = OnceLock::new();
    let mount = MOUNT
        .get_or_init(|| parse_cgroup2_mount(&std::fs::read_to_string("/proc/self/mountinfo").ok()?))
        .as_deref()?;
    let dir = process_cgroup_dir(Some(pid), mount).ok()?;
    Some(std::fs::metadata(dir).ok()?.ino())
}
