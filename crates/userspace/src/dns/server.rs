//! The sockets and threads of one scope's resolver.
//!
//! Per address family (127.0.0.1, and [::1] when it can be bound on the same port): one
//! thread receives UDP queries, answers those that need nothing from upstream itself (an
//! ungranted name, another type, an answer in the cache) and hands each other one to a
//! short-lived worker thread, one thread
//! accepts TCP connections and serves each in a thread of its own. Both kinds of worker are
//! bounded ([`MAX_UDP_WORKERS`], [`MAX_TCP_CONNECTIONS`]): past the bound a datagram is
//! dropped (the client retries) and a connection is closed at once. Every blocking read waits
//! at most [`SLICE`] before it looks at the stop flag (an upstream exchange's too), so
//! [`ScopeResolver::stop`] joins every thread within a few slices. A TCP connection may wait
//! [`TCP_IDLE`] for each query and lives at most [`TCP_LIFETIME`].

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::answer::{AnswerCache, Decision, Exchange, Transport, decide, finish};
use super::upstream::{SLICE, Upstream, is_timeout, read_message, write_message};
use super::{Admitted, AnswerSink, NameDenial, NameGrants, ResolverConfig};

/// Datagrams decided at once, per socket.
const MAX_UDP_WORKERS: usize = 32;
/// TCP connections served at once, per listener.
const MAX_TCP_CONNECTIONS: usize = 16;
/// Queries served on one TCP connection before it is closed.
const MAX_TCP_QUERIES: usize = 8;
/// How long a TCP connection may wait for its next query (RFC 7766 §6.2.3 suggests
/// seconds).
const TCP_IDLE: Duration = Duration::from_secs(5);
/// How long a TCP connection may live at all.
const TCP_LIFETIME: Duration = Duration::from_secs(30);
/// How often binding a TCP listener to the UDP socket's port is tried with a new port.
const BIND_ATTEMPTS: usize = 8;
/// The largest query accepted over UDP; a longer datagram is cut and fails to parse.
const UDP_QUERY_MAX: usize = 4096;

/// One scope's DNS resolver: UDP and TCP on one port of 127.0.0.1 (and of `[::1]` when
/// [`ScopeResolver::v6`]), answering by the scope's [`NameGrants`] and admitting answers
/// through its [`AnswerSink`] (see the [module](super) for the rules).
///
/// Dropping it stops it, as [`ScopeResolver::stop`] does.
pub struct ScopeResolver {
    port: u16,
    v6: bool,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    cache: Arc<AnswerCache>,
}

impl fmt::Debug for ScopeResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeResolver")
            .field("port", &self.port)
            .field("v6", &self.v6)
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}

/// What every thread of a resolver shares.
struct Shared {
    config: ResolverConfig,
    grants: Arc<dyn NameGrants>,
    sink: Arc<dyn AnswerSink>,
    upstream: Upstream,
    stop: Arc<AtomicBool>,
    cache: Arc<AnswerCache>,
}

impl Shared {
    /// The reply to one query (`None`: drop it).
    fn answer(&self, query: &[u8], transport: Transport) -> Option<Vec<u8>> {
        let mut upstream = |q: &[u8]| self.upstream.exchange(q, &self.stop);
        let decision = self.decide(query, &mut upstream)?;
        self.finish(&decision, transport)
    }

    /// The reply to one query if it needs nothing from upstream (an ungranted name, another
    /// type, a cached answer, a malformed query: `Some(None)` drops it); `None` if it does.
    /// Cheap enough for the receiving thread: no thread, no socket.
    fn answer_here(&self, query: &[u8], transport: Transport) -> Option<Option<Vec<u8>>> {
        let mut needed = false;
        let mut upstream = |_: &[u8]| {
            needed = true;
            Err("not here".to_owned())
        };
        let decision = self.decide(query, &mut upstream);
        if needed {
            return None;
        }
        Some(decision.and_then(|d| self.finish(&d, transport)))
    }

    /// [`decide`] on `query` with this resolver's configuration, grants and cache.
    fn decide(&self, query: &[u8], upstream: &mut Exchange<'_>) -> Option<Decision> {
        decide(
            query,
            &self.config,
            &*self.grants,
            Some(&self.cache),
            upstream,
        )
    }

    fn finish(&self, decision: &Decision, transport: Transport) -> Option<Vec<u8>> {
        let sink = Stoppable { shared: self };
        finish(decision, &sink, transport).filter(|_| !self.stopping())
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// The sink, silenced once the resolver stops (admitting then fails: the reply is not sent).
struct Stoppable<'a> {
    shared: &'a Shared,
}

impl super::answer::Sink for Stoppable<'_> {
    fn admit(&self, answers: &[Admitted]) -> Result<(), String> {
        if self.shared.stopping() {
            return Err("the resolver is stopping".to_owned());
        }
        self.shared.sink.admit(answers)
    }

    fn denied(&self, denial: NameDenial) {
        if !self.shared.stopping() {
            self.shared.sink.denied(denial);
        }
    }
}

impl ScopeResolver {
    /// Binds the sockets (UDP on a free port of 127.0.0.1, TCP on the same port; `[::1]` on it
    /// too where possible) and starts serving.
    ///
    /// # Errors
    ///
    /// Binding or configuring the IPv4 sockets failed (after 8 ports when the TCP port was
    /// taken each time), or a thread could not be started. Failing to bind `[::1]` is
    /// not an error: [`ScopeResolver::v6`] then says `false`.
    pub fn start(
        config: ResolverConfig,
        grants: Arc<dyn NameGrants>,
        sink: Arc<dyn AnswerSink>,
    ) -> io::Result<ScopeResolver> {
        let (udp4, tcp4) = bind_pair()?;
        let port = udp4.local_addr()?.port();
        let v6 = bind_at(IpAddr::V6(Ipv6Addr::LOCALHOST), port).ok();
        let stop = Arc::new(AtomicBool::new(false));
        let cache = Arc::new(AnswerCache::default());
        let shared = Arc::new(Shared {
            cache: Arc::clone(&cache),
            upstream: Upstream::new(config.upstream.clone(), config.timeout),
            config,
            grants,
            sink,
            stop: Arc::clone(&stop),
        });
        let mut resolver = ScopeResolver {
            port,
            v6: v6.is_some(),
            stop,
            threads: Vec::new(),
            cache,
        };
        // On an error, dropping `resolver` stops and joins the threads already started.
        for (udp, tcp) in std::iter::once((udp4, tcp4)).chain(v6) {
            udp.set_read_timeout(Some(SLICE))?;
            tcp.set_nonblocking(true)?;
            let s = Arc::clone(&shared);
            resolver
                .threads
                .push(spawn("bee-dns-udp", move || serve_udp(&s, &Arc::new(udp)))?);
            let s = Arc::clone(&shared);
            resolver
                .threads
                .push(spawn("bee-dns-tcp", move || serve_tcp(&s, &tcp))?);
        }
        Ok(resolver)
    }

    /// The port, the same for UDP and TCP (and on `[::1]` when [`ScopeResolver::v6`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the resolver also listens on `[::1]`.
    pub fn v6(&self) -> bool {
        self.v6
    }

    /// The addresses the resolver listens on: `127.0.0.1:port`, and `[::1]:port` if [`v6`].
    ///
    /// [`v6`]: ScopeResolver::v6
    pub fn addrs(&self) -> Vec<SocketAddr> {
        let mut addrs = vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), self.port)];
        if self.v6 {
            addrs.push(SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), self.port));
        }
        addrs
    }

    /// Forgets every cached answer, so that the next query of each name is asked upstream and
    /// decided by the grants of now (a live policy change calls it).
    pub fn clear_cache(&self) {
        self.cache.clear();
    }

    /// Stops serving and joins every thread; the sink is not called after this returns. A
    /// query being decided is abandoned (its client gets no reply).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            // A worker that panicked has nothing left to clean up.
            let _ = thread.join();
        }
    }
}

impl Drop for ScopeResolver {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    thread::Builder::new().name(name.to_owned()).spawn(f)
}

/// UDP on a free port of 127.0.0.1 and TCP on the same port.
fn bind_pair() -> io::Result<(UdpSocket, TcpListener)> {
    let mut last = None;
    for _ in 0..BIND_ATTEMPTS {
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = udp.local_addr()?.port();
        match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no port for the resolver")))
}

/// UDP and TCP on `ip:port`.
fn bind_at(ip: IpAddr, port: u16) -> io::Result<(UdpSocket, TcpListener)> {
    let udp = UdpSocket::bind((ip, port))?;
    let tcp = TcpListener::bind((ip, port))?;
    Ok((udp, tcp))
}

/// Worker threads, at most `limit` at once; finished ones are joined as new ones start, the
/// rest when the pool is dropped.
struct Pool {
    name: &'static str,
    limit: usize,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    fn new(name: &'static str, limit: usize) -> Self {
        Self {
            name,
            limit,
            threads: Vec::new(),
        }
    }

    /// Runs `f` in a new thread; `false` (and `f` dropped) when the pool is full or the
    /// thread could not be started.
    fn run(&mut self, f: impl FnOnce() + Send + 'static) -> bool {
        let (done, running): (Vec<_>, Vec<_>) =
            self.threads.drain(..).partition(JoinHandle::is_finished);
        self.threads = running;
        for thread in done {
            let _ = thread.join();
        }
        if self.threads.len() >= self.limit {
            return false;
        }
        match spawn(self.name, f) {
            Ok(thread) => {
                self.threads.push(thread);
                true
            }
            Err(_) => false,
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn serve_udp(shared: &Arc<Shared>, socket: &Arc<UdpSocket>) {
    let mut pool = Pool::new("bee-dns-udp-q", MAX_UDP_WORKERS);
    let mut buf = vec![0u8; UDP_QUERY_MAX];
    while !shared.stopping() {
        let (n, peer) = match socket.recv_from(&mut buf) {
            Ok(got) => got,
            Err(e) if is_timeout(&e) => continue,
            Err(_) => {
                // Nothing a datagram socket reports here lasts; do not spin on it.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // Whatever needs no upstream is answered here, without a worker thread.
        if let Some(reply) = shared.answer_here(&buf[..n], Transport::Udp) {
            if let Some(reply) = reply {
                let _ = socket.send_to(&reply, peer);
            }
            continue;
        }
        let query = buf[..n].to_vec();
        let (s, sock) = (Arc::clone(shared), Arc::clone(socket));
        pool.run(move || {
            if let Some(reply) = s.answer(&query, Transport::Udp) {
                let _ = sock.send_to(&reply, peer);
            }
        });
    }
}

fn serve_tcp(shared: &Arc<Shared>, listener: &TcpListener) {
    let mut pool = Pool::new("bee-dns-tcp-c", MAX_TCP_CONNECTIONS);
    while !shared.stopping() {
        match wait_readable(listener, SLICE) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(_) => {
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        }
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(_) => continue,
        };
        let s = Arc::clone(shared);
        // A full pool drops (closes) the connection.
        pool.run(move || serve_connection(&s, stream));
    }
}

/// Up to [`MAX_TCP_QUERIES`] length-prefixed queries on one connection; a malformed one, a
/// slow client or a failed write closes it.
fn serve_connection(shared: &Shared, mut stream: TcpStream) {
    let born = Instant::now();
    if stream.set_nonblocking(false).is_err() || stream.set_write_timeout(Some(TCP_IDLE)).is_err() {
        return;
    }
    for _ in 0..MAX_TCP_QUERIES {
        let deadline = (Instant::now() + TCP_IDLE).min(born + TCP_LIFETIME);
        let Ok(query) = read_message(&mut stream, deadline, &shared.stop) else {
            return;
        };
        let Some(reply) = shared.answer(&query, Transport::Tcp) else {
            return;
        };
        if write_message(&mut stream, &reply).is_err() {
            return;
        }
    }
}

/// Whether `listener` has a connection to accept, waiting at most `timeout`.
fn wait_readable(listener: &TcpListener, timeout: Duration) -> io::Result<bool> {
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fd` is one valid pollfd that outlives the call, and nfds is 1.
    let n = unsafe { libc::poll(&mut fd, 1, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(n > 0)
}
