//! Skills: folders of instructions in the open `SKILL.md` format (the one Claude Code and
//! Codex read), which the model loads on demand with the `skill` tool.
//!
//! A skill is a folder holding `SKILL.md`: YAML front matter between `---` lines (`name`,
//! `description`, optionally `license`, `compatibility`, `allowed-tools`, `metadata`) and
//! then markdown instructions; the folder may hold other files those instructions mention.
//! [`SkillSet::discover`] finds the project's skills (`.bee/skills/`) and the user's
//! (`~/.config/bee/skills/`); [`SkillSet::catalogue`] is the system-prompt section that
//! lists them; [`SkillSet::call`] answers the [`skill_tool_def`] tool with one skill's
//! [`Skill::instructions`]. See `docs/skills.md`.

mod discover;
mod front;
mod parse;
mod tool;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::provider::ToolDef;

pub use parse::{
    KEYS, MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_SKILL_BYTES, Skill,
    SkillError,
};
pub use tool::SkillTool;

/// The name of the tool that loads a skill.
pub const SKILL_TOOL: &str = "skill";

/// The skills found, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillSet {
    skills: BTreeMap<String, Skill>,
    notes: Vec<String>,
}

impl SkillSet {
    /// Finds the skills in `<project_dir>/.bee/skills/*/SKILL.md` and, when `user_dir` is
    /// given, `<user_dir>/skills/*/SKILL.md`. `user_dir` is bee's user configuration folder:
    /// `$XDG_CONFIG_HOME/bee`, by default `~/.config/bee` (the parent of
    /// [`crate::config::Env::user_config`]).
    ///
    /// A project skill wins over a user skill of the same name; that is recorded in
    /// [`SkillSet::notes`], as are folders without a `SKILL.md` and folders reached twice
    /// through symbolic links (which are followed, but each real folder is read once, so they
    /// never loop). Missing `skills` folders hold no skills.
    ///
    /// Returns the skills that loaded, and an error for each one that did not (those are
    /// skipped; the rest load).
    pub fn discover(project_dir: &Path, user_dir: Option<&Path>) -> (Self, Vec<SkillError>) {
        let mut found = discover::Found::default();
        found.scan(
            &project_dir.join(".bee").join("skills"),
            discover::Origin::Project,
        );
        if let Some(user_dir) = user_dir {
            found.scan(&user_dir.join("skills"), discover::Origin::User);
        }
        let skills = found
            .skills
            .into_iter()
            .map(|(name, (skill, _))| (name, skill))
            .collect();
        let set = Self {
            skills,
            notes: found.notes,
        };
        (set, found.errors)
    }

    /// A set of these skills; of two with the same name, the first is kept.
    pub fn from_skills(skills: impl IntoIterator<Item = Skill>) -> Self {
        let mut set = Self::default();
        for skill in skills {
            set.skills.entry(skill.name.clone()).or_insert(skill);
        }
        set
    }

    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// The skills, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }

    /// How many skills there are.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// What discovery noted that is not an error: shadowed user skills, folders without a
    /// `SKILL.md`, folders reached twice. One sentence each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The system-prompt section that lists the skills, one `- name: description` line each
    /// (a description's line breaks become spaces), after one sentence on the `skill` tool.
    /// Empty when there are no skills.
    pub fn catalogue(&self) -> String {
        if self.skills.is_empty() {
            return String::new();
        }
        let mut text = format!(
            "# Skills\n\nSkills are instructions for particular tasks. When a task matches a \
             skill's description, load that skill with the `{SKILL_TOOL}` tool (its name as \
             `name`) before you start, and follow its instructions.\n\n"
        );
        for skill in self.skills.values() {
            let description = skill.description.split_whitespace().collect::<Vec<_>>();
            text.push_str(&format!("- {}: {}\n", skill.name, description.join(" ")));
        }
        text
    }

    /// Answers a call of the `skill` tool: `args` is `{"name": "<skill>"}`.
    ///
    /// # Errors
    /// A message for the model naming the known skills, when `args` has no string `name` or
    /// no skill has that name.
    pub fn call(&self, args: &Value) -> Result<String, String> {
        let known = if self.skills.is_empty() {
            "no skills are installed".to_owned()
        } else {
            let names = self.skills.keys().map(String::as_str).collect::<Vec<_>>();
            format!("the skills are: {}", names.join(", "))
        };
        let Some(name) = args.get("name").and_then(Value::as_str) else {
            return Err(format!(
                "the `{SKILL_TOOL}` tool takes {{\"name\": \"<skill name>\"}}; {known}"
            ));
        };
        match self.skills.get(name.trim()) {
            Some(skill) => Ok(skill.instructions()),
            None => Err(format!("there is no skill named `{name}`; {known}")),
        }
    }
}

impl<'a> IntoIterator for &'a SkillSet {
    type Item = &'a Skill;
    type IntoIter = std::collections::btree_map::Values<'a, String, Skill>;

    fn into_iter(self) -> Self::IntoIter {
        self.skills.values()
    }
}

impl Skill {
    /// The text added to the conversation when the skill is loaded: a header naming the skill
    /// and its folder (so the model can read the files the instructions mention at
    /// `<dir>/…`), then the body.
    pub fn instructions(&self) -> String {
        let dir = self.dir.display();
        let body = self.body.trim();
        let body = if body.is_empty() {
            "(This skill has no instructions beyond its description.)"
        } else {
            body
        };
        format!(
            "# Skill `{}`\n\nThe skill `{}` is loaded from {dir}/SKILL.md. Paths its \
             instructions mention are relative to its folder {dir}: read those files with \
             your file tools at {dir}/<path>.\n\n{body}\n",
            self.name, self.name
        )
    }
}

/// The definition of the `skill` tool, whose call [`SkillSet::call`] answers: it takes one
/// argument, `name`, a string.
pub fn skill_tool_def() -> ToolDef {
    ToolDef {
        name: SKILL_TOOL.to_owned(),
        description: "Loads a skill: instructions for a particular kind of task, listed under \
                      Skills in the system prompt. Call it with the skill's name before you \
                      start a task that matches the skill's description; its instructions \
                      come back as the result."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": "The skill's name, as listed under Skills."
                }
            },
            "required": ["name"],
            "additionalProperties": false
        }),
    }
}
