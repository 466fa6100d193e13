//! Kernel tests: file access through the segment automaton (`file_open`, the `path_*`
//! hooks), in the VM matrix via `cargo xtask vm test`. They fail, never skip, elsewhere.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

use bee_common::Hook;
use bee_common::event::EVENT_PATH_TRUNCATED;

use crate::kernel_support::*;

/// A workspace with `ro/` (read) and `rw/` (write) and a secret outside.
fn setup(name: &str) -> (Scratch, Scratch, String) {
    let ws = Scratch::new(&format!("{name}-ws"));
    let secret = Scratch::new(&format!("{name}-secret"));
    ws.write("ro/a.txt", "ro-content\n");
    ws.write("ro/victim.txt", "victim\n");
    ws.write("rw/b.txt", "rw-content\n");
    secret.write("key", "SECRET\n");
    let text = format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{ws}/ro/**", "{exe}/**"]
write = ["/dev/null", "{ws}/rw/**"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "{exe}/**"]
"#,
        ws = ws.path.display(),
        exe = std::env::current_exe().unwrap().parent().unwrap().display(),
    );
    (ws, secret, text)
}

#[test]
fn read_allowed_and_denied_with_events() {
    let (ws, secret, text) = setup("read");
    let scope = Scope::new("read", &text, 0);
    let cg = Some(&scope.cg);

    let out = run(cg, BUSYBOX, &["cat", &ws.s("ro/a.txt")]);
    assert_ok(&out, "granted read");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ro-content\n");

    let key = secret.s("key");
    let out = run(cg, BUSYBOX, &["cat", &key]);
    assert_eperm(&out, "read outside grants");
    // The same file through /proc/self/root resolves to the same path and is denied too.
    let via_proc = format!("/proc/self/root{key}");
    let out = run(cg, BUSYBOX, &["cat", &via_proc]);
    assert_eperm(&out, "read via /proc/self/root");

    let evs = events(&scope.cg);
    let ev = denial(&evs, Hook::FileOpen, &key, &scope);
    assert_eq!(ev.access, bee_common::ACCESS_READ);
    assert_eq!(&ev.comm[..7], b"busybox");
    assert!(
        evs.iter().filter(|e| path_of(e) == key).count() >= 2,
        "both opens of the secret reported under its real path"
    );
    assert!(
        evs.iter().all(|e| path_of(e) != ws.s("ro/a.txt")),
        "allowed opens are not reported without AUDIT_ALLOWS"
    );

    // Outside any scope nothing is enforced.
    assert_ok(&run(None, BUSYBOX, &["cat", &key]), "outside the scope");
}

#[test]
fn writes_outside_grants_are_denied_per_hook() {
    let (ws, _secret, text) = setup("write");
    let scope = Scope::new("write", &text, 0);
    let cg = Some(&scope.cg);
    let ro = |n: &str| ws.s(&format!("ro/{n}"));
    let rw = |n: &str| ws.s(&format!("rw/{n}"));

    assert_eperm(&sh(cg, r#"echo x > "$1""#, &[&ro("a.txt")]), "write open");
    assert_eperm(&sh(cg, r#"echo x > "$1""#, &[&ro("new.txt")]), "create");
    assert_eperm(&run(cg, BUSYBOX, &["rm", &ro("victim.txt")]), "unlink");
    assert_eperm(&run(cg, BUSYBOX, &["mkdir", &ro("d")]), "mkdir");
    assert_eperm(&run(cg, BUSYBOX, &["mkfifo", &ro("fifo")]), "mknod");
    assert_eperm(&run(cg, BUSYBOX, &["chmod", "600", &ro("a.txt")]), "chmod");
    assert_eperm(
        &run(cg, BUSYBOX, &["ln", "-s", "/etc", &ro("sym")]),
        "symlink",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &ro("a.txt"), &rw("a.txt")]),
        "rename from ro",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &rw("b.txt"), &ro("b.txt")]),
        "rename into ro",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["truncate", "-s", "0", &ro("a.txt")]),
        "truncate",
    );

    let evs = events(&scope.cg);
    denial(&evs, Hook::FileOpen, &ro("a.txt"), &scope);
    denial(&evs, Hook::PathUnlink, &ro("victim.txt"), &scope);
    denial(&evs, Hook::PathMkdir, &ro("d"), &scope);
    denial(&evs, Hook::PathMknod, &ro("fifo"), &scope);
    denial(&evs, Hook::PathChmod, &ro("a.txt"), &scope);
    denial(&evs, Hook::PathSymlink, &ro("sym"), &scope);
    denial(&evs, Hook::PathRename, &ro("a.txt"), &scope);
    denial(&evs, Hook::PathRename, &ro("b.txt"), &scope);

    // Nothing changed.
    assert!(ws.join("ro/victim.txt").exists());
    assert!(ws.join("rw/b.txt").exists());
    assert!(!ws.join("ro/d").exists());

    // The same operations inside rw/ all work.
    let script = r#"set -e
cd "$1"
echo new > f.txt
mkdir d
mkfifo fifo
chmod 600 f.txt
ln -s f.txt sym
mv f.txt g.txt
truncate -s 0 g.txt
rm fifo sym
rmdir d
echo ok"#;
    let out = sh(cg, script, &[&ws.s("rw")]);
    assert_ok(&out, "work inside rw/");
    assert!(
        events(&scope.cg).iter().all(|e| e.error == 0),
        "no denials for legitimate work"
    );
}

/// A set-user-ID or set-group-ID bit is never granted, even under a write grant: the file
/// would run as its owner (root, for bee as root) for whoever runs it outside the scope.
#[test]
fn set_id_bits_are_never_granted_even_in_writable_trees() {
    use std::os::unix::fs::PermissionsExt as _;
    let (ws, _secret, text) = setup("setid");
    let scope = Scope::new("setid", &text, 0);
    let cg = Some(&scope.cg);
    let f = ws.s("rw/setid");
    assert_ok(&sh(cg, r#"echo x > "$1""#, &[&f]), "create");
    for mode in ["4755", "2755", "6755", "u+s", "g+s"] {
        assert_eperm(&run(cg, BUSYBOX, &["chmod", mode, &f]), mode);
    }
    let evs = events(&scope.cg);
    denial(&evs, Hook::PathChmod, &f, &scope);
    let mode = std::fs::metadata(ws.join("rw/setid"))
        .map(|m| m.permissions().mode())
        .unwrap_or(0o6000);
    assert_eq!(mode & 0o6000, 0, "{mode:o}");
    assert_ok(&run(cg, BUSYBOX, &["chmod", "755", &f]), "a plain mode");
}

#[test]
fn symlink_in_workspace_to_secret_is_denied() {
    let (ws, secret, text) = setup("symlink");
    let link = ws.join("ro/link");
    std::os::unix::fs::symlink(secret.join("key"), &link).unwrap();
    let scope = Scope::new("symlink", &text, 0);
    assert_eperm(
        &run(
            Some(&scope.cg),
            BUSYBOX,
            &["cat", &link.display().to_string()],
        ),
        "secret through a workspace symlink",
    );
    denial(&events(&scope.cg), Hook::FileOpen, &secret.s("key"), &scope);
}

#[test]
fn hard_link_to_secret_cannot_be_created() {
    let (ws, secret, text) = setup("hardlink");
    let scope = Scope::new("hardlink", &text, 0);
    let target = ws.s("rw/hl");
    assert_eperm(
        &run(Some(&scope.cg), BUSYBOX, &["ln", &secret.s("key"), &target]),
        "hard link to a secret",
    );
    assert!(!ws.join("rw/hl").exists());
    denial(&events(&scope.cg), Hook::PathLink, &secret.s("key"), &scope);
}

#[test]
fn every_glob_kind_is_enforced() {
    let ws = Scratch::new("globs");
    let w = ws.path.display().to_string();
    for f in [
        "exact.txt",
        "exact.txt.no",
        "sub/a/b/c.txt",
        "post/x/y/lib.rs",
        "post/x/y/lib.rs.no",
        "seg/a/b/.keep",
        "seg/a/b/keep.no",
        "bs/v1/a.txt",
        "bs/w1/a.txt",
        "star/libfoo.so",
        "star/foo.so",
        // `*.rs` at the leaf: the empty run, names shorter than the suffix, near misses.
        "post/.rs",
        "post/rs",
        "post/ars",
        "post/a.rsx",
    ] {
        ws.write(f, "x\n");
    }
    // A 255-byte name (NAME_MAX) ending in `.rs`.
    let long_rs = format!("post/{}.rs", "l".repeat(252));
    ws.write(&long_rs, "x\n");
    let text = format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "{w}/exact.txt", "{w}/sub/**", "{w}/post/**/*.rs",
        "{w}/seg/**/.keep", "{w}/bs/v*/**", "{w}/star/lib*.so"]
[exec]
allow = ["/bin/busybox"]
"#
    );
    let scope = Scope::new("globs", &text, 0);
    let cat = |f: &str| run(Some(&scope.cg), BUSYBOX, &["cat", &format!("{w}/{f}")]);
    for ok in [
        "exact.txt",
        "sub/a/b/c.txt",
        "post/x/y/lib.rs",
        "seg/a/b/.keep",
        "bs/v1/a.txt",
        "star/libfoo.so",
        "post/.rs",
        long_rs.as_str(),
    ] {
        assert_ok(&cat(ok), ok);
    }
    for denied in [
        "exact.txt.no",
        "post/x/y/lib.rs.no",
        "seg/a/b/keep.no",
        "bs/w1/a.txt",
        "star/foo.so",
        "post/rs",
        "post/ars",
        "post/a.rsx",
    ] {
        assert_eperm(&cat(denied), denied);
        denial(
            &events(&scope.cg),
            Hook::FileOpen,
            &format!("{w}/{denied}"),
            &scope,
        );
    }
}

#[test]
fn path_longer_than_the_buffer_is_denied_and_deep_paths_work() {
    let ws = Scratch::new("long");
    let w = ws.path.display().to_string();
    // 20 segments of 240 bytes: about 4.8 KiB, beyond PATH_MAX; built with *at() calls.
    let seg = "s".repeat(240);
    make_chain(&ws.path, &seg, 20);
    // 150 short segments inside the workspace: deep, but well within the buffer.
    make_chain(&ws.path, "d", 150);

    let exe = std::env::current_exe().unwrap();
    let text = format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{w}/**", "{exe}"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{exe}"]
"#,
        exe = exe.display()
    );
    let scope = Scope::new("long", &text, 0);
    let out = helper(
        Some(&scope.cg),
        Action::OpenChain {
            dir: w.clone(),
            seg: seg.clone(),
            count: "20".into(),
        },
    );
    assert_eq!(
        errno_of(&out),
        EPERM,
        "path beyond the buffer: {}",
        show(&out)
    );
    let evs = events(&scope.cg);
    let ev = evs
        .iter()
        .find(|e| e.hook == Hook::FileOpen as u32 && e.flags & EVENT_PATH_TRUNCATED != 0)
        .unwrap_or_else(|| panic!("no truncated-path denial among {} events", evs.len()));
    assert_eq!(ev.error, -EPERM);

    let out = helper(
        Some(&scope.cg),
        Action::OpenChain {
            dir: w.clone(),
            seg: "d".into(),
            count: "150".into(),
        },
    );
    assert_eq!(
        errno_of(&out),
        0,
        "deep path inside the workspace: {}",
        show(&out)
    );
    let deep_cat = r#"cd "$1"; i=0; while [ $i -lt 150 ]; do cd d; i=$((i+1)); done; cat f"#;
    let out = sh(Some(&scope.cg), deep_cat, &[&w]);
    assert_ok(&out, "deep path inside the workspace, by busybox");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "x\n");
}

#[test]
fn busybox_scripts_inside_the_workspace_are_not_denied() {
    let ws = Scratch::new("script");
    let w = ws.path.display().to_string();
    ws.write("src/main.txt", "hello\nworld\n");
    let text = format!(
        "version = 1\n[fs]\nread = [\"/bin/**\", \"/lib/**\", \"/proc/**\"]\nwrite = [\"{w}/**\", \"/dev/null\"]\n[exec]\nallow = [\"/bin/busybox\", \"/bin/*\"]\n"
    );
    let scope = Scope::new("script", &text, 0);
    let script = r#"set -e
cd "$1"
mkdir -p build/out
for i in 1 2 3 4 5; do sort src/main.txt | uniq > build/out/$i.txt; done
grep -c world build/out/*.txt > build/count
cp -r src build/src-copy
find build -type f | wc -l
ls -ln build > /dev/null
cat build/count | head -1"#;
    let out = sh(Some(&scope.cg), script, &[&w]);
    assert_ok(&out, "a build-like script");
    let denied: Vec<_> = events(&scope.cg)
        .into_iter()
        .filter(|e| e.error != 0)
        .collect();
    assert!(
        denied.is_empty(),
        "spurious denials: {:?}",
        denied.iter().map(path_of).collect::<Vec<_>>()
    );
}

#[test]
fn io_uring_openat_is_checked() {
    let (ws, secret, text) = setup("uring");
    let scope = Scope::new("uring", &text, 0);
    let out = helper(
        Some(&scope.cg),
        Action::UringOpenat {
            path: ws.s("ro/a.txt"),
        },
    );
    assert_eq!(errno_of(&out), 0, "granted io_uring openat: {}", show(&out));
    let key = secret.s("key");
    let out = helper(Some(&scope.cg), Action::UringOpenat { path: key.clone() });
    assert_eq!(
        errno_of(&out),
        EPERM,
        "io_uring openat of a secret: {}",
        show(&out)
    );
    denial(&events(&scope.cg), Hook::FileOpen, &key, &scope);
}

#[test]
fn descriptors_passed_over_scm_rights_are_checked() {
    let (ws, secret, text) = setup("scm");
    let scope = Scope::new("scm", &text, 0);
    let key = secret.s("key");
    // Opened outside the scope, then handed in over a unix socket.
    let sock = socket_with_fd(&std::fs::File::open(&key).unwrap());
    let out = helper_with_fd3(&scope.cg, Action::RecvFd {}, &sock);
    assert_eq!(errno_of(&out), EPERM, "secret fd passed in: {}", show(&out));
    denial(&events(&scope.cg), Hook::FileOpen, &key, &scope);
    let sock = socket_with_fd(&std::fs::File::open(ws.join("ro/a.txt")).unwrap());
    let out = helper_with_fd3(&scope.cg, Action::RecvFd {}, &sock);
    assert_eq!(errno_of(&out), 0, "granted fd passed in: {}", show(&out));
}

#[test]
fn kernel_verdicts_match_the_reference_walk() {
    let ws = Scratch::new("diff");
    let w = ws.path.display().to_string();
    let long_a = "a".repeat(60);
    let long_b = "b".repeat(120);
    let files = [
        "exact".to_owned(),
        "exact2".to_owned(),
        format!("lit/{long_a}"),
        format!("lit/{long_a}x"),
        format!("tree/{long_b}/deep/f.txt"),
        "src/a/b/c/main.rs".to_owned(),
        "src/a/main.rs.bak".to_owned(),
        "src/lib.rs".to_owned(),
        "multi/foo-1-bar.txt".to_owned(),
        "multi/foo--bar.txt".to_owned(),
        "multi/foobar.txt".to_owned(),
        "multi/xfoo-1-bar.txt".to_owned(),
        "v/pkg-1.2/lib/x.so".to_owned(),
        "v/pkg/lib/x.so".to_owned(),
        "git/a/.git".to_owned(),
        "git/a/b/c/.git".to_owned(),
        "git/a/b/c/.gitx".to_owned(),
        "mix/*lit".to_owned(),
        "mix/any".to_owned(),
    ];
    for f in &files {
        ws.write(f, "x\n");
    }
    let exe = std::env::current_exe().unwrap();
    let text = format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{exe}",
        "{w}/exact", "{w}/lit/{long_a}", "{w}/tree/**", "{w}/src/**/*.rs",
        "{w}/multi/foo*-*bar.txt", "{w}/v/pkg-*/lib/*.so", "{w}/git/**/.git", "{w}/mix/*"]
[exec]
allow = ["/lib/**", "/lib64/**", "/usr/lib/**", "{exe}"]
"#,
        exe = exe.display()
    );
    let scope = Scope::new("diff", &text, 0);
    let plan = scope.installed.as_ref().unwrap().plan();
    let paths: Vec<String> = files.iter().map(|f| format!("{w}/{f}")).collect();
    let out = helper(Some(&scope.cg), Action::OpenMany { paths });
    assert_eq!(errno_of(&out), 0, "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut checked = 0;
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("open-many ") else {
            continue;
        };
        let (errno, path) = rest.split_once(' ').unwrap();
        let expected = plan.path_access(path).unwrap() & bee_common::ACCESS_READ != 0;
        let kernel = errno == "0";
        assert_eq!(
            kernel, expected,
            "{path}: kernel errno {errno}, reference {expected}"
        );
        if !kernel {
            assert_eq!(errno, EPERM.to_string(), "{path}");
        }
        checked += 1;
    }
    assert_eq!(checked, files.len(), "{stdout}");
    assert!(
        stdout.contains(" 0 ") && stdout.contains(&format!(" {EPERM} ")),
        "both verdicts occur"
    );
}

/// `/proc/self/**` grants the calling process's own entries and `/proc/thread-self/**` the
/// calling thread's; another process's `/proc/<pid>` stays denied, and the events name it by
/// number.
#[test]
fn proc_self_grants_only_the_callers_own_entries() {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().display().to_string();
    let text = format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{dir}/**", "/proc/self/**"]
write = ["/dev/null"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{dir}/**"]
"#
    );
    let scope = Scope::new("procself", &text, 0);
    let cg = Some(&scope.cg);
    assert_ok(
        &run(cg, BUSYBOX, &["cat", "/proc/self/status"]),
        "own status",
    );
    assert_ok(
        &sh(cg, r#"cat /proc/$$/cmdline"#, &[]),
        "own entries by number",
    );
    let outside = format!("/proc/{}/status", std::process::id());
    assert_eperm(&run(cg, BUSYBOX, &["cat", &outside]), "another process");
    assert_eperm(&run(cg, BUSYBOX, &["cat", "/proc/1/status"]), "init");
    assert_eperm(
        &run(cg, BUSYBOX, &["cat", "/proc/cpuinfo"]),
        "not under self",
    );
    // A child of the scope reading its parent's entries: another process.
    assert_eperm(
        &sh(cg, r#"exec cat /proc/$PPID/status"#, &[]),
        "the parent's entries",
    );
    let evs = events(&scope.cg);
    denial(&evs, Hook::FileOpen, &outside, &scope);
    denial(&evs, Hook::FileOpen, "/proc/1/status", &scope);
    drop(scope);

    let thread = text.replace("/proc/self/**", "/proc/thread-self/**");
    let scope = Scope::new("threadself", &thread, 0);
    let cg = Some(&scope.cg);
    assert_ok(
        &run(cg, BUSYBOX, &["cat", "/proc/thread-self/status"]),
        "own thread",
    );
    assert_ok(
        &sh(cg, r#"cat /proc/$$/task/$$/status"#, &[]),
        "own thread by numbers",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["cat", "/proc/self/status"]),
        "the process is not the thread",
    );
}
