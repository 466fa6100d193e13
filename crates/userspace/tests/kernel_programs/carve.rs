//! Kernel tests: carve-outs (`fs.deny`, `exec.deny`), protected paths (language versions 2, 3)
//! and directory moves between places granted differently, attacked the ways an agent
//! would: hook planting, hard links, renames into and out of a carved path, symbolic links.
//! In the VM matrix via `cargo xtask vm test`; they fail, never skip, elsewhere.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

use bee_common::Hook;
use bee_common::event::EVENT_REPARENT;

use crate::kernel_support::*;

/// The read and exec grants a scoped busybox needs, then `extra` lines of `[fs]`, and
/// `exec_extra` lines of `[exec]`.
fn policy(version: u32, fs_extra: &str, exec_extra: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().display().to_string();
    format!(
        r#"version = {version}
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{dir}/**"]
{fs_extra}

[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{dir}/**"{exec_extra}]
"#
    )
}

/// A workspace that looks like a git checkout.
fn checkout(name: &str) -> Scratch {
    let ws = Scratch::new(name);
    ws.write(".git/HEAD", "ref: refs/heads/main\n");
    ws.write(".git/config", "[core]\n\tbare = false\n");
    ws.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
    ws.write("src/main.rs", "fn main() {}\n");
    ws
}

#[test]
fn an_agent_cannot_plant_a_git_hook_with_the_whole_workspace_writable() {
    let ws = checkout("plant");
    let text = policy(
        2,
        &format!(r#"write = ["/dev/null", "{}/**"]"#, ws.path.display()),
        "",
    );
    let scope = Scope::new("plant", &text, 0);
    let cg = Some(&scope.cg);
    let w = |n: &str| ws.s(n);

    // Ordinary work in the workspace goes on.
    assert_ok(
        &sh(cg, r#"echo x >> "$1""#, &[&w("src/main.rs")]),
        "edit a source file",
    );
    assert_ok(&run(cg, BUSYBOX, &["mkdir", "-p", &w("a/b")]), "mkdir");
    assert_ok(
        &run(cg, BUSYBOX, &["mv", &w("a"), &w("c")]),
        "rename a directory",
    );
    assert_ok(
        &sh(cg, r#"echo x > "$1""#, &[&w(".git/HEAD")]),
        "git's own files",
    );
    assert_ok(
        &run(cg, BUSYBOX, &["cat", &w(".git/config")]),
        "protected paths stay readable",
    );

    // Every way to plant a hook or rewrite git's configuration.
    let hook = w(".git/hooks/pre-commit");
    assert_eperm(&sh(cg, r#"echo evil > "$1""#, &[&hook]), "create a hook");
    assert_eperm(
        &sh(cg, r#"echo evil >> "$1""#, &[&w(".git/config")]),
        "append to .git/config",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["rm", &w(".git/config")]),
        "unlink .git/config",
    );
    assert_eperm(
        &run(
            cg,
            BUSYBOX,
            &["chmod", "777", &w(".git/hooks/pre-commit.sample")],
        ),
        "chmod a hook",
    );
    assert_ok(
        &sh(cg, r#"echo evil > "$1""#, &[&w("evil")]),
        "a file to link",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["ln", &w("evil"), &hook]),
        "hard link into hooks",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["ln", &w(".git/config"), &w("cfg")]),
        "hard link out of .git/config",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &w("evil"), &hook]),
        "rename a file into hooks",
    );
    assert_ok(
        &run(cg, BUSYBOX, &["ln", "-s", &w(".git/hooks"), &w("h")]),
        "a symlink is only a name",
    );
    assert_eperm(
        &sh(cg, r#"echo evil > "$1""#, &[&w("h/pre-commit")]),
        "write through a symlink",
    );
    // Moving the hooks (or all of .git) out, writing, and moving back.
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &w(".git/hooks"), &w("hooks2")]),
        "move hooks out",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &w(".git"), &w("git-old")]),
        "move .git out",
    );
    // Building a .git elsewhere and moving it in, or naming another git directory.
    assert_ok(
        &run(cg, BUSYBOX, &["mkdir", "-p", &w("x/hooks")]),
        "mkdir x/hooks",
    );
    assert_ok(
        &sh(cg, r#"echo evil > "$1""#, &[&w("x/hooks/pre-commit")]),
        "an unprotected hooks dir",
    );
    assert_ok(&run(cg, BUSYBOX, &["mkdir", &w("sub")]), "mkdir sub");
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &w("x"), &w("sub/.git")]),
        "move a built .git in",
    );
    assert_eperm(
        &sh(cg, r#"echo "gitdir: ../x" > "$1""#, &[&w("sub/.git")]),
        "a .git file",
    );
    assert_eperm(
        &sh(cg, r#"echo ../x > "$1""#, &[&w(".git/commondir")]),
        "commondir",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mkdir", "-p", &w(".git/modules/sm")]),
        "a submodule's git dir",
    );
    assert_eperm(&run(cg, BUSYBOX, &["mkdir", &w(".husky")]), "husky's hooks");
    assert_eperm(
        &sh(cg, r#"echo x > "$1""#, &[&w(".pre-commit-config.yaml")]),
        "pre-commit's config",
    );
    // Plain directories still move (their protected names below go with them).
    assert_ok(&run(cg, BUSYBOX, &["mkdir", "-p", &w("y/z")]), "mkdir y/z");
    assert_ok(
        &run(cg, BUSYBOX, &["mv", &w("y"), &w("y2")]),
        "a plain directory moves",
    );

    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert!(!ws.join("sub/.git").exists() && !ws.join(".git/commondir").exists());
    assert!(ws.join(".git/hooks/pre-commit.sample").exists());
    let evs = events(&scope.cg);
    denial(&evs, Hook::PathMknod, &hook, &scope);
    denial(&evs, Hook::FileOpen, &w(".git/config"), &scope);
    denial(&evs, Hook::PathRename, &w("sub/.git"), &scope);
    denial(&evs, Hook::PathRename, &w(".git"), &scope);
    denial(&evs, Hook::PathMknod, &w("sub/.git"), &scope);
}

#[test]
fn version_1_keeps_its_meaning_and_unprotect_lifts_protection() {
    let ws = checkout("v1");
    let text = policy(1, &format!(r#"write = ["{}/**"]"#, ws.path.display()), "");
    let scope = Scope::new("v1", &text, 0);
    let hook = ws.s(".git/hooks/pre-commit");
    assert_ok(
        &sh(Some(&scope.cg), r#"echo ok > "$1""#, &[&hook]),
        "version 1 protects nothing",
    );
    drop(scope);

    let ws = checkout("unprotect");
    let text = policy(
        2,
        &format!(
            r#"write = ["{ws}/**"]
unprotect = ["{ws}/.git/hooks/**"]"#,
            ws = ws.path.display()
        ),
        "",
    );
    let scope = Scope::new("unprotect", &text, 0);
    let cg = Some(&scope.cg);
    assert_ok(
        &sh(cg, r#"echo ok > "$1""#, &[&ws.s(".git/hooks/pre-commit")]),
        "unprotected hooks",
    );
    assert_eperm(
        &sh(cg, r#"echo x >> "$1""#, &[&ws.s(".git/config")]),
        ".git/config still protected",
    );
}

/// An ordinary file's name beside a planted protected file: in its own directory, or at the
/// workspace's top for a file inside a protected directory (`.lefthook/…`).
fn beside(planted: &str, name: &str) -> String {
    match planted.split_once('/') {
        Some((dir, _)) if !dir.starts_with('.') => format!("{dir}/{name}"),
        _ => name.to_owned(),
    }
}

#[test]
fn version_3_protects_every_new_entry_from_each_way_of_writing_it() {
    let planted = bee_core::protected::V3_PLANTED;
    let ws = checkout("v3");
    for p in planted {
        // The directories the entries live in exist; the entries themselves do not yet.
        if let Some((dir, _)) = p.rsplit_once('/') {
            std::fs::create_dir_all(ws.join(dir)).unwrap();
        }
    }
    let text = policy(
        3,
        &format!(r#"write = ["/dev/null", "{}/**"]"#, ws.path.display()),
        "",
    );
    let scope = Scope::new("v3", &text, 0);
    let cg = Some(&scope.cg);
    let evil = ws.s("evil");
    assert_ok(&sh(cg, r#"echo evil > "$1""#, &[&evil]), "a file to plant");

    for (i, p) in planted.iter().enumerate() {
        let path = ws.s(p);
        let what = |op: &str| format!("{op} {p}");
        assert_eperm(&sh(cg, r#"echo evil > "$1""#, &[&path]), &what("create"));
        assert_eperm(
            &run(cg, BUSYBOX, &["mv", &evil, &path]),
            &what("rename onto"),
        );
        assert_eperm(&run(cg, BUSYBOX, &["ln", &evil, &path]), &what("hard link"));
        assert_eperm(
            &run(cg, BUSYBOX, &["ln", "-s", &evil, &path]),
            &what("symlink"),
        );
        assert!(!ws.join(p).exists(), "{p} was made");

        // The file exists (a person wrote it): it stays readable and unchanged.
        ws.write(p, "ok\n");
        assert_eperm(&sh(cg, r#": > "$1""#, &[&path]), &what("truncate"));
        assert_eperm(&sh(cg, r#"echo evil >> "$1""#, &[&path]), &what("append"));
        assert_eperm(
            &run(cg, BUSYBOX, &["mv", &evil, &path]),
            &what("rename over"),
        );
        assert_eperm(&run(cg, BUSYBOX, &["rm", &path]), &what("unlink"));
        assert_ok(&run(cg, BUSYBOX, &["cat", &path]), &what("read"));
        assert_eq!(std::fs::read_to_string(ws.join(p)).unwrap(), "ok\n", "{p}");

        // An ordinary file beside it is written, renamed and removed.
        let plain = ws.s(&beside(p, &format!("plain-{i}.txt")));
        assert_ok(
            &sh(cg, r#"echo x > "$1""#, &[&plain]),
            &what("a file beside"),
        );
        assert_ok(
            &run(cg, BUSYBOX, &["mv", &plain, &format!("{plain}.2")]),
            &what("rename a file beside"),
        );
        assert_ok(
            &run(cg, BUSYBOX, &["rm", &format!("{plain}.2")]),
            &what("remove a file beside"),
        );
    }
    assert!(ws.join("evil").exists());
    let evs = events(&scope.cg);
    denial(&evs, Hook::PathMknod, &ws.s(planted[0]), &scope);
    drop(scope);

    // Version 2 keeps its meaning: none of these is protected there.
    let ws = checkout("v3-under-v2");
    let text = policy(
        2,
        &format!(r#"write = ["/dev/null", "{}/**"]"#, ws.path.display()),
        "",
    );
    let scope = Scope::new("v3-under-v2", &text, 0);
    let cg = Some(&scope.cg);
    for p in planted {
        let path = ws.s(p);
        let dir = std::path::Path::new(&path)
            .parent()
            .unwrap()
            .display()
            .to_string();
        assert_ok(
            &sh(cg, r#"mkdir -p "$1" && echo x > "$2""#, &[&dir, &path]),
            &format!("version 2 writes {p}"),
        );
    }
}

#[test]
fn a_carve_out_under_a_subtree_grant_holds_for_read_write_and_exec() {
    let ws = Scratch::new("carve");
    ws.write("pub/readme", "public\n");
    ws.write("secret/key", "SECRET\n");
    ws.write("d/private/token", "TOKEN\n");
    let root = ws.path.display().to_string();
    let text = policy(
        1,
        &format!(
            r#"write = ["/dev/null", "{root}/**"]
deny = ["{root}/secret/**", "{root}/**/private/**"]"#
        ),
        &format!(
            r#", "{root}/bin/**"]
deny = ["{root}/bin/echo""#
        ),
    );
    // A symbolic link into the carve-out made before the scope, in the granted tree.
    std::os::unix::fs::symlink(ws.join("secret/key"), ws.join("pub/old-link")).unwrap();
    let scope = Scope::new("carve", &text, 0);
    let cg = Some(&scope.cg);
    let w = |n: &str| ws.s(n);

    assert_ok(
        &run(cg, BUSYBOX, &["cat", &w("pub/readme")]),
        "granted read",
    );
    assert_eperm(&run(cg, BUSYBOX, &["cat", &w("secret/key")]), "carved read");
    assert_eperm(
        &sh(cg, r#"echo x > "$1""#, &[&w("secret/new")]),
        "carved create",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["cat", &w("d/private/token")]),
        "carved at any depth",
    );
    // Hard links and renames out of the carve-out, and into it.
    assert_eperm(
        &run(cg, BUSYBOX, &["ln", &w("secret/key"), &w("pub/k")]),
        "hard link out",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &w("secret/key"), &w("pub/k")]),
        "rename a file out",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &w("secret"), &w("open")]),
        "rename the carved dir",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &w("pub/readme"), &w("secret/readme")]),
        "rename into",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &w("d/private"), &w("d/public")]),
        "rename private out",
    );
    // A hard link into the carve-out: `path_link` needs WRITE on the new name.
    assert_eperm(
        &run(cg, BUSYBOX, &["ln", &w("pub/readme"), &w("secret/readme")]),
        "hard link into",
    );
    assert_eperm(
        &run(
            cg,
            BUSYBOX,
            &["ln", &w("pub/readme"), &w("d/private/readme")],
        ),
        "hard link into a carve-out at any depth",
    );
    // A directory holding a carve-out moves where the carve-out follows it.
    assert_ok(
        &run(cg, BUSYBOX, &["mv", &w("d"), &w("e")]),
        "move a dir with a private inside",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["cat", &w("e/private/token")]),
        "still carved after the move",
    );
    // Symbolic links resolve to the carved path.
    assert_ok(
        &run(cg, BUSYBOX, &["ln", "-s", &w("secret"), &w("link")]),
        "symlink",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["cat", &w("link/key")]),
        "read through a symlink",
    );
    // Writing through a symbolic link in the granted tree opens the carved path: an old link
    // and one made in the scope, to the carved file, to a new name in the carved directory
    // (the create is checked there), and through a link to the directory.
    assert_eperm(
        &sh(cg, r#"echo evil > "$1""#, &[&w("pub/old-link")]),
        "write through a symlink made before the scope",
    );
    assert_ok(
        &run(
            cg,
            BUSYBOX,
            &["ln", "-s", &w("secret/key"), &w("pub/new-link")],
        ),
        "a symlink to the carved file",
    );
    assert_eperm(
        &sh(cg, r#"echo evil >> "$1""#, &[&w("pub/new-link")]),
        "append through a symlink made in the scope",
    );
    assert_ok(
        &run(
            cg,
            BUSYBOX,
            &["ln", "-s", &w("secret/planted"), &w("pub/dangling")],
        ),
        "a symlink to a new name in the carve-out",
    );
    assert_eperm(
        &sh(cg, r#"echo evil > "$1""#, &[&w("pub/dangling")]),
        "create through a dangling symlink",
    );
    assert_eperm(
        &sh(cg, r#"echo evil > "$1""#, &[&w("link/planted2")]),
        "create through a symlink to the carved directory",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["ln", &w("pub/readme"), &w("link/readme2")]),
        "hard link through a symlink to the carved directory",
    );
    // exec.deny inside an exec grant.
    assert_ok(&run(cg, BUSYBOX, &["mkdir", &w("bin")]), "mkdir bin");
    // busybox runs the applet its file is named after.
    assert_ok(
        &run(cg, BUSYBOX, &["cp", BUSYBOX, &w("bin/true")]),
        "copy a binary",
    );
    assert_ok(
        &run(cg, BUSYBOX, &["cp", BUSYBOX, &w("bin/echo")]),
        "copy it again",
    );
    assert_ok(&run(cg, &w("bin/true"), &[]), "granted exec");
    // A directory built under a temporary name and renamed into the executable tree (as
    // cargo makes target/): its files gain only EXEC, on paths the agent can read.
    assert_ok(
        &run(cg, BUSYBOX, &["mkdir", "-p", &w(".tmp1/deep")]),
        "a temporary dir",
    );
    assert_ok(
        &run(cg, BUSYBOX, &["mv", &w(".tmp1"), &w("bin/built")]),
        "renamed into bin/",
    );
    let denied = sh(cg, r#""$1" x"#, &[&w("bin/echo")]);
    assert!(
        !denied.status.success() && denied.stdout.is_empty(),
        "exec.deny: {}",
        show(&denied)
    );

    assert!(ws.join("secret/key").exists() && !ws.join("open").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("secret/key")).unwrap(),
        "SECRET\n"
    );
    for planted in [
        "secret/readme",
        "secret/readme2",
        "secret/planted",
        "secret/planted2",
        "e/private/readme",
    ] {
        assert!(!ws.join(planted).exists(), "{planted} was created");
    }
    let evs = events(&scope.cg);
    denial(&evs, Hook::FileOpen, &w("secret/key"), &scope);
    let written = evs
        .iter()
        .filter(|e| e.hook == Hook::FileOpen as u32 && path_of(e) == w("secret/key"))
        .filter(|e| e.access & bee_common::ACCESS_WRITE != 0)
        .count();
    assert_eq!(
        written, 2,
        "the writes through both symlinks are reported at the carved file"
    );
    denial(&evs, Hook::PathLink, &w("secret/readme"), &scope);
    denial(&evs, Hook::PathLink, &w("d/private/readme"), &scope);
    denial(&evs, Hook::PathLink, &w("secret/readme2"), &scope);
    denial(&evs, Hook::PathMknod, &w("secret/planted"), &scope);
    denial(&evs, Hook::PathMknod, &w("secret/planted2"), &scope);
    denial(&evs, Hook::BprmCheckSecurity, &w("bin/echo"), &scope);
}

#[test]
fn a_directory_never_moves_into_a_wider_grant() {
    // `w/*` grants the entries of w/ but nothing below them; `out/**` grants everything.
    // Moving w/d (holding an ungranted file) to out/d would grant the file.
    let ws = Scratch::new("reparent");
    ws.write("w/d/inner", "INNER\n");
    let root = ws.path.display().to_string();
    let text = policy(
        1,
        &format!(r#"write = ["{root}/w/*", "{root}/out/**"]"#),
        "",
    );
    let scope = Scope::new("reparent", &text, 0);
    let cg = Some(&scope.cg);
    assert_eperm(
        &run(cg, BUSYBOX, &["cat", &ws.s("w/d/inner")]),
        "not granted where it is",
    );
    assert_ok(&run(cg, BUSYBOX, &["mkdir", &ws.s("out")]), "mkdir out");
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &ws.s("w/d"), &ws.s("out/d")]),
        "move into a wider grant",
    );
    assert_ok(
        &run(cg, BUSYBOX, &["mv", &ws.s("w/d"), &ws.s("w/e")]),
        "move within the same grant",
    );
    assert!(!ws.join("out/d").exists());
    let evs = events(&scope.cg);
    let ev = denial(&evs, Hook::PathRename, &ws.s("out/d"), &scope);
    assert_ne!(ev.flags & EVENT_REPARENT, 0);
}

/// A write grant on a device node lets a scope write to it, never remove or replace it (for
/// the whole host), as a device node is never created in a scope either.
#[test]
fn a_write_grant_on_dev_null_does_not_let_a_scope_delete_it() {
    let ws = Scratch::new("devnull");
    ws.write("file", "x\n");
    let root = ws.path.display().to_string();
    let text = policy(2, &format!(r#"write = ["/dev/null", "{root}/**"]"#), "");
    let scope = Scope::new("devnull", &text, 0);
    let cg = Some(&scope.cg);
    assert_ok(&sh(cg, "echo x > /dev/null", &[]), "writing to /dev/null");
    assert_eperm(
        &run(cg, BUSYBOX, &["rm", "-f", "/dev/null"]),
        "unlink /dev/null",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", &ws.s("file"), "/dev/null"]),
        "rename over it",
    );
    assert_eperm(
        &run(cg, BUSYBOX, &["mv", "/dev/null", &ws.s("null")]),
        "rename it away",
    );
    let meta = std::fs::metadata("/dev/null").unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &meta.file_type()
    ));
    let evs = events(&scope.cg);
    let ev = denial(&evs, Hook::PathUnlink, "/dev/null", &scope);
    assert_eq!(ev.access, 0, "reported as never granted");
}

/// Programs for [`an_exec_carve_out_is_refused_through_symlinks_and_a_carved_program_cannot_be_linked_or_moved_out`]
/// and [`an_exec_carve_out_where_the_scope_writes_and_executes_holds_by_name_only`]:
/// copies of busybox (which runs the applet its name says) in a read-only tool tree and a
/// writable workspace whose `bin/` is executable, some of them carved out; and the policy.
fn exec_carve_setup(name: &str) -> (Scratch, String) {
    let ws = Scratch::new(name);
    for program in [
        "tools/true",
        "tools/echo",
        "work/bin/true",
        "work/bin/echo",
        "work/bin/sealed/echo",
    ] {
        let p = ws.join(program);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::copy(BUSYBOX, &p).unwrap();
    }
    for dir in ["work/bin/s", "work/bin/h", "work/bin/m", "work/bin/c"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().display().to_string();
    let root = ws.path.display().to_string();
    let text = format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{dir}/**", "{root}/tools/**"]
write = ["/dev/null", "{root}/work/**"]
deny = ["{root}/work/bin/sealed/**"]

[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{dir}/**", "{root}/tools/**", "{root}/work/bin/**"]
deny = ["{root}/tools/echo", "{root}/work/bin/echo"]
"#
    );
    (ws, text)
}

/// Runs `program x` in `cg` through a shell (a refused exec is the shell's error, not a failed
/// spawn) and says whether it ran: busybox's `echo` prints `x`.
fn ran(cg: Option<&Cgroup>, program: &str) -> (bool, std::process::Output) {
    let out = sh(cg, r#""$1" x"#, &[program]);
    (out.status.success() && out.stdout == b"x\n", out)
}

/// `exec.deny` inside an exec grant, against a program the scope can read but not write
/// (`tools/echo`), one it can also write (`work/bin/echo`), and one `fs.deny` carves out
/// (`work/bin/sealed/echo`): each is refused by its own name and through a symbolic link
/// placed under an executable name (the exec resolves the link, and the denial names the
/// target); the programs the scope cannot write cannot be hard-linked or renamed to an
/// executable name (`path_link` and `path_rename` need WRITE on the existing file).
#[test]
fn an_exec_carve_out_is_refused_through_symlinks_and_a_carved_program_cannot_be_linked_or_moved_out()
 {
    let (ws, text) = exec_carve_setup("execcarve");
    let w = |n: &str| ws.s(n);
    // A link made before the scope, under an executable name.
    std::os::unix::fs::symlink(ws.join("tools/echo"), ws.join("work/bin/s/old")).unwrap();
    let scope = Scope::new("execcarve", &text, 0);
    let cg = Some(&scope.cg);

    assert_ok(&sh(cg, r#""$1""#, &[&w("tools/true")]), "a granted program");
    assert_ok(
        &sh(cg, r#""$1""#, &[&w("work/bin/true")]),
        "a granted program",
    );
    for carved in ["tools/echo", "work/bin/echo", "work/bin/sealed/echo"] {
        let (yes, out) = ran(cg, &w(carved));
        assert!(!yes, "{carved} ran: {}", show(&out));
        assert_eperm(&out, carved);
    }
    // Symbolic links under granted names resolve to the carved program.
    let (yes, out) = ran(cg, &w("work/bin/s/old"));
    assert!(!yes, "a link made before the scope: {}", show(&out));
    assert_eperm(&out, "exec through a symlink made before the scope");
    for (carved, link) in [
        ("tools/echo", "work/bin/s/echo"),
        ("work/bin/echo", "work/bin/s/echo2"),
        ("work/bin/sealed/echo", "work/bin/s/echo3"),
    ] {
        assert_ok(
            &run(cg, BUSYBOX, &["ln", "-s", &w(carved), &w(link)]),
            "a symlink is only a name",
        );
        let (yes, out) = ran(cg, &w(link));
        assert!(!yes, "{carved} through {link}: {}", show(&out));
        assert_eperm(&out, "exec through a symlink made in the scope");
    }
    // Neither a hard link nor a rename gives a program the scope cannot write a new name.
    for carved in ["tools/echo", "work/bin/sealed/echo"] {
        assert_eperm(
            &run(cg, BUSYBOX, &["ln", &w(carved), &w("work/bin/h/echo")]),
            "hard link to an executable name",
        );
        assert_eperm(
            &run(cg, BUSYBOX, &["mv", &w(carved), &w("work/bin/m/echo")]),
            "rename to an executable name",
        );
    }
    assert!(ws.join("tools/echo").exists() && ws.join("work/bin/sealed/echo").exists());
    assert!(!ws.join("work/bin/h/echo").exists() && !ws.join("work/bin/m/echo").exists());

    let evs = events(&scope.cg);
    let execs = |path: &str| {
        evs.iter()
            .filter(|e| e.hook == Hook::BprmCheckSecurity as u32 && path_of(e) == w(path))
            .inspect(|e| {
                assert_eq!(e.error, -EPERM);
                assert_eq!(e.access, bee_common::ACCESS_EXEC);
            })
            .count()
    };
    // Directly, through the old link and through the new one.
    assert_eq!(
        execs("tools/echo"),
        3,
        "denials reported at the carved program"
    );
    // Directly and through the new link.
    assert_eq!(
        execs("work/bin/echo"),
        2,
        "denials reported at the carved program"
    );
    for link in [
        "work/bin/s/old",
        "work/bin/s/echo",
        "work/bin/s/echo2",
        "work/bin/s/echo3",
    ] {
        assert!(
            evs.iter().all(|e| path_of(e) != w(link)),
            "no decision names the link {link}"
        );
    }
    denial(&evs, Hook::BprmCheckSecurity, &w("work/bin/echo"), &scope);
    // fs.deny takes READ too: the exec open is refused first.
    let sealed = denial(&evs, Hook::FileOpen, &w("work/bin/sealed/echo"), &scope);
    assert_eq!(sealed.access, bee_common::ACCESS_EXEC);
    for carved in ["tools/echo", "work/bin/sealed/echo"] {
        denial(&evs, Hook::PathLink, &w(carved), &scope);
        denial(&evs, Hook::PathRename, &w(carved), &scope);
    }
}

/// `exec.deny` decides by name. Where the scope may both write and execute, a program it can
/// read has other names within reach: a copy, or (for one it may write) a hard link or a
/// rename, runs under them. This is the documented limit (README, "Carve-outs"; `bee
/// validate` warns about such policies); the carved name itself stays refused.
#[test]
fn an_exec_carve_out_where_the_scope_writes_and_executes_holds_by_name_only() {
    let (ws, text) = exec_carve_setup("execcarve-w");
    let w = |n: &str| ws.s(n);
    let scope = Scope::new("execcarve-w", &text, 0);
    let cg = Some(&scope.cg);
    let (yes, out) = ran(cg, &w("work/bin/echo"));
    assert!(!yes, "the carved name ran: {}", show(&out));
    denial(
        &events(&scope.cg),
        Hook::BprmCheckSecurity,
        &w("work/bin/echo"),
        &scope,
    );
    for (how, args, at) in [
        (
            "cp",
            ["cp", &w("work/bin/echo"), &w("work/bin/c/echo")],
            "work/bin/c/echo",
        ),
        (
            "ln",
            ["ln", &w("work/bin/echo"), &w("work/bin/h/echo")],
            "work/bin/h/echo",
        ),
    ] {
        assert_ok(&run(cg, BUSYBOX, &args), how);
        let (yes, out) = ran(cg, &w(at));
        assert!(yes, "{how}: the other name runs: {}", show(&out));
    }
    assert_ok(
        &run(
            cg,
            BUSYBOX,
            &["mv", &w("work/bin/echo"), &w("work/bin/m/echo")],
        ),
        "mv",
    );
    let (yes, out) = ran(cg, &w("work/bin/m/echo"));
    assert!(yes, "mv: the new name runs: {}", show(&out));
}
