//! The BPF file system at its standard mount point, where bee pins its maps and links.
//!
//! systemd mounts bpffs at `/sys/fs/bpf` at boot; hosts without it (a minimal VM image, a
//! container-less init, some CI runners) leave `/sys/fs/bpf` an empty sysfs directory, where
//! nothing can be made. [`ensure_mounted`] mounts it there, as `bpftool` does, when it is
//! missing: the same mount systemd would have made (`mode=0700`), at the same place, and
//! nowhere else.

use std::io;
use std::path::Path;

/// The standard bpffs mount point.
pub const MOUNT_POINT: &str = "/sys/fs/bpf";

/// `statfs(2)`'s `f_type` for bpffs (`BPF_FS_MAGIC`, include/uapi/linux/magic.h).
const BPF_FS_MAGIC: u32 = 0xcafe_4a11;

/// Whether `dir` is on the BPF file system.
///
/// # Errors
/// `statfs(2)`'s error (`ENOENT` when `dir` does not exist).
pub fn is_bpffs(dir: &Path) -> io::Result<bool> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `path` is NUL-terminated and `buf` is a valid `statfs` to write into.
    if unsafe { libc::statfs(path.as_ptr(), buf.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `statfs` returned 0, so it filled `buf`.
    let f_type = unsafe { buf.assume_init() }.f_type;
    // `f_type`'s type differs between architectures (`i64` on x86-64, `u32` on some).
    Ok(i128::from(f_type) == i128::from(BPF_FS_MAGIC))
}

/// Makes sure bpffs is mounted at `dir`'s mount point: where `dir` lies below
/// [`MOUNT_POINT`] and that is not bpffs yet, mounts it there (`mount -t bpf bpf
/// /sys/fs/bpf -o mode=0700`). A `dir` elsewhere is left to whoever chose it. Returns whether
/// this call mounted it.
///
/// # Errors
/// `mount(2)`'s error (`EPERM` without `CAP_SYS_ADMIN`, `ENODEV` for a kernel without
/// bpffs).
pub fn ensure_mounted(dir: &Path) -> io::Result<bool> {
    let point = Path::new(MOUNT_POINT);
    if !dir.starts_with(point) || is_bpffs(point).unwrap_or(false) {
        return Ok(false);
    }
    // Two bee processes that both found it missing would stack two mounts, and the pins of
    // the first (the network gate's shared port map) would be hidden from every later one.
    // So the mount point's directory is locked and looked at again: a process that opened
    // it before the mount waits, then finds bpffs; one that opens it after locks the new
    // root, and finds bpffs.
    let held = std::fs::File::open(point)?;
    // SAFETY: `flock` on a descriptor this function owns.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if is_bpffs(point)? {
        return Ok(false);
    }
    // SAFETY: every argument is a NUL-terminated string literal.
    let rc = unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            c"/sys/fs/bpf".as_ptr(),
            c"bpf".as_ptr(),
            0,
            c"mode=0700".as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    drop(held);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_elsewhere_is_left_alone() {
        assert!(!ensure_mounted(Path::new("/tmp/not-bpffs")).unwrap_or(true));
    }

    #[test]
    fn a_missing_directory_is_an_error_not_an_answer() {
        assert!(is_bpffs(Path::new("/does/not/exist")).is_err());
        assert!(!is_bpffs(Path::new("/")).unwrap_or(true));
    }
}
