//! The reference walk of the path automaton, which the kernel programs mirror in C.

use crate::access::{DEAD_STATE, GLOBS_PER_STATE_MAX, NAME_MAX, PATH_MAX};
use crate::paths::{GlobValue, StateValue};

/// Read access to a path automaton: the four maps the walk consults. Ids are global (as the
/// kernel sees them); [`DEAD_STATE`] is never looked up.
pub trait SegmentAutomaton {
    /// The state array entry for `id`.
    fn state(&self, id: u32) -> Option<StateValue>;
    /// The literal edge leaving `state` on `segment` (short or long edge map by length).
    fn edge(&self, state: u32, segment: &[u8]) -> Option<u32>;
    /// The glob array entry at `index`.
    fn glob(&self, index: u32) -> Option<&GlobValue>;
    /// The combo map entry for `(group, mask)`, `group` being the state's `glob_first`;
    /// absent means the state's `default_next`.
    fn combo(&self, group: u32, mask: u32) -> Option<u32>;
}

/// Why a path could not be walked. The kernel denies the access in each case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkError {
    /// The path does not start with `/`.
    NotAbsolute,
    /// The path is [`PATH_MAX`] bytes or longer.
    PathTooLong,
    /// A segment is longer than [`NAME_MAX`] bytes.
    SegmentTooLong,
    /// A state id has no state array entry (a corrupt or partly loaded automaton).
    MissingState(u32),
    /// A glob index has no glob array entry, or a state has more than 8 globs.
    BadGlob(u32),
}

impl core::fmt::Display for WalkError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NotAbsolute => f.write_str("path is not absolute"),
            Self::PathTooLong => write!(f, "path is {PATH_MAX} bytes or longer"),
            Self::SegmentTooLong => write!(f, "a path segment is longer than {NAME_MAX} bytes"),
            Self::MissingState(s) => write!(f, "automaton state {s} is missing"),
            Self::BadGlob(s) => write!(f, "the globs of automaton state {s} are malformed"),
        }
    }
}

/// Walks `path` (a normalised absolute path: `/`-separated, no `.`/`..` segments) from
/// `start` and returns the `ACCESS_*` bits of the state it ends in; see [`walk_state`].
///
/// # Errors
/// [`WalkError`] when the path is malformed or too long, or the automaton is inconsistent; the
/// caller must deny.
pub fn walk<M: SegmentAutomaton + ?Sized>(
    m: &M,
    start: u32,
    path: &[u8],
) -> Result<u32, WalkError> {
    let state = walk_state(m, start, path)?;
    if state == DEAD_STATE {
        return Ok(0);
    }
    m.state(state)
        .map(|s| s.accept)
        .ok_or(WalkError::MissingState(state))
}

/// Walks `path` from `start` and returns the state it ends in ([`DEAD_STATE`] as soon as the
/// walk dies). The exec-pin check needs the state itself, not only its accept bits.
///
/// For each segment: the literal edge if there is one; otherwise, if the state has globs, the
/// combo entry for its glob group and the mask of globs matching the segment (the default if
/// the mask is 0 or the entry is absent); otherwise the default. Empty segments (`//`) are skipped.
///
/// # Errors
/// As [`walk`].
pub fn walk_state<M: SegmentAutomaton + ?Sized>(
    m: &M,
    start: u32,
    path: &[u8],
) -> Result<u32, WalkError> {
    if path.len() >= PATH_MAX {
        return Err(WalkError::PathTooLong);
    }
    let Some(rest) = path.strip_prefix(b"/") else {
        return Err(WalkError::NotAbsolute);
    };
    let mut state = start;
    for segment in rest.split(|&b| b == b'/') {
        if state == DEAD_STATE {
            return Ok(DEAD_STATE);
        }
        if segment.is_empty() {
            continue;
        }
        if segment.len() > NAME_MAX {
            return Err(WalkError::SegmentTooLong);
        }
        state = step(m, state, segment)?;
    }
    Ok(state)
}

/// One transition of [`walk`] from a live `state` on a non-empty `segment`.
fn step<M: SegmentAutomaton + ?Sized>(m: &M, state: u32, segment: &[u8]) -> Result<u32, WalkError> {
    let value = m.state(state).ok_or(WalkError::MissingState(state))?;
    if let Some(next) = m.edge(state, segment) {
        return Ok(next);
    }
    if value.glob_count == 0 {
        return Ok(value.default_next);
    }
    if value.glob_count as usize > GLOBS_PER_STATE_MAX {
        return Err(WalkError::BadGlob(state));
    }
    let mut mask = 0u32;
    for i in 0..value.glob_count {
        let glob = value
            .glob_first
            .checked_add(i)
            .and_then(|g| m.glob(g))
            .ok_or(WalkError::BadGlob(state))?;
        if glob_segment_matches(glob.pattern(), segment) {
            mask |= 1 << i;
        }
    }
    if mask == 0 {
        return Ok(value.default_next);
    }
    Ok(m.combo(value.glob_first, mask)
        .unwrap_or(value.default_next))
}

/// Whether the non-empty segment `name` matches the star segment `pattern`, where each `*`
/// matches any (possibly empty) run of bytes and every other byte matches itself.
///
/// Greedy matching with one backtrack point (the last `*` seen): on a mismatch, the last `*`
/// absorbs one more byte and matching resumes after it. This is exact for `*`-only patterns and
/// takes at most `pattern.len() * name.len()` steps. The policy compiler and the attenuation
/// prover use this function too (`bee_core::glob::segment_matches`); an empty `name` never
/// matches.
pub fn glob_segment_matches(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0usize, 0usize);
    let mut resume: Option<(usize, usize)> = None;
    while let Some(&c) = name.get(n) {
        match pattern.get(p) {
            Some(b'*') => {
                resume = Some((p, n));
                p += 1;
            }
            Some(&pc) if pc == c => {
                p += 1;
                n += 1;
            }
            _ => match resume {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    resume = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    !name.is_empty()
        && pattern
            .get(p..)
            .is_some_and(|t| t.iter().all(|&c| c == b'*'))
}

#[cfg(test)]
mod tests;
