//! The planner's classification of rules, without a kernel.

use bee_core::CompileOptions;

use super::*;

fn compile(toml: &str) -> CompiledPolicy {
    let options = CompileOptions {
        base: "/work/ws".into(),
        home: Some("/home/u".into()),
    };
    match bee_core::compile_str("p.toml", toml, &options) {
        Ok(c) => c.policy,
        Err(e) => unreachable!("{e:?}"),
    }
}

fn refused(toml: &str) -> Vec<(String, Inexpressible)> {
    match LandlockPlan::new(&compile(toml), LandlockAbi(7)) {
        Ok(plan) => unreachable!("planned: {plan:?}"),
        Err(e) => e.rules.into_iter().map(|r| (r.origin.key, r.why)).collect(),
    }
}

fn planned(toml: &str) -> LandlockPlan {
    match LandlockPlan::new(&compile(toml), LandlockAbi(7)) {
        Ok(plan) => plan,
        Err(e) => unreachable!("{e}"),
    }
}

#[test]
fn trees_exact_paths_and_stars_are_exact() {
    let plan = planned(
        r#"version = 1
[fs]
read = ["./**", "/etc/hosts", "/usr/lib/*-linux-gnu/**"]
write = ["./target/**"]
[exec]
allow = ["/usr/bin/dash", "./target/**"]
"#,
    );
    assert!(plan.narrowings().is_empty(), "{:?}", plan.narrowings());
    let r = plan.rights_at("/work/ws/src/main.rs");
    assert!(r.read && !r.write && !r.exec);
    let r = plan.rights_at("/work/ws/target/debug/app");
    assert!(r.read && r.write && r.exec);
    assert!(plan.rights_at("/usr/lib/x86_64-linux-gnu/libc.so.6").read);
    assert!(!plan.rights_at("/usr/lib/python3/x").read);
    assert!(plan.rights_at("/usr/bin/dash").exec);
    assert_eq!(plan.rights_at("/etc/shadow"), Rights::default());
}

#[test]
fn name_patterns_are_refused_with_their_rule() {
    let got = refused(
        r#"version = 1
[fs]
read = ["./**/*.rs", "./**/Cargo.toml"]
"#,
    );
    assert_eq!(
        got,
        vec![
            ("fs.read[0]".to_owned(), Inexpressible::NamePattern),
            ("fs.read[1]".to_owned(), Inexpressible::NamePattern),
        ]
    );
}

#[test]
fn a_carve_out_under_a_grant_is_a_mount_or_refused_and_one_beside_it_is_nothing() {
    // A tree the scope cannot create: covered by a tmpfs while it exists.
    let plan = planned(
        r#"version = 1
[fs]
read = ["./**"]
deny = ["./secrets/**"]
[exec]
allow = ["/usr/bin/**"]
deny = ["/usr/bin/ssh"]
"#,
    );
    assert_eq!(
        plan.masks()
            .iter()
            .map(|m| (m.path.as_str(), m.kind))
            .collect::<Vec<_>>(),
        vec![
            ("/usr/bin/ssh", MaskKind::NoExec),
            ("/work/ws/secrets", MaskKind::Hidden),
        ]
    );
    // One the scope could create in its writable tree, a name pattern, an exact path: no
    // mount covers them exactly.
    let got = refused(
        r#"version = 1
[fs]
write = ["./**"]
deny = ["./secrets/**", "./**/*.key", "./id_rsa"]
"#,
    );
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        matches!(&got[0].1, Inexpressible::Unmaskable { why, .. } if why.contains("could create it"))
    );
    assert!(matches!(&got[1].1, Inexpressible::CarveOut { grant } if grant.key == "fs.write[0]"));
    assert!(
        matches!(&got[2].1, Inexpressible::Unmaskable { why, .. } if why.contains("whole tree"))
    );
    // Apart from every grant: nothing to take away, nothing refused.
    planned(
        r#"version = 1
[fs]
read = ["./**"]
deny = ["/home/u/.ssh/**"]
"#,
    );
}

#[test]
fn version_2_protected_paths_refuse_a_writable_tree_but_not_a_readable_one() {
    let got = refused(
        r#"version = 2
[fs]
write = ["./**"]
"#,
    );
    assert!(!got.is_empty());
    assert!(got.iter().all(|(k, why)| k.starts_with("protected")
        && matches!(why, Inexpressible::ProtectedInWritable { grant } if grant.key == "fs.write[0]")));
    planned(
        r#"version = 2
[fs]
read = ["./**"]
"#,
    );
}

#[test]
fn network_grants_become_ports_only_when_they_name_every_address() {
    let plan = planned(
        r#"version = 1
[[net.allow]]
addr = ["0.0.0.0/0", "::/0"]
ports = [443, "8000-8001"]
proto = "tcp"
"#,
    );
    assert_eq!(
        plan.tcp_connect(),
        &[
            PortRange {
                first: 443,
                last: 443
            },
            PortRange {
                first: 8000,
                last: 8001
            }
        ]
    );
    let got = refused(
        r#"version = 1
[[net.allow]]
addr = ["127.0.0.1/32"]
ports = [8080]
proto = "tcp"
"#,
    );
    assert_eq!(got[0].1, Inexpressible::Address);
    let got = refused(
        r#"version = 1
[[net.allow]]
addr = ["0.0.0.0/0"]
ports = [443]
proto = "tcp"
"#,
    );
    assert_eq!(got[0].1, Inexpressible::OneFamily);
    let got = refused(
        r#"version = 1
[[net.allow]]
host = ["example.com"]
ports = [443]
proto = "tcp"
"#,
    );
    assert_eq!(got[0].1, Inexpressible::Name);
    let got = refused(
        r#"version = 1
[[net.allow]]
addr = ["0.0.0.0/0", "::/0"]
ports = [53]
proto = "udp"
"#,
    );
    assert!(got.iter().all(|(_, w)| *w == Inexpressible::Udp));
}

#[test]
fn tcp_needs_landlock_network_rules() {
    let policy = compile(
        r#"version = 1
[[net.allow]]
addr = ["0.0.0.0/0", "::/0"]
ports = [443]
proto = "tcp"
"#,
    );
    let Err(e) = LandlockPlan::new(&policy, LandlockAbi(3)) else {
        unreachable!("planned on ABI 3")
    };
    assert!(
        e.rules
            .iter()
            .all(|r| r.why == Inexpressible::NoNetworkRules { abi: 3 })
    );
    assert!(e.to_string().contains("ABI 4"), "{e}");
}

#[test]
fn proc_self_is_the_private_proc_and_other_proc_paths_are_named_narrowings() {
    let plan = planned(
        r#"version = 1
[fs]
read = ["/proc/self/**", "/proc/sys/vm/overcommit_memory"]
"#,
    );
    assert!(plan.rights_at("/proc/self/status").read);
    assert_eq!(
        plan.narrowings()
            .iter()
            .map(|n| (n.origin.key.as_str(), &n.kind))
            .collect::<Vec<_>>(),
        vec![("fs.read[1]", &NarrowingKind::ProcOutsideSelf)]
    );
    let got = refused(
        r#"version = 1
[fs]
write = ["/proc/self/**"]
"#,
    );
    assert_eq!(got[0].1, Inexpressible::ProcWrite);
}

#[test]
fn an_exact_write_grant_on_a_file_is_a_named_narrowing() {
    let plan = planned(
        r#"version = 1
[fs]
write = ["/home/u/.cache/tool.lock"]
"#,
    );
    assert_eq!(plan.narrowings().len(), 1);
    assert_eq!(plan.narrowings()[0].kind, NarrowingKind::FileCreation);
}

#[test]
fn a_refusal_names_every_rule_with_its_line() {
    let policy = compile(
        "version = 1\n[fs]\nread = [\"./**/*.py\"]\ndeny = [\"./secret/**\"]\nwrite = [\"./**\"]\n",
    );
    let Err(e) = LandlockPlan::new(&policy, LandlockAbi(7)) else {
        unreachable!("planned")
    };
    let text = e.to_string();
    assert!(text.contains("fs.read[0] `./**/*.py` (line 3)"), "{text}");
    assert!(text.contains("fs.deny[0] `./secret/**` (line 4)"), "{text}");
    assert!(text.contains("2 rules"), "{text}");
}

#[test]
fn an_exact_grant_on_a_directory_is_a_named_narrowing() {
    let plan = planned(
        r#"version = 1
[fs]
read = ["/usr"]
write = ["/dev/null"]
"#,
    );
    assert_eq!(
        plan.narrowings()
            .iter()
            .map(|n| (n.origin.key.as_str(), &n.kind))
            .collect::<Vec<_>>(),
        vec![("fs.read[0]", &NarrowingKind::DirectoryItself)]
    );
}
