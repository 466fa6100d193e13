//! Paths a learned subtree must never cover: the protected paths (code or configuration that
//! runs outside the sandbox later) and well-known secrets.
//!
//! A learned policy grants an observed path exactly whatever it is; these lists only stop
//! [`super::collapse`] from widening a set of exact paths into `DIR/**` where such a path is, or
//! could be, below `DIR`, and mark the exact grants of such paths for review.

/// Names that are protected wherever they appear (`**/NAME` and `**/NAME/**`): git and its
/// hook managers, bee's own directory, direnv files, editor folders (the names of
/// `crate::protected`'s version 2 set), and credential files.
const PROTECTED_NAMES: &[&str] = &[
    ".git",
    ".bee",
    ".envrc",
    ".husky",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    ".vscode",
    ".devcontainer",
    ".idea",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
];

/// Protected paths as a parent directory's name and a child's (`**/.vscode/tasks.json`).
const PROTECTED_PAIRS: &[(&str, &str)] = &[
    (".vscode", "tasks.json"),
    (".idea", "workspace.xml"),
    (".docker", "config.json"),
];

/// Secrets below the home directory, as paths relative to it.
const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".azure",
    ".kube",
    ".docker/config.json",
    ".config/gcloud",
    ".config/gh",
    ".local/share/keyrings",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// Absolute secrets.
const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/ssh",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/var/lib/sss",
];

/// Whether `path` is, or is inside, a protected path or a well-known secret (`home`: the
/// invoking user's home directory, normalised, if known).
pub fn is_sensitive(path: &str, home: Option<&str>) -> bool {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segs.iter().any(|s| PROTECTED_NAMES.contains(s)) {
        return true;
    }
    if segs.windows(2).any(|w| {
        PROTECTED_PAIRS
            .iter()
            .any(|(a, b)| w[0] == *a && w[1] == *b)
    }) {
        return true;
    }
    secrets(home).any(|s| within(path, &s))
}

/// Whether `DIR/**` could hold a sensitive path: `dir` is sensitive itself, or an ancestor of a
/// secret (the home directory is, of `~/.ssh`), or the filesystem root.
pub fn subtree_refused(dir: &str, home: Option<&str>) -> bool {
    dir == "/" || is_sensitive(dir, home) || secrets(home).any(|s| within(&s, dir))
}

/// Whether a directory's entry name alone makes the directory's subtree sensitive
/// (`.git`, `.envrc`, `.vscode`…).
pub fn sensitive_name(name: &str) -> bool {
    PROTECTED_NAMES.contains(&name) || PROTECTED_PAIRS.iter().any(|(a, _)| *a == name)
}

fn secrets(home: Option<&str>) -> impl Iterator<Item = String> + '_ {
    let home_secrets = home
        .into_iter()
        .flat_map(|h| HOME_SECRETS.iter().map(move |s| join(h, s)));
    SYSTEM_SECRETS
        .iter()
        .map(|s| (*s).to_owned())
        .chain(home_secrets)
}

fn join(dir: &str, rel: &str) -> String {
    if dir == "/" {
        format!("/{rel}")
    } else {
        format!("{dir}/{rel}")
    }
}

/// `path` equals `dir` or lies below it (both normalised).
pub(crate) fn within(path: &str, dir: &str) -> bool {
    dir == "/"
        || path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}
