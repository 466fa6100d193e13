//! Kernel tests: run on a kernel that runs BPF LSM programs, as root — in
//! the VM matrix via `cargo xtask vm test`. Elsewhere they fail: a test
//! that cannot prove enforcement does not pass.
//!
//! The tests spawn `/bin/busybox` (the VM initramfs ships it) so a child can
//! move itself into a scope's cgroup and then `exec`, making the exec itself
//! subject to the scope.

use std::error::Error;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aya::maps::{HashMap, MapData, RingBuf};
use aya::programs::Lsm;
use aya::{Btf, Ebpf, EbpfLoader};
use bee_ebpf::{
    BEE_OBJECT, EVENT_PATH_MAX, EVENT_SIZE, HOOK_BPRM_CHECK, HOOK_FILE_OPEN, MAP_EVENTS,
    MAP_PLACEHOLDER_ALLOW, MAP_SCOPES, PROG_BPRM_CHECK, PROG_FILE_OPEN,
};
use bee_userspace::support::{GateId, SupportReport};

type TestResult = Result<(), Box<dyn Error>>;

const BUSYBOX: &str = "/bin/busybox";
const EPERM: i32 = 1;

/// `struct bee_scope` of `crates/ebpf/bpf/bee.h` (8 bytes, no padding).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Scope {
    policy_id: u32,
    flags: u32,
}
// SAFETY: `repr(C)`, plain integers, no padding.
unsafe impl aya::Pod for Scope {}

/// `struct bee_inode_key` (16 bytes, no padding).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct InodeKey {
    dev: u64,
    ino: u64,
}
// SAFETY: `repr(C)`, plain integers, no padding.
unsafe impl aya::Pod for InodeKey {}

/// A decoded `struct bee_event`.
#[derive(Debug)]
struct Event {
    cgroup_id: u64,
    pid: u32,
    hook: u32,
    err: i32,
    policy_id: u32,
    flags: u32,
    comm: String,
    path: String,
}

fn cstr(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(a)
}

fn decode(b: &[u8]) -> Option<Event> {
    if b.len() != EVENT_SIZE {
        return None;
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&b[0..8]);
    Some(Event {
        cgroup_id: u64::from_ne_bytes(id),
        pid: u32_at(b, 8),
        hook: u32_at(b, 12),
        err: i32::from_ne_bytes(u32_at(b, 16).to_ne_bytes()),
        policy_id: u32_at(b, 20),
        flags: u32_at(b, 24),
        comm: cstr(&b[32..48]),
        path: cstr(&b[48..48 + EVENT_PATH_MAX]),
    })
}

/// stat(2)'s `st_dev` → the kernel's `(major << 20) | minor`.
fn kernel_dev(st_dev: u64) -> u64 {
    let major = ((st_dev >> 8) & 0xfff) | ((st_dev >> 32) & !0xfff);
    let minor = (st_dev & 0xff) | ((st_dev >> 12) & !0xff);
    (major << 20) | minor
}

fn inode_key(path: &Path) -> Result<InodeKey, Box<dyn Error>> {
    let meta = fs::metadata(path)?;
    Ok(InodeKey {
        dev: kernel_dev(meta.dev()),
        ino: meta.ino(),
    })
}

/// Asserts the kernel is the one the VM runner booted, when it says which.
fn assert_expected_kernel(release: &str) {
    if let Ok(series) = std::env::var("BEE_VM_KERNEL") {
        assert!(
            release.starts_with(&format!("{series}.")),
            "booted for {series}, running {release}"
        );
    }
}

/// A cgroup v2 directory, removed on drop (once empty).
struct Cgroup {
    path: PathBuf,
}

impl Cgroup {
    fn create(name: &str) -> Result<Self, Box<dyn Error>> {
        let report_mount = bee_userspace::support::parse_cgroup2_mount(&fs::read_to_string(
            "/proc/self/mountinfo",
        )?)
        .ok_or("no cgroup2 mount")?;
        let path = report_mount.join(format!("bee-test-{name}-{}", std::process::id()));
        fs::create_dir(&path)?;
        Ok(Self { path })
    }

    /// The cgroup id `bpf_get_current_cgroup_id()` returns: the kernfs
    /// inode number of the directory.
    fn id(&self) -> Result<u64, Box<dyn Error>> {
        Ok(fs::metadata(&self.path)?.ino())
    }

    fn procs(&self) -> String {
        self.path
            .join("cgroup.procs")
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.path);
    }
}

/// Runs `busybox sh -c SCRIPT sh ARGS…`; when `cgroup` is given the shell
/// first moves itself into it, so what it `exec`s next runs in the scope.
fn sh(cgroup: Option<&Cgroup>, script: &str, args: &[&str]) -> Result<Output, Box<dyn Error>> {
    let script = match cgroup {
        Some(cg) => format!("echo 0 > {} && {script}", cg.procs()),
        None => script.to_owned(),
    };
    Ok(Command::new(BUSYBOX)
        .args(["sh", "-c", &script, "sh"])
        .args(args)
        .output()?)
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}, stdout {:?}, stderr {:?}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn drain(events: &mut RingBuf<MapData>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Some(item) = events.next() {
        if let Some(ev) = decode(&item) {
            out.push(ev);
        }
    }
    out
}

/// Loads bee.bpf.o and attaches the named programs to their hooks.
fn load_skeleton(programs: &[(&str, &str)]) -> Result<Ebpf, Box<dyn Error>> {
    let start = std::time::Instant::now();
    let btf = Btf::from_sys_fs()?;
    let btf_time = start.elapsed();
    // One parse of the kernel BTF serves relocation and attach alike.
    let mut ebpf = EbpfLoader::new().btf(Some(&btf)).load(BEE_OBJECT)?;
    println!(
        "Btf::from_sys_fs {btf_time:?}, EbpfLoader::load(bee.bpf.o) {:?}",
        start.elapsed() - btf_time
    );
    for (name, hook) in programs {
        let prog: &mut Lsm = ebpf
            .program_mut(name)
            .ok_or_else(|| format!("no program {name}"))?
            .try_into()?;
        prog.load(hook, &btf)
            .map_err(|e| format!("loading {name} on {hook}: {e}"))?;
        prog.attach()
            .map_err(|e| format!("attaching {name}: {e}"))?;
    }
    println!("loaded and attached {programs:?} in {:?}", start.elapsed());
    Ok(ebpf)
}

/// A scratch directory under the temp dir, removed on drop.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Result<Self, Box<dyn Error>> {
        let path = std::env::temp_dir().join(format!("bee-{name}-{}", std::process::id()));
        fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

#[test]
fn support_probe_passes() -> TestResult {
    let report = SupportReport::detect();
    println!("{report}");
    assert_expected_kernel(&report.kernel_release);
    let probe = report.gate(GateId::LsmProbe).ok_or("no probe gate")?;
    assert!(probe.passed, "LSM probe failed: {}", probe.reason);
    assert!(report.is_supported(), "not supported:\n{report}");
    assert!(report.lsms.iter().any(|l| l == "bpf"));
    Ok(())
}

#[test]
fn skeleton_denies_open_in_scope_only() -> TestResult {
    assert_expected_kernel(&fs::read_to_string("/proc/sys/kernel/osrelease")?);
    assert!(Path::new(BUSYBOX).is_file(), "{BUSYBOX} is needed");
    let dir = Scratch::new("open")?;
    let allowed = dir.join("allowed.txt");
    let denied = dir.join("denied.txt");
    fs::write(&allowed, "allowed-content\n")?;
    fs::write(&denied, "denied-content\n")?;

    let mut ebpf = load_skeleton(&[
        (PROG_FILE_OPEN, "file_open"),
        (PROG_BPRM_CHECK, "bprm_check_security"),
    ])?;
    let cg = Cgroup::create("open")?;
    {
        let mut allow: HashMap<_, InodeKey, u32> =
            HashMap::try_from(ebpf.map_mut(MAP_PLACEHOLDER_ALLOW).ok_or("no allow map")?)?;
        allow.insert(inode_key(Path::new(BUSYBOX))?, 1, 0)?;
        allow.insert(inode_key(&allowed)?, 1, 0)?;
    }
    {
        let mut scopes: HashMap<_, u64, Scope> =
            HashMap::try_from(ebpf.map_mut(MAP_SCOPES).ok_or("no scopes map")?)?;
        scopes.insert(
            cg.id()?,
            Scope {
                policy_id: 7,
                flags: 0,
            },
            0,
        )?;
    }
    let mut events = RingBuf::try_from(ebpf.take_map(MAP_EVENTS).ok_or("no events map")?)?;
    let denied_s = denied.to_string_lossy().into_owned();
    let allowed_s = allowed.to_string_lossy().into_owned();

    // Outside the scope: nothing is enforced.
    let out = sh(None, r#"exec /bin/busybox cat "$1""#, &[&denied_s])?;
    assert!(out.status.success(), "outside the scope: {}", show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "denied-content\n");

    // Inside: an allowed inode opens…
    let out = sh(Some(&cg), r#"exec /bin/busybox cat "$1""#, &[&allowed_s])?;
    assert!(
        out.status.success(),
        "allowed file in scope: {}",
        show(&out)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "allowed-content\n");

    // …and any other is refused with EPERM.
    let out = sh(Some(&cg), r#"exec /bin/busybox cat "$1""#, &[&denied_s])?;
    assert!(
        !out.status.success(),
        "denied file in scope: {}",
        show(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Operation not permitted"),
        "expected EPERM: {}",
        show(&out)
    );

    let evs = drain(&mut events);
    println!("events: {evs:#?}");
    let ev = evs
        .iter()
        .find(|e| e.path == denied_s)
        .ok_or("no event for the denied open")?;
    assert_eq!(ev.hook, HOOK_FILE_OPEN);
    assert_eq!(ev.err, EPERM);
    assert_eq!(ev.cgroup_id, cg.id()?);
    assert_eq!(ev.policy_id, 7);
    // comm is the exec'd file's name, not argv[0].
    assert_eq!(ev.comm, "busybox");
    assert_eq!(ev.flags, 0);
    assert!(ev.pid > 1);
    assert!(
        evs.iter().all(|e| e.path != allowed_s),
        "allowed opens are not reported without the audit flag"
    );

    // Leaving the scope map ends enforcement for that cgroup.
    {
        let mut scopes: HashMap<_, u64, Scope> =
            HashMap::try_from(ebpf.map_mut(MAP_SCOPES).ok_or("no scopes map")?)?;
        scopes.remove(&cg.id()?)?;
    }
    let out = sh(Some(&cg), r#"exec /bin/busybox cat "$1""#, &[&denied_s])?;
    assert!(out.status.success(), "after unscoping: {}", show(&out));
    Ok(())
}

#[test]
fn skeleton_denies_exec_in_scope() -> TestResult {
    assert!(Path::new(BUSYBOX).is_file(), "{BUSYBOX} is needed");
    let dir = Scratch::new("exec")?;
    // A second copy of busybox: a different inode, so not allowed.
    let copy = dir.join("busybox-copy");
    fs::copy(BUSYBOX, &copy)?;
    let copy_s = copy.to_string_lossy().into_owned();

    // bprm_check_security alone: the exec is refused by that hook, not by
    // the open of the binary, and the event carries the bprm hook id.
    let mut ebpf = load_skeleton(&[(PROG_BPRM_CHECK, "bprm_check_security")])?;
    let cg = Cgroup::create("exec")?;
    {
        let mut allow: HashMap<_, InodeKey, u32> =
            HashMap::try_from(ebpf.map_mut(MAP_PLACEHOLDER_ALLOW).ok_or("no allow map")?)?;
        allow.insert(inode_key(Path::new(BUSYBOX))?, 1, 0)?;
    }
    {
        let mut scopes: HashMap<_, u64, Scope> =
            HashMap::try_from(ebpf.map_mut(MAP_SCOPES).ok_or("no scopes map")?)?;
        scopes.insert(
            cg.id()?,
            Scope {
                policy_id: 9,
                flags: bee_ebpf::SCOPE_AUDIT_ALLOWED,
            },
            0,
        )?;
    }
    let mut events = RingBuf::try_from(ebpf.take_map(MAP_EVENTS).ok_or("no events map")?)?;

    let out = sh(None, r#"exec "$1" true"#, &[&copy_s])?;
    assert!(out.status.success(), "outside the scope: {}", show(&out));

    let out = sh(Some(&cg), r#"exec /bin/busybox true"#, &[])?;
    assert!(
        out.status.success(),
        "allowed binary in scope: {}",
        show(&out)
    );

    let out = sh(Some(&cg), r#"exec "$1" true"#, &[&copy_s])?;
    assert!(
        !out.status.success(),
        "other binary in scope: {}",
        show(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
        "expected EPERM: {}",
        show(&out)
    );

    let evs = drain(&mut events);
    println!("events: {evs:#?}");
    let denied = evs
        .iter()
        .find(|e| e.path == copy_s)
        .ok_or("no event for the denied exec")?;
    assert_eq!(denied.hook, HOOK_BPRM_CHECK);
    assert_eq!(denied.err, EPERM);
    assert_eq!(denied.policy_id, 9);
    // With the audit flag, the allowed exec is reported too.
    assert!(
        evs.iter()
            .any(|e| e.path == BUSYBOX && e.err == 0 && e.hook == HOOK_BPRM_CHECK),
        "allowed exec reported with the audit flag"
    );
    Ok(())
}
