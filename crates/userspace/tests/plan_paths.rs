//! The path automaton, per pattern kind: walking the plan gives the reference semantics.

mod plan_support;

use bee_common::{
    ACCESS_EXEC, ACCESS_READ, ACCESS_UNIX, ACCESS_WRITE, DEAD_STATE, SegmentAutomaton,
};
use bee_userspace::plan::{EnforcementPlan, Placement, PlanError};
use plan_support::*;

const R: u32 = ACCESS_READ;
const RW: u32 = ACCESS_READ | ACCESS_WRITE;

fn plan(p: &bee_core::CompiledPolicy) -> Result<EnforcementPlan, PlanError> {
    EnforcementPlan::new(p)
}

fn access(plan: &EnforcementPlan, path: &str) -> u32 {
    match plan.path_access(path) {
        Ok(a) => a,
        Err(e) => unreachable!("{path}: {e}"),
    }
}

#[test]
fn empty_policy_denies_everything() -> Result<(), PlanError> {
    let p = plan(&policy())?;
    assert_eq!(p.start_state(), DEAD_STATE);
    assert_eq!(access(&p, "/"), 0);
    assert_eq!(access(&p, "/etc/hosts"), 0);
    assert_eq!(p.stats(), Default::default());
    Ok(())
}

#[test]
fn exact() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/etc/hosts");
    let p = plan(&pol)?;
    assert_eq!(access(&p, "/etc/hosts"), R);
    assert_eq!(access(&p, "/etc"), 0);
    assert_eq!(access(&p, "/"), 0);
    assert_eq!(access(&p, "/etc/hosts/x"), 0);
    assert_eq!(access(&p, "/etc/hostsx"), 0);
    // `/`, `/etc`, `/etc/hosts`: no state for "anything else", that is the dead state.
    assert_eq!(p.stats().states, 3);
    assert_eq!(p.stats().edges_short, 2);
    Ok(())
}

#[test]
fn exact_root() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/");
    let p = plan(&pol)?;
    assert_eq!(access(&p, "/"), R);
    assert_eq!(access(&p, "/a"), 0);
    Ok(())
}

#[test]
fn subtree() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/usr/**");
    let p = plan(&pol)?;
    assert_eq!(access(&p, "/usr"), R);
    assert_eq!(access(&p, "/usr/bin/env"), R);
    assert_eq!(access(&p, "/usrx"), 0);
    assert_eq!(access(&p, "/"), 0);
    let mut pol = policy();
    read(&mut pol, "/**");
    let p = plan(&pol)?;
    assert_eq!(access(&p, "/"), R);
    assert_eq!(access(&p, "/a/b/c"), R);
    assert_eq!(p.stats().states, 1);
    Ok(())
}

#[test]
fn postfix() -> Result<(), PlanError> {
    let mut pol = policy();
    write(&mut pol, "/src/**/*.rs");
    let p = plan(&pol)?;
    assert_eq!(access(&p, "/src/main.rs"), RW);
    assert_eq!(access(&p, "/src/a/b/.rs"), RW);
    assert_eq!(access(&p, "/src/a.rs/b"), 0);
    assert_eq!(access(&p, "/src"), 0);
    assert_eq!(access(&p, "/src.rs"), 0);
    assert_eq!(access(&p, "/src/main.rsx"), 0);
    Ok(())
}

#[test]
fn segment() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/w/**/.git");
    let p = plan(&pol)?;
    assert_eq!(access(&p, "/w/.git"), R);
    assert_eq!(access(&p, "/w/a/b/.git"), R);
    assert_eq!(access(&p, "/w/.git/.git"), R);
    assert_eq!(access(&p, "/w/.git/config"), 0);
    assert_eq!(access(&p, "/w/x.git"), 0);
    assert_eq!(access(&p, "/w"), 0);
    Ok(())
}

#[test]
fn bounded_star() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/a/*/b");
    read(&mut pol, "/usr/lib/python3.*/**");
    let p = plan(&pol)?;
    assert_eq!(access(&p, "/a/x/b"), R);
    assert_eq!(access(&p, "/a/x/y/b"), 0);
    assert_eq!(access(&p, "/a/b"), 0);
    assert_eq!(access(&p, "/usr/lib/python3.11"), R);
    assert_eq!(access(&p, "/usr/lib/python3.11/os.py"), R);
    assert_eq!(access(&p, "/usr/lib/python2.7/os.py"), 0);
    Ok(())
}

#[test]
fn write_implies_read_and_bits_combine() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/home/u/**");
    write(&mut pol, "/home/u/proj/**");
    exec(&mut pol, "/home/u/proj/target/**", None);
    unix(&mut pol, "/run/user/1000/bus");
    let p = plan(&pol)?;
    assert_eq!(access(&p, "/home/u/.bashrc"), R);
    assert_eq!(access(&p, "/home/u/proj/src/lib.rs"), RW);
    assert_eq!(
        access(&p, "/home/u/proj/target/debug/bee"),
        RW | ACCESS_EXEC
    );
    assert_eq!(access(&p, "/run/user/1000/bus"), ACCESS_UNIX);
    assert_eq!(access(&p, "/home/v"), 0);
    Ok(())
}

/// A literal edge is determinised with the star and `**` moves the same segment triggers.
#[test]
fn literal_edges_include_glob_moves() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/src/*.rs");
    exec(&mut pol, "/src/build.rs", None);
    write(&mut pol, "/src/**/gen");
    let p = plan(&pol)?;
    assert_eq!(access(&p, "/src/build.rs"), R | ACCESS_EXEC);
    assert_eq!(access(&p, "/src/main.rs"), R);
    assert_eq!(access(&p, "/src/gen"), RW);
    assert_eq!(access(&p, "/src/x/gen"), RW);
    assert_eq!(access(&p, "/src/build.rs/gen"), RW);
    Ok(())
}

#[test]
fn several_globs_at_one_state_use_combos() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/d/*.rs");
    write(&mut pol, "/d/lib*");
    exec(&mut pol, "/d/*", None);
    let p = plan(&pol)?;
    assert_eq!(access(&p, "/d/x.rs"), R | ACCESS_EXEC);
    assert_eq!(access(&p, "/d/lib"), RW | ACCESS_EXEC);
    assert_eq!(access(&p, "/d/lib.rs"), RW | ACCESS_EXEC);
    assert_eq!(access(&p, "/d/x"), ACCESS_EXEC);
    assert_eq!(access(&p, "/d/x/y"), 0);
    assert_eq!(p.stats().globs, 3);
    // `*` is the last glob in byte order (`*` < `*.rs` < `lib*`): masks with `*`'s bit differ
    // from the default (dead); those without it are unsatisfiable but planned all the same.
    assert_eq!(p.stats().combos, 7);
    Ok(())
}

#[test]
fn long_segments_use_the_long_edge_map() -> Result<(), PlanError> {
    let long = "l".repeat(200);
    let max = "m".repeat(255);
    let mut pol = policy();
    read(&mut pol, &format!("/{long}/x"));
    read(&mut pol, &format!("/{max}"));
    let p = plan(&pol)?;
    assert_eq!(access(&p, &format!("/{long}/x")), R);
    assert_eq!(access(&p, &format!("/{max}")), R);
    assert_eq!(access(&p, &format!("/{long}x/x")), 0);
    assert_eq!(p.stats().edges_long, 2);
    assert_eq!(p.stats().edges_short, 1);
    Ok(())
}

#[test]
fn planning_is_deterministic() -> Result<(), PlanError> {
    let mut pol = policy();
    for t in [
        "/b/**",
        "/a/*.c",
        "/a/x",
        "/c/**/*.h",
        "/a/**/.git",
        "/a/*/y/**",
    ] {
        read(&mut pol, t);
    }
    write(&mut pol, "/a/x/**");
    assert_eq!(plan(&pol)?, plan(&pol)?);
    Ok(())
}

#[test]
fn relocation_moves_ids_and_keeps_the_language() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/src/**/*.rs");
    write(&mut pol, "/src/a*/**");
    exec(&mut pol, "/bin/sh", None);
    let local = plan(&pol)?;
    let at = Placement {
        policy_id: 7,
        state_base: 1000,
        glob_base: 50,
    };
    let moved = local.relocated(at)?;
    assert_eq!(moved.placement(), at);
    assert_eq!(moved.start_state(), local.start_state() + 1000);
    assert_eq!(moved.scope_value(1).policy_id, 7);
    let ids: Vec<u32> = moved.states().map(|(id, _)| id).collect();
    assert_eq!(ids.first(), Some(&1001));
    assert_eq!(ids.len(), local.stats().states);
    assert_eq!(moved.globs().next().map(|g| g.0), Some(50));
    assert!(moved.edges_short().keys().all(|k| k.state > 1000));
    assert!(moved.combos().keys().all(|k| k.group >= 50));
    for path in [
        "/src/a.rs",
        "/src/ab/c",
        "/src/ab/c.rs",
        "/bin/sh",
        "/src",
        "/x",
    ] {
        assert_eq!(access(&moved, path), access(&local, path), "{path}");
    }
    // The dead state stays 0.
    assert!(
        moved
            .states()
            .all(|(_, v)| v.default_next == 0 || v.default_next > 1000)
    );
    assert_eq!(moved.relocated(Placement::default())?, local);
    assert!(matches!(
        local.relocated(Placement {
            state_base: u32::MAX - 2,
            ..at
        }),
        Err(PlanError::IdOverflow { .. })
    ));
    Ok(())
}

#[test]
fn the_plan_is_a_segment_automaton() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/a");
    let p = plan(&pol)?;
    assert_eq!(p.state(0), None);
    assert!(p.state(p.start_state()).is_some());
    assert_eq!(p.edge(p.start_state(), b"a"), Some(2));
    assert_eq!(p.edge(p.start_state(), b"b"), None);
    Ok(())
}
