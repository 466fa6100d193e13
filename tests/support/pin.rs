//! A pinned program inside a tree the scope may write, rewritten from inside the scope: the
//! pin names the file by device and inode, which a rewrite in place keeps, so the policy
//! protects the pinned file (`compile::protect_pins`) and the kernel must refuse every way of
//! changing its contents. Run under each engine (`landlock_cli`, `kernel_cli`).

use std::path::Path;

use super::{bee_in, code, stderr, stdout};

/// What the pinned program prints when it runs as written.
const PINNED: &str = "the pinned program ran";
/// What a rewritten one would print.
const REWRITTEN: &str = "the code written over it ran";

/// In `dir`: a workspace `ws/` holding `tool`, a shell script that prints [`PINNED`], and a
/// version 1 policy that writes the whole workspace, runs `shell` and pins `ws/tool`;
/// `system` is the policy's read and exec grants for the shell and its libraries (TOML list
/// items). Inside one scope the script runs the pinned program, then tries to rewrite it: a
/// truncating redirect, an append, a hard link written through, and a rename of a new file
/// over it, and runs it once more. Every attempt must fail, the file must be as written,
/// and both runs must have run the pinned program (the renamed-in file is not the pinned
/// inode, so if the rename succeeded, its run is refused).
pub fn a_pinned_program_cannot_be_rewritten_from_inside(
    dir: &Path,
    engine: &str,
    shell: &str,
    system: &str,
) {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap_or_else(|e| unreachable!("{e}"));
    let tool = ws.join("tool");
    let script = format!("#!{shell}\necho '{PINNED}'\n");
    std::fs::write(&tool, &script).unwrap_or_else(|e| unreachable!("{e}"));
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap_or_else(|e| unreachable!("{e}"));
    let policy = dir.join("pin.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[fs]\nread = [{system}]\nwrite = [\"{ws}/**\"]\n\
             [exec]\nallow = [{system}, \"!{tool}\"]\n",
            ws = ws.display(),
            tool = tool.display()
        ),
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let attack = format!(
        "./tool; \
         printf '#!{shell}\\necho \"{REWRITTEN}\"\\n' > tool; echo \"truncate $?\"; \
         echo 'echo \"{REWRITTEN}\"' >> tool; echo \"append $?\"; \
         ln tool link && echo 'echo \"{REWRITTEN}\"' >> link; echo \"link $?\"; \
         printf '#!{shell}\\necho \"{REWRITTEN}\"\\n' > new && chmod 755 new && mv -f new tool; \
         echo \"rename $?\"; \
         ./tool; echo \"run $?\""
    );
    let policy = policy.display().to_string();
    let o = bee_in(
        &ws,
        &[
            "exec", "--engine", engine, "--policy", &policy, "--", shell, "-c", &attack,
        ],
    );
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(code(&o), 0, "{out}{err}");
    assert!(!out.contains(REWRITTEN), "{out}{err}");
    for step in ["truncate", "append", "link"] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(step) && l != format!("{step} 0")),
            "{step} succeeded:\n{out}{err}"
        );
    }
    // The rename either failed, or put a file the pin does not name in its place, which the
    // kernel refuses to run.
    let renamed = out.lines().any(|l| l == "rename 0");
    let runs = out.matches(PINNED).count();
    assert!(
        (!renamed && runs == 2) || (renamed && runs == 1 && !out.contains("run 0")),
        "{out}{err}"
    );
    if !renamed {
        assert_eq!(
            std::fs::read_to_string(&tool).ok().as_deref(),
            Some(script.as_str()),
            "{out}{err}"
        );
    }
}
