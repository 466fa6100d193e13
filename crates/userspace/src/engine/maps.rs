//! Typed handles on the shared maps of `bee.bpf.o` and the writes of one plan.

use std::path::Path;

use aya::Ebpf;
use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::maps::{Array, HashMap, Map, MapData, MapError, RingBuf};
use bee_common::scope::scope_slot;
use bee_common::{
    AnswerKey, AnswerValue, AuditEvent, ComboKey, DnsValue, EdgeKeyLong, EdgeKeyShort, ExecPinKey,
    GLOB_MAX, GlobValue, LpmKeyV4, LpmKeyV6, NetValue, ScopeValue, StateValue,
};

use super::{EngineError, EngineOptions};
use crate::plan::EnforcementPlan;

/// Map names in `bee.bpf.o` (ELF symbols; at most 15 bytes, the kernel's limit).
pub mod map_names {
    /// cgroup id → `bee_scope`.
    pub const SCOPES: &str = "bee_scopes";
    /// The scope filter: per slot, the number of scopes whose cgroup id falls there
    /// (`bee_common::scope::SCOPE_SLOTS`).
    pub const SCOPE_SLOTS: &str = "bee_scope_slots";
    /// State array.
    pub const STATES: &str = "bee_states";
    /// Short literal edges.
    pub const EDGES_SHORT: &str = "bee_edges_s";
    /// Long literal edges.
    pub const EDGES_LONG: &str = "bee_edges_l";
    /// Glob array.
    pub const GLOBS: &str = "bee_globs";
    /// Combos.
    pub const COMBOS: &str = "bee_combos";
    /// Exec pins.
    pub const EXEC_PINS: &str = "bee_exec_pins";
    /// IPv4 LPM trie.
    pub const NET_V4: &str = "bee_net_v4";
    /// IPv6 LPM trie.
    pub const NET_V6: &str = "bee_net_v6";
    /// Audit ring buffer.
    pub const EVENTS: &str = "bee_events";
    /// `[0]`: the events the ring buffer had no room for, since load.
    pub const EVENTS_LOST: &str = "bee_events_lost";
    /// `[0] = 1`: the directory cache may be used (its tracing programs are attached).
    pub const CACHE_ON: &str = "bee_cache_on";
    /// cgroup id → `bee_dns`: where a scope with name grants has its DNS steered.
    pub const DNS: &str = "bee_dns";
    /// (cgroup id, address) → `bee_answer`: the live answers of the scopes' resolvers.
    pub const ANSWERS: &str = "bee_answers";
    /// Resolver port → the number of scopes steered to it (one, for bee's own resolvers): the
    /// loopback ports no scope but the resolver's own may address.
    pub const DNS_PORTS: &str = "bee_dns_ports";
}

use map_names as n;

/// `max_entries` overrides for `EbpfLoader::map_max_entries`.
pub(super) fn sizes(o: &EngineOptions) -> [(&'static str, u32); 13] {
    [
        (n::SCOPES, o.max_scopes),
        (n::STATES, o.max_states),
        (n::EDGES_SHORT, o.max_edges_short),
        (n::EDGES_LONG, o.max_edges_long),
        (n::GLOBS, o.max_globs),
        (n::COMBOS, o.max_combos),
        (n::EXEC_PINS, o.max_exec_pins),
        (n::NET_V4, o.max_net_v4),
        (n::NET_V6, o.max_net_v6),
        (n::EVENTS, o.ring_bytes),
        (n::DNS, o.max_scopes),
        (n::DNS_PORTS, o.max_scopes),
        (n::ANSWERS, o.max_answers),
    ]
}

/// LPM data: policy id (host order) then the address (network order).
pub(crate) type V4Data = [u8; 8];
pub(crate) type V6Data = [u8; 20];

pub(super) struct Maps {
    scopes: HashMap<MapData, u64, ScopeValue>,
    scope_slots: Array<MapData, u32>,
    states: Array<MapData, StateValue>,
    edges_short: HashMap<MapData, EdgeKeyShort, u32>,
    edges_long: HashMap<MapData, EdgeKeyLong, u32>,
    globs: Array<MapData, GlobValue>,
    combos: HashMap<MapData, ComboKey, u32>,
    exec_pins: HashMap<MapData, ExecPinKey, u32>,
    net_v4: LpmTrie<MapData, V4Data, NetValue>,
    net_v6: LpmTrie<MapData, V6Data, NetValue>,
    events: RingBuf<MapData>,
    events_lost: Array<MapData, u64>,
    cache_on: Array<MapData, u32>,
    dns: HashMap<MapData, u64, DnsValue>,
    dns_ports: super::dns::PortMap,
    answers: HashMap<MapData, AnswerKey, AnswerValue>,
}

impl std::fmt::Debug for Maps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Maps").finish_non_exhaustive()
    }
}

/// Whether a map call failed only because the key was not there (`ENOENT`, which aya reports
/// as a syscall error for a delete).
pub(super) fn absent(e: &MapError) -> bool {
    match e {
        MapError::KeyNotFound => true,
        MapError::SyscallError(s) => s.io_error.raw_os_error() == Some(libc::ENOENT),
        _ => false,
    }
}

fn map_err(call: &'static str, map: &'static str) -> impl FnOnce(MapError) -> EngineError {
    move |source| EngineError::Map {
        call,
        map,
        source: Box::new(source),
    }
}

/// Takes `name` out of the object and pins it in `dir`.
fn take(ebpf: &mut Ebpf, dir: &Path, name: &'static str) -> Result<Map, EngineError> {
    let map = ebpf
        .take_map(name)
        .ok_or_else(|| EngineError::NotEnforcer {
            reason: format!("no map `{name}`"),
        })?;
    let path = dir.join(name);
    map.pin(&path).map_err(|source| EngineError::Pin {
        path,
        source: Box::new(source),
    })?;
    Ok(map)
}

pub(crate) fn v4_key(k: &LpmKeyV4) -> Key<V4Data> {
    let mut d = [0u8; 8];
    d[..4].copy_from_slice(&k.policy_id.to_ne_bytes());
    d[4..].copy_from_slice(&k.addr);
    Key::new(k.prefixlen, d)
}

pub(crate) fn v6_key(k: &LpmKeyV6) -> Key<V6Data> {
    let mut d = [0u8; 20];
    d[..4].copy_from_slice(&k.policy_id.to_ne_bytes());
    d[4..].copy_from_slice(&k.addr);
    Key::new(k.prefixlen, d)
}

/// A deleted (all-zero) state: accepts nothing, leads to the dead state.
const NO_STATE: StateValue = StateValue {
    accept: 0,
    default_next: 0,
    glob_first: 0,
    glob_count: 0,
    move_class: 0,
};

const NO_GLOB: GlobValue = GlobValue {
    len: 0,
    pattern: [0; GLOB_MAX],
};

impl Maps {
    /// Takes every shared map out of `ebpf`, pinning each in `dir` (created here).
    pub(super) fn take(ebpf: &mut Ebpf, dir: &Path) -> Result<Self, EngineError> {
        std::fs::create_dir_all(dir).map_err(|io_error| EngineError::Syscall {
            call: "mkdir",
            path: dir.to_owned(),
            io_error,
        })?;
        let conv = |name: &'static str| map_err("open", name);
        Ok(Self {
            scopes: HashMap::try_from(take(ebpf, dir, n::SCOPES)?).map_err(conv(n::SCOPES))?,
            scope_slots: Array::try_from(take(ebpf, dir, n::SCOPE_SLOTS)?)
                .map_err(conv(n::SCOPE_SLOTS))?,
            states: Array::try_from(take(ebpf, dir, n::STATES)?).map_err(conv(n::STATES))?,
            edges_short: HashMap::try_from(take(ebpf, dir, n::EDGES_SHORT)?)
                .map_err(conv(n::EDGES_SHORT))?,
            edges_long: HashMap::try_from(take(ebpf, dir, n::EDGES_LONG)?)
                .map_err(conv(n::EDGES_LONG))?,
            globs: Array::try_from(take(ebpf, dir, n::GLOBS)?).map_err(conv(n::GLOBS))?,
            combos: HashMap::try_from(take(ebpf, dir, n::COMBOS)?).map_err(conv(n::COMBOS))?,
            exec_pins: HashMap::try_from(take(ebpf, dir, n::EXEC_PINS)?)
                .map_err(conv(n::EXEC_PINS))?,
            net_v4: LpmTrie::try_from(take(ebpf, dir, n::NET_V4)?).map_err(conv(n::NET_V4))?,
            net_v6: LpmTrie::try_from(take(ebpf, dir, n::NET_V6)?).map_err(conv(n::NET_V6))?,
            events: RingBuf::try_from(take(ebpf, dir, n::EVENTS)?).map_err(conv(n::EVENTS))?,
            events_lost: Array::try_from(take(ebpf, dir, n::EVENTS_LOST)?)
                .map_err(conv(n::EVENTS_LOST))?,
            cache_on: Array::try_from(take(ebpf, dir, n::CACHE_ON)?).map_err(conv(n::CACHE_ON))?,
            dns: HashMap::try_from(take(ebpf, dir, n::DNS)?).map_err(conv(n::DNS))?,
            dns_ports: HashMap::try_from(take(ebpf, dir, n::DNS_PORTS)?)
                .map_err(conv(n::DNS_PORTS))?,
            answers: HashMap::try_from(take(ebpf, dir, n::ANSWERS)?).map_err(conv(n::ANSWERS))?,
        })
    }

    /// Writes every entry of a relocated plan except the scope.
    pub(super) fn write_plan(&mut self, plan: &EnforcementPlan) -> Result<(), EngineError> {
        const UPDATE: &str = "BPF_MAP_UPDATE_ELEM";
        for (id, v) in plan.states() {
            self.states
                .set(id, v, 0)
                .map_err(map_err(UPDATE, n::STATES))?;
        }
        for (i, v) in plan.globs() {
            self.globs.set(i, v, 0).map_err(map_err(UPDATE, n::GLOBS))?;
        }
        for (k, v) in plan.edges_short() {
            self.edges_short
                .insert(k, v, 0)
                .map_err(map_err(UPDATE, n::EDGES_SHORT))?;
        }
        for (k, v) in plan.edges_long() {
            self.edges_long
                .insert(k, v, 0)
                .map_err(map_err(UPDATE, n::EDGES_LONG))?;
        }
        for (k, v) in plan.combos() {
            self.combos
                .insert(k, v, 0)
                .map_err(map_err(UPDATE, n::COMBOS))?;
        }
        for (k, v) in plan.exec_pins() {
            self.exec_pins
                .insert(k, v, 0)
                .map_err(map_err(UPDATE, n::EXEC_PINS))?;
        }
        for (k, v) in plan.net_v4() {
            self.net_v4
                .insert(&v4_key(k), v, 0)
                .map_err(map_err(UPDATE, n::NET_V4))?;
        }
        for (k, v) in plan.net_v6() {
            self.net_v6
                .insert(&v6_key(k), v, 0)
                .map_err(map_err(UPDATE, n::NET_V6))?;
        }
        Ok(())
    }

    /// Writes the scope entry that makes the cgroup governed by `plan`, after raising the
    /// count of its slot in the scope filter (which the programs read first: the count must
    /// never be below the entries it covers, or a scope would go unchecked).
    pub(super) fn insert_scope(
        &mut self,
        cgroup_id: u64,
        plan: &EnforcementPlan,
        flags: u32,
        install: u32,
    ) -> Result<(), EngineError> {
        let slot = scope_slot(cgroup_id);
        self.count_scope(slot, true)?;
        let mut value = plan.scope_value(flags);
        value.install = install;
        let inserted = self
            .scopes
            .insert(cgroup_id, value, 0)
            .map_err(map_err("BPF_MAP_UPDATE_ELEM", n::SCOPES));
        if inserted.is_err() {
            // No entry was written: the count it was raised for goes back.
            let _ = self.count_scope(slot, false);
        }
        inserted
    }

    /// Raises or lowers the scope filter's count of `slot` by one (never below zero).
    fn count_scope(&mut self, slot: u32, raise: bool) -> Result<(), EngineError> {
        let now = self
            .scope_slots
            .get(&slot, 0)
            .map_err(map_err("BPF_MAP_LOOKUP_ELEM", n::SCOPE_SLOTS))?;
        let next = if raise {
            now.checked_add(1).ok_or(EngineError::Full {
                what: "scopes in one slot of the scope filter",
                needed: 1,
                free: 0,
            })?
        } else {
            now.saturating_sub(1)
        };
        self.scope_slots
            .set(slot, next, 0)
            .map_err(map_err("BPF_MAP_UPDATE_ELEM", n::SCOPE_SLOTS))
    }

    /// Switches the existing scope entry of `cgroup_id` to `plan` in one update
    /// (`BPF_EXIST`: a cgroup without a scope does not get one here).
    pub(super) fn switch_scope(
        &mut self,
        cgroup_id: u64,
        plan: &EnforcementPlan,
        flags: u32,
        install: u32,
    ) -> Result<(), EngineError> {
        /// `BPF_EXIST` of `include/uapi/linux/bpf.h`: update an existing element only.
        const BPF_EXIST: u64 = 2;
        let mut value = plan.scope_value(flags);
        value.install = install;
        self.scopes
            .insert(cgroup_id, value, BPF_EXIST)
            .map_err(map_err("BPF_MAP_UPDATE_ELEM", n::SCOPES))
    }

    /// Turns the kernel's directory cache on (after its tracing programs are attached).
    pub(super) fn enable_dircache(&mut self) -> Result<(), EngineError> {
        self.cache_on
            .set(0, 1, 0)
            .map_err(map_err("BPF_MAP_UPDATE_ELEM", n::CACHE_ON))
    }

    /// Deletes the scope entry of `cgroup_id` (absent is fine), then lowers its slot's count
    /// in the scope filter if an entry was deleted.
    pub(super) fn remove_scope(&mut self, cgroup_id: u64) -> Result<(), EngineError> {
        match self.scopes.remove(&cgroup_id) {
            Ok(()) => self.count_scope(scope_slot(cgroup_id), false),
            Err(e) if absent(&e) => Ok(()),
            Err(source) => Err(EngineError::Map {
                call: "BPF_MAP_DELETE_ELEM",
                map: n::SCOPES,
                source: Box::new(source),
            }),
        }
    }

    /// Deletes (or zeroes) every entry of a relocated plan except the scope; entries already
    /// absent are fine. Returns the first error after trying every entry.
    pub(super) fn remove_plan(&mut self, plan: &EnforcementPlan) -> Result<(), EngineError> {
        const DELETE: &str = "BPF_MAP_DELETE_ELEM";
        let mut first: Option<EngineError> = None;
        let mut note = |r: Result<(), MapError>, map: &'static str| {
            if let Err(source) = r {
                if !absent(&source) && first.is_none() {
                    first = Some(EngineError::Map {
                        call: DELETE,
                        map,
                        source: Box::new(source),
                    });
                }
            }
        };
        for k in plan.edges_short().keys() {
            note(self.edges_short.remove(k), n::EDGES_SHORT);
        }
        for k in plan.edges_long().keys() {
            note(self.edges_long.remove(k), n::EDGES_LONG);
        }
        for k in plan.combos().keys() {
            note(self.combos.remove(k), n::COMBOS);
        }
        for k in plan.exec_pins().keys() {
            note(self.exec_pins.remove(k), n::EXEC_PINS);
        }
        for k in plan.net_v4().keys() {
            note(self.net_v4.remove(&v4_key(k)), n::NET_V4);
        }
        for k in plan.net_v6().keys() {
            note(self.net_v6.remove(&v6_key(k)), n::NET_V6);
        }
        for (id, _) in plan.states() {
            note(self.states.set(id, NO_STATE, 0), n::STATES);
        }
        for (i, _) in plan.globs() {
            note(self.globs.set(i, NO_GLOB, 0), n::GLOBS);
        }
        first.map_or(Ok(()), Err)
    }

    /// Writes where scope `cgroup_id`'s DNS traffic goes.
    pub(super) fn insert_dns(
        &mut self,
        cgroup_id: u64,
        value: DnsValue,
    ) -> Result<(), EngineError> {
        // The port first: no other scope may address it from the moment this scope's DNS
        // goes there.
        super::dns::hold_port(&mut self.dns_ports, value.port)
            .map_err(map_err("BPF_MAP_UPDATE_ELEM", n::DNS_PORTS))?;
        self.dns
            .insert(cgroup_id, value, 0)
            .map_err(map_err("BPF_MAP_UPDATE_ELEM", n::DNS))
    }

    /// Whether scope `cgroup_id` has a DNS map entry.
    pub(super) fn has_dns(&self, cgroup_id: u64) -> bool {
        self.dns.get(&cgroup_id, 0).is_ok()
    }

    /// Deletes scope `cgroup_id`'s DNS map entry, its resolver's port and every answer of its
    /// resolver (absent is fine). Returns the first error after trying everything.
    pub(super) fn remove_dns(&mut self, cgroup_id: u64) -> Result<(), EngineError> {
        const DELETE: &str = "BPF_MAP_DELETE_ELEM";
        let port = self.dns.get(&cgroup_id, 0).ok().map(|v| v.port);
        let mut first = match self.dns.remove(&cgroup_id) {
            Ok(()) => None,
            Err(e) if absent(&e) => None,
            Err(source) => Some(EngineError::Map {
                call: DELETE,
                map: n::DNS,
                source: Box::new(source),
            }),
        };
        // The port stays closed to other scopes until the scope's own entry is gone.
        if let Some(port) = port {
            if let Err(source) = super::dns::release_port(&mut self.dns_ports, port) {
                if !absent(&source) {
                    first.get_or_insert(EngineError::Map {
                        call: DELETE,
                        map: n::DNS_PORTS,
                        source: Box::new(source),
                    });
                }
            }
        }
        if let (_, Some(source)) =
            super::dns::remove_answers(&mut self.answers, |k, _| k.cgroup_id == cgroup_id)
        {
            first.get_or_insert(EngineError::Map {
                call: DELETE,
                map: n::ANSWERS,
                source: Box::new(source),
            });
        }
        first.map_or(Ok(()), Err)
    }

    /// Drains up to `limit` events.
    pub(super) fn read_events(&mut self, limit: usize) -> Vec<AuditEvent> {
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(item) = self.events.next() else {
                break;
            };
            if let Some(ev) = super::events::decode(&item) {
                out.push(ev);
            }
        }
        out
    }

    /// The events the ring buffer had no room for, of every scope, since load (0 where the
    /// counter cannot be read).
    pub(super) fn events_lost(&self) -> u64 {
        self.events_lost.get(&0, 0).unwrap_or(0)
    }
}
