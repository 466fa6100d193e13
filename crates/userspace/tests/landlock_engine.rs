//! The Landlock engine on the running kernel, natively (no VM): every test confines real
//! commands and tries to get around a rule, and fails, never skips, where Landlock or root is
//! missing. The families follow the BPF engine's kernel tests: reads, writes and attributes,
//! execution (directly, through the loader, from memory), links and renames, `/proc`, other
//! processes, the gates (`bpf`, mounts, namespaces, io_uring, keyrings), sockets.

mod landlock_support;

use landlock_support::{Ws, policy_text};

const SH: &str = "/usr/bin/dash";
/// A shell and the programs the scripts below use.
const TOOLS: &[&str] = &[
    "/usr/bin/dash",
    "/usr/bin/cat",
    "/usr/bin/touch",
    "/usr/bin/chmod",
    "/usr/bin/ln",
    "/usr/bin/mv",
    "/usr/bin/ls",
];
const PERL: &str = "/usr/bin/perl";

/// A policy that reads Perl's modules and runs Perl (for its `Socket` module), then `extra`.
fn perl_policy(extra: &str) -> String {
    policy_text(
        &["/usr/share/perl/**", "/usr/lib/x86_64-linux-gnu/perl/**"],
        &[],
        &[PERL],
        extra,
    )
}
const PYTHON: &str = "/usr/bin/python3.11";

fn tools_and(more: &[&'static str]) -> Vec<&'static str> {
    TOOLS.iter().chain(more).copied().collect()
}

#[test]
fn reads_only_what_is_granted() {
    let t = Ws::new();
    t.write("data.txt", "hello");
    let secret = t.outside("secret.txt", "top secret");
    let p = t.policy(&policy_text(&["./**"], &[], &["/usr/bin/cat"], ""));
    let ok = t.run(&p, &["/usr/bin/cat", "data.txt"]);
    assert_eq!((ok.status, ok.stdout.as_str()), (0, "hello"), "{ok:?}");
    let denied = t.run(&p, &["/usr/bin/cat", secret.to_str().unwrap()]);
    assert_ne!(denied.status, 0, "{denied:?}");
    assert!(denied.stderr.contains("Permission denied"), "{denied:?}");
}

#[test]
fn a_symlink_or_hard_link_in_the_workspace_does_not_reach_a_secret() {
    let t = Ws::new();
    let secret = t.outside("secret.txt", "top secret");
    std::os::unix::fs::symlink(&secret, t.path().join("link")).unwrap();
    let p = t.policy(&policy_text(&["./**"], &["./**"], &tools_and(&[]), ""));
    let r = t.run(&p, &["/usr/bin/cat", "link"]);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(!r.stdout.contains("secret"), "{r:?}");
    // Making a hard link to it from inside the scope.
    let r = t.run(
        &p,
        &[
            SH,
            "-c",
            &format!("ln {} hard && cat hard", secret.display()),
        ],
    );
    assert_ne!(r.status, 0, "{r:?}");
    assert!(!r.stdout.contains("secret"), "{r:?}");
    assert!(!t.path().join("hard").exists());
}

#[test]
fn writes_and_attribute_changes_only_under_write_grants() {
    let t = Ws::new();
    t.write("src/lib.rs", "fn main() {}");
    t.write("out/keep.txt", "");
    let outside = t.outside("config", "safe");
    let p = t.policy(&policy_text(&["./**"], &["./out/**"], &tools_and(&[]), ""));
    let ok = t.run(
        &p,
        &[
            SH,
            "-c",
            "echo built > out/app && chmod 755 out/app && touch -d 2001-01-01 out/keep.txt",
        ],
    );
    assert_eq!(ok.status, 0, "{ok:?}");
    assert_eq!(
        std::fs::read_to_string(t.path().join("out/app")).unwrap(),
        "built\n"
    );
    for attack in [
        "echo x > src/lib.rs",
        "echo x >> src/lib.rs",
        "touch src/new.rs",
        "chmod 777 src/lib.rs",
        "touch -d 2001-01-01 src/lib.rs",
        "mv src/lib.rs out/",
        "ln src/lib.rs out/lib.rs",
    ] {
        let r = t.run(&p, &[SH, "-c", attack]);
        assert_ne!(r.status, 0, "`{attack}` succeeded: {r:?}");
    }
    assert_eq!(
        std::fs::read_to_string(t.path().join("src/lib.rs")).unwrap(),
        "fn main() {}"
    );
    let meta = std::fs::metadata(t.path().join("src/lib.rs")).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    assert_ne!(meta.permissions().mode() & 0o777, 0o777);
    let r = t.run(
        &p,
        &[SH, "-c", &format!("echo pwned > {}", outside.display())],
    );
    assert_ne!(r.status, 0, "{r:?}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "safe");
}

#[test]
fn only_granted_programs_run_directly_or_through_the_loader() {
    let t = Ws::new();
    let p = t.policy(&policy_text(
        &["./**", "/usr/bin/**"],
        &["./**"],
        &[SH, "/usr/bin/cat"],
        "",
    ));
    let ok = t.run(&p, &[SH, "-c", "echo hi | /usr/bin/cat"]);
    assert_eq!((ok.status, ok.stdout.as_str()), (0, "hi\n"), "{ok:?}");
    // Not granted: refused at execve.
    let r = t.run(&p, &[SH, "-c", "/usr/bin/ls /"]);
    assert_ne!(r.status, 0, "{r:?}");
    // The dynamic loader is executable (under the libraries' grant), and is asked to map a
    // program no exec grant covers: the mapping is refused (the scope's mounts are noexec).
    let r = t.run(&p, &[SH, "-c", "/lib64/ld-linux-x86-64.so.2 /usr/bin/ls /"]);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
    // A copy in the writable workspace is not executable either.
    let r = t.run(
        &p,
        &[
            SH,
            "-c",
            "/usr/bin/cat /usr/bin/ls > ls && chmod +x ls; ./ls /",
        ],
    );
    assert_ne!(r.status, 0, "{r:?}");
    let r = t.run(&p, &[SH, "-c", "/lib64/ld-linux-x86-64.so.2 ./ls /"]);
    assert_ne!(r.status, 0, "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
}

#[test]
fn a_program_from_memory_does_not_run() {
    let t = Ws::new();
    let p = t.policy(&policy_text(&["./**", "/usr/bin/**"], &[], &[PYTHON], ""));
    // memfd_create, copy a real program in, and execute it by its descriptor.
    let script = r#"
import os
fd = os.memfd_create("x")
os.write(fd, open("/usr/bin/true", "rb").read())
try:
    os.execv(f"/proc/self/fd/{fd}", ["x"])
except OSError as e:
    print("refused", e.errno)
"#;
    let r = t.run(&p, &[PYTHON, "-I", "-S", "-c", script]);
    assert!(r.stdout.starts_with("refused"), "{r:?}");
}

/// A bind mount of the host's, made for one test and undone when it ends (failed or not).
struct HostMount(std::path::PathBuf);

impl HostMount {
    /// `dir` bound onto itself, then remounted with `flags` (`ro`, `noexec`).
    fn bind(dir: &std::path::Path, flags: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| unreachable!("{e}"));
        let run = |args: &[&str]| {
            let o = std::process::Command::new("/usr/bin/mount")
                .args(args)
                .output()
                .unwrap_or_else(|e| unreachable!("{e}"));
            assert!(o.status.success(), "mount {args:?}: {o:?}");
        };
        let d = dir.to_str().unwrap_or_else(|| unreachable!("a UTF-8 path"));
        run(&["--bind", d, d]);
        let mount = Self(dir.to_owned());
        run(&["-o", &format!("remount,bind,{flags}"), d]);
        mount
    }
}

impl Drop for HostMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("/usr/bin/umount")
            .arg(&self.0)
            .status();
    }
}

/// Where the host mounted a tree read-only or `noexec`, a scope whose grants write and run
/// there still cannot: the scope's mounts add restrictions to the host's, never lift one (a
/// service's privilege is never lent to the caller). Beside them, the same grants do write
/// and run.
#[test]
fn the_hosts_read_only_and_noexec_mounts_stay_so_in_a_scope_that_writes_and_runs_there() {
    let t = Ws::new();
    let tree = t.outside_dir().join("t");
    std::fs::create_dir_all(tree.join("open")).unwrap();
    let ro = HostMount::bind(&tree.join("ro"), "ro");
    let nx = HostMount::bind(&tree.join("nx"), "noexec");
    for dir in ["nx", "open"] {
        std::fs::copy("/usr/bin/true", tree.join(dir).join("prog")).unwrap();
    }
    let all = format!("{}/**", tree.display());
    let p = t.policy(&policy_text(
        &[all.as_str()],
        &[all.as_str()],
        &TOOLS
            .iter()
            .copied()
            .chain([all.as_str()])
            .collect::<Vec<_>>(),
        "",
    ));
    let script = format!(
        "cd {t} && (echo x > ro/f && echo wrote-ro; nx/prog && echo ran-nx; \
         echo y > open/f && echo wrote-open; open/prog && echo ran-open) 2>&1",
        t = tree.display()
    );
    let r = t.run(&p, &[SH, "-c", &script]);
    assert!(r.stdout.contains("Read-only file system"), "{r:?}");
    assert!(r.stdout.contains("Permission denied"), "{r:?}");
    assert!(
        !r.stdout.contains("wrote-ro") && !r.stdout.contains("ran-nx"),
        "{r:?}"
    );
    assert!(
        r.stdout.contains("wrote-open") && r.stdout.contains("ran-open"),
        "{r:?}"
    );
    assert!(!tree.join("ro/f").exists());
    drop((ro, nx));
}

/// `/proc/self/**` and all of `/proc` (`/proc/**`, granted as the private `/proc`) alike.
#[test]
fn proc_holds_only_the_scope_and_its_own_entries() {
    let t = Ws::new();
    for grant in [
        &["/proc/self/**", "/proc/thread-self/**"][..],
        &["/proc/**"],
    ] {
        let p = t.policy(&policy_text(grant, &[], &tools_and(&[]), ""));
        let r = t.run(&p, &[SH, "-c", "cat /proc/self/status; ls /proc"]);
        assert_eq!(r.status, 0, "{grant:?}: {r:?}");
        assert!(r.stdout.starts_with("Name:\tcat"), "{grant:?}: {r:?}");
        // PID 1 is the scope's own first process; bee's and the host's are not there.
        let me = std::process::id().to_string();
        assert!(!r.stdout.lines().any(|l| l == me), "{grant:?}: {r:?}");
        assert!(!r.stdout.contains("meminfo"), "{grant:?}: {r:?}");
        // bee's own entries (its environment) are not in the scope's /proc.
        let r = t.run(&p, &[SH, "-c", &format!("cat /proc/{me}/environ")]);
        assert_ne!(r.status, 0, "{grant:?}: {r:?}");
        assert!(!r.stdout.contains("PATH="), "{grant:?}: {r:?}");
    }
}

#[test]
fn other_processes_cannot_be_signalled_or_traced() {
    let t = Ws::new();
    let mut victim = std::process::Command::new("/usr/bin/sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = victim.id();
    let p = t.policy(&policy_text(&[], &[], &tools_and(&[PERL]), ""));
    let r = t.run(
        &p,
        &[
            PERL,
            "-e",
            &format!("print kill(9, {pid}) ? 'killed' : 'refused'"),
        ],
    );
    assert_eq!(r.stdout, "refused", "{r:?}");
    assert!(victim.try_wait().unwrap().is_none(), "the victim died");
    // Every process it can see (`kill -1`): only its own namespace.
    let r = t.run(&p, &[PERL, "-e", "kill(9, -1); print 'alive'"]);
    assert!(
        victim.try_wait().unwrap().is_none(),
        "kill -1 reached the host: {r:?}"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
}

/// Each gate as a raw system call from perl: the call must fail.
#[test]
fn the_gates_hold() {
    let t = Ws::new();
    let p = t.policy(&policy_text(&[], &["/tmp/**"], &[PERL], ""));
    let calls = [
        ("bpf", "syscall(321, 0, 0, 0)"),
        (
            "mount",
            "my ($s, $t, $f) = ('none', '/tmp', 'tmpfs'); syscall(165, $s, $t, $f, 0, 0)",
        ),
        ("unshare(CLONE_NEWUSER)", "syscall(272, 0x10000000)"),
        ("unshare(CLONE_NEWNS)", "syscall(272, 0x00020000)"),
        (
            "io_uring_setup",
            "my $p = \"\\0\" x 120; syscall(425, 8, $p)",
        ),
        ("keyctl", "syscall(250, 0, -3, 0)"), // KEYCTL_GET_KEYRING_ID of the user keyring
        ("perf_event_open", "syscall(298, 0, 0, -1, -1, 0)"),
        ("syslog", "my $b = \"\\0\" x 64; syscall(103, 3, $b, 64)"),
        ("clone3", "syscall(435, 0, 0)"),
        ("ptrace(PTRACE_ATTACH, 1)", "syscall(101, 16, 1, 0, 0)"),
    ];
    for (what, call) in calls {
        let r = t.run(
            &p,
            &[
                PERL,
                "-e",
                &format!("my $rc = do {{ {call} }}; print $rc < 0 ? 'refused' : 'ran'"),
            ],
        );
        assert_eq!(r.stdout, "refused", "{what}: {r:?}");
    }
}

#[test]
fn sockets_other_than_granted_tcp_are_refused() {
    let t = Ws::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "use Socket; socket(my $s, PF_INET, SOCK_STREAM, 0) or die 'socket'; connect($s, pack_sockaddr_in({port}, inet_aton('127.0.0.1'))) ? print 'connected' : print 'refused'"
    );
    let denied = t.policy(&perl_policy(""));
    let r = t.run(&denied, &[PERL, "-e", &connect]);
    assert_eq!(r.stdout, "refused", "{r:?}");
    let granted = t.policy(&perl_policy(&format!(
        "[[net.allow]]\naddr = [\"0.0.0.0/0\", \"::/0\"]\nports = [{port}]\nproto = \"tcp\"\n"
    )));
    let r = t.run(&granted, &[PERL, "-e", &connect]);
    assert_eq!(r.stdout, "connected", "{r:?}");
    for (what, sock) in [
        ("udp", "socket(my $s, PF_INET, SOCK_DGRAM, 0)"),
        ("raw", "socket(my $s, PF_INET, SOCK_RAW, 1)"),
        ("unix", "socket(my $s, PF_UNIX, SOCK_STREAM, 0)"),
        ("packet", "socket(my $s, 17, SOCK_RAW, 0)"),
    ] {
        let r = t.run(
            &granted,
            &[
                PERL,
                "-e",
                &format!("use Socket; {sock} ? print 'made' : print 'refused'"),
            ],
        );
        assert_eq!(r.stdout, "refused", "{what}: {r:?}");
    }
    // A listening socket would take connections no rule names.
    let r = t.run(&granted, &[PERL, "-e", "use Socket; socket(my $s, PF_INET, SOCK_STREAM, 0) or die; listen($s, 1) ? print 'listening' : print 'refused'"]);
    assert_eq!(r.stdout, "refused", "{r:?}");
}

#[test]
fn the_scope_cannot_leave_its_cgroup() {
    let t = Ws::new();
    let p = t.policy(&policy_text(
        &["/sys/fs/cgroup/**"],
        &[],
        &tools_and(&[]),
        "",
    ));
    let r = t.run(
        &p,
        &[SH, "-c", "echo $$ > /sys/fs/cgroup/unified/cgroup.procs || echo $$ > /sys/fs/cgroup/cgroup.procs"],
    );
    assert_ne!(r.status, 0, "{r:?}");
}

#[test]
fn a_policy_landlock_cannot_express_is_refused_before_anything_runs() {
    let t = Ws::new();
    let p = t.policy("version = 1\n[fs]\nread = [\"./**\"]\ndeny = [\"./**/*.key\"]\n");
    let engine = bee_userspace::landlock::LandlockEngine::new().unwrap();
    let parent = bee_userspace::cgroup::CgroupParent::open_default().unwrap();
    let err = bee_userspace::scope::Scope::create_for_policy(
        &engine,
        &parent,
        &p,
        bee_userspace::scope::ScopeOptions::default(),
    )
    .expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("fs.deny[0] `./**/*.key`"), "{text}");
}

#[test]
fn renames_and_proc_magic_links_do_not_move_a_secret_in_or_a_grant_out() {
    let t = Ws::new();
    let secret = t.outside("secret.txt", "top secret");
    t.write("granted/file", "mine");
    let p = t.policy(&policy_text(&["./**"], &["./**"], &tools_and(&[]), ""));
    for attack in [
        format!("mv {} ./stolen", secret.display()),
        format!("mv ./granted {}/moved", t.outside_dir().display()),
        format!("cat /proc/self/root{}", secret.display()),
        format!("cat /proc/1/root{}", secret.display()),
        format!("ln -s {} ./l && cat ./l", secret.display()),
    ] {
        let r = t.run(&p, &[SH, "-c", &attack]);
        assert_ne!(r.status, 0, "`{attack}` succeeded: {r:?}");
        assert!(!r.stdout.contains("secret"), "`{attack}`: {r:?}");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret");
    assert!(!t.path().join("stolen").exists());
    assert_eq!(
        std::fs::read_to_string(t.path().join("granted/file")).unwrap(),
        "mine"
    );
    // Within the writable tree, renames work.
    let r = t.run(
        &p,
        &[
            SH,
            "-c",
            "mv granted/file granted/renamed && cat granted/renamed",
        ],
    );
    assert_eq!((r.status, r.stdout.as_str()), (0, "mine"), "{r:?}");
}

#[test]
fn a_v4_mapped_address_reaches_only_granted_ports() {
    let t = Ws::new();
    let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (granted, other) = (
        open.local_addr().unwrap().port(),
        closed.local_addr().unwrap().port(),
    );
    let p = t.policy(&perl_policy(&format!(
        "[[net.allow]]\naddr = [\"0.0.0.0/0\", \"::/0\"]\nports = [{granted}]\nproto = \"tcp\"\n"
    )));
    let connect = |port: u16| {
        format!(
            "use Socket qw(:all); socket(my $s, AF_INET6, SOCK_STREAM, 0) or die 'socket'; \
             my $a = inet_pton(AF_INET6, '::ffff:127.0.0.1'); \
             connect($s, pack_sockaddr_in6({port}, $a)) ? print 'connected' : print 'refused'"
        )
    };
    let r = t.run(&p, &[PERL, "-e", &connect(granted)]);
    assert_eq!(r.stdout, "connected", "{r:?}");
    let r = t.run(&p, &[PERL, "-e", &connect(other)]);
    assert_eq!(r.stdout, "refused", "{r:?}");
    // Name servers are reached by UDP, which is refused, and TCP port 53 is not granted.
    let r = t.run(
        &p,
        &[
            PERL,
            "-e",
            "use Socket; socket(my $s, PF_INET, SOCK_DGRAM, 0) ? print 'made' : print 'refused'",
        ],
    );
    assert_eq!(r.stdout, "refused", "{r:?}");
}

#[test]
fn a_carve_out_tree_is_hidden_by_a_mount_the_scope_cannot_remove() {
    let t = Ws::new();
    t.write("secrets/key", "top secret");
    t.write("src/lib.rs", "code");
    let mut text = policy_text(&["./**"], &["./**"], &tools_and(&[]), "");
    text = text.replace("[exec]", "deny = [\"./secrets/**\"]\n[exec]");
    let p = t.policy(&text);
    let ok = t.run(&p, &[SH, "-c", "cat src/lib.rs && echo more >> src/lib.rs"]);
    assert_eq!((ok.status, ok.stdout.as_str()), (0, "code"), "{ok:?}");
    for attack in [
        "cat secrets/key",
        "ls secrets",
        "echo x > secrets/new",
        "mv secrets gone",
        "rm -rf secrets",
        "cat ./src/../secrets/key",
        "chmod 777 secrets",
        "ln secrets/key stolen",
    ] {
        let r = t.run(&p, &[SH, "-c", attack]);
        assert_ne!(r.status, 0, "`{attack}` succeeded: {r:?}");
        assert!(!r.stdout.contains("secret"), "`{attack}`: {r:?}");
    }
    assert_eq!(
        std::fs::read_to_string(t.path().join("secrets/key")).unwrap(),
        "top secret"
    );
    assert!(!t.path().join("secrets/new").exists());
}

#[test]
fn a_protected_tree_stays_read_only_and_an_exec_carve_out_does_not_run() {
    let t = Ws::new();
    t.write("deploy/run.sh", "echo deploy");
    t.write("notes.txt", "n");
    std::fs::create_dir_all(t.path().join("bin")).unwrap();
    for name in ["cat", "ls"] {
        std::fs::copy(format!("/usr/bin/{name}"), t.path().join("bin").join(name)).unwrap();
    }
    let text = policy_text(&["./**"], &["./**"], &tools_and(&["./bin/**"]), "").replace(
        "[exec]",
        "protect = [\"./deploy/**\"]\n[exec]\ndeny = [\"./bin/ls\"]",
    );
    let p = t.policy(&text);
    let ok = t.run(
        &p,
        &[
            SH,
            "-c",
            "cat deploy/run.sh && echo more >> notes.txt && ./bin/cat notes.txt",
        ],
    );
    assert_eq!(ok.status, 0, "{ok:?}");
    for attack in [
        "echo pwned > deploy/run.sh",
        "echo x > deploy/new.sh",
        "rm deploy/run.sh",
        "mv deploy elsewhere",
        "chmod 777 deploy/run.sh",
        "./bin/ls /",
        "/lib64/ld-linux-x86-64.so.2 ./bin/ls /",
    ] {
        let r = t.run(&p, &[SH, "-c", attack]);
        assert_ne!(r.status, 0, "`{attack}` succeeded: {r:?}");
    }
    assert_eq!(
        std::fs::read_to_string(t.path().join("deploy/run.sh")).unwrap(),
        "echo deploy"
    );
    assert!(!t.path().join("deploy/new.sh").exists());
}

/// Found by attacking the engine: a datagram socket of a `socketpair` could send to a host's
/// pathname socket, and fanotify could watch host paths.
#[test]
fn a_socket_pair_cannot_reach_a_host_socket_and_nothing_is_watched() {
    let t = Ws::new();
    let dir = t.outside_dir().join("sock");
    std::fs::create_dir_all(&dir).unwrap();
    let host = std::os::unix::net::UnixDatagram::bind(dir.join("dg.sock")).unwrap();
    host.set_nonblocking(true).unwrap();
    let p = t.policy(&policy_text(
        &[
            "/usr/share/perl/**",
            "/usr/lib/x86_64-linux-gnu/perl/**",
            "./**",
        ],
        &["./**"],
        &[PERL],
        "",
    ));
    let script = format!(
        "use Socket; socketpair(my $a, my $b, AF_UNIX, SOCK_DGRAM, 0) or do {{ print 'refused'; exit }}; \
         send($b, 'ping', 0, pack_sockaddr_un('{}')) ? print 'sent' : print 'refused'",
        dir.join("dg.sock").display()
    );
    let r = t.run(&p, &[PERL, "-e", &script]);
    assert_eq!(r.stdout, "refused", "{r:?}");
    let mut buf = [0u8; 16];
    assert!(
        host.recv(&mut buf).is_err(),
        "the host socket got a datagram"
    );
    // A stream pair still works (pipes between the scope's own processes).
    let r = t.run(&p, &[PERL, "-e", "use Socket; socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0) ? print 'paired' : print 'refused'"]);
    assert_eq!(r.stdout, "paired", "{r:?}");
    // fanotify_init in its unprivileged mode (FAN_REPORT_FID | FAN_REPORT_DIR_FID | FAN_REPORT_NAME).
    let r = t.run(
        &p,
        &[
            PERL,
            "-e",
            "my $fd = syscall(300, 0x00000e00, 0); print $fd < 0 ? 'refused' : 'watching'",
        ],
    );
    assert_eq!(r.stdout, "refused", "{r:?}");
}

/// Found by attacking the engine: without a working directory of its own, a command's
/// relative writes went to the read-only mount under the workspace's bind.
#[test]
fn relative_paths_in_the_inherited_working_directory_see_the_grants() {
    let t = Ws::new();
    let p = t.policy(&policy_text(&["./**"], &["./**"], &tools_and(&[]), ""));
    let engine = bee_userspace::landlock::LandlockEngine::new().unwrap();
    let parent = bee_userspace::cgroup::CgroupParent::open_default().unwrap();
    let scope = bee_userspace::scope::Scope::create_for_policy(
        &engine,
        &parent,
        &p,
        bee_userspace::scope::ScopeOptions::default(),
    )
    .unwrap();
    // No current_dir on the spec: the child inherits this process's, set to the workspace.
    let before = std::env::current_dir().unwrap();
    std::env::set_current_dir(t.path()).unwrap();
    let spec = bee_userspace::launch::LaunchSpec::new(SH).args(["-c", "echo made > rel.txt"]);
    let spawned = scope.spawn(&spec);
    std::env::set_current_dir(before).unwrap();
    let mut launched = spawned.unwrap();
    let report = scope.finish(&mut launched, &mut |_| {}).unwrap();
    assert_eq!(report.outcome.exit_code(), 0);
    assert_eq!(
        std::fs::read_to_string(t.path().join("rel.txt")).unwrap(),
        "made\n"
    );
}

/// Found by attacking the engine: a scope swapping a granted directory with a symbolic link
/// (`renameat2(RENAME_EXCHANGE)`) while another call of the same policy started could get a
/// writable clone of a host tree mounted inside the workspace, since the mounts were made by
/// name. They are made on descriptors of the files the parent found, checked by identity.
#[test]
fn a_concurrent_rename_never_mounts_a_host_tree_into_the_scope() {
    let t = Ws::new();
    let secret = t.outside("host/secret", "top secret");
    let host = secret.parent().unwrap().to_owned();
    std::fs::create_dir_all(t.path().join("d/bin")).unwrap();
    std::fs::create_dir_all(t.path().join("x")).unwrap();
    std::os::unix::fs::symlink(&host, t.path().join("x/bin")).unwrap();
    std::os::unix::fs::symlink(t.path().join("x"), t.path().join("dl")).unwrap();
    let ws = t.path().display().to_string();
    let p = t.policy(&policy_text(
        &["./**"],
        &["./**"],
        &tools_and(&[PERL, "./d/bin/**"]),
        "",
    ));
    let racer = format!(
        "my ($a, $b, $end) = ('{ws}/d', '{ws}/dl', time + 4); \
         while (time < $end) {{ syscall(316, -100, $a, -100, $b, 2) for 1..10000 }}"
    );
    let p2 = p.clone();
    let t2 = std::thread::scope(|s| {
        let racing = s.spawn(|| t.run(&p2, &[PERL, "-e", &racer]));
        let mut leaked = Vec::new();
        for _ in 0..60 {
            let read = format!("cat {ws}/d/bin/secret {ws}/dl/bin/secret 2>/dev/null");
            // A launch that finds another file where the parent found one is refused (fail
            // closed); one that runs must not see the host.
            if let Ok(r) = t.try_run(&p, &[SH, "-c", &read])
                && r.stdout.contains("top secret")
            {
                leaked.push(r);
            }
        }
        let _ = racing.join();
        leaked
    });
    assert!(t2.is_empty(), "a call read the host's secret: {t2:?}");
}

/// This host's Landlock engine reports denials (ABI 7 and audit): the tests below need it.
#[expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a helper of the tests: a host that cannot report fails them"
)]
fn assert_reports_denials() {
    let engine = bee_userspace::landlock::LandlockEngine::new().unwrap();
    engine
        .reports_denials()
        .expect("this host's kernel has Landlock ABI 7 and audit");
}

/// Denials Landlock decides are reported as the BPF engine reports them, each to the scope
/// whose process made it: a read and a connection, by a program started after the
/// launcher's `execve` (Landlock logs only until it by default). A write outside the write
/// grants is refused by the read-only mounts first (`EROFS`), which the kernel does not log.
#[test]
fn denials_are_reported_to_the_scope_that_made_them() {
    assert_reports_denials();
    let t = Ws::new();
    let secret = t.outside("secret.txt", "top secret");
    std::fs::create_dir(t.outside_dir().join("d")).unwrap();
    t.write("out.txt", "");
    let p = t.policy(&policy_text(
        &["./**"],
        &["./out.txt"],
        &tools_and(&["/usr/bin/bash"]),
        "[[net.allow]]\naddr = [\"0.0.0.0/0\", \"::/0\"]\nports = [80]\nproto = \"tcp\"\n",
    ));
    let script = format!(
        "cat {secret}; echo x > {outside}/d/new; exec 3<>/dev/tcp/127.0.0.1/9; true",
        secret = secret.display(),
        outside = t.outside_dir().display(),
    );
    let r = t.run(&p, &[SH, "-c", &format!("/usr/bin/bash -c '{script}'")]);
    assert!(!r.stdout.contains("secret"), "{r:?}");
    assert!(r.stderr.contains("Read-only file system"), "{r:?}");
    let want = [
        format!(
            "open {} for read: no fs.read grant covers it",
            secret.display()
        ),
        "connect tcp 127.0.0.1:9: no net.allow rule covers it".to_owned(),
    ];
    for w in &want {
        assert!(
            r.denials.iter().any(|d| d.contains(w.as_str())),
            "no `{w}` in {r:#?}"
        );
    }
    // Another scope's run reports only its own denials (cat's look for its locale files).
    let quiet = t.run(&p, &["/usr/bin/cat", "out.txt"]);
    assert_eq!(quiet.status, 0, "{quiet:?}");
    for w in &want {
        assert!(
            !quiet.denials.iter().any(|d| d.contains(w.as_str())),
            "{quiet:#?}"
        );
    }
}

/// A TCP socket binds only to port 0, a port the kernel picks, as under the BPF engine's
/// `socket_bind`, on either family and the unspecified address; it still cannot listen.
#[test]
fn a_tcp_socket_binds_only_a_port_the_kernel_picks_and_cannot_listen_there() {
    assert_reports_denials();
    let t = Ws::new();
    let p = t.policy(&perl_policy(""));
    let script = "use Socket qw(:all); \
        for my $addr (pack_sockaddr_in(0, inet_aton('127.0.0.1')), pack_sockaddr_in(0, INADDR_ANY), \
                      pack_sockaddr_in6(0, IN6ADDR_LOOPBACK)) { \
          socket(my $s, sockaddr_family($addr), SOCK_STREAM, 0) or die \"socket: $!\"; \
          if (bind($s, $addr)) { \
            my $port = sockaddr_family($addr) == AF_INET ? (unpack_sockaddr_in(getsockname($s)))[0] \
                                                         : (unpack_sockaddr_in6(getsockname($s)))[0]; \
            print $port > 0 ? 'picked ' : 'zero '; \
            print listen($s, 1) ? 'listening ' : 'not-listening '; \
          } else { print 'refused '; } \
        }";
    let r = t.run(&p, &[PERL, "-e", script]);
    assert_eq!(
        r.stdout, "picked not-listening picked not-listening picked not-listening ",
        "{r:?}"
    );
    assert!(r.denials.iter().all(|d| !d.contains("bind tcp")), "{r:#?}");
}

/// A refused TCP bind is reported with the address and port it asked for, and a connect to
/// or a bind on the unspecified address with its port: the kernel's record leaves 0.0.0.0
/// and :: out, so bee names both.
#[test]
fn refused_binds_and_unspecified_addresses_are_reported_with_their_ports() {
    assert_reports_denials();
    let t = Ws::new();
    let p = t.policy(&perl_policy(""));
    let script = "use Socket; \
        socket(my $a, PF_INET, SOCK_STREAM, 0) or die; \
        print bind($a, pack_sockaddr_in(8089, inet_aton('127.0.0.1'))) ? 'bound ' : 'refused '; \
        socket(my $b, PF_INET, SOCK_STREAM, 0) or die; \
        print bind($b, pack_sockaddr_in(8090, INADDR_ANY)) ? 'bound ' : 'refused '; \
        socket(my $c, PF_INET, SOCK_STREAM, 0) or die; \
        print connect($c, pack_sockaddr_in(9, INADDR_ANY)) ? 'connected' : 'refused'";
    let r = t.run(&p, &[PERL, "-e", script]);
    assert_eq!(r.stdout, "refused refused refused", "{r:?}");
    for w in [
        "bind tcp 127.0.0.1:8089: never allowed inside a scope",
        "bind tcp 0.0.0.0:8090 or [::]:8090: never allowed inside a scope",
        "connect tcp 0.0.0.0:9 or [::]:9: no net.allow rule covers it",
    ] {
        assert!(
            r.denials.iter().any(|d| d.contains(w)),
            "no `{w}` in {r:#?}"
        );
    }
}

/// A denial made as a command ends is reported with that command, every time: the drain
/// waits for the kernel's audit queue to empty and for the reader to read the socket after
/// that, not for a quiet spell. Twenty-five runs in a row, each denied once just before it
/// exits.
#[test]
fn a_denial_just_before_the_end_is_reported_every_time() {
    assert_reports_denials();
    let t = Ws::new();
    let secret = t.outside("secret.txt", "top secret");
    let p = t.policy(&policy_text(&["./**"], &[], &["/usr/bin/cat"], ""));
    let want = format!(
        "open {} for read: no fs.read grant covers it",
        secret.display()
    );
    for round in 0..25 {
        let r = t.run(&p, &["/usr/bin/cat", &secret.display().to_string()]);
        assert_ne!(r.status, 0, "round {round}: {r:?}");
        assert!(
            r.denials.iter().any(|d| d.contains(want.as_str())),
            "round {round}: no `{want}` in {r:#?}"
        );
    }
}

/// A file the scope marks set-user-ID (or set-group-ID) would run as its owner — root, for
/// bee as root — when a user outside the scope runs it after the call: every way to set the
/// bits is refused (`chmod`, `fchmodat`, `install -m`, `open` and `mknod` with the mode,
/// `openat2`), and the report channel cannot be silenced by a nested domain.
#[test]
fn set_id_bits_are_never_set_and_reports_cannot_be_silenced() {
    let t = Ws::new();
    t.write("f", "x");
    let p = t.policy(&policy_text(
        &["./**", "/usr/**"],
        &["./**"],
        &tools_and(&["/usr/bin/install", PERL]),
        "",
    ));
    let perl = |code: &str| t.run(&p, &[PERL, "-e", code]);
    for attack in [
        "chmod 4755 f; chmod u+s f; chmod g+s f",
        "install -m 4755 /usr/bin/cat ./rootcat",
        "cp /usr/bin/cat ./c2 2>/dev/null; chmod 6755 ./c2",
    ] {
        let r = t.run(&p, &[SH, "-c", attack]);
        assert_ne!(r.status, 0, "`{attack}`: {r:?}");
    }
    // open(O_CREAT) and mknod(S_IFREG) with the bits, and openat2 (whose mode seccomp cannot
    // read: it answers ENOSYS, and the kernel would keep S_ISUID on a new file).
    let r =
        perl("use Fcntl; sysopen(my $f, 'o1', O_CREAT|O_WRONLY, 04755) or print \"refused\\n\";");
    assert!(
        r.stdout.contains("refused") || !t.path().join("o1").exists(),
        "{r:?}"
    );
    let r = perl(r#"my $n = 'o2'; syscall(133, $n, 0100000|04755, 0) == 0 or print "refused\n";"#);
    assert!(r.stdout.contains("refused"), "{r:?}");
    let how = pack_open_how();
    let r = perl(&format!(
        r#"my $h = pack('QQQ', {how}); my $n = 'o3'; syscall(437, -100, $n, $h, 24) >= 0 or print "$!\n";"#
    ));
    assert!(r.stdout.contains("Function not implemented"), "{r:?}");
    for entry in std::fs::read_dir(t.path()).unwrap() {
        let entry = entry.unwrap();
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&entry.metadata().unwrap().permissions());
        assert_eq!(mode & 0o6000, 0, "{} is {mode:o}", entry.path().display());
    }
    // A nested Landlock domain that turns logging off is refused (flags 1 and 4); a plain one
    // (a tool sandboxing itself) is allowed.
    for flags in [1, 4] {
        let r = perl(&format!(
            "syscall(446, -1, {flags}) == 0 and print \"silenced\\n\"; print \"$!\\n\";"
        ));
        assert!(!r.stdout.contains("silenced"), "flags {flags}: {r:?}");
        assert!(
            r.stdout.contains("Operation not permitted"),
            "flags {flags}: {r:?}"
        );
    }
}

/// `struct open_how` for `openat2(O_CREAT | O_WRONLY, 04755)`: flags, mode, resolve.
fn pack_open_how() -> String {
    format!("{}, {}, 0", 0o100 | 0o1, 0o4755)
}
