//! Stage one on good and bad input: every refusal names file, line, column and key.

use std::path::PathBuf;

use bee_core::compile::{CompileOptions, Compiled, compile_file, compile_str};
use bee_core::compiled::CompiledPolicy;
use bee_core::glob::PathPattern;
use bee_core::{PolicyDiagnostic, PolicyError};

fn options() -> CompileOptions {
    CompileOptions {
        base: PathBuf::from("/work/repo"),
        home: Some(PathBuf::from("/home/u")),
    }
}

fn ok(text: &str) -> Compiled {
    match compile_str("p.toml", text, &options()) {
        Ok(c) => c,
        Err(e) => unreachable!("expected a valid policy, got {e:?}"),
    }
}

fn problems(text: &str) -> Vec<PolicyDiagnostic> {
    match compile_str("p.toml", text, &options()) {
        Ok(c) => unreachable!("expected a refusal, got {:?}", c.policy),
        Err(PolicyError::Invalid(d)) => {
            assert_eq!(d.file, "p.toml");
            d.problems
        }
        Err(e) => unreachable!("unexpected error {e}"),
    }
}

fn one_problem(text: &str) -> PolicyDiagnostic {
    let mut p = problems(text);
    assert_eq!(p.len(), 1, "{p:?}");
    p.remove(0)
}

fn patterns(rules: &[bee_core::compiled::PathRule]) -> Vec<String> {
    rules.iter().map(|r| r.pattern.to_string()).collect()
}

#[test]
fn empty_policy_grants_nothing() {
    let c = ok("version = 1\n");
    assert!(c.policy.fs.read.is_empty() && c.policy.fs.write.is_empty());
    assert!(c.policy.exec.is_empty() && c.policy.net.allow.is_empty());
    assert!(c.policy.net.unix.is_empty());
}

#[test]
fn empty_file_is_missing_its_version() {
    let p = one_problem("");
    assert_eq!((p.line, p.column), (1, 1));
    assert_eq!(p.key.as_deref(), Some("version"));
    // The newest version, whose built-in protected paths a new policy should have.
    assert!(
        p.help
            .as_deref()
            .unwrap_or_default()
            .contains("`version = 3`"),
        "{:?}",
        p.help
    );
}

#[test]
fn a_misspelt_key_gets_a_suggestion() {
    let p = one_problem("version = 2\n[fs]\ndney = [\"/etc/**\"]\n");
    assert_eq!(p.key.as_deref(), Some("fs.dney"));
    let help = p.help.unwrap_or_default();
    assert!(help.starts_with("did you mean `deny`?"), "{help}");
    assert!(help.contains("known keys here"), "{help}");
    let p = one_problem("version = 2\n[exce]\nallow = [\"/usr/bin/**\"]\n");
    let help = p.help.unwrap_or_default();
    assert!(help.starts_with("did you mean `exec`?"), "{help}");
    // Nothing near: only the known keys.
    let p = one_problem("version = 2\n[fs]\nzzzzzz = []\n");
    let help = p.help.unwrap_or_default();
    assert!(help.starts_with("known keys here"), "{help}");
}

#[test]
fn unknown_version_is_refused() {
    let p = one_problem("# a policy from a later bee\nversion = 4\n");
    assert_eq!(p.key.as_deref(), Some("version"));
    assert_eq!((p.line, p.column), (2, 11));
    assert!(p.message.contains("version 4"), "{}", p.message);
    assert_eq!(p.help.as_deref(), Some("known versions: 1, 2, 3"));
    // The file is named too (`problems` asserts `p.toml`); the command line prints all three.
    // Its includes are not reported one by one: the fragments belong to a version.
    let p = one_problem("version = 4\ninclude = [\"base\", \"rust\"]\n");
    assert_eq!(p.key.as_deref(), Some("version"));
    let p = one_problem("version = 0\n");
    assert!(p.message.contains("version 0"), "{}", p.message);
    let p = one_problem("version = \"1\"\n");
    assert!(p.message.contains("integer"), "{}", p.message);
}

#[test]
fn malformed_toml_names_the_line() {
    let p = one_problem("version = 1\n[fs\nread = []\n");
    assert_eq!(p.line, 2);
    let p = one_problem("version = 1\n[fs]\nread = [\"/a\",\n");
    assert!(p.line >= 3, "{p:?}");
}

#[test]
fn unknown_keys_are_errors_with_their_table() {
    let p = one_problem("version = 1\nfoo = 1\n");
    assert_eq!((p.line, p.key.as_deref()), (2, Some("foo")));
    let p = one_problem("version = 1\n[fs]\nread = []\nreed = []\n");
    assert_eq!((p.line, p.key.as_deref()), (4, Some("fs.reed")));
    assert!(p.help.as_deref().unwrap_or_default().contains("read"));
    let p = one_problem("version = 1\n[[net.allow]]\naddr = \"::1\"\nport = 1\n");
    assert_eq!((p.line, p.key.as_deref()), (4, Some("net.allow.port")));
}

#[test]
fn wrong_types_are_errors() {
    let p = one_problem("version = 1\n[fs]\nread = \"/usr/**\"\n");
    assert_eq!(p.line, 3);
    let p = one_problem("version = 1\n[fs]\nread = [1]\n");
    assert_eq!(p.line, 3);
}

#[test]
fn paths_are_normalised_against_base_and_home() {
    let c = ok(
        "version = 1\n[fs]\nread = [\"/usr//lib/./x/\", \"src/../Cargo.toml\", \"~/.cargo/**\", \".\"]\n",
    );
    assert_eq!(
        patterns(&c.policy.fs.read),
        [
            "/usr/lib/x",
            "/work/repo/Cargo.toml",
            "/home/u/.cargo/**",
            "/work/repo"
        ]
    );
    assert_eq!(c.policy.base, "/work/repo");
}

#[test]
fn bad_paths_name_their_key_and_column() {
    let p = one_problem("version = 1\n[fs]\nwrite = [\"/ok\", \"/a/../../b\"]\n");
    assert_eq!((p.line, p.column), (3, 17));
    assert_eq!(p.key.as_deref(), Some("fs.write[1]"));
    assert!(p.message.contains("above"), "{}", p.message);
    let p = one_problem("version = 1\n[fs]\nread = [\"/a\\u0000b\"]\n");
    assert!(p.message.contains("NUL"), "{}", p.message);
    let long = format!("/{}", "abcd/".repeat(1000));
    let p = one_problem(&format!("version = 1\n[fs]\nread = [\"{long}\"]\n"));
    assert!(p.message.contains("4095"), "{}", p.message);
    let p = one_problem("version = 1\n[fs]\nread = [\"\"]\n");
    assert!(p.message.contains("empty"), "{}", p.message);
    let p = one_problem("version = 1\n[fs]\nread = [\"~bob/x\"]\n");
    assert!(p.message.contains("bob"), "{}", p.message);
}

#[test]
fn every_problem_is_reported_not_only_the_first() {
    let p = problems(
        "version = 4\n[fs]\nread = [\"/a/**/b/**/c\", \"/..\"]\n[exec]\nallow = [\"!/x/*\"]\n",
    );
    let keys: Vec<_> = p.iter().filter_map(|d| d.key.clone()).collect();
    assert_eq!(
        keys,
        ["version", "fs.read[0]", "fs.read[1]", "exec.allow[0]"]
    );
}

#[test]
fn unsupported_globs_are_refused_with_the_shapes() {
    for bad in ["/a/**/b/**/c", "/a/?", "/a/{b,c}", "/a**", "/a/**/x*y"] {
        let p = one_problem(&format!("version = 1\n[fs]\nread = [\"{bad}\"]\n"));
        assert_eq!(p.key.as_deref(), Some("fs.read[0]"), "{bad}");
        assert!(
            p.help.as_deref().unwrap_or_default().contains("/dir/**"),
            "{bad}"
        );
    }
}

#[test]
fn duplicates_merge_with_a_warning() {
    let c = ok("version = 1\n[fs]\nread = [\"/usr/**\", \"/etc\", \"/usr//**/\"]\n");
    assert_eq!(patterns(&c.policy.fs.read), ["/usr/**", "/etc"]);
    assert_eq!(c.warnings.len(), 1);
    assert_eq!(c.warnings[0].key, "fs.read[2]");
    assert!(c.warnings[0].message.contains("fs.read[0]"));
}

#[test]
fn compilation_is_deterministic() {
    let text = "version = 1\nname = \"n\"\n[fs]\nread = [\"/z\", \"/a/**\", \"/m/**/*.rs\"]\nwrite = [\"/t/**\"]\n[[net.allow]]\naddr = [\"::1\", \"127.0.0.1\"]\nports = [80, \"8000-8080\"]\nproto = [\"udp\", \"tcp\"]\n";
    let a = ok(text).policy.to_json();
    let b = ok(text).policy.to_json();
    assert!(a.is_ok());
    assert_eq!(a.ok(), b.ok());
    let json = ok(text).policy.to_json().unwrap_or_default();
    let back: CompiledPolicy = match serde_json::from_str(&json) {
        Ok(p) => p,
        Err(e) => unreachable!("{e}"),
    };
    assert_eq!(back, ok(text).policy);
}

#[test]
fn net_rules_expand_and_normalise() {
    let c = ok(
        "version = 1\n[[net.allow]]\naddr = [\"::ffff:10.0.0.0/104\", \"::1\"]\nports = [443, \"8000-8100\"]\nproto = [\"tcp\", \"udp\", \"tcp\"]\n",
    );
    let rules: Vec<String> = c
        .policy
        .net
        .allow
        .iter()
        .map(|r| format!("{} {} {:?}", r.net, r.ports, r.protocols))
        .collect();
    assert_eq!(
        rules,
        [
            "10.0.0.0/8 443 [Tcp, Udp]",
            "10.0.0.0/8 8000-8100 [Tcp, Udp]",
            "::1/128 443 [Tcp, Udp]",
            "::1/128 8000-8100 [Tcp, Udp]"
        ]
    );
}

#[test]
fn bad_net_rules() {
    let p = one_problem(
        "version = 1\n[[net.allow]]\naddr = \"10.0.0.1/8\"\nports = 1\nproto = \"tcp\"\n",
    );
    assert_eq!(p.key.as_deref(), Some("net.allow[0].addr"));
    assert!(p.message.contains("10.0.0.0/8"), "{}", p.message);
    let p = one_problem(
        "version = 1\n[[net.allow]]\naddr = \"::1\"\nports = \"90-80\"\nproto = \"tcp\"\n",
    );
    assert_eq!(p.key.as_deref(), Some("net.allow[0].ports"));
    let p =
        one_problem("version = 1\n[[net.allow]]\naddr = \"::1\"\nports = 70000\nproto = \"tcp\"\n");
    assert_eq!(p.key.as_deref(), Some("net.allow[0].ports"));
    let p =
        one_problem("version = 1\n[[net.allow]]\naddr = \"::1\"\nports = 1\nproto = \"icmp\"\n");
    assert_eq!(p.key.as_deref(), Some("net.allow[0].proto"));
    let p = one_problem("version = 1\n[[net.allow]]\naddr = \"::1\"\nproto = \"tcp\"\n");
    assert_eq!(p.key.as_deref(), Some("net.allow[0].ports"));
}

#[test]
fn host_rules_expand_normalise_and_merge() {
    let c = ok(concat!(
        "version = 2\n",
        "[[net.allow]]\n",
        "addr = \"10.0.0.0/8\"\n",
        "ports = 443\n",
        "proto = \"tcp\"\n",
        "[[net.allow]]\n",
        "host = [\"Crates.IO.\", \"*.crates.io\", \"BÜCHER.example\"]\n",
        "ports = [443, \"8000-8001\"]\n",
        "proto = [\"udp\", \"tcp\"]\n",
        "[[net.allow]]\n",
        "host = \"crates.io\"\n",
        "ports = 443\n",
        "proto = [\"tcp\", \"udp\"]\n",
    ));
    let rules: Vec<String> = c
        .policy
        .net
        .hosts
        .iter()
        .map(|r| {
            format!(
                "{} {} {:?} {} line {} `{}`",
                r.host, r.ports, r.protocols, r.origin.key, r.origin.line, r.origin.text
            )
        })
        .collect();
    assert_eq!(
        rules,
        [
            "crates.io 443 [Tcp, Udp] net.allow[1] line 7 `Crates.IO.`",
            "crates.io 8000-8001 [Tcp, Udp] net.allow[1] line 7 `Crates.IO.`",
            "*.crates.io 443 [Tcp, Udp] net.allow[1] line 7 `*.crates.io`",
            "*.crates.io 8000-8001 [Tcp, Udp] net.allow[1] line 7 `*.crates.io`",
            "xn--bcher-kva.example 443 [Tcp, Udp] net.allow[1] line 7 `BÜCHER.example`",
            "xn--bcher-kva.example 8000-8001 [Tcp, Udp] net.allow[1] line 7 `BÜCHER.example`",
        ]
    );
    assert_eq!(c.policy.net.allow.len(), 1);
    // The third table repeats the first name rule: merged, with a warning.
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(c.warnings[0].key, "net.allow[2]");
    assert!(c.warnings[0].message.contains("net.allow[1]"));
    // The compiled form: `hosts` as strings in ASCII form, and it reads back.
    let json = c.policy.to_json().unwrap_or_default();
    assert!(json.contains("\"host\": \"*.crates.io\""), "{json}");
    assert!(
        json.contains("\"host\": \"xn--bcher-kva.example\""),
        "{json}"
    );
    let back: CompiledPolicy = match serde_json::from_str(&json) {
        Ok(p) => p,
        Err(e) => unreachable!("{e}"),
    };
    assert_eq!(back, c.policy);
    // A policy without names compiles to JSON without `hosts`, as before they existed, and
    // such JSON still loads.
    let plain = ok("version = 1\n").policy.to_json().unwrap_or_default();
    assert!(!plain.contains("hosts"), "{plain}");
    assert!(serde_json::from_str::<CompiledPolicy>(&plain).is_ok());
}

#[test]
fn bad_host_rules() {
    let rule =
        |body: &str| format!("version = 2\n[[net.allow]]\n{body}ports = 443\nproto = \"tcp\"\n");
    let p = one_problem(&rule("addr = \"10.0.0.1\"\nhost = \"crates.io\"\n"));
    assert_eq!(p.key.as_deref(), Some("net.allow[0].host"));
    assert_eq!(p.line, 4);
    assert!(p.message.contains("not both"), "{}", p.message);
    let p = one_problem(&rule(""));
    assert_eq!(p.key.as_deref(), Some("net.allow[0]"));
    assert!(p.message.contains("`addr` or `host`"), "{}", p.message);
    for (host, says) in [
        ("*.com", "too broad"),
        ("a.*.b", "`*`"),
        ("1.2.3.4", "use `addr`"),
        ("::1", "use `addr`"),
        ("-a.example", "hyphen"),
        ("a_b.example", "`_`"),
        ("", "empty"),
        ("example.42", "all-numeric"),
    ] {
        let p = one_problem(&rule(&format!("host = \"{host}\"\n")));
        assert_eq!(p.key.as_deref(), Some("net.allow[0].host"), "{host}");
        assert_eq!((p.line, p.column), (3, 8), "{host}");
        assert!(p.message.contains(says), "{host}: {}", p.message);
        assert!(p.help.is_some(), "{host}");
    }
    let long = vec!["a".repeat(60); 5].join(".");
    let p = one_problem(&rule(&format!("host = \"{long}\"\n")));
    assert!(p.message.contains("253"), "{}", p.message);
    // Every bad name of a list, and a bad port beside them, in one report.
    let p = problems(
        "version = 2\n[[net.allow]]\nhost = [\"*.com\", \"ok.example\", \"a..b\"]\nports = 70000\nproto = \"tcp\"\n",
    );
    assert_eq!(p.len(), 1, "{p:?}");
    let p = problems(
        "version = 2\n[[net.allow]]\nhost = [\"*.com\", \"ok.example\", \"a..b\"]\nports = 1\nproto = \"tcp\"\n",
    );
    assert_eq!(p.len(), 2, "{p:?}");
    let p = one_problem(&rule("host = 7\n"));
    assert_eq!(p.key.as_deref(), Some("net.allow[0].host"));
}

#[test]
fn host_rules_need_no_new_language_version() {
    // Purely additive: version 1 policies may grant names too.
    let c = ok("version = 1\n[[net.allow]]\nhost = \"crates.io\"\nports = 443\nproto = \"tcp\"\n");
    assert_eq!(c.policy.net.hosts.len(), 1);
}

#[test]
fn pinned_executables_record_their_inode() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let bin = dir.path().join("tool");
    std::fs::write(&bin, b"#!/bin/sh\n").unwrap_or_else(|e| unreachable!("{e}"));
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&bin, &link).unwrap_or_else(|e| unreachable!("{e}"));
    let text = format!(
        "version = 1\n[exec]\nallow = [\"!{}\", \"!{}\"]\n",
        bin.display(),
        link.display()
    );
    let c = ok(&text);
    // The link resolves to the same file, so the two pins merge.
    assert_eq!(c.policy.exec.len(), 1);
    let rule = &c.policy.exec[0];
    let real = std::fs::canonicalize(&bin).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(
        rule.pattern,
        PathPattern::Exact {
            path: real.display().to_string()
        }
    );
    let meta = std::fs::metadata(&bin).unwrap_or_else(|e| unreachable!("{e}"));
    use std::os::unix::fs::MetadataExt;
    let pin = rule.pin.unwrap_or_else(|| unreachable!("pinned"));
    assert_eq!((pin.dev, pin.ino), (meta.dev(), meta.ino()));
}

#[test]
fn pin_refusals() {
    let p = one_problem("version = 1\n[exec]\nallow = [\"!/nonexistent/tool\"]\n");
    assert_eq!(p.key.as_deref(), Some("exec.allow[0]"));
    assert!(p.message.contains("cannot pin"), "{}", p.message);
    let p = one_problem("version = 1\n[exec]\nallow = [\"!/usr/bin/*\"]\n");
    assert!(p.message.contains("exact"), "{}", p.message);
    let p = one_problem("version = 1\n[exec]\nallow = [\"!/\"]\n");
    assert!(p.message.contains("regular file"), "{}", p.message);
}

#[test]
fn a_shadowed_pin_is_a_contradiction() {
    let sh = std::fs::canonicalize("/bin/sh").unwrap_or_else(|e| unreachable!("{e}"));
    let dir = sh.parent().unwrap_or_else(|| unreachable!()).display();
    let text = format!(
        "version = 1\n[exec]\nallow = [\"!{}\", \"{dir}/*\"]\n",
        sh.display()
    );
    let p = one_problem(&text);
    assert_eq!(p.key.as_deref(), Some("exec.allow[0]"));
    assert!(p.message.contains("exec.allow[1]"), "{}", p.message);
}

/// A pinned program inside a write grant is protected by its pin: rewritten in place it
/// would keep its device and inode, and the pin would admit other code.
#[test]
fn a_pin_inside_a_write_grant_protects_its_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let real = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| unreachable!("{e}"));
    let tool = real.join("tool");
    std::fs::write(&tool, b"#!/bin/sh\n").unwrap_or_else(|e| unreachable!("{e}"));
    let (ws, tool) = (real.display(), tool.display());
    let c = ok(&format!(
        "version = 1\n[fs]\nwrite = [\"{ws}/**\"]\n[exec]\nallow = [\"/usr/bin/*\", \"!{tool}\"]\n"
    ));
    let protect: Vec<_> = c
        .policy
        .fs
        .protect
        .iter()
        .map(|r| (r.pattern.clone(), r.origin.key.as_str(), r.origin.line))
        .collect();
    let exact = PathPattern::Exact {
        path: tool.to_string(),
    };
    assert_eq!(protect, [(exact, "exec.allow[1]", 5)]);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);

    // Outside every write grant there is nothing to protect.
    let c = ok(&format!(
        "version = 1\n[fs]\nwrite = [\"/elsewhere/**\"]\n[exec]\nallow = [\"!{tool}\"]\n"
    ));
    assert!(c.policy.fs.protect.is_empty(), "{:?}", c.policy.fs.protect);

    // `fs.unprotect` may not lift it (version 3: unprotect needs a protecting version).
    let p = one_problem(&format!(
        "version = 3\n[fs]\nwrite = [\"{ws}/**\"]\nunprotect = [\"{ws}/**\"]\n\
         [exec]\nallow = [\"!{tool}\"]\n"
    ));
    assert_eq!(p.key.as_deref(), Some("fs.unprotect[0]"));
    assert!(
        p.message.contains("exec.allow[0]") && p.message.contains("pinned program"),
        "{}",
        p.message
    );

    // A second name for the file (a hard link) is not protected: a warning says so.
    std::fs::hard_link(real.join("tool"), real.join("other"))
        .unwrap_or_else(|e| unreachable!("{e}"));
    let c = ok(&format!(
        "version = 1\n[fs]\nwrite = [\"{ws}/**\"]\n[exec]\nallow = [\"!{tool}\"]\n"
    ));
    assert_eq!(c.policy.fs.protect.len(), 1);
    let warned: Vec<_> = c
        .warnings
        .iter()
        .map(|w| (w.key.as_str(), w.line))
        .collect();
    assert_eq!(warned, [("exec.allow[0]", 5)], "{:?}", c.warnings);
    assert!(
        c.warnings[0].message.contains("2 hard links"),
        "{}",
        c.warnings[0]
    );
}

#[test]
fn a_hundred_thousand_rules_compile() {
    let mut text = String::from("version = 1\n[fs]\nread = [\n");
    for i in 0..100_000 {
        text.push_str(&format!("  \"/data/d{}/f{i}\",\n", i % 97));
    }
    text.push_str("]\n");
    let c = ok(&text);
    assert_eq!(c.policy.fs.read.len(), 100_000);
}

#[test]
fn not_utf8_and_missing_files() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let f = dir.path().join("bad.toml");
    std::fs::write(&f, b"version = 1\n# \xff\xfe\n").unwrap_or_else(|e| unreachable!("{e}"));
    match compile_file(&f, &options()) {
        Err(PolicyError::Invalid(d)) => {
            assert_eq!(d.problems.len(), 1);
            assert_eq!(d.problems[0].line, 2);
            assert!(d.problems[0].message.contains("UTF-8"));
        }
        other => unreachable!("{other:?}"),
    }
    match compile_file(&dir.path().join("missing.toml"), &options()) {
        Err(PolicyError::Read { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => unreachable!("{other:?}"),
    }
}

#[test]
fn display_names_file_line_column_and_key() {
    let p = one_problem("version = 1\n[fs]\nread = [\"/..\"]\n");
    assert_eq!(
        p.to_string(),
        "p.toml:3:9: fs.read[0]: `..` climbs above `/`"
    );
}

/// `/proc/self` names the calling process's own entries (the kernel programs write its
/// `/proc/<tgid>` as `/proc/self`), and `/proc/thread-self` the calling thread's, which the
/// compiler spells `/proc/self/task/self`.
#[test]
fn proc_self_and_thread_self_mean_the_callers_own_entries() {
    let c = ok(
        "version = 1\n[fs]\nread = [\"/proc/self/**\", \"/proc/selfish\", \"/proc/thread-self/*/x\", \"/proc/thread-self\", \"/proc/thread-selfie\"]\n",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let rules: Vec<String> = c
        .policy
        .fs
        .read
        .iter()
        .map(|r| r.pattern.to_string())
        .collect();
    assert_eq!(
        rules,
        [
            "/proc/self/**",
            "/proc/selfish",
            "/proc/self/task/self/*/x",
            "/proc/self/task/self",
            "/proc/thread-selfie",
        ]
    );
}

#[test]
fn a_name_rule_inside_an_everywhere_address_rule_is_warned_about() {
    let text = |addrs: &str| {
        format!(
            "version = 2\n[[net.allow]]\naddr = {addrs}\nports = \"0-65535\"\nproto = [\"tcp\", \"udp\"]\n[[net.allow]]\nhost = \"crates.io\"\nports = 443\nproto = \"tcp\"\n"
        )
    };
    let resolution_only = |c: &Compiled| -> Vec<String> {
        c.warnings
            .iter()
            .filter(|w| w.message.contains("only name resolution"))
            .map(|w| w.key.clone())
            .collect()
    };
    let c = ok(&text("[\"0.0.0.0/0\", \"::/0\"]"));
    assert_eq!(resolution_only(&c), ["net.allow[1]"], "{:?}", c.warnings);
    // IPv4 alone leaves the name's AAAA answers to the name rule.
    assert!(resolution_only(&ok(&text("\"0.0.0.0/0\""))).is_empty());
}

#[test]
fn dns_ports_in_a_policy_with_names_are_warned_about() {
    let c = ok(
        "version = 2\n[[net.allow]]\naddr = \"10.0.0.0/8\"\nports = [53, 853, 443]\nproto = \"udp\"\n[[net.allow]]\nhost = \"crates.io\"\nports = [443]\nproto = \"tcp\"\n",
    );
    let messages: Vec<&str> = c.warnings.iter().map(|w| w.message.as_str()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].contains("port 53 always reaches bee's resolver"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("port 853 (DNS over TLS) is always refused"),
        "{messages:?}"
    );
    assert!(c.warnings.iter().all(|w| w.key == "net.allow[0]"));
    // Without names, port 53 is an ordinary port.
    let plain =
        ok("version = 2\n[[net.allow]]\naddr = \"10.0.0.0/8\"\nports = [53]\nproto = \"udp\"\n");
    assert!(plain.warnings.is_empty(), "{:?}", plain.warnings);
}

#[test]
fn repeated_rules_are_merged_into_the_first_with_a_warning_each_in_order() {
    let c = ok(r#"version = 1
[fs]
read = ["/a", "/b/**", "/a", "/b/**", "/a"]
write = ["/tmp/**", "/tmp/**"]
[exec]
allow = ["/usr/bin/a", "/usr/bin/a"]
"#);
    assert_eq!(patterns(&c.policy.fs.read), ["/a", "/b/**"]);
    assert_eq!(patterns(&c.policy.fs.write), ["/tmp/**"]);
    assert_eq!(c.policy.exec.len(), 1);
    let w: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        w,
        [
            "p.toml:3:24: fs.read[2]: repeats fs.read[0] (line 3) in fs.read; merged",
            "p.toml:3:30: fs.read[3]: repeats fs.read[1] (line 3) in fs.read; merged",
            "p.toml:3:39: fs.read[4]: repeats fs.read[0] (line 3) in fs.read; merged",
            "p.toml:4:21: fs.write[1]: repeats fs.write[0] (line 4) in fs.write; merged",
            "p.toml:6:24: exec.allow[1]: repeats exec.allow[0] (line 6) in exec.allow; merged",
        ]
    );
}

/// Version 3 is version 2 with more protected paths, and nothing else: the same grants, the
/// same shipped fragments, version 2's protected set first and in order.
#[test]
fn version_3_is_version_2_with_more_protected_paths() {
    let body =
        "include = [\"base\"]\n[fs]\nwrite = [\"./**\"]\nunprotect = [\"./.vscode/tasks.json\"]\n";
    let v2 = ok(&format!("version = 2\n{body}")).policy;
    let v3 = ok(&format!("version = 3\n{body}")).policy;
    assert_eq!((v2.version, v3.version), (2, 3));
    assert_eq!(patterns(&v2.fs.read), patterns(&v3.fs.read));
    assert_eq!(patterns(&v2.fs.write), patterns(&v3.fs.write));
    assert_eq!(patterns(&v2.fs.unprotect), patterns(&v3.fs.unprotect));
    let (p2, p3) = (patterns(&v2.fs.protect), patterns(&v3.fs.protect));
    assert_eq!(p2.len(), bee_core::protected::protected(2).len());
    assert_eq!(p3.len(), bee_core::protected::protected(3).len());
    assert_eq!(p3[..p2.len()], p2[..]);
    assert!(p3.contains(&"/**/.devcontainer.json".to_owned()));
    assert!(!p2.contains(&"/**/.devcontainer.json".to_owned()));
    // Each built-in rule's origin is the `version` line, keyed `protected[i]`.
    let last = v3
        .fs
        .protect
        .last()
        .map(|r| (r.origin.key.clone(), r.origin.line));
    assert_eq!(last, Some((format!("protected[{}]", p3.len() - 1), 1)));
}
