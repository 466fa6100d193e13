//! What an unpacked kernel package holds that a guest needs: the bzImage ([`find_vmlinuz`])
//! and the overlayfs module ([`find_overlay`]).

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result, io_err};

/// Finds the bzImage in an unpacked package: `boot/vmlinuz-*`, or, in Debian's split
/// packages (from 6.19 on), `usr/lib/modules/*/vmlinuz`.
pub(super) fn find_vmlinuz(dir: &Path) -> Result<PathBuf> {
    let boot = dir.join("boot");
    if let Ok(entries) = fs::read_dir(&boot) {
        for entry in entries {
            let entry = entry.map_err(io_err("read directory", &boot))?;
            if entry.file_name().to_string_lossy().starts_with("vmlinuz-") {
                return Ok(entry.path());
            }
        }
    }
    let modules = dir.join("usr/lib/modules");
    if let Ok(entries) = fs::read_dir(&modules) {
        for entry in entries {
            let entry = entry.map_err(io_err("read directory", &modules))?;
            let vmlinuz = entry.path().join("vmlinuz");
            if vmlinuz.is_file() {
                return Ok(vmlinuz);
            }
        }
    }
    Err(Error::NoVmlinuz {
        dir: dir.to_owned(),
    })
}

/// Where a package holds the overlayfs module, below `lib/modules/RELEASE/kernel/`.
const OVERLAY_MODULE: &str = "fs/overlayfs/overlay.ko";

/// Where a package holds the binfmt_misc module, below `lib/modules/RELEASE/kernel/`.
const BINFMT_MISC_MODULE: &str = "fs/binfmt_misc.ko";

/// Finds the binfmt_misc module in an unpacked package, as [`find_overlay`] finds overlayfs's;
/// `None` where the package has none (a kernel that builds it in, or leaves it out).
pub(super) fn find_binfmt_misc(dir: &Path) -> Option<PathBuf> {
    find_module(dir, BINFMT_MISC_MODULE)
}

/// `lib/modules/*/kernel/REL` or `usr/lib/modules/*/kernel/REL` in `dir`, as `REL` or `REL.xz`.
fn find_module(dir: &Path, rel: &str) -> Option<PathBuf> {
    for base in ["lib/modules", "usr/lib/modules"] {
        let Ok(entries) = fs::read_dir(dir.join(base)) else {
            continue;
        };
        for entry in entries.flatten() {
            for suffix in ["", ".xz"] {
                let module = entry.path().join("kernel").join(format!("{rel}{suffix}"));
                if module.is_file() {
                    return Some(module);
                }
            }
        }
    }
    None
}

/// Finds the overlayfs module in an unpacked package: `lib/modules/*/kernel/fs/overlayfs/`
/// or, in Debian 13's packages, `usr/lib/modules/*/…`, as `overlay.ko` or `overlay.ko.xz`.
pub(super) fn find_overlay(dir: &Path) -> Result<PathBuf> {
    find_module(dir, OVERLAY_MODULE).ok_or_else(|| Error::NoOverlayModule {
        dir: dir.to_owned(),
    })
}
