//! The interactive conversation's controller, under both screens: it starts the session
//! (with the project instructions), runs a turn for each message, answers the slash commands
//! about the set-up, holds a proposed `/allow` change until its answer, and finishes the
//! session with its outcome and closing line. The inline REPL and the TUI turn what a user
//! does into an [`Input`] and draw the [`Reply`]s; neither drives the session itself.

use std::sync::Arc;

use super::allow::{self, Pending};
use super::commands::{self, Answer, Shown};
use super::slash::Slash;
use super::{Prepared, TurnInterrupt, closing, loaded, project_instructions, write_summary};
use crate::records::Outcome;
use crate::session::{Controller, Session, SessionError, ToolExecutor, TurnEnd, Update};

/// What the user asked of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// A message: a turn with this text.
    Send(String),
    /// A slash command the session answers: `/skills`, `/skill NAME`, `/agents`, `/policy`,
    /// `/allow [N]`, `/clear`. (The others only draw, and each screen does them itself.)
    Command(Slash),
    /// The answer to the question last asked ([`Reply::Ask`]): yes or not.
    Answer(bool),
}

/// What the conversation answered, for the screen to draw.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    /// Lines to show.
    Shown(Vec<Shown>),
    /// `/skill NAME` put the skill's instructions (`text`) into the conversation.
    SkillLoaded {
        /// The skill's instructions.
        text: String,
        /// What to say about it.
        note: String,
    },
    /// A question to ask, answered with [`Input::Answer`]; any other input drops it.
    Ask(&'static str),
    /// The turn ended so.
    TurnEnded(TurnEnd),
    /// `/clear` forgot the conversation.
    Cleared,
}

/// An interactive session and what it is waiting for.
pub(crate) struct Chat<'a> {
    prepared: &'a Prepared,
    executor: &'a dyn ToolExecutor,
    controller: Controller<'a>,
    /// A proven `/allow` change waiting for the answer to its question.
    pending: Option<Pending>,
}

impl<'a> Chat<'a> {
    /// Starts the session `prepared` describes, its tools run by `executor` and every
    /// recorded step shown to `observer`, and puts the project instructions into it (`note`
    /// says what went wrong reading them). Returns the chat and the start line that names
    /// what was loaded.
    ///
    /// # Errors
    /// [`SessionError`] when the transcript cannot be created or written.
    pub(crate) fn start(
        prepared: &'a Prepared,
        executor: &'a dyn ToolExecutor,
        observer: &'a (dyn Fn(Update<'_>) + Sync),
        note: &dyn Fn(&str),
    ) -> Result<(Self, String), SessionError> {
        let mut session = Session::start(
            prepared.spec.clone(),
            prepared.model.clone(),
            executor,
            &prepared.records_dir,
            Some(Arc::clone(&prepared.store)),
            observer,
        )?;
        let instructions = project_instructions(&mut session, executor, note)?;
        let chat = Self {
            prepared,
            executor,
            controller: Controller::new(session),
            pending: None,
        };
        Ok((chat, loaded(&instructions, &prepared.skills)))
    }

    /// Answers one input; a message's turn runs under a fresh interrupt of `turns`. Any
    /// input but the answer drops a waiting question.
    ///
    /// # Errors
    /// [`SessionError`] when the transcript refuses an event; the session cannot go on.
    pub(crate) fn handle(
        &mut self,
        input: Input,
        turns: &TurnInterrupt,
    ) -> Result<Vec<Reply>, SessionError> {
        let waiting = self.pending.take();
        let replies = match input {
            Input::Send(text) => {
                let end = turns.turn(|interrupt| self.controller.send(&text, interrupt))?;
                write_summary(&self.prepared.run_dir);
                vec![Reply::TurnEnded(end)]
            }
            Input::Command(Slash::Allow(n)) => {
                let (shown, proposed) = allow::proposal(self.executor, n);
                let ask = proposed.is_some();
                self.pending = proposed;
                let mut replies = vec![Reply::Shown(shown)];
                if ask {
                    replies.push(Reply::Ask(allow::QUESTION));
                }
                replies
            }
            Input::Command(Slash::Clear) => {
                self.controller.session_mut().clear();
                vec![Reply::Cleared]
            }
            Input::Command(cmd) => {
                let session = self.controller.session_mut();
                match commands::answer(self.prepared, self.executor, session, &cmd)? {
                    Some(Answer::Shown(shown)) => vec![Reply::Shown(shown)],
                    Some(Answer::SkillLoaded { text, note }) => {
                        vec![Reply::SkillLoaded { text, note }]
                    }
                    None => Vec::new(),
                }
            }
            Input::Answer(yes) => vec![Reply::Shown(match waiting {
                Some(change) if yes => allow::apply(
                    self.executor,
                    self.controller.session_mut(),
                    change,
                    &self.prepared.run_dir,
                )?,
                _ => vec![Shown::Muted(
                    "not applied: the policy in force is unchanged".into(),
                )],
            })],
        };
        Ok(replies)
    }

    /// The session, for what the screens show of it (`/cost`).
    pub(crate) fn session(&self) -> &Session<'a> {
        self.controller.session()
    }

    /// Ends the session — `interrupted` when SIGTERM ended it, otherwise with the
    /// conversation's outcome — rewrites the run summary, and returns the closing line.
    ///
    /// # Errors
    /// [`SessionError`] when the transcript refuses the last event.
    pub(crate) fn finish(self, terminated: bool) -> Result<String, SessionError> {
        let outcome = if terminated {
            Outcome::Interrupted
        } else {
            self.controller.conversation_outcome()
        };
        let transcript = self.controller.session().transcript().to_owned();
        let finished = self.controller.finish(outcome, None)?;
        write_summary(&self.prepared.run_dir);
        Ok(closing(&finished.totals, &transcript))
    }
}
