//! Protected paths: files inside a writable tree that run code *outside* the sandbox, or
//! steer bee itself, the next time a person or a tool touches them.
//!
//! From language version 2 on, write grants never cover these paths, however wide
//! (`write = ["./**"]` included), unless the policy lifts one with `fs.unprotect`. They stay
//! readable. Version 1 policies keep the meaning they were written with: nothing is
//! protected unless they say so with `fs.protect`. The set belongs to the language version,
//! so a later bee that protects more does it under a new version number.

/// One built-in protected pattern and why it is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protected {
    /// The pattern, absolute and normalised (`/**/.git/hooks/**`).
    pub pattern: &'static str,
    /// Why writing it is dangerous, in a few words.
    pub reason: &'static str,
}

/// The set of language version 2.
const V2: &[Protected] = &[
    Protected {
        pattern: "/**/.git",
        reason: "a repository's .git itself: replaced by a file naming another git directory (`gitdir:`), git would run that one's hooks",
    },
    Protected {
        pattern: "/**/.git/hooks/**",
        reason: "git runs hooks, outside any sandbox, on the next commit, checkout or push",
    },
    Protected {
        pattern: "/**/.git/config",
        reason: "git config can name programs git runs (core.hooksPath, core.fsmonitor, aliases, filters)",
    },
    Protected {
        pattern: "/**/.git/config.worktree",
        reason: "per-worktree git config, with the same power as .git/config",
    },
    Protected {
        pattern: "/**/.git/commondir",
        reason: "points git at another git directory, whose config and hooks it then uses",
    },
    Protected {
        pattern: "/**/.git/modules/**",
        reason: "submodules' git directories, each with its own config and hooks",
    },
    Protected {
        pattern: "/**/.git/worktrees/**",
        reason: "linked worktrees' git directories (commondir, config)",
    },
    Protected {
        pattern: "/**/.husky/**",
        reason: "husky's git hooks, run on commit",
    },
    Protected {
        pattern: "/**/.pre-commit-config.yaml",
        reason: "pre-commit runs the hooks it lists, local commands included",
    },
    Protected {
        pattern: "/**/lefthook.yml",
        reason: "lefthook runs the commands it lists as git hooks",
    },
    Protected {
        pattern: "/**/.bee/**",
        reason: "bee's own configuration, roles, skills and records",
    },
    Protected {
        pattern: "/**/.envrc",
        reason: "direnv runs it when a shell enters the directory",
    },
    Protected {
        pattern: "/**/.vscode/**",
        reason: "VS Code runs its tasks and launch configurations, and settings name interpreters it starts",
    },
    Protected {
        pattern: "/**/.devcontainer/**",
        reason: "dev containers run its lifecycle commands (postCreateCommand…)",
    },
    Protected {
        pattern: "/**/.idea/**",
        reason: "JetBrains IDEs run its run configurations",
    },
];

/// The key of the `i`th built-in protected path's rule in a compiled policy (`protected[i]`).
#[must_use]
pub fn builtin_key(i: usize) -> String {
    format!("protected[{i}]")
}

/// Whether a compiled protect rule with origin key `key` is one of the built-in set (rather
/// than `fs.protect`, the policy's own or a fragment's).
#[must_use]
pub fn is_builtin(key: &str) -> bool {
    key.starts_with("protected[")
}

/// The built-in protected paths of policy language `version` (empty for version 1 and for
/// versions this bee does not know).
#[must_use]
pub fn protected(version: u32) -> &'static [Protected] {
    match version {
        2 => V2,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::glob::PathPattern;

    #[test]
    fn every_pattern_lowers_and_prints_back() {
        for p in protected(2) {
            let lowered = PathPattern::parse(p.pattern).expect(p.pattern);
            assert_eq!(lowered.to_string(), p.pattern);
        }
        assert!(protected(1).is_empty());
    }

    #[test]
    fn the_set_covers_the_planted_files() {
        let set: Vec<PathPattern> = protected(2)
            .iter()
            .map(|p| PathPattern::parse(p.pattern).expect(p.pattern))
            .collect();
        for planted in [
            "/w/.git/hooks/pre-commit",
            "/w/sub/.git/hooks",
            "/w/.git/config",
            "/w/.bee/config.toml",
            "/w/.envrc",
            "/w/.vscode/tasks.json",
            "/w/.idea/workspace.xml",
            "/w/.git",
            "/w/sub/.git",
            "/w/.git/commondir",
            "/w/.git/config.worktree",
            "/w/.git/modules/sm/config",
            "/w/.git/modules/sm/hooks/pre-commit",
            "/w/.git/worktrees/wt/commondir",
            "/w/.husky/pre-commit",
            "/w/.pre-commit-config.yaml",
            "/w/.devcontainer/devcontainer.json",
        ] {
            assert!(set.iter().any(|p| p.matches(planted)), "{planted}");
        }
        for free in [
            "/w/src/main.rs",
            "/w/.git/HEAD",
            "/w/.git/objects/ab/cd",
            "/w/.bees",
        ] {
            assert!(!set.iter().any(|p| p.matches(free)), "{free}");
        }
    }
}
