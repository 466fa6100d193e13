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

/// What the built-in protected paths of the current language version name, drawn from
/// `crate::protected` so the two lists cannot drift apart: names protected at any depth
/// (`.git`, `.bee`, `.husky`, `.vscode`…: a segment pattern's name, or the first name of one
/// that protects a whole directory), pairs of a directory's name and a child's
/// (a nested pattern of two names, `.git/config` were `.git` not protected whole; and
/// [`PROTECTED_PAIRS`]), and name endings (`.code-workspace`: a postfix pattern's suffix).
#[derive(Debug, Default)]
struct Derived {
    names: Vec<String>,
    pairs: Vec<(String, String)>,
    suffixes: Vec<String>,
}

fn derived() -> &'static Derived {
    static DERIVED: std::sync::OnceLock<Derived> = std::sync::OnceLock::new();
    DERIVED.get_or_init(|| {
        use crate::glob::PathPattern;
        let mut d = Derived::default();
        for p in crate::protected::protected(crate::compile::LANGUAGE_VERSION) {
            match PathPattern::parse(p.pattern) {
                Ok(PathPattern::Segment { name, .. }) => d.names.push(name),
                Ok(PathPattern::Nested { tail, subtree, .. }) => match tail.as_slice() {
                    [dir] if subtree => d.names.push(dir.clone()),
                    [dir, child] if !subtree => d.pairs.push((dir.clone(), child.clone())),
                    [dir, ..] => d.names.push(dir.clone()),
                    [] => {}
                },
                Ok(PathPattern::Postfix { suffix, .. }) => d.suffixes.push(suffix),
                _ => {}
            }
        }
        d.pairs.extend(
            PROTECTED_PAIRS
                .iter()
                .map(|(dir, child)| ((*dir).to_owned(), (*child).to_owned())),
        );
        // A pair whose directory is protected whole adds nothing (`.git/config`).
        let names = d.names.clone();
        d.pairs.retain(|(dir, _)| !names.contains(dir));
        for v in [&mut d.names, &mut d.suffixes] {
            v.sort();
            v.dedup();
        }
        d.pairs.sort();
        d.pairs.dedup();
        d
    })
}

fn protected_names() -> &'static [String] {
    &derived().names
}

/// Whether `name` is protected or a credential file wherever it appears.
fn protected_name(name: &str) -> bool {
    CREDENTIAL_NAMES.contains(&name)
        || protected_names().iter().any(|n| n == name)
        || derived()
            .suffixes
            .iter()
            .any(|s| name.ends_with(s.as_str()))
}

/// Whether `dir` then `child` is a protected pair of names (`.docker/config.json`).
fn protected_pair(dir: &str, child: &str) -> bool {
    derived().pairs.iter().any(|(a, b)| dir == a && child == b)
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
    if segs.windows(2).any(|w| protected_pair(w[0], w[1])) {
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
    protected_name(name) || derived().pairs.iter().any(|(a, _)| a == name)
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
        let names = protected_names();
        for n in [
            ".bee",
            ".devcontainer",
            ".devcontainer.json",
            ".envrc",
            ".git",
            ".husky",
            ".huskyrc.js",
            ".idea",
            ".lefthook",
            ".lefthook-local.toml",
            ".pre-commit-config.yaml",
            ".pre-commit-config.yml",
            ".run",
            ".vscode",
            "husky.config.cjs",
            "lefthook.yml",
            "lefthook-local.jsonc",
        ] {
            assert!(names.iter().any(|m| m == n), "{n} in {names:?}");
        }
        // Every name comes from the set: as a segment pattern's name or a directory's.
        let set = crate::protected::protected(crate::compile::LANGUAGE_VERSION);
        for n in names {
            assert!(
                set.iter()
                    .any(|p| p.pattern.starts_with(&format!("/**/{n}"))),
                "{n}"
            );
        }
        // `.config` is no name of its own: lefthook's files below it are covered by their names.
        assert!(!names.iter().any(|n| n == ".config"));
        assert!(is_sensitive("/w/.config/lefthook.yml", None));
        assert!(!is_sensitive("/w/.config/other.yml", None));
        assert!(!sensitive_name(".config") && sensitive_name(".docker"));
        assert!(is_sensitive("/w/team.code-workspace", None));
        assert!(is_sensitive("/w/.vscode/tasks.json", None));
        assert!(is_sensitive("/w/.docker/config.json", None));
        assert!(!is_sensitive("/w/src/main.rs", None));
    }
}
