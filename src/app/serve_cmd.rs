//! `bee serve`: the privileged service ordinary users' commands are confined through.
//!
//! Order, failing closed: refuse with 77 unless this process can start commands as other
//! users (root); open the engine once ([`enforcement::open_enforcer`]: 69 or 77 as every
//! command refuses); open the bee cgroup; take the listening socket (systemd's, when started
//! by socket activation, else bind `--socket`, refusing with 69 when another service answers
//! there); kill what an earlier service left ([`Service::sweep`]); serve until SIGTERM, SIGINT
//! or SIGHUP, then tear every scope down and remove the socket it bound.

use std::ffi::CString;
use std::os::fd::FromRawFd as _;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::serve::ceiling;
use crate::serve::server::{Service, ServiceConfig};

use super::Exit;
use super::enforcement::{self, Refusal};

/// Arguments of `bee serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The socket to listen on (ignored when systemd passes one).
    #[arg(long, value_name = "PATH", default_value = crate::serve::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// The socket's permission bits, in octal. Who may connect is not who may confine: each
    /// request is still proven within the caller's ceiling.
    #[arg(long, value_name = "OCTAL", default_value = "666", value_parser = parse_mode)]
    mode: u32,
    /// The socket's group (a name), e.g. to pair with `--mode 660`.
    #[arg(long, value_name = "GROUP")]
    group: Option<String>,
    /// The ceilings directory: `user/NAME.toml`, `group/NAME.toml`, `default.toml`.
    #[arg(long, value_name = "DIR", default_value = ceiling::DEFAULT_DIR)]
    ceilings: PathBuf,
    /// The enforcement engine of every scope.
    #[arg(long, value_name = "ENGINE", default_value = "auto")]
    engine: enforcement::EngineChoice,
    /// Where live scopes are listed for the next service [default: `scopes` beside the
    /// socket].
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// The most connections served at once.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    max_connections: usize,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{s:?} is not permission bits in octal (e.g. 660)"))
}

/// Runs `bee serve` until it is told to stop.
pub fn run(args: &Args) -> Exit {
    match serve(args) {
        Ok(()) => Exit::Ok,
        Err(exit) => exit,
    }
}

fn serve(args: &Args) -> Result<(), Exit> {
    let refused = |r: Refusal| {
        eprint!("{}", r.render("bee serve", "nothing is served"));
        r.exit()
    };
    if !nix::unistd::Uid::effective().is_root() {
        return Err(refused(
            Refusal::no_permission(
                "bee serve starts each command as its caller's user and makes and confines scopes for every user: it needs root (CAP_SETUID, CAP_SETGID, CAP_SYS_ADMIN, and CAP_BPF for the BPF LSM)",
            )
            .with_fix("start it as root, once per machine: `systemctl enable --now bee.socket` (packaging/systemd, docs/serve.md)"),
        ));
    }
    let opened = enforcement::open_enforcer(args.engine, &[]).map_err(refused)?;
    let parent = enforcement::cgroup_parent().map_err(refused)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).map_err(|e| {
            fail(
                Exit::Software,
                &format!("cannot handle signal {signal}: {e}"),
            )
        })?;
    }
    let (listener, bound) = match systemd_listener() {
        Some(l) => (l, None),
        None => (bind(args)?, Some(args.socket.clone())),
    };
    let state_dir = args.state_dir.clone().unwrap_or_else(|| {
        args.socket
            .parent()
            .unwrap_or(Path::new("/run/bee"))
            .join("scopes")
    });
    let config = ServiceConfig {
        ceilings: args.ceilings.clone(),
        state_dir,
        max_connections: args.max_connections,
    };
    let service = Service::new(
        Arc::clone(&opened.enforcer),
        opened.engine,
        parent,
        config,
        stop,
    )
    .map_err(|e| fail(Exit::CantCreat, &format!("the state directory: {e}")))?;
    let service = Arc::new(service);
    for line in service.sweep() {
        eprintln!("bee serve: {line}");
    }
    if let Some(banner) = opened.banner() {
        eprintln!("{banner}");
    }
    eprintln!(
        "bee serve: listening on {} (engine {}, ceilings in {})",
        bound
            .as_deref()
            .unwrap_or(Path::new("the socket systemd passed"))
            .display(),
        opened.engine,
        args.ceilings.display()
    );
    // No ceiling grants anything then, so every request is refused: say so where the
    // operator looks, rather than only to each refused user.
    if !args.ceilings.is_dir() {
        eprintln!(
            "bee serve: warning: the ceilings directory {} is not a directory: every request \
             is refused (77) until a ceiling is there (docs/serve.md)",
            args.ceilings.display()
        );
    }
    let served = service.serve(&listener);
    if let Some(path) = bound {
        let _ = std::fs::remove_file(path);
    }
    served.map_err(|e| fail(Exit::Software, &format!("the socket: {e}")))
}

/// The listening socket systemd passed (`LISTEN_PID` is this process, `LISTEN_FDS` ≥ 1: the
/// first is descriptor 3), if any.
fn systemd_listener() -> Option<UnixListener> {
    let pid: u32 = std::env::var("LISTEN_PID").ok()?.parse().ok()?;
    let fds: u32 = std::env::var("LISTEN_FDS").ok()?.parse().ok()?;
    if pid != std::process::id() || fds < 1 {
        return None;
    }
    // SAFETY: systemd passes descriptor 3 to this process, for it to own.
    Some(unsafe { UnixListener::from_raw_fd(3) })
}

/// Binds `--socket`: makes its directory, replaces a stale socket file, sets mode and group.
fn bind(args: &Args) -> Result<UnixListener, Exit> {
    let path = &args.socket;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            fail(
                Exit::CantCreat,
                &format!("cannot make {}: {e}", dir.display()),
            )
        })?;
    }
    if UnixStream::connect(path).is_ok() {
        return Err(fail(
            Exit::Unavailable,
            &format!("another service already answers at {}", path.display()),
        ));
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt as _;
        if !meta.file_type().is_socket() {
            return Err(fail(
                Exit::CantCreat,
                &format!("{} exists and is not a socket", path.display()),
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path).map_err(|e| {
        fail(
            Exit::CantCreat,
            &format!("cannot listen on {}: {e}", path.display()),
        )
    })?;
    if let Some(group) = &args.group {
        let gid = nix::unistd::Group::from_name(group)
            .ok()
            .flatten()
            .ok_or_else(|| fail(Exit::Usage, &format!("no group named {group:?}")))?
            .gid;
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| fail(Exit::Usage, "the socket path holds a NUL byte"))?;
        // SAFETY: a NUL-terminated path; chown(2) with uid -1 keeps the owner.
        if unsafe { libc::chown(c.as_ptr(), u32::MAX, gid.as_raw()) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(fail(
                Exit::CantCreat,
                &format!("cannot give {} to {group}: {e}", path.display()),
            ));
        }
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(args.mode)).map_err(|e| {
        fail(
            Exit::CantCreat,
            &format!("cannot set the mode of {}: {e}", path.display()),
        )
    })?;
    Ok(listener)
}

fn fail(exit: Exit, message: &str) -> Exit {
    eprintln!("bee serve: {message}");
    exit
}
