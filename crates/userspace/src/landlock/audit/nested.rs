//! Domains a scope's own program creates: a program bee confines may call
//! `landlock_restrict_self` itself (an agent sandboxing its own tools), nesting a domain in
//! bee's. Landlock logs a denial against the youngest layer that refused it, so a denial
//! bee's domain would also have made is logged against the nested one, whose creation record
//! names the program, not bee's executable. Such a domain is taken for the scope's when its
//! creator's pid is, as the record is read, a process in a scope's cgroup that began before
//! the record was logged (not one given the pid since: [`super::process`]). The scope may be
//! named by its launch
//! only after that ([`super::Reports::launched`] is told once the process runs, and the
//! program may create its domain first): the domain then waits, with the cgroup its creator
//! was in, until a launch names that cgroup. Its denials are reported with
//! [`bee_common::event::EVENT_NESTED`].

use super::State;
use super::record::Stamp;

impl State {
    /// Notes that `pid`, not bee's launcher, created `domain`: the domain is the scope's whose
    /// cgroup `pid` is in now, at once where a launch names that cgroup, else once one does
    /// ([`State::place_nested`]). Nothing is kept for a process gone, in no cgroup, or begun
    /// after the record was logged (its pid given again: [`State::cgroup_of_named`]).
    pub(super) fn nested_created(&mut self, domain: u64, pid: u32, logged: Stamp) {
        let Some(cgroup) = self.cgroup_of_named(pid, logged) else {
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
