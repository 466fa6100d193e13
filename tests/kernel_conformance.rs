//! The peer conformance suite: cases re-expressed from the Linux kernel's Landlock selftests
//! (`tests/conformance/*.toml`, each naming the selftest case it comes from), run with `bee
//! exec` and the static `bee-probe` (`tests/conformance/probe.c`) in every kernel of the
//! matrix. Each case lays out the selftests' `layout1` in a fresh directory, writes a bee
//! policy, runs one operation, and expects its outcome: allowed (exit 0) or denied (`EPERM`,
//! exit 1). Where bee and Landlock differ, the case says why (`docs/conformance.md`).
//!
//! Built only with `--features kernel-tests`; `cargo xtask vm test -p bee` and `cargo xtask
//! test` build the probe (`cc -static`) and copy it into the guest.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions fail the test the same way"
)]

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::{bee_in, code, stderr, stdout};

/// The case files, by name.
const CASE_FILES: &[(&str, &str)] = &[
    ("fs_test.toml", include_str!("conformance/fs_test.toml")),
    ("net_test.toml", include_str!("conformance/net_test.toml")),
    (
        "scoped_test.toml",
        include_str!("conformance/scoped_test.toml"),
    ),
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

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    case: Vec<Case>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    selftest: String,
    what: String,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    net: Option<toml::Table>,
    /// A bind mount made before the scope starts: `[source, mount point]`.
    bind: Option<[String; 2]>,
    op: Vec<String>,
    landlock: Outcome,
    expect: Outcome,
    why: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Outcome {
    Allow,
    Deny,
}

/// The static probe, built by xtask into `<target>/conformance/bee-probe` (the test binary is
/// `<target>/debug/deps/kernel_conformance-…`).
fn probe() -> PathBuf {
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

fn cases() -> Vec<(&'static str, Case)> {
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

/// What stands outside the scope for the scoped cases: a sleeping process and a listening
/// abstract unix socket.
struct Outside {
    sleeper: std::process::Child,
    abstract_name: String,
    _listener: UnixListener,
}

impl Outside {
    fn new() -> Self {
        use std::os::linux::net::SocketAddrExt as _;
        let sleeper = Command::new("/bin/busybox")
            .args(["sleep", "600"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let abstract_name = format!("bee-conformance-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        let listener = UnixListener::bind_addr(&addr).unwrap();
        Self {
            sleeper,
            abstract_name,
            _listener: listener,
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
fn run_all(cases: &[(&str, Case)], probe: &Path, outside: &Outside) -> Vec<String> {
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
    let o = bee_in(
        dir.path(),
        &[
            "exec",
            "--policy",
            &policy_path.display().to_string(),
            "--",
            &probe_s,
            "batch",
            &batch_s,
        ],
    );
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
    cases
        .iter()
        .zip(statuses)
        .filter_map(|((file, case), status)| {
            let got = match status {
                0 => Some(Outcome::Allow),
                1 => Some(Outcome::Deny),
                _ => None,
            };
            (got != Some(case.expect)).then(|| {
                format!(
                    "{file} {} ({}): expected {:?}, bee-probe {} exited {status}",
                    case.selftest,
                    case.what,
                    case.expect,
                    case.op.join(" ")
                )
            })
        })
        .collect()
}

#[test]
fn every_case_names_its_selftest_and_every_difference_its_reason() {
    let cases = cases();
    assert!(cases.len() >= 20, "{} cases", cases.len());
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
    }
}

#[test]
fn bee_decides_every_case_as_reviewed() {
    let probe = probe();
    let outside = Outside::new();
    let cases = cases();
    let failures = run_all(&cases, &probe, &outside);
    println!(
        "conformance: {} cases, {} as expected, {} differ from Landlock by design",
        cases.len(),
        cases.len() - failures.len(),
        cases.iter().filter(|(_, c)| c.why.is_some()).count()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
