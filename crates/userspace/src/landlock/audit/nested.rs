//! Domains a scope's own program creates: a program bee confines may call
//! `landlock_restrict_self` itself (an agent sandboxing its own tools), nesting a domain in
//! bee's. Landlock logs a denial against the youngest layer that refused it, so a denial
//! bee's domain would also have made is logged against the nested one, whose creation record
//! names the program, not bee's executable. Such a domain is taken for the scope's when its
//! creator's pid is, as the record is read, a process in a scope's cgroup: a pid another
//! program's process had and a scope's process has since been given (reused) would have to be
//! reused between the record's logging and its reading. The scope may be named by its launch
//! only after that ([`super::Reports::launched`] is told once the process runs, and the
//! program may create its domain first): the domain then waits, with the cgroup its creator
//! was in, until a launch names that cgroup. Its denials are reported with
//! [`bee_common::event::EVENT_NESTED`].

use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::State;
use crate::cgroup::process_cgroup_dir;
use crate::support::parse_cgroup2_mount;

impl State {
    /// Notes that `pid`, not bee's launcher, created `domain`: the domain is the scope's whose
    /// cgroup `pid` is in now, at once where a launch names that cgroup, else once one does
    /// ([`State::place_nested`]). Nothing is kept for a process gone, or in no cgroup.
    pub(super) fn nested_created(&mut self, domain: u64, pid: u32) {
        let Some(cgroup) = (match self.cgroup_of {
            Some(cgroup_of) => cgroup_of(pid),
            None => cgroup_of_pid(pid),
        }) else {
            return;
        };
        if self.launches.values().any(|c| *c == cgroup) {
            self.nested.insert(domain, cgroup);
        } else {
            if self.nested_unplaced.len() >= super::NESTED_UNPLACED_MAX {
                self.nested_unplaced.pop_front();
            }
            self.nested_unplaced.push_back((domain, cgroup));
        }
    }

    /// Moves the nested domains whose creator's cgroup a launch now names into
    /// [`State::nested`].
    pub(super) fn place_nested(&mut self) {
        let Self {
            launches,
            nested,
            nested_unplaced,
            ..
        } = self;
        nested_unplaced.retain(|(domain, cgroup)| {
            let launched = launches.values().any(|c| c == cgroup);
            if launched {
                nested.insert(*domain, *cgroup);
            }
            !launched
        });
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
