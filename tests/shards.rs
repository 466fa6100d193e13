//! Shards, resumed runs and merged records.
//!
//! The assignment's properties by property test.

use std::collections::BTreeSet;

use bee::scenario::{Shard, assign};
use proptest::prelude::*;

fn ids() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::btree_set("[a-z0-9-]{1,12}", 0..60)
        .prop_map(|s| s.into_iter().collect::<Vec<_>>())
}

proptest! {
    #[test]
    fn every_episode_is_in_exactly_one_shard(ids in ids(), count in 1u32..12) {
        let a = assign(ids.iter().map(String::as_str), count);
        prop_assert_eq!(a.len(), ids.len());
        let mut seen = BTreeSet::new();
        for index in 1..=count {
            let shard = Shard { index, count };
            for id in &ids {
                if shard.holds(&a, id) {
                    prop_assert!(seen.insert(id.clone()), "{} in two shards", id);
                }
            }
        }
        prop_assert_eq!(seen.len(), ids.len());
    }

    #[test]
    fn the_assignment_ignores_order(
        ids in ids(),
        count in 1u32..12,
        seed in any::<u64>(),
    ) {
        let mut shuffled = ids.clone();
        // A deterministic shuffle from the seed (Fisher–Yates with a xorshift generator).
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let j = usize::try_from(x % (i as u64 + 1)).unwrap();
            shuffled.swap(i, j);
        }
        prop_assert_eq!(
            assign(ids.iter().map(String::as_str), count),
            assign(shuffled.iter().map(String::as_str), count)
        );
    }

    #[test]
    fn shard_sizes_differ_by_at_most_one(ids in ids(), count in 1u32..12) {
        let a = assign(ids.iter().map(String::as_str), count);
        let mut sizes = vec![0usize; count as usize];
        for shard in a.values() {
            prop_assert!((1..=count).contains(shard));
            sizes[*shard as usize - 1] += 1;
        }
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        prop_assert!(max - min <= 1, "{:?}", sizes);
    }

    #[test]
    fn shard_specs_parse_only_in_range(k in 0u32..20, n in 0u32..20) {
        let parsed = format!("{k}/{n}").parse::<Shard>();
        if (1..=n).contains(&k) {
            prop_assert_eq!(parsed, Ok(Shard { index: k, count: n }));
        } else {
            prop_assert!(parsed.is_err());
        }
    }
}
