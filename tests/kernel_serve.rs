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

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
    Command::new(bee_exe())
        .args(["exec", "--service", "always", "--policy"])
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
