use std::io::Write;

use super::*;

const FILE: &str = "/s/pdf-forms/SKILL.md";

fn parse(text: &str) -> Result<Skill, SkillError> {
    Skill::parse(Path::new(FILE), text)
}

/// The rendered error, one `file:line:column: key: message` line per problem.
fn error(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

/// The hints of the error's problems.
fn hints(text: &str) -> Vec<String> {
    let e = parse(text).unwrap_err();
    let d = e.diagnostics().unwrap();
    d.problems.iter().filter_map(|p| p.help.clone()).collect()
}

#[test]
fn a_good_skill_parses() {
    let text = "---\nname: pdf-forms\ndescription: >\n  Fill PDF forms.\n  Use for PDFs.\n\
                license: MIT\nallowed-tools: Read, Bash(python3:*)\nmetadata:\n  version: 1.0\n  \
                author: me\n---\n# Filling\n\nRun scripts/fill.py.\n";
    let skill = parse(text).unwrap();
    assert_eq!(skill.name, "pdf-forms");
    assert_eq!(skill.description, "Fill PDF forms. Use for PDFs.");
    assert_eq!(skill.dir, Path::new("/s/pdf-forms"));
    assert_eq!(skill.file, Path::new(FILE));
    assert_eq!(skill.body, "# Filling\n\nRun scripts/fill.py.\n");
    assert_eq!(skill.body_line, 12);
    assert_eq!(skill.license.as_deref(), Some("MIT"));
    assert_eq!(skill.allowed_tools, ["Read", "Bash(python3:*)"]);
    assert_eq!(skill.metadata["version"], "1.0");
    assert_eq!(skill.metadata["author"], "me");
}

#[test]
fn allowed_tools_is_a_list_or_a_string_of_names() {
    let list = parse("---\nname: pdf-forms\ndescription: d\nallowed-tools: [Read, Grep]\n---\n");
    assert_eq!(list.unwrap().allowed_tools, ["Read", "Grep"]);
    let spaced = parse("---\nname: pdf-forms\ndescription: d\nallowed-tools: Read  Grep\n---\n");
    assert_eq!(spaced.unwrap().allowed_tools, ["Read", "Grep"]);
    let e = error("---\nname: pdf-forms\ndescription: d\nallowed-tools: {a: b}\n---\n");
    assert!(
        e.starts_with(&format!("{FILE}:4:16: allowed-tools: ")),
        "{e}"
    );
}

#[test]
fn a_bom_and_crlf_line_ends_are_accepted() {
    let skill = parse("\u{feff}---\r\nname: pdf-forms\r\ndescription: d\r\n---\r\nbody\r\n");
    let skill = skill.unwrap();
    assert_eq!(skill.description, "d");
    assert_eq!(skill.body, "body\r\n");
    assert_eq!(skill.body_line, 5);
}

#[test]
fn missing_front_matter_is_reported_at_line_1() {
    let e = error("# Just markdown\n");
    assert_eq!(
        e,
        format!("{FILE}:1:1: the file does not begin with front matter")
    );
    assert!(hints("# Just markdown\n")[0].contains("begins with a line `---`"));
    assert!(error("").starts_with(&format!("{FILE}:1:1: the file does not begin")));
}

#[test]
fn unterminated_front_matter_points_at_its_opening() {
    let e = error("---\nname: pdf-forms\ndescription: d\n# body\n");
    assert_eq!(
        e,
        format!("{FILE}:1:1: the front matter opened here is never closed")
    );
}

#[test]
fn an_unknown_key_is_named_at_its_line_with_the_known_keys() {
    let text = "---\nname: pdf-forms\ndescription: d\nmodel: opus\n---\n";
    assert_eq!(
        error(text),
        format!("{FILE}:4:1: model: unknown key `model`")
    );
    assert!(hints(text)[0].contains("name, description, license"));
}

#[test]
fn a_name_that_is_not_a_slug_is_refused() {
    for (name, why) in [
        ("PDF-forms", "holds 'P'"),
        ("pdf_forms", "holds '_'"),
        ("-pdf", "starts or ends with a hyphen"),
        ("pdf-", "starts or ends with a hyphen"),
        ("pdf--forms", "two hyphens in a row"),
        ("\"\"", "is empty"),
    ] {
        let e = error(&format!("---\ndescription: d\nname: {name}\n---\n"));
        assert!(
            e.starts_with(&format!("{FILE}:3:7: name: the name ")),
            "{e}"
        );
        assert!(e.contains(why), "{e}");
    }
    let long = "a".repeat(65);
    let e = error(&format!("---\nname: {long}\ndescription: d\n---\n"));
    assert!(e.contains("is 65 characters long, more than 64"), "{e}");
    let e = error("---\nname: 12\ndescription: d\n---\n");
    assert_eq!(e, format!("{FILE}:2:7: name: `name` must be a string"));
}

#[test]
fn a_name_that_differs_from_its_folder_is_reported() {
    let text = "---\nname: pdf-tools\ndescription: d\n---\n";
    assert_eq!(
        error(text),
        format!(
            "{FILE}:2:7: name: the name `pdf-tools` differs from its folder's name `pdf-forms`"
        )
    );
    assert!(hints(text)[0].contains("rename the folder to `pdf-tools`"));
}

#[test]
fn an_empty_or_missing_description_is_refused() {
    let e = error("---\nname: pdf-forms\ndescription: \"  \"\n---\n");
    assert_eq!(
        e,
        format!("{FILE}:3:14: description: `description` is empty")
    );
    let e = error("---\nname: pdf-forms\ndescription:\n---\n");
    assert_eq!(
        e,
        format!("{FILE}:3:12: description: `description` is empty")
    );
    let e = error("---\nname: pdf-forms\n---\n");
    assert_eq!(
        e,
        format!("{FILE}:1:1: description: `description` is missing")
    );
    let long = "x".repeat(1025);
    let e = error(&format!("---\nname: pdf-forms\ndescription: {long}\n---\n"));
    assert!(e.contains("is 1025 characters long, more than 1024"), "{e}");
}

#[test]
fn every_problem_is_reported_in_source_order() {
    let e = error("---\ncolour: red\nname: Bad\n---\n");
    let lines = e.lines().collect::<Vec<_>>();
    assert_eq!(lines.len(), 3, "{e}");
    assert!(lines[0].starts_with(&format!("{FILE}:1:1: description: ")));
    assert!(lines[1].starts_with(&format!("{FILE}:2:1: colour: unknown key")));
    assert!(lines[2].starts_with(&format!("{FILE}:3:7: name: the name `Bad`")));
}

#[test]
fn yaml_errors_carry_their_line_and_column() {
    let e = error("---\nname: pdf-forms\ndescription: a: b\n---\n");
    assert!(e.starts_with(&format!("{FILE}:3:")), "{e}");
    assert!(e.contains("not valid YAML"), "{e}");
    assert!(!e.contains(" at line "), "{e}");
    let e = error("---\n- a\n- b\n---\n");
    assert_eq!(
        e,
        format!("{FILE}:2:1: the front matter is not a map of keys")
    );
}

#[test]
fn a_duplicate_key_is_refused() {
    let e = error("---\nname: pdf-forms\nname: pdf-forms\ndescription: d\n---\n");
    assert_eq!(e, format!("{FILE}:3:1: name: `name` is given twice"));
    let e = error("---\nname: pdf-forms\nmetadata: {a: 1, a: 2}\ndescription: d\n---\n");
    assert!(e.starts_with(&format!("{FILE}:3:")), "{e}");
}

fn load(bytes: &[u8]) -> (tempfile::TempDir, Result<Skill, SkillError>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("SKILL.md");
    std::fs::File::create(&file)
        .unwrap()
        .write_all(bytes)
        .unwrap();
    let skill = Skill::load(&file);
    (dir, skill)
}

#[test]
fn invalid_utf8_is_reported_at_its_byte() {
    let (dir, result) = load(b"---\nname: x\ndescription: caf\xe9\n---\n");
    let file = dir.path().join("SKILL.md");
    assert_eq!(
        result.unwrap_err().to_string(),
        format!(
            "{}:3:17: the file is not UTF-8 (invalid byte at offset 28)",
            file.display()
        )
    );
}

#[test]
fn a_file_over_the_cap_is_refused_by_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("SKILL.md");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(MAX_SKILL_BYTES + 1)
        .unwrap();
    let e = Skill::load(&file).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}:1:1: the file is 262145 bytes, more than the 262144 bytes (256 KiB) a SKILL.md \
             may hold",
            file.display()
        )
    );
}

#[test]
fn a_folder_named_skill_md_is_refused_and_a_missing_file_is_a_read_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("SKILL.md");
    std::fs::create_dir(&file).unwrap();
    let e = Skill::load(&file).unwrap_err().to_string();
    assert!(e.ends_with(":1:1: SKILL.md is not a regular file"), "{e}");
    let missing = Skill::load(&dir.path().join("nope/SKILL.md")).unwrap_err();
    assert!(matches!(missing, SkillError::Read { .. }), "{missing}");
}
