//! Port intervals as the coverage checks of IP grants ([`super::net`]) and name grants
//! ([`super::hosts`]) handle them.

/// Inclusive port interval, widened so that `last + 1` cannot overflow.
pub(super) type Ports = (u32, u32);

/// `from` minus the union of `minus`, as sorted disjoint intervals (`minus` is sorted in
/// place; `from` must be sorted and disjoint).
pub(super) fn subtract(from: &[Ports], minus: &mut [Ports]) -> Vec<Ports> {
    minus.sort_unstable();
    let mut out = Vec::new();
    for &(lo, hi) in from {
        let mut cur = lo;
        for &(a, b) in minus.iter() {
            if cur > hi {
                break;
            }
            if b < cur {
                continue;
            }
            if a > hi {
                break;
            }
            if a > cur {
                out.push((cur, a - 1));
            }
            cur = cur.max(b + 1);
        }
        if cur <= hi {
            out.push((cur, hi));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::subtract;

    #[test]
    fn subtracts_overlapping_unsorted_intervals_at_the_edges() {
        // Unsorted, overlapping, touching both ends and reaching past them.
        let mut minus = [(90, 120), (1, 10), (5, 20), (40, 40)];
        assert_eq!(
            subtract(&[(1, 100), (200, 210)], &mut minus),
            [(21, 39), (41, 89), (200, 210)]
        );
        assert_eq!(subtract(&[(0, 65_535)], &mut [(0, 65_535)]), []);
        assert_eq!(subtract(&[(80, 80)], &mut []), [(80, 80)]);
        assert_eq!(
            subtract(&[(65_535, 65_535)], &mut [(0, 65_534)]),
            [(65_535, 65_535)]
        );
    }
}
