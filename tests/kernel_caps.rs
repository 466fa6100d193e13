//! bee with exactly the capabilities it needs, and with each of them missing, on a kernel that
//! enforces (`docs/enforcement.md`, "Privileges").
//!
//! The test process runs as root and plays the operator: it delegates the bee cgroup and the
//! pin directory to a non-root user where a case needs it, then starts `bee` through a small
//! `pre_exec` helper that sets the uid and the capability sets (permitted, effective,
//! inheritable, ambient and, for uid 0, bounding) to exactly the ones under test. Each case
//! first proves the helper did what it says (`/proc/self/status` of a helper-started `cat`).
//! `bee exec` and `bee run` (of the bundled demo) are refused with 77 alike when a privilege is
//! missing, before they start a command or an episode.
//!
//! Built only with `--features kernel-tests` and run in the VM matrix (`cargo xtask test`, or
//! `cargo xtask vm test -p bee --test kernel_caps --bin target/debug/bee`): on a host whose
//! kernel cannot run BPF LSM programs, or without root, these tests fail; they never skip.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions fail the test the same way"
)]

mod support;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{Fixture, code, text};

/// The non-root user bee runs as (no user database needed: ids are numbers).
const USER: u32 = 1000;

const CAP_SETGID: u32 = 6;
const CAP_SETUID: u32 = 7;
const CAP_SETPCAP: u32 = 8;
const CAP_SYSLOG: u32 = 34;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

const CGROUP_PARENT: &str = "/sys/fs/cgroup/bee";
const SESSION: &str = "/sys/fs/cgroup/bee/caps-session";
const PIN_ROOT: &str = "/sys/fs/bpf/bee";

fn cap_name(cap: u32) -> &'static str {
    match cap {
        CAP_SETGID => "CAP_SETGID",
        CAP_SETUID => "CAP_SETUID",
        CAP_SETPCAP => "CAP_SETPCAP",
        CAP_SYSLOG => "CAP_SYSLOG",
        CAP_PERFMON => "CAP_PERFMON",
        CAP_BPF => "CAP_BPF",
        _ => panic!("no name for capability {cap}"),
    }
}

fn mask(caps: &[u32]) -> u64 {
    caps.iter().fold(0, |m, c| m | (1u64 << c))
}

/// How bee is started.
#[derive(Debug, Clone)]
struct Who {
    /// `Some(uid)`: switch to that uid; `None`: stay uid 0 (bounding set cut to `caps`).
    uid: Option<u32>,
    /// The capabilities bee holds (permitted, effective, inheritable, ambient).
    caps: Vec<u32>,
    /// Set `SUDO_UID`/`SUDO_GID` to [`USER`] (bee as root through sudo).
    sudo: bool,
    /// Start bee in the delegated session cgroup ([`SESSION`]).
    in_session: bool,
}

impl Who {
    fn without(&self, cap: u32) -> Self {
        let mut w = self.clone();
        w.caps.retain(|&c| c != cap);
        w
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

fn last_cap() -> u32 {
    fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .expect("read cap_last_cap")
        .trim()
        .parse()
        .expect("parse cap_last_cap")
}

/// A command started as `who`: between fork and exec (raw system calls only) join the session
/// cgroup, cut the bounding set (uid 0) or switch uid keeping the permitted set (others), then
/// set permitted, effective and inheritable to `who.caps` and raise them as ambient, so that
/// they survive `execve` of a file without file capabilities.
fn command_as(who: &Who, program: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_remove("SUDO_UID").env_remove("SUDO_GID");
    if who.sudo {
        cmd.env("SUDO_UID", USER.to_string())
            .env("SUDO_GID", USER.to_string());
    }
    let session = who.in_session.then(|| {
        fs::OpenOptions::new()
            .write(true)
            .open(Path::new(SESSION).join("cgroup.procs"))
            .expect("open the session's cgroup.procs")
    });
    let session_fd = session.as_ref().map(|f| f.as_raw_fd());
    let m = mask(&who.caps);
    let uid = who.uid;
    let last = last_cap();
    // SAFETY: the closure makes only raw system calls on values captured by copy, and the
    // `File` behind `session_fd` is kept alive by the closure until the command is spawned.
    unsafe {
        cmd.pre_exec(move || {
            let _keep = &session;
            let check = |rc: libc::c_long| {
                if rc < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            };
            if let Some(fd) = session_fd {
                check(libc::write(fd, b"0".as_ptr().cast(), 1) as libc::c_long)?;
            }
            match uid {
                None => {
                    for cap in 0..=last {
                        if m & (1u64 << cap) == 0 {
                            check(
                                libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0)
                                    as libc::c_long,
                            )?;
                        }
                    }
                }
                Some(uid) => {
                    check(libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) as libc::c_long)?;
                    check(libc::syscall(
                        libc::SYS_setgroups,
                        0 as libc::size_t,
                        std::ptr::null::<libc::gid_t>(),
                    ))?;
                    check(libc::syscall(libc::SYS_setresgid, uid, uid, uid))?;
                    check(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
                }
            }
            let mut header = CapHeader {
                version: CAPABILITY_VERSION_3,
                pid: 0,
            };
            let (lo, hi) = (m as u32, (m >> 32) as u32);
            let data = [
                CapData {
                    effective: lo,
                    permitted: lo,
                    inheritable: lo,
                },
                CapData {
                    effective: hi,
                    permitted: hi,
                    inheritable: hi,
                },
            ];
            check(libc::syscall(
                libc::SYS_capset,
                &mut header as *mut CapHeader,
                data.as_ptr(),
            ))?;
            for cap in 0..=last {
                if m & (1u64 << cap) != 0 {
                    check(libc::prctl(
                        libc::PR_CAP_AMBIENT,
                        libc::PR_CAP_AMBIENT_RAISE,
                        cap as libc::c_ulong,
                        0,
                        0,
                    ) as libc::c_long)?;
                }
            }
            Ok(())
        });
    }
    cmd
}

fn status_field(status: &str, field: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("no {field} in\n{status}"))
        .trim()
        .to_owned()
}

/// Proves the helper: a `cat /proc/self/status` started as `who` has exactly `who.caps`
/// effective (and, as uid 0, bounding) and the expected uid.
fn assert_helper_sets(who: &Who) {
    let o = command_as(who, "/bin/cat")
        .arg("/proc/self/status")
        .output()
        .expect("run cat through the helper");
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let status = text(&o.stdout);
    let want = format!("{:016x}", mask(&who.caps));
    assert_eq!(status_field(&status, "CapEff:"), want, "{status}");
    assert_eq!(status_field(&status, "CapPrm:"), want, "{status}");
    let uid = who.uid.unwrap_or(0);
    let uids = status_field(&status, "Uid:");
    assert!(
        uids.split_whitespace().all(|u| u == uid.to_string()),
        "{uids}"
    );
    if who.uid.is_none() {
        assert_eq!(status_field(&status, "CapBnd:"), want, "{status}");
    }
}

/// The operator's preparation for a non-root bee: the bee cgroup (with a session cgroup bee
/// runs in) and the pin directory delegated to `uid`; given back to root on drop.
struct Delegation;

fn delegate_files() -> Vec<PathBuf> {
    let parent = Path::new(CGROUP_PARENT);
    let session = Path::new(SESSION);
    let mut files = vec![PathBuf::from(PIN_ROOT)];
    for dir in [parent, session] {
        files.push(dir.to_owned());
        for f in ["cgroup.procs", "cgroup.subtree_control", "cgroup.threads"] {
            files.push(dir.join(f));
        }
    }
    files
}

fn own(uid: u32) {
    fs::create_dir_all(SESSION).expect("mkdir the session cgroup");
    fs::create_dir_all(PIN_ROOT).expect("mkdir the pin root");
    for f in delegate_files() {
        chown(&f, Some(uid), Some(uid)).unwrap_or_else(|e| panic!("chown {}: {e}", f.display()));
    }
}

impl Delegation {
    fn to(uid: u32) -> Self {
        own(uid);
        Delegation
    }

    /// Root owns everything (the state a root-uid bee without CAP_DAC_OVERRIDE needs).
    fn root() -> Self {
        own(0);
        Delegation
    }
}

impl Drop for Delegation {
    fn drop(&mut self) {
        for f in delegate_files() {
            let _ = chown(&f, Some(0), Some(0));
        }
    }
}

/// Scope cgroups below the bee parent (the session aside) and instance directories under the
/// pin root: what a refused run must not leave behind.
fn leftovers() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (root, dirs_only) in [(CGROUP_PARENT, true), (PIN_ROOT, false)] {
        let Ok(entries) = fs::read_dir(root) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if (dirs_only && !p.is_dir()) || p == Path::new(SESSION) {
                continue;
            }
            found.insert(p.display().to_string());
        }
    }
    found
}

/// Fails if a scope cgroup or pin directory exists that was not in `before`. Entries of
/// `before` may go: a stale instance of an earlier test binary is removed by the next engine
/// load, as it should be.
fn assert_nothing_left(before: &BTreeSet<String>) {
    let after = leftovers();
    let new: Vec<_> = after.difference(before).collect();
    assert!(new.is_empty(), "a scope or pin was left behind: {new:?}");
}

/// The shared [`Fixture`], owned by `owner`; with `shared`, the top directory is writable by
/// all (a uid-0 bee without CAP_DAC_OVERRIDE writes its audit log into a directory of the sudo
/// caller).
fn fixture(owner: u32, shared: bool) -> Fixture {
    let f = Fixture::new();
    for p in [
        &f.root,
        &f.workspace,
        &f.workspace.join("notes.txt"),
        &f.secret,
        &f.policy,
    ] {
        chown(p, Some(owner), Some(owner)).unwrap();
    }
    if shared {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(&f.root, fs::Permissions::from_mode(0o777)).unwrap();
    }
    f
}

/// Who owns the workspace: the user the commands run as.
fn command_owner(who: &Who) -> u32 {
    match (who.uid, who.sudo) {
        (Some(uid), _) => uid,
        (None, true) => USER,
        (None, false) => 0,
    }
}

fn bee(who: &Who, f: &Fixture, args: &[impl AsRef<OsStr>]) -> Output {
    command_as(who, env!("CARGO_BIN_EXE_bee"))
        .args(args)
        .current_dir(&f.root)
        .env("HOME", &f.root)
        .output()
        .expect("run bee")
}

/// With exactly `who.caps`, `bee check` passes and `bee exec` enforces: an allowed read works
/// (and the command runs as `command_uid`), a denied one fails with the kernel's EPERM, the
/// denial line and an audit record; nothing is left behind.
fn assert_enforces(who: &Who, command_uid: u32) {
    assert_helper_sets(who);
    let f = fixture(command_owner(who), who.sudo);
    let before = leftovers();

    let o = bee(who, &f, &["check"]);
    let out = text(&o.stdout);
    assert_eq!(code(&o), 0, "{out}{}", text(&o.stderr));
    assert!(out.contains("pass capabilities"), "{out}");
    assert!(out.contains("pass lsm-probe"), "{out}");
    // The directory cache needs rename_lock's address, which /proc/kallsyms shows only with
    // CAP_SYSLOG: without it the programs load with the cache compiled out, and check says why.
    let programs = out
        .lines()
        .find(|l| l.contains("pass programs"))
        .unwrap_or_else(|| panic!("no passing programs gate:\n{out}"));
    if who.caps.contains(&CAP_SYSLOG) {
        assert!(!programs.contains("compiled out"), "{programs}");
    } else {
        assert!(
            programs.contains("directory cache compiled out")
                && programs.contains("rename_lock has no known address"),
            "{programs}"
        );
    }

    let policy = f.policy.display().to_string();
    let notes = f.workspace.join("notes.txt").display().to_string();
    let o = bee(
        who,
        &f,
        &[
            "exec",
            "--policy",
            &policy,
            "--",
            "/bin/sh",
            "-c",
            &format!("id -u && cat {notes}"),
        ],
    );
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        format!("{command_uid}\nhello from the workspace\n")
    );

    let audit = f.root.join("audit.jsonl");
    let o = bee(who, &f, &f.read_secret_args(&audit));
    f.assert_secret_read_denied(&o, &audit);
    let err = text(&o.stderr);
    assert!(err.contains("Operation not permitted"), "{err}");
    assert_nothing_left(&before);
}

/// With `missing` taken away from `who.caps`: `bee check` fails the capabilities gate naming
/// it (and the LSM probe too when `kernel_refuses`, i.e. the kernel itself needs it); `bee
/// exec` exits 77 naming it, never starts the command, and leaves no cgroup or pin.
fn assert_refused_without(who: &Who, missing: u32, kernel_refuses: bool) {
    let who = who.without(missing);
    assert_helper_sets(&who);
    let name = cap_name(missing);
    let f = fixture(command_owner(&who), who.sudo);
    let before = leftovers();

    let o = bee(&who, &f, &["check"]);
    let out = text(&o.stdout);
    assert_eq!(code(&o), 65, "{out}{}", text(&o.stderr));
    let gate = out
        .lines()
        .find(|l| l.contains("FAIL capabilities"))
        .unwrap_or_else(|| panic!("no failed capabilities gate:\n{out}"));
    assert!(gate.contains(&format!("lacks {name} ")), "{out}");
    let probe = if kernel_refuses {
        "FAIL lsm-probe"
    } else {
        "pass lsm-probe"
    };
    assert!(out.contains(probe), "without {name}: {out}");

    let ran = f.workspace.join("ran");
    let policy = f.policy.display().to_string();
    let o = bee(
        &who,
        &f,
        &[
            "exec",
            "--policy",
            &policy,
            "--",
            "/bin/touch",
            &ran.display().to_string(),
        ],
    );
    let err = text(&o.stderr);
    assert_eq!(code(&o), 77, "without {name}: {err}");
    assert!(
        err.contains("lacks the capabilities enforcement needs; `/bin/touch` was not run"),
        "{err}"
    );
    assert!(err.contains(&format!("lacks {name} ")), "{err}");
    assert!(err.contains("fix: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!ran.exists(), "the command ran without {name}");
    assert_nothing_left(&before);
}

/// The bundled example (`examples/demo/`), compiled in: the test binary runs in a guest that
/// has no copy of the repository.
const DEMO: [(&str, &str); 9] = [
    (
        "scenario.toml",
        include_str!("../examples/demo/scenario.toml"),
    ),
    ("policy.toml", include_str!("../examples/demo/policy.toml")),
    (
        "provider.toml",
        include_str!("../examples/demo/provider.toml"),
    ),
    (
        "recording.jsonl",
        include_str!("../examples/demo/recording.jsonl"),
    ),
    (
        "crate/Cargo.toml",
        include_str!("../examples/demo/crate/Cargo.toml"),
    ),
    (
        "crate/Cargo.lock",
        include_str!("../examples/demo/crate/Cargo.lock"),
    ),
    (
        "crate/NOTES.md",
        include_str!("../examples/demo/crate/NOTES.md"),
    ),
    (
        "crate/src/lib.rs",
        include_str!("../examples/demo/crate/src/lib.rs"),
    ),
    (
        "crate/.cargo/config.toml",
        include_str!("../examples/demo/crate/.cargo/config.toml"),
    ),
];

/// `bee run` of the bundled example as `who`, written into `f.root/demo` and owned by the
/// user commands run as, with records under `f.root/records` and workspace copies under
/// `f.root/tmp` (`TMPDIR`): where a started episode would leave its traces.
fn run_demo(who: &Who, f: &Fixture) -> Output {
    let owner = command_owner(who);
    let demo = f.root.join("demo");
    let tmp = f.root.join("tmp");
    for (name, content) in DEMO {
        let path = demo.join(name);
        let dir = path.parent().expect("a parent");
        fs::create_dir_all(dir).unwrap();
        fs::write(&path, content).unwrap();
        for p in [&path, dir, &demo] {
            chown(p, Some(owner), Some(owner)).unwrap();
        }
    }
    fs::create_dir(&tmp).unwrap();
    chown(&tmp, Some(owner), Some(owner)).unwrap();
    let records = f.root.join("records").display().to_string();
    command_as(who, env!("CARGO_BIN_EXE_bee"))
        .args(["run", "--scenario", "demo/scenario.toml"])
        .args(["--provider", "demo/provider.toml", "--records", &records])
        .current_dir(&f.root)
        .env("HOME", &f.root)
        .env("TMPDIR", &tmp)
        .output()
        .expect("run bee")
}

/// Asserts that `o`, a [`run_demo`], was refused with 77 before any episode started: a first
/// line saying so, every one of `facts` and a fix on stderr, no records, no workspace copy,
/// and no scope or pin beyond those `before` listed.
fn assert_run_refused(o: &Output, f: &Fixture, facts: &[&str], before: &BTreeSet<String>) {
    let err = text(&o.stderr);
    assert_eq!(code(o), 77, "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("bee run: ")
            && first.ends_with("; no episode was started, no model was called"),
        "{err}"
    );
    for fact in facts {
        assert!(err.contains(fact), "no {fact:?} in\n{err}");
    }
    assert!(err.contains("fix: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!f.root.join("records").exists(), "an episode was recorded");
    let copies: Vec<_> = fs::read_dir(f.root.join("tmp")).unwrap().collect();
    assert!(copies.is_empty(), "a workspace was copied: {copies:?}");
    assert_nothing_left(before);
}

fn non_root() -> Who {
    Who {
        uid: Some(USER),
        caps: vec![CAP_BPF, CAP_PERFMON],
        sudo: false,
        in_session: true,
    }
}

fn root_uid() -> Who {
    Who {
        uid: None,
        caps: vec![CAP_BPF, CAP_PERFMON, CAP_SETPCAP],
        sudo: false,
        in_session: false,
    }
}

fn sudo() -> Who {
    Who {
        uid: None,
        caps: vec![CAP_BPF, CAP_PERFMON, CAP_SETGID, CAP_SETUID],
        sudo: true,
        in_session: false,
    }
}

#[test]
fn non_root_user_with_cap_bpf_and_cap_perfmon_enforces() {
    let _d = Delegation::to(USER);
    assert_enforces(&non_root(), USER);
}

/// CAP_SYSLOG is optional: with it the directory cache is on as well.
#[test]
fn non_root_user_with_cap_syslog_too_enforces_with_the_directory_cache() {
    let _d = Delegation::to(USER);
    let mut who = non_root();
    who.caps.push(CAP_SYSLOG);
    assert_enforces(&who, USER);
}

#[test]
fn non_root_user_without_cap_bpf_or_cap_perfmon_is_refused() {
    let _d = Delegation::to(USER);
    for cap in [CAP_BPF, CAP_PERFMON] {
        assert_refused_without(&non_root(), cap, true);
    }
}

#[test]
fn non_root_user_outside_the_delegated_cgroup_is_refused() {
    let _d = Delegation::to(USER);
    let who = Who {
        in_session: false,
        ..non_root()
    };
    let f = fixture(USER, false);
    let before = leftovers();
    let ran = f.workspace.join("ran");
    let policy = f.policy.display().to_string();
    let o = bee(
        &who,
        &f,
        &[
            "exec",
            "--policy",
            &policy,
            "--",
            "/bin/touch",
            &ran.display().to_string(),
        ],
    );
    let err = text(&o.stderr);
    assert_eq!(code(&o), 77, "{err}");
    assert!(
        err.contains("whose cgroup.procs this process may not write"),
        "{err}"
    );
    assert!(err.contains("`/bin/touch` was not run"), "{err}");
    assert!(!ran.exists(), "the command ran");
    assert_nothing_left(&before);

    // `bee run` asks the same before its first episode: the engine loads, the cgroup refuses.
    let o = run_demo(&who, &f);
    assert_run_refused(
        &o,
        &f,
        &[
            "whose cgroup.procs this process may not write",
            "fix: as root, delegate the bee cgroup",
        ],
        &before,
    );
}

/// The demo's policy grants a name (`static.crates.io`): with every capability enforcement
/// needs but CAP_NET_ADMIN, `bee run` refuses it with 77 before any episode, as `bee exec` does.
#[test]
fn bee_run_of_the_demo_without_cap_net_admin_exits_77_before_any_episode() {
    let _d = Delegation::root();
    let who = root_uid();
    assert_helper_sets(&who);
    let f = fixture(command_owner(&who), false);
    let before = leftovers();
    let o = run_demo(&who, &f);
    assert_run_refused(
        &o,
        &f,
        &[
            "bee run: the policy grants names, and this process cannot enforce them",
            "lacks CAP_NET_ADMIN",
        ],
        &before,
    );
}

#[test]
fn bee_run_of_the_demo_without_a_capability_exits_77_before_any_episode() {
    let cases = [
        (non_root(), CAP_BPF),
        (non_root(), CAP_PERFMON),
        (root_uid(), CAP_SETPCAP),
    ];
    for (who, missing) in cases {
        let _d = match who.uid {
            Some(uid) => Delegation::to(uid),
            None => Delegation::root(),
        };
        let who = who.without(missing);
        assert_helper_sets(&who);
        let f = fixture(command_owner(&who), false);
        let before = leftovers();
        let o = run_demo(&who, &f);
        assert_run_refused(
            &o,
            &f,
            &[
                "bee run: this process lacks the capabilities enforcement needs;",
                "bee run: capabilities failed: CapEff ",
                &format!("lacks {} ", cap_name(missing)),
            ],
            &before,
        );
    }
}

#[test]
fn root_uid_with_only_bpf_perfmon_and_setpcap_enforces() {
    let _d = Delegation::root();
    assert_enforces(&root_uid(), 0);
}

/// Name grants need CAP_NET_ADMIN (the DNS steering programs): without it `bee exec` of a
/// policy with a `host` rule exits 77 naming it, before starting anything, while the same
/// capabilities enforce a policy without names (`root_uid_with_only_…_enforces`).
#[test]
fn root_uid_without_cap_net_admin_is_refused_a_policy_with_names() {
    let _d = Delegation::root();
    let who = root_uid();
    assert_helper_sets(&who);
    let f = fixture(command_owner(&who), who.sudo);
    let before = leftovers();
    let named = fs::read_to_string(&f.policy).unwrap()
        + "\n[[net.allow]]\nhost = \"crates.io\"\nports = [443]\nproto = \"tcp\"\n";
    fs::write(&f.policy, named).unwrap();
    let ran = f.workspace.join("ran");
    let policy = f.policy.display().to_string();
    let o = bee(
        &who,
        &f,
        &[
            "exec",
            "--policy",
            &policy,
            "--",
            "/bin/touch",
            &ran.display().to_string(),
        ],
    );
    let err = text(&o.stderr);
    assert_eq!(code(&o), 77, "{err}");
    assert!(err.contains("grants names"), "{err}");
    assert!(err.contains("lacks CAP_NET_ADMIN"), "{err}");
    assert!(!ran.exists(), "the command ran");
    assert_nothing_left(&before);
}

#[test]
fn root_uid_missing_one_of_them_is_refused() {
    let _d = Delegation::root();
    assert_refused_without(&root_uid(), CAP_BPF, true);
    assert_refused_without(&root_uid(), CAP_PERFMON, true);
    assert_refused_without(&root_uid(), CAP_SETPCAP, false);
}

#[test]
fn sudo_drop_with_only_bpf_perfmon_setgid_and_setuid_enforces() {
    let _d = Delegation::root();
    assert_enforces(&sudo(), USER);
}

#[test]
fn sudo_drop_missing_one_of_them_is_refused() {
    let _d = Delegation::root();
    assert_refused_without(&sudo(), CAP_BPF, true);
    assert_refused_without(&sudo(), CAP_PERFMON, true);
    assert_refused_without(&sudo(), CAP_SETGID, false);
    assert_refused_without(&sudo(), CAP_SETUID, false);
}
