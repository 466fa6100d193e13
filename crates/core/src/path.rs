//! Path normalisation: from what a policy author wrote to a normalised absolute path.
//!
//! The rules, applied in order:
//! 1. `~` and `~/…` are replaced by the invoking user's home directory; `~user` is refused.
//! 2. A relative path is joined to the stated base directory (the workspace of a run, or the
//!    directory `bee validate --base` names, by default the current one).
//! 3. Empty and `.` segments are dropped (so duplicate and trailing slashes vanish); `..`
//!    removes the previous segment. A `..` that would climb above `/`, or that follows a
//!    wildcard, is refused rather than clamped, because it is almost always a mistake.
//! 4. NUL bytes, segments longer than `NAME_MAX` (255 bytes) and paths longer than
//!    `PATH_MAX - 1` (4095 bytes) are refused: the kernel could never see such a path.
//!
//! Symbolic links are *not* resolved (except for pinned executables, see
//! [`crate::compile`]): LSM hooks see the path after resolution, so a rule naming a symlink
//! matches only accesses that name the link's own path, e.g. `unlink`.

use std::path::Path;

/// `PATH_MAX` from `include/uapi/linux/limits.h`, including the terminating NUL.
pub const PATH_MAX: usize = 4096;
/// `NAME_MAX` from `include/uapi/linux/limits.h`: the longest single path segment.
pub const NAME_MAX: usize = 255;

/// Why a path could not be normalised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path is the empty string.
    #[error("the path is empty")]
    Empty,
    /// The path contains a NUL byte, which no Linux path can.
    #[error("the path contains a NUL byte")]
    Nul,
    /// `..` would go above the root directory.
    #[error("`..` climbs above `/`")]
    AboveRoot,
    /// `..` follows a wildcard segment, so its meaning depends on the match.
    #[error("`..` after a wildcard has no fixed meaning")]
    DotDotAfterWildcard,
    /// `~user` forms, which would need a user database lookup of another user.
    #[error("`~{0}` refers to another user's home; only `~` and `~/…` are expanded")]
    OtherUsersHome(String),
    /// `~` was used but no home directory is known for the invoking user.
    #[error("`~` is used but the invoking user's home directory is unknown")]
    NoHome,
    /// The base or home directory is not valid UTF-8.
    #[error("`{0}` is not valid UTF-8; policies can only name UTF-8 paths")]
    NotUtf8(String),
    /// The base or home directory is not absolute.
    #[error("the directory `{0}` that relative paths resolve against is not absolute")]
    RelativeBase(String),
    /// A segment is longer than [`NAME_MAX`].
    #[error("a segment is {0} bytes long; the limit (NAME_MAX) is 255")]
    SegmentTooLong(usize),
    /// The whole path is longer than `PATH_MAX - 1`.
    #[error("the path is {0} bytes long; the limit (PATH_MAX) is 4095")]
    TooLong(usize),
}

/// Where relative paths and `~` point.
#[derive(Debug, Clone, Copy)]
pub struct Anchors<'a> {
    /// Absolute directory relative paths are joined to.
    pub base: &'a Path,
    /// Home directory of the invoking user, if known.
    pub home: Option<&'a Path>,
}

/// Normalises `raw` (see the module docs). Wildcards are kept verbatim as segment text.
///
/// # Errors
/// [`PathError`] naming the first rule the path breaks.
pub fn normalize(raw: &str, anchors: Anchors<'_>) -> Result<String, PathError> {
    if raw.is_empty() {
        return Err(PathError::Empty);
    }
    if raw.contains('\0') {
        return Err(PathError::Nul);
    }
    // Most rules are written normalised already: the loop below would give them back as
    // they are.
    if is_normal_absolute(raw) {
        if raw.len() >= PATH_MAX {
            return Err(PathError::TooLong(raw.len()));
        }
        return Ok(raw.to_owned());
    }
    // The directory the path is relative to, if any, and the part to append to it.
    let (prefix, rest) = if raw == "~" || raw.starts_with("~/") {
        let home = anchors.home.ok_or(PathError::NoHome)?;
        (absolute_utf8(home)?, &raw[1..])
    } else if let Some(rest) = raw.strip_prefix('~') {
        let user = rest.split('/').next().unwrap_or_default();
        return Err(PathError::OtherUsersHome(user.to_owned()));
    } else if raw.starts_with('/') {
        ("", raw)
    } else {
        (absolute_utf8(anchors.base)?, raw)
    };
    // One output buffer; `..` truncates it back to the previous segment's start.
    let mut path = String::with_capacity(prefix.len() + rest.len() + 1);
    for seg in prefix.split('/').chain(rest.split('/')) {
        match seg {
            "" | "." => {}
            ".." => {
                let start = path.rfind('/').ok_or(PathError::AboveRoot)?;
                if path[start..].contains('*') {
                    return Err(PathError::DotDotAfterWildcard);
                }
                path.truncate(start);
            }
            s if s.len() > NAME_MAX => return Err(PathError::SegmentTooLong(s.len())),
            s => {
                path.push('/');
                path.push_str(s);
            }
        }
    }
    if path.is_empty() {
        path.push('/');
    }
    if path.len() >= PATH_MAX {
        return Err(PathError::TooLong(path.len()));
    }
    Ok(path)
}

/// Whether `raw` is `/` or `/` followed by segments none of which is empty, `.`, `..` or
/// longer than [`NAME_MAX`].
fn is_normal_absolute(raw: &str) -> bool {
    match raw.as_bytes() {
        [b'/'] => true,
        [b'/', rest @ ..] => rest
            .split(|&b| b == b'/')
            .all(|s| !s.is_empty() && s != b"." && s != b".." && s.len() <= NAME_MAX),
        _ => false,
    }
}

fn absolute_utf8(dir: &Path) -> Result<&str, PathError> {
    let s = dir
        .to_str()
        .ok_or_else(|| PathError::NotUtf8(dir.to_string_lossy().into_owned()))?;
    if !s.starts_with('/') {
        return Err(PathError::RelativeBase(s.to_owned()));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(raw: &str) -> Result<String, PathError> {
        normalize(
            raw,
            Anchors {
                base: Path::new("/work/repo"),
                home: Some(Path::new("/home/u")),
            },
        )
    }

    #[test]
    fn normalises() {
        assert_eq!(norm("/a//b/./c/"), Ok("/a/b/c".to_owned()));
        assert_eq!(norm("/a/b/../c"), Ok("/a/c".to_owned()));
        assert_eq!(norm("/"), Ok("/".to_owned()));
        assert_eq!(norm("//"), Ok("/".to_owned()));
        assert_eq!(norm("/a/.."), Ok("/".to_owned()));
        assert_eq!(norm("."), Ok("/work/repo".to_owned()));
        assert_eq!(norm("target/**"), Ok("/work/repo/target/**".to_owned()));
        assert_eq!(norm("../x"), Ok("/work/x".to_owned()));
        assert_eq!(norm("~"), Ok("/home/u".to_owned()));
        assert_eq!(norm("~/.cargo/**"), Ok("/home/u/.cargo/**".to_owned()));
    }

    #[test]
    fn refuses() {
        assert_eq!(norm(""), Err(PathError::Empty));
        assert_eq!(norm("/a/\0"), Err(PathError::Nul));
        assert_eq!(norm("/.."), Err(PathError::AboveRoot));
        assert_eq!(norm("../../../.."), Err(PathError::AboveRoot));
        assert_eq!(norm("/a/*/../b"), Err(PathError::DotDotAfterWildcard));
        assert_eq!(
            norm("~root/x"),
            Err(PathError::OtherUsersHome("root".to_owned()))
        );
        let long_seg = format!("/{}", "x".repeat(256));
        assert_eq!(norm(&long_seg), Err(PathError::SegmentTooLong(256)));
        let long = "/abcd".repeat(1000);
        assert_eq!(norm(&long), Err(PathError::TooLong(5000)));
        let no_home = normalize(
            "~/x",
            Anchors {
                base: Path::new("/"),
                home: None,
            },
        );
        assert_eq!(no_home, Err(PathError::NoHome));
        let rel_base = normalize(
            "x",
            Anchors {
                base: Path::new("rel"),
                home: None,
            },
        );
        assert_eq!(rel_base, Err(PathError::RelativeBase("rel".to_owned())));
        use std::os::unix::ffi::OsStrExt;
        let bad = std::ffi::OsStr::from_bytes(b"/work/\xff");
        let not_utf8 = normalize(
            "x",
            Anchors {
                base: Path::new(bad),
                home: None,
            },
        );
        assert!(matches!(not_utf8, Err(PathError::NotUtf8(_))));
    }
}
