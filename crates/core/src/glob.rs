//! Path patterns: the six glob shapes a policy may use, lowered from text.
//!
//! Every pattern is matched against a *normalised absolute path* (see [`crate::path`]):
//! it starts with `/`, has no empty, `.` or `..` segments and no trailing `/` (the root is
//! `/`). A pattern is a sequence of `/`-separated segments, each one of
//!
//! * a literal segment (`usr`),
//! * a star segment (`*.rs`, `lib*`, `*`): `*` matches any run of bytes other than `/`, and a
//!   segment always matches at least one byte,
//! * `**`: zero or more whole segments.
//!
//! Only these shapes are accepted, because each has an exact kernel matcher:
//!
//! | kind | shape | example | matches |
//! |---|---|---|---|
//! | exact | literals only | `/etc/hosts` | that path |
//! | subtree | literals, then `**` | `/usr/**` | `/usr` and everything below it |
//! | postfix | literals, `**`, `*SUFFIX` | `/src/**/*.rs` | files below `/src` (at any depth) whose name ends in `.rs` |
//! | segment | literals, `**`, `NAME` | `/work/**/.git` | entries named `.git` at any depth below `/work` |
//! | bounded star | at least one star segment, no `**` except a final one | `/usr/lib/python3.*/**` | `*` stays inside one segment |
//! | nested | literals, `**`, two or more literals, or literals then a final `**` | `/work/**/.git/hooks/**` | the relative path `.git/hooks` at any depth below `/work` (and, with the final `**`, everything below it) |
//!
//! Anything else (`**` in the middle of a pattern twice, `**` inside a segment, `?`, `[…]`,
//! `{…}`) is refused with [`GlobError`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// A lowered path pattern. Roots and literal segments are stored normalised, so two patterns
/// that print alike are equal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PathPattern {
    /// Exactly one path, e.g. `/etc/hosts`.
    Exact {
        /// The normalised path.
        path: String,
    },
    /// `ROOT/**`: `ROOT` itself and every path below it.
    Subtree {
        /// The normalised root directory.
        root: String,
    },
    /// `ROOT/**/*SUFFIX`: any path strictly below `ROOT` whose last segment ends with `SUFFIX`.
    Postfix {
        /// The normalised root directory.
        root: String,
        /// The literal suffix of the last segment; never empty, never contains `/` or `*`.
        suffix: String,
    },
    /// `ROOT/**/NAME`: any path strictly below `ROOT` whose last segment is exactly `NAME`.
    Segment {
        /// The normalised root directory.
        root: String,
        /// The literal last segment; never empty, never contains `/` or `*`.
        name: String,
    },
    /// `ROOT/**/A/B…` (with `subtree`, followed by `/**`): any path strictly below `ROOT` whose
    /// last segments are the literal `tail` (with `subtree`, that path and everything below
    /// it). A one-segment tail without `subtree` is a [`PathPattern::Segment`] instead.
    Nested {
        /// The normalised root directory.
        root: String,
        /// The literal segments that must follow some (possibly empty) run of segments below
        /// `root`; never empty, none empty or containing `/` or `*`.
        tail: Vec<String>,
        /// Whether the pattern ends in `/**`.
        subtree: bool,
    },
    /// Segments where at least one contains `*`; with `subtree`, a final `/**` follows.
    BoundedStar {
        /// Segments below `/`, each literal or containing `*` (which never crosses `/`).
        segments: Vec<String>,
        /// Whether the pattern ends in `/**` (the matched path and everything below it).
        subtree: bool,
    },
}

/// Why a pattern string is not one of the supported shapes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    /// `**` appears more than once or somewhere other than the supported positions.
    #[error(
        "`**` may appear once as a whole segment, followed by nothing, `*SUFFIX`, or literal segments (then optionally a final `/**`)"
    )]
    MisplacedDoubleStar,
    /// `**` is mixed with other text inside one segment, e.g. `a**`.
    #[error("`**` must be a whole segment (`a/**`, not `a**`)")]
    DoubleStarInSegment,
    /// A `?`, `[`, `]`, `{` or `}` wildcard, which the policy language does not have.
    #[error("`{0}` is not a wildcard in bee policies (only `*` and `**` are)")]
    UnsupportedWildcard(char),
    /// A star segment after `**`, other than the single `*SUFFIX` form.
    #[error("after `**` only a literal name or `*SUFFIX` may follow")]
    StarAfterDoubleStar,
    /// Something other than the end of the pattern follows `**` in a pattern that already
    /// has a star segment.
    #[error("a pattern with a `*` segment may end in `/**` but nothing may follow that `**`")]
    AfterStarSubtree,
}

impl PathPattern {
    /// Lowers a normalised absolute pattern (as produced by [`crate::path::normalize`]).
    ///
    /// # Errors
    /// [`GlobError`] when the text is not one of the six supported shapes.
    pub fn parse(normalised: &str) -> Result<Self, GlobError> {
        Self::parse_owned(normalised.to_owned())
    }

    /// As [`PathPattern::parse`], taking the text by value so that exact paths (most rules)
    /// keep its allocation.
    ///
    /// # Errors
    /// [`GlobError`] when the text is not one of the six supported shapes.
    pub fn parse_owned(normalised: String) -> Result<Self, GlobError> {
        if let Some(&b) = normalised
            .as_bytes()
            .iter()
            .find(|b| matches!(b, b'?' | b'[' | b']' | b'{' | b'}'))
        {
            return Err(GlobError::UnsupportedWildcard(char::from(b)));
        }
        // Fast paths for the two shapes most rules have.
        match normalised.find('*') {
            None => return Ok(Self::Exact { path: normalised }),
            Some(i) if i + 2 == normalised.len() && normalised.ends_with("/**") => {
                let mut root = normalised;
                root.truncate(root.len() - 3);
                if root.is_empty() {
                    root.push('/');
                }
                return Ok(Self::Subtree { root });
            }
            Some(_) => {}
        }
        let normalised = normalised.as_str();
        let segments = split_segments(normalised);
        let mut double = None;
        // A second `**` is accepted as the very last segment of a nested pattern only.
        let mut final_double = false;
        for (i, seg) in segments.iter().enumerate() {
            if *seg == "**" {
                if double.is_some() {
                    if i + 1 != segments.len() || final_double {
                        return Err(GlobError::MisplacedDoubleStar);
                    }
                    final_double = true;
                } else {
                    double = Some(i);
                }
            } else if seg.contains("**") {
                return Err(GlobError::DoubleStarInSegment);
            }
        }
        let segments = if final_double {
            &segments[..segments.len() - 1]
        } else {
            &segments[..]
        };
        let has_star = |segs: &[&str]| segs.iter().any(|s| s.contains('*'));
        match double {
            None if !has_star(segments) => Ok(Self::Exact {
                path: normalised.to_owned(),
            }),
            None => Ok(Self::BoundedStar {
                segments: segments.iter().map(|s| (*s).to_owned()).collect(),
                subtree: false,
            }),
            Some(i) => {
                let (before, after) = (&segments[..i], &segments[i + 1..]);
                if has_star(before) {
                    if !after.is_empty() {
                        return Err(GlobError::AfterStarSubtree);
                    }
                    return Ok(Self::BoundedStar {
                        segments: before.iter().map(|s| (*s).to_owned()).collect(),
                        subtree: true,
                    });
                }
                let root = join_segments(before);
                if final_double || after.len() > 1 {
                    if after.is_empty() {
                        return Err(GlobError::MisplacedDoubleStar);
                    }
                    if has_star(after) {
                        return Err(GlobError::StarAfterDoubleStar);
                    }
                    let tail: Vec<String> = after.iter().map(|s| (*s).to_owned()).collect();
                    return Ok(Self::Nested {
                        root,
                        tail,
                        subtree: final_double,
                    });
                }
                match after {
                    [] => Ok(Self::Subtree { root }),
                    [last] => match last.strip_prefix('*') {
                        Some(suffix) if !suffix.is_empty() && !suffix.contains('*') => {
                            Ok(Self::Postfix {
                                root,
                                suffix: suffix.to_owned(),
                            })
                        }
                        Some(_) => Err(GlobError::StarAfterDoubleStar),
                        None if last.contains('*') => Err(GlobError::StarAfterDoubleStar),
                        None => Ok(Self::Segment {
                            root,
                            name: (*last).to_owned(),
                        }),
                    },
                    _ => Err(GlobError::MisplacedDoubleStar),
                }
            }
        }
    }

    /// The kind's name as used in diagnostics and the compiled form (`exact`, `subtree`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Exact { .. } => "exact",
            Self::Subtree { .. } => "subtree",
            Self::Postfix { .. } => "postfix",
            Self::Segment { .. } => "segment",
            Self::Nested { .. } => "nested",
            Self::BoundedStar { .. } => "bounded_star",
        }
    }

    /// The segments of the pattern that are literal and precede any wildcard: the deepest
    /// directory every matched path lies in (or is). For `/a/b/**/*.rs` that is `[a, b]`.
    pub fn literal_prefix(&self) -> Vec<&str> {
        match self {
            Self::Exact { path } => split_segments(path),
            Self::Subtree { root }
            | Self::Postfix { root, .. }
            | Self::Segment { root, .. }
            | Self::Nested { root, .. } => split_segments(root),
            Self::BoundedStar { segments, .. } => segments
                .iter()
                .take_while(|s| !s.contains('*'))
                .map(String::as_str)
                .collect(),
        }
    }

    /// Whether the normalised absolute `path` is matched. This is the reference semantics that
    /// the attenuation automata and the kernel matcher are tested against.
    pub fn matches(&self, path: &str) -> bool {
        // Every shape walks the segments without collecting them: `below` is what is left
        // of the path after `root`'s segments, `None` if they do not lead it.
        let segments = || path.split('/').filter(|s| !s.is_empty());
        let below = |root: &str| {
            let mut segs = segments();
            root.split('/')
                .filter(|s| !s.is_empty())
                .all(|r| segs.next() == Some(r))
                .then_some(segs)
        };
        // A name, suffix or tail segment is text of the path: most paths are told apart by
        // one substring search, before their segments are walked.
        let absent = |text: &str| !path.contains(text);
        match self {
            Self::Exact { path: p } => p == path,
            Self::Subtree { root } => below(root).is_some(),
            Self::Postfix { suffix, .. } | Self::Segment { name: suffix, .. } if absent(suffix) => {
                false
            }
            Self::Nested { tail, .. } if tail.first().is_some_and(|t| absent(t)) => false,
            Self::Postfix { root, suffix } => below(root)
                .and_then(Iterator::last)
                .is_some_and(|l| l.ends_with(suffix.as_str())),
            Self::Segment { root, name } => below(root)
                .and_then(Iterator::last)
                .is_some_and(|l| l == name.as_str()),
            Self::Nested {
                root,
                tail,
                subtree,
            } => {
                let Some(rest) = below(root) else {
                    return false;
                };
                // Whether `tail` is the run of segments `from` starts with.
                let leads = |mut from: std::iter::Filter<_, _>| {
                    tail.iter().all(|t| from.next() == Some(t.as_str()))
                };
                if *subtree {
                    // The tail anywhere below the root (and the path at or below its end).
                    let mut from = rest;
                    loop {
                        if leads(from.clone()) {
                            return true;
                        }
                        if from.next().is_none() {
                            return false;
                        }
                    }
                }
                // The tail as the path's last segments.
                let Some(skip) = rest.clone().count().checked_sub(tail.len()) else {
                    return false;
                };
                let mut from = rest;
                from.by_ref().take(skip).for_each(drop);
                leads(from)
            }
            Self::BoundedStar {
                segments: pattern,
                subtree,
            } => {
                let mut segs = segments();
                pattern.iter().all(|p| {
                    segs.next()
                        .is_some_and(|s| segment_matches(p.as_bytes(), s.as_bytes()))
                }) && (*subtree || segs.next().is_none())
            }
        }
    }
}

impl fmt::Display for PathPattern {
    /// Prints the canonical glob text, which [`PathPattern::parse`] maps back to `self`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = |root: &str| {
            if root == "/" {
                String::new()
            } else {
                root.to_owned()
            }
        };
        match self {
            Self::Exact { path } => f.write_str(path),
            Self::Subtree { root } => write!(f, "{}/**", dir(root)),
            Self::Postfix { root, suffix } => write!(f, "{}/**/*{suffix}", dir(root)),
            Self::Segment { root, name } => write!(f, "{}/**/{name}", dir(root)),
            Self::Nested {
                root,
                tail,
                subtree,
            } => {
                write!(f, "{}/**", dir(root))?;
                for t in tail {
                    write!(f, "/{t}")?;
                }
                if *subtree {
                    f.write_str("/**")?;
                }
                Ok(())
            }
            Self::BoundedStar { segments, subtree } => {
                for s in segments {
                    write!(f, "/{s}")?;
                }
                if *subtree {
                    f.write_str("/**")?;
                }
                Ok(())
            }
        }
    }
}

/// Splits a normalised absolute path into its segments; the root `/` has none.
pub fn split_segments(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// Joins segments into a normalised absolute path (`[]` is `/`).
pub fn join_segments(segments: &[&str]) -> String {
    if segments.is_empty() {
        return "/".to_owned();
    }
    segments.iter().fold(String::new(), |mut acc, s| {
        acc.push('/');
        acc.push_str(s);
        acc
    })
}

/// Whether one segment `name` matches a star segment `pattern`, where each `*` matches any
/// (possibly empty) run of bytes and an empty `name` never matches. This is the kernel side's
/// matcher itself (`bee_common::glob_segment_matches`, which the programs mirror in C), so the
/// prover and the kernel read a star segment through one function.
pub use bee_common::glob_segment_matches as segment_matches;

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathPattern {
        match PathPattern::parse(s) {
            Ok(p) => p,
            Err(e) => unreachable!("{s}: {e}"),
        }
    }

    #[test]
    fn lowers_each_kind() {
        assert_eq!(p("/etc/hosts").kind(), "exact");
        assert_eq!(p("/usr/**").kind(), "subtree");
        assert_eq!(p("/**").kind(), "subtree");
        assert_eq!(p("/src/**/*.rs").kind(), "postfix");
        assert_eq!(p("/w/**/.git").kind(), "segment");
        assert_eq!(p("/a/*/b").kind(), "bounded_star");
        assert_eq!(p("/usr/lib/python3.*/**").kind(), "bounded_star");
        assert_eq!(p("/w/**/.git/hooks/**").kind(), "nested");
        assert_eq!(p("/**/.git/config").kind(), "nested");
        assert_eq!(p("/**/.bee/**").kind(), "nested");
    }

    #[test]
    fn nested_matches_a_relative_path_at_any_depth() {
        let hooks = p("/w/**/.git/hooks/**");
        assert!(hooks.matches("/w/.git/hooks"));
        assert!(hooks.matches("/w/.git/hooks/pre-commit"));
        assert!(hooks.matches("/w/a/b/.git/hooks/x/y"));
        assert!(!hooks.matches("/w/.git"));
        assert!(!hooks.matches("/w/.git/config"));
        assert!(!hooks.matches("/.git/hooks/x"));
        let config = p("/**/.git/config");
        assert!(config.matches("/.git/config"));
        assert!(config.matches("/a/.git/config"));
        assert!(!config.matches("/a/.git/config/x"));
        assert!(!config.matches("/a/git/config"));
        let bee = p("/**/.bee/**");
        assert!(bee.matches("/.bee"));
        assert!(bee.matches("/x/.bee/records/a.json"));
        assert!(!bee.matches("/x/.beex/a"));
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "/",
            "/etc/hosts",
            "/usr/**",
            "/**",
            "/**/*.rs",
            "/src/**/*.rs",
            "/w/**/.git",
            "/a/*/b",
            "/usr/lib/python3.*/**",
            "/w/**/.git/hooks/**",
            "/**/.git/config",
            "/**/.bee/**",
        ] {
            assert_eq!(p(s).to_string(), s);
            assert_eq!(p(&p(s).to_string()), p(s));
        }
    }

    #[test]
    fn refuses_unsupported_shapes() {
        assert_eq!(
            PathPattern::parse("/a/**/b/**/c"),
            Err(GlobError::MisplacedDoubleStar)
        );
        assert_eq!(
            PathPattern::parse("/a/**/**"),
            Err(GlobError::MisplacedDoubleStar)
        );
        assert_eq!(
            PathPattern::parse("/a/**/b*/**"),
            Err(GlobError::StarAfterDoubleStar)
        );
        assert_eq!(
            PathPattern::parse("/a/**/b/*.rs"),
            Err(GlobError::StarAfterDoubleStar)
        );
        assert_eq!(
            PathPattern::parse("/a**"),
            Err(GlobError::DoubleStarInSegment)
        );
        assert_eq!(
            PathPattern::parse("/a/**/x*y"),
            Err(GlobError::StarAfterDoubleStar)
        );
        assert_eq!(
            PathPattern::parse("/a/**/*"),
            Err(GlobError::StarAfterDoubleStar)
        );
        assert_eq!(
            PathPattern::parse("/a/*/**/*.rs"),
            Err(GlobError::AfterStarSubtree)
        );
        assert_eq!(
            PathPattern::parse("/a/?"),
            Err(GlobError::UnsupportedWildcard('?'))
        );
    }

    #[test]
    fn subtree_includes_its_root() {
        let t = p("/usr/**");
        assert!(t.matches("/usr"));
        assert!(t.matches("/usr/bin/env"));
        assert!(!t.matches("/usrx"));
        assert!(!t.matches("/"));
        assert!(p("/**").matches("/"));
    }

    #[test]
    fn postfix_and_segment_need_a_segment_below_root() {
        let pf = p("/src/**/*.rs");
        assert!(pf.matches("/src/main.rs"));
        assert!(pf.matches("/src/a/b/.rs"));
        assert!(!pf.matches("/src"));
        assert!(!pf.matches("/src.rs"));
        assert!(!pf.matches("/src/main.rsx"));
        let sg = p("/w/**/.git");
        assert!(sg.matches("/w/.git"));
        assert!(sg.matches("/w/a/b/.git"));
        assert!(!sg.matches("/w/.git/config"));
        assert!(!sg.matches("/w/x.git"));
    }

    #[test]
    fn star_never_crosses_a_slash() {
        let b = p("/a/*/b");
        assert!(b.matches("/a/x/b"));
        assert!(!b.matches("/a/x/y/b"));
        assert!(!b.matches("/a/b"));
        let py = p("/usr/lib/python3.*/**");
        assert!(py.matches("/usr/lib/python3.11"));
        assert!(py.matches("/usr/lib/python3.11/os.py"));
        assert!(!py.matches("/usr/lib/python2.7/os.py"));
    }

    #[test]
    fn segment_matching() {
        assert!(segment_matches(b"*", b"x"));
        assert!(!segment_matches(b"*", b""));
        assert!(segment_matches(b"lib*.so", b"libc.so"));
        assert!(segment_matches(b"lib*.so", b"lib.so"));
        assert!(!segment_matches(b"lib*.so", b"libc.so.6"));
        assert!(segment_matches(b"*a*b*", b"xaybz"));
        assert!(segment_matches(b"*ab", b"aab"));
        assert!(!segment_matches(b"*a*b", b"ba"));
        assert!(segment_matches(b"a", b"a"));
        assert!(!segment_matches(b"a", b"ab"));
    }
}
