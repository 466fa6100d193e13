//! Audit records: what the kernel reported about a scope, in words and as JSON lines.
//!
//! Why one file of this length: it is one reading of a kernel event against the policy — which
//! grant was missing — and the record's JSON; the typed words are in `audit/decision.rs`.
//!
//! The kernel programs send a [`bee_common::AuditEvent`] for each denied access (and, with
//! `SCOPE_AUDIT_ALLOWS`, each allowed one). [`AuditRecord::from_event`] reads it against the
//! scope's [`CompiledPolicy`] to say which kind of grant was missing, or which rule was involved
//! (an inode pin that no longer matches, a read grant where a write was attempted), and
//! [`AuditRecord::explanation`] says it in one line:
//!
//! ```text
//! open /home/u/.ssh/id_rsa for read: no fs.read grant covers it
//! exec /usr/bin/git: the pinned inode no longer matches (exec.allow[0], line 7)
//! connect tcp 1.2.3.4:443: no net.allow rule covers it
//! resolve evil.example: no net.allow host rule names it (answered NXDOMAIN; the query never left the machine)
//! ```
//!
//! [`write_jsonl`] writes records one JSON object per line.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{SystemTime, UNIX_EPOCH};

use bee_common::event::{
    DNS_REFUSED_ADDRESS, DNS_REFUSED_ALIAS, EVENT_ALLOWED, EVENT_LEARNED, EVENT_NESTED,
    EVENT_PATH_TRUNCATED, EVENT_PATH_UNRESOLVED, EVENT_REPARENT,
};
use bee_common::{
    ACCESS_EXEC, ACCESS_EXEC_PINNED, ACCESS_NET, ACCESS_READ, ACCESS_UNIX, ACCESS_WRITE,
    AuditEvent, Hook, PROTO_TCP, PROTO_UDP,
};
use bee_core::CompiledPolicy;
use bee_core::compiled::{Origin, PathRule};
use bee_core::glob::PathPattern;
use bee_core::net::Protocol;
use serde::{Deserialize, Serialize};

mod decision;
pub use decision::{Access, Capability, GrantKind, HookName};

/// `AF_UNSPEC` (`include/linux/socket.h`).
const AF_UNSPEC: u16 = 0;
/// `AF_UNIX`.
const AF_UNIX: u16 = 1;
/// `AF_INET`.
const AF_INET: u16 = 2;
/// `AF_INET6`.
const AF_INET6: u16 = 10;

/// The kernel's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The access was allowed (reported only when the scope audits allows).
    Allow,
    /// The access was refused.
    Deny,
}

/// A rule of the policy named by a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleRef {
    /// Its key, e.g. `exec.allow[0]`.
    pub key: String,
    /// Its 1-based line in the policy file.
    pub line: u32,
    /// The rule as written.
    pub text: String,
}

impl From<&Origin> for RuleRef {
    fn from(o: &Origin) -> Self {
        Self {
            key: o.key.clone(),
            line: o.line,
            text: o.text.clone(),
        }
    }
}

/// Why an access was denied, as far as the policy tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// No rule of the `grant` kind covers the path or peer.
    NoGrant,
    /// The path is granted for read only, and a write was attempted.
    ReadOnly {
        /// The read rule that covers the path.
        rule: RuleRef,
    },
    /// A pinned executable's file is no longer the pinned inode.
    PinMismatch {
        /// The pinned rule.
        rule: RuleRef,
    },
    /// The kernel could not resolve the path, and denies unresolved paths.
    Unresolved,
    /// A carve-out (`fs.deny`, `exec.deny`) covers the path; a carve-out always wins.
    CarvedOut {
        /// The carve-out rule.
        rule: RuleRef,
    },
    /// The path is protected (`bee_core::protected`, `fs.protect`): write grants do not cover
    /// it unless `fs.unprotect` names it.
    Protected {
        /// The protected pattern (key `protected[N]` for the built-in set).
        rule: RuleRef,
    },
    /// A directory move between two places whose grants differ at some path below them.
    Reparent,
    /// An IP peer no address grant covers, in a scope with name grants: no live answer of
    /// the scope's resolver names it either (never resolved, or its TTL ran out).
    NoLiveAnswer,
    /// bee's resolver refused the query: no host rule names the name.
    NameNotGranted,
    /// bee's resolver refused the answer: it is an alias (CNAME) of a name no host rule names.
    AliasNotGranted {
        /// The alias target.
        target: String,
    },
    /// bee's resolver dropped an address from the answer: loopback, private, link-local,
    /// cloud metadata or another special range, and no address grant covers it (DNS
    /// rebinding).
    SpecialAddress,
    /// The operation is never granted inside a scope (`bpf(2)`, mounting, signalling or tracing
    /// processes outside the scope, abstract unix sockets, device nodes, listening IP sockets,
    /// netlink requests that change kernel state, perf events, `CLONE_INTO_CGROUP`).
    NeverGranted,
}

/// One audited access, ready for JSON and for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When bee received the event, RFC 3339 in UTC with milliseconds.
    pub time: String,
    /// The scope's cgroup id.
    pub scope: u64,
    /// The process id (the kernel's tgid).
    pub pid: u32,
    /// The thread id (the kernel's pid).
    pub tid: u32,
    /// The task's `comm` (at most 15 bytes, lossily decoded).
    pub comm: String,
    /// The LSM hook, e.g. `file_open` (`unknown:N` for an id this build does not know).
    pub hook: HookName,
    /// The decision.
    pub verdict: Verdict,
    /// Learn mode (`bee exec --learn`, `bee run --learn`): the policy denied this access
    /// (`verdict` is `deny`, `reason` says why) and learn mode allowed it. Absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub learn: bool,
    /// The positive errno returned to the process (`EACCES` 13, `EPERM` 1); absent if allowed
    /// (learned accesses included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    /// The attempted access: `read`, `write`, `exec`, `unix`, `net`.
    pub access: Vec<Access>,
    /// The path (file, executable or unix socket), lossily decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// True when the kernel cut the path to fit the event.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub path_truncated: bool,
    /// The transport for IP socket hooks ([`Protocol`], the policy's own), written `tcp` or
    /// `udp`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proto: Option<Protocol>,
    /// The peer address for IP socket hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<IpAddr>,
    /// The peer port for IP socket hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The capability for `capable`, written by its name in
    /// `include/uapi/linux/capability.h` (`CAP_SYS_ADMIN`), or `CAP_<number>` for one this
    /// build does not know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<Capability>,
    /// For `seccomp` (the Landlock engine's seccomp filter): the refused system call with the
    /// argument that decided, `socket(AF_UNIX, SOCK_STREAM)`, `unshare(CLONE_NEWUSER)`,
    /// `ioctl(TIOCSTI)`, `mount()`. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    /// The kind of grant that would allow the access: `fs.read`, `fs.write`, `exec.allow`,
    /// `net.allow` or `net.unix`; absent for operations no grant allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantKind>,
    /// Why it was denied; absent if allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// The policy file of the scope.
    pub policy: String,
    /// The refusal was logged by a Landlock sandbox the scope's program made for itself,
    /// nested in bee's (`bee_common::event::EVENT_NESTED`): bee's policy may or may not
    /// refuse the access too. Absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nested: bool,
}

/// What a hook does, for the explanation.
fn verb(hook: Hook) -> &'static str {
    match hook {
        Hook::FileOpen => "open",
        Hook::BprmCheckSecurity => "exec",
        Hook::MmapFile => "map executable",
        Hook::FileMprotect => "make executable",
        Hook::PathUnlink => "unlink",
        Hook::PathRmdir => "rmdir",
        Hook::PathMkdir => "mkdir",
        Hook::PathMknod => "create",
        Hook::PathRename => "rename",
        Hook::PathLink => "link",
        Hook::PathSymlink => "symlink",
        Hook::PathTruncate | Hook::FileTruncate => "truncate",
        Hook::PathChmod => "chmod",
        Hook::PathChown => "chown",
        Hook::SocketConnect | Hook::UnixStreamConnect => "connect",
        Hook::SocketSendmsg | Hook::UnixMaySend => "send",
        Hook::Bpf => "bpf()",
        Hook::PtraceAccessCheck => "ptrace",
        Hook::TaskKill => "signal",
        Hook::SbMount => "mount",
        Hook::PathNotify => "watch",
        Hook::TaskAlloc => "clone into another cgroup",
        Hook::NetlinkSend => "send a netlink request",
        Hook::SocketListen => "listen on a socket",
        Hook::SocketBind => "bind",
        Hook::SocketAccept => "accept on a socket",
        Hook::PerfEventOpen => "perf_event_open()",
        Hook::InodeSetattr => "set the attributes of",
        Hook::InodeSetxattr => "set an extended attribute of",
        Hook::InodeRemovexattr => "remove an extended attribute of",
        Hook::SocketCreate => "create a socket",
        Hook::UsernsCreate => "create a user namespace",
        Hook::FileIoctl => "ioctl",
        Hook::Capable => "use",
        Hook::Syslog => "use the kernel log",
        Hook::KeyPermission => "use a key or keyring",
        Hook::IpcPermission => "use a SysV IPC object of another scope or of no scope",
        Hook::TaskSetscheduler => "change the scheduling of a process outside the scope",
        Hook::TaskSetrlimit => "change the resource limits of a process outside the scope",
        Hook::UringOverrideCreds => "run an io_uring request under a registered personality",
        Hook::DnsQuery => "resolve",
        // The refused call itself says what was attempted (`AuditRecord::syscall`).
        Hook::Seccomp => "",
    }
}

fn access_names(access: u32) -> Vec<Access> {
    [
        (ACCESS_READ, Access::Read),
        (ACCESS_WRITE, Access::Write),
        (ACCESS_EXEC | ACCESS_EXEC_PINNED, Access::Exec),
        (ACCESS_UNIX, Access::Unix),
        (ACCESS_NET, Access::Net),
    ]
    .iter()
    .filter(|(bit, _)| access & bit != 0)
    .map(|(_, a)| *a)
    .collect()
}

fn cstr_lossy(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(bytes.get(..end).unwrap_or(bytes)).into_owned()
}

/// The address of an event that carries one: its first 4 bytes for `AF_INET`, all 16 else.
fn event_addr(event: &AuditEvent) -> IpAddr {
    if event.family == AF_INET {
        let mut v4 = [0u8; 4];
        v4.copy_from_slice(event.addr.get(..4).unwrap_or(&[0; 4]));
        IpAddr::V4(Ipv4Addr::from(v4))
    } else {
        IpAddr::V6(Ipv6Addr::from(event.addr))
    }
}

/// Writes `addr` into an event as the kernel programs do: the family, and the first 4 bytes
/// for `AF_INET` or all 16 for `AF_INET6` (the inverse of [`event_addr`]).
pub(crate) fn set_event_addr(event: &mut AuditEvent, addr: IpAddr) {
    match addr {
        IpAddr::V4(a) => {
            event.family = AF_INET;
            event.addr = [0; 16];
            event.addr[..4].copy_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            event.family = AF_INET6;
            event.addr = a.octets();
        }
    }
}

/// Hooks whose denials no policy can lift: what they guard is never allowed inside a scope.
fn never_granted(hook: Hook) -> bool {
    matches!(
        hook,
        Hook::Bpf
            | Hook::PtraceAccessCheck
            | Hook::TaskKill
            | Hook::SbMount
            | Hook::TaskAlloc
            | Hook::NetlinkSend
            | Hook::SocketListen
            | Hook::SocketAccept
            | Hook::PerfEventOpen
            | Hook::SocketCreate
            | Hook::UsernsCreate
            | Hook::Capable
            | Hook::Syslog
            | Hook::KeyPermission
            | Hook::IpcPermission
            | Hook::TaskSetscheduler
            | Hook::TaskSetrlimit
            | Hook::UringOverrideCreds
            | Hook::SocketBind
    )
}

/// The grant kind a hook's access needs, for path hooks.
fn path_grant(hook: Hook, access: u32) -> Option<GrantKind> {
    match hook {
        Hook::BprmCheckSecurity | Hook::MmapFile | Hook::FileMprotect => Some(GrantKind::Exec),
        Hook::UnixStreamConnect | Hook::UnixMaySend => Some(GrantKind::NetUnix),
        _ if never_granted(hook) => None,
        // A device node, a set-user-ID mode or a denied ioctl: reported with no access,
        // never granted.
        Hook::PathMknod | Hook::PathChmod | Hook::FileIoctl if access == 0 => None,
        Hook::SocketConnect | Hook::SocketSendmsg => None,
        Hook::FileOpen | Hook::PathNotify if access & ACCESS_WRITE == 0 => Some(GrantKind::FsRead),
        _ => Some(GrantKind::FsWrite),
    }
}

impl AuditRecord {
    /// Reads `event` against the scope's `policy`; `time` is when bee received it.
    pub fn from_event(event: &AuditEvent, policy: &CompiledPolicy, time: SystemTime) -> Self {
        let hook = Hook::from_raw(event.hook);
        let allowed = event.flags & EVENT_ALLOWED != 0;
        let learn = !allowed && event.flags & EVENT_LEARNED != 0;
        let mut record = Self {
            time: rfc3339(time),
            scope: event.cgroup_id,
            pid: event.tgid,
            tid: event.pid,
            comm: cstr_lossy(&event.comm),
            hook: HookName::from_raw(event.hook),
            verdict: if allowed {
                Verdict::Allow
            } else {
                Verdict::Deny
            },
            learn,
            errno: (!allowed && !learn).then_some(event.error.saturating_neg()),
            access: access_names(event.access),
            path: None,
            path_truncated: event.flags & EVENT_PATH_TRUNCATED != 0,
            proto: None,
            addr: None,
            port: None,
            capability: (hook == Some(Hook::Capable)).then_some(Capability::Number(event.port)),
            syscall: None,
            grant: None,
            reason: None,
            policy: policy.source.clone(),
            nested: event.flags & EVENT_NESTED != 0,
        };
        let Some(hook) = hook else {
            return record;
        };
        if hook == Hook::DnsQuery {
            record.dns_refusal(event);
            return record;
        }
        if hook == Hook::Seccomp {
            record.seccomp_refusal(event);
            return record;
        }
        let ip_hook = matches!(
            hook,
            Hook::SocketConnect | Hook::SocketSendmsg | Hook::SocketBind
        );
        // The Landlock engine's record of the unspecified address (0.0.0.0 or ::), which the
        // kernel's audit record leaves out: `AF_UNSPEC` with the transport and the port.
        let unspecified = event.family == AF_UNSPEC
            && event.port != 0
            && matches!(event.protocol, PROTO_TCP | PROTO_UDP);
        let is_ip = ip_hook && (matches!(event.family, AF_INET | AF_INET6) || unspecified);
        if is_ip {
            record.proto = match event.protocol {
                PROTO_TCP => Some(Protocol::Tcp),
                PROTO_UDP => Some(Protocol::Udp),
                _ => None,
            };
            record.addr = (!unspecified).then(|| event_addr(event));
            record.port = Some(event.port);
            // A port of the scope's own is never granted; a peer is what net.allow names.
            record.grant = (hook != Hook::SocketBind).then_some(GrantKind::Net);
        } else if event.path_len > 0 {
            record.path = Some(String::from_utf8_lossy(event.path()).into_owned());
            record.grant = match hook {
                Hook::SocketConnect | Hook::SocketSendmsg if event.family == AF_UNIX => {
                    Some(GrantKind::NetUnix)
                }
                _ => path_grant(hook, event.access),
            };
        } else if event.family == AF_UNIX {
            // An abstract (or unnamed) unix socket: it has no path, and none is ever granted.
            record.grant = Some(GrantKind::NetUnix);
        } else {
            record.grant = path_grant(hook, event.access);
        }
        if !allowed {
            let reason = record.reason_for(hook, event, policy);
            record.reason = Some(match reason {
                Reason::NoGrant if is_ip && !policy.net.hosts.is_empty() => Reason::NoLiveAnswer,
                other => other,
            });
        }
        record
    }

    /// Fills in a refusal of bee's resolver ([`Hook::DnsQuery`]; its encoding is described
    /// there).
    fn dns_refusal(&mut self, event: &AuditEvent) {
        let text = String::from_utf8_lossy(event.path()).into_owned();
        self.grant = Some(GrantKind::Net);
        self.proto = None;
        let reason = match event.port {
            DNS_REFUSED_ALIAS => {
                let (name, target) = text.split_once(" -> ").unwrap_or((&text, ""));
                let target = target.to_owned();
                self.path = Some(name.to_owned());
                Reason::AliasNotGranted { target }
            }
            DNS_REFUSED_ADDRESS => {
                self.path = Some(text);
                self.addr = Some(event_addr(event));
                Reason::SpecialAddress
            }
            _ => {
                self.path = Some(text);
                Reason::NameNotGranted
            }
        };
        if event.flags & EVENT_ALLOWED == 0 {
            self.reason = Some(reason);
        }
    }

    /// Fills in a refusal of the Landlock engine's seccomp filter ([`Hook::Seccomp`]; its
    /// encoding is described there): a TCP or UDP socket lacks a `net.allow` rule of its
    /// transport; nothing else it refuses is granted by any policy.
    fn seccomp_refusal(&mut self, event: &AuditEvent) {
        self.syscall = Some(String::from_utf8_lossy(event.path()).into_owned());
        self.path_truncated = false;
        let grantable = event.access & ACCESS_NET != 0;
        if grantable {
            self.grant = Some(GrantKind::Net);
            self.proto = match event.protocol {
                PROTO_TCP => Some(Protocol::Tcp),
                PROTO_UDP => Some(Protocol::Udp),
                _ => None,
            };
        }
        if event.flags & EVENT_ALLOWED == 0 {
            self.reason = Some(if grantable {
                Reason::NoGrant
            } else {
                Reason::NeverGranted
            });
        }
    }

    fn reason_for(&self, hook: Hook, event: &AuditEvent, policy: &CompiledPolicy) -> Reason {
        // A device node or an ioctl such as TIOCSTI (reported with no access): never allowed.
        if never_granted(hook)
            || (matches!(
                hook,
                Hook::PathMknod
                    | Hook::PathChmod
                    | Hook::FileIoctl
                    | Hook::PathUnlink
                    | Hook::PathRename
            ) && event.access == 0)
        {
            return Reason::NeverGranted;
        }
        if event.flags & EVENT_PATH_UNRESOLVED != 0 {
            return Reason::Unresolved;
        }
        if event.flags & EVENT_REPARENT != 0 {
            return Reason::Reparent;
        }
        if event.family == AF_UNIX && self.path.is_none() {
            return Reason::NeverGranted;
        }
        let Some(path) = self.path.as_deref().filter(|_| !self.path_truncated) else {
            return Reason::NoGrant;
        };
        if let Some(r) = first_match(&policy.fs.deny, path) {
            return Reason::CarvedOut {
                rule: (&r.origin).into(),
            };
        }
        if self.grant == Some(GrantKind::FsWrite)
            && first_match(&policy.fs.write, path).is_some()
            && first_match(&policy.fs.unprotect, path).is_none()
        {
            if let Some(r) = first_match(&policy.fs.protect, path) {
                return Reason::Protected {
                    rule: (&r.origin).into(),
                };
            }
        }
        match self.grant {
            Some(GrantKind::Exec) if first_match(&policy.exec_deny, path).is_some() => {
                first_match(&policy.exec_deny, path).map_or(Reason::NoGrant, |r| {
                    Reason::CarvedOut {
                        rule: (&r.origin).into(),
                    }
                })
            }
            Some(GrantKind::Exec) => policy
                .exec
                .iter()
                .find(|r| {
                    r.pin.is_some()
                        && matches!(&r.pattern, PathPattern::Exact { path: p } if p == path)
                })
                .map_or(Reason::NoGrant, |r| Reason::PinMismatch {
                    rule: (&r.origin).into(),
                }),
            Some(GrantKind::FsWrite) => {
                first_match(&policy.fs.read, path).map_or(Reason::NoGrant, |r| Reason::ReadOnly {
                    rule: (&r.origin).into(),
                })
            }
            _ => Reason::NoGrant,
        }
    }

    /// The object of the access as people write it: the path, `tcp 1.2.3.4:443`, or empty.
    fn object(&self) -> String {
        if self.hook == Hook::DnsQuery {
            return self.path.clone().unwrap_or_default();
        }
        if let Some(call) = &self.syscall {
            return call.clone();
        }
        if let (Some(addr), Some(port)) = (self.addr, self.port) {
            let proto = self
                .proto
                .map_or_else(|| "ip".to_owned(), |p| p.to_string());
            return match addr {
                IpAddr::V4(a) => format!("{proto} {a}:{port}"),
                IpAddr::V6(a) => format!("{proto} [{a}]:{port}"),
            };
        }
        if let (None, Some(port), Some(proto)) = (self.addr, self.port, self.proto) {
            // The unspecified address, of a family the kernel's record does not say.
            return format!("{proto} 0.0.0.0:{port} or [::]:{port}");
        }
        if let Some(cap) = &self.capability {
            return cap.to_string();
        }
        match &self.path {
            Some(p) if self.path_truncated => format!("{p}…"),
            Some(p) => p.clone(),
            None if self.grant == Some(GrantKind::NetUnix) => "an abstract unix socket".to_owned(),
            None => String::new(),
        }
    }

    /// The policy key of [`AuditRecord::grant`] (`fs.read`, …), for readers that compare
    /// text (JSON, tests).
    #[must_use]
    pub fn grant_key(&self) -> Option<&'static str> {
        self.grant.map(GrantKind::as_str)
    }

    /// One line for people: what was attempted, and why it was (not) allowed.
    pub fn explanation(&self) -> String {
        let hook = self.hook.known();
        let mut what = match hook {
            Some(h) => verb(h).to_owned(),
            None => self.hook.to_string(),
        };
        let object = self.object();
        if !object.is_empty() {
            if !what.is_empty() {
                what.push(' ');
            }
            what.push_str(&object);
        }
        if hook == Some(Hook::FileOpen) {
            let mode = match (
                self.access.contains(&Access::Read),
                self.access.contains(&Access::Write),
            ) {
                (true, true) => " for read and write",
                (false, true) => " for write",
                _ => " for read",
            };
            what.push_str(mode);
        }
        let grant = self.grant.map_or("matching", GrantKind::as_str);
        let rule_word = if grant.starts_with("fs.") {
            "grant"
        } else {
            "rule"
        };
        let why = match &self.reason {
            None => "allowed".to_owned(),
            Some(Reason::NoGrant) => format!("no {grant} {rule_word} covers it"),
            Some(Reason::ReadOnly { rule }) => format!(
                "{} (line {}) grants read only, and no fs.write grant covers it",
                rule.key, rule.line
            ),
            Some(Reason::PinMismatch { rule }) => format!(
                "the pinned inode no longer matches ({}, line {})",
                rule.key, rule.line
            ),
            Some(Reason::Unresolved) => {
                "the kernel could not resolve the path, and unresolved paths are denied".to_owned()
            }
            Some(Reason::NeverGranted) => "never allowed inside a scope".to_owned(),
            Some(Reason::CarvedOut { rule }) => format!(
                "{} (line {}) `{}` carves it out, and a carve-out always wins",
                rule.key, rule.line, rule.text
            ),
            Some(Reason::Protected { rule }) => format!(
                "it is a protected path (`{}`, {}): write grants never cover it unless fs.unprotect names it",
                rule.text, rule.key
            ),
            Some(Reason::NoLiveAnswer) => format!(
                "no {grant} rule covers it, and no live answer for a granted name names it (resolve the name first; answers last their TTL)"
            ),
            Some(Reason::NameNotGranted) => "no net.allow host rule names it (answered NXDOMAIN; the query never left the machine)".to_owned(),
            Some(Reason::AliasNotGranted { target }) => format!(
                "its answer is an alias of `{target}`, which no net.allow host rule names (answered NXDOMAIN)"
            ),
            Some(Reason::SpecialAddress) => format!(
                "it answered {}, a loopback, private, link-local or metadata address that no net.allow addr grant covers, so the address was left out",
                self.addr.map_or_else(String::new, |a| a.to_string())
            ),
            Some(Reason::Reparent) => "a directory moves only between places granted alike at every path below, and these two are not (a carve-out or a different grant)".to_owned(),
        };
        if self.learn {
            format!("{what}: {why} (allowed: learn mode)")
        } else if self.nested {
            format!("{what}: {why} (refused by the program's own nested Landlock sandbox)")
        } else {
            format!("{what}: {why}")
        }
    }
}

/// One line for people saying that a report may miss denials: `count` of the kernel's audit
/// records (of any scope) were lost while the scope lived (its `ScopeReport::lost_records`).
#[must_use]
pub fn lost_records_explanation(count: u64) -> String {
    let records = if count == 1 { "record" } else { "records" };
    format!(
        "some denials may be missing: the kernel dropped {count} audit {records} while this scope ran (its audit queue, bee's socket or a ring buffer of bee's programs was full)"
    )
}

fn first_match<'a>(rules: &'a [PathRule], path: &str) -> Option<&'a PathRule> {
    rules.iter().find(|r| r.pattern.matches(path))
}

/// Writes `record` as one line of JSON (JSON Lines: one object, then `\n`).
///
/// # Errors
/// The writer's error, or a serialisation error as [`io::Error`].
pub fn write_jsonl<W: Write + ?Sized>(out: &mut W, record: &AuditRecord) -> io::Result<()> {
    serde_json::to_writer(&mut *out, record).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

/// `time` as RFC 3339 in UTC with milliseconds, e.g. `2026-11-30T06:05:01.123Z`. Times before
/// 1970 print as the epoch.
pub fn rfc3339(time: SystemTime) -> String {
    let d = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms", `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests;
