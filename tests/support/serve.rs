//! A `bee serve` for tests: started as root on a socket in a fresh directory (mode 755, so
//! that an unprivileged client can reach it), with one `ceilings/default.toml`.

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::bee_exe;

/// A running service; dropping it stops it (SIGTERM).
pub struct Service {
    /// The directory of the socket, the ceilings, the state and the log.
    pub dir: tempfile::TempDir,
    engine: &'static str,
    /// Environment variables the service is started with, beside the test's own.
    env: Vec<(&'static str, &'static str)>,
    /// More arguments of `bee serve` from the next [`Service::spawn`] on.
    pub args: Vec<&'static str>,
    child: Option<Child>,
}

impl Service {
    /// Starts `bee serve --engine ENGINE` with the ceiling `ceiling(dir)` as `default.toml`,
    /// after `prepare(dir)` has made whatever the test needs there.
    pub fn start(
        engine: &'static str,
        prepare: impl FnOnce(&Path),
        ceiling: impl FnOnce(&Path) -> String,
    ) -> Self {
        Self::start_with_env(engine, &[], prepare, ceiling)
    }

    /// As [`Service::start`], the service's environment having `env` too.
    pub fn start_with_env(
        engine: &'static str,
        env: &[(&'static str, &'static str)],
        prepare: impl FnOnce(&Path),
        ceiling: impl FnOnce(&Path) -> String,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let set = |p: &Path, mode| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
                .unwrap_or_else(|e| unreachable!("{e}"));
        };
        set(dir.path(), 0o755);
        let ceilings = dir.path().join("ceilings");
        std::fs::create_dir(&ceilings).unwrap_or_else(|e| unreachable!("{e}"));
        prepare(dir.path());
        std::fs::write(ceilings.join("default.toml"), ceiling(dir.path()))
            .unwrap_or_else(|e| unreachable!("{e}"));
        let mut service = Self {
            dir,
            engine,
            env: env.to_vec(),
            args: Vec::new(),
            child: None,
        };
        service.spawn();
        service
    }

    /// Starts the service (again, after [`Service::kill`]) and waits until it answers.
    pub fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("serve.log"))
            .unwrap_or_else(|e| unreachable!("{e}"));
        let child = Command::new(super::bee_exe())
            .args(["serve", "--engine", self.engine, "--socket"])
            .arg(self.socket())
            .arg("--ceilings")
            .arg(self.dir.path().join("ceilings"))
            .args(&self.args)
            .envs(self.env.iter().copied())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| unreachable!("{e}"));
        self.child = Some(child);
        // Loading the BPF LSM's programs in an emulated guest takes a while.
        let deadline = Instant::now() + Duration::from_secs(300);
        while UnixStream::connect(self.socket()).is_err() {
            assert!(
                Instant::now() < deadline,
                "bee serve did not listen: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The service's socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("bee.sock")
    }

    /// The pid of the running service.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// What the service wrote on stderr.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }

    /// How many scopes the service lists as live.
    pub fn live_scopes(&self) -> usize {
        std::fs::read_dir(self.dir.path().join("scopes")).map_or(0, Iterator::count)
    }

    /// Waits (up to 60 s) until a service started after another was killed has swept what
    /// that one left, and checks that it removed every scope. A service listens before it
    /// sweeps (a second service must not sweep a live one's scopes), so the sweep may end
    /// after [`Service::spawn`] returns.
    pub fn wait_swept(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.log().contains("left by an earlier service") {
            assert!(Instant::now() < deadline, "no sweep: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(self.log().contains("removed the scope"), "{}", self.log());
        assert_eq!(self.live_scopes(), 0, "{}", self.log());
    }

    /// The scopes still listed once none is, or 15 s have passed: a client that hangs up
    /// has its scopes torn down after it is gone.
    pub fn scopes_left_after_hangup(&self) -> usize {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        while self.live_scopes() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.live_scopes()
    }

    /// Sends `signal` to the service and waits for it.
    pub fn kill(&mut self, signal: i32) {
        if let Some(mut child) = self.child.take() {
            let pid = i32::try_from(child.id()).unwrap_or(0);
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(pid, signal) };
            let _ = child.wait();
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill(libc::SIGTERM);
    }
}

/// Pids whose command line holds `needle` (as one argument).
pub fn pids_running(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if cmdline.split(|b| *b == 0).any(|a| a == needle.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

/// The ordinary user the tests run clients as.
pub const NOBODY: u32 = 65534;

/// What the ceiling and the requests read and run: the loader, libraries and a few programs.
const BASE: &str = r#"
read = ["/usr/**", "/etc/**", "/proc/**", "/dev/**", READ]
write = ["/dev/null", WRITE]
[exec]
allow = ["/usr/bin/**", "/usr/lib/x86_64-linux-gnu/**"]
"#;

/// A version 1 policy: [`BASE`] with `read` and `write` (one pattern each) added.
pub fn policy_text(read: &str, write: &str) -> String {
    format!(
        "version = 1\n[fs]{}",
        BASE.replace("READ", &format!("{read:?}"))
            .replace("WRITE", &format!("{write:?}"))
    )
}

/// The value, or the test fails with the error.
pub fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| unreachable!("{e}"))
}

/// A `bee serve` under the Landlock engine whose `default.toml` ceiling reads and writes
/// `<dir>/ws/**`; `ws/` (mode 777) holds a `secret` and a `pub/` directory.
pub fn start() -> Service {
    start_granting("")
}

/// As [`start`], the ceiling granting `net` (TOML tables) too.
pub fn start_granting(net: &str) -> Service {
    start_granting_with_env(net, &[])
}

/// As [`start_granting`], the service's environment having `env` too.
pub fn start_granting_with_env(net: &str, env: &[(&'static str, &'static str)]) -> Service {
    Service::start_with_env(
        "landlock",
        env,
        |dir| {
            let ws = dir.join("ws");
            ok(std::fs::create_dir_all(ws.join("pub")));
            for d in [&ws, &ws.join("pub")] {
                ok(std::fs::set_permissions(
                    d,
                    std::fs::Permissions::from_mode(0o777),
                ));
            }
            ok(std::fs::write(ws.join("secret"), "hush\n"));
        },
        |dir| {
            let tree = format!("{}/**", dir.join("ws").display());
            format!("{}{net}", policy_text(&tree, &tree))
        },
    )
}

/// The service's workspace, `<dir>/ws`.
pub fn ws(service: &Service) -> PathBuf {
    service.dir.path().join("ws")
}

/// A request policy in `ws/`.
pub fn policy(service: &Service, name: &str, read: &str, write: &str) -> PathBuf {
    let path = ws(service).join(name);
    ok(std::fs::write(&path, policy_text(read, write)));
    path
}

/// A request policy that reads and writes `ws/pub/**`.
pub fn pub_policy(service: &Service) -> PathBuf {
    let tree = format!("{}/pub/**", ws(service).display());
    policy(service, "p.toml", &tree, &tree)
}

/// Lets scopes of the service run bee itself (its file tools run as `bee __tool`), within
/// `ws/**`.
pub fn ceiling_with_bee(service: &Service) {
    let tree = format!("{}/**", ws(service).display());
    ok(std::fs::write(
        service.dir.path().join("ceilings/default.toml"),
        with_bee(&policy_text(&tree, &tree)),
    ));
}

/// `policy` with bee's directory readable and executable.
pub fn with_bee(policy: &str) -> String {
    let exe_dir = bee_exe()
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    policy
        .replace("\"/usr/**\",", &format!("\"/usr/**\", \"{exe_dir}/**\","))
        .replace("allow = [", &format!("allow = [\"{exe_dir}/**\", "))
}

/// `bee run` of a one-episode scenario as [`NOBODY`] in `ws/`, in place, under `policy`,
/// asking the service, its model answering `turns` in order: the scenario and provider are
/// written and `<dir>/records` (mode 777) made. Returns the command, not started, and the
/// records directory.
pub fn episode_as_nobody(service: &Service, policy: &Path, turns: &[String]) -> (Command, PathBuf) {
    let ws = ws(service);
    super::replay_scenario(&ws, ".", &policy.display().to_string(), turns);
    let records = service.dir.path().join("records");
    ok(std::fs::create_dir_all(&records));
    ok(std::fs::set_permissions(
        &records,
        std::fs::Permissions::from_mode(0o777),
    ));
    let mut cmd = Command::new(bee_exe());
    cmd.args([
        "run",
        "--scenario",
        "scenario.toml",
        "--provider",
        "provider.toml",
    ])
    .arg("--records-dir")
    .arg(&records)
    .current_dir(&ws)
    .env("BEE_SOCKET", service.socket())
    .env("HOME", &ws)
    .env_remove("XDG_CONFIG_HOME")
    .uid(NOBODY)
    .gid(NOBODY);
    (cmd, records)
}
