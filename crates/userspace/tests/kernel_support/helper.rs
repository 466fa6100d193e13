//! Running the test binary as a helper: the parent re-executes itself with the action in the
//! environment ([`HELPER_ENV`]), in a cgroup, optionally as another user and with a
//! descriptor 3; the child parses the action once and exits with its errno.

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

use super::{Action, Cgroup, command_in};

/// Holds the helper's action (its words joined by U+001F) in the child's environment.
pub const HELPER_ENV: &str = "BEE_KT_HELPER";

/// The test binary's arguments that run only its helper entry.
const HELPER_ARGS: [&str; 6] = [
    "--ignored",
    "--exact",
    "helper_entry",
    "--test-threads=1",
    "--nocapture",
    "-q",
];

/// The test binary re-executed as the helper for `action`, joining `cg` (if given).
fn helper_command(cg: Option<&Cgroup>, action: &Action) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = command_in(cg, exe.to_str().unwrap());
    cmd.args(HELPER_ARGS)
        .env(HELPER_ENV, action.words().join("\u{1f}"));
    cmd
}

/// The helper doing `action` as a launch of bee's launcher (into a scope, by its engine),
/// standard output piped.
pub fn helper_spec(action: &Action) -> bee_userspace::launch::LaunchSpec {
    bee_userspace::launch::LaunchSpec::new(std::env::current_exe().unwrap())
        .args(HELPER_ARGS)
        .env(HELPER_ENV, action.words().join("\u{1f}"))
        .stdout(bee_userspace::launch::StdioMode::Piped)
}

/// Runs the test binary as a helper doing `action` in `cg`; the exit code is the errno of the
/// operation (0 on success).
pub fn helper(cg: Option<&Cgroup>, action: Action) -> Output {
    helper_with(cg, None, None, action)
}

/// As [`helper`], but the helper drops to `uid` (and gid `uid`, no supplementary groups) after
/// joining `cg`: an unprivileged user with no capabilities.
pub fn helper_as(cg: &Cgroup, uid: u32, action: Action) -> Output {
    helper_with(Some(cg), Some(uid), None, action)
}

/// Starts the helper doing `action` in `cg` without waiting, with stdin and stdout piped.
pub fn helper_spawn(cg: &Cgroup, action: Action) -> std::process::Child {
    helper_command(Some(cg), &action)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Sends `file` over a new socket pair and returns the receiving end, for a child's fd 3.
pub fn socket_with_fd(file: &fs::File) -> std::os::fd::OwnedFd {
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut sv = [0i32; 2];
    // SAFETY: socketpair and sendmsg on owned descriptors with stack buffers.
    unsafe {
        assert_eq!(
            libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()),
            0
        );
        let mut data = *b"x";
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let space = libc::CMSG_SPACE(size_of::<i32>() as u32) as usize;
        let mut control = vec![0u8; space];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<i32>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), file.as_raw_fd());
        assert_eq!(libc::sendmsg(sv[0], &msg, 0), 1);
        libc::close(sv[0]);
        std::os::fd::OwnedFd::from_raw_fd(sv[1])
    }
}

/// Runs the helper doing `action` in `cg` with `fd` as its descriptor 3.
pub fn helper_with_fd3(cg: &Cgroup, action: Action, fd: &std::os::fd::OwnedFd) -> Output {
    use std::os::fd::AsRawFd;
    helper_with(Some(cg), None, Some(fd.as_raw_fd()), action)
}

/// Runs the helper doing `action` in `cg` (if given), with `fd3` (if given) as its descriptor
/// 3, as `uid` (if given: gid `uid`, no supplementary groups, no capabilities).
pub fn helper_with(
    cg: Option<&Cgroup>,
    uid: Option<u32>,
    fd3: Option<std::os::fd::RawFd>,
    action: Action,
) -> Output {
    let mut cmd = helper_command(cg, &action);
    // SAFETY: dup2, setgroups, setgid and setuid are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = fd3
                && libc::dup2(fd, 3) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(uid) = uid
                && (libc::setgroups(0, std::ptr::null()) < 0
                    || libc::setgid(uid) < 0
                    || libc::setuid(uid) < 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().unwrap()
}

/// Body of the `helper_entry` test: with [`HELPER_ENV`] set, parses the action once, does it
/// and exits with its errno (255 for words that name no action); otherwise does nothing.
pub fn helper_main() {
    let Ok(spec) = std::env::var(HELPER_ENV) else {
        return;
    };
    let words: Vec<&str> = spec.split('\u{1f}').collect();
    let code = match Action::parse(&words) {
        Ok(action) => action.run(),
        Err(e) => {
            eprintln!("helper {spec:?}: {e}");
            255
        }
    };
    eprintln!("helper {spec:?}: errno {code}");
    std::process::exit(code);
}
