//! Helper actions that repeat an operation many times or until told to stop, for the stress,
//! cache and replace tests.

use std::ffi::CString;
use std::path::PathBuf;

use super::sys::{cstr, errno};

/// The helper action `stress-open COUNT START PATH=EXPECT…`: opens the paths for reading in
/// turn, starting at index START, COUNT times in all, and compares each outcome with EXPECT
/// (`ok` or `eperm`). Prints `stress checks=N wrong=W` (and the first wrong outcome) on
/// stdout; the errno returned is 0, or 1 when an outcome was wrong.
pub(super) fn stress_open(a: &[String]) -> i32 {
    let count: u64 = a.first().and_then(|c| c.parse().ok()).unwrap_or(0);
    let start: usize = a.get(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let cases: Vec<(CString, bool)> = a[2.min(a.len())..]
        .iter()
        .filter_map(|c| c.rsplit_once('='))
        .map(|(p, e)| (cstr(p), e == "ok"))
        .collect();
    if cases.is_empty() || count == 0 {
        println!("stress checks=0 wrong=0 (no cases)");
        return 22;
    }
    let (mut checks, mut wrong) = (0u64, 0u64);
    let mut first = String::new();
    for i in 0..count {
        let (path, expect_ok) = &cases[(start + i as usize) % cases.len()];
        let err = open_read(path);
        let ok = err == 0;
        checks += 1;
        let right = if *expect_ok {
            ok
        } else {
            !ok && err == libc::EPERM
        };
        if !right {
            wrong += 1;
            if first.is_empty() {
                first = format!(" first={path:?} ok={ok} errno={err} at={i}");
            }
        }
    }
    println!("stress checks={checks} wrong={wrong}{first}");
    i32::from(wrong != 0)
}

/// Opens `path` for reading and closes it at once: 0, or the errno of the open.
fn open_read(path: &std::ffi::CStr) -> i32 {
    open_close(path, libc::O_RDONLY)
}

/// Opens a path for writing (no create, no truncation) and closes it: 0 or the errno.
fn open_write(path: &std::ffi::CStr) -> i32 {
    open_close(path, libc::O_WRONLY)
}

/// Opens a path with `flags` (and `O_CLOEXEC`) and closes it: 0 or the errno.
fn open_close(path: &std::ffi::CStr, flags: libc::c_int) -> i32 {
    // SAFETY: open of a NUL-terminated path; the descriptor is closed at once.
    unsafe {
        let fd = libc::open(path.as_ptr(), flags | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::close(fd);
            0
        } else {
            errno()
        }
    }
}

/// Sets a path's timestamps to now (`utimensat`, the `inode_setattr` hook): 0 or the errno.
fn set_times(path: &std::ffi::CStr) -> i32 {
    // SAFETY: utimensat of a NUL-terminated path; a null times pointer means now.
    if unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), std::ptr::null(), 0) } == 0 {
        0
    } else {
        errno()
    }
}

/// The helper action `read-lines`: says `ready`, then for each line of its stdin does one
/// operation and prints its errno (0 on success), until stdin ends. A line `PATH` opens PATH
/// for reading and closes it, `write PATH` opens it for writing and closes it, `utimes PATH`
/// sets its timestamps.
pub(super) fn read_lines() -> i32 {
    use std::io::{BufRead as _, Write as _};
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { return 2 };
        let err = if let Some(path) = line.strip_prefix("write ") {
            open_write(&cstr(path))
        } else if let Some(path) = line.strip_prefix("utimes ") {
            set_times(&cstr(path))
        } else {
            open_read(&cstr(&line))
        };
        if writeln!(out, "{err}").and_then(|()| out.flush()).is_err() {
            return 2;
        }
    }
    0
}

/// The helper action `replace-watch GRANTED NEW STOP`: opens GRANTED and NEW for reading in
/// turn until the file STOP exists (looked at every 64 rounds) while the test replaces the
/// scope's policy. GRANTED must open every time; NEW is denied (EPERM) until the replace that
/// grants it, and opens every time after its first success. Prints `ready` after the first
/// 1,000 rounds, then `watch rounds=N granted_failed=G new_denied=D new_ok=K back=B other=O`
/// (B: denials of NEW after it had opened; O: errors other than EPERM); the errno returned is
/// 0, or 1 when G, B or O is not 0 or NEW never opened.
pub(super) fn replace_watch(a: &[String]) -> i32 {
    use std::io::Write as _;
    let granted = cstr(a.first().map_or("", String::as_str));
    let new = cstr(a.get(1).map_or("", String::as_str));
    let stop = PathBuf::from(a.get(2).map_or("/", String::as_str));
    let (mut rounds, mut granted_failed, mut denied, mut ok, mut back, mut other) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    loop {
        if rounds % 64 == 0 && stop.exists() {
            break;
        }
        rounds += 1;
        if rounds == 1000 {
            println!("ready");
            let _ = std::io::stdout().flush();
        }
        match open_read(&granted) {
            0 => {}
            libc::EPERM => granted_failed += 1,
            _ => other += 1,
        }
        match open_read(&new) {
            0 => ok += 1,
            libc::EPERM if ok > 0 => back += 1,
            libc::EPERM => denied += 1,
            _ => other += 1,
        }
    }
    if rounds < 1000 {
        println!("ready");
    }
    println!(
        "watch rounds={rounds} granted_failed={granted_failed} new_denied={denied} new_ok={ok} \
         back={back} other={other}"
    );
    i32::from(granted_failed != 0 || back != 0 || other != 0 || ok == 0)
}
