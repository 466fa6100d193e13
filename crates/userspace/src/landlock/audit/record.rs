//! Landlock's audit records as text, parsed, and turned into bee's [`AuditEvent`]s.
//!
//! The kernel sends each record as a netlink message whose type is the record type and whose
//! payload is `audit(SECONDS.MILLIS:SERIAL): key=value key=value …`. The records of one
//! event share the serial. A Landlock denial is an event of (in this order) one or more
//! `AUDIT_LANDLOCK_ACCESS` records, the domain's `AUDIT_LANDLOCK_DOMAIN` record when it is the
//! domain's first logged denial, and, where the kernel audits the system call, `AUDIT_SYSCALL`
//! (`Documentation/admin-guide/LSM/landlock.rst`).

use bee_common::{
    ACCESS_EXEC, ACCESS_NET, ACCESS_READ, ACCESS_UNIX, ACCESS_WRITE, AuditEvent, Hook, PATH_MAX,
    PROTO_TCP,
};

/// `AUDIT_SYSCALL` (`include/uapi/linux/audit.h`).
pub const AUDIT_SYSCALL: u16 = 1300;
/// `AUDIT_EOE`: the end of a multi-record event.
pub const AUDIT_EOE: u16 = 1320;
/// `AUDIT_USER`: a message from user space (bee's marks, [`MARK`]).
pub const AUDIT_USER: u16 = 1005;
/// `AUDIT_LANDLOCK_ACCESS`: a denied access (Linux 6.15, Landlock ABI 7).
pub const AUDIT_LANDLOCK_ACCESS: u16 = 1423;
/// `AUDIT_LANDLOCK_DOMAIN`: a domain's creation (`status=allocated`) or release.
pub const AUDIT_LANDLOCK_DOMAIN: u16 = 1424;

/// `EACCES`, the errno a Landlock denial returns for most accesses.
const EACCES: i32 = 13;
/// `AF_INET`.
const AF_INET: u16 = 2;
/// `AF_INET6`.
const AF_INET6: u16 = 10;

/// One record bee reads, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// `AUDIT_LANDLOCK_ACCESS`: what a domain refused.
    Access(Access),
    /// `AUDIT_LANDLOCK_DOMAIN` with `status=allocated`: who created a domain.
    Domain {
        /// The event's serial.
        serial: u64,
        /// The domain's id (hexadecimal in the record).
        domain: u64,
        /// The process that called `landlock_restrict_self`, as the initial PID namespace
        /// numbers it: for bee, the child the launcher started.
        pid: u32,
        /// That process's executable then (`exe=`): for bee's launches, bee itself, which
        /// restricts the child before its `execve`.
        exe: Option<String>,
        /// When the kernel logged it ([`Stamp`]): at the domain's first logged denial.
        logged: Stamp,
    },
    /// `AUDIT_SYSCALL`: the process that made the refused call.
    Syscall {
        /// The event's serial.
        serial: u64,
        /// Its thread group id (`pid=`).
        pid: u32,
        /// Its `comm` (`comm=`).
        comm: String,
        /// When the kernel logged it ([`Stamp`]).
        logged: Stamp,
    },
    /// `AUDIT_EOE`: the event with this serial is complete.
    End {
        /// The event's serial.
        serial: u64,
    },
    /// `AUDIT_USER` with bee's end-of-launch mark ([`MARK`]): every record the kernel queued
    /// before it has been copied to the reader before it.
    Mark {
        /// The record's serial.
        serial: u64,
        /// The process that logged it (`pid=`, filled in by the kernel).
        pid: u32,
        /// Which of that process's readers logged it.
        reader: u64,
        /// The mark's number, from 1 for each reader.
        number: u64,
    },
}

/// When the kernel logged a record, in milliseconds since the Unix epoch, as its header
/// says (`audit(SECONDS.MILLIS:SERIAL)`): the kernel's coarse wall clock, which may lag the
/// true time by a clock tick, never lead it.
pub type Stamp = u64;

/// The text of the marks bee logs ([`Record::Mark`]): `bee-landlock-end READER NUMBER`.
pub const MARK: &str = "bee-landlock-end";

impl Record {
    /// The serial of the event the record belongs to.
    pub fn serial(&self) -> u64 {
        match self {
            Self::Access(a) => a.serial,
            Self::Domain { serial, .. }
            | Self::Syscall { serial, .. }
            | Self::End { serial }
            | Self::Mark { serial, .. } => *serial,
        }
    }
}

/// A denied access, as `AUDIT_LANDLOCK_ACCESS` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The event's serial.
    pub serial: u64,
    /// The domain that refused it.
    pub domain: u64,
    /// The missing rights, as the kernel names them (`fs.read_file`, `net.connect_tcp`,
    /// `scope.signal`…).
    pub blockers: Vec<String>,
    /// The file or directory (`path=`): for a creation or removal, the directory it was in.
    pub path: Option<String>,
    /// The peer address of a network denial (`daddr=`, or `saddr=` for a bind); `None`
    /// for the unspecified address (0.0.0.0 or ::), which the kernel leaves out.
    pub addr: Option<std::net::IpAddr>,
    /// Its port (`dest=`, or `src=` for a bind).
    pub port: Option<u16>,
}

/// Parses one record of `msg_type` with payload `text`; `None` for a record of another type
/// or one that does not have the fields bee needs.
pub fn parse(msg_type: u16, text: &str) -> Option<Record> {
    let Header {
        serial,
        logged,
        fields,
    } = split_header(text)?;
    let field = |key: &str| fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    match msg_type {
        AUDIT_LANDLOCK_ACCESS => {
            let domain = u64::from_str_radix(field("domain")?, 16).ok()?;
            let blockers: Vec<String> = field("blockers")?
                .split(',')
                .filter(|b| !b.is_empty())
                .map(str::to_owned)
                .collect();
            // The kernel logs a bind's own address and port (`saddr`, `src`), a connect's
            // peer (`daddr`, `dest`), and leaves an address out when it is the unspecified
            // one (0.0.0.0 or ::).
            let bind = blockers.iter().any(|b: &String| b == "net.bind_tcp");
            let (addr_key, port_key) = if bind {
                ("saddr", "src")
            } else {
                ("daddr", "dest")
            };
            Some(Record::Access(Access {
                serial,
                domain,
                blockers,
                path: field("path").and_then(untrusted_string),
                addr: field(addr_key).and_then(|a| a.parse().ok()),
                port: field(port_key).and_then(|p| p.parse().ok()),
            }))
        }
        AUDIT_LANDLOCK_DOMAIN if field("status") == Some("allocated") => Some(Record::Domain {
            serial,
            domain: u64::from_str_radix(field("domain")?, 16).ok()?,
            pid: field("pid")?.parse().ok()?,
            exe: field("exe").and_then(untrusted_string),
            logged,
        }),
        AUDIT_SYSCALL => Some(Record::Syscall {
            serial,
            pid: field("pid")?.parse().ok()?,
            comm: field("comm").and_then(untrusted_string).unwrap_or_default(),
            logged,
        }),
        AUDIT_EOE => Some(Record::End { serial }),
        AUDIT_USER => {
            // `msg='TEXT'` ends the record; its text may have spaces.
            let (_, msg) = text.trim_end_matches('\0').rsplit_once(" msg='")?;
            let numbers = msg
                .strip_suffix('\'')?
                .strip_prefix(MARK)?
                .strip_prefix(' ')?;
            let (reader, number) = numbers.split_once(' ')?;
            Some(Record::Mark {
                serial,
                pid: field("pid")?.parse().ok()?,
                reader: reader.parse().ok()?,
                number: number.parse().ok()?,
            })
        }
        _ => None,
    }
}

/// A record's text split at its header: `audit(1729738800.268:30): a=b c=d` has serial 30,
/// was logged at 1729738800268 and has fields [(a, b), (c, d)].
struct Header<'a> {
    serial: u64,
    logged: Stamp,
    fields: Vec<(&'a str, &'a str)>,
}

fn split_header(text: &str) -> Option<Header<'_>> {
    let rest = text.trim_end_matches('\0').strip_prefix("audit(")?;
    let (stamp, rest) = rest.split_once("):")?;
    let (time, serial) = stamp.rsplit_once(':')?;
    let serial = serial.parse().ok()?;
    // The kernel prints three digits after the point; fewer are read as a decimal fraction.
    let (seconds, fraction) = time.split_once('.')?;
    if fraction.is_empty() || fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let millis: u64 = format!("{fraction:0<3}").parse().ok()?;
    let logged = seconds
        .parse::<u64>()
        .ok()?
        .checked_mul(1000)?
        .checked_add(millis)?;
    // A value is quoted, hexadecimal or a plain word: never with a space inside
    // (`audit_log_untrustedstring` hex-encodes a string that has one).
    let fields = rest
        .split_ascii_whitespace()
        .filter_map(|f| f.split_once('='))
        .collect();
    Some(Header {
        serial,
        logged,
        fields,
    })
}

/// A string the kernel logged with `audit_log_untrustedstring`: `"text"` as it is, otherwise
/// hexadecimal bytes (a string with a space, a quote or a control character); `None` for
/// `(null)` or what is neither.
fn untrusted_string(value: &str) -> Option<String> {
    if let Some(quoted) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        return Some(quoted.to_owned());
    }
    if value.is_empty() || value.len() & 1 == 1 {
        return None;
    }
    let bytes = (0..value.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(value.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The hook and `ACCESS_*` bits bee's LSM programs would have reported for a Landlock
/// blocker; `None` for one with no counterpart (`fs.ioctl_dev`).
fn hook_of(blocker: &str) -> Option<(Hook, u32)> {
    Some(match blocker {
        "fs.read_file" | "fs.read_dir" => (Hook::FileOpen, ACCESS_READ),
        "fs.write_file" => (Hook::FileOpen, ACCESS_WRITE),
        "fs.execute" => (Hook::BprmCheckSecurity, ACCESS_EXEC),
        "fs.remove_file" => (Hook::PathUnlink, ACCESS_WRITE),
        "fs.remove_dir" => (Hook::PathRmdir, ACCESS_WRITE),
        "fs.make_dir" => (Hook::PathMkdir, ACCESS_WRITE),
        "fs.make_reg" | "fs.make_sock" | "fs.make_fifo" => (Hook::PathMknod, ACCESS_WRITE),
        // A device node is never granted: reported with no access, as the BPF engine does.
        "fs.make_char" | "fs.make_block" => (Hook::PathMknod, 0),
        "fs.make_sym" => (Hook::PathSymlink, ACCESS_WRITE),
        "fs.refer" => (Hook::PathRename, ACCESS_WRITE),
        "fs.truncate" => (Hook::PathTruncate, ACCESS_WRITE),
        "net.connect_tcp" => (Hook::SocketConnect, ACCESS_NET),
        "net.bind_tcp" => (Hook::SocketBind, ACCESS_NET),
        "scope.signal" => (Hook::TaskKill, 0),
        "scope.abstract_unix_socket" => (Hook::UnixStreamConnect, ACCESS_UNIX),
        _ => return None,
    })
}

/// bee's event for `access`, refused in the scope with cgroup `cgroup_id` by the process
/// `pid` named `comm` (0 and empty when the kernel did not say). The first blocker with a
/// counterpart names the hook; `None` when none has one.
pub fn event(access: &Access, cgroup_id: u64, pid: u32, comm: &str) -> Option<AuditEvent> {
    let (hook, bits) = access.blockers.iter().find_map(|b| hook_of(b))?;
    let mut e = AuditEvent::zeroed();
    e.cgroup_id = cgroup_id;
    e.pid = pid;
    e.tgid = pid;
    e.hook = hook as u32;
    e.error = -EACCES;
    e.access = bits;
    let comm = comm.as_bytes();
    let n = comm.len().min(e.comm.len() - 1);
    e.comm[..n].copy_from_slice(&comm[..n]);
    if let Some(path) = &access.path {
        let path = path.as_bytes();
        let n = path.len().min(PATH_MAX);
        e.path[..n].copy_from_slice(&path[..n]);
        e.path_len = n as u32;
    }
    if hook == Hook::SocketConnect || hook == Hook::SocketBind {
        e.protocol = PROTO_TCP;
        e.port = access.port.unwrap_or(0);
        // No address logged: the unspecified one, of either family; the event keeps
        // `AF_UNSPEC` and its port (`AuditRecord` says both addresses).
        match access.addr {
            Some(std::net::IpAddr::V4(a)) => {
                e.family = AF_INET;
                e.addr[..4].copy_from_slice(&a.octets());
            }
            Some(std::net::IpAddr::V6(a)) => {
                e.family = AF_INET6;
                e.addr = a.octets();
            }
            None => {}
        }
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_denial_and_its_domain_parse() {
        let r = parse(
            AUDIT_LANDLOCK_ACCESS,
            "audit(1796312420.496:5): domain=1964700bb blockers=fs.read_file path=\"/etc/hostname\" dev=\"vda\" ino=611",
        );
        assert_eq!(
            r,
            Some(Record::Access(Access {
                serial: 5,
                domain: 0x1964700bb,
                blockers: vec!["fs.read_file".into()],
                path: Some("/etc/hostname".into()),
                addr: None,
                port: None,
            }))
        );
        let d = parse(
            AUDIT_LANDLOCK_DOMAIN,
            "audit(1796312420.496:4): domain=1964700bb status=allocated mode=enforcing pid=1524 uid=0 exe=\"/usr/bin/bee\" comm=\"bee\"",
        );
        assert_eq!(
            d,
            Some(Record::Domain {
                serial: 4,
                domain: 0x1964700bb,
                pid: 1524,
                exe: Some("/usr/bin/bee".into()),
                logged: 1_796_312_420_496,
            })
        );
        // A release says nothing bee needs.
        assert_eq!(
            parse(
                AUDIT_LANDLOCK_DOMAIN,
                "audit(1.2:6): domain=1964700bb status=deallocated denials=2"
            ),
            None
        );
    }

    #[test]
    fn hexadecimal_paths_and_comms_are_decoded() {
        // "/tmp/a b" has a space, so the kernel logs it in hexadecimal.
        let r = parse(
            AUDIT_LANDLOCK_ACCESS,
            "audit(1.2:7): domain=a blockers=fs.make_reg,fs.refer path=2F746D702F612062 dev=\"tmpfs\" ino=3",
        );
        let Some(Record::Access(a)) = r else {
            panic!("{r:?}")
        };
        assert_eq!(a.path.as_deref(), Some("/tmp/a b"));
        assert_eq!(a.blockers, ["fs.make_reg", "fs.refer"]);
        let s = parse(
            AUDIT_SYSCALL,
            "audit(1.2:7): arch=c000003e syscall=257 success=no exit=-13 ppid=1 pid=42 comm=6D7920636174 exe=\"/usr/bin/cat\"",
        );
        assert_eq!(
            s,
            Some(Record::Syscall {
                serial: 7,
                pid: 42,
                comm: "my cat".into(),
                logged: 1200,
            })
        );
    }

    #[test]
    fn a_refused_connection_becomes_a_socket_connect_event() {
        let r = parse(
            AUDIT_LANDLOCK_ACCESS,
            "audit(1.2:9): domain=b blockers=net.connect_tcp daddr=127.0.0.1 dest=9999",
        );
        let Some(Record::Access(a)) = r else {
            panic!("{r:?}")
        };
        let e = event(&a, 77, 42, "bash").unwrap_or_else(|| unreachable!());
        assert_eq!(e.hook, Hook::SocketConnect as u32);
        assert_eq!(e.access, ACCESS_NET);
        assert_eq!((e.family, e.port, e.protocol), (AF_INET, 9999, PROTO_TCP));
        assert_eq!(&e.addr[..4], &[127, 0, 0, 1]);
        assert_eq!((e.cgroup_id, e.tgid, e.error), (77, 42, -EACCES));
        assert_eq!(&e.comm[..5], b"bash\0");
    }

    /// The explanation bee prints for the Landlock record `text`, under a policy that grants
    /// no network.
    fn explained(text: &str) -> String {
        let Some(Record::Access(a)) = parse(AUDIT_LANDLOCK_ACCESS, text) else {
            panic!("{text}")
        };
        let e = event(&a, 77, 42, "python3").unwrap_or_else(|| unreachable!());
        let options = bee_core::CompileOptions {
            base: "/w".into(),
            home: None,
        };
        let policy = bee_core::compile_str("p.toml", "version = 1\n", &options)
            .unwrap_or_else(|e| unreachable!("{e:?}"))
            .policy;
        crate::audit::AuditRecord::from_event(&e, &policy, std::time::SystemTime::now())
            .explanation()
    }

    #[test]
    fn refused_binds_and_connects_say_their_address_and_port() {
        // The kernel logs a bind's own address (`saddr`, `src`), a connect's peer (`daddr`,
        // `dest`), and no address at all when it is the unspecified one.
        for (text, said) in [
            (
                "audit(1.2:9): domain=b blockers=net.connect_tcp daddr=127.0.0.2 dest=9",
                "connect tcp 127.0.0.2:9: no net.allow rule covers it",
            ),
            (
                "audit(1.2:9): domain=b blockers=net.connect_tcp dest=9",
                "connect tcp 0.0.0.0:9 or [::]:9: no net.allow rule covers it",
            ),
            (
                "audit(1.2:9): domain=b blockers=net.bind_tcp saddr=127.0.0.1 src=8089",
                "bind tcp 127.0.0.1:8089: never allowed inside a scope",
            ),
            (
                "audit(1.2:9): domain=b blockers=net.bind_tcp saddr=::1 src=8089",
                "bind tcp [::1]:8089: never allowed inside a scope",
            ),
            (
                "audit(1.2:9): domain=b blockers=net.bind_tcp src=8089",
                "bind tcp 0.0.0.0:8089 or [::]:8089: never allowed inside a scope",
            ),
        ] {
            assert_eq!(explained(text), said, "{text}");
        }
    }

    #[test]
    fn each_blocker_names_the_hook_bee_reports() {
        let access = |b: &str| Access {
            serial: 1,
            domain: 1,
            blockers: vec![b.to_owned()],
            path: Some("/w/x".into()),
            addr: None,
            port: None,
        };
        for (blocker, hook, bits) in [
            ("fs.read_file", Hook::FileOpen, ACCESS_READ),
            ("fs.write_file", Hook::FileOpen, ACCESS_WRITE),
            ("fs.execute", Hook::BprmCheckSecurity, ACCESS_EXEC),
            ("fs.make_dir", Hook::PathMkdir, ACCESS_WRITE),
            ("fs.remove_file", Hook::PathUnlink, ACCESS_WRITE),
            ("fs.refer", Hook::PathRename, ACCESS_WRITE),
            ("fs.make_char", Hook::PathMknod, 0),
        ] {
            let e = event(&access(blocker), 1, 1, "x").unwrap_or_else(|| unreachable!());
            assert_eq!((e.hook, e.access), (hook as u32, bits), "{blocker}");
            assert_eq!(e.path(), b"/w/x");
        }
        assert!(event(&access("fs.ioctl_dev"), 1, 1, "x").is_none());
    }

    #[test]
    fn a_mark_parses_and_other_user_messages_do_not() {
        let r = parse(
            AUDIT_USER,
            "audit(1.2:80): pid=4242 uid=0 auid=4294967295 ses=4294967295 subj=unconfined msg='bee-landlock-end 2 17'",
        );
        assert_eq!(
            r,
            Some(Record::Mark {
                serial: 80,
                pid: 4242,
                reader: 2,
                number: 17
            })
        );
        for other in [
            "audit(1.2:81): pid=1 uid=0 msg='op=login acct=root'",
            "audit(1.2:81): pid=1 uid=0 msg='bee-landlock-end'",
            "audit(1.2:81): pid=1 uid=0 msg='bee-landlock-end 1'",
            "audit(1.2:81): pid=1 uid=0 msg='bee-landlock-end 1 x'",
            "audit(1.2:81): uid=0 msg='bee-landlock-end 1 3'",
        ] {
            assert_eq!(parse(AUDIT_USER, other), None, "{other}");
        }
    }

    #[test]
    fn malformed_records_are_skipped() {
        for text in [
            "",
            "audit(",
            "audit(1.2): domain=1",
            "audit(1.2:x): domain=1 blockers=fs.read_file",
            "audit(1.2:3): domain=zz blockers=fs.read_file",
            "audit(1.2:3): blockers=fs.read_file",
        ] {
            assert_eq!(parse(AUDIT_LANDLOCK_ACCESS, text), None, "{text}");
        }
        assert_eq!(untrusted_string("(null)"), None);
        assert_eq!(untrusted_string("abc"), None);
    }
}
