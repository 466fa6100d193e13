//! A [`LandlockPlan`] made ready for one launch, and applied in the child.
//!
//! Why one file of this length: what the parent prepares for a launch and what the child
//! applies must agree step for step (lookups, mounts, the ruleset), so both halves are read
//! together.
//!
//! [`Confinement::prepare`] runs in the parent for every call: it looks each grant's path up
//! without following symbolic links (`openat2(RESOLVE_NO_SYMLINKS)`), expands `*` patterns
//! over the directories that exist, checks pinned executables' identities, builds the Landlock
//! ruleset (the `landlock` crate, every requested right a hard requirement) and the seccomp
//! filter, and lists the scope's mounts. The child, born by `clone3` in new mount, PID and
//! IPC namespaces, then runs only raw system calls on that prepared memory:
//!
//! 1. [`Confinement::enter`], while it still holds its capabilities: mounts private, every
//!    mount read-only and `noexec`, the grants' trees and files bound again with what the
//!    policy gives them (writable under a write grant, executable under an exec grant), a
//!    private `/proc` with `subset=pid` (its PID namespace holds only the scope), and the
//!    working directory entered again so that it is seen through those mounts;
//! 2. [`Confinement::restrict`], after `no_new_privs`: the private `/proc`'s rule, then
//!    `landlock_restrict_self`, then the seccomp filter, with a listener for the engine
//!    ([`seccomp::notify`]).
//!
//! The two layers each must allow an access: Landlock decides opens, creation, removal,
//! renames, execution and TCP; the mounts decide attribute changes (mode, owner, times,
//! extended attributes), which Landlock does not check, and executable mappings (`noexec`
//! refuses `mmap(PROT_EXEC)`, so the dynamic loader cannot run a file that no exec grant
//! covers). A path that changes between the two lookups gets the stricter of them.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible as _, NetPort, PathBeneath,
    Ruleset, RulesetAttr as _, RulesetCreatedAttr as _, Scope,
};

mod hold;

use super::plan::{LandlockPlan, MaskKind, Rights, Target, file_walk};
use super::seccomp::{self, SockFilter, SockFprog};
use crate::launch::Step;

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
/// `vm.memfd_noexec` (Linux 6.3), per PID namespace.
const MEMFD_NOEXEC: &str = "/proc/sys/vm/memfd_noexec";

/// `struct mount_attr` (`include/uapi/linux/mount.h`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `struct landlock_path_beneath_attr` (packed in the UAPI header).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `struct open_how` (`include/uapi/linux/openat2.h`).
#[repr(C)]
#[derive(Debug)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// One bind mount of the scope: a tree or file bound onto itself with its attributes.
#[derive(Debug)]
struct Bind {
    path: CString,
    attr: MountAttr,
    /// The identity the parent found at `path` (and put the Landlock rule on).
    id: (u64, u64),
}

/// A carve-out or protected path to cover, as the parent found it.
#[derive(Debug)]
struct MaskMount {
    path: CString,
    kind: MaskKind,
    id: (u64, u64),
}

/// Namespaces the child is born in (`clone3` flags): mounts, PIDs and System V IPC of its own.
pub const NAMESPACES: u64 = (libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC) as u64;

/// A plan ready for one launch. Made in the parent; its methods run in the child.
#[derive(Debug)]
pub struct Confinement {
    ruleset: OwnedFd,
    /// The rights of the private `/proc` (`READ_FILE | READ_DIR`), when a grant asks for it.
    proc_access: Option<u64>,
    root: MountAttr,
    binds: Vec<Bind>,
    /// Per bind, the child's clone of its tree as the host mounted it (a detached mount's
    /// descriptor, -1 for none), taken before the root's attributes change: allocated here,
    /// written in the child, which may not allocate.
    clones: Box<[AtomicI32]>,
    /// Carve-outs and protected paths that exist when the call starts, shallowest first.
    masks: Vec<MaskMount>,
    cwd: Option<CString>,
    filter: Vec<SockFilter>,
    /// Whether the kernel has `vm.memfd_noexec` (Linux 6.3), set to 2 for the scope's PID
    /// namespace; without it the seccomp filter refuses `memfd_create`.
    memfd_noexec: bool,
    /// `landlock_restrict_self`'s flags: on ABI 7, log denials after `execve` too
    /// (`LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON`), which the engine's reports need.
    restrict_flags: u32,
}

/// `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` (ABI 7, `include/uapi/linux/landlock.h`).
const LOG_NEW_EXEC_ON: u32 = 1 << 1;

fn landlock_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("landlock ruleset: {e}"))
}

/// `openat2(path, O_PATH | O_CLOEXEC, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`: the
/// descriptor, or -1 with `errno` set. Without `O_NOFOLLOW`, which would open a link that is
/// the last component itself. Async-signal-safe.
///
/// # Safety
/// `path` NUL-terminated.
unsafe fn open_path_no_links(path: &std::ffi::CStr) -> libc::c_long {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 with a NUL-terminated path and an open_how of the size passed.
    unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &raw const how,
            size_of::<OpenHow>(),
        )
    }
}

/// What a path is when the call starts: an `O_PATH` descriptor and its metadata.
struct Found {
    fd: OwnedFd,
    meta: std::fs::Metadata,
}

/// Opens `path` as `O_PATH` without following any symbolic link on the way. `None` when it
/// does not exist, passes through a link or cannot be reached: bee's semantics match no
/// path through a link, and a path the caller cannot reach grants nothing.
fn lookup(path: &str) -> io::Result<Option<Found>> {
    let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is NUL-terminated.
    let fd = unsafe { open_path_no_links(&c) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR | libc::EACCES | libc::EXDEV) => {
                Ok(None)
            }
            _ => Err(e),
        };
    }
    // SAFETY: openat2 returned a new descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let meta = std::fs::File::from(fd.try_clone()?).metadata()?;
    Ok(Some(Found { fd, meta }))
}

/// The existing paths a `*` pattern matches, looked up segment by segment without following
/// links; with `subtree`, each match is a directory or file whose tree is granted.
fn expand(segments: &[String]) -> Vec<String> {
    let mut current = vec![String::new()];
    for seg in segments {
        let mut next = Vec::new();
        for dir in &current {
            if !seg.contains('*') {
                next.push(format!("{dir}/{seg}"));
                continue;
            }
            let base = if dir.is_empty() { "/" } else { dir.as_str() };
            let Ok(entries) = std::fs::read_dir(base) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if bee_core::glob::segment_matches(seg.as_bytes(), name.as_bytes()) {
                    next.push(format!("{dir}/{}", name.to_string_lossy()));
                }
            }
        }
        current = next;
    }
    current.sort();
    current
}

/// Landlock's rights for bee's `rights` on a directory tree or a single file.
fn access(rights: Rights, dir: bool, abi: ABI) -> BitFlags<AccessFs> {
    let mut a = BitFlags::<AccessFs>::empty();
    if rights.read {
        a |= AccessFs::ReadFile;
        if dir {
            a |= AccessFs::ReadDir;
        }
    }
    if rights.write {
        a |= AccessFs::WriteFile;
        if abi >= ABI::V3 {
            a |= AccessFs::Truncate;
        }
        if dir {
            a |= AccessFs::RemoveDir
                | AccessFs::RemoveFile
                | AccessFs::MakeDir
                | AccessFs::MakeReg
                | AccessFs::MakeSock
                | AccessFs::MakeFifo
                | AccessFs::MakeSym;
            if abi >= ABI::V2 {
                a |= AccessFs::Refer;
            }
        }
    }
    if rights.exec {
        // Landlock checks an exec open as a read open too (`get_required_file_open_access`):
        // an executable file is readable. Under either engine a scope can read what it may
        // run anyway, by tracing the process that runs it.
        a |= AccessFs::Execute | AccessFs::ReadFile;
    }
    a
}

/// The rights Landlock is asked to handle: all of the ABI's but `IOCTL_DEV` (bee decides
/// device `ioctl`s by request, in the seccomp filter), so that everything else is denied
/// unless a rule grants it.
fn handled(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_all(abi) & !BitFlags::from(AccessFs::IoctlDev)
}

/// One resolved grant: a path that exists now, its kind and rights.
struct Resolved {
    path: String,
    dir: bool,
    device: bool,
    rights: Rights,
    fd: OwnedFd,
    /// `(st_dev, st_ino)`: the child binds this very file, or nothing.
    id: (u64, u64),
}

/// A launch the plan refuses as the call finds the file system (a pattern's walk too large),
/// carried in the [`io::Error`] [`Confinement::prepare`] returns: the launcher reports it as
/// a refused launch (65), not a failure (`crate::launch::LaunchError::Refused`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// Why a launch in `cwd` is refused under `plan`, if it is: `cwd` (resolved through its
/// links) lies inside a tree an `fs.deny` carve-out hides from the scope. The launch enters
/// its working directory again through the scope's mounts, where that tree is an empty,
/// unreadable directory, so the command could not start there. The message names the
/// directory, the tree and the rule (its text, key and line) that hides it.
pub fn hidden_cwd(plan: &LandlockPlan, cwd: &Path) -> Option<String> {
    let resolved = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    plan.masks()
        .iter()
        .find(|m| m.kind == MaskKind::Hidden && resolved.starts_with(&m.path))
        .map(|m| {
            format!(
                "the working directory {} is inside {}, which `{}` ({}, line {}) hides from \
                 the scope; start the command in a directory the scope can reach",
                cwd.display(),
                m.path,
                m.origin.text,
                m.origin.key,
                m.origin.line
            )
        })
}

impl Confinement {
    /// Prepares `plan` for one launch whose working directory is `cwd` (which
    /// [`hidden_cwd`] has accepted).
    ///
    /// # Errors
    /// An I/O error from a lookup that failed for another reason than a missing or linked
    /// path, or from creating the ruleset (the kernel refused a right the plan needs).
    pub fn prepare(plan: &LandlockPlan, cwd: Option<&Path>) -> io::Result<Self> {
        let abi = ABI::from(plan.abi().0 as i32);
        let mut resolved: Vec<Resolved> = Vec::new();
        let mut proc_access = None;
        // The walks' matches, each root walked once for all its patterns.
        let walks: Vec<(&super::plan::PathGrant, &bee_core::glob::PathPattern)> = plan
            .paths()
            .iter()
            .filter_map(|g| match &g.target {
                Target::Walk { pattern } => Some((g, pattern)),
                _ => None,
            })
            .collect();
        let patterns: Vec<&bee_core::glob::PathPattern> = walks.iter().map(|(_, p)| *p).collect();
        let mut walked = super::walk::matches_each(&patterns)
            .map_err(|too_large| {
                // Named by the rules the user wrote.
                let rules: Vec<String> = too_large
                    .patterns
                    .iter()
                    .filter_map(|&i| walks.get(i))
                    .map(|(g, _)| {
                        format!(
                            "{} `{}` (line {})",
                            g.origin.key, g.origin.text, g.origin.line
                        )
                    })
                    .collect();
                io::Error::other(Refusal(format!(
                    "{} match{} by name below {}, and each call walks it: this one looked at \
                     more than {} entries there; root the pattern in a smaller directory",
                    rules.join(", "),
                    if rules.len() == 1 { "es" } else { "" },
                    too_large.root,
                    super::walk::WALK_MAX
                )))
            })?
            .into_iter();
        for grant in plan.paths() {
            let (paths, tree) = match &grant.target {
                Target::Exact { path, .. } => (vec![path.clone()], false),
                Target::Tree { root } => (vec![root.clone()], true),
                Target::Star { segments, subtree } => (expand(segments), *subtree),
                Target::Walk { .. } => {
                    (walked.next().unwrap_or_default(), !file_walk(&grant.target))
                }
                Target::ProcSelf => {
                    proc_access = Some(access(grant.rights, true, abi).bits());
                    continue;
                }
            };
            let pin = match &grant.target {
                Target::Exact { pin, .. } => *pin,
                _ => None,
            };
            // A walk granted file by file applies the carve-outs and protected paths to each
            // match; every other grant has mounts for them.
            let cut = file_walk(&grant.target);
            for path in paths {
                let rights = if cut {
                    plan.cuts()
                        .iter()
                        .fold(grant.rights, |r, c| c.apply(&path, r))
                } else {
                    grant.rights
                };
                if rights.is_empty() {
                    continue;
                }
                let Some(found) = lookup(&path)? else {
                    continue;
                };
                let Found { fd, meta } = found;
                let dir = meta.is_dir();
                if let Some(pin) = pin
                    && !dir
                    && (meta.dev() != pin.dev || meta.ino() != pin.ino)
                {
                    continue;
                }
                let kind = meta.mode() & libc::S_IFMT;
                let device = kind == libc::S_IFCHR || kind == libc::S_IFBLK;
                let id = (meta.dev(), meta.ino());
                // An exact grant on a directory grants nothing (Landlock would grant what
                // lies below it too); `LandlockPlan::narrowings` says so.
                if dir && !tree {
                    continue;
                }
                resolved.push(Resolved {
                    path,
                    dir,
                    device,
                    rights,
                    fd,
                    id,
                });
            }
        }

        let tcp = plan.abi().has_network();
        // Sockets only of the kinds some layer decides the peers of: the gate decides TCP and
        // UDP; Landlock's network rules decide TCP.
        let sockets = seccomp::Sockets {
            tcp: tcp || plan.gated(),
            udp: plan.gated(),
        };
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(handled(abi))
            .map_err(landlock_err)?;
        if tcp {
            ruleset = ruleset
                .handle_access(AccessNet::ConnectTcp | AccessNet::BindTcp)
                .map_err(landlock_err)?;
        }
        if abi >= ABI::V6 {
            ruleset = ruleset
                .scope(Scope::AbstractUnixSocket | Scope::Signal)
                .map_err(landlock_err)?;
        }
        let mut created = ruleset.create().map_err(landlock_err)?;
        for r in &resolved {
            let a = access(r.rights, r.dir, abi);
            if a.is_empty() {
                continue;
            }
            created = created
                .add_rule(PathBeneath::new(r.fd.as_fd(), a))
                .map_err(landlock_err)?;
        }
        if tcp {
            // A bind only to port 0, a port the kernel picks, as the BPF engine's
            // `socket_bind` allows (a client that names its local side; `listen` stays
            // refused by the seccomp filter, so no peer can reach the socket first).
            created = created
                .add_rule(NetPort::new(0, AccessNet::BindTcp))
                .map_err(landlock_err)?;
        }
        for range in plan.tcp_connect() {
            for port in range.first..=range.last {
                created = created
                    .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                    .map_err(landlock_err)?;
            }
        }
        let fd: Option<OwnedFd> = created.into();
        let ruleset = fd.ok_or_else(|| landlock_err("the kernel gave no ruleset"))?;

        let (root, binds) = mounts(&resolved);
        let mut masks = Vec::new();
        for m in plan.masks() {
            let Some(found) = lookup(&m.path)? else {
                if m.creatable {
                    // Gone since the plan was made, where the scope could make it again
                    // with nothing over it: refuse rather than enforce less.
                    return Err(io::Error::other(format!(
                        "{}: the path `{}` covers is gone, and the scope could create it",
                        m.path, m.origin.text
                    )));
                }
                continue;
            };
            if m.kind == MaskKind::Hidden && !found.meta.is_dir() {
                // It was a directory when the plan was made: a file now cannot be covered by
                // the carve-out's tmpfs, so the call is not started.
                return Err(io::Error::other(format!(
                    "{}: the carve-out `{}` is no longer a directory",
                    m.path, m.origin.text
                )));
            }
            let path = CString::new(m.path.as_str())
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            masks.push(MaskMount {
                path,
                kind: m.kind,
                id: (found.meta.dev(), found.meta.ino()),
            });
        }
        let binds = hold::merge(binds, hold::ancestors(&masks, &resolved)?);
        let clones = binds.iter().map(|_| AtomicI32::new(-1)).collect();
        let memfd_noexec = Path::new(MEMFD_NOEXEC).exists();
        Ok(Self {
            ruleset,
            proc_access,
            root,
            binds,
            clones,
            masks,
            cwd: cwd
                .map(|c| CString::new(c.as_os_str().as_bytes()))
                .transpose()
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
            filter: seccomp::filter(sockets, !memfd_noexec),
            memfd_noexec,
            restrict_flags: if plan.abi().0 >= 7 {
                LOG_NEW_EXEC_ON
            } else {
                0
            },
        })
    }

    /// Step 1 in the child: the scope's mounts and the working directory again.
    ///
    /// # Safety
    /// Only in a child born in new mount and PID namespaces ([`NAMESPACES`]), with
    /// `CAP_SYS_ADMIN`, between `clone3` and `execve`.
    pub unsafe fn enter(&self) -> Result<(), Step> {
        let fail = |rc: libc::c_long| {
            if rc < 0 {
                Err(Step::PrivateMounts)
            } else {
                Ok(())
            }
        };
        // SAFETY: raw system calls on memory prepared before clone3 (NUL-terminated paths,
        // mount_attr values) and on this frame's stack.
        unsafe {
            // Landlock lets kernel-internal files through (a memfd has no path a rule could
            // name), so a memfd is made unexecutable instead: `vm.memfd_noexec = 2` holds for
            // this PID namespace and every one below it, and cannot be lowered there.
            if self.memfd_noexec {
                let fd = libc::open(
                    c"/proc/sys/vm/memfd_noexec".as_ptr(),
                    libc::O_WRONLY | libc::O_CLOEXEC,
                );
                let ok = fd >= 0 && libc::write(fd, b"2".as_ptr().cast(), 1) == 1;
                if fd >= 0 {
                    libc::close(fd);
                }
                if !ok {
                    return Err(Step::PrivateMounts);
                }
            }
            let root = c"/";
            fail(libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) as libc::c_long)?;
            // Each bind's tree is cloned as the host mounted it, before the root's attributes
            // change: a bind only adds restrictions (read-only, noexec) to the host's own
            // attributes of its mounts, and never lifts one the host set.
            for (bind, clone) in self.binds.iter().zip(self.clones.iter()) {
                let fd = match open_verified(&bind.path, bind.id) {
                    Verified::Fd(fd) => fd,
                    // Gone since the parent looked: nothing bound, nothing granted there by the
                    // mounts (the stricter layer wins).
                    Verified::Gone => continue,
                    Verified::Other => return Err(Step::PrivateMounts),
                };
                let tree = clone_tree(fd);
                libc::close(fd);
                fail(tree)?;
                clone.store(tree as libc::c_int, Ordering::Relaxed);
            }
            fail(mount_setattr(
                libc::AT_FDCWD,
                root.as_ptr(),
                AT_RECURSIVE,
                &self.root,
            ))?;
            // Every mount goes onto a descriptor of the very file the parent found (no name
            // is looked up twice): a concurrent rename or symbolic link cannot move a mount
            // elsewhere. A deeper bind's target is opened after the shallower ones are in
            // place, so that it lands on what the scope sees.
            for (bind, clone) in self.binds.iter().zip(self.clones.iter()) {
                let tree = clone.swap(-1, Ordering::Relaxed);
                if tree < 0 {
                    continue;
                }
                let fd = match open_verified(&bind.path, bind.id) {
                    Verified::Fd(fd) => fd,
                    Verified::Gone => {
                        libc::close(tree);
                        continue;
                    }
                    Verified::Other => {
                        libc::close(tree);
                        return Err(Step::PrivateMounts);
                    }
                };
                let mut rc = mount_setattr(
                    tree,
                    c"".as_ptr(),
                    libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
                    &bind.attr,
                );
                if rc >= 0 {
                    rc = move_onto(tree, fd);
                }
                libc::close(tree);
                libc::close(fd);
                fail(rc)?;
            }
            for m in &self.masks {
                let fd = match open_verified(&m.path, m.id) {
                    Verified::Fd(fd) => fd,
                    // A carve-out that is gone leaves nothing to cover (the parent refused the
                    // call where the scope could make it again).
                    Verified::Gone => continue,
                    Verified::Other => return Err(Step::PrivateMounts),
                };
                let rc = match m.kind {
                    MaskKind::Hidden => cover_with_empty_tmpfs(fd),
                    MaskKind::ReadOnly | MaskKind::NoExec => {
                        let attr = MountAttr {
                            attr_set: if m.kind == MaskKind::ReadOnly {
                                MOUNT_ATTR_RDONLY
                            } else {
                                MOUNT_ATTR_NOEXEC
                            },
                            ..MountAttr::default()
                        };
                        rebind(fd, &attr)
                    }
                };
                libc::close(fd);
                fail(rc)?;
            }
            if libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY,
                c"subset=pid".as_ptr().cast(),
            ) < 0
            {
                return Err(Step::ProcMount);
            }
            if let Some(cwd) = &self.cwd
                && libc::chdir(cwd.as_ptr()) < 0
            {
                return Err(Step::PrivateMounts);
            }
        }
        Ok(())
    }

    /// Step 2 in the child: the private `/proc`'s rule, the Landlock domain, the seccomp
    /// filter. Returns the filter's listener (`SECCOMP_FILTER_FLAG_NEW_LISTENER`), a
    /// close-on-exec descriptor the caller hands to bee and closes.
    ///
    /// # Safety
    /// Only in the child, after [`Confinement::enter`] and `PR_SET_NO_NEW_PRIVS`.
    pub unsafe fn restrict(&self) -> Result<RawFd, Step> {
        let ruleset = self.ruleset.as_raw_fd();
        // SAFETY: raw system calls on the ruleset descriptor, stack values and the filter
        // prepared before clone3.
        unsafe {
            if let Some(allowed_access) = self.proc_access {
                let fd = libc::open(
                    c"/proc".as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                );
                if fd < 0 {
                    return Err(Step::Landlock);
                }
                let attr = PathBeneathAttr {
                    allowed_access,
                    parent_fd: fd,
                };
                let rc = libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset,
                    LANDLOCK_RULE_PATH_BENEATH,
                    &raw const attr,
                    0u32,
                );
                libc::close(fd);
                if rc < 0 {
                    return Err(Step::Landlock);
                }
            }
            if libc::syscall(
                libc::SYS_landlock_restrict_self,
                ruleset,
                self.restrict_flags,
            ) < 0
            {
                return Err(Step::Landlock);
            }
            let prog = SockFprog {
                len: u16::try_from(self.filter.len()).unwrap_or(u16::MAX),
                filter: self.filter.as_ptr(),
            };
            let listener = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as libc::c_uint,
                &raw const prog,
            );
            if listener < 0 {
                return Err(Step::Seccomp);
            }
            Ok(listener as RawFd)
        }
    }
}

/// What [`open_verified`] found.
enum Verified {
    /// The file the parent found, as an `O_PATH` descriptor to close.
    Fd(libc::c_int),
    /// Nothing there any more (or a link where it was).
    Gone,
    /// Another file, or an error: the call must not start.
    Other,
}

/// Opens `path` without following links and checks that it is the file `(dev, ino)`.
/// Async-signal-safe.
///
/// # Safety
/// In the child; `path` NUL-terminated.
unsafe fn open_verified(path: &CString, id: (u64, u64)) -> Verified {
    // SAFETY: openat2 and fstat on prepared memory and this frame's stack.
    unsafe {
        let fd = open_path_no_links(path);
        if fd < 0 {
            return match *libc::__errno_location() {
                libc::ENOENT | libc::ELOOP | libc::ENOTDIR => Verified::Gone,
                _ => Verified::Other,
            };
        }
        let fd = fd as libc::c_int;
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) < 0 || (st.st_dev, st.st_ino) != id {
            libc::close(fd);
            return Verified::Other;
        }
        Verified::Fd(fd)
    }
}

/// Binds the tree at `fd` (recursively) onto itself with `attr`: `open_tree` a clone,
/// `mount_setattr` it, `move_mount` it onto the same descriptor. Returns the first failure's
/// -1 (`errno` set).
///
/// # Safety
/// In the child, with `CAP_SYS_ADMIN` in its own mount namespace.
unsafe fn rebind(fd: libc::c_int, attr: &MountAttr) -> libc::c_long {
    // SAFETY: raw system calls on a descriptor and this frame's stack.
    unsafe {
        let tree = clone_tree(fd);
        if tree < 0 {
            return tree;
        }
        let tree = tree as libc::c_int;
        let mut rc = mount_setattr(
            tree,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
            attr,
        );
        if rc >= 0 {
            rc = move_onto(tree, fd);
        }
        let errno = *libc::__errno_location();
        libc::close(tree);
        *libc::__errno_location() = errno;
        rc
    }
}

/// A detached clone of the mount tree at `fd`, its submounts included (`open_tree` with
/// `OPEN_TREE_CLONE | AT_RECURSIVE`), with the attributes they have: its descriptor, or -1
/// (`errno` set).
///
/// # Safety
/// In the child, with `CAP_SYS_ADMIN` in its own mount namespace.
unsafe fn clone_tree(fd: libc::c_int) -> libc::c_long {
    // SAFETY: a raw system call on a descriptor and a NUL-terminated literal.
    unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            fd,
            c"".as_ptr(),
            OPEN_TREE_CLONE
                | libc::O_CLOEXEC as libc::c_uint
                | AT_RECURSIVE
                | libc::AT_EMPTY_PATH as libc::c_uint,
        )
    }
}

/// `move_mount` of the detached or cloned mount `tree` onto the file `fd` refers to.
///
/// # Safety
/// In the child.
unsafe fn move_onto(tree: libc::c_int, fd: libc::c_int) -> libc::c_long {
    // SAFETY: a raw system call on two descriptors.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            fd,
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    }
}

/// Covers the directory `fd` with a new, empty, read-only tmpfs whose root has mode 000
/// (`fsopen`, `fsconfig`, `fsmount`, then [`move_onto`]).
///
/// # Safety
/// In the child, with `CAP_SYS_ADMIN` in its own mount namespace.
unsafe fn cover_with_empty_tmpfs(fd: libc::c_int) -> libc::c_long {
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_SET_STRING: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    // SAFETY: raw system calls on NUL-terminated literals and descriptors.
    unsafe {
        let fs = libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC);
        if fs < 0 {
            return fs;
        }
        let fs = fs as libc::c_int;
        let mut rc = 0;
        for (key, value) in [(c"mode", c"000"), (c"size", c"4k"), (c"nr_inodes", c"1")] {
            if rc >= 0 {
                rc = libc::syscall(
                    libc::SYS_fsconfig,
                    fs,
                    FSCONFIG_SET_STRING,
                    key.as_ptr(),
                    value.as_ptr(),
                    0,
                );
            }
        }
        if rc >= 0 {
            rc = libc::syscall(
                libc::SYS_fsconfig,
                fs,
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_void>(),
                0,
            );
        }
        let mut mnt = -1;
        if rc >= 0 {
            let attrs =
                (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
                    as libc::c_uint;
            mnt = libc::syscall(libc::SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs);
            rc = mnt;
        }
        if rc >= 0 {
            rc = move_onto(mnt as libc::c_int, fd);
        }
        let errno = *libc::__errno_location();
        if mnt >= 0 {
            libc::close(mnt as libc::c_int);
        }
        libc::close(fs);
        *libc::__errno_location() = errno;
        rc
    }
}

/// `mount_setattr(2)`.
///
/// # Safety
/// `path` NUL-terminated.
unsafe fn mount_setattr(
    dirfd: libc::c_int,
    path: *const libc::c_char,
    flags: libc::c_uint,
    attr: &MountAttr,
) -> libc::c_long {
    // SAFETY: as the caller promises; `attr` is a mount_attr of the size passed.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path,
            flags,
            attr as *const MountAttr,
            size_of::<MountAttr>(),
        )
    }
}

/// Whether `path` lies strictly below the directory `root` (both absolute and normalised).
fn below(path: &str, root: &str) -> bool {
    path != root
        && (root == "/"
            || (path.starts_with(root) && path.as_bytes().get(root.len()) == Some(&b'/')))
}

/// The attributes bee sets on the mounts at `path` by the grants: read-only unless under a
/// write tree or a written file, `noexec` unless under an exec tree or an executed file. Only
/// ever set, never cleared: where the host mounted a tree read-only or `noexec`, it stays so
/// in the scope, whatever the grants (the scope has no more than its caller).
fn attrs_at(path: &str, grants: &[Resolved]) -> MountAttr {
    let covers = |r: &Resolved| path == r.path || (r.dir && below(path, &r.path));
    let writable = grants
        .iter()
        .any(|r| r.rights.write && !r.device && covers(r));
    let exec = grants.iter().any(|r| r.rights.exec && covers(r));
    let mut attr = MountAttr::default();
    if !writable {
        attr.attr_set |= MOUNT_ATTR_RDONLY;
    }
    if !exec {
        attr.attr_set |= MOUNT_ATTR_NOEXEC;
    }
    attr
}

/// The root's attributes and the binds, shallowest first; a bind whose attributes equal those
/// of what encloses it is left out.
fn mounts(grants: &[Resolved]) -> (MountAttr, Vec<Bind>) {
    let root = attrs_at("/", grants);
    let mut targets: Vec<(&str, (u64, u64))> = grants
        .iter()
        .filter(|r| (r.rights.write && !r.device) || r.rights.exec)
        .map(|r| (r.path.as_str(), r.id))
        .filter(|(p, _)| *p != "/")
        .collect();
    targets.sort_by_key(|(p, _)| (p.matches('/').count(), *p));
    targets.dedup_by_key(|(p, _)| *p);
    let mut binds: Vec<(String, MountAttr, (u64, u64))> = Vec::new();
    for (t, id) in targets {
        let attr = attrs_at(t, grants);
        let enclosing = binds
            .iter()
            .rev()
            .find(|(p, _, _)| below(t, p))
            .map_or(root, |(_, a, _)| *a);
        if (attr.attr_set, attr.attr_clr) == (enclosing.attr_set, enclosing.attr_clr) {
            continue;
        }
        binds.push((t.to_owned(), attr, id));
    }
    let binds = binds
        .into_iter()
        .filter_map(|(p, attr, id)| CString::new(p).ok().map(|path| Bind { path, attr, id }))
        .collect();
    (root, binds)
}

/// The running kernel's Landlock ABI version (`landlock_create_ruleset` with
/// `LANDLOCK_CREATE_RULESET_VERSION`), or why there is none.
///
/// # Errors
/// The errno: `ENOSYS` (not built in), `EOPNOTSUPP` (built in, not enabled at boot).
pub fn abi_version() -> io::Result<u32> {
    // SAFETY: the version query takes no attribute and returns an integer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as u32)
}

// `Access` is used through `AccessFs::from_all`.
const _: fn(ABI) -> BitFlags<AccessFs> = <AccessFs as Access>::from_all;
