//! The exit-status table: every command that reads a file gives the same status for the same
//! failure, chosen by cause — a file that does not exist 66, one that exists but may not be
//! read 77, one that is read but refused 65 (`src/app/exit.rs`, `docs/exit-status.md`).
//!
//! Root reads every file, so "may not be read" is made real for the child: when the tests run
//! as root, the child starts without `CAP_DAC_OVERRIDE` and `CAP_DAC_READ_SEARCH` in its
//! bounding set (and so without them after `exec`), and the file has mode 000.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use support::{bee_exe, stderr};

/// A valid policy for the workspace.
const POLICY: &str = "version = 2\n\n[fs]\nread = [\".\"]\n";
/// A policy with a key the language does not have.
const INVALID_POLICY: &str = "version = 2\n\n[fs]\nreed = [\".\"]\n";
/// A scenario of one episode in `ws`.
const SCENARIO: &str =
    "name = \"t\"\nprompt = \"p\"\nworkspace = \"ws\"\nworkspace_mode = \"in-place\"\n";
/// A scenario with a key scenarios do not have.
const INVALID_SCENARIO: &str = "name = \"t\"\nprompt = \"p\"\nworkspace = \"ws\"\nbogus = 1\n";

/// `linux/capability.h`.
const CAP_DAC_OVERRIDE: libc::c_ulong = 1;
const CAP_DAC_READ_SEARCH: libc::c_ulong = 2;

/// How an input file is broken.
#[derive(Debug, Clone, Copy)]
enum Failure {
    /// It does not exist: 66.
    Missing,
    /// It exists but may not be read: 77.
    Unreadable,
    /// It is read and refused: 65.
    Invalid,
}

impl Failure {
    fn status(self) -> i32 {
        match self {
            Self::Missing => 66,
            Self::Unreadable => 77,
            Self::Invalid => 65,
        }
    }
}

/// A directory every uid may enter, with a workspace, a provider and valid inputs.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(root.join("ws")).unwrap();
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo");
        for file in ["host-provider.toml", "host-recording.jsonl"] {
            std::fs::copy(demo.join(file), root.join(file)).unwrap();
        }
        std::fs::write(root.join("policy.toml"), POLICY).unwrap();
        std::fs::write(root.join("scenario.toml"), SCENARIO).unwrap();
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `name` broken as `failure`, written with `valid` or `invalid` text.
    fn broken(&self, name: &str, failure: Failure, valid: &str, invalid: &str) -> PathBuf {
        let path = self.path(name);
        match failure {
            Failure::Missing => {}
            Failure::Invalid => std::fs::write(&path, invalid).unwrap(),
            Failure::Unreadable => {
                std::fs::write(&path, valid).unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
            }
        }
        path
    }

    /// `bee run` (of the project's scenario) and `bee repl`, with `provider` and `policy`.
    fn run_and_repl(&self, provider: &Path, policy: &Path) -> [Vec<String>; 2] {
        let (provider, policy) = (provider.display().to_string(), policy.display().to_string());
        let scenario = self.path("scenario.toml").display().to_string();
        let args = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        [
            args(&[
                "run",
                "--scenario",
                &scenario,
                "--provider",
                &provider,
                "--policy",
                &policy,
            ]),
            args(&["repl", "--provider", &provider, "--policy", &policy]),
        ]
    }

    /// Runs `bee ARGS` in the project, as a process that may not read what its mode forbids.
    fn bee(&self, args: &[&str]) -> Output {
        let mut command = Command::new(bee_exe());
        command
            .args(args)
            .current_dir(self.dir.path())
            .env("HOME", self.dir.path())
            .env_remove("XDG_CONFIG_HOME")
            .stdin(Stdio::null());
        // SAFETY: only async-signal-safe calls (prctl) between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::geteuid() == 0 {
                    for cap in [CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH] {
                        if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                }
                Ok(())
            });
        }
        command.output().unwrap()
    }
}

/// The commands that take a policy, with the policy at `policy`.
fn policy_commands(p: &Project, policy: &str) -> Vec<(&'static str, Vec<String>)> {
    let provider = p.path("host-provider.toml").display().to_string();
    let scenario = p.path("scenario.toml").display().to_string();
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    vec![
        ("validate", owned(&["validate", "--policy", policy])),
        ("exec", owned(&["exec", "--policy", policy, "--", "true"])),
        (
            "run",
            owned(&[
                "run",
                "--scenario",
                &scenario,
                "--provider",
                &provider,
                "--policy",
                policy,
            ]),
        ),
        (
            "repl",
            owned(&["repl", "--provider", &provider, "--policy", policy]),
        ),
        (
            "config show",
            owned(&["config", "show", "--policy", policy]),
        ),
        (
            "policy diff",
            owned(&["policy", "diff", policy, "policy.toml"]),
        ),
        (
            "validate --parent",
            owned(&["validate", "--policy", "policy.toml", "--parent", policy]),
        ),
    ]
}

/// Runs every command that takes a policy with `policy` and checks that each fails as
/// `failure` says, naming `broken.toml`; `what` says what is broken, for the messages.
fn every_command_fails_as(p: &Project, policy: &Path, failure: Failure, what: &str) {
    let policy = policy.display().to_string();
    for (name, args) in policy_commands(p, &policy) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = p.bee(&args);
        let err = stderr(&o);
        assert_eq!(
            o.status.code(),
            Some(failure.status()),
            "bee {name} with {what} that is {failure:?}:\n{err}"
        );
        assert!(
            err.contains("broken.toml"),
            "bee {name} does not name the file ({what}, {failure:?}):\n{err}"
        );
    }
}

#[test]
fn a_policy_file_fails_with_the_same_status_in_every_command() {
    for failure in [Failure::Missing, Failure::Unreadable, Failure::Invalid] {
        let p = Project::new();
        let policy = p.broken("broken.toml", failure, POLICY, INVALID_POLICY);
        every_command_fails_as(&p, &policy, failure, "a policy");
    }
}

/// A policy that includes `broken.toml`, a fragment of the user's.
const INCLUDING_POLICY: &str =
    "version = 2\ninclude = [\"./broken.toml\"]\n\n[fs]\nread = [\".\"]\n";
/// A valid fragment, and one with a key the language does not have.
const FRAGMENT: &str = "[fs]\nread = [\"./ws/**\"]\n";
const INVALID_FRAGMENT: &str = "[fs]\nreed = [\"./ws/**\"]\n";

#[test]
fn an_included_file_fails_as_the_policy_file_does_in_every_command() {
    for failure in [Failure::Missing, Failure::Unreadable, Failure::Invalid] {
        let p = Project::new();
        p.broken("broken.toml", failure, FRAGMENT, INVALID_FRAGMENT);
        let policy = p.path("including.toml");
        std::fs::write(&policy, INCLUDING_POLICY).unwrap();
        every_command_fails_as(&p, &policy, failure, "an include");
    }
}

#[test]
fn a_scenario_file_fails_by_the_same_causes() {
    for failure in [Failure::Missing, Failure::Unreadable, Failure::Invalid] {
        let p = Project::new();
        let scenario = p.broken("broken.toml", failure, SCENARIO, INVALID_SCENARIO);
        let o = p.bee(&[
            "run",
            "--scenario",
            scenario.to_str().unwrap(),
            "--provider",
            p.path("host-provider.toml").to_str().unwrap(),
            "--policy",
            p.path("policy.toml").to_str().unwrap(),
        ]);
        let err = stderr(&o);
        assert_eq!(
            o.status.code(),
            Some(failure.status()),
            "{failure:?}:\n{err}"
        );
        assert!(err.contains("broken.toml"), "{failure:?}:\n{err}");
    }
}

#[test]
fn a_provider_file_fails_by_the_same_causes_in_run_and_repl() {
    for failure in [Failure::Missing, Failure::Unreadable, Failure::Invalid] {
        let p = Project::new();
        let provider = p.broken("broken.toml", failure, "kind = \"replay\"\n", "kind = 3\n");
        for args in p.run_and_repl(&provider, &p.path("policy.toml")) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = p.bee(&args);
            let err = stderr(&o);
            assert_eq!(
                o.status.code(),
                Some(failure.status()),
                "bee {} ({failure:?}):\n{err}",
                args[0]
            );
            assert!(err.contains("broken.toml"), "{failure:?}:\n{err}");
        }
    }
}

/// `bee run` and `bee repl` show the compiler's warnings as `bee validate` does, before
/// anything else happens.
#[test]
fn run_and_repl_show_the_policy_compilers_warnings() {
    let p = Project::new();
    // A rule given twice is merged, with a warning.
    std::fs::write(
        p.path("policy.toml"),
        "version = 2\n\n[fs]\nread = [\".\", \".\"]\n",
    )
    .unwrap();
    let policy = p.path("policy.toml").display().to_string();
    let validate = p.bee(&["validate", "--policy", &policy]);
    let warnings: Vec<String> = stderr(&validate)
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .map(str::to_owned)
        .collect();
    assert!(!warnings.is_empty(), "{}", stderr(&validate));
    for args in p.run_and_repl(&p.path("host-provider.toml"), &p.path("policy.toml")) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = p.bee(&args);
        // The inline REPL says it among its notices on stdout.
        let err = format!("{}{}", stderr(&o), support::stdout(&o));
        for w in &warnings {
            assert_eq!(
                err.matches(w.as_str()).count(),
                1,
                "bee {} shows {w:?} once:\n{err}",
                args[0]
            );
        }
    }
}
