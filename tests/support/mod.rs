//! What the integration tests share: running the built `bee` and reading what it printed; and,
//! for the command-line kernel tests (`kernel_cli`, `kernel_caps`), a workspace with a secret
//! beside it and a policy, and the `bee exec` read of that secret the kernel must deny; a
//! scripted model server, npm and PyPI installs and the checks of an agent's run for the tests that run
//! real agents (`scripted`, `npm`, `pip`, `agent_run`, `aider`, `claude`, `codex`, `gemini`, `opencode`).

#![allow(
    dead_code,
    reason = "each test crate includes this module and uses only some of it"
)]

pub mod agent_run;
pub mod aider;
pub mod claude;
pub mod codex;
pub mod gemini;
pub mod mcp_client;
pub mod npm;
pub mod opencode;
pub mod pin;
pub mod pip;
pub mod review;
pub mod scan;
pub mod scripted;
pub mod serve;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The `.toml` files in `dir` of the repository (`policies`), sorted.
pub fn repo_tomls(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| unreachable!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// The built `bee` executable.
pub fn bee_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bee"))
}

/// Runs `bee ARGS` in the package's root directory and waits for it.
pub fn bee(args: &[&str]) -> Output {
    match Command::new(bee_exe())
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
    {
        Ok(o) => o,
        Err(e) => unreachable!("cannot run bee: {e}"),
    }
}

/// Runs `bee ARGS` in `dir`, which is also its `HOME`, with `XDG_CONFIG_HOME` unset: no user
/// configuration of the machine running the tests reaches it.
pub fn bee_in(dir: &Path, args: &[&str]) -> Output {
    match Command::new(bee_exe())
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_CONFIG_HOME")
        .output()
    {
        Ok(o) => o,
        Err(e) => unreachable!("cannot run bee: {e}"),
    }
}

/// The exit status of `o`, -1 when a signal ended it.
pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What `o` printed on stdout, as text.
pub fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

/// What `o` printed on stderr, as text.
pub fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

/// A fresh directory with a workspace, a secret outside it, and a policy that grants the
/// workspace (read and write) and busybox, nothing else. Removed on drop.
pub struct Fixture {
    _dir: tempfile::TempDir,
    /// The directory holding the rest.
    pub root: PathBuf,
    /// `root/work`, holding `notes.txt`.
    pub workspace: PathBuf,
    /// `root/secret.txt`, outside the workspace: no grant covers it.
    pub secret: PathBuf,
    /// `root/policy.toml`.
    pub policy: PathBuf,
}

#[expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a fixture that cannot be set up or a record that is not there fails the test"
)]
impl Fixture {
    /// Writes the files into a new temporary directory.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_owned();
        let workspace = root.join("work");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(workspace.join("notes.txt"), "hello from the workspace\n").unwrap();
        let secret = root.join("secret.txt");
        std::fs::write(&secret, "s3cret\n").unwrap();
        let policy = root.join("policy.toml");
        std::fs::write(
            &policy,
            format!(
                "version = 1\n[fs]\nread = [\"/bin/**\"]\nwrite = [\"{ws}/**\", \"/dev/null\"]\n\
                 [exec]\nallow = [\"/bin/busybox\"]\n",
                ws = workspace.display()
            ),
        )
        .unwrap();
        Fixture {
            _dir: dir,
            root,
            workspace,
            secret,
            policy,
        }
    }

    /// `bee exec` arguments that `cat` the secret under the policy, appending every audit
    /// record to `audit`.
    pub fn read_secret_args(&self, audit: &Path) -> Vec<String> {
        [
            "exec",
            "--policy",
            &self.policy.display().to_string(),
            "--audit",
            &audit.display().to_string(),
            "--",
            "/bin/cat",
            &self.secret.display().to_string(),
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// Asserts that `o`, bee run with [`Fixture::read_secret_args`], ended with cat's own
    /// failure and bee's denial line, and that the first record in `audit` is the `file_open`
    /// denial of the secret. Returns that record.
    pub fn assert_secret_read_denied(&self, o: &Output, audit: &Path) -> serde_json::Value {
        assert_eq!(code(o), 1, "cat's own status: {}", text(&o.stderr));
        let secret = self.secret.display().to_string();
        let err = text(&o.stderr);
        assert!(
            err.contains(&format!(
                "bee: denied: open {secret} for read: no fs.read grant covers it"
            )),
            "{err}"
        );
        let records = std::fs::read_to_string(audit).unwrap();
        let record: serde_json::Value =
            serde_json::from_str(records.lines().next().expect("one record")).unwrap();
        assert_eq!(record["hook"], "file_open");
        assert_eq!(record["verdict"], "deny");
        assert_eq!(record["path"], secret.as_str());
        record
    }
}

/// Output captured in memory, shareable with the code that writes it (`bee run`'s context).
#[derive(Clone, Default)]
pub struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(b);
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    /// What was written, as text.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    }
}

/// The processes whose command line holds `needle`: `pid: command line` each.
pub fn processes_with(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in entries.flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
            }
        }
    }
    found
}

/// This host's cgroup2 mount point (`/sys/fs/cgroup/unified` on a hybrid host), as bee finds
/// it ([`bee_userspace::support::parse_cgroup2_mount`]).
pub fn cgroup2_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    bee_userspace::support::parse_cgroup2_mount(&mountinfo)
}

/// The cgroup v2 directory `pid` is in, on this host's cgroup2 mount
/// ([`bee_userspace::cgroup::process_cgroup_dir`]).
pub fn cgroup_of(pid: &str) -> Option<PathBuf> {
    let pid = pid.parse().ok()?;
    bee_userspace::cgroup::process_cgroup_dir(Some(pid), &cgroup2_mount()?).ok()
}

/// The review example (`examples/review/`), compiled in so that it can be laid out in a guest
/// that has no copy of the repository: its files, and its workspace with the crate's history
/// as `.git` (what `examples/review/setup.sh` does).
const REVIEW_EXAMPLE: [(&str, &[u8]); 13] = [
    (
        "scenario.toml",
        include_bytes!("../../examples/review/scenario.toml"),
    ),
    (
        "policy.toml",
        include_bytes!("../../examples/review/policy.toml"),
    ),
    (
        "provider.toml",
        include_bytes!("../../examples/review/provider.toml"),
    ),
    (
        "recording.jsonl",
        include_bytes!("../../examples/review/recording.jsonl"),
    ),
    (
        "workspace/Cargo.toml",
        include_bytes!("../../examples/review/crate/Cargo.toml"),
    ),
    (
        "workspace/src/lib.rs",
        include_bytes!("../../examples/review/crate/src/lib.rs"),
    ),
    (
        "workspace/src/config.rs",
        include_bytes!("../../examples/review/crate/src/config.rs"),
    ),
    (
        "workspace/src/hooks.rs",
        include_bytes!("../../examples/review/crate/src/hooks.rs"),
    ),
    (
        "workspace/.git/HEAD",
        include_bytes!("../../examples/review/history/HEAD"),
    ),
    (
        "workspace/.git/config",
        include_bytes!("../../examples/review/history/config"),
    ),
    (
        "workspace/.git/packed-refs",
        include_bytes!("../../examples/review/history/packed-refs"),
    ),
    (
        "workspace/.git/objects/pack/pack-449e60833305df9afe00b8cf99202b02b4f8fa27.idx",
        include_bytes!(
            "../../examples/review/history/objects/pack/pack-449e60833305df9afe00b8cf99202b02b4f8fa27.idx"
        ),
    ),
    (
        "workspace/.git/objects/pack/pack-449e60833305df9afe00b8cf99202b02b4f8fa27.pack",
        include_bytes!(
            "../../examples/review/history/objects/pack/pack-449e60833305df9afe00b8cf99202b02b4f8fa27.pack"
        ),
    ),
];

/// Lays the review example out in `dir` (`dir/scenario.toml`, `dir/workspace/.git`, …).
#[expect(
    clippy::unwrap_used,
    reason = "a fixture that cannot be written fails the test"
)]
pub fn review_example(dir: &Path) {
    for (name, bytes) in REVIEW_EXAMPLE {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    for refs in ["refs/heads", "refs/tags"] {
        std::fs::create_dir_all(dir.join("workspace/.git").join(refs)).unwrap();
    }
}

/// Writes a replayed one-episode run into `dir`: `rec.jsonl` (the model answering `turns` in
/// order, one JSON object each), `provider.toml` replaying it, and `scenario.toml` (episode
/// `s`, its workspace `workspace` relative to `dir`, used in place, confined by `policy`).
#[expect(
    clippy::unwrap_used,
    reason = "a directory that cannot be written fails the test"
)]
pub fn replay_scenario(dir: &Path, workspace: &str, policy: &str, turns: &[String]) {
    let file = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    file("rec.jsonl", &turns.join("\n"));
    file(
        "provider.toml",
        "kind = \"replay\"\nfile = \"rec.jsonl\"\nmodel = \"m\"\n",
    );
    file(
        "scenario.toml",
        &format!(
            "name = \"s\"\nprompt = \"p\"\nworkspace = {workspace:?}\n\
             workspace_mode = \"in-place\"\npolicy = {policy:?}\n"
        ),
    );
}

/// One turn of a replayed model: a single call of tool `name` with `arguments`, id `id`.
pub fn tool_call(id: &str, name: &str, arguments: &serde_json::Value) -> String {
    serde_json::json!({"tool_calls": [{"id": id, "name": name, "arguments": arguments}]})
        .to_string()
}

/// The `tool_result` event of call `id` in a transcript's `text`; the test fails when there
/// is none (a call that never ran must not pass a check that it did not complete).
pub fn tool_result(text: &str, id: &str) -> serde_json::Value {
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "tool_result" && e["call_id"] == id)
        .unwrap_or_else(|| unreachable!("no result of call {id} in the transcript:\n{text}"))
}

/// The Semgrep release the scan tests run (`tests/scanners/semgrep.version`, which `cargo xtask
/// test` also reads to install it for the VM matrix): the release whose report
/// `tests/fixtures/findings` recorded.
pub fn semgrep_version() -> &'static str {
    include_str!("../scanners/semgrep.version").trim()
}

/// The Semgrep executable, made canonical: the one `BEE_SEMGREP` names when it is set; else
/// [`semgrep_version`] in a virtual environment under the test cache,
/// `CARGO_TARGET_TMPDIR/semgrep-VERSION/bin/semgrep`, made with Debian's CPython and installed
/// from PyPI on first use ([`pip::install`]). In the VM matrix `cargo xtask test` installs the
/// same on the host and copies it, its interpreter and the interpreter's standard library into
/// the guests at the same paths.
pub fn semgrep_exe() -> PathBuf {
    let semgrep = match std::env::var_os("BEE_SEMGREP") {
        Some(named) => PathBuf::from(named),
        None => {
            let venv = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("semgrep-{}", semgrep_version()));
            let exe = venv.join("bin/semgrep");
            pip::install(&venv, &format!("semgrep=={}", semgrep_version()), &[&exe]);
            exe
        }
    };
    std::fs::canonicalize(&semgrep)
        .unwrap_or_else(|e| unreachable!("Semgrep {}: {e}", semgrep.display()))
}

/// Copies the directory tree `from` to `to` (files and directories only).
#[expect(
    clippy::unwrap_used,
    reason = "a tree that cannot be copied fails the test"
)]
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dst = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dst);
        } else {
            std::fs::copy(entry.path(), dst).unwrap();
        }
    }
}

/// The text of the one transcript under `records` (the first `*.jsonl` of a run directory).
#[expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "records that are not there fail the test"
)]
pub fn transcript_text(records: &Path) -> String {
    for run in std::fs::read_dir(records).unwrap() {
        let run = run.unwrap().path();
        if !run.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&run).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "jsonl") {
                return std::fs::read_to_string(&f).unwrap();
            }
        }
    }
    panic!("no transcript under {}", records.display());
}

/// The events of the one transcript under `records` ([`transcript_text`]).
#[expect(clippy::unwrap_used, reason = "a line that is not JSON fails the test")]
pub fn transcript_events(records: &Path) -> Vec<serde_json::Value> {
    transcript_text(records)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Asserts what the review example's tools answered (call ids `r1`…`r6` of its recording):
/// the structural matches, the history through the rename, the blamed commit, the computed
/// severity; and that the search outside the workspace (`r5`) did not complete.
#[expect(clippy::expect_used, reason = "a missing result fails the test")]
pub fn assert_review_results(events: &[serde_json::Value]) {
    let result = |id: &str| -> (String, String) {
        let e = events
            .iter()
            .find(|e| e["event"] == "tool_result" && e["call_id"] == id)
            .expect("a result for every call");
        (
            e["state"].as_str().unwrap_or_default().to_owned(),
            e["output"].as_str().unwrap_or_default().to_owned(),
        )
    };
    let expect = [
        (
            "r1",
            "src/hooks.rs:8:5: Command::new(\"sh\").arg(\"-c\").arg(format!(\"hooks/{name}\"))",
        ),
        ("r1", "$CMD = format!(\"hooks/{name}\")"),
        (
            "r2",
            "2 match(es) of `$X.unwrap()` (Rust) in 1 of 3 file(s) searched",
        ),
        ("r3", "renamed src/hook.rs → src/hooks.rs"),
        (
            "r3",
            "a41923f7e0f805cd9eaa763d4f7aac15b4e01f91 2026-01-12 10:00:00 +0000 Rin Okabe",
        ),
        (
            "r4",
            "last changed by a41923f7e0f805cd9eaa763d4f7aac15b4e01f91",
        ),
        ("r4", "there: src/hook.rs:8"),
        ("r6", "CVSS 3.1 base score 9.8, severity critical"),
    ];
    for (id, needle) in expect {
        let (state, output) = result(id);
        assert_eq!(state, "completed", "{id}: {output}");
        assert!(output.contains(needle), "{id}: {needle}\n{output}");
    }
    let (state, output) = result("r5");
    assert_ne!(state, "completed", "r5: {output}");
}

/// Waits (up to `limit`) for a process driven through a pseudo-terminal to exit and returns its
/// exit code (128 + the signal for a signalled one). Dropping an expectrl session sends SIGHUP
/// and SIGKILL to a live process: a test that ends on the goodbye line alone would cut a
/// `bee repl` short in its teardown and leave its pins behind for the next test to meet.
#[expect(clippy::panic, reason = "a process that does not exit fails the test")]
pub fn pty_exit_code(process: &expectrl::process::unix::UnixProcess, limit: Duration) -> i32 {
    use expectrl::process::Healthcheck;
    use expectrl::process::unix::WaitStatus;
    let deadline = Instant::now() + limit;
    loop {
        match process.get_status() {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            other => panic!("the process did not exit within {limit:?}: {other:?}"),
        }
    }
}

/// A shipped agent profile as the Landlock engine can enforce it: `version = 3`, `include =
/// [fragment]` and `rest` (more tables of rules), compiled for the workspace `base` and the
/// home `home`, and written out as a version 1 policy. Landlock cannot keep a path matched by
/// name at any depth read-only inside a writable tree, and versions 2 and 3 protect such paths
/// (`**/.git`…), so the written policy keeps, of the protected paths, the fragment's own that
/// name one file or tree (those at the workspace root and in the home).
#[expect(
    clippy::unwrap_used,
    reason = "a profile that does not compile fails the test"
)]
pub fn profile_as_version_1(fragment: &str, base: &Path, home: &Path, rest: &str) -> String {
    use bee_core::compile::{CompileOptions, compile_str};
    use bee_core::glob::PathPattern;
    let options = CompileOptions {
        base: base.to_path_buf(),
        home: Some(home.to_path_buf()),
    };
    let text = format!("version = 3\ninclude = [\"{fragment}\"]\n{rest}");
    let c = compile_str("p.toml", &text, &options).unwrap().policy;
    let list = |items: Vec<String>| {
        items
            .iter()
            .map(|r| format!("{r:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let patterns = |rules: &[bee_core::compiled::PathRule]| {
        list(rules.iter().map(|r| r.pattern.to_string()).collect())
    };
    let own = format!("{fragment}:");
    let protect: Vec<String> =
        c.fs.protect
            .iter()
            .filter(|r| r.origin.key.starts_with(&own) || r.origin.key.starts_with("fs.protect"))
            .filter(|r| {
                matches!(
                    r.pattern,
                    PathPattern::Exact { .. } | PathPattern::Subtree { .. }
                )
            })
            .map(|r| r.pattern.to_string())
            .collect();
    let mut out = format!(
        "version = 1\n[fs]\nread = [{}]\nwrite = [{}]\nprotect = [{}]\n[exec]\nallow = [{}]\n",
        patterns(&c.fs.read),
        patterns(&c.fs.write),
        list(protect),
        list(c.exec.iter().map(|r| r.pattern.to_string()).collect()),
    );
    let ports = |p: &bee_core::net::PortRange| format!("\"{}-{}\"", p.first, p.last);
    for h in &c.net.hosts {
        let host = h.host.to_string();
        let ports = ports(&h.ports);
        out.push_str(&format!(
            "[[net.allow]]\nhost = {host:?}\nports = {ports}\nproto = \"tcp\"\n"
        ));
    }
    for a in &c.net.allow {
        let net = serde_json::to_value(a.net).unwrap();
        let ports = ports(&a.ports);
        out.push_str(&format!(
            "[[net.allow]]\naddr = {net}\nports = {ports}\nproto = \"tcp\"\n"
        ));
    }
    out
}

/// A workspace `ws/` (empty), a secret beside it granted nowhere (`secret.txt`, holding
/// `top secret`), a version 1 policy (`policy.toml`) that reads and writes the workspace only
/// and runs the loader, libraries and the given programs, and a records directory
/// (`records/`, not made), in one temporary directory.
pub struct Confined {
    _dir: tempfile::TempDir,
    /// The workspace.
    pub ws: PathBuf,
    /// The secret.
    pub secret: PathBuf,
    /// The policy.
    pub policy: PathBuf,
    /// The records directory.
    pub records: PathBuf,
}

impl Confined {
    /// Lays it out, the policy running `programs` (absolute paths).
    #[expect(
        clippy::unwrap_used,
        reason = "a scratch directory that cannot be made fails the test"
    )]
    pub fn new(programs: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, "top secret\n").unwrap();
        let tree = format!("{}/**", ws.display());
        let mut exec = vec!["\"/usr/lib/x86_64-linux-gnu/**\"".to_owned()];
        exec.extend(programs.iter().map(|p| format!("{p:?}")));
        let policy = dir.path().join("policy.toml");
        std::fs::write(
            &policy,
            format!(
                "version = 1\n[fs]\nread = [\"/usr/lib/**\", \"/etc/ld.so.cache\", {tree:?}]\n\
                 write = [\"/dev/null\", {tree:?}]\n[exec]\nallow = [{}]\n",
                exec.join(", ")
            ),
        )
        .unwrap();
        Self {
            records: dir.path().join("records"),
            _dir: dir,
            ws,
            secret,
            policy,
        }
    }
}
