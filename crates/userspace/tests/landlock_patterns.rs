//! Patterns that match by name below a root under the Landlock engine, natively: each call
//! walks the root and grants each match, and every way around that is tried (a file that
//! does not match beside one that does, a match made during the call, a link named like a
//! match, a hard link, a carve-out, a protected path, a copy made through the loader). Root
//! and Landlock; fails, never skips, without them.
mod landlock_support;

use landlock_support::{Ws, policy_text};

const SH: &str = "/usr/bin/dash";
const TOOLS: &[&str] = &[
    "/usr/bin/dash",
    "/usr/bin/cp",
    "/usr/bin/cat",
    "/usr/bin/ln",
];

/// An exec grant by suffix runs each match at any depth, and nothing else: not the file
/// beside it, not one carved out, not a link named like a match, not a match made during
/// the call (until the next call), not a match loaded by the dynamic loader.
#[test]
fn a_suffix_exec_grant_runs_each_match_and_nothing_else() {
    let t = Ws::new();
    // Copies of `true`: two matches, a file beside them, a match carved out.
    for rel in [
        "tools/a/ok.run",
        "tools/b/c/deep.run",
        "tools/a/no.bin",
        "tools/bad/x.run",
    ] {
        let path = t.write(rel, "");
        std::fs::copy("/usr/bin/true", &path).unwrap();
    }
    std::fs::create_dir(t.path().join("new")).unwrap();
    std::os::unix::fs::symlink("/usr/bin/id", t.path().join("tools/a/id.run")).unwrap();
    let p = t.policy(&format!(
        "{}deny = [\"./tools/bad/**\"]\n",
        policy_text(
            &["./**", "/usr/bin/**"],
            &["./new/**"],
            &[SH, "/usr/bin/cp", "./**/*.run"],
            ""
        )
    ));
    let script = "for p in tools/a/ok.run tools/b/c/deep.run tools/a/no.bin tools/bad/x.run \
                  tools/a/id.run; do \"./$p\" && echo \"ran $p\" || echo \"refused $p\"; done; \
                  /usr/bin/cp /usr/bin/true new/made.run && \
                  { ./new/made.run && echo 'ran made' || echo 'refused made'; }; \
                  /lib64/ld-linux-x86-64.so.2 ./tools/a/no.bin && echo 'loaded no.bin' \
                  || echo 'refused loading no.bin'";
    let r = t.run(&p, &[SH, "-c", script]);
    assert_eq!(
        r.stdout,
        "ran tools/a/ok.run\nran tools/b/c/deep.run\nrefused tools/a/no.bin\n\
         refused tools/bad/x.run\nrefused tools/a/id.run\nrefused made\nrefused loading no.bin\n",
        "{r:?}"
    );
    // The next call walks again and finds the match the last one made.
    let r = t.run(&p, &[SH, "-c", "./new/made.run && echo ran made"]);
    assert_eq!(r.stdout, "ran made\n", "{r:?}");
}

/// A read grant by name reads each match and nothing beside it, nor a secret through a
/// symbolic link named like a match.
#[test]
fn a_name_read_grant_reads_each_match_and_nothing_beside_it() {
    let t = Ws::new();
    t.write("a/Cargo.toml", "[package] a");
    t.write("a/b/Cargo.toml", "[package] b");
    t.write("a/b/Cargo.lock", "lock");
    let secret = t.outside("secret.txt", "top secret");
    std::fs::create_dir_all(t.path().join("a/c")).unwrap();
    std::os::unix::fs::symlink(&secret, t.path().join("a/c/Cargo.toml")).unwrap();
    let p = t.policy(&policy_text(&["./**/Cargo.toml"], &[], TOOLS, ""));
    let script = "/usr/bin/cat a/Cargo.toml a/b/Cargo.toml; echo; \
                  /usr/bin/cat a/b/Cargo.lock || echo refused lock; \
                  /usr/bin/cat a/c/Cargo.toml || echo refused link";
    let r = t.run(&p, &[SH, "-c", script]);
    assert_eq!(
        r.stdout, "[package] a[package] b\nrefused lock\nrefused link\n",
        "{r:?}"
    );
}

/// A write grant by name writes each match, except a protected one, which stays readable;
/// `fs.unprotect` lifts the protection where it says.
#[test]
fn a_name_write_grant_spares_protected_matches() {
    let t = Ws::new();
    t.write("app/config", "app");
    t.write(".git/config", "[core]\n");
    t.write("vendor/x/.git/config", "[core]");
    let p = t.policy(
        "version = 2\n[fs]\nread = [\"/usr/lib/**\", \"/etc/ld.so.cache\", \"./**\"]\n\
         write = [\"/dev/null\", \"./**/config\"]\nunprotect = [\"./vendor/**\"]\n\
         [exec]\nallow = [\"/usr/lib/x86_64-linux-gnu/**\", \"/usr/bin/dash\"]\n",
    );
    let script = "for f in app/config .git/config vendor/x/.git/config; do \
                  { echo changed > \"$f\"; } 2>/dev/null && echo \"wrote $f\" || echo \"refused $f\"; done; \
                  read line < .git/config && echo \"read $line\"";
    let r = t.run(&p, &[SH, "-c", script]);
    assert_eq!(
        r.stdout,
        "wrote app/config\nrefused .git/config\nwrote vendor/x/.git/config\nread [core]\n",
        "{r:?}"
    );
    assert_eq!(
        std::fs::read_to_string(t.path().join(".git/config")).unwrap(),
        "[core]\n"
    );
}
