//! The roles a session's subagents can play: every `*.toml` of the project's `.bee/agents/`
//! and of the user's `agents/` (beside the user configuration). A project role hides a user
//! role of the same name.

use std::collections::BTreeMap;
use std::path::Path;

use super::AgentRole;

/// The roles found, by name. A role file that did not load is kept with its problems, so a
/// call for it says exactly what is wrong (file, line, key) instead of "no such role".
#[derive(Debug, Default)]
pub struct Roles {
    roles: BTreeMap<String, Result<AgentRole, String>>,
    notes: Vec<String>,
}

impl Roles {
    /// Reads `project/.bee/agents/*.toml`, then `user_dir/agents/*.toml` (`user_dir` is the
    /// directory of the user configuration). Missing folders hold no roles; files whose
    /// names start with `.` and files not ending in `.toml` are passed over.
    #[must_use]
    pub fn discover(project: &Path, user_dir: Option<&Path>, home: Option<&Path>) -> Self {
        let mut roles = Self::default();
        roles.scan(&project.join(".bee").join("agents"), home);
        if let Some(dir) = user_dir {
            roles.scan(&dir.join("agents"), home);
        }
        roles
    }

    fn scan(&mut self, dir: &Path, home: Option<&Path>) {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.notes
                    .push(format!("{}: cannot read the folder: {e}", dir.display()));
                return;
            }
        };
        let mut files: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|x| x == "toml")
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect();
        files.sort();
        for path in files {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Some(existing) = self.roles.get(&name) {
                let first = match existing {
                    Ok(r) => r.file.display().to_string(),
                    Err(_) => "an earlier file".to_owned(),
                };
                self.notes.push(format!(
                    "{}: role `{name}` is already defined by {first}; this one is ignored",
                    path.display()
                ));
                continue;
            }
            let loaded = AgentRole::load(&path, home).map_err(|e| e.to_string());
            self.roles.insert(name, loaded);
        }
    }

    /// A set of roles, for tests and embedding.
    #[must_use]
    pub fn from_roles(roles: impl IntoIterator<Item = AgentRole>) -> Self {
        Self {
            roles: roles.into_iter().map(|r| (r.name.clone(), Ok(r))).collect(),
            notes: Vec::new(),
        }
    }

    /// The role `name`: `None` when there is none, `Some(Err)` with its problems when its
    /// file did not load.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<Result<&AgentRole, &str>> {
        self.roles
            .get(name)
            .map(|r| r.as_ref().map_err(String::as_str))
    }

    /// Whether no role file was found.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.roles.is_empty()
    }

    /// The roles that loaded, by name.
    pub fn iter(&self) -> impl Iterator<Item = &AgentRole> {
        self.roles.values().filter_map(|r| r.as_ref().ok())
    }

    /// The names of every role file found, loaded or not.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.roles.keys().map(String::as_str)
    }

    /// The problems of role files that did not load, in words (file, line, key).
    pub fn problems(&self) -> impl Iterator<Item = &str> {
        self.roles
            .values()
            .filter_map(|r| r.as_ref().err().map(String::as_str))
    }

    /// Things worth telling that are not errors (a role hidden by another of its name).
    #[must_use]
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_roles_hide_user_roles_and_broken_files_keep_their_problems() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("proj");
        let user = dir.path().join("user");
        std::fs::create_dir_all(project.join(".bee/agents")).unwrap();
        std::fs::create_dir_all(user.join("agents")).unwrap();
        std::fs::write(
            project.join(".bee/agents/reviewer.toml"),
            "description = \"project reviewer\"\npolicy = \"p.toml\"\n",
        )
        .unwrap();
        std::fs::write(
            user.join("agents/reviewer.toml"),
            "description = \"user reviewer\"\npolicy = \"p.toml\"\n",
        )
        .unwrap();
        std::fs::write(
            user.join("agents/broken.toml"),
            "description = \"b\"\npolicy = \"p\"\nextra = 1\n",
        )
        .unwrap();
        std::fs::write(user.join("agents/notes.md"), "not a role").unwrap();
        let roles = Roles::discover(&project, Some(&user), None);
        assert_eq!(roles.names().collect::<Vec<_>>(), ["broken", "reviewer"]);
        let r = roles.get("reviewer").unwrap().unwrap();
        assert_eq!(r.description, "project reviewer");
        let broken = roles.get("broken").unwrap().unwrap_err();
        assert!(
            broken.contains("extra") && broken.contains(":3:"),
            "{broken}"
        );
        assert_eq!(roles.notes().len(), 1, "{:?}", roles.notes());
        assert!(roles.get("nobody").is_none());
    }
}
