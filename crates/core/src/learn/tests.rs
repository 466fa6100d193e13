use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use super::collapse::collapse;
use super::sensitive::{is_sensitive, subtree_refused};
use super::*;
use crate::compile::LANGUAGE_VERSIONS;
use crate::{CompileOptions, compile_str};

/// A directory tree in memory: directory → names.
#[derive(Default)]
struct FakeFs(BTreeMap<String, Vec<String>>, BTreeSet<String>);

impl FakeFs {
    fn with(files: &[&str]) -> Self {
        let mut fs = Self::default();
        for f in files {
            fs.1.insert((*f).to_owned());
            let mut p = (*f).to_owned();
            while let Some(d) = collapse::parent(&p).map(str::to_owned) {
                let name = p.rsplit('/').next().unwrap_or("").to_owned();
                let entry = fs.0.entry(d.clone()).or_default();
                if !entry.contains(&name) {
                    entry.push(name);
                }
                fs.1.insert(d.clone());
                if d == "/" {
                    break;
                }
                p = d;
            }
        }
        fs
    }
}

impl FsView for FakeFs {
    fn list(&self, dir: &str) -> Option<Vec<String>> {
        self.0.get(dir).cloned()
    }
    fn exists(&self, path: &str) -> bool {
        self.1.contains(path)
    }
}

fn set(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(|p| (*p).to_owned()).collect()
}

fn options() -> CompileOptions {
    CompileOptions {
        base: PathBuf::from("/work"),
        home: Some(PathBuf::from("/home/u")),
    }
}

fn compile(text: &str) -> crate::CompiledPolicy {
    match compile_str("base.toml", text, &options()) {
        Ok(c) => c.policy,
        Err(e) => unreachable!("{text}\n{e:?}"),
    }
}

fn learn(base: &str, obs: &Observed, fs: &FakeFs) -> String {
    let policy = compile(base);
    let s = Synthesis {
        base_text: base,
        base_name: "base.toml",
        base: &policy,
        observed: obs,
        fs,
        home: Some("/home/u"),
        command: "make test",
        workspace: Some("/work"),
    };
    match synthesize(&s) {
        Ok(t) => t,
        Err(e) => unreachable!("{e}"),
    }
}

#[test]
fn repeats_are_deduped_and_distinct_entries_capped() {
    let mut o = Observed::new(Limits { max_per_kind: 3 });
    for _ in 0..10 {
        o.record(Access::Read("/a"));
    }
    for p in ["/b", "/c", "/d", "/e"] {
        o.record(Access::Read(p));
    }
    assert_eq!(o.total(), 14);
    assert_eq!(o.distinct(), 3);
    assert_eq!(o.dropped(), vec![("fs.read", 2)]);
}

#[test]
fn a_million_accesses_stay_bounded_and_the_output_says_so() {
    let mut o = Observed::new(Limits::default());
    let mut path = String::new();
    for i in 0..1_000_000u32 {
        path.clear();
        path.push_str("/data/d");
        path.push_str(&(i % 1000).to_string());
        path.push_str("/f");
        path.push_str(&i.to_string());
        match i % 4 {
            0 => o.record(Access::Read(&path)),
            1 => o.record(Access::Write(&path)),
            2 => o.record(Access::Exec(&path)),
            _ => o.record(Access::Net {
                proto: crate::net::Protocol::Tcp,
                addr: IpAddr::V4(Ipv4Addr::from(i)),
                port: 443,
            }),
        }
    }
    let max = Limits::default().max_per_kind;
    assert_eq!(o.total(), 1_000_000);
    assert!(o.distinct() <= 5 * max, "{}", o.distinct());
    assert_eq!(o.read.len(), max);
    assert_eq!(o.dropped().len(), 4);
    let out = learn("version = 1\n", &o, &FakeFs::default());
    assert!(
        out.contains("# NOTE: CAPPED: 240000 more distinct fs.read entries"),
        "{}",
        &out[..2000]
    );
    // Still a policy: it compiles as is.
    let _ = compile(&out);
}

#[test]
fn unnameable_paths_are_noted_not_granted() {
    let mut o = Observed::new(Limits::default());
    o.record(Access::Read("/tmp/a*b"));
    o.record(Access::Read("/tmp/\u{fffd}x"));
    o.record(Access::Read("relative"));
    assert_eq!(o.distinct(), 0);
    let out = learn("version = 1\n", &o, &FakeFs::default());
    assert!(out.contains("not expressible"), "{out}");
    assert!(!out.contains("\"/tmp/a*b\","), "{out}");
    let _ = compile(&out);
}

#[test]
fn a_fully_observed_directory_becomes_a_subtree() {
    let fs = FakeFs::with(&["/opt/t/a", "/opt/t/b", "/opt/t/sub/c", "/opt/other"]);
    let (exact, roots) = collapse(&set(&["/opt/t/a", "/opt/t/b", "/opt/t/sub/c"]), &fs, None);
    assert_eq!(roots, set(&["/opt/t"]));
    assert!(exact.is_empty());
    // /opt holds an entry never observed: it stays narrower.
}

#[test]
fn a_directory_with_an_unobserved_entry_stays_exact() {
    let fs = FakeFs::with(&["/opt/t/a", "/opt/t/b", "/opt/t/c"]);
    let (exact, roots) = collapse(&set(&["/opt/t/a", "/opt/t/b"]), &fs, None);
    assert!(roots.is_empty());
    assert_eq!(exact, set(&["/opt/t/a", "/opt/t/b"]));
}

#[test]
fn no_subtree_over_protected_paths_or_secrets() {
    // A repository whose every file was observed, .git/config included: never `repo/**`.
    let fs = FakeFs::with(&["/w/repo/src/a.rs", "/w/repo/.git/config", "/w/repo/.envrc"]);
    let obs = set(&["/w/repo/src/a.rs", "/w/repo/.git/config", "/w/repo/.envrc"]);
    let (exact, roots) = collapse(&obs, &fs, None);
    assert_eq!(roots, set(&["/w/repo/src"]));
    assert!(exact.contains("/w/repo/.git/config") && exact.contains("/w/repo/.envrc"));
    // The home directory holds ~/.ssh: no subtree of it or above it, none inside ~/.ssh.
    let fs = FakeFs::with(&["/home/u/.ssh/id_rsa", "/home/u/notes"]);
    let (_, roots) = collapse(
        &set(&["/home/u/.ssh/id_rsa", "/home/u/notes"]),
        &fs,
        Some("/home/u"),
    );
    assert!(roots.is_empty(), "{roots:?}");
    assert!(subtree_refused("/home", Some("/home/u")));
    assert!(subtree_refused("/etc", None), "/etc holds /etc/shadow");
    assert!(subtree_refused("/", None));
    assert!(!subtree_refused("/usr/lib", Some("/home/u")));
    for p in [
        "/home/u/.aws/credentials",
        "/home/u/.config/gcloud/x",
        "/home/u/.kube/config",
        "/home/u/.docker/config.json",
        "/w/.netrc",
        "/w/p/.git-credentials",
        "/w/.vscode/tasks.json",
        "/w/.idea/workspace.xml",
        "/w/.bee/config.toml",
        "/w/.git/hooks/pre-commit",
        "/etc/shadow",
        "/home/u/.local/share/keyrings/login.keyring",
    ] {
        assert!(is_sensitive(p, Some("/home/u")), "{p}");
    }
    assert!(!is_sensitive("/w/src/main.rs", Some("/home/u")));
}

#[test]
fn the_output_keeps_the_base_and_compiles_as_is() {
    let base = r#"# base
version = 1
name = "b"
description = "the base"

[fs]
read = ["/usr/**", "~/.cargo/**"]
write = ["./target/**"]

[exec]
allow = ["/usr/bin/*"]

[net]
unix = ["/run/x.sock"]

[[net.allow]]
addr = ["127.0.0.1"]
ports = ["1024-65535"]
proto = "tcp"
"#;
    let fs = FakeFs::with(&[
        "/opt/t/a",
        "/opt/t/b",
        "/etc/hosts",
        "/etc/shadow",
        "/work/out/tool",
        "/work/out/obj",
        "/work/src/main.rs",
        "/opt/bin/make",
        "/work/target/debug/test-bin",
    ]);
    let mut o = Observed::new(Limits::default());
    for a in [
        Access::Read("/usr/lib/covered-by-base"),
        Access::Read("/opt/t/a"),
        Access::Read("/opt/t/b"),
        Access::Read("/etc/hosts"),
        Access::Read("/etc/shadow"),
        Access::Read("/work/out/obj"),
        Access::Write("/work/out/obj"),
        Access::Write("/work/out/tool"),
        Access::Write("/tmp/gone"),
        Access::Exec("/opt/bin/make"),
        Access::Exec("/work/out/tool"),
        Access::Exec("/work/target/debug/test-bin"),
        Access::Unix("/run/other.sock"),
        Access::Net {
            proto: crate::net::Protocol::Tcp,
            addr: "10.1.2.3"
                .parse()
                .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            port: 443,
        },
        Access::Net {
            proto: crate::net::Protocol::Tcp,
            addr: "10.1.2.3"
                .parse()
                .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            port: 80,
        },
        Access::Net {
            proto: crate::net::Protocol::Tcp,
            addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 8080,
        },
    ] {
        o.record(a);
    }
    let out = learn(base, &o, &fs);
    let version = LANGUAGE_VERSIONS.last().copied().unwrap_or(0);
    assert!(out.contains(&format!("\nversion = {version}\n")), "{out}");
    assert!(out.contains("name = \"b\""), "{out}");
    assert!(out.contains("\"~/.cargo/**\","), "{out}");
    assert!(
        out.contains("\"/opt/t/**\", # every entry was observed"),
        "{out}"
    );
    assert!(out.contains("\"/etc/shadow\", # review"), "{out}");
    assert!(out.contains("\"/tmp/gone\", # gone"), "{out}");
    assert!(!out.contains("covered-by-base"), "{out}");
    assert!(out.contains("\"!/opt/bin/make\","), "{out}");
    assert!(
        out.contains("\"./target/debug/test-bin\", # written by the run"),
        "a file the base lets the command write is never pinned: {out}"
    );
    assert!(
        out.contains("\"./out/tool\", # written by the run"),
        "{out}"
    );
    assert!(out.contains("\"/run/other.sock\""), "{out}");
    assert!(
        out.contains("addr = [\"10.1.2.3\"]\nports = [80, 443]\nproto = \"tcp\""),
        "{out}"
    );
    assert!(
        !out.contains("8080"),
        "covered by the base's loopback rule: {out}"
    );
    // Both files of /work/out were written: the directory is written as a subtree, and the
    // file read and written is not listed again as a read.
    assert!(out.contains("\"./out/**\", # every entry"), "{out}");
    assert_eq!(out.matches("/out/obj\"").count(), 0, "{out}");
    // Pins need the file: compile against a real one instead of /opt/bin/make.
    let out = out.replace("!/opt/bin/make", "/opt/bin/make");
    let learned = compile(&out);
    assert!(
        learned
            .fs
            .read
            .iter()
            .any(|r| r.pattern.matches("/opt/t/a"))
    );
    assert!(
        learned
            .fs
            .write
            .iter()
            .any(|r| r.pattern.matches("/work/out/tool"))
    );
}

#[test]
fn a_pinned_exec_compiles_when_the_file_exists() {
    let fs = HostFs;
    let sh = "/bin/sh";
    let real = std::fs::canonicalize(sh)
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if real.is_empty() {
        return;
    }
    let mut o = Observed::new(Limits::default());
    o.record(Access::Exec(&real));
    let policy = compile("version = 1\n");
    let s = Synthesis {
        base_text: "version = 1\n",
        base_name: "base.toml",
        base: &policy,
        observed: &o,
        fs: &fs,
        home: None,
        command: "sh",
        workspace: None,
    };
    let out = synthesize(&s).unwrap_or_default();
    assert!(out.contains(&format!("\"!{real}\"")), "{out}");
    let learned = compile(&out);
    assert!(learned.exec.iter().any(|r| r.pin.is_some()));
}
