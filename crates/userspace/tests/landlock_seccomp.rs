//! The Landlock engine's seccomp filter on the running kernel, natively: every call it
//! refuses still fails as it did (`EPERM`), and is now answered by the engine, which reports
//! it to the scope with bee's explanation; a flood is answered promptly and its report is
//! bounded; with the engine gone the calls stay refused (`ENOSYS`); and what a command can do
//! to its own descriptors, filters, processes and threads lets none of them through. Needs
//! root and Landlock, and fails, never skips, without them.

mod landlock_support;

use std::io::Read as _;
use std::time::{Duration, Instant};

use bee_userspace::cgroup::{CgroupParent, ScopeLimits};
use bee_userspace::landlock::LandlockEngine;
use bee_userspace::launch::{LaunchSpec, StdioMode};
use bee_userspace::scope::{Enforcer as _, spawn_into};
use landlock_support::{Ws, policy_text};

const PERL: &str = "/usr/bin/perl";
const PYTHON: &str = "/usr/bin/python3.11";

/// `SCOPE_MAX` of the engine's reports: the most refusals kept for one scope.
const SCOPE_MAX: usize = 4096;

/// Perl that prints `NAME=ERRNO` for a call made as `CODE` (a `syscall` or `socket` that
/// fails), or `NAME=ran`.
fn try_call(name: &str, code: &str) -> String {
    format!(
        "{{ my $rc = do {{ {code} }}; print defined($rc) && $rc >= 0 && $rc ne '' ? \"{name}=ran\\n\" : \"{name}=\" . ($!+0) . \"\\n\"; }}"
    )
}

/// `socket(AF_UNIX, SOCK_STREAM, 0)`, in core perl (no `use Socket`).
const UNIX_SOCKET: &str = "socket(my $s, 1, 1, 0) ? 0 : -1";
/// The refused calls of the first test, as perl makes them.
fn refused_calls() -> String {
    [
        try_call("socket", UNIX_SOCKET),
        try_call("unshare", "syscall(272, 0x10000000)"),
        try_call("ioctl", "syscall(16, 1, 0x5412, 0)"),
        try_call(
            "mount",
            "my ($s, $t, $f) = ('none', '/tmp', 'tmpfs'); syscall(165, $s, $t, $f, 0, 0)",
        ),
    ]
    .concat()
}

/// Perl that tries to let `socket` through with a listener of its own: a filter that sends
/// `socket` (41) to a new listener (`SECCOMP_FILTER_FLAG_NEW_LISTENER`) and allows the rest,
/// and a child that answers the listener's first notification with
/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE` (RECV `0xc0502100`, SEND `0xc0182101`). Prints
/// `listener=` as [`try_call`] does; the `socket` call that would get through comes after.
const HIJACK: &str = "my $f = pack('SCCL' x 4, 0x20, 0, 0, 0, 0x15, 0, 1, 41, 6, 0, 0, 0x7fc00000, 6, 0, 0, 0x7fff0000); \
     my $p = pack('S x6 P', 4, $f); my $l = syscall(317, 1, 8, $p); \
     print $l >= 0 ? \"listener=ran\\n\" : \"listener=\" . ($!+0) . \"\\n\"; \
     if ($l >= 0 && fork() == 0) { my $b = \"\\0\" x 80; syscall(16, $l, 0xc0502100, $b); \
       my ($id) = unpack('Q', $b); my $r = pack('QqlL', $id, 0, 0, 1); syscall(16, $l, 0xc0182101, $r); exit 0 }";

fn perl_policy(t: &Ws) -> bee_core::CompiledPolicy {
    t.policy(&policy_text(&[], &["/tmp/**"], &[PERL], ""))
}

#[test]
fn refused_calls_fail_as_before_and_are_reported_with_why() {
    let t = Ws::new();
    let p = perl_policy(&t);
    let r = t.run(&p, &[PERL, "-e", &refused_calls()]);
    assert_eq!(
        r.stdout, "socket=1\nunshare=1\nioctl=1\nmount=1\n",
        "each call fails with EPERM: {r:?}"
    );
    for want in [
        "socket(AF_UNIX, SOCK_STREAM): never allowed inside a scope",
        "unshare(CLONE_NEWUSER): never allowed inside a scope",
        "ioctl(TIOCSTI): never allowed inside a scope",
        "mount(): never allowed inside a scope",
    ] {
        assert!(
            r.denials.iter().any(|d| d == want),
            "no `{want}` in {:#?}",
            r.denials
        );
    }
    // A UDP socket lacks a rule some policy could have.
    let r = t.run(
        &p,
        &[
            PERL,
            "-e",
            &try_call("udp", "socket(my $s, 2, 2, 0) ? 0 : -1"),
        ],
    );
    assert_eq!(r.stdout, "udp=1\n", "{r:?}");
    assert!(
        r.denials
            .iter()
            .any(|d| d == "socket(AF_INET, SOCK_DGRAM): no net.allow rule covers it"),
        "{r:#?}"
    );
}

#[test]
fn a_flood_of_refusals_is_answered_promptly_and_its_report_is_bounded() {
    let t = Ws::new();
    let p = perl_policy(&t);
    let flood = "my $n = 0; for (1..100000) { socket(my $s, 1, 1, 0) and next; $n++ if $!+0 == 1 } print $n";
    let engine = LandlockEngine::new().unwrap();
    let started = Instant::now();
    let (flooded, other) = std::thread::scope(|s| {
        let flooding = s.spawn(|| t.run_in(&engine, &p, &[PERL, "-e", flood]));
        // Another scope of the same engine, while the flood runs: answered promptly too.
        std::thread::sleep(Duration::from_millis(300));
        let at = Instant::now();
        let other = t.run_in(&engine, &p, &[PERL, "-e", &try_call("socket", UNIX_SOCKET)]);
        let latency = at.elapsed();
        let ended = started.elapsed();
        (flooding.join().unwrap(), (other, latency, ended))
    });
    let took = started.elapsed();
    eprintln!(
        "100000 refused socket() calls in {took:?}; another scope's run meanwhile {:?}",
        other.1
    );
    assert_eq!(flooded.stdout, "100000", "{:?}", flooded.stderr);
    assert!(took < Duration::from_secs(30), "the flood took {took:?}");
    let sockets = flooded
        .denials
        .iter()
        .filter(|d| d.starts_with("socket(AF_UNIX, SOCK_STREAM)"))
        .count();
    assert_eq!(
        sockets, SCOPE_MAX,
        "the report is bounded by the scope's bound"
    );
    let (other, latency, ended) = other;
    // It ran, and was answered, while the flood went on.
    assert!(
        ended < took,
        "the other scope ended at {ended:?}, the flood at {took:?}"
    );
    assert_eq!(other.stdout, "socket=1\n", "{other:?}");
    let sockets = other
        .denials
        .iter()
        .filter(|d| d.starts_with("socket("))
        .count();
    assert_eq!(sockets, 1, "{:#?}", other.denials);
    assert!(
        latency < Duration::from_secs(10),
        "the other scope waited {latency:?}"
    );
}

#[test]
fn with_the_engine_gone_the_calls_stay_refused() {
    let t = Ws::new();
    let p = perl_policy(&t);
    let engine = LandlockEngine::new().unwrap();
    let parent = CgroupParent::open_default().unwrap();
    let cgroup = parent.create_scope(&ScopeLimits::default()).unwrap();
    let id = engine.install_policy(&p, &cgroup, 0).unwrap();
    // After a second, with nobody to answer: the refused calls, then a listener of its own
    // that would let `socket` through (bee's being gone, the kernel would take one), and a
    // filter of its own that allows everything.
    let script = format!(
        "sleep 1; {} {} {HIJACK}; {} {}",
        try_call("socket", UNIX_SOCKET),
        try_call("unshare", "syscall(272, 0x10000000)"),
        try_call(
            "allow_all",
            "my $f = pack('SCCL', 6, 0, 0, 0x7fff0000); my $p = pack('S x6 P', 1, $f); syscall(317, 1, 0, $p)"
        ),
        try_call("socket_again", UNIX_SOCKET),
    );
    let spec = LaunchSpec::new(PERL)
        .args(["-e", &script])
        .current_dir(t.path())
        .stdout(StdioMode::Piped);
    let mut launched = spawn_into(&engine, Some(id), &spec, &cgroup).unwrap();
    drop(engine);
    let mut stdout = launched.take_stdout().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let status = launched
        .wait_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    cgroup.empty(Duration::from_secs(5)).unwrap();
    let out = reader.join().unwrap();
    cgroup.remove().unwrap();
    assert!(status.is_some(), "the command did not end: {out}");
    // ENOSYS (38) where the engine answered EPERM: refused either way. The listener of its
    // own is refused too; the filter that allows everything is installed and changes nothing.
    assert_eq!(
        out, "socket=38\nunshare=38\nlistener=38\nallow_all=ran\nsocket_again=38\n",
        "{out}"
    );
}

/// The ways a command could try to reach or replace the listener, or slip a call past it.
#[test]
fn no_descriptor_filter_process_or_thread_lets_a_refused_call_through() {
    let t = Ws::new();
    let p = t.policy(&policy_text(
        &["./**", "/usr/**"],
        &["/tmp/**"],
        &[PERL, PYTHON],
        "",
    ));
    // No descriptor of the command, nor of the scope's init, is a listener
    // (SECCOMP_IOCTL_NOTIF_RECV on each; pidfd_getfd of PID 1's); with its descriptors closed
    // and shuffled the calls are still refused, and reported.
    let probe = format!(
        "my $hits = 0; for my $fd (0..1023) {{ my $b = \"\\0\" x 80; $hits++ if syscall(16, $fd, 0xc0502100, $b) >= 0 }} \
         my $pidfd = syscall(434, 1, 0); my $got = 0; \
         if ($pidfd >= 0) {{ for my $n (0..255) {{ $got++ if syscall(438, $pidfd, $n, 0) >= 0 }} }} \
         $| = 1; print \"listeners=$hits stolen=$got\\n\"; \
         open(STDERR, '>&', \\*STDOUT); syscall(436, 3, 0xffffffff, 0); {}",
        try_call("socket", UNIX_SOCKET)
    );
    let r = t.run(&p, &[PERL, "-e", &probe]);
    assert!(r.stdout.starts_with("listeners=0 stolen=0\n"), "{r:?}");
    assert!(r.stdout.ends_with("socket=1\n"), "{r:?}");
    // A filter of its own that allows everything, a listener of its own that would let
    // `socket` through, and a child process: refused, and each reported.
    let nested = format!(
        "{} {HIJACK}; {} my $pid = fork(); if ($pid == 0) {{ {} exit 0 }} waitpid($pid, 0);",
        try_call(
            "allow_all",
            "my $f = pack('SCCL', 6, 0, 0, 0x7fff0000); my $p = pack('S x6 P', 1, $f); syscall(317, 1, 0, $p)"
        ),
        try_call("socket", UNIX_SOCKET),
        try_call("child_socket", UNIX_SOCKET),
    );
    let r = t.run(&p, &[PERL, "-e", &nested]);
    assert_eq!(
        r.stdout, "allow_all=ran\nlistener=1\nsocket=1\nchild_socket=1\n",
        "{r:?}"
    );
    assert!(
        r.denials
            .iter()
            .any(|d| d == "seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER): never allowed inside a scope"),
        "{r:#?}"
    );
    let sockets = r
        .denials
        .iter()
        .filter(|d| d.starts_with("socket(AF_UNIX"))
        .count();
    assert_eq!(sockets, 2, "{r:#?}");
    // Threads: each of sixteen makes refused calls at once; every one fails with EPERM.
    let threads = "import socket, threading\n\
                   errs = []\n\
                   def go():\n\
                   \x20   for _ in range(200):\n\
                   \x20       try:\n\
                   \x20           socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close(); errs.append(0)\n\
                   \x20       except OSError as e:\n\
                   \x20           errs.append(e.errno)\n\
                   ts = [threading.Thread(target=go) for _ in range(16)]\n\
                   [t.start() for t in ts]; [t.join() for t in ts]\n\
                   print(len(errs), sorted(set(errs)))\n";
    let r = t.run(&p, &[PYTHON, "-I", "-S", "-c", threads]);
    assert_eq!(r.stdout, "3200 [1]\n", "{r:?}");
    let sockets = r
        .denials
        .iter()
        .filter(|d| d.starts_with("socket(AF_UNIX"))
        .count();
    assert_eq!(sockets, 3200, "{:?}", r.denials.len());
}

/// `bee check`'s probe: on this kernel a call refused by notification is answered by the
/// engine's supervisor and recorded, and the probe leaves this process as it was (its
/// thread's filter went with the thread: the same call, made here, runs).
#[test]
fn the_probe_says_refusals_are_reported_here() {
    let said = bee_userspace::landlock::seccomp::notify::probe();
    assert!(
        said.as_ref()
            .is_ok_and(|how| how.contains("SECCOMP_RET_USER_NOTIF")),
        "{said:?}"
    );
    // SAFETY: getppid(2), whatever the register holds.
    let ppid = unsafe { libc::syscall(libc::SYS_getppid, 0xbee5_5eed_i64) };
    assert!(ppid > 0, "{ppid}");
    assert!(bee_userspace::landlock::seccomp::notify::probe().is_ok());
}
