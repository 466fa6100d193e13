//! How a run in the sandbox ended, and the [`ToolState`] that follows: the one conversion of
//! a [`RunOutput`] to a tool's state, for the shell, the tool runner and the success check.

use super::ToolState;
use crate::sandbox::RunOutput;

/// How a run in the sandbox ended, as far as its tool's state goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// It was stopped early (the user interrupted) and killed with its cgroup.
    Interrupted,
    /// It ran out of time and was killed with its process group.
    TimedOut,
    /// It exited by itself, with this exit code (128 + the signal for a signal).
    Exited(i32),
}

impl RunEnd {
    /// How `run` ended: a stop before a timeout, a timeout before the exit code.
    pub(crate) fn of(run: &RunOutput) -> Self {
        if run.interrupted {
            Self::Interrupted
        } else if run.timed_out {
            Self::TimedOut
        } else {
            Self::Exited(run.exit_code())
        }
    }

    /// The tool's state. A run that did not finish (stopped, or timed out) started and did
    /// not finish, so it `failed`. A run that exited is `answered`'s state when the tool
    /// answers for itself (the tool runner's [`RunnerResponse`](super::RunnerResponse)), and
    /// otherwise (a command) `completed` with exit code 0 and `failed` with any other.
    pub(crate) fn state(self, answered: Option<ToolState>) -> ToolState {
        match (self, answered) {
            (Self::Interrupted | Self::TimedOut, _) => ToolState::Failed,
            (Self::Exited(_), Some(state)) => state,
            (Self::Exited(0), None) => ToolState::Completed,
            (Self::Exited(_), None) => ToolState::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_exit_decides_and_a_command_completes_with_zero() {
        assert_eq!(RunEnd::Interrupted.state(None), ToolState::Failed);
        assert_eq!(
            RunEnd::TimedOut.state(Some(ToolState::Completed)),
            ToolState::Failed
        );
        assert_eq!(RunEnd::Exited(0).state(None), ToolState::Completed);
        assert_eq!(RunEnd::Exited(137).state(None), ToolState::Failed);
        assert_eq!(
            RunEnd::Exited(0).state(Some(ToolState::CouldNotRun)),
            ToolState::CouldNotRun
        );
    }
}
