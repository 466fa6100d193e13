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
use std::ffi::{CStr, CString};
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
        Self::in_cgroup(Cgroup::create(name), text, flags)
    }

    /// Installs `text` for the existing cgroup `cg` with scope `flags`.
    pub fn in_cgroup(cg: Cgroup, text: &str, flags: u32) -> Self {
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
    helper_with(cg, None, None, action, args)
}

/// As [`helper`], but the helper drops to `uid` (and gid `uid`, no supplementary groups) after
/// joining `cg`: an unprivileged user with no capabilities.
pub fn helper_as(cg: &Cgroup, uid: u32, action: &str, args: &[&str]) -> Output {
    helper_with(Some(cg), Some(uid), None, action, args)
}

/// Starts the helper `action args…` in `cg` without waiting, with stdin and stdout piped.
pub fn helper_spawn(cg: &Cgroup, action: &str, args: &[&str]) -> std::process::Child {
    let exe = std::env::current_exe().unwrap();
    let mut spec = vec![action];
    spec.extend_from_slice(args);
    command_in(Some(cg), exe.to_str().unwrap())
        .args([
            "--ignored",
            "--exact",
            "helper_entry",
            "--test-threads=1",
            "--nocapture",
            "-q",
        ])
        .env(HELPER_ENV, spec.join("\u{1f}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
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

/// `execveat(dirfd, path, ["busybox", "true"], [], flags)`; returns the errno of a failed call
/// (a successful one does not return).
fn execveat_true(dirfd: i32, path: &CStr, flags: i32) -> i32 {
    let argv = [cstr("busybox"), cstr("true")];
    let argv_p = [argv[0].as_ptr(), argv[1].as_ptr(), std::ptr::null()];
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: every pointer is to a NUL-terminated string or a NULL-terminated array that
    // lives until the call returns.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            dirfd,
            path.as_ptr(),
            argv_p.as_ptr(),
            envp.as_ptr(),
            flags,
        );
    }
    errno()
}

/// The POSIX access ACL's extended attribute.
pub const POSIX_ACL_ACCESS: &str = "system.posix_acl_access";

/// A value for the extended attribute `name`: a minimal POSIX ACL (u::rw-, g::r--, o::r--, as
/// setfacl writes it) for [`POSIX_ACL_ACCESS`], else `x`.
fn xattr_value(name: &str) -> Vec<u8> {
    if name != POSIX_ACL_ACCESS {
        return b"x".to_vec();
    }
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm) in [(0x01u16, 6u16), (0x04, 4), (0x20, 4)] {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&u32::MAX.to_le_bytes());
    }
    v
}

/// A unix socket address for `path` (`@name` for an abstract one) and its length.
fn sockaddr_un(path: &str) -> (libc::sockaddr_un, u32) {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as u16;
    let path = path.as_bytes();
    let abstract_ = path.first() == Some(&b'@');
    for (i, b) in path.iter().enumerate() {
        sa.sun_path[i] = if abstract_ && i == 0 {
            0
        } else {
            *b as libc::c_char
        };
    }
    (sa, (size_of::<libc::sa_family_t>() + path.len()) as u32)
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

/// The helper action `dns MODE ADDR PORT`: sends `query` to `ADDR:PORT` and waits (5 s) for a
/// reply, printing `reply from PEER: TEXT` on stdout. MODE is `udp` (unconnected `sendto`,
/// `recvfrom`), `udp-connected` (`connect`, `send`, `recv`, the peer from `getpeername`) or
/// `tcp` (connect, write, read to the end; the peer from `getpeername`). Returns the errno of
/// the first call that failed, 0 otherwise.
fn dns_exchange(mode: &str, addr: &str, port: &str) -> i32 {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream, UdpSocket};
    let ip: std::net::IpAddr = addr.parse().unwrap();
    let peer = SocketAddr::new(ip, port.parse().unwrap());
    let wait = Some(std::time::Duration::from_secs(5));
    let code = |e: std::io::Error| e.raw_os_error().unwrap_or(-1);
    let local: SocketAddr = if ip.is_ipv4() {
        "0.0.0.0:0".parse().unwrap()
    } else {
        "[::]:0".parse().unwrap()
    };
    let result = (|| -> std::io::Result<(SocketAddr, Vec<u8>)> {
        let mut buf = vec![0u8; 512];
        match mode {
            "udp" => {
                let s = UdpSocket::bind(local)?;
                s.set_read_timeout(wait)?;
                s.send_to(b"query", peer)?;
                let (n, from) = s.recv_from(&mut buf)?;
                buf.truncate(n);
                Ok((from, buf))
            }
            "udp-connected" => {
                let s = UdpSocket::bind(local)?;
                s.set_read_timeout(wait)?;
                s.connect(peer)?;
                s.send(b"query")?;
                let n = s.recv(&mut buf)?;
                buf.truncate(n);
                Ok((s.peer_addr()?, buf))
            }
            _ => {
                let mut s = TcpStream::connect_timeout(&peer, std::time::Duration::from_secs(5))?;
                s.set_read_timeout(wait)?;
                // Before the peer closes: a closed socket has no peer name (ENOTCONN).
                let from = s.peer_addr()?;
                s.write_all(b"query")?;
                s.shutdown(std::net::Shutdown::Write)?;
                let mut got = Vec::new();
                s.read_to_end(&mut got)?;
                Ok((from, got))
            }
        }
    })();
    match result {
        Ok((from, text)) => {
            println!("reply from {from}: {}", String::from_utf8_lossy(&text));
            0
        }
        Err(e) => code(e),
    }
}

/// The helper action `resolve MODE NAME SERVER`: an `A` query for NAME to `SERVER:53` over
/// `udp` or `tcp` (MODE), as a stub resolver sends it; prints `rcode=CODE addrs=A,B` (the
/// answer's A records) on stdout. Returns the errno of the first call that failed, or 110
/// (ETIMEDOUT) when no reply came within 5 s.
fn resolve(mode: &str, name: &str, server: &str) -> i32 {
    use hickory_proto::op::{Message, MessageType, OpCode, Query};
    use hickory_proto::rr::{Name, RData, RecordType};
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream, UdpSocket};
    let server = SocketAddr::new(server.parse().unwrap(), 53);
    let mut query = Message::new();
    query
        .set_id(0x4242)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    let bytes = query.to_vec().unwrap();
    let wait = Some(std::time::Duration::from_secs(5));
    let reply = (|| -> std::io::Result<Vec<u8>> {
        if mode == "udp" {
            let s = UdpSocket::bind("0.0.0.0:0")?;
            s.set_read_timeout(wait)?;
            s.send_to(&bytes, server)?;
            let mut buf = vec![0u8; 4096];
            let (n, _) = s.recv_from(&mut buf)?;
            buf.truncate(n);
            Ok(buf)
        } else {
            let mut s = TcpStream::connect_timeout(&server, std::time::Duration::from_secs(5))?;
            s.set_read_timeout(wait)?;
            let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&bytes);
            s.write_all(&framed)?;
            let mut len = [0u8; 2];
            s.read_exact(&mut len)?;
            let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut buf)?;
            Ok(buf)
        }
    })();
    let reply = match reply {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return 110,
        Err(e) => return e.raw_os_error().unwrap_or(-1),
    };
    let Ok(message) = Message::from_vec(&reply) else {
        println!("rcode=unparsable addrs=");
        return 0;
    };
    let addrs: Vec<String> = message
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect();
    println!(
        "rcode={} addrs={}",
        u16::from(message.response_code()),
        addrs.join(",")
    );
    0
}

/// A socket address for `addr:port`, IPv4 or IPv6 by the form of `addr`, as a
/// `sockaddr_storage` and its length.
fn sockaddr_any(addr: &str, port: u16) -> (libc::sockaddr_storage, u32) {
    // SAFETY: an all-zero sockaddr_storage is valid; the writes stay within it.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        if addr.contains(':') {
            std::ptr::write((&raw mut ss).cast(), sockaddr_v6(addr, port));
            (ss, size_of::<libc::sockaddr_in6>() as u32)
        } else {
            std::ptr::write((&raw mut ss).cast(), sockaddr_v4(addr, port));
            (ss, size_of::<libc::sockaddr_in>() as u32)
        }
    }
}

fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Waits (3 s) for one datagram on `fd`, or one length-prefixed message when `stream`.
fn recv_reply(fd: i32, stream: bool) -> Result<Vec<u8>, i32> {
    let tv = libc::timeval {
        tv_sec: 3,
        tv_usec: 0,
    };
    let mut buf = vec![0u8; 4096];
    // SAFETY: setsockopt and recv into owned buffers of the stated sizes.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const tv).cast(),
            size_of::<libc::timeval>() as u32,
        );
        let mut got = 0usize;
        loop {
            let n = libc::recv(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got, 0);
            if n < 0 {
                return Err(errno());
            }
            if n == 0 {
                return Err(libc::ECONNRESET);
            }
            got += n as usize;
            if !stream {
                buf.truncate(got);
                return Ok(buf);
            }
            if got >= 2 {
                let len = usize::from(u16::from_be_bytes([buf[0], buf[1]]));
                if got >= 2 + len {
                    return Ok(buf[2..2 + len].to_vec());
                }
            }
        }
    }
}

/// Prints `rcode=N answers=M` for a DNS reply (or `rcode=unparsable`).
fn print_reply(reply: &[u8]) {
    match hickory_proto::op::Message::from_vec(reply) {
        Ok(m) => println!(
            "rcode={} answers={}",
            u16::from(m.response_code()),
            m.answers().len()
        ),
        Err(_) => println!("rcode=unparsable answers=0"),
    }
}

/// The helper action `dns-raw MODE ADDRS PORT HEX`: sends the DNS message HEX (raw bytes, no
/// TCP length prefix) to `ADDR:PORT` by one of the ways an attacker might try to get around
/// the steering, waits for the reply and prints `rcode=N answers=M` (one line per reply).
/// ADDRS is one address, or several separated by `,` for `sendmmsg`. Returns the errno of
/// the first call that failed, 0 otherwise. MODEs:
/// `udp` (sendto), `tcp` (connect, write framed), `tfo` (sendto with MSG_FASTOPEN),
/// `tfo-connect` (TCP_FASTOPEN_CONNECT, then connect), `sendmmsg` (one datagram per address
/// in one call; prints `sent=N`), `uring-udp` (IORING_OP_SENDMSG), `uring-tcp`
/// (IORING_OP_CONNECT, then write), `v6only-udp` and `v6only-tcp` (an IPV6_V6ONLY socket,
/// ADDR an IPv4 address sent to as `::ffff:ADDR`), `inet-on-v6` (an AF_INET sockaddr given
/// to an IPv6 UDP socket), `unspec-udp` (connect to ADDR, connect(AF_UNSPEC), then sendto
/// an AF_UNSPEC-family sockaddr that holds ADDR), `connected-sendto` (connect to
/// 127.0.0.1:PORT, then sendto ADDR:PORT explicitly).
fn dns_raw(mode: &str, addrs: &str, port: &str, hex: &str) -> i32 {
    let msg = from_hex(hex);
    let port: u16 = port.parse().unwrap();
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&msg);
    let first = addrs.split(',').next().unwrap();
    let v6 = first.contains(':');
    let fam = if v6 { libc::AF_INET6 } else { libc::AF_INET };
    // SAFETY: plain syscalls on descriptors this function owns and buffers that outlive them.
    unsafe {
        let dgram = |family: i32| libc::socket(family, libc::SOCK_DGRAM, 0);
        let stream = |family: i32| libc::socket(family, libc::SOCK_STREAM, 0);
        let v6only = |fd: i32| {
            let one: i32 = 1;
            libc::setsockopt(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&raw const one).cast(),
                4,
            )
        };
        let (fd, is_stream) = match mode {
            "udp" | "sendmmsg" | "uring-udp" | "unspec-udp" | "connected-sendto" => {
                let fd = dgram(fam);
                if fd < 0 {
                    return errno();
                }
                match mode {
                    "udp" => {
                        let (sa, len) = sockaddr_any(first, port);
                        let r = libc::sendto(
                            fd,
                            msg.as_ptr().cast(),
                            msg.len(),
                            0,
                            (&raw const sa).cast(),
                            len,
                        );
                        if r < 0 {
                            return errno();
                        }
                    }
                    "sendmmsg" => {
                        let list: Vec<(libc::sockaddr_storage, u32)> =
                            addrs.split(',').map(|a| sockaddr_any(a, port)).collect();
                        let mut iovs: Vec<libc::iovec> = list
                            .iter()
                            .map(|_| libc::iovec {
                                iov_base: msg.as_ptr() as *mut _,
                                iov_len: msg.len(),
                            })
                            .collect();
                        let mut hdrs: Vec<libc::mmsghdr> = list
                            .iter()
                            .zip(iovs.iter_mut())
                            .map(|((sa, len), iov)| {
                                let mut h: libc::mmsghdr = std::mem::zeroed();
                                h.msg_hdr.msg_name =
                                    (sa as *const libc::sockaddr_storage).cast_mut().cast();
                                h.msg_hdr.msg_namelen = *len;
                                h.msg_hdr.msg_iov = iov;
                                h.msg_hdr.msg_iovlen = 1;
                                h
                            })
                            .collect();
                        let r = libc::sendmmsg(fd, hdrs.as_mut_ptr(), hdrs.len() as u32, 0);
                        if r < 0 {
                            return errno();
                        }
                        println!("sent={r}");
                        for _ in 0..r {
                            match recv_reply(fd, false) {
                                Ok(reply) => print_reply(&reply),
                                Err(e) => return e,
                            }
                        }
                        return 0;
                    }
                    "uring-udp" => {
                        let (sa, len) = sockaddr_any(first, port);
                        let mut iov = libc::iovec {
                            iov_base: msg.as_ptr() as *mut _,
                            iov_len: msg.len(),
                        };
                        let mut hdr: libc::msghdr = std::mem::zeroed();
                        hdr.msg_name = (&raw const sa).cast_mut().cast();
                        hdr.msg_namelen = len;
                        hdr.msg_iov = &raw mut iov;
                        hdr.msg_iovlen = 1;
                        let e =
                            io_uring::opcode::SendMsg::new(io_uring::types::Fd(fd), &raw const hdr)
                                .build();
                        let r = uring_one(&e);
                        if r != 0 {
                            return r;
                        }
                    }
                    "unspec-udp" => {
                        let (sa, len) = sockaddr_any(first, port);
                        if libc::connect(fd, (&raw const sa).cast(), len) < 0 {
                            return errno();
                        }
                        let unspec = libc::sockaddr {
                            sa_family: libc::AF_UNSPEC as u16,
                            sa_data: [0; 14],
                        };
                        if libc::connect(fd, &raw const unspec, size_of::<libc::sockaddr>() as u32)
                            < 0
                        {
                            return 100 + errno();
                        }
                        let mut sa2 = sa;
                        (*(&raw mut sa2).cast::<libc::sockaddr>()).sa_family =
                            libc::AF_UNSPEC as u16;
                        let r = libc::sendto(
                            fd,
                            msg.as_ptr().cast(),
                            msg.len(),
                            0,
                            (&raw const sa2).cast(),
                            len,
                        );
                        if r < 0 {
                            return errno();
                        }
                    }
                    _ => {
                        // connected-sendto: connected to the loopback (steered or not), then
                        // an explicit peer.
                        let lo = if v6 { "::1" } else { "127.0.0.1" };
                        let (sa, len) = sockaddr_any(lo, port);
                        if libc::connect(fd, (&raw const sa).cast(), len) < 0 {
                            return 100 + errno();
                        }
                        let (sa, len) = sockaddr_any(first, port);
                        let r = libc::sendto(
                            fd,
                            msg.as_ptr().cast(),
                            msg.len(),
                            0,
                            (&raw const sa).cast(),
                            len,
                        );
                        if r < 0 {
                            return errno();
                        }
                    }
                }
                (fd, false)
            }
            "inet-on-v6" => {
                let fd = dgram(libc::AF_INET6);
                let (sa, len) = sockaddr_any(first, port);
                let r = libc::sendto(
                    fd,
                    msg.as_ptr().cast(),
                    msg.len(),
                    0,
                    (&raw const sa).cast(),
                    len,
                );
                if r < 0 {
                    return errno();
                }
                (fd, false)
            }
            "v6only-udp" | "v6only-tcp" => {
                let tcp = mode == "v6only-tcp";
                let fd = if tcp {
                    stream(libc::AF_INET6)
                } else {
                    dgram(libc::AF_INET6)
                };
                if v6only(fd) < 0 {
                    return 100 + errno();
                }
                let (sa, len) = sockaddr_any(&format!("::ffff:{first}"), port);
                if tcp {
                    if libc::connect(fd, (&raw const sa).cast(), len) < 0 {
                        return errno();
                    }
                    if libc::write(fd, framed.as_ptr().cast(), framed.len()) < 0 {
                        return errno();
                    }
                } else {
                    let r = libc::sendto(
                        fd,
                        msg.as_ptr().cast(),
                        msg.len(),
                        0,
                        (&raw const sa).cast(),
                        len,
                    );
                    if r < 0 {
                        return errno();
                    }
                }
                (fd, tcp)
            }
            "tcp" | "tfo" | "tfo-connect" | "uring-tcp" => {
                let fd = stream(fam);
                if fd < 0 {
                    return errno();
                }
                let (sa, len) = sockaddr_any(first, port);
                match mode {
                    "tcp" => {
                        if libc::connect(fd, (&raw const sa).cast(), len) < 0 {
                            return errno();
                        }
                    }
                    "tfo" => {
                        let r = libc::sendto(
                            fd,
                            framed.as_ptr().cast(),
                            framed.len(),
                            libc::MSG_FASTOPEN,
                            (&raw const sa).cast(),
                            len,
                        );
                        if r < 0 {
                            return errno();
                        }
                    }
                    "tfo-connect" => {
                        let one: i32 = 1;
                        if libc::setsockopt(
                            fd,
                            libc::IPPROTO_TCP,
                            libc::TCP_FASTOPEN_CONNECT,
                            (&raw const one).cast(),
                            4,
                        ) < 0
                        {
                            return 100 + errno();
                        }
                        if libc::connect(fd, (&raw const sa).cast(), len) < 0 {
                            return errno();
                        }
                    }
                    _ => {
                        let e = io_uring::opcode::Connect::new(
                            io_uring::types::Fd(fd),
                            (&raw const sa).cast(),
                            len,
                        )
                        .build();
                        let r = uring_one(&e);
                        if r != 0 {
                            return r;
                        }
                    }
                }
                if mode != "tfo" && libc::write(fd, framed.as_ptr().cast(), framed.len()) < 0 {
                    return errno();
                }
                (fd, true)
            }
            other => panic!("dns-raw: unknown mode {other}"),
        };
        let r = match recv_reply(fd, is_stream) {
            Ok(reply) => {
                print_reply(&reply);
                0
            }
            Err(e) => e,
        };
        libc::close(fd);
        r
    }
}

/// The helper action `socket-try KIND`: creates a socket of KIND (`raw-udp`, `raw-tcp`,
/// `packet-dgram`, `sctp`, `udplite`, `icmp`); returns the errno (0: created).
fn socket_try(kind: &str) -> i32 {
    let (family, ty, proto) = match kind {
        "raw-udp" => (libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP),
        "raw-tcp" => (libc::AF_INET6, libc::SOCK_RAW, libc::IPPROTO_TCP),
        "packet-dgram" => (libc::AF_PACKET, libc::SOCK_DGRAM, 0),
        "sctp" => (libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_SCTP),
        "udplite" => (libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_UDPLITE),
        "icmp" => (libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_ICMP),
        other => panic!("socket-try: unknown kind {other}"),
    };
    // SAFETY: a plain socket call.
    check(unsafe { libc::socket(family, ty, proto) }.into())
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

/// Runs the helper `action args…` in `cg` with `fd` as its descriptor 3.
pub fn helper_with_fd3(
    cg: &Cgroup,
    action: &str,
    args: &[&str],
    fd: &std::os::fd::OwnedFd,
) -> Output {
    use std::os::fd::AsRawFd;
    helper_with(Some(cg), None, Some(fd.as_raw_fd()), action, args)
}

/// Runs the helper `action args…` in `cg` (if given), with `fd3` (if given) as its descriptor
/// 3, as `uid` (if given: gid `uid`, no supplementary groups, no capabilities).
pub fn helper_with(
    cg: Option<&Cgroup>,
    uid: Option<u32>,
    fd3: Option<std::os::fd::RawFd>,
    action: &str,
    args: &[&str],
) -> Output {
    let exe = std::env::current_exe().unwrap();
    let mut spec = vec![action];
    spec.extend_from_slice(args);
    let mut cmd = command_in(cg, exe.to_str().unwrap());
    // SAFETY: dup2, setgroups, setgid and setuid are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = fd3
                && libc::dup2(fd, 3) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(uid) = uid
                && (libc::setgroups(0, std::ptr::null()) < 0
                    || libc::setgid(uid) < 0
                    || libc::setuid(uid) < 0)
            {
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
    .env(HELPER_ENV, spec.join("\u{1f}"))
    .output()
    .unwrap()
}

/// Runs one helper action; returns the errno (0 on success).
fn act(action: &str, a: &[&str]) -> i32 {
    let arg = |i: usize| a.get(i).copied().unwrap_or("");
    // SAFETY: plain syscalls on owned descriptors and NUL-terminated strings.
    unsafe {
        match action {
            "stress-open" => stress_open(a),
            "replace-watch" => replace_watch(a),
            "read-lines" => read_lines(),
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
                execveat_true(fd, c"", libc::AT_EMPTY_PATH)
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
            "open-repeat" => {
                // PATH N: opens PATH for reading N times; prints how many opens succeeded.
                let path = cstr(arg(0));
                let mut opened = 0u32;
                for _ in 0..arg(1).parse::<u32>().unwrap() {
                    let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
                    if fd >= 0 {
                        opened += 1;
                        libc::close(fd);
                    }
                }
                println!("open-repeat {opened}");
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
            "dns" => dns_exchange(arg(0), arg(1), arg(2)),
            "connect-mptcp" => {
                // IPPROTO_MPTCP (262); a kernel without MPTCP refuses the socket itself.
                let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 262);
                if fd < 0 {
                    return errno();
                }
                let sa = sockaddr_v4(arg(0), arg(1).parse().unwrap());
                libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
                let r = libc::connect(
                    fd,
                    (&raw const sa).cast(),
                    size_of::<libc::sockaddr_in>() as u32,
                );
                let e = if r < 0 && errno() == libc::EINPROGRESS {
                    0
                } else {
                    check(r.into())
                };
                libc::close(fd);
                e
            }
            "resolve" => resolve(arg(0), arg(1), arg(2)),
            "dns-raw" => dns_raw(arg(0), arg(1), arg(2), arg(3)),
            "socket-try" => socket_try(arg(0)),
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
                let (sa, len) = sockaddr_un(arg(0));
                check(libc::connect(fd, (&raw const sa).cast(), len).into())
            }
            "unix-listen" => {
                // ADDR (a path, or @name for an abstract one): bind, then listen; 100 + errno
                // when the bind fails.
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let (sa, len) = sockaddr_un(arg(0));
                if libc::bind(fd, (&raw const sa).cast(), len) < 0 {
                    return 100 + errno();
                }
                check(libc::listen(fd, 1).into())
            }
            "sigio-kill" => {
                // PID: make PID the owner of a pipe with O_ASYNC and SIGKILL as its signal,
                // then write to the pipe (the kernel sends the signal, not kill(2)).
                let mut p = [0i32; 2];
                if libc::pipe(p.as_mut_ptr()) < 0 {
                    return errno();
                }
                const F_SETSIG: i32 = 10;
                let pid: i32 = arg(0).parse().unwrap();
                if libc::fcntl(p[0], libc::F_SETOWN, pid) < 0
                    || libc::fcntl(p[0], F_SETSIG, libc::SIGKILL) < 0
                    || libc::fcntl(p[0], libc::F_SETFL, libc::O_ASYNC | libc::O_NONBLOCK) < 0
                {
                    return errno();
                }
                check(libc::write(p[1], b"x".as_ptr().cast(), 1) as i64)
            }
            "pidfd-kill" => {
                let pfd = libc::syscall(libc::SYS_pidfd_open, arg(0).parse::<i32>().unwrap(), 0);
                if pfd < 0 {
                    return errno();
                }
                check(libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pfd,
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                ))
            }
            "pidfd-getfd" => {
                // PID FD: copy descriptor FD of PID.
                let pfd = libc::syscall(libc::SYS_pidfd_open, arg(0).parse::<i32>().unwrap(), 0);
                if pfd < 0 {
                    return errno();
                }
                check(libc::syscall(
                    libc::SYS_pidfd_getfd,
                    pfd,
                    arg(1).parse::<i32>().unwrap(),
                    0,
                ))
            }
            "vm-read" => {
                // PID: process_vm_readv of one byte at the stack of PID's address space.
                let mut buf = [0u8; 1];
                let local = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: 1,
                };
                let remote = libc::iovec {
                    iov_base: 0x1000 as *mut libc::c_void,
                    iov_len: 1,
                };
                let r = libc::process_vm_readv(arg(0).parse().unwrap(), &local, 1, &remote, 1, 0);
                check(r as i64)
            }
            "udp-unspec" => {
                // ADDR PORT: an IPv4 UDP datagram whose sockaddr_in says AF_UNSPEC.
                let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
                let mut sa = sockaddr_v4(arg(0), arg(1).parse().unwrap());
                sa.sin_family = libc::AF_UNSPEC as u16;
                let len = size_of::<libc::sockaddr_in>() as u32;
                let r = libc::sendto(fd, b"x".as_ptr().cast(), 1, 0, (&raw const sa).cast(), len);
                check(r as i64)
            }
            "sendmmsg" => {
                // ADDR PORT: two datagrams to ADDR:PORT in one sendmmsg; the errno of the
                // first failure.
                let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
                let mut sa = sockaddr_v4(arg(0), arg(1).parse().unwrap());
                let mut data = *b"x";
                let mut iov = libc::iovec {
                    iov_base: data.as_mut_ptr().cast(),
                    iov_len: 1,
                };
                let mut msgs: [libc::mmsghdr; 2] = std::mem::zeroed();
                for m in &mut msgs {
                    m.msg_hdr.msg_name = (&raw mut sa).cast();
                    m.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
                    m.msg_hdr.msg_iov = &mut iov;
                    m.msg_hdr.msg_iovlen = 1;
                }
                check(libc::sendmmsg(fd, msgs.as_mut_ptr(), 2, 0).into())
            }
            "open-trunc-ro" => {
                check(libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY | libc::O_TRUNC).into())
            }
            "mknod-open" => {
                // PATH MAJOR MINOR: create a character device node and open it for reading.
                let dev = libc::makedev(arg(1).parse().unwrap(), arg(2).parse().unwrap());
                if libc::mknod(cstr(arg(0)).as_ptr(), libc::S_IFCHR | 0o600, dev) < 0 {
                    return errno();
                }
                check(libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK).into())
            }
            "open-tree-read" | "open-tree-exec" => {
                // DIR REL: clone the mount subtree at DIR (a detached mount) and open or exec
                // REL below it.
                const OPEN_TREE_CLONE: libc::c_uint = 1;
                let t = libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    cstr(arg(0)).as_ptr(),
                    OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
                );
                if t < 0 {
                    return errno();
                }
                let rel = cstr(arg(1));
                if action == "open-tree-read" {
                    return check(libc::openat(t as i32, rel.as_ptr(), libc::O_RDONLY).into());
                }
                execveat_true(t as i32, &rel, 0)
            }
            "unshare-ns-read" => {
                // PATH: a new mount namespace (no new mounts), then read PATH.
                if libc::unshare(libc::CLONE_NEWNS) < 0 {
                    return errno();
                }
                check(libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY).into())
            }
            "rename-exchange" => check(libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                cstr(arg(0)).as_ptr(),
                libc::AT_FDCWD,
                cstr(arg(1)).as_ptr(),
                libc::RENAME_EXCHANGE,
            )),
            "rename-whiteout" => check(libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                cstr(arg(0)).as_ptr(),
                libc::AT_FDCWD,
                cstr(arg(1)).as_ptr(),
                libc::RENAME_WHITEOUT,
            )),
            "opath-reopen" => {
                // PATH: O_PATH (not checked), then a real open through /proc/self/fd/N.
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_PATH);
                if fd < 0 {
                    return errno();
                }
                let p = cstr(&format!("/proc/self/fd/{fd}"));
                check(libc::open(p.as_ptr(), libc::O_RDONLY).into())
            }
            "opath-link" | "opath-link-empty" => {
                // SRC DST: O_PATH of SRC, then a hard link DST of it, through /proc/self/fd/N
                // (AT_SYMLINK_FOLLOW) or AT_EMPTY_PATH.
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_PATH);
                if fd < 0 {
                    return errno();
                }
                let dst = cstr(arg(1));
                if action == "opath-link" {
                    let p = cstr(&format!("/proc/self/fd/{fd}"));
                    check(
                        libc::linkat(
                            libc::AT_FDCWD,
                            p.as_ptr(),
                            libc::AT_FDCWD,
                            dst.as_ptr(),
                            libc::AT_SYMLINK_FOLLOW,
                        )
                        .into(),
                    )
                } else {
                    check(
                        libc::linkat(
                            fd,
                            cstr("").as_ptr(),
                            libc::AT_FDCWD,
                            dst.as_ptr(),
                            libc::AT_EMPTY_PATH,
                        )
                        .into(),
                    )
                }
            }
            "opath-exec" => {
                // PATH: execve of /proc/self/fd/N of an O_PATH descriptor.
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_PATH);
                if fd < 0 {
                    return errno();
                }
                let p = cstr(&format!("/proc/self/fd/{fd}"));
                let argv = [cstr("busybox"), cstr("true")];
                let argv_p = [argv[0].as_ptr(), argv[1].as_ptr(), std::ptr::null()];
                let envp: [*const libc::c_char; 1] = [std::ptr::null()];
                libc::execve(p.as_ptr(), argv_p.as_ptr(), envp.as_ptr());
                errno()
            }
            "handle-open" => {
                // PATH DIR: name_to_handle_at, then open_by_handle_at with a descriptor of DIR
                // (on the same mount) as the mount descriptor.
                #[repr(C)]
                struct Handle {
                    bytes: u32,
                    kind: i32,
                    f: [u8; 128],
                }
                let mut h = Handle {
                    bytes: 128,
                    kind: 0,
                    f: [0; 128],
                };
                let mut mnt = 0i32;
                let r = libc::syscall(
                    libc::SYS_name_to_handle_at,
                    libc::AT_FDCWD,
                    cstr(arg(0)).as_ptr(),
                    &raw mut h,
                    &raw mut mnt,
                    0,
                );
                if r < 0 {
                    return 100 + errno();
                }
                let root = libc::open(cstr(arg(1)).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
                if root < 0 {
                    return 200 + errno();
                }
                check(libc::syscall(
                    libc::SYS_open_by_handle_at,
                    root,
                    &raw mut h,
                    libc::O_RDONLY,
                ))
            }
            "setxattr" => {
                // PATH [NAME]: set the extended attribute NAME (default user.bee) to
                // xattr_value(NAME).
                let name = a.get(1).copied().unwrap_or("user.bee");
                let v = xattr_value(name);
                let name = cstr(name);
                check(
                    libc::setxattr(
                        cstr(arg(0)).as_ptr(),
                        name.as_ptr(),
                        v.as_ptr().cast(),
                        v.len(),
                        0,
                    )
                    .into(),
                )
            }
            "setflags-raw" => {
                // PATH FLAGS: FS_IOC_SETFLAGS (as chattr does) through a read-only descriptor.
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK);
                if fd < 0 {
                    return 100 + errno();
                }
                let flags: libc::c_long = arg(1).parse().unwrap();
                const FS_IOC_SETFLAGS: libc::c_ulong = 0x4008_6602;
                check(libc::ioctl(fd, FS_IOC_SETFLAGS, &raw const flags).into())
            }
            "ioctl" => {
                // PATH CMD: ioctl CMD (hex) with a pointer to an int 0 on a read-only descriptor.
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK);
                if fd < 0 {
                    return 100 + errno();
                }
                let cmd = libc::c_ulong::from_str_radix(arg(1), 16).unwrap();
                let zero: libc::c_int = 0;
                check(libc::ioctl(fd, cmd, &raw const zero).into())
            }
            "removexattr" => {
                check(libc::removexattr(cstr(arg(0)).as_ptr(), cstr(arg(1)).as_ptr()).into())
            }
            "set-acl" => {
                // PATH: set a minimal POSIX access ACL (u::rw-, g::r--, o::r--), as setfacl does.
                let v = xattr_value(POSIX_ACL_ACCESS);
                check(
                    libc::setxattr(
                        cstr(arg(0)).as_ptr(),
                        cstr("system.posix_acl_access").as_ptr(),
                        v.as_ptr().cast(),
                        v.len(),
                        0,
                    )
                    .into(),
                )
            }
            "utimes" => check(
                libc::utimensat(libc::AT_FDCWD, cstr(arg(0)).as_ptr(), std::ptr::null(), 0).into(),
            ),
            "uring-unlinkat" => {
                let p = cstr(arg(0));
                let e = io_uring::opcode::UnlinkAt::new(
                    io_uring::types::Fd(libc::AT_FDCWD),
                    p.as_ptr(),
                )
                .build();
                uring_one(&e)
            }
            "uring-renameat" => {
                let (a0, a1) = (cstr(arg(0)), cstr(arg(1)));
                let e = io_uring::opcode::RenameAt::new(
                    io_uring::types::Fd(libc::AT_FDCWD),
                    a0.as_ptr(),
                    io_uring::types::Fd(libc::AT_FDCWD),
                    a1.as_ptr(),
                )
                .build();
                uring_one(&e)
            }
            "uring-linkat" => {
                let (a0, a1) = (cstr(arg(0)), cstr(arg(1)));
                let e = io_uring::opcode::LinkAt::new(
                    io_uring::types::Fd(libc::AT_FDCWD),
                    a0.as_ptr(),
                    io_uring::types::Fd(libc::AT_FDCWD),
                    a1.as_ptr(),
                )
                .build();
                uring_one(&e)
            }
            "uring-sendmsg" => {
                // ADDR PORT: IORING_OP_SENDMSG of a UDP datagram with an address.
                let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
                let mut sa = sockaddr_v4(arg(0), arg(1).parse().unwrap());
                let mut data = *b"x";
                let mut iov = libc::iovec {
                    iov_base: data.as_mut_ptr().cast(),
                    iov_len: 1,
                };
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_name = (&raw mut sa).cast();
                msg.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
                msg.msg_iov = &mut iov;
                msg.msg_iovlen = 1;
                let e =
                    io_uring::opcode::SendMsg::new(io_uring::types::Fd(fd), &raw const msg).build();
                uring_one(&e)
            }
            "proc-cwd-read" => {
                // PID REL: read REL below /proc/PID/cwd.
                let p = cstr(&format!("/proc/{}/cwd/{}", arg(0), arg(1)));
                check(libc::open(p.as_ptr(), libc::O_RDONLY).into())
            }
            "proc-mem" => {
                let p = cstr(&format!("/proc/{}/mem", arg(0)));
                check(libc::open(p.as_ptr(), libc::O_RDONLY).into())
            }
            "cgroup-clone-into" => {
                // CGROUP_DIR PATH: clone3(CLONE_INTO_CGROUP) of a child into another cgroup; the
                // child reads PATH and exits with its errno, which is returned (100 + errno
                // when the cgroup directory cannot be opened).
                let cg = libc::open(cstr(arg(0)).as_ptr(), libc::O_PATH | libc::O_DIRECTORY);
                if cg < 0 {
                    return 100 + errno();
                }
                #[repr(C)]
                #[derive(Default)]
                struct CloneArgs {
                    flags: u64,
                    pidfd: u64,
                    child_tid: u64,
                    parent_tid: u64,
                    exit_signal: u64,
                    stack: u64,
                    stack_size: u64,
                    tls: u64,
                    set_tid: u64,
                    set_tid_size: u64,
                    cgroup: u64,
                }
                const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
                let args = CloneArgs {
                    flags: CLONE_INTO_CGROUP,
                    exit_signal: libc::SIGCHLD as u64,
                    cgroup: cg as u64,
                    ..CloneArgs::default()
                };
                let pid = libc::syscall(libc::SYS_clone3, &raw const args, size_of::<CloneArgs>());
                if pid == 0 {
                    let fd = libc::open(cstr(arg(1)).as_ptr(), libc::O_RDONLY);
                    libc::_exit(if fd < 0 { errno() } else { 0 });
                }
                if pid < 0 {
                    return errno();
                }
                let mut status = 0;
                libc::waitpid(pid as i32, &mut status, 0);
                libc::WEXITSTATUS(status)
            }
            "chroot-read" => {
                // DIR PATH: chroot(DIR), then read PATH (relative to the new root).
                if libc::chroot(cstr(arg(0)).as_ptr()) < 0 {
                    return 100 + errno();
                }
                check(libc::open(cstr(arg(1)).as_ptr(), libc::O_RDONLY).into())
            }
            "inotify-watch" => {
                // PATH: an inotify watch on PATH (it reports the names of entries used there).
                let fd = libc::inotify_init1(0);
                if fd < 0 {
                    return errno();
                }
                check(
                    libc::inotify_add_watch(fd, cstr(arg(0)).as_ptr(), libc::IN_ALL_EVENTS).into(),
                )
            }
            "listen-send" => {
                // PORT: listen on 127.0.0.1:PORT, say so on stdout, accept one connection and
                // send "leak" on it.
                use std::io::Write;
                let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
                let sa = sockaddr_v4("127.0.0.1", arg(0).parse().unwrap());
                let len = size_of::<libc::sockaddr_in>() as u32;
                if libc::bind(fd, (&raw const sa).cast(), len) < 0 || libc::listen(fd, 1) < 0 {
                    return errno();
                }
                println!("bee-listening");
                std::io::stdout().flush().unwrap();
                let c = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
                if c < 0 {
                    return errno();
                }
                check(libc::send(c, b"leak".as_ptr().cast(), 4, 0) as i64)
            }
            "rtnl-addaddr" => {
                // ADDR: RTM_NEWADDR ADDR/32 on lo (ifindex 1) over NETLINK_ROUTE with send(2)
                // (no address: netlink sends to the kernel); returns the errno of the ack.
                let fd = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE);
                if fd < 0 {
                    return errno();
                }
                let ip: std::net::Ipv4Addr = arg(0).parse().unwrap();
                let mut m = Vec::with_capacity(40);
                m.extend_from_slice(&40u32.to_ne_bytes());
                m.extend_from_slice(&libc::RTM_NEWADDR.to_ne_bytes());
                let flags =
                    (libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL)
                        as u16;
                m.extend_from_slice(&flags.to_ne_bytes());
                m.extend_from_slice(&1u32.to_ne_bytes());
                m.extend_from_slice(&0u32.to_ne_bytes());
                m.extend_from_slice(&[libc::AF_INET as u8, 32, 0, 0]);
                m.extend_from_slice(&1u32.to_ne_bytes());
                for ty in [libc::IFA_LOCAL, libc::IFA_ADDRESS] {
                    m.extend_from_slice(&8u16.to_ne_bytes());
                    m.extend_from_slice(&ty.to_ne_bytes());
                    m.extend_from_slice(&ip.octets());
                }
                if libc::send(fd, m.as_ptr().cast(), m.len(), 0) < 0 {
                    return errno();
                }
                let mut ack = [0u8; 256];
                if libc::recv(fd, ack.as_mut_ptr().cast(), ack.len(), 0) < 20 {
                    return errno();
                }
                -i32::from_ne_bytes(ack[16..20].try_into().unwrap())
            }
            "perf-pid" => {
                // PID: perf_event_open of a software counter on PID (any CPU).
                let mut attr = [0u8; 128];
                attr[0..4].copy_from_slice(&1u32.to_ne_bytes()); // PERF_TYPE_SOFTWARE
                attr[4..8].copy_from_slice(&128u32.to_ne_bytes());
                let pid: i32 = arg(0).parse().unwrap();
                check(libc::syscall(
                    libc::SYS_perf_event_open,
                    attr.as_ptr(),
                    pid,
                    -1,
                    -1,
                    0,
                ))
            }
            "tiocsti" => {
                // [ctty] TEXT: push TEXT into the input queue of the terminal on fd 3 with
                // TIOCSTI, byte by byte (as if typed there); with `ctty`, first make it the
                // controlling terminal of a new session (what an unprivileged caller needs).
                let (ctty, text) = if arg(0) == "ctty" {
                    (true, arg(1))
                } else {
                    (false, arg(0))
                };
                if ctty && (libc::setsid() < 0 || libc::ioctl(3, libc::TIOCSCTTY, 0) < 0) {
                    return 100 + errno();
                }
                for b in text.replace("\\n", "\n").bytes() {
                    if libc::ioctl(3, libc::TIOCSTI, &raw const b) < 0 {
                        return errno();
                    }
                }
                0
            }
            "srr-sendto" => {
                // HOP ADDR PORT TEXT: a UDP datagram to ADDR:PORT with an IPv4 loose source
                // route (IP_OPTIONS, LSRR) whose first hop is HOP: the kernel sends it to HOP.
                let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
                if fd < 0 {
                    return errno();
                }
                let hop: std::net::Ipv4Addr = arg(0).parse().unwrap();
                let mut opt = vec![131u8, 7, 4];
                opt.extend_from_slice(&hop.octets());
                opt.push(0);
                if libc::setsockopt(
                    fd,
                    libc::IPPROTO_IP,
                    libc::IP_OPTIONS,
                    opt.as_ptr().cast(),
                    opt.len() as u32,
                ) < 0
                {
                    eprintln!("srr-sendto: setsockopt(IP_OPTIONS) failed");
                    return 100 + errno();
                }
                let sa = sockaddr_v4(arg(1), arg(2).parse().unwrap());
                let len = size_of::<libc::sockaddr_in>() as u32;
                let t = arg(3);
                let r = libc::sendto(
                    fd,
                    t.as_ptr().cast(),
                    t.len(),
                    0,
                    (&raw const sa).cast(),
                    len,
                );
                check(r as i64)
            }
            "prlimit-cpu" => {
                // PID: lower PID's RLIMIT_CPU to one second (soft and hard).
                let lim = libc::rlimit {
                    rlim_cur: 1,
                    rlim_max: 1,
                };
                check(
                    libc::prlimit(
                        arg(0).parse().unwrap(),
                        libc::RLIMIT_CPU,
                        &raw const lim,
                        std::ptr::null_mut(),
                    )
                    .into(),
                )
            }
            "setpriority" => {
                check(libc::setpriority(libc::PRIO_PROCESS, arg(0).parse().unwrap(), 19).into())
            }
            "ioprio-idle" => {
                // PID: the idle I/O class for PID (IOPRIO_WHO_PROCESS).
                const IOPRIO_CLASS_IDLE: i64 = 3;
                check(libc::syscall(
                    libc::SYS_ioprio_set,
                    1,
                    arg(0).parse::<i32>().unwrap(),
                    IOPRIO_CLASS_IDLE << 13,
                ))
            }
            "setaffinity" => {
                // PID: pin PID to CPU 0.
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                check(
                    libc::sched_setaffinity(
                        arg(0).parse().unwrap(),
                        size_of::<libc::cpu_set_t>(),
                        &raw const set,
                    )
                    .into(),
                )
            }
            "fanotify-deny" => {
                // PATH SECS: a filesystem-wide FAN_OPEN_PERM mark through PATH; say so on
                // stdout, then answer FAN_DENY to every open for SECS seconds.
                use std::io::Write;
                const FAN_CLASS_CONTENT: u32 = 0x4;
                const FAN_MARK_ADD: u32 = 0x1;
                const FAN_MARK_FILESYSTEM: u32 = 0x100;
                const FAN_OPEN_PERM: u64 = 0x10000;
                const FAN_DENY: u32 = 2;
                let fan = libc::syscall(
                    libc::SYS_fanotify_init,
                    FAN_CLASS_CONTENT | libc::FAN_CLOEXEC,
                    libc::O_RDONLY as u32,
                ) as i32;
                if fan < 0 {
                    return 100 + errno();
                }
                if libc::syscall(
                    libc::SYS_fanotify_mark,
                    fan,
                    FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
                    FAN_OPEN_PERM,
                    libc::AT_FDCWD,
                    cstr(arg(0)).as_ptr(),
                ) < 0
                {
                    return errno();
                }
                println!("bee-fanotify-ready");
                std::io::stdout().flush().unwrap();
                let end = std::time::Instant::now()
                    + std::time::Duration::from_secs(arg(1).parse().unwrap());
                let mut buf = [0u8; 4096];
                while std::time::Instant::now() < end {
                    let mut p = libc::pollfd {
                        fd: fan,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    if libc::poll(&raw mut p, 1, 100) <= 0 {
                        continue;
                    }
                    let n = libc::read(fan, buf.as_mut_ptr().cast(), buf.len());
                    let mut off = 0usize;
                    while n > 0 && off + 24 <= n as usize {
                        let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap());
                        let fd = i32::from_ne_bytes(buf[off + 16..off + 20].try_into().unwrap());
                        if fd >= 0 {
                            let resp = [fd.to_ne_bytes(), FAN_DENY.to_ne_bytes()].concat();
                            libc::write(fan, resp.as_ptr().cast(), 8);
                            libc::close(fd);
                        }
                        off += len.max(24) as usize;
                    }
                }
                0
            }
            "mount-setattr-ro" => {
                // PATH: make the mount at PATH read-only with mount_setattr(2).
                #[repr(C)]
                struct MountAttr {
                    set: u64,
                    clr: u64,
                    propagation: u64,
                    userns_fd: u64,
                }
                let attr = MountAttr {
                    set: 0x1, // MOUNT_ATTR_RDONLY
                    clr: 0,
                    propagation: 0,
                    userns_fd: 0,
                };
                check(libc::syscall(
                    libc::SYS_mount_setattr,
                    libc::AT_FDCWD,
                    cstr(arg(0)).as_ptr(),
                    0,
                    &raw const attr,
                    size_of::<MountAttr>(),
                ))
            }
            "fspick-ro" => {
                // PATH: reconfigure the filesystem mounted at PATH read-only with fspick(2) and
                // fsconfig(2) (FSCONFIG_SET_FLAG "ro", FSCONFIG_CMD_RECONFIGURE).
                let fd = libc::syscall(libc::SYS_fspick, libc::AT_FDCWD, cstr(arg(0)).as_ptr(), 1);
                if fd < 0 {
                    return 100 + errno();
                }
                let ro = cstr("ro");
                let null = std::ptr::null::<libc::c_char>();
                if libc::syscall(libc::SYS_fsconfig, fd, 0, ro.as_ptr(), null, 0) < 0 {
                    return 150 + errno();
                }
                check(libc::syscall(libc::SYS_fsconfig, fd, 7, null, null, 0))
            }
            "fd3-open" | "fd3-create" | "fd3-exec" => {
                // REL: open (for reading, or creating it for writing) or execute REL below the
                // directory or detached mount on descriptor 3.
                let rel = cstr(arg(0));
                match action {
                    "fd3-open" => check(libc::openat(3, rel.as_ptr(), libc::O_RDONLY).into()),
                    "fd3-create" => check(
                        libc::openat(3, rel.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644).into(),
                    ),
                    _ => execveat_true(3, &rel, 0),
                }
            }
            "fsmount-create" => {
                // A new tmpfs with fsopen(2) and fsmount(2), never attached; create `f` in it.
                let fs = libc::syscall(libc::SYS_fsopen, cstr("tmpfs").as_ptr(), 1);
                if fs < 0 {
                    return 100 + errno();
                }
                let null = std::ptr::null::<libc::c_char>();
                if libc::syscall(libc::SYS_fsconfig, fs, 6, null, null, 0) < 0 {
                    return 150 + errno();
                }
                let m = libc::syscall(libc::SYS_fsmount, fs, 1, 0);
                if m < 0 {
                    return 200 + errno();
                }
                let f = libc::openat(
                    m as i32,
                    cstr("f").as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT,
                    0o644,
                );
                check(f.into())
            }
            "shm-own" => {
                // A private SysV segment of the caller's own: create, attach, write, remove.
                let id = libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600);
                if id < 0 {
                    return 100 + errno();
                }
                let p = libc::shmat(id, std::ptr::null(), 0);
                if p as isize == -1 {
                    return 150 + errno();
                }
                p.cast::<u8>().write(1);
                libc::shmdt(p);
                check(libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()).into())
            }
            "sethostname" => {
                let n = arg(0);
                check(libc::sethostname(n.as_ptr().cast(), n.len()).into())
            }
            "reboot-cad-off" => check(libc::reboot(libc::LINUX_REBOOT_CMD_CAD_OFF).into()),
            "syslog-read" => {
                // MARKER: read the kernel log with syslog(2); say whether MARKER is in it.
                let mut buf = vec![0u8; 1 << 20];
                let n = libc::klogctl(3, buf.as_mut_ptr().cast(), buf.len() as i32);
                if n < 0 {
                    return errno();
                }
                let text = String::from_utf8_lossy(&buf[..n as usize]);
                println!("syslog-read {} bytes, marker {}", n, text.contains(arg(0)));
                0
            }
            "setflags" => {
                // PATH +|- : set or clear FS_IMMUTABLE_FL with FS_IOC_SETFLAGS on a descriptor
                // opened for reading.
                const FS_IOC_GETFLAGS: libc::c_ulong = 0x8008_6601;
                const FS_IOC_SETFLAGS: libc::c_ulong = 0x4008_6602;
                const FS_IMMUTABLE_FL: libc::c_long = 0x10;
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY);
                if fd < 0 {
                    return 100 + errno();
                }
                let mut flags: libc::c_long = 0;
                if libc::ioctl(fd, FS_IOC_GETFLAGS, &raw mut flags) < 0 {
                    return 150 + errno();
                }
                if arg(1) == "-" {
                    flags &= !FS_IMMUTABLE_FL;
                } else {
                    flags |= FS_IMMUTABLE_FL;
                }
                check(libc::ioctl(fd, FS_IOC_SETFLAGS, &raw const flags).into())
            }
            "getxattr" => {
                // PATH NAME: read the extended attribute NAME and print it.
                let mut buf = [0u8; 256];
                let n = libc::getxattr(
                    cstr(arg(0)).as_ptr(),
                    cstr(arg(1)).as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                );
                if n < 0 {
                    return errno();
                }
                println!("getxattr {:?}", String::from_utf8_lossy(&buf[..n as usize]));
                0
            }
            "readlink" => {
                let mut buf = [0u8; 256];
                let n = libc::readlink(cstr(arg(0)).as_ptr(), buf.as_mut_ptr().cast(), buf.len());
                if n < 0 {
                    return errno();
                }
                println!("readlink {:?}", String::from_utf8_lossy(&buf[..n as usize]));
                0
            }
            "shm-read" => {
                // KEY: attach the System V shared memory segment KEY read-only and print its
                // first bytes.
                let id = libc::shmget(arg(0).parse().unwrap(), 0, 0);
                if id < 0 {
                    return errno();
                }
                let p = libc::shmat(id, std::ptr::null(), libc::SHM_RDONLY);
                if p as isize == -1 {
                    return errno();
                }
                let bytes = std::slice::from_raw_parts(p.cast::<u8>(), 16);
                println!("shm-read {:?}", String::from_utf8_lossy(bytes));
                0
            }
            "add-key" => {
                // DESC DATA: a "user" key in the user keyring.
                let (d, t) = (cstr(arg(0)), arg(1));
                check(libc::syscall(
                    libc::SYS_add_key,
                    cstr("user").as_ptr(),
                    d.as_ptr(),
                    t.as_ptr(),
                    t.len(),
                    -4, // KEY_SPEC_USER_KEYRING
                ))
            }
            "key-read" => {
                // DESC: find the "user" key DESC in the user keyring and print its payload.
                const KEYCTL_SEARCH: i64 = 10;
                const KEYCTL_READ: i64 = 11;
                let id = libc::syscall(
                    libc::SYS_keyctl,
                    KEYCTL_SEARCH,
                    -4,
                    cstr("user").as_ptr(),
                    cstr(arg(0)).as_ptr(),
                    0,
                );
                if id < 0 {
                    return 100 + errno();
                }
                let mut buf = [0u8; 256];
                let n = libc::syscall(libc::SYS_keyctl, KEYCTL_READ, id, buf.as_mut_ptr(), 256);
                if n < 0 {
                    return errno();
                }
                println!("key-read {:?}", String::from_utf8_lossy(&buf[..n as usize]));
                0
            }
            "kexec-unload" => check(libc::syscall(
                libc::SYS_kexec_load,
                0,
                0,
                std::ptr::null::<u8>(),
                0,
            )),
            "finit-module" => {
                // PATH: load the kernel module PATH (xz-compressed if it ends in .xz).
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY);
                if fd < 0 {
                    return 100 + errno();
                }
                let flags = if arg(0).ends_with(".xz") { 4 } else { 0 };
                check(libc::syscall(
                    libc::SYS_finit_module,
                    fd,
                    cstr("").as_ptr(),
                    flags,
                ))
            }
            "init-module-garbage" => {
                // init_module(2) of 64 zero bytes: the loader refuses it (ENOEXEC) unless an
                // LSM refused the load first.
                let image = [0u8; 64];
                check(libc::syscall(
                    libc::SYS_init_module,
                    image.as_ptr(),
                    image.len(),
                    cstr("").as_ptr(),
                ))
            }
            "kcmp" => check(libc::syscall(
                libc::SYS_kcmp,
                libc::getpid(),
                arg(0).parse::<i32>().unwrap(),
                0, // KCMP_FILE
                0,
                0,
            )),
            "process-madvise" => {
                // PID: MADV_COLD on one page of PID through a pidfd.
                let pfd = libc::syscall(libc::SYS_pidfd_open, arg(0).parse::<i32>().unwrap(), 0);
                if pfd < 0 {
                    return errno();
                }
                let iov = libc::iovec {
                    iov_base: 0x1000 as *mut libc::c_void,
                    iov_len: 4096,
                };
                check(libc::syscall(
                    libc::SYS_process_madvise,
                    pfd,
                    &raw const iov,
                    1,
                    libc::MADV_COLD,
                    0,
                ))
            }
            "setns-pidfd" => {
                // PID: join PID's mount namespace through a pidfd.
                let pfd = libc::syscall(libc::SYS_pidfd_open, arg(0).parse::<i32>().unwrap(), 0);
                if pfd < 0 {
                    return errno();
                }
                check(libc::setns(pfd as i32, libc::CLONE_NEWNS).into())
            }
            "futimens-ro" => {
                // PATH: futimens on a descriptor opened for reading.
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY);
                if fd < 0 {
                    return 100 + errno();
                }
                check(libc::futimens(fd, std::ptr::null()).into())
            }
            "fsetxattr-ro" => {
                // PATH NAME: fsetxattr on a descriptor opened for reading.
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY);
                if fd < 0 {
                    return 100 + errno();
                }
                let v = xattr_value(arg(1));
                check(
                    libc::fsetxattr(fd, cstr(arg(1)).as_ptr(), v.as_ptr().cast(), v.len(), 0)
                        .into(),
                )
            }
            "uring-fsetxattr-ro" => {
                // PATH NAME: IORING_OP_FSETXATTR on a descriptor opened for reading.
                let fd = libc::open(cstr(arg(0)).as_ptr(), libc::O_RDONLY);
                if fd < 0 {
                    return 100 + errno();
                }
                let name = cstr(arg(1));
                let value = xattr_value(arg(1));
                let e = io_uring::opcode::FSetXattr::new(
                    io_uring::types::Fd(fd),
                    name.as_ptr(),
                    value.as_ptr().cast(),
                    value.len() as u32,
                )
                .build();
                uring_one(&e)
            }
            "rtnl-batch" => {
                // ADDR: one send of two messages, an RTM_GETLINK dump and an RTM_NEWADDR of
                // ADDR/32 on lo; returns the errno of the send (or of the address's ack).
                let fd = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE);
                if fd < 0 {
                    return errno();
                }
                let mut m = Vec::new();
                m.extend_from_slice(&32u32.to_ne_bytes());
                m.extend_from_slice(&libc::RTM_GETLINK.to_ne_bytes());
                m.extend_from_slice(
                    &((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes(),
                );
                m.extend_from_slice(&1u32.to_ne_bytes());
                m.extend_from_slice(&0u32.to_ne_bytes());
                m.extend_from_slice(&[0u8; 16]);
                let ip: std::net::Ipv4Addr = arg(0).parse().unwrap();
                m.extend_from_slice(&40u32.to_ne_bytes());
                m.extend_from_slice(&libc::RTM_NEWADDR.to_ne_bytes());
                let flags =
                    (libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL)
                        as u16;
                m.extend_from_slice(&flags.to_ne_bytes());
                m.extend_from_slice(&2u32.to_ne_bytes());
                m.extend_from_slice(&0u32.to_ne_bytes());
                m.extend_from_slice(&[libc::AF_INET as u8, 32, 0, 0]);
                m.extend_from_slice(&1u32.to_ne_bytes());
                for ty in [libc::IFA_LOCAL, libc::IFA_ADDRESS] {
                    m.extend_from_slice(&8u16.to_ne_bytes());
                    m.extend_from_slice(&ty.to_ne_bytes());
                    m.extend_from_slice(&ip.octets());
                }
                check(libc::send(fd, m.as_ptr().cast(), m.len(), 0) as i64)
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

/// The helper action `stress-open COUNT START PATH=EXPECT…`: opens the paths for reading in
/// turn, starting at index START, COUNT times in all, and compares each outcome with EXPECT
/// (`ok` or `eperm`). Prints `stress checks=N wrong=W` (and the first wrong outcome) on
/// stdout; the errno returned is 0, or 1 when an outcome was wrong.
fn stress_open(a: &[&str]) -> i32 {
    let count: u64 = a.first().and_then(|c| c.parse().ok()).unwrap_or(0);
    let start: usize = a.get(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let cases: Vec<(CString, bool)> = a[2.min(a.len())..]
        .iter()
        .filter_map(|c| c.rsplit_once('='))
        .map(|(p, e)| (cstr(p), e == "ok"))
        .collect();
    if cases.is_empty() || count == 0 {
        println!("stress checks=0 wrong=0 (no cases)");
        return 22;
    }
    let (mut checks, mut wrong) = (0u64, 0u64);
    let mut first = String::new();
    for i in 0..count {
        let (path, expect_ok) = &cases[(start + i as usize) % cases.len()];
        let err = open_read(path);
        let ok = err == 0;
        checks += 1;
        let right = if *expect_ok {
            ok
        } else {
            !ok && err == libc::EPERM
        };
        if !right {
            wrong += 1;
            if first.is_empty() {
                first = format!(" first={path:?} ok={ok} errno={err} at={i}");
            }
        }
    }
    println!("stress checks={checks} wrong={wrong}{first}");
    i32::from(wrong != 0)
}

/// Opens `path` for reading and closes it at once: 0, or the errno of the open.
fn open_read(path: &std::ffi::CStr) -> i32 {
    open_close(path, libc::O_RDONLY)
}

/// Opens a path for writing (no create, no truncation) and closes it: 0 or the errno.
fn open_write(path: &std::ffi::CStr) -> i32 {
    open_close(path, libc::O_WRONLY)
}

/// Opens a path with `flags` (and `O_CLOEXEC`) and closes it: 0 or the errno.
fn open_close(path: &std::ffi::CStr, flags: libc::c_int) -> i32 {
    // SAFETY: open of a NUL-terminated path; the descriptor is closed at once.
    unsafe {
        let fd = libc::open(path.as_ptr(), flags | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::close(fd);
            0
        } else {
            errno()
        }
    }
}

/// Sets a path's timestamps to now (`utimensat`, the `inode_setattr` hook): 0 or the errno.
fn set_times(path: &std::ffi::CStr) -> i32 {
    // SAFETY: utimensat of a NUL-terminated path; a null times pointer means now.
    if unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), std::ptr::null(), 0) } == 0 {
        0
    } else {
        errno()
    }
}

/// The helper action `read-lines`: says `ready`, then for each line of its stdin does one
/// operation and prints its errno (0 on success), until stdin ends. A line `PATH` opens PATH
/// for reading and closes it, `write PATH` opens it for writing and closes it, `utimes PATH`
/// sets its timestamps.
fn read_lines() -> i32 {
    use std::io::{BufRead as _, Write as _};
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { return 2 };
        let err = if let Some(path) = line.strip_prefix("write ") {
            open_write(&cstr(path))
        } else if let Some(path) = line.strip_prefix("utimes ") {
            set_times(&cstr(path))
        } else {
            open_read(&cstr(&line))
        };
        if writeln!(out, "{err}").and_then(|()| out.flush()).is_err() {
            return 2;
        }
    }
    0
}

/// The helper action `replace-watch GRANTED NEW STOP`: opens GRANTED and NEW for reading in
/// turn until the file STOP exists (looked at every 64 rounds) while the test replaces the
/// scope's policy. GRANTED must open every time; NEW is denied (EPERM) until the replace that
/// grants it, and opens every time after its first success. Prints `ready` after the first
/// 1,000 rounds, then `watch rounds=N granted_failed=G new_denied=D new_ok=K back=B other=O`
/// (B: denials of NEW after it had opened; O: errors other than EPERM); the errno returned is
/// 0, or 1 when G, B or O is not 0 or NEW never opened.
fn replace_watch(a: &[&str]) -> i32 {
    use std::io::Write as _;
    let granted = cstr(a.first().copied().unwrap_or(""));
    let new = cstr(a.get(1).copied().unwrap_or(""));
    let stop = PathBuf::from(a.get(2).copied().unwrap_or("/"));
    let (mut rounds, mut granted_failed, mut denied, mut ok, mut back, mut other) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    loop {
        if rounds % 64 == 0 && stop.exists() {
            break;
        }
        rounds += 1;
        if rounds == 1000 {
            println!("ready");
            let _ = std::io::stdout().flush();
        }
        match open_read(&granted) {
            0 => {}
            libc::EPERM => granted_failed += 1,
            _ => other += 1,
        }
        match open_read(&new) {
            0 => ok += 1,
            libc::EPERM if ok > 0 => back += 1,
            libc::EPERM => denied += 1,
            _ => other += 1,
        }
    }
    if rounds < 1000 {
        println!("ready");
    }
    println!(
        "watch rounds={rounds} granted_failed={granted_failed} new_denied={denied} new_ok={ok} \
         back={back} other={other}"
    );
    i32::from(granted_failed != 0 || back != 0 || other != 0 || ok == 0)
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
