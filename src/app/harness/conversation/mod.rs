//! What the inline REPL and the full-screen TUI share, none of it drawing: the set-up of a
//! session ([`prepare`]), the controller that drives it ([`Chat`]: turns, slash commands, a
//! pending `/allow` change, the outcome and the closing line), the slash commands' words
//! ([`slash`], [`commands`], [`allow`]), the turn interrupt and the project instructions.
//! The two screens turn keys into an [`Input`] and draw each [`Reply`]; neither imports the
//! other.

pub(crate) mod allow;
mod chat;
pub(crate) mod commands;
mod prepare;
pub(crate) mod slash;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use chat::{Chat, Input, Reply};
pub(crate) use prepare::{Prepared, prepare};

use crate::records::RunSummary;
use crate::session::{Interrupt, Session, ToolExecutor};
use crate::skills::SkillSet;

/// The session id of a REPL session: its transcript is `<run id>/repl.jsonl`.
pub(crate) const SESSION_ID: &str = crate::records::REPL_SESSION_ID;

/// The longest `AGENTS.md` put into the system prompt, in bytes.
pub const AGENTS_MD_CAP: usize = 32 * 1024;

/// The system prompt of an interactive session (project instructions follow it);
/// `confined` says whether a policy confines the tool calls (with `--host` none does).
pub(crate) fn system_prompt(workspace: &Path, confined: bool) -> String {
    let confinement = if confined {
        "every tool call runs in a sandbox, and its policy may refuse an operation. When a \
         result says `denied by policy`, do not try to get around it: say what you needed and \
         why."
    } else {
        "tool calls run on the person's machine with their own authority: no sandbox or \
         policy confines them, so touch nothing outside the directory unless they ask."
    };
    format!(
        "You are a coding agent working with a person in the directory {}. Use the tools to \
         read, search and edit files and to run commands; {confinement} Answer in Markdown, \
         briefly.",
        workspace.display()
    )
}

/// The one turn interrupt Ctrl-C raises (a new one for every turn), and SIGTERM, which
/// ends the session: it stops the running turn (every subagent and scope with it), after
/// which the session finishes; at the prompt, bee exits at once (143).
#[derive(Debug, Default, Clone)]
pub(crate) struct TurnInterrupt {
    current: Arc<Mutex<Interrupt>>,
    terminate: Arc<AtomicBool>,
    in_turn: Arc<AtomicBool>,
}

impl TurnInterrupt {
    /// A new interrupt for the next turn.
    fn fresh(&self) -> Interrupt {
        let i = Interrupt::new();
        if let Ok(mut slot) = self.current.lock() {
            *slot = i.clone();
        }
        i
    }

    /// Runs one turn with a fresh interrupt; SIGTERM during it stops the turn instead of
    /// exiting at once.
    pub(crate) fn turn<T>(&self, send: impl FnOnce(&Interrupt) -> T) -> T {
        let interrupt = self.fresh();
        self.in_turn.store(true, Ordering::SeqCst);
        let end = send(&interrupt);
        self.in_turn.store(false, Ordering::SeqCst);
        end
    }

    /// Raises the current turn's interrupt.
    pub(crate) fn raise(&self) {
        if let Ok(slot) = self.current.lock() {
            slot.raise();
        }
    }

    /// Sends SIGTERM to the flag, and watches it: a thread that stops the running turn, or
    /// exits when there is none.
    pub(crate) fn watch_sigterm(&self) -> std::io::Result<()> {
        signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&self.terminate))?;
        let me = self.clone();
        std::thread::spawn(move || {
            while !me.terminate.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            me.raise();
            if !me.in_turn.load(Ordering::SeqCst) {
                std::process::exit(143);
            }
        });
        Ok(())
    }

    pub(crate) fn terminating(&self) -> bool {
        self.terminate.load(Ordering::SeqCst)
    }
}

/// The smallest terminal the TUI starts in, columns and rows.
pub(crate) const MIN_SIZE: (u16, u16) = (40, 10);

/// What a session with `--host` says first, on either screen: nothing confines the tools.
pub(crate) const UNCONFINED: &str = "--host: nothing is confined — tools run on this machine as \
     you, with all your authority (hardened host processes: no kernel scope, no policy; \
     recorded as enforcement \"host\")";

/// The start line that names what the session loaded: the project instructions (what
/// [`project_instructions`] said) and the skills found, by name.
fn loaded(instructions: &str, skills: &SkillSet) -> String {
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    format!(
        "project instructions: {instructions}; skills: {}",
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    )
}

/// Puts the workspace's `AGENTS.md` into the conversation as instructions, read through the
/// sandbox like any workspace file (so a policy, when there is one, decides), cut at
/// [`AGENTS_MD_CAP`] bytes with a note. A missing file is skipped; one the policy or the file
/// system refuses is said on screen and in the transcript. Returns what was loaded, in a few words for the start
/// line ([`loaded`]): `AGENTS.md`, or `none` and why.
fn project_instructions(
    session: &mut Session<'_>,
    executor: &dyn ToolExecutor,
    note: &dyn Fn(&str),
) -> Result<String, crate::session::SessionError> {
    let workspace = session.spec().workspace.clone();
    // Only whether it exists is looked at from here; the content comes through the scope.
    if !workspace.join("AGENTS.md").exists() {
        return Ok("none (no AGENTS.md)".to_owned());
    }
    match executor.read_text("AGENTS.md", AGENTS_MD_CAP) {
        Ok(read) => {
            let mut text = format!(
                "Project instructions from AGENTS.md at the workspace root:\n\n{}",
                read.text
            );
            let mut loaded = "AGENTS.md".to_owned();
            if read.total_bytes > read.text.len() {
                let n = format!(
                    "AGENTS.md is {} bytes; only the first {} were read",
                    read.total_bytes,
                    read.text.len()
                );
                text.push_str(&format!("\n\n[{n}]"));
                note(&n);
                loaded = format!("AGENTS.md (its first {} bytes)", read.text.len());
            }
            session.add_system(&text)?;
            Ok(loaded)
        }
        Err(why) => {
            let n = format!("AGENTS.md was not read: {why}");
            note(&n);
            session.add_system(&format!("[{n}]"))?;
            Ok("none (AGENTS.md could not be read)".to_owned())
        }
    }
}

/// Rewrites the run summary (a failure only costs the summary: the transcript is the record).
pub(crate) fn write_summary(run_dir: &Path) {
    if let Ok(summary) = RunSummary::from_run_dir(run_dir) {
        let _ = summary.write_atomic(run_dir);
    }
}

/// The line a session ends with, on either screen: what it did and where its transcript is.
fn closing(t: &crate::records::Totals, transcript: &Path) -> String {
    format!(
        "session ended: {} model call(s), {} tool call(s), {}, cost {}; transcript {}",
        t.model_calls,
        t.tool_calls,
        t.denials_said(),
        t.cost,
        transcript.display()
    )
}
