//! Agents installed from npm for the tests that run them: a pinned package in a cache under
//! the target directory, installed on first use.

use std::path::Path;
use std::sync::Mutex;

/// One install at a time in a test binary: tests that start together and find the package
/// missing would otherwise run npm into the same directory at once, and one of them would
/// start an executable another is still writing ("Text file busy").
static INSTALLING: Mutex<()> = Mutex::new(());

/// Installs `spec` (`package@version`) with npm into `dir` (`npm install ARGS --prefix DIR
/// SPEC`) unless every one of `files` is there already; the test fails, saying why, when npm
/// cannot run or the install fails or leaves one of `files` missing.
pub fn install(dir: &Path, args: &[&str], spec: &str, files: &[&Path]) {
    let _one = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if files.iter().all(|f| f.is_file()) {
        return;
    }
    let o = std::process::Command::new("npm")
        .args(["install", "--no-audit", "--no-fund"])
        .args(args)
        .arg("--prefix")
        .arg(dir)
        .arg(spec)
        .output()
        .unwrap_or_else(|e| unreachable!("cannot run npm to install {spec}: {e}"));
    assert!(
        o.status.success(),
        "npm install {spec}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    for f in files {
        assert!(f.is_file(), "{spec} installed no {}", f.display());
    }
}
