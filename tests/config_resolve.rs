//! Configuration resolution: every layer's precedence, origins, relative paths, bad files,
//! and the refusal to run with neither a policy nor an explicit host mode.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::path::{Path, PathBuf};

use bee::config::{Config, Confinement, Env, FileError, Flags, Origin, Refusal};

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    env: Env,
}

impl World {
    /// A home, an XDG config dir and a project directory, all empty.
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in ["home", "xdg/bee", "project/.bee", "elsewhere"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let env = Env {
            cwd: root.join("project"),
            home: Some(root.join("home")),
            xdg_config_home: Some(root.join("xdg")),
        };
        Self {
            _dir: dir,
            root,
            env,
        }
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn user(&self, text: &str) -> PathBuf {
        self.write("xdg/bee/config.toml", text)
    }

    fn project(&self, text: &str) -> PathBuf {
        self.write("project/.bee/config.toml", text)
    }

    fn resolve(&self, flags: &Flags) -> Config {
        Config::resolve_in(flags, &self.env).unwrap()
    }
}

fn file(path: &Path, line: u32) -> Origin {
    Origin::File {
        path: path.to_owned(),
        line,
    }
}

#[test]
fn defaults_when_nothing_is_configured() {
    let w = World::new();
    let c = w.resolve(&Flags::default());
    assert_eq!(c.policy, None);
    assert_eq!(c.workspace.value, w.env.cwd);
    assert_eq!(c.workspace.origin, Origin::Default);
    assert!(!c.host.value);
    assert_eq!(c.records_dir.value, w.env.cwd.join(".bee/records"));
    assert!(c.files.is_empty());
    assert_eq!(c.require_policy_or_host(), Err(Refusal::NoPolicy));
}

#[test]
fn each_layer_overrides_the_one_below() {
    let w = World::new();
    let user = w.user("policy = \"user.toml\"\nprovider = \"user-p.toml\"\naudit = \"user.log\"\n[limits]\nturns = 1\n");
    let project =
        w.project("# project\npolicy = \"project.toml\"\nprovider = \"project-p.toml\"\n");
    let explicit = w.write(
        "elsewhere/explicit.toml",
        "\n\npolicy = \"explicit.toml\"\n",
    );

    // User only for audit and limits; project over user for provider; --config over both.
    let c = w.resolve(&Flags {
        config: Some(explicit.clone()),
        ..Flags::default()
    });
    assert_eq!(
        c.policy.as_ref().unwrap().value,
        w.root.join("elsewhere/explicit.toml")
    );
    assert_eq!(c.policy.as_ref().unwrap().origin, file(&explicit, 3));
    assert_eq!(
        c.provider.as_ref().unwrap().value,
        w.root.join("project/.bee/project-p.toml")
    );
    assert_eq!(c.provider.as_ref().unwrap().origin, file(&project, 3));
    assert_eq!(
        c.audit.as_ref().unwrap().value,
        w.root.join("xdg/bee/user.log")
    );
    assert_eq!(c.audit.as_ref().unwrap().origin, file(&user, 3));
    assert_eq!(c.limits.turns.as_ref().unwrap().value, 1);
    assert_eq!(c.limits.turns.as_ref().unwrap().origin, file(&user, 5));
    assert_eq!(c.files, vec![explicit.clone(), project, user]);

    // A flag beats every file.
    let c = w.resolve(&Flags {
        config: Some(explicit),
        policy: Some(PathBuf::from("flag.toml")),
        max_turns: Some(9),
        ..Flags::default()
    });
    assert_eq!(
        c.policy.as_ref().unwrap().value,
        w.env.cwd.join("flag.toml")
    );
    assert_eq!(
        c.policy.as_ref().unwrap().origin,
        Origin::Flag {
            flag: "--policy".into()
        }
    );
    assert_eq!(c.limits.turns.as_ref().unwrap().value, 9);
}

#[test]
fn home_config_is_used_when_xdg_is_unset() {
    let mut w = World::new();
    w.env.xdg_config_home = None;
    let home_file = w.write("home/.config/bee/config.toml", "workspace = \"~/src\"\n");
    w.user("workspace = \"/not/this\"\n");
    let c = w.resolve(&Flags::default());
    assert_eq!(c.workspace.value, w.root.join("home/src"));
    assert_eq!(c.workspace.origin, file(&home_file, 1));
}

#[test]
fn every_key_and_scanner_tables_are_kept() {
    let w = World::new();
    let p = w.project(
        r#"policy = "/etc/bee/review.toml"
provider = "providers/openai.toml"
workspace = ".."
host = false
audit = "audit.jsonl"
records_dir = "records"

[limits]
turns = 40
tokens = 2000000
wall_seconds = 900
cost_usd = 2.5

[security.scanners.opengrep]
rules = "/etc/bee/opengrep-rules"

[security.scanners.codeql]
bundle_version = "codeql-bundle-v2.26.1"
"#,
    );
    let c = w.resolve(&Flags::default());
    let dir = w.root.join("project/.bee");
    assert_eq!(
        c.policy.unwrap().value,
        PathBuf::from("/etc/bee/review.toml")
    );
    assert_eq!(c.provider.unwrap().value, dir.join("providers/openai.toml"));
    assert_eq!(c.workspace.value, dir.join(".."));
    assert_eq!(c.records_dir.value, dir.join("records"));
    assert_eq!(c.limits.tokens.unwrap().value, 2_000_000);
    assert_eq!(c.limits.wall_seconds.unwrap().value, 900);
    assert_eq!(c.limits.cost_usd.unwrap().value, 2.5);
    let og = c.scanners["opengrep"].rules.clone().unwrap();
    assert_eq!(og.value, PathBuf::from("/etc/bee/opengrep-rules"));
    assert_eq!(og.origin, file(&p, 15));
    assert_eq!(
        c.scanners["codeql"].bundle_version.clone().unwrap().value,
        "2.26.1"
    );
}

#[test]
fn entries_show_every_value_with_its_origin() {
    let w = World::new();
    let p = w.project("provider = \"p.toml\"\n[limits]\ncost_usd = 1.5\n");
    let c = w.resolve(&Flags {
        host: true,
        ..Flags::default()
    });
    let entries = c.entries();
    let get = |k: &str| entries.iter().find(|(key, _, _)| key == k).unwrap().clone();
    assert_eq!(get("host").1, "true");
    assert_eq!(get("host").2.to_string(), "flag --host");
    assert_eq!(get("provider").2, file(&p, 1));
    assert_eq!(get("limits.cost_usd").1, "1.5");
    assert_eq!(
        get("limits.cost_usd").2.to_string(),
        format!("{}:3", p.display())
    );
    assert_eq!(get("policy").1, "(unset)");
    assert_eq!(get("workspace").2.to_string(), "default");
    assert_eq!(get("tools.shell_timeout_seconds").1, "120");
    assert_eq!(get("tools.shell_timeout_seconds").2.to_string(), "default");
    assert_eq!(get("repl.theme").1, "dark");
    assert_eq!(get("repl.tui").1, "false");
    assert_eq!(get("repl.approve").1, "false");
    assert_eq!(get("enforcement.engine").1, "auto");
    assert_eq!(get("enforcement.engine").2.to_string(), "default");
    assert_eq!(get("enforcement.service").1, "auto");
    assert_eq!(get("enforcement.service").2.to_string(), "default");
    assert!(
        get("security.ledger")
            .1
            .ends_with(".bee/findings/ledger.jsonl")
    );
    assert_eq!(entries.len(), 21);
}

#[test]
fn the_tui_can_be_the_default() {
    let w = World::new();
    let p = w.project(
        "[repl]
tui = true
",
    );
    let c = w.resolve(&Flags::default());
    let tui = c.repl_tui.as_ref().unwrap();
    assert!(tui.value);
    assert_eq!(tui.origin, file(&p, 2));
}

#[test]
fn approval_can_be_the_default() {
    let w = World::new();
    let p = w.project(
        "[repl]
approve = true
",
    );
    let c = w.resolve(&Flags::default());
    let approve = c.repl_approve.as_ref().unwrap();
    assert!(approve.value);
    assert_eq!(approve.origin, file(&p, 2));
}

#[test]
fn themes_come_from_the_configuration_and_bad_ones_are_located() {
    let w = World::new();
    let p = w.project(
        "[repl]\ntheme = \"mine\"\n\n[themes.mine]\nbase = \"light\"\nheading = \"bold #ff8800\"\n",
    );
    let c = w.resolve(&Flags::default());
    let theme = c.theme().unwrap();
    assert_ne!(theme, bee::render::Theme::light());
    assert_eq!(c.repl_theme.as_ref().unwrap().origin, file(&p, 2));

    w.project("[repl]\ntheme = \"nope\"\n");
    let c = w.resolve(&Flags::default());
    let e = c.theme().unwrap_err();
    assert!(
        e.contains(":2: repl.theme: there is no theme `nope`"),
        "{e}"
    );
    assert!(e.contains("dark, light, ansi16, plain"), "{e}");

    w.project("[themes.mine]\nheding = \"bold\"\nlink = \"bluee\"\n");
    let e = error(&w, &Flags::default());
    let keys = keys(&e);
    assert_eq!(
        keys,
        vec![
            (2, "themes.mine.heding".to_owned()),
            (3, "themes.mine.link".to_owned())
        ]
    );
}

#[test]
fn tool_limits_come_from_the_configuration() {
    let w = World::new();
    let p = w.project(
        "[tools]\noutput_cap_bytes = 4096\nshell_timeout_seconds = 30\n\
         shell_timeout_max_seconds = 90\ndisabled = [\"shell\"]\n",
    );
    let c = w.resolve(&Flags::default());
    let limits = c.tools.limits();
    assert_eq!(limits.output_cap, 4096);
    assert_eq!(limits.shell_timeout, std::time::Duration::from_secs(30));
    assert_eq!(limits.shell_timeout_max, std::time::Duration::from_secs(90));
    // Unset: the default.
    assert_eq!(limits.file_timeout, std::time::Duration::from_secs(60));
    let disabled = c.tools.disabled.unwrap();
    assert_eq!(disabled.value, ["shell"]);
    assert_eq!(disabled.origin, file(&p, 5));

    w.project("[tools]\nfile_timeout_seconds = 0\nshell_timeout_seconds = 700\nshell_timeout_max_seconds = 600\n");
    let e = error(&w, &Flags::default());
    let keys = keys(&e);
    assert_eq!(
        keys,
        vec![
            (2, "tools.file_timeout_seconds".to_owned()),
            (3, "tools.shell_timeout_seconds".to_owned())
        ]
    );
}

#[test]
fn policy_or_explicit_host_or_refusal() {
    let w = World::new();
    let c = w.resolve(&Flags {
        policy: Some("p.toml".into()),
        ..Flags::default()
    });
    assert!(matches!(
        c.require_policy_or_host(),
        Ok(Confinement::Policy(_))
    ));

    let c = w.resolve(&Flags {
        host: true,
        ..Flags::default()
    });
    match c.require_policy_or_host() {
        Ok(Confinement::Host(origin)) => assert_eq!(origin.to_string(), "flag --host"),
        other => panic!("{other:?}"),
    }

    let e = w
        .resolve(&Flags::default())
        .require_policy_or_host()
        .unwrap_err();
    assert_eq!(e, Refusal::NoPolicy);
    assert!(e.to_string().contains("--host") && e.to_string().contains("--policy"));

    let user = w.user("host = true\n");
    let c = w.resolve(&Flags {
        policy: Some("p.toml".into()),
        ..Flags::default()
    });
    match c.require_policy_or_host() {
        Err(Refusal::Both { host, .. }) => assert_eq!(host, file(&user, 1)),
        other => panic!("{other:?}"),
    }
    // `host = false` in a file is not a choice of host mode.
    w.user("host = false\n");
    assert_eq!(
        w.resolve(&Flags::default()).require_policy_or_host(),
        Err(Refusal::NoPolicy)
    );
}

/// The line and key of every problem of `e`.
fn keys(e: &FileError) -> Vec<(u32, String)> {
    e.diagnostics()
        .unwrap()
        .problems
        .iter()
        .map(|p| (p.line, p.key.clone().unwrap()))
        .collect()
}

fn error(w: &World, flags: &Flags) -> FileError {
    Config::resolve_in(flags, &w.env).unwrap_err()
}

#[test]
fn an_unknown_key_names_file_line_column_and_key() {
    let w = World::new();
    let p = w.project("policy = \"p.toml\"\n\n[limits]\nturns = 3\nmax_cost = 1\n");
    let e = error(&w, &Flags::default());
    let d = &e.diagnostics().unwrap().problems[0];
    assert_eq!((d.line, d.column), (5, 1));
    assert_eq!(d.key.as_deref(), Some("limits.max_cost"));
    assert!(e.to_string().starts_with(&format!(
        "{}:5:1: limits.max_cost: unknown field",
        p.display()
    )));
    assert!(
        d.help.as_deref().unwrap().contains("cost_usd"),
        "{:?}",
        d.help
    );

    w.project("polcy = \"p.toml\"\n");
    let e = error(&w, &Flags::default());
    assert!(e.to_string().contains(":1:1: polcy: unknown field"), "{e}");
}

#[test]
fn a_wrong_type_names_the_key() {
    let w = World::new();
    w.user("host = \"yes\"\n");
    let e = error(&w, &Flags::default());
    let d = &e.diagnostics().unwrap().problems[0];
    assert_eq!(d.line, 1);
    assert_eq!(d.key.as_deref(), Some("host"), "{e}");

    w.user("[limits]\nturns = -1\n");
    let e = error(&w, &Flags::default());
    assert_eq!(e.diagnostics().unwrap().problems[0].line, 2, "{e}");
}

#[test]
fn bad_values_are_all_reported() {
    let w = World::new();
    w.project("policy = \"\"\n[limits]\nturns = 0\ncost_usd = -2.0\n");
    let e = error(&w, &Flags::default());
    let keys = keys(&e);
    assert_eq!(
        keys,
        vec![
            (1, "policy".to_owned()),
            (3, "limits.turns".to_owned()),
            (4, "limits.cost_usd".to_owned())
        ]
    );
}

#[test]
fn a_missing_explicit_config_is_an_error_and_missing_defaults_are_not() {
    let w = World::new();
    let e = error(
        &w,
        &Flags {
            config: Some("nope.toml".into()),
            ..Flags::default()
        },
    );
    assert!(matches!(e, FileError::Read { .. }), "{e:?}");
    assert!(e.to_string().contains("nope.toml"));
    // No user or project file exists: fine.
    w.resolve(&Flags::default());
}

#[test]
fn a_syntax_error_has_a_position() {
    let w = World::new();
    let p = w.project("policy = \"p.toml\"\n[limits\n");
    let e = error(&w, &Flags::default());
    let d = &e.diagnostics().unwrap().problems[0];
    assert_eq!(d.file, p.display().to_string());
    assert_eq!(d.line, 2);
}

#[test]
fn scanner_settings_are_checked_by_key() {
    let w = World::new();
    w.project(
        "[security.scanners.opengrep]\nrules = \"auto\"\nbundle_version = \"1.0.0\"\n\
         [security.scanners.codeql]\nbundle_version = \"latest\"\ntimeout_seconds = 0\n\
         rules = \"x\"\n[security.scanners.bandit]\npath = \"/bin/bandit\"\n",
    );
    let e = error(&w, &Flags::default());
    let text = e.to_string();
    let mut found = keys(&e);
    found.sort();
    assert_eq!(
        found,
        vec![
            (2, "security.scanners.opengrep.rules".to_owned()),
            (3, "security.scanners.opengrep.bundle_version".to_owned()),
            (5, "security.scanners.codeql.bundle_version".to_owned()),
            (6, "security.scanners.codeql.timeout_seconds".to_owned()),
            (7, "security.scanners.codeql.rules".to_owned()),
            (8, "security.scanners.bandit".to_owned()),
        ],
        "{text}"
    );
    assert!(text.contains("no egress"), "{text}");
    assert!(text.contains("unknown scanner `bandit`"), "{text}");
    for remote in [
        "p/python",
        "https://semgrep.dev/c/p/ci",
        "r/python.lang.security",
    ] {
        w.project(&format!(
            "[security.scanners.opengrep]\nrules = \"{remote}\"\n"
        ));
        let e = error(&w, &Flags::default());
        assert_eq!(
            keys(&e),
            vec![(2, "security.scanners.opengrep.rules".to_owned())]
        );
    }
    w.project("[security.scanners.opengrep]\ncolour = 1\n");
    let e = error(&w, &Flags::default());
    assert!(e.to_string().contains("unknown field `colour`"), "{e}");

    let p = w.project(
        "[security]\nledger = \"findings.jsonl\"\n[security.scanners.opengrep]\n\
         path = \"/opt/opengrep\"\nrules = \"rules\"\ntimeout_seconds = 30\n",
    );
    let c = w.resolve(&Flags::default());
    let dir = p.parent().unwrap();
    assert_eq!(c.ledger.value, dir.join("findings.jsonl"));
    let og = &c.scanners["opengrep"];
    assert_eq!(og.rules.clone().unwrap().value, dir.join("rules"));
    assert_eq!(
        og.path.clone().unwrap().value,
        PathBuf::from("/opt/opengrep")
    );
    assert_eq!(og.timeout_seconds.clone().unwrap().value, 30);
    assert!(
        c.entries()
            .iter()
            .any(|(k, v, _)| k == "security.scanners.opengrep.timeout_seconds" && v == "30")
    );
}
