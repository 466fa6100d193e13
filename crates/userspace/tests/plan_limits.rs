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
    let mut pol = policy();
    for i in 0..20 {
        read(&mut pol, &format!("/d/f{i}"));
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
