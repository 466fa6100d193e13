//! `bee completions` and `bee man`: the scripts and pages are generated from bee's own command
//! line, name every public command and never the hidden ones.

mod support;

use std::process::Command;

use support::{bee, code, stderr, stdout};

/// Every command `bee --help` lists, but `help`.
const COMMANDS: [&str; 13] = [
    "validate",
    "policy",
    "check",
    "exec",
    "run",
    "records",
    "repl",
    "mcp",
    "serve",
    "metrics",
    "config",
    "completions",
    "man",
];

/// The command bee starts itself, which no user should be offered.
const HIDDEN: &str = "__tool";

fn completions(shell: &str) -> String {
    let o = bee(&["completions", shell]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    stdout(&o)
}

/// How the script for `shell` offers `command` after `bee `: a case of bash's dispatch, an
/// entry of zsh's command list, a fish completion's argument.
fn offered(shell: &str, command: &str) -> String {
    match shell {
        "bash" => format!("bee,{command})"),
        "zsh" => format!("'{command}:"),
        "fish" => format!("-a \"{command}\""),
        _ => unreachable!("no such shell in these tests: {shell}"),
    }
}

#[test]
fn each_shell_completes_every_public_command_and_no_hidden_one() {
    for shell in ["bash", "zsh", "fish"] {
        let script = completions(shell);
        assert!(!script.trim().is_empty(), "the {shell} script is empty");
        for command in COMMANDS {
            assert!(
                script.contains(&offered(shell, command)),
                "the {shell} script does not offer {command}:\n{script}"
            );
        }
        assert!(
            !script.contains(HIDDEN),
            "the {shell} script mentions {HIDDEN}"
        );
    }
}

#[test]
fn the_bash_script_parses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bee.bash");
    std::fs::write(&path, completions("bash")).unwrap();
    let o = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert_eq!(code(&o), 0, "bash -n: {}", stderr(&o));
}

/// What bash offers, with the script loaded, for the command line `words` when the last word
/// is being completed.
fn bash_offers(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let cword = words.len() - 1;
    let program = format!(
        "source '{script}'; COMP_WORDS=({words}); COMP_CWORD={cword}; \
         _bee bee \"${{COMP_WORDS[{cword}]}}\" \"${{COMP_WORDS[{prev}]}}\"; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script = script.display(),
        words = words
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" "),
        prev = cword - 1,
    );
    let o = match Command::new("bash").arg("-c").arg(&program).output() {
        Ok(o) => o,
        Err(e) => unreachable!("cannot run bash: {e}"),
    };
    assert_eq!(code(&o), 0, "{program}: {}", stderr(&o));
    stdout(&o).lines().map(str::to_owned).collect()
}

#[test]
fn bash_completes_commands_and_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bee.bash");
    std::fs::write(&path, completions("bash")).unwrap();

    let commands = bash_offers(&path, &["bee", ""]);
    for command in COMMANDS {
        assert!(commands.iter().any(|c| c == command), "{commands:?}");
    }
    assert!(!commands.iter().any(|c| c == HIDDEN), "{commands:?}");

    assert_eq!(
        bash_offers(&path, &["bee", "completions", ""]),
        ["-h", "--help", "bash", "zsh", "fish"]
    );
    assert_eq!(
        bash_offers(&path, &["bee", "metrics", "--by", ""]),
        ["run", "episode", "model", "tool", "agent"]
    );
}

#[test]
fn each_script_completes_the_bee_command() {
    let bash = completions("bash");
    assert!(
        bash.lines()
            .any(|l| l.trim_start().starts_with("complete -F _bee ") && l.ends_with(" bee")),
        "{bash}"
    );
    let zsh = completions("zsh");
    assert_eq!(zsh.lines().next(), Some("#compdef bee"), "{zsh}");
    let fish = completions("fish");
    assert!(
        fish.lines().any(|l| l.starts_with("complete -c bee ")),
        "{fish}"
    );
}

#[test]
fn an_unknown_or_missing_shell_is_a_usage_error() {
    for args in [
        &["completions", "powershell"][..],
        &["completions", "tcsh"],
        &["completions"],
    ] {
        let o = bee(args);
        assert_eq!(code(&o), 64, "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}: {}", stdout(&o));
        if args.len() == 2 {
            assert!(
                stderr(&o).contains("[possible values: bash, zsh, fish]"),
                "{args:?}: {}",
                stderr(&o)
            );
        }
    }
}

#[test]
fn man_prints_the_page_of_bee_with_its_commands() {
    let o = bee(&["man"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let page = stdout(&o);
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        page.lines()
            .any(|l| l.trim_end() == format!(r#".TH bee 1 "" "bee {version}""#)),
        "{page}"
    );
    assert!(page.contains(".SH SUBCOMMANDS"), "{page}");
    for command in COMMANDS {
        // Each command is an entry pointing at its own page, bee-COMMAND(1).
        assert!(
            page.lines().any(|l| l == format!(r"bee\-{command}(1)")),
            "bee(1) does not list {command}:\n{page}"
        );
    }
    assert!(!page.contains(HIDDEN), "bee(1) mentions {HIDDEN}");
}

#[test]
fn man_out_writes_a_page_per_public_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let o = bee(&["man", "--out", out.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let mut expected: Vec<String> = COMMANDS.iter().map(|c| format!("bee-{c}.1")).collect();
    expected.extend([
        "bee.1".to_owned(),
        "bee-config-show.1".to_owned(),
        "bee-policy-diff.1".to_owned(),
        "bee-records-merge.1".to_owned(),
    ]);
    // `bee findings` exists in builds with the findings ledger.
    if cfg!(feature = "findings") {
        expected
            .extend(["", "-list", "-adjudicate", "-export"].map(|s| format!("bee-findings{s}.1")));
    }
    expected.sort();
    assert_eq!(files, expected);

    // Each file written is listed on stdout, and each is a page titled after its command.
    let listed = stdout(&o);
    let listed: Vec<&str> = listed.lines().collect();
    assert_eq!(listed.len(), expected.len(), "{}", stdout(&o));
    for file in &expected {
        let path = out.join(file);
        assert!(
            listed.contains(&path.to_str().unwrap()),
            "{} not listed",
            path.display()
        );
        let page = std::fs::read_to_string(&path).unwrap();
        let title = file.trim_end_matches(".1");
        assert!(page.contains(&format!(".TH {title} 1 ")), "{file}: {page}");
    }
}

#[test]
fn man_out_into_a_file_exits_74() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let o = bee(&["man", "--out", file.to_str().unwrap()]);
    assert_eq!(code(&o), 74, "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("bee: cannot create "),
        "{}",
        stderr(&o)
    );
}
