//! The `bee` command line: exit statuses, help, and `bee validate` on the example policies.

mod support;

use std::path::{Path, PathBuf};

use support::{bee, code, stderr, stdout};

fn example_policies() -> Vec<PathBuf> {
    support::repo_tomls("policies")
}

#[test]
fn bare_bee_prints_help_and_runs_nothing() {
    let o = bee(&[]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("Usage: bee"), "{}", stdout(&o));
    assert!(stdout(&o).contains("validate"));
}

#[test]
fn usage_errors_exit_64() {
    let o = bee(&["validate", "--no-such-flag"]);
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    let o = bee(&["validate"]);
    assert_eq!(code(&o), 64);
    let o = bee(&["frobnicate"]);
    assert_eq!(code(&o), 64);
}

#[test]
fn help_and_version_exit_0() {
    assert_eq!(code(&bee(&["--help"])), 0);
    assert_eq!(code(&bee(&["validate", "--help"])), 0);
    assert_eq!(code(&bee(&["--version"])), 0);
}

#[test]
fn every_example_policy_validates() {
    let files = example_policies();
    assert!(files.len() >= 6, "{files:?}");
    for f in files {
        let f = f.display().to_string();
        let o = bee(&["validate", "--policy", &f]);
        assert_eq!(code(&o), 0, "{f}: {}", stderr(&o));
        // A checkout under /tmp adds a warning first: the bundled `/tmp/**` then covers it.
        assert!(
            stderr(&o).lines().any(|l| l.starts_with("ok: ")),
            "{f}: {}",
            stderr(&o)
        );
    }
}

/// The README's table of example policies says which engines run each one; `bee validate`
/// (the Landlock engine's plan on this host, with its network gate) must agree, and the
/// demo's policy runs on both.
#[test]
fn the_readme_names_the_engines_that_run_each_example_policy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap_or_default();
    let landlock_runs = |policy: &Path, base: &Path| {
        let (p, b) = (policy.display().to_string(), base.display().to_string());
        let o = bee(&["validate", "--policy", &p, "--base", &b]);
        let err = stderr(&o);
        assert_eq!(code(&o), 0, "{p}: {err}");
        if err.contains("landlock engine: enforces it") {
            true
        } else {
            assert!(
                err.contains("landlock engine: cannot enforce it"),
                "{p}: {err}"
            );
            false
        }
    };
    let files = example_policies();
    for f in &files {
        let name = f.file_name().unwrap_or_default().to_string_lossy();
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| unreachable!("README has no row for {name}"));
        let engines = row
            .trim_end_matches('|')
            .rsplit('|')
            .next()
            .unwrap_or("")
            .trim();
        let both = landlock_runs(f, root);
        assert_eq!(
            engines == "both",
            both,
            "{name}: the README says `{engines}`, the Landlock plan {}",
            if both { "enforces it" } else { "refuses it" }
        );
    }
    let demo = root.join("examples/demo");
    assert!(landlock_runs(
        &demo.join("policy.toml"),
        &demo.join("crate")
    ));
}

#[test]
fn a_missing_policy_exits_66() {
    let o = bee(&["validate", "--policy", "policies/does-not-exist.toml"]);
    assert_eq!(code(&o), 66);
    assert!(stderr(&o).contains("does-not-exist.toml"));
}

#[test]
fn an_invalid_policy_exits_65_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let f = dir.path().join("bad.toml");
    std::fs::write(&f, "version = 1\n[fs]\nread = [\"/..\"]\n")
        .unwrap_or_else(|e| unreachable!("{e}"));
    let f = f.display().to_string();
    let o = bee(&["validate", "--policy", &f]);
    assert_eq!(code(&o), 65);
    assert!(
        stderr(&o).contains(&format!("{f}:3:9: fs.read[0]")),
        "{}",
        stderr(&o)
    );
    let o = bee(&["validate", "--policy", &f, "--json"]);
    assert_eq!(code(&o), 65);
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(v["ok"], false);
    assert_eq!(v["errors"][0]["line"], 3);
    assert_eq!(v["errors"][0]["key"], "fs.read[0]");
}

#[test]
fn emit_compiled_is_deterministic_json() {
    let args = [
        "validate",
        "--policy",
        "policies/cargo-test.toml",
        "--emit",
        "compiled",
    ];
    let a = bee(&args);
    let b = bee(&args);
    assert_eq!(code(&a), 0);
    assert_eq!(a.stdout, b.stdout);
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&a)).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(v["format"], 1);
    assert_eq!(v["version"], 2);
    assert!(v["fs"]["read"].as_array().is_some_and(|r| !r.is_empty()));
    // Version 2's protected paths are part of the compiled form, each named by its origin.
    let protect = v["fs"]["protect"].as_array().cloned().unwrap_or_default();
    assert!(
        protect
            .iter()
            .any(|r| r["origin"]["text"] == "/**/.git/hooks/**"),
        "{protect:?}"
    );
}

/// Carve-outs, included rules and their origins are part of the compiled form: what the
/// planner and the prover see.
#[test]
fn emit_compiled_shows_carve_outs_and_included_rules() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let p = policy_file(
        dir.path(),
        "carved.toml",
        "version = 2\ninclude = [\"base\"]\n[fs]\nwrite = [\"/w/**\"]\ndeny = [\"/w/secret/**\"]\n[exec]\nallow = [\"/w/bin/*\"]\ndeny = [\"/w/bin/rm\"]\n",
    );
    let o = bee(&["validate", "--policy", &p, "--emit", "compiled"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| unreachable!("{e}"));
    let texts = |rules: &serde_json::Value| -> Vec<String> {
        rules
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|r| r["origin"]["text"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(texts(&v["fs"]["deny"]), ["/w/secret/**"], "{v}");
    assert_eq!(texts(&v["exec_deny"]), ["/w/bin/rm"], "{v}");
    // The shipped `base` fragment's rules arrive expanded, each naming the fragment.
    let read = v["fs"]["read"].as_array().cloned().unwrap_or_default();
    assert!(
        read.iter()
            .any(|r| r["origin"].to_string().contains("base")),
        "no rule of the base fragment: {read:?}"
    );
}

/// `exec.deny` that no exec grant reaches and `fs.unprotect` that matches no protected path
/// are warnings naming their key, not silent no-ops.
#[test]
fn idle_exec_carve_outs_and_unprotects_warn() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let p = policy_file(
        dir.path(),
        "idle.toml",
        "version = 2\n[fs]\nwrite = [\"/w/**\"]\nunprotect = [\"/w/notes.txt\"]\n[exec]\nallow = [\"/usr/bin/*\"]\ndeny = [\"/opt/tool\", \"/usr/bin/curl\"]\n",
    );
    let o = bee(&["validate", "--policy", &p]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("exec.deny[0]") && err.contains("`/opt/tool` carves nothing out"),
        "{err}"
    );
    assert!(!err.contains("exec.deny[1]"), "a used carve-out: {err}");
    assert!(
        err.contains("fs.unprotect[0]") && err.contains("lifts no protection"),
        "{err}"
    );
    assert!(
        !err.contains("holds by name only"),
        "no writable exec grant: {err}"
    );

    // Where the scope may write and execute, exec.deny of a readable program is a name only.
    let p = policy_file(
        dir.path(),
        "copyable.toml",
        "version = 2\n[fs]\nwrite = [\"/w/**\"]\n[exec]\nallow = [\"/w/bin/**\"]\ndeny = [\"/w/bin/echo\"]\n",
    );
    let o = bee(&["validate", "--policy", &p]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("exec.deny[0]")
            && err.contains("`/w/bin/echo` holds by name only")
            && err.contains("`/w/bin/**` lets it execute"),
        "{err}"
    );
}

#[test]
fn json_report_counts_rules() {
    let o = bee(&["validate", "--policy", "policies/parent.toml", "--json"]);
    assert_eq!(code(&o), 0);
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(v["ok"], true);
    assert_eq!(v["rules"]["net.allow"], 2);
    assert_eq!(v["rules"]["net.unix"], 1);
}

#[test]
fn the_subagent_example_attenuates_its_parent() {
    let o = bee(&[
        "validate",
        "--policy",
        "policies/subagent.toml",
        "--parent",
        "policies/parent.toml",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("attenuation: every grant"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_widened_subagent_is_refused_with_counterexamples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("policies/subagent.toml")).unwrap();
    let widened = text.replace(
        "write = [\"/dev/null\"]",
        "write = [\"/dev/null\", \"./**\", \"/etc/passwd\"]",
    ) + "\n[[net.allow]]\naddr = \"10.0.0.0/8\"\nports = 443\nproto = \"tcp\"\n";
    assert_ne!(widened, text);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("widened.toml");
    std::fs::write(&f, widened).unwrap();
    let f = f.display().to_string();
    let parent = root.join("policies/parent.toml").display().to_string();
    let o = bee(&["validate", "--policy", &f, "--parent", &parent]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("grants 2 capabilities"), "{err}");
    assert!(err.contains("`/etc/passwd`"), "{err}");
    assert!(err.contains("tcp 10.0.0.0:443"), "{err}");
    // The workspace write is within the parent's grants, so it is not reported.
    assert!(!err.contains("./**"), "{err}");

    let o = bee(&["validate", "--policy", &f, "--parent", &parent, "--json"]);
    assert_eq!(code(&o), 65);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["attenuation"]["subset"], false);
    let excess = v["attenuation"]["excess"].as_array().unwrap();
    assert_eq!(excess.len(), 2);
    assert_eq!(excess[0]["witness"]["kind"], "path");
    assert_eq!(excess[0]["witness"]["path"], "/etc/passwd");
    assert_eq!(excess[0]["child"]["origin"]["key"], "fs.write[2]");
}

/// `bee policy diff`: the subagent's policy grants nothing beyond its parent, the parent
/// grants more; each difference is a rule with a counterexample, and the JSON says the same.
#[test]
fn policy_diff_shows_each_side_with_counterexamples() {
    let o = bee(&[
        "policy",
        "diff",
        "policies/parent.toml",
        "policies/subagent.toml",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.contains("policies/subagent.toml grants 0 rule(s) beyond policies/parent.toml"),
        "{out}"
    );
    assert!(out.lines().skip(1).all(|l| l.starts_with("- ")), "{out}");
    assert!(
        out.contains(", which policies/subagent.toml does not;"),
        "{out}"
    );

    let o = bee(&[
        "policy",
        "diff",
        "--json",
        "policies/subagent.toml",
        "policies/parent.toml",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["identical"], false);
    assert_eq!(v["removed"].as_array().map(Vec::len), Some(0));
    let added = v["added"].as_array().unwrap();
    assert!(!added.is_empty());
    assert!(
        added.iter().all(|e| e["witness"]["kind"].is_string()),
        "{v}"
    );

    let o = bee(&[
        "policy",
        "diff",
        "policies/parent.toml",
        "policies/parent.toml",
    ]);
    assert_eq!(code(&o), 0);
    assert!(
        stdout(&o).contains("grant exactly the same"),
        "{}",
        stdout(&o)
    );
    // A missing policy is 66, an invalid one 65, as for `bee validate`.
    let o = bee(&["policy", "diff", "policies/parent.toml", "nope.toml"]);
    assert_eq!(code(&o), 66, "{}", stderr(&o));
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        bad.path(),
        "version = 1\n[fs]\nread = [\"relative/**\", 3]\n",
    )
    .unwrap();
    let bad = bad.path().to_str().unwrap();
    let o = bee(&["policy", "diff", "policies/parent.toml", bad]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
}

/// An exec grant of a directory's subtree is shown by a program in it, not by the directory
/// (which no one executes).
#[test]
fn policy_diff_shows_an_exec_subtree_by_a_file_in_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let old = policy_file(dir.path(), "old.toml", "version = 2\n");
    let new = policy_file(
        dir.path(),
        "new.toml",
        "version = 2\n[exec]\nallow = [\"/usr/bin/**\"]\n",
    );
    let o = bee(&["policy", "diff", &old, &new]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("`/usr/bin/**` grants executing `/usr/bin/x`,"),
        "{}",
        stdout(&o)
    );
}

/// A misspelt key or table gets the nearest known name, and the missing version the newest.
#[test]
fn validate_suggests_the_key_meant() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let p = policy_file(
        dir.path(),
        "p.toml",
        "version = 2\n[fs]\ndney = [\"/etc/**\"]\n",
    );
    let o = bee(&["validate", "--policy", &p]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("did you mean `deny`?"),
        "{}",
        stderr(&o)
    );
    let p = policy_file(dir.path(), "q.toml", "[exce]\nallow = []\n");
    let o = bee(&["validate", "--policy", &p]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("did you mean `exec`?"),
        "{}",
        stderr(&o)
    );
    let p = policy_file(dir.path(), "r.toml", "");
    let o = bee(&["validate", "--policy", &p]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("`version = 3`"), "{}", stderr(&o));
    // A version this bee does not know: the file, line and key, and the versions it knows.
    let p = policy_file(dir.path(), "s.toml", "# from a later bee\nversion = 4\n");
    let o = bee(&["validate", "--policy", &p]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("s.toml:2:11")
            && err.contains("version")
            && err.contains("known versions: 1, 2, 3"),
        "{err}"
    );
}

/// A write grant rooted above the base directory that covers all of it is a warning on
/// `bee validate` (the policy is still valid), in the text and in the JSON.
#[test]
fn validate_warns_of_a_write_grant_that_covers_the_whole_base() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let project = dir.path().join("proj");
    std::fs::create_dir(&project).unwrap_or_else(|e| unreachable!("{e}"));
    let above = dir.path().display().to_string();
    let p = policy_file(
        dir.path(),
        "p.toml",
        &format!("version = 2\n[fs]\nwrite = [\"./**\", \"{above}/**\"]\n"),
    );
    let base = project.display().to_string();
    let o = bee(&["validate", "--policy", &p, "--base", &base]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let expected = format!(
        "warning: {p}:3:18: fs.write[1]: `{above}/**` covers the whole base directory {base}"
    );
    assert!(stderr(&o).contains(&expected), "{}", stderr(&o));
    let o = bee(&["validate", "--policy", &p, "--base", &base, "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| unreachable!("{e}"));
    assert!(
        v["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["message"]
                .as_str()
                .is_some_and(|m| m.contains("covers the whole base directory")))),
        "{v}"
    );
    // Granting the base directory itself is no warning.
    let p = policy_file(
        dir.path(),
        "q.toml",
        "version = 2\n[fs]\nwrite = [\"./**\"]\n",
    );
    let o = bee(&["validate", "--policy", &p, "--base", &base]);
    assert!(!stderr(&o).contains("covers the whole"), "{}", stderr(&o));
}

fn policy_file(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap_or_else(|e| unreachable!("{e}"));
    p.display().to_string()
}

/// `bee validate` lists the protected paths in force and where each comes from; version 1
/// protects nothing and refuses `fs.unprotect`; carve-outs that carve nothing warn.
#[test]
fn validate_lists_protected_paths_and_warns_about_idle_carve_outs() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let v2 = policy_file(
        dir.path(),
        "v2.toml",
        "version = 2\n[fs]\nwrite = [\"/w/**\"]\nprotect = [\"/w/deploy/**\"]\nunprotect = [\"/w/.envrc\"]\ndeny = [\"/w/secret/**\", \"/elsewhere/**\"]\nread = [\"/r/a\"]\n",
    );
    let o = bee(&["validate", "--policy", &v2]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("/**/.git/hooks/** (version 2): git runs hooks"),
        "{err}"
    );
    assert!(
        err.contains("/w/deploy/** (fs.protect[0] (line 4))"),
        "{err}"
    );
    assert!(err.contains("unprotected: /w/.envrc"), "{err}");
    assert!(err.contains("carve-outs: fs.deny 2"), "{err}");
    assert!(
        err.contains("fs.deny[1]") && err.contains("carves nothing out"),
        "{err}"
    );
    assert!(
        !err.contains("fs.deny[0]"),
        "the used carve-out is not warned about: {err}"
    );

    let o = bee(&["validate", "--policy", &v2, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    assert_eq!(v["rules"]["fs.deny"], 2);
    let builtin = bee_core::protected::protected(2).len();
    assert_eq!(
        v["protected"].as_array().map(Vec::len),
        Some(builtin + 1),
        "{v}"
    );
    assert!(!err.contains(".devcontainer.json"), "{err}");

    // Version 3 lists version 2's set and the rest of the same tools' files, each with
    // its reason.
    let v3 = policy_file(
        dir.path(),
        "v3.toml",
        "version = 3\n[fs]\nwrite = [\"/w/**\"]\nunprotect = [\"/w/.devcontainer.json\"]\n",
    );
    let o = bee(&["validate", "--policy", &v3]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("(policy language v3)"), "{err}");
    assert!(
        err.contains("/**/.git/hooks/** (version 3): git runs hooks"),
        "{err}"
    );
    assert!(
        err.contains("/**/.lefthook-local.yml (version 3): lefthook merges"),
        "{err}"
    );
    assert!(err.contains("unprotected: /w/.devcontainer.json"), "{err}");
    let o = bee(&["validate", "--policy", &v3, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    assert_eq!(
        v["protected"].as_array().map(Vec::len),
        Some(bee_core::protected::protected(3).len()),
        "{v}"
    );

    let v1 = policy_file(
        dir.path(),
        "v1.toml",
        "version = 1\n[fs]\nwrite = [\"/w/**\"]\nunprotect = [\"/w/.git/hooks/**\"]\n",
    );
    let o = bee(&["validate", "--policy", &v1]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("fs.unprotect"), "{}", stderr(&o));

    let empty = policy_file(
        dir.path(),
        "empty.toml",
        "version = 1\n[fs]\nread = [\"/w/secret/**\"]\ndeny = [\"/w/**\"]\n",
    );
    let o = bee(&["validate", "--policy", &empty]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("fs.read[0]") && stderr(&o).contains("grants nothing"),
        "{}",
        stderr(&o)
    );
}

/// A child that drops its parent's carve-out, or writes where the parent protects, grants
/// more: refused with the carved path as the counterexample.
#[test]
fn a_child_that_drops_a_carve_out_is_wider() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let parent = policy_file(
        dir.path(),
        "parent.toml",
        "version = 2\n[fs]\nwrite = [\"/w/**\"]\ndeny = [\"/w/secret/**\"]\n",
    );
    let child = policy_file(
        dir.path(),
        "child.toml",
        "version = 2\n[fs]\nread = [\"/w/**\"]\n",
    );
    let o = bee(&["validate", "--policy", &child, "--parent", &parent]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(stderr(&o).contains("`/w/secret`"), "{}", stderr(&o));

    let kept = policy_file(
        dir.path(),
        "kept.toml",
        "version = 2\n[fs]\nread = [\"/w/**\"]\ndeny = [\"/w/secret/**\"]\n",
    );
    let o = bee(&["validate", "--policy", &kept, "--parent", &parent]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    // A version 1 child writes where a version 2 parent protects.
    let v1 = policy_file(
        dir.path(),
        "v1.toml",
        "version = 1\n[fs]\nwrite = [\"/w/src/**\"]\n",
    );
    let o = bee(&["validate", "--policy", &v1, "--parent", &parent]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(".git/hooks") || stderr(&o).contains(".bee"),
        "{}",
        stderr(&o)
    );

    let o = bee(&["policy", "diff", &parent, &kept]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("write to"), "{}", stdout(&o));
}

/// `bee validate` lists name grants and says how they work; `--parent` refuses a wildcard
/// the parent grants only one name of, with a name under it as the counterexample.
#[test]
fn validate_lists_and_proves_name_grants() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let parent = policy_file(
        dir.path(),
        "parent.toml",
        "version = 2\n[[net.allow]]\nhost = [\"api.example.com\", \"*.Crates.io\"]\nports = 443\nproto = \"tcp\"\n",
    );
    let o = bee(&["validate", "--policy", &parent]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("host 2"), "{err}");
    assert!(
        err.contains("tcp api.example.com port 443 (net.allow[0], line 3)"),
        "{err}"
    );
    assert!(err.contains("tcp *.crates.io port 443"), "{err}");
    assert!(err.contains("NXDOMAIN") && err.contains("TTL"), "{err}");

    let o = bee(&["validate", "--policy", &parent, "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    assert_eq!(v["rules"]["net.hosts"], 2, "{v}");
    assert_eq!(v["hosts"][1]["host"], "*.crates.io", "{v}");
    assert_eq!(v["hosts"][1]["proto"][0], "tcp", "{v}");

    let child = policy_file(
        dir.path(),
        "child.toml",
        "version = 2\n[[net.allow]]\nhost = \"*.example.com\"\nports = 443\nproto = \"tcp\"\n",
    );
    let o = bee(&["validate", "--policy", &child, "--parent", &parent]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("grants resolving and connecting to `tcp x.example.com:443`"),
        "{err}"
    );
    let o = bee(&[
        "validate", "--policy", &child, "--parent", &parent, "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    let w = &v["attenuation"]["excess"][0]["witness"];
    assert_eq!(w["kind"], "host", "{v}");
    assert_eq!(w["name"], "x.example.com", "{v}");

    let bad = policy_file(
        dir.path(),
        "bad.toml",
        "version = 2\n[[net.allow]]\nhost = \"*.com\"\nports = 443\nproto = \"tcp\"\n",
    );
    let o = bee(&["validate", "--policy", &bad]);
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("net.allow[0].host") && stderr(&o).contains("too broad"),
        "{}",
        stderr(&o)
    );
}

/// A Python project's policy with three `**` patterns of its own beside version 2's protected
/// set plans, and `bee validate` prints the plan's size against each limit.
#[test]
fn validate_plans_segment_patterns_and_prints_the_plan_against_its_limits() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::write(
        dir.path().join("team.toml"),
        "[fs]\nread = [\"/opt/team/**\"]\n",
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let p = dir.path().join("p.toml");
    std::fs::write(
        &p,
        r#"version = 2
include = ["base", "python", "./team.toml"]
[fs]
read  = ["./**"]
write = ["./.pytest_cache/**", "./**/__pycache__/**", "/tmp/**"]
deny  = ["./secrets/**", "./**/.env"]
[exec]
allow = ["/usr/bin/sh", "/usr/bin/dash", "./.venv/bin/python*", "./.venv/bin/pytest", "./.venv/lib/**/*.so"]
deny  = ["./**/*.sh"]
"#,
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let o = bee(&["validate", "--policy", &p.display().to_string()]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    let line = err
        .lines()
        .find(|l| l.trim_start().starts_with("enforcement plan: "))
        .unwrap_or_else(|| unreachable!("{err}"));
    assert!(line.contains(" of 65536 states, "), "{line}");
    assert!(line.contains(" of 262144 edges, "), "{line}");
    let states: usize = line
        .trim_start()
        .trim_start_matches("enforcement plan: ")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| unreachable!("{line}"));
    assert!(states < 200, "{line}");
}

/// A build without the `mcp` feature has no MCP server: `bee mcp` says so and exits 69,
/// before reading anything.
#[cfg(not(feature = "mcp"))]
#[test]
fn mcp_in_a_build_without_the_feature_is_unavailable() {
    let o = bee(&["mcp", "--policy", "policies/parent.toml"]);
    assert_eq!(code(&o), 69, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("lacks the `mcp` feature"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}
