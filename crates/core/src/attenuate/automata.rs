//! Path patterns as regular languages over bytes, and language inclusion decided on DFAs.
//!
//! Each [`PathPattern`] is translated to a regex over the path as bytes (every literal byte
//! escaped) and compiled with `regex-automata` into an anchored lazy DFA (states are
//! determinised only when the search reaches them, so a union of many parent rules costs
//! only what the search visits); it is intersected with the language of valid normalised
//! paths (a dense DFA built once). Inclusion `child ∩ valid ⊆ ∪ parents` is decided
//! by a breadth-first search of the product automaton for a state where the child and the
//! validity automaton accept and the parent union does not; the search path is the shortest
//! counterexample.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::OnceLock;

use regex_automata::dfa::{Automaton, StartKind, dense};
use regex_automata::hybrid::{self, LazyStateID};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::primitives::StateID;
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};

use crate::glob::PathPattern;

/// The dense DFA type (validity language).
pub(crate) type Dfa = dense::DFA<Vec<u32>>;

/// Upper bound on the memory one automaton may take; a larger one is refused (and the
/// inclusion is then reported as unproven, never as proven).
const SIZE_LIMIT: usize = 64 << 20;

/// One path segment that is not empty, `.` or `..`, and has no `/` or NUL byte.
const VALID_SEGMENT: &str = r"(?:[^/\x00.][^/\x00]*|\.[^/\x00.][^/\x00]*|\.\.[^/\x00]+)";

/// Why an automaton could not be built.
pub(crate) type BuildError = String;

fn syntax_config() -> syntax::Config {
    syntax::Config::new()
        .unicode(false)
        .utf8(false)
        .dot_matches_new_line(true)
}

fn thompson_config() -> thompson::Config {
    thompson::Config::new()
        .utf8(false)
        .shrink(false)
        .which_captures(WhichCaptures::None)
        .nfa_size_limit(Some(SIZE_LIMIT))
}

/// A lazy DFA with its state cache. The cache is never cleared (a full cache is an error),
/// so state ids stay valid for the whole search.
#[derive(Debug)]
pub(crate) struct Lazy {
    dfa: hybrid::dfa::DFA,
    cache: hybrid::dfa::Cache,
}

impl Lazy {
    /// Compiles `regexes` (full-string, byte-oriented) into one anchored lazy DFA accepting
    /// their union.
    pub(crate) fn new(regexes: &[String]) -> Result<Self, BuildError> {
        let dfa = hybrid::dfa::Builder::new()
            .configure(
                hybrid::dfa::Config::new()
                    .match_kind(MatchKind::All)
                    .cache_capacity(SIZE_LIMIT)
                    .minimum_cache_clear_count(Some(0))
                    .minimum_bytes_per_state(None),
            )
            .syntax(syntax_config())
            .thompson(thompson_config())
            .build_many(regexes)
            .map_err(|e| e.to_string())?;
        let cache = dfa.create_cache();
        Ok(Self { dfa, cache })
    }

    fn start(&mut self) -> Result<LazyStateID, BuildError> {
        self.dfa
            .start_state(
                &mut self.cache,
                &start::Config::new().anchored(Anchored::Yes),
            )
            .map_err(|e| e.to_string())
    }

    fn next(&mut self, s: LazyStateID, b: u8) -> Result<LazyStateID, BuildError> {
        self.dfa
            .next_state(&mut self.cache, s, b)
            .map_err(|e| e.to_string())
    }

    fn accepts(&mut self, s: LazyStateID) -> Result<bool, BuildError> {
        self.dfa
            .next_eoi_state(&mut self.cache, s)
            .map(|e| e.is_match())
            .map_err(|e| e.to_string())
    }
}

/// Compiles `regexes` (full-string, byte-oriented) into one anchored dense DFA accepting
/// their union.
pub(crate) fn build(regexes: &[String]) -> Result<Dfa, BuildError> {
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .start_kind(StartKind::Anchored)
                .match_kind(MatchKind::All)
                .minimize(false)
                .accelerate(false)
                .dfa_size_limit(Some(SIZE_LIMIT))
                .determinize_size_limit(Some(SIZE_LIMIT)),
        )
        .syntax(syntax_config())
        .thompson(thompson_config())
        .build_many(regexes)
        .map_err(|e| e.to_string())
}

/// The DFA of all valid normalised absolute paths, built once per process.
pub(crate) fn validity() -> Result<&'static Dfa, BuildError> {
    static VALID: OnceLock<Result<Dfa, BuildError>> = OnceLock::new();
    VALID
        .get_or_init(|| build(&[format!(r"(?:/|(?:/{VALID_SEGMENT})+)\z")]))
        .as_ref()
        .map_err(Clone::clone)
}

/// Appends `s` to `out` with every byte that is not an ASCII letter or digit escaped.
fn push_literal(out: &mut String, s: &str) {
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(char::from(b));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, r"\x{b:02X}");
        }
    }
}

/// Appends one star segment: literal bytes, with each `*` as any run of non-`/` bytes (a
/// segment of stars only still needs one byte).
fn push_star_segment(out: &mut String, seg: &str) {
    if seg.bytes().all(|b| b == b'*') {
        out.push_str("[^/]+");
        return;
    }
    for (i, part) in seg.split('*').enumerate() {
        if i > 0 {
            out.push_str("[^/]*");
        }
        push_literal(out, part);
    }
}

/// Appends a root directory so that `/` + more can follow (the root `/` adds nothing).
fn push_dir(out: &mut String, root: &str) {
    if root != "/" {
        push_literal(out, root);
    }
}

/// The full-string regex of a pattern's language over bytes. On valid normalised paths it
/// accepts exactly what [`PathPattern::matches`] accepts.
pub(crate) fn regex(p: &PathPattern) -> String {
    let mut r = String::new();
    match p {
        PathPattern::Exact { path } => push_literal(&mut r, path),
        PathPattern::Subtree { root } => {
            push_dir(&mut r, root);
            r.push_str("(?:/.*)?");
        }
        PathPattern::Postfix { root, suffix } => {
            push_dir(&mut r, root);
            r.push_str("/(?:.*/)?[^/]*");
            push_literal(&mut r, suffix);
        }
        PathPattern::Segment { root, name } => {
            push_dir(&mut r, root);
            r.push_str("/(?:.*/)?");
            push_literal(&mut r, name);
        }
        PathPattern::Nested {
            root,
            tail,
            subtree,
        } => {
            push_dir(&mut r, root);
            r.push_str("/(?:.*/)?");
            for (i, t) in tail.iter().enumerate() {
                if i > 0 {
                    r.push('/');
                }
                push_literal(&mut r, t);
            }
            if *subtree {
                r.push_str("(?:/.*)?");
            }
        }
        PathPattern::BoundedStar { segments, subtree } => {
            if segments.is_empty() && !subtree {
                r.push('/');
            }
            for s in segments {
                r.push('/');
                push_star_segment(&mut r, s);
            }
            if *subtree {
                r.push_str("(?:/.*)?");
            }
        }
    }
    r.push_str(r"\z");
    r
}

/// Every byte a pattern names literally.
pub(crate) fn literal_bytes(p: &PathPattern, set: &mut [bool; 256]) {
    let mut mark = |s: &str| {
        for &b in s.as_bytes() {
            set[usize::from(b)] = true;
        }
    };
    match p {
        PathPattern::Exact { path } => mark(path),
        PathPattern::Subtree { root } => mark(root),
        PathPattern::Postfix { root, suffix } => {
            mark(root);
            mark(suffix);
        }
        PathPattern::Segment { root, name } => {
            mark(root);
            mark(name);
        }
        PathPattern::Nested { root, tail, .. } => {
            mark(root);
            tail.iter().for_each(|t| mark(t));
        }
        PathPattern::BoundedStar { segments, .. } => segments.iter().for_each(|s| mark(s)),
    }
}

/// The reduced alphabet: every literal byte, `/`, `.`, and one representative of the bytes
/// that no pattern names (they are interchangeable in every automaton involved). NUL is
/// never part of a valid path and is left out.
pub(crate) fn alphabet(mut literal: [bool; 256]) -> Vec<u8> {
    literal[usize::from(b'/')] = true;
    literal[usize::from(b'.')] = true;
    literal[0] = false;
    let preferred = b"xyzqwabcdefghijklmnoprstuvXYZQW0123456789_-";
    let spare = preferred
        .iter()
        .copied()
        .chain(1..=255u8)
        .find(|&b| !literal[usize::from(b)]);
    let mut out: Vec<u8> = (1..=255u8).filter(|&b| literal[usize::from(b)]).collect();
    if let Some(b) = spare {
        out.insert(0, b);
    }
    out
}

fn start_of(dfa: &Dfa) -> Result<StateID, BuildError> {
    dfa.start_state(&start::Config::new().anchored(Anchored::Yes))
        .map_err(|e| e.to_string())
}

fn accepts(dfa: &Dfa, s: StateID) -> bool {
    dfa.is_match_state(dfa.next_eoi_state(s))
}

/// The bytes of the search path to entry `at` of `trail` (each entry: its predecessor's
/// index, `usize::MAX` for the start, and the byte taken).
fn witness(trail: &[(usize, u8)], at: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut i = at;
    while let Some(&(prev, b)) = trail.get(i) {
        if prev == usize::MAX {
            break;
        }
        bytes.push(b);
        i = prev;
    }
    bytes.reverse();
    bytes
}

/// Searches for the shortest byte string accepted by `child` and `valid` but not by
/// `parent` (`None` meaning the empty language). Returns `Ok(None)` when there is none,
/// i.e. the child's valid paths are all included in the parent's.
pub(crate) fn counterexample(
    child: &mut Lazy,
    mut parent: Option<&mut Lazy>,
    valid: &Dfa,
    alphabet: &[u8],
) -> Result<Option<Vec<u8>>, BuildError> {
    let start = (
        child.start()?,
        match parent.as_deref_mut() {
            Some(p) => Some(p.start()?),
            None => None,
        },
        start_of(valid)?,
    );
    type Key = (LazyStateID, Option<LazyStateID>, StateID);
    let mut seen: HashMap<Key, usize> = HashMap::new();
    // For each discovered state: (predecessor index, byte taken), to rebuild the witness.
    let mut trail: Vec<(usize, u8)> = vec![(usize::MAX, 0)];
    seen.insert(start, 0);
    let mut queue = VecDeque::from([(start, 0usize)]);
    while let Some(((c, p, v), at)) = queue.pop_front() {
        let parent_accepts = match (parent.as_deref_mut(), p) {
            (Some(d), Some(p)) => d.accepts(p)?,
            _ => false,
        };
        if !parent_accepts && accepts(valid, v) && child.accepts(c)? {
            return Ok(Some(witness(&trail, at)));
        }
        for &b in alphabet {
            let nv = valid.next_state(v, b);
            if valid.is_dead_state(nv) {
                continue;
            }
            let nc = child.next(c, b)?;
            if nc.is_dead() {
                continue;
            }
            let np = match (parent.as_deref_mut(), p) {
                (Some(d), Some(p)) => Some(d.next(p, b)?).filter(|n| !n.is_dead()),
                _ => None,
            };
            let key = (nc, np, nv);
            if let std::collections::hash_map::Entry::Vacant(e) = seen.entry(key) {
                e.insert(trail.len());
                queue.push_back((key, trail.len()));
                trail.push((at, b));
            }
        }
    }
    Ok(None)
}

/// Searches for the shortest valid path accepted by automaton `roles[0]` on which `pred`
/// holds, `pred` being given whether each automaton of `roles` (indices into `store`; one
/// automaton may fill several roles) accepts the path, in role order. `pred` is only asked
/// where `roles[0]` accepts. A dead state of `roles[0]` ends a branch; the others are
/// followed to the end, so `pred` may ask for an automaton *not* to accept. Carve-outs make
/// the inclusion questions boolean combinations of unions (`g ∧ ¬D ∧ ¬(P ∧ ¬U) ∧ …`), which
/// this decides as [`counterexample`] decides the plain one.
///
/// `vetoes` are positions in `roles` whose acceptance makes `pred` false: a branch ends where
/// every path on from it that `roles[0]` accepts is accepted by one of them, since no path
/// below it can hold. Where the whole search finishes within the automata's limits, that
/// changes neither the answer nor the path found (every state below such a state is such a
/// state), only how much of the product is explored.
pub(crate) fn search(
    store: &mut [Lazy],
    roles: &[usize],
    vetoes: &[usize],
    valid: &Dfa,
    alphabet: &[u8],
    pred: impl Fn(&[bool]) -> bool,
) -> Result<Option<Vec<u8>>, BuildError> {
    if roles.is_empty() || roles.iter().any(|&r| r >= store.len()) {
        return Ok(None);
    }
    let mut start = Vec::with_capacity(roles.len());
    for &r in roles {
        start.push(store[r].start()?);
    }
    type Pair = (usize, LazyStateID, usize, LazyStateID);
    let mut included: HashMap<Pair, bool> = HashMap::new();
    let mut vetoed = |store: &mut [Lazy], states: &[LazyStateID]| -> bool {
        let (Some(&g), Some(&gs)) = (roles.first(), states.first()) else {
            return false;
        };
        for &i in vetoes {
            let (Some(&r), Some(&s)) = (roles.get(i), states.get(i)) else {
                continue;
            };
            let key = (g, gs, r, s);
            let known = included.get(&key).copied();
            let inc = match known {
                Some(inc) => inc,
                None => {
                    // An automaton over its limit here proves nothing: the branch goes on,
                    // as it would without the check.
                    let inc = accepts_all_of(store, (g, gs), (r, s), alphabet).unwrap_or(false);
                    included.insert(key, inc);
                    inc
                }
            };
            if inc {
                return true;
            }
        }
        false
    };
    if vetoed(store, &start) {
        return Ok(None);
    }
    type Key = (Vec<LazyStateID>, StateID);
    let start: Key = (start, start_of(valid)?);
    let mut seen: HashMap<Key, usize> = HashMap::new();
    let mut trail: Vec<(usize, u8)> = vec![(usize::MAX, 0)];
    seen.insert(start.clone(), 0);
    let mut queue = VecDeque::from([(start, 0usize)]);
    let mut accepting = vec![false; roles.len()];
    while let Some(((states, v), at)) = queue.pop_front() {
        if accepts(valid, v) && store[roles[0]].accepts(states[0])? {
            for (i, (&r, &s)) in roles.iter().zip(&states).enumerate() {
                accepting[i] = !s.is_dead() && store[r].accepts(s)?;
            }
            if pred(&accepting) {
                return Ok(Some(witness(&trail, at)));
            }
        }
        for &b in alphabet {
            let nv = valid.next_state(v, b);
            if valid.is_dead_state(nv) {
                continue;
            }
            let mut next = Vec::with_capacity(states.len());
            for (&r, &s) in roles.iter().zip(&states) {
                next.push(if s.is_dead() { s } else { store[r].next(s, b)? });
            }
            if next[0].is_dead() {
                continue;
            }
            let key = (next, nv);
            if seen.contains_key(&key) || vetoed(store, &key.0) {
                continue;
            }
            seen.insert(key.clone(), trail.len());
            queue.push_back((key, trail.len()));
            trail.push((at, b));
        }
    }
    Ok(None)
}

/// How many state pairs [`accepts_all_of`] looks at before it answers "not known".
const INCLUSION_LOOKAHEAD: usize = 256;

/// Whether every path on from state `a.1` of automaton `a.0` (over `alphabet`) that it
/// accepts is accepted on from state `b.1` of automaton `b.0`. `false` when that is not
/// so, or not shown within [`INCLUSION_LOOKAHEAD`] pairs.
fn accepts_all_of(
    store: &mut [Lazy],
    a: (usize, LazyStateID),
    b: (usize, LazyStateID),
    alphabet: &[u8],
) -> Result<bool, BuildError> {
    let mut seen = vec![(a.1, b.1)];
    let mut at = 0;
    while let Some(&(x, y)) = seen.get(at) {
        at += 1;
        if store[a.0].accepts(x)? && (y.is_dead() || !store[b.0].accepts(y)?) {
            return Ok(false);
        }
        for &byte in alphabet {
            let nx = store[a.0].next(x, byte)?;
            if nx.is_dead() {
                continue;
            }
            let ny = if y.is_dead() {
                y
            } else {
                store[b.0].next(y, byte)?
            };
            if !seen.contains(&(nx, ny)) {
                if seen.len() >= INCLUSION_LOOKAHEAD {
                    return Ok(false);
                }
                seen.push((nx, ny));
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(s: &str) -> PathPattern {
        match PathPattern::parse(s) {
            Ok(p) => p,
            Err(e) => unreachable!("{s}: {e}"),
        }
    }

    fn dfa(p: &str) -> Dfa {
        match build(&[regex(&pat(p))]) {
            Ok(d) => d,
            Err(e) => unreachable!("{p}: {e}"),
        }
    }

    fn lazy(p: &str) -> Lazy {
        match Lazy::new(&[regex(&pat(p))]) {
            Ok(d) => d,
            Err(e) => unreachable!("{p}: {e}"),
        }
    }

    fn run_lazy(d: &mut Lazy, s: &str) -> bool {
        let Ok(mut st) = d.start() else {
            unreachable!()
        };
        for &b in s.as_bytes() {
            let Ok(n) = d.next(st, b) else { unreachable!() };
            st = n;
        }
        d.accepts(st).unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn run(d: &Dfa, s: &str) -> bool {
        let Ok(mut st) = start_of(d) else {
            unreachable!()
        };
        for &b in s.as_bytes() {
            st = d.next_state(st, b);
        }
        accepts(d, st)
    }

    #[test]
    fn regexes_agree_with_matches() {
        let paths = [
            "/",
            "/a",
            "/a/b",
            "/a/b.rs",
            "/a/.rs",
            "/ab",
            "/a/x/b",
            "/a/x/y/b",
            "/src/main.rs",
            "/a/b/c.rs",
            "/a.rs",
            "/x\n/y",
            "/a*b",
            "/a/*",
        ];
        for p in [
            "/",
            "/a",
            "/a/**",
            "/**",
            "/a/**/*.rs",
            "/**/*.rs",
            "/a/**/b",
            "/**/b",
            "/a/*/b",
            "/*",
            "/a*b",
            "/a/*/**",
            "/*b/**",
        ] {
            let d = dfa(p);
            let mut l = lazy(p);
            for path in paths {
                assert_eq!(run(&d, path), pat(p).matches(path), "{p} on {path}");
                assert_eq!(
                    run_lazy(&mut l, path),
                    pat(p).matches(path),
                    "{p} on {path}"
                );
            }
        }
    }

    #[test]
    fn validity_language() {
        let Ok(v) = validity() else { unreachable!() };
        for ok in ["/", "/a", "/a/b", "/.a", "/..a", "/a.", "/.../b"] {
            assert!(run(v, ok), "{ok}");
        }
        for bad in [
            "", "a", "//", "/a/", "/.", "/..", "/a/./b", "/a/../b", "/a\0b",
        ] {
            assert!(!run(v, bad), "{bad:?}");
        }
    }

    #[test]
    fn alphabet_prefers_a_readable_spare_byte() {
        let mut lit = [false; 256];
        literal_bytes(&pat("/a/x/**"), &mut lit);
        let a = alphabet(lit);
        assert_eq!(a.first(), Some(&b'y'));
        assert!(a.contains(&b'/') && a.contains(&b'.') && a.contains(&b'x'));
        assert!(!a.contains(&0));
    }
}
