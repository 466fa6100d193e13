//! `bee serve` under the BPF LSM, in the VM matrix: an unprivileged client (uid 65534) whose
//! scope asks the service for a narrower one (nested scopes), is refused a wider one with the
//! prover's counterexample, cannot reach the socket without a `net.unix` grant, and — running
//! as root through the service, with no capability — cannot leave its scope, signal or trace
//! the service, or read a secret; and a service killed with live scopes leaves their
//! processes confined until the next service removes them.
//!
//! Built only with `--features kernel-tests` and run in the VM matrix
//! (`cargo xtask vm test -p bee --test kernel_serve --bin target/debug/bee`).
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions fail the test the same way"
)]

mod support;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bee::serve::ceiling::EVERYTHING;
use support::serve::{Service, pids_running};
use support::{bee_exe, code, text};

const NOBODY: u32 = 65534;

/// A version 1 policy: reads and runs everything but `deny` (none when empty), writes
/// `write` (and /dev/null), and connects to `unix` (a socket path) when given.
fn policy(write: &str, deny: &str, unix: Option<&Path>) -> String {
    let deny = if deny.is_empty() {
        String::new()
    } else {
        format!("{deny:?}")
    };
    let unix = unix.map_or_else(String::new, |p| {
        format!("unix = [{:?}]\n", p.display().to_string())
    });
    format!(
        "version = 1\n[fs]\nread = [\"/**\"]\nwrite = [{write:?}, \"/dev/null\"]\ndeny = [{deny}]\n\
         [exec]\nallow = [\"/**\"]\n[net]\n{unix}"
    )
}

/// The service, with a ceiling that reads and runs everything, writes `<dir>/ws/**` and
/// connects to the service's socket; `ws/` (mode 777) and `secret.txt` beside it.
fn start() -> Service {
    Service::start(
        "bpf-lsm",
        |dir| {
            let ws = dir.join("ws");
            std::fs::create_dir_all(ws.join("inner")).unwrap();
            for d in [&ws, &ws.join("inner")] {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
            }
            std::fs::write(dir.join("secret.txt"), "s3cret\n").unwrap();
        },
        |dir| {
            policy(
                &format!("{}/ws/**", dir.display()),
                "",
                Some(&dir.join("bee.sock")),
            )
        },
    )
}

fn ws(service: &Service) -> PathBuf {
    service.dir.path().join("ws")
}

fn write_policy(service: &Service, name: &str, text: &str) -> PathBuf {
    let path = ws(service).join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `bee exec --policy P -- /bin/busybox sh -c SCRIPT` as `uid`, through the service.
fn exec_as(service: &Service, uid: u32, p: &Path, script: &str) -> Output {
    exec_learning_as(service, uid, p, None, script)
}

/// [`exec_as`], in learn mode when `learn` names the output (`--learn OUT`).
fn exec_learning_as(
    service: &Service,
    uid: u32,
    p: &Path,
    learn: Option<&Path>,
    script: &str,
) -> Output {
    let mut cmd = Command::new(bee_exe());
    cmd.args(["exec", "--service", "always"]);
    if let Some(out) = learn {
        cmd.arg("--learn").arg(out);
    }
    cmd.arg("--policy")
        .arg(p)
        .args(["--", "/bin/busybox", "sh", "-c", script])
        .current_dir(ws(service))
        .env("BEE_SOCKET", service.socket())
        .env("HOME", ws(service))
        .uid(uid)
        .gid(uid)
        .output()
        .unwrap()
}

#[test]
fn a_scope_asks_the_service_for_a_narrower_scope_and_is_refused_a_wider_one() {
    let service = start();
    let dir = service.dir.path();
    let secret = dir.join("secret.txt");
    let ws_tree = format!("{}/**", ws(&service).display());
    let outer = write_policy(
        &service,
        "outer.toml",
        &policy(
            &ws_tree,
            &secret.display().to_string(),
            Some(&service.socket()),
        ),
    );
    let inner = write_policy(
        &service,
        "inner.toml",
        &policy(
            &format!("{}/inner/**", ws(&service).display()),
            &secret.display().to_string(),
            None,
        ),
    );
    // Wider than the outer scope (it writes all of `dir`), yet within the ceiling's reads.
    let wider = write_policy(
        &service,
        "wider.toml",
        &policy(&format!("{}/**", dir.display()), "", None),
    );
    let script = format!(
        "{bee} exec --policy {inner} -- /bin/busybox sh -c 'echo in > inner/made; echo out > made-by-inner'; echo inner=$?; \
         {bee} exec --policy {wider} -- /bin/busybox touch {dir}/wide; echo wider=$?",
        bee = bee_exe().display(),
        inner = inner.display(),
        wider = wider.display(),
        dir = dir.display(),
    );
    let o = exec_as(&service, NOBODY, &outer, &script);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(code(&o), 0, "{out}{err}{}", service.log());
    // The inner scope wrote where it may, and the kernel refused the rest of the outer's.
    assert!(ws(&service).join("inner/made").is_file(), "{out}{err}");
    assert!(!ws(&service).join("made-by-inner").exists(), "{out}{err}");
    assert!(
        out.contains("inner=1") || out.contains("inner=2"),
        "{out}{err}"
    );
    // The wider one was refused by the proof against the outer scope's policy, not run.
    assert!(out.contains("wider=65"), "{out}{err}");
    assert!(err.contains("the policy of the scope"), "{err}");
    assert!(!dir.join("wide").exists());
    assert_eq!(service.scopes_left_after_hangup(), 0, "{}", service.log());
}

#[test]
fn a_scope_without_the_socket_grant_cannot_reach_the_service() {
    let service = start();
    let ws_tree = format!("{}/**", ws(&service).display());
    let no_socket = write_policy(&service, "closed.toml", &policy(&ws_tree, "", None));
    let inner = write_policy(&service, "inner.toml", &policy(&ws_tree, "", None));
    let script = format!(
        "{} exec --policy {} -- /bin/busybox true; echo nested=$?",
        bee_exe().display(),
        inner.display()
    );
    let o = exec_as(&service, NOBODY, &no_socket, &script);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(code(&o), 0, "{out}{err}");
    // The kernel refused the connect (77: the socket may not be used), and said so.
    assert!(out.contains("nested=77"), "{out}{err}");
    assert!(
        err.contains(&format!(
            "bee: denied: connect unix {}",
            service.socket().display()
        )) || err.contains("denied"),
        "{err}"
    );
}

#[test]
fn a_root_client_with_no_capability_cannot_leave_its_scope_or_touch_the_service() {
    let service = start();
    let dir = service.dir.path();
    let secret = dir.join("secret.txt");
    let ws_tree = format!("{}/**", ws(&service).display());
    let p = write_policy(
        &service,
        "p.toml",
        &policy(&ws_tree, &secret.display().to_string(), None),
    );
    let pid = service.pid().unwrap();
    let script = format!(
        "cat {secret} && echo READ; \
         echo $$ > /sys/fs/cgroup/cgroup.procs && echo LEFT; \
         kill -STOP {pid} && echo STOPPED; \
         cat /proc/{pid}/environ > /dev/null && echo TRACED; \
         echo done",
        secret = secret.display()
    );
    // Root asks through the service: the command runs as uid 0 with no capability.
    let o = exec_as(&service, 0, &p, &script);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(out.contains("done"), "{out}{err}");
    for escaped in ["READ", "LEFT", "STOPPED", "TRACED"] {
        assert!(!out.contains(escaped), "{escaped}: {out}{err}");
    }
    assert!(
        err.contains(&format!("bee: denied: open {} for read", secret.display())),
        "{err}"
    );
    // The service still serves.
    let o = exec_as(&service, NOBODY, &p, "echo alive");
    assert_eq!(text(&o.stdout), "alive\n", "{}", text(&o.stderr));
}

/// `SIGKILL` of the service with a live scope: the process the command left behind (in a
/// session of its own, so the launch child's parent-death signal does not reach it) runs
/// on, still confined by the pinned programs — it cannot read the secret or leave its
/// cgroup — and the next service finds the scope listed, kills what runs in it and
/// removes it.
#[test]
fn a_killed_service_leaves_its_scopes_confined_and_the_next_one_removes_them() {
    let mut service = start();
    let dir = service.dir.path().to_path_buf();
    let secret = dir.join("secret.txt");
    let ws_dir = ws(&service);
    let p = write_policy(
        &service,
        "p.toml",
        &policy(
            &format!("{}/**", ws_dir.display()),
            &secret.display().to_string(),
            None,
        ),
    );
    // The orphan waits for `go`, then tries the secret and the cgroup root, then sleeps
    // (`sleep 977` names it in /proc).
    let orphan = format!(
        "echo up > up; while [ ! -e go ]; do sleep 0.1; done; \
         cat {secret} > leak 2> err; echo read=$? > after; \
         echo $$ > /sys/fs/cgroup/cgroup.procs 2>> err; echo left=$? >> after; \
         exec sleep 977",
        secret = secret.display()
    );
    let script = format!("/bin/busybox setsid /bin/busybox sh -c '{orphan}' & wait");
    let mut client = Command::new(bee_exe())
        .args(["exec", "--service", "always", "--policy"])
        .arg(&p)
        .args(["--", "/bin/busybox", "sh", "-c", &script])
        .current_dir(&ws_dir)
        .env("BEE_SOCKET", service.socket())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the orphan started", || ws_dir.join("up").exists());
    assert_eq!(service.live_scopes(), 1, "{}", service.log());
    service.kill(libc::SIGKILL);
    // The client lost its service (70).
    assert_eq!(client.wait().unwrap().code(), Some(70));
    // The orphan runs on without a service, and is still confined.
    std::fs::write(ws_dir.join("go"), "").unwrap();
    wait_until("the orphan tried", || {
        std::fs::read_to_string(ws_dir.join("after")).is_ok_and(|a| a.contains("left="))
    });
    let after = std::fs::read_to_string(ws_dir.join("after")).unwrap();
    let leak = std::fs::read_to_string(ws_dir.join("leak")).unwrap_or_default();
    assert!(
        !leak.contains("s3cret"),
        "the orphan read the secret: {leak}"
    );
    assert!(!after.contains("read=0"), "{after}");
    assert!(!after.contains("left=0"), "{after}");
    wait_until("the orphan sleeps", || !pids_running("977").is_empty());
    // The next service takes the dead one's scope down, its processes first.
    service.spawn();
    service.wait_swept();
    assert!(pids_running("977").is_empty(), "{}", service.log());
}

/// Learn mode through the service: refused under a ceiling that does not grant everything
/// (learn mode lifts every denial a policy could lift); under one that does, an ordinary user
/// learns a policy with no privilege, and that policy then runs the command enforced. A
/// scope that asks for a learn scope is refused, as its policy does not grant everything:
/// learn mode is no way out of a scope.
#[test]
fn an_ordinary_user_learns_through_the_service_and_a_scope_cannot_learn_its_way_out() {
    let service = start();
    let dir = service.dir.path();
    let other = dir.join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o777)).unwrap();
    // The base writes `ws/` only; the command also writes in `other/`.
    let base = write_policy(
        &service,
        "base.toml",
        &policy(
            &format!("{}/**", ws(&service).display()),
            "",
            Some(&service.socket()),
        ),
    );
    let out = ws(&service).join("learned.toml");
    let made = other.join("made");
    let script = format!("echo made > {m} && cat {m}", m = made.display());
    // The start's ceiling writes `ws/` only: learn mode is not within it.
    let o = exec_learning_as(&service, NOBODY, &base, Some(&out), &script);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(code(&o), 65, "{stdout}{err}{}", service.log());
    assert!(
        err.contains("learn mode (it allows whatever a policy could grant)"),
        "{err}"
    );
    assert!(!made.exists() && !out.exists(), "{stdout}{err}");

    // Under a ceiling that grants everything, the denial is lifted, reported and learned.
    std::fs::write(dir.join("ceilings/default.toml"), EVERYTHING).unwrap();
    let o = exec_learning_as(&service, NOBODY, &base, Some(&out), &script);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(code(&o), 0, "{stdout}{err}{}", service.log());
    assert_eq!(stdout, "made\n", "{err}");
    assert!(err.contains("bee: LEARN MODE"), "{err}");
    assert!(err.contains("bee: learn: "), "{err}");
    assert!(!err.contains("bee: denied:"), "{err}");
    let learned = std::fs::read_to_string(&out).unwrap();
    assert_eq!(std::fs::metadata(&out).unwrap().uid(), NOBODY);
    // The learned policy runs the command enforced, through the service; the base does not.
    std::fs::remove_file(&made).unwrap();
    let o = exec_as(&service, NOBODY, &out, &script);
    let err = text(&o.stderr);
    assert_eq!(code(&o), 0, "{err}{learned}");
    assert!(made.is_file() && !err.contains("denied"), "{err}{learned}");
    std::fs::remove_file(&made).unwrap();
    let o = exec_as(&service, NOBODY, &base, &script);
    assert_ne!(code(&o), 0, "{}", text(&o.stderr));
    assert!(!made.exists(), "{}", text(&o.stderr));

    // `bee run --learn` learns through the service the same way: its episode's tool call
    // writes in `other/`, which the base does not grant.
    let ran = other.join("ran");
    support::replay_scenario(
        &ws(&service),
        ".",
        &base.display().to_string(),
        &[
            support::tool_call(
                "c1",
                "shell",
                &serde_json::json!({"command": format!("echo ran > {}", ran.display())}),
            ),
            serde_json::json!({"text": "Done."}).to_string(),
        ],
    );
    let run_out = ws(&service).join("run-learned.toml");
    let o = Command::new(bee_exe())
        .args([
            "run",
            "--scenario",
            "scenario.toml",
            "--provider",
            "provider.toml",
        ])
        .arg("--records")
        .arg(ws(&service).join("records"))
        .arg("--learn")
        .arg(&run_out)
        .current_dir(ws(&service))
        .env("BEE_SOCKET", service.socket())
        .env("HOME", ws(&service))
        .env_remove("XDG_CONFIG_HOME")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(code(&o), 0, "{}{err}{}", text(&o.stdout), service.log());
    assert!(err.contains("through the service"), "{err}");
    assert!(err.contains("LEARN MODE ended: "), "{err}");
    assert!(ran.is_file(), "{err}");
    let run_learned = std::fs::read_to_string(&run_out).unwrap();
    assert!(
        run_learned.contains(&*other.to_string_lossy()),
        "{run_learned}"
    );

    // From inside a scope of the base policy, learn mode is refused: not within its policy.
    let nested = format!(
        "{bee} exec --learn {ws}/nested.toml --policy {base} -- /bin/busybox sh -c '{script}'; echo nested=$?",
        bee = bee_exe().display(),
        ws = ws(&service).display(),
        base = base.display(),
    );
    let o = exec_as(&service, NOBODY, &base, &nested);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(stdout.contains("nested=65"), "{stdout}{err}");
    assert!(err.contains("the policy of the scope"), "{err}");
    assert!(!made.exists(), "{stdout}{err}");
    assert!(!ws(&service).join("nested.toml").exists(), "{err}");
    assert_eq!(service.scopes_left_after_hangup(), 0, "{}", service.log());
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
