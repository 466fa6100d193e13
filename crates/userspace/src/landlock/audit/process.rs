//! The process a record names, as the reader finds it when it reads the record: the cgroup
//! it is in, taken only if it is still the process the kernel named. A pid is given again
//! once its process is gone, so the process that has it now is taken for the one named only
//! if it began before the record was logged ([`began_by`]).

use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::State;
use super::record::Stamp;
use crate::cgroup::process_cgroup_dir;
use crate::support::parse_cgroup2_mount;

/// How much later than a record's stamp a process may seem to have begun and still be the
/// one the record names, in milliseconds: the stamp is the kernel's coarse clock (up to a
/// tick behind), a start time is counted in clock ticks (`USER_HZ`, 10 ms), and the wall
/// clock's distance from boot is read now, not then. A pid given again within this much of
/// the record would pass; giving one pid again takes the kernel through every other pid
/// (`kernel.pid_max`, at least 32,768) first, which no machine does in 50 ms.
pub(super) const START_SLACK_MS: u64 = 50;

impl State {
    /// The cgroup id of process `pid`, if it began before `logged` (allowing
    /// [`START_SLACK_MS`]); `None` for a process gone, in no cgroup, or begun since.
    pub(super) fn cgroup_of_named(&self, pid: u32, logged: Stamp) -> Option<u64> {
        let began = match self.began_of {
            Some(began_of) => began_of(pid),
            None => began_ms(pid),
        }?;
        if !began_by(began, logged) {
            return None;
        }
        match self.cgroup_of {
            Some(cgroup_of) => cgroup_of(pid),
            None => cgroup_of_pid(pid),
        }
    }
}

/// Whether a process that began at `began` (ms since the Unix epoch, rounded down to its
/// clock tick) can be the one a record logged at `logged` names.
pub(super) fn began_by(began: u64, logged: Stamp) -> bool {
    began <= logged.saturating_add(START_SLACK_MS)
}

/// When process `pid` began, in milliseconds since the Unix epoch, rounded down to a clock
/// tick: `/proc/PID/stat`'s `starttime` (clock ticks since boot, on `CLOCK_BOOTTIME`) added
/// to the wall clock's time at boot as it is now (`CLOCK_REALTIME` less `CLOCK_BOOTTIME`).
/// `None` for a process gone.
fn began_ms(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `comm` may hold spaces and parentheses: the fields after it follow the last `)`.
    let (_, rest) = stat.rsplit_once(')')?;
    // `starttime` is field 22; `rest` begins with field 3 (`state`).
    let ticks: u64 = rest.split_ascii_whitespace().nth(19)?.parse().ok()?;
    // SAFETY: sysconf(3) with a constant name reads a configuration value.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
    let boot = clock_ms(libc::CLOCK_REALTIME)?.checked_sub(clock_ms(libc::CLOCK_BOOTTIME)?)?;
    boot.checked_add(ticks.checked_mul(1000)? / hz.max(1))
}

/// The time on `clock`, in milliseconds.
fn clock_ms(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let millis = u64::try_from(ts.tv_nsec).ok()? / 1_000_000;
    secs.checked_mul(1000)?.checked_add(millis)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// This process began before now and after boot; a record logged before it began does
    /// not name it.
    #[test]
    fn a_process_began_before_records_of_it_and_not_before_those_older() {
        let now = clock_ms(libc::CLOCK_REALTIME).unwrap();
        let began = began_ms(std::process::id()).unwrap();
        let boot = now - clock_ms(libc::CLOCK_BOOTTIME).unwrap();
        assert!(boot <= began && began <= now, "{boot} {began} {now}");
        assert!(began_by(began, now));
        assert!(began_by(began, began - START_SLACK_MS));
        assert!(!began_by(began, began - START_SLACK_MS - 1));
        assert_eq!(began_ms(u32::MAX), None);
    }
}
