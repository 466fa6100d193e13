//! Learn mode on the command line (`bee exec --learn`, `bee run --learn`): the flag's
//! refusals, with their statuses, happen before anything runs. This host's kernel refuses LSM
//! programs, so a well-formed learn run stops at 69 here; `tests/kernel_learn.rs` runs learn
//! mode in the VM guests.

mod support;

use std::path::Path;

use support::{bee_in, code, stderr, stdout};

const POLICY: &str = "version = 1\n[fs]\nread = [\"/usr/**\"]\n[exec]\nallow = [\"/usr/bin/*\"]\n";

fn demo(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/demo")
        .join(file)
        .display()
        .to_string()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    if let Err(e) = std::fs::write(&path, text) {
        unreachable!("{e}");
    }
    path.display().to_string()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn learn_needs_a_base_policy() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let o = bee_in(dir.path(), &["exec", "--learn", "out.toml", "--", "true"]);
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    assert!(stderr(&o).contains("--policy"), "{}", stderr(&o));
    assert!(!dir.path().join("out.toml").exists());
}

#[test]
fn an_unwritable_output_is_refused_with_73_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let policy = write(dir.path(), "p.toml", POLICY);
    let marker = dir.path().join("ran");
    let touch = format!("/usr/bin/touch {}", marker.display());
    for out in ["missing-dir/out.toml", "."] {
        let o = bee_in(
            dir.path(),
            &[
                "exec", "--policy", &policy, "--learn", out, "--", "/bin/sh", "-c", &touch,
            ],
        );
        let err = stderr(&o);
        assert_eq!(code(&o), 73, "{out}: {err}");
        assert!(err.contains(&format!("--learn {out}")), "{err}");
        assert!(!marker.exists(), "the command ran");
    }
    assert!(
        stderr(&bee_in(
            dir.path(),
            &[
                "exec",
                "--policy",
                &policy,
                "--learn",
                "missing-dir/out.toml",
                "--",
                "true"
            ],
        ))
        .contains("nothing was run")
    );
}

#[test]
fn an_invalid_base_policy_is_refused_with_65_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let policy = write(dir.path(), "p.toml", "version = 1\n[fs]\nread = 3\n");
    let o = bee_in(
        dir.path(),
        &[
            "exec", "--policy", &policy, "--learn", "out.toml", "--", "true",
        ],
    );
    assert_eq!(code(&o), 65, "{}", stderr(&o));
    assert_eq!(names(dir.path()), ["p.toml"]);
}

#[test]
fn a_kernel_that_cannot_enforce_refuses_learn_mode_too_and_leaves_no_file() {
    // Learn mode needs the kernel's scope as much as enforcement does: it is never a way
    // around a kernel that cannot enforce.
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let policy = write(dir.path(), "p.toml", POLICY);
    let o = bee_in(
        dir.path(),
        &[
            "exec", "--policy", &policy, "--learn", "out.toml", "--", "true",
        ],
    );
    assert_eq!(code(&o), 69, "{}", stderr(&o));
    assert!(!stderr(&o).contains("LEARN MODE"), "{}", stderr(&o));
    assert_eq!(
        names(dir.path()),
        ["p.toml"],
        "the staged output is removed"
    );
}

#[test]
fn no_configuration_key_turns_learn_mode_on() {
    // Learn mode is the command line's alone: the configuration refuses the key, wherever it
    // is put, instead of ignoring it.
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    for text in [
        "learn = \"out.toml\"\n",
        "learn = true\n",
        "[learn]\nout = \"out.toml\"\n",
    ] {
        let config = write(dir.path(), "config.toml", text);
        let o = bee_in(dir.path(), &["config", "show", "--config", &config]);
        let err = stderr(&o);
        assert_eq!(code(&o), 65, "{text}: {err}{}", stdout(&o));
        assert!(err.contains("learn"), "{err}");
        // The same file stops `bee run` before anything is planned.
        let o = bee_in(
            dir.path(),
            &[
                "run",
                "--config",
                &config,
                "--scenario",
                &demo("scenario.toml"),
                "--provider",
                &demo("provider.toml"),
            ],
        );
        assert_eq!(code(&o), 65, "{text}: {}", stderr(&o));
    }
}

#[test]
fn run_learn_checks_its_output_before_the_kernel() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let args = |out: &str| {
        bee_in(
            dir.path(),
            &[
                "run",
                "--scenario",
                &demo("scenario.toml"),
                "--provider",
                &demo("provider.toml"),
                "--learn",
                out,
            ],
        )
    };
    let o = args("missing-dir/out.toml");
    assert_eq!(code(&o), 73, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--learn missing-dir/out.toml"),
        "{}",
        stderr(&o)
    );
    // A writable output: then the kernel's refusal (69), and no file left.
    let o = args("out.toml");
    assert_eq!(code(&o), 69, "{}", stderr(&o));
    assert!(!dir.path().join("out.toml").exists());
    assert!(
        !names(dir.path())
            .iter()
            .any(|n| n.starts_with(".bee-learn-"))
    );
}

#[test]
fn help_describes_learn_mode() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    for cmd in ["exec", "run"] {
        let o = bee_in(dir.path(), &[cmd, "--help"]);
        let out = stdout(&o);
        assert!(out.contains("--learn <OUT.toml>"), "{out}");
        assert!(out.contains("Command line only"), "{out}");
    }
}
