//! Kernel tests of bee's programs, hook by hook. Run on a kernel that runs BPF LSM programs,
//! as root — in the VM matrix via `cargo xtask vm test --test kernel_programs` (a module alone:
//! `-- stress::`). Elsewhere they fail: a test that cannot prove enforcement does not pass.
//!
//! One test binary, one engine: under the emulated guests loading bee's programs (the
//! verifier's work) costs about 20 s per kernel, paid once here rather than once per module.
//! Tests run one at a time (`--test-threads=1` in the VM), each in its own cgroup.
//! `kernel_names` and `kernel_dns_attack` are binaries of their own: they drive a
//! [`bee_userspace::engine::SharedEngine`] with name servers of their own, and a process has
//! one engine.

#[path = "../kernel_support/mod.rs"]
mod kernel_support;

mod attack;
mod cache;
mod carve;
mod dns;
mod exec;
mod fs;
mod net;
mod probe;
mod replace;
mod scope;
mod stress;

helper_entry!();

/// A helper action reads back from its words as itself (empty, optional and repeated arguments
/// included), and words that do not fit an action are refused rather than guessed at.
#[test]
fn helper_actions_read_back_from_their_words() {
    use kernel_support::Action;
    for action in [
        Action::AnonExec {},
        Action::OpenRead {
            path: "/a b".into(),
        },
        Action::Connect {
            addr: "::1".into(),
            port: String::new(),
        },
        Action::Setxattr {
            path: "/f".into(),
            name: None,
        },
        Action::Setxattr {
            path: "/f".into(),
            name: Some("user.x".into()),
        },
        Action::Tiocsti {
            args: vec!["ctty".into(), "echo\\n".into()],
        },
        Action::OpenMany { paths: vec![] },
    ] {
        assert_eq!(Action::parse(&action.words()), Ok(action));
    }
    for words in [
        &[][..],
        &["no-such-action"],
        &["open-read"],
        &["open-read", "/a", "/b"],
        &["connect", "::1"],
    ] {
        assert!(Action::parse(words).is_err(), "{words:?}");
    }
}
