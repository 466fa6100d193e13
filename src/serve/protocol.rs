//! The messages of `bee serve`'s protocol, version [`VERSION`], and their frames.
//!
//! A frame is a 4-byte big-endian length N (1 ≤ N ≤ [`MAX_FRAME`]) followed by N bytes of one
//! JSON value: a [`Request`] from the client, a [`Response`] from the service. File
//! descriptors travel as `SCM_RIGHTS` with the bytes of the one request that takes them
//! ([`Request::Spawn`]). [`decode`] is the whole of the parsing, shared by both sides and by
//! the frame fuzz target; `docs/serve.md` shows the exchange.

use bee_core::CompiledPolicy;
use bee_userspace::audit::AuditRecord;
use serde::{Deserialize, Serialize};

/// The protocol version this build speaks. A client states it in [`Request::Hello`]; the
/// service answers another with [`Response::Error`] and closes.
pub const VERSION: u32 = 1;

/// The largest frame body either side accepts, in bytes (8 MiB). A policy is sent compiled;
/// 10,000 rules take about 2 MiB.
pub const MAX_FRAME: usize = 8 << 20;

/// The length prefix's size, in bytes.
pub const HEADER: usize = 4;

/// What a client asks. The first request of a connection is [`Request::Hello`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Opens the conversation: the client's protocol version.
    Hello {
        /// Must be [`VERSION`].
        version: u32,
    },
    /// Asks which engine enforces and what the caller's ceiling is ([`Response::Welcome`]).
    Check,
    /// Creates a scope confined by `policy`, granted only when the policy is proven within the
    /// caller's ceiling (or, from inside a scope, within that scope's policy).
    Create {
        /// The policy, compiled by the client (with the client's own access to its files).
        /// The service trusts nothing in it: it is proven against the ceiling and planned.
        policy: Box<CompiledPolicy>,
        /// Where the policy came from, for messages (a file name).
        origin: String,
        /// Kill the scope's processes after this many milliseconds.
        #[serde(default)]
        timeout_ms: Option<u64>,
        /// Learn mode (`bee exec --learn`, `bee run --learn`): the scope allows and reports
        /// every denial a policy could lift ([`AuditRecord::learn`]). It lets the command do
        /// what any policy could grant, so it is granted only where the caller's bound
        /// grants everything ([`super::ceiling::everything`]), and only by the BPF LSM
        /// engine. Left out when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        learn: bool,
    },
    /// Starts a command in a scope of this connection, as the caller's user. The frame
    /// carries the command's stdin, stdout and stderr as three descriptors. The service
    /// answers [`Response::Spawned`], then the scope's denials as [`Response::Record`]s as
    /// they come (the last ones once the command ended), and [`Response::Exited`]; meanwhile
    /// only [`Request::Kill`] is read.
    Spawn {
        /// The scope, as [`Response::Created`] named it.
        scope: u64,
        /// The program and its arguments (`argv[0]` is looked up in `PATH` when it has no
        /// `/`).
        argv: Vec<String>,
        /// The whole environment of the command.
        env: Vec<(String, String)>,
        /// Its working directory (absolute).
        cwd: String,
        /// Its resource limits; each is lowered to the caller's own hard limit.
        #[serde(default)]
        limits: Limits,
        /// The stdin descriptor is a terminal to make the command's controlling terminal (a
        /// pseudo-terminal the caller opened for it): it must be a terminal the caller owns,
        /// open for reading and writing. Left out when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        terminal: bool,
    },
    /// Kills every process of a scope of this connection; the scope stays.
    Kill {
        /// The scope.
        scope: u64,
    },
    /// Replaces a scope's policy (for `/allow`); proven within the ceiling as at creation.
    Replace {
        /// The scope.
        scope: u64,
        /// The new policy.
        policy: Box<CompiledPolicy>,
    },
    /// Lists this connection's scopes ([`Response::Scopes`]).
    List,
    /// Tears a scope down: kills what is left, collects its last records, removes it.
    Close {
        /// The scope.
        scope: u64,
    },
}

/// What the service answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Response {
    /// The answer to [`Request::Hello`] and [`Request::Check`].
    Welcome(Welcome),
    /// A scope was made.
    Created {
        /// Its id (its cgroup's id), for the requests that name it.
        scope: u64,
        /// The engine that enforces it (`bpf-lsm` or `landlock`).
        engine: String,
    },
    /// A command started.
    Spawned {
        /// Its pid, in the service's PID namespace.
        pid: u32,
    },
    /// One audit record of a scope (a denial, or in learn mode an allowed access).
    Record(Box<AuditRecord>),
    /// Audit records the kernel lost while the command ran, counted since the last `lost`
    /// (or the `spawned`): any may have been one of the scope's denials, so the records sent
    /// may be incomplete. Sent beside the records as the service learns of them, so that the
    /// client of a long-lived command (an MCP server) can say so while it runs; `exited`'s
    /// `lost_records` is their total.
    Lost {
        /// How many, at least 1.
        records: u64,
    },
    /// The command ended; every record it caused was sent before this.
    Exited {
        /// Its exit status as a shell reports it: the code, or 128 + the signal number.
        code: i32,
        /// True when it was killed at the scope's timeout.
        timed_out: bool,
        /// How many of the kernel's audit records were lost while it ran: the records sent
        /// may miss denials. Absent when none were.
        #[serde(default, skip_serializing_if = "is_zero")]
        lost_records: u64,
    },
    /// This connection's scopes.
    Scopes(Vec<ScopeInfo>),
    /// The request was carried out.
    Done,
    /// The request was refused or failed; the connection stays usable unless the frame
    /// itself was bad.
    Error(ErrorBody),
}

/// Whether `n` is 0 (a field left out of a frame when it is).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Resource limits of a command (`setrlimit(2)`, each as soft and hard limit); `None`
/// leaves one as the service's launcher sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// `RLIMIT_NOFILE`.
    pub nofile: Option<u64>,
    /// `RLIMIT_NPROC`.
    pub nproc: Option<u64>,
    /// `RLIMIT_CPU`, in seconds.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_AS`, in bytes.
    pub address_space: Option<u64>,
}

/// The answer to [`Request::Hello`]: who the service is and who it takes the caller for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    /// The protocol version ([`VERSION`]).
    pub version: u32,
    /// The service's bee version (`CARGO_PKG_VERSION`).
    pub bee: String,
    /// The engine that enforces every scope (`bpf-lsm` or `landlock`).
    pub engine: String,
    /// The caller's uid, from `SO_PEERCRED`.
    pub uid: u32,
    /// What bounds the caller's requests: the ceiling files that apply, or the scope the
    /// caller runs in. Empty: nothing does, and every request is refused.
    pub ceiling: Vec<String>,
}

/// One scope in [`Response::Scopes`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeInfo {
    /// Its id.
    pub scope: u64,
    /// The policy's origin as the client named it.
    pub origin: String,
    /// Whether a command of it is running.
    pub running: bool,
}

/// Why a request was refused: the exit status a command reports for it (sysexits) and the
/// text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// 64 bad request, 65 a policy refused (not within the ceiling, or not enforceable), 69
    /// the service cannot enforce, 70 an internal failure, 77 not permitted, 126/127 a
    /// command that could not be started or found.
    pub status: u8,
    /// One sentence.
    pub message: String,
    /// More lines: the counterexamples of a refused proof, a plan's refused rules.
    #[serde(default)]
    pub details: Vec<String>,
}

impl ErrorBody {
    /// An error with no details.
    pub fn new(status: u8, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            details: Vec::new(),
        }
    }
}

impl std::fmt::Display for ErrorBody {
    /// The message, then each detail on a line of its own, indented by two spaces.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        for line in &self.details {
            write!(f, "\n  {line}")?;
        }
        Ok(())
    }
}

/// Why bytes are not a frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// The length prefix is 0 or over [`MAX_FRAME`].
    #[error("a frame of {0} bytes (the most is {MAX_FRAME})")]
    Length(usize),
    /// The body is not the JSON of a message of this version.
    #[error("not a message of protocol version {VERSION}: {0}")]
    Body(String),
}

/// The length a frame header announces.
///
/// # Errors
/// [`FrameError::Length`] for 0 or more than [`MAX_FRAME`].
pub fn body_length(header: [u8; HEADER]) -> Result<usize, FrameError> {
    let n = u32::from_be_bytes(header) as usize;
    if n == 0 || n > MAX_FRAME {
        return Err(FrameError::Length(n));
    }
    Ok(n)
}

/// Parses one frame body.
///
/// # Errors
/// [`FrameError::Body`] with serde's reason.
pub fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(body).map_err(|e| FrameError::Body(e.to_string()))
}

/// One frame: the header and the JSON of `message`.
///
/// # Errors
/// [`FrameError::Length`] when the message is larger than [`MAX_FRAME`];
/// [`FrameError::Body`] when it cannot be serialized.
pub fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, FrameError> {
    let mut frame = vec![0u8; HEADER];
    serde_json::to_writer(&mut frame, message).map_err(|e| FrameError::Body(e.to_string()))?;
    let n = frame.len() - HEADER;
    if n > MAX_FRAME {
        return Err(FrameError::Length(n));
    }
    frame[..HEADER].copy_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes());
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// What the frame fuzz target checks (`fuzz/fuzz_targets/frame.rs`), on random bytes
        /// and on mutated requests: nothing panics, and a request that decodes survives its
        /// own frame.
        #[test]
        fn any_bytes_decode_or_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(request) = decode::<Request>(&bytes) {
                let frame = encode(&request).unwrap_or_default();
                prop_assert_eq!(decode::<Request>(&frame[HEADER..]).ok(), Some(request));
            }
            let _ = decode::<Response>(&bytes);
        }

        #[test]
        fn spawn_requests_survive_their_frames(
            scope in any::<u64>(),
            argv in proptest::collection::vec(".{0,20}", 1..4),
            env in proptest::collection::vec((".{0,10}", ".{0,10}"), 0..4),
            cwd in "/.{0,30}",
        ) {
            let request = Request::Spawn { scope, argv, env, cwd, limits: Limits::default(), terminal: false };
            let frame = encode(&request).unwrap_or_default();
            let n = body_length([frame[0], frame[1], frame[2], frame[3]]);
            prop_assert_eq!(n, Ok(frame.len() - HEADER));
            prop_assert_eq!(decode::<Request>(&frame[HEADER..]).ok(), Some(request));
        }
    }

    #[test]
    fn a_request_survives_its_frame() {
        let request = Request::Spawn {
            scope: 7,
            argv: vec!["true".into()],
            env: vec![("PATH".into(), "/usr/bin".into())],
            cwd: "/".into(),
            limits: Limits::default(),
            terminal: false,
        };
        let frame = encode(&request).unwrap_or_default();
        let header = [frame[0], frame[1], frame[2], frame[3]];
        assert_eq!(body_length(header), Ok(frame.len() - HEADER));
        assert_eq!(decode::<Request>(&frame[HEADER..]), Ok(request));
    }

    /// The records lost while a command runs are a frame of their own, spelled as the
    /// protocol's table in `docs/serve.md` says; `exited` leaves its total out when 0.
    #[test]
    fn lost_records_are_sent_as_they_come_and_totalled_at_the_end() {
        let lost = Response::Lost { records: 12 };
        let frame = encode(&lost).unwrap_or_default();
        assert_eq!(&frame[HEADER..], br#"{"lost":{"records":12}}"#);
        assert_eq!(decode::<Response>(&frame[HEADER..]), Ok(lost));
        let quiet = Response::Exited {
            code: 0,
            timed_out: false,
            lost_records: 0,
        };
        let frame = encode(&quiet).unwrap_or_default();
        assert_eq!(
            &frame[HEADER..],
            br#"{"exited":{"code":0,"timed_out":false}}"#
        );
    }

    #[test]
    fn lengths_outside_the_bounds_are_refused() {
        assert_eq!(body_length([0; 4]), Err(FrameError::Length(0)));
        let over = u32::try_from(MAX_FRAME + 1)
            .unwrap_or(u32::MAX)
            .to_be_bytes();
        assert_eq!(body_length(over), Err(FrameError::Length(MAX_FRAME + 1)));
        assert_eq!(
            body_length([0xff; 4]),
            Err(FrameError::Length(u32::MAX as usize))
        );
    }

    #[test]
    fn unknown_requests_and_fields_are_refused() {
        for body in [
            &br#"{"format_disk":{}}"#[..],
            br#"{"hello":{"version":1,"admin":true}}"#,
            br#"{"kill":{"scope":"7"}}"#,
            b"\xff\xfe",
            br#"{"hello":{"version":1}"#,
        ] {
            assert!(
                matches!(decode::<Request>(body), Err(FrameError::Body(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
