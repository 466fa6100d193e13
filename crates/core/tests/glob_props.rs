//! Property: a lowered pattern matches exactly the paths a plain reading of its text matches
//! (`*` any run of bytes inside one segment, `**` any number of whole segments, a segment never
//! empty); the star-segment matcher that the prover shares with the kernel side agrees with a
//! naive backtracking one; and the wildcards the language lacks are refused, never read as
//! literals.

use bee_core::glob::{GlobError, PathPattern, segment_matches, split_segments};
use proptest::prelude::*;

/// Literal segments, star segments and `**`, over a small alphabet so that matches are common.
const PATTERN_SEGMENTS: &[&str] = &[
    "a", "b", "ab", "c.rs", "*", "a*", "*b", "*.rs", "a*b", "*a*", "**",
];
const PATH_SEGMENTS: &[&str] = &["a", "b", "ab", "ba", "c.rs", "x", "aab", "b.rs"];

/// Whether `name` matches `pattern`, `*` matching any run of bytes: plain backtracking.
fn naive_segment(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| naive_segment(rest, &name[i..])),
        Some((c, rest)) => name.first() == Some(c) && naive_segment(rest, &name[1..]),
    }
}

/// Whether the path segments `path` match the pattern segments `pattern`: `**` takes any number
/// of whole segments, every other pattern segment one non-empty segment.
fn naive_path(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|i| naive_path(rest, &path[i..])),
        Some((seg, rest)) => path.split_first().is_some_and(|(name, below)| {
            !name.is_empty()
                && naive_segment(seg.as_bytes(), name.as_bytes())
                && naive_path(rest, below)
        }),
    }
}

fn absolute(segments: &[&str]) -> String {
    format!("/{}", segments.join("/"))
}

fn pattern_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PATTERN_SEGMENTS), 1..6)
        .prop_map(|segs| absolute(&segs))
}

fn path_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PATH_SEGMENTS), 0..6)
        .prop_map(|segs| absolute(&segs))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every pattern the language accepts matches what its text says, on every path.
    #[test]
    fn lowered_patterns_match_what_their_text_says(
        text in pattern_text(),
        paths in prop::collection::vec(path_text(), 1..16),
    ) {
        // Shapes outside the six are refused; the refusal is tested in `glob.rs`.
        let Ok(pattern) = PathPattern::parse(&text) else {
            return Ok(());
        };
        let pattern_segments = split_segments(&text);
        for path in &paths {
            prop_assert_eq!(
                pattern.matches(path),
                naive_path(&pattern_segments, &split_segments(path)),
                "{} ({}) on {}",
                &text,
                pattern.kind(),
                path
            );
        }
    }

    /// The shared star-segment matcher is exact for `*`-only patterns.
    #[test]
    fn segment_matcher_is_exact(
        pattern in "[ab*.]{0,7}",
        name in "[ab.]{0,9}",
    ) {
        prop_assert_eq!(
            segment_matches(pattern.as_bytes(), name.as_bytes()),
            !name.is_empty() && naive_segment(pattern.as_bytes(), name.as_bytes())
        );
    }

    /// `?`, `[…]` and `{…}` are refused wherever they stand, so no pattern means something else
    /// to the prover than to the kernel.
    #[test]
    fn other_wildcards_are_refused(
        text in pattern_text(),
        at in any::<prop::sample::Index>(),
        wildcard in prop::sample::select(&['?', '[', ']', '{', '}'][..]),
    ) {
        let mut text = text;
        let i = 1 + at.index(text.len() - 1);
        text.insert(i, wildcard);
        prop_assert_eq!(
            PathPattern::parse(&text),
            Err(GlobError::UnsupportedWildcard(wildcard))
        );
    }
}
