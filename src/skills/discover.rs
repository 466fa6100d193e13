//! Finding skills: each folder of a `skills` folder that holds a `SKILL.md`.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{Skill, SkillError};

/// Where a `skills` folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    Project,
    User,
}

impl Origin {
    fn label(self) -> &'static str {
        match self {
            Self::Project => "project",
            Self::User => "user",
        }
    }
}

/// What discovery found so far, across the `skills` folders it has read.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// Each skill, by name, with where it came from.
    pub skills: BTreeMap<String, (Skill, Origin)>,
    /// Things worth telling that are not errors.
    pub notes: Vec<String>,
    /// Skills that could not be loaded.
    pub errors: Vec<SkillError>,
    /// Each folder read (`skills` folders and skill folders), by its canonical path, as first
    /// found: a folder reached twice (through symbolic links) is read once, so links can never
    /// make discovery loop.
    seen: HashMap<PathBuf, PathBuf>,
}

impl Found {
    /// Loads every skill folder of `root` (one level: `root/*/SKILL.md`). A missing `root`
    /// holds no skills. Folders whose names start with `.` and plain files are passed over.
    /// A skill of a name already loaded is kept out, with a note.
    pub(super) fn scan(&mut self, root: &Path, origin: Origin) {
        let read = |source| SkillError::Read {
            path: root.to_owned(),
            source,
        };
        let canonical = match fs::canonicalize(root) {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(source) => return self.errors.push(read(source)),
        };
        if !self.first_visit(canonical, root) {
            return;
        }
        let entries = match fs::read_dir(root) {
            Ok(entries) => entries,
            Err(source) => return self.errors.push(read(source)),
        };
        let mut folders = Vec::new();
        for entry in entries {
            match entry {
                Ok(entry) => {
                    let link = entry.file_type().is_ok_and(|t| t.is_symlink());
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if !name.starts_with('.') {
                        folders.push((link, name, entry.path()));
                    }
                }
                Err(source) => self.errors.push(read(source)),
            }
        }
        // Real folders first, so a link to one of them is the one noted as a repeat.
        folders.sort();
        for (_, _, dir) in folders {
            self.folder(&dir, origin);
        }
    }

    fn folder(&mut self, dir: &Path, origin: Origin) {
        let read = |source| SkillError::Read {
            path: dir.to_owned(),
            source,
        };
        match fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return,
            Err(source) => return self.errors.push(read(source)),
        }
        let canonical = match fs::canonicalize(dir) {
            Ok(c) => c,
            Err(source) => return self.errors.push(read(source)),
        };
        if !self.first_visit(canonical, dir) {
            return;
        }
        let file = dir.join("SKILL.md");
        match Skill::load(&file) {
            Ok(skill) => self.add(skill, origin),
            Err(SkillError::Read { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                self.notes.push(format!(
                    "{} holds no SKILL.md: it is not a skill",
                    dir.display()
                ));
            }
            Err(e) => self.errors.push(e),
        }
    }

    /// Records a visit of the folder `canonical`, reached as `path`; false, with a note, when
    /// it was visited before.
    fn first_visit(&mut self, canonical: PathBuf, path: &Path) -> bool {
        match self.seen.get(&canonical) {
            Some(first) => {
                self.notes.push(format!(
                    "{} is the same folder as {}: it is read once",
                    path.display(),
                    first.display()
                ));
                false
            }
            None => {
                self.seen.insert(canonical, path.to_owned());
                true
            }
        }
    }

    fn add(&mut self, skill: Skill, origin: Origin) {
        match self.skills.get(&skill.name) {
            Some((kept, kept_origin)) => self.notes.push(format!(
                "the {} skill `{}` at {} is used; the {} one at {} is not",
                kept_origin.label(),
                kept.name,
                kept.dir.display(),
                origin.label(),
                skill.dir.display()
            )),
            None => {
                self.skills.insert(skill.name.clone(), (skill, origin));
            }
        }
    }
}
