//! Shared pieces of the kernel tests: one engine per test binary, test cgroups, policies,
//! scoped child processes, a helper mode of the test binary for syscalls busybox lacks, and
//! audit-event lookups.
//!
//! Tests run with `--test-threads=1` in the VM; every test makes its own cgroup, so events are
//! told apart by cgroup id.
#![allow(dead_code, reason = "each test binary uses part of the support module")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support: a step that fails fails the test"
)]

use std::error::Error;
use std::ffi::CString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};

use bee_common::{AuditEvent, Hook};
use bee_core::{CompileOptions, compile_str};
use bee_userspace::engine::{Engine, EngineOptions, InstalledPolicy};
use bee_userspace::plan::EnforcementPlan;

pub type TestResult = Result<(), Box<dyn Error>>;

pub const BUSYBOX: &str = "/bin/busybox";
pub const EPERM: i32 = 1;
/// Environment variable that turns the test binary into a helper (see [`helper_main`]).
pub const HELPER_ENV: &str = "BEE_KT_HELPER";

/// Asserts the kernel is the one the VM runner booted, when it says which.
pub fn assert_expected_kernel(release: &str) {
    if let Ok(series) = std::env::var("BEE_VM_KERNEL") {
        assert!(
            release.starts_with(&format!("{series}.")),
            "booted for {series}, running {release}"
        );
    }
}

/// The engine of this test binary, loaded on first use. Panics (fails the test) if it cannot
/// be loaded: a kernel test never skips.
pub fn engine() -> MutexGuard<'static, Engine> {
    static ENGINE: OnceLock<Mutex<Engine>> = OnceLock::new();
    let m = ENGINE.get_or_init(|| {
        assert_expected_kernel(&fs::read_to_string("/proc/sys/kernel/osrelease").unwrap());
        let start = std::time::Instant::now();
        let engine = Engine::load(&EngineOptions::default()).expect("Engine::load");
        println!("Engine::load took {:?}", start.elapsed());
        Mutex::new(engine)
    });
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cgroup2 mount point.
pub fn cgroup_root() -> PathBuf {
    bee_userspace::support::parse_cgroup2_mount(
        &fs::read_to_string("/proc/self/mountinfo").unwrap(),
    )
    .expect("no cgroup2 mount")
}

/// A cgroup v2 directory; on drop its processes are killed and it is removed.
#[derive(Debug)]
pub struct Cgroup {
    pub path: PathBuf,
}

impl Cgroup {
    pub fn create(name: &str) -> Self {
        let path = cgroup_root().join(format!("bee-kt-{name}-{}", std::process::id()));
        let _ = fs::remove_dir(&path);
        fs::create_dir(&path).unwrap();
        Self { path }
    }

    /// The cgroup id `bpf_get_current_cgroup_id()` returns: the directory's inode number.
    pub fn id(&self) -> u64 {
        fs::metadata(&self.path).unwrap().ino()
    }

    pub fn procs(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    pub fn pids(&self) -> Vec<u32> {
        fs::read_to_string(self.procs())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    pub fn kill_all(&self) {
        let _ = fs::write(self.path.join("cgroup.kill"), "1");
        for _ in 0..200 {
            if self.pids().is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill_all();
        let _ = fs::remove_dir(&self.path);
    }
}

/// Compiles a policy text (paths absolute) and plans it.
pub fn plan(text: &str) -> EnforcementPlan {
    let options = CompileOptions {
        base: PathBuf::from("/"),
        home: None,
    };
    let compiled = compile_str("test.toml", text, &options)
        .unwrap_or_else(|e| panic!("policy does not compile: {e:?}\n{text}"));
    EnforcementPlan::new(&compiled.policy).unwrap_or_else(|e| panic!("plan: {e}\n{text}"))
}

/// The read and exec grants every scoped child needs to start: busybox, the dynamic loader and
/// shared libraries, and the test binary itself (the helper).
pub fn base_grants() -> String {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().display().to_string();
    format!(
        r#"
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{dir}/**"]
write = ["/dev/null"]

[exec]
allow = ["/bin/busybox", "/bin/*", "/lib/**", "/lib64/**", "/usr/lib/**", "{dir}/**"]
"#
    )
}

/// A cgroup with an installed policy; uninstalled and removed on drop.
pub struct Scope {
    pub cg: Cgroup,
    pub installed: Option<InstalledPolicy>,
}

impl Scope {
    /// Creates a cgroup and installs `text` (a whole policy) for it with scope `flags`.
    pub fn new(name: &str, text: &str, flags: u32) -> Self {
        let cg = Cgroup::create(name);
        let plan = plan(text);
        let installed = engine().install(&plan, cg.id(), flags).expect("install");
        let _ = events(&cg);
        Self {
            cg,
            installed: Some(installed),
        }
    }

    pub fn id(&self) -> u64 {
        self.cg.id()
    }

    pub fn policy_id(&self) -> u32 {
        self.installed.as_ref().map_or(0, |i| i.policy_id())
    }

    /// Uninstalls now (the cgroup stays).
    pub fn uninstall(&mut self) {
        if let Some(i) = self.installed.take() {
            engine().uninstall(i).expect("uninstall");
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        self.cg.kill_all();
        self.uninstall();
    }
}

/// A command that joins `cg` (if given) between fork and exec, so the exec is checked.
pub fn command_in(cg: Option<&Cgroup>, program: &str) -> Command {
    let mut cmd = Command::new(program);
    if let Some(cg) = cg {
        let procs = CString::new(cg.procs().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: the closure only calls async-signal-safe functions (open, write, close).
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
                libc::close(fd);
                if ok {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }
    cmd
}

/// Runs `program args…` in `cg`.
pub fn run(cg: Option<&Cgroup>, program: &str, args: &[&str]) -> Output {
    command_in(cg, program).args(args).output().unwrap()
}

/// Runs `busybox sh -c SCRIPT sh ARGS…` in `cg`.
pub fn sh(cg: Option<&Cgroup>, script: &str, args: &[&str]) -> Output {
    command_in(cg, BUSYBOX)
        .args(["sh", "-c", script, "sh"])
        .args(args)
        .output()
        .unwrap()
}

/// Runs the test binary as a helper doing `action args…` in `cg`; the exit code is the errno
/// of the operation (0 on success).
pub fn helper(cg: Option<&Cgroup>, action: &str, args: &[&str]) -> Output {
    let exe = std::env::current_exe().unwrap();
    let mut spec = vec![action];
    spec.extend_from_slice(args);
    command_in(cg, exe.to_str().unwrap())
        .args([
            "--ignored",
            "--exact",
            "helper_entry",
            "--test-threads=1",
            "--nocapture",
            "-q",
        ])
        .env(HELPER_ENV, spec.join("\u{1f}"))
        .output()
        .unwrap()
}

/// The exit code of a helper run: the errno of its operation.
pub fn errno_of(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub fn show(out: &Output) -> String {
    format!(
        "status {:?}, stdout {:?}, stderr {:?}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts a busybox command failed with EPERM.
pub fn assert_eperm(out: &Output, what: &str) {
    assert!(
        !out.status.success(),
        "{what}: expected a denial: {}",
        show(out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
        "{what}: expected EPERM: {}",
        show(out)
    );
}

pub fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: expected success: {}",
        show(out)
    );
}

/// Drains the engine's events and returns those of `cg`; events of other cgroups are kept for
/// their own callers.
pub fn events(cg: &Cgroup) -> Vec<AuditEvent> {
    static STASH: Mutex<Vec<AuditEvent>> = Mutex::new(Vec::new());
    let id = cg.id();
    let mut e = engine();
    let mut stash = STASH.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let batch = e.read_events(1024);
        if batch.is_empty() {
            break;
        }
        stash.extend(batch);
    }
    let (mine, rest): (Vec<_>, Vec<_>) = stash.drain(..).partition(|ev| ev.cgroup_id == id);
    *stash = rest;
    mine
}

pub fn path_of(ev: &AuditEvent) -> String {
    String::from_utf8_lossy(ev.path()).into_owned()
}

/// Finds the denial of `hook` on `path` among `evs`, and checks its common fields.
pub fn denial<'a>(evs: &'a [AuditEvent], hook: Hook, path: &str, scope: &Scope) -> &'a AuditEvent {
    let ev = evs
        .iter()
        .find(|e| e.hook == hook as u32 && path_of(e) == path && e.error != 0)
        .unwrap_or_else(|| {
            let seen: Vec<String> = evs
                .iter()
                .map(|e| {
                    format!(
                        "{:?} {} err {}",
                        Hook::from_raw(e.hook),
                        path_of(e),
                        e.error
                    )
                })
                .collect();
            panic!("no {hook:?} denial of {path}; events: {seen:#?}")
        });
    assert_eq!(ev.error, -EPERM);
    assert_eq!(ev.cgroup_id, scope.id());
    assert_eq!(ev.policy_id, scope.policy_id());
    assert!(ev.tgid > 1 && ev.pid > 1);
    assert_eq!(ev.flags & bee_common::event::EVENT_ALLOWED, 0);
    ev
}

/// A scratch directory, removed on drop.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Self {
        let path = PathBuf::from(format!("/tmp/bee-kt-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        Self { path }
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn s(&self, name: &str) -> String {
        self.join(name).display().to_string()
    }

    pub fn write(&self, name: &str, content: &str) -> String {
        let p = self.join(name);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, content).unwrap();
        p.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Defines the `helper_entry` test that runs helper actions when [`HELPER_ENV`] is set.
#[macro_export]
macro_rules! helper_entry {
    () => {
        #[test]
        #[ignore = "not a test: the tests run it in a child process (with --ignored) as their helper"]
        fn helper_entry() {
            kernel_support::helper_main();
        }
    };
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

fn check(r: i64) -> i32 {
    if r < 0 { errno() } else { 0 }
}

fn sockaddr_v4(addr: &str, port: u16) -> libc::sockaddr_in {
    let ip: std::net::Ipv4Addr = addr.parse().unwrap();
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip.octets()),
        },
        sin_zero: [0; 8],
    }
}

fn sockaddr_v6(addr: &str, port: u16) -> libc::sockaddr_in6 {
    let ip: std::net::Ipv6Addr = addr.parse().unwrap();
    libc::sockaddr_in6 {
        sin6_family: libc::AF_INET6 as u16,
        sin6_port: port.to_be(),
        sin6_flowinfo: 0,
        sin6_addr: libc::in6_addr {
            s6_addr: ip.octets(),
        },
        sin6_scope_id: 0,
    }
}

/// Connects (or sends a UDP datagram to) `addr:port`; returns 0 or the errno.
fn net(action: &str, addr: &str, port: u16) -> i32 {
    let v6 = addr.contains(':');
    let (family, ty) = match (v6, action) {
        (false, "connect") => (libc::AF_INET, libc::SOCK_STREAM),
        (true, "connect") => (libc::AF_INET6, libc::SOCK_STREAM),
        (false, _) => (libc::AF_INET, libc::SOCK_DGRAM),
        (true, _) => (libc::AF_INET6, libc::SOCK_DGRAM),
    };
    // SAFETY: plain syscalls on owned descriptors and stack buffers of the right size.
    unsafe {
        let fd = libc::socket(family, ty, 0);
        if fd < 0 {
            return errno();
        }
        let (sa, len): (*const libc::sockaddr, u32) = if v6 {
            let b = Box::leak(Box::new(sockaddr_v6(addr, port)));
            (
                (b as *const libc::sockaddr_in6).cast(),
                size_of::<libc::sockaddr_in6>() as u32,
            )
        } else {
            let b = Box::leak(Box::new(sockaddr_v4(addr, port)));
            (
                (b as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as u32,
            )
        };
        let r = if action == "connect" {
            // Non-blocking: the LSM decides before any packet is sent.
            libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
            let r = libc::connect(fd, sa, len);
            if r < 0 && errno() == libc::EINPROGRESS {
                0
            } else {
                check(r.into())
            }
        } else {
            check(libc::sendto(fd, b"x".as_ptr().cast(), 1, 0, sa, len) as i64)
        };
        libc::close(fd);
        r
    }
}

/// Submits one io_uring operation and returns its errno (0 on success).
fn uring_one(entry: &io_uring::squeue::Entry) -> i32 {
    let mut ring = match io_uring::IoUring::new(4) {
        Ok(r) => r,
        Err(e) => return e.raw_os_error().unwrap_or(-1),
    };
    // SAFETY: the entry's buffers outlive the wait below.
    unsafe {
        if ring.submission().push(entry).is_err() {
            return -1;
        }
    }
    if let Err(e) = ring.submit_and_wait(1) {
        return e.raw_os_error().unwrap_or(-1);
    }
    match ring.completion().next() {
        Some(c) if c.result() < 0 => -c.result(),
        Some(_) => 0,
        None => -1,
    }
}

/// `IORING_OP_OPENAT` of `path` for reading.
fn uring_openat(path: &str) -> i32 {
    let p = cstr(path);
    let e = io_uring::opcode::OpenAt::new(io_uring::types::Fd(libc::AT_FDCWD), p.as_ptr())
        .flags(libc::O_RDONLY)
        .build();
    uring_one(&e)
}

/// `IORING_OP_CONNECT` of a TCP socket to `addr:port` (IPv4).
fn uring_connect(addr: &str, port: u16) -> i32 {
    // SAFETY: a plain socket call.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        return errno();
    }
    let sa = sockaddr_v4(addr, port);
    let e = io_uring::opcode::Connect::new(
        io_uring::types::Fd(fd),
        (&raw const sa).cast(),
        size_of::<libc::sockaddr_in>() as u32,
    )
    .build();
    uring_one(&e)
}

/// Receives one descriptor over fd 3 (SCM_RIGHTS): 0 if it arrived, EPERM if the kernel
/// dropped it (`MSG_CTRUNC` without a descriptor).
fn recv_fd() -> i32 {
    let mut data = [0u8; 16];
    let mut control = [0u8; 64];
    // SAFETY: recvmsg into stack buffers described by the msghdr.
    unsafe {
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len();
        if libc::recvmsg(3, &mut msg, 0) < 0 {
            return errno();
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if !cmsg.is_null() && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
            return 0;
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return libc::EPERM;
        }
        -1
    }
}

/// Sends `file` over a new socket pair and returns the receiving end, for a child's fd 3.
pub fn socket_with_fd(file: &fs::File) -> std::os::fd::OwnedFd {
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut sv = [0i32; 2];
    // SAFETY: socketpair and sendmsg on owned descriptors with stack buffers.
    unsafe {
        assert_eq!(
            libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()),
            0
        );
        let mut data = *b"x";
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let space = libc::CMSG_SPACE(size_of::<i32>() as u32) as usize;
        let mut control = vec![0u8; space];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<i32>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), file.as_raw_fd());
        assert_eq!(libc::sendmsg(sv[0], &msg, 0), 1);
        libc::close(sv[0]);
        std::os::fd::OwnedFd::from_raw_fd(sv[1])
    }
}

/// Runs the helper `action` in `cg` with `fd` as its descriptor 3.
pub fn helper_with_fd3(cg: &Cgroup, action: &str, fd: &std::os::fd::OwnedFd) -> Output {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    let exe = std::env::current_exe().unwrap();
    let mut cmd = command_in(Some(cg), exe.to_str().unwrap());
    // SAFETY: dup2 is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(raw, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.args([
        "--ignored",
        "--exact",
        "helper_entry",
        "--test-threads=1",
        "--nocapture",
        "-q",
    ])
    .env(HELPER_ENV, action)
    .output()
    .unwrap()
}

/// Runs one helper action; returns the errno (0 on success).
fn act(action: &str, a: &[&str]) -> i32 {
    let arg = |i: usize| a.get(i).copied().unwrap_or("");
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        match action {
            "open-read" => {
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY);
                check(fd.into())
            }
            "open-write" => {
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644);
                check(fd.into())
            }
            "mmap-exec" | "mprotect-exec" => {
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY);
                if fd < 0 {
                    return errno();
                }
                let prot = if action == "mmap-exec" {
                    libc::PROT_READ | libc::PROT_EXEC
                } else {
                    libc::PROT_READ
                };
                let p = libc::mmap(std::ptr::null_mut(), 4096, prot, libc::MAP_PRIVATE, fd, 0);
                if p == libc::MAP_FAILED {
                    return errno();
                }
                if action == "mprotect-exec" {
                    return check(
                        libc::mprotect(p, 4096, libc::PROT_READ | libc::PROT_EXEC).into(),
                    );
                }
                0
            }
            "anon-exec" => {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if p == libc::MAP_FAILED { errno() } else { 0 }
            }
            "memfd-exec" => {
                let bytes = fs::read(arg(0)).unwrap();
                let fd = libc::memfd_create(cstr("bee").as_ptr(), 0);
                if fd < 0 {
                    return errno();
                }
                libc::write(fd, bytes.as_ptr().cast(), bytes.len());
                let argv = [cstr("busybox"), cstr("true")];
                let argv_p = [argv[0].as_ptr(), argv[1].as_ptr(), std::ptr::null()];
                let envp = [std::ptr::null()];
                libc::fexecve(fd, argv_p.as_ptr(), envp.as_ptr());
                errno()
            }
            "execveat-empty" => {
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_PATH);
                if fd < 0 {
                    return errno();
                }
                let argv = [cstr("busybox"), cstr("true")];
                let argv_p = [argv[0].as_ptr(), argv[1].as_ptr(), std::ptr::null()];
                let envp: [*const libc::c_char; 1] = [std::ptr::null()];
                libc::syscall(
                    libc::SYS_execveat,
                    fd,
                    cstr("").as_ptr(),
                    argv_p.as_ptr(),
                    envp.as_ptr(),
                    libc::AT_EMPTY_PATH,
                );
                errno()
            }
            "open-chain" => {
                // BASE SEG N: walk N directories named SEG with O_PATH, then open `f`.
                let mut fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_PATH);
                let seg = cstr(arg(1));
                for _ in 0..arg(2).parse::<u32>().unwrap() {
                    fd = libc::openat(fd, seg.as_ptr(), libc::O_PATH | libc::O_DIRECTORY);
                    if fd < 0 {
                        return errno();
                    }
                }
                check(libc::openat(fd, cstr("f").as_ptr(), libc::O_RDONLY).into())
            }
            "loader" => {
                // CGROUP POLICY_FILE: load an engine, install the policy for the cgroup, say
                // so, and wait to be killed.
                let engine = Engine::load(&EngineOptions::default());
                let mut engine = match engine {
                    Ok(e) => e,
                    Err(e) => {
                        eprintln!("loader: {e}");
                        return 200;
                    }
                };
                let id = fs::metadata(arg(0)).unwrap().ino();
                let text = fs::read_to_string(arg(1)).unwrap();
                let installed = engine.install(&plan(&text), id, 0).unwrap();
                println!("bee-loader-ready policy {}", installed.policy_id());
                std::mem::forget(installed);
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(60));
                }
            }
            "open-many" => {
                // Opens each argument for reading and prints `errno path` per line.
                for path in a {
                    let fd = libc::open(cstr(path).as_ptr(), libc::O_RDONLY);
                    let e = if fd < 0 { errno() } else { 0 };
                    if fd >= 0 {
                        libc::close(fd);
                    }
                    println!("open-many {e} {path}");
                }
                0
            }
            "unix-sendto" => {
                // A datagram to the unix socket bound at PATH.
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0);
                let mut sa: libc::sockaddr_un = std::mem::zeroed();
                sa.sun_family = libc::AF_UNIX as u16;
                for (i, b) in arg(0).as_bytes().iter().enumerate() {
                    sa.sun_path[i] = *b as libc::c_char;
                }
                let len = size_of::<libc::sockaddr_un>() as u32;
                let r = libc::sendto(fd, b"x".as_ptr().cast(), 1, 0, (&raw const sa).cast(), len);
                check(r as i64)
            }
            "socketpair-dgram" => {
                let mut sv = [0i32; 2];
                libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, sv.as_mut_ptr());
                check(libc::send(sv[0], b"x".as_ptr().cast(), 1, 0) as i64)
            }
            "uring-openat" => uring_openat(arg(0)),
            "uring-connect" => uring_connect(arg(0), arg(1).parse().unwrap()),
            "recv-fd" => recv_fd(),
            "connect" | "sendto" => net(action, arg(0), arg(1).parse().unwrap()),
            "bpf" => {
                // BPF_PROG_LOAD with an empty attr: refused by the LSM before any check.
                let attr = [0u8; 128];
                check(libc::syscall(libc::SYS_bpf, 5, attr.as_ptr(), attr.len()))
            }
            "kill" => check(libc::kill(arg(0).parse().unwrap(), 0).into()),
            "ptrace" => {
                let pid: i32 = arg(0).parse().unwrap();
                let r = libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0);
                let e = check(r);
                if e == 0 {
                    libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0);
                }
                e
            }
            "socket-packet" => check(libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0).into()),
            "socket-raw" => check(libc::socket(libc::AF_INET, libc::SOCK_RAW, 1).into()),
            "unshare-user" => {
                // unshare(CLONE_NEWUSER) needs a single-threaded caller: do it in a child.
                let pid = libc::fork();
                if pid == 0 {
                    let e = check(libc::unshare(libc::CLONE_NEWUSER).into());
                    libc::_exit(e);
                }
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
                libc::WEXITSTATUS(status)
            }
            "mount-tmpfs" => check(
                libc::mount(
                    cstr("none").as_ptr(),
                    cstr(arg(0)).as_ptr(),
                    cstr("tmpfs").as_ptr(),
                    0,
                    std::ptr::null(),
                )
                .into(),
            ),
            "unix-connect" => {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let mut sa: libc::sockaddr_un = std::mem::zeroed();
                sa.sun_family = libc::AF_UNIX as u16;
                let path = arg(0).as_bytes();
                let abstract_ = path.first() == Some(&b'@');
                for (i, b) in path.iter().enumerate() {
                    sa.sun_path[i] = if abstract_ && i == 0 {
                        0
                    } else {
                        *b as libc::c_char
                    };
                }
                let len = (size_of::<libc::sa_family_t>() + path.len()) as u32;
                check(libc::connect(fd, (&raw const sa).cast(), len).into())
            }
            _ => 255,
        }
    }
}

/// Body of the `helper_entry` test: with [`HELPER_ENV`] set, does the action and exits with
/// its errno; otherwise does nothing.
pub fn helper_main() {
    let Ok(spec) = std::env::var(HELPER_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('\u{1f}').collect();
    let code = act(parts[0], &parts[1..]);
    eprintln!("helper {spec:?}: errno {code}");
    std::process::exit(code);
}

/// Creates `n` nested directories named `seg` under `base` (with *at() calls, so the chain
/// may exceed PATH_MAX) and a file `f` holding "x\n" at the bottom.
pub fn make_chain(base: &Path, seg: &str, n: u32) {
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        let mut fd = libc::open(cstr(base.to_str().unwrap()).as_ptr(), libc::O_PATH);
        assert!(fd >= 0);
        let s = cstr(seg);
        for _ in 0..n {
            libc::mkdirat(fd, s.as_ptr(), 0o755);
            fd = libc::openat(fd, s.as_ptr(), libc::O_PATH | libc::O_DIRECTORY);
            assert!(fd >= 0, "openat: {}", errno());
        }
        let f = libc::openat(
            fd,
            cstr("f").as_ptr(),
            libc::O_WRONLY | libc::O_CREAT,
            0o644,
        );
        assert!(f >= 0, "create f: {}", errno());
        assert_eq!(libc::write(f, b"x\n".as_ptr().cast(), 2), 2);
        libc::close(f);
    }
}

/// `stat` of a path in the kernel's `(dev, ino)` terms.
pub fn kernel_id(path: &Path) -> (u32, u64) {
    let m = fs::metadata(path).unwrap();
    (bee_userspace::plan::kernel_dev(m.dev()).unwrap(), m.ino())
}
