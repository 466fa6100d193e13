//! Name grants of a [`super::SharedEngine`]'s scopes: one resolver ([`crate::dns`]) per scope
//! whose policy grants names. Its answers go into the kernel's answers map before the scope
//! sees them; its refusals become the scope's audit events ([`Hook::DnsQuery`]).
//!
//! ```text
//! ScopeNames::start(engine, plan, cgroup)   attach the steering programs (once), start the
//!                                           resolver, point the scope's DNS map entry at it
//! engine.install(plan, cgroup, SCOPE_DNS)   (the caller) port 53 allowed from now on
//! names.regrant(plan)                       a live policy change: new grants, old answers gone
//! names.stop()                              after uninstall removed the entry and answers
//! ```
//!
//! The upstream servers are the system's (`/etc/resolv.conf`), or those `BEE_DNS_UPSTREAM`
//! names (`ADDR:PORT`, comma-separated).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use bee_common::event::{DNS_REFUSED_ADDRESS, DNS_REFUSED_ALIAS, DNS_REFUSED_NAME};
use bee_common::{ACCESS_NET, AuditEvent, Hook, NET_RULES_MAX, NetPortRule, NetValue};
use bee_common::{PROTO_TCP, PROTO_UDP};

use super::{AnswerMap, Engine, EngineError, boot_time_ns, dns_value};
use crate::dns::{
    Admitted, AnswerSink, NameDenial, NameDenialReason, NameGrants, PortGrant, ResolverConfig,
    ScopeResolver, is_host_address, special_class,
};
use crate::plan::{EnforcementPlan, NamePlan};

/// The environment variable that overrides the resolvers' upstream servers.
pub const UPSTREAM_ENV: &str = "BEE_DNS_UPSTREAM";

/// Refusals of the resolvers, by cgroup id, until the scope drains its events.
pub(crate) type Refusals = Arc<Mutex<HashMap<u64, Vec<AuditEvent>>>>;

/// `-EPERM`, as the kernel's denials carry it.
const EPERM: i32 = 1;

/// A plan's name grants as a resolver asks them; swapped whole by a live policy change.
struct Grants(RwLock<NamePlan>);

/// `plan`'s port grants for `name`.
fn grants_of(plan: &NamePlan, name: &str) -> Vec<PortGrant> {
    plan.ports_for(name)
        .iter()
        .map(|r| PortGrant {
            first: r.first,
            last: r.last,
            tcp: r.protocols & PROTO_TCP != 0,
            udp: r.protocols & PROTO_UDP != 0,
        })
        .collect()
}

impl NameGrants for Grants {
    fn ports_for(&self, name: &str) -> Vec<PortGrant> {
        grants_of(&self.0.read().unwrap_or_else(PoisonError::into_inner), name)
    }

    fn address_allows(&self, ip: IpAddr) -> bool {
        let plan = self.0.read().unwrap_or_else(PoisonError::into_inner);
        plan.address_granted(ip)
    }
}

/// Puts a resolver's answers into the kernel and its refusals into the audit queue.
struct KernelSink {
    cgroup_id: u64,
    answers: Arc<AnswerMap>,
    refusals: Refusals,
    /// The grants the resolver answers by: read again, and held, while an answer is written,
    /// so that a live policy change cannot fall between the resolver's check and the write.
    grants: Arc<Grants>,
    /// Answers admitted so far; every [`SWEEP_EVERY`] the expired ones are removed.
    admits: AtomicU64,
    /// This host's addresses ([`ResolverConfig::host_addresses`]).
    host: Vec<IpAddr>,
}

/// How many admitted answers between two sweeps of the expired ones (the answers map is
/// shared by every scope, so they must not pile up).
const SWEEP_EVERY: u64 = 256;

/// The port rules of `ports` as one answers-map value.
fn net_value(ports: &[PortGrant]) -> Result<NetValue, String> {
    let mut v = NetValue::default();
    for p in ports {
        let protocols = (if p.tcp { PROTO_TCP } else { 0 }) | (if p.udp { PROTO_UDP } else { 0 });
        let rule = NetPortRule {
            first: p.first,
            last: p.last,
            protocols,
            _pad: [0; 3],
        };
        let i = v.count as usize;
        let slot = v.rules.get_mut(i).ok_or_else(|| {
            format!("a name with more than {NET_RULES_MAX} port rules cannot be admitted")
        })?;
        *slot = rule;
        v.count += 1;
    }
    Ok(v)
}

impl AnswerSink for KernelSink {
    fn admit(&self, answers: &[Admitted]) -> Result<(), String> {
        // Held until every address is written: `ScopeNames::regrant` swaps the grants and
        // withdraws the old answers under the write lock, so an answer decided under the old
        // grants is either written before the withdrawal or refused here.
        let plan = self.grants.0.read().unwrap_or_else(PoisonError::into_inner);
        for a in answers {
            let ports = grants_of(&plan, &a.name);
            if ports.is_empty() {
                return Err(format!("the grant of {} was withdrawn", a.name));
            }
            // A special or host address got this far only because an address grant covers
            // it: that grant opens it, on its own ports; the name's ports must not widen it.
            if special_class(a.addr).is_some() || is_host_address(a.addr, &self.host) {
                continue;
            }
            let ports = net_value(&ports)?;
            if self
                .answers
                .admit(self.cgroup_id, a.addr, a.ttl, &ports)
                .is_err()
            {
                // The map may be full of expired answers: give their room back, once.
                self.answers.sweep(boot_time_ns());
                self.answers
                    .admit(self.cgroup_id, a.addr, a.ttl, &ports)
                    .map_err(|e| e.to_string())?;
            }
            if self.admits.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
                self.answers.sweep(boot_time_ns());
            }
        }
        Ok(())
    }

    fn denied(&self, denial: NameDenial) {
        let Some(event) = refusal_event(self.cgroup_id, &denial) else {
            return;
        };
        self.refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(self.cgroup_id)
            .or_default()
            .push(event);
    }
}

/// The audit event of a refusal ([`Hook::DnsQuery`] says how it is encoded); `None` for an
/// upstream failure, which refuses nothing the policy grants.
pub fn refusal_event(cgroup_id: u64, denial: &NameDenial) -> Option<AuditEvent> {
    let mut ev = AuditEvent::zeroed();
    ev.cgroup_id = cgroup_id;
    ev.hook = Hook::DnsQuery as u32;
    ev.error = -EPERM;
    ev.access = ACCESS_NET;
    let comm = b"bee-resolver";
    ev.comm[..comm.len()].copy_from_slice(comm);
    let text = match &denial.reason {
        NameDenialReason::NotGranted | NameDenialReason::InvalidName => {
            ev.port = DNS_REFUSED_NAME;
            denial.name.clone()
        }
        NameDenialReason::CnameNotGranted { target } => {
            ev.port = DNS_REFUSED_ALIAS;
            format!("{} -> {target}", denial.name)
        }
        NameDenialReason::SpecialAddress { addr, .. } => {
            ev.port = DNS_REFUSED_ADDRESS;
            crate::audit::set_event_addr(&mut ev, *addr);
            denial.name.clone()
        }
        _ => return None,
    };
    let bytes = text.as_bytes();
    let n = bytes.len().min(ev.path.len());
    ev.path[..n].copy_from_slice(&bytes[..n]);
    ev.path_len = n as u32;
    Some(ev)
}

/// The resolvers' configuration: the system's, with [`UPSTREAM_ENV`]'s servers if set.
///
/// # Errors
/// A message naming the entry of a malformed [`UPSTREAM_ENV`].
fn resolver_config() -> Result<ResolverConfig, String> {
    match std::env::var(UPSTREAM_ENV) {
        Ok(list) => {
            let upstream = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse::<SocketAddr>()
                        .map_err(|_| format!("{UPSTREAM_ENV}: `{s}` is not ADDR:PORT"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(ResolverConfig {
                host_addresses: host_addresses(),
                ..ResolverConfig::with_upstream(upstream)
            })
        }
        Err(_) => Ok(ResolverConfig {
            host_addresses: host_addresses(),
            ..ResolverConfig::system()
        }),
    }
}

/// The addresses of this host's interfaces and their IPv4 broadcast addresses
/// (`getifaddrs(3)`): an answer naming one is refused like a private one, unless an address
/// grant covers it (a broadcast answer would reach every host of the local network). Empty
/// if they cannot be read.
fn host_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list it allocates; it is only read below
    // and released once with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return out;
    }
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family says its real type.
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in>() };
                out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                    sin.sin_addr.s_addr,
                ))));
                let broadcast = ifa.ifa_flags & libc::IFF_BROADCAST as u32 != 0;
                if broadcast && !ifa.ifa_ifu.is_null() {
                    // SAFETY: with IFF_BROADCAST, ifa_ifu is the interface's broadcast
                    // address, of the same family as ifa_addr.
                    let b = unsafe { &*ifa.ifa_ifu.cast::<libc::sockaddr_in>() };
                    out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(b.sin_addr.s_addr))));
                }
            } else if family == libc::AF_INET6 {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let sin6 = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in6>() };
                out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// One scope's resolver and the grants it answers by.
pub(crate) struct ScopeNames {
    resolver: ScopeResolver,
    grants: Arc<Grants>,
    answers: Arc<AnswerMap>,
    cgroup_id: u64,
}

impl std::fmt::Debug for ScopeNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeNames")
            .field("cgroup_id", &self.cgroup_id)
            .field("port", &self.resolver.port())
            .finish_non_exhaustive()
    }
}

/// Why name grants could not be set up, for [`crate::scope::EnforceError`].
pub(super) fn explain(e: &EngineError) -> String {
    let text = e.to_string();
    if text.contains("Operation not permitted") || text.contains("EPERM") {
        format!(
            "{text}; name grants (`host` in net.allow) need CAP_NET_ADMIN besides CAP_BPF and \
             CAP_PERFMON: the kernel loads cgroup socket programs only with it"
        )
    } else {
        text
    }
}

impl ScopeNames {
    /// Attaches the steering programs of `engine` (once per engine), starts a resolver
    /// answering by `plan`'s name grants and writes scope `cgroup_id`'s DNS map entry. The
    /// caller then installs the plan with `SCOPE_DNS`.
    ///
    /// # Errors
    /// As [`ScopeNames::start`]; the steering programs (CAP_NET_ADMIN).
    pub(super) fn start_on(
        engine: &mut Engine,
        plan: &EnforcementPlan,
        cgroup_id: u64,
        refusals: &Refusals,
    ) -> Result<Self, String> {
        engine.enable_dns().map_err(|e| explain(&e))?;
        // One handle, shared by the resolver's writes and the scope's withdrawals.
        let answers = engine.answers().map_err(|e| e.to_string())?;
        Self::start(plan.names(), cgroup_id, answers, refusals, |value| {
            engine.set_dns(cgroup_id, value).map_err(|e| e.to_string())
        })
    }

    /// Starts a resolver for scope `cgroup_id` answering by `names`, its answers written to
    /// `answers` and its refusals to `refusals`, then `steer`s the scope's DNS to it (the DNS
    /// map entry of whichever object holds the steering programs).
    ///
    /// # Errors
    /// A message naming the step: the resolver's sockets, the upstream setting, `steer`'s.
    pub(crate) fn start(
        names: &NamePlan,
        cgroup_id: u64,
        answers: Arc<AnswerMap>,
        refusals: &Refusals,
        steer: impl FnOnce(bee_common::DnsValue) -> Result<(), String>,
    ) -> Result<Self, String> {
        let config = resolver_config()?;
        let grants = Arc::new(Grants(RwLock::new(names.clone())));
        let sink = Arc::new(KernelSink {
            cgroup_id,
            answers: Arc::clone(&answers),
            refusals: Arc::clone(refusals),
            grants: Arc::clone(&grants),
            admits: AtomicU64::new(0),
            host: config.host_addresses.clone(),
        });
        let resolver =
            ScopeResolver::start(config, Arc::clone(&grants) as Arc<dyn NameGrants>, sink)
                .map_err(|e| format!("starting the scope's resolver: {e}"))?;
        if let Err(e) = steer(dns_value(resolver.port(), resolver.v6())) {
            resolver.stop();
            return Err(e);
        }
        Ok(Self {
            resolver,
            grants,
            answers,
            cgroup_id,
        })
    }

    /// A live policy change: the resolver answers by `plan`'s grants from now on, and every
    /// answer given under the old ones is withdrawn (a name the new policy drops must not stay
    /// reachable by its old addresses); a query in flight is admitted only if its name is
    /// still granted (`KernelSink::admit`).
    pub(crate) fn regrant(&self, names: &NamePlan) {
        let mut grants = self
            .grants
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        *grants = names.clone();
        // Under the lock: an answer being written waits for it, then finds its grant gone.
        self.answers.forget_scope(self.cgroup_id);
        self.resolver.clear_cache();
    }

    /// Stops the resolver (its threads are joined), then removes what is left of its
    /// answers (the caller may have removed them from the map already).
    pub(crate) fn stop(self) {
        self.resolver.stop();
        self.answers.forget_scope(self.cgroup_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A granted name answered with the local network's broadcast address would reach every
    /// host on it: the resolver refuses it as one of this host's own addresses. `ip` lists
    /// each interface's broadcast address (`brd`); every one must be among them.
    #[test]
    fn the_interfaces_broadcast_addresses_count_as_this_hosts() {
        let out = std::process::Command::new("ip")
            .args(["-o", "-4", "addr", "show"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let broadcasts: Vec<IpAddr> = out
            .lines()
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                words.find(|w| *w == "brd")?;
                words.next()?.parse().ok()
            })
            .collect();
        assert!(
            !broadcasts.is_empty(),
            "no broadcast address in `ip` output: {out}"
        );
        let host = host_addresses();
        for b in broadcasts {
            assert!(host.contains(&b), "{b} is not among {host:?}");
        }
    }
}
