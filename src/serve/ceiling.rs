//! Ceilings: the most each user may ask `bee serve` for, as policies an operator writes.
//!
//! The directory (default [`DEFAULT_DIR`]) holds `user/NAME.toml`, `group/NAME.toml` and
//! `default.toml`. For a caller, the first of these that exists applies:
//!
//! 1. `user/<the caller's user name>.toml`;
//! 2. `group/<name>.toml` for each of the caller's groups (primary and supplementary) that has
//!    one — a request within **any** of them is granted;
//! 3. `default.toml`.
//!
//! With none, nothing is granted. Ceilings are compiled per request (an edit applies to the
//! next request, no restart), with `/` as the base directory and the caller's home for `~`,
//! so one `default.toml` can say `write = ["~/**"]` for everyone. A ceiling that does not
//! compile refuses every request it would decide ([`Refused::Unavailable`]): fail closed.

use std::path::{Path, PathBuf};

use bee_core::attenuate::attenuate;
use bee_core::{CompileOptions, CompiledPolicy, compile_file};
use nix::unistd::{Gid, Group, Uid, User};

use super::peer::Peer;

/// Where ceilings are read from unless `bee serve --ceilings DIR` says otherwise.
pub const DEFAULT_DIR: &str = "/etc/bee/ceilings";

/// Why a request is not granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// No ceiling file applies to the caller: nothing is granted (77).
    NoCeiling {
        /// The files looked for, in order.
        looked_for: Vec<PathBuf>,
    },
    /// A ceiling could not be read or compiled (69); the operator must fix it.
    Unavailable(String),
    /// The request is not within the ceiling (65): the prover's refusal, one line per
    /// excess grant with its counterexample.
    NotWithin(String),
}

/// The ceiling files of `dir` that apply to `peer`, in the module's order; each with its
/// compiled policy. Empty when none exists.
///
/// # Errors
/// [`Refused::Unavailable`] when an applicable file does not compile.
pub fn applicable(dir: &Path, peer: &Peer) -> Result<Vec<(PathBuf, CompiledPolicy)>, Refused> {
    let user = User::from_uid(Uid::from_raw(peer.uid)).ok().flatten();
    let home = user.as_ref().and_then(home_of_its_own);
    let options = CompileOptions {
        base: PathBuf::from("/"),
        home: home.clone(),
    };
    let compile = |path: PathBuf| -> Result<(PathBuf, CompiledPolicy), Refused> {
        compile_file(&path, &options)
            .map(|c| (path.clone(), c.policy))
            .map_err(|e| {
                let why = if home.is_none() {
                    format!(
                        " (uid {} has no home directory of its own for `~`)",
                        peer.uid
                    )
                } else {
                    String::new()
                };
                Refused::Unavailable(format!(
                    "the ceiling {} does not compile for this caller{why}: {e}",
                    path.display()
                ))
            })
    };
    if let Some(u) = &user {
        let file = dir.join("user").join(format!("{}.toml", u.name));
        if file.is_file() {
            return Ok(vec![compile(file)?]);
        }
    }
    let mut found = Vec::new();
    for gid in gids(peer) {
        if let Ok(Some(g)) = Group::from_gid(Gid::from_raw(gid)) {
            let file = dir.join("group").join(format!("{}.toml", g.name));
            if file.is_file() {
                found.push(compile(file)?);
            }
        }
    }
    if !found.is_empty() {
        return Ok(found);
    }
    let default = dir.join("default.toml");
    if default.is_file() {
        return Ok(vec![compile(default)?]);
    }
    Ok(Vec::new())
}

/// What `~` stands for in a ceiling compiled for `user`: the home directory of its passwd
/// entry, only where that is an absolute path other than `/` naming a directory `user` owns
/// (after symbolic links). System users' homes are not their own — `/` for some, `/dev` for
/// `sys`, `/usr/sbin` for `daemon`, `/var/www` for `www-data`, `/nonexistent` for `nobody` —
/// and `~/**` would grant a system tree: such a user has no `~`, and a ceiling that names it
/// does not compile for them ([`Refused::Unavailable`]).
fn home_of_its_own(user: &User) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let dir = &user.dir;
    if !dir.is_absolute() || dir == Path::new("/") {
        return None;
    }
    let meta = std::fs::metadata(dir).ok()?;
    (meta.is_dir() && meta.uid() == user.uid.as_raw()).then(|| dir.clone())
}

/// The files [`applicable`] looks for on behalf of `peer`, for a refusal's text.
pub fn looked_for(dir: &Path, peer: &Peer) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Ok(Some(u)) = User::from_uid(Uid::from_raw(peer.uid)) {
        files.push(dir.join("user").join(format!("{}.toml", u.name)));
    }
    for gid in gids(peer) {
        if let Ok(Some(g)) = Group::from_gid(Gid::from_raw(gid)) {
            files.push(dir.join("group").join(format!("{}.toml", g.name)));
        }
    }
    files.push(dir.join("default.toml"));
    files
}

/// The caller's groups: its primary group, then its supplementary ones.
fn gids(peer: &Peer) -> Vec<u32> {
    let mut gids = vec![peer.gid];
    gids.extend(peer.groups.iter().copied().filter(|g| *g != peer.gid));
    gids
}

/// Proves `request` within one of `ceilings` (each named by a label for the refusal).
///
/// # Errors
/// [`Refused::NotWithin`] with the prover's counterexamples against the first ceiling when
/// the request is within none.
pub fn prove(
    request: &CompiledPolicy,
    origin: &str,
    ceilings: &[(String, &CompiledPolicy)],
) -> Result<(), Refused> {
    let mut first = None;
    for (label, ceiling) in ceilings {
        let report = attenuate(request, ceiling);
        if report.is_subset() {
            return Ok(());
        }
        first.get_or_insert_with(|| report.refusal(origin, label));
    }
    Err(Refused::NotWithin(first.unwrap_or_else(|| {
        format!("refused: {origin}: no ceiling applies")
    })))
}

/// What learn mode lets a command do, as a policy: everything a policy can grant — every
/// path read, written and run, every unix socket, every TCP and UDP peer. Version 1, so no
/// protected path is held back (`src/serve/everything.toml`; `cargo xtask vm --served`
/// gives it to its guests' service as their ceiling). The service grants a learn request only where this is
/// proven within the caller's bound: learn mode lifts every denial a policy could lift
/// (`docs/enforcement.md`, "Learn mode"), so a narrower bound would not hold.
pub const EVERYTHING: &str = include_str!("everything.toml");

/// [`EVERYTHING`], compiled (no `~`, base `/`).
///
/// # Errors
/// The compiler's message, which would be a defect of this build (a unit test compiles it).
pub fn everything() -> Result<CompiledPolicy, String> {
    let options = CompileOptions {
        base: PathBuf::from("/"),
        home: None,
    };
    bee_core::compile_str("learn mode", EVERYTHING, &options)
        .map(|c| c.policy)
        .map_err(|e| format!("learn mode's policy does not compile: {e}"))
}

#[cfg(test)]
mod tests {
    use bee_core::compile_str;
    use proptest::prelude::*;

    use super::*;

    fn policy(text: &str) -> Option<CompiledPolicy> {
        let options = CompileOptions {
            base: PathBuf::from("/"),
            home: Some(PathBuf::from("/home/u")),
        };
        compile_str("p.toml", text, &options).ok().map(|c| c.policy)
    }

    fn rules(paths: &[&str]) -> String {
        let list = paths
            .iter()
            .map(|p| format!("{p:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!("version = 2\n[fs]\nread = [{list}]\n")
    }

    fn user(uid: u32, dir: &Path) -> User {
        User {
            name: "u".into(),
            passwd: Default::default(),
            uid: Uid::from_raw(uid),
            gid: Gid::from_raw(uid),
            gecos: Default::default(),
            dir: dir.to_path_buf(),
            shell: PathBuf::from("/bin/sh"),
        }
    }

    #[test]
    fn only_a_home_the_user_owns_is_its_tilde() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let owner = std::os::unix::fs::MetadataExt::uid(
            &std::fs::metadata(tmp.path()).expect("its metadata"),
        );
        let linked = tmp.path().join("link");
        std::os::unix::fs::symlink(tmp.path(), &linked).expect("a symbolic link");
        assert_eq!(
            home_of_its_own(&user(owner, tmp.path())).as_deref(),
            Some(tmp.path())
        );
        assert_eq!(
            home_of_its_own(&user(owner, &linked)).as_deref(),
            Some(linked.as_path())
        );
        // Owned by someone else, missing, a file, relative, or `/`: no `~`.
        let other = owner.wrapping_add(1);
        let file = tmp.path().join("file");
        std::fs::write(&file, "").expect("a file");
        for (uid, dir) in [
            (other, tmp.path()),
            (other, linked.as_path()),
            (owner, &tmp.path().join("gone")),
            (owner, &file),
            (owner, Path::new("home/u")),
            (0, Path::new("/")),
        ] {
            assert_eq!(home_of_its_own(&user(uid, dir)), None, "{uid} {dir:?}");
        }
        // The system users' passwd entries of this distribution: not theirs.
        for name in ["sys", "daemon", "bin", "nobody"] {
            let u = User::from_name(name)
                .ok()
                .flatten()
                .unwrap_or_else(|| panic!("no user {name}"));
            assert_eq!(home_of_its_own(&u), None, "{name}: {:?}", u.dir);
        }
    }

    #[test]
    fn a_wider_request_is_refused_with_its_counterexample() {
        let (Some(ceiling), Some(request)) = (
            policy(&rules(&["/usr/**"])),
            policy(&rules(&["/usr/**", "/etc/**"])),
        ) else {
            panic!("the test policies compile");
        };
        let refused = prove(&request, "req.toml", &[("default.toml".into(), &ceiling)]);
        let Err(Refused::NotWithin(text)) = refused else {
            panic!("refused: {refused:?}");
        };
        assert!(text.contains("/etc"), "{text}");
        assert!(
            text.contains("req.toml") && text.contains("default.toml"),
            "{text}"
        );
    }

    #[test]
    fn within_any_group_ceiling_is_enough() {
        let (Some(a), Some(b), Some(request)) = (
            policy(&rules(&["/usr/**"])),
            policy(&rules(&["/srv/**"])),
            policy(&rules(&["/srv/data/**"])),
        ) else {
            panic!("the test policies compile");
        };
        assert_eq!(
            prove(&request, "r", &[("a".into(), &a), ("b".into(), &b)]),
            Ok(())
        );
        assert!(prove(&request, "r", &[("a".into(), &a)]).is_err());
        assert!(prove(&request, "r", &[]).is_err());
    }

    #[test]
    fn everything_is_within_only_a_bound_that_grants_everything() {
        let everything = everything().expect("learn mode's policy compiles");
        let Some(all) = policy(EVERYTHING) else {
            panic!("the test policies compile");
        };
        assert_eq!(prove(&everything, "learn", &[("all".into(), &all)]), Ok(()));
        // Each narrower bound, one grant short of everything, refuses it.
        for narrower in [
            EVERYTHING.replace("write = [\"/**\"]", "write = [\"/home/**\"]"),
            EVERYTHING.replace("unix = [\"/**\"]", "unix = [\"/run/**\"]"),
            EVERYTHING.replace("\"1-65535\"]\nproto = \"udp\"", "\"53\"]\nproto = \"udp\""),
            rules(&["/**"]),
        ] {
            let Some(bound) = policy(&narrower) else {
                panic!("{narrower} compiles");
            };
            let refused = prove(&everything, "learn", &[("bound".into(), &bound)]);
            assert!(
                matches!(&refused, Err(Refused::NotWithin(text)) if text.contains("bound")),
                "{narrower}: {refused:?}"
            );
        }
    }

    proptest! {
        /// A granted request is always within the ceiling: every path it reads, the ceiling
        /// reads (checked on the directories the rules name and below them).
        #[test]
        fn a_granted_request_never_reads_past_its_ceiling(
            ceiling in proptest::collection::vec("/(usr|etc|srv|home/u)(/[a-c]{1,2}){0,2}", 1..4),
            request in proptest::collection::vec("/(usr|etc|srv|home/u)(/[a-c]{1,2}){0,2}", 1..4),
            probe in "/(usr|etc|srv|home/u)(/[a-c]{1,2}){0,3}",
        ) {
            let subtree = |v: &Vec<String>| v.iter().map(|p| format!("{p}/**")).collect::<Vec<_>>();
            let c = subtree(&ceiling);
            let r = subtree(&request);
            let c_refs: Vec<&str> = c.iter().map(String::as_str).collect();
            let r_refs: Vec<&str> = r.iter().map(String::as_str).collect();
            let (Some(cp), Some(rp)) = (policy(&rules(&c_refs)), policy(&rules(&r_refs))) else {
                return Err(TestCaseError::fail("the generated policies compile"));
            };
            if prove(&rp, "r", &[("c".into(), &cp)]).is_ok() {
                let inside = |roots: &Vec<String>| roots.iter().any(|root| {
                    probe.strip_prefix(root.as_str()).is_some_and(|rest| rest.starts_with('/'))
                });
                prop_assert!(!inside(&request) || inside(&ceiling),
                    "{probe} is read by the granted request {request:?} but not by {ceiling:?}");
            }
        }
    }
}
