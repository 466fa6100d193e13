//! Kernel tests: the directory cache (`docs/enforcement.md`, "The directory cache") never
//! decides differently from the full path walk. Each test first makes the kernel cache the
//! state of a directory, then changes what that directory's path means — a rename of it or of
//! an ancestor, a bind mount, another policy in the same directory, a reinstall — and checks
//! the errno and the audit event of the next open, or of the next timestamp change (the inode
//! hooks take the directory's cached name). In the VM matrix via `cargo xtask vm test`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

use std::ffi::CString;
use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bee_common::Hook;
use bee_common::event::EVENT_ALLOWED;
use bee_common::scope::SCOPE_AUDIT_ALLOWS;

use crate::kernel_support::*;

/// A policy that grants reading `{ws}/ro/**` and writing `{ws}/rw/**`; `{ws}/no` is neither.
fn policy(ws: &Scratch) -> String {
    format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{ws}/ro/**"]
write = ["/dev/null", "{ws}/rw/**"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**"]
"#,
        ws = ws.path.display(),
    )
}

fn cat(scope: &Scope, path: &str) -> std::process::Output {
    run(Some(&scope.cg), BUSYBOX, &["cat", path])
}

/// Opens `path` in the scope a few times (the first fills the cache, the others hit it) and
/// expects its content each time.
fn read_ok(scope: &Scope, path: &str, content: &str, what: &str) {
    for i in 0..3 {
        let out = cat(scope, path);
        assert_ok(&out, &format!("{what} (open {i})"));
        assert_eq!(String::from_utf8_lossy(&out.stdout), content, "{what}");
    }
}

/// Opens `path` in the scope a few times; each is denied and reported under `path`.
fn read_denied(scope: &Scope, path: &str, what: &str) {
    for i in 0..3 {
        assert_eperm(&cat(scope, path), &format!("{what} (open {i})"));
    }
    let evs = events(&scope.cg);
    let ev = denial(&evs, Hook::FileOpen, path, scope);
    assert_eq!(ev.access, bee_common::ACCESS_READ, "{what}");
    assert_eq!(
        evs.iter()
            .filter(|e| path_of(e) == path && e.error != 0)
            .count(),
        3,
        "{what}: every denial reported with its full path"
    );
}

/// The cache is on on every kernel of the matrix: the verifier accepts it (keyed by inode
/// address, it needs no trusted pointer to the directory, which 7.3 refused for inode
/// storage) and its tracing programs attach; otherwise the other tests of this file would
/// prove nothing about it.
#[test]
fn the_cache_is_on() {
    let engine = engine();
    assert_eq!(
        engine.dircache_refused(),
        None,
        "the verifier refused the directory cache"
    );
    assert!(
        engine.dircache_enabled(),
        "the cache's tracing programs did not attach: these tests would prove nothing"
    );
}

/// The cache reads its move sequence at the address `/proc/kallsyms` gives for `rename_lock`,
/// and is turned on only after checking that what is read there moves with renames and stands
/// still without them. The real address passes; the seqlock's own spinlock beside it (a
/// constant 0 while unlocked) and a neighbour that is not the sequence fail, so a wrong address
/// leaves the cache off instead of never invalidating it.
#[test]
fn the_move_sequence_is_checked_before_the_cache_is_used() {
    use bee_userspace::engine::Engine;
    let address = Engine::rename_lock_address().expect("rename_lock's address");
    assert_eq!(Engine::check_rename_sequence_at(address), Ok(()));
    for (offset, what) in [(4, "the seqlock's spinlock"), (64, "the next cache line")] {
        let err = Engine::check_rename_sequence_at(address + offset)
            .expect_err(&format!("{what} taken for the sequence"));
        assert!(err.contains("the value there"), "{what}: {err}");
    }
}

/// A directory a file is read from is remembered: the cache is not only on but used (on 7.3
/// it was on and never filled while the programs looked for a namespace serial only 6.x has).
#[test]
fn a_directory_read_from_is_remembered() {
    let ws = Scratch::new("cache-fill");
    ws.write("ro/fresh/f", "f\n");
    let scope = Scope::new("cache-fill", &policy(&ws), 0);
    let before = engine().dircache_len().expect("the cache map is readable");
    read_ok(&scope, &ws.s("ro/fresh/f"), "f\n", "granted");
    let after = engine().dircache_len().expect("the cache map is readable");
    assert!(
        after > before,
        "no directory remembered: {before} entries before, {after} after"
    );
}

/// The `read-lines` helper running in a scope: [`Reader::read`] has it open a path for reading
/// and close it, and gives 0 or the errno.
struct Reader {
    child: std::process::Child,
    ask: Option<std::process::ChildStdin>,
    answers: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl Reader {
    fn spawn(scope: &Scope) -> Self {
        use std::io::BufRead as _;
        let mut child = helper_spawn(&scope.cg, Action::ReadLines {});
        let ask = child.stdin.take();
        let mut answers = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        assert!(
            answers.any(|l| l.unwrap() == "ready"),
            "the reader never got ready"
        );
        Self {
            child,
            ask,
            answers,
        }
    }

    fn ask(&mut self, line: &str) -> i32 {
        use std::io::Write as _;
        writeln!(self.ask.as_mut().unwrap(), "{line}").unwrap();
        self.answers.next().unwrap().unwrap().parse().unwrap()
    }

    /// Opens `path` for reading and closes it.
    fn read(&mut self, path: &str) -> i32 {
        self.ask(path)
    }

    /// Opens `path` for writing (no create, no truncation) and closes it.
    fn write(&mut self, path: &str) -> i32 {
        self.ask(&format!("write {path}"))
    }

    /// Sets `path`'s timestamps (`utimensat`: the `inode_setattr` hook).
    fn utimes(&mut self, path: &str) -> i32 {
        self.ask(&format!("utimes {path}"))
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        drop(self.ask.take());
        let _ = self.child.wait();
    }
}

/// The scope reading through a test binary: the base grants let it start, and it may read
/// `{ws}/ro/**`.
fn reader_policy(ws: &Scratch) -> String {
    format!("version = 1\n{}", base_grants()).replace(
        "read = [",
        &format!("read = [\"{}/ro/**\", ", ws.path.display()),
    )
}

/// [`reader_policy`], and writing `{ws}/rw/**` too.
fn writer_policy(ws: &Scratch) -> String {
    reader_policy(ws).replace(
        "write = [",
        &format!("write = [\"{}/rw/**\", ", ws.path.display()),
    )
}

/// Starts `tasks` threads in `s` that, until `stop`, each rename a file and a directory of their
/// own under `{ws}/{under}` back and forth, in bursts, so that a check meets both a rename
/// sequence that moves under it and one that stands still long enough for hits.
fn spawn_renamers<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    stop: &'s AtomicBool,
    ws: &'s Scratch,
    under: &str,
    tasks: usize,
) {
    for t in 0..tasks {
        let (a, b) = (
            ws.join(&format!("{under}/n{t}a")),
            ws.join(&format!("{under}/n{t}b")),
        );
        s.spawn(move || {
            fs::create_dir_all(a.join("sub")).unwrap();
            let (fa, fb) = (a.join("x"), a.join("y"));
            fs::write(&fa, "x").unwrap();
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..8 {
                    fs::rename(&fa, &fb).unwrap();
                    fs::rename(&fb, &fa).unwrap();
                    fs::rename(&a, &b).unwrap();
                    fs::rename(&b, &a).unwrap();
                }
                std::thread::sleep(Duration::from_millis(1 + t as u64 % 3));
            }
        });
    }
}

/// Rounds of [`a_directory_moved_while_every_cpu_renames_is_decided_by_its_new_path`].
const MOVE_ROUNDS: usize = 600;

/// The cache learns of moves from the kernel's `rename_lock` sequence, which no program run can
/// miss (the programs on `d_move` it replaced could be skipped on a preemptible kernel,
/// `docs/enforcement.md`, "The directory cache"). A cached directory is moved from a granted
/// path to a denied one and back, over and over, while tasks on every CPU rename files and
/// directories of their own and the scope opens files elsewhere: every read at the denied path
/// is refused, every read at the granted one allowed. Before each read at a path, a file beside
/// the moved directory is read, so that its new parent is cached and a miss on the directory
/// itself is answered from the parent's entry (`dircache_up`) as often as by a full walk.
#[test]
fn a_directory_moved_while_every_cpu_renames_is_decided_by_its_new_path() {
    let ws = Scratch::new("cache-move-storm");
    ws.write("ro/d/f", "f\n");
    ws.write("ro/busy/g", "g\n");
    ws.write("ro/beside", "b\n");
    ws.write("no/beside", "b\n");
    let (ro_beside, no_beside) = (ws.s("ro/beside"), ws.s("no/beside"));
    let scope = Scope::new("cache-move-storm", &reader_policy(&ws), 0);
    let mut reader = Reader::spawn(&scope);
    let stop = AtomicBool::new(false);
    let (wrong, refused) = std::thread::scope(|s| {
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        spawn_renamers(s, &stop, &ws, "ro", cpus * 2);
        let mut busy = Reader::spawn(&scope);
        let busy_path = ws.s("ro/busy/g");
        let busy_stop = &stop;
        s.spawn(move || {
            while !busy_stop.load(Ordering::Relaxed) {
                assert_eq!(busy.read(&busy_path), 0, "reading the busy granted file");
            }
        });
        let (granted, denied) = (ws.s("ro/d/f"), ws.s("no/d/f"));
        let (mut wrong, mut refused) = (Vec::new(), 0);
        for round in 0..MOVE_ROUNDS {
            assert_eq!(reader.read(&ro_beside), 0, "reading {ro_beside}");
            for _ in 0..2 {
                let got = reader.read(&granted);
                if got != 0 {
                    wrong.push(format!("round {round}: {granted} gave errno {got}"));
                }
            }
            fs::rename(ws.join("ro/d"), ws.join("no/d")).unwrap();
            assert_eq!(reader.read(&no_beside), libc::EPERM, "reading {no_beside}");
            for _ in 0..2 {
                match reader.read(&denied) {
                    libc::EPERM => refused += 1,
                    got => wrong.push(format!("round {round}: {denied} gave {got}")),
                }
            }
            fs::rename(ws.join("no/d"), ws.join("ro/d")).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        (wrong, refused)
    });
    drop(reader);
    println!("move-storm: {MOVE_ROUNDS} rounds, {refused} denied reads refused");
    assert!(
        wrong.is_empty(),
        "{} wrong decisions: {wrong:#?}",
        wrong.len()
    );
    assert_eq!(refused, MOVE_ROUNDS * 2);
}

/// Rounds of `a_directory_made_where_a_freed_one_was_is_decided_by_its_own_path`.
const REUSE_ROUNDS: usize = 1500;

/// The cache is keyed by a directory inode's address, and a freed inode's memory is soon
/// reused for a new one. Again and again, a directory is made under a granted path and a file
/// in it read from inside the scope (the cache remembers the directory's path), the directory
/// is removed (its inode freed), then one is made under a denied path and a file in it read:
/// no read of the denied one may be decided by an entry the granted one left. (With the
/// entries never deleted when an inode is freed, the denied reads were granted on the first
/// run of this test.)
#[test]
fn a_directory_made_where_a_freed_one_was_is_decided_by_its_own_path() {
    let ws = Scratch::new("cache-reuse");
    fs::create_dir_all(ws.join("ro")).unwrap();
    fs::create_dir_all(ws.join("no")).unwrap();
    let scope = Scope::new("cache-reuse", &reader_policy(&ws), 0);
    let mut reader = Reader::spawn(&scope);
    let (mut allowed, mut refused) = (0, 0);
    for round in 0..REUSE_ROUNDS {
        for (top, want) in [("ro", 0), ("no", libc::EPERM)] {
            let x = ws.join(top).join("x");
            fs::create_dir(&x).unwrap();
            fs::write(x.join("f"), "x").unwrap();
            let f = ws.s(&format!("{top}/x/f"));
            // The first read fills the cache, the second may hit it.
            for _ in 0..2 {
                let got = reader.read(&f);
                if want == 0 {
                    assert_eq!(got, 0, "round {round}: reading the granted {f}");
                } else if got == 0 {
                    allowed += 1;
                } else {
                    assert_eq!(got, want, "round {round}: reading the denied {f}");
                    refused += 1;
                }
            }
            fs::remove_file(x.join("f")).unwrap();
            fs::remove_dir(&x).unwrap();
        }
    }
    drop(reader);
    println!("dir-reuse: {REUSE_ROUNDS} rounds, {refused} denied reads refused, {allowed} allowed");
    assert_eq!(
        allowed, 0,
        "reads of a denied directory decided by another's entry"
    );
    // The denials are reported under their own path.
    let evs = events(&scope.cg);
    assert!(
        evs.iter()
            .any(|e| e.error != 0 && path_of(e) == ws.s("no/x/f")),
        "no denial of no/x/f reported"
    );
}

#[test]
fn renaming_a_cached_directory_under_a_denied_path_denies() {
    let ws = Scratch::new("cache-mv-deny");
    ws.write("ro/d/f", "f\n");
    ws.write("ro/p/q/g", "g\n");
    fs::create_dir_all(ws.join("no")).unwrap();
    let scope = Scope::new("cache-mv-deny", &policy(&ws), 0);

    read_ok(&scope, &ws.s("ro/d/f"), "f\n", "granted, cached");
    // A write open of a file in the cached directory is still denied, with the full path.
    let out = sh(Some(&scope.cg), "echo x >> \"$1\"", &[&ws.s("ro/d/f")]);
    assert!(!out.status.success(), "write in a read-only cached dir");
    let evs = events(&scope.cg);
    let ev = denial(&evs, Hook::FileOpen, &ws.s("ro/d/f"), &scope);
    assert_ne!(ev.access & bee_common::ACCESS_WRITE, 0);

    // The directory itself moves (outside the scope).
    fs::rename(ws.join("ro/d"), ws.join("no/d")).unwrap();
    read_denied(
        &scope,
        &ws.s("no/d/f"),
        "cached dir renamed to a denied path",
    );

    // An ancestor moves: the cached directory q keeps its own name and parent.
    read_ok(&scope, &ws.s("ro/p/q/g"), "g\n", "granted, cached (deep)");
    fs::rename(ws.join("ro/p"), ws.join("no/p")).unwrap();
    read_denied(
        &scope,
        &ws.s("no/p/q/g"),
        "ancestor of a cached dir renamed",
    );

    // RENAME_EXCHANGE of a granted and a denied directory (d_exchange).
    ws.write("ro/x/h", "h-granted\n");
    ws.write("no/y/h", "h-denied\n");
    read_ok(
        &scope,
        &ws.s("ro/x/h"),
        "h-granted\n",
        "granted, cached (exchange)",
    );
    read_denied(&scope, &ws.s("no/y/h"), "denied, cached (exchange)");
    exchange(&ws.s("ro/x"), &ws.s("no/y"));
    read_ok(
        &scope,
        &ws.s("ro/x/h"),
        "h-denied\n",
        "exchanged into the granted path",
    );
    read_denied(&scope, &ws.s("no/y/h"), "exchanged into the denied path");
}

#[test]
fn renaming_a_cached_directory_under_a_granted_path_allows() {
    let ws = Scratch::new("cache-mv-allow");
    ws.write("no/d/f", "f\n");
    fs::create_dir_all(ws.join("ro")).unwrap();
    let scope = Scope::new("cache-mv-allow", &policy(&ws), SCOPE_AUDIT_ALLOWS);

    for _ in 0..3 {
        assert_eperm(&cat(&scope, &ws.s("no/d/f")), "denied, cached");
    }
    let _ = events(&scope.cg);
    fs::rename(ws.join("no/d"), ws.join("ro/d")).unwrap();
    read_ok(&scope, &ws.s("ro/d/f"), "f\n", "renamed to a granted path");
    // With SCOPE_AUDIT_ALLOWS every allowed open (cache hits included) is reported under its
    // full path.
    let evs = events(&scope.cg);
    let allowed = evs
        .iter()
        .filter(|e| {
            e.hook == Hook::FileOpen as u32
                && path_of(e) == ws.s("ro/d/f")
                && e.error == 0
                && e.flags & EVENT_ALLOWED != 0
        })
        .count();
    assert_eq!(allowed, 3, "allowed opens reported: {allowed}");
}

fn exchange(a: &str, b: &str) {
    let (a, b) = (CString::new(a).unwrap(), CString::new(b).unwrap());
    // SAFETY: two valid C strings; renameat2 only reads them.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(r, 0, "renameat2: {}", std::io::Error::last_os_error());
}

fn bind(source: &str, target: &str) {
    let (s, t) = (CString::new(source).unwrap(), CString::new(target).unwrap());
    // SAFETY: valid C strings; a bind mount takes no data.
    let r = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    assert_eq!(
        r,
        0,
        "bind {source} {target}: {}",
        std::io::Error::last_os_error()
    );
}

fn umount(target: &str) {
    let t = CString::new(target).unwrap();
    // SAFETY: a valid C string.
    let r = unsafe { libc::umount2(t.as_ptr(), 0) };
    assert_eq!(r, 0, "umount {target}: {}", std::io::Error::last_os_error());
}

#[test]
fn one_directory_under_two_mounts_is_decided_by_each_name() {
    let ws = Scratch::new("cache-bind");
    let secret = Scratch::new("cache-bind-secret");
    secret.write("s/k", "SECRET\n");
    fs::create_dir_all(ws.join("ro/m")).unwrap();
    fs::create_dir_all(ws.join("no/m")).unwrap();
    let scope = Scope::new("cache-bind", &policy(&ws), 0);
    let (granted, denied) = (ws.s("ro/m/k"), secret.s("s/k"));

    // The same directory inode (secret/s) under a granted and a denied name.
    bind(&secret.s("s"), &ws.s("ro/m"));
    for _ in 0..2 {
        read_ok(
            &scope,
            &granted,
            "SECRET\n",
            "bind mount under a granted name",
        );
        read_denied(&scope, &denied, "its own, denied name");
    }
    // Unmounted and bound again under a denied name: the mount that filled the cache is
    // gone (its memory may be reused by the new one).
    umount(&ws.s("ro/m"));
    bind(&secret.s("s"), &ws.s("no/m"));
    read_denied(&scope, &ws.s("no/m/k"), "bound again under a denied name");
    read_denied(&scope, &denied, "its own name, after the remount");
    umount(&ws.s("no/m"));
}

#[test]
fn two_scopes_with_different_policies_share_a_directory() {
    let ws = Scratch::new("cache-two");
    ws.write("ro/d/f", "f\n");
    let granting = Scope::new("cache-two-a", &policy(&ws), 0);
    let other = Scratch::new("cache-two-other");
    let denying = Scope::new("cache-two-b", &policy(&other), 0);
    let f = ws.s("ro/d/f");
    for _ in 0..3 {
        read_ok(&granting, &f, "f\n", "the granting scope");
        read_denied(&denying, &f, "the other scope");
    }
}

#[test]
fn a_reinstalled_policy_is_not_decided_by_the_old_one() {
    let ws = Scratch::new("cache-reinstall");
    ws.write("ro/d/f", "f\n");
    let other = Scratch::new("cache-reinstall-other");
    let f = ws.s("ro/d/f");
    let mut scope = Scope::new("cache-reinstall", &policy(&ws), 0);
    read_ok(&scope, &f, "f\n", "first install grants");

    // Same cgroup, a policy that does not grant the directory: it gets the policy id and the
    // state range the first one freed.
    scope.uninstall();
    let old_policy = scope.installed.as_ref().map(|i| i.policy_id());
    assert!(old_policy.is_none());
    scope.installed = Some(
        engine()
            .install(&plan(&policy(&other)), scope.id(), 0)
            .expect("reinstall"),
    );
    read_denied(&scope, &f, "the reinstalled policy denies");

    // And back: the granting policy again.
    scope.uninstall();
    scope.installed = Some(
        engine()
            .install(&plan(&policy(&ws)), scope.id(), 0)
            .expect("reinstall"),
    );
    read_ok(&scope, &f, "f\n", "granting again");
}

/// Reading `{ws}/lf/*.txt` and two literal long names; nothing else under `{ws}/lf`. The test
/// binary may run (for helper actions).
fn leaf_policy(ws: &Scratch, long32: &str, long40: &str) -> String {
    format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{exe}",
        "{ws}/lf/*.txt", "{ws}/lf/{long32}", "{ws}/lf/{long40}"]
write = ["/dev/null"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{exe}"]
"#,
        ws = ws.path.display(),
        exe = std::env::current_exe().unwrap().display(),
    )
}

/// The leaf memo (the state after a name, per cached directory) is keyed by the whole name:
/// after a granted name was decided (and remembered), names that differ in one byte, names
/// that share the first 32 bytes (longer than any memo holds), a renamed file and a new file
/// in a deleted file's place are each decided by their own name.
#[test]
fn leaf_names_are_remembered_byte_for_byte() {
    let ws = Scratch::new("cache-leaf");
    let long32 = format!("{}1", "x".repeat(31));
    let long40 = format!("{}1", "y".repeat(39));
    let scope = Scope::new("cache-leaf", &leaf_policy(&ws, &long32, &long40), 0);
    let lf = |name: &str| ws.s(&format!("lf/{name}"));

    // One byte apart, same length: with two memos per directory, six names surely share one.
    ws.write("lf/a.txt", "a\n");
    for name in ["a.txu", "a.tx_", "a.TXT", "b.tx~", "a.xtx", "a-txt"] {
        ws.write(&format!("lf/{name}"), "secret\n");
        read_ok(&scope, &lf("a.txt"), "a\n", "granted, remembered");
        read_denied(&scope, &lf(name), "same length, one byte apart");
    }

    // 32 bytes (the longest name a memo holds) and 40 bytes (never remembered).
    for (granted, base) in [(&long32, "x".repeat(31)), (&long40, "y".repeat(39))] {
        ws.write(&format!("lf/{granted}"), "long\n");
        for last in ["2", "3", "4"] {
            let other = format!("{base}{last}");
            ws.write(&format!("lf/{other}"), "secret\n");
            read_ok(&scope, &lf(granted), "long\n", "long name, granted");
            read_denied(&scope, &lf(&other), "long name, last byte differs");
        }
    }

    // A remembered file renamed is decided by its new name, and back.
    ws.write("lf/m.txt", "m\n");
    read_ok(&scope, &lf("m.txt"), "m\n", "granted before the rename");
    fs::rename(ws.join("lf/m.txt"), ws.join("lf/m.key")).unwrap();
    read_denied(&scope, &lf("m.key"), "renamed to an ungranted name");
    fs::rename(ws.join("lf/m.key"), ws.join("lf/m.txt")).unwrap();
    read_ok(&scope, &lf("m.txt"), "m\n", "renamed back");

    // A deleted file's dentry may be reused for another name: that name is decided afresh.
    ws.write("lf/c.txt", "c\n");
    read_ok(&scope, &lf("c.txt"), "c\n", "granted before the unlink");
    fs::remove_file(ws.join("lf/c.txt")).unwrap();
    ws.write("lf/c.key", "secret\n");
    read_denied(&scope, &lf("c.key"), "created after the unlink");
}

/// Policies whose ids share a directory-cache slot (`policy_id % 4`) take turns in it: each
/// refill clears the leaf memos, and neither policy is decided by the other's directory state
/// or memos — the same name granted by one and not the other, opened alternately.
#[test]
fn policies_sharing_a_slot_keep_their_own_leaf_memos() {
    let ws = Scratch::new("cache-slot");
    ws.write("ro/d/f", "f\n");
    let granting = Scope::new("cache-slot-a", &policy(&ws), 0);
    let other = Scratch::new("cache-slot-other");
    let mut fillers = Vec::new();
    let denying = loop {
        let s = Scope::new(&format!("cache-slot-{}", fillers.len()), &policy(&other), 0);
        if s.policy_id() % 4 == granting.policy_id() % 4 {
            break s;
        }
        fillers.push(s);
        assert!(
            fillers.len() < 8,
            "no policy id shares the granting one's slot"
        );
    };
    let f = ws.s("ro/d/f");
    for _ in 0..3 {
        read_ok(&granting, &f, "f\n", "the granting policy");
        read_denied(&denying, &f, "a policy in the same slot");
    }
}

/// A name torn by a concurrent rename. While a scoped process opens `d.key` again and again,
/// `d.key` and `d.txt` (two files of one cached directory) are exchanged as fast as the kernel
/// allows: each exchange rewrites both dentries' inline names in place and, moving no
/// directory, leaves the cache valid. A hook that reads the name once for the memo's key and
/// again for the walk can remember `d.key` with the state after `d.txt`, and from then on
/// grant `d.key`. After each burst, `d.key` must still be denied. (The programs of c771af1,
/// which read the name twice, let `cat d.key` succeed after the first burst on 6.1 and 6.12.)
#[test]
fn a_name_exchanged_during_the_check_is_remembered_as_itself() {
    let ws = Scratch::new("cache-torn");
    let scope = Scope::new("cache-torn", &leaf_policy(&ws, "none", "none"), 0);
    ws.write("lf/d.txt", "public\n");
    ws.write("lf/d.key", "secret\n");
    let (granted, denied) = (ws.s("lf/d.txt"), ws.s("lf/d.key"));
    read_ok(&scope, &granted, "public\n", "granted, cached");
    read_denied(&scope, &denied, "denied, remembered");

    for burst in 0..5 {
        let stop = AtomicBool::new(false);
        let t = Instant::now();
        let exchanges = std::thread::scope(|s| {
            let exchanger = s.spawn(|| {
                let mut n = 0u32;
                // Bounded, so that a failing helper cannot leave it running.
                while !stop.load(Ordering::Relaxed) && t.elapsed() < Duration::from_secs(120) {
                    exchange(&granted, &denied);
                    n += 1;
                }
                n
            });
            let out = helper(
                Some(&scope.cg),
                Action::OpenRepeat {
                    path: denied.clone(),
                    count: "20000".into(),
                },
            );
            stop.store(true, Ordering::Relaxed);
            assert_ok(&out, "open-repeat");
            exchanger.join().unwrap()
        });
        assert!(exchanges > 0, "burst {burst}: no exchange ran");
        let _ = events(&scope.cg);
        read_denied(
            &scope,
            &denied,
            &format!("after burst {burst} of exchanges"),
        );
    }
}

/// The inode hooks (`utimensat`, xattrs) get a dentry and no mount; they take the name the
/// cache holds for the dentry's directory before they scan the superblock's mounts
/// (`docs/enforcement.md`, "The directory cache"). A directory whose entry says it is
/// writable is moved, again and again, to a read-only path and back while tasks on every CPU
/// rename files and directories of their own: every timestamp change at the read-only path is refused and
/// reported there, every one at the writable path allowed; a directory cached as read-only
/// never lets one through.
#[test]
fn a_timestamp_change_is_decided_by_the_directorys_name_now() {
    let ws = Scratch::new("cache-inode-move");
    ws.write("rw/d/f", "f\n");
    ws.write("ro/r/f", "f\n");
    fs::create_dir_all(ws.join("ro/p")).unwrap();
    let scope = Scope::new("cache-inode-move", &writer_policy(&ws), 0);
    let mut w = Reader::spawn(&scope);
    // Cached as read-only by a read: still no timestamp change.
    for _ in 0..3 {
        assert_eq!(w.read(&ws.s("ro/r/f")), 0, "reading ro/r/f");
        assert_eq!(w.utimes(&ws.s("ro/r/f")), libc::EPERM, "utimensat in ro/r");
    }
    denial(
        &events(&scope.cg),
        Hook::InodeSetattr,
        &ws.s("ro/r/f"),
        &scope,
    );
    let stop = AtomicBool::new(false);
    let (wrong, refused) = std::thread::scope(|s| {
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        spawn_renamers(s, &stop, &ws, "rw", cpus);
        let (granted, denied) = (ws.s("rw/d/f"), ws.s("ro/p/d/f"));
        let (mut wrong, mut refused) = (Vec::new(), 0);
        for round in 0..INODE_MOVE_ROUNDS {
            // The write open fills (or hits) the directory's entry; the changes may hit it.
            for (what, got) in [
                ("open for writing", w.write(&granted)),
                ("utimensat", w.utimes(&granted)),
                ("utimensat again", w.utimes(&granted)),
            ] {
                if got != 0 {
                    wrong.push(format!("round {round}: {what} {granted} gave errno {got}"));
                }
            }
            fs::rename(ws.join("rw/d"), ws.join("ro/p/d")).unwrap();
            for _ in 0..2 {
                match w.utimes(&denied) {
                    libc::EPERM => refused += 1,
                    got => wrong.push(format!("round {round}: utimensat {denied} gave {got}")),
                }
            }
            fs::rename(ws.join("ro/p/d"), ws.join("rw/d")).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        (wrong, refused)
    });
    drop(w);
    assert!(
        wrong.is_empty(),
        "{} wrong decisions: {wrong:#?}",
        wrong.len()
    );
    assert_eq!(refused, INODE_MOVE_ROUNDS * 2);
    denial(
        &events(&scope.cg),
        Hook::InodeSetattr,
        &ws.s("ro/p/d/f"),
        &scope,
    );
}

/// Rounds of [`a_timestamp_change_is_decided_by_the_directorys_name_now`].
const INODE_MOVE_ROUNDS: usize = 200;

/// The name the cache holds for a directory is its path through the mount a check went
/// through. When that mount is gone, the name is gone: a file whose only writable name came
/// through a bind mount loses it with the unmount, cache or not, and a read-only name cached
/// through another mount grants nothing.
#[test]
fn a_timestamp_change_through_a_mount_that_is_gone_is_refused() {
    let ws = Scratch::new("cache-inode-bind");
    let secret = Scratch::new("cache-inode-bind-secret");
    secret.write("s/k", "k\n");
    fs::create_dir_all(ws.join("rw/m")).unwrap();
    fs::create_dir_all(ws.join("ro/m")).unwrap();
    let scope = Scope::new("cache-inode-bind", &writer_policy(&ws), 0);
    let mut w = Reader::spawn(&scope);
    let own = secret.s("s/k");

    bind(&secret.s("s"), &ws.s("rw/m"));
    for _ in 0..3 {
        assert_eq!(
            w.write(&ws.s("rw/m/k")),
            0,
            "write through the writable name"
        );
        assert_eq!(
            w.utimes(&own),
            0,
            "utimensat by its own name: a writable name exists"
        );
        assert_eq!(
            w.utimes(&ws.s("rw/m/k")),
            0,
            "utimensat by its writable name"
        );
    }
    umount(&ws.s("rw/m"));
    for _ in 0..3 {
        assert_eq!(
            w.utimes(&own),
            libc::EPERM,
            "the writable name is unmounted"
        );
    }
    denial(&events(&scope.cg), Hook::InodeSetattr, &own, &scope);

    bind(&secret.s("s"), &ws.s("ro/m"));
    for _ in 0..3 {
        assert_eq!(
            w.read(&ws.s("ro/m/k")),
            0,
            "read through the read-only name"
        );
        assert_eq!(w.utimes(&ws.s("ro/m/k")), libc::EPERM, "its read-only name");
        assert_eq!(w.utimes(&own), libc::EPERM, "its own name");
    }
    umount(&ws.s("ro/m"));
    drop(w);
}

/// With `SCOPE_AUDIT_ALLOWS` every allowed change is reported with its path, so a cached name
/// is not taken for one: the scan names it.
#[test]
fn an_audited_timestamp_change_is_reported_with_its_path() {
    let ws = Scratch::new("cache-inode-audit");
    ws.write("rw/d/f", "f\n");
    let scope = Scope::new("cache-inode-audit", &writer_policy(&ws), SCOPE_AUDIT_ALLOWS);
    let mut w = Reader::spawn(&scope);
    let f = ws.s("rw/d/f");
    for _ in 0..3 {
        assert_eq!(w.write(&f), 0);
        assert_eq!(w.utimes(&f), 0);
    }
    drop(w);
    let reported = events(&scope.cg)
        .iter()
        .filter(|e| {
            e.hook == Hook::InodeSetattr as u32
                && path_of(e) == f
                && e.error == 0
                && e.flags & EVENT_ALLOWED != 0
        })
        .count();
    assert_eq!(
        reported, 3,
        "allowed utimensat calls reported with the path"
    );
}

/// A directory that is not cached yet, under one that is, is decided by its own name: its state
/// is the parent's cached state walked one segment, its name (`dircache_up`). Only the one
/// granted name opens; names one byte apart from it, longer, shorter or in another case do
/// not, on the first read and on the second (a hit on the entry the first one stored). The
/// parent grants a file of the leaf's name itself (`p/f`), so a state that skipped the
/// directory's segment would allow every one of them.
#[test]
fn a_new_directory_under_a_cached_one_is_decided_by_its_own_name() {
    let ws = Scratch::new("cache-up-names");
    ws.write("p/a.txt", "a\n");
    let policy = format!("version = 1\n{}", base_grants()).replace(
        "read = [",
        &format!(
            "read = [\"{ws}/p/a.txt\", \"{ws}/p/f\", \"{ws}/p/ok/**\", ",
            ws = ws.path.display()
        ),
    );
    let scope = Scope::new("cache-up-names", &policy, 0);
    let mut reader = Reader::spawn(&scope);
    for name in ["oj", "okk", "o", "OK", "ok ", "ok", "0k"] {
        // The parent's entry, filled or refreshed by a read beside the new directory.
        assert_eq!(reader.read(&ws.s("p/a.txt")), 0, "reading p/a.txt");
        ws.write(&format!("p/{name}/f"), "f\n");
        let f = ws.s(&format!("p/{name}/f"));
        let want = if name == "ok" { 0 } else { libc::EPERM };
        for i in 0..2 {
            assert_eq!(reader.read(&f), want, "read {i} of {f:?}");
        }
        if want != 0 {
            denial(&events(&scope.cg), Hook::FileOpen, &f, &scope);
        }
        fs::remove_dir_all(ws.join(&format!("p/{name}"))).unwrap();
    }
    // A chain of new directories: each miss finds its parent uncached too, down to p.
    ws.write("p/ok/a/b/c/f", "f\n");
    ws.write("p/no/a/b/c/f", "f\n");
    assert_eq!(reader.read(&ws.s("p/ok/a/b/c/f")), 0);
    assert_eq!(reader.read(&ws.s("p/no/a/b/c/f")), libc::EPERM);
    drop(reader);
}

/// A directory that is the root of a bind mount is named through the mount point, never by
/// its parent's entry; and a new directory under it is named through the mount its check came
/// through, even when its parent's entry was filled through the other one.
#[test]
fn a_new_directory_under_a_bind_mount_is_decided_by_the_mounts_name() {
    let ws = Scratch::new("cache-up-bind");
    ws.write("ro/y", "y\n");
    ws.write("ro/x/g", "g\n");
    fs::create_dir_all(ws.join("no/m")).unwrap();
    let scope = Scope::new("cache-up-bind", &reader_policy(&ws), 0);
    let mut reader = Reader::spawn(&scope);
    bind(&ws.s("ro/x"), &ws.s("no/m"));
    // ro cached; x is the bind mount's root: through the mount it is no/m.
    assert_eq!(reader.read(&ws.s("ro/y")), 0);
    for _ in 0..2 {
        assert_eq!(reader.read(&ws.s("no/m/g")), libc::EPERM, "no/m/g");
        assert_eq!(reader.read(&ws.s("ro/x/g")), 0, "ro/x/g");
    }
    // x cached through one mount or the other; new directories under it, read both ways.
    for round in 0..4 {
        let name = format!("new{round}");
        ws.write(&format!("ro/x/{name}/f"), "f\n");
        let (granted, denied) = (
            ws.s(&format!("ro/x/{name}/f")),
            ws.s(&format!("no/m/{name}/f")),
        );
        let order: [&str; 2] = if round % 2 == 0 {
            [&granted, &denied]
        } else {
            [&denied, &granted]
        };
        for _ in 0..2 {
            for path in order {
                let want = if path == granted { 0 } else { libc::EPERM };
                assert_eq!(reader.read(path), want, "round {round}: {path}");
            }
        }
        denial(&events(&scope.cg), Hook::FileOpen, &denied, &scope);
    }
    drop(reader);
    umount(&ws.s("no/m"));
}
