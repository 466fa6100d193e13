//! The one exit-status type of every command, following `sysexits.h` (BSD, also shipped by
//! glibc) where a status has a `sysexits` meaning.
//!
//! Every command returns an [`Exit`] through `main`; the status is chosen by cause, never by
//! command: a file that does not exist is 66 wherever it is named, one that exists but cannot
//! be read 77, one that is read but refused 65 ([`Exit::of_read`], [`Exit::of_file`],
//! [`Exit::of_policy`]). The table in `docs/exit-status.md` lists every status; the tests in
//! `tests/exit_status.rs` run each command with each failure.

use std::io::ErrorKind;
use std::process::ExitCode;

use bee_core::PolicyError;

use crate::config::FileError;
use crate::episode::EpisodeReport;
use crate::provider::ErrorCategory;
use crate::records::Outcome;

/// How a command ended. [`Exit::code`] is the process status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exit {
    /// Success: the command did what was asked; every episode passed (0).
    Ok,
    /// An episode's success check failed (1).
    Failed,
    /// The model refused an episode's task, or a content filter stopped its answer (2).
    ModelRefused,
    /// A hard limit (turns, tokens, wall time, cost, an answer cut off at the output limit)
    /// ended an episode (3).
    Limit,
    /// `EX_USAGE` (64): the command line was wrong (bad flags; no policy and no `--host`;
    /// both).
    Usage,
    /// `EX_DATAERR` (65): the input was read but refused (an invalid policy, scenario,
    /// provider or configuration file, a failed attenuation proof, a kernel that cannot enforce
    /// for `bee check`).
    DataErr,
    /// `EX_NOINPUT` (66): an input file or directory does not exist.
    NoInput,
    /// `EX_UNAVAILABLE` (69): a service bee needs is missing (enforcement on this kernel).
    Unavailable,
    /// `EX_SOFTWARE` (70): an internal error in bee, or records that could not be written.
    Software,
    /// `EX_CANTCREAT` (73): an output file or directory cannot be created (it exists, or
    /// another process is writing it).
    CantCreat,
    /// `EX_IOERR` (74): output could not be written (a full disk, a directory in the way).
    IoErr,
    /// A provider error other than authentication, by category: 75 (`EX_TEMPFAIL`) for
    /// `rate-limit` and `overloaded`, 74 (`EX_IOERR`) for `server` and `network`, 76
    /// (`EX_PROTOCOL`) for `protocol`, 78 (`EX_CONFIG`) for `not-found`.
    Provider(ErrorCategory),
    /// `EX_NOPERM` (77): the provider's API key is missing or was refused.
    Auth,
    /// `EX_NOPERM` (77): permission denied: a file exists but cannot be read, or enforcement
    /// would work but this process lacks a privilege it needs.
    NoPerm,
    /// Interrupted by Ctrl-C or SIGTERM (130, the shell's 128 + SIGINT).
    Interrupted,
    /// The status of the command `bee exec` ran (its own exit status, or 128 + the signal
    /// that killed it).
    Child(u8),
}

impl Exit {
    /// The process exit status.
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::Failed => 1,
            Self::ModelRefused => 2,
            Self::Limit => 3,
            Self::Usage => 64,
            Self::DataErr => 65,
            Self::NoInput => 66,
            Self::Unavailable => 69,
            Self::Software => 70,
            Self::CantCreat => 73,
            Self::IoErr => 74,
            Self::Provider(category) => match category {
                ErrorCategory::RateLimit | ErrorCategory::Overloaded => 75,
                ErrorCategory::Server | ErrorCategory::Network => 74,
                ErrorCategory::Protocol => 76,
                ErrorCategory::NotFound => 78,
                ErrorCategory::Auth => 77,
            },
            Self::Auth | Self::NoPerm => 77,
            Self::Interrupted => 130,
            Self::Child(code) => code,
        }
    }

    /// The status of a process `signal` ended, as the shells report it (128 + the signal
    /// number): `bee exec`'s when a signal ended it and raising that signal again could not
    /// (`exec::ending`).
    #[must_use]
    pub fn of_signal(signal: i32) -> Self {
        Self::Child(u8::try_from(128 + signal).unwrap_or(u8::MAX))
    }

    /// The status a `bee serve` refusal carries (its `ErrorBody::status`): the sysexits
    /// values as themselves, anything else as an internal failure (70).
    #[must_use]
    pub fn of_service(status: u8) -> Self {
        match status {
            64 => Self::Usage,
            65 => Self::DataErr,
            66 => Self::NoInput,
            69 => Self::Unavailable,
            73 => Self::CantCreat,
            77 => Self::NoPerm,
            _ => Self::Software,
        }
    }

    /// The status of an input that could not be read, by the I/O error's kind: 77 when it
    /// exists but may not be read, 66 otherwise (it does not exist, is a directory, …).
    #[must_use]
    pub fn of_read(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::PermissionDenied => Self::NoPerm,
            _ => Self::NoInput,
        }
    }

    /// The status of a configuration, scenario or provider file that was refused: by
    /// [`Exit::of_read`] when it could not be read, 65 when it was read but is invalid.
    #[must_use]
    pub fn of_file(e: &FileError) -> Self {
        match e {
            FileError::Read { source, .. } => Self::of_read(source.kind()),
            FileError::Invalid(_) => Self::DataErr,
        }
    }

    /// The status of a policy that did not compile: by [`Exit::of_read`] when it, or a file
    /// it includes, could not be read; 65 when it was read but is invalid.
    #[must_use]
    pub fn of_policy(e: &PolicyError) -> Self {
        match e {
            PolicyError::Read { source, .. } => Self::of_read(source.kind()),
            // An included file that could not be read fails as the policy's own would.
            PolicyError::Invalid(d) => d.unread.map_or(Self::DataErr, Self::of_read),
        }
    }

    /// The status of one episode, from its outcome.
    #[must_use]
    pub fn of_episode(report: &EpisodeReport) -> Self {
        Self::of_outcome(
            report.outcome,
            report.provider_error.as_ref().map(|p| p.category),
        )
    }

    /// The status of an episode that ended as `outcome` (with the provider error's category,
    /// when it ended on one).
    #[must_use]
    pub fn of_outcome(outcome: Outcome, provider: Option<ErrorCategory>) -> Self {
        match outcome {
            // An interactive session the user ended did what was asked of it.
            Outcome::Passed | Outcome::Ended => Self::Ok,
            Outcome::Failed => Self::Failed,
            Outcome::Limit => Self::Limit,
            Outcome::Refused => Self::ModelRefused,
            Outcome::Interrupted => Self::Interrupted,
            Outcome::EnforcementUnavailable => Self::Unavailable,
            Outcome::ProviderError => match provider {
                Some(ErrorCategory::Auth) => Self::Auth,
                Some(category) => Self::Provider(category),
                None => Self::Provider(ErrorCategory::Protocol),
            },
        }
    }

    /// The status of a run whose episodes ended as `statuses` (0 when there were none): the
    /// worst of them, in the order of the table in `docs/exit-status.md`.
    #[must_use]
    pub fn of_run(statuses: impl IntoIterator<Item = Self>) -> Self {
        statuses
            .into_iter()
            .max_by_key(|s| s.rank())
            .unwrap_or(Self::Ok)
    }

    /// How bad it is, for choosing one status for several episodes (higher wins).
    fn rank(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::Failed => 1,
            Self::ModelRefused => 2,
            Self::Limit => 3,
            Self::Software | Self::IoErr | Self::Child(_) => 4,
            Self::Provider(_) => 5,
            Self::Auth => 6,
            Self::Unavailable => 7,
            Self::Interrupted => 8,
            Self::Usage | Self::DataErr | Self::NoInput | Self::CantCreat | Self::NoPerm => 9,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_chooses_the_status() {
        assert_eq!(Exit::of_read(ErrorKind::NotFound), Exit::NoInput);
        assert_eq!(Exit::of_read(ErrorKind::PermissionDenied), Exit::NoPerm);
        assert_eq!(Exit::of_read(ErrorKind::IsADirectory), Exit::NoInput);
        assert_eq!(Exit::NoPerm.code(), 77);
        assert_eq!(Exit::Auth.code(), 77);
        assert_eq!(Exit::Child(143).code(), 143);
        assert_eq!(Exit::of_signal(libc::SIGTERM).code(), 143);
    }

    #[test]
    fn a_run_ends_with_its_worst_episode() {
        assert_eq!(Exit::of_run([]), Exit::Ok);
        assert_eq!(
            Exit::of_run([Exit::Ok, Exit::Limit, Exit::Failed]),
            Exit::Limit
        );
        assert_eq!(
            Exit::of_run([Exit::Provider(ErrorCategory::Server), Exit::Interrupted]),
            Exit::Interrupted
        );
    }
}
