//! Skills found on disk: a project's and a user's `skills` folders, precedence between them,
//! malformed skills skipped while the rest load, a huge `SKILL.md` refused by its size,
//! symbolic links that loop, and what the model sees (the catalogue and the `skill` tool).

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failure there is a test failure"
)]

use std::fs;
use std::path::{Path, PathBuf};

use bee::skills::{MAX_SKILL_BYTES, SkillError, SkillSet, skill_tool_def};
use serde_json::json;

/// A project folder and a user configuration folder, each with a `skills` folder.
struct Dirs {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    user: PathBuf,
}

impl Dirs {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        let user = tmp.path().join("config/bee");
        fs::create_dir_all(project.join(".bee/skills")).unwrap();
        fs::create_dir_all(user.join("skills")).unwrap();
        Self {
            _tmp: tmp,
            project,
            user,
        }
    }

    fn project_skills(&self) -> PathBuf {
        self.project.join(".bee/skills")
    }

    fn user_skills(&self) -> PathBuf {
        self.user.join("skills")
    }

    fn discover(&self) -> (SkillSet, Vec<SkillError>) {
        SkillSet::discover(&self.project, Some(&self.user))
    }
}

/// Writes `<root>/<folder>/SKILL.md` with this front matter and body.
fn write(root: &Path, folder: &str, front: &str, body: &str) -> PathBuf {
    let dir = root.join(folder);
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("SKILL.md");
    fs::write(&file, format!("---\n{front}---\n{body}")).unwrap();
    file
}

fn skill(root: &Path, name: &str, description: &str) -> PathBuf {
    let front = format!("name: {name}\ndescription: {description}\n");
    write(root, name, &front, &format!("Do the {name} thing.\n"))
}

fn names(set: &SkillSet) -> Vec<&str> {
    set.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn project_and_user_skills_load_sorted_and_the_project_wins() {
    let d = Dirs::new();
    skill(&d.project_skills(), "review", "Project review.");
    skill(&d.project_skills(), "deploy", "Deploy it.");
    skill(&d.user_skills(), "review", "User review.");
    skill(&d.user_skills(), "commit", "Write commits.");
    let (set, errors) = d.discover();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(names(&set), ["commit", "deploy", "review"]);
    assert_eq!(set.len(), 3);
    let review = set.get("review").unwrap();
    assert_eq!(review.description, "Project review.");
    assert_eq!(review.dir, d.project_skills().join("review"));
    assert_eq!(review.file, d.project_skills().join("review/SKILL.md"));
    assert_eq!(
        set.get("commit").unwrap().dir,
        d.user_skills().join("commit")
    );
    assert!(
        set.notes()
            .iter()
            .any(|n| n.contains("project skill `review`") && n.contains("the user one")),
        "{:?}",
        set.notes()
    );
}

#[test]
fn no_skills_folders_means_no_skills() {
    let tmp = tempfile::tempdir().unwrap();
    let (set, errors) = SkillSet::discover(tmp.path(), None);
    assert!(set.is_empty() && errors.is_empty());
    assert_eq!(set.catalogue(), "");
}

#[test]
fn malformed_skills_are_reported_and_skipped_while_the_rest_load() {
    let d = Dirs::new();
    skill(&d.project_skills(), "good", "Works.");
    let unknown = write(
        &d.project_skills(),
        "unknown-key",
        "name: unknown-key\ndescription: d\nmodel: opus\n",
        "",
    );
    let renamed = write(
        &d.user_skills(),
        "folder",
        "name: other\ndescription: d\n",
        "",
    );
    let bare = d.user_skills().join("bare/SKILL.md");
    fs::create_dir_all(bare.parent().unwrap()).unwrap();
    fs::write(&bare, "just text\n").unwrap();
    fs::create_dir_all(d.user_skills().join("empty-folder")).unwrap();
    fs::write(d.user_skills().join("README.md"), "not a skill").unwrap();

    let (set, errors) = d.discover();
    assert_eq!(names(&set), ["good"]);
    let rendered = errors.iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(rendered.len(), 3, "{rendered:#?}");
    let has = |text: &str| rendered.iter().any(|e| e.starts_with(text));
    assert!(
        has(&format!("{}:4:1: model: unknown key", unknown.display())),
        "{rendered:#?}"
    );
    assert!(
        has(&format!(
            "{}:2:7: name: the name `other` differs",
            renamed.display()
        )),
        "{rendered:#?}"
    );
    assert!(
        has(&format!("{}:1:1: the file does not begin", bare.display())),
        "{rendered:#?}"
    );
    assert!(
        set.notes()
            .iter()
            .any(|n| n.contains("empty-folder holds no SKILL.md")),
        "{:?}",
        set.notes()
    );
}

#[test]
fn a_five_megabyte_skill_is_refused_by_its_size() {
    let d = Dirs::new();
    skill(&d.project_skills(), "small", "Fine.");
    let dir = d.project_skills().join("huge");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("SKILL.md");
    let mut text = "---\nname: huge\ndescription: d\n---\n".to_owned();
    text.push_str(&"x".repeat(5 * 1024 * 1024));
    fs::write(&file, text).unwrap();

    let (set, errors) = d.discover();
    assert_eq!(names(&set), ["small"]);
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].to_string(),
        format!(
            "{}:1:1: the file is 5242914 bytes, more than the {MAX_SKILL_BYTES} bytes (256 KiB) \
             a SKILL.md may hold",
            file.display()
        )
    );
}

#[test]
fn symbolic_links_are_followed_once_and_never_loop() {
    use std::os::unix::fs::symlink;
    let d = Dirs::new();
    let shared = d.project.join("shared/lint");
    skill(shared.parent().unwrap(), "lint", "Lint it.");
    let skills = d.project_skills();
    symlink(&shared, skills.join("lint")).unwrap();
    // A second name for the same folder, a link to itself, links up the tree.
    symlink(skills.join("lint"), skills.join("lint-again")).unwrap();
    symlink(skills.join("loop"), skills.join("loop")).unwrap();
    symlink(&skills, skills.join("up")).unwrap();
    symlink(&d.project, skills.join("root")).unwrap();
    // The user's skills folder is the project's.
    fs::remove_dir(d.user_skills()).unwrap();
    symlink(&skills, d.user_skills()).unwrap();

    let (set, errors) = d.discover();
    assert_eq!(names(&set), ["lint"]);
    assert_eq!(set.get("lint").unwrap().dir, skills.join("lint"));
    let rendered = errors.iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(rendered.len(), 1, "{rendered:#?}");
    assert!(
        rendered[0].starts_with(&format!(
            "cannot read skill {}",
            skills.join("loop").display()
        )),
        "{rendered:#?}"
    );
    assert!(
        set.notes()
            .iter()
            .any(|n| n.contains("lint-again is the same folder as")),
        "{:?}",
        set.notes()
    );
    let up = format!("{} is the same folder as", skills.join("up").display());
    let user = format!("{} is the same folder as", d.user_skills().display());
    for note in [up, user] {
        assert!(set.notes().iter().any(|n| n.starts_with(&note)), "{note}");
    }
}

#[test]
fn the_catalogue_lists_each_skill_on_one_line() {
    let d = Dirs::new();
    skill(
        &d.project_skills(),
        "pdf-forms",
        ">\n  Fill PDF forms.\n  Use for PDFs.",
    );
    skill(&d.user_skills(), "commit", "Write commit messages.");
    let (set, _) = d.discover();
    let catalogue = set.catalogue();
    assert!(catalogue.starts_with("# Skills\n\n"), "{catalogue}");
    assert!(catalogue.contains("`skill` tool"), "{catalogue}");
    assert!(
        catalogue.ends_with(
            "\n\n- commit: Write commit messages.\n- pdf-forms: Fill PDF forms. Use for PDFs.\n"
        ),
        "{catalogue}"
    );
}

#[test]
fn the_skill_tool_returns_instructions_or_names_the_known_skills() {
    let d = Dirs::new();
    write(
        &d.project_skills(),
        "pdf-forms",
        "name: pdf-forms\ndescription: Fill PDF forms.\n",
        "\nRun `scripts/fill.py`.\n",
    );
    skill(&d.project_skills(), "commit", "Write commits.");
    let (set, _) = d.discover();

    let dir = d.project_skills().join("pdf-forms");
    let text = set.call(&json!({"name": "pdf-forms"})).unwrap();
    assert!(text.starts_with("# Skill `pdf-forms`\n"), "{text}");
    assert!(
        text.contains(&format!("at {}/<path>", dir.display())),
        "{text}"
    );
    assert!(text.ends_with("\n\nRun `scripts/fill.py`.\n"), "{text}");
    assert_eq!(text, set.get("pdf-forms").unwrap().instructions());

    let unknown = set.call(&json!({"name": "nope"})).unwrap_err();
    assert_eq!(
        unknown,
        "there is no skill named `nope`; the skills are: commit, pdf-forms"
    );
    let bad = set.call(&json!({"skill": "commit"})).unwrap_err();
    assert!(bad.contains("takes {\"name\""), "{bad}");
    assert!(bad.ends_with("the skills are: commit, pdf-forms"), "{bad}");
    let none = SkillSet::default().call(&json!({"name": "x"})).unwrap_err();
    assert!(none.ends_with("no skills are installed"), "{none}");
}

#[test]
fn the_tool_definition_takes_a_name() {
    let def = skill_tool_def();
    assert_eq!(def.name, "skill");
    assert_eq!(def.parameters["required"], json!(["name"]));
    assert_eq!(def.parameters["properties"]["name"]["type"], "string");
}
