//! The directories between a writable tree's root and a path the scope's mounts cover
//! inside it (a carve-out, a protected path, an `exec.deny` path), each bound onto itself
//! with the attributes it has anyway.
//!
//! A mount covers an inode, not a name: without these binds a scope that may write the
//! tree could rename the covered path's parent (`mv sub sub2`), taking the mount along, and
//! make a fresh `sub/.git` — or a fresh audit file at the name bee appends to — with nothing
//! over it. A mount point in the caller's mount namespace cannot be renamed or removed
//! (`rename(2)` and `rmdir(2)`: `EBUSY`), so each directory on the way is made one. The
//! covered path itself is a mount point already.

use std::ffi::CString;
use std::io;
use std::os::unix::fs::MetadataExt as _;

use super::{Bind, MaskMount, Resolved, attrs_at, below, lookup};

/// The binds that hold every directory strictly between a writable directory grant's root
/// and each of `masks`, with the attributes [`attrs_at`] gives them (what the enclosing
/// grant's bind gives them already, so nothing else changes).
///
/// # Errors
/// A lookup that failed for another reason than a missing path; and a directory on the way
/// that is gone or no longer a directory since the mask was found (refused rather than left
/// movable).
pub(super) fn ancestors(masks: &[MaskMount], grants: &[Resolved]) -> io::Result<Vec<Bind>> {
    let mut paths: Vec<String> = Vec::new();
    for m in masks {
        let Ok(path) = m.path.to_str() else {
            continue;
        };
        let mut at = path;
        while let Some(cut) = at.rfind('/') {
            at = &path[..cut];
            if at.is_empty() {
                break;
            }
            if grants.iter().any(|g| writable_below(g, at)) {
                paths.push(at.to_owned());
            }
        }
    }
    paths.sort();
    paths.dedup();
    let mut binds = Vec::with_capacity(paths.len());
    for path in paths {
        let found = lookup(&path)?.filter(|f| f.meta.is_dir()).ok_or_else(|| {
            io::Error::other(format!(
                "{path}: a directory above a covered path is gone or changed since it was found"
            ))
        })?;
        let attr = attrs_at(&path, grants);
        let id = (found.meta.dev(), found.meta.ino());
        let path = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        binds.push(Bind { path, attr, id });
    }
    Ok(binds)
}

/// Whether `dir` lies strictly below the root of `grant`, a directory the scope may write.
fn writable_below(grant: &Resolved, dir: &str) -> bool {
    grant.dir && grant.rights.write && !grant.device && below(dir, &grant.path)
}

/// `binds` and `held` as one list, shallowest first, each path once (a grant's own bind
/// wins over a hold of the same directory): the child applies them in order, and a bind
/// made after a deeper one would give that one its attributes (the binds are recursive).
pub(super) fn merge(mut binds: Vec<Bind>, held: Vec<Bind>) -> Vec<Bind> {
    for h in held {
        if !binds.iter().any(|b| b.path == h.path) {
            binds.push(h);
        }
    }
    binds.sort_by_key(|b| {
        let bytes = b.path.as_bytes();
        (bytes.iter().filter(|&&c| c == b'/').count(), bytes.to_vec())
    });
    binds
}
