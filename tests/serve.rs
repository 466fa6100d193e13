//! `bee serve` on this host, under the Landlock engine, with an ordinary user (`nobody`,
//! uid 65534) as the client: no capability, no sudo. Needs root (to start the service) and
//! Landlock; fails, never skips, without them (feature `landlock-tests`).

mod support;

use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use bee::serve::client::{Client, ClientError};
use bee::serve::protocol::{self, Request, Response};
use bee_core::{CompileOptions, compile_str};
use support::serve::{
    NOBODY, Service, ceiling_with_bee, episode_as_nobody, ok, pids_running, policy, policy_text,
    pub_policy, start, start_granting, with_bee, ws,
};
use support::{bee_exe, code, text, transcript_text};

/// `bee exec --policy POLICY -- ARGS` as `nobody`, in `ws/`.
fn exec_as_nobody(service: &Service, policy: &Path, args: &[&str]) -> Command {
    exec_as_nobody_with(service, &[], policy, args)
}

/// [`exec_as_nobody`] with `FLAGS` after `exec`.
fn exec_as_nobody_with(
    service: &Service,
    flags: &[&std::ffi::OsStr],
    policy: &Path,
    args: &[&str],
) -> Command {
    let mut cmd = Command::new(bee_exe());
    cmd.arg("exec")
        .args(flags)
        .arg("--policy")
        .arg(policy)
        .arg("--")
        .args(args)
        .current_dir(ws(service))
        .env("BEE_SOCKET", service.socket())
        .env("HOME", ws(service))
        .uid(NOBODY)
        .gid(NOBODY);
    cmd
}

fn output(mut cmd: Command) -> Output {
    ok(cmd.output())
}

fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_ordinary_user_runs_a_command_the_kernel_confines_through_the_service() {
    let service = start();
    let p = pub_policy(&service);
    let o = output(exec_as_nobody(
        &service,
        &p,
        &[
            "/usr/bin/dash",
            "-c",
            "id -u; echo made > pub/out; cat secret; echo leak > leak; exit 3",
        ],
    ));
    let err = stderr(&o);
    // The command's own status; it ran as nobody.
    assert_eq!(code(&o), 3, "{err}{}", service.log());
    assert_eq!(text(&o.stdout), "65534\n", "{err}");
    let made = ok(std::fs::metadata(ws(&service).join("pub/out")));
    assert_eq!(made.uid(), NOBODY);
    // The kernel refused the secret (nobody may read it as a file) and a write outside
    // `pub/`, and the service reported the denial.
    assert!(err.contains("secret: Permission denied"), "{err}");
    assert!(!ws(&service).join("leak").exists(), "{err}");
    assert!(
        err.contains(&format!(
            "bee: denied: open {}/secret for read",
            ws(&service).display()
        )),
        "{err}"
    );
    // Every scope was torn down (once `bee exec` hung up).
    assert_eq!(service.scopes_left_after_hangup(), 0);
}

/// Root enforces in its own process unless `$BEE_SOCKET` names a service: then `auto` asks
/// that service (one engine shared by every command), except to learn, which root's own
/// process offers under no ceiling.
#[test]
fn root_asks_the_service_its_bee_socket_names_except_to_learn() {
    let service = start();
    let p = pub_policy(&service);
    let root_exec = |extra: &[&str], socket: Option<&Path>| {
        let mut cmd = Command::new(bee_exe());
        cmd.arg("exec")
            .args(extra)
            .arg("--policy")
            .arg(&p)
            .args(["--", "/usr/bin/dash", "-c", "id -u"])
            .current_dir(ws(&service))
            .env("HOME", ws(&service))
            .env_remove("BEE_SOCKET");
        if let Some(socket) = socket {
            cmd.env("BEE_SOCKET", socket);
        }
        output(cmd)
    };
    // Enforcing in its own process, `bee exec` names the engine it chose; through the
    // service it says nothing of it.
    let in_process = |o: &Output| stderr(o).lines().any(|l| l.starts_with("bee: engine: "));
    let named = root_exec(&[], Some(&service.socket()));
    let err = stderr(&named);
    assert_eq!(code(&named), 0, "{err}{}", service.log());
    assert_eq!(text(&named.stdout), "0\n", "{err}");
    assert!(!in_process(&named), "{err}");
    // Unnamed, root's command is enforced in its own process.
    let unnamed = root_exec(&[], None);
    assert_eq!(code(&unnamed), 0, "{}", stderr(&unnamed));
    assert!(in_process(&unnamed), "{}", stderr(&unnamed));
    // `--service never` wins over the name.
    let never = root_exec(&["--service", "never"], Some(&service.socket()));
    assert_eq!(code(&never), 0, "{}", stderr(&never));
    assert!(in_process(&never), "{}", stderr(&never));
    // To learn, root stays in its own process: the refusal is this process's (the Landlock
    // engine has no learn mode), not the service's.
    let out = ws(&service).join("learned.toml");
    let learn = root_exec(
        &["--learn", &out.to_string_lossy()],
        Some(&service.socket()),
    );
    let err = stderr(&learn);
    assert!(
        err.contains("learn mode needs the BPF LSM: the Landlock engine reports"),
        "{err}"
    );
    assert!(!err.contains("service"), "{err}");
}

/// Learn mode needs an engine that learns: under Landlock, which reports no denials to learn
/// from, the service refuses it with 69 whatever the ceiling, so that no one is sent to ask
/// for a wider one (`kernel_serve` holds the ceiling's proof, 65, under the BPF LSM). Nothing
/// runs and no policy is written.
#[test]
fn learn_mode_needs_an_engine_that_learns_whatever_the_ceiling() {
    let service = start();
    let p = pub_policy(&service);
    let out = ws(&service).join("pub/learned.toml");
    let learn = || {
        let flags = ["--learn".as_ref(), out.as_os_str()];
        output(exec_as_nobody_with(
            &service,
            &flags,
            &p,
            &["/usr/bin/touch", "pub/ran"],
        ))
    };
    let nothing_left = |err: &str| {
        assert!(!ws(&service).join("pub/ran").exists(), "{err}");
        assert!(!out.exists(), "{err}");
        let staged: Vec<_> = ok(std::fs::read_dir(ws(&service).join("pub")))
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(".bee-learn-"))
            .collect();
        assert!(staged.is_empty(), "{staged:?} {err}");
    };
    let o = learn();
    let err = stderr(&o);
    assert_eq!(code(&o), 69, "{err}{}", service.log());
    assert!(err.contains("learn mode needs the BPF LSM"), "{err}");
    assert!(!err.contains("ceiling"), "{err}");
    nothing_left(&err);
    // Nor within a ceiling that grants everything.
    ok(std::fs::write(
        service.dir.path().join("ceilings/default.toml"),
        bee::serve::ceiling::EVERYTHING,
    ));
    let o = learn();
    let err = stderr(&o);
    assert_eq!(code(&o), 69, "{err}{}", service.log());
    assert!(
        err.contains("learn mode needs the BPF LSM: this service enforces with landlock"),
        "{err}"
    );
    nothing_left(&err);
    // The same request without `--learn` is granted and runs.
    let o = output(exec_as_nobody(&service, &p, &["/usr/bin/touch", "pub/ran"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(ws(&service).join("pub/ran").exists());
}

/// A policy of every language version the compiler takes is granted through the service
/// (version 3 once came back 65, "not a compiled policy bee accepts").
#[test]
fn a_policy_of_every_language_version_is_granted() {
    let service = start();
    let pub_dir = ws(&service).join("pub");
    ok(std::fs::write(pub_dir.join("hello"), "hi\n"));
    let tree = format!("{}/**", pub_dir.display());
    for version in bee_core::compile::LANGUAGE_VERSIONS {
        let hello = pub_dir.join("hello").display().to_string();
        let written =
            policy_text(&tree, &hello).replace("version = 1\n", &format!("version = {version}\n"));
        let p = ws(&service).join(format!("v{version}.toml"));
        ok(std::fs::write(&p, written));
        let o = output(exec_as_nobody(&service, &p, &["/usr/bin/cat", "pub/hello"]));
        assert_eq!(code(&o), 0, "version {version}: {}", stderr(&o));
        assert_eq!(text(&o.stdout), "hi\n", "version {version}");
    }
}

/// A call the scope's seccomp filter refuses fails as before (`EPERM`), and the service,
/// which holds the launch's listener and answers it, says which call and why.
#[test]
fn a_call_the_seccomp_filter_refuses_is_answered_and_explained_by_the_service() {
    let service = start();
    let p = pub_policy(&service);
    let o = output(exec_as_nobody(
        &service,
        &p,
        &[
            "/usr/bin/perl",
            "-e",
            "socket(my $s, 1, 1, 0) ? print 'made' : print 0+$!",
        ],
    ));
    let err = stderr(&o);
    assert_eq!(text(&o.stdout), "1", "{err}{}", service.log());
    let line = "bee: denied: socket(AF_UNIX, SOCK_STREAM): never allowed inside a scope";
    assert!(err.lines().any(|l| l == line), "no `{line}` in {err}");
}

/// A command no exec grant covers is refused, and the service says why (the kernel logs
/// nothing for the Landlock engine's `noexec` refusal; the record is made from the policy).
#[test]
fn a_command_no_exec_grant_covers_is_refused_and_explained() {
    let service = start();
    let p = pub_policy(&service);
    let o = output(exec_as_nobody(&service, &p, &["/usr/sbin/nologin"]));
    let err = stderr(&o);
    assert_eq!(code(&o), 126, "{err}");
    assert!(
        err.contains("denied: exec /usr/sbin/nologin: no exec.allow rule covers it"),
        "{err}"
    );
    // Named without its path: the client finds it on the command's `PATH`, as the caller.
    let mut bare = exec_as_nobody(&service, &p, &["nologin"]);
    bare.env("PATH", "/usr/sbin:/usr/bin");
    let o = output(bare);
    let err = stderr(&o);
    assert_eq!(code(&o), 126, "{err}");
    assert!(
        err.contains("denied: exec /usr/sbin/nologin: no exec.allow rule covers it"),
        "{err}"
    );
}

#[test]
fn a_request_wider_than_the_ceiling_is_refused_with_its_counterexample() {
    let service = start();
    let p = policy(
        &service,
        "wide.toml",
        "/root/**",
        &format!("{}/pub/**", ws(&service).display()),
    );
    let o = output(exec_as_nobody(&service, &p, &["/usr/bin/touch", "pub/ran"]));
    let err = stderr(&o);
    assert_eq!(code(&o), 65, "{err}");
    assert!(err.contains("refused: "), "{err}");
    assert!(err.contains("`/root/**`"), "{err}");
    assert!(err.contains("default.toml"), "{err}");
    assert!(!ws(&service).join("pub/ran").exists());
}

/// The same refusal ends `bee repl` the same way: 65, the proof's counterexamples a line
/// each, before any model call.
#[test]
fn a_repl_wider_than_the_ceiling_is_refused_with_the_same_status_and_counterexample() {
    let service = start();
    ceiling_with_bee(&service);
    let ws = ws(&service);
    let p = policy(
        &service,
        "wide.toml",
        "/root/**",
        &format!("{}/pub/**", ws.display()),
    );
    let records = replay(&service, &[serde_json::json!({"text": "unused"})]);
    let o = output({
        let mut c = Command::new(bee_exe());
        c.args(["repl", "--policy"])
            .arg(&p)
            .args(["--provider", "provider.toml", "--records-dir"])
            .arg(&records)
            .current_dir(&ws)
            .env("BEE_SOCKET", service.socket())
            .env("HOME", &ws)
            .env_remove("XDG_CONFIG_HOME")
            .stdin(Stdio::null())
            .uid(NOBODY)
            .gid(NOBODY);
        c
    });
    let err = stderr(&o);
    assert_eq!(code(&o), 65, "{err}");
    let first = err
        .lines()
        .find(|l| l.contains("refused: "))
        .unwrap_or_default();
    assert!(first.ends_with("no model was called"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("  ") && l.contains("`/root/**`")),
        "{err}"
    );
}

#[test]
fn without_a_ceiling_nothing_is_granted() {
    let service = start();
    ok(std::fs::remove_file(
        service.dir.path().join("ceilings/default.toml"),
    ));
    let p = pub_policy(&service);
    let o = output(exec_as_nobody(&service, &p, &["/usr/bin/touch", "pub/ran"]));
    let err = stderr(&o);
    assert_eq!(code(&o), 77, "{err}");
    assert!(
        err.contains("no ceiling grants uid 65534 anything"),
        "{err}"
    );
    assert!(err.contains("default.toml"), "{err}");
    assert!(!ws(&service).join("pub/ran").exists());
}

#[test]
fn a_service_without_its_ceilings_directory_says_so_and_grants_nothing() {
    let mut service = start();
    service.kill(libc::SIGTERM);
    ok(std::fs::remove_dir_all(service.dir.path().join("ceilings")));
    service.spawn();
    let p = pub_policy(&service);
    // Answered once the service serves, after what it says at its start.
    let o = output(exec_as_nobody(&service, &p, &["/usr/bin/touch", "pub/ran"]));
    assert_eq!(code(&o), 77, "{}", stderr(&o));
    assert!(!ws(&service).join("pub/ran").exists());
    let log = service.log();
    assert!(
        log.contains("warning: the ceilings directory")
            && log.contains("every request is refused (77)"),
        "{log}"
    );
}

#[test]
fn a_user_who_would_not_use_the_service_is_told_it_answers() {
    let service = start();
    let p = pub_policy(&service);
    let flags = ["--service".as_ref(), "never".as_ref()];
    let o = output(exec_as_nobody_with(
        &service,
        &flags,
        &p,
        &["/usr/bin/touch", "pub/ran"],
    ));
    let err = stderr(&o);
    assert_eq!(code(&o), 77, "{err}");
    assert!(
        err.contains("was told not to use the `bee serve` service that answers at"),
        "{err}"
    );
    assert!(!err.contains("no `bee serve` service answers"), "{err}");
    assert!(!ws(&service).join("pub/ran").exists());
}

#[test]
fn the_service_refuses_to_start_without_root() {
    let dir = ok(tempfile::tempdir());
    ok(std::fs::set_permissions(
        dir.path(),
        std::fs::Permissions::from_mode(0o777),
    ));
    let o = output({
        let mut cmd = Command::new(bee_exe());
        cmd.args(["serve", "--socket"])
            .arg(dir.path().join("s.sock"))
            .uid(NOBODY)
            .gid(NOBODY);
        cmd
    });
    let err = stderr(&o);
    assert_eq!(code(&o), 77, "{err}");
    assert!(err.contains("it needs root (CAP_SETUID"), "{err}");
    assert!(!dir.path().join("s.sock").exists());
}

#[test]
fn without_a_service_an_ordinary_user_is_told_what_to_do() {
    let dir = ok(tempfile::tempdir());
    let p = dir.path().join("p.toml");
    ok(std::fs::write(&p, policy_text("/tmp/**", "/tmp/**")));
    ok(std::fs::set_permissions(
        dir.path(),
        std::fs::Permissions::from_mode(0o755),
    ));
    let o = output({
        let mut cmd = Command::new(bee_exe());
        cmd.args(["exec", "--service", "always", "--policy"])
            .arg(&p)
            .args(["--", "/usr/bin/true"])
            .current_dir("/tmp")
            .env("BEE_SOCKET", dir.path().join("none.sock"))
            .uid(NOBODY)
            .gid(NOBODY);
        cmd
    });
    let err = stderr(&o);
    assert_eq!(code(&o), 69, "{err}");
    assert!(err.contains("no bee service answers at"), "{err}");
    assert!(err.contains("systemctl enable --now bee.socket"), "{err}");
}

#[test]
fn a_client_that_dies_has_its_scope_killed() {
    let service = start();
    let p = pub_policy(&service);
    let mut client = sleeper(&service, &p, "987", "echo up > pub/up; exec sleep 987");
    ok(client.kill());
    let _ = client.wait();
    wait_until("the scope's processes are gone", || {
        pids_running("987").is_empty()
    });
    wait_until("the scope is removed", || service.live_scopes() == 0);
}

/// SIGTERM to a client's `bee exec` (the client alone): it asks the service to kill the
/// scope, which goes, and the client then ends by SIGTERM, as in-process.
#[test]
fn sigterm_to_a_client_kills_its_scope_and_then_ends_the_client_by_sigterm() {
    use std::os::unix::process::ExitStatusExt as _;
    let service = start();
    let p = pub_policy(&service);
    let mut client = sleeper(&service, &p, "986", "echo up > pub/up; sleep 986");
    // SAFETY: kill(2) of our own child.
    assert_eq!(
        unsafe { libc::kill(client.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let mut status = None;
    wait_until("the client ends", || {
        status = ok(client.try_wait());
        status.is_some()
    });
    let mut said = String::new();
    if let Some(mut e) = client.stderr.take() {
        let _ = e.read_to_string(&mut said);
    }
    assert_eq!(
        status.and_then(|s| s.signal()),
        Some(libc::SIGTERM),
        "{status:?}: {said}"
    );
    assert!(
        said.contains("bee: SIGTERM: `/usr/bin/dash`'s scope was killed"),
        "{said}"
    );
    assert!(pids_running("986").is_empty());
    wait_until("the scope is removed", || service.live_scopes() == 0);
}

#[test]
fn a_killed_service_lets_nothing_out_and_the_next_one_removes_what_it_left() {
    let mut service = start();
    let p = pub_policy(&service);
    let mut client = sleeper(&service, &p, "988", "sleep 988 & echo up > pub/up; wait");
    assert_eq!(service.live_scopes(), 1);
    service.kill(libc::SIGKILL);
    // The client loses its service and says so (70).
    let status = ok(client.wait());
    assert_eq!(status.code(), Some(70));
    let mut said = String::new();
    if let Some(mut e) = client.stderr.take() {
        let _ = e.read_to_string(&mut said);
    }
    assert!(said.contains("the bee service"), "{said}");
    // Under the Landlock engine the command is the init of its own PID namespace and gets
    // SIGKILL when the service's thread dies: nothing of the scope runs on unconfined.
    wait_until("the scope's processes are gone", || {
        pids_running("988").is_empty()
    });
    // The dead service's scope is still listed, and the next service removes it.
    assert_eq!(service.live_scopes(), 1);
    service.spawn();
    service.wait_swept();
}

/// `bee exec` as nobody of a dash `script` that writes `pub/up` and sleeps `seconds`
/// (unique to the test, to find the process by); returns once `pub/up` is there. The
/// client's stderr is piped.
fn sleeper(service: &Service, p: &Path, seconds: &str, script: &str) -> std::process::Child {
    let client = ok(exec_as_nobody(service, p, &["/usr/bin/dash", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn());
    wait_until("the command started", || {
        ws(service).join("pub/up").exists()
    });
    wait_until("sleep runs", || !pids_running(seconds).is_empty());
    client
}

/// A raw connection to the service, past nothing.
fn raw(service: &Service) -> UnixStream {
    let s = ok(UnixStream::connect(service.socket()));
    ok(s.set_read_timeout(Some(Duration::from_secs(15))));
    s
}

/// Reads one frame; `None` at the end of the stream.
fn read_frame(s: &mut UnixStream) -> Option<Response> {
    let mut header = [0u8; 4];
    s.read_exact(&mut header).ok()?;
    let n = u32::from_be_bytes(header) as usize;
    let mut body = vec![0u8; n];
    s.read_exact(&mut body).ok()?;
    protocol::decode(&body).ok()
}

fn hangs_up(s: &mut UnixStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(s.read(&mut byte), Ok(0) | Err(_))
}

fn error_status(r: Option<Response>) -> Option<u8> {
    match r {
        Some(Response::Error(body)) => Some(body.status),
        _ => None,
    }
}

#[test]
fn bad_frames_get_an_error_and_the_service_keeps_serving_everyone_else() {
    let service = start();
    // A length over the limit (a 4 GiB frame).
    let mut s = raw(&service);
    ok(s.write_all(&[0xff, 0xff, 0xff, 0xff]));
    assert_eq!(error_status(read_frame(&mut s)), Some(64));
    assert!(hangs_up(&mut s));
    // Not JSON; then JSON that is no request.
    for body in [&b"\x00\x01garbage"[..], br#"{"format_disk":{}}"#] {
        let mut s = raw(&service);
        let mut frame = u32::try_from(body.len())
            .unwrap_or(0)
            .to_be_bytes()
            .to_vec();
        frame.extend_from_slice(body);
        ok(s.write_all(&frame));
        assert_eq!(error_status(read_frame(&mut s)), Some(64));
        assert!(hangs_up(&mut s));
    }
    // An unknown protocol version, and a request before `hello`.
    for request in [Request::Hello { version: 99 }, Request::List] {
        let mut s = raw(&service);
        ok(s.write_all(&ok(protocol::encode(&request))));
        assert_eq!(error_status(read_frame(&mut s)), Some(64), "{request:?}");
        assert!(hangs_up(&mut s));
    }
    // A 10 MB policy is over the frame limit before it is read.
    let mut s = raw(&service);
    let big = 10u32 << 20;
    ok(s.write_all(&big.to_be_bytes()));
    assert_eq!(error_status(read_frame(&mut s)), Some(64));
    // Descriptors with a request that takes none.
    let s = raw(&service);
    let null = ok(std::fs::File::open("/dev/null"));
    use std::os::fd::AsRawFd as _;
    ok(bee::serve::wire::send(
        &s,
        &Request::Hello { version: 1 },
        &[null.as_raw_fd()],
    ));
    let mut s = s;
    assert_eq!(error_status(read_frame(&mut s)), Some(64));
    // A client that exits in the middle of a frame.
    {
        let mut s = raw(&service);
        ok(s.write_all(&[0, 0, 0, 50, b'{']));
    }
    // Meanwhile, and after all that, an ordinary client is served.
    let p = pub_policy(&service);
    let o = output(exec_as_nobody(&service, &p, &["/usr/bin/true"]));
    assert_eq!(code(&o), 0, "{}{}", stderr(&o), service.log());
}

#[test]
fn a_thousand_connections_at_once_are_all_served() {
    let service = start();
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a valid struct; this test process only.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(8192);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    let clients: Vec<Client> = (0..1000)
        .map(|_| ok(Client::connect(&service.socket())))
        .collect();
    assert!(
        clients
            .iter()
            .all(|c| c.welcome.version == protocol::VERSION)
    );
    // Every one of them can still ask.
    for mut c in clients {
        assert!(matches!(
            c.ask(&Request::List, &[]),
            Ok(Response::Scopes(v)) if v.is_empty()
        ));
    }
}

#[test]
fn no_connection_can_touch_another_connections_scope() {
    let service = start();
    let tree = format!("{}/pub/**", ws(&service).display());
    let options = CompileOptions {
        base: ws(&service),
        home: None,
    };
    let policy = ok(compile_str("p.toml", &policy_text(&tree, &tree), &options)).policy;
    // Root asks here: the same ceiling applies to it as to anyone.
    let mut owner = ok(Client::connect(&service.socket()));
    let scope = ok(owner.create(&policy, "p.toml", None, false));
    let mut other = ok(Client::connect(&service.socket()));
    for request in [
        Request::Kill { scope },
        Request::Close { scope },
        Request::Replace {
            scope,
            policy: Box::new(policy.clone()),
        },
    ] {
        let refused = other.ask(&request, &[]);
        assert!(
            matches!(&refused, Err(ClientError::Refused(body)) if body.status == 64 && body.message.contains("has no scope")),
            "{request:?}: {refused:?}"
        );
    }
    assert!(matches!(other.ask(&Request::List, &[]), Ok(Response::Scopes(v)) if v.is_empty()));
    // The owner's scope is untouched.
    assert!(matches!(owner.ask(&Request::List, &[]), Ok(Response::Scopes(v)) if v.len() == 1));
    ok(owner.close(scope));
}

#[test]
fn a_socket_systemd_passes_is_served() {
    let dir = ok(tempfile::tempdir());
    let (path, mut child) = activated(dir.path());
    let client = Client::connect(&path);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
    let client = client.unwrap_or_else(|e| unreachable!("{e}: {log}"));
    assert_eq!(client.welcome.engine, "landlock");
    assert!(
        log.contains("listening on the socket systemd passed"),
        "{log}"
    );
    assert!(!Path::new("/nonexistent/unused.sock").exists());
}

/// A `bee serve` started as systemd starts a socket-activated one, in `dir`: the socket
/// (`activated.sock`) bound here and passed as descriptor 3, `LISTEN_FDS=1` and `LISTEN_PID`
/// the service's own pid; its ceilings `dir/ceilings` (a `default.toml` that reads and writes
/// `dir/ws/**`), its log `dir/serve.log`. Returns the socket's path and the service.
fn activated(dir: &Path) -> (PathBuf, std::process::Child) {
    use std::os::fd::AsRawFd as _;
    let path = dir.join("activated.sock");
    let listener = ok(std::os::unix::net::UnixListener::bind(&path));
    let fd = listener.as_raw_fd();
    ok(std::fs::create_dir_all(dir.join("ceilings")));
    ok(std::fs::create_dir_all(dir.join("ws")));
    let tree = format!("{}/**", dir.join("ws").display());
    ok(std::fs::write(
        dir.join("ceilings/default.toml"),
        policy_text(&tree, &tree),
    ));
    let log = ok(std::fs::File::create(dir.join("serve.log")));
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" serve --engine landlock --socket /nonexistent/unused.sock --state-dir \"$1\" --ceilings \"$2\"")
        .arg(bee_exe())
        .arg(dir.join("scopes"))
        .arg(dir.join("ceilings"))
        .stderr(log);
    // SAFETY: dup2 onto descriptor 3 between fork and exec; async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself keeps close-on-exec: clear it instead.
            let rc = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = ok(cmd.spawn());
    drop(listener);
    (path, child)
}

/// Under socket activation the listening socket is the service manager's, so a client
/// socket's peer credentials name it, not the service: a second connection to the service is
/// still refused as a command's standard stream (known by the address it is connected to),
/// or a narrow scope's command could ask the service for its caller's whole ceiling.
#[test]
fn under_socket_activation_a_connection_to_the_service_is_still_no_standard_stream() {
    const SCRIPT: &str = r#"
sock, policy = sys.argv[1], json.loads(sys.argv[2])
s = socket.socket(socket.AF_UNIX); s.connect(sock)
s.sendall(frame({"hello": {"version": 1}})); read(s)
s.sendall(frame({"create": {"policy": policy, "origin": "p"}})); scope = read(s)["created"]["scope"]
other = socket.socket(socket.AF_UNIX); other.connect(sock)
r, w = os.pipe()
socket.send_fds(s, [frame({"spawn": {"scope": scope, "argv": ["/usr/bin/true"], "env": [], "cwd": "/"}})], [other.fileno(), w, w])
print(json.dumps(read(s)))
"#;
    let dir = ok(tempfile::tempdir());
    let (path, mut child) = activated(dir.path());
    let tree = format!("{}/**", dir.path().join("ws").display());
    let policy = ok(compile_str(
        "p.toml",
        &policy_text(&tree, &tree),
        &CompileOptions {
            base: dir.path().to_owned(),
            home: None,
        },
    ))
    .policy;
    // The service is up once it answers.
    let up = Instant::now();
    while Client::connect(&path).is_err() && up.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = output({
        let mut c = Command::new("/usr/bin/python3");
        c.arg("-c")
            .arg([PY_FRAMES, SCRIPT].concat())
            .arg(&path)
            .arg(ok(policy.to_json()));
        c
    });
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    let out = text(&o.stdout);
    assert!(
        out.contains("a connection to the service cannot be a command's standard stream"),
        "{out}{}{}",
        stderr(&o),
        std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default()
    );
}

#[test]
fn a_stopped_service_tears_every_scope_down_and_removes_its_socket() {
    let mut service = start();
    let p = pub_policy(&service);
    let mut client = sleeper(&service, &p, "989", "echo up > pub/up; sleep 989");
    service.kill(libc::SIGTERM);
    let _ = client.wait();
    assert!(pids_running("989").is_empty());
    assert_eq!(service.live_scopes(), 0);
    assert!(!service.socket().exists());
}

#[test]
fn check_says_whether_the_service_answers_and_what_bounds_the_caller() {
    let service = start();
    let check = |json: bool| {
        let mut cmd = Command::new(bee_exe());
        cmd.arg("check")
            .args(json.then_some("--json"))
            .env("BEE_SOCKET", service.socket())
            .uid(NOBODY)
            .gid(NOBODY);
        output(cmd)
    };
    let o = check(false);
    let out = text(&o.stdout);
    // nobody has no privilege of its own; the service enforces for it.
    assert_eq!(code(&o), 0, "{out}{}", stderr(&o));
    assert!(out.starts_with("engine: landlock (auto)\n"), "{out}");
    assert!(out.contains("service: answers at "), "{out}");
    assert!(
        out.contains("uid 65534 is bounded by ") && out.contains("ceilings/default.toml"),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_str(&text(&check(true).stdout)).unwrap_or_default();
    assert_eq!(v["supported"], true, "{v}");
    assert_eq!(v["service"]["answers"], true, "{v}");
    assert_eq!(v["service"]["uid"], NOBODY, "{v}");
    // Without a ceiling the service grants nothing, and check says so and fails.
    ok(std::fs::remove_file(
        service.dir.path().join("ceilings/default.toml"),
    ));
    let o = check(false);
    let out = text(&o.stdout);
    assert_eq!(code(&o), 65, "{out}");
    assert!(
        out.contains("no ceiling applies to uid 65534: it grants nothing"),
        "{out}"
    );
}

/// A connection reads its caller's ceilings for `hello` and proves its first `create` with
/// them (read once, not twice); every later request reads them again, so a ceiling the
/// operator removes or narrows holds for the next request on a connection already open.
#[test]
fn a_ceiling_taken_away_holds_from_the_next_request_on_an_open_connection() {
    let service = start();
    let policy = all_of_ws(&service);
    const SCRIPT: &str = r#"
sock, policy = sys.argv[1], json.loads(sys.argv[2])
s = socket.socket(socket.AF_UNIX); s.connect(sock)
s.sendall(frame({"hello": {"version": 1}})); read(s)
print("greeted", flush=True); sys.stdin.readline()
for _ in range(2):
    s.sendall(frame({"create": {"policy": policy, "origin": "p"}})); print(json.dumps(read(s)), flush=True)
"#;
    let mut child = ok({
        let mut c = Command::new("/usr/bin/python3");
        c.arg("-c")
            .arg([PY_FRAMES, SCRIPT].concat())
            .arg(service.socket())
            .arg(ok(policy.to_json()))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .uid(NOBODY)
            .gid(NOBODY);
        c
    }
    .spawn());
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap_or_else(|| unreachable!()));
    let mut line = String::new();
    ok(std::io::BufRead::read_line(&mut stdout, &mut line));
    assert_eq!(line, "greeted\n");
    ok(std::fs::remove_file(
        service.dir.path().join("ceilings/default.toml"),
    ));
    ok(std::io::Write::write_all(
        &mut child.stdin.take().unwrap_or_else(|| unreachable!()),
        b"go\n",
    ));
    let mut rest = String::new();
    ok(std::io::Read::read_to_string(&mut stdout, &mut rest));
    ok(child.wait());
    let answers: Vec<serde_json::Value> = rest
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_default())
        .collect();
    assert_eq!(answers.len(), 2, "{rest}");
    assert!(answers[0]["created"]["scope"].is_u64(), "{rest}");
    assert_eq!(answers[1]["error"]["status"], 77, "{rest}");
    assert!(
        answers[1]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no ceiling grants uid 65534 anything")),
        "{rest}"
    );
}

/// A compiled policy that reads and writes all of `ws/`, as a raw client sends it.
fn all_of_ws(service: &Service) -> bee_core::CompiledPolicy {
    let tree = format!("{}/**", ws(service).display());
    let options = CompileOptions {
        base: ws(service),
        home: None,
    };
    ok(compile_str(
        "all.toml",
        &policy_text(&tree, &tree),
        &options,
    ))
    .policy
}

/// `bee run` of a one-episode scenario as `nobody` in `ws/`, in place, under `policy`,
/// its model answering `calls` in order; its records go to `<dir>/records`.
fn run_as_nobody(service: &Service, policy: &Path, calls: &[&str]) -> (Output, PathBuf) {
    let turns: Vec<String> = calls.iter().map(ToString::to_string).collect();
    let (cmd, records) = episode_as_nobody(service, policy, &turns);
    (output(cmd), records)
}

/// `bee run` by an ordinary user: every tool call of the episode runs in one scope the
/// service made (the tool runner's grant proven within the ceiling too), as that user.
#[test]
fn an_ordinary_users_episode_runs_its_tools_in_a_scope_of_the_service() {
    let service = start();
    let ws = ws(&service);
    ceiling_with_bee(&service);
    let p = pub_policy(&service);
    let calls = [
        r#"{"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "pub/made.txt", "content": "ok\n"}}]}"#,
        r#"{"tool_calls": [{"id": "s", "name": "shell", "arguments": {"command": "id -u; cat secret"}}]}"#,
        r#"{"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"path": "secret"}}]}"#,
        r#"{"text": "done"}"#,
    ];
    let (o, records) = run_as_nobody(&service, &p, &calls);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{}{err}{}", text(&o.stdout), service.log());
    assert!(err.contains("through the service at"), "{err}");
    let made = ok(std::fs::metadata(ws.join("pub/made.txt")));
    assert_eq!(made.uid(), NOBODY);
    let text = transcript_text(&records);
    let event = |kind: &str, id: &str| -> serde_json::Value {
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["event"] == kind && e["call_id"] == id)
            .unwrap_or_default()
    };
    assert_eq!(event("tool_result", "w")["state"], "completed", "{text}");
    let shell = event("tool_result", "s");
    let out = shell["output"].as_str().unwrap_or_default();
    assert!(out.contains("65534"), "{text}");
    assert!(out.contains("denied by policy"), "{text}");
    assert_ne!(event("tool_result", "r")["state"], "completed", "{text}");
    assert!(
        text.contains(&format!("{}/secret", ws.display())) && text.contains("\"denial\""),
        "{text}"
    );
    assert_eq!(service.live_scopes(), 0);
}

/// An episode whose scope the ceiling refuses (here the tool runner's grant, which the
/// default ceiling lacks) ends `enforcement-unavailable` before any model call, and `bee run`
/// exits 65 with the counterexample, as `bee exec` does for the same refusal.
#[test]
fn an_episode_beyond_the_ceiling_is_refused_with_65() {
    let service = start();
    let p = pub_policy(&service);
    let (o, records) = run_as_nobody(&service, &p, &[r#"{"text": "never asked"}"#]);
    let said = format!("{}{}", text(&o.stdout), stderr(&o));
    assert_eq!(code(&o), 65, "{said}");
    assert!(said.contains("enforcement unavailable"), "{said}");
    assert!(said.contains("does not"), "{said}");
    let text = transcript_text(&records);
    assert!(text.contains("\"enforcement-unavailable\""), "{text}");
    assert!(!text.contains("\"model_call\""), "{text}");
}

/// A replay provider in the workspace (`provider.toml`, whose model answers `turns` in
/// order) and a records directory anyone may write; returns the directory.
fn replay(service: &Service, turns: &[serde_json::Value]) -> PathBuf {
    let ws = ws(service);
    let lines: Vec<String> = turns.iter().map(ToString::to_string).collect();
    ok(std::fs::write(
        ws.join("rec.jsonl"),
        lines.join("\n") + "\n",
    ));
    ok(std::fs::write(
        ws.join("provider.toml"),
        "kind = \"replay\"\nfile = \"rec.jsonl\"\nmodel = \"m\"\n",
    ));
    let records = service.dir.path().join("records");
    ok(std::fs::create_dir(&records));
    ok(std::fs::set_permissions(
        &records,
        std::fs::Permissions::from_mode(0o777),
    ));
    records
}

/// `bee repl` by an ordinary user, in a pseudo-terminal: a denial, then `/allow` widens the
/// live scope in the service (proven within the ceiling), and the retry reads the file.
#[test]
fn an_ordinary_users_repl_allows_a_denied_read_through_the_service() {
    use expectrl::{ControlCode, Expect, Session};
    let service = start();
    ceiling_with_bee(&service);
    let ws = ws(&service);
    let p = pub_policy(&service);
    let secret = ws.join("secret").display().to_string();
    let turns = [
        serde_json::json!({"text": "Reading it.", "tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"path": secret}}]}),
        serde_json::json!({"text": "The policy refused that read."}),
        serde_json::json!({"text": "Trying again.", "tool_calls": [
            {"id": "c2", "name": "read_file", "arguments": {"path": secret}}]}),
        serde_json::json!({"text": "Read it this time."}),
    ];
    let records = replay(&service, &turns);
    let mut cmd = Command::new(bee_exe());
    cmd.arg("repl")
        .arg("--policy")
        .arg(&p)
        .args(["--provider", "provider.toml", "--records-dir"])
        .arg(&records)
        .current_dir(&ws)
        .env("BEE_SOCKET", service.socket())
        .env("HOME", &ws)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .env("TERM", "xterm")
        .env_remove("XDG_CONFIG_HOME")
        .uid(NOBODY)
        .gid(NOBODY);
    let mut s = ok(Session::spawn(cmd));
    s.set_expect_timeout(Some(Duration::from_secs(60)));
    let see = |s: &mut expectrl::session::OsSession, what: &str| {
        if let Err(e) = s.expect(what) {
            let mut buf = vec![0u8; 1 << 16];
            let n = s.read(&mut buf).unwrap_or(0);
            panic!(
                "waiting for {what:?}: {e}; the screen had: {}{}",
                String::from_utf8_lossy(&buf[..n]),
                service.log()
            );
        }
    };
    see(&mut s, "through the service at");
    see(&mut s, "› ");
    ok(s.send_line("read the secret"));
    see(&mut s, "denied");
    see(&mut s, "refused that read");
    see(&mut s, "› ");
    ok(s.send_line("/allow 1"));
    see(&mut s, &format!("fs.read += \"{secret}\""));
    see(&mut s, "apply this change");
    ok(s.send_line("y"));
    see(&mut s, "in force in the running scope");
    see(&mut s, "› ");
    ok(s.send_line("try again"));
    see(&mut s, "Trying again");
    see(&mut s, "Read it this time");
    see(&mut s, "› ");
    ok(s.send(ControlCode::EndOfTransmission));
    see(&mut s, "session ended");
    let exit = support::pty_exit_code(s.get_process(), Duration::from_secs(30));
    assert_eq!(exit, 0, "bee repl's exit code");
    let run = ok(std::fs::read_dir(&records))
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap_or_else(|| unreachable!("no run directory"));
    let transcript = ok(std::fs::read_to_string(run.join("repl.jsonl")));
    // The retry read the file: only an allowed read puts its content in the transcript.
    assert!(transcript.contains("hush"), "{transcript}");
    assert_eq!(service.live_scopes(), 0);
}

/// `bee exec` by an ordinary user on a terminal: the pseudo-terminal the caller opened, passed
/// to the service, is the command's controlling terminal; input is relayed and Ctrl-C ends it.
#[test]
fn an_ordinary_users_command_gets_a_terminal_of_its_own_through_the_service() {
    use expectrl::{ControlCode, Expect, Session};
    let service = start();
    let p = pub_policy(&service);
    let mut cmd = exec_as_nobody(
        &service,
        &p,
        &[
            "/usr/bin/dash",
            "-c",
            "tty; exec 3</dev/tty && echo has-a-controlling-terminal; echo ready; /usr/bin/cat; echo after",
        ],
    );
    cmd.env("TERM", "xterm");
    let mut s = ok(Session::spawn(cmd));
    s.set_expect_timeout(Some(Duration::from_secs(30)));
    let see = |s: &mut expectrl::session::OsSession, what: &str| -> String {
        match s.expect(what) {
            Ok(found) => String::from_utf8_lossy(found.before()).into_owned(),
            Err(e) => panic!("waiting for {what:?}: {e}{}", service.log()),
        }
    };
    let seen = see(&mut s, "ready");
    assert!(seen.contains("/dev/pts/"), "{seen}");
    assert!(seen.contains("has-a-controlling-terminal"), "{seen}");
    // cat's copy (the session's terminal, and so the command's, does not echo).
    ok(s.send("hello bee\r"));
    see(&mut s, "hello bee");
    ok(s.send(ControlCode::EndOfText));
    let exit = support::pty_exit_code(s.get_process(), Duration::from_secs(30));
    assert_eq!(exit, 130, "bee exec's exit code");
    assert_eq!(service.scopes_left_after_hangup(), 0);
}

/// The service makes a passed terminal a command's controlling terminal only when the caller
/// owns it and holds it open for reading and writing: not a file that is no terminal, not
/// another user's terminal, not one passed write-only.
#[test]
fn a_controlling_terminal_must_be_the_callers_own() {
    use std::os::fd::{AsFd as _, AsRawFd as _};
    let service = start();
    let tree = format!("{}/pub/**", ws(&service).display());
    let options = CompileOptions {
        base: ws(&service),
        home: None,
    };
    let policy = ok(compile_str("p.toml", &policy_text(&tree, &tree), &options)).policy;
    // Root asks here: its own terminal is one root owns.
    let mut client = ok(Client::connect(&service.socket()));
    let scope = ok(client.create(&policy, "p.toml", None, false));
    let spec = bee_userspace::launch::LaunchSpec::new("/usr/bin/true")
        .current_dir(ws(&service))
        .controlling_terminal(true);
    let command = ok(bee::serve::client::CommandLine::of(&spec));
    assert!(command.terminal);
    let mut run = |fd: std::os::fd::RawFd| {
        client.run(scope, command.clone(), [fd; 3], &mut |_| {}, &|| false)
    };
    let refused = |r: &Result<_, ClientError>| matches!(r, Err(ClientError::Refused(body)) if body.status == 64 && body.message.contains("the caller owns"));
    let null = ok(std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null"));
    let r = run(null.as_raw_fd());
    assert!(refused(&r), "{r:?}");
    let others = ok(nix::pty::openpty(None, None));
    ok(nix::unistd::fchown(
        others.slave.as_fd(),
        Some(nix::unistd::Uid::from_raw(NOBODY)),
        None,
    ));
    let r = run(others.slave.as_raw_fd());
    assert!(refused(&r), "{r:?}");
    let own = ok(nix::pty::openpty(None, None));
    let name = ok(std::fs::read_link(format!(
        "/proc/self/fd/{}",
        own.slave.as_raw_fd()
    )));
    let write_only = ok(std::fs::OpenOptions::new().write(true).open(&name));
    let r = run(write_only.as_raw_fd());
    assert!(refused(&r), "{r:?}");
    // The same terminal open for reading and writing is taken.
    let r = run(own.slave.as_raw_fd());
    assert!(
        matches!(r, Ok(ended) if ended.code == 0),
        "{r:?}{}",
        service.log()
    );
}

/// Under the Landlock engine no scope may open a unix socket (Landlock restricts pathname
/// sockets only from ABI 9), so a command in a scope cannot ask the service for another.
#[test]
fn a_landlock_scope_cannot_reach_the_service() {
    let service = start();
    ceiling_with_bee(&service);
    let tree = format!("{}/pub/**", ws(&service).display());
    let p = ws(&service).join("pub/with-bee.toml");
    ok(std::fs::write(&p, with_bee(&policy_text(&tree, &tree))));
    let script = format!(
        "BEE_SOCKET={sock} {bee} exec --service always --policy {p} -- /usr/bin/true; echo nested=$?",
        sock = service.socket().display(),
        bee = bee_exe().display(),
        p = p.display()
    );
    let o = output(exec_as_nobody(
        &service,
        &p,
        &["/usr/bin/dash", "-c", &script],
    ));
    let (out, err) = (text(&o.stdout), stderr(&o));
    assert_eq!(code(&o), 0, "{out}{err}");
    assert!(
        out.contains("nested=77") || out.contains("nested=69"),
        "{out}{err}"
    );
    assert!(err.contains("no bee service answers at"), "{err}");
}

/// A policy sent as data is held to the compiler's normal form: a `..` in a pattern would
/// look to the prover like a path inside the ceiling and name one outside it.
#[test]
fn a_crafted_pattern_that_climbs_out_of_the_ceiling_is_refused() {
    let service = start();
    let tree = format!("{}/pub/**", ws(&service).display());
    let options = CompileOptions {
        base: ws(&service),
        home: None,
    };
    let mut policy = ok(compile_str("p.toml", &policy_text(&tree, &tree), &options)).policy;
    let escape = format!("{}/pub/../../../../etc", ws(&service).display());
    let i = policy
        .fs
        .read
        .iter()
        .position(|r| r.pattern.to_string() == tree)
        .unwrap_or_else(|| unreachable!("the pub rule"));
    policy.fs.read[i].pattern = bee_core::glob::PathPattern::Subtree { root: escape };
    let mut client = ok(Client::connect(&service.socket()));
    let refused = client.create(&policy, "crafted", None, false);
    assert!(
        matches!(&refused, Err(ClientError::Refused(body))
            if body.status == 65 && body.message.contains("not a compiled policy bee accepts")
                && body.message.contains("fs.read[")),
        "{refused:?}"
    );
}

/// What the Python clients below share: the imports, and a frame written and read.
const PY_FRAMES: &str = r#"
import json, os, socket, struct, sys
def frame(o):
    b = json.dumps(o).encode(); return struct.pack(">I", len(b)) + b
def read(s):
    def exact(n):
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c: raise EOFError
            b += c
        return b
    (n,) = struct.unpack(">I", exact(4)); return json.loads(exact(n))
"#;

/// A raw client, as `nobody`, in Python: hello, create a scope for `policy`, spawn
/// `cat data` in `cwd` with the environment `env` (JSON pairs) and, for `stdin`, `none`
/// (`/dev/null`), `self` (its own connection to the service) or `unconnected` (a unix
/// socket never connected); prints every answer as JSON,
/// then what the command wrote.
fn raw_spawn(
    service: &Service,
    cwd: &Path,
    policy: &bee_core::CompiledPolicy,
    env: &str,
    stdin: &str,
) -> Output {
    const SCRIPT: &str = r#"
sock, cwd, policy, env, stdin = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5]
s = socket.socket(socket.AF_UNIX); s.connect(sock)
s.sendall(frame({"hello": {"version": 1}})); read(s)
s.sendall(frame({"create": {"policy": policy, "origin": "p"}})); scope = read(s)["created"]["scope"]
r, w = os.pipe()
u = socket.socket(socket.AF_UNIX)
fds = [s.fileno() if stdin == "self" else u.fileno() if stdin == "unconnected" else os.open("/dev/null", os.O_RDONLY), w, w]
socket.send_fds(s, [frame({"spawn": {"scope": scope, "argv": ["/usr/bin/cat", "data"], "env": env, "cwd": cwd}})], fds)
os.close(w)
answers = []
while True:
    a = read(s); answers.append(a)
    if "exited" in a or "error" in a: break
print(json.dumps(answers)); print(os.read(r, 100).decode())
"#;
    output({
        let mut c = Command::new("/usr/bin/python3");
        c.arg("-c")
            .arg([PY_FRAMES, SCRIPT].concat())
            .arg(service.socket())
            .arg(cwd)
            .arg(ok(policy.to_json()))
            .arg(env)
            .arg(stdin)
            .uid(NOBODY)
            .gid(NOBODY);
        c
    })
}

/// A client that stops reading while its command runs is gone: the service's answers to it
/// cannot be written within `WRITE_WAIT`, so its connection is closed and its command killed,
/// and no blocked write keeps the command past its own timeout. The client floods requests
/// and reads nothing, then holds its connection open for two minutes.
#[test]
fn a_client_that_stops_reading_has_its_command_killed() {
    let service = start();
    let policy = all_of_ws(&service);
    const SCRIPT: &str = r#"
import time
sock, cwd, policy = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
s = socket.socket(socket.AF_UNIX); s.connect(sock)
s.sendall(frame({"hello": {"version": 1}})); read(s)
s.sendall(frame({"create": {"policy": policy, "origin": "p", "timeout_ms": 20000}}))
scope = read(s)["created"]["scope"]
null = os.open("/dev/null", os.O_RDWR)
socket.send_fds(s, [frame({"spawn": {"scope": scope, "argv": ["/usr/bin/sleep", "613"], "env": [], "cwd": cwd}})], [null, null, null])
read(s)
s.setblocking(False)
deadline = time.time() + 15
while time.time() < deadline:
    try: s.send(frame("list"))
    except BlockingIOError: time.sleep(0.01)
print("flooded", flush=True)
time.sleep(120)
"#;
    let mut client = ok({
        let mut c = Command::new("/usr/bin/python3");
        c.arg("-c")
            .arg([PY_FRAMES, SCRIPT].concat())
            .arg(service.socket())
            .arg(ws(&service))
            .arg(ok(policy.to_json()))
            .stdout(std::process::Stdio::piped())
            .uid(NOBODY)
            .gid(NOBODY);
        c.spawn()
    });
    let start = Instant::now();
    while pids_running("613").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the command never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its own timeout is 20 s and the service's write wait 10 s: both well before the client
    // lets go, two minutes on.
    let gone = Instant::now();
    while !pids_running("613").is_empty() && gone.elapsed() < Duration::from_secs(42) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = pids_running("613");
    let _ = client.kill();
    let _ = client.wait();
    assert!(
        left.is_empty(),
        "the command outlived a client that stopped reading: {left:?}\n{}",
        service.log()
    );
    // The service goes on serving others.
    let p = pub_policy(&service);
    let o = output(exec_as_nobody(&service, &p, &["/usr/bin/true"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// The service's privilege never lends the caller access: a working directory the caller
/// cannot reach is refused before the command runs, though root could enter it.
#[test]
fn a_working_directory_the_caller_cannot_reach_is_refused() {
    let service = start();
    let private = ws(&service).join("private");
    ok(std::fs::create_dir_all(private.join("open")));
    ok(std::fs::set_permissions(
        &private,
        std::fs::Permissions::from_mode(0o700),
    ));
    ok(std::fs::write(private.join("open/data"), "topsecret\n"));
    let compiled = all_of_ws(&service);
    // `bee exec` always sends its own working directory; a raw client can name any.
    let o = raw_spawn(&service, &private.join("open"), &compiled, "[]", "none");
    let out = text(&o.stdout);
    assert!(!out.contains("topsecret"), "{out}{}", stderr(&o));
    assert!(out.contains("\"error\""), "{out}{}", stderr(&o));
    assert!(out.contains("as the command's user"), "{out}{}", stderr(&o));
}

/// A caller in a sandbox of its own (here `no_new_privs`, which a Landlock domain or a
/// seccomp filter of an unprivileged process needs, as another agent's sandbox sets for its
/// commands) is refused at the door (77): its commands would run outside that sandbox. The
/// same caller without it is served.
#[test]
fn a_caller_in_a_sandbox_of_its_own_is_refused() {
    let service = start();
    let p = pub_policy(&service);
    let bee = bee_exe().display().to_string();
    let p = p.display().to_string();
    let run = |nnp: bool| {
        let script = format!(
            "import ctypes, os\n\
             if {nnp}: ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)\n\
             os.execv({bee:?}, [{bee:?}, 'exec', '--policy', {p:?}, '--', '/usr/bin/echo', 'ran'])",
            nnp = if nnp { "True" } else { "False" },
        );
        let mut c = Command::new("/usr/bin/python3");
        c.args(["-c", &script])
            .current_dir(ws(&service))
            .env("BEE_SOCKET", service.socket())
            .env("HOME", ws(&service))
            .uid(NOBODY)
            .gid(NOBODY);
        output(c)
    };
    let o = run(true);
    let err = stderr(&o);
    assert_eq!(code(&o), 77, "{err}");
    assert!(
        err.contains("the caller runs in a sandbox of its own (no_new_privs set)"),
        "{err}"
    );
    assert!(!text(&o.stdout).contains("ran"), "{err}");
    let o = run(false);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(text(&o.stdout).contains("ran"), "{}", stderr(&o));
}

/// A unix socket that is not connected, handed in as a command's standard input, would let
/// the scope connect to any socket on the host, which the Landlock engine does not decide:
/// refused before the command runs, naming the stream.
#[test]
fn a_socket_that_is_not_connected_is_no_standard_stream() {
    let service = start();
    let compiled = all_of_ws(&service);
    let o = raw_spawn(&service, &ws(&service), &compiled, "[]", "unconnected");
    let out = text(&o.stdout);
    assert!(out.contains("\"error\""), "{out}{}", stderr(&o));
    assert!(
        out.contains("its standard input is a socket that is not connected"),
        "{out}{}",
        stderr(&o)
    );
    assert!(!out.contains("\"spawned\""), "{out}");
}

/// A working directory inside a tree the request's own `fs.deny` hides is refused as in
/// process: 65, naming the rule, the command not run.
#[test]
fn a_working_directory_the_policy_hides_is_refused_with_its_rule_and_65() {
    let service = start();
    let tree = format!("{}/**", ws(&service).display());
    let toml = policy_text(&tree, &tree).replace(
        "write = [",
        &format!("deny = [\"{}/pub/**\"]\nwrite = [", ws(&service).display()),
    );
    let p = ws(&service).join("deny.toml");
    ok(std::fs::write(&p, toml));
    let inside = ws(&service).join("pub/sub");
    ok(std::fs::create_dir_all(&inside));
    ok(std::fs::set_permissions(
        &inside,
        std::fs::Permissions::from_mode(0o777),
    ));
    let mut cmd = exec_as_nobody(&service, &p, &["/usr/bin/echo", "ran"]);
    cmd.current_dir(&inside);
    let o = output(cmd);
    let err = stderr(&o);
    assert_eq!(code(&o), 65, "{err}");
    assert!(!text(&o.stdout).contains("ran"), "{err}");
    assert!(
        err.contains("the working directory") && err.contains("fs.deny[0]"),
        "{err}"
    );
}

/// A command's standard stream cannot be a connection to the service (it would outlive its
/// client, and hand a narrow scope the caller's whole ceiling), and environment names are
/// names.
#[test]
fn a_connection_to_the_service_and_a_bad_variable_name_are_refused_as_a_command_gets_them() {
    let service = start();
    let pub_dir = ws(&service).join("pub");
    ok(std::fs::write(pub_dir.join("data"), "ok\n"));
    let tree = format!("{}/pub/**", ws(&service).display());
    let options = CompileOptions {
        base: ws(&service),
        home: None,
    };
    let compiled = ok(compile_str("p.toml", &policy_text(&tree, &tree), &options)).policy;
    let works = raw_spawn(&service, &pub_dir, &compiled, "[]", "none");
    assert!(
        text(&works.stdout).contains("\"exited\""),
        "{}{}",
        text(&works.stdout),
        stderr(&works)
    );
    assert!(
        text(&works.stdout).contains("ok"),
        "{}",
        text(&works.stdout)
    );
    for (env, stdin, refusal) in [
        (
            "[]",
            "self",
            "a connection to the service cannot be a command's standard stream",
        ),
        (
            r#"[["A=B", "c"]]"#,
            "none",
            "is not an environment variable's name",
        ),
        (
            r#"[["", "c"]]"#,
            "none",
            "is not an environment variable's name",
        ),
    ] {
        let o = raw_spawn(&service, &pub_dir, &compiled, env, stdin);
        let out = text(&o.stdout);
        assert!(out.contains(refusal), "{env} {stdin}: {out}{}", stderr(&o));
        assert!(!out.contains("\"spawned\""), "{out}");
    }
}

/// A caller in a private mount namespace (a container, `unshare -m`) is refused: its command
/// would run in the service's, outside what confined the caller.
#[test]
fn a_caller_in_another_mount_namespace_is_refused() {
    let service = start();
    let p = pub_policy(&service);
    let o = output({
        let mut c = Command::new("/usr/bin/unshare");
        c.args(["-m", "--propagation", "private", "--"])
            .arg(bee_exe())
            .args(["exec", "--service", "always", "--policy"])
            .arg(&p)
            .args(["--", "/usr/bin/touch", "pub/ran"])
            .current_dir(ws(&service))
            .env("BEE_SOCKET", service.socket());
        c
    });
    let err = stderr(&o);
    assert_eq!(code(&o), 77, "{err}");
    assert!(err.contains("another mnt namespace"), "{err}");
    assert!(!ws(&service).join("pub/ran").exists());
}

/// The command gets the caller's own resource limits, not the service's.
#[test]
fn the_command_keeps_the_callers_limits() {
    let service = start();
    let p = pub_policy(&service);
    let o = output({
        let mut c = Command::new("/usr/bin/dash");
        c.arg("-c")
            .arg(format!(
                "ulimit -n 64 && ulimit -f 8 && ulimit -l 0 && exec {} exec --policy {} -- \
                 /usr/bin/dash -c 'ulimit -n; ulimit -H -f; ulimit -H -l'",
                bee_exe().display(),
                p.display()
            ))
            .current_dir(ws(&service))
            .env("BEE_SOCKET", service.socket())
            .uid(NOBODY)
            .gid(NOBODY);
        c
    });
    // Open files as asked; the file size (512-byte blocks) and locked memory hard limits
    // are the caller's too, not the service's.
    assert_eq!(text(&o.stdout), "64\n8\n0\n", "{}", stderr(&o));
}

/// The next service kills only what a dead one listed below bee's own cgroup: a listed
/// `bee/../x` (a planted or stale file) is not followed out of it.
#[test]
fn the_sweep_never_leaves_bees_cgroup() {
    let mount = support::cgroup2_mount().unwrap_or_else(|| unreachable!("no cgroup2 mount"));
    let victim = mount.join(format!("bee-test-victim-{}", std::process::id()));
    ok(std::fs::create_dir(&victim));
    let planted = format!(
        "{}/bee/../{}",
        mount.display(),
        victim
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let service = Service::start(
        "landlock",
        |dir| {
            let scopes = dir.join("scopes");
            ok(std::fs::create_dir(&scopes));
            ok(std::fs::set_permissions(
                &scopes,
                std::fs::Permissions::from_mode(0o700),
            ));
            ok(std::fs::write(scopes.join("planted"), &planted));
        },
        |_| policy_text("/tmp/none/**", "/tmp/none/**"),
    );
    let kept = victim.is_dir();
    let _ = std::fs::remove_dir(&victim);
    assert!(kept, "{}", service.log());
    assert!(
        !service.log().contains("removed the scope"),
        "{}",
        service.log()
    );
}

/// One uid holds at most 256 connections at once; the next is refused, and the service
/// still serves another user.
#[test]
fn one_user_cannot_take_every_connection() {
    let service = start();
    const SCRIPT: &str = r#"
held, refused, last = [], 0, ""
for i in range(300):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    try:
        s.sendall(frame({"hello": {"version": 1}}))
    except OSError:
        pass
    answer = read(s)
    if "welcome" in answer:
        held.append(s)
    else:
        refused += 1
        last = json.dumps(answer)
print(len(held), refused, last)
"#;
    let o = output({
        let mut c = Command::new("/usr/bin/python3");
        c.arg("-c")
            .arg([PY_FRAMES, SCRIPT].concat())
            .arg(service.socket())
            .uid(NOBODY)
            .gid(NOBODY);
        c
    });
    let out = text(&o.stdout);
    assert!(out.starts_with("256 44 "), "{out}{}", stderr(&o));
    assert!(out.contains("holds 256 connections"), "{out}");
    let o = another_caller(&service);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// `SCRIPT` (after [`PY_FRAMES`]) run as `nobody` against the service's socket, its first
/// line of output read: it holds connections until its standard input closes, which
/// `wait_with_output` on the child returned does.
fn hog(service: &Service, script: &str) -> (std::process::Child, String) {
    let mut c = Command::new("/usr/bin/python3");
    c.arg("-c")
        .arg([PY_FRAMES, script].concat())
        .arg(service.socket())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .uid(NOBODY)
        .gid(NOBODY);
    let mut child = ok(c.spawn());
    let mut line = String::new();
    let stdout = child.stdout.take().unwrap_or_else(|| unreachable!());
    ok(std::io::BufRead::read_line(
        &mut std::io::BufReader::new(stdout),
        &mut line,
    ));
    (child, line)
}

/// `~` in a ceiling is only a home the caller owns: `nobody`'s `/nonexistent` and `daemon`'s
/// `/usr/sbin` (root's) give no `~`, so a ceiling that writes `~/**` refuses them (69)
/// rather than grant a system tree or a path someone could create.
#[test]
fn a_ceiling_with_tilde_refuses_a_caller_without_a_home_of_its_own() {
    let service = start();
    ok(std::fs::write(
        service.dir.path().join("ceilings/default.toml"),
        policy_text("~/**", "~/**"),
    ));
    let p = pub_policy(&service);
    let daemon = ok(nix::unistd::User::from_name("daemon"))
        .unwrap_or_else(|| unreachable!("no user daemon"));
    for (uid, name) in [(NOBODY, "nobody"), (daemon.uid.as_raw(), "daemon")] {
        let mut cmd = exec_as_nobody(&service, &p, &["/usr/bin/true"]);
        cmd.uid(uid).gid(uid);
        let o = output(cmd);
        let err = stderr(&o);
        assert_eq!(code(&o), 69, "{name}: {err}{}", service.log());
        assert!(
            err.contains(&format!(
                "uid {uid} has no home directory of its own for `~`"
            )),
            "{name}: {err}"
        );
    }
}

/// `bee exec --service always` of `/usr/bin/true` as root, under `ws/pub`'s policy.
fn another_caller(service: &Service) -> Output {
    let p = pub_policy(service);
    output({
        let mut c = Command::new(bee_exe());
        c.args(["exec", "--service", "always", "--policy"])
            .arg(&p)
            .args(["--", "/usr/bin/true"])
            .current_dir(ws(service))
            .env("BEE_SOCKET", service.socket());
        c
    })
}

/// Connections over a uid's limit hold none of the service's: a uid that holds its 256 and
/// keeps opening more that never say hello (each turned away only after a wait for it) still
/// leaves room for others, here in a service of 270 connections.
#[test]
fn connections_turned_away_hold_no_slot_of_the_service() {
    let mut service = start();
    service.kill(libc::SIGTERM);
    service.args = vec!["--max-connections", "270"];
    service.spawn();
    const SCRIPT: &str = r#"
held = []
for i in range(256):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    s.sendall(frame({"hello": {"version": 1}})); assert "welcome" in read(s)
    held.append(s)
silent = []
for i in range(40):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); silent.append(s)
print("ready", flush=True)
sys.stdin.read()
"#;
    let (hog, line) = hog(&service, SCRIPT);
    assert_eq!(line, "ready\n");
    // Another caller, while the 40 silent connections wait to be turned away.
    let o = another_caller(&service);
    let _ = hog.wait_with_output();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// Half-sent frames hold at most eight frames' worth of the service's memory per uid (64 MiB):
/// a ninth connection of the same uid sending one is refused, the service's memory stays
/// within that, and another caller is served meanwhile.
#[test]
fn half_sent_frames_hold_a_bounded_share_of_the_services_memory() {
    let service = start();
    const SCRIPT: &str = r#"
import struct, time
size = 8 << 20
held, answers = [], []
for i in range(10):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    s.sendall(frame({"hello": {"version": 1}})); read(s)
    try:
        s.sendall(struct.pack(">I", size) + b" " * (size - 1))
        held.append(s)
    except OSError as e:
        held.append(None)
time.sleep(0.5)
for s in held:
    if s is None:
        answers.append("closed")
        continue
    s.setblocking(False)
    try:
        b = s.recv(1 << 16)
        answers.append(b[4:].decode() if b else "closed")
    except BlockingIOError:
        answers.append("waiting")
    except OSError:
        answers.append("closed")
print(json.dumps(answers), flush=True)
sys.stdin.read()
"#;
    let (hog, line) = hog(&service, SCRIPT);
    let status = std::fs::read_to_string(format!(
        "/proc/{}/status",
        service.pid().unwrap_or_default()
    ))
    .unwrap_or_default();
    let o = another_caller(&service);
    let hog = ok(hog.wait_with_output());
    let answers: Vec<String> = serde_json::from_str(line.trim())
        .unwrap_or_else(|e| unreachable!("{e}: {line}{}", stderr(&hog)));
    // The first eight wait for the rest of their frames; the service closed the last two
    // (mid-send, the client may not read the refusal itself).
    let want: Vec<&str> = [["waiting"; 8].as_slice(), &["closed"; 2]].concat();
    assert_eq!(
        answers
            .iter()
            .map(|a| if a.contains("unread frames") {
                "closed"
            } else {
                a.as_str()
            })
            .collect::<Vec<_>>(),
        want,
        "{answers:?}"
    );
    // Resident memory: the eight frames' 64 MiB and what the service holds anyway.
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    assert!(
        kib < 160 << 10,
        "the service's peak resident memory: {kib} KiB"
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// `--service always` (or `[enforcement] service = "always"`) insists on the service: a
/// session with none to ask is refused with 69 before any model call, and says what to do;
/// `bee config show` says where the choice came from.
#[test]
fn a_session_that_insists_on_the_service_is_refused_without_one() {
    let dir = ok(tempfile::tempdir());
    let file = |name: &str, text: &str| ok(std::fs::write(dir.path().join(name), text));
    file("p.toml", &policy_text("/tmp/none/**", "/tmp/none/**"));
    file("rec.jsonl", "{\"text\": \"done\"}\n");
    file(
        "provider.toml",
        "kind = \"replay\"\nfile = \"rec.jsonl\"\nmodel = \"m\"\n",
    );
    file(
        "scenario.toml",
        "name = \"s\"\nprompt = \"p\"\nworkspace = \".\"\nworkspace_mode = \"in-place\"\npolicy = \"p.toml\"\n",
    );
    ok(std::fs::create_dir(dir.path().join(".bee")));
    file(".bee/config.toml", "[enforcement]\nservice = \"always\"\n");
    let bee = |args: &[&str]| {
        output({
            let mut c = Command::new(bee_exe());
            c.args(args)
                .current_dir(dir.path())
                .env("HOME", dir.path())
                .env_remove("XDG_CONFIG_HOME")
                .env("BEE_SOCKET", dir.path().join("none.sock"));
            c
        })
    };
    let o = bee(&[
        "run",
        "--scenario",
        "scenario.toml",
        "--provider",
        "provider.toml",
    ]);
    let err = stderr(&o);
    assert_eq!(code(&o), 69, "{}{err}", text(&o.stdout));
    assert!(err.contains("no bee service answers at"), "{err}");
    assert!(err.contains("systemctl enable --now bee.socket"), "{err}");
    let o = bee(&["config", "show"]);
    let out = text(&o.stdout);
    assert!(
        out.lines().any(|l| l.contains("enforcement.service")
            && l.contains("always")
            && l.contains("config.toml")),
        "{out}"
    );
}

/// A request whose network rule only the Landlock engine's network gate can decide (one
/// address) is enforced through the service for an ordinary user: the gate, loaded by the
/// service as root, decides each peer of the caller's scope.
#[test]
fn an_ordinary_users_address_grant_is_decided_by_the_services_network_gate() {
    let listener = ok(std::net::TcpListener::bind("127.0.0.1:0"));
    let port = ok(listener.local_addr()).port();
    let net =
        format!("[[net.allow]]\naddr = [\"127.0.0.1/32\"]\nports = [{port}]\nproto = \"tcp\"\n");
    let service = start_granting(&net);
    let tree = format!("{}/pub/**", ws(&service).display());
    let p = ws(&service).join("net.toml");
    ok(std::fs::write(
        &p,
        format!("{}{net}", policy_text(&tree, &tree)),
    ));
    let script = format!(
        "echo hi > /dev/tcp/127.0.0.1/{port} && echo sent; \
         (echo x > /dev/tcp/127.0.0.2/{port}) 2>/dev/null || echo refused"
    );
    let o = output(exec_as_nobody(
        &service,
        &p,
        &["/usr/bin/bash", "-c", &script],
    ));
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}{}", service.log());
    assert_eq!(text(&o.stdout), "sent\nrefused\n", "{err}");
    let (mut conn, _) = ok(listener.accept());
    let mut got = String::new();
    ok(conn.read_to_string(&mut got));
    assert_eq!(got, "hi\n");
    assert!(
        err.contains(&format!("bee: denied: connect tcp 127.0.0.2:{port}")),
        "{err}"
    );
    assert_eq!(service.scopes_left_after_hangup(), 0);
}

/// An ordinary user's configured MCP server runs in a scope of the service's own, proven
/// within the ceiling, for the whole episode: its calls answer, what its policy lacks the
/// kernel refuses and the refusal is that call's, and nothing outlives the run.
#[cfg(feature = "mcp")]
#[test]
fn an_ordinary_users_mcp_server_runs_in_a_scope_of_the_service() {
    let service = start();
    ceiling_with_bee(&service);
    let ws = ws(&service);
    let server = ws.join("bad_server.js");
    ok(std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/bad_server.js"),
        &server,
    ));
    ok(std::fs::write(ws.join("pub/ok.txt"), "fine\n"));
    let tree = format!("{}/**", ws.display());
    let pub_tree = format!("{}/pub/**", ws.display());
    let session = policy(&service, "session.toml", &tree, &pub_tree);
    // The server reads its script and `pub/`, not the secret the session may read.
    let server_policy = ws.join("server.toml");
    ok(std::fs::write(
        &server_policy,
        policy_text(&pub_tree, &pub_tree).replace(
            "read = [",
            &format!("read = [{:?}, ", server.display().to_string()),
        ),
    ));
    ok(std::fs::create_dir_all(ws.join(".bee")));
    ok(std::fs::write(
        ws.join(".bee/config.toml"),
        format!(
            "[mcp.servers.bad]\ncommand = \"/usr/bin/node\"\nargs = [{:?}, \"echo\"]\npolicy = {:?}\n",
            server.display().to_string(),
            server_policy.display().to_string()
        ),
    ));
    let calls = [
        r#"{"tool_calls": [{"id": "ok", "name": "bad__echo", "arguments": {"path": "pub/ok.txt"}}]}"#,
        r#"{"tool_calls": [{"id": "no", "name": "bad__echo", "arguments": {"path": "secret"}}]}"#,
        r#"{"text": "done"}"#,
    ];
    let (o, records) = run_as_nobody(&service, &session, &calls);
    let err = support::stderr(&o);
    assert_eq!(code(&o), 0, "{}{err}{}", text(&o.stdout), service.log());
    let text = transcript_text(&records);
    let allowed = support::tool_result(&text, "ok");
    assert_eq!(allowed["state"], "completed", "{allowed}");
    assert_eq!(allowed["output"], "fine\n", "{allowed}");
    let refused = support::tool_result(&text, "no");
    assert_eq!(refused["state"], "failed", "{refused}");
    let out = refused["output"].as_str().unwrap_or_default();
    assert!(
        out.contains(&format!(
            "denied by policy: open {}/secret for read: no fs.read grant covers it",
            ws.display()
        )),
        "{out}"
    );
    assert!(!out.contains("hush"), "{out}");
    assert!(
        text.lines()
            .any(|l| l.contains("\"event\":\"denial\"") && l.contains("\"call_id\":\"no\"")),
        "{text}"
    );
    assert!(
        support::processes_with(&server.display().to_string()).is_empty(),
        "the server outlived the run"
    );
    assert_eq!(service.scopes_left_after_hangup(), 0, "{}", service.log());
}
