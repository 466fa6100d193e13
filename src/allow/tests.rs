use std::net::IpAddr;

use bee_core::compiled::FileId;
use bee_core::net::Protocol;
use bee_core::{CompileOptions, compile_str};
use bee_userspace::audit::{AuditRecord, HookName, Reason, RuleRef, Verdict};

use super::{Change, Rule, propose};

/// A denial record of `hook` that a `grant` rule would allow.
fn denial(hook: &str, grant: Option<&str>, access: &[&str], path: Option<&str>) -> AuditRecord {
    AuditRecord {
        time: "2026-12-01T17:00:00.000Z".into(),
        scope: 7,
        pid: 10,
        tid: 10,
        comm: "cat".into(),
        hook: HookName::parse(hook),
        verdict: Verdict::Deny,
        errno: Some(1),
        access: access.iter().filter_map(|a| a.parse().ok()).collect(),
        path: path.map(str::to_owned),
        path_truncated: false,
        proto: None,
        addr: None,
        port: None,
        capability: None,
        syscall: None,
        grant: grant.and_then(|g| g.parse().ok()),
        reason: Some(Reason::NoGrant),
        policy: "p.toml".into(),
        nested: false,
        learn: false,
    }
}

const PIN: FileId = FileId { dev: 3, ino: 99 };

fn some_pin(_: &str) -> Option<FileId> {
    Some(PIN)
}

fn no_file(_: &str) -> Option<FileId> {
    None
}

fn policy(text: &str) -> bee_core::CompiledPolicy {
    let options = CompileOptions {
        base: "/w".into(),
        home: None,
    };
    compile_str("p.toml", text, &options).unwrap().policy
}

#[test]
fn a_read_denial_gets_the_exact_path_under_fs_read() {
    let r = denial("file_open", Some("fs.read"), &["read"], Some("/etc/hosts"));
    assert_eq!(propose(&r, &some_pin), Ok(Rule::Read("/etc/hosts".into())));
}

#[test]
fn a_write_denial_gets_fs_write_also_when_the_path_is_read_only() {
    let r = denial(
        "path_unlink",
        Some("fs.write"),
        &["write"],
        Some("/w/a.txt"),
    );
    assert_eq!(propose(&r, &some_pin), Ok(Rule::Write("/w/a.txt".into())));
    let mut r = denial(
        "file_open",
        Some("fs.write"),
        &["read", "write"],
        Some("/w/b"),
    );
    r.reason = Some(Reason::ReadOnly {
        rule: RuleRef {
            key: "fs.read[0]".into(),
            line: 3,
            text: "/w/**".into(),
        },
    });
    assert_eq!(propose(&r, &some_pin), Ok(Rule::Write("/w/b".into())));
}

#[test]
fn an_exec_denial_gets_a_pin_of_the_file_there_now() {
    let r = denial(
        "bprm_check_security",
        Some("exec.allow"),
        &["exec"],
        Some("/usr/bin/git"),
    );
    assert_eq!(
        propose(&r, &some_pin),
        Ok(Rule::Exec {
            path: "/usr/bin/git".into(),
            pin: PIN
        })
    );
    let why = propose(&r, &no_file).unwrap_err().0;
    assert!(why.contains("cannot be found now"), "{why}");
}

#[test]
fn a_connect_denial_gets_the_exact_peer() {
    let mut r = denial("socket_connect", Some("net.allow"), &["net"], None);
    r.addr = Some("93.184.216.34".parse().unwrap());
    r.port = Some(443);
    r.proto = Some(Protocol::Tcp);
    let rule = propose(&r, &some_pin).unwrap();
    assert_eq!(
        rule,
        Rule::Net {
            addr: "93.184.216.34".parse::<IpAddr>().unwrap(),
            port: 443,
            proto: Protocol::Tcp
        }
    );
    assert_eq!(
        rule.to_string(),
        r#"net.allow += { addr = "93.184.216.34", ports = 443, proto = "tcp" }"#
    );
    r.proto = None;
    assert!(
        propose(&r, &some_pin)
            .unwrap_err()
            .0
            .contains("no protocol")
    );
}

#[test]
fn a_unix_denial_gets_the_socket_path_and_abstract_ones_cannot() {
    let r = denial(
        "unix_stream_connect",
        Some("net.unix"),
        &["unix"],
        Some("/run/x.sock"),
    );
    assert_eq!(propose(&r, &some_pin), Ok(Rule::Unix("/run/x.sock".into())));
    let r = denial("unix_stream_connect", Some("net.unix"), &["unix"], None);
    assert!(propose(&r, &some_pin).unwrap_err().0.contains("abstract"));
}

/// Carve-outs win over grants, and a live change only adds grants: denials they cause
/// (and refused directory moves) get a reason, never a useless rule.
#[test]
fn carve_outs_protected_paths_and_moves_are_not_answered_by_a_grant() {
    let rule = RuleRef {
        key: "fs.deny[0]".into(),
        line: 4,
        text: "./secrets/**".into(),
    };
    let mut r = denial(
        "file_open",
        Some("fs.read"),
        &["read"],
        Some("/w/secrets/k"),
    );
    r.reason = Some(Reason::CarvedOut { rule: rule.clone() });
    assert!(
        propose(&r, &some_pin)
            .unwrap_err()
            .0
            .contains("carves it out")
    );
    let mut r = denial(
        "file_open",
        Some("fs.write"),
        &["write"],
        Some("/w/.git/config"),
    );
    r.reason = Some(Reason::Protected {
        rule: RuleRef {
            key: "protected[1]".into(),
            line: 1,
            text: "/**/.git/config".into(),
        },
    });
    assert!(
        propose(&r, &some_pin)
            .unwrap_err()
            .0
            .contains("fs.unprotect")
    );
    let mut r = denial("path_rename", Some("fs.write"), &["write"], Some("/w/g"));
    r.reason = Some(Reason::Reparent);
    assert!(
        propose(&r, &some_pin)
            .unwrap_err()
            .0
            .contains("directory moves")
    );
}

#[test]
fn refusals_no_policy_changes_cannot_be_allowed() {
    for hook in [
        "bpf",
        "path_mknod",
        "socket_listen",
        "socket_accept",
        "sb_mount",
    ] {
        let mut r = denial(hook, None, &[], Some("/dev/sda"));
        r.reason = Some(Reason::NeverGranted);
        let why = propose(&r, &some_pin).unwrap_err().0;
        assert!(why.contains("whatever the policy says"), "{hook}: {why}");
    }
    let mut r = denial("file_open", Some("fs.read"), &["read"], Some("/x"));
    r.reason = Some(Reason::Unresolved);
    assert!(propose(&r, &some_pin).unwrap_err().0.contains("unresolved"));
    let mut r = denial("file_open", Some("fs.read"), &["read"], Some("/long/pa"));
    r.path_truncated = true;
    assert!(propose(&r, &some_pin).unwrap_err().0.contains("cut short"));
    let mut r = denial(
        "bprm_check_security",
        Some("exec.allow"),
        &["exec"],
        Some("/bin/x"),
    );
    r.reason = Some(Reason::PinMismatch {
        rule: RuleRef {
            key: "exec.allow[0]".into(),
            line: 2,
            text: "!/bin/x".into(),
        },
    });
    assert!(
        propose(&r, &some_pin)
            .unwrap_err()
            .0
            .contains("never re-pins")
    );
    let mut r = denial("file_open", Some("fs.read"), &["read"], Some("/x"));
    r.verdict = Verdict::Allow;
    assert!(propose(&r, &some_pin).unwrap_err().0.contains("allowed"));
    let r = denial("file_open", Some("fs.read"), &["read"], Some("relative"));
    assert!(
        propose(&r, &some_pin)
            .unwrap_err()
            .0
            .contains("not an absolute")
    );
    let r = denial("file_open", Some("fs.read"), &["read"], None);
    assert!(
        propose(&r, &some_pin)
            .unwrap_err()
            .0
            .contains("names no path")
    );
    let r = denial("capable", None, &[], None);
    assert!(
        propose(&r, &some_pin)
            .unwrap_err()
            .0
            .contains("no kind of grant")
    );
}

#[test]
fn the_change_is_proven_and_adds_exactly_the_rule() {
    let current = policy("version = 1\n[fs]\nread = [\"/w/src/**\"]\n");
    let change = Change::new(&current, None, Rule::Read("/etc/hosts".into())).unwrap();
    assert_eq!(change.diff.added.len(), 1, "{:?}", change.diff);
    assert!(change.diff.removed.is_empty());
    let witness = change.diff.added[0].witness.to_string();
    assert!(witness.contains("/etc/hosts"), "{witness}");
    assert!(
        change
            .policy
            .fs
            .read
            .iter()
            .any(|r| r.pattern.matches("/etc/hosts"))
    );
    assert!(
        !change
            .policy
            .fs
            .read
            .iter()
            .any(|r| r.pattern.matches("/etc/passwd"))
    );
    // Already granted: nothing to do.
    let why = Change::new(&current, None, Rule::Read("/w/src/a.rs".into()))
        .unwrap_err()
        .0;
    assert!(why.contains("grants nothing"), "{why}");
}

#[test]
fn a_subagent_is_never_widened_beyond_its_parent() {
    let parent = policy("version = 1\n[fs]\nread = [\"/w/**\"]\n");
    let child = policy("version = 1\n[fs]\nread = [\"/w/src/**\"]\n");
    // Within the parent: allowed.
    assert!(
        Change::new(
            &child,
            Some((&parent, "the parent")),
            Rule::Read("/w/README".into())
        )
        .is_ok()
    );
    // Beyond it: refused, with the counterexample.
    let why = Change::new(
        &child,
        Some((&parent, "the parent")),
        Rule::Read("/etc/shadow".into()),
    )
    .unwrap_err()
    .0;
    assert!(
        why.contains("beyond its parent") && why.contains("/etc/shadow"),
        "{why}"
    );
}
