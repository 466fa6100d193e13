//! A scripted model server for the tests that run real agents: plain HTTP/1.1 on a loopback
//! port, each request answered by a script and remembered; and a child process awaited with a
//! time limit.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The requests the scripted server saw, in order: each one's request line and body.
pub type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// What the scripted server answers a request (its request line and body): the content type
/// and the body.
pub type Script = Arc<dyn Fn(&str, &str) -> (&'static str, String) + Send + Sync>;

/// A server on a loopback port that answers every request with `script` (connections kept
/// alive, one thread each) and records it in `seen` once answered. Returns the port.
pub fn server(seen: Seen, script: Script) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| unreachable!("{e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = Arc::clone(&seen);
            let script = Arc::clone(&script);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let request = line.trim_end().to_owned();
                    let mut length = 0;
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        if header.trim_end().is_empty() {
                            break;
                        }
                        if let Some((k, v)) = header.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let body = String::from_utf8_lossy(&body).into_owned();
                    let (kind, reply) = script(&request, &body);
                    if let Ok(mut s) = seen.lock() {
                        s.push((request, body));
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
                        reply.len()
                    );
                    let out = reader.get_mut();
                    if out.write_all(head.as_bytes()).is_err()
                        || out.write_all(reply.as_bytes()).is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// `child`'s output once it exits (its pipes read as it runs); the test fails, after killing
/// it, if it runs longer than `limit` (with the requests the scripted server saw).
pub fn within(
    mut child: std::process::Child,
    limit: Duration,
    seen: &Seen,
) -> std::process::Output {
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut all);
            }
            all
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().ok().flatten() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
            let err = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
            unreachable!("still running after {limit:?}; stderr: {err}\nrequests: {seen:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::process::Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}
