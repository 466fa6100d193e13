//! Policy composition: `include = ["base", "rust", "./team.toml"]`.
//!
//! An entry without `/` that does not end in `.toml` names a *shipped fragment*: a policy
//! piece bee carries for its language version (as AppArmor carries abstractions). Any other
//! entry is a fragment file of the user's, relative to the directory of the file that
//! includes it (`~/` for the home directory). A fragment has the tables of a policy (`[fs]`,
//! `[exec]`, `[net]`), an optional `description` and its own `include`, and no `version`:
//! it means what the including policy's version says. Includes are expanded before anything
//! else is compiled; their rules come first, in include order, and keep their origin (key
//! `FRAGMENT:fs.read[2]`, line in the fragment).

use std::path::{Path, PathBuf};

/// One shipped fragment: its name and TOML text.
#[derive(Debug, Clone, Copy)]
pub struct Fragment {
    /// The name an `include` entry gives.
    pub name: &'static str,
    /// The fragment's TOML.
    pub text: &'static str,
}

/// The fragments of language version 2.
const V2: &[Fragment] = &[
    Fragment {
        name: "agent-aider",
        text: include_str!("../../fragments/v2/agent-aider.toml"),
    },
    Fragment {
        name: "agent-claude-code",
        text: include_str!("../../fragments/v2/agent-claude-code.toml"),
    },
    Fragment {
        name: "agent-codex",
        text: include_str!("../../fragments/v2/agent-codex.toml"),
    },
    Fragment {
        name: "agent-gemini",
        text: include_str!("../../fragments/v2/agent-gemini.toml"),
    },
    Fragment {
        name: "agent-opencode",
        text: include_str!("../../fragments/v2/agent-opencode.toml"),
    },
    Fragment {
        name: "base",
        text: include_str!("../../fragments/v2/base.toml"),
    },
    Fragment {
        name: "c",
        text: include_str!("../../fragments/v2/c.toml"),
    },
    Fragment {
        name: "go",
        text: include_str!("../../fragments/v2/go.toml"),
    },
    Fragment {
        name: "node",
        text: include_str!("../../fragments/v2/node.toml"),
    },
    Fragment {
        name: "python",
        text: include_str!("../../fragments/v2/python.toml"),
    },
    Fragment {
        name: "rust",
        text: include_str!("../../fragments/v2/rust.toml"),
    },
];

/// The shipped fragments of policy language `version` (none for version 1, whose meaning
/// predates them; version 3 ships version 2's, since it changed only the protected paths).
#[must_use]
pub fn fragments(version: u32) -> &'static [Fragment] {
    match version {
        2 | 3 => V2,
        _ => &[],
    }
}

/// What an include entry resolved to.
pub(super) struct Resolved {
    /// Its key prefix label: the fragment name, or the entry as written.
    pub label: String,
    /// The name diagnostics give its source: `shipped fragment rust (version 2)` or the path.
    pub source_name: String,
    /// Identity for cycle detection: `shipped:NAME` or the canonical path.
    pub identity: String,
    /// Its text.
    pub text: String,
    /// The directory its own relative includes resolve against (`None` for shipped ones).
    pub dir: Option<PathBuf>,
}

/// Whether an include entry names a shipped fragment rather than a file.
fn is_shipped(entry: &str) -> bool {
    !entry.contains('/') && !entry.ends_with(".toml")
}

/// Whether a rule's origin key (`agent-codex:fs.protect[0]`) names a shipped fragment. Such a
/// fragment's protected paths are written for every policy that includes it, most of which
/// write few of them, so that one carves nothing out is no news to its reader.
pub(super) fn from_shipped(key: &str) -> bool {
    key.split_once(':')
        .is_some_and(|(label, _)| is_shipped(label))
}

/// Why an include entry names nothing that can be included.
#[derive(Debug)]
pub(super) struct Unresolved {
    /// What is wrong, for the entry's diagnostic.
    pub message: String,
    /// What to write instead.
    pub help: String,
    /// The kind of the error that kept a file unread (`None`: it was read, or no file).
    pub unread: Option<std::io::ErrorKind>,
}

impl From<(String, String)> for Unresolved {
    fn from((message, help): (String, String)) -> Self {
        Self {
            message,
            help,
            unread: None,
        }
    }
}

/// Resolves one include entry, written in a file whose directory is `dir` (`None` for a
/// shipped fragment, which may include only other shipped fragments).
///
/// # Errors
/// A message for the include entry and its help: unknown fragment, a file that cannot be
/// read (with the kind of the error that kept it unread) or is not UTF-8, a file named from a
/// shipped fragment.
pub(super) fn resolve(
    entry: &str,
    version: u32,
    dir: Option<&Path>,
    home: Option<&Path>,
) -> Result<Resolved, Unresolved> {
    if is_shipped(entry) {
        let all = fragments(version);
        let names: Vec<&str> = all.iter().map(|f| f.name).collect();
        return match all.iter().find(|f| f.name == entry) {
            Some(f) => Ok(Resolved {
                label: f.name.to_owned(),
                source_name: format!("shipped fragment {} (version {version})", f.name),
                identity: format!("shipped:{}", f.name),
                text: f.text.to_owned(),
                dir: None,
            }),
            None if names.is_empty() => Err(Unresolved::from((
                format!("version {version} policies have no shipped fragments, so `{entry}` is unknown"),
                "move the policy to `version = 3`, or include a file (a path with `/` or ending in `.toml`)".to_owned(),
            ))),
            None => Err(Unresolved::from((
                format!("`{entry}` is not a shipped fragment"),
                format!("shipped fragments of version {version}: {}; a file of yours is a path (`./{entry}.toml`)", names.join(", ")),
            ))),
        };
    }
    let Some(dir) = dir else {
        return Err(Unresolved::from((
            format!("a shipped fragment cannot include the file `{entry}`"),
            "only shipped fragments include each other".to_owned(),
        )));
    };
    let path = match (entry.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => h.join(rest),
        (Some(_), None) => {
            return Err(Unresolved::from((
                format!("`{entry}` starts with `~/` but no home directory is known"),
                "write the fragment's path in full".to_owned(),
            )));
        }
        (None, _) => dir.join(entry),
    };
    let stem = entry.strip_suffix(".toml").unwrap_or(entry);
    let shipped = fragments(version)
        .iter()
        .find(|f| f.name == stem && !stem.contains('/'));
    let hint = || match shipped {
        Some(f) => format!(
            "the shipped fragment is named without `.toml`: `{}`",
            f.name
        ),
        None => {
            "an include entry names a shipped fragment (`base`) or a readable TOML file".to_owned()
        }
    };
    let bytes = crate::source_file::read_source(&path).map_err(|e| Unresolved {
        message: format!("cannot read the fragment {}: {e}", path.display()),
        help: hint(),
        unread: Some(e.kind()),
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        Unresolved::from((
            format!("the fragment {} is not UTF-8", path.display()),
            hint(),
        ))
    })?;
    let identity = std::fs::canonicalize(&path)
        .unwrap_or_else(|_| path.clone())
        .display()
        .to_string();
    Ok(Resolved {
        label: entry.to_owned(),
        source_name: path.display().to_string(),
        identity,
        text,
        dir: Some(path.parent().map_or_else(|| dir.to_owned(), Path::to_owned)),
    })
}
