//! Name grants in the kernel: the cgroup programs that steer a scope's DNS traffic to its
//! resolver, the DNS map that says where, and the answers map its resolver fills.
//!
//! ```text
//! engine.enable_dns()                 load the six cgroup sock_addr programs and attach them
//!                                     to the cgroup v2 root (links: beside any other program), pinned; once
//! engine.set_dns(cgroup, value)       where the scope's port-53 peers go (before the scope
//!                                     entry with SCOPE_DNS; removed after it by uninstall)
//! engine.answers()                    an own handle on the answers map, for resolver threads
//! answers.admit(cgroup, addr, ttl, …) an address a granted name resolved to, until its TTL
//! ```
//!
//! The programs are attached to the root so that they run for every scope wherever its
//! cgroup is; for a task whose cgroup is not a key of the DNS map they only look it up.
//! Loading them needs CAP_NET_ADMIN (or CAP_SYS_ADMIN) besides CAP_BPF: the kernel counts
//! cgroup socket programs as networking programs. A policy without name grants never loads
//! them, so the minimal capabilities of `docs/enforcement.md` stay what they were.

use std::fs::File;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Mutex;
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

    /// Opens a handle of its own on the answers map, for the threads of a resolver: it needs
    /// no access to the engine (nor its lock).
    ///
    /// # Errors
    /// [`EngineError::Map`] when the pinned map cannot be opened.
    pub fn answers(&self) -> Result<AnswerMap, EngineError> {
        AnswerMap::open(&self.instance_dir.join("maps").join(n::ANSWERS))
    }
}

/// A handle on the answers map (see the module docs), shareable between threads.
#[derive(Debug)]
pub struct AnswerMap {
    map: Mutex<HashMap<MapData, AnswerKey, AnswerValue>>,
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
    /// [`EngineError::Map`] when `map` is not a hash map of answers.
    pub(crate) fn from_map(map: aya::maps::Map) -> Result<Self, EngineError> {
        let map = HashMap::try_from(map).map_err(answers_err("take"))?;
        Ok(Self {
            map: Mutex::new(map),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MapData, AnswerKey, AnswerValue>> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes `addr` a peer of scope `cgroup_id` on `ports` for `ttl` from now. An address
    /// already there (another name, or an earlier answer) keeps its rules and the later
    /// expiry, the new rules added (up to `bee_common::NET_RULES_MAX`; past it the entry is left as it
    /// was and the call fails, so that the resolver refuses the answer rather than allow less
    /// or more than it says).
    ///
    /// # Errors
    /// [`EngineError::Map`] when the map refuses the update (full: `E2BIG`), or
    /// [`EngineError::Full`] when the rules do not fit one entry.
    pub fn admit(
        &self,
        cgroup_id: u64,
        addr: IpAddr,
        ttl: Duration,
        ports: &NetValue,
    ) -> Result<(), EngineError> {
        let key = answer_key(cgroup_id, addr);
        let expires_ns =
            boot_time_ns().saturating_add(u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX));
        let mut map = self.lock();
        let mut value = match map.get(&key, 0) {
            Ok(old) if old.expires_ns > boot_time_ns() => old,
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
        map.insert(key, value, 0)
            .map_err(answers_err("BPF_MAP_UPDATE_ELEM"))
    }

    /// Removes every answer of scope `cgroup_id` (its teardown, or a policy change); returns
    /// how many there were.
    pub fn forget_scope(&self, cgroup_id: u64) -> usize {
        self.remove_where(|k, _| k.cgroup_id == cgroup_id)
    }

    /// Removes every answer that expired by `now_ns` (`CLOCK_BOOTTIME`); returns how many.
    /// The kernel ignores them already; this only gives their room back.
    pub fn sweep(&self, now_ns: u64) -> usize {
        self.remove_where(|_, v| v.expires_ns <= now_ns)
    }

    fn remove_where(&self, doomed: impl Fn(&AnswerKey, &AnswerValue) -> bool) -> usize {
        remove_answers(&mut self.lock(), doomed).0
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
