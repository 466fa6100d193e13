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

/// Where the network gate cannot be had.
fn no_gate() -> GateSupport {
    GateSupport::Unavailable("cgroup sock_addr programs refused (test)".to_owned())
}

fn refused(toml: &str) -> Vec<(String, Inexpressible)> {
    match LandlockPlan::new(&compile(toml), LandlockAbi(7), &no_gate()) {
        Ok(plan) => unreachable!("planned: {plan:?}"),
        Err(e) => e.rules.into_iter().map(|r| (r.origin.key, r.why)).collect(),
    }
}

/// Each narrowing of `plan`: its rule's key and its kind.
fn narrowed(plan: &LandlockPlan) -> Vec<(&str, &NarrowingKind)> {
    plan.narrowings()
        .iter()
        .map(|n| (n.origin.key.as_str(), &n.kind))
        .collect()
}

fn planned(toml: &str) -> LandlockPlan {
    match LandlockPlan::new(&compile(toml), LandlockAbi(7), &no_gate()) {
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

/// A pattern that matches by name below a root is walked by each call: exact where the
/// scope can create no match, with its new matches granted from the next call where it can;
/// a name (not a suffix) may be a directory's, which a file-by-file grant leaves out.
#[test]
fn name_patterns_are_walked_by_each_call() {
    let plan = planned(
        r#"version = 1
[fs]
read = ["./**/Cargo.toml", "./**/*.md"]
write = ["./.venv/lib/**"]
[exec]
allow = ["./.venv/lib/**/*.so", "./tools/**/bin/**"]
"#,
    );
    let walks: Vec<String> = plan
        .paths()
        .iter()
        .filter(|g| matches!(g.target, Target::Walk { .. }))
        .map(|g| g.target.to_string())
        .collect();
    assert_eq!(
        walks,
        [
            "/work/ws/**/Cargo.toml",
            "/work/ws/**/*.md",
            "/work/ws/.venv/lib/**/*.so",
            "/work/ws/tools/**/bin/**"
        ]
    );
    assert!(plan.rights_at("/work/ws/a/b/Cargo.toml").read);
    assert!(!plan.rights_at("/work/ws/a/b/Cargo.lock").read);
    assert!(plan.rights_at("/work/ws/.venv/lib/x/y.so").exec);
    assert!(plan.rights_at("/work/ws/tools/a/bin/run").exec);
    assert!(!plan.rights_at("/work/ws/tools/a/run").exec);
    // The read walks' roots hold the writable `.venv/lib`; the exec walk's root lies in it;
    // the tools tree is not writable.
    assert_eq!(
        narrowed(&plan),
        vec![
            ("fs.read[0]", &NarrowingKind::NewMatches),
            ("fs.read[0]", &NarrowingKind::DirectoryItself),
            ("fs.read[1]", &NarrowingKind::NewMatches),
            ("exec.allow[0]", &NarrowingKind::NewMatches),
        ]
    );
}

/// A carve-out that does not exist is exact only where the scope cannot create it: not below
/// a writable `*` tree or a writable tree a name pattern matches, any of whose matches may
/// hold it. One that no such match can hold is covered while it exists.
#[test]
fn a_missing_carve_out_below_a_writable_star_or_name_tree_is_refused() {
    let plan = planned(
        "version = 1\n[fs]\nwrite = [\"/tmp/claude-*/**\", \"./**/build/**\"]\n\
         deny = [\"/tmp/other/secret/**\", \"./x/src/secret/**\"]\n",
    );
    assert_eq!(plan.masks().len(), 2, "{:?}", plan.masks());
    for write in ["./*/**", "./**/build/**"] {
        let got = refused(&format!(
            "version = 1\n[fs]\nwrite = [{write:?}]\ndeny = [\"./x/build/secret/**\"]\n"
        ));
        assert_eq!(
            got,
            vec![(
                "fs.deny[0]".to_owned(),
                Inexpressible::Unmaskable {
                    grant: compile(&format!("version = 1\n[fs]\nwrite = [{write:?}]\n"))
                        .fs
                        .write[0]
                        .origin
                        .clone(),
                    why: "it does not exist, and the scope could create it where no mount covers it",
                }
            )],
            "{write}"
        );
    }
}

/// Carve-outs and protected paths are applied to each match of a walk granted file by file,
/// by the call, with no mount: `fs.deny` takes every right, `exec.deny` exec, a protected path
/// write (unless `fs.unprotect` lifts it there). A walk whose matches are trees is cut by
/// mounts like any tree, so a protected name that may lie in a writable one is refused.
#[test]
fn a_walk_granted_file_by_file_is_cut_match_by_match() {
    let plan = planned(
        r#"version = 2
[fs]
read = ["./**/*.env"]
write = ["./**/config", "./**/*.lock"]
deny = ["./**/.env"]
unprotect = ["./vendor/**"]
[exec]
allow = ["./**/*.sh"]
deny = ["./scripts/**"]
"#,
    );
    assert!(plan.masks().is_empty(), "{:?}", plan.masks());
    // Matches of a write pattern are written, not created or removed; a name may be a
    // directory's.
    assert_eq!(
        narrowed(&plan),
        vec![
            ("fs.write[0]", &NarrowingKind::DirectoryItself),
            ("fs.write[0]", &NarrowingKind::FileCreation),
            ("fs.write[1]", &NarrowingKind::FileCreation),
        ]
    );
    let at = |path: &str, rights: Rights| plan.cuts().iter().fold(rights, |r, c| c.apply(path, r));
    let rw = Rights::WRITE;
    assert_eq!(at("/work/ws/app/config", rw), rw);
    // `.git/config` is protected: readable, not writable, unless unprotected.
    assert_eq!(at("/work/ws/.git/config", rw), Rights::READ);
    assert_eq!(at("/work/ws/vendor/x/.git/config", rw), rw);
    assert_eq!(at("/work/ws/a/.env", Rights::READ), Rights::default());
    assert_eq!(at("/work/ws/a/prod.env", Rights::READ), Rights::READ);
    assert_eq!(at("/work/ws/build.sh", Rights::EXEC), Rights::EXEC);
    assert_eq!(
        at("/work/ws/scripts/build.sh", Rights::EXEC),
        Rights::default()
    );

    let got = refused(
        r#"version = 2
[fs]
write = ["./**/node_modules/**"]
"#,
    );
    assert!(
        got.iter().all(|(key, why)| key.starts_with("protected[")
            && matches!(why, Inexpressible::ProtectedInWritable { grant } if grant.key == "fs.write[0]")),
        "{got:?}"
    );
    assert_eq!(got.len(), 15);
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

/// `fs.unprotect` over a whole writable tree lifts the built-in set there (write ∖ (protect ∖
/// unprotect)), so nothing is left to keep read-only in it; a tree it covers only in part
/// still refuses.
#[test]
fn a_writable_tree_unprotected_whole_needs_no_protection_in_it() {
    for version in [2, 3] {
        let plan = planned(&format!(
            "version = {version}\n[fs]\nwrite = [\"./**\", \"/tmp/**\"]\nunprotect = [\"./**\", \"/tmp/**\"]\n"
        ));
        assert!(plan.masks().is_empty(), "{:?}", plan.masks());
        assert!(plan.rights_at("/work/ws/.git/hooks/pre-commit").write);
        let got = refused(&format!(
            "version = {version}\n[fs]\nwrite = [\"./**\"]\nunprotect = [\"./target/**\"]\n"
        ));
        assert!(
            got.iter().all(|(k, why)| k.starts_with("protected")
                && matches!(why, Inexpressible::ProtectedInWritable { grant } if grant.key == "fs.write[0]")),
            "{got:?}"
        );
        assert!(!got.is_empty());
    }
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

/// A refusal that only the gate would lift says why the gate is not there.
#[test]
fn a_refused_network_rule_names_the_missing_gate() {
    let policy = compile(
        "version = 1\n[[net.allow]]\nhost = [\"example.com\"]\nports = [443]\nproto = \"tcp\"\n",
    );
    let Err(e) = LandlockPlan::new(&policy, LandlockAbi(7), &no_gate()) else {
        unreachable!("planned without the gate")
    };
    assert_eq!(
        e.gate.as_deref(),
        Some("cgroup sock_addr programs refused (test)")
    );
    assert!(e.to_string().contains("network gate"), "{e}");
    // A refusal the gate would not lift does not mention it.
    let policy = compile("version = 1\n[net]\nunix = [\"/run/x.sock\"]\n");
    let Err(e) = LandlockPlan::new(&policy, LandlockAbi(7), &no_gate()) else {
        unreachable!("planned")
    };
    assert_eq!(e.gate, None);
}

/// With the gate, every network rule but a unix socket's is exact: the gate decides the
/// peers, and Landlock's port rules allow exactly the TCP ports some rule grants.
#[test]
fn the_gate_makes_addresses_udp_one_family_and_names_exact() {
    let policy = compile(
        r#"version = 1
[[net.allow]]
addr = ["127.0.0.1/32"]
ports = [8080]
proto = "tcp"
[[net.allow]]
addr = ["0.0.0.0/0"]
ports = [443]
proto = "tcp"
[[net.allow]]
host = ["example.com"]
ports = [8443, 9000]
proto = "tcp"
[[net.allow]]
addr = ["10.0.0.0/8"]
ports = [53]
proto = "udp"
"#,
    );
    let Ok(plan) = LandlockPlan::new(&policy, LandlockAbi(7), &GateSupport::Available) else {
        unreachable!("refused with the gate")
    };
    assert!(plan.gated());
    let ports: Vec<(u16, u16)> = plan
        .tcp_connect()
        .iter()
        .map(|r| (r.first, r.last))
        .collect();
    assert_eq!(
        ports,
        vec![
            (53, 53),
            (443, 443),
            (8080, 8080),
            (8443, 8443),
            (9000, 9000)
        ],
        "the granted TCP ports, and 53 for the resolver"
    );
    // Without a kernel's network rules the gate decides TCP alone.
    let Ok(plan) = LandlockPlan::new(&policy, LandlockAbi(3), &GateSupport::Available) else {
        unreachable!("refused with the gate on ABI 3")
    };
    assert!(plan.gated() && plan.tcp_connect().is_empty());
    // A policy Landlock decides alone does not load the gate.
    let plain = compile(
        "version = 1\n[[net.allow]]\naddr = [\"0.0.0.0/0\", \"::/0\"]\nports = [443]\nproto = \"tcp\"\n",
    );
    let Ok(plan) = LandlockPlan::new(&plain, LandlockAbi(7), &GateSupport::Available) else {
        unreachable!("refused")
    };
    assert!(!plan.gated());
    // Unix sockets stay refused: the gate decides IP peers only.
    let unix = compile("version = 1\n[net]\nunix = [\"/run/x.sock\"]\n");
    let Err(e) = LandlockPlan::new(&unix, LandlockAbi(7), &GateSupport::Available) else {
        unreachable!("planned a unix socket grant")
    };
    assert_eq!(e.rules[0].why, Inexpressible::UnixSocket);
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
    let Err(e) = LandlockPlan::new(&policy, LandlockAbi(3), &no_gate()) else {
        unreachable!("planned on ABI 3")
    };
    assert!(
        e.rules
            .iter()
            .all(|r| r.why == Inexpressible::NoNetworkRules { abi: 3 })
    );
    assert!(e.to_string().contains("ABI 4"), "{e}");
}

/// `/proc/self/**` is the private `/proc`; so is all of `/proc` (named); other `/proc` paths
/// are unreachable (named); no `/proc` path is writable.
#[test]
fn proc_self_and_all_of_proc_are_the_private_proc_and_other_proc_paths_are_named() {
    for (read, narrowed) in [
        (
            r#"["/proc/self/**", "/proc/sys/vm/overcommit_memory"]"#,
            NarrowingKind::ProcOutsideSelf,
        ),
        (r#"["/proc/**", "/usr/**"]"#, NarrowingKind::ProcPrivate),
    ] {
        let plan = planned(&format!("version = 1\n[fs]\nread = {read}\n"));
        assert!(plan.rights_at("/proc/self/status").read, "{read}");
        assert!(
            !plan.rights_at("/proc/sys/vm/overcommit_memory").read,
            "{read}"
        );
        let key = if narrowed == NarrowingKind::ProcPrivate {
            "fs.read[0]"
        } else {
            "fs.read[1]"
        };
        assert_eq!(
            plan.narrowings()
                .iter()
                .map(|n| (n.origin.key.as_str(), &n.kind))
                .collect::<Vec<_>>(),
            vec![(key, &narrowed)],
            "{read}"
        );
    }
    for write in ["/proc/self/**", "/proc/**"] {
        let got = refused(&format!("version = 1\n[fs]\nwrite = [{write:?}]\n"));
        assert_eq!(got[0].1, Inexpressible::ProcWrite, "{write}");
    }
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
        "version = 1\n[fs]\nread = [\"./**/*.py\"]\ndeny = [\"./secret/**\", \"./**/.env\"]\nwrite = [\"./**\"]\n",
    );
    let Err(e) = LandlockPlan::new(&policy, LandlockAbi(7), &no_gate()) else {
        unreachable!("planned")
    };
    let text = e.to_string();
    assert!(text.contains("fs.deny[0] `./secret/**` (line 4)"), "{text}");
    assert!(text.contains("fs.deny[1] `./**/.env` (line 4)"), "{text}");
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
        narrowed(&plan),
        vec![("fs.read[0]", &NarrowingKind::DirectoryItself)]
    );
}

/// A protected path that may lie in several writable trees is blamed on the policy file's own
/// tree before an included fragment's, and the refusal says it once per tree: every version 2
/// policy protects fifteen names at any depth, which would otherwise be fifteen lines each
/// naming the fragment.
#[test]
fn protected_names_in_a_writable_tree_name_the_users_tree_once() {
    let text = r#"version = 2
include = ["agent-claude-code"]
[fs]
read = ["./**"]
write = ["./**"]
"#;
    let err = match LandlockPlan::new(&compile(text), LandlockAbi(7), &no_gate()) {
        Ok(plan) => unreachable!("planned: {plan:?}"),
        Err(e) => e,
    };
    let in_tree: Vec<&str> = err
        .rules
        .iter()
        .filter_map(|r| match &r.why {
            Inexpressible::ProtectedInWritable { grant } => Some(grant.key.as_str()),
            _ => None,
        })
        .collect();
    assert!(in_tree.len() >= 15, "{in_tree:?}");
    assert!(in_tree.iter().all(|k| *k == "fs.write[0]"), "{in_tree:?}");
    let text = err.to_string();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("is writable, and"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].starts_with(&format!(
            "  fs.write[0] `./**` (line 5) is writable, and {} protected paths may lie inside it",
            in_tree.len()
        )),
        "{text}"
    );
    assert!(
        lines[0].contains("protected[0] `/**/.git`, protected[1]"),
        "{text}"
    );
    assert!(
        lines[0].contains("agent-claude-code:fs.protect[13] `./**/.claude/**`"),
        "{text}"
    );
    assert!(lines[0].ends_with("or use the bpf-lsm engine"), "{text}");
}
