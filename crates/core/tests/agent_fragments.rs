//! The shipped agent profiles (`agent-claude-code`, `agent-codex`, `agent-opencode`,
//! `agent-gemini`, `agent-aider`): each compiles alone, keeps the agent's own code-running
//! configuration out of reach of the broadest write grants, writes its state, and grants its
//! API hosts by name.

use std::path::PathBuf;

use bee_core::CompiledPolicy;
use bee_core::compile::{CompileOptions, compile_str};
use bee_core::compiled::PathRule;

const HOME: &str = "/home/u";
const BASE: &str = "/work/repo";

fn options() -> CompileOptions {
    CompileOptions {
        base: PathBuf::from(BASE),
        home: Some(PathBuf::from(HOME)),
    }
}

/// `fragment` included in a policy that writes the whole workspace and the whole home.
fn broad(fragment: &str) -> CompiledPolicy {
    let text =
        format!("version = 3\ninclude = [\"{fragment}\"]\n[fs]\nwrite = [\"./**\", \"~/**\"]\n");
    compile_str("p.toml", &text, &options())
        .unwrap_or_else(|e| unreachable!("{fragment}: {e:?}"))
        .policy
}

/// Whether the compiled policy lets `path` be written (its reference semantics: a write
/// grant, no carve-out, and no protection that `fs.unprotect` does not lift).
fn writable(p: &CompiledPolicy, path: &str) -> bool {
    let on = |rules: &[PathRule]| rules.iter().any(|r| r.pattern.matches(path));
    on(&p.fs.write) && !on(&p.fs.deny) && (!on(&p.fs.protect) || on(&p.fs.unprotect))
}

/// `~/x` and `./x` written out for the test's home and base.
fn full(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("~/") {
        format!("{HOME}/{rest}")
    } else if let Some(rest) = path.strip_prefix("./") {
        format!("{BASE}/{rest}")
    } else {
        path.to_owned()
    }
}

/// Each profile: what must stay read-only, what must stay writable, the hosts it grants.
struct Profile {
    name: &'static str,
    protected: &'static [&'static str],
    writable: &'static [&'static str],
    hosts: &'static [&'static str],
    runs: &'static [&'static str],
}

const PROFILES: &[Profile] = &[
    Profile {
        name: "agent-claude-code",
        protected: &[
            "~/.claude/settings.json",
            "~/.claude/settings.local.json",
            "~/.claude/hooks/pre.sh",
            "~/.claude/plugins/p/hooks/hooks.json",
            "~/.claude/agents/a.md",
            "~/.claude/commands/c.md",
            "~/.claude/skills/s/SKILL.md",
            "~/.claude.json",
            "~/.claude/local/claude",
            "~/.claude/statusline-command.sh",
            "~/.claude/CLAUDE.md",
            // Other terminals of the user: only the command's own (`/dev/tty`) is granted.
            "/dev/pts/3",
            "./.claude/settings.json",
            "./.claude/settings.local.json",
            "./.claude/hooks/h.sh",
            "./.mcp.json",
            "./sub/dir/.claude/settings.json",
            "./sub/.mcp.json",
        ],
        writable: &[
            "~/.claude/projects/-work-repo/s.jsonl",
            "~/.claude/todos/t.json",
            "~/.claude/.credentials.json",
            "/tmp/claude-0/tasks/t.output",
            "./src/main.rs",
            "/dev/tty",
        ],
        hosts: &["api.anthropic.com", "console.anthropic.com", "claude.ai"],
        runs: &[
            "/usr/bin/node",
            "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js",
            "/home/u/.local/share/claude/versions/2.0.0",
        ],
    },
    Profile {
        name: "agent-codex",
        protected: &[
            "~/.codex/config.toml",
            "~/.codex/rules/default.rules",
            "~/.codex/.env",
            "~/.codex/AGENTS.md",
            "~/.codex/prompts/p.md",
            "~/.codex/skills/s/SKILL.md",
            "/dev/pts/0",
            "./.codex/config.toml",
            "./sub/.codex/config.toml",
        ],
        writable: &[
            "~/.codex/auth.json",
            "~/.codex/sessions/2026/01/01/rollout.jsonl",
            "~/.codex/history.jsonl",
            // What 0.171.0 wrote in a run under the profile (`tests/landlock_codex.rs`).
            "~/.codex/state_5.sqlite",
            "~/.codex/installation_id",
            "./src/main.rs",
        ],
        hosts: &["api.openai.com", "chatgpt.com", "auth.openai.com"],
        runs: &[
            "/usr/bin/node",
            "/usr/lib/node_modules/@openai/codex/bin/codex.js",
            // Where `npm install -g` puts the native build of 0.171.0, and its `rg`.
            "/usr/lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/\
             x86_64-unknown-linux-musl/bin/codex",
            "/usr/lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/\
             x86_64-unknown-linux-musl/codex-path/rg",
        ],
    },
    Profile {
        name: "agent-opencode",
        protected: &[
            "~/.config/opencode/opencode.json",
            "~/.config/opencode/plugin/p.js",
            "~/.cache/opencode/node_modules/@ai-sdk/anthropic/index.js",
            "~/.local/share/opencode/bin/rg",
            "./opencode.json",
            "./opencode.jsonc",
            "./.opencode/plugin/p.ts",
            "./sub/opencode.json",
        ],
        writable: &[
            "~/.local/share/opencode/auth.json",
            "~/.local/share/opencode/storage/session/s.json",
            "~/.local/state/opencode/prompt-history.jsonl",
            "./src/main.rs",
        ],
        hosts: &[
            "api.anthropic.com",
            "api.openai.com",
            "openrouter.ai",
            "opencode.ai",
            "models.dev",
        ],
        runs: &[
            "/usr/lib/node_modules/opencode-ai/node_modules/opencode-linux-x64/bin/opencode",
            "/home/u/.opencode/bin/opencode",
        ],
    },
    Profile {
        name: "agent-gemini",
        protected: &[
            "~/.gemini/settings.json",
            "~/.gemini/extensions/e/gemini-extension.json",
            "~/.gemini/commands/c.toml",
            "~/.gemini/.env",
            "~/.gemini/trustedFolders.json",
            "~/.gemini/policies/p.toml",
            "~/.gemini/GEMINI.md",
            "./.gemini/settings.json",
            "./sub/.gemini/settings.json",
        ],
        writable: &[
            "~/.gemini/oauth_creds.json",
            "~/.gemini/tmp/abc/chats/c.json",
            "./src/main.rs",
        ],
        hosts: &[
            "generativelanguage.googleapis.com",
            "cloudcode-pa.googleapis.com",
            "oauth2.googleapis.com",
        ],
        runs: &[
            "/usr/bin/node",
            "/usr/lib/node_modules/@google/gemini-cli/dist/index.js",
        ],
    },
    Profile {
        name: "agent-aider",
        protected: &[
            "~/.aider.conf.yml",
            "~/.env",
            "~/.aider/oauth-keys.env",
            "./.aider.conf.yml",
            "./.env",
            "./sub/.aider.conf.yml",
            "./sub/.env",
        ],
        writable: &[
            "~/.aider/caches/x",
            "./.aider.chat.history.md",
            "./.aider.input.history",
            "./src/main.py",
        ],
        hosts: &["api.openai.com", "api.anthropic.com", "openrouter.ai"],
        runs: &[
            "/usr/bin/python3",
            "/home/u/.local/bin/aider",
            "/home/u/.local/pipx/venvs/aider-chat/bin/python",
        ],
    },
];

#[test]
fn every_agent_profile_compiles_alone() {
    for p in PROFILES {
        let text = format!("version = 3\ninclude = [\"{}\"]\n", p.name);
        let c = compile_str("p.toml", &text, &options())
            .unwrap_or_else(|e| unreachable!("{}: {e:?}", p.name));
        // Alone, nothing is written: the protections carve nothing out, which is expected
        // of a shipped fragment and not remarked on.
        assert!(c.warnings.is_empty(), "{}: {:?}", p.name, c.warnings);
        let text = format!(
            "version = 3\ninclude = [\"{}\"]\n[fs]\nwrite = [\"./**\", \"~/**\"]\n",
            p.name
        );
        let c = compile_str("p.toml", &text, &options()).unwrap_or_else(|e| unreachable!("{e:?}"));
        assert!(c.warnings.is_empty(), "{}: {:?}", p.name, c.warnings);
        // Version 2 ships the same fragments.
        let text = format!("version = 2\ninclude = [\"{}\"]\n", p.name);
        assert!(
            compile_str("p.toml", &text, &options()).is_ok(),
            "{}",
            p.name
        );
    }
}

#[test]
fn the_agents_own_configuration_is_refused_under_the_broadest_writes() {
    for p in PROFILES {
        let c = broad(p.name);
        for path in p.protected {
            assert!(!writable(&c, &full(path)), "{}: {path} is writable", p.name);
        }
        for path in p.writable {
            assert!(
                writable(&c, &full(path)),
                "{}: {path} is not writable",
                p.name
            );
        }
    }
}

#[test]
fn the_agents_state_is_writable_without_a_broad_grant() {
    for p in PROFILES {
        let text = format!("version = 3\ninclude = [\"{}\"]\n", p.name);
        let c = compile_str("p.toml", &text, &options())
            .unwrap_or_else(|e| unreachable!("{e:?}"))
            .policy;
        for path in p.writable.iter().filter(|w| !w.starts_with("./")) {
            assert!(writable(&c, &full(path)), "{}: {path}", p.name);
        }
        // Nothing of the workspace is written by the profile alone.
        assert!(!writable(&c, &full("./src/main.rs")), "{}", p.name);
    }
}

#[test]
fn the_agents_hosts_are_granted_by_name_on_https_only() {
    for p in PROFILES {
        let c = broad(p.name);
        let granted: Vec<String> = c.net.hosts.iter().map(|h| h.host.to_string()).collect();
        for host in p.hosts {
            assert!(
                granted.iter().any(|g| g == host),
                "{}: {host} in {granted:?}",
                p.name
            );
        }
        for h in &c.net.hosts {
            assert_eq!((h.ports.first, h.ports.last), (443, 443), "{}", p.name);
        }
        assert!(c.net.allow.is_empty(), "{}: no address grants", p.name);
    }
}

#[test]
fn the_agent_and_its_runtime_may_run() {
    for p in PROFILES {
        let c = broad(p.name);
        for path in p.runs {
            assert!(
                c.exec.iter().any(|r| r.pattern.matches(path)),
                "{}: {path} may not run",
                p.name
            );
        }
    }
}

#[test]
fn protections_of_the_users_own_that_carve_nothing_out_are_still_remarked_on() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| unreachable!("{e}"));
    let d = dir.path();
    std::fs::write(d.join("team.toml"), "[fs]\nprotect = [\"./deploy/**\"]\n")
        .unwrap_or_else(|e| unreachable!("{e}"));
    let policy = d.join("policy.toml");
    std::fs::write(
        &policy,
        "version = 3\ninclude = [\"agent-codex\", \"./team.toml\"]\n[fs]\nprotect = [\"./ci/**\"]\n",
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    let c = bee_core::compile::compile_file(&policy, &options())
        .unwrap_or_else(|e| unreachable!("{e:?}"));
    let keys: Vec<&str> = c.warnings.iter().map(|w| w.key.as_str()).collect();
    assert_eq!(
        keys,
        ["./team.toml:fs.protect[0]", "fs.protect[0]"],
        "{:?}",
        c.warnings
    );
}
