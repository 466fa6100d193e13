//! Waiting for an RCU grace period from user space: until every LSM program that was running
//! when the wait began has returned.
//!
//! bee's programs are non-sleepable BPF LSM programs; the kernel runs each one inside an RCU
//! read-side critical section (the trampoline's `__bpf_prog_enter` takes `rcu_read_lock`). A
//! map-element pointer a program got from `bpf_map_lookup_elem` is only guaranteed to stay
//! what it was for that section, and bee_scopes (a preallocated hash map) hands an element
//! that was replaced to the very next update of an existing key on the same CPU. So before the
//! engine switches a scope entry while a replaced one may still be read, or frees the entries a
//! replaced policy's checks may still be walking, it waits for a grace period here.
//!
//! There is no system call that only waits for a grace period, but updating a map of maps is
//! documented to do so: `kernel/bpf/syscall.c`, `maybe_wait_bpf_programs()` ("Wait for any
//! running non-sleepable BPF programs to complete so that userspace, when we return to it,
//! knows that all non-sleepable programs that could be running use the new map value"),
//! `synchronize_rcu()` — or `synchronize_rcu_expedited()`, the same guarantee sooner, in
//! kernels that took the 2025 patch that made it so — after every `BPF_MAP_UPDATE_ELEM` on a
//! `BPF_MAP_TYPE_ARRAY_OF_MAPS`. [`Grace`] owns such a map of one entry, private to this
//! process (no program references it), and an inner array to store in it.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_ARRAY_OF_MAPS: u32 = 12;
/// `union bpf_attr` as bytes: larger than every field used, zero beyond them (the kernel
/// accepts a shorter or longer attribute as long as the bytes it does not know are zero).
const ATTR: usize = 128;

/// A private map of maps whose update waits for an RCU grace period. See the module docs.
#[derive(Debug)]
pub(super) struct Grace {
    outer: OwnedFd,
    inner: OwnedFd,
}

fn bpf(cmd: libc::c_long, attr: &mut [u8; ATTR]) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a valid, writable `union bpf_attr` of `ATTR` bytes for this command
    // (the fields the command reads are set, the rest zero).
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), ATTR as libc::c_uint) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn put_u32(attr: &mut [u8; ATTR], at: usize, v: u32) {
    attr[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put_u64(attr: &mut [u8; ATTR], at: usize, v: u64) {
    attr[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// `BPF_MAP_CREATE` of a map with 4-byte keys and values and one entry.
fn create(map_type: u32, inner: Option<&OwnedFd>) -> io::Result<OwnedFd> {
    let mut attr = [0u8; ATTR];
    put_u32(&mut attr, 0, map_type); // map_type
    put_u32(&mut attr, 4, 4); // key_size
    put_u32(&mut attr, 8, 4); // value_size
    put_u32(&mut attr, 12, 1); // max_entries
    if let Some(inner) = inner {
        put_u32(&mut attr, 20, inner.as_raw_fd() as u32); // inner_map_fd
    }
    let fd = bpf(BPF_MAP_CREATE, &mut attr)?;
    let fd = i32::try_from(fd).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    // SAFETY: BPF_MAP_CREATE returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Grace {
    /// Creates the two maps (needs what creating any map needs: `CAP_BPF`).
    ///
    /// # Errors
    /// The `BPF_MAP_CREATE` error.
    pub(super) fn new() -> io::Result<Self> {
        let inner = create(BPF_MAP_TYPE_ARRAY, None)?;
        let outer = create(BPF_MAP_TYPE_ARRAY_OF_MAPS, Some(&inner))?;
        Ok(Self { outer, inner })
    }

    /// Returns once every BPF program that was running when it was called has returned: one
    /// `BPF_MAP_UPDATE_ELEM` of the map of maps.
    ///
    /// # Errors
    /// The `BPF_MAP_UPDATE_ELEM` error (then no grace period is known to have passed).
    pub(super) fn wait(&self) -> io::Result<()> {
        let key: u32 = 0;
        let value: u32 = self.inner.as_raw_fd() as u32;
        let mut attr = [0u8; ATTR];
        put_u32(&mut attr, 0, self.outer.as_raw_fd() as u32); // map_fd
        put_u64(&mut attr, 8, std::ptr::from_ref(&key) as u64); // key
        put_u64(&mut attr, 16, std::ptr::from_ref(&value) as u64); // value
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
    }
}

/// Deleted cgroups remembered until a grace period ends; past this many, an uninstall waits for
/// one itself so that the set stays small.
const DELETED_MAX: usize = 1024;

/// Grace periods since the last switch of a `bee_scopes` element ([`super::Engine::replace`]),
/// and since the last deletions ([`super::Engine::uninstall`]).
///
/// A switch counts for every write. The element it replaces becomes the CPU's spare, which the
/// next switch on that CPU overwrites, and a check of the *live* scope may still be reading it.
/// A deleted element goes back to the free list, but the only checks that can still hold it are
/// those of the cgroup whose scope was removed, which from then on is not confined at all; an
/// insert for another cgroup may reuse it at once (`docs/enforcement.md`, "Live policy
/// changes"). Only an insert for that same cgroup waits, so that none of its checks can mix
/// the deleted entry with the new one.
#[derive(Debug)]
pub(super) struct Graces {
    grace: Grace,
    /// Switches so far.
    switched: u64,
    /// The switches a completed grace period covers: every switch numbered up to it happened
    /// before a grace period began that has since ended.
    covered: u64,
    /// Cgroups whose scope entry was deleted since the last grace period this engine waited
    /// for began.
    deleted: BTreeSet<u64>,
}

impl Graces {
    /// The maps ([`Grace::new`]); no switch or deletion yet.
    ///
    /// # Errors
    /// The `BPF_MAP_CREATE` error.
    pub(super) fn new() -> io::Result<Self> {
        Ok(Self {
            grace: Grace::new()?,
            switched: 0,
            covered: 0,
            deleted: BTreeSet::new(),
        })
    }

    /// A `bee_scopes` element was switched: the element it replaced may still be read.
    pub(super) fn switched(&mut self) {
        self.switched += 1;
    }

    /// The scope entry of `cgroup_id` was deleted. Waits for a grace period when more than
    /// [`DELETED_MAX`] deletions are remembered; if that wait fails, they stay remembered (an
    /// insert for one of them then waits itself).
    pub(super) fn deleted(&mut self, cgroup_id: u64) {
        self.deleted.insert(cgroup_id);
        if self.deleted.len() > DELETED_MAX {
            let _ = self.wait();
        }
    }

    /// Returns once a grace period has ended that began after the last switch and, for an
    /// insert of `inserting`'s entry, after the last deletion of it: at once when one already
    /// has, else after waiting for one here.
    ///
    /// # Errors
    /// The `BPF_MAP_UPDATE_ELEM` error of the wait (then nothing counts as covered).
    pub(super) fn settle(&mut self, inserting: Option<u64>) -> io::Result<()> {
        let reinserted = inserting.is_some_and(|c| self.deleted.contains(&c));
        if self.covered >= self.switched && !reinserted {
            return Ok(());
        }
        self.wait()
    }

    fn wait(&mut self) -> io::Result<()> {
        let (switched, deleted) = (self.switched, std::mem::take(&mut self.deleted));
        match self.grace.wait() {
            Ok(()) => {
                self.covered = switched;
                Ok(())
            }
            Err(e) => {
                self.deleted = deleted;
                Err(e)
            }
        }
    }
}
