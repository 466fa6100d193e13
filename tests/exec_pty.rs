//! `bee exec` on a terminal, under the Landlock engine on this host: the real binary in a
//! pseudo-terminal, started by a shell that sizes it, runs bee and then prints the terminal's
//! mode. The command gets a pseudo-terminal of its own as its controlling terminal, sized as
//! the outer one and resized with it; Ctrl-C reaches it through the line discipline; its exit
//! status comes back; the outer terminal's mode is restored; the policy still confines. Needs
//! root and Landlock (feature `landlock-tests`).

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::process::Healthcheck as _;
use expectrl::process::unix::{PtyStream, UnixProcess, WaitStatus};
use expectrl::{ControlCode, Expect as _, Session};

type Pty = Session<UnixProcess, PtyStream>;

/// The loader, the libraries and the programs the scripts use; `SECRET`'s directory is not
/// readable.
const POLICY: &str = r#"version = 1
[fs]
read = ["/usr/lib/**", "/etc/ld.so.cache", "/etc/passwd", "/etc/group", "/usr/share/locale/**", "/dev/tty", "WS/**"]
write = ["/dev/null", "/dev/tty", "/dev/pts/**", "WS/**"]
[exec]
allow = ["/usr/lib/x86_64-linux-gnu/**", "/usr/bin/**"]
"#;

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(dir.path().join("secret"), "top secret\n").unwrap();
        let policy = POLICY.replace("WS", &ws.display().to_string());
        std::fs::write(dir.path().join("p.toml"), policy).unwrap();
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `bee exec --engine landlock -- /usr/bin/dash -c SCRIPT` in a 30×100 pseudo-terminal
    /// with echo on, followed by its status (`rc=N`) and whether the mode came back.
    fn spawn(&self, script: &str) -> Pty {
        let p = self.path();
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg(
                "read go; stty echo; mode=$(stty -g); \
                 \"$0\" exec --engine landlock --policy p.toml -- /usr/bin/dash -c \"$1\"; \
                 echo \"rc=$?\"; test \"$(stty -g)\" = \"$mode\" && echo mode-restored; \
                 echo end-of-run",
            )
            .arg(env!("CARGO_BIN_EXE_bee"))
            .arg(script)
            .current_dir(p)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", p)
            .env("TERM", "xterm");
        let mut s = Session::spawn(c).unwrap();
        s.set_expect_timeout(Some(Duration::from_secs(20)));
        // Sized once the session is up, then the shell goes on.
        s.get_process_mut().set_window_size(100, 30).unwrap();
        s.send("go\r").unwrap();
        s
    }
}

/// Everything the terminal shows until `text`, `text` included.
fn until(s: &mut Pty, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let found = loop {
        match s.expect(text) {
            Ok(found) => break found,
            // A read of the terminal before the shell has opened its side ends at once: again.
            Err(expectrl::Error::Eof) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("waiting for {text:?}: {e}"),
        }
    };
    let mut seen = String::from_utf8_lossy(found.before()).into_owned();
    for m in found.matches() {
        seen.push_str(&String::from_utf8_lossy(m));
    }
    seen
}

/// The outer shell's end: bee's status and whether the terminal's mode is back to what it
/// was before bee (`stty -g`), and all that came after the status.
fn status_and_mode(s: &mut Pty) -> (i32, String) {
    let seen = until(s, "rc=");
    let line = until(s, "\n");
    let code = line.trim().parse().unwrap_or(-1);
    let rest = until(s, "end-of-run");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !matches!(s.get_process().get_status(), Ok(WaitStatus::Exited(..))) {
        assert!(Instant::now() < deadline, "the outer shell did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(code >= 0, "no status: {seen}{line}");
    assert!(
        rest.contains("mode-restored"),
        "the terminal's mode is not back: {rest}"
    );
    (code, rest)
}

#[test]
fn the_command_gets_its_own_terminal_sized_as_bees_and_its_status_comes_back() {
    let f = Fixture::new();
    let mut s = f.spawn(
        "tty; test -t 0 && test -t 1 && test -t 2 && echo all-terminals; \
         exec 3</dev/tty && echo has-a-controlling-terminal; stty size; read line; exit 7",
    );
    let seen = until(&mut s, "\n30 100");
    s.send("\r").unwrap();
    assert!(seen.contains("/dev/pts/"), "{seen}");
    assert!(seen.contains("all-terminals"), "{seen}");
    assert!(seen.contains("has-a-controlling-terminal"), "{seen}");
    let (code, mode) = status_and_mode(&mut s);
    assert_eq!(code, 7, "{mode}");
}

#[test]
fn a_resize_of_bees_terminal_reaches_the_command_and_ctrl_c_ends_it() {
    let f = Fixture::new();
    let mut s = f.spawn(
        "trap 'stty size' WINCH; echo ready; while :; do /usr/bin/sleep 0.1; done; echo after",
    );
    until(&mut s, "ready");
    s.get_process_mut().set_window_size(120, 40).unwrap();
    until(&mut s, "40 120");
    s.send(ControlCode::EndOfText).unwrap();
    let (code, mode) = status_and_mode(&mut s);
    assert_eq!(code, 130, "{mode}");
    assert!(!mode.contains("after"), "{mode}");
}

/// A program with no `SIGINT` handler of its own, which is the command itself (the shell
/// `exec`s it), ends on Ctrl-C: under the Landlock engine it runs below its PID namespace's
/// init, not as that init, which the kernel would send only the signals it handles.
#[test]
fn ctrl_c_ends_a_command_that_has_no_handler() {
    let f = Fixture::new();
    let mut s = f.spawn("echo ready; exec /usr/bin/sleep 30");
    until(&mut s, "ready");
    std::thread::sleep(Duration::from_millis(200));
    s.send(ControlCode::EndOfText).unwrap();
    let (code, mode) = status_and_mode(&mut s);
    assert_eq!(code, 130, "{mode}");
}

#[test]
fn input_is_relayed_and_ctrl_c_ends_a_cat_with_130() {
    let f = Fixture::new();
    let mut s = f.spawn("echo ready; /usr/bin/cat; echo after");
    until(&mut s, "ready");
    s.send("hello bee\r").unwrap();
    // The pseudo-terminal's echo, then cat's copy.
    let seen = until(&mut s, "hello bee");
    let seen = seen + &until(&mut s, "hello bee");
    assert!(!seen.contains("after"), "{seen}");
    s.send(ControlCode::EndOfText).unwrap();
    let (code, mode) = status_and_mode(&mut s);
    assert_eq!(code, 130, "{mode}");
}

#[test]
fn the_policy_still_confines_a_command_on_a_terminal() {
    let f = Fixture::new();
    let secret = f.path().join("secret");
    let mut s = f.spawn(&format!(
        "test -t 0 && echo on-a-terminal; /usr/bin/cat {}; echo cat=$?",
        secret.display()
    ));
    let seen = until(&mut s, "cat=");
    assert!(seen.contains("on-a-terminal"), "{seen}");
    assert!(seen.contains("Permission denied"), "{seen}");
    let (code, mode) = status_and_mode(&mut s);
    assert!(!seen.contains("top secret"), "{seen}");
    assert!(!mode.contains("top secret"), "{mode}");
    assert_eq!(code, 0, "{seen}{mode}");
}

/// SIGTERM to bee kills the command's scope and removes it, restores the terminal, and then
/// ends bee by SIGTERM.
#[test]
fn sigterm_to_bee_removes_the_scope_and_restores_the_terminal_before_ending_bee() {
    let f = Fixture::new();
    // A duration no other process names.
    let token = format!("3{}.7", std::process::id());
    let mut s = f.spawn(&format!("echo ready; /usr/bin/sleep {token}; echo after"));
    until(&mut s, "ready");
    let deadline = Instant::now() + Duration::from_secs(20);
    let sleep = loop {
        if let Some(p) = support::processes_with(&token)
            .into_iter()
            .find(|p| p.contains(": /usr/bin/sleep "))
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the sleep never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let scope = support::cgroup_of(sleep.split(':').next().unwrap()).unwrap();
    assert!(scope.is_dir(), "{}", scope.display());
    // bee is the outer shell's only child.
    let shell = s.get_process().pid().as_raw();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
    let bee: libc::pid_t = children.trim().parse().unwrap();
    // SAFETY: kill(2) of a child of this test's own shell.
    assert_eq!(unsafe { libc::kill(bee, libc::SIGTERM) }, 0);
    let (code, rest) = status_and_mode(&mut s);
    assert_eq!(code, 128 + libc::SIGTERM, "{rest}");
    assert!(!rest.contains("after"), "{rest}");
    assert!(
        !scope.exists(),
        "{} was left behind: {rest}",
        scope.display()
    );
    assert_eq!(support::processes_with(&token), Vec::<String>::new());
}

/// `bee exec` in `dir` with `pty` (`auto`, `always` or `never`) and piped streams: `input`
/// on its stdin, its output and status back.
fn piped(dir: &Path, pty: &str, script: &str, input: &str) -> (String, i32) {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_bee"))
        .args([
            "exec", "--engine", "landlock", "--policy", "p.toml", "--pty", pty,
        ])
        .args(["--", "/usr/bin/dash", "-c", script])
        .current_dir(dir)
        .env("HOME", dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    (out, o.status.code().unwrap_or(-1))
}

#[test]
fn without_a_terminal_the_command_keeps_bees_streams_unless_a_pty_is_asked_for() {
    let f = Fixture::new();
    let script = "tty; /usr/bin/cat; exit 5";
    // `auto` with pipes: bee's streams as they are, exactly as before.
    let (out, code) = piped(f.path(), "auto", script, "piped in\n");
    assert_eq!((out.as_str(), code), ("not a tty\npiped in\n", 5));
    let (out, code) = piped(f.path(), "never", script, "piped in\n");
    assert_eq!((out.as_str(), code), ("not a tty\npiped in\n", 5));
    // `always`: a terminal all the same; bee's input is relayed (and echoed by the
    // terminal) and its end is the terminal's end of file, which ends cat.
    let (out, code) = piped(f.path(), "always", script, "piped in\n");
    assert!(out.contains("/dev/pts/"), "{out}");
    assert_eq!(out.matches("piped in\r\n").count(), 2, "{out}");
    assert_eq!(code, 5, "{out}");
}
