//! The invoking user: the one who ran bee, even through `sudo`.

use std::path::PathBuf;

use nix::unistd::{Uid, User};

/// The invoking user's home directory, for `~` in policies.
///
/// When bee runs as root through `sudo`, that is the home of `SUDO_UID` (from the user
/// database), not root's; otherwise `$HOME`, falling back to the user database.
pub fn invoking_home() -> Option<PathBuf> {
    let sudo_uid = std::env::var("SUDO_UID").ok().and_then(|u| u.parse().ok());
    if let (true, Some(uid)) = (Uid::effective().is_root(), sudo_uid) {
        return User::from_uid(Uid::from_raw(uid))
            .ok()
            .flatten()
            .map(|u| u.dir);
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| User::from_uid(Uid::current()).ok().flatten().map(|u| u.dir))
}
