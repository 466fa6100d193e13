//! The hardened launcher, observed from inside the launched command on this host's cgroup v2
//! hierarchy. Needs root; fails (never skips) without it.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::time::{Duration, Instant};

use bee_userspace::cgroup::{CgroupParent, ScopeCgroup, ScopeLimits};
use bee_userspace::launch::{
    Credentials, LaunchError, LaunchSpec, Launched, Launcher, Rlimits, StdioMode, Step, exit_code,
};
use bee_userspace::support::parse_cgroup2_mount;

fn parent() -> CgroupParent {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some(mount) = parse_cgroup2_mount(&mountinfo) else {
        unreachable!("these tests need a cgroup2 mount")
    };
    match CgroupParent::open(mount.join("bee-tests")) {
        Ok(p) => p,
        Err(e) => unreachable!("cannot open the test parent cgroup (root needed): {e}"),
    }
}

fn scope() -> ScopeCgroup {
    match parent().create_scope(&ScopeLimits::default()) {
        Ok(s) => s,
        Err(e) => unreachable!("{e}"),
    }
}

fn sh(script: &str) -> LaunchSpec {
    LaunchSpec::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .current_dir("/")
        .stdin(StdioMode::Null)
        .stdout(StdioMode::Piped)
}

fn spawn(spec: &LaunchSpec, cg: &ScopeCgroup) -> Launched {
    match spec.spawn(cg) {
        Ok(l) => l,
        Err(e) => unreachable!("{e}"),
    }
}

fn spawn_with(spec: &LaunchSpec, cg: &ScopeCgroup, launcher: Launcher) -> Launched {
    match spec.spawn_with(cg, launcher) {
        Ok(l) => {
            assert_eq!(l.launcher(), launcher);
            l
        }
        Err(e) => unreachable!("{e}"),
    }
}

/// Runs `spec` in `cg` and returns (exit code, stdout).
fn output(spec: &LaunchSpec, cg: &ScopeCgroup) -> (i32, String, u32) {
    output_with(spec, cg, Launcher::Clone3IntoCgroup)
}

/// As [`output`], with the given launcher.
fn output_with(spec: &LaunchSpec, cg: &ScopeCgroup, launcher: Launcher) -> (i32, String, u32) {
    let mut child = spawn_with(spec, cg, launcher);
    let pid = child.id();
    let mut out = String::new();
    if let Some(mut s) = child.take_stdout() {
        let _ = s.read_to_string(&mut out);
    }
    let outcome = child.wait_or_kill(cg, Some(Duration::from_secs(30)));
    let code = match outcome {
        Ok(o) => o.exit_code(),
        Err(e) => unreachable!("{e}"),
    };
    (code, out, pid)
}

const PROBE: &str = "echo \"pid $$\"; cat /proc/self/status; cat /proc/self/cgroup; \
                     echo 'stat' $(cat /proc/$$/stat); \
                     cat /proc/$$/limits; echo '--env'; env";

/// `Key:\tvalue` lines of /proc/self/status.
fn status_field<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

fn environment(out: &str) -> BTreeMap<String, String> {
    out.split("--env\n")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Waits until `pid` has exec'd `comm`.
fn wait_for_comm(pid: u32, comm: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        != comm
    {
        assert!(Instant::now() < deadline, "{pid} never became {comm}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until `pid` is blocked in `nanosleep`/`clock_nanosleep`, i.e. past the
/// dynamic loader and locale set-up, which open (and close) files of their own.
/// The first field of `/proc/PID/syscall` is the number of the system call the
/// task is blocked in (proc(5)).
fn wait_for_nanosleep(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let sleeping = [libc::SYS_nanosleep, libc::SYS_clock_nanosleep];
    loop {
        let line = fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        let nr = line.split_whitespace().next().and_then(|n| n.parse().ok());
        if nr.is_some_and(|nr: libc::c_long| sleeping.contains(&nr)) {
            return;
        }
        assert!(Instant::now() < deadline, "{pid} never slept: {line:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn limit_line<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .find(|l| l.starts_with(name))
        .map(|l| l[name.len()..].split_whitespace().collect())
        .unwrap_or_default()
}

/// This host's kernel (6.1 or newer) has `clone3(CLONE_INTO_CGROUP)`: `spawn` uses it.
#[test]
fn the_command_is_born_in_its_scope_with_clone3() {
    let cg = scope();
    let mut l = spawn(&sh("cat /proc/self/cgroup"), &cg);
    assert_eq!(l.launcher(), Launcher::Clone3IntoCgroup);
    let mut out = String::new();
    if let Some(mut s) = l.take_stdout() {
        let _ = s.read_to_string(&mut out);
    }
    let _ = l.wait_timeout(None);
    assert!(out.trim().ends_with(&format!("/{}", cg.name())), "{out}");
}

#[test]
fn the_command_starts_hardened_inside_its_scope() {
    starts_hardened_inside_its_scope(Launcher::Clone3IntoCgroup);
}

#[test]
fn the_cgroup_procs_launcher_starts_it_hardened_inside_its_scope_too() {
    starts_hardened_inside_its_scope(Launcher::CgroupProcs);
}

fn starts_hardened_inside_its_scope(launcher: Launcher) {
    let cg = scope();
    // An inheritable (not close-on-exec) fd in bee must not reach the command.
    let leak = fs::File::open("/proc/self/status").map(|f| {
        // SAFETY: dup(2) on an open fd; the copy is closed below.
        unsafe { libc::dup(f.as_raw_fd()) }
    });
    let leak = leak.unwrap_or(-1);
    assert!(leak > 2);
    let spec = sh(PROBE)
        .env_pass(["PATH", "LANG"])
        .env("BEE_SCOPE", "test")
        .env("PATH", "/usr/bin:/bin")
        .rlimits(Rlimits {
            nofile: Some(64),
            nproc: Some(512),
            cpu_seconds: Some(30),
            address_space: Some(1 << 32),
            ..Rlimits::default()
        });
    let (code, out, pid) = output_with(&spec, &cg, launcher);
    // The fds of the exec'd image, seen from outside while it runs.
    let mut sleeper = spawn_with(
        &LaunchSpec::new("sleep").arg("300").stdin(StdioMode::Null),
        &cg,
        launcher,
    );
    let fd_dir = format!("/proc/{}/fd", sleeper.id());
    wait_for_nanosleep(sleeper.id());
    let mut fds: Vec<String> = fs::read_dir(&fd_dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    fds.sort();
    let _ = cg.kill();
    let _ = sleeper.wait_timeout(None);
    // SAFETY: closes the fd duplicated above.
    unsafe { libc::close(leak) };
    assert_eq!(fds, ["0", "1", "2"]);
    assert_eq!(code, 0, "{out}");

    assert_eq!(status_field(&out, "NoNewPrivs"), Some("1"), "{out}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(
            status_field(&out, set),
            Some("0000000000000000"),
            "{set}: {out}"
        );
    }
    assert!(
        out.lines()
            .any(|l| l.starts_with("0::/") && l.ends_with(&format!("/{}", cg.name()))),
        "not in {}: {out}",
        cg.name()
    );
    // /proc/PID/stat: pid (comm) state ppid pgrp session ...
    let stat: Vec<&str> = out
        .lines()
        .find_map(|l| l.strip_prefix("stat "))
        .unwrap_or_default()
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(stat.get(2), Some(&pid.to_string().as_str()), "pgrp: {out}");
    assert_eq!(
        stat.get(3),
        Some(&pid.to_string().as_str()),
        "session: {out}"
    );

    let env = environment(&out);
    let names: Vec<&str> = env.keys().map(String::as_str).collect();
    let allowed = ["BEE_SCOPE", "LANG", "PATH", "PWD", "SHLVL", "_", "OLDPWD"];
    assert!(
        names.iter().all(|n| allowed.contains(n)),
        "env leaked: {names:?}"
    );
    assert_eq!(env.get("PATH").map(String::as_str), Some("/usr/bin:/bin"));
    assert_eq!(env.get("BEE_SCOPE").map(String::as_str), Some("test"));
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());

    assert_eq!(limit_line(&out, "Max core file size"), ["0", "0", "bytes"]);
    assert_eq!(limit_line(&out, "Max open files"), ["64", "64", "files"]);
    assert_eq!(
        limit_line(&out, "Max processes"),
        ["512", "512", "processes"]
    );
    assert_eq!(limit_line(&out, "Max cpu time"), ["30", "30", "seconds"]);
    assert_eq!(
        limit_line(&out, "Max address space"),
        ["4294967296", "4294967296", "bytes"]
    );
}

#[test]
fn securebits_are_locked_so_root_cannot_regain_capabilities() {
    let cg = scope();
    // setpriv(1) (util-linux) prints the securebits, which /proc does not show.
    let spec = LaunchSpec::new("setpriv")
        .arg("--dump")
        .current_dir("/")
        .stdout(StdioMode::Piped);
    let (code, out, _) = output(&spec, &cg);
    assert_eq!(code, 0, "{out}");
    let bits = out
        .lines()
        .find_map(|l| l.strip_prefix("Securebits: "))
        .unwrap_or_default();
    let bits: Vec<&str> = bits.split(',').collect();
    for bit in [
        "noroot",
        "noroot_locked",
        "no_setuid_fixup",
        "no_setuid_fixup_locked",
        "keep_caps_locked",
    ] {
        assert!(bits.contains(&bit), "{bit} missing: {out}");
    }
    // NO_CAP_AMBIENT_RAISE and its lock (bits 6 and 7); setpriv has no names for them.
    assert!(
        bits.contains(&"0xc0")
            || bits.contains(&"no_cap_ambient_raise")
                && bits.contains(&"no_cap_ambient_raise_locked"),
        "{out}"
    );
    assert!(out.contains("no_new_privs: 1"), "{out}");
    assert!(out.contains("Capability bounding set: [none]"), "{out}");
}

#[test]
fn credentials_drop_to_the_given_user_with_no_groups() {
    let cg = scope();
    let spec = sh("grep -E '^(Uid|Gid|Groups|CapEff|CapPrm|NoNewPrivs):' /proc/self/status")
        .credentials(Some(Credentials {
            uid: 65534,
            gid: 65534,
            groups: Vec::new(),
        }));
    let (code, out, _) = output(&spec, &cg);
    assert_eq!(code, 0, "{out}");
    let ids = |k| status_field(&out, k).map(|v| v.split_whitespace().collect::<Vec<_>>());
    assert_eq!(ids("Uid"), Some(vec!["65534"; 4]), "{out}");
    assert_eq!(ids("Gid"), Some(vec!["65534"; 4]), "{out}");
    assert_eq!(status_field(&out, "Groups"), Some(""), "{out}");
    assert_eq!(status_field(&out, "CapEff"), Some("0000000000000000"));
    assert_eq!(status_field(&out, "CapPrm"), Some("0000000000000000"));

    let spec = sh("grep '^Groups:' /proc/self/status").credentials(Some(Credentials {
        uid: 65534,
        gid: 65534,
        groups: vec![65534, 100],
    }));
    let (_, out, _) = output(&spec, &cg);
    assert_eq!(status_field(&out, "Groups"), Some("100 65534"), "{out}");
}

#[test]
fn sudo_variables_parse_strictly() {
    assert!(matches!(
        Credentials::from_sudo_vars(None, Some("5")),
        Ok(None)
    ));
    let c = Credentials::from_sudo_vars(Some("1000"), Some("1001"))
        .ok()
        .flatten();
    assert_eq!(
        c,
        Some(Credentials {
            uid: 1000,
            gid: 1001,
            groups: Vec::new()
        })
    );
    let c = Credentials::from_sudo_vars(Some("1000"), None)
        .ok()
        .flatten();
    assert_eq!(c.map(|c| c.gid), Some(1000));
    assert!(matches!(
        Credentials::from_sudo_vars(Some("root"), None),
        Err(LaunchError::BadSudoId {
            var: "SUDO_UID",
            ..
        })
    ));
}

#[test]
fn an_escaped_grandchild_stays_in_the_scope_and_dies_with_it() {
    let cg = scope();
    // Double fork: the grandchild calls setsid and outlives the command.
    let spec = sh("setsid /bin/sh -c 'exec sleep 300' </dev/null >/dev/null 2>&1 & echo $!");
    let (code, out, _) = output(&spec, &cg);
    assert_eq!(code, 0);
    let grandchild: u32 = out.trim().parse().unwrap_or(0);
    assert!(grandchild > 0, "{out}");
    wait_for_comm(grandchild, "sleep");
    let own = fs::read_to_string(format!("/proc/{grandchild}/cgroup")).unwrap_or_default();
    assert!(own.trim_end().ends_with(cg.name()), "{own}");
    let stat = fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
    let session = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .nth(3);
    assert_eq!(
        session,
        Some(grandchild.to_string().as_str()),
        "it has its own session"
    );

    assert!(cg.kill().is_ok());
    assert!(cg.wait_empty(Duration::from_secs(5)).is_ok());
    let gone = Instant::now() + Duration::from_secs(5);
    while fs::metadata(format!("/proc/{grandchild}")).is_ok() && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(fs::metadata(format!("/proc/{grandchild}")).is_err());
}

/// A scope killed with `cgroup.kill` (a tool call's timeout) runs the next command normally:
/// some kernels kill every child clone3 starts in a killed cgroup (6.18.44 does), so bee
/// joins such a scope through `cgroup.procs`.
#[test]
fn a_scope_runs_commands_again_after_a_kill() {
    let cg = scope();
    let mut child = spawn(&sh("sleep 300").stdout(StdioMode::Null), &cg);
    let outcome = match child.wait_or_kill(&cg, Some(Duration::from_millis(100))) {
        Ok(o) => o,
        Err(e) => unreachable!("{e}"),
    };
    assert!(outcome.timed_out);
    assert!(cg.was_killed());
    assert!(cg.wait_empty(Duration::from_secs(5)).is_ok());
    for _ in 0..3 {
        let mut l = spawn(&sh("echo alive; exit 7"), &cg);
        assert_eq!(l.launcher(), Launcher::CgroupProcs);
        let mut out = String::new();
        if let Some(mut s) = l.take_stdout() {
            let _ = s.read_to_string(&mut out);
        }
        let code = match l.wait_or_kill(&cg, Some(Duration::from_secs(30))) {
            Ok(o) => o.exit_code(),
            Err(e) => unreachable!("{e}"),
        };
        assert_eq!((code, out.trim()), (7, "alive"), "the command after a kill");
    }
}

#[test]
fn a_timeout_kills_the_whole_scope() {
    let cg = scope();
    let spec = sh("sleep 300 & sleep 300");
    let mut child = spawn(&spec.stdout(StdioMode::Null), &cg);
    let start = Instant::now();
    let outcome = match child.wait_or_kill(&cg, Some(Duration::from_millis(200))) {
        Ok(o) => o,
        Err(e) => unreachable!("{e}"),
    };
    assert!(outcome.timed_out);
    assert_eq!(outcome.exit_code(), 128 + 9);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(cg.wait_empty(Duration::from_secs(5)).is_ok());
}

#[test]
fn exit_codes_and_signals_follow_the_shell() {
    let cg = scope();
    assert_eq!(output(&sh("exit 7"), &cg).0, 7);
    assert_eq!(output(&sh("kill -TERM $$"), &cg).0, 128 + 15);
    let status = std::process::Command::new("/bin/true").status();
    assert_eq!(status.map(exit_code).ok(), Some(0));
}

#[test]
fn a_failed_step_names_it_and_the_command_never_runs() {
    let cg = scope();
    let marker = std::env::temp_dir().join(format!("bee-launch-marker-{}", std::process::id()));
    let _ = fs::remove_file(&marker);
    // More open files than the kernel allows (fs.nr_open) is refused even for root.
    let spec = sh(&format!("touch {}", marker.display())).rlimits(Rlimits {
        nofile: Some(u64::MAX - 1),
        ..Rlimits::default()
    });
    match spec.spawn(&cg) {
        Err(LaunchError::Step { step, source, .. }) => {
            assert_eq!(step, Step::RlimitNofile);
            assert_eq!(source.raw_os_error(), Some(libc::EPERM));
        }
        Err(e) => unreachable!("wrong error: {e}"),
        Ok(_) => unreachable!("the launch should fail"),
    }
    assert!(!marker.exists(), "the command ran half-hardened");
    assert!(cg.wait_empty(Duration::from_secs(5)).is_ok());
}

#[test]
fn a_missing_program_is_a_spawn_error() {
    let cg = scope();
    match LaunchSpec::new("/nonexistent/bee-test").spawn(&cg) {
        Err(LaunchError::Spawn { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        Err(e) => unreachable!("wrong error: {e}"),
        Ok(_) => unreachable!("spawned a missing program"),
    }
}

#[test]
fn the_environment_is_the_pass_list_plus_extras() {
    let spec = LaunchSpec::new("x")
        .env_pass(["PATH", "BEE_SURELY_UNSET_VARIABLE"])
        .env("A", "1")
        .env("A", "2")
        .env("PATH", "/bin");
    let env = spec.environment();
    assert_eq!(
        env,
        [("PATH".into(), "/bin".into()), ("A".into(), "2".into())]
    );
}

#[test]
fn the_command_dies_with_the_thread_that_launched_it() {
    let cg = scope();
    // PR_SET_PDEATHSIG fires when the launching thread exits.
    let launched = std::thread::scope(|s| {
        s.spawn(|| {
            spawn(
                &LaunchSpec::new("sleep").arg("300").stdin(StdioMode::Null),
                &cg,
            )
        })
        .join()
    });
    let Ok(mut launched) = launched else {
        unreachable!("the launching thread panicked")
    };
    let status = launched.wait_timeout(Some(Duration::from_secs(10)));
    let status = match status {
        Ok(Some(s)) => s,
        Ok(None) => unreachable!("the command outlived its launching thread"),
        Err(e) => unreachable!("{e}"),
    };
    assert_eq!(exit_code(status), 128 + 9);
}

/// A working directory the command's user may not enter is the caller's permission (77), one
/// that is not there a missing input (66); another step's failure stays internal (70).
#[test]
fn a_working_directory_refused_or_missing_is_77_or_66() {
    use bee_userspace::launch::{LaunchError, Step};
    let step = |step, kind: std::io::ErrorKind| LaunchError::Step {
        program: "true".to_owned(),
        step,
        source: std::io::Error::from(kind),
    };
    assert_eq!(
        step(Step::WorkingDir, std::io::ErrorKind::PermissionDenied).exit_status(),
        77
    );
    assert_eq!(
        step(Step::WorkingDir, std::io::ErrorKind::NotFound).exit_status(),
        66
    );
    assert_eq!(
        step(Step::Setsid, std::io::ErrorKind::PermissionDenied).exit_status(),
        70
    );
}
