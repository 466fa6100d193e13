//! The Landlock engine's network gate: the cgroup `sock_addr` programs of `gate.bpf.o`
//! ([`bee_ebpf::GATE_OBJECT`]), which decide every TCP and UDP peer of a gated scope by its
//! policy's address rules and, for name grants, by its resolver's answers. They need no BPF
//! LSM, only a kernel that runs cgroup socket programs and `CAP_BPF` with `CAP_NET_ADMIN`.
//!
//! ```text
//! NetGate::load()                 load the eight programs and take the maps (once per engine)
//! gate.admit(cgroup, policy)      the scope's rules, and its resolver when names are granted
//! gate.attach(cgroup dir)         BPF_PROG_ATTACH (ALLOW_MULTI) to the scope's cgroup, before
//!                                 anything runs in it: it lasts as long as the cgroup does
//! gate.admit(cgroup, policy)      again on a live policy change: rules and grants replaced
//! gate.drain(cgroup)              the refusals the programs and the resolver reported
//! gate.forget(cgroup)             the gate entry first (the scope is then refused every
//!                                 peer), then the rules, the resolver, its answers
//! ```
//!
//! The programs stay attached to the cgroup if bee dies, with the maps they use: a scope that
//! outlives bee keeps its network rules, and its DNS (steered to a resolver that is gone)
//! fails. Each bee process loads a gate of its own; the one map they share, pinned under
//! [`PIN_DIR`], holds every resolver's loopback port, so that no scope addresses another's
//! resolver (whose grants are not its own) whichever process made it.

use std::collections::HashMap as StdHashMap;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::sync::{Arc, PoisonError};

use aya::maps::lpm_trie::LpmTrie;
use aya::maps::{Array, HashMap, MapData, RingBuf};
use aya::programs::CgroupSockAddr;
use aya::{Ebpf, EbpfLoader};
use bee_common::scope::SCOPE_DNS;
use bee_common::{AuditEvent, DnsValue, GateScope, LpmKeyV4, LpmKeyV6, NetValue};
use bee_core::CompiledPolicy;

use crate::engine::dns::{PortMap, hold_port, release_port};
use crate::engine::maps::{V4Data, V6Data, v4_key, v6_key};
use crate::engine::names::{Refusals, ScopeNames};
use crate::engine::{AnswerMap, events};
use crate::plan::{NamePlan, PlanLimits};

/// The programs, with their `bpf_attach_type` (include/uapi/linux/bpf.h).
const PROGRAMS: [(&str, u32); 8] = [
    ("bee_gate_bind4", 8),     // BPF_CGROUP_INET4_BIND
    ("bee_gate_bind6", 9),     // BPF_CGROUP_INET6_BIND
    ("bee_gate_connect4", 10), // BPF_CGROUP_INET4_CONNECT
    ("bee_gate_connect6", 11), // BPF_CGROUP_INET6_CONNECT
    ("bee_gate_sendmsg4", 14), // BPF_CGROUP_UDP4_SENDMSG
    ("bee_gate_sendmsg6", 15), // BPF_CGROUP_UDP6_SENDMSG
    ("bee_gate_recvmsg4", 19), // BPF_CGROUP_UDP4_RECVMSG
    ("bee_gate_recvmsg6", 20), // BPF_CGROUP_UDP6_RECVMSG
];

/// Where the map every gate shares is pinned: the loopback ports of every gate's resolvers,
/// valued by how many scopes are steered to each.
pub const PIN_DIR: &str = "/sys/fs/bpf/bee-gate";

/// `BPF_PROG_ATTACH` (enum bpf_cmd) and `BPF_F_ALLOW_MULTI`: the program runs beside the
/// cgroup's others, and its ancestors'.
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_F_ALLOW_MULTI: u32 = 1 << 1;

/// One gated scope: where its rules are, and its resolver.
#[derive(Default)]
struct Gated {
    v4: Vec<LpmKeyV4>,
    v6: Vec<LpmKeyV6>,
    names: Option<ScopeNames>,
    /// The gate's count of lost refusals when the scope was last told of it (or admitted).
    told: u64,
}

/// The loaded gate (see the module docs).
pub struct NetGate {
    /// Owns the programs (and their descriptors) for the engine's lifetime.
    ebpf: Ebpf,
    gate: HashMap<MapData, u64, GateScope>,
    v4: LpmTrie<MapData, V4Data, NetValue>,
    v6: LpmTrie<MapData, V6Data, NetValue>,
    dns: HashMap<MapData, u64, DnsValue>,
    dns_ports: PortMap,
    events: RingBuf<MapData>,
    /// Refusals the ring buffer had no room for, since the gate was loaded (one counter).
    lost: Array<MapData, u64>,
    answers: Arc<AnswerMap>,
    refusals: Refusals,
    /// Events read from the ring for scopes other than the one drained.
    pending: StdHashMap<u64, Vec<AuditEvent>>,
    scopes: StdHashMap<u64, Gated>,
    next_id: u32,
}

impl std::fmt::Debug for NetGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetGate")
            .field("scopes", &self.scopes.len())
            .finish_non_exhaustive()
    }
}

/// `e` and its sources, joined by `: `.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

fn take<T>(ebpf: &mut Ebpf, name: &str) -> Result<T, String>
where
    T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>,
{
    let map = ebpf
        .take_map(name)
        .ok_or_else(|| format!("gate.bpf.o has no map `{name}`"))?;
    T::try_from(map).map_err(|e| format!("the gate's map `{name}`: {e}"))
}

impl NetGate {
    /// Loads `gate.bpf.o`'s programs into the kernel (attached nowhere yet).
    ///
    /// # Errors
    /// A sentence naming the program the kernel refused and why (`EPERM` without
    /// `CAP_NET_ADMIN`, a kernel without cgroup socket programs), or the map.
    pub fn load() -> Result<Self, String> {
        // The resolvers' ports are shared by every bee process's gate (a map pinned by
        // name), so that no scope reaches another process's scope's resolver either.
        let pins = Path::new(PIN_DIR);
        crate::bpffs::ensure_mounted(pins).map_err(|e| {
            format!(
                "{} holds no BPF file system, and mounting one there failed: {e} (the gate \
                 needs root, with CAP_SYS_ADMIN to mount it, CAP_BPF and CAP_NET_ADMIN)",
                crate::bpffs::MOUNT_POINT
            )
        })?;
        match std::fs::create_dir(pins) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(format!(
                    "making {PIN_DIR} for the resolvers' port map: {e} (the gate needs root, with CAP_BPF and CAP_NET_ADMIN, and the BPF file system mounted at /sys/fs/bpf)"
                ));
            }
        }
        let mut ebpf = EbpfLoader::new()
            // No CO-RE relocation to make: the programs read only their context, which the
            // verifier rewrites. (The loader has parsed the kernel's BTF already, about 45 ms
            // of the gate's load: `docs/benchmarks.md`.)
            .btf(None)
            .map_pin_path("bee_dns_ports", pins.join("dns_ports"))
            .load(bee_ebpf::GATE_OBJECT)
            .map_err(|e| {
                format!(
                    "loading gate.bpf.o: {} (it needs CAP_BPF and CAP_NET_ADMIN)",
                    chain(&e)
                )
            })?;
        for (name, _) in PROGRAMS {
            let prog: &mut CgroupSockAddr = ebpf
                .program_mut(name)
                .ok_or_else(|| format!("gate.bpf.o has no program `{name}`"))?
                .try_into()
                .map_err(|e| format!("`{name}`: {e}"))?;
            prog.load().map_err(|e| {
                let detail = match &e {
                    aya::programs::ProgramError::LoadError { io_error, .. } => {
                        io_error.to_string()
                    }
                    other => other.to_string(),
                };
                format!(
                    "the kernel refused the cgroup sock_addr program `{name}` (BPF_PROG_LOAD: {detail}; it needs CAP_BPF and CAP_NET_ADMIN)"
                )
            })?;
        }
        let answers = Arc::new(
            AnswerMap::from_map(
                ebpf.take_map("bee_answers")
                    .ok_or("gate.bpf.o has no map `bee_answers`")?,
            )
            .map_err(|e| e.to_string())?,
        );
        Ok(Self {
            gate: take(&mut ebpf, "bee_gate")?,
            v4: take(&mut ebpf, "bee_gate_v4")?,
            v6: take(&mut ebpf, "bee_gate_v6")?,
            dns: take(&mut ebpf, "bee_dns")?,
            dns_ports: take(&mut ebpf, "bee_dns_ports")?,
            events: take(&mut ebpf, "bee_gate_events")?,
            lost: take(&mut ebpf, "bee_gate_lost")?,
            ebpf,
            answers,
            refusals: Refusals::default(),
            pending: StdHashMap::new(),
            scopes: StdHashMap::new(),
            next_id: 1,
        })
    }

    /// Writes scope `cgroup_id`'s rules from `policy`'s `net.allow`, starts (or regrants) its
    /// resolver when `policy` grants names, and writes its gate entry last. On a scope already
    /// admitted (a live policy change) the new rules replace the old; its processes are
    /// decided by them from then on.
    ///
    /// # Errors
    /// A sentence naming the map, the rules (more than the tries hold) or the resolver; the
    /// scope is then left refused every peer (its gate entry removed) until [`NetGate::forget`].
    pub fn admit(&mut self, cgroup_id: u64, policy: &CompiledPolicy) -> Result<(), String> {
        let result = self.admit_inner(cgroup_id, policy);
        if result.is_err() {
            let _ = self.gate.remove(&cgroup_id);
        }
        result
    }

    fn admit_inner(&mut self, cgroup_id: u64, policy: &CompiledPolicy) -> Result<(), String> {
        let plan = crate::plan::net::build(&policy.net.allow, &PlanLimits::default())
            .map_err(|e| e.to_string())?;
        let names = (!policy.net.hosts.is_empty())
            .then(|| NamePlan::new(&policy.net.hosts, &policy.net.allow));
        let gate_id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let mut new = Gated::default();
        if let Err(e) = self.write_rules(gate_id, &plan, &mut new) {
            self.remove_rules(&new.v4, &new.v6);
            return Err(e);
        }
        // The resolver: kept across a change (its grants swapped, its old answers withdrawn),
        // started for a scope that grants names for the first time, stopped for one that no
        // longer does.
        new.told = match self.scopes.get(&cgroup_id) {
            Some(known) => known.told,
            None => self.lost_total(),
        };
        let old = self.scopes.remove(&cgroup_id).unwrap_or_default();
        new.names = match (names, old.names) {
            (Some(plan), Some(running)) => {
                running.regrant(&plan);
                Some(running)
            }
            (Some(plan), None) => match self.start_names(cgroup_id, &plan) {
                Ok(started) => Some(started),
                Err(e) => {
                    // The old rules stay the scope's, for `forget` to remove.
                    self.remove_rules(&new.v4, &new.v6);
                    let kept = Gated {
                        v4: old.v4,
                        v6: old.v6,
                        names: None,
                        told: new.told,
                    };
                    self.scopes.insert(cgroup_id, kept);
                    return Err(e);
                }
            },
            (None, Some(running)) => {
                self.stop_names(cgroup_id, running);
                None
            }
            (None, None) => None,
        };
        let flags = if new.names.is_some() { SCOPE_DNS } else { 0 };
        let entry = self
            .gate
            .insert(cgroup_id, GateScope { gate_id, flags }, 0)
            .map_err(|e| format!("the gate's scope entry: {e}"));
        // Written or not, the new rules are the scope's from here (a failed entry leaves it
        // refused every peer until `forget`), and the old ones go.
        self.remove_rules(&old.v4, &old.v6);
        self.scopes.insert(cgroup_id, new);
        entry
    }

    /// Writes `plan`'s tries under `gate_id`, each key into `into` as it is written.
    fn write_rules(
        &mut self,
        gate_id: u32,
        plan: &crate::plan::net::NetPlan,
        into: &mut Gated,
    ) -> Result<(), String> {
        for (k, v) in &plan.v4 {
            let key = LpmKeyV4 {
                policy_id: gate_id,
                ..*k
            };
            self.v4
                .insert(&v4_key(&key), v, 0)
                .map_err(|e| format!("the gate's IPv4 rules: {e}"))?;
            into.v4.push(key);
        }
        for (k, v) in &plan.v6 {
            let key = LpmKeyV6 {
                policy_id: gate_id,
                ..*k
            };
            self.v6
                .insert(&v6_key(&key), v, 0)
                .map_err(|e| format!("the gate's IPv6 rules: {e}"))?;
            into.v6.push(key);
        }
        Ok(())
    }

    fn start_names(&mut self, cgroup_id: u64, plan: &NamePlan) -> Result<ScopeNames, String> {
        let (dns, ports) = (&mut self.dns, &mut self.dns_ports);
        ScopeNames::start(
            plan,
            cgroup_id,
            Arc::clone(&self.answers),
            &self.refusals,
            |value| {
                // The port first; counted, as another process may hold a stale entry for it.
                hold_port(ports, value.port)
                    .map_err(|e| format!("the gate's resolver ports: {e}"))?;
                dns.insert(cgroup_id, value, 0)
                    .map_err(|e| format!("the gate's DNS entry: {e}"))
            },
        )
    }

    fn stop_names(&mut self, cgroup_id: u64, names: ScopeNames) {
        let port = self.dns.get(&cgroup_id, 0).ok().map(|v| v.port);
        let _ = self.dns.remove(&cgroup_id);
        names.stop();
        if let Some(port) = port {
            let _ = release_port(&mut self.dns_ports, port);
        }
        self.answers.forget_scope(cgroup_id);
    }

    fn remove_rules(&mut self, v4: &[LpmKeyV4], v6: &[LpmKeyV6]) {
        for k in v4 {
            let _ = self.v4.remove(&v4_key(k));
        }
        for k in v6 {
            let _ = self.v6.remove(&v6_key(k));
        }
    }

    /// Attaches the programs to the cgroup directory `cgroup` (`BPF_PROG_ATTACH` with
    /// `BPF_F_ALLOW_MULTI`): every socket made in it is decided from then on.
    ///
    /// # Errors
    /// A sentence naming the program and the kernel's error.
    pub fn attach(&self, cgroup: &Path) -> Result<(), String> {
        let dir = std::fs::File::open(cgroup)
            .map_err(|e| format!("opening the cgroup {}: {e}", cgroup.display()))?;
        for (name, attach_type) in PROGRAMS {
            let prog: &CgroupSockAddr = self
                .ebpf
                .program(name)
                .ok_or_else(|| format!("gate.bpf.o has no program `{name}`"))?
                .try_into()
                .map_err(|e| format!("`{name}`: {e}"))?;
            let fd = prog.fd().map_err(|e| format!("`{name}`: {e}"))?;
            // union bpf_attr for BPF_PROG_ATTACH: target_fd, attach_bpf_fd, attach_type,
            // attach_flags, replace_bpf_fd, relative_fd, then expected_revision (u64).
            let mut attr = [0u32; 8];
            attr[0] = dir.as_raw_fd() as u32;
            attr[1] = fd.as_fd().as_raw_fd() as u32;
            attr[2] = attach_type;
            attr[3] = BPF_F_ALLOW_MULTI;
            // SAFETY: `attr` is a valid bpf_attr prefix of the size passed; the descriptors
            // are open for the call's duration.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    BPF_PROG_ATTACH,
                    attr.as_mut_ptr(),
                    std::mem::size_of_val(&attr),
                )
            };
            if rc != 0 {
                return Err(format!(
                    "attaching `{name}` to {} (BPF_PROG_ATTACH): {}",
                    cgroup.display(),
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(())
    }

    /// Takes the refusals reported for scope `cgroup_id` so far: the programs' (in the order
    /// they happened) then its resolver's.
    pub fn drain(&mut self, cgroup_id: u64) -> Vec<AuditEvent> {
        while let Some(item) = self.events.next() {
            if let Some(ev) = events::decode(&item) {
                self.pending.entry(ev.cgroup_id).or_default().push(ev);
            }
        }
        let mut out = self.pending.remove(&cgroup_id).unwrap_or_default();
        if let Some(refused) = self
            .refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&cgroup_id)
        {
            out.extend(refused);
        }
        out
    }

    /// The refusals of every gated scope that the ring buffer had no room for, since load.
    fn lost_total(&self) -> u64 {
        self.lost.get(&0, 0).unwrap_or(0)
    }

    /// The refusals lost (of any gated scope: the ring buffer is shared) since scope
    /// `cgroup_id` was last told, or admitted, which it is now told of; 0 for a scope the gate
    /// does not know. Each may have been one of its refusals.
    pub fn lost(&mut self, cgroup_id: u64) -> u64 {
        let now = self.lost_total();
        self.scopes
            .get_mut(&cgroup_id)
            .map_or(0, |g| events::lost_since(&mut g.told, now))
    }

    /// Removes scope `cgroup_id`: its gate entry first, so that from then on a process left in
    /// it is refused every peer, then its rules, its resolver and its answers.
    pub fn forget(&mut self, cgroup_id: u64) {
        let _ = self.gate.remove(&cgroup_id);
        if let Some(g) = self.scopes.remove(&cgroup_id) {
            self.remove_rules(&g.v4, &g.v6);
            if let Some(names) = g.names {
                self.stop_names(cgroup_id, names);
            }
        }
        self.pending.remove(&cgroup_id);
        self.refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&cgroup_id);
    }
}
