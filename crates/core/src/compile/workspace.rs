//! A warning about write grants that cover the whole base directory — the workspace, when a
//! session compiles the policy — through a rule rooted above it.
//!
//! With a project under `/tmp` and `write = ["./**", "/tmp/**"]`, `/tmp/**` (meant for
//! scratch files) already grants every write in the workspace: narrowing `./**` later, or
//! reading the policy for what the workspace may have written, misleads. It changes nothing
//! the policy means, so it is a warning.

use std::path::Path;

use crate::compiled::{CompiledPolicy, PathRule};
use crate::error::PolicyWarning;
use crate::glob::PathPattern;

/// The pattern without its final `/**`, for the subtree shapes; `None` for the others.
fn top(pattern: &PathPattern) -> Option<PathPattern> {
    match pattern {
        PathPattern::Subtree { root } => Some(PathPattern::Exact { path: root.clone() }),
        PathPattern::Nested {
            root,
            tail,
            subtree: true,
        } => Some(PathPattern::Nested {
            root: root.clone(),
            tail: tail.clone(),
            subtree: false,
        }),
        PathPattern::BoundedStar {
            segments,
            subtree: true,
        } => Some(PathPattern::BoundedStar {
            segments: segments.clone(),
            subtree: false,
        }),
        _ => None,
    }
}

/// The strict ancestor of `base` at which `rule` grants its whole subtree, if any.
fn covering_ancestor<'b>(rule: &PathRule, base: &'b Path) -> Option<&'b Path> {
    let top = top(&rule.pattern)?;
    base.ancestors()
        .skip(1)
        .find(|a| a.to_str().is_some_and(|a| top.matches(a)))
}

/// A warning for each `fs.write` rule that grants every path under the base directory
/// through a subtree rooted strictly above it, read from `file`.
pub(super) fn lint(policy: &CompiledPolicy, file: &str) -> Vec<PolicyWarning> {
    let base = Path::new(&policy.base);
    if !base.is_absolute() {
        return Vec::new();
    }
    policy
        .fs
        .write
        .iter()
        .filter_map(|r| {
            let at = covering_ancestor(r, base)?;
            Some(PolicyWarning {
                file: file.to_owned(),
                line: r.origin.line,
                column: r.origin.column,
                key: r.origin.key.clone(),
                message: format!(
                    "`{}` covers the whole base directory {} (through {}): every write there \
                     is granted by this rule, whatever the rules naming the base directory \
                     say; narrow it so it leaves the base directory out, or move the project",
                    r.pattern,
                    base.display(),
                    at.display()
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::compile::{CompileOptions, compile_str};

    /// The warnings about the base directory `/tmp/proj` for a policy with `write`.
    fn warnings(write: &str) -> Vec<String> {
        let options = CompileOptions {
            base: PathBuf::from("/tmp/proj"),
            home: Some(PathBuf::from("/home/u")),
        };
        let text = format!("version = 2\n[fs]\nwrite = {write}\n");
        let compiled = compile_str("p.toml", &text, &options).unwrap();
        compiled
            .warnings
            .iter()
            .filter(|w| w.message.contains("covers the whole base directory"))
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_subtree_above_the_base_is_named() {
        let w = warnings(r#"["./**", "/tmp/**"]"#);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(
                "p.toml:3:18: fs.write[1]: `/tmp/**` covers the whole base directory /tmp/proj \
                 (through /tmp)"
            ),
            "{w:?}"
        );
        let w = warnings(r#"["/**"]"#);
        assert!(w[0].contains("(through /)"), "{w:?}");
        let w = warnings(r#"["/*/**"]"#);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("(through /tmp)"), "{w:?}");
    }

    #[test]
    fn the_base_itself_and_unrelated_grants_are_not() {
        assert!(warnings(r#"["./**", "/tmp/proj/**", "/var/tmp/**"]"#).is_empty());
        assert!(warnings(r#"["/tmp/*.log", "/tmp/**/*.o", "/tmp/other/**"]"#).is_empty());
        assert!(warnings(r#"["./src/**"]"#).is_empty());
    }
}
