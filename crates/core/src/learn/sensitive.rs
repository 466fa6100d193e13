//! Paths a learned subtree must never cover: the protected paths (code or configuration that
//! runs outside the sandbox later) and well-known secrets.
//!
//! A learned policy grants an observed path exactly whatever it is; these lists only stop
//! [`super::collapse`] from widening a set of exact paths into `DIR/**` where such a path is, or
//! could be, below `DIR`, and mark the exact grants of such paths for review.

/// Credential files, wherever they appear (`**/NAME`).
const CREDENTIAL_NAMES: &[&str] = &[".netrc", ".git-credentials", ".pgpass", ".npmrc", ".pypirc"];

/// Protected paths as a parent directory's name and a child's (`**/.docker/config.json`).
const PROTECTED_PAIRS: &[(&str, &str)] = &[(".docker", "config.json")];

/// The names the built-in protected paths of the current language version start with, at
/// any depth (`.git`, `.bee`, `.husky`, `.vscode`…): the names of `crate::protected`, so the
/// two lists cannot drift apart.
fn protected_names() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = crate::protected::protected(crate::compile::LANGUAGE_VERSION)
            .iter()
            .filter_map(|p| match crate::glob::PathPattern::parse(p.pattern).ok()? {
                crate::glob::PathPattern::Nested { tail, .. } => tail.into_iter().next(),
                crate::glob::PathPattern::Segment { name, .. } => Some(name),
                _ => None,
            })
            .collect();
        names.sort();
        names.dedup();
        names
    })
}

/// Whether `name` is protected or a credential file wherever it appears.
fn protected_name(name: &str) -> bool {
    CREDENTIAL_NAMES.contains(&name) || protected_names().iter().any(|n| n == name)
}

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
    if segs.iter().any(|s| protected_name(s)) {
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
    protected_name(name) || PROTECTED_PAIRS.iter().any(|(a, _)| *a == name)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protected_names_are_those_of_the_protected_set() {
        assert_eq!(
            protected_names(),
            [
                ".bee",
                ".devcontainer",
                ".envrc",
                ".git",
                ".husky",
                ".idea",
                ".pre-commit-config.yaml",
                ".vscode",
                "lefthook.yml"
            ]
        );
        assert!(is_sensitive("/w/.vscode/tasks.json", None));
        assert!(is_sensitive("/w/.docker/config.json", None));
        assert!(!is_sensitive("/w/src/main.rs", None));
    }
}
