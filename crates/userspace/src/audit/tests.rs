use std::time::{Duration, UNIX_EPOCH};

use bee_common::PATH_MAX;
use bee_core::compile::{CompileOptions, compile_str};

use super::*;

const POLICY: &str = r#"version = 1
[fs]
read = ["/home/u/src/**"]
write = ["/tmp/**"]

[exec]
allow = [
  "!/bin/sh",
  "/opt/tools/*",
]

[net]
unix = ["/run/bee.sock"]

[[net.allow]]
addr = "127.0.0.1"
ports = 8080
proto = "tcp"
"#;

fn policy() -> CompiledPolicy {
    let options = CompileOptions {
        base: "/home/u/src".into(),
        home: Some("/home/u".into()),
    };
    match compile_str("policy.toml", POLICY, &options) {
        Ok(c) => c.policy,
        Err(e) => unreachable!("{e:?}"),
    }
}

fn event(hook: Hook, access: u32, path: &str) -> AuditEvent {
    let mut e = AuditEvent::zeroed();
    e.cgroup_id = 4242;
    e.pid = 101;
    e.tgid = 100;
    e.hook = hook as u32;
    e.error = -13;
    e.access = access;
    e.comm[..4].copy_from_slice(b"cat\0");
    e.path[..path.len()].copy_from_slice(path.as_bytes());
    e.path_len = path.len() as u32;
    e
}

fn net_event(hook: Hook, family: u16, addr: &[u8], port: u16, proto: u8) -> AuditEvent {
    let mut e = event(hook, ACCESS_NET, "");
    e.family = family;
    e.addr[..addr.len()].copy_from_slice(addr);
    e.port = port;
    e.protocol = proto;
    e
}

fn record(e: &AuditEvent) -> AuditRecord {
    AuditRecord::from_event(
        e,
        &policy(),
        UNIX_EPOCH + Duration::from_millis(1_764_483_901_123),
    )
}

#[test]
fn open_for_read_names_the_missing_read_grant() {
    let r = record(&event(Hook::FileOpen, ACCESS_READ, "/home/u/.ssh/id_rsa"));
    assert_eq!(r.verdict, Verdict::Deny);
    assert_eq!(r.errno, Some(13));
    assert_eq!(r.grant_key(), Some("fs.read"));
    assert_eq!(r.reason, Some(Reason::NoGrant));
    assert_eq!(r.comm, "cat");
    assert_eq!((r.pid, r.tid, r.scope), (100, 101, 4242));
    assert_eq!(r.policy, "policy.toml");
    assert_eq!(
        r.explanation(),
        "open /home/u/.ssh/id_rsa for read: no fs.read grant covers it"
    );
}

#[test]
fn write_under_a_read_grant_names_the_read_rule() {
    let r = record(&event(
        Hook::FileOpen,
        ACCESS_READ | ACCESS_WRITE,
        "/home/u/src/main.rs",
    ));
    assert_eq!(r.grant_key(), Some("fs.write"));
    assert!(matches!(&r.reason, Some(Reason::ReadOnly { rule }) if rule.key == "fs.read[0]"));
    assert_eq!(
        r.explanation(),
        "open /home/u/src/main.rs for read and write: fs.read[0] (line 3) grants read only, and \
         no fs.write grant covers it"
    );
    let r = record(&event(Hook::PathUnlink, ACCESS_WRITE, "/etc/passwd"));
    assert_eq!(
        r.explanation(),
        "unlink /etc/passwd: no fs.write grant covers it"
    );
}

#[test]
fn exec_without_rule_and_with_a_stale_pin() {
    let r = record(&event(Hook::BprmCheckSecurity, ACCESS_EXEC, "/tmp/x"));
    assert_eq!(r.explanation(), "exec /tmp/x: no exec.allow rule covers it");

    let p = policy();
    let pinned = p.exec.iter().find(|r| r.pin.is_some());
    let Some(PathPattern::Exact { path }) = pinned.map(|r| &r.pattern) else {
        unreachable!("the policy pins /bin/sh")
    };
    let r = record(&event(Hook::BprmCheckSecurity, ACCESS_EXEC, path));
    assert!(matches!(r.reason, Some(Reason::PinMismatch { .. })));
    let key = pinned.map(|r| r.origin.key.clone()).unwrap_or_default();
    assert_eq!(
        r.explanation(),
        format!("exec {path}: the pinned inode no longer matches ({key}, line 8)")
    );
}

#[test]
fn ip_connects_and_sends() {
    let r = record(&net_event(
        Hook::SocketConnect,
        AF_INET,
        &[1, 2, 3, 4],
        443,
        PROTO_TCP,
    ));
    assert_eq!(r.addr, Some(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4))));
    assert_eq!((r.port, r.proto), (Some(443), Some(Protocol::Tcp)));
    assert_eq!(r.path, None);
    assert_eq!(
        r.explanation(),
        "connect tcp 1.2.3.4:443: no net.allow rule covers it"
    );
    let mut v6 = [0u8; 16];
    v6[15] = 1;
    let r = record(&net_event(
        Hook::SocketSendmsg,
        AF_INET6,
        &v6,
        53,
        PROTO_UDP,
    ));
    assert_eq!(
        r.explanation(),
        "send udp [::1]:53: no net.allow rule covers it"
    );
}

#[test]
fn unix_sockets_need_net_unix() {
    for hook in [Hook::UnixStreamConnect, Hook::UnixMaySend] {
        let r = record(&event(hook, ACCESS_UNIX, "/run/docker.sock"));
        assert_eq!(r.grant_key(), Some("net.unix"), "{hook:?}");
    }
    let mut e = event(Hook::SocketConnect, ACCESS_UNIX, "/run/docker.sock");
    e.family = AF_UNIX;
    let r = record(&e);
    assert_eq!(
        r.explanation(),
        "connect /run/docker.sock: no net.unix rule covers it"
    );
}

#[test]
fn abstract_unix_sockets_are_never_granted() {
    let mut e = event(Hook::SocketConnect, ACCESS_UNIX, "");
    e.family = AF_UNIX;
    let r = record(&e);
    assert_eq!(r.reason, Some(Reason::NeverGranted));
    assert_eq!(
        r.explanation(),
        "connect an abstract unix socket: never allowed inside a scope"
    );
}

/// Hooks that guard what no policy grants.
const NEVER: [Hook; 19] = [
    Hook::Bpf,
    Hook::PtraceAccessCheck,
    Hook::TaskKill,
    Hook::SbMount,
    Hook::TaskAlloc,
    Hook::NetlinkSend,
    Hook::SocketListen,
    Hook::SocketAccept,
    Hook::PerfEventOpen,
    Hook::SocketCreate,
    Hook::UsernsCreate,
    Hook::Capable,
    Hook::Syslog,
    Hook::KeyPermission,
    Hook::IpcPermission,
    Hook::TaskSetscheduler,
    Hook::TaskSetrlimit,
    Hook::UringOverrideCreds,
    Hook::SocketBind,
];

#[test]
fn every_hook_explains_itself() {
    // The resolver's refusals are explained by `resolver_refusals_name_the_name_and_why`, the
    // seccomp filter's by `seccomp_refusals_name_the_call_and_why`.
    for hook in Hook::ALL
        .into_iter()
        .filter(|h| !matches!(h, Hook::DnsQuery | Hook::Seccomp))
    {
        let never = NEVER.contains(&hook);
        let (access, path) = match hook {
            Hook::FileOpen | Hook::PathNotify => (ACCESS_READ, "/secret"),
            Hook::BprmCheckSecurity | Hook::MmapFile | Hook::FileMprotect => {
                (ACCESS_EXEC, "/tmp/x")
            }
            Hook::UnixStreamConnect | Hook::UnixMaySend => (ACCESS_UNIX, "/run/s"),
            Hook::SocketConnect | Hook::SocketSendmsg => (ACCESS_NET, ""),
            _ if never => (0, ""),
            _ => (ACCESS_WRITE, "/etc/x"),
        };
        let mut e = event(hook, access, path);
        if access == ACCESS_NET {
            e.family = AF_INET;
            e.addr[..4].copy_from_slice(&[10, 0, 0, 1]);
            e.port = 22;
            e.protocol = PROTO_TCP;
        }
        let r = record(&e);
        assert_eq!(r.hook, hook.name());
        let text = r.explanation();
        let expected = match hook {
            _ if never => "never allowed inside a scope".to_owned(),
            _ => format!(
                "no {} {} covers it",
                r.grant_key().unwrap_or("?"),
                if r.grant_key().is_some_and(|g| g.starts_with("fs.")) {
                    "grant"
                } else {
                    "rule"
                }
            ),
        };
        assert!(text.ends_with(&expected), "{hook:?}: {text}");
        assert!(!text.starts_with(':'), "{hook:?}: {text}");
        let want_grant = match hook {
            Hook::FileOpen | Hook::PathNotify => Some("fs.read"),
            Hook::BprmCheckSecurity | Hook::MmapFile | Hook::FileMprotect => Some("exec.allow"),
            Hook::UnixStreamConnect | Hook::UnixMaySend => Some("net.unix"),
            Hook::SocketConnect | Hook::SocketSendmsg => Some("net.allow"),
            _ if never => None,
            _ => Some("fs.write"),
        };
        assert_eq!(r.grant_key(), want_grant, "{hook:?}");
    }
}

#[test]
fn a_device_node_is_never_granted_even_where_writes_are() {
    // path_mknod reports a character or block device with access 0.
    let r = record(&event(Hook::PathMknod, 0, "/home/u/src/kmsg"));
    assert_eq!(r.reason, Some(Reason::NeverGranted));
    assert_eq!(r.grant, None);
    assert_eq!(
        r.explanation(),
        "create /home/u/src/kmsg: never allowed inside a scope"
    );
    // An ioctl such as TIOCSTI is reported likewise, without a path.
    let r = record(&event(Hook::FileIoctl, 0, ""));
    assert_eq!(r.reason, Some(Reason::NeverGranted));
    assert_eq!(r.explanation(), "ioctl: never allowed inside a scope");
}

#[test]
fn a_capability_is_named() {
    let mut e = event(Hook::Capable, 0, "");
    e.port = 21;
    let r = record(&e);
    assert_eq!(
        r.capability.as_ref().map(ToString::to_string).as_deref(),
        Some("CAP_SYS_ADMIN")
    );
    assert_eq!(r.reason, Some(Reason::NeverGranted));
    assert_eq!(
        r.explanation(),
        "use CAP_SYS_ADMIN: never allowed inside a scope"
    );
    e.port = 63;
    assert_eq!(
        record(&e)
            .capability
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("CAP_63")
    );
    // Other hooks carry no capability.
    assert_eq!(record(&event(Hook::Syslog, 0, "")).capability, None);
}

#[test]
fn allowed_unresolved_truncated_and_unknown_events() {
    let mut e = event(Hook::FileOpen, ACCESS_READ, "/home/u/src/a");
    e.flags = EVENT_ALLOWED;
    e.error = 0;
    let r = record(&e);
    assert_eq!(
        (r.verdict, r.errno, &r.reason),
        (Verdict::Allow, None, &None)
    );
    assert_eq!(r.explanation(), "open /home/u/src/a for read: allowed");

    let mut e = event(Hook::FileOpen, ACCESS_READ, "");
    e.flags = EVENT_PATH_UNRESOLVED;
    assert_eq!(record(&e).reason, Some(Reason::Unresolved));

    let long = "/a".repeat(PATH_MAX / 2);
    let mut e = event(Hook::FileOpen, ACCESS_READ, &long[..PATH_MAX]);
    e.flags = EVENT_PATH_TRUNCATED;
    let r = record(&e);
    assert!(r.path_truncated);
    assert!(r.explanation().contains("… for read: no fs.read grant"));

    let mut e = event(Hook::FileOpen, ACCESS_READ, "/x");
    e.hook = 999;
    let r = record(&e);
    assert_eq!(r.hook, "unknown:999");
    assert_eq!(r.grant, None);
}

#[test]
fn jsonl_is_one_object_per_line_and_round_trips() {
    let a = record(&event(Hook::FileOpen, ACCESS_READ, "/home/u/.ssh/id_rsa"));
    let b = record(&net_event(
        Hook::SocketConnect,
        AF_INET,
        &[1, 2, 3, 4],
        443,
        PROTO_TCP,
    ));
    let mut out = Vec::new();
    for r in [&a, &b] {
        if let Err(e) = write_jsonl(&mut out, r) {
            unreachable!("{e}");
        }
    }
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(text.ends_with('\n'));
    let back: AuditRecord = match serde_json::from_str(lines[0]) {
        Ok(r) => r,
        Err(e) => unreachable!("{e}"),
    };
    assert_eq!(back, a);
    let v: serde_json::Value = serde_json::from_str(lines[1]).unwrap_or_default();
    assert_eq!(v["addr"], "1.2.3.4");
    assert_eq!(v["port"], 443);
    assert_eq!(v["hook"], "socket_connect");
    assert_eq!(v["verdict"], "deny");
    assert_eq!(v["reason"]["kind"], "no_grant");
    assert_eq!(v["time"], "2025-11-30T06:25:01.123Z");
    assert!(v.get("path").is_none());
}

#[test]
fn rfc3339_dates() {
    assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
    assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    let y2038 = UNIX_EPOCH + Duration::from_secs(2_147_483_647);
    assert_eq!(rfc3339(y2038), "2038-01-19T03:14:07.000Z");
}

#[test]
fn a_learned_denial_is_stamped_and_carries_no_errno() {
    let mut e = event(Hook::FileOpen, ACCESS_READ, "/home/u/.ssh/id_rsa");
    e.error = -1;
    e.flags |= bee_common::event::EVENT_LEARNED;
    let r = record(&e);
    assert!(r.learn);
    assert_eq!(r.verdict, Verdict::Deny);
    assert_eq!(r.errno, None);
    assert_eq!(r.reason, Some(Reason::NoGrant));
    assert_eq!(
        r.explanation(),
        "open /home/u/.ssh/id_rsa for read: no fs.read grant covers it (allowed: learn mode)"
    );
    let mut json = Vec::new();
    assert!(write_jsonl(&mut json, &r).is_ok());
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap_or_default();
    assert_eq!(v["learn"], true);
    assert!(v.get("errno").is_none());
    // Not learned: no stamp at all.
    let r = record(&event(Hook::FileOpen, ACCESS_READ, "/etc/x"));
    assert!(!r.learn);
    let mut json = Vec::new();
    assert!(write_jsonl(&mut json, &r).is_ok());
    assert!(!String::from_utf8_lossy(&json).contains("learn"));
}

/// A refusal of the Landlock engine's seccomp filter, encoded as [`Hook::Seccomp`] says.
fn seccomp_event(call: &str, udp: bool) -> AuditEvent {
    let mut e = event(Hook::Seccomp, if udp { ACCESS_NET } else { 0 }, call);
    e.error = -1;
    e.comm[..5].copy_from_slice(b"perl\0");
    if udp {
        e.protocol = PROTO_UDP;
    }
    e
}

#[test]
fn seccomp_refusals_name_the_call_and_why() {
    let r = record(&seccomp_event("socket(AF_UNIX, SOCK_STREAM)", false));
    assert_eq!(r.hook, "seccomp");
    assert_eq!(r.syscall.as_deref(), Some("socket(AF_UNIX, SOCK_STREAM)"));
    assert_eq!(
        (r.errno, r.pid, r.tid, r.comm.as_str()),
        (Some(1), 100, 101, "perl")
    );
    assert_eq!((r.grant, r.path.as_deref()), (None, None));
    assert_eq!(r.reason, Some(Reason::NeverGranted));
    assert_eq!(
        r.explanation(),
        "socket(AF_UNIX, SOCK_STREAM): never allowed inside a scope"
    );
    // A UDP socket a net.allow rule would have let be made.
    let r = record(&seccomp_event("socket(AF_INET, SOCK_DGRAM)", true));
    assert_eq!(
        (r.grant_key(), r.proto),
        (Some("net.allow"), Some(Protocol::Udp))
    );
    assert_eq!(r.reason, Some(Reason::NoGrant));
    assert_eq!(
        r.explanation(),
        "socket(AF_INET, SOCK_DGRAM): no net.allow rule covers it"
    );
    // The call is its own field in JSON, and comes back from it.
    let mut json = Vec::new();
    assert!(write_jsonl(&mut json, &r).is_ok());
    let back: AuditRecord = serde_json::from_slice(&json).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(back, r);
    assert!(String::from_utf8_lossy(&json).contains(r#""syscall":"socket(AF_INET, SOCK_DGRAM)""#));
}

fn dns_event(code: u16, text: &str) -> AuditEvent {
    let mut e = event(Hook::DnsQuery, ACCESS_NET, text);
    e.port = code;
    e
}

#[test]
fn resolver_refusals_name_the_name_and_why() {
    use bee_common::event::{DNS_REFUSED_ADDRESS, DNS_REFUSED_ALIAS, DNS_REFUSED_NAME};
    let r = record(&dns_event(DNS_REFUSED_NAME, "c2VjcmV0.evil.example"));
    assert_eq!(r.hook, "dns_query");
    assert_eq!(r.grant_key(), Some("net.allow"));
    assert_eq!(r.reason, Some(Reason::NameNotGranted));
    assert_eq!(
        r.explanation(),
        "resolve c2VjcmV0.evil.example: no net.allow host rule names it (answered NXDOMAIN; \
         the query never left the machine)"
    );
    let r = record(&dns_event(
        DNS_REFUSED_ALIAS,
        "cdn.example.com -> evil.example",
    ));
    assert_eq!(r.path.as_deref(), Some("cdn.example.com"));
    assert_eq!(
        r.reason,
        Some(Reason::AliasNotGranted {
            target: "evil.example".to_owned()
        })
    );
    assert!(
        r.explanation()
            .starts_with("resolve cdn.example.com: its answer is an alias of `evil.example`"),
        "{}",
        r.explanation()
    );
    let mut e = dns_event(DNS_REFUSED_ADDRESS, "meta.example.com");
    e.family = AF_INET;
    e.addr[..4].copy_from_slice(&[169, 254, 169, 254]);
    let r = record(&e);
    assert_eq!(r.addr, Some(IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254))));
    assert!(
        r.explanation()
            .starts_with("resolve meta.example.com: it answered 169.254.169.254, a loopback"),
        "{}",
        r.explanation()
    );
}

#[test]
fn a_peer_denied_in_a_scope_with_name_grants_says_no_answer_covers_it() {
    let options = CompileOptions {
        base: "/w".into(),
        home: None,
    };
    let policy = match compile_str(
        "p.toml",
        "version = 2\n[[net.allow]]\nhost = \"crates.io\"\nports = [443]\nproto = \"tcp\"\n",
        &options,
    ) {
        Ok(c) => c.policy,
        Err(e) => unreachable!("{e:?}"),
    };
    let e = net_event(Hook::SocketConnect, AF_INET, &[1, 2, 3, 4], 443, PROTO_TCP);
    let r = AuditRecord::from_event(&e, &policy, UNIX_EPOCH);
    assert_eq!(r.reason, Some(Reason::NoLiveAnswer));
    assert_eq!(
        r.explanation(),
        "connect tcp 1.2.3.4:443: no net.allow rule covers it, and no live answer for a granted \
         name names it (resolve the name first; answers last their TTL)"
    );
}

#[test]
fn an_address_written_into_an_event_reads_back_with_its_family() {
    for addr in [
        "203.0.113.7".parse::<IpAddr>().unwrap(),
        "2001:db8::7".parse().unwrap(),
    ] {
        let mut ev = AuditEvent::zeroed();
        ev.addr = [0xff; 16];
        set_event_addr(&mut ev, addr);
        assert_eq!(event_addr(&ev), addr);
        let want = if addr.is_ipv4() { AF_INET } else { AF_INET6 };
        assert_eq!(ev.family, want);
        if addr.is_ipv4() {
            assert_eq!(ev.addr[4..], [0; 12], "no bytes of an earlier address");
        }
    }
}

#[test]
fn the_transport_and_the_capability_are_written_as_text() {
    let connect = record(&net_event(
        Hook::SocketConnect,
        AF_INET,
        &[1, 2, 3, 4],
        443,
        PROTO_UDP,
    ));
    let mut capable = event(Hook::Capable, 0, "");
    capable.port = 21;
    let json = |r: &AuditRecord| serde_json::to_value(r).unwrap_or_default();
    assert_eq!(json(&connect)["proto"], "udp");
    assert_eq!(json(&record(&capable))["capability"], "CAP_SYS_ADMIN");
    let back: Option<AuditRecord> = serde_json::to_string(&connect)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    assert_eq!(back, Some(connect));
}

#[test]
fn a_report_that_may_miss_denials_says_how_many_records_were_lost() {
    assert_eq!(
        lost_records_explanation(1),
        "some denials may be missing: the kernel dropped 1 audit record while this scope ran (its audit queue, bee's socket or a ring buffer of bee's programs was full)"
    );
    assert!(lost_records_explanation(312).contains("dropped 312 audit records"));
}
