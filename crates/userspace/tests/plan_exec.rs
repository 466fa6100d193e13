//! Pinned executables: exec-pin entries keyed by the state the pinned path ends in.

mod plan_support;

use bee_common::{ACCESS_EXEC, ACCESS_EXEC_PINNED, ACCESS_READ, ExecPinKey, walk_state};
use bee_core::compiled::FileId;
use bee_userspace::plan::{EnforcementPlan, Placement, PlanError, kernel_dev};
use plan_support::*;

const SDA1: u64 = 0x801;

fn state(plan: &EnforcementPlan, path: &str) -> u32 {
    match walk_state(plan, plan.start_state(), path.as_bytes()) {
        Ok(s) => s,
        Err(e) => unreachable!("{path}: {e}"),
    }
}

#[test]
fn a_pin_names_the_state_its_path_ends_in() -> Result<(), PlanError> {
    let mut pol = policy();
    read(&mut pol, "/usr/**");
    exec(
        &mut pol,
        "/usr/bin/git",
        Some(FileId { dev: SDA1, ino: 42 }),
    );
    let plan = EnforcementPlan::new(&pol)?;
    let git = state(&plan, "/usr/bin/git");
    assert_eq!(
        plan.path_access("/usr/bin/git"),
        Ok(ACCESS_READ | ACCESS_EXEC_PINNED)
    );
    let key = ExecPinKey {
        state: git,
        dev: 8 << 20 | 1,
        ino: 42,
    };
    assert_eq!(plan.exec_pins().get(&key), Some(&0));
    assert_eq!(plan.exec_pins().len(), 1);
    // No other path reaches the pinned state.
    for other in [
        "/usr/bin/gitx",
        "/usr/bin",
        "/usr/bin/git/x",
        "/usr/git",
        "/usr/bin/sh",
    ] {
        assert_ne!(state(&plan, other), git, "{other}");
        assert_eq!(plan.path_access(other), Ok(ACCESS_READ), "{other}");
    }
    Ok(())
}

#[test]
fn pinned_and_unpinned_exec_combine() -> Result<(), PlanError> {
    let mut pol = policy();
    exec(&mut pol, "/usr/bin/**", None);
    exec(
        &mut pol,
        "/usr/bin/git",
        Some(FileId { dev: SDA1, ino: 42 }),
    );
    let plan = EnforcementPlan::new(&pol)?;
    assert_eq!(
        plan.path_access("/usr/bin/git"),
        Ok(ACCESS_EXEC | ACCESS_EXEC_PINNED)
    );
    assert_eq!(plan.path_access("/usr/bin/ls"), Ok(ACCESS_EXEC));
    Ok(())
}

#[test]
fn hard_links_pinned_under_two_paths_get_two_entries() -> Result<(), PlanError> {
    let id = FileId { dev: SDA1, ino: 7 };
    let mut pol = policy();
    exec(&mut pol, "/usr/bin/python3", Some(id));
    exec(&mut pol, "/usr/bin/python3.11", Some(id));
    let plan = EnforcementPlan::new(&pol)?;
    let a = state(&plan, "/usr/bin/python3");
    let b = state(&plan, "/usr/bin/python3.11");
    assert_ne!(a, b);
    let states: Vec<u32> = plan.exec_pins().keys().map(|k| k.state).collect();
    assert_eq!(states, vec![a.min(b), a.max(b)]);
    Ok(())
}

#[test]
fn relocation_moves_pins() -> Result<(), PlanError> {
    let mut pol = policy();
    exec(&mut pol, "/bin/sh", Some(FileId { dev: SDA1, ino: 9 }));
    let plan = EnforcementPlan::new(&pol)?;
    let moved = plan.relocated(Placement {
        policy_id: 3,
        state_base: 100,
        glob_base: 0,
    })?;
    let sh = state(&moved, "/bin/sh");
    assert!(sh > 100);
    let key = ExecPinKey {
        state: sh,
        dev: 8 << 20 | 1,
        ino: 9,
    };
    assert_eq!(moved.exec_pins().get(&key), Some(&3));
    Ok(())
}

#[test]
fn kernel_dev_encoding() {
    assert_eq!(kernel_dev(0x801), Some(0x80_0001));
    // glibc makedev(3, 0x102) = 0x100302.
    assert_eq!(kernel_dev(0x10_0302), Some((3 << 20) | 0x102));
    assert_eq!(kernel_dev(u64::MAX), None);
}
