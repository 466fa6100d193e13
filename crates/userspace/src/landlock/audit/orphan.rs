//! Domains whose creation record was lost. Landlock logs a domain's `AUDIT_LANDLOCK_DOMAIN`
//! record once, with its first logged denial; when the reader's socket drops it (a flood
//! filled it), no record of the domain ever names its creator again, and every later denial
//! of the domain would stay unplaced, unreported. Such a domain is adopted by the scope
//! whose cgroup the refused process is in as its denial is read, provided:
//!
//! - the process began before the denial was logged (its pid not given again since:
//!   [`super::process`]), and a launch names its cgroup;
//! - records were lost while that scope lived: a domain can lack its record only if it was
//!   lost (or logged before the reader started, as a sandbox bee itself runs in was: its
//!   denials are not the scope's policy's to explain, and are left unplaced).
//!
//! Whether an adopted domain is the scope's own or one its program nested is not known: its
//! denials are reported as the scope's own (without [`bee_common::event::EVENT_NESTED`]),
//! and the report says that records were lost.

use super::State;
use super::record::Stamp;

impl State {
    /// `domain`, which refused process `pid` in a denial logged at `logged`, has no known
    /// creator: adopts it for the scope whose cgroup `pid` is in, under the conditions of
    /// the module's notes.
    pub(super) fn adopt_orphan(&mut self, domain: u64, pid: u32, logged: Stamp) {
        // Checked first, from memory: most denials read have a known domain, and where
        // nothing was lost no domain is adopted, so `/proc` is read for none of them.
        if pid == 0 || self.scope_of_domain(domain).is_some() || !self.losses.lost_since_any_began()
        {
            return;
        }
        let Some(cgroup) = self.cgroup_of_named(pid, logged) else {
            return;
        };
        if self.launches.values().any(|c| *c == cgroup) && self.losses.lost_since_began(cgroup) {
            self.adopted.insert(domain, cgroup);
        }
    }
}
