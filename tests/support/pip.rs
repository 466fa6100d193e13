//! Agents installed from PyPI for the tests that run them: a pinned package in a virtual
//! environment in a cache under the target directory, made on first use with Debian's
//! CPython (`/usr/bin/python3`, whose interpreter and standard library the `python` fragment
//! grants; a venv runs the interpreter it was made with).

use std::path::Path;

/// Makes the virtual environment `venv` (`/usr/bin/python3 -m venv --clear VENV`) and installs
/// `spec` (`package==version`) into it with its pip, unless every one of `files` is there
/// already. Tests, here or in another test binary, that find it missing at once take turns
/// through a lock file beside it (`VENV.lock`): the second finds the first's install. The test
/// fails, saying why, when python3, its venv module (Debian's `python3-venv`) or pip cannot run
/// or the install fails or leaves one of `files` missing.
pub fn install(venv: &Path, spec: &str, files: &[&Path]) {
    let ready = || files.iter().all(|f| f.is_file());
    if ready() {
        return;
    }
    let parent = venv.parent().unwrap_or(venv);
    std::fs::create_dir_all(parent).unwrap_or_else(|e| unreachable!("{}: {e}", parent.display()));
    let mut lock = venv.as_os_str().to_owned();
    lock.push(".lock");
    let lock = std::path::PathBuf::from(lock);
    let lock =
        std::fs::File::create(&lock).unwrap_or_else(|e| unreachable!("{}: {e}", lock.display()));
    lock.lock().unwrap_or_else(|e| unreachable!("lock: {e}"));
    if ready() {
        return;
    }
    let run = |what: &str, command: &mut std::process::Command| {
        let o = command
            .output()
            .unwrap_or_else(|e| unreachable!("cannot run {what}: {e}"));
        assert!(
            o.status.success(),
            "{what}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    // `--clear`: an install cut short leaves a venv without all of `files`; it starts again.
    run(
        "/usr/bin/python3 -m venv (Debian: apt-get install python3-venv)",
        std::process::Command::new("/usr/bin/python3")
            .args(["-m", "venv", "--clear"])
            .arg(venv),
    );
    run(
        &format!("pip install {spec}"),
        std::process::Command::new(venv.join("bin/python")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-input",
            "--disable-pip-version-check",
            spec,
        ]),
    );
    for f in files {
        assert!(f.is_file(), "{spec} installed no {}", f.display());
    }
}
