//! The example ceiling bee ships for `bee serve` (`packaging/systemd/default-ceiling.toml`):
//! it admits every policy and fragment bee ships, and still bounds what a user may ask for.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{bee_exe, code, repo_tomls, stderr};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn ceiling() -> PathBuf {
    repo().join("packaging/systemd/default-ceiling.toml")
}

/// A home for the caller outside `/tmp` (the ceiling grants `/tmp/**` beside `~/**`, and a
/// home below it would meet its `~/.aws/**` carve-out), as a user's is: in `/var/tmp`, since
/// the repository and its target directory may themselves be below `/tmp`.
fn home() -> (tempfile::TempDir, PathBuf) {
    let home = tempfile::tempdir_in("/var/tmp").unwrap_or_else(|e| unreachable!("{e}"));
    let ws = home.path().join("project");
    std::fs::create_dir(&ws).unwrap_or_else(|e| unreachable!("{e}"));
    (home, ws)
}

/// `bee validate --policy POLICY --parent CEILING` in `ws`, with `home` as `HOME` and no user
/// configuration.
fn within(home: &Path, ws: &Path, policy: &Path) -> Output {
    Command::new(bee_exe())
        .args(["validate", "--policy"])
        .arg(policy)
        .arg("--parent")
        .arg(ceiling())
        .current_dir(ws)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap_or_else(|e| unreachable!("cannot run bee: {e}"))
}

#[test]
fn the_example_ceiling_admits_every_shipped_policy_and_fragment() {
    let (home, ws) = home();
    let mut policies = repo_tomls("policies");
    assert!(policies.len() >= 7, "{policies:?}");
    for fragment in repo_tomls("crates/core/fragments/v2") {
        let name = fragment
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let file = ws.join(format!("{name}.toml"));
        let text = format!("version = 2\ninclude = [\"{name}\"]\n[fs]\nread = [\"./**\"]\n");
        std::fs::write(&file, text).unwrap_or_else(|e| unreachable!("{e}"));
        policies.push(file);
    }
    assert!(
        policies
            .iter()
            .any(|p| p.ends_with("agent-claude-code.toml"))
    );
    for policy in &policies {
        let o = within(home.path(), &ws, policy);
        assert_eq!(code(&o), 0, "{}: {}", policy.display(), stderr(&o));
    }
}

#[test]
fn the_example_ceiling_still_bounds_what_a_user_may_ask_for() {
    let (home, ws) = home();
    for (asked, refused) in [
        ("[fs]\nread = [\"~/.ssh/**\"]\n", "~/.ssh"),
        ("[fs]\nread = [\"/root/**\"]\n", "/root"),
        ("[fs]\nwrite = [\"/etc/**\"]\n", "/etc"),
        ("[exec]\nallow = [\"/tmp/**\"]\n", "/tmp"),
        (
            "[[net.allow]]\naddr = [\"10.0.0.1\"]\nports = [443]\nproto = \"tcp\"\n",
            "10.0.0.1",
        ),
        (
            "[[net.allow]]\nhost = [\"example.com\"]\nports = [443]\nproto = \"tcp\"\n",
            "example.com",
        ),
        (
            "[[net.allow]]\naddr = [\"127.0.0.1\"]\nports = [22]\nproto = \"tcp\"\n",
            "127.0.0.1",
        ),
    ] {
        let file = ws.join("asked.toml");
        std::fs::write(&file, format!("version = 1\n{asked}"))
            .unwrap_or_else(|e| unreachable!("{e}"));
        let o = within(home.path(), &ws, &file);
        let err = stderr(&o);
        assert_eq!(code(&o), 65, "{asked}: {err}");
        let home_text = home.path().display().to_string();
        let named = refused.replacen('~', &home_text, 1);
        assert!(err.contains(&named), "{asked}: {err}");
    }
}
