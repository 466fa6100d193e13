//! Fetching Debian's cloud kernels into a cache, one directory per package.
//!
//! Debian's `linux-image-*-cloud-amd64-unsigned` packages carry a bzImage
//! with `CONFIG_BPF_LSM=y` and BTF; nothing is installed on the host, the
//! `.deb` is only unpacked with `dpkg -x`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::apt;
use crate::error::{Error, Result, io_err};
use crate::sh;

/// A kernel line of the test matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Series {
    /// Linux 6.1, Debian 12's own kernel line.
    #[value(name = "6.1")]
    V6_1,
    /// Linux 6.12, the newer line (bookworm-backports / security).
    #[value(name = "6.12")]
    V6_12,
}

impl Series {
    /// Every series, oldest first.
    pub const ALL: [Series; 2] = [Series::V6_1, Series::V6_12];

    /// The version prefix, as users write it ("6.1").
    pub fn name(self) -> &'static str {
        match self {
            Series::V6_1 => "6.1",
            Series::V6_12 => "6.12",
        }
    }

    /// The `apt-cache search --names-only` regex matching this series.
    fn pattern(self) -> &'static str {
        match self {
            Series::V6_1 => r"^linux-image-6\.1\.[0-9]+-[0-9]+-cloud-amd64-unsigned$",
            Series::V6_12 => r"^linux-image-6\.12\.[0-9]+\+deb[0-9]+-cloud-amd64-unsigned$",
        }
    }
}

/// A kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The series it was selected for.
    pub series: Series,
    /// The Debian package it came from.
    pub package: String,
    /// The bzImage to pass to `qemu -kernel`.
    pub vmlinuz: PathBuf,
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

/// Resolves the newest package of `series` known to apt, running
/// `apt-get update` once if the lists know none.
fn resolve(series: Series) -> Result<String> {
    let search =
        || sh::stdout(Command::new("apt-cache").args(["search", "--names-only", series.pattern()]));
    if let Some(name) = newest(&search()?) {
        return Ok(name);
    }
    apt::update()?;
    newest(&search()?).ok_or_else(|| Error::NoKernelPackage {
        pattern: series.pattern().to_owned(),
    })
}

/// Finds `boot/vmlinuz-*` in an unpacked package.
fn find_vmlinuz(dir: &Path) -> Result<PathBuf> {
    let boot = dir.join("boot");
    let entries = fs::read_dir(&boot).map_err(io_err("read directory", &boot))?;
    for entry in entries {
        let entry = entry.map_err(io_err("read directory", &boot))?;
        if entry.file_name().to_string_lossy().starts_with("vmlinuz-") {
            return Ok(entry.path());
        }
    }
    Err(Error::NoVmlinuz {
        dir: dir.to_owned(),
    })
}

/// Makes the newest kernel of `series` available under `cache`, downloading
/// and unpacking it only when it is not there yet.
pub fn fetch(series: Series, cache: &Path) -> Result<Kernel> {
    let package = resolve(series)?;
    let dir = cache.join(&package);
    if let Ok(vmlinuz) = find_vmlinuz(&dir) {
        return Ok(Kernel {
            series,
            package,
            vmlinuz,
        });
    }
    let download = cache.join(".download");
    if download.exists() {
        fs::remove_dir_all(&download).map_err(io_err("remove", &download))?;
    }
    fs::create_dir_all(&download).map_err(io_err("create directory", &download))?;
    eprintln!("xtask: fetching {package}");
    sh::stdout(
        Command::new("apt-get")
            .current_dir(&download)
            .args(["download", "-qq", &package]),
    )?;
    let deb = fs::read_dir(&download)
        .map_err(io_err("read directory", &download))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| Error::Parse {
            program: "apt-get download".into(),
            detail: format!("no .deb appeared in {}", download.display()),
        })?;
    // Unpack beside the final place, then rename: an interrupted run leaves
    // no half-unpacked kernel that a later run would take as complete.
    let staging = cache.join(format!(".{package}.partial"));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(io_err("remove", &staging))?;
    }
    sh::stdout(Command::new("dpkg").arg("-x").arg(&deb).arg(&staging))?;
    find_vmlinuz(&staging)?;
    fs::rename(&staging, &dir).map_err(io_err("rename into", &dir))?;
    fs::remove_dir_all(&download).map_err(io_err("remove", &download))?;
    let vmlinuz = find_vmlinuz(&dir)?;
    Ok(Kernel {
        series,
        package,
        vmlinuz,
    })
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
    fn picks_newest_6_12() {
        let out = "linux-image-6.12.99+deb12-cloud-amd64-unsigned - x\n\
                   linux-image-6.12.117+deb12-cloud-amd64-unsigned - x\n";
        assert_eq!(
            newest(out).as_deref(),
            Some("linux-image-6.12.117+deb12-cloud-amd64-unsigned")
        );
        assert_eq!(newest(""), None);
    }
}
