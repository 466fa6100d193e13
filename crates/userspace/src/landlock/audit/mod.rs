//! The Landlock engine's denial reports: the kernel's Landlock audit records (ABI 7, Linux
//! 6.15), read from the audit netlink socket's read-only multicast group and turned into the
//! [`AuditEvent`]s the BPF engine reports, so that a denial is explained to the model the same
//! way under either engine.
//!
//! - The launcher asks for records after `execve` too (`LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON`:
//!   by default Landlock logs only until the sandboxed process runs another program).
//! - Landlock logs only while the kernel's audit is enabled. [`Reports::start`] enables it
//!   when it is off (`AUDIT_SET`, which needs `CAP_AUDIT_CONTROL`) and leaves it on, as an audit
//!   daemon would: other bee processes may rely on it. Without a daemon the kernel also prints
//!   each record to its log, rate-limited.
//! - A record names its domain; the domain's first record names the process that created it,
//!   which is a child the launcher started into a scope ([`Reports::launched`]). So each
//!   record is attributed to its scope's cgroup. A domain whose first record was lost is
//!   adopted through the cgroup of a process it refused later ([`orphan`]).
//! - Records arrive asynchronously: the denied process queues them, and the kernel's
//!   `kauditd` thread later copies them to the group, in queue order. Once a launch's
//!   processes have all exited, [`Reports::drain`] logs a mark of its own (an `AUDIT_USER`
//!   record, which needs `CAP_AUDIT_WRITE`) and waits, at most [`END_WAIT`], until the reader
//!   has read it: every record the launch made was queued before the mark, so it has been
//!   read too (or lost, and counted). The mark is a record like any other: an audit daemon
//!   writes it to its log, and without one the kernel prints it, rate-limited. While the
//!   launch runs, or where the mark cannot be logged, the drain waits until the kernel's
//!   queue has been seen empty (`AUDIT_GET`'s backlog, at most [`QUEUE_WAIT`]) and then until
//!   the reader has read the socket empty after that (at most [`SETTLE_MAX`] in all): there a
//!   record `kauditd` has taken off its queue and not yet finished copying can be missed, or
//!   one still queued behind other processes' records.
//! - Records can be lost: the kernel drops them when its queue is full, and `kauditd` drops
//!   what a full receive buffer cannot take. The reader counts both, and [`Reports::lost`]
//!   tells each scope how many were lost while it lived.

mod lost;
mod nested;
mod netlink;
mod orphan;
mod process;
mod reader;
pub mod record;
pub mod unlogged;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bee_common::AuditEvent;

use lost::Losses;
use reader::{eventfd, kick, read_loop};
use record::{Access, MARK, Record};

/// The longest [`Reports::drain`] waits for the kernel to deliver what is queued.
pub const SETTLE_MAX: Duration = Duration::from_millis(250);

/// The longest [`Reports::drain`] waits for the kernel's queue to be seen empty, where other
/// processes' records keep it busy.
pub const QUEUE_WAIT: Duration = Duration::from_millis(20);

/// The longest [`Reports::drain`] waits for its mark once a launch has ended: the kernel copies
/// records in order, so this bounds only how long a loaded machine may take to copy them.
pub const END_WAIT: Duration = Duration::from_secs(2);

/// Numbers the readers of this process, so that each knows its own marks.
static READERS: AtomicU64 = AtomicU64::new(1);

/// How long the socket stays quiet before the events still open are taken as complete.
const QUIET: Duration = Duration::from_millis(20);

/// Denials kept for one scope until a drain takes them; beyond it the newest are dropped. The
/// earliest are kept: the first refusal is the likeliest cause of what failed after it, and
/// a flood repeats itself. One scope's flood never drops another scope's denials. The seccomp
/// filter's refusals are bounded alike ([`crate::landlock::seccomp::notify`]).
pub(crate) const SCOPE_MAX: usize = 4096;

/// Denials kept whose scope is not known yet (the oldest go first): a record may arrive
/// before [`Reports::launched`] names its process, and another program's never has one.
const UNPLACED_MAX: usize = 4096;

/// Nested domains kept whose creator's cgroup no launch had when their record was read (the
/// oldest go first): a scope's first process may create one before [`Reports::launched`]
/// names it, and another program's domains never get one.
const NESTED_UNPLACED_MAX: usize = 1024;

/// Reads Landlock's denial records for the scopes of one engine.
#[derive(Debug)]
pub struct Reports {
    shared: Arc<Shared>,
    /// The subscribed socket (the reader reads it).
    socket: Arc<netlink::Socket>,
    stop: Arc<AtomicBool>,
    /// Wakes the reader: a drain wants the socket read empty, or the reports are dropped.
    wake: Arc<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when the reader has read the socket empty for a drain.
    flushed: Condvar,
    /// Set while a test holds the reader off the socket ([`Reports::hold_reader`]).
    #[cfg(feature = "landlock-tests")]
    held: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// Children the launcher started, by pid, with their scope's cgroup id.
    launches: HashMap<u32, u64>,
    /// Domains whose creator is known, with that creator's pid.
    domains: HashMap<u64, u32>,
    /// Domains a scope's own program created, nested in bee's, with the scope's cgroup id.
    nested: HashMap<u64, u64>,
    /// Domains not bee's whose creator was, as their record was read, in a cgroup no launch
    /// had yet, with that cgroup's id, oldest first (at most [`NESTED_UNPLACED_MAX`]): each
    /// becomes its scope's in [`State::nested`] once a launch names the cgroup.
    nested_unplaced: VecDeque<(u64, u64)>,
    /// Domains whose creation record was lost, adopted by the scope (cgroup id) their
    /// refused process was in ([`orphan`]).
    adopted: HashMap<u64, u64>,
    /// How a process's cgroup id is found (`None`: from `/proc`; tests set their own).
    cgroup_of: Option<fn(u32) -> Option<u64>>,
    /// How the time a process began is found, in ms since the Unix epoch (`None`: from
    /// `/proc`; tests set their own).
    began_of: Option<fn(u32) -> Option<u64>>,
    /// bee's own executable, as the kernel's records name it: a domain bee's launcher makes
    /// is created by its child before the `execve`, so its record names this executable.
    /// `None` (in unit tests) takes every domain.
    own_exe: Option<String>,
    /// Records of events not yet complete, by serial.
    open: BTreeMap<u64, Vec<Record>>,
    /// Denials of complete events by their scope's cgroup id, in arrival order, at most
    /// [`SCOPE_MAX`] each.
    placed: HashMap<u64, Vec<Denied>>,
    /// Denials of complete events whose scope is not known yet, oldest first.
    unplaced: VecDeque<Denied>,
    /// Flushes asked for by drains, numbered from 1.
    asked: u64,
    /// The last flush done: the socket was read empty after drain number `done` asked.
    done: u64,
    /// Set when the reader stopped on an error: drains return at once.
    failed: bool,
    /// The records lost, and what each scope was told of them.
    losses: Losses,
    /// This reader's number among the process's ([`READERS`]), and the process's pid: a mark
    /// is this reader's when it names both.
    reader: u64,
    pid: u32,
    /// Marks logged, numbered from 1.
    marks: u64,
    /// The last of this reader's marks read (or given up on, after an overrun that may have
    /// dropped it).
    marked: u64,
}

#[derive(Debug)]
struct Denied {
    access: Access,
    pid: u32,
    comm: String,
}

/// Whether [`Reports::start`] would report denials here, without changing anything: `Ok`
/// with one sentence on how (audit on, or off and to be turned on), or why not.
///
/// # Errors
/// As [`Reports::start`], but for enabling audit: a missing `CAP_AUDIT_CONTROL` where audit
/// is off is named, not tried.
pub fn probe() -> Result<String, String> {
    let enabled = netlink::audit_enabled()?;
    drop(netlink::subscribe()?);
    if enabled {
        Ok("the kernel's audit is on: Landlock's denials are read from its records".to_owned())
    } else if std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| crate::support::parse_cap_eff(&s))
        .is_some_and(|c| c.has(CAP_AUDIT_CONTROL))
    {
        Ok("the kernel's audit is off; bee turns it on when the engine starts (CAP_AUDIT_CONTROL held)".to_owned())
    } else {
        Err("the kernel's audit is off and turning it on needs CAP_AUDIT_CONTROL (or `auditctl -e 1`)".to_owned())
    }
}

/// `CAP_AUDIT_CONTROL` (`include/uapi/linux/capability.h`).
const CAP_AUDIT_CONTROL: u32 = 30;

impl Reports {
    /// Subscribes to the kernel's audit records, enabling audit where it is off.
    ///
    /// # Errors
    /// Why denials cannot be reported: no audit in the kernel, or a missing capability
    /// (`CAP_AUDIT_READ` to read the records, `CAP_AUDIT_CONTROL` to enable audit).
    pub fn start() -> Result<Self, String> {
        netlink::enable_audit()?;
        let socket = netlink::subscribe()?;
        let wake = Arc::new(eventfd().map_err(|e| format!("creating an eventfd failed: {e}"))?);
        let socket = Arc::new(socket);
        let shared = Arc::new(Shared::default());
        {
            let mut state = shared.lock();
            state.own_exe = std::fs::read_link("/proc/self/exe")
                .ok()
                .and_then(|p| p.to_str().map(|p| live_path(p).to_owned()));
            state.reader = READERS.fetch_add(1, Ordering::Relaxed);
            state.pid = std::process::id();
            if let Some(lost) = netlink::kernel_lost() {
                state.losses.kernel(lost);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let shared = Arc::clone(&shared);
            let stop = Arc::clone(&stop);
            let wake = Arc::clone(&wake);
            let socket = Arc::clone(&socket);
            std::thread::Builder::new()
                .name("bee-landlock-audit".into())
                .spawn(move || read_loop(&socket, &wake, &shared, &stop))
                .map_err(|e| format!("starting the audit reader failed: {e}"))?
        };
        Ok(Self {
            shared,
            socket,
            stop,
            wake,
            thread: Some(thread),
        })
    }

    /// Notes that the launcher started `pid` into the scope with cgroup `cgroup_id`: the
    /// domain it creates is that scope's. The first launch of a scope starts
    /// [`Reports::lost`]'s count for it.
    pub fn launched(&self, pid: u32, cgroup_id: u64) {
        let first = !self.shared.lock().losses.follows(cgroup_id);
        // Read before the scope is followed: what the kernel lost before does not count.
        let kernel = first.then(netlink::kernel_lost).flatten();
        let mut state = self.shared.lock();
        state.launches.insert(pid, cgroup_id);
        if let Some(lost) = kernel {
            state.losses.kernel(lost);
        }
        state.losses.begin(cgroup_id);
    }

    /// Forgets the scope with cgroup `cgroup_id` (it was torn down), and its denials.
    pub fn forget(&self, cgroup_id: u64) {
        self.shared.lock().forget(cgroup_id);
    }

    /// Takes the denials reported so far for the scope with cgroup `cgroup_id`, oldest first,
    /// once the kernel has delivered what it had queued when this was called. `ended` says
    /// that every process of the scope has exited: the drain then waits for its mark (see
    /// the module's notes).
    pub fn drain(&self, cgroup_id: u64, ended: bool) -> Vec<AuditEvent> {
        let start = Instant::now();
        // The kernel's count of lost records: read by the flush as it sees the queue emptied,
        // and once more after a mark.
        let kernel = if ended && self.mark_and_wait(start) {
            netlink::kernel_lost()
        } else {
            self.flush(start)
        };
        let overran = self.shared.lock().losses.socket_overran();
        let dropped = overran.then(|| self.socket.dropped()).flatten();
        let mut state = self.shared.lock();
        if let Some(lost) = kernel {
            state.losses.kernel(lost);
        }
        if let Some(dropped) = dropped {
            state.losses.socket(dropped);
        }
        state
            .take(cgroup_id)
            .into_iter()
            .filter_map(|d| {
                let mut e = record::event(&d.access, cgroup_id, d.pid, &d.comm)?;
                if state.nested.contains_key(&d.access.domain) {
                    e.flags |= bee_common::event::EVENT_NESTED;
                }
                Some(e)
            })
            .collect()
    }

    /// How many of the kernel's audit records were lost, as far as the last
    /// [`Reports::drain`] of the scope with cgroup `cgroup_id` knew, since the scope was
    /// last told (or first launched): any may have been one of its denials. 0 for a scope
    /// not launched, or forgotten.
    pub fn lost(&self, cgroup_id: u64) -> u64 {
        self.shared.lock().losses.take(cgroup_id)
    }

    /// Makes the kernel's receive buffer of the reader's socket `bytes` (it keeps a few
    /// kilobytes at least), so that a flood makes it drop records.
    ///
    /// # Errors
    /// The kernel refused (`SO_RCVBUFFORCE` needs `CAP_NET_ADMIN`).
    #[cfg(feature = "landlock-tests")]
    pub fn set_receive_buffer(&self, bytes: i32) -> std::io::Result<()> {
        self.socket.set_receive_buffer(bytes)
    }

    /// Holds the reader off its socket while `held` (it reads nothing and answers no drain),
    /// so that a test can fill the socket before a scope's first denial and make the kernel
    /// drop that denial's records.
    #[cfg(feature = "landlock-tests")]
    pub fn hold_reader(&self, held: bool) {
        self.shared.held.store(held, Ordering::Relaxed);
        kick(&self.wake);
    }

    /// Logs a mark and waits, until [`END_WAIT`] after `start`, for the reader to read it (or
    /// to give up on it after an overrun); `false` where it could not be logged or did not
    /// come in time.
    fn mark_and_wait(&self, start: Instant) -> bool {
        let (reader, number) = {
            let mut state = self.shared.lock();
            state.marks += 1;
            (state.reader, state.marks)
        };
        if netlink::log_user_message(&format!("{MARK} {reader} {number}")).is_err() {
            return false;
        }
        let mut state = self.shared.lock();
        while !state.failed && state.marked < number {
            let Some(left) = END_WAIT.checked_sub(start.elapsed()) else {
                return false;
            };
            state = match self.shared.flushed.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(e) => e.into_inner().0,
            };
        }
        !state.failed
    }

    /// Waits until the kernel's queue has been seen empty, then until the reader has read
    /// the socket empty after that, until [`SETTLE_MAX`] after `start`. Returns the kernel's
    /// count of lost records as read while waiting (`None` where it could not be read).
    fn flush(&self, start: Instant) -> Option<u32> {
        let lost = netlink::wait_queue_emptied(QUEUE_WAIT);
        let ticket = {
            let mut state = self.shared.lock();
            state.asked += 1;
            state.asked
        };
        kick(&self.wake);
        let mut state = self.shared.lock();
        while !state.failed && state.done < ticket {
            let Some(left) = SETTLE_MAX.checked_sub(start.elapsed()) else {
                break;
            };
            state = match self.shared.flushed.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(e) => e.into_inner().0,
            };
        }
        lost
    }
}

impl Drop for Reports {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        kick(&self.wake);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain maps: a panic while one is held leaves nothing half-made that matters.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// The cgroup id of the scope whose denial `d` is: that of the launch whose child created
    /// the denial's domain.
    fn scope_of(&self, d: &Denied) -> Option<u64> {
        self.scope_of_domain(d.access.domain)
    }

    /// The cgroup id of the scope whose domain (or nested or adopted domain) `domain` is.
    fn scope_of_domain(&self, domain: u64) -> Option<u64> {
        self.domains
            .get(&domain)
            .and_then(|pid| self.launches.get(pid))
            .or_else(|| self.nested.get(&domain))
            .or_else(|| self.adopted.get(&domain))
            .copied()
    }
}

/// An executable's path without the ` (deleted)` the kernel appends (`d_path`) once the file
/// has been removed or replaced, so that a binary rebuilt while it runs still names itself.
fn live_path(path: &str) -> &str {
    path.trim_end_matches(" (deleted)")
}

impl State {
    /// Forgets the scope with cgroup `cgroup_id`: its denials, launches and domains.
    fn forget(&mut self, cgroup_id: u64) {
        // The denials first: they find their scope through the maps cleared below.
        self.take(cgroup_id);
        let Self {
            launches, domains, ..
        } = self;
        domains.retain(|_, pid| launches.get(pid) != Some(&cgroup_id));
        launches.retain(|_, c| *c != cgroup_id);
        self.nested.retain(|_, c| *c != cgroup_id);
        self.adopted.retain(|_, c| *c != cgroup_id);
        self.nested_unplaced.retain(|(_, c)| *c != cgroup_id);
        self.losses.forget(cgroup_id);
    }

    fn add(&mut self, r: Record) {
        let serial = r.serial();
        // Records of an event arrive together: one with a later serial ends the earlier ones
        // (an event without a system call context has no `AUDIT_EOE`).
        let earlier: Vec<u64> = self.open.range(..serial).map(|(s, _)| *s).collect();
        for s in earlier {
            self.complete(s);
        }
        if let Record::Mark {
            pid,
            reader,
            number,
            ..
        } = r
        {
            // Everything queued before the mark has been read: every event is complete.
            let serials: Vec<u64> = self.open.keys().copied().collect();
            for s in serials {
                self.complete(s);
            }
            if (pid, reader) == (self.pid, self.reader) {
                self.marked = self.marked.max(number);
            }
        } else if matches!(r, Record::End { .. }) {
            self.complete(serial);
        } else {
            self.open.entry(serial).or_default().push(r);
        }
    }

    fn complete(&mut self, serial: u64) {
        let Some(records) = self.open.remove(&serial) else {
            return;
        };
        let (mut pid, mut comm, mut logged) = (0, String::new(), 0);
        for r in &records {
            match r {
                Record::Domain {
                    domain,
                    pid,
                    exe,
                    logged,
                    ..
                } => {
                    // Another program's domain whose creator had a pid a launch has now
                    // (reused) is not the scope's: its records name another executable.
                    let ours = match (&self.own_exe, exe) {
                        (Some(own), Some(exe)) => live_path(exe) == own,
                        _ => true,
                    };
                    if ours {
                        self.domains.insert(*domain, *pid);
                    } else {
                        self.nested_created(*domain, *pid, *logged);
                    }
                }
                Record::Syscall {
                    pid: p,
                    comm: c,
                    logged: l,
                    ..
                } => {
                    pid = *p;
                    comm.clone_from(c);
                    logged = *l;
                }
                _ => {}
            }
        }
        for r in records {
            if let Record::Access(access) = r {
                self.adopt_orphan(access.domain, pid, logged);
                self.keep(Denied {
                    access,
                    pid,
                    comm: comm.clone(),
                });
            }
        }
    }

    /// Keeps a denial until a drain takes it: with its scope's where that is known (unless
    /// the scope has [`SCOPE_MAX`] already), else with those not placed yet (dropping the
    /// oldest of those beyond [`UNPLACED_MAX`]).
    fn keep(&mut self, d: Denied) {
        match self.scope_of(&d) {
            Some(cgroup_id) => self.place(cgroup_id, d),
            None => {
                if self.unplaced.len() >= UNPLACED_MAX {
                    self.unplaced.pop_front();
                }
                self.unplaced.push_back(d);
            }
        }
    }

    fn place(&mut self, cgroup_id: u64, d: Denied) {
        let kept = self.placed.entry(cgroup_id).or_default();
        if kept.len() < SCOPE_MAX {
            kept.push(d);
        }
    }

    /// Places the denials whose scope has become known since they arrived, then takes the
    /// scope's, in the kernel's order (by serial).
    fn take(&mut self, cgroup_id: u64) -> Vec<Denied> {
        self.place_nested();
        for d in std::mem::take(&mut self.unplaced) {
            match self.scope_of(&d) {
                Some(c) => self.place(c, d),
                None => self.unplaced.push_back(d),
            }
        }
        let mut denials = self.placed.remove(&cgroup_id).unwrap_or_default();
        denials.sort_by_key(|d| d.access.serial);
        denials
    }
}

#[cfg(test)]
mod tests;
