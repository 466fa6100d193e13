//! Name grants in the kernel: the cgroup programs that steer a scope's DNS traffic to its
//! resolver, the DNS map that says where, and the answers map its resolver fills.
//!
//! Its length is its tests: the code is under 550 lines.
//!
//! ```text
//! engine.enable_dns()                 load the six cgroup sock_addr programs and attach them
//!                                     to the cgroup v2 root (links: beside any other program), pinned; once
//! engine.set_dns(cgroup, value)       where the scope's port-53 peers go (before the scope
//!                                     entry with SCOPE_DNS; removed after it by uninstall)
//! engine.answers()                    the handle on the answers map its resolvers share
//! answers.admit(cgroup, addr, ttl, …) an address a granted name resolved to, until its TTL
//! ```
//!
//! The programs are attached to the root so that they run for every scope wherever its
//! cgroup is; for a task whose cgroup is not a key of the DNS map they only look it up.
//! Loading them needs CAP_NET_ADMIN (or CAP_SYS_ADMIN) besides CAP_BPF: the kernel counts
//! cgroup socket programs as networking programs. A policy without name grants never loads
//! them, so the minimal capabilities of `docs/enforcement.md` stay what they were.

use std::collections::{BTreeSet, HashMap as StdHashMap};
use std::fs::File;
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aya::maps::{HashMap, MapData, MapError};
use aya::programs::links::{CgroupAttachMode, FdLink};
use aya::programs::{CgroupSockAddr, ProgramError};
use bee_common::{AnswerKey, AnswerValue, DnsValue, NetValue};

use super::{Engine, EngineError, map_names as n};

/// The steering programs in `bee.bpf.o`, each with the cgroup hook its section names.
pub const DNS_PROGRAMS: &[(&str, &str)] = &[
    ("bee_dns_connect4", "cgroup/connect4"),
    ("bee_dns_connect6", "cgroup/connect6"),
    ("bee_dns_sendmsg4", "cgroup/sendmsg4"),
    ("bee_dns_sendmsg6", "cgroup/sendmsg6"),
    ("bee_dns_recvmsg4", "cgroup/recvmsg4"),
    ("bee_dns_recvmsg6", "cgroup/recvmsg6"),
];

fn program_err(
    call: &'static str,
    program: &'static str,
    hook: &'static str,
) -> impl FnOnce(ProgramError) -> EngineError {
    move |source| EngineError::Program {
        call,
        program,
        hook,
        source: Box::new(source),
    }
}

impl Engine {
    /// Loads the DNS steering programs and attaches them to the cgroup v2 root, their links
    /// pinned beside the LSM programs'. Does nothing when they already are.
    ///
    /// # Errors
    /// [`EngineError::Syscall`] when the cgroup v2 mount cannot be found or opened;
    /// [`EngineError::Program`] when the kernel refuses a load or attach (`EPERM` without
    /// CAP_NET_ADMIN); [`EngineError::Pin`]. Programs attached before the error stay attached
    /// until the engine goes, which is harmless: with no DNS map entry they change nothing.
    pub fn enable_dns(&mut self) -> Result<(), EngineError> {
        if self.dns_links.len() == DNS_PROGRAMS.len() {
            return Ok(());
        }
        let mountinfo = "/proc/self/mountinfo";
        let root = std::fs::read_to_string(mountinfo)
            .ok()
            .and_then(|m| crate::support::parse_cgroup2_mount(&m))
            .ok_or_else(|| EngineError::Syscall {
                call: "find the cgroup v2 mount in",
                path: mountinfo.into(),
                io_error: std::io::Error::from(std::io::ErrorKind::NotFound),
            })?;
        let cgroup = File::open(&root).map_err(|io_error| EngineError::Syscall {
            call: "open",
            path: root.clone(),
            io_error,
        })?;
        let links_dir = self.instance_dir.join("links");
        for &(program, hook) in &DNS_PROGRAMS[self.dns_links.len()..] {
            let prog: &mut CgroupSockAddr = self
                .ebpf
                .program_mut(program)
                .ok_or_else(|| EngineError::NotEnforcer {
                    reason: format!("no program `{program}`"),
                })?
                .try_into()
                .map_err(program_err("BPF_PROG_LOAD", program, hook))?;
            prog.load()
                .map_err(program_err("BPF_PROG_LOAD", program, hook))?;
            // A BPF link to a cgroup takes no attach flags (`Single` is 0) and always runs
            // beside the cgroup's other programs, as BPF_F_ALLOW_MULTI would.
            let id = prog
                .attach(&cgroup, CgroupAttachMode::Single)
                .map_err(program_err("BPF_LINK_CREATE", program, hook))?;
            let link = prog
                .take_link(id)
                .map_err(program_err("take_link", program, hook))?;
            // Kernels before 5.7 attach without a link; bee needs 6.1.
            let fd_link = FdLink::try_from(link).map_err(|e| EngineError::NotEnforcer {
                reason: format!("`{program}` was attached without a BPF link: {e}"),
            })?;
            let path = links_dir.join(program);
            let pinned = fd_link.pin(&path).map_err(|source| EngineError::Pin {
                path,
                source: Box::new(source),
            })?;
            self.dns_links.push(pinned);
        }
        Ok(())
    }

    /// Whether the DNS steering programs are attached ([`Engine::enable_dns`]).
    pub fn dns_enabled(&self) -> bool {
        self.dns_links.len() == DNS_PROGRAMS.len()
    }

    /// The engine's handle on the answers map, for the threads of its scopes' resolvers: it
    /// needs no access to the engine (nor its lock). One handle, opened on the first call and
    /// shared by every scope, so that its book ([`AnswerMap`]) sees every scope's answers.
    ///
    /// # Errors
    /// [`EngineError::Map`] when the pinned map cannot be opened.
    pub fn answers(&mut self) -> Result<Arc<AnswerMap>, EngineError> {
        if let Some(answers) = &self.answers {
            return Ok(Arc::clone(answers));
        }
        let answers = Arc::new(AnswerMap::open(
            &self.instance_dir.join("maps").join(n::ANSWERS),
        )?);
        self.answers = Some(Arc::clone(&answers));
        Ok(answers)
    }
}

/// The most answers one scope holds in the answers map at once, however few scopes there are.
pub const SCOPE_ANSWERS_MAX: usize = 4096;

/// The fewest answers a scope's quota allows, however many scopes there are: 64 × the 1,024
/// scopes of the default [`super::EngineOptions::max_scopes`] is the default 65,536 entries.
pub const SCOPE_ANSWERS_MIN: usize = 64;

/// The quota of each of `scopes` scopes holding answers in a map of `capacity` entries: an
/// equal share, at most [`SCOPE_ANSWERS_MAX`] and at least [`SCOPE_ANSWERS_MIN`] (never more
/// than the map holds). With the default 65,536 entries that is 4,096 up to 16 scopes, then
/// 65,536 / scopes: the scopes' quotas together never exceed the map, so no scope fills it
/// for the others.
pub fn scope_quota(capacity: usize, scopes: usize) -> usize {
    (capacity / scopes.max(1))
        .clamp(SCOPE_ANSWERS_MIN, SCOPE_ANSWERS_MAX)
        .min(capacity)
}

/// A handle on the answers map (see the module docs), shareable between threads.
///
/// It keeps the book of the answers it wrote, per scope and by expiry, and admits by it: each
/// scope holds at most its [`scope_quota`] of entries. A new address of a scope at its quota
/// first evicts that scope's own answers, soonest to expire first (expired ones before all);
/// never another scope's. Every answer of a scope must be written through one handle (the
/// engine's [`Engine::answers`], or a gate's), or the books do not see each other's.
#[derive(Debug)]
pub struct AnswerMap {
    inner: Mutex<Inner>,
    /// The map's `max_entries`.
    capacity: usize,
}

#[derive(Debug)]
struct Inner {
    map: HashMap<MapData, AnswerKey, AnswerValue>,
    book: Book,
}

/// The answers a handle wrote and has not removed: per scope, address → expiry, and the same
/// ordered by expiry (`CLOCK_BOOTTIME` ns). A scope with none has no entry.
#[derive(Debug, Default)]
pub(super) struct Book {
    scopes: StdHashMap<u64, ScopeBook>,
}

#[derive(Debug, Default)]
struct ScopeBook {
    expiry: StdHashMap<[u8; 16], u64>,
    order: BTreeSet<(u64, [u8; 16])>,
}

impl ScopeBook {
    fn set(&mut self, addr: [u8; 16], expires_ns: u64) {
        if let Some(old) = self.expiry.insert(addr, expires_ns) {
            self.order.remove(&(old, addr));
        }
        self.order.insert((expires_ns, addr));
    }

    fn remove(&mut self, addr: &[u8; 16]) {
        if let Some(old) = self.expiry.remove(addr) {
            self.order.remove(&(old, *addr));
        }
    }
}

/// Removing one entry from the kernel map (`Err` other than "already gone": it may still be
/// there).
type Remove<'a> = dyn FnMut(&AnswerKey) -> Result<(), MapError> + 'a;

impl Book {
    /// How many answers scope `cgroup_id` holds.
    pub(super) fn held(&self, cgroup_id: u64) -> usize {
        self.scopes.get(&cgroup_id).map_or(0, |s| s.expiry.len())
    }

    /// Whether scope `cgroup_id` holds an answer for `addr` (an [`answer_key`]'s).
    pub(super) fn holds(&self, cgroup_id: u64, addr: &[u8; 16]) -> bool {
        self.scopes
            .get(&cgroup_id)
            .is_some_and(|s| s.expiry.contains_key(addr))
    }

    /// Records that scope `cgroup_id`'s answer for `addr` lives until `expires_ns`.
    pub(super) fn set(&mut self, cgroup_id: u64, addr: [u8; 16], expires_ns: u64) {
        self.scopes
            .entry(cgroup_id)
            .or_default()
            .set(addr, expires_ns);
    }

    /// Removes scope `cgroup_id`'s answers that `pick` chooses from its soonest-to-expire
    /// end, one by one, while `pick(expiry, held)` says so; each from the kernel first. Returns
    /// how many; stops at the first removal the kernel refuses (its error).
    fn evict_while(
        &mut self,
        cgroup_id: u64,
        remove: &mut Remove<'_>,
        mut pick: impl FnMut(u64, usize) -> bool,
    ) -> Result<usize, MapError> {
        let Some(scope) = self.scopes.get_mut(&cgroup_id) else {
            return Ok(0);
        };
        let mut removed = 0;
        let mut result = Ok(());
        while let Some(&(expires_ns, addr)) = scope.order.first() {
            if !pick(expires_ns, scope.expiry.len()) {
                break;
            }
            match remove(&AnswerKey { cgroup_id, addr }) {
                Ok(()) => {}
                Err(e) if super::maps::absent(&e) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            scope.remove(&addr);
            removed += 1;
        }
        if scope.expiry.is_empty() {
            self.scopes.remove(&cgroup_id);
        }
        result.map(|()| removed)
    }

    /// Makes room for one new answer of scope `cgroup_id` in a map of `capacity`: its expired
    /// answers go, then its soonest-to-expire ones while it holds its quota or more (the quota
    /// of as many scopes as hold answers, counting this one).
    ///
    /// # Errors
    /// The kernel's, when it refuses a removal: the answer must not be admitted then.
    pub(super) fn make_room(
        &mut self,
        cgroup_id: u64,
        now_ns: u64,
        capacity: usize,
        remove: &mut Remove<'_>,
    ) -> Result<(), MapError> {
        let holders = self.scopes.len() + usize::from(!self.scopes.contains_key(&cgroup_id));
        let quota = scope_quota(capacity, holders);
        self.evict_while(cgroup_id, remove, |expires_ns, held| {
            expires_ns <= now_ns || held >= quota
        })?;
        Ok(())
    }

    /// Removes every answer expired by `now_ns`, and trims each scope holding more than the
    /// quota of as many scopes as hold answers down to it (the guard for a full map, which only
    /// a quota that shrank as scopes arrived leaves possible). Returns how many went.
    pub(super) fn sweep(&mut self, now_ns: u64, capacity: usize, remove: &mut Remove<'_>) -> usize {
        let quota = scope_quota(capacity, self.scopes.len());
        let ids: Vec<u64> = self.scopes.keys().copied().collect();
        let mut removed = 0;
        for id in ids {
            // A removal the kernel refuses leaves the entry booked, for the next sweep.
            removed += self
                .evict_while(id, remove, |expires_ns, held| {
                    expires_ns <= now_ns || held > quota
                })
                .unwrap_or(0);
        }
        removed
    }

    /// Removes every answer of scope `cgroup_id`; returns how many.
    pub(super) fn forget(&mut self, cgroup_id: u64, remove: &mut Remove<'_>) -> usize {
        let Some(scope) = self.scopes.remove(&cgroup_id) else {
            return 0;
        };
        let mut removed = 0;
        for addr in scope.expiry.keys() {
            match remove(&AnswerKey {
                cgroup_id,
                addr: *addr,
            }) {
                Ok(()) => removed += 1,
                Err(e) if super::maps::absent(&e) => {}
                // Nothing more to try: the scope is going, and an entry left behind allows
                // nothing once it expires.
                Err(_) => {}
            }
        }
        removed
    }
}

fn answers_err(call: &'static str) -> impl FnOnce(MapError) -> EngineError {
    move |source| EngineError::Map {
        call,
        map: n::ANSWERS,
        source: Box::new(source),
    }
}

/// The map key of `addr` in scope `cgroup_id`: IPv4 in its IPv4-mapped form, as the kernel
/// looks it up.
pub fn answer_key(cgroup_id: u64, addr: IpAddr) -> AnswerKey {
    let v6 = match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    };
    AnswerKey {
        cgroup_id,
        addr: v6.octets(),
    }
}

/// Nanoseconds on `CLOCK_BOOTTIME`, the clock of `bpf_ktime_get_boot_ns()`.
pub fn boot_time_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_BOOTTIME exists on every kernel bee
    // supports (2.6.39+), so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

impl AnswerMap {
    fn open(path: &Path) -> Result<Self, EngineError> {
        let data = MapData::from_pin(path).map_err(answers_err("BPF_OBJ_GET"))?;
        Self::from_map(aya::maps::Map::HashMap(data))
    }

    /// A handle on `map`, an answers map (`bee_answers`) of a loaded object.
    ///
    /// # Errors
    /// [`EngineError::Map`] when `map` is not a hash map of answers, or its size cannot be
    /// read.
    pub(crate) fn from_map(map: aya::maps::Map) -> Result<Self, EngineError> {
        let capacity = match &map {
            aya::maps::Map::HashMap(data) => data
                .info()
                .map_err(answers_err("BPF_OBJ_GET_INFO_BY_FD"))?
                .max_entries(),
            _ => 0,
        };
        let map = HashMap::try_from(map).map_err(answers_err("take"))?;
        Ok(Self {
            inner: Mutex::new(Inner {
                map,
                book: Book::default(),
            }),
            capacity: usize::try_from(capacity).unwrap_or(usize::MAX),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The map's size (`max_entries`), shared by every scope.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many answers scope `cgroup_id` holds through this handle (expired ones not yet
    /// removed included); at most its [`scope_quota`].
    pub fn held(&self, cgroup_id: u64) -> usize {
        self.lock().book.held(cgroup_id)
    }

    /// Makes `addr` a peer of scope `cgroup_id` on `ports` for `ttl` from now. An address
    /// already there (another name, or an earlier answer) keeps its rules and the later
    /// expiry, the new rules added (up to `bee_common::NET_RULES_MAX`; past it the entry is left as it
    /// was and the call fails, so that the resolver refuses the answer rather than allow less
    /// or more than it says). A new address of a scope at its quota evicts the scope's own
    /// answers first (see [`AnswerMap`]).
    ///
    /// # Errors
    /// [`EngineError::Map`] when the map refuses the update (full: `E2BIG`, even after the
    /// expired answers went and every scope above its quota was trimmed to it) or an
    /// eviction; [`EngineError::Full`] when the rules do not fit one entry.
    pub fn admit(
        &self,
        cgroup_id: u64,
        addr: IpAddr,
        ttl: Duration,
        ports: &NetValue,
    ) -> Result<(), EngineError> {
        let key = answer_key(cgroup_id, addr);
        let now = boot_time_ns();
        let expires_ns = now.saturating_add(u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX));
        let capacity = self.capacity;
        let mut inner = self.lock();
        let Inner { map, book } = &mut *inner;
        let mut value = match map.get(&key, 0) {
            Ok(old) if old.expires_ns > now => old,
            _ => AnswerValue::default(),
        };
        value.expires_ns = value.expires_ns.max(expires_ns);
        for rule in ports.rules() {
            if value.ports.rules().contains(rule) {
                continue;
            }
            let i = value.ports.count as usize;
            let Some(slot) = value.ports.rules.get_mut(i) else {
                return Err(EngineError::Full {
                    what: "port rules of one answered address",
                    needed: (i + 1) as u64,
                    free: 0,
                });
            };
            *slot = *rule;
            value.ports.count += 1;
        }
        let new = !book.holds(cgroup_id, &key.addr);
        if new {
            book.make_room(cgroup_id, now, capacity, &mut |k| map.remove(k))
                .map_err(answers_err("BPF_MAP_DELETE_ELEM"))?;
        }
        if let Err(e) = map.insert(key, value, 0) {
            if !new {
                return Err(answers_err("BPF_MAP_UPDATE_ELEM")(e));
            }
            // Full: the expired answers go, and the scopes above the quota are trimmed to it.
            book.sweep(now, capacity, &mut |k| map.remove(k));
            map.insert(key, value, 0)
                .map_err(answers_err("BPF_MAP_UPDATE_ELEM"))?;
        }
        book.set(cgroup_id, key.addr, value.expires_ns);
        Ok(())
    }

    /// Removes every answer of scope `cgroup_id` (its teardown, or a policy change); returns
    /// how many there were.
    pub fn forget_scope(&self, cgroup_id: u64) -> usize {
        let mut inner = self.lock();
        let Inner { map, book } = &mut *inner;
        book.forget(cgroup_id, &mut |k| map.remove(k))
    }

    /// Removes every answer that expired by `now_ns` (`CLOCK_BOOTTIME`), and trims a scope
    /// above its quota to it; returns how many went. The kernel ignores expired answers
    /// already; this only gives their room back.
    pub fn sweep(&self, now_ns: u64) -> usize {
        let mut inner = self.lock();
        let Inner { map, book } = &mut *inner;
        book.sweep(now_ns, self.capacity, &mut |k| map.remove(k))
    }
}

/// Removes the entries of the answers map `map` that `doomed` picks. Returns how many were
/// removed and the first error other than an entry already gone, after trying every one.
pub(super) fn remove_answers(
    map: &mut HashMap<MapData, AnswerKey, AnswerValue>,
    doomed: impl Fn(&AnswerKey, &AnswerValue) -> bool,
) -> (usize, Option<MapError>) {
    let keys: Vec<AnswerKey> = map
        .iter()
        .filter_map(Result::ok)
        .filter(|(k, v)| doomed(k, v))
        .map(|(k, _)| k)
        .collect();
    let (mut removed, mut first) = (0, None);
    for k in &keys {
        match map.remove(k) {
            Ok(()) => removed += 1,
            Err(e) if super::maps::absent(&e) => {}
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    (removed, first)
}

/// The resolvers' port map (`bee_dns_ports`): a loopback port → how many scopes are steered
/// to it. Every engine's and every gate's scopes are refused a port in it but their own.
pub(crate) type PortMap = HashMap<MapData, u16, u32>;

/// Counts one more scope steered to `port` (written before the scope's DNS entry: no other
/// scope may address the port from then on).
///
/// # Errors
/// The map's, when it refuses the update.
pub(crate) fn hold_port(ports: &mut PortMap, port: u16) -> Result<(), MapError> {
    let users = ports.get(&port, 0).unwrap_or(0);
    ports.insert(port, users.saturating_add(1), 0)
}

/// Counts one scope fewer at `port`, removing it with the last (after the scope's DNS entry
/// went).
///
/// # Errors
/// The map's, when it refuses the update or the removal.
pub(crate) fn release_port(ports: &mut PortMap, port: u16) -> Result<(), MapError> {
    let users = ports.get(&port, 0).unwrap_or(0);
    if users > 1 {
        ports.insert(port, users - 1, 0)
    } else {
        ports.remove(&port)
    }
}

/// The DNS map value for a resolver on `127.0.0.1:port` (and `[::1]:port` when `v6`).
pub fn dns_value(port: u16, v6: bool) -> DnsValue {
    DnsValue {
        port,
        v6: u8::from(v6),
        _pad: [0; 5],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(i: u32) -> [u8; 16] {
        answer_key(0, IpAddr::V4(i.into())).addr
    }

    /// Admits like [`AnswerMap::admit`], into `kernel` (a set of keys standing for the map),
    /// which refuses an insert beyond `capacity`.
    fn admit(
        book: &mut Book,
        kernel: &mut BTreeSet<(u64, [u8; 16])>,
        capacity: usize,
        scope: u64,
        a: [u8; 16],
        expires_ns: u64,
        now_ns: u64,
    ) -> bool {
        if !book.holds(scope, &a) {
            let mut remove = |k: &AnswerKey| {
                kernel.remove(&(k.cgroup_id, k.addr));
                Ok(())
            };
            book.make_room(scope, now_ns, capacity, &mut remove)
                .unwrap();
        }
        if kernel.len() >= capacity && !kernel.contains(&(scope, a)) {
            return false;
        }
        kernel.insert((scope, a));
        book.set(scope, a, expires_ns);
        true
    }

    #[test]
    fn quota_shares_the_map() {
        assert_eq!(scope_quota(1 << 16, 1), SCOPE_ANSWERS_MAX);
        assert_eq!(scope_quota(1 << 16, 16), 4096);
        assert_eq!(scope_quota(1 << 16, 51), 1285);
        assert_eq!(scope_quota(1 << 16, 1024), SCOPE_ANSWERS_MIN);
        assert_eq!(scope_quota(1 << 16, 100_000), SCOPE_ANSWERS_MIN);
        assert_eq!(scope_quota(10, 1), 10);
        assert_eq!(scope_quota(1 << 16, 0), SCOPE_ANSWERS_MAX);
    }

    /// A flooding scope evicts its own answers, soonest to expire first, and never another
    /// scope's; the other scope admits as before.
    #[test]
    fn a_flooding_scope_evicts_only_its_own_soonest_to_expire() {
        let (mut book, mut kernel) = (Book::default(), BTreeSet::new());
        let capacity = 2 * SCOPE_ANSWERS_MAX;
        assert!(admit(
            &mut book,
            &mut kernel,
            capacity,
            2,
            addr(1),
            1_000,
            0
        ));
        // Scope 1 floods: one long-lived answer first, then many short ones.
        assert!(admit(
            &mut book,
            &mut kernel,
            capacity,
            1,
            addr(0),
            9_000_000,
            0
        ));
        for i in 1..20_000u32 {
            let expires = 10_000 + u64::from(i);
            assert!(admit(
                &mut book,
                &mut kernel,
                capacity,
                1,
                addr(i),
                expires,
                0
            ));
        }
        let quota = scope_quota(capacity, 2);
        assert_eq!(book.held(1), quota);
        assert!(kernel.len() <= capacity);
        // The longest-lived answer stayed; the soonest to expire went.
        assert!(book.holds(1, &addr(0)));
        assert!(!book.holds(1, &addr(1)));
        assert!(book.holds(1, &addr(19_999)));
        // The other scope's answer was never touched, and it still admits.
        assert!(book.holds(2, &addr(1)) && kernel.contains(&(2, addr(1))));
        assert!(admit(
            &mut book,
            &mut kernel,
            capacity,
            2,
            addr(2),
            1_000,
            0
        ));
        assert_eq!(book.held(2), 2);
    }

    /// Expired answers go before live ones, and renewing a held address takes no new room.
    #[test]
    fn expired_answers_go_first_and_renewals_take_no_room() {
        let (mut book, mut kernel) = (Book::default(), BTreeSet::new());
        let capacity = SCOPE_ANSWERS_MIN;
        for i in 0..64u32 {
            // Half expire at 50, half at 500.
            let expires = if i % 2 == 0 { 50 } else { 500 };
            assert!(admit(
                &mut book,
                &mut kernel,
                capacity,
                7,
                addr(i),
                expires,
                0
            ));
        }
        assert!(admit(&mut book, &mut kernel, capacity, 7, addr(1), 900, 0));
        assert_eq!(book.held(7), 64);
        // At 100, the 32 expired answers are removed to admit a new one.
        assert!(admit(
            &mut book,
            &mut kernel,
            capacity,
            7,
            addr(100),
            900,
            100
        ));
        assert_eq!(book.held(7), 33);
        assert!(
            (0..64)
                .filter(|i| i % 2 == 1)
                .all(|i| book.holds(7, &addr(i)))
        );
    }

    /// The sweep removes expired answers and trims scopes above a quota that shrank.
    #[test]
    fn sweep_trims_scopes_above_the_quota() {
        let mut book = Book::default();
        let mut removed = Vec::new();
        for i in 0..100u32 {
            book.set(1, addr(i), 1_000 + u64::from(i));
        }
        book.set(2, addr(0), 10);
        let mut remove = |k: &AnswerKey| {
            removed.push((k.cgroup_id, k.addr));
            Ok(())
        };
        // Two scopes in a map of 128: a quota of 64 each.
        assert_eq!(book.sweep(20, 128, &mut remove), 36 + 1);
        assert_eq!(book.held(1), 64);
        assert_eq!(book.held(2), 0);
        assert!(book.holds(1, &addr(99)) && !book.holds(1, &addr(35)));
        assert_eq!(book.forget(1, &mut remove), 64);
        assert_eq!(book.held(1), 0);
    }
}
