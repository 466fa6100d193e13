//! What the benchmarks that run `bee run` in a QEMU guest share (`cargo xtask
//! bench-harness` and its siblings): their fixtures copied out of `bench/`, a
//! shell script run on this host and in one 6.12 guest, and the transcripts'
//! timestamps.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result, io_err};
use crate::initramfs::Initramfs;
use crate::qemu::Outcome;
use crate::sh;
use crate::vm::{self, AccelChoice, KernelChoice, VmOpts};

/// Milliseconds in a day: transcript timestamps are compared as times of day.
pub const DAY_MS: f64 = 86_400_000.0;

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).map_err(io_err("create", to))?;
    for entry in fs::read_dir(from).map_err(io_err("read directory", from))? {
        let entry = entry.map_err(io_err("read directory", from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).map_err(io_err("copy", &src))?;
        }
    }
    Ok(())
}

/// Copies `bench/<name>/` (hidden files included) to
/// `<target>/bench-<name>/fixtures`, writes `written` (file name, contents)
/// there, and returns the directory, resolved.
pub fn fixtures(name: &str, written: &[(&str, String)]) -> Result<PathBuf> {
    let dir = vm::target_dir()
        .join(format!("bench-{name}"))
        .join("fixtures");
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(io_err("remove", &dir))?;
    }
    copy_tree(&vm::repo_root().join("bench").join(name), &dir)?;
    for (file, contents) in written {
        let p = dir.join(file);
        fs::write(&p, contents).map_err(io_err("write", &p))?;
    }
    fs::canonicalize(&dir).map_err(io_err("resolve", &dir))
}

/// Runs `script` with this host's `/bin/sh` (written to `<dir>/local.sh`)
/// and returns its standard output's lines, whatever its exit status.
pub fn run_here(dir: &Path, script: &str) -> Result<Vec<String>> {
    let path = dir.join("local.sh");
    fs::write(&path, script).map_err(io_err("write", &path))?;
    let out = sh::output_any(Command::new("/bin/sh").arg(&path))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// How the guest is booted (the benchmarks' common options).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Guest {
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 2048)]
    pub memory: u32,
    /// Limit for the VM, boot included, in seconds.
    #[arg(long, default_value_t = 3000)]
    pub timeout: u64,
    /// Accelerator for the VM.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelChoice,
}

/// Boots one 6.12 guest holding `bee` and the fixtures `dir` (at their host
/// paths) and runs `script` there with busybox `sh`, from `/<mount>/run.sh`.
pub fn run_in_guest(
    guest: Guest,
    bee: &Path,
    dir: &Path,
    mount: &str,
    script: String,
) -> Result<Outcome> {
    let path = PathBuf::from(format!("/{mount}/run.sh"));
    let extra = |fs_: &mut Initramfs| -> Result<()> {
        fs_.add_executable(bee)?;
        fs_.add_tree(dir)?;
        fs_.add_data(&path, script.clone().into_bytes(), 0o755);
        Ok(())
    };
    let opts = VmOpts {
        kernel: KernelChoice::named("6.12").into_iter().collect(),
        with: Vec::new(),
        with_on: Vec::new(),
        bin_on: Vec::new(),
        bin: Vec::new(),
        timeout: guest.timeout,
        accel: guest.accel,
        memory: guest.memory,
        append: String::new(),
        lanes: 1,
    };
    let command = vec![
        "/bin/busybox".to_owned(),
        "sh".to_owned(),
        path.to_string_lossy().into_owned(),
    ];
    let runs = vm::run_in_kernels_with(&opts, Some(&extra), None, &command, &[])?;
    let Some(run) = runs.into_iter().next() else {
        return Err(Error::Usage("no kernel was booted".into()));
    };
    run.outcome
}

/// This host's kernel release.
pub fn host_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Milliseconds since midnight of an event's `at` timestamp
/// (`…THH:MM:SS.mmmZ`).
pub fn at_ms(ev: &serde_json::Value) -> Option<f64> {
    let at = ev["at"].as_str()?;
    let time = at.split_once('T')?.1.trim_end_matches('Z');
    let mut parts = time.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let sec: f64 = parts.next()?.parse().ok()?;
    Some(((h * 60.0 + m) * 60.0 + sec) * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_times_of_day() {
        let ev: serde_json::Value =
            serde_json::from_str(r#"{"at":"2026-11-30T01:02:03.456Z"}"#).unwrap_or_default();
        let ms = at_ms(&ev).unwrap_or_default();
        assert!((ms - 3_723_456.0).abs() < 1e-6, "{ms}");
        assert_eq!(at_ms(&serde_json::Value::Null), None);
    }
}
