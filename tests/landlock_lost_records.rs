//! Denials lost in a flood, said under the Landlock engine natively: `bee exec`, a `bee run`
//! tool call and (with feature `mcp`) a call of an MCP server bee started each say that their
//! denials may be incomplete when the kernel dropped audit records while they ran. A binary
//! of its own: a flood drops records of any scope that is refused meanwhile, so these tests
//! run one at a time ([`FLOOD`]) and never beside the other binaries' tests (cargo runs test
//! binaries one after another). Needs root and Landlock ABI 7 with audit (and for the MCP
//! server, node); fails, never skips, without them (feature `landlock-tests`).

mod support;

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use serde_json::json;
use support::{code, replay_scenario, stderr, tool_call, tool_result, transcript_text};

/// Held by each test for its whole flood.
static FLOOD: Mutex<()> = Mutex::new(());

/// A scratch directory with a workspace `ws/` in it, a version 1 policy (beside `ws/`) that
/// reads and writes the whole workspace and runs `cat`, `dash` and `sleep`, and a `secret`
/// beside `ws/` that the policy does not grant: the directory, `ws/`, the policy's path and
/// the secret's.
fn writable_workspace() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    String,
    std::path::PathBuf,
) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap_or_else(|e| unreachable!("{e}"));
    let tree = format!("{:?}", format!("{}/**", ws.display()));
    let text = format!(
        "version = 1\n[fs]\nread = [\"/usr/lib/**\", \"/etc/ld.so.cache\", {tree}]\n\
         write = [\"/dev/null\", {tree}]\n[exec]\n\
         allow = [\"/usr/lib/x86_64-linux-gnu/**\", \"/usr/bin/cat\", \"/usr/bin/dash\", \"/usr/bin/sleep\"]\n"
    );
    let p = dir.path().join("p.toml");
    std::fs::write(&p, text).unwrap_or_else(|e| unreachable!("{e}"));
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "top secret\n").unwrap_or_else(|e| unreachable!("{e}"));
    (dir, ws, p.display().to_string(), secret)
}

/// The script of a flood: it says it began (`ws/started`), waits a second, runs eight loops
/// of sixty refused reads of `secret`, and says it ended (`ws/flooded`); then five more refused
/// reads, one a second, whose denials come through however many the flood lost once the
/// kernel's queue has drained and bee's reader has emptied its socket (one read 2 s after the
/// flood was once lost in a CI run of the same kind of flood, `landlock_reports`).
fn flood_script(secret: &std::path::Path) -> String {
    format!(
        ": > started; sleep 1; \
         for j in 1 2 3 4 5 6 7 8; do (i=0; while [ $i -lt 60 ]; do cat {0} 2>/dev/null; i=$((i+1)); done) & done; \
         wait; : > flooded; for k in 1 2 3 4 5; do sleep 1; cat {0} 2>/dev/null; done; true",
        secret.display()
    )
}

/// Waits for `bee` (spawned with piped output) to run a [`flood_script`] in `ws`, and stops
/// it with `SIGSTOP` from the script's start to its end: bee's audit reader cannot read, so
/// the flood fills its socket (a few records, `BEE_TEST_AUDIT_RECEIVE_BUFFER`, read only by
/// builds with `landlock-tests`) and the kernel drops records, however fast the machine is.
/// The sandboxed script, another process, runs on. Returns bee's output once it ends; fails
/// with what bee printed when a mark does not come within 120 s, or bee exits before.
fn stopped_through_the_flood(bee: std::process::Child, ws: &Path) -> std::process::Output {
    let pid = bee.id();
    reader_stopped_through_the_flood(bee, pid, ws)
}

/// As [`stopped_through_the_flood`], the process stopped being `reader`, the one whose audit
/// reader the flood is to overrun (a `bee serve` that `bee` asks, or `bee` itself).
fn reader_stopped_through_the_flood(
    mut bee: std::process::Child,
    reader: u32,
    ws: &Path,
) -> std::process::Output {
    let signal = |sig: &str| {
        std::process::Command::new("kill")
            .args([sig, &reader.to_string()])
            .status()
            .is_ok_and(|s| s.success())
    };
    let appear = |name: &str, bee: &mut std::process::Child| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !ws.join(name).exists() {
            let exited = bee.try_wait().ok().flatten().is_some();
            if exited || std::time::Instant::now() >= deadline {
                let _ = signal("-CONT");
                let _ = bee.kill();
                let mut err = String::new();
                if let Some(mut e) = bee.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                if let Some(mut e) = bee.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                unreachable!(
                    "no {name} in {}: bee {}:\n{err}",
                    ws.display(),
                    if exited { "exited" } else { "ran 120 s" }
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    appear("started", &mut bee);
    assert!(signal("-STOP"), "kill -STOP {reader} failed");
    appear("flooded", &mut bee);
    assert!(signal("-CONT"), "kill -CONT {reader} failed");
    bee.wait_with_output()
        .unwrap_or_else(|e| unreachable!("cannot wait for bee: {e}"))
}

/// Runs `bee ARGS` in `cwd` (also its `HOME`) with a receive buffer of a few records, and
/// stops it through the flood its command runs in `ws` ([`stopped_through_the_flood`]).
fn bee_through_the_flood(args: &[&str], cwd: &Path, ws: &Path) -> std::process::Output {
    let bee = std::process::Command::new(support::bee_exe())
        .args(args)
        .current_dir(cwd)
        .env("HOME", cwd)
        .env_remove("XDG_CONFIG_HOME")
        .env("BEE_TEST_AUDIT_RECEIVE_BUFFER", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| unreachable!("cannot run bee: {e}"));
    stopped_through_the_flood(bee, ws)
}

/// The output of call `id` in the transcript under `records`: a closure over its text.
fn outputs(records: &Path) -> impl Fn(&str) -> String + use<> {
    let text = transcript_text(records);
    move |id| {
        tool_result(&text, id)["output"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// A command that ran while the kernel dropped audit records says so after it: its denials
/// may be incomplete.
#[test]
fn a_command_that_ran_while_records_were_lost_says_its_denials_may_be_incomplete() {
    let _alone = FLOOD.lock().unwrap_or_else(PoisonError::into_inner);
    let (_dir, ws, p, secret) = writable_workspace();
    let script = flood_script(&secret);
    let o = bee_through_the_flood(
        &["exec", "--policy", &p, "--", "/usr/bin/dash", "-c", &script],
        &ws,
        &ws,
    );
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(err.contains("bee: denied: open "), "{err}");
    assert!(
        err.contains("bee: some denials may be missing: the kernel dropped "),
        "{err}"
    );
}

/// The same flood in a `bee run` tool call: the call's result, which the model reads and the
/// transcript keeps, carries the count of records lost while it ran.
#[test]
fn a_tool_call_that_ran_while_records_were_lost_says_its_denials_may_be_incomplete() {
    let _alone = FLOOD.lock().unwrap_or_else(PoisonError::into_inner);
    let (dir, ws, p, secret) = writable_workspace();
    let script = format!("{}; echo flooded", flood_script(&secret));
    // Between them a call that waits: a record the socket drops after the flood's call has
    // ended (its overflow is seen only when the reader next reads) is counted during the
    // call that runs then, which says so rightly; the quiet call comes after that.
    let calls = [
        tool_call("flood", "shell", &json!({"command": script})),
        tool_call("settle", "shell", &json!({"command": "sleep 2"})),
        tool_call("quiet", "shell", &json!({"command": "echo calm"})),
        json!({"text": "done"}).to_string(),
    ];
    replay_scenario(dir.path(), "ws", &p, &calls);
    let o = bee_through_the_flood(
        &[
            "run",
            "--scenario",
            "scenario.toml",
            "--provider",
            "provider.toml",
            "--records-dir",
            "records",
        ],
        dir.path(),
        &ws,
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let output = outputs(&dir.path().join("records"));
    let flood = output("flood");
    assert!(flood.contains("[stdout]\nflooded"), "{flood}");
    assert!(
        flood.contains("\n\nnote: some denials may be missing: the kernel dropped "),
        "{flood}"
    );
    // The count is the call's own: a later call, which was refused nothing, says nothing.
    let quiet = output("quiet");
    assert!(!quiet.contains("some denials may be missing"), "{quiet}");
}

/// The same flood by an MCP server that bee started in a scope of its own (the test server
/// `tests/mcp/bad_server.js`, mode `flood`): the result of the call during which the server
/// was refused while records were lost says that its denials may be incomplete. The server's
/// scope lives through the session, so a loss the reader learns of only after that call (the
/// kernel still delivering the flood's last records to a full socket) is told with its next
/// call, which says so rightly; after a wait and that call, a later one says nothing.
#[cfg(feature = "mcp")]
#[test]
fn an_mcp_server_call_that_ran_while_records_were_lost_says_its_denials_may_be_incomplete() {
    let _alone = FLOOD.lock().unwrap_or_else(PoisonError::into_inner);
    let server = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/bad_server.js");
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let root = dir.path();
    let ws = root.join("ws");
    std::fs::create_dir(&ws).unwrap_or_else(|e| unreachable!("{e}"));
    let secret = root.join("secret");
    std::fs::write(&secret, "top secret\n").unwrap_or_else(|e| unreachable!("{e}"));
    // The session reads the whole scratch directory and the server's script; the server,
    // only its script.
    let policy = |read: &[&str]| {
        format!(
            "version = 1\n[fs]\nread = [\"/usr/lib/**\", \"/etc/ld.so.cache\", \"/etc/ssl/**\", {}]\n\
             write = [\"/dev/null\", {:?}]\n[exec]\nallow = [\"/usr/lib/x86_64-linux-gnu/**\", \
             \"/usr/bin/node\", \"/usr/bin/dash\", \"/usr/bin/sleep\"]\n",
            json!(read).to_string().trim_matches(['[', ']']),
            format!("{}/**", ws.display())
        )
    };
    let write = |name: &str, text: &str| {
        std::fs::write(root.join(name), text).unwrap_or_else(|e| unreachable!("{e}"));
    };
    let scratch = format!("{}/**", root.display());
    write("session.toml", &policy(&[&scratch, server]));
    write("server.toml", &policy(&[server]));
    write(
        "bee.toml",
        &format!(
            "[mcp.servers.bad]\ncommand = \"/usr/bin/node\"\nargs = {}\npolicy = \"server.toml\"\n",
            json!([server, "flood"])
        ),
    );
    let calls = [
        tool_call("flood", "bad__echo", &json!({"path": secret, "marks": ws})),
        tool_call("settle", "shell", &json!({"command": "sleep 2"})),
        tool_call("settled", "bad__echo", &json!({"text": "settled"})),
        tool_call("quiet", "bad__echo", &json!({"text": "calm"})),
        json!({"text": "done"}).to_string(),
    ];
    replay_scenario(root, "ws", "session.toml", &calls);
    let o = bee_through_the_flood(
        &[
            "run",
            "--config",
            "bee.toml",
            "--scenario",
            "scenario.toml",
            "--provider",
            "provider.toml",
            "--records-dir",
            "records",
        ],
        root,
        &ws,
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    mcp_calls_say_what_was_lost(&root.join("records"), &secret);
}

/// The same MCP server flood by an ordinary user's server, in a scope of a `bee serve` (the
/// Landlock engine's, with a receive buffer of a few records): the service is stopped through
/// the flood, sends `lost` frames once it reads again, and the client says so in that call's
/// result.
#[cfg(feature = "mcp")]
#[test]
fn an_mcp_server_call_through_bee_serve_that_ran_while_records_were_lost_says_so() {
    use support::serve::{
        ceiling_with_bee, episode_as_nobody, ok, policy, policy_text, start_granting_with_env, ws,
    };

    let _alone = FLOOD.lock().unwrap_or_else(PoisonError::into_inner);
    let service = start_granting_with_env("", &[("BEE_TEST_AUDIT_RECEIVE_BUFFER", "1")]);
    ceiling_with_bee(&service);
    let ws = ws(&service);
    let server = ws.join("bad_server.js");
    ok(std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/bad_server.js"),
        &server,
    ));
    let tree = format!("{}/**", ws.display());
    let session = policy(&service, "session.toml", &tree, &tree);
    // The server reads its script, not the secret the session may read, and writes its
    // marks in `pub/`.
    let marks = ws.join("pub");
    let server_policy = ws.join("server.toml");
    ok(std::fs::write(
        &server_policy,
        policy_text(
            &server.display().to_string(),
            &format!("{}/**", marks.display()),
        ),
    ));
    // Made by root; bee, run as nobody, keeps its state there too.
    ok(std::fs::create_dir_all(ws.join(".bee")));
    ok(std::fs::set_permissions(
        ws.join(".bee"),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    ));
    ok(std::fs::write(
        ws.join(".bee/config.toml"),
        format!(
            "[mcp.servers.bad]\ncommand = \"/usr/bin/node\"\nargs = [{:?}, \"flood\"]\npolicy = {:?}\n",
            server.display().to_string(),
            server_policy.display().to_string()
        ),
    ));
    let secret = ws.join("secret");
    let calls = [
        tool_call(
            "flood",
            "bad__echo",
            &json!({"path": secret, "marks": marks}),
        ),
        tool_call("settle", "shell", &json!({"command": "sleep 2"})),
        tool_call("settled", "bad__echo", &json!({"text": "settled"})),
        tool_call("quiet", "bad__echo", &json!({"text": "calm"})),
        json!({"text": "done"}).to_string(),
    ];
    let (mut bee, records) = episode_as_nobody(&service, &session, &calls);
    let bee = bee
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| unreachable!("cannot run bee: {e}"));
    let reader = service
        .pid()
        .unwrap_or_else(|| unreachable!("the service is not running"));
    let o = reader_stopped_through_the_flood(bee, reader, &marks);
    assert_eq!(code(&o), 0, "{}{}", stderr(&o), service.log());
    mcp_calls_say_what_was_lost(&records, &secret);
}

/// Checks the MCP flood's calls in the transcript under `records`: the flood's result names
/// the refused read of `secret` and says that records were lost, which its `lost_records`
/// counts; the quiet call, after a wait and a call that takes any late count, says nothing.
#[cfg(feature = "mcp")]
fn mcp_calls_say_what_was_lost(records: &Path, secret: &Path) {
    let output = outputs(records);
    let flood = output("flood");
    assert!(flood.starts_with("flooded"), "{flood}");
    assert!(
        flood.contains(&format!("open {} for read", secret.display())),
        "{flood}"
    );
    assert!(
        flood.contains("\n\nnote: some denials may be missing: the kernel dropped "),
        "{flood}"
    );
    let result = tool_result(&transcript_text(records), "flood");
    assert!(
        result["lost_records"].as_u64().is_some_and(|n| n > 0),
        "{result}"
    );
    let quiet = output("quiet");
    assert!(quiet.starts_with("echo: "), "{quiet}");
    assert!(!quiet.contains("some denials may be missing"), "{quiet}");
}
