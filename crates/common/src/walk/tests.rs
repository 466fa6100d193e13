extern crate std;

use std::vec;
use std::vec::Vec;

use super::*;
use crate::access::{ACCESS_READ, ACCESS_WRITE};

/// A hand-built automaton held in plain vectors; `states[0]` stands for the dead state.
struct Tiny {
    states: Vec<StateValue>,
    edges: Vec<(u32, &'static [u8], u32)>,
    globs: Vec<GlobValue>,
    /// `(glob group, mask, next)`.
    combos: Vec<(u32, u32, u32)>,
}

impl SegmentAutomaton for Tiny {
    fn state(&self, id: u32) -> Option<StateValue> {
        self.states.get(id as usize).copied()
    }
    fn edge(&self, state: u32, segment: &[u8]) -> Option<u32> {
        self.edges
            .iter()
            .find(|(s, name, _)| *s == state && *name == segment)
            .map(|e| e.2)
    }
    fn glob(&self, index: u32) -> Option<&GlobValue> {
        self.globs.get(index as usize)
    }
    fn combo(&self, group: u32, mask: u32) -> Option<u32> {
        self.combos
            .iter()
            .find(|c| c.0 == group && c.1 == mask)
            .map(|c| c.2)
    }
}

fn st(accept: u32, default_next: u32, glob_first: u32, glob_count: u32) -> StateValue {
    StateValue {
        accept,
        default_next,
        glob_first,
        glob_count,
        move_class: 1,
    }
}

fn glob(p: &[u8]) -> GlobValue {
    GlobValue::new(p).unwrap_or(GlobValue {
        len: 0,
        pattern: [0; 60],
    })
}

/// `fs.read = ["/a/**"]`, `fs.write = ["/a/*.rs"]`.
fn read_a_write_rs() -> Tiny {
    const RW: u32 = ACCESS_READ | ACCESS_WRITE;
    Tiny {
        states: vec![
            st(0, 0, 0, 0),
            st(0, 0, 0, 0),           // 1: `/`
            st(ACCESS_READ, 3, 0, 1), // 2: `/a`: subtree, `*.rs` next
            st(ACCESS_READ, 3, 0, 0), // 3: below `/a`
            st(RW, 3, 0, 0),          // 4: `/a/*.rs`
        ],
        edges: vec![(1, b"a", 2)],
        globs: vec![glob(b"*.rs")],
        combos: vec![(0, 1, 4)], // glob group 0 (state 2's glob_first), mask 1
    }
}

#[test]
fn walks_literals_globs_and_defaults() {
    let m = read_a_write_rs();
    assert_eq!(walk(&m, 1, b"/"), Ok(0));
    assert_eq!(walk(&m, 1, b"/a"), Ok(ACCESS_READ));
    assert_eq!(walk(&m, 1, b"/a/x"), Ok(ACCESS_READ));
    assert_eq!(walk(&m, 1, b"/a/m.rs"), Ok(ACCESS_READ | ACCESS_WRITE));
    assert_eq!(walk(&m, 1, b"/a/m.rs/x.rs"), Ok(ACCESS_READ));
    assert_eq!(walk(&m, 1, b"/a/.rs"), Ok(ACCESS_READ | ACCESS_WRITE));
    assert_eq!(walk(&m, 1, b"/b"), Ok(0));
    assert_eq!(walk(&m, 1, b"/b/a"), Ok(0));
    assert_eq!(walk(&m, 1, b"//a//m.rs/"), Ok(ACCESS_READ | ACCESS_WRITE));
}

#[test]
fn missing_combo_means_default() {
    let mut m = read_a_write_rs();
    m.combos.clear();
    assert_eq!(walk(&m, 1, b"/a/m.rs"), Ok(ACCESS_READ));
}

#[test]
fn refuses_malformed_paths() {
    let m = read_a_write_rs();
    assert_eq!(walk(&m, 1, b"a/b"), Err(WalkError::NotAbsolute));
    assert_eq!(walk(&m, 1, b""), Err(WalkError::NotAbsolute));
    let long = vec![b'/'; PATH_MAX];
    assert_eq!(walk(&m, 1, &long), Err(WalkError::PathTooLong));
    let mut seg = vec![b'/'];
    seg.extend(std::iter::repeat_n(b'x', NAME_MAX + 1));
    assert_eq!(walk(&m, 1, &seg), Err(WalkError::SegmentTooLong));
    seg.pop();
    assert_eq!(walk(&m, 1, &seg), Ok(0));
}

#[test]
fn refuses_inconsistent_automata() {
    let mut m = read_a_write_rs();
    m.edges.push((1, b"z", 9));
    assert_eq!(walk(&m, 1, b"/z"), Err(WalkError::MissingState(9)));
    assert_eq!(walk(&m, 9, b"/"), Err(WalkError::MissingState(9)));
    m.globs.clear();
    assert_eq!(walk(&m, 1, b"/a/x"), Err(WalkError::BadGlob(2)));
    m.states[2].glob_count = 9;
    assert_eq!(walk(&m, 1, b"/a/x"), Err(WalkError::BadGlob(2)));
}

#[test]
fn dead_state_stops_the_walk() {
    let m = read_a_write_rs();
    // Segments after the dead state are not even checked for length.
    let mut p = b"/b/".to_vec();
    p.extend(std::iter::repeat_n(b'x', NAME_MAX + 1));
    assert_eq!(walk(&m, 1, &p), Ok(0));
}

#[test]
fn glob_segments() {
    assert!(glob_segment_matches(b"*", b"x"));
    assert!(!glob_segment_matches(b"*", b""));
    assert!(glob_segment_matches(b"lib*.so", b"libc.so"));
    assert!(glob_segment_matches(b"lib*.so", b"lib.so"));
    assert!(!glob_segment_matches(b"lib*.so", b"libc.so.6"));
    assert!(glob_segment_matches(b"*a*b*", b"xaybz"));
    assert!(glob_segment_matches(b"*ab", b"aab"));
    assert!(!glob_segment_matches(b"*a*b", b"ba"));
    assert!(glob_segment_matches(b"a", b"a"));
    assert!(!glob_segment_matches(b"a", b"ab"));
    assert!(!glob_segment_matches(b"ab", b"a"));
    assert!(glob_segment_matches(b"**", b"a"));
    assert!(glob_segment_matches(b"a*a*a", b"aaaaa"));
    assert!(!glob_segment_matches(b"a*a*a", b"aa"));
}

/// Exhaustive check against a naive recursive matcher over a two-letter alphabet.
#[test]
fn glob_segments_agree_with_naive_matching() {
    fn naive(p: &[u8], n: &[u8]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some((b'*', rest)) => (0..=n.len()).any(|i| naive(rest, &n[i..])),
            Some((c, rest)) => n.first() == Some(c) && naive(rest, &n[1..]),
        }
    }
    fn words(alphabet: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut all = vec![Vec::new()];
        let mut frontier = vec![Vec::new()];
        for _ in 0..max {
            let mut next = Vec::new();
            for w in &frontier {
                for &c in alphabet {
                    let mut v: Vec<u8> = w.clone();
                    v.push(c);
                    next.push(v);
                }
            }
            all.extend(next.iter().cloned());
            frontier = next;
        }
        all
    }
    for p in words(b"a*b", 5) {
        for n in words(b"ab", 6) {
            assert_eq!(
                glob_segment_matches(&p, &n),
                !n.is_empty() && naive(&p, &n),
                "{:?} {:?}",
                std::str::from_utf8(&p),
                std::str::from_utf8(&n)
            );
        }
    }
}

#[test]
fn walk_state_returns_the_final_state() {
    let m = read_a_write_rs();
    assert_eq!(walk_state(&m, 1, b"/a/m.rs"), Ok(4));
    assert_eq!(walk_state(&m, 1, b"/a/m.rs/x"), Ok(3));
    assert_eq!(walk_state(&m, 1, b"/b/c"), Ok(DEAD_STATE));
    assert_eq!(walk_state(&m, 1, b"/"), Ok(1));
}
