//! The one driver of a [`Session`]: it sends each turn, remembers how the turns ended and
//! decides the session's outcome from them. `bee run`'s episodes
//! ([`crate::episode::run_episode`]), subagents ([`crate::agents`]) and the interactive
//! sessions of the inline REPL and the TUI (`app::conversation::Chat`, which adds the slash
//! commands) all drive their session through it, so an outcome is decided in one place.

use super::{Finished, Interrupt, Session, SessionError, TurnEnd};
use crate::records::{LimitKind, Outcome, SuccessCheck};

/// A session and what its turns so far decided.
#[derive(Debug)]
pub struct Controller<'a> {
    session: Session<'a>,
    /// A limit of the session (not one call's output budget) ended a turn: every later turn
    /// ends the same way, so the session's outcome is `limit`.
    limited: bool,
    /// How the last turn ended; `None` before the first.
    last: Option<TurnEnd>,
}

impl<'a> Controller<'a> {
    /// Drives `session`, which has run no turn yet.
    #[must_use]
    pub fn new(session: Session<'a>) -> Self {
        Self {
            session,
            limited: false,
            last: None,
        }
    }

    /// Sends `text` as the user's message and runs the turn ([`Session::send`]).
    ///
    /// # Errors
    /// [`SessionError`] when an event cannot be recorded; the session stops there.
    pub fn send(&mut self, text: &str, interrupt: &Interrupt) -> Result<TurnEnd, SessionError> {
        let end = self.session.send(text, interrupt)?;
        self.limited |=
            matches!(&end, TurnEnd::Limit(hit) if hit.limit != LimitKind::MaxOutputTokens);
        self.last = Some(end.clone());
        Ok(end)
    }

    /// The session, for what it shows (totals, transcript, last answer).
    #[must_use]
    pub fn session(&self) -> &Session<'a> {
        &self.session
    }

    /// The session, for what is added between turns (context, instructions, a cleared
    /// conversation).
    pub fn session_mut(&mut self) -> &mut Session<'a> {
        &mut self.session
    }

    /// The outcome of a task — one message and its turn (an episode, a subagent): how that
    /// turn ended, where a turn the model ended itself is `done` (an episode's success
    /// check decides `passed` or `failed`; a subagent has `ended`).
    #[must_use]
    pub fn task_outcome(&self, done: Outcome) -> Outcome {
        match &self.last {
            Some(TurnEnd::Done) => done,
            Some(TurnEnd::Limit(_)) => Outcome::Limit,
            Some(TurnEnd::Provider(_)) => Outcome::ProviderError,
            Some(TurnEnd::Refused(_)) => Outcome::Refused,
            Some(TurnEnd::Interrupted) | None => Outcome::Interrupted,
        }
    }

    /// The outcome of a conversation of many turns (the REPL, the TUI): `limit` once a
    /// limit of the session ended a turn, otherwise `ended` — a refusal, a provider failure
    /// or an interrupt ends one turn, not the conversation.
    #[must_use]
    pub fn conversation_outcome(&self) -> Outcome {
        if self.limited {
            Outcome::Limit
        } else {
            Outcome::Ended
        }
    }

    /// Ends the session with `outcome` and the success check's result
    /// ([`Session::finish`]).
    ///
    /// # Errors
    /// [`SessionError`] when the transcript refuses the last event.
    pub fn finish(
        self,
        outcome: Outcome,
        check: Option<SuccessCheck>,
    ) -> Result<Finished, SessionError> {
        self.session.finish(outcome, check)
    }
}
