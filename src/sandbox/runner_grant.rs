//! The implicit grant for bee's own tool runner.
//!
//! File tools run as `bee __tool NAME` inside the episode's scope, so the scope must be allowed
//! to execute bee and to load what bee is linked against. This is the one widening bee makes
//! to a policy, and it is exact:
//!
//! * an `exec` rule for bee's executable — its canonical path, pinned to its device and inode;
//! * for each shared object bee maps executable (the dynamic loader and the libraries): an
//!   `exec` rule pinned the same way, and an exact `fs.read` rule;
//! * an exact `fs.read` rule for bee's executable itself and for the dynamic loader's cache
//!   `/etc/ld.so.cache` (when it exists), which the loader opens before any library.
//!
//! No glob, no directory, nothing writable. Every rule carries the origin key
//! [`RUNNER_ORIGIN_KEY`], so a plan, an audit record or `--emit compiled` shows where it came
//! from.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use bee_core::CompiledPolicy;
use bee_core::compiled::{ExecRule, FileId, Origin, PathRule};
use bee_core::glob::PathPattern;

/// The origin key of every rule the runner grant adds.
pub const RUNNER_ORIGIN_KEY: &str = "(bee tool runner)";

/// The dynamic loader's cache, read by the loader before it opens any library.
pub const LD_SO_CACHE: &str = "/etc/ld.so.cache";

/// Why the runner grant could not be worked out. Without it no file tool can run, so a
/// sandbox refuses to start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerGrantError {
    /// A file could not be resolved or examined.
    #[error("the tool runner grant: {op} `{path}` failed: {source}")]
    Io {
        /// What was done: `canonicalize`, `stat`, `read`, `run ldd on`.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A path is not valid UTF-8, which a policy cannot name.
    #[error("the tool runner grant: `{path}` is not valid UTF-8")]
    NotUtf8 {
        /// The path.
        path: PathBuf,
    },
    /// `ldd` did not list the libraries of the runner.
    #[error("the tool runner grant: `ldd {path}` failed: {detail}")]
    Ldd {
        /// The runner executable.
        path: PathBuf,
        /// What `ldd` said.
        detail: String,
    },
}

/// One file of the grant: its canonical path and identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GrantedFile {
    /// The canonical (symlink-free, absolute) path, as the kernel reports it.
    pub path: String,
    /// Its device and inode when the grant was made.
    pub id: FileId,
}

/// The rules that let a scope run bee's tool runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerGrant {
    /// bee's executable.
    pub executable: GrantedFile,
    /// The shared objects it maps executable (loader included), sorted by path.
    pub libraries: Vec<GrantedFile>,
    /// Further files read only: [`LD_SO_CACHE`] when it exists.
    pub read_only: Vec<String>,
}

impl RunnerGrant {
    /// Works out the grant for the runner executable `runner`. When `runner` is the running
    /// process's own executable, its libraries come from `/proc/self/maps`; otherwise from
    /// `ldd runner`.
    ///
    /// # Errors
    /// [`RunnerGrantError`] when a file cannot be resolved or the libraries cannot be listed.
    pub fn detect(runner: &Path) -> Result<Self, RunnerGrantError> {
        let executable = granted(runner)?;
        let own = granted(Path::new("/proc/self/exe")).ok();
        let paths = if own.as_ref().is_some_and(|o| o.id == executable.id) {
            let maps = std::fs::read_to_string("/proc/self/maps").map_err(|source| {
                RunnerGrantError::Io {
                    op: "read",
                    path: PathBuf::from("/proc/self/maps"),
                    source,
                }
            })?;
            parse_maps(&maps)
        } else {
            let out = Command::new("ldd").arg(runner).output().map_err(|source| {
                RunnerGrantError::Io {
                    op: "run ldd on",
                    path: runner.to_owned(),
                    source,
                }
            })?;
            let text = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() && !text.contains("statically linked") {
                return Err(RunnerGrantError::Ldd {
                    path: runner.to_owned(),
                    detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                });
            }
            parse_ldd(&text)
        };
        let mut libraries = BTreeSet::new();
        for path in paths {
            let file = granted(&path)?;
            if file.id != executable.id {
                libraries.insert(file);
            }
        }
        // Rust's standard library reads the runner's own memory map at start (its stack
        // guard); the kernel names it /proc/self/maps for the runner alone.
        let read_only = Path::new(LD_SO_CACHE)
            .exists()
            .then(|| LD_SO_CACHE.to_owned())
            .into_iter()
            .chain(std::iter::once("/proc/self/maps".to_owned()))
            .collect();
        Ok(Self {
            executable,
            libraries: libraries.into_iter().collect(),
            read_only,
        })
    }

    /// The `exec` rules: the executable and every library, each exact and pinned.
    pub fn exec_rules(&self) -> Vec<ExecRule> {
        std::iter::once(&self.executable)
            .chain(&self.libraries)
            .map(|f| ExecRule {
                pattern: PathPattern::Exact {
                    path: f.path.clone(),
                },
                pin: Some(f.id),
                origin: origin(&f.path),
            })
            .collect()
    }

    /// The `fs.read` rules: the executable, every library and [`RunnerGrant::read_only`],
    /// each exact.
    pub fn read_rules(&self) -> Vec<PathRule> {
        std::iter::once(&self.executable.path)
            .chain(self.libraries.iter().map(|f| &f.path))
            .chain(&self.read_only)
            .map(|p| PathRule {
                pattern: PathPattern::Exact { path: p.clone() },
                origin: origin(p),
            })
            .collect()
    }

    /// Adds the grant's rules to `policy` (after the policy's own rules). Nothing else in the
    /// policy changes.
    pub fn apply(&self, policy: &mut CompiledPolicy) {
        policy.exec.extend(self.exec_rules());
        policy.fs.read.extend(self.read_rules());
    }
}

fn origin(path: &str) -> Origin {
    Origin {
        key: RUNNER_ORIGIN_KEY.to_owned(),
        line: 0,
        column: 0,
        text: path.to_owned(),
    }
}

fn granted(path: &Path) -> Result<GrantedFile, RunnerGrantError> {
    let canonical = std::fs::canonicalize(path).map_err(|source| RunnerGrantError::Io {
        op: "canonicalize",
        path: path.to_owned(),
        source,
    })?;
    let meta = std::fs::metadata(&canonical).map_err(|source| RunnerGrantError::Io {
        op: "stat",
        path: canonical.clone(),
        source,
    })?;
    let text = canonical
        .to_str()
        .ok_or_else(|| RunnerGrantError::NotUtf8 {
            path: canonical.clone(),
        })?
        .to_owned();
    Ok(GrantedFile {
        path: text,
        id: FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        },
    })
}

/// The files of the file-backed, executable mappings in a `/proc/PID/maps` text, in order of
/// first appearance, without duplicates. Pseudo-mappings (`[vdso]`, `[stack]`) and deleted
/// files are left out.
pub fn parse_maps(text: &str) -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for line in text.lines() {
        // address perms offset dev inode pathname; the pathname may contain spaces.
        let mut fields = line.splitn(6, char::is_whitespace);
        let (Some(_), Some(perms), Some(_), Some(_), Some(inode), Some(rest)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            continue;
        };
        let path = rest.trim_start();
        if !perms.contains('x') || inode == "0" || !path.starts_with('/') {
            continue;
        }
        if path.ends_with(" (deleted)") {
            continue;
        }
        if seen.insert(path.to_owned()) {
            out.push(PathBuf::from(path));
        }
    }
    out
}

/// The library paths in `ldd` output: `name => /path (0x…)` lines and lines that start with
/// an absolute path (the loader). `linux-vdso.so.1` and `not found` lines have no path.
pub fn parse_ldd(text: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let candidate = match line.split_once("=>") {
            Some((_, right)) => right.trim(),
            None => line,
        };
        let path = match candidate.rfind(" (0x") {
            Some(i) => candidate.get(..i).unwrap_or(candidate),
            None => candidate,
        }
        .trim();
        if path.starts_with('/') && !out.iter().any(|p: &PathBuf| p == Path::new(path)) {
            out.push(PathBuf::from(path));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_keep_executable_file_mappings_only() {
        let maps = "\
5581e0a00000-5581e0a05000 r--p 00000000 fe:00 247030 /usr/bin/bee
5581e0a05000-5581e0b05000 r-xp 00005000 fe:00 247030 /usr/bin/bee
7f0000000000-7f0000100000 r-xp 00026000 fe:00 326279 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000200000-7f0000300000 rw-p 00000000 00:00 0 
7f0000300000-7f0000301000 r-xp 00000000 00:00 0 [vdso]
7f0000400000-7f0000401000 r-xp 00000000 fe:00 99 /opt/a dir/libx.so (deleted)
7f0000500000-7f0000501000 r-xp 00000000 fe:00 98 /opt/a dir/liby.so
7f0000600000-7f0000601000 r-xp 00000000 fe:00 326279 /usr/lib/x86_64-linux-gnu/libc.so.6
";
        assert_eq!(
            parse_maps(maps),
            vec![
                PathBuf::from("/usr/bin/bee"),
                PathBuf::from("/usr/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/opt/a dir/liby.so"),
            ]
        );
    }

    #[test]
    fn ldd_lists_resolved_libraries_and_the_loader() {
        let ldd = "\
\tlinux-vdso.so.1 (0x00007ffd6b5f2000)
\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0d1c000000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0d1be00000)
\tlibmissing.so => not found
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0d1c2a0000)
";
        assert_eq!(
            parse_ldd(ldd),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }
}
