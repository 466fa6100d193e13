//! `bee serve`: the one privileged bee process, and the protocol its clients speak.
//!
//! The service loads the enforcement engine once and listens on a unix socket (default
//! [`DEFAULT_SOCKET`]). A client — `bee exec` run by an ordinary user, or any program —
//! sends a compiled policy; the service proves it within the caller's ceiling
//! ([`ceiling`]; from inside a scope, within that scope's policy), makes the scope, and
//! starts commands in it as the caller's own user with the standard streams the client
//! passed. Who the caller is comes from the kernel ([`peer`]), never from the request.
//!
//! - [`protocol`]: the messages and their frames;
//! - [`wire`]: frames and file descriptors on the socket;
//! - [`peer`]: the caller's credentials, pidfd and cgroup;
//! - [`ceiling`]: which ceiling applies, and the proof;
//! - [`server`]: the service and its connections;
//! - [`client`]: the client side.
//!
//! `docs/serve.md` describes installing, the protocol and the lifecycle.

pub mod ceiling;
pub mod client;
pub mod peer;
pub mod protocol;
pub mod server;
pub mod wire;

/// Where the service listens unless told otherwise, and where clients look for it.
pub const DEFAULT_SOCKET: &str = "/run/bee/bee.sock";

/// The environment variable that points clients at another socket.
pub const SOCKET_ENV: &str = "BEE_SOCKET";

/// The socket clients use: [`SOCKET_ENV`] when set and not empty, else [`DEFAULT_SOCKET`].
pub fn socket_path() -> std::path::PathBuf {
    std::env::var_os(SOCKET_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| DEFAULT_SOCKET.into(), std::path::PathBuf::from)
}
