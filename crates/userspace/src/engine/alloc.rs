//! Id ranges in the shared maps: policy ids, state ids and glob indices.
//!
//! Every installed policy owns a contiguous range of the state array and of the glob array, and
//! a policy id. Ranges are handed out first fit from a free list and returned on uninstall, so
//! concurrent scopes never share an id.

/// A first-fit allocator of ranges in `start..end`.
#[derive(Debug, Clone)]
pub struct RangeAlloc {
    /// Free ranges `(start, len)`, sorted by start, never adjacent or empty.
    free: Vec<(u32, u32)>,
}

impl RangeAlloc {
    /// An allocator whose whole range `start..end` is free.
    pub fn new(start: u32, end: u32) -> Self {
        let free = if end > start {
            vec![(start, end - start)]
        } else {
            Vec::new()
        };
        Self { free }
    }

    /// Takes `len` consecutive ids and returns the first; `None` if no free range is long
    /// enough. A zero-length request takes nothing and returns 0.
    pub fn alloc(&mut self, len: u32) -> Option<u32> {
        if len == 0 {
            return Some(0);
        }
        let i = self.free.iter().position(|&(_, l)| l >= len)?;
        let (start, l) = *self.free.get(i)?;
        if l == len {
            self.free.remove(i);
        } else if let Some(slot) = self.free.get_mut(i) {
            *slot = (start + len, l - len);
        }
        Some(start)
    }

    /// Returns `start..start + len` to the free list (merging with its neighbours).
    pub fn release(&mut self, start: u32, len: u32) {
        if len == 0 {
            return;
        }
        let i = self.free.partition_point(|&(s, _)| s < start);
        self.free.insert(i, (start, len));
        // Merge with the next range, then with the previous one.
        if let (Some(&(s, l)), Some(&(ns, nl))) = (self.free.get(i), self.free.get(i + 1)) {
            if s + l == ns {
                self.free[i] = (s, l + nl);
                self.free.remove(i + 1);
            }
        }
        if i > 0 {
            if let (Some(&(ps, pl)), Some(&(s, l))) = (self.free.get(i - 1), self.free.get(i)) {
                if ps + pl == s {
                    self.free[i - 1] = (ps, pl + l);
                    self.free.remove(i);
                }
            }
        }
    }

    /// Number of free ids.
    pub fn free_count(&self) -> u64 {
        self.free.iter().map(|&(_, l)| u64::from(l)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_and_merge() {
        let mut a = RangeAlloc::new(1, 101);
        let x = a.alloc(10).unwrap();
        let y = a.alloc(20).unwrap();
        let z = a.alloc(30).unwrap();
        assert_eq!((x, y, z), (1, 11, 31));
        assert_eq!(a.alloc(41), None);
        a.release(y, 20);
        assert_eq!(a.alloc(15), Some(11));
        a.release(11, 15);
        a.release(x, 10);
        a.release(z, 30);
        assert_eq!(a.free_count(), 100);
        assert_eq!(a.alloc(100), Some(1));
        assert_eq!(a.alloc(0), Some(0));
    }

    #[test]
    fn concurrent_ranges_never_overlap() {
        let mut a = RangeAlloc::new(0, 1000);
        let mut taken: Vec<(u32, u32)> = Vec::new();
        for round in 0..200u32 {
            let len = round % 17 + 1;
            if round % 3 == 2 && !taken.is_empty() {
                let (s, l) = taken.remove((round as usize * 7) % taken.len());
                a.release(s, l);
            } else if let Some(s) = a.alloc(len) {
                for &(ts, tl) in &taken {
                    assert!(s + len <= ts || ts + tl <= s, "overlap");
                }
                taken.push((s, len));
            }
        }
    }
}
