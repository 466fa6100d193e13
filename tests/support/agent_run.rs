//! What the tests that run a real agent under its profile (`landlock_codex`,
//! `landlock_opencode`, `landlock_gemini`) check once it has run the scripted model's commands
//! — read a secret beside the workspace, write the agent's own protected files, fix
//! `app.py` — whatever wire protocol the agent speaks.

use std::path::Path;

/// The task each agent is given.
pub const PROMPT: &str = "Fix the bug in app.py.";
/// The secret's text, which must reach the model in no request.
pub const SECRET: &str = "TOP SECRET\n";
/// `app.py` with its bug, as the test writes it.
pub const BUGGY: &str = "def add(a, b):\n    return a - b\n";
/// `app.py` once the scripted model's fix has landed.
pub const FIXED: &str = "def add(a, b):\n    return a + b\n";

/// The agent's turns among the requests the scripted server `seen` (method and path, body):
/// the JSON bodies `is_turn` keeps, checked to be the prompt and then one per command, each
/// carrying the tool outputs of every command before it (`tool_outputs`); the secret's text
/// is checked to be in no request at all. Returns the last turn's tool outputs.
pub fn turns(
    seen: &[(String, String)],
    is_turn: impl Fn(&serde_json::Value) -> bool,
    commands: usize,
    tool_outputs: impl Fn(&serde_json::Value) -> Vec<String>,
) -> Vec<String> {
    assert!(
        !seen.iter().any(|(_, b)| b.contains(SECRET.trim_end())),
        "{seen:?}"
    );
    let turns: Vec<serde_json::Value> = seen
        .iter()
        .map(|(_, b)| serde_json::from_str(b).unwrap_or_default())
        .filter(|r| is_turn(r))
        .collect();
    assert_eq!(turns.len(), commands + 1, "{seen:?}");
    assert!(turns[0].to_string().contains(PROMPT), "{}", turns[0]);
    for (n, req) in turns.iter().enumerate() {
        assert_eq!(tool_outputs(req).len(), n, "request {n}: {req}");
    }
    tool_outputs(&turns[commands])
}

/// The engine an agent's `bee exec` runs under: what it is asked for, how its refusals read
/// to the agent, and what bee says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The Landlock engine (natively): a refusal is `EACCES` (Landlock) or `EROFS` (a
    /// read-only mount).
    Landlock,
    /// The BPF LSM (in the VM matrix): a refusal is `EPERM`.
    BpfLsm,
}

impl Engine {
    /// The `--engine` value of `bee exec` and `bee mcp`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Landlock => "landlock",
            Engine::BpfLsm => "bpf-lsm",
        }
    }

    /// How this engine's refusal of a read reads: `EACCES` (Landlock), `EPERM` (the BPF LSM).
    pub fn read_refused(self) -> &'static str {
        match self {
            Engine::Landlock => "Permission denied",
            Engine::BpfLsm => "Operation not permitted",
        }
    }

    /// How this engine's refusal of a write may read: also `EROFS` under the Landlock engine
    /// (a read-only mount).
    fn write_refused(self) -> &'static [&'static str] {
        match self {
            Engine::Landlock => &["Read-only file system", "Permission denied"],
            Engine::BpfLsm => &["Operation not permitted"],
        }
    }
}

/// Checks that `outputs` (the last turn's) show the kernel's refusals under `engine`: the
/// secret's read by `cat` in the first (GNU's `cat: PATH: REASON`, or busybox's `cat: can't
/// open 'PATH': REASON` in the VM's guests), and a write to each of `protected` in the second.
pub fn refused_by(engine: Engine, outputs: &[String], secret: &Path, protected: &[&Path]) {
    let (secret, why) = (secret.display(), engine.read_refused());
    assert!(
        outputs[0].contains(&format!("cat: {secret}: {why}"))
            || outputs[0].contains(&format!("cat: can't open '{secret}': {why}")),
        "{}",
        outputs[0]
    );
    for path in protected {
        let said = |why: &str| format!("{}: {why}", path.display());
        assert!(
            engine
                .write_refused()
                .iter()
                .any(|why| outputs[1].contains(&said(why))),
            "{}: {}",
            path.display(),
            outputs[1]
        );
    }
}

/// [`refused_by`] under the Landlock engine.
pub fn refused(outputs: &[String], secret: &Path, protected: &[&Path]) {
    refused_by(Engine::Landlock, outputs, secret, protected);
}

/// Checks that the fix landed in `ws/app.py`, and that bee explained the refused read of
/// `secret` from the kernel's audit record on its standard error `err`.
pub fn fixed_and_explained(ws: &Path, secret: &Path, err: &str, outputs: &[String]) {
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).ok().as_deref(),
        Some(FIXED),
        "the fix lands: {outputs:?}"
    );
    assert!(
        err.contains(&format!(
            "bee: denied: open {} for read: no fs.read grant covers it",
            secret.display()
        )),
        "{err}"
    );
}

/// Writes `dir/NAME.toml`, a version 1 policy for the agent whose profile is `profile`
/// (its rules for the workspace `ws` and the home `home`, [`super::profile_as_version_1`]),
/// with the agent's `package` directory read and run where npm (or pip) put it, `env` (which
/// [`bee_exec`] starts the agent with), `bash`, `cat` and `sed` for the scripted model's
/// commands, the scripted server on loopback `port`, and `fs_extra` (lines of `[fs]`).
/// Returns its path.
pub fn policy(
    dir: &Path,
    profile: &str,
    (ws, home): (&Path, &Path),
    package: &Path,
    port: u16,
    fs_extra: &str,
) -> std::path::PathBuf {
    let package = package.display();
    let rest = format!(
        "[fs]\nread = [\"{package}/**\"]\nwrite = [\"./**\"]\n{fs_extra}\
         [exec]\nallow = [\"{package}/**\", \"/usr/bin/env\", \"/usr/bin/bash\", \
         \"/usr/bin/cat\", \"/usr/bin/sed\"]\n\
         [[net.allow]]\naddr = \"127.0.0.1\"\nports = {port}\nproto = \"tcp\"\n"
    );
    let name = profile.strip_prefix("agent-").unwrap_or(profile);
    let path = dir.join(format!("{name}.toml"));
    let text = super::profile_as_version_1(profile, ws, home, &rest);
    std::fs::write(&path, text).unwrap_or_else(|e| unreachable!("{e}"));
    path
}

/// `bee exec --engine landlock --policy POLICY -- /usr/bin/env` ([`bee_exec_under`]).
pub fn bee_exec(policy: &Path, ws: &Path, home: &Path) -> std::process::Command {
    bee_exec_under(Engine::Landlock, policy, ws, home)
}

/// `bee exec --engine ENGINE --policy POLICY -- /usr/bin/env` in the workspace `ws` with
/// `HOME` the home `home`, its standard input empty and its outputs captured; the caller
/// adds the agent's environment and command line.
pub fn bee_exec_under(
    engine: Engine,
    policy: &Path,
    ws: &Path,
    home: &Path,
) -> std::process::Command {
    bee_exec_with(engine, &[], policy, ws, home)
}

/// [`bee_exec_under`] with `options` of `bee exec`'s own before `--policy` (`--learn OUT`).
pub fn bee_exec_with(
    engine: Engine,
    options: &[&std::ffi::OsStr],
    policy: &Path,
    ws: &Path,
    home: &Path,
) -> std::process::Command {
    let mut command = std::process::Command::new(super::bee_exe());
    command
        .args(["exec", "--engine", engine.name()])
        .args(options)
        .arg("--policy")
        .arg(policy)
        .args(["--", "/usr/bin/env"])
        .current_dir(ws)
        .env("HOME", home)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

/// `bee exec --engine bpf-lsm --learn LEARNED --policy BASE -- /usr/bin/env` ([`bee_exec_with`])
/// for an agent's learn-mode test in the VM matrix: bee in its own process, not through the
/// matrix's service (`BEE_SOCKET` removed), which does not learn and whose ceiling grants no
/// host name.
pub fn bee_learn(learned: &Path, base: &Path, ws: &Path, home: &Path) -> std::process::Command {
    let mut command = bee_exec_with(
        Engine::BpfLsm,
        &["--learn".as_ref(), learned.as_os_str()],
        base,
        ws,
        home,
    );
    command.env_remove("BEE_SOCKET");
    command
}

/// [`ended_under`] the Landlock engine, which bee must say enforced it.
pub fn ended(
    child: std::process::Child,
    limit: std::time::Duration,
    seen: &super::scripted::Seen,
    request: &str,
) -> (String, String, Vec<(String, String)>) {
    let (out, err, seen) = ended_under(child, limit, seen, request);
    assert!(err.contains("bee: engine: landlock\n"), "{err}");
    (out, err, seen)
}

/// Waits for the agent's `bee exec` (at most `limit`, [`super::scripted::within`]) and
/// checks that it exited 0, and that every request the scripted server saw starts with
/// `request` (the agent's API). Returns bee's standard output and error, and those requests
/// (request line, body).
pub fn ended_under(
    child: std::process::Child,
    limit: std::time::Duration,
    seen: &super::scripted::Seen,
    request: &str,
) -> (String, String, Vec<(String, String)>) {
    let o = super::scripted::within(child, limit, seen);
    let (out, err) = (super::stdout(&o), super::stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(seen.iter().all(|(r, _)| r.starts_with(request)), "{seen:?}");
    (out, err, seen)
}

/// Checks what an agent with `bee mcp` as its tools leaves after the scripted read of the
/// secret and edit of `app.py`: the fix landed in `ws`, and bee's transcript under `records`
/// holds both calls and the secret's denial. `outputs` (what the agent sent its model) is
/// printed if the fix is missing.
pub fn fixed_through_bee_mcp(ws: &Path, records: &Path, outputs: &[String]) {
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).ok().as_deref(),
        Some(FIXED),
        "the fix lands: {outputs:?}"
    );
    let text = super::transcript_text(records);
    assert_eq!(text.matches("\"event\":\"tool_call\"").count(), 2, "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("\"event\":\"denial\"") && l.contains("secret.txt")),
        "{text}"
    );
}

/// Holds what learn mode wrote to `learned` (run from a base policy in `dir`, the workspace
/// `ws` and the home `home` its `./` and `~`) against the agent's `profile`: `bee policy diff
/// --json PROFILE LEARNED` must name something beyond the profile (the base's workspace grant
/// at least), and nothing that is not in `reviewed` — (capability, rule) as the diff names
/// them, with `dir` written `$DIR`, the agents' cache (`CARGO_TARGET_TMPDIR/agents`)
/// `$AGENTS`, a read of a directory above `dir` `$ABOVE` (where the target directory is,
/// which differs from machine to machine), a process's number in `/proc` and an unlinked
/// file's inode number `N` (`/proc/N/…`, `/tmp/#N`), and a rule that starts with the first of a pair of `renamed`
/// written as its second (names that change from run to run). Any read of the agents' cache
/// or below it is named `$AGENTS/**`: how far learn mode widens it, and whether the cache's
/// own listing stays a rule of its own, depends on which other agents' builds the cache holds
/// (in the VM matrix, those of the tests placed on the same kernel). And `bee validate` must
/// accept the learned policy as written. Returns the learned policy's text.
pub fn held_to_review(
    profile: &Path,
    learned: &Path,
    (dir, ws, home): (&Path, &Path, &Path),
    reviewed: &[(&str, &str)],
    renamed: &[(&str, &str)],
) -> String {
    let bee = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(super::bee_exe())
            .args(args)
            .current_dir(ws)
            .env("HOME", home)
            .output()
            .unwrap_or_else(|e| unreachable!("{e}"))
    };
    let diff = bee(&[
        "policy".as_ref(),
        "diff".as_ref(),
        "--json".as_ref(),
        profile.as_os_str(),
        learned.as_os_str(),
    ]);
    assert_eq!(diff.status.code(), Some(0), "{}", super::stderr(&diff));
    let diff: serde_json::Value = serde_json::from_slice(&diff.stdout)
        .unwrap_or_else(|e| unreachable!("{e}: {}", super::stderr(&diff)));
    let (agents, dir) = (
        format!("{}/agents", env!("CARGO_TARGET_TMPDIR")),
        dir.display().to_string(),
    );
    let named = |capability: &str, rule: &str| {
        let above =
            rule == "/" || (dir.starts_with(rule) && dir.as_bytes().get(rule.len()) == Some(&b'/'));
        if capability == "fs_read" && above {
            return "$ABOVE".to_owned();
        }
        let rule = rule.replace(&dir, "$DIR").replace(&agents, "$AGENTS");
        if capability == "fs_read" && (rule == "$AGENTS" || rule.starts_with("$AGENTS/")) {
            return "$AGENTS/**".to_owned();
        }
        if let Some((_, to)) = renamed.iter().find(|(from, _)| rule.starts_with(from)) {
            return (*to).to_owned();
        }
        if let Some(ino) = rule.strip_prefix("/tmp/#")
            && ino.bytes().all(|b| b.is_ascii_digit())
        {
            return "/tmp/#N".to_owned();
        }
        match rule.strip_prefix("/proc/").and_then(|r| r.split_once('/')) {
            Some((pid, rest)) if pid.bytes().all(|b| b.is_ascii_digit()) => {
                format!("/proc/N/{rest}")
            }
            _ => rule,
        }
    };
    let beyond: Vec<(String, String)> = diff["added"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            let capability = s(&a["capability"]);
            let rule = named(&capability, &s(&a["child"]["rule"]));
            (capability, rule)
        })
        .collect();
    let text = std::fs::read_to_string(learned).unwrap_or_default();
    // Some are expected (the base's workspace grant at least): none would mean no diff.
    assert!(!beyond.is_empty(), "{text}");
    let unreviewed: Vec<_> = beyond
        .iter()
        .filter(|(c, r)| !reviewed.contains(&(c.as_str(), r.as_str())))
        .collect();
    assert!(
        unreviewed.is_empty(),
        "learned beyond the profile, not reviewed: {unreviewed:?}\n{text}"
    );
    let valid = bee(&[
        "validate".as_ref(),
        "--policy".as_ref(),
        learned.as_os_str(),
    ]);
    assert_eq!(valid.status.code(), Some(0), "{}", super::stderr(&valid));
    text
}

/// Writes `dir/base.toml`, the base a learn-mode run starts from: the workspace written and
/// the scripted server on loopback `port`, nothing else. Returns its path.
pub fn learn_base(dir: &Path, port: u16) -> std::path::PathBuf {
    let base = dir.join("base.toml");
    let text = format!(
        "version = 3\n[fs]\nwrite = [\"./**\"]\n\
         [[net.allow]]\naddr = \"127.0.0.1\"\nports = {port}\nproto = \"tcp\"\n"
    );
    std::fs::write(&base, text).unwrap_or_else(|e| unreachable!("{e}"));
    base
}

/// The shipped profile `profile` (`agent-…`) as a version 3 policy for an agent's test in the
/// VM matrix's guests (its `~` the test's home, `./` the workspace), with the agent's
/// `package` read and run where it was installed, busybox (the guest's `sh` and `sed`, and
/// `/usr/bin/env`) and `bash` run, and the scripted server on loopback `port`. Writes it to
/// `dir` as `NAME.toml` (the profile's name without `agent-`) and returns its path.
pub fn profile_in_guest(
    dir: &Path,
    profile: &str,
    package: &Path,
    port: u16,
) -> std::path::PathBuf {
    let package = package.display();
    let text = format!(
        "version = 3\ninclude = [\"{profile}\"]\n\
         [fs]\nread = [\"{package}/**\", \"/bin/**\"]\nwrite = [\"./**\"]\n\
         [exec]\nallow = [\"{package}/**\", \"/bin/busybox\", \"/usr/bin/bash\"]\n\
         [[net.allow]]\naddr = \"127.0.0.1\"\nports = {port}\nproto = \"tcp\"\n"
    );
    let name = profile.strip_prefix("agent-").unwrap_or(profile);
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap_or_else(|e| unreachable!("{e}"));
    path
}

/// Where a learn-mode run of `agent` in the VM matrix starts: a scratch directory under the
/// test cache, not /tmp (learn mode would widen what the agent writes in /tmp and the test's
/// directory into one grant), and a file in /tmp the agent does not touch, as earlier tests
/// leave in the guests, so that learn mode names what the agent made there rather than
/// `/tmp/**`. Both are removed when dropped: keep them until the learned policy is checked.
pub fn learn_scratch(agent: &str) -> (tempfile::TempDir, tempfile::NamedTempFile) {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(tmp).unwrap_or_else(|e| unreachable!("{e}"));
    let dir = tempfile::tempdir_in(tmp).unwrap_or_else(|e| unreachable!("{e}"));
    let other = tempfile::Builder::new()
        .prefix(&format!("not-{agent}-"))
        .tempfile_in("/tmp")
        .unwrap_or_else(|e| unreachable!("{e}"));
    (dir, other)
}
