//! Policy composition: shipped fragments and the user's own, expanded before compilation,
//! with origins that name the fragment, and refusals that name the file, line and key.

use std::path::PathBuf;

use bee_core::PolicyError;
use bee_core::compile::include::fragments;
use bee_core::compile::{CompileOptions, compile_file, compile_str};

fn options() -> CompileOptions {
    CompileOptions {
        base: PathBuf::from("/work/repo"),
        home: Some(PathBuf::from("/home/u")),
    }
}

fn problems(name: &str, text: &str) -> Vec<bee_core::PolicyDiagnostic> {
    match compile_str(name, text, &options()) {
        Ok(c) => unreachable!("expected a refusal, got {:?}", c.policy),
        Err(PolicyError::Invalid(d)) => d.problems,
        Err(e) => unreachable!("{e}"),
    }
}

#[test]
fn shipped_fragments_expand_first_and_keep_their_origin() {
    let c = compile_str(
        "p.toml",
        "version = 2\ninclude = [\"base\", \"rust\"]\n[fs]\nread = [\"./**\"]\n",
        &options(),
    )
    .unwrap_or_else(|e| unreachable!("{e:?}"));
    let p = &c.policy;
    assert_eq!(
        p.include,
        [
            "shipped fragment base (version 2)",
            "shipped fragment rust (version 2)"
        ]
    );
    assert_eq!(p.fs.read[0].origin.key, "base:fs.read[0]");
    assert!(
        p.fs.read
            .iter()
            .any(|r| r.pattern.to_string() == "/proc/self/**")
    );
    assert!(p.fs.read.iter().any(
        |r| r.pattern.to_string() == "/home/u/.rustup/**" && r.origin.key.starts_with("rust:")
    ));
    // The policy's own rules come after the fragments'.
    assert_eq!(
        p.fs.read.last().map(|r| r.origin.key.as_str()),
        Some("fs.read[0]")
    );
    // `./target/**` in a fragment resolves against the policy's base, like the policy's own.
    assert!(
        p.exec
            .iter()
            .any(|r| r.pattern.to_string() == "/work/repo/target/**")
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn every_shipped_fragment_compiles() {
    for f in fragments(2) {
        let text = format!("version = 2\ninclude = [\"{}\"]\n", f.name);
        let c = compile_str("p.toml", &text, &options());
        assert!(c.is_ok(), "{}: {:?}", f.name, c.err());
    }
    assert!(fragments(1).is_empty());
}

#[test]
fn unknown_fragments_and_version_1_are_refused_at_the_include_entry() {
    let p = problems("p.toml", "version = 2\ninclude = [\"base\", \"rustt\"]\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].key.as_deref(), Some("include[1]"));
    assert_eq!((p[0].line, p[0].column), (2, 20));
    assert!(
        p[0].help
            .as_deref()
            .unwrap_or_default()
            .contains("base, c, go, node, python, rust")
    );
    let p = problems("p.toml", "version = 1\ninclude = [\"base\"]\n");
    assert!(p[0].message.contains("version 1"), "{}", p[0].message);
    let p = problems("p.toml", "version = 2\ninclude = [\"base.toml\"]\n");
    assert!(
        p[0].help
            .as_deref()
            .unwrap_or_default()
            .contains("without `.toml`: `base`"),
        "{:?}",
        p[0]
    );
}

#[test]
fn including_a_fragment_twice_is_a_warning() {
    let c = compile_str(
        "p.toml",
        "version = 2\ninclude = [\"base\", \"rust\", \"base\"]\n",
        &options(),
    )
    .unwrap_or_else(|e| unreachable!("{e:?}"));
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(c.warnings[0].key, "include[2]");
    assert!(c.warnings[0].message.contains("included already"));
}

#[test]
fn user_fragments_resolve_next_to_the_including_file_nest_and_refuse_cycles() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let d = dir.path();
    std::fs::create_dir(d.join("frag")).unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::write(
        d.join("frag/team.toml"),
        "description = \"the team's\"\ninclude = [\"base\", \"./more.toml\"]\n[fs]\nread = [\"/opt/team/**\"]\ndeny = [\"/opt/team/secrets/**\"]\n",
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::write(
        d.join("frag/more.toml"),
        "[exec]\nallow = [\"/opt/team/bin/*\"]\n",
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let policy = d.join("policy.toml");
    std::fs::write(&policy, "version = 2\ninclude = [\"frag/team.toml\"]\n")
        .unwrap_or_else(|e| unreachable!("{e}"));
    let c = compile_file(&policy, &options()).unwrap_or_else(|e| unreachable!("{e:?}"));
    let p = &c.policy;
    assert_eq!(p.include.len(), 3, "{:?}", p.include);
    assert!(
        p.fs.deny
            .iter()
            .any(|r| r.origin.key == "frag/team.toml:fs.deny[0]")
    );
    assert!(
        p.exec
            .iter()
            .any(|r| r.origin.key == "./more.toml:exec.allow[0]")
    );

    // A cycle, and a fragment with a policy-only key: each refused in the right file.
    std::fs::write(d.join("frag/more.toml"), "include = [\"./team.toml\"]\n")
        .unwrap_or_else(|e| unreachable!("{e}"));
    let Err(PolicyError::Invalid(e)) = compile_file(&policy, &options()) else {
        unreachable!("a cycle must be refused")
    };
    assert!(
        e.problems[0].message.contains("includes itself"),
        "{:?}",
        e.problems
    );
    assert!(
        e.problems[0].file.ends_with("more.toml"),
        "{:?}",
        e.problems
    );
    std::fs::write(d.join("frag/more.toml"), "version = 2\n")
        .unwrap_or_else(|e| unreachable!("{e}"));
    let Err(PolicyError::Invalid(e)) = compile_file(&policy, &options()) else {
        unreachable!("`version` in a fragment must be refused")
    };
    assert!(
        e.problems[0].file.ends_with("more.toml"),
        "{:?}",
        e.problems
    );
    std::fs::write(
        d.join("frag/more.toml"),
        "[fs]\nread = [\"/a/**/b/**/c\"]\n",
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let Err(PolicyError::Invalid(e)) = compile_file(&policy, &options()) else {
        unreachable!("a bad pattern in a fragment must be refused")
    };
    assert_eq!(e.problems[0].key.as_deref(), Some("fs.read[0]"));
    assert_eq!(e.problems[0].line, 2);
    assert!(e.problems[0].file.ends_with("more.toml"));
    let p = problems("p.toml", "version = 2\ninclude = [\"./missing.toml\"]\n");
    assert!(p[0].message.contains("cannot read the fragment"), "{:?}", p);
}
