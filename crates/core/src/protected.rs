//! Protected paths: files inside a writable tree that run code *outside* the sandbox, or
//! steer bee itself, the next time a person or a tool touches them.
//!
//! From language version 2 on, write grants never cover these paths, however wide
//! (`write = ["./**"]` included), unless the policy lifts one with `fs.unprotect`. They stay
//! readable. Version 1 policies keep the meaning they were written with: nothing is
//! protected unless they say so with `fs.protect`. The set belongs to the language version,
//! so a later bee that protects more does it under a new version number: version 3 is
//! version 2's set and the other file names the same tools read code or commands from
//! (lefthook's and husky's other spellings, `.pre-commit-config.yml`, `.devcontainer.json`,
//! VS Code's `*.code-workspace`, JetBrains' `.run/`); `docs/policy.md` has the survey behind
//! each entry.

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

/// What language version 3 protects besides version 2's set: the other file names the tools
/// version 2 names read commands or code from. lefthook also reads its files from `.config/`
/// (`.config/lefthook.yml`); the `**/NAME` entries cover those already.
const V3_MORE: &[Protected] = &[
    Protected {
        pattern: "/**/lefthook.yaml",
        reason: "lefthook runs the commands it lists as git hooks (another of its config file names)",
    },
    Protected {
        pattern: "/**/lefthook.json",
        reason: "lefthook runs the commands it lists as git hooks (another of its config file names)",
    },
    Protected {
        pattern: "/**/lefthook.jsonc",
        reason: "lefthook runs the commands it lists as git hooks (another of its config file names)",
    },
    Protected {
        pattern: "/**/lefthook.toml",
        reason: "lefthook runs the commands it lists as git hooks (another of its config file names)",
    },
    Protected {
        pattern: "/**/.lefthook.yml",
        reason: "lefthook runs the commands it lists as git hooks (another of its config file names)",
    },
    Protected {
        pattern: "/**/.lefthook.yaml",
        reason: "lefthook runs the commands it lists as git hooks (another of its config file names)",
    },
    Protected {
        pattern: "/**/.lefthook.json",
        reason: "lefthook runs the commands it lists as git hooks (another of its config file names)",
    },
    Protected {
        pattern: "/**/.lefthook.jsonc",
        reason: "lefthook runs the commands it lists as git hooks (another of its config file names)",
    },
    Protected {
        pattern: "/**/.lefthook.toml",
        reason: "lefthook runs the commands it lists as git hooks (another of its config file names)",
    },
    Protected {
        pattern: "/**/lefthook-local.yml",
        reason: "lefthook merges this local config over the main one, commands included",
    },
    Protected {
        pattern: "/**/lefthook-local.yaml",
        reason: "lefthook merges this local config over the main one, commands included",
    },
    Protected {
        pattern: "/**/lefthook-local.json",
        reason: "lefthook merges this local config over the main one, commands included",
    },
    Protected {
        pattern: "/**/lefthook-local.jsonc",
        reason: "lefthook merges this local config over the main one, commands included",
    },
    Protected {
        pattern: "/**/lefthook-local.toml",
        reason: "lefthook merges this local config over the main one, commands included",
    },
    Protected {
        pattern: "/**/.lefthook-local.yml",
        reason: "lefthook merges this local config over the main one, commands included",
    },
    Protected {
        pattern: "/**/.lefthook-local.yaml",
        reason: "lefthook merges this local config over the main one, commands included",
    },
    Protected {
        pattern: "/**/.lefthook-local.json",
        reason: "lefthook merges this local config over the main one, commands included",
    },
    Protected {
        pattern: "/**/.lefthook-local.jsonc",
        reason: "lefthook merges this local config over the main one, commands included",
    },
    Protected {
        pattern: "/**/.lefthook-local.toml",
        reason: "lefthook merges this local config over the main one, commands included",
    },
    Protected {
        pattern: "/**/.lefthook/**",
        reason: "lefthook's script directory (`source_dir`): it runs the scripts below it as hooks",
    },
    Protected {
        pattern: "/**/.lefthook-local/**",
        reason: "lefthook's local script directory (`source_dir_local`), run like `.lefthook/`",
    },
    Protected {
        pattern: "/**/.huskyrc",
        reason: "husky 4 reads its hooks' commands from it (cosmiconfig)",
    },
    Protected {
        pattern: "/**/.huskyrc.json",
        reason: "husky 4 reads its hooks' commands from it (cosmiconfig)",
    },
    Protected {
        pattern: "/**/.huskyrc.yaml",
        reason: "husky 4 reads its hooks' commands from it (cosmiconfig)",
    },
    Protected {
        pattern: "/**/.huskyrc.yml",
        reason: "husky 4 reads its hooks' commands from it (cosmiconfig)",
    },
    Protected {
        pattern: "/**/.huskyrc.js",
        reason: "husky 4 loads it as JavaScript (and reads its hooks' commands from it)",
    },
    Protected {
        pattern: "/**/.huskyrc.cjs",
        reason: "husky 4 loads it as JavaScript (and reads its hooks' commands from it)",
    },
    Protected {
        pattern: "/**/husky.config.js",
        reason: "husky 4 loads it as JavaScript (and reads its hooks' commands from it)",
    },
    Protected {
        pattern: "/**/husky.config.cjs",
        reason: "husky 4 loads it as JavaScript (and reads its hooks' commands from it)",
    },
    Protected {
        pattern: "/**/.pre-commit-config.yml",
        reason: "pre-commit's config under the name `pre-commit install --config` writes into the hook it installs",
    },
    Protected {
        pattern: "/**/.pre-commit-hooks.yaml",
        reason: "a hook repository's manifest: `pre-commit try-repo` and every project using the repository run its `entry` commands",
    },
    Protected {
        pattern: "/**/.devcontainer.json",
        reason: "dev containers read it as `.devcontainer/devcontainer.json` and run its lifecycle commands",
    },
    Protected {
        pattern: "/**/*.code-workspace",
        reason: "a VS Code workspace file: it carries settings, tasks and launch configurations like `.vscode/`",
    },
    Protected {
        pattern: "/**/.run/**",
        reason: "JetBrains IDEs' run configurations stored as project files (`*.run.xml`)",
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
/// versions this bee does not know). Each version's set begins with the one before it, in the
/// same order, so a rule's key (`protected[i]`) names the same path in both.
#[must_use]
pub fn protected(version: u32) -> &'static [Protected] {
    static V3: std::sync::OnceLock<Vec<Protected>> = std::sync::OnceLock::new();
    match version {
        2 => V2,
        3 => V3.get_or_init(|| V2.iter().chain(V3_MORE).copied().collect()),
        _ => &[],
    }
}

/// The built-in protected paths version `version` adds to the version before it (all of
/// version 2's; none for version 1 or an unknown version).
#[must_use]
pub fn added_in(version: u32) -> &'static [Protected] {
    match version {
        2 => V2,
        3 => V3_MORE,
        _ => &[],
    }
}

/// One planted file, relative to a writable tree, for each entry version 3 adds (in the order
/// of the set): what the tests (and the kernel tests) plant to show each entry holds.
#[doc(hidden)]
pub const V3_PLANTED: &[&str] = &[
    "lefthook.yaml",
    "lefthook.json",
    "lefthook.jsonc",
    "lefthook.toml",
    ".lefthook.yml",
    ".lefthook.yaml",
    ".lefthook.json",
    ".lefthook.jsonc",
    ".lefthook.toml",
    "lefthook-local.yml",
    "sub/lefthook-local.yaml",
    "lefthook-local.json",
    "lefthook-local.jsonc",
    "lefthook-local.toml",
    ".lefthook-local.yml",
    ".lefthook-local.yaml",
    ".lefthook-local.json",
    ".lefthook-local.jsonc",
    ".lefthook-local.toml",
    ".lefthook/pre-commit/lint.sh",
    ".lefthook-local/pre-push/x.sh",
    ".huskyrc",
    ".huskyrc.json",
    ".huskyrc.yaml",
    ".huskyrc.yml",
    ".huskyrc.js",
    ".huskyrc.cjs",
    "husky.config.js",
    "web/husky.config.cjs",
    ".pre-commit-config.yml",
    ".pre-commit-hooks.yaml",
    ".devcontainer.json",
    "team.code-workspace",
    ".run/App.run.xml",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::glob::PathPattern;

    #[test]
    fn every_pattern_lowers_and_prints_back() {
        for version in [2, 3] {
            for p in protected(version) {
                let lowered = PathPattern::parse(p.pattern).expect(p.pattern);
                assert_eq!(lowered.to_string(), p.pattern);
                assert!(!p.reason.is_empty(), "{}", p.pattern);
            }
        }
        assert!(protected(1).is_empty() && protected(4).is_empty());
    }

    #[test]
    fn each_version_begins_with_the_one_before_and_repeats_nothing() {
        assert_eq!(protected(2), added_in(2));
        assert_eq!(&protected(3)[..protected(2).len()], protected(2));
        assert_eq!(&protected(3)[protected(2).len()..], added_in(3));
        let mut seen: Vec<&str> = protected(3).iter().map(|p| p.pattern).collect();
        seen.sort_unstable();
        let n = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), n, "a pattern twice");
        assert_eq!(V3_PLANTED.len(), added_in(3).len());
        assert_eq!(
            crate::compile::LANGUAGE_VERSIONS.last().copied(),
            Some(i64::from(crate::compile::LANGUAGE_VERSION))
        );
        assert_eq!(
            protected(crate::compile::LANGUAGE_VERSION).len(),
            protected(3).len()
        );
    }

    fn lowered(version: u32) -> Vec<PathPattern> {
        protected(version)
            .iter()
            .map(|p| PathPattern::parse(p.pattern).expect(p.pattern))
            .collect()
    }

    /// The files version 2 protects are covered under version 2 and, as its set begins with
    /// version 2's, under version 3; the names beside them stay free under both.
    #[test]
    fn the_set_covers_the_planted_files() {
        for version in [2, 3] {
            let set = lowered(version);
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
                assert!(
                    set.iter().any(|p| p.matches(planted)),
                    "{planted} ({version})"
                );
            }
            for free in [
                "/w/src/main.rs",
                "/w/.git/HEAD",
                "/w/.git/objects/ab/cd",
                "/w/.bees",
            ] {
                assert!(!set.iter().any(|p| p.matches(free)), "{free} ({version})");
            }
        }
    }

    /// Each file version 3 adds is covered by its own entry under version 3 and by nothing
    /// under version 2, whose meaning stays as it was; the names around them stay free.
    #[test]
    fn version_3_covers_each_new_file_and_version_2_none_of_them() {
        let (v2, v3) = (lowered(2), lowered(3));
        for (planted, entry) in V3_PLANTED.iter().zip(added_in(3)) {
            let path = format!("/w/{planted}");
            let own = PathPattern::parse(entry.pattern).expect(entry.pattern);
            assert!(
                own.matches(&path),
                "{} does not cover {path}",
                entry.pattern
            );
            assert!(v3.iter().any(|p| p.matches(&path)), "{path}");
            assert!(
                !v2.iter().any(|p| p.matches(&path)),
                "{path} under version 2"
            );
        }
        for free in [
            "/w/src/main.rs",
            "/w/.config/other.yml",
            "/w/.config/lefthook",
            "/w/.config",
            "/w/lefthook.yml.bak",
            "/w/lefthook.md",
            "/w/docs/husky.md",
            "/w/.env",
            "/w/code-workspace",
            "/w/.runner/x",
            "/w/devcontainer.json",
        ] {
            assert!(!v3.iter().any(|p| p.matches(free)), "{free}");
        }
    }

    /// Which of `paths` a version 3 policy writing its whole base (and lifting `unprotect`)
    /// may write: `write` less the protected paths `fs.unprotect` does not lift (the compiled
    /// policy's reference semantics).
    fn writable(unprotect: &str, paths: &[String]) -> Vec<bool> {
        let options = crate::compile::CompileOptions {
            base: "/w".into(),
            home: Some("/home/u".into()),
        };
        let text = format!("version = 3\n[fs]\nwrite = [\"./**\"]\nunprotect = [{unprotect}]\n");
        let c = crate::compile::compile_str("p.toml", &text, &options)
            .unwrap_or_else(|e| panic!("{e}"))
            .policy;
        let on = |rules: &[crate::compiled::PathRule], path: &str| {
            rules.iter().any(|r| r.pattern.matches(path))
        };
        paths
            .iter()
            .map(|p| on(&c.fs.write, p) && (!on(&c.fs.protect, p) || on(&c.fs.unprotect, p)))
            .collect()
    }

    #[test]
    fn unprotect_lifts_each_new_entry_alone() {
        let paths: Vec<String> = V3_PLANTED.iter().map(|p| format!("/w/{p}")).collect();
        let mut free = paths.clone();
        free.push("/w/src/main.rs".to_owned());
        let none = writable("", &free);
        assert_eq!(none.iter().filter(|w| **w).count(), 1, "{none:?}");
        for (i, planted) in V3_PLANTED.iter().enumerate() {
            let got = writable(&format!("\"./{planted}\""), &paths);
            for (j, w) in got.iter().enumerate() {
                assert_eq!(*w, i == j, "lifting {planted}: {}", paths[j]);
            }
        }
    }

    /// A version 2 child under a version 3 parent that writes the same tree writes more (the
    /// files only version 3 protects), and the proof says so with one of them; the other way
    /// round, and at equal versions, the child is within its parent.
    #[test]
    fn a_version_2_child_is_wider_than_a_version_3_parent() {
        let options = crate::compile::CompileOptions {
            base: "/w".into(),
            home: Some("/home/u".into()),
        };
        let at = |version: u32| {
            let text = format!("version = {version}\n[fs]\nwrite = [\"./**\"]\n");
            crate::compile::compile_str("p.toml", &text, &options)
                .unwrap_or_else(|e| panic!("{e}"))
                .policy
        };
        let (v2, v3) = (at(2), at(3));
        let report = crate::attenuate::attenuate(&v2, &v3);
        assert!(!report.is_subset());
        let text = report.refusal("child", "parent");
        let v3_only = added_in(3)
            .iter()
            .map(|p| p.pattern.trim_start_matches("/**/").trim_end_matches("/**"))
            .map(|n| n.trim_start_matches('*'));
        assert!(v3_only.into_iter().any(|n| text.contains(n)), "{text}");
        assert!(crate::attenuate::attenuate(&v3, &v2).is_subset());
        assert!(crate::attenuate::attenuate(&v3, &v3).is_subset());
    }
}
