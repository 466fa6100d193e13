//! The listener side of the scope's seccomp filter: every call the filter refuses waits
//! (`SECCOMP_RET_USER_NOTIF`, Linux 5.0) until the engine's [`Supervisor`] answers it with
//! [`REFUSED_ERRNO`] — never with success, never letting it continue — and records it for the
//! launch's scope, so that the refusal is explained as the engine's other denials are.
//!
//! - Each launch's child installs the filter with `SECCOMP_FILTER_FLAG_NEW_LISTENER` just
//!   before `execve` and hands the listener to bee over the launch's report socket
//!   (`crate::launch`); every process and thread the command starts inherits the filter, so
//!   that one listener serves the whole launch. The child keeps no copy, and the filter refuses
//!   a listener of the scope's own.
//! - One thread per engine polls every launch's listener, takes one notification from each
//!   ready listener per round (`SECCOMP_IOCTL_NOTIF_RECV`), records it unless its scope holds
//!   [`SCOPE_MAX`] already, and answers it (`SECCOMP_IOCTL_NOTIF_SEND`). A scope that floods it
//!   is answered as fast as it asks and costs only its own records; a refusal is recorded
//!   before it is answered, so a drain after the command ended finds it.
//! - Fail closed: when a listener is closed — its launch's scope is forgotten, the engine
//!   dropped, the thread gone — the kernel answers each call the filter refuses `ENOSYS`
//!   (`seccomp_do_user_notification`), for the calls waiting then too. Refused still, no
//!   longer reported.
//! - The caller's thread group and `comm` are read from `/proc/<tid>/status`, then the
//!   notification is checked to be still pending (`SECCOMP_IOCTL_NOTIF_ID_VALID`): a thread
//!   that died since may have left its id to another process, whose name would be wrong
//!   (`Documentation/userspace-api/seccomp_filter.rst`, `seccomp_unotify(2)`). Nothing is read
//!   from the caller's memory: every argument that decides is in the notification's registers.

use std::collections::HashMap;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use bee_common::AuditEvent;

use super::REFUSED_ERRNO;
use super::call::{Call, describe, event};
use crate::landlock::audit::SCOPE_MAX;

/// One refusal kept for its scope.
#[derive(Debug)]
struct Refused {
    call: Call,
    tid: u32,
    tgid: u32,
    comm: String,
}

#[derive(Debug, Default)]
struct State {
    /// False once the thread has ended: a listener handed over then is closed at once.
    alive: bool,
    /// Set by the drop: the thread ends.
    stop: bool,
    /// Listeners handed over, with their scope's cgroup id, not yet polled.
    incoming: Vec<(OwnedFd, u64)>,
    /// Scopes forgotten since the thread last looked: their listeners are closed.
    forgotten: Vec<u64>,
    /// Refusals by scope cgroup id, oldest first, at most [`SCOPE_MAX`] each.
    refused: HashMap<u64, Vec<Refused>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain lists: a panic while one is held leaves nothing half-made that matters.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Answers and records the refusals of every launch's filter, on a thread of its own.
#[derive(Debug)]
pub struct Supervisor {
    shared: Arc<Shared>,
    /// Wakes the thread: a listener was handed over, a scope forgotten, or the drop.
    wake: Arc<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Supervisor {
    /// Starts the thread.
    ///
    /// # Errors
    /// Why it cannot run: the kernel's notification sizes could not be read
    /// (`SECCOMP_GET_NOTIF_SIZES`, Linux 5.0), or an eventfd or the thread could not be made.
    pub fn start() -> Result<Self, String> {
        let sizes = notif_sizes().map_err(|e| {
            format!("asking the kernel for its seccomp notification sizes failed: {e}")
        })?;
        let wake = Arc::new(eventfd().map_err(|e| format!("creating an eventfd failed: {e}"))?);
        let shared = Arc::new(Shared::default());
        shared.lock().alive = true;
        let thread = {
            let shared = Arc::clone(&shared);
            let wake = Arc::clone(&wake);
            std::thread::Builder::new()
                .name("bee-seccomp".into())
                .spawn(move || {
                    let _ended = Ended(Arc::clone(&shared));
                    serve(&shared, &wake, sizes);
                })
                .map_err(|e| format!("starting the seccomp supervisor failed: {e}"))?
        };
        Ok(Self {
            shared,
            wake,
            thread: Some(thread),
        })
    }

    /// Serves `listener`, the filter's listener of a launch into the scope with cgroup
    /// `cgroup_id`, until its last process is gone or the scope is forgotten. Where the thread
    /// has ended, the listener is closed at once (the kernel then answers `ENOSYS`).
    pub fn watch(&self, listener: OwnedFd, cgroup_id: u64) {
        let mut state = self.shared.lock();
        if !state.alive {
            drop(state);
            drop(listener);
            return;
        }
        state.incoming.push((listener, cgroup_id));
        drop(state);
        kick(&self.wake);
    }

    /// Forgets the scope with cgroup `cgroup_id`: its refusals, and its listeners (closed).
    pub fn forget(&self, cgroup_id: u64) {
        let mut state = self.shared.lock();
        state.refused.remove(&cgroup_id);
        state.incoming.retain(|(_, c)| *c != cgroup_id);
        state.forgotten.push(cgroup_id);
        drop(state);
        kick(&self.wake);
    }

    /// Takes the refusals recorded for the scope with cgroup `cgroup_id`, oldest first, as
    /// audit events. Each was recorded before its call returned.
    pub fn drain(&self, cgroup_id: u64) -> Vec<AuditEvent> {
        let taken = self
            .shared
            .lock()
            .refused
            .remove(&cgroup_id)
            .unwrap_or_default();
        taken
            .iter()
            .map(|r| event(&r.call, cgroup_id, r.tid, r.tgid, &r.comm))
            .collect()
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        kick(&self.wake);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Marks the thread ended however it ends (a panic too), closing what was handed over since.
struct Ended(Arc<Shared>);

impl Drop for Ended {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.alive = false;
        state.incoming.clear();
    }
}

/// Argument 0 of the probe's call: the probe's filter refuses `getppid` with it alone.
const PROBE_MAGIC: u32 = 0xbee5_5eed;
/// The scope the probe's refusal is recorded for: no cgroup has this id.
const PROBE_SCOPE: u64 = u64::MAX;
/// How long the probe waits for each step.
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether the seccomp filter's refusals are reported here, by doing what a scope does: a
/// thread of this process installs a filter with `SECCOMP_FILTER_FLAG_NEW_LISTENER` that
/// refuses one call (`getppid` with a magic argument) by `SECCOMP_RET_USER_NOTIF`, hands the
/// listener to a [`Supervisor`], and makes the call, which must come back refused
/// ([`REFUSED_ERRNO`]) and recorded. The filter goes with the thread, which ends (as does
/// the `no_new_privs` it sets for itself). `Ok` says how, in one sentence.
///
/// # Errors
/// Why not, in one sentence: the supervisor cannot start, the kernel refuses the filter or its
/// listener (before Linux 5.0), or the call was not answered and recorded.
pub fn probe() -> Result<String, String> {
    use std::sync::mpsc;
    let supervisor = Supervisor::start()?;
    let (listener_tx, listener_rx) = mpsc::channel::<Result<OwnedFd, String>>();
    let (call_tx, call_rx) = mpsc::channel::<(libc::c_long, Option<i32>)>();
    let thread = std::thread::Builder::new()
        .name("bee-seccomp-probe".into())
        .spawn(move || {
            let filter = super::probe_filter(PROBE_MAGIC);
            let prog = super::SockFprog {
                len: u16::try_from(filter.len()).unwrap_or(u16::MAX),
                filter: filter.as_ptr(),
            };
            // SAFETY: prctl(2) and seccomp(2) on this thread only (no TSYNC), with a program
            // that outlives the call; the listener returned is a new descriptor of ours.
            let listener = unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    let e = std::io::Error::last_os_error();
                    let _ = listener_tx.send(Err(format!("PR_SET_NO_NEW_PRIVS failed: {e}")));
                    return;
                }
                let fd = libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as libc::c_uint,
                    &raw const prog,
                );
                if fd < 0 {
                    let e = std::io::Error::last_os_error();
                    let _ = listener_tx.send(Err(format!(
                        "the kernel refused a seccomp filter with a listener \
                         (SECCOMP_FILTER_FLAG_NEW_LISTENER, Linux 5.0): {e}"
                    )));
                    return;
                }
                OwnedFd::from_raw_fd(fd as RawFd)
            };
            let _ = listener_tx.send(Ok(listener));
            // SAFETY: getppid(2) takes no argument; the filter reads the register anyway.
            let rc = unsafe { libc::syscall(libc::SYS_getppid, libc::c_long::from(PROBE_MAGIC)) };
            let _ = call_tx.send((rc, std::io::Error::last_os_error().raw_os_error()));
        })
        .map_err(|e| format!("starting the probe's thread failed: {e}"))?;
    let listener = listener_rx
        .recv_timeout(PROBE_WAIT)
        .map_err(|_| "the probe's thread made no filter".to_owned());
    let answered = listener.and_then(|l| {
        supervisor.watch(l?, PROBE_SCOPE);
        call_rx
            .recv_timeout(PROBE_WAIT)
            .map_err(|_| format!("a refused call had no answer within {PROBE_WAIT:?}"))
    });
    let recorded = supervisor.drain(PROBE_SCOPE).len();
    // Closes the listener: a call still waiting is answered ENOSYS, and the thread ends.
    drop(supervisor);
    let _ = thread.join();
    match answered? {
        (-1, Some(REFUSED_ERRNO)) if recorded == 1 => Ok(
            "a call the seccomp filter refuses waits for bee's answer (SECCOMP_RET_USER_NOTIF) \
             and is recorded"
                .to_owned(),
        ),
        (rc, errno) => Err(format!(
            "a call the probe's filter refuses returned {rc} (errno {errno:?}) and {recorded} \
             refusal(s) were recorded, not -1 ({REFUSED_ERRNO}) and one"
        )),
    }
}

/// `struct seccomp_notif_sizes` as the kernel gives it: the buffers `RECV` and `SEND` use are
/// at least these, and at least `libc`'s structures.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    notif: usize,
    resp: usize,
}

fn notif_sizes() -> std::io::Result<Sizes> {
    let mut sizes = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: SECCOMP_GET_NOTIF_SIZES writes a seccomp_notif_sizes to the pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0u32,
            &raw mut sizes,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Sizes {
        notif: usize::from(sizes.seccomp_notif).max(size_of::<libc::seccomp_notif>()),
        resp: usize::from(sizes.seccomp_notif_resp).max(size_of::<libc::seccomp_notif_resp>()),
    })
}

/// The thread: polls the wake-up eventfd and every listener, answering one notification of
/// each ready listener per round, until the drop asks it to stop. Every listener it holds is
/// closed when it returns (or unwinds).
fn serve(shared: &Shared, wake: &OwnedFd, sizes: Sizes) {
    let mut listeners: Vec<(OwnedFd, u64)> = Vec::new();
    // 8-byte words, so that the structures at their start are aligned.
    let mut notif = vec![0u64; sizes.notif.div_ceil(8)];
    let mut resp = vec![0u64; sizes.resp.div_ceil(8)];
    loop {
        {
            let mut state = shared.lock();
            if state.stop {
                return;
            }
            for (listener, _) in &state.incoming {
                sync_wake_up(listener.as_raw_fd());
            }
            listeners.append(&mut state.incoming);
            let forgotten = std::mem::take(&mut state.forgotten);
            if !forgotten.is_empty() {
                listeners.retain(|(_, c)| !forgotten.contains(c));
                for c in &forgotten {
                    state.refused.remove(c);
                }
            }
        }
        let mut fds: Vec<libc::pollfd> = std::iter::once(wake.as_raw_fd())
            .chain(listeners.iter().map(|(l, _)| l.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let count = libc::nfds_t::try_from(fds.len()).unwrap_or(libc::nfds_t::MAX);
        // SAFETY: `fds` is a vector of initialised pollfds of that length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), count, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if fds[0].revents & libc::POLLIN != 0 {
            let mut count = [0u8; 8];
            // SAFETY: an eventfd read of its 8-byte counter into a buffer of that size.
            unsafe { libc::read(wake.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        }
        let mut closed = Vec::new();
        for (i, (listener, cgroup)) in listeners.iter().enumerate() {
            let revents = fds.get(i + 1).map_or(0, |p| p.revents);
            if revents & libc::POLLIN != 0 {
                if !answer(listener.as_raw_fd(), *cgroup, shared, &mut notif, &mut resp) {
                    closed.push(i);
                }
            } else if revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                // Every process of the launch is gone (`EPOLLHUP`, Linux 5.8).
                closed.push(i);
            }
        }
        for i in closed.into_iter().rev() {
            listeners.swap_remove(i);
        }
    }
}

/// Takes one notification from `listener` (of the scope `cgroup`), records it, and answers
/// it [`REFUSED_ERRNO`]. False when the listener cannot be read any more.
fn answer(
    listener: RawFd,
    cgroup: u64,
    shared: &Shared,
    notif: &mut [u64],
    resp: &mut [u64],
) -> bool {
    // The kernel refuses a buffer that is not zeroed (`EINVAL`).
    notif.fill(0);
    // SAFETY: RECV writes at most the kernel's `seccomp_notif` size, which the buffer holds.
    let rc = unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_RECV as _,
            notif.as_mut_ptr(),
        )
    };
    if rc < 0 {
        // ENOENT: the caller was interrupted or killed since the poll; its call, if it is
        // made again, comes again.
        return matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOENT | libc::EINTR)
        );
    }
    // SAFETY: the buffer starts with the `seccomp_notif` RECV wrote, and is 8-byte aligned.
    let n: libc::seccomp_notif = unsafe { std::ptr::read(notif.as_ptr().cast()) };
    let wanted = shared
        .lock()
        .refused
        .get(&cgroup)
        .is_none_or(|r| r.len() < SCOPE_MAX);
    if wanted {
        let (tgid, comm) = status(n.pid).unwrap_or((n.pid, String::new()));
        // What was read names the caller only if the call still waits: otherwise its thread
        // id may be another process's by now.
        if id_valid(listener, n.id) {
            let refused = Refused {
                call: describe(n.data.nr, n.data.args),
                tid: n.pid,
                tgid,
                comm,
            };
            let mut state = shared.lock();
            let kept = state.refused.entry(cgroup).or_default();
            if kept.len() < SCOPE_MAX {
                kept.push(refused);
            }
        }
    }
    resp.fill(0);
    let answer = libc::seccomp_notif_resp {
        id: n.id,
        val: 0,
        error: -REFUSED_ERRNO,
        flags: 0,
    };
    // SAFETY: the buffer is 8-byte aligned and at least a `seccomp_notif_resp` long.
    unsafe {
        std::ptr::write(resp.as_mut_ptr().cast(), answer);
        // ENOENT: the caller is gone or was interrupted; nothing waits for this answer.
        libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND as _, resp.as_ptr());
    }
    true
}

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (`include/uapi/linux/seccomp.h`, Linux 6.6).
const FD_SYNC_WAKE_UP: u64 = 1;

/// Asks the kernel to switch between a caller and this thread on one CPU
/// (`SECCOMP_IOCTL_NOTIF_SET_FLAGS` with `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`): a call and its
/// answer then cost a few microseconds instead of two cross-CPU wake-ups. Before 6.6 the
/// kernel refuses the flag, and the listener is served as it is.
fn sync_wake_up(listener: RawFd) {
    // SAFETY: SET_FLAGS takes its flags as the argument itself.
    unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            FD_SYNC_WAKE_UP,
        )
    };
}

/// Whether notification `id` still waits for its answer.
fn id_valid(listener: RawFd, id: u64) -> bool {
    // SAFETY: ID_VALID reads a u64 from the pointer.
    unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &raw const id,
        ) == 0
    }
}

/// The thread group id and `comm` of thread `tid` (`/proc/<tid>/status`, as bee's PID
/// namespace numbers it); `None` when it cannot be read.
fn status(tid: u32) -> Option<(u32, String)> {
    if tid == 0 {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim_start_matches('\t').to_owned())
    };
    let tgid = field("Tgid:")?.trim().parse().ok()?;
    Some((tgid, field("Name:").unwrap_or_default()))
}

/// A non-blocking eventfd.
fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: eventfd(2) with constant flags; returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Wakes the thread.
fn kick(wake: &OwnedFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: an eventfd write of its 8-byte increment from a buffer of that size.
    unsafe { libc::write(wake.as_raw_fd(), one.as_ptr().cast(), 8) };
}
