//! Every refusal: what the kernel matcher cannot hold is refused at planning, naming the rule.

mod plan_support;

use bee_core::compiled::FileId;
use bee_core::net::Protocol;
use bee_userspace::plan::{EnforcementPlan, PlanError, PlanLimits};
use plan_support::*;

fn refusal(p: &bee_core::CompiledPolicy, limits: &PlanLimits) -> PlanError {
    match EnforcementPlan::with_limits(p, limits) {
        Ok(plan) => unreachable!("planned: {:?}", plan.stats()),
        Err(e) => e,
    }
}

fn default_refusal(p: &bee_core::CompiledPolicy) -> PlanError {
    refusal(p, &PlanLimits::default())
}

#[test]
fn literal_segment_longer_than_name_max() {
    let mut pol = policy();
    read(&mut pol, "/ok/**");
    read(&mut pol, &format!("/a/{}", "x".repeat(256)));
    let e = default_refusal(&pol);
    assert!(
        matches!(&e, PlanError::SegmentTooLong { origin, len: 256 } if origin.key == "fs.read[1]"),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(msg.contains("`fs.read[1]` (line 1"), "{msg}");
    assert!(msg.contains("NAME_MAX"), "{msg}");
}

#[test]
fn star_segment_longer_than_the_glob_buffer() {
    let mut pol = policy();
    write(&mut pol, &format!("/a/*{}", "y".repeat(60)));
    let e = default_refusal(&pol);
    assert!(
        matches!(&e, PlanError::GlobTooLong { origin, glob } if origin.key == "fs.write[0]" && glob.len() == 61),
        "{e:?}"
    );
    // Postfix star segments count the leading `*` too.
    let mut pol = policy();
    read(&mut pol, &format!("/a/**/*{}", "y".repeat(60)));
    assert!(matches!(
        default_refusal(&pol),
        PlanError::GlobTooLong { .. }
    ));
    let mut pol = policy();
    read(&mut pol, &format!("/a/**/*{}", "y".repeat(59)));
    assert!(EnforcementPlan::new(&pol).is_ok());
}

#[test]
fn more_than_eight_globs_at_one_state() {
    let mut pol = policy();
    for i in 0..8 {
        read(&mut pol, &format!("/src/*.{i}"));
    }
    assert!(EnforcementPlan::new(&pol).is_ok());
    exec(&mut pol, "/src/*.x", None);
    let e = default_refusal(&pol);
    let PlanError::TooManyGlobs { at, globs, origins } = &e else {
        unreachable!("{e:?}");
    };
    assert_eq!(at, "/src");
    assert_eq!(globs.len(), 9);
    assert_eq!(origins.len(), 9);
    assert!(origins.iter().any(|o| o.key == "exec[0]"));
    assert!(e.to_string().contains("at most 8"), "{e}");
}

#[test]
fn globs_reaching_one_state_through_double_star_count_too() {
    // Five postfix rules at `/` and four bounded stars below `/p`: nine star segments at `/p`.
    let mut pol = policy();
    for i in 0..5 {
        read(&mut pol, &format!("/**/*.{i}"));
    }
    assert!(EnforcementPlan::new(&pol).is_ok());
    for i in 0..4 {
        read(&mut pol, &format!("/p/x{i}*"));
    }
    assert!(matches!(
        default_refusal(&pol),
        PlanError::TooManyGlobs { at, .. } if at == "/p"
    ));
}

#[test]
fn state_cap() {
    // Twenty directories, each a state of its own (each leads to another name); the files
    // are one state (they have the same effect): with the root, 22.
    let mut pol = policy();
    for i in 0..20 {
        read(&mut pol, &format!("/d{i}/f{i}"));
    }
    let limits = PlanLimits {
        max_states: 10,
        ..PlanLimits::default()
    };
    let e = refusal(&pol, &limits);
    let PlanError::TooLarge {
        what, cap, rules, ..
    } = &e
    else {
        unreachable!("{e:?}");
    };
    assert_eq!((*what, *cap), ("states", 10));
    assert!(!rules.is_empty() && rules.len() <= 3);
    assert!(e.to_string().contains("fs.read["), "{e}");
    let limits = PlanLimits {
        max_states: 22,
        ..PlanLimits::default()
    };
    assert!(EnforcementPlan::with_limits(&pol, &limits).is_ok());
}

#[test]
fn edge_glob_and_combo_caps() {
    let mut pol = policy();
    for i in 0..20 {
        read(&mut pol, &format!("/d/f{i}"));
    }
    for i in 0..4 {
        read(&mut pol, &format!("/g/*{i}"));
    }
    let cap = |f: fn(&mut PlanLimits)| {
        let mut limits = PlanLimits::default();
        f(&mut limits);
        refusal(&pol, &limits)
    };
    assert!(matches!(
        cap(|l| l.max_edges = 5),
        PlanError::TooLarge {
            what: "literal edges",
            ..
        }
    ));
    assert!(matches!(
        cap(|l| l.max_globs = 3),
        PlanError::TooLarge { what: "globs", .. }
    ));
    assert!(matches!(
        cap(|l| l.max_combos = 10),
        PlanError::TooLarge {
            what: "glob combos",
            ..
        }
    ));
}

#[test]
fn pinned_executables_must_be_exact() {
    let mut pol = policy();
    exec(&mut pol, "/usr/bin/*", Some(FileId { dev: 0x801, ino: 5 }));
    let e = default_refusal(&pol);
    assert!(
        matches!(&e, PlanError::PinNotExact { origin, pattern } if origin.key == "exec[0]" && pattern == "/usr/bin/*"),
        "{e:?}"
    );
}

#[test]
fn pinned_device_must_have_a_kernel_encoding() {
    let mut pol = policy();
    exec(
        &mut pol,
        "/usr/bin/git",
        Some(FileId {
            dev: 1 << 44,
            ino: 5,
        }),
    );
    assert!(matches!(
        default_refusal(&pol),
        PlanError::DeviceNotEncodable { origin, .. } if origin.key == "exec[0]"
    ));
}

#[test]
fn more_than_sixteen_port_rules_for_one_block() {
    let mut pol = policy();
    for i in 0..16 {
        net(&mut pol, "10.0.0.0/8", (i * 10, i * 10), &[Protocol::Tcp]);
    }
    assert!(EnforcementPlan::new(&pol).is_ok());
    // Adjacent and overlapping ranges merge: these add no rule.
    net(&mut pol, "10.0.0.0/8", (0, 0), &[Protocol::Tcp]);
    net(&mut pol, "10.0.0.0/8", (11, 12), &[Protocol::Tcp]);
    assert!(EnforcementPlan::new(&pol).is_ok());
    // A UDP rule on a new range in a nested block: 16 inherited + 1.
    net(&mut pol, "10.1.0.0/16", (5000, 5000), &[Protocol::Udp]);
    let e = default_refusal(&pol);
    let PlanError::TooManyPortRules {
        block,
        count,
        origins,
    } = &e
    else {
        unreachable!("{e:?}");
    };
    assert_eq!(block, "10.1.0.0/16");
    assert_eq!(*count, 17);
    assert!(origins.iter().any(|o| o.key == "net.allow[18]"));
    assert!(e.to_string().contains("at most 16"), "{e}");
}

#[test]
fn net_prefix_cap() {
    let mut pol = policy();
    for i in 0..10 {
        net(
            &mut pol,
            &format!("10.0.0.{i}"),
            (443, 443),
            &[Protocol::Tcp],
        );
    }
    let limits = PlanLimits {
        max_net_prefixes: 9,
        ..PlanLimits::default()
    };
    assert!(matches!(
        refusal(&pol, &limits),
        PlanError::TooManyNetPrefixes { count: 10, cap: 9 }
    ));
}

/// A twelve-line version 2 policy for a small Python project, written from the README's
/// policy section: three `**` patterns of its own beside version 2's fifteen protected ones.
/// The subset construction once needed over 262,144 literal edges for it; it plans small,
/// and decides as the policy says.
#[test]
fn a_python_projects_policy_with_segment_patterns_plans() {
    python_project(2);
}

/// The same policy at version 3, whose protected set is larger (lefthook's and husky's other
/// names, a postfix pattern for `*.code-workspace`): it plans small too, and its new entries
/// hold in the plan.
#[test]
fn a_python_projects_policy_plans_at_version_3() {
    let plan = python_project(3);
    let access = |p: &str| {
        plan.path_access(p)
            .unwrap_or_else(|e| unreachable!("{e:?}"))
    };
    let (r, wr) = (bee_common::ACCESS_READ, bee_common::ACCESS_WRITE);
    for planted in bee_core::protected::V3_PLANTED {
        for at in ["/srv/proj", "/srv/proj/app/__pycache__", "/tmp/x"] {
            let path = format!("{at}/{planted}");
            let got = access(&path);
            assert_eq!(got & (r | wr), r, "{path}: {got:#x}");
        }
    }
    assert_eq!(access("/tmp/x/lefthook.md") & wr, wr);
    assert_eq!(access("/srv/proj/app/__pycache__/x.pyc") & wr, wr);
}

/// Plans the Python project's policy at `version` and checks its decisions.
fn python_project(version: u32) -> EnforcementPlan {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let ws = dir.path().join("proj");
    std::fs::create_dir(&ws).unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::write(ws.join("team.toml"), "[fs]\nread = [\"/opt/team/**\"]\n")
        .unwrap_or_else(|e| unreachable!("{e}"));
    let text = format!(
        r#"version = {version}
include = ["base", "python", "./team.toml"]
[fs]
read  = ["./**"]
write = ["./.pytest_cache/**", "./**/__pycache__/**", "/tmp/**"]
deny  = ["./secrets/**", "./**/.env"]
[exec]
allow = ["/usr/bin/sh", "/usr/bin/dash", "./.venv/bin/python*", "./.venv/bin/pytest", "./.venv/lib/**/*.so"]
deny  = ["./**/*.sh"]
"#
    );
    std::fs::write(ws.join("p.toml"), text).unwrap_or_else(|e| unreachable!("{e}"));
    // The files are read from `ws`; the rules' base is a workspace outside /tmp, which the
    // policy makes writable whole.
    let base = std::path::PathBuf::from("/srv/proj");
    let options = bee_core::CompileOptions {
        base: base.clone(),
        home: Some(dir.path().join("home")),
    };
    let pol = bee_core::compile_file(&ws.join("p.toml"), &options)
        .unwrap_or_else(|e| unreachable!("{e:?}"))
        .policy;
    let plan = EnforcementPlan::new(&pol).unwrap_or_else(|e| unreachable!("{e}"));
    assert!(plan.states().count() < 200, "{}", plan.states().count());
    let w = base.display();
    let access = |p: &str| {
        plan.path_access(p)
            .unwrap_or_else(|e| unreachable!("{e:?}"))
    };
    let (r, wr, x) = (
        bee_common::ACCESS_READ,
        bee_common::ACCESS_WRITE,
        bee_common::ACCESS_EXEC,
    );
    for (path, want, not) in [
        (format!("{w}/app/main.py"), r, wr),
        (format!("{w}/app/__pycache__/main.pyc"), r | wr, 0),
        (format!("{w}/app/__pycache__/.git/hooks/pre-commit"), r, wr),
        (format!("{w}/.git/config"), r, wr),
        (format!("{w}/secrets/key"), 0, r | wr),
        (format!("{w}/app/.env"), 0, r | wr),
        (format!("{w}/.venv/bin/python3"), r | x, wr),
        (format!("{w}/.venv/lib/p/site/_x.so"), r | x, wr),
        (format!("{w}/.venv/lib/p/site/run.sh"), r, x),
        ("/tmp/a/b".to_owned(), r | wr, 0),
        ("/tmp/a/.git/hooks/x".to_owned(), r, wr),
        ("/opt/team/notes".to_owned(), r, wr),
    ] {
        let got = access(&path);
        assert_eq!(got & want, want, "{path}: {got:#x}");
        assert_eq!(got & not, 0, "{path}: {got:#x}");
    }
    plan
}

/// A refusal for size names the policy's own rules first: the built-in protected paths are
/// in every state of a writable tree, but their author cannot change them.
#[test]
fn a_refusal_for_size_names_the_authors_rules_before_built_in_ones() {
    let mut pol = policy();
    for (i, p) in ["/**/.git/hooks/**", "/**/.husky/**", "/**/.bee/**"]
        .iter()
        .enumerate()
    {
        pol.fs
            .protect
            .push(path_rule(&format!("protected[{i}]"), p));
    }
    write(&mut pol, "/w/**");
    for i in 0..40 {
        read(&mut pol, &format!("/w/d{i}/f{i}"));
    }
    let limits = PlanLimits {
        max_states: 20,
        ..PlanLimits::default()
    };
    let e = refusal(&pol, &limits);
    let PlanError::TooLarge { rules, .. } = &e else {
        unreachable!("{e:?}");
    };
    let first = rules.first().map(|r| r.origin.key.as_str());
    assert!(
        first.is_some_and(|k| k.starts_with("fs.")),
        "{first:?} in {e}"
    );
    assert!(!e.to_string().starts_with("protected"), "{e}");
}

/// Sixteen `**/NAME` carve-outs beside exec patterns and version 2's protected set: every
/// carve-out's end is one class (a carve-out takes the pinned-exec bit away too, which once
/// made each of them a class of its own, and the policy over 262,144 edges).
#[test]
fn many_segment_carve_outs_plan() {
    for version in [2, 3] {
        many_segment_carve_outs(version);
    }
}

/// The policy of [`many_segment_carve_outs_plan`] at `version`.
fn many_segment_carve_outs(version: u32) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let text = format!(
        r#"version = {version}
[fs]
read = ["./**", "/usr/**", "/lib/**", "/lib64/**", "/etc/**"]
write = ["./**", "/tmp/**", "/dev/null"]
deny = ["./**/.env", "./**/.env.local", "./**/*.pem", "./**/*.key", "./**/id_rsa", "./**/secrets/**", "./**/.aws/**", "./**/.ssh/**", "./**/credentials.json", "./**/.npmrc", "./**/.netrc", "./**/.env.production", "./**/id_ed25519", "./**/.gnupg/**", "./**/*.p12", "./**/.pypirc"]
[exec]
allow = ["/usr/bin/*", "/usr/lib/**", "/lib64/**", "./.venv/bin/*", "./**/*.sh", "./**/bin/**"]
deny = ["./**/__pycache__/**", "./**/.git/**", "./**/node_modules/**"]
"#
    );
    let options = bee_core::CompileOptions {
        base: std::path::PathBuf::from("/srv/proj"),
        home: Some(dir.path().to_owned()),
    };
    let pol = bee_core::compile_str("p.toml", &text, &options)
        .unwrap_or_else(|e| unreachable!("{e:?}"))
        .policy;
    let plan = EnforcementPlan::new(&pol).unwrap_or_else(|e| unreachable!("{e}"));
    assert!(plan.states().count() < 200, "{}", plan.states().count());
    let access = |p: &str| {
        plan.path_access(p)
            .unwrap_or_else(|e| unreachable!("{e:?}"))
    };
    let (r, w) = (bee_common::ACCESS_READ, bee_common::ACCESS_WRITE);
    assert_eq!(access("/srv/proj/a/secrets/.ssh/x") & (r | w), 0);
    assert_eq!(access("/srv/proj/a/.pypirc") & (r | w), 0);
    assert_eq!(access("/srv/proj/a/b.txt") & (r | w), r | w);
    assert_eq!(access("/srv/proj/.git/hooks/pre-commit") & w, 0);
}
