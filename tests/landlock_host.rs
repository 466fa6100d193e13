//! The Ubuntu shape: a kernel booted without `bpf` in `lsm=` (as Ubuntu's, WSL2's and many
//! cloud images' are), where the BPF LSM cannot run and Landlock can. `bee check` must choose
//! the Landlock engine and name why the BPF LSM is out; `bee exec` must enforce a policy
//! under Landlock and report the kernel's denial; asking for the BPF LSM must be refused.
//!
//! Built only with `--features kernel-tests` and run by the VM matrix on the kernels it marks
//! Landlock-only (`cargo xtask vm test --kernel 7.x-landlock`, `cargo xtask test`). On a
//! kernel whose `lsm=` lists `bpf` these tests fail: they prove the choice `auto` makes where
//! the BPF LSM is absent.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions fail the test the same way"
)]

mod support;

use std::fs;
use std::path::Path;

use support::{Fixture, bee_in, code, stderr, stdout};

/// The active LSMs, as the kernel lists them.
fn active_lsms() -> String {
    fs::read_to_string("/sys/kernel/security/lsm").unwrap()
}

/// This kernel is of the shape these tests are for: Landlock active, the BPF LSM not.
fn assert_ubuntu_shape() {
    let lsms = active_lsms();
    let list: Vec<&str> = lsms.trim().split(',').collect();
    assert!(list.contains(&"landlock"), "Landlock is not active: {lsms}");
    assert!(!list.contains(&"bpf"), "the BPF LSM is active: {lsms}");
}

/// `bee exec [FLAGS] --policy POLICY -- /bin/busybox ARGS` in `f`'s workspace.
fn exec(f: &Fixture, flags: &[&str], policy: &Path, args: &[&str]) -> std::process::Output {
    let policy = policy.display().to_string();
    let mut argv = vec!["exec"];
    argv.extend_from_slice(flags);
    argv.extend_from_slice(&["--policy", &policy, "--", "/bin/busybox"]);
    argv.extend_from_slice(args);
    bee_in(&f.workspace, &argv)
}

#[test]
fn check_chooses_landlock_says_why_and_exits_0() {
    assert_ubuntu_shape();
    let f = Fixture::new();
    let o = bee_in(&f.root, &["check"]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(code(&o), 0, "{out}{err}");
    assert!(out.starts_with("engine: landlock (auto)"), "{out}{err}");
    // The BPF LSM's gate that fails is the list of active LSMs, and it says so.
    let gate = out
        .lines()
        .find(|l| l.contains("lsm-list"))
        .unwrap_or_default();
    assert!(gate.contains("FAIL"), "{out}");
    assert!(out.contains("BPF LSM enforcement NOT supported"), "{out}");
    assert!(out.contains("Landlock engine supported"), "{out}");
}

#[test]
fn exec_is_enforced_by_landlock_and_reports_the_denial() {
    assert_ubuntu_shape();
    let f = Fixture::new();
    let secret = f.secret.display().to_string();
    let script = format!("echo made > made.txt; /bin/busybox cat {secret}; echo after=$?");
    let o = exec(&f, &[], &f.policy, &["sh", "-c", &script]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(code(&o), 0, "{out}{err}");
    assert!(err.contains("bee: engine: landlock"), "{err}");
    // The write grant held, the secret did not leak, and the kernel's refusal was reported.
    assert_eq!(
        fs::read_to_string(f.workspace.join("made.txt")).unwrap(),
        "made\n"
    );
    assert!(!out.contains("s3cret"), "{out}{err}");
    assert!(!out.contains("after=0"), "{out}{err}");
    assert!(
        err.contains(&format!("bee: denied: open {secret} for read")),
        "{err}"
    );
    // A write outside the grants is refused too.
    let outside = f.root.join("outside.txt").display().to_string();
    let o = exec(
        &f,
        &[],
        &f.policy,
        &["sh", "-c", &format!("echo x > {outside}")],
    );
    assert_ne!(code(&o), 0, "{}", stderr(&o));
    assert!(!f.root.join("outside.txt").exists());
}

#[test]
fn asking_for_the_bpf_lsm_is_refused_with_69_and_nothing_runs() {
    assert_ubuntu_shape();
    let f = Fixture::new();
    let o = exec(&f, &["--engine", "bpf-lsm"], &f.policy, &["touch", "ran"]);
    assert_eq!(code(&o), 69, "{}", stderr(&o));
    assert!(!f.workspace.join("ran").exists());
}

/// A policy Landlock cannot express exactly is refused with the rule and the reason, before
/// anything runs: never a wider plan, never a silently narrower one.
#[test]
fn a_policy_landlock_cannot_express_is_refused_naming_the_rule() {
    assert_ubuntu_shape();
    let f = Fixture::new();
    let policy = f.root.join("named.toml");
    fs::write(
        &policy,
        format!(
            "version = 1\n[fs]\nread = [\"/bin/**\"]\nwrite = [\"{ws}/**\"]\n\
             deny = [\"{ws}/**/*.key\"]\n[exec]\nallow = [\"/bin/busybox\"]\n",
            ws = f.workspace.display()
        ),
    )
    .unwrap();
    let o = exec(&f, &[], &policy, &["touch", "ran"]);
    let policy = policy.display().to_string();
    let err = stderr(&o);
    assert_eq!(code(&o), 69, "{err}");
    // Why neither engine runs it: the BPF LSM is not active, and the rule Landlock cannot
    // express, by its key.
    assert!(err.contains("`bpf` not among active LSMs"), "{err}");
    assert!(
        err.contains(&format!(
            "the Landlock engine cannot enforce {policy} exactly"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("fs.deny[0] `{}/**/*.key`", f.workspace.display())),
        "{err}"
    );
    assert!(!f.workspace.join("ran").exists());
}

/// Where the BPF LSM is out, a name grant is enforced by the Landlock engine's network gate
/// (cgroup sock_addr programs, which need no BPF LSM): `bee check` says the gate loads, and a
/// query to any name server ends at the scope's resolver, which refuses an ungranted name and
/// reports it.
#[test]
fn a_name_grant_is_enforced_by_the_network_gate() {
    assert_ubuntu_shape();
    let f = Fixture::new();
    let o = bee_in(&f.root, &["check"]);
    let out = stdout(&o);
    assert!(out.contains("pass network-gate"), "{out}");
    let policy = f.root.join("names.toml");
    fs::write(
        &policy,
        format!(
            "version = 1\n[fs]\nread = [\"/bin/**\"]\nwrite = [\"{ws}/**\"]\n\
             [exec]\nallow = [\"/bin/busybox\"]\n\
             [[net.allow]]\nhost = \"granted.test\"\nports = [443]\nproto = \"tcp\"\n",
            ws = f.workspace.display()
        ),
    )
    .unwrap();
    let shown = policy.display().to_string();
    let o = bee_in(
        &f.workspace,
        &["validate", "--engine", "landlock", "--policy", &shown],
    );
    assert!(
        stderr(&o).contains("the network by the network gate"),
        "{}",
        stderr(&o)
    );
    let o = exec(
        &f,
        &[],
        &policy,
        &["nslookup", "leak.evil.test", "192.0.2.53"],
    );
    let err = stderr(&o);
    assert!(err.contains("bee: engine: landlock"), "{err}");
    assert!(
        err.contains("bee: denied: resolve leak.evil.test: no net.allow host rule names it"),
        "{}{err}",
        stdout(&o)
    );
}

#[test]
fn validate_says_landlock_enforces_the_policy_exactly() {
    assert_ubuntu_shape();
    let f = Fixture::new();
    let policy = f.policy.display().to_string();
    let o = bee_in(
        &f.workspace,
        &["validate", "--engine", "landlock", "--policy", &policy],
    );
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(code(&o), 0, "{out}{err}");
    // The report is a diagnostic: it goes to stderr.
    assert!(
        err.contains("landlock engine: enforces it exactly"),
        "{out}{err}"
    );
}
