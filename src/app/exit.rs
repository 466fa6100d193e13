//! Process exit statuses, following `sysexits.h` (BSD, also shipped by glibc).

use std::process::ExitCode;

/// An exit status with its `sysexits.h` meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// `EX_USAGE`: the command line was wrong.
    Usage = 64,
    /// `EX_DATAERR`: the input was read but refused (an invalid policy, a failed attenuation
    /// proof, a kernel that cannot enforce for `bee check`).
    DataErr = 65,
    /// `EX_NOINPUT`: an input file does not exist or cannot be read.
    NoInput = 66,
    /// `EX_UNAVAILABLE`: a service bee needs is missing (e.g. enforcement on this kernel).
    Unavailable = 69,
    /// `EX_SOFTWARE`: an internal error in bee.
    Software = 70,
    /// `EX_CANTCREAT`: an output file or directory cannot be created (it exists, or another
    /// process is writing it).
    CantCreat = 73,
    /// `EX_IOERR`: output could not be written (a full disk, a directory in the way).
    IoErr = 74,
    /// `EX_NOPERM`: permission denied.
    NoPerm = 77,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}
