//! One skill: reading its `SKILL.md` (at most [`MAX_SKILL_BYTES`]) and checking its front
//! matter, with every problem reported at its file, line, column and key.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use bee_core::error::Source;
use serde_norway::Value;

use super::front::{self, Front};
use crate::config::{FileDiagnostic, FileDiagnostics};

/// The most bytes a `SKILL.md` may hold: 256 KiB. Longer material belongs in other files of
/// the skill's folder, which the instructions point at.
pub const MAX_SKILL_BYTES: u64 = 256 * 1024;

/// The most characters in a skill's `name`.
pub const MAX_NAME_CHARS: usize = 64;

/// The most characters in a skill's `description`.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// The most characters in a skill's `compatibility`.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// The front matter keys a `SKILL.md` may hold; any other is an error.
pub const KEYS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "allowed-tools",
    "metadata",
];

/// One skill: a folder whose `SKILL.md` holds front matter and markdown instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The skill's name: a slug equal to its folder's name.
    pub name: String,
    /// What the skill does and when to use it (1 to 1024 characters, trimmed).
    pub description: String,
    /// The skill's folder, as found (a symbolic link is not resolved).
    pub dir: PathBuf,
    /// Its `SKILL.md`, as found.
    pub file: PathBuf,
    /// The instructions: the text after the closing `---` line, as written.
    pub body: String,
    /// The 1-based line of `file` on which `body` starts.
    pub body_line: u32,
    /// The `license` key: a license name or a file of the folder.
    pub license: Option<String>,
    /// The `compatibility` key: what the skill needs of its environment (at most 500
    /// characters).
    pub compatibility: Option<String>,
    /// The `allowed-tools` key: a list, or one string of names separated by commas or, when
    /// it has none, by spaces. Informational: bee grants nothing by it.
    pub allowed_tools: Vec<String>,
    /// The `metadata` key: a map of strings (numbers and booleans are kept as written).
    pub metadata: BTreeMap<String, String>,
}

/// Why a skill could not be loaded.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum SkillError {
    /// A skill folder or its `SKILL.md` could not be read (permissions, a dangling or looping
    /// symbolic link).
    #[error("cannot read skill {}: {source}", .path.display())]
    Read {
        /// The folder or file as found.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The `SKILL.md` was refused: too large, not UTF-8, or bad front matter. Each problem
    /// renders as `file:line:column: key: message`, with a hint.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Invalid(FileDiagnostics),
}

impl SkillError {
    /// The diagnostics, when the file was read but refused.
    pub fn diagnostics(&self) -> Option<&FileDiagnostics> {
        match self {
            Self::Invalid(d) => Some(d),
            Self::Read { .. } => None,
        }
    }

    fn one(problem: FileDiagnostic) -> Self {
        Self::Invalid(FileDiagnostics {
            file: problem.file.clone(),
            problems: vec![problem],
        })
    }

    /// A problem with the file as a whole, reported at its first line.
    fn whole(file: &Path, message: String, help: &str) -> Self {
        let source = Source::new(file.display().to_string(), "");
        Self::one(FileDiagnostic::at(
            &source,
            0..0,
            None,
            message,
            Some(help.to_owned()),
        ))
    }
}

impl Skill {
    /// Reads and checks the `SKILL.md` at `file`; the skill's folder is its parent.
    ///
    /// The size is checked before anything is read, and at most [`MAX_SKILL_BYTES`] + 1
    /// bytes are read, so a huge file costs nothing. Something other than a regular file (a
    /// folder, a FIFO) is refused without blocking.
    ///
    /// # Errors
    /// [`SkillError::Read`] when the file cannot be opened or read; [`SkillError::Invalid`]
    /// when it is too large, not UTF-8, or its front matter is wrong (see [`Skill::parse`]).
    pub fn load(file: &Path) -> Result<Self, SkillError> {
        let bytes = read_capped(file)?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            let valid = String::from_utf8_lossy(&e.as_bytes()[..at]).into_owned();
            let source = Source::new(file.display().to_string(), &valid);
            SkillError::one(FileDiagnostic::at(
                &source,
                at..at,
                None,
                format!("the file is not UTF-8 (invalid byte at offset {at})"),
                Some("a SKILL.md must be UTF-8 text".to_owned()),
            ))
        })?;
        Self::parse(file, &text)
    }

    /// Checks the text of the `SKILL.md` at `file` (which names it in diagnostics and gives
    /// the folder whose name `name` must equal).
    ///
    /// # Errors
    /// [`SkillError::Invalid`] with every problem found: no front matter, front matter never
    /// closed, YAML errors, unknown keys, a missing or ill-formed `name` or `description`, a
    /// `name` that differs from the folder's, values of the wrong shape.
    pub fn parse(file: &Path, text: &str) -> Result<Self, SkillError> {
        let source = Source::new(file.display().to_string(), text);
        let front = front::split(&source).map_err(|d| SkillError::one(*d))?;
        let map = front::parse(&source, &front).map_err(|d| SkillError::one(*d))?;
        let mut check = Check {
            source: &source,
            front: &front,
            problems: Vec::new(),
        };
        let mut fields = Fields::default();
        for (key, value) in &map {
            check.field(&mut fields, key, value);
        }
        let dir = file.parent().map(Path::to_owned).unwrap_or_default();
        let folder = dir.file_name().map(|f| f.to_string_lossy().into_owned());
        check.required(&fields, folder.as_deref());
        let mut problems = check.problems;
        if let (Some(name), Some(description), true) =
            (fields.name, fields.description, problems.is_empty())
        {
            return Ok(Self {
                name,
                description,
                dir,
                file: file.to_owned(),
                body: text[front.body..].to_owned(),
                body_line: front.body_line,
                license: fields.license,
                compatibility: fields.compatibility,
                allowed_tools: fields.allowed_tools,
                metadata: fields.metadata,
            });
        }
        problems.sort_by_key(|p| (p.line, p.column));
        Err(SkillError::Invalid(FileDiagnostics {
            file: source.name.clone(),
            problems,
        }))
    }
}

/// Opens `file` without blocking, checks its size, then reads at most one byte past the cap.
fn read_capped(file: &Path) -> Result<Vec<u8>, SkillError> {
    let read = |source| SkillError::Read {
        path: file.to_owned(),
        source,
    };
    let f = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(file)
        .map_err(read)?;
    let meta = f.metadata().map_err(read)?;
    if !meta.is_file() {
        return Err(SkillError::whole(
            file,
            "SKILL.md is not a regular file".to_owned(),
            "a skill's SKILL.md is a text file",
        ));
    }
    let too_large = |size: u64, at_least: &str| {
        SkillError::whole(
            file,
            format!(
                "the file is {at_least}{size} bytes, more than the {MAX_SKILL_BYTES} bytes \
                 (256 KiB) a SKILL.md may hold"
            ),
            "keep SKILL.md short; put long material in other files of the skill's folder \
             and point the instructions at them",
        )
    };
    if meta.len() > MAX_SKILL_BYTES {
        return Err(too_large(meta.len(), ""));
    }
    let mut bytes = Vec::new();
    f.take(MAX_SKILL_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if len > MAX_SKILL_BYTES {
        return Err(too_large(len, "at least "));
    }
    Ok(bytes)
}

/// The known keys' values, as checked so far.
#[derive(Default)]
struct Fields {
    name: Option<String>,
    description: Option<String>,
    license: Option<String>,
    compatibility: Option<String>,
    allowed_tools: Vec<String>,
    metadata: BTreeMap<String, String>,
}

/// Collects the problems of one file's front matter.
struct Check<'a> {
    source: &'a Source,
    front: &'a Front,
    problems: Vec<FileDiagnostic>,
}

const NAME_HELP: &str = "a name is 1 to 64 lowercase ASCII letters, digits and hyphens, with \
                         no hyphen first, last or twice in a row, e.g. `pdf-forms`";

impl Check<'_> {
    fn report(&mut self, span: Range<usize>, key: &str, message: String, help: Option<String>) {
        self.problems.push(FileDiagnostic::at(
            self.source,
            span,
            Some(key.to_owned()),
            message,
            help,
        ));
    }

    /// Reports a problem with the value of `key`.
    fn value(&mut self, key: &str, message: String, help: &str) {
        let (_, value) = front::key_span(self.source, self.front, key);
        self.report(value, key, message, Some(help.to_owned()));
    }

    fn field(&mut self, fields: &mut Fields, key: &Value, value: &Value) {
        let Some(key) = scalar(key) else {
            let at = self.front.yaml.start;
            let help = format!("the keys are {}", KEYS.join(", "));
            self.report(at..at, "?", "a key must be a name".to_owned(), Some(help));
            return;
        };
        match key.as_str() {
            "name" => fields.name = self.name(value),
            "description" => {
                fields.description = self.text(&key, value, MAX_DESCRIPTION_CHARS, true);
            }
            "license" => fields.license = self.text(&key, value, usize::MAX, false),
            "compatibility" => {
                fields.compatibility = self.text(&key, value, MAX_COMPATIBILITY_CHARS, false);
            }
            "allowed-tools" => fields.allowed_tools = self.tools(value),
            "metadata" => fields.metadata = self.metadata(value),
            _ => {
                let (span, _) = front::key_span(self.source, self.front, &key);
                let help = format!("the keys are {}", KEYS.join(", "));
                self.report(span, &key, format!("unknown key `{key}`"), Some(help));
            }
        }
    }

    fn required(&mut self, fields: &Fields, folder: Option<&str>) {
        for (key, missing) in [
            ("name", fields.name.is_none()),
            ("description", fields.description.is_none()),
        ] {
            let present = front::key_span(self.source, self.front, key).0 != self.front.open;
            if missing && !present && !self.problems.iter().any(|p| p.key.as_deref() == Some(key)) {
                let open = self.front.open.clone();
                let help = format!("add `{key}: …` to the front matter");
                self.report(open, key, format!("`{key}` is missing"), Some(help));
            }
        }
        if let (Some(name), Some(folder)) = (&fields.name, folder)
            && name != folder
        {
            self.value(
                "name",
                format!("the name `{name}` differs from its folder's name `{folder}`"),
                &format!("rename the folder to `{name}`, or set `name: {folder}`"),
            );
        }
    }

    fn name(&mut self, value: &Value) -> Option<String> {
        let Value::String(name) = value else {
            let message = match value {
                Value::Null => "`name` is empty".to_owned(),
                _ => "`name` must be a string".to_owned(),
            };
            self.value("name", message, NAME_HELP);
            return None;
        };
        match slug_problem(name) {
            Some(problem) => {
                self.value("name", format!("the name `{name}` {problem}"), NAME_HELP);
                None
            }
            None => Some(name.clone()),
        }
    }

    /// A string value of at most `max` characters, trimmed; `required` refuses an empty one.
    fn text(&mut self, key: &str, value: &Value, max: usize, required: bool) -> Option<String> {
        let help = if key == "description" {
            "say what the skill does and when to use it: the model chooses skills by this text"
        } else {
            "the value is one line of text"
        };
        let text = match value {
            Value::Null => String::new(),
            v => match scalar(v) {
                Some(s) => s.trim().to_owned(),
                None => {
                    self.value(key, format!("`{key}` must be a string"), help);
                    return None;
                }
            },
        };
        let chars = text.chars().count();
        if text.is_empty() && required {
            self.value(key, format!("`{key}` is empty"), help);
            None
        } else if chars > max {
            let message = format!("`{key}` is {chars} characters long, more than {max}");
            self.value(key, message, help);
            None
        } else {
            (!text.is_empty()).then_some(text)
        }
    }

    fn tools(&mut self, value: &Value) -> Vec<String> {
        let help = "a list of tool names, or one string of names separated by commas or spaces";
        let tools = match value {
            Value::Null => Some(Vec::new()),
            Value::String(s) if s.contains(',') => Some(s.split(',').map(str::to_owned).collect()),
            Value::String(s) => Some(s.split_whitespace().map(str::to_owned).collect()),
            Value::Sequence(items) => items.iter().map(scalar).collect(),
            _ => None,
        };
        match tools {
            Some(t) => t
                .into_iter()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect(),
            None => {
                let message = "`allowed-tools` must be a list of names or a string".to_owned();
                self.value("allowed-tools", message, help);
                Vec::new()
            }
        }
    }

    fn metadata(&mut self, value: &Value) -> BTreeMap<String, String> {
        let map = match value {
            Value::Null => Some(BTreeMap::new()),
            Value::Mapping(m) => m
                .iter()
                .map(|(k, v)| Some((scalar(k)?, scalar(v)?)))
                .collect::<Option<BTreeMap<_, _>>>(),
            _ => None,
        };
        map.unwrap_or_else(|| {
            self.value(
                "metadata",
                "`metadata` must be a map of strings".to_owned(),
                "e.g. `metadata: {author: me, version: \"1.0\"}`",
            );
            BTreeMap::new()
        })
    }
}

/// The text of a string, number or boolean.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// What makes `name` no slug, if anything.
fn slug_problem(name: &str) -> Option<String> {
    let chars = name.chars().count();
    if name.is_empty() {
        Some("is empty".to_owned())
    } else if chars > MAX_NAME_CHARS {
        Some(format!(
            "is {chars} characters long, more than {MAX_NAME_CHARS}"
        ))
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        Some(format!(
            "holds {c:?}, which is not a lowercase letter, a digit or `-`"
        ))
    } else if name.starts_with('-') || name.ends_with('-') {
        Some("starts or ends with a hyphen".to_owned())
    } else if name.contains("--") {
        Some("holds two hyphens in a row".to_owned())
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
