//! The review example (`examples/review/`) under the kernel: a replayed review episode whose
//! `ast_grep` and `git_log` calls run as `bee __tool` in the episode's scope, and whose
//! search outside the workspace is denied by the kernel and answered as not searched.
//!
//! Built only with `--features kernel-tests,sec,astgrep-rust` and run in the VM matrix by
//! `cargo xtask test` (`cargo xtask vm test -p bee --test kernel_review --features
//! kernel-tests,sec,astgrep-rust,astgrep-python`); on a host whose kernel cannot run BPF LSM
//! programs it fails, it never skips.
mod support;

#[test]
fn a_review_episode_uses_every_review_tool_in_a_kernel_scope() {
    support::review::a_review_episode_uses_every_review_tool_in_a_kernel_scope("bpf-lsm");
}
