//! The small pieces every helper action uses: C strings, errno, and the values some actions
//! write.
#![allow(dead_code, reason = "each test binary uses part of the support module")]

use std::ffi::{CStr, CString};

pub(super) fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

pub(super) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

pub(super) fn check(r: i64) -> i32 {
    if r < 0 { errno() } else { 0 }
}

/// `execveat(dirfd, path, ["busybox", "true"], [], flags)`; returns the errno of a failed call
/// (a successful one does not return).
pub(super) fn execveat_true(dirfd: i32, path: &CStr, flags: i32) -> i32 {
    let argv = [cstr("busybox"), cstr("true")];
    let argv_p = [argv[0].as_ptr(), argv[1].as_ptr(), std::ptr::null()];
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: every pointer is to a NUL-terminated string or a NULL-terminated array that
    // lives until the call returns.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            dirfd,
            path.as_ptr(),
            argv_p.as_ptr(),
            envp.as_ptr(),
            flags,
        );
    }
    errno()
}

/// The POSIX access ACL's extended attribute.
pub const POSIX_ACL_ACCESS: &str = "system.posix_acl_access";

/// A value for the extended attribute `name`: a minimal POSIX ACL (u::rw-, g::r--, o::r--, as
/// setfacl writes it) for [`POSIX_ACL_ACCESS`], else `x`.
pub(super) fn xattr_value(name: &str) -> Vec<u8> {
    if name != POSIX_ACL_ACCESS {
        return b"x".to_vec();
    }
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm) in [(0x01u16, 6u16), (0x04, 4), (0x20, 4)] {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&u32::MAX.to_le_bytes());
    }
    v
}
