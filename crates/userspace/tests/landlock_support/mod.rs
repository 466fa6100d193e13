//! Shared set-up of the Landlock engine tests: a workspace, a policy compiled against it, a
//! scope per command.
#![allow(dead_code, reason = "each test binary uses part of the support module")]
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support: a step that fails fails the test"
)]

use std::io::Read as _;
use std::path::{Path, PathBuf};

use bee_core::{CompileOptions, CompiledPolicy};
use bee_userspace::cgroup::CgroupParent;
use bee_userspace::landlock::LandlockEngine;
use bee_userspace::launch::{LaunchSpec, StdioMode};
use bee_userspace::scope::{Scope, ScopeOptions};

/// What a confined command did.
#[derive(Debug)]
pub struct Ran {
    /// The exit status (128 + the signal for a signal).
    pub status: i32,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// The denials the engine reported for the scope, as `bee exec` explains them.
    pub denials: Vec<String>,
    /// The kernel's audit records lost while the scope ran (`ScopeReport::lost_records`).
    pub lost: u64,
}

/// Held for reading by every run, for writing by a test that floods the kernel's audit
/// queue: what that flood makes the kernel drop may be any scope's records, so no other scope
/// runs meanwhile.
pub static FLOOD: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A workspace directory and a directory outside it, both removed at the end.
pub struct Ws {
    dir: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Ws {
    /// Fails (never skips) without root: the engine makes mount and PID namespaces.
    pub fn new() -> Self {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(
            euid, 0,
            "the Landlock engine tests need root (the engine makes mount and PID namespaces)"
        );
        let base =
            std::env::var_os("CARGO_TARGET_TMPDIR").map_or_else(std::env::temp_dir, PathBuf::from);
        Self {
            dir: tempfile::tempdir_in(&base).unwrap(),
            outside: tempfile::tempdir_in(&base).unwrap(),
        }
    }

    /// The workspace.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` at `rel` in the workspace.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        write(&self.dir.path().join(rel), text)
    }

    /// Writes `text` at `rel` outside the workspace.
    pub fn outside(&self, rel: &str, text: &str) -> PathBuf {
        write(&self.outside.path().join(rel), text)
    }

    /// The directory outside the workspace.
    pub fn outside_dir(&self) -> &Path {
        self.outside.path()
    }

    /// Compiles `toml` with the workspace as its base.
    pub fn policy(&self, toml: &str) -> CompiledPolicy {
        let options = CompileOptions {
            base: self.dir.path().to_owned(),
            home: None,
        };
        bee_core::compile_str("test.toml", toml, &options)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .policy
    }

    /// Runs `argv` in a fresh scope confined by `policy`, in the workspace.
    pub fn run(&self, policy: &CompiledPolicy, argv: &[&str]) -> Ran {
        self.try_run(policy, argv).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Ws::run`], with a launch the engine refused (fail closed) as an error.
    pub fn try_run(&self, policy: &CompiledPolicy, argv: &[&str]) -> Result<Ran, String> {
        let _shared = FLOOD
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let engine = LandlockEngine::new().expect("this kernel runs Landlock");
        self.try_run_in(&engine, policy, argv)
    }

    /// As [`Ws::run`], in a scope of `engine` (shared with other scopes).
    pub fn run_in(&self, engine: &LandlockEngine, policy: &CompiledPolicy, argv: &[&str]) -> Ran {
        self.try_run_in(engine, policy, argv)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Ws::try_run`], in a scope of `engine` (shared with other scopes).
    pub fn try_run_in(
        &self,
        engine: &LandlockEngine,
        policy: &CompiledPolicy,
        argv: &[&str],
    ) -> Result<Ran, String> {
        let parent = CgroupParent::open_default().expect("a cgroup2 hierarchy");
        let scope = Scope::create_for_policy(engine, &parent, policy, ScopeOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let spec = LaunchSpec::new(argv[0])
            .args(&argv[1..])
            .current_dir(self.dir.path())
            .stdout(StdioMode::Piped)
            .stderr(StdioMode::Piped);
        let mut launched = scope.spawn(&spec).map_err(|e| e.to_string())?;
        let mut out = launched.take_stdout().unwrap();
        let mut err = launched.take_stderr().unwrap();
        let t = std::thread::spawn(move || {
            let mut s = String::new();
            err.read_to_string(&mut s).unwrap();
            s
        });
        let mut stdout = String::new();
        out.read_to_string(&mut stdout).unwrap();
        let stderr = t.join().unwrap();
        let mut denials = Vec::new();
        let report = scope
            .finish(&mut launched, &mut |r| denials.push(r.explanation()))
            .unwrap();
        Ok(Ran {
            status: report.outcome.exit_code(),
            stdout,
            stderr,
            denials,
            lost: report.lost_records,
        })
    }
}

fn write(p: &Path, text: &str) -> PathBuf {
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(p, text).unwrap();
    p.to_owned()
}

/// What every dynamically linked program needs: the loader's cache and the libraries, read
/// and mapped executable.
const BASE_READ: &[&str] = &["/usr/lib/**", "/etc/ld.so.cache"];
const BASE_EXEC: &[&str] = &["/usr/lib/x86_64-linux-gnu/**"];

/// A version 1 policy granting the base plus `read`, `write` and `exec`, then `extra`
/// (more tables, such as `[[net.allow]]`).
pub fn policy_text(read: &[&str], write: &[&str], exec: &[&str], extra: &str) -> String {
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|i| format!("{i:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let read: Vec<&str> = BASE_READ.iter().chain(read).copied().collect();
    let write: Vec<&str> = ["/dev/null"].iter().chain(write).copied().collect();
    let exec: Vec<&str> = BASE_EXEC.iter().chain(exec).copied().collect();
    format!(
        "version = 1\n[fs]\nread = [{}]\nwrite = [{}]\n[exec]\nallow = [{}]\n{extra}",
        list(&read),
        list(&write),
        list(&exec)
    )
}
