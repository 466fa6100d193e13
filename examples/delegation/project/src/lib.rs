/// The last `n` items of `v`.
pub fn last_n(v: &[u32], n: usize) -> &[u32] {
    &v[v.len() - n..]
}
