//! The peer conformance suite, shared by its two runs: the case files
//! (`tests/conformance/*.toml`, each case naming the Landlock selftest it comes from), the
//! selftests' `layout1` laid out for each case, the mounts a case asks for, and one `bee exec`
//! of `bee-probe batch` for every case. `tests/kernel_conformance.rs` runs it under the BPF LSM
//! engine in the VM kernels, `tests/landlock_conformance.rs` under the Landlock engine on this
//! host (`docs/conformance.md`).

#![allow(
    dead_code,
    reason = "each run gets the probe its own way (xtask_probe, build_probe) and uses only that"
)]

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::{bee_in, code, stderr, stdout};

/// The case files, by name.
const CASE_FILES: &[(&str, &str)] = &[
    ("fs_test.toml", include_str!("fs_test.toml")),
    ("net_test.toml", include_str!("net_test.toml")),
    ("scoped_test.toml", include_str!("scoped_test.toml")),
];

/// layout1 of the selftests: files, and directories ending in `/`.
const LAYOUT1: &[&str] = &[
    "s1d1/f1",
    "s1d1/f2",
    "s1d1/s1d2/f1",
    "s1d1/s1d2/f2",
    "s1d1/s1d2/s1d3/f1",
    "s1d1/s1d2/s1d3/f2",
    "s2d1/f1",
    "s2d1/s2d2/f1",
    "s2d1/s2d2/s2d3/f1",
    "s2d1/s2d2/s2d3/f2",
    "s3d1/s3d2/s3d3/",
];

/// The engine a run takes: `bee exec`'s default (the BPF LSM, in the VM kernels) or
/// `--engine landlock` (natively).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// bee's BPF LSM programs: a denial is `EPERM`.
    BpfLsm,
    /// The Landlock engine: Landlock, private mounts, PID namespace, seccomp.
    Landlock,
}

impl Engine {
    /// Whether `status` (an errno) is a denial by this engine. The BPF LSM refuses with
    /// `EPERM`. Under the Landlock engine each layer has its own: `EACCES` (Landlock),
    /// `EXDEV` (Landlock's refer check, a rename across two of the scope's mounts), `EROFS`
    /// (a write outside the write grants meets a read-only mount), `EPERM` (seccomp, and
    /// Landlock's scopes), `ESRCH` (a process outside the scope's PID namespace is not there).
    fn denies(self, status: i32) -> bool {
        match self {
            Self::BpfLsm => status == libc::EPERM,
            Self::Landlock => [
                libc::EPERM,
                libc::EACCES,
                libc::EXDEV,
                libc::EROFS,
                libc::ESRCH,
            ]
            .contains(&status),
        }
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    case: Vec<Case>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    selftest: String,
    what: String,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    net: Option<toml::Table>,
    /// A bind mount made before the scope starts: `[source, mount point]`.
    bind: Option<[String; 2]>,
    /// A file system mounted before the scope starts (`layout3_fs`, `layout2_overlay`).
    mount: Option<MountSpec>,
    op: Vec<String>,
    landlock: Outcome,
    expect: Outcome,
    why: Option<String>,
    /// What bee's Landlock engine does, where it differs from its BPF LSM engine.
    expect_landlock: Option<Outcome>,
    why_landlock: Option<String>,
    /// A known limit of the BPF LSM engine from a kernel version on, where it decides
    /// otherwise than `expect` (`docs/enforcement.md`, "Known limits").
    limit: Option<KernelLimit>,
}

/// `limit = { linux = "6.5", expect = "deny", why = "…" }`: from Linux `linux` on, the BPF LSM
/// engine is expected to do `expect`, for the reason `why`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct KernelLimit {
    linux: String,
    expect: Outcome,
    why: String,
}

impl Case {
    /// What `engine` is expected to do on the running kernel.
    fn expected(&self, engine: Engine) -> Outcome {
        match engine {
            Engine::BpfLsm => self.limited().map_or(self.expect, |l| l.expect),
            Engine::Landlock => self.expect_landlock.unwrap_or(self.expect),
        }
    }

    /// The case's known limit, when the running kernel is as new as it names.
    fn limited(&self) -> Option<&KernelLimit> {
        self.limit
            .as_ref()
            .filter(|l| running_kernel() >= major_minor(&l.linux))
    }
}

/// `(major, minor)` of a release such as `6.12.118+deb13-rt-amd64` or `6.5`; `(0, 0)` for
/// text that is not one.
fn major_minor(release: &str) -> (u32, u32) {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The running kernel's `(major, minor)`.
fn running_kernel() -> (u32, u32) {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    major_minor(release.trim())
}

/// `mount = { fs = "tmpfs", at = "@s3d1/s3d2/s3d3", data = "…" }`: `mount -t FS -o DATA FS
/// AT`, `@` standing for the case's directory in both; the mount point is created if missing.
/// A tmpfs gets a file `f1` (mode 0700), as the selftests' layout puts one on theirs.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MountSpec {
    fs: String,
    at: String,
    data: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Allow,
    Deny,
}

/// The static probe, built by xtask into `<target>/conformance/bee-probe` (the test binary is
/// `<target>/debug/deps/kernel_conformance-…`).
pub fn xtask_probe() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap();
    let probe = target.join("conformance").join("bee-probe");
    assert!(
        probe.exists(),
        "{} is missing: `cargo xtask vm test -p bee` builds it (cc -static \
         tests/conformance/probe.c)",
        probe.display()
    );
    probe
}

/// Builds the static probe into `dir` (`cc -static -O2 -Wall -Werror`, as xtask does for the
/// VM run); panics, so the test fails, when it cannot.
pub fn build_probe(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/probe.c");
    let out = dir.join("bee-probe");
    let o = Command::new("cc")
        .args(["-static", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(&source)
        .output()
        .map_err(|e| format!("cc (needed to build the probe): {e}"))
        .unwrap();
    assert!(
        o.status.success(),
        "cc -static {}: {}",
        source.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Every case of the case files, with the file it is in.
pub fn cases() -> Vec<(&'static str, Case)> {
    CASE_FILES
        .iter()
        .flat_map(|(name, text)| {
            let file: Result<CaseFile, _> = toml::from_str(text);
            let file = file.map_err(|e| format!("{name}: {e}")).unwrap();
            file.case.into_iter().map(move |c| (*name, c))
        })
        .collect()
}

/// A policy TOML string list.
fn list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("{:?}", i))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What stands outside the scope for the scoped cases: a sleeping process, a listening
/// abstract unix socket and a listening pathname one.
pub struct Outside {
    sleeper: std::process::Child,
    abstract_name: String,
    _listener: UnixListener,
    /// The directory of the pathname socket `{unix}`, bound outside the scope.
    unix_dir: tempfile::TempDir,
    _unix_listener: UnixListener,
}

impl Outside {
    /// Starts the sleeper and binds the socket.
    pub fn new() -> Self {
        use std::os::linux::net::SocketAddrExt as _;
        let sleeper = Command::new("/bin/busybox")
            .args(["sleep", "600"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let abstract_name = format!("bee-conformance-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        let listener = UnixListener::bind_addr(&addr).unwrap();
        let unix_dir = tempfile::tempdir().unwrap();
        let unix_listener = UnixListener::bind(unix_dir.path().join("sock")).unwrap();
        Self {
            sleeper,
            abstract_name,
            _listener: listener,
            unix_dir,
            _unix_listener: unix_listener,
        }
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.sleeper.kill();
        let _ = self.sleeper.wait();
    }
}

/// The bind mounts the cases made, undone (lazily) when the run ends.
struct Mounts(Vec<PathBuf>);

impl Mounts {
    /// `mount --bind source target`, as the selftests' `layout1_bind` fixture does.
    fn bind(&mut self, source: &Path, target: &Path) {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt as _;
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap();
        let (src, dst) = (c(source), c(target));
        // SAFETY: two NUL-terminated paths; no file system type or data for a bind mount.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            )
        };
        assert_eq!(
            rc,
            0,
            "bind {} on {}: {}",
            source.display(),
            target.display(),
            std::io::Error::last_os_error()
        );
        self.0.push(target.to_owned());
    }

    /// `mount -t fs -o data fs target`, as the selftests' `layout3_fs` fixture does.
    fn mount(&mut self, fs_type: &str, target: &Path, data: Option<&str>) {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt as _;
        fs::create_dir_all(target).unwrap();
        let dst = CString::new(target.as_os_str().as_bytes()).unwrap();
        let fs_c = CString::new(fs_type).unwrap();
        let data_c = data.map(|d| CString::new(d).unwrap());
        // SAFETY: NUL-terminated strings that outlive the call; data is a string or null.
        let rc = unsafe {
            libc::mount(
                fs_c.as_ptr(),
                dst.as_ptr(),
                fs_c.as_ptr(),
                0,
                data_c
                    .as_ref()
                    .map_or(std::ptr::null(), |d| d.as_ptr().cast()),
            )
        };
        assert_eq!(
            rc,
            0,
            "mount -t {fs_type} on {}: {}",
            target.display(),
            std::io::Error::last_os_error()
        );
        self.0.push(target.to_owned());
        if fs_type == "tmpfs" {
            let f1 = target.join("f1");
            fs::write(&f1, "x\n").unwrap();
            fs::set_permissions(&f1, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
    }
}

impl Drop for Mounts {
    fn drop(&mut self) {
        for target in self.0.iter().rev() {
            if let Ok(c) = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()) {
                // SAFETY: a NUL-terminated path.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

/// Lays out layout1 below `root`.
fn layout1(root: &Path) {
    for entry in LAYOUT1 {
        let p = root.join(entry);
        if entry.ends_with('/') {
            fs::create_dir_all(&p).unwrap();
        } else {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, "x\n").unwrap();
            // As the selftests make them (mode 0700): the permission bits never refuse
            // before bee does (an exec of a 0644 file is EACCES before any LSM hook).
            fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
    }
}

/// Runs every case in one scope: each case gets a layout1 of its own (`case-N`), so its
/// grants, written below that directory, reach no other case; the policy is the union of the
/// cases' grants (the network ones and `/proc/**` are compatible by construction: no case
/// expects a denial they would lift). One `bee exec` of `bee-probe batch` runs each case's
/// operation in a child process of its own. Returns the failure lines.
pub fn run_all(
    engine: Engine,
    cases: &[(&str, Case)],
    probe: &Path,
    outside: &Outside,
) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let probe_s = probe.display().to_string();
    let (mut read, mut write, mut net) = (vec![probe_s.clone()], Vec::new(), String::new());
    let mut lines = Vec::new();
    let mut mounts = Mounts(Vec::new());
    for (n, (_, case)) in cases.iter().enumerate() {
        let root = dir.path().join(format!("case-{n}"));
        layout1(&root);
        let at = |s: &str| {
            let s = s.replace("{outside}", &outside.sleeper.id().to_string());
            let s = s.replace("{abstract}", &outside.abstract_name);
            let unix = outside.unix_dir.path().join("sock");
            let s = s.replace("{unix}", &unix.display().to_string());
            match s.strip_prefix('@') {
                Some(rest) => root.join(rest).display().to_string(),
                None => s,
            }
        };
        read.extend(case.read.iter().map(|r| at(r)));
        write.extend(case.write.iter().map(|w| at(w)));
        if let Some(t) = &case.net {
            net.push_str("[[net.allow]]\n");
            net.push_str(&toml::to_string(t).unwrap());
        }
        if let Some([source, target]) = &case.bind {
            mounts.bind(Path::new(&at(source)), Path::new(&at(target)));
        }
        if let Some(m) = &case.mount {
            let data = m
                .data
                .as_deref()
                .map(|d| d.replace('@', &format!("{}/", root.display())));
            mounts.mount(&m.fs, Path::new(&at(&m.at)), data.as_deref());
        }
        lines.push(case.op.iter().map(|o| at(o)).collect::<Vec<_>>().join("\t"));
    }
    // The batch file is read in the scope too.
    let batch = dir.path().join("batch.tsv");
    fs::write(&batch, lines.join("\n") + "\n").unwrap();
    let batch_s = batch.display().to_string();
    read.push(batch_s.clone());
    read.sort();
    read.dedup();
    let policy = format!(
        "version = 1\n[fs]\nread = [{}]\nwrite = [{}]\n[exec]\nallow = [{:?}]\n{net}",
        list(&read),
        list(&write),
        probe_s
    );
    let policy_path = dir.path().join("policy.toml");
    fs::write(&policy_path, &policy).unwrap();
    let policy_s = policy_path.display().to_string();
    let mut args = vec!["exec", "--policy", &policy_s];
    if engine == Engine::Landlock {
        args.extend(["--engine", "landlock"]);
    }
    args.extend(["--", &probe_s, "batch", &batch_s]);
    let o = bee_in(dir.path(), &args);
    let statuses: Vec<i32> = stdout(&o)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if code(&o) != 0 || statuses.len() != cases.len() {
        return vec![format!(
            "bee exec of the batch: exit {}, {} statuses for {} cases; stderr: {}",
            code(&o),
            statuses.len(),
            cases.len(),
            stderr(&o)
        )];
    }
    // What bee reported of the batch's refusals, for a failure to name.
    let err = stderr(&o);
    let denials: Vec<&str> = err.lines().filter(|l| l.contains("denied")).collect();
    cases
        .iter()
        .zip(statuses)
        .filter_map(|((file, case), status)| {
            let got = match status {
                0 => Some(Outcome::Allow),
                s if engine.denies(s) => Some(Outcome::Deny),
                _ => None,
            };
            let expected = case.expected(engine);
            (got != Some(expected)).then(|| {
                format!(
                    "{file} {} ({}): expected {expected:?} under {engine:?}, bee-probe {} \
                     exited {status}; the batch's denials: {denials:?}",
                    case.selftest,
                    case.what,
                    case.op.join(" ")
                )
            })
        })
        .collect()
}

/// The checks of the case files themselves: every case names its selftest, a case where bee
/// and Landlock differ (and only such a case) says why, and a case whose Landlock engine
/// differs from its BPF LSM engine says why in `why_landlock`.
pub fn check_case_files() {
    let cases = cases();
    assert!(cases.len() >= 60, "{} cases", cases.len());
    for (file, c) in &cases {
        assert!(
            c.selftest.contains('.') && !c.what.is_empty() && !c.op.is_empty(),
            "{file}: {c:?}"
        );
        assert_eq!(
            c.landlock != c.expect,
            c.why.is_some(),
            "{file} {}: a case where bee and Landlock differ, and only such a case, says why",
            c.selftest
        );
        assert_eq!(
            c.expect_landlock.is_some_and(|l| l != c.expect),
            c.why_landlock.is_some(),
            "{file} {}: a case whose Landlock engine differs from its BPF LSM engine, and only \
             such a case, gives expect_landlock and says why_landlock",
            c.selftest
        );
        assert!(
            c.why_landlock.is_some() || c.expect_landlock.is_none(),
            "{file} {}: expect_landlock without why_landlock",
            c.selftest
        );
        assert!(
            c.limit
                .as_ref()
                .is_none_or(|l| l.expect != c.expect && major_minor(&l.linux) > (0, 0)),
            "{file} {}: a limit names a kernel version and an outcome other than expect",
            c.selftest
        );
    }
}

/// Runs every case under `engine` and prints the counts; fails with each case that went
/// otherwise than expected.
pub fn run_suite(engine: Engine, probe: &Path) {
    let outside = Outside::new();
    let cases = cases();
    let failures = run_all(engine, &cases, probe, &outside);
    let differ = |c: &Case| c.expected(engine) != c.landlock;
    let limited: Vec<_> = cases
        .iter()
        .filter(|(_, c)| engine == Engine::BpfLsm && c.limited().is_some())
        .collect();
    for (file, c) in &limited {
        println!(
            "conformance: {file} {} ({}): a known limit on this kernel: {}",
            c.selftest,
            c.what,
            c.limit.as_ref().map(|l| l.why.as_str()).unwrap_or_default()
        );
    }
    println!(
        "conformance ({engine:?}): {} cases, {} as expected, {} differ from Landlock by design, \
         {} of them known limits on this kernel",
        cases.len(),
        cases.len() - failures.len(),
        cases.iter().filter(|(_, c)| differ(c)).count(),
        limited.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
