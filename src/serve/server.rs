//! The service: one engine, one listening socket, a thread per connection.
//!
//! Why one file of this length: a connection's request handlers (`Connection`, about 580 lines)
//! all work on its one state — the peer, its scopes, the policy it is bound to — and are read
//! as one protocol against `docs/serve.md`.
//!
//! A connection belongs to the process that opened it ([`Peer`]) and owns the scopes it
//! creates: no request can name another connection's scope, and when the connection ends
//! (the client exits, is killed, or hangs up) every scope it owns is torn down. Each live
//! scope is also listed in the state directory, so that a service started after one that
//! died kills and removes what the dead one left ([`Service::sweep`]); until then the
//! scopes' processes stay confined (the kernel holds the rules, not this process).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use bee_common::scope::SCOPE_LEARN;
use bee_core::CompiledPolicy;
use bee_userspace::audit::{AuditRecord, Verdict};
use bee_userspace::cgroup::{CgroupParent, ScopeLimits};
use bee_userspace::launch::{Credentials, LOWERED, LaunchSpec, Rlimits, StdioMode, exit_code};
use bee_userspace::plan::EnforcementPlan;
use bee_userspace::scope::{
    EnforceError, Enforcer, EngineKind, KillTarget, ScopeLease, WaitLimits, spawn_into,
    wait_and_kill,
};

use super::ceiling::{self, Refused};
use super::peer::{Peer, Sandbox};
use super::protocol::{ErrorBody, Limits, Request, Response, ScopeInfo, VERSION, Welcome, decode};
use super::wire::{self, RecvError};

/// How long the rest of a frame may take once its first byte is in.
pub const MID_FRAME: Duration = Duration::from_secs(10);
/// How long one answer may take to be written: a client that stops reading is gone (its
/// connection is closed and its scopes killed), and no write blocks the connection's thread
/// past it — not its command's timeout, not the watch on its caller, not the service's stop.
pub const WRITE_WAIT: Duration = Duration::from_secs(10);
/// How long a scope's processes get to die when it is killed.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How often a waiting connection looks at its socket and at the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// The most scopes one connection may hold at once.
pub const MAX_SCOPES_PER_CONNECTION: usize = 64;
/// The most connections one uid other than root may hold at once.
pub const MAX_CONNECTIONS_PER_USER: usize = 256;

/// The most memory the bodies of one uid's frames being read may hold at once: eight frames
/// of the largest size. Root is not bounded (it could confine itself without the service).
const FRAME_BYTES_PER_USER: usize = 8 * super::protocol::MAX_FRAME;

/// The most connections over their uid's limit told so at once (each waits up to 2 s for its
/// `hello`, on a thread of its own); more are closed without an answer.
const MAX_TURNING_AWAY: usize = 64;
/// How long a connection may take to say `hello`.
const HELLO_WITHIN: Duration = Duration::from_secs(10);

/// What the service is made from besides its engine.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The ceilings directory ([`ceiling::DEFAULT_DIR`]).
    pub ceilings: PathBuf,
    /// Where each live scope is listed: one file per scope, named after its cgroup (and
    /// holding its directory, for people).
    pub state_dir: PathBuf,
    /// The most connections served at once; more are answered 69 and closed.
    pub max_connections: usize,
}

/// The running service, shared by its connection threads.
pub struct Service {
    enforcer: Arc<dyn Enforcer + Send + Sync>,
    engine: EngineKind,
    parent: CgroupParent,
    cgroup2: PathBuf,
    config: ServiceConfig,
    /// Every live scope of every connection: cgroup directory → its policy, so that a
    /// request from inside a scope is bounded by that scope.
    live: Mutex<HashMap<PathBuf, Arc<CompiledPolicy>>>,
    connections: AtomicUsize,
    /// Connections per uid.
    per_user: Mutex<HashMap<u32, usize>>,
    /// Connections over their uid's limit being told so ([`MAX_TURNING_AWAY`] at most; they
    /// hold no slot of `connections`).
    turning_away: AtomicUsize,
    /// Bytes of frame bodies being read, per uid (at most [`FRAME_BYTES_PER_USER`] each).
    reading: Mutex<HashMap<u32, usize>>,
    /// The service's own namespaces and sandbox, which callers are compared with.
    itself: Itself,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("engine", &self.engine)
            .field("parent", &self.parent.path())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// A service enforcing with `enforcer` (an engine of kind `engine`), making scopes below
    /// `parent` (whose directory sits on the cgroup2 mount). `stop` ends [`Service::serve`].
    ///
    /// # Errors
    /// When the state directory cannot be made.
    pub fn new(
        enforcer: Arc<dyn Enforcer + Send + Sync>,
        engine: EngineKind,
        parent: CgroupParent,
        config: ServiceConfig,
        stop: Arc<AtomicBool>,
    ) -> io::Result<Self> {
        std::fs::create_dir_all(&config.state_dir)?;
        // What is listed there is killed at the next start: nobody but root may list.
        let meta = std::fs::symlink_metadata(&config.state_dir)?;
        {
            use std::os::unix::fs::MetadataExt as _;
            if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} must be a directory of root's that no one else may write",
                        config.state_dir.display()
                    ),
                ));
            }
        }
        let cgroup2 = parent
            .path()
            .parent()
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
        Ok(Self {
            enforcer,
            engine,
            parent,
            cgroup2,
            config,
            live: Mutex::new(HashMap::new()),
            connections: AtomicUsize::new(0),
            per_user: Mutex::new(HashMap::new()),
            turning_away: AtomicUsize::new(0),
            reading: Mutex::new(HashMap::new()),
            itself: Itself::read(),
            stop,
        })
    }

    /// Kills and removes the scopes a previous service left listed in the state directory,
    /// then removes the empty scopes other ended bee processes left below the parent
    /// ([`CgroupParent::sweep_stale_once`]); returns one line per listed scope, and one for
    /// the rest when there was any, for the log.
    pub fn sweep(&self) -> Vec<String> {
        let mut said = Vec::new();
        self.sweep_listed(&mut said);
        if let Some(swept) = self.parent.sweep_stale_once()
            && !swept.is_empty()
        {
            said.push(swept.summary(self.parent.path()));
        }
        said
    }

    /// The listed scopes of [`Service::sweep`].
    fn sweep_listed(&self, said: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(&self.config.state_dir) else {
            return;
        };
        for entry in entries.flatten() {
            // A listed scope is named by the file's name, and only a direct child of this
            // service's parent can be named: whatever a stale or planted file holds, nothing
            // outside bee's cgroups is touched.
            let scope = entry
                .file_name()
                .to_str()
                .and_then(|name| self.parent.existing_scope(name).ok().flatten());
            if let Some(cgroup) = scope {
                let dir = cgroup.path().display().to_string();
                said.push(match cgroup.teardown(KILL_WAIT) {
                    Ok(()) => format!("removed the scope {dir} left by an earlier service"),
                    Err(e) => {
                        format!("could not remove the scope {dir} left by an earlier service: {e}")
                    }
                });
            }
            let _ = std::fs::remove_file(entry.path());
        }
    }

    /// Serves `listener` until the stop flag is set, then waits (up to 10 s) for every
    /// connection to tear its scopes down.
    ///
    /// # Errors
    /// The listener's error.
    pub fn serve(self: &Arc<Self>, listener: &UnixListener) -> io::Result<()> {
        listener.set_nonblocking(true)?;
        while !self.stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => self.admit(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait_readable(listener.as_raw_fd(), Duration::from_millis(200));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and friends: keep serving the connections there are.
                    eprintln!("bee serve: accept: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.connections.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Takes a new connection: counted against its uid's limit first (its peer credentials
    /// at `connect`), so that one uid's connections, turned away or not, never hold more than
    /// [`MAX_CONNECTIONS_PER_USER`] of the service's [`ServiceConfig::max_connections`].
    fn admit(self: &Arc<Self>, stream: UnixStream) {
        let _ = stream.set_nonblocking(false);
        let Ok(cred) =
            super::peer::getsockopt::<libc::ucred>(stream.as_raw_fd(), libc::SO_PEERCRED)
        else {
            return;
        };
        let uid = cred.uid;
        if !self.enter(uid) {
            self.turn_away_over_limit(stream, uid);
            return;
        }
        if self.connections.fetch_add(1, Ordering::AcqRel) >= self.config.max_connections {
            self.connections.fetch_sub(1, Ordering::AcqRel);
            self.leave(uid);
            let busy = ErrorBody::new(69, "the service is at its connection limit; try again");
            let _ = wire::send(&stream, &Response::Error(busy), &[]);
            return;
        }
        let service = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("bee-serve-conn".into())
            .stack_size(256 << 10)
            .spawn(move || {
                Connection::serve(&service, stream);
                service.connections.fetch_sub(1, Ordering::AcqRel);
                service.leave(uid);
            });
        if let Err(e) = spawned {
            self.connections.fetch_sub(1, Ordering::AcqRel);
            self.leave(uid);
            eprintln!("bee serve: cannot start a connection thread: {e}");
        }
    }

    /// Tells a connection over its uid's limit so, on a thread of its own and holding no slot
    /// of the service's; past [`MAX_TURNING_AWAY`] of them, closes it unanswered.
    fn turn_away_over_limit(self: &Arc<Self>, stream: UnixStream, uid: u32) {
        if self.turning_away.fetch_add(1, Ordering::AcqRel) >= MAX_TURNING_AWAY {
            self.turning_away.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let service = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("bee-serve-away".into())
            .stack_size(64 << 10)
            .spawn(move || {
                let body = ErrorBody::new(
                    69,
                    format!("uid {uid} holds {MAX_CONNECTIONS_PER_USER} connections to the service already"),
                );
                turn_away(&stream, body);
                service.turning_away.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            self.turning_away.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Counts a connection of `uid`; false (not counted) when it holds the most already.
    /// Root is not counted: it could confine itself without the service.
    fn enter(&self, uid: u32) -> bool {
        if uid == 0 {
            return true;
        }
        let mut per_user = self.per_user.lock().unwrap_or_else(PoisonError::into_inner);
        let n = per_user.entry(uid).or_insert(0);
        if *n >= MAX_CONNECTIONS_PER_USER {
            return false;
        }
        *n += 1;
        true
    }

    fn leave(&self, uid: u32) {
        if uid == 0 {
            return;
        }
        let mut per_user = self.per_user.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = per_user.get_mut(&uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                per_user.remove(&uid);
            }
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<CompiledPolicy>>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn state_file(&self, cgroup_dir: &Path) -> PathBuf {
        let name = cgroup_dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        self.config.state_dir.join(name)
    }
}

/// One scope of a connection.
struct Live {
    lease: ScopeLease,
    policy: Arc<CompiledPolicy>,
    origin: String,
    dir: PathBuf,
    timeout: Option<Duration>,
    /// The kernel's audit records lost since the scope's last command ended.
    lost: std::cell::Cell<u64>,
}

/// What a request leaves the connection in.
enum Next {
    Continue,
    Hangup,
}

/// What bounds a caller: each bounding policy with the label a refusal names it by (a
/// ceiling's path, or the scope the caller runs in), or why nothing does.
type Bound = Result<Vec<(String, Arc<CompiledPolicy>)>, ErrorBody>;

struct Connection<'s> {
    service: &'s Service,
    stream: UnixStream,
    peer: Peer,
    scopes: BTreeMap<u64, Live>,
    greeted: bool,
    /// The caller's bound as read for its `hello`, kept for the first request that proves a
    /// policy: a connection that says `hello` and creates a scope reads, parses and compiles
    /// its ceilings once, not twice. Every later request reads them again, so a ceiling the
    /// operator narrows holds from the next request on.
    greeting_bound: std::cell::RefCell<Option<Bound>>,
}

impl<'s> Connection<'s> {
    fn serve(service: &'s Service, stream: UnixStream) {
        let peer = match Peer::of(&stream, &service.cgroup2) {
            Ok(p) => p,
            Err(e) => {
                let body = ErrorBody::new(77, format!("cannot identify the caller: {e}"));
                turn_away(&stream, body);
                return;
            }
        };
        if let Err(body) = same_namespaces(&peer, &service.itself) {
            turn_away(&stream, body);
            return;
        }
        let parent = service.parent.path();
        let in_scope = peer.cgroup.starts_with(parent) && peer.cgroup != parent;
        if let Err(body) = no_sandbox_of_its_own(&peer, in_scope, &service.itself) {
            turn_away(&stream, body);
            return;
        }
        // Idle reads wake up now and then to see whether the service is stopping.
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let _ = stream.set_write_timeout(Some(WRITE_WAIT));
        let mut conn = Connection {
            service,
            stream,
            peer,
            scopes: BTreeMap::new(),
            greeted: false,
            greeting_bound: std::cell::RefCell::new(None),
        };
        conn.run();
        conn.close_all();
    }

    /// This caller's share of the memory for frames being read.
    fn budget(&self) -> UserBudget<'s> {
        UserBudget {
            service: self.service,
            uid: self.peer.uid,
        }
    }

    fn run(&mut self) {
        let connected = Instant::now();
        loop {
            if self.service.stop.load(Ordering::Relaxed) {
                return;
            }
            if !self.greeted && connected.elapsed() >= HELLO_WITHIN {
                self.refuse(64, "no `hello` in time");
                return;
            }
            let received = match wire::recv_within(&self.stream, MID_FRAME, &self.budget()) {
                Ok(r) => r,
                Err(RecvError::Io(e)) if is_timeout(&e) => continue,
                Err(RecvError::Closed) => return,
                Err(e) => {
                    self.refuse(64, &format!("bad frame: {e}"));
                    return;
                }
            };
            let request = match decode::<Request>(&received.body) {
                Ok(r) => r,
                Err(e) => {
                    self.refuse(64, &e.to_string());
                    return;
                }
            };
            if !received.fds.is_empty() && !matches!(request, Request::Spawn { .. }) {
                self.refuse(64, "file descriptors may come only with `spawn`");
                return;
            }
            if let Next::Hangup = self.answer(request, received.fds) {
                return;
            }
        }
    }

    fn answer(&mut self, request: Request, fds: Vec<OwnedFd>) -> Next {
        if !self.greeted {
            return match request {
                Request::Hello { version } if version == VERSION => {
                    self.greeted = true;
                    let bound = self.bound();
                    let welcome = self.welcome(&bound);
                    *self.greeting_bound.borrow_mut() = Some(bound);
                    self.reply(&Response::Welcome(welcome))
                }
                Request::Hello { version } => {
                    self.refuse(
                        64,
                        &format!("protocol version {version} is not served (this service speaks {VERSION})"),
                    );
                    Next::Hangup
                }
                _ => {
                    self.refuse(64, "the first request must be `hello`");
                    Next::Hangup
                }
            };
        }
        let outcome = match request {
            Request::Hello { .. } => Err(ErrorBody::new(64, "`hello` was already said")),
            Request::Check => Ok(Response::Welcome(self.welcome(&self.bound()))),
            Request::Create {
                policy,
                origin,
                timeout_ms,
                learn,
            } => self.create(
                *policy,
                origin,
                timeout_ms.map(Duration::from_millis),
                learn,
            ),
            Request::Spawn {
                scope,
                argv,
                env,
                cwd,
                limits,
                terminal,
            } => {
                let command = Spawn {
                    argv,
                    env,
                    cwd,
                    limits,
                    terminal,
                };
                return self.spawn(scope, command, fds);
            }
            Request::Kill { scope } => self.scope(scope).and_then(|live| {
                if let Some(cg) = live.lease.cgroup() {
                    cg.kill().map_err(|e| ErrorBody::new(70, e.to_string()))?;
                }
                Ok(Response::Done)
            }),
            Request::Replace { scope, policy } => self.replace(scope, *policy),
            Request::List => Ok(Response::Scopes(
                self.scopes
                    .iter()
                    .map(|(id, live)| ScopeInfo {
                        scope: *id,
                        origin: live.origin.clone(),
                        running: false,
                    })
                    .collect(),
            )),
            Request::Close { scope } => match self.scope(scope) {
                Ok(_) => {
                    self.close(scope);
                    Ok(Response::Done)
                }
                Err(body) => Err(body),
            },
        };
        match outcome {
            Ok(response) => self.reply(&response),
            Err(body) => self.reply(&Response::Error(body)),
        }
    }

    /// The welcome for a caller bounded by `bound`.
    fn welcome(&self, bound: &Bound) -> Welcome {
        let ceiling = match bound {
            Ok(bounds) => bounds.iter().map(|(label, _)| label.clone()).collect(),
            Err(_) => Vec::new(),
        };
        Welcome {
            version: VERSION,
            bee: env!("CARGO_PKG_VERSION").to_owned(),
            engine: self.service.engine.as_str().to_owned(),
            uid: self.peer.uid,
            ceiling,
        }
    }

    /// What bounds this caller's requests: the scope it runs in, or its ceilings.
    fn bound(&self) -> Bound {
        let parent = self.service.parent.path();
        if self.peer.cgroup.starts_with(parent) && self.peer.cgroup != parent {
            let live = self.service.live();
            return live
                .iter()
                .find(|(dir, _)| self.peer.cgroup.starts_with(dir))
                .map(|(dir, policy)| {
                    let name = dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                    vec![(format!("the policy of the scope {name} the caller runs in"), Arc::clone(policy))]
                })
                .ok_or_else(|| {
                    ErrorBody::new(77, "the caller runs in a bee scope this service did not make; it may not ask for another")
                });
        }
        match ceiling::applicable(&self.service.config.ceilings, &self.peer) {
            Ok(found) if found.is_empty() => {
                let looked = ceiling::looked_for(&self.service.config.ceilings, &self.peer);
                let mut body = ErrorBody::new(
                    77,
                    format!("no ceiling grants uid {} anything", self.peer.uid),
                );
                body.details = looked
                    .iter()
                    .map(|p| format!("looked for {}", p.display()))
                    .collect();
                Err(body)
            }
            Ok(found) => Ok(found
                .into_iter()
                .map(|(path, policy)| (path.display().to_string(), Arc::new(policy)))
                .collect()),
            Err(Refused::Unavailable(why)) => Err(ErrorBody::new(69, why)),
            Err(other) => Err(ErrorBody::new(70, format!("{other:?}"))),
        }
    }

    /// Proves `policy` within the caller's bound.
    fn prove(&self, policy: &CompiledPolicy, origin: &str) -> Result<(), ErrorBody> {
        // The prover and the planners read patterns as the compiler makes them; a crafted
        // one (`/ws/../etc`) must not reach them.
        policy.check_normal_form().map_err(|why| {
            ErrorBody::new(
                65,
                format!("{origin}: not a compiled policy bee accepts: {why}"),
            )
        })?;
        let greeted = self.greeting_bound.borrow_mut().take();
        let bounds = greeted.unwrap_or_else(|| self.bound())?;
        let labelled: Vec<(String, &CompiledPolicy)> =
            bounds.iter().map(|(l, p)| (l.clone(), &**p)).collect();
        ceiling::prove(policy, origin, &labelled).map_err(|refused| match refused {
            Refused::NotWithin(text) => {
                let mut lines = text.lines().map(str::to_owned);
                let heading = lines.next().unwrap_or_default();
                let mut body = ErrorBody::new(65, heading.trim_end_matches(':'));
                body.details = lines.map(|l| l.trim().to_owned()).collect();
                body
            }
            Refused::NoCeiling { .. } => ErrorBody::new(77, "no ceiling applies"),
            Refused::Unavailable(why) => ErrorBody::new(69, why),
        })
    }

    /// Proves learn mode within the caller's bound: it lifts every denial a policy could
    /// lift, so the bound must grant [`ceiling::EVERYTHING`].
    fn prove_learning(&self) -> Result<(), ErrorBody> {
        let everything = ceiling::everything().map_err(|why| ErrorBody::new(70, why))?;
        self.prove(
            &everything,
            "learn mode (it allows whatever a policy could grant)",
        )
        .map_err(|mut body| {
            if body.status == 65 {
                body.details.push(
                    "learn mode is granted only where the caller's ceiling grants everything; \
                         ask the operator, or learn as root with `--service never`"
                        .to_owned(),
                );
            }
            body
        })
    }

    fn create(
        &mut self,
        policy: CompiledPolicy,
        origin: String,
        timeout: Option<Duration>,
        learn: bool,
    ) -> Result<Response, ErrorBody> {
        if self.scopes.len() >= MAX_SCOPES_PER_CONNECTION {
            return Err(ErrorBody::new(
                69,
                format!("a connection holds at most {MAX_SCOPES_PER_CONNECTION} scopes"),
            ));
        }
        let service = self.service;
        self.prove(&policy, &origin)?;
        if learn {
            // The engine first: no ceiling would make one that reports no denials learn.
            if service.engine != EngineKind::BpfLsm {
                return Err(ErrorBody::new(
                    69,
                    format!(
                        "learn mode needs the BPF LSM: this service enforces with {}, which reports no denials to learn from",
                        service.engine.as_str()
                    ),
                ));
            }
            self.prove_learning()?;
        }
        let flags = if learn { SCOPE_LEARN } else { 0 };
        let plan =
            match service.engine {
                EngineKind::BpfLsm => Some(EnforcementPlan::new(&policy).map_err(|e| {
                    ErrorBody::new(65, format!("{origin}: cannot be enforced: {e}"))
                })?),
                EngineKind::Landlock => None,
            };
        let cgroup = service
            .parent
            .create_scope(&ScopeLimits::default())
            .map_err(|e| ErrorBody::new(70, format!("cannot create the scope's cgroup: {e}")))?;
        let installed = match &plan {
            Some(plan) => service.enforcer.install(plan, cgroup.id(), flags),
            // The Landlock engine opens the policy's paths and expands its `*` segments: with
            // the caller's access, not root's.
            None => self
                .peer
                .as_caller(|| service.enforcer.install_policy(&policy, &cgroup, flags)),
        };
        let id = cgroup.id();
        let dir = cgroup.path().to_path_buf();
        let install = match installed {
            Ok(install) => install,
            Err(e) => {
                let _ = cgroup.remove();
                let status = if matches!(e, EnforceError::Refused { .. }) {
                    65
                } else {
                    70
                };
                return Err(ErrorBody::new(status, format!("{origin}: {e}")));
            }
        };
        let policy = Arc::new(policy);
        let mut lease = ScopeLease::new(cgroup, Some(install));
        // Listed before anything runs in it, so that a crash leaves nothing unlisted.
        if let Err(e) = write_state(&service.state_file(&dir), &dir) {
            let _ = lease.teardown(Some(&*service.enforcer), KILL_WAIT, &mut || {});
            return Err(ErrorBody::new(70, format!("cannot list the scope: {e}")));
        }
        service.live().insert(dir.clone(), Arc::clone(&policy));
        self.scopes.insert(
            id,
            Live {
                lease,
                policy,
                origin,
                dir,
                timeout,
                lost: std::cell::Cell::new(0),
            },
        );
        Ok(Response::Created {
            scope: id,
            engine: service.engine.as_str().to_owned(),
        })
    }

    fn replace(&mut self, scope: u64, policy: CompiledPolicy) -> Result<Response, ErrorBody> {
        let origin = self.scope(scope)?.origin.clone();
        self.prove(&policy, &origin)?;
        let service = self.service;
        let Some(live) = self.scopes.get_mut(&scope) else {
            return Err(no_such_scope(scope));
        };
        let Some(install) = live.lease.install_id() else {
            return Err(no_such_scope(scope));
        };
        let replaced = match service.engine {
            EngineKind::BpfLsm => {
                let plan = EnforcementPlan::new(&policy).map_err(|e| {
                    ErrorBody::new(65, format!("{origin}: cannot be enforced: {e}"))
                })?;
                service.enforcer.replace(install, &plan)
            }
            EngineKind::Landlock => self
                .peer
                .as_caller(|| service.enforcer.replace_policy(install, &policy)),
        };
        replaced.map_err(|e| ErrorBody::new(65, e.to_string()))?;
        live.policy = Arc::new(policy);
        service
            .live()
            .insert(live.dir.clone(), Arc::clone(&live.policy));
        Ok(Response::Done)
    }

    fn scope(&self, scope: u64) -> Result<&Live, ErrorBody> {
        self.scopes.get(&scope).ok_or_else(|| no_such_scope(scope))
    }

    /// Starts a command in `scope` and stays with it until it ends: the only request read
    /// meanwhile is `kill`; a hang-up kills the scope.
    fn spawn(&mut self, scope: u64, command: Spawn, fds: Vec<OwnedFd>) -> Next {
        let Spawn {
            argv,
            env,
            cwd,
            limits,
            terminal,
        } = command;
        let checked = self.scope(scope).and_then(|_| {
            if fds.len() != 3 {
                return Err(ErrorBody::new(
                    64,
                    "`spawn` takes exactly three descriptors: stdin, stdout, stderr",
                ));
            }
            if argv.is_empty() {
                return Err(ErrorBody::new(64, "`spawn` needs a program"));
            }
            if !cwd.starts_with('/') {
                return Err(ErrorBody::new(
                    64,
                    "`spawn` needs an absolute working directory",
                ));
            }
            if let Some((k, _)) = env
                .iter()
                .find(|(k, v)| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0'))
            {
                return Err(ErrorBody::new(
                    64,
                    format!(
                        "`{}` is not an environment variable's name",
                        k.escape_debug()
                    ),
                ));
            }
            if fds.iter().any(|fd| connected_to_us(fd, &self.stream)) {
                return Err(ErrorBody::new(
                    64,
                    "a connection to the service cannot be a command's standard stream",
                ));
            }
            if terminal && !callers_own_terminal(&fds[0], self.peer.uid) {
                return Err(ErrorBody::new(
                    64,
                    "a controlling terminal must be a terminal the caller owns, open for reading and writing",
                ));
            }
            Ok(())
        });
        if let Err(body) = checked {
            return self.reply(&Response::Error(body));
        }
        let [stdin, stdout, stderr]: [OwnedFd; 3] = match fds.try_into() {
            Ok(three) => three,
            Err(_) => return Next::Hangup,
        };
        let rlimits = match self.within_callers_limits(limits) {
            Ok(r) => r,
            Err(body) => return self.reply(&Response::Error(body)),
        };
        let mut spec = LaunchSpec::new(&argv[0])
            .args(&argv[1..])
            .env_pass(Vec::<String>::new())
            .current_dir(&cwd)
            .rlimits(rlimits)
            .credentials(Some(Credentials {
                uid: self.peer.uid,
                gid: self.peer.gid,
                groups: self.peer.groups.clone(),
            }))
            .stdin(StdioMode::Fd(Arc::new(stdin)))
            .stdout(StdioMode::Fd(Arc::new(stdout)))
            .stderr(StdioMode::Fd(Arc::new(stderr)))
            .controlling_terminal(terminal);
        for (k, v) in env {
            spec = spec.env(k, v);
        }
        let service = self.service;
        let Some(live) = self.scopes.get(&scope) else {
            return Next::Hangup;
        };
        let Some(cgroup) = live.lease.cgroup() else {
            return self.reply(&Response::Error(no_such_scope(scope)));
        };
        let launched = spawn_into(&*service.enforcer, live.lease.install_id(), &spec, cgroup);
        let mut launched = match launched {
            Ok(l) => l,
            Err(e) => {
                let status = e.exit_status();
                if let Next::Hangup = self.send_records(scope) {
                    return Next::Hangup;
                }
                // Under the Landlock engine the kernel logs no record of this refusal.
                let unlogged = (service.enforcer.engine() == EngineKind::Landlock)
                    .then(|| {
                        bee_userspace::landlock::audit::unlogged::exec_refusal(
                            &live.policy,
                            &spec,
                            &e,
                            scope,
                        )
                    })
                    .flatten();
                if let Some(record) = unlogged
                    && let Next::Hangup = self.reply(&Response::Record(Box::new(record)))
                {
                    return Next::Hangup;
                }
                return self.reply(&Response::Error(ErrorBody::new(status, e.to_string())));
            }
        };
        drop(spec);
        if let Next::Hangup = self.reply(&Response::Spawned { pid: launched.id() }) {
            let _ = cgroup.kill();
            let _ = launched.wait_timeout(Some(KILL_WAIT));
            return Next::Hangup;
        }
        let start = Instant::now();
        let mut hung_up = false;
        let limits = WaitLimits {
            timeout: live.timeout,
            poll: Some(POLL),
            kill: KillTarget::Cgroup,
            kill_wait: KILL_WAIT,
        };
        let waited = wait_and_kill(&mut launched, cgroup, &limits, &mut || {
            // The client is gone (even if its connection lives on in another process).
            if self.service.stop.load(Ordering::Relaxed) || !super::peer::alive(&self.peer.pidfd) {
                hung_up = true;
            } else if readable(&self.stream) {
                match wire::recv_within(&self.stream, MID_FRAME, &self.budget())
                    .map(|r| decode::<Request>(&r.body))
                {
                    Ok(Ok(Request::Kill { scope: s })) if s == scope => {
                        let _ = cgroup.kill();
                    }
                    Ok(Ok(_)) => {
                        let busy = ErrorBody::new(
                            64,
                            format!(
                                "a command is running in scope {scope}: only `kill` of that \
                                 scope is read until it ends"
                            ),
                        );
                        if let Next::Hangup = self.reply(&Response::Error(busy)) {
                            hung_up = true;
                        }
                    }
                    Ok(Err(_)) | Err(_) => hung_up = true,
                }
            }
            // Denials as they come: a long-lived command (an MCP server) is waited on for a
            // whole session, and its client attributes them to the call that caused them.
            if !hung_up && let Next::Hangup = self.send_records(scope) {
                hung_up = true;
            }
            hung_up
        });
        if hung_up {
            return Next::Hangup;
        }
        // Not reaped (or not waited for): reported as killed.
        let (status, timed_out) = match waited {
            Ok(ended) => (Some(ended.status), ended.timed_out),
            Err(_) => (None, live.timeout.is_some_and(|t| start.elapsed() >= t)),
        };
        // A command's processes never outlive it.
        if cgroup.is_populated().unwrap_or(true) {
            let _ = cgroup.kill();
            let _ = cgroup.wait_empty(KILL_WAIT);
        }
        if let Next::Hangup = self.send_records(scope) {
            return Next::Hangup;
        }
        let code = status.map_or(128 + libc::SIGKILL, exit_code);
        let lost_records = self.scopes.get(&scope).map_or(0, |l| l.lost.take());
        self.reply(&Response::Exited {
            code,
            timed_out,
            lost_records,
        })
    }

    /// `limits`, each lowered to the caller's own hard limit (read from its
    /// `/proc/PID/limits`, believed while its pidfd is alive), and the caller's hard limit
    /// where none is asked: the service's own limits and privilege never raise one.
    fn within_callers_limits(&self, limits: Limits) -> Result<Rlimits, ErrorBody> {
        let gone = || ErrorBody::new(77, "the caller's own limits cannot be read: it is gone");
        // `/proc/PID/limits` (world-readable), not prlimit(2), which needs CAP_SYS_RESOURCE.
        let text = std::fs::read_to_string(format!("/proc/{}/limits", self.peer.pid))
            .map_err(|_| gone())?;
        if !super::peer::alive(&self.peer.pidfd) {
            return Err(gone());
        }
        let hard = |name: &str| -> Option<u64> {
            let line = text.lines().find(|l| l.starts_with(name))?;
            let value = line[name.len()..].split_whitespace().nth(1)?;
            Some(if value == "unlimited" {
                u64::MAX
            } else {
                value.parse().ok()?
            })
        };
        let clamp = |value: Option<u64>, name: &str| -> Result<Option<u64>, ErrorBody> {
            let hard = hard(name).ok_or_else(|| {
                ErrorBody::new(70, format!("`{name}` is not in the caller's limits"))
            })?;
            Ok(Some(value.map_or(hard, |v| v.min(hard))))
        };
        let mut lowered = [None; LOWERED.len()];
        for (slot, (_, name)) in lowered.iter_mut().zip(LOWERED) {
            *slot = Some(hard(name).ok_or_else(|| {
                ErrorBody::new(70, format!("`{name}` is not in the caller's limits"))
            })?);
        }
        Ok(Rlimits {
            nofile: clamp(limits.nofile, "Max open files")?,
            nproc: clamp(limits.nproc, "Max processes")?,
            cpu_seconds: clamp(limits.cpu_seconds, "Max cpu time")?,
            address_space: clamp(limits.address_space, "Max address space")?,
            lowered,
        })
    }

    /// Sends the scope's pending audit records: its denials (allowed accesses stay out), then
    /// how many records the kernel lost meanwhile, if any.
    fn send_records(&self, scope: u64) -> Next {
        let Some(live) = self.scopes.get(&scope) else {
            return Next::Continue;
        };
        let now = SystemTime::now();
        for event in self.service.enforcer.drain_events(scope) {
            let record = AuditRecord::from_event(&event, &live.policy, now);
            if record.verdict == Verdict::Deny
                && let Next::Hangup = self.reply(&Response::Record(Box::new(record)))
            {
                return Next::Hangup;
            }
        }
        let lost = self.service.enforcer.drain_lost(scope);
        if lost == 0 {
            return Next::Continue;
        }
        live.lost.set(live.lost.get() + lost);
        self.reply(&Response::Lost { records: lost })
    }

    fn close(&mut self, scope: u64) {
        let Some(mut live) = self.scopes.remove(&scope) else {
            return;
        };
        let service = self.service;
        let torn = live
            .lease
            .teardown(Some(&*service.enforcer), KILL_WAIT, &mut || {
                let _ = service.enforcer.drain_events(scope);
            });
        service.live().remove(&live.dir);
        // A scope that could not be torn down stays listed: the next service sweeps it.
        if torn.is_ok() {
            let _ = std::fs::remove_file(service.state_file(&live.dir));
        }
    }

    fn close_all(&mut self) {
        let ids: Vec<u64> = self.scopes.keys().copied().collect();
        for id in ids {
            self.close(id);
        }
    }

    fn reply(&self, response: &Response) -> Next {
        match wire::send(&self.stream, response, &[]) {
            Ok(()) => Next::Continue,
            Err(_) => Next::Hangup,
        }
    }

    fn refuse(&self, status: u8, message: &str) {
        let _ = self.reply(&Response::Error(ErrorBody::new(status, message)));
    }
}

/// A `spawn` request's command.
struct Spawn {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: String,
    limits: Limits,
    terminal: bool,
}

/// True when `fd` is a terminal owned by `uid` and open for reading and writing: the only
/// kind the service makes a command's controlling terminal, so that no caller gains, through
/// `/dev/tty`, more of a terminal than the descriptor it passed (another user's terminal it
/// may only write to, say). The child's `TIOCSCTTY` never steals one another session holds.
fn callers_own_terminal(fd: &OwnedFd, uid: u32) -> bool {
    let raw = fd.as_raw_fd();
    // SAFETY: isatty(3) and fcntl(2) on a descriptor owned here.
    let (tty, flags) = unsafe { (libc::isatty(raw) == 1, libc::fcntl(raw, libc::F_GETFL)) };
    let owner = nix::sys::stat::fstat(fd).map(|st| st.st_uid);
    tty && flags >= 0 && flags & libc::O_ACCMODE == libc::O_RDWR && owner == Ok(uid)
}

/// True when `fd` is the client end of a connection to the service (which must not outlive
/// its client in a command): a unix socket whose peer is the address the service's own end
/// of `ours` is bound to, or whose peer credentials are this process's. The address decides
/// under socket activation, where the listening socket, and so every client's peer
/// credentials, are the service manager's.
fn connected_to_us(fd: &OwnedFd, ours: &UnixStream) -> bool {
    // A descriptor that is not a socket fails with ENOTSOCK.
    let by_pid = super::peer::getsockopt::<libc::ucred>(fd.as_raw_fd(), libc::SO_PEERCRED)
        .is_ok_and(|cred| u32::try_from(cred.pid).ok() == Some(std::process::id()));
    let by_addr = || {
        let Ok(theirs) = fd.try_clone().map(UnixStream::from) else {
            return false;
        };
        let (Ok(peer), Ok(local)) = (theirs.peer_addr(), ours.local_addr()) else {
            return false;
        };
        peer.as_pathname().is_some() && peer.as_pathname() == local.as_pathname()
    };
    by_pid || by_addr()
}

/// Lists a scope: `file` holds its cgroup directory. Made new (`O_EXCL`), never through a
/// link.
fn write_state(file: &Path, dir: &Path) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file)?;
    f.write_all(dir.as_os_str().as_encoded_bytes())
}

/// Refuses a caller at the door: waits (a short while) for its `hello`, then answers it with
/// `body` and hangs up. Answering before the hello arrived would race the client's write: a
/// socket closed under it fails that write with `EPIPE` before it reads the reason.
fn turn_away(stream: &UnixStream, body: ErrorBody) {
    const WAIT: Duration = Duration::from_secs(2);
    let _ = stream.set_read_timeout(Some(WAIT));
    let _ = wire::recv(stream, WAIT);
    let _ = wire::send(stream, &Response::Error(body), &[]);
}

/// The namespaces a caller must share with the service ([`same_namespaces`]).
const NAMESPACES: [&str; 4] = ["mnt", "net", "user", "pid"];

/// What the service's own process is, read once when it starts: it neither changes its
/// namespaces nor adds a seccomp filter or `no_new_privs` to itself while it runs, so
/// each caller is compared with these instead of `/proc/self` read again per connection.
#[derive(Debug, Clone, Copy)]
struct Itself {
    /// (device, inode) of `/proc/self/ns/NAME` for each of [`NAMESPACES`]; `None` where it
    /// could not be read, which refuses every caller ([`same_namespaces`]).
    namespaces: [Option<(u64, u64)>; NAMESPACES.len()],
    /// The sandbox of `/proc/self/status`; `None` where it could not be read, which
    /// refuses every caller outside the service's scopes ([`no_sandbox_of_its_own`]).
    sandbox: Option<Sandbox>,
}

impl Itself {
    fn read() -> Self {
        Self {
            namespaces: NAMESPACES.map(|ns| namespace_of("self", ns)),
            sandbox: std::fs::read_to_string("/proc/self/status")
                .ok()
                .map(|status| Sandbox::from_status(&status)),
        }
    }
}

/// (device, inode) of `/proc/PID/ns/NS` (`pid` a number or `self`), which names the
/// namespace; `None` where it cannot be read.
fn namespace_of(pid: &str, ns: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(format!("/proc/{pid}/ns/{ns}")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// Refuses a caller in other mount, network, user or PID namespaces than the service's: its
/// commands would run in the service's, outside whatever confined the caller (a container,
/// a private mount, no network).
fn same_namespaces(peer: &Peer, itself: &Itself) -> Result<(), ErrorBody> {
    let pid = peer.pid.to_string();
    for (ns, ours) in NAMESPACES.iter().zip(itself.namespaces) {
        let theirs = namespace_of(&pid, ns);
        let same = theirs.is_some() && theirs == ours;
        if !same {
            return Err(ErrorBody::new(
                77,
                format!(
                    "the caller runs in another {ns} namespace than the service: its commands would escape it"
                ),
            ));
        }
    }
    // What was read belongs to the caller only while its pidfd names a live process.
    if !super::peer::alive(&peer.pidfd) {
        return Err(ErrorBody::new(77, "the caller is gone"));
    }
    Ok(())
}

/// Refuses a caller that runs in a sandbox of its own the service is not in: `no_new_privs`
/// set where the service's is not, or more seccomp filters than the service has (what a
/// Landlock domain or a seccomp sandbox needs of an unprivileged process, such as another
/// agent's sandbox for its commands). Its commands would run outside that sandbox, bounded
/// only by its ceiling. A caller in a scope of this service (`in_scope`) is bounded by that
/// scope's policy instead, and passes.
fn no_sandbox_of_its_own(peer: &Peer, in_scope: bool, itself: &Itself) -> Result<(), ErrorBody> {
    if in_scope {
        return Ok(());
    }
    let ours = itself
        .sandbox
        .ok_or_else(|| ErrorBody::new(70, "the service could not read its own status"))?;
    let theirs = peer.sandbox;
    let why = if theirs.no_new_privs && !ours.no_new_privs {
        Some("no_new_privs set".to_owned())
    } else if theirs.seccomp_filters > ours.seccomp_filters {
        Some(format!(
            "{} seccomp filters against the service's {}",
            theirs.seccomp_filters, ours.seccomp_filters
        ))
    } else {
        None
    };
    match why {
        Some(why) => Err(ErrorBody::new(
            77,
            format!(
                "the caller runs in a sandbox of its own ({why}): its commands would run \
                 outside it, so the service does not serve it; run bee outside that sandbox"
            ),
        )),
        None => Ok(()),
    }
}

/// A caller's share of [`Service`]'s memory for frames being read ([`FRAME_BYTES_PER_USER`]).
struct UserBudget<'s> {
    service: &'s Service,
    uid: u32,
}

impl wire::Budget for UserBudget<'_> {
    fn reserve(&self, bytes: usize) -> bool {
        if self.uid == 0 {
            return true;
        }
        let mut reading = self
            .service
            .reading
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let held = reading.entry(self.uid).or_insert(0);
        if *held + bytes > FRAME_BYTES_PER_USER {
            return false;
        }
        *held += bytes;
        true
    }

    fn release(&self, bytes: usize) {
        if self.uid == 0 || bytes == 0 {
            return;
        }
        let mut reading = self
            .service
            .reading
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = reading.get_mut(&self.uid) {
            *held = held.saturating_sub(bytes);
            if *held == 0 {
                reading.remove(&self.uid);
            }
        }
    }
}

fn no_such_scope(scope: u64) -> ErrorBody {
    ErrorBody::new(64, format!("this connection has no scope {scope}"))
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// True when `stream` has a byte or a hang-up to read now.
fn readable(stream: &UnixStream) -> bool {
    wait_readable(stream.as_raw_fd(), Duration::ZERO)
}

fn wait_readable(fd: std::os::fd::RawFd, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd on the stack.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    rc > 0
}
