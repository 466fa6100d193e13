//! Pinned executables: `(state, dev, ino)` entries of the exec-pin map.

use std::collections::BTreeMap;

use bee_common::ExecPinKey;
use bee_core::compiled::{ExecRule, FileId};

use super::PlanError;

/// Converts `stat(2)`'s `st_dev` (glibc's 64-bit encoding) to the kernel's internal `dev_t`,
/// `MAJOR << 20 | MINOR` (`MKDEV`, `MINORBITS = 20` in `include/linux/kdev_t.h`), which is what
/// `inode->i_sb->s_dev` holds.
///
/// glibc splits the number as `major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)` and
/// `minor = (dev & 0xff) | ((dev >> 12) & !0xff)` (`gnu_dev_major`/`gnu_dev_minor`,
/// `sysdeps/unix/sysv/linux/sys/sysmacros.h`). Returns `None` if the major number does not fit
/// in 12 bits or the minor in 20, which the kernel's `dev_t` cannot represent.
pub fn kernel_dev(st_dev: u64) -> Option<u32> {
    let major = ((st_dev >> 8) & 0xfff) | ((st_dev >> 32) & !0xfff);
    let minor = (st_dev & 0xff) | ((st_dev >> 12) & !0xff);
    if major >= 1 << 12 || minor >= 1 << 20 {
        return None;
    }
    u32::try_from(major << 20 | minor).ok()
}

/// The exec-pin entries for `rules` (`exec` rules, by index) given the plan-local state each
/// pinned rule's path ends in. The values are the policy id (0 until relocation).
pub(crate) fn pins(
    rules: &[&ExecRule],
    ends: &BTreeMap<usize, u32>,
) -> Result<BTreeMap<ExecPinKey, u32>, PlanError> {
    let mut out = BTreeMap::new();
    for (&index, &state) in ends {
        let Some(rule) = rules.get(index) else {
            continue;
        };
        let Some(FileId { dev, ino }) = rule.pin else {
            continue;
        };
        let dev = kernel_dev(dev).ok_or_else(|| PlanError::DeviceNotEncodable {
            origin: rule.origin.clone(),
            dev,
        })?;
        out.insert(ExecPinKey { state, dev, ino }, 0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_glibc_dev_to_kernel_dev() {
        // makedev(8, 1) = 0x801: /dev/sda1.
        assert_eq!(kernel_dev(0x801), Some(8 << 20 | 1));
        // makedev(0, 42): an anonymous device (tmpfs, overlayfs).
        assert_eq!(kernel_dev(42), Some(42));
        // makedev(259, 0x12345): major above 255 and minor above 255 use the high fields.
        let (major, minor) = (259u64, 0x12345u64);
        let glibc = (minor & 0xff)
            | ((major & 0xfff) << 8)
            | ((minor & !0xff) << 12)
            | ((major & !0xfff) << 32);
        assert_eq!(kernel_dev(glibc), Some((259 << 20) | 0x12345));
        // Majors of 4096 and above, minors of 2^20 and above don't fit the kernel's dev_t.
        assert_eq!(kernel_dev(4096 << 32), None);
        assert_eq!(kernel_dev(1 << 40), None);
    }
}
