//! The review example (`examples/review/`) under the Landlock engine, natively: the episode
//! `kernel_review` runs under the BPF LSM in the VM matrix, here on this host's kernel, which
//! `auto` gives the Landlock engine. Built only with `--features
//! landlock-tests,sec,astgrep-rust` (`.ci/run` runs it with the review tools' tests); needs
//! root and Landlock, and fails, never skips, without them.
mod support;

#[test]
fn a_review_episode_uses_every_review_tool_in_a_landlock_scope() {
    support::review::a_review_episode_uses_every_review_tool_in_a_kernel_scope("landlock");
}
