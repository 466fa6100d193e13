//! The kernel matrix, and fetching Debian's kernels into a cache, one directory per package
//! version.
//!
//! Its length is its tests: the code is under 600 lines.
//!
//! [`MATRIX`] is the one table of kernels: each entry names the Debian suites its package
//! comes from, a regex for the package name (the newest match wins), extra kernel arguments,
//! the preemption model the guest must report, and which tests it runs. Packages are found and
//! downloaded with an apt configuration of the runner's own ([`Apt`], under
//! `target/vm/apt/`): the host's apt sources are never read or changed. Nothing is installed
//! on the host; a `.deb` is only unpacked with `dpkg -x`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result, io_err};
use crate::sh;

mod unpacked;
use unpacked::{find_binfmt_misc, find_overlay, find_vmlinuz};

/// What `cargo xtask test` runs on a kernel of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tests {
    /// Every kernel test: the programs load, attach and deny there.
    Full,
    /// The kernel lacks pieces the programs need: bee must refuse to run there
    /// (`tests/unsupported_kernel.rs`), never start a command unconfined.
    FailClosed,
    /// The BPF LSM is not in `lsm=` (Ubuntu's shape): `auto` must choose the Landlock engine,
    /// say why, and enforce with it (`tests/landlock_host.rs`).
    LandlockOnly,
}

impl Tests {
    /// The package and test binary run on such a kernel instead of the kernel tests; `None`
    /// for [`Tests::Full`], which runs them all.
    pub fn smoke(self) -> Option<(&'static str, &'static str)> {
        match self {
            Tests::Full => None,
            Tests::FailClosed => Some(("bee", "unsupported_kernel")),
            Tests::LandlockOnly => Some(("bee", "landlock_host")),
        }
    }
}

/// The preemption model the guest reports (see [`preempt_model`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preempt {
    /// `PREEMPT_DYNAMIC` running in full preemption (`preempt=full`).
    Full,
    /// A `PREEMPT_RT` kernel.
    Rt,
}

impl Preempt {
    /// The word [`preempt_model`] reports for this model.
    pub fn word(self) -> &'static str {
        match self {
            Preempt::Full => "full",
            Preempt::Rt => "rt",
        }
    }
}

/// One kernel of the test matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The `--kernel` value, also the console prefix (`6.12-rt`).
    pub name: &'static str,
    /// What it is, for `--help` and messages.
    pub about: &'static str,
    /// The Debian suites its package comes from.
    pub suites: &'static [&'static str],
    /// The `apt-cache search --names-only` regex for the `linux-image-*` package; the newest
    /// match is taken.
    pub pattern: &'static str,
    /// Kernel arguments appended to [`crate::qemu::APPEND`].
    pub append: &'static str,
    /// The preemption model the guest must report, checked before its results count.
    pub preempt: Option<Preempt>,
    /// What `cargo xtask test` runs there.
    pub tests: Tests,
}

/// The matrix, oldest kernel first. `--kernel all` is every entry.
pub const MATRIX: &[Entry] = &[
    Entry {
        name: "5.10",
        about: "Debian 11's Linux 5.10 (cloud); bee must refuse to run there",
        suites: &["bullseye", "bullseye-security"],
        // The archive serves the signed image; the `-unsigned` one answers 404.
        pattern: r"^linux-image-5\.10\.[0-9]+-[0-9]+-cloud-amd64$",
        append: "",
        preempt: None,
        tests: Tests::FailClosed,
    },
    Entry {
        name: "6.1",
        about: "Debian 12's own Linux 6.1 (cloud)",
        suites: &["bookworm", "bookworm-security"],
        pattern: r"^linux-image-6\.1\.[0-9]+-[0-9]+-cloud-amd64-unsigned$",
        append: "",
        preempt: None,
        tests: Tests::Full,
    },
    Entry {
        name: "6.12",
        about: "Debian 12's newer Linux 6.12 (cloud)",
        suites: &["bookworm", "bookworm-security"],
        pattern: r"^linux-image-6\.12\.[0-9]+\+deb12(\.[0-9]+)?-cloud-amd64-unsigned$",
        append: "",
        preempt: None,
        tests: Tests::Full,
    },
    Entry {
        name: "6.12-full",
        about: "the 6.12 kernel above, booted with preempt=full",
        suites: &["bookworm", "bookworm-security"],
        pattern: r"^linux-image-6\.12\.[0-9]+\+deb12(\.[0-9]+)?-cloud-amd64-unsigned$",
        append: "preempt=full",
        preempt: Some(Preempt::Full),
        tests: Tests::Full,
    },
    Entry {
        name: "6.12-rt",
        about: "Debian 13's Linux 6.12 with PREEMPT_RT",
        suites: &["trixie", "trixie-security"],
        pattern: r"^linux-image-6\.12\.[0-9]+\+deb13(\.[0-9]+)?-rt-amd64-unsigned$",
        append: "",
        preempt: Some(Preempt::Rt),
        tests: Tests::Full,
    },
    Entry {
        name: "7.x",
        about: "the newest Linux 7 (cloud) of trixie-backports or sid",
        suites: &["trixie-backports", "sid"],
        pattern: r"^linux-image-7\.[0-9]+\.[0-9]+\+deb[0-9]+(\.[0-9]+)?-cloud-amd64$",
        append: "",
        preempt: None,
        tests: Tests::Full,
    },
    Entry {
        name: "7.x-landlock",
        about: "the 7.x kernel above booted as Ubuntu boots its own: no bpf in lsm=",
        suites: &["trixie-backports", "sid"],
        pattern: r"^linux-image-7\.[0-9]+\.[0-9]+\+deb[0-9]+(\.[0-9]+)?-cloud-amd64$",
        // Ubuntu's CONFIG_LSM; the later `lsm=` wins over the runner's own.
        append: "lsm=landlock,lockdown,yama,integrity,apparmor",
        preempt: None,
        tests: Tests::LandlockOnly,
    },
];

/// The entry named `name`.
pub fn entry(name: &str) -> Option<&'static Entry> {
    MATRIX.iter().find(|e| e.name == name)
}

/// A kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The matrix entry it was fetched for.
    pub entry: &'static Entry,
    /// The Debian package it came from (`linux-image-…`).
    pub package: String,
    /// That package's Debian version (`6.12.117-1~deb12u1`).
    pub version: String,
    /// The bzImage to pass to `qemu -kernel`.
    pub vmlinuz: PathBuf,
    /// The package's overlayfs module (`fs/overlayfs/overlay.ko`, `.ko.xz` when compressed),
    /// which the guest's `/init` loads: Debian builds overlayfs as a module, and the
    /// conformance suite mounts one.
    pub overlay: PathBuf,
    /// The package's binfmt_misc module (`fs/binfmt_misc.ko`, `.ko.xz`), which `/init` loads
    /// and mounts at `/proc/sys/fs/binfmt_misc` where the package has one (`kernel_learn`
    /// tries to register an interpreter from a scope).
    pub binfmt_misc: Option<PathBuf>,
}

impl Kernel {
    /// `major.minor` of the kernel (`6.12`), from the package name.
    pub fn line(&self) -> String {
        kernel_line(&self.package)
    }
}

/// `major.minor` from a `linux-image-MAJOR.MINOR.…` package name.
fn kernel_line(package: &str) -> String {
    let rest = package.trim_start_matches("linux-image-");
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => rest.to_owned(),
    }
}

/// Numeric fields of a package name, for "newest" ordering
/// (`linux-image-6.1.0-57-…` → `[6, 1, 0, 57, 64]`; the trailing `amd64`
/// is common to all and does not affect the order).
fn version_key(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Picks the newest package name from `apt-cache search` output.
fn newest(search_output: &str) -> Option<String> {
    search_output
        .lines()
        .filter_map(|l| l.split(" - ").next())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .max_by_key(|n| version_key(n))
        .map(str::to_owned)
}

/// The `Version:` field of `apt-cache show --no-all-versions` output.
fn show_field<'a>(show: &'a str, field: &str) -> Option<&'a str> {
    show.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The `linux-binary-*` and `linux-modules-*` packages a split image package depends on
/// (Debian's kernels from 6.19 on: `linux-image-X` holds neither the bzImage, which is in
/// `linux-binary-X`, nor the modules, in `linux-modules-X`), from a `Depends:` field, with the
/// exact version when one is given.
fn binary_dependencies(depends: &str) -> Vec<(String, Option<String>)> {
    depends
        .split(',')
        .flat_map(|alt| alt.split('|'))
        .filter_map(|dep| {
            let dep = dep.trim();
            let (name, rest) = dep.split_once(' ').unwrap_or((dep, ""));
            if !name.starts_with("linux-binary-") && !name.starts_with("linux-modules-") {
                return None;
            }
            let version = rest
                .trim()
                .strip_prefix("(=")
                .and_then(|v| v.strip_suffix(')'))
                .map(|v| v.trim().to_owned());
            Some((name.to_owned(), version))
        })
        .collect()
}

/// The apt lists are refreshed when older than this.
const LISTS_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// Where Debian's archive signing keys are (package `debian-archive-keyring`).
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// An apt configuration of the runner's own: its sources list names the suites of
/// [`MATRIX`], its lists and cache live under one directory, and every call passes it with
/// `-o`, so the host's sources and lists are neither read nor changed.
#[derive(Debug)]
pub struct Apt {
    root: PathBuf,
    updated: bool,
}

impl Apt {
    /// The configuration under `root` (created on first use).
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            updated: false,
        }
    }

    /// The `sources.list` text for every suite of the matrix.
    fn sources() -> String {
        let mut suites: Vec<&str> = Vec::new();
        for e in MATRIX {
            for s in e.suites {
                if !suites.contains(s) {
                    suites.push(s);
                }
            }
        }
        suites
            .iter()
            .map(|s| {
                let archive = if s.ends_with("-security") {
                    "debian-security"
                } else {
                    "debian"
                };
                format!("deb [signed-by={KEYRING}] http://deb.debian.org/{archive} {s} main\n")
            })
            .collect()
    }

    fn command(&self, program: &str) -> Command {
        let r = |p: &str| self.root.join(p).to_string_lossy().into_owned();
        let mut cmd = Command::new(program);
        for opt in [
            format!("Dir::Etc::SourceList={}", r("sources.list")),
            format!("Dir::Etc::SourceParts={}", r("sources.list.d")),
            format!("Dir::Etc::Preferences={}", r("preferences")),
            format!("Dir::Etc::PreferencesParts={}", r("preferences.d")),
            format!("Dir::State={}", r("state")),
            format!("Dir::Cache={}", r("cache")),
            "APT::Architecture=amd64".to_owned(),
            "APT::Architectures=amd64".to_owned(),
            "Acquire::Languages=none".to_owned(),
            // Downloads land in the runner's own directories, which `_apt` may not enter.
            "APT::Sandbox::User=root".to_owned(),
            "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false".to_owned(),
            "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false".to_owned(),
            "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false".to_owned(),
            "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false".to_owned(),
        ] {
            cmd.arg("-o").arg(opt);
        }
        cmd
    }

    /// Creates the directory layout and writes the sources list; true when the lists must be
    /// (re)fetched: none yet, the sources changed, or older than [`LISTS_MAX_AGE`].
    fn layout(&self) -> Result<bool> {
        for d in [
            "sources.list.d",
            "preferences.d",
            "state/lists/partial",
            "cache/archives/partial",
        ] {
            let p = self.root.join(d);
            fs::create_dir_all(&p).map_err(io_err("create directory", &p))?;
        }
        let sources = self.root.join("sources.list");
        let want = Self::sources();
        let changed = fs::read_to_string(&sources).ok().as_deref() != Some(want.as_str());
        if changed {
            fs::write(&sources, &want).map_err(io_err("write", &sources))?;
        }
        let stamp = self.root.join("state/updated");
        let stale = fs::metadata(&stamp)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_none_or(|age| age > LISTS_MAX_AGE);
        Ok(changed || stale)
    }

    /// Runs `apt-get update` with this configuration, once per process.
    pub fn update(&mut self) -> Result<()> {
        if self.updated {
            return Ok(());
        }
        self.layout()?;
        eprintln!(
            "xtask: apt-get update (the runner's own sources: {})",
            self.root.join("sources.list").display()
        );
        let mut cmd = self.command("apt-get");
        cmd.args(["update", "-qq"]);
        let out = sh::output_any(&mut cmd)?;
        let err = String::from_utf8_lossy(&out.stderr);
        // apt-get update exits 0 even when a suite could not be fetched; its `W:`/`E:` lines
        // say so.
        let problems: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("E:") || l.starts_with("W:"))
            .collect();
        if !out.status.success() || !problems.is_empty() {
            return Err(Error::Command {
                command: sh::describe(&cmd),
                status: out.status.to_string(),
                detail: format!(": {}", problems.join(" | ")),
            });
        }
        let stamp = self.root.join("state/updated");
        fs::write(&stamp, b"").map_err(io_err("write", &stamp))?;
        self.updated = true;
        Ok(())
    }

    /// Refreshes the lists when [`Apt::layout`] says they are due.
    fn ensure_lists(&mut self) -> Result<()> {
        if self.layout()? {
            self.update()?;
        }
        Ok(())
    }

    /// The newest package matching `pattern`, and its version.
    fn resolve(&mut self, pattern: &str) -> Result<Option<(String, String)>> {
        self.ensure_lists()?;
        let mut cmd = self.command("apt-cache");
        cmd.args(["search", "--names-only", pattern]);
        let Some(name) = newest(&sh::stdout(&mut cmd)?) else {
            return Ok(None);
        };
        let version = self.version(&name)?;
        Ok(Some((name, version)))
    }

    /// The candidate version of `package`.
    fn version(&self, package: &str) -> Result<String> {
        let mut cmd = self.command("apt-cache");
        cmd.args(["show", "--no-all-versions", package]);
        let show = sh::stdout(&mut cmd)?;
        show_field(&show, "Version")
            .map(str::to_owned)
            .ok_or_else(|| Error::Parse {
                program: sh::describe(&cmd),
                detail: "no Version field".into(),
            })
    }

    /// Downloads `package` (at `version`) into `dir` and returns the `.deb`.
    fn download(&self, package: &str, version: &str, dir: &Path) -> Result<PathBuf> {
        let mut cmd = self.command("apt-get");
        cmd.current_dir(dir)
            .args(["download", "-qq", &format!("{package}={version}")]);
        sh::stdout(&mut cmd)?;
        fs::read_dir(dir)
            .map_err(io_err("read directory", dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.extension().is_some_and(|x| x == "deb")
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{package}_")))
            })
            .ok_or_else(|| Error::Parse {
                program: sh::describe(&cmd),
                detail: format!("no {package}_*.deb appeared in {}", dir.display()),
            })
    }
}

/// Makes the newest kernel of `entry` available under `cache`, downloading and unpacking it
/// only when that package version is not there yet. Every failure names the entry and the
/// package.
pub fn fetch(entry: &'static Entry, apt: &mut Apt, cache: &Path) -> Result<Kernel> {
    let fail = |package: &str, cause: Error| Error::Kernel {
        kernel: entry.name.to_owned(),
        package: package.to_owned(),
        cause: Box::new(cause),
    };
    let resolved = match apt.resolve(entry.pattern) {
        Ok(Some(r)) => Some(r),
        Ok(None) => None,
        Err(e) => return Err(fail(entry.pattern, e)),
    };
    // Lists that know no such package may just be old: refresh once and look again.
    let (package, version) = match resolved {
        Some(r) => r,
        None => {
            apt.update().map_err(|e| fail(entry.pattern, e))?;
            apt.resolve(entry.pattern)
                .map_err(|e| fail(entry.pattern, e))?
                .ok_or_else(|| Error::NoKernelPackage {
                    kernel: entry.name.to_owned(),
                    pattern: entry.pattern.to_owned(),
                    suites: entry.suites.join(", "),
                })?
        }
    };
    let dir = cache.join(format!("{package}_{version}"));
    if let (Ok(vmlinuz), Ok(overlay)) = (find_vmlinuz(&dir), find_overlay(&dir)) {
        return Ok(Kernel {
            entry,
            package,
            version,
            vmlinuz,
            overlay,
            binfmt_misc: find_binfmt_misc(&dir),
        });
    }
    // Unpacked before its modules were wanted (a split package's), or incomplete: again.
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(|e| fail(&package, io_err("remove", &dir)(e)))?;
    }
    eprintln!("xtask: fetching {package} {version} for {}", entry.name);
    let unpacked = match unpack(apt, &package, &version, cache) {
        Ok(staging) => staging,
        Err(first) => {
            // The lists may name a version the archive no longer has: refresh and retry once.
            eprintln!("xtask: fetching {package} failed ({first}); refreshing the lists");
            apt.update().map_err(|e| fail(&package, e))?;
            unpack(apt, &package, &version, cache).map_err(|e| fail(&package, e))?
        }
    };
    fs::rename(&unpacked, &dir).map_err(|e| fail(&package, io_err("rename into", &dir)(e)))?;
    let vmlinuz = find_vmlinuz(&dir).map_err(|e| fail(&package, e))?;
    let overlay = find_overlay(&dir).map_err(|e| fail(&package, e))?;
    Ok(Kernel {
        entry,
        package,
        version,
        vmlinuz,
        overlay,
        binfmt_misc: find_binfmt_misc(&dir),
    })
}

/// Downloads `package` (and, for a split image package, its `linux-binary-*` and
/// `linux-modules-*` dependencies) and unpacks it into a staging directory beside the final
/// place, which is returned once it holds a bzImage and the overlayfs module: an interrupted
/// run leaves nothing a later run would take as complete.
fn unpack(apt: &Apt, package: &str, version: &str, cache: &Path) -> Result<PathBuf> {
    let download = cache.join(".download");
    if download.exists() {
        fs::remove_dir_all(&download).map_err(io_err("remove", &download))?;
    }
    fs::create_dir_all(&download).map_err(io_err("create directory", &download))?;
    let staging = cache.join(format!(".{package}.partial"));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(io_err("remove", &staging))?;
    }
    let deb = apt.download(package, version, &download)?;
    sh::stdout(Command::new("dpkg").arg("-x").arg(&deb).arg(&staging))?;
    if find_vmlinuz(&staging).is_err() {
        let depends = sh::stdout(
            Command::new("dpkg-deb")
                .args(["-f"])
                .arg(&deb)
                .arg("Depends"),
        )?;
        for (binary, exact) in binary_dependencies(&depends) {
            let v = match exact {
                Some(v) => v,
                None => apt.version(&binary)?,
            };
            eprintln!("xtask: {package} holds no bzImage; fetching {binary} {v}");
            let deb = apt.download(&binary, &v, &download)?;
            sh::stdout(Command::new("dpkg").arg("-x").arg(&deb).arg(&staging))?;
        }
    }
    find_vmlinuz(&staging)?;
    find_overlay(&staging)?;
    fs::remove_dir_all(&download).map_err(io_err("remove", &download))?;
    Ok(staging)
}

/// The preemption model a guest runs, from `uname -v` and the kernel log's
/// `Dynamic Preempt: MODE` line: `rt` for `PREEMPT_RT`, the dynamic mode (`none`, `voluntary`,
/// `full`, `lazy`) for `PREEMPT_DYNAMIC`, `preempt` for a fixed `PREEMPT`, else `static` (none or voluntary, fixed at build time).
/// The guest's `/init` prints both on its ready line (see [`crate::qemu::Outcome`]).
pub fn preempt_model(uname_v: &str, dmesg_mode: &str) -> String {
    if uname_v.contains("PREEMPT_RT") {
        "rt".to_owned()
    } else if !dmesg_mode.trim().is_empty() {
        dmesg_mode.trim().to_owned()
    } else if uname_v.contains("PREEMPT") {
        "preempt".to_owned()
    } else {
        "static".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_newest_6_1() {
        let out = "linux-image-6.1.0-9-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud\n\
                   linux-image-6.1.0-57-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud\n\
                   linux-image-6.1.0-50-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud\n";
        assert_eq!(
            newest(out).as_deref(),
            Some("linux-image-6.1.0-57-cloud-amd64-unsigned")
        );
    }

    #[test]
    fn picks_newest_6_12_and_7() {
        let out = "linux-image-6.12.99+deb12-cloud-amd64-unsigned - x\n\
                   linux-image-6.12.117+deb12-cloud-amd64-unsigned - x\n";
        assert_eq!(
            newest(out).as_deref(),
            Some("linux-image-6.12.117+deb12-cloud-amd64-unsigned")
        );
        assert_eq!(newest(""), None);
        let out = "linux-image-7.2.13+deb14-cloud-amd64 - Linux 7.2.13 for x86-64 cloud\n\
                   linux-image-7.3.4+deb13-cloud-amd64 - Linux 7.3.4 for x86-64 cloud\n\
                   linux-image-7.0.13+deb13-cloud-amd64 - Linux 7.0.13 for x86-64 cloud\n";
        assert_eq!(
            newest(out).as_deref(),
            Some("linux-image-7.3.4+deb13-cloud-amd64")
        );
    }

    #[test]
    fn matrix_names_are_unique_and_lines_parse() {
        for (i, e) in MATRIX.iter().enumerate() {
            assert!(MATRIX[..i].iter().all(|o| o.name != e.name), "{}", e.name);
            assert!(!e.suites.is_empty(), "{}", e.name);
            assert_eq!(entry(e.name), Some(e));
        }
        assert_eq!(entry("all"), None);
        assert_eq!(
            kernel_line("linux-image-5.10.0-46-cloud-amd64-unsigned"),
            "5.10"
        );
        assert_eq!(
            kernel_line("linux-image-6.1.0-57-cloud-amd64-unsigned"),
            "6.1"
        );
        assert_eq!(kernel_line("linux-image-7.3.4+deb13-cloud-amd64"), "7.3");
        let sources = Apt::sources();
        assert!(sources.contains("debian-security bullseye-security main"));
        assert!(sources.contains("/debian trixie-backports main"));
        assert_eq!(sources.matches(" bookworm main").count(), 1);
    }

    #[test]
    fn split_image_packages_name_their_binary() {
        let depends = "dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, \
                       linux-base-7.3.4+deb13-cloud-amd64 (= 7.3.4-1~bpo13+1), \
                       linux-binary-7.3.4+deb13-cloud-amd64 (= 7.3.4-1~bpo13+1), \
                       linux-modules-7.3.4+deb13-cloud-amd64 (= 7.3.4-1~bpo13+1)";
        assert_eq!(
            binary_dependencies(depends),
            vec![
                (
                    "linux-binary-7.3.4+deb13-cloud-amd64".to_owned(),
                    Some("7.3.4-1~bpo13+1".to_owned())
                ),
                (
                    "linux-modules-7.3.4+deb13-cloud-amd64".to_owned(),
                    Some("7.3.4-1~bpo13+1".to_owned())
                )
            ]
        );
        assert!(binary_dependencies("kmod, initramfs-tools").is_empty());
        let show = "Package: x\nVersion: 6.12.118-1\nSize: 3\n";
        assert_eq!(show_field(show, "Version"), Some("6.12.118-1"));
        assert_eq!(show_field(show, "Depends"), None);
    }

    #[test]
    fn preempt_models() {
        assert_eq!(
            preempt_model("#1 SMP PREEMPT_RT Debian 6.12.118-1 (2026-01-01)", ""),
            "rt"
        );
        assert_eq!(
            preempt_model("#1 SMP PREEMPT_DYNAMIC Debian 6.12.117-1", "full"),
            "full"
        );
        assert_eq!(preempt_model("#1 SMP Debian 5.10.262-1", ""), "static");
    }
}
