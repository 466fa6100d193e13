//! bee's own state in the workspace, kept out of every scope's write reach whatever the
//! policy says: the `.bee/` directory holds the project's configuration (which names the
//! records directory, the audit file, the engine and host mode), the default records
//! directory and the findings ledger. A scope that could write there could steer the next
//! bee (a planted `.bee/config.toml`), forge findings or rewrite its own transcript, or plant
//! a symbolic link for bee to write through.
//!
//! A version 2 policy protects `.bee/` already (its built-in protected paths); a version 1
//! policy that writes `./**` does not. So the sandbox adds one protected tree, `WORKSPACE/.bee`,
//! to every installed policy, and takes out any `fs.unprotect` rule that reaches into it. It
//! only narrows the policy. Every rule it adds carries the origin key [`OWN_STATE_ORIGIN_KEY`].
//!
//! What the configuration moves out of `.bee/` is bee's own state all the same: a findings
//! ledger (`security.ledger`), a records directory or an audit file named elsewhere, and the
//! current directory's `.bee` where the workspace is elsewhere, are protected the same way,
//! wherever they lie ([`StatePath`]) — unless the policy's own `fs.unprotect` names the tree
//! around them, as a policy does for a scratch tree (`/tmp/**`) that its engine must leave
//! writable whole.
//!
//! So is the user's configuration directory ([`user_directories`]): its `config.toml`, skills
//! and roles steer every later bee that user starts, so a scope that writes the home must not
//! reach it.
//!
//! The Landlock engine protects a tree inside a writable one by binding it again read-only,
//! which needs the directory (or file) to exist: when a write grant covers it and it does not
//! exist, the sandbox makes it (empty) first.

use std::path::{Path, PathBuf};

mod user;

use bee_core::CompiledPolicy;
use bee_core::compiled::{Origin, PathRule};
use bee_core::glob::PathPattern;

/// The origin key of the rule this module adds.
pub const OWN_STATE_ORIGIN_KEY: &str = "(bee's own state)";

/// The workspace's state directory.
pub const STATE_DIR: &str = ".bee";

/// Paths below the state directory that stand for what bee keeps there, to find the
/// `fs.unprotect` rules that would reach into it.
const SAMPLES: [&str; 4] = [
    "config.toml",
    "records/run/summary.json",
    "findings/ledger.jsonl",
    "skills/s/SKILL.md",
];

/// A piece of bee's own state that the configuration put outside the workspace's `.bee/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatePath {
    /// A file bee appends to (the findings ledger, an audit file); absolute.
    File(PathBuf),
    /// A directory bee writes below (a records directory); absolute.
    Dir(PathBuf),
    /// A configuration directory bee reads (the user's), as the user names it; absolute.
    /// Protected at its real path with what it links to, and refused where a link on the
    /// way lies within a write grant ([`user_directories`]).
    Config(PathBuf),
}

/// Protects `workspace/.bee` and each of `elsewhere` in `policy` (see the module's text).
/// `workspace` is absolute; when it is named through a symbolic link, its `.bee` is
/// protected under both names (the kernel sees the real one).
///
/// # Errors
/// When a directory or file must be made for the Landlock engine and cannot be; and when a
/// path of `elsewhere` goes through a symbolic link (a scope of an earlier run may have
/// planted it, to have bee make and write its state where the link points): bee's state is
/// named by its real path, or the sandbox refuses to start (fail closed).
pub fn protect(
    policy: &mut CompiledPolicy,
    workspace: &Path,
    elsewhere: &[StatePath],
) -> std::io::Result<()> {
    protect_one(
        policy,
        &StatePath::Dir(workspace.join(STATE_DIR)),
        &SAMPLES,
        false,
    )?;
    if let Ok(real) = std::fs::canonicalize(workspace)
        && real != workspace
    {
        protect_one(
            policy,
            &StatePath::Dir(real.join(STATE_DIR)),
            &SAMPLES,
            false,
        )?;
    }
    let own = [
        Some(workspace.join(STATE_DIR)),
        std::fs::canonicalize(workspace)
            .ok()
            .map(|r| r.join(STATE_DIR)),
    ];
    for path in elsewhere {
        let p = match path {
            StatePath::File(p) | StatePath::Dir(p) => p,
            StatePath::Config(dir) => {
                user::protect(policy, dir)?;
                continue;
            }
        };
        if own.iter().flatten().any(|o| o == p) {
            continue;
        }
        if let Some(real) = real_path(p)
            && real != lexical(p)
        {
            return Err(std::io::Error::other(format!(
                "`{}` goes through a symbolic link (its real path is `{}`): name bee's own \
                 state by its real path",
                p.display(),
                real.display()
            )));
        }
        protect_one(policy, path, &["x"], true)?;
    }
    Ok(())
}

/// The current directory's `.bee`, whose configuration the next bee started there reads.
/// Where it is a sandbox's workspace's own `.bee`, [`protect`] covers it as that (a run's
/// episodes may each have a workspace of their own, so this is decided per sandbox).
#[must_use]
pub fn current_directory() -> Option<StatePath> {
    let cwd = std::env::current_dir().ok()?;
    Some(StatePath::Dir(cwd.join(STATE_DIR)))
}

/// bee's state that this process's surroundings name, beside what its configuration names:
/// the current directory's `.bee` ([`current_directory`]) and the user's configuration
/// directories ([`user_directories`]).
#[must_use]
pub fn of_this_process() -> Vec<StatePath> {
    let mut state: Vec<StatePath> = current_directory().into_iter().collect();
    state.extend(user_directories());
    state
}

/// The user's configuration directories (see [`crate::config::Env::user_config`]): the one
/// this process reads (`$XDG_CONFIG_HOME/bee`, else `~/.config/bee`) and, where
/// `$XDG_CONFIG_HOME` names another, `~/.config/bee` too, which a bee started without that
/// variable reads. Each holds `config.toml`, `skills/` and `agents/`.
#[must_use]
pub fn user_directories() -> Vec<StatePath> {
    let Ok(env) = crate::config::Env::from_process() else {
        return Vec::new();
    };
    let default = crate::config::Env {
        xdg_config_home: None,
        ..env.clone()
    };
    let mut dirs: Vec<PathBuf> = [env.user_config(), default.user_config()]
        .into_iter()
        .flatten()
        .filter_map(|file| file.parent().map(Path::to_path_buf))
        .collect();
    dirs.dedup();
    dirs.into_iter().map(StatePath::Config).collect()
}

/// Makes `path` (a directory, or an empty file) and the directories above it that are
/// missing, each owned as the nearest one that exists is: bee run with `sudo` in a user's
/// home must not leave root's directories there, which the user's own programs then cannot
/// write in.
fn make_like_ancestor(path: &Path, dir: bool) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let owner = path
        .ancestors()
        .skip(1)
        .find_map(|a| std::fs::metadata(a).ok())
        .map(|m| (m.uid(), m.gid()));
    let missing: Vec<&Path> = path
        .ancestors()
        .take_while(|a| std::fs::symlink_metadata(a).is_err())
        .collect();
    if dir {
        std::fs::create_dir_all(path)?;
    } else {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::File::options()
            .create(true)
            .append(true)
            .open(path)?;
    }
    // SAFETY: `geteuid` reads this process's credentials.
    if let Some((uid, gid)) = owner
        && unsafe { libc::geteuid() } == 0
    {
        for made in missing {
            std::os::unix::fs::lchown(made, Some(uid), Some(gid))?;
        }
    }
    Ok(())
}

/// Refuses a file of bee's state with a second name (a hard link a scope of an earlier run
/// made): the protection covers one name, and a scope could rewrite it through the other.
fn one_name(path: &Path, meta: &std::fs::Metadata) -> std::io::Result<()> {
    let names = std::os::unix::fs::MetadataExt::nlink(meta);
    if names > 1 {
        return Err(std::io::Error::other(format!(
            "`{}` has {names} names (hard links): a scope could write it through another one; \
             make it a file of its own (copy it, and put the copy in its place)",
            path.display()
        )));
    }
    Ok(())
}

/// `path` with `.` and `..` taken out as written (no link is followed).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `path` with its longest existing ancestor made canonical (symbolic links resolved, `.`
/// and `..` taken out) and the rest as written; `None` when not even `/` can be resolved.
fn real_path(path: &Path) -> Option<PathBuf> {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return Some(rest.iter().rev().fold(real, |p: PathBuf, c| p.join(c)));
        }
        rest.push(existing.file_name()?);
        existing = existing.parent()?;
    }
}

/// Protects one file or tree: makes it when a write grant covers it and it is missing, and
/// adds the protected rule. An `fs.unprotect` rule that reaches it (a tree's `samples` stand
/// for what lies below it) is dropped for the workspace's `.bee` (`unprotect_lifts` false);
/// for state the configuration put elsewhere (`unprotect_lifts` true), such a rule is the
/// policy's own word that the tree around it is free to write (`unprotect = ["/tmp/**"]` for
/// a scratch tree that holds the records), so nothing is added there.
fn protect_one(
    policy: &mut CompiledPolicy,
    state: &StatePath,
    samples: &[&str],
    unprotect_lifts: bool,
) -> std::io::Result<()> {
    let (path, dir) = match state {
        StatePath::File(p) => (p, false),
        StatePath::Dir(p) | StatePath::Config(p) => (p, true),
    };
    let anchors = bee_core::path::Anchors {
        base: Path::new("/"),
        home: None,
    };
    // Normalised as the compiler normalises every pattern (a workspace given as
    // `/p/ws/.` names `/p/ws/.bee`, which the kernel sees): a `/./` in the rule would match
    // no path the kernel resolves.
    let Some(root) = path
        .to_str()
        .and_then(|d| bee_core::path::normalize(d, anchors).ok())
    else {
        // A path that is not UTF-8 cannot be named by any grant either.
        return Ok(());
    };
    let reaches_in = |p: &PathPattern| {
        p.matches(&root) || (dir && samples.iter().any(|s| p.matches(&format!("{root}/{s}"))))
    };
    if unprotect_lifts {
        if policy.fs.unprotect.iter().any(|u| reaches_in(&u.pattern)) {
            return Ok(());
        }
    } else {
        policy.fs.unprotect.retain(|u| !reaches_in(&u.pattern));
    }
    if !dir && let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.is_file() {
            // A FIFO blocks bee's open (or hands its records to whoever reads the other end).
            return Err(std::io::Error::other(format!(
                "`{}` is not a regular file",
                path.display()
            )));
        }
        one_name(path, &meta)?;
    }
    if policy.fs.write.iter().any(|w| reaches_in(&w.pattern))
        && std::fs::symlink_metadata(path).is_err()
    {
        make_like_ancestor(path, dir)?;
    }
    let (pattern, text) = if dir {
        (
            PathPattern::Subtree { root: root.clone() },
            format!("{root}/**"),
        )
    } else {
        (PathPattern::Exact { path: root.clone() }, root.clone())
    };
    policy.fs.protect.push(PathRule {
        pattern,
        origin: Origin {
            key: OWN_STATE_ORIGIN_KEY.to_owned(),
            line: 0,
            column: 0,
            text,
        },
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use bee_core::{CompileOptions, compile_str};

    use super::*;

    fn compiled(text: &str, base: &Path) -> CompiledPolicy {
        let options = CompileOptions {
            base: base.to_owned(),
            home: None,
        };
        match compile_str("p.toml", text, &options) {
            Ok(c) => c.policy,
            Err(e) => unreachable!("{e}"),
        }
    }

    #[test]
    fn a_writable_workspace_keeps_its_state_directory_read_only() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        // Version 2 protects `.bee` already; this policy lifts that, and protects `src/x`.
        let text = "version = 2\n[fs]\nread = [\"./**\"]\nwrite = [\"./**\"]\nprotect = [\"./src/**\"]\nunprotect = [\"./.bee/**\", \"./src/x/**\"]\n";
        let mut policy = compiled(text, ws.path());
        protect(&mut policy, ws.path(), &[]).unwrap_or_else(|e| unreachable!("{e}"));
        let root = ws.path().join(".bee");
        // Made, so that a read-only bind can cover it.
        assert!(root.is_dir());
        let root = root.display().to_string();
        let added = policy
            .fs
            .protect
            .last()
            .map(|r| (&r.pattern, &r.origin.key));
        assert_eq!(
            added,
            Some((
                &PathPattern::Subtree { root: root.clone() },
                &OWN_STATE_ORIGIN_KEY.to_owned()
            ))
        );
        // The unprotect rule that reached into it is gone; the other stays.
        assert_eq!(policy.fs.unprotect.len(), 1);
        let src_x = format!("{}/src/x/a", ws.path().display());
        assert!(policy.fs.unprotect[0].pattern.matches(&src_x));
    }

    #[test]
    fn state_named_elsewhere_is_protected_and_made_where_writable() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let text = "version = 1\n[fs]\nread = [\"./**\"]\nwrite = [\"./**\"]\n";
        let mut policy = compiled(text, ws.path());
        let ledger = ws.path().join("ledger.jsonl");
        let records = ws.path().join("recs/run");
        let elsewhere = [
            StatePath::File(ledger.clone()),
            StatePath::Dir(records.clone()),
        ];
        protect(&mut policy, ws.path(), &elsewhere).unwrap_or_else(|e| unreachable!("{e}"));
        // Made (the file empty), so that read-only binds can cover them.
        assert_eq!(std::fs::read(&ledger).ok(), Some(Vec::new()));
        assert!(records.is_dir());
        let patterns: Vec<&PathPattern> = policy.fs.protect.iter().map(|r| &r.pattern).collect();
        let ledger = ledger.display().to_string();
        let records = records.display().to_string();
        assert!(patterns.contains(&&PathPattern::Exact { path: ledger }));
        assert!(patterns.contains(&&PathPattern::Subtree { root: records }));
    }

    /// A scratch tree the policy unprotects whole (as the demo's does `/tmp/**`, which the
    /// Landlock engine needs) keeps that rule, and state the configuration put there is left
    /// to it; the workspace's `.bee` is protected all the same.
    #[test]
    fn an_unprotected_tree_keeps_its_rule_and_the_state_in_it() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let scratch = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let tree = format!("{}/**", scratch.path().display());
        let text = format!(
            "version = 2\n[fs]\nread = [\"./**\"]\nwrite = [\"./**\", {tree:?}]\n\
             unprotect = [{tree:?}]\n"
        );
        let mut policy = compiled(&text, ws.path());
        let records = scratch.path().join("records");
        protect(&mut policy, ws.path(), &[StatePath::Dir(records.clone())])
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(policy.fs.unprotect.len(), 1);
        assert!(!records.exists());
        let root = ws.path().join(".bee").display().to_string();
        let protected: Vec<&PathPattern> = policy.fs.protect.iter().map(|r| &r.pattern).collect();
        assert!(protected.contains(&&PathPattern::Subtree { root }));
        let records = records.display().to_string();
        assert!(!protected.iter().any(|p| p.matches(&records)));
    }

    /// A state file with a second name (a hard link planted by a scope of an earlier run)
    /// is refused: the protection covers one name.
    #[test]
    fn a_state_file_with_another_name_is_refused() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let text = "version = 1\n[fs]\nread = [\"./**\"]\nwrite = [\"./**\"]\n";
        let mut policy = compiled(text, ws.path());
        let audit = ws.path().join("audit.jsonl");
        std::fs::write(&audit, "").unwrap_or_else(|e| unreachable!("{e}"));
        std::fs::hard_link(&audit, ws.path().join("alias")).unwrap_or_else(|e| unreachable!("{e}"));
        let e = protect(&mut policy, ws.path(), &[StatePath::File(audit)]).err();
        assert!(
            e.as_ref()
                .is_some_and(|e| e.to_string().contains("has 2 names")),
            "{e:?}"
        );
    }

    /// A FIFO where a state file should be (made by a scope of an earlier run) would block
    /// bee's open, or hand its records to whoever reads it: refused.
    #[test]
    fn a_state_file_that_is_not_a_regular_file_is_refused() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let mut policy = compiled("version = 1\n[fs]\nread = [\"./**\"]\n", ws.path());
        let audit = ws.path().join("audit.jsonl");
        let c = std::ffi::CString::new(audit.as_os_str().as_encoded_bytes())
            .unwrap_or_else(|e| unreachable!("{e}"));
        // SAFETY: `c` is NUL-terminated.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = protect(&mut policy, ws.path(), &[StatePath::File(audit)]).err();
        assert!(
            e.as_ref()
                .is_some_and(|e| e.to_string().contains("is not a regular file")),
            "{e:?}"
        );
    }

    #[test]
    fn a_read_only_workspace_gets_no_directory_made() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let mut policy = compiled("version = 1\n[fs]\nread = [\"./**\"]\n", ws.path());
        protect(&mut policy, ws.path(), &[]).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(!ws.path().join(".bee").exists());
        assert_eq!(policy.fs.protect.len(), 1);
    }
}

#[cfg(test)]
mod normal_form {
    use super::*;

    /// A workspace named with `.` segments (`workspace = "."` in a scenario) is protected by a
    /// rule in normal form, which the kernel's resolved paths and `bee serve` accept.
    #[test]
    fn the_rule_is_normalised_whatever_the_workspace_spelling() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
        let options = bee_core::CompileOptions {
            base: ws.path().to_owned(),
            home: None,
        };
        let mut policy =
            bee_core::compile_str("p.toml", "version = 1\n[fs]\nread = [\"./**\"]\n", &options)
                .unwrap_or_else(|e| unreachable!("{e}"))
                .policy;
        protect(&mut policy, &ws.path().join("."), &[]).unwrap_or_else(|e| unreachable!("{e}"));
        let root = ws.path().join(".bee").display().to_string();
        assert_eq!(
            policy.fs.protect.last().map(|r| &r.pattern),
            Some(&PathPattern::Subtree { root })
        );
        assert_eq!(policy.check_normal_form(), Ok(()));
    }
}
