//! Skills: folders of instructions in the open `SKILL.md` format (the one Claude Code and
//! Codex read), which the model loads on demand.
//!
//! A skill is a folder holding `SKILL.md`: YAML front matter between `---` lines (`name`,
//! `description`, optionally `license`, `compatibility`, `allowed-tools`, `metadata`) and
//! then markdown instructions; the folder may hold other files those instructions mention.

mod front;
mod parse;

pub use parse::{
    KEYS, MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_SKILL_BYTES, Skill,
    SkillError,
};
