//! Installing the Debian packages a task needs, so a fresh machine works
//! without manual steps.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};
use crate::sh;

/// Set once `apt-get update` ran in this process.
static UPDATED: AtomicBool = AtomicBool::new(false);

/// True when `dpkg-query` reports `package` as installed.
pub fn is_installed(package: &str) -> bool {
    let out = sh::output_any(Command::new("dpkg-query").args(["-W", "-f=${Status}", package]));
    match out {
        Ok(out) => {
            out.status.success()
                && String::from_utf8_lossy(&out.stdout).ends_with("install ok installed")
        }
        Err(_) => false,
    }
}

/// True when the effective user is root (reads `/proc/self/status`).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// Runs `apt-get update` once per process.
pub fn update() -> Result<()> {
    if UPDATED.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    eprintln!("xtask: apt-get update");
    sh::stdout(Command::new("apt-get").args(["update", "-qq"])).map(drop)
}

/// Installs every package in `packages` that is not installed yet.
pub fn ensure(packages: &[&str]) -> Result<()> {
    let missing: Vec<String> = packages
        .iter()
        .filter(|p| !is_installed(p))
        .map(|p| (*p).to_owned())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        return Err(Error::NotRoot { packages: missing });
    }
    update()?;
    eprintln!("xtask: apt-get install {}", missing.join(" "));
    sh::run(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing),
    )
}
