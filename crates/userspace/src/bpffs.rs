//! The BPF file system at its standard mount point, where bee pins its maps and links.
//!
//! systemd mounts bpffs at `/sys/fs/bpf` at boot; hosts without it (a minimal VM image, a
//! container-less init, some CI runners) leave `/sys/fs/bpf` an empty sysfs directory, where
//! nothing can be made. [`ensure_mounted`] mounts it there, as `bpftool` does, when it is
//! missing: the same mount systemd would have made (`nosuid,nodev,noexec,mode=0700`), at the
//! same place, and nowhere else.

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

/// Where bee processes take turns to mount bpffs: a file only root can open (`/run` is
/// root's), so no other user can hold the lock and stall every bee that loads the engine.
const LOCK: &str = "/run/bee-bpffs.lock";

/// Makes sure bpffs is mounted at `dir`'s mount point: where `dir` lies below
/// [`MOUNT_POINT`] and that is not bpffs yet, mounts it there as systemd does
/// (`mount -t bpf bpf /sys/fs/bpf -o nosuid,nodev,noexec,mode=0700`). A `dir` elsewhere is
/// left to whoever chose it. Returns whether this call mounted it.
///
/// # Errors
/// The lock file's error (`/run` missing or not writable); `ENOTDIR` when the mount point
/// is not a directory (a symbolic link is not followed); `mount(2)`'s error (`EPERM`
/// without `CAP_SYS_ADMIN`, `ENODEV` for a kernel without bpffs).
pub fn ensure_mounted(dir: &Path) -> io::Result<bool> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let point = Path::new(MOUNT_POINT);
    if !dir.starts_with(point) || is_bpffs(point).unwrap_or(false) {
        return Ok(false);
    }
    // Two bee processes that both found it missing would stack two mounts, and the pins of
    // the first (the network gate's shared port map) would be hidden from every later one:
    // so they take turns, and look again once it is theirs.
    let held = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(LOCK)?;
    // SAFETY: `flock` on a descriptor this function owns.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if is_bpffs(point)? {
        return Ok(false);
    }
    if !std::fs::symlink_metadata(point)?.is_dir() {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    // SAFETY: every argument is a NUL-terminated string literal.
    let rc = unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            c"/sys/fs/bpf".as_ptr(),
            c"bpf".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
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
