//! Learn mode on the command line (`bee exec --learn OUT`, `bee run --learn OUT`): the
//! output file, the banners, and the audit records fed to [`bee_core::learn`]'s synthesis.
//!
//! Learn mode is turned on by the flag alone: no configuration key exists for it (the
//! configuration refuses unknown keys), so it is always a deliberate act of whoever types the
//! command. It is loud: a banner on stderr before the command starts and one after it ends,
//! each access learned printed once, and every audit record it produces carries `"learn":
//! true`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use bee_core::CompiledPolicy;
use bee_core::learn::{Access, HostFs, Limits, Observed, Synthesis, synthesize};
use bee_userspace::audit::{AuditRecord, GrantKind, Verdict};

use super::Exit;

/// A learn run in progress: where the policy goes, and what has been observed so far.
#[derive(Debug)]
pub struct Learn {
    out: PathBuf,
    /// A file next to `out`, created before the command runs (proof that `out` can be
    /// written) and renamed onto it at the end.
    staged: tempfile::NamedTempFile,
    base_path: PathBuf,
    base_text: String,
    observed: Observed,
    /// Denials learn mode kept (what no policy can grant).
    refused: u64,
    /// The directory the base policy's relative paths resolve against; learned paths below
    /// it are written relative to it, and paths below a copy of it (a `bee run` episode's
    /// workspace copy) are read as paths below it.
    workspace: Option<PathBuf>,
}

impl Learn {
    /// Checks that `out` can be written (its directory exists and is writable) and reads the
    /// base policy's text; nothing has run yet.
    ///
    /// # Errors
    /// [`Exit::CantCreat`] (73) when `out` cannot be created, [`Exit::NoInput`] (66) when the
    /// base policy cannot be read again; the reason is printed.
    pub fn prepare(out: &Path, base: &Path, workspace: Option<&Path>) -> Result<Self, Exit> {
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if out.is_dir() {
            return Err(fail(
                Exit::CantCreat,
                &format!("--learn {}: is a directory", out.display()),
            ));
        }
        let staged = tempfile::Builder::new()
            .prefix(".bee-learn-")
            .suffix(".toml")
            .tempfile_in(&dir)
            .map_err(|e| {
                fail(
                    Exit::CantCreat,
                    &format!(
                        "--learn {}: cannot write in {}: {e}; nothing was run",
                        out.display(),
                        dir.display()
                    ),
                )
            })?;
        let base_text = std::fs::read_to_string(base).map_err(|e| {
            fail(
                Exit::NoInput,
                &format!("cannot read {}: {e}", base.display()),
            )
        })?;
        Ok(Self {
            out: out.to_path_buf(),
            staged,
            base_path: base.to_path_buf(),
            base_text,
            observed: Observed::new(Limits::default()),
            refused: 0,
            workspace: workspace.map(Path::to_path_buf),
        })
    }

    /// Prints the start banner on stderr.
    pub fn banner_start(&self) {
        eprintln!(
            "bee: LEARN MODE: {} is NOT enforced. Accesses it denies are ALLOWED and recorded \
             (marked `learn`), and a policy that allows them will be written to {}. What no \
             policy can grant (bpf, mounts, device nodes, other cgroups, writes to cgroupfs, \
             bpffs, binfmt_misc, /proc and /sys) is still refused. Run only commands you trust this way.",
            self.base_path.display(),
            self.out.display()
        );
    }

    /// Takes one audit record: a learned access is recorded (and printed the first time it is
    /// seen), a denial that learn mode kept is counted.
    pub fn record(&mut self, record: &AuditRecord) {
        self.record_from(None, record);
    }

    /// As [`Learn::record`], for a record from a scope whose workspace is `from`: paths below
    /// `from` are taken as the same paths below the base's workspace.
    pub fn record_from(&mut self, from: Option<&Path>, record: &AuditRecord) {
        if record.verdict != Verdict::Deny {
            return;
        }
        if !record.learn {
            self.refused += 1;
            return;
        }
        let moved = match (from, &self.workspace, &record.path) {
            (Some(from), Some(ws), Some(p)) if from != ws.as_path() => Path::new(p)
                .strip_prefix(from)
                .ok()
                .map(|rest| ws.join(rest).display().to_string()),
            _ => None,
        };
        let before = self.observed.distinct();
        let mut seen = record.clone();
        if moved.is_some() {
            seen.path = moved;
        }
        if let Some(access) = access(&seen) {
            self.observed.record(access);
        }
        if self.observed.distinct() > before {
            eprintln!("bee: learn: {}", record.explanation());
        }
    }

    /// Writes the learned policy onto the output file (atomically: the staged file is renamed)
    /// and prints the end banner.
    ///
    /// # Errors
    /// [`Exit::IoErr`] (74) when the policy cannot be written; the reason is printed.
    pub fn finish(
        self,
        base: &CompiledPolicy,
        home: Option<&Path>,
        command: &str,
    ) -> Result<(), Exit> {
        let home = home.map(|h| h.display().to_string());
        let workspace = self.workspace.as_ref().map(|w| w.display().to_string());
        let text = synthesize(&Synthesis {
            workspace: workspace.as_deref(),
            base_text: &self.base_text,
            base_name: &self.base_path.display().to_string(),
            base,
            observed: &self.observed,
            fs: &HostFs,
            home: home.as_deref(),
            command,
        })
        .map_err(|e| {
            fail(
                Exit::IoErr,
                &format!(
                    "{} changed during the run and is no longer TOML: {e}",
                    self.base_path.display()
                ),
            )
        })?;
        let mut staged = self.staged;
        let out = self.out;
        staged
            .write_all(text.as_bytes())
            .and_then(|()| staged.as_file().sync_all())
            .map_err(std::io::Error::other)
            .and_then(|()| staged.persist(&out).map(|_| ()).map_err(|e| e.error))
            .map_err(|e| {
                fail(
                    Exit::IoErr,
                    &format!("writing the learned policy {}: {e}", out.display()),
                )
            })?;
        let capped: Vec<String> = self
            .observed
            .dropped()
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        eprintln!(
            "bee: LEARN MODE ended: {} accesses the policy denied were allowed ({} distinct); \
             {} denials were kept (never granted in a scope).{} The learned policy is in {}: \
             review it, then `bee validate --policy {}`.",
            self.observed.total(),
            self.observed.distinct(),
            self.refused,
            if capped.is_empty() {
                String::new()
            } else {
                format!(
                    " CAPPED: {} more distinct entries than kept; the policy does not cover them.",
                    capped.join(", ")
                )
            },
            out.display(),
            out.display()
        );
        Ok(())
    }
}

/// The access a learned record stands for, by the grant that would allow it.
/// The command as the learned policy's header names it: its words, lossily UTF-8, joined by
/// spaces.
pub fn command_line(argv: &[std::ffi::OsString]) -> String {
    argv.iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

fn access(record: &AuditRecord) -> Option<Access<'_>> {
    let path = record.path.as_deref().filter(|_| !record.path_truncated);
    match record.grant? {
        GrantKind::FsRead => path.map(Access::Read),
        GrantKind::FsWrite => path.map(Access::Write),
        GrantKind::Exec => path.map(Access::Exec),
        GrantKind::NetUnix => path.map(Access::Unix),
        GrantKind::Net => Some(Access::Net {
            proto: record.proto?,
            addr: record.addr?,
            port: record.port?,
        }),
    }
}

fn fail(exit: Exit, message: &str) -> Exit {
    eprintln!("bee: {message}");
    exit
}
