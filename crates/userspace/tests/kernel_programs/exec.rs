//! Kernel tests: execution (`bprm_check_security`, exec opens, `mmap_file`,
//! `file_mprotect`), in the VM matrix via `cargo xtask vm test`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "helpers of kernel tests: a step that fails fails the test"
)]

use bee_common::Hook;

use crate::kernel_support::*;

/// A workspace holding a copy of busybox (readable, not executable by the policy).
fn setup(name: &str, extra_exec: &str) -> (Scratch, String) {
    let ws = Scratch::new(name);
    std::fs::copy(BUSYBOX, ws.join("bb-copy")).unwrap();
    let exe = std::env::current_exe().unwrap();
    let text = format!(
        r#"version = 1
[fs]
read = ["/bin/**", "/lib/**", "/lib64/**", "/usr/lib/**", "/etc/ld.so.cache", "{ws}/**", "{exe}"]
write = ["/dev/null"]
[exec]
allow = ["/bin/busybox", "/lib/**", "/lib64/**", "/usr/lib/**", "{exe}"{extra_exec}]
"#,
        ws = ws.path.display(),
        exe = exe.display(),
    );
    (ws, text)
}

#[test]
fn exec_of_a_denied_binary_directly_and_through_a_shell() {
    let (ws, text) = setup("exec-direct", "");
    let scope = Scope::new("exec-direct", &text, bee_common::scope::SCOPE_AUDIT_ALLOWS);
    let copy = ws.s("bb-copy");

    let out = sh(Some(&scope.cg), r#""$1" true"#, &[&copy]);
    assert_eperm(&out, "exec through a shell");
    let out = sh(Some(&scope.cg), r#"exec "$1" true"#, &[&copy]);
    assert_eperm(&out, "exec replacing the shell");
    let evs = events(&scope.cg);
    denial(&evs, Hook::BprmCheckSecurity, &copy, &scope);
    // With AUDIT_ALLOWS, the allowed exec of busybox is reported too.
    assert!(
        evs.iter().any(|e| e.hook == Hook::BprmCheckSecurity as u32
            && e.error == 0
            && path_of(e) == BUSYBOX
            && e.flags & bee_common::event::EVENT_ALLOWED != 0),
        "allowed exec reported with AUDIT_ALLOWS"
    );
}

#[test]
fn exec_through_the_dynamic_loader_is_denied() {
    let (ws, text) = setup("exec-ldso", "");
    // A dynamically linked program the policy may read but not execute.
    let exe = std::env::current_exe().unwrap();
    std::fs::copy(&exe, ws.join("dyn-copy")).unwrap();
    let copy = ws.s("dyn-copy");
    let scope = Scope::new("exec-ldso", &text, 0);
    let ldso = "/lib64/ld-linux-x86-64.so.2";
    let out = run(Some(&scope.cg), ldso, &[&copy, "--help"]);
    assert!(!out.status.success(), "ld.so ran the copy: {}", show(&out));
    denial(&events(&scope.cg), Hook::MmapFile, &copy, &scope);
}

#[test]
fn memfd_fexecve_and_execveat_empty_path_are_denied() {
    let (ws, text) = setup("exec-fd", "");
    let scope = Scope::new("exec-fd", &text, 0);
    let out = helper(
        Some(&scope.cg),
        Action::MemfdExec {
            path: BUSYBOX.into(),
        },
    );
    assert_eq!(errno_of(&out), EPERM, "memfd + fexecve: {}", show(&out));
    let evs = events(&scope.cg);
    // A memfd has no path in any mount: it is denied as unresolved, under its name.
    assert!(
        evs.iter().any(|e| e.error == -EPERM
            && e.flags & bee_common::event::EVENT_PATH_UNRESOLVED != 0
            && path_of(e) == "/memfd:bee"),
        "no memfd denial: {:?}",
        evs.iter()
            .map(|e| (path_of(e), e.flags))
            .collect::<Vec<_>>()
    );

    let copy = ws.s("bb-copy");
    let out = helper(
        Some(&scope.cg),
        Action::ExecveatEmpty { path: copy.clone() },
    );
    assert_eq!(
        errno_of(&out),
        EPERM,
        "execveat(AT_EMPTY_PATH): {}",
        show(&out)
    );
    denial(&events(&scope.cg), Hook::BprmCheckSecurity, &copy, &scope);
}

#[test]
fn pinned_binary_replaced_by_rename_is_denied() {
    let ws = Scratch::new("pin");
    // Named after an applet, so the busybox copy runs it.
    std::fs::create_dir(ws.join("bin")).unwrap();
    let tool = ws.join("bin/true");
    std::fs::copy(BUSYBOX, &tool).unwrap();
    let (_, base) = setup("pin-base", &format!(r#", "!{}""#, tool.display()));
    // The pin records tool's inode now.
    let scope = Scope::new("pin", &base, 0);
    let t = tool.display().to_string();
    assert_ok(
        &sh(Some(&scope.cg), r#""$1" true"#, &[&t]),
        "the pinned binary",
    );

    std::fs::copy(BUSYBOX, ws.join("bin/true.new")).unwrap();
    std::fs::rename(ws.join("bin/true.new"), &tool).unwrap();
    assert_eperm(
        &sh(Some(&scope.cg), r#""$1" true"#, &[&t]),
        "a replaced pinned binary",
    );
    // The exec open already checks the pin (the policy grants no READ there to fall back on).
    denial(&events(&scope.cg), Hook::FileOpen, &t, &scope);
}

#[test]
fn executable_mappings_of_files_need_exec() {
    let (ws, text) = setup("mmap", "");
    let scope = Scope::new("mmap", &text, 0);
    let copy = ws.s("bb-copy");
    let out = helper(Some(&scope.cg), Action::MmapExec { path: copy.clone() });
    assert_eq!(errno_of(&out), EPERM, "mmap PROT_EXEC: {}", show(&out));
    denial(&events(&scope.cg), Hook::MmapFile, &copy, &scope);

    let out = helper(Some(&scope.cg), Action::MprotectExec { path: copy.clone() });
    assert_eq!(errno_of(&out), EPERM, "mprotect PROT_EXEC: {}", show(&out));
    denial(&events(&scope.cg), Hook::FileMprotect, &copy, &scope);

    // Executable anonymous memory (JITs) and exec mappings of granted files stay allowed.
    let out = helper(Some(&scope.cg), Action::AnonExec {});
    assert_eq!(errno_of(&out), 0, "anonymous PROT_EXEC: {}", show(&out));
    let out = helper(
        Some(&scope.cg),
        Action::MmapExec {
            path: BUSYBOX.into(),
        },
    );
    assert_eq!(errno_of(&out), 0, "granted file: {}", show(&out));
}
