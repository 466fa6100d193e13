//! What the slash commands about the session's set-up show — `/skills`, `/skill NAME`,
//! `/agents`, `/policy` — as [`Shown`] lines, so the inline REPL and the full-screen TUI say
//! the same thing, each drawing it its own way.

use std::path::{Path, PathBuf};

use bee_core::CompiledPolicy;

use super::Prepared;
use super::slash::Slash;
use crate::agents::Roles;
use crate::records::Enforcement;
use crate::session::{Session, SessionError, ToolExecutor};
use crate::skills::SkillSet;

/// What a slash command about the session's set-up did, the same on either screen; each
/// screen draws it its own way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Lines to show.
    Shown(Vec<Shown>),
    /// `/skill NAME`: the skill's instructions are now in the conversation.
    SkillLoaded {
        /// The skill's instructions (the inline REPL prints them).
        text: String,
        /// What to say about it.
        note: String,
    },
}

/// Answers `/skills`, `/skill NAME`, `/agents` and `/policy` for the session `p` prepared,
/// whose tools run through `executor`; `None` for the commands the screens do themselves.
///
/// # Errors
/// When the transcript refuses a loaded skill (the session cannot go on).
pub(crate) fn answer(
    p: &Prepared,
    executor: &dyn ToolExecutor,
    session: &mut Session<'_>,
    cmd: &Slash,
) -> Result<Option<Answer>, SessionError> {
    let shown = match cmd {
        Slash::Skills => skills(&p.skills),
        Slash::Agents => agents(&p.roles, p.agents, &p.tool_policy_files()),
        Slash::Policy => {
            // The policy in force: after `/allow`, the changed one.
            let live = executor.policies().map(|(requested, _)| requested);
            policy(
                p.enforcement,
                executor.engine(),
                live.as_ref().or(p.policy.as_ref()),
                p.policy_file.as_deref(),
            )
        }
        Slash::Skill(name) => match skill(&p.skills, name) {
            Ok(text) => {
                session.add_context(&text)?;
                let note = format!(
                    "skill `{name}` is loaded into the conversation ({} lines of instructions)",
                    text.lines().count()
                );
                return Ok(Some(Answer::SkillLoaded { text, note }));
            }
            Err(line) => vec![line],
        },
        _ => return Ok(None),
    };
    Ok(Some(Answer::Shown(shown)))
}

/// One line of what a command shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shown {
    /// A title.
    Heading(String),
    /// A name and what it is (`  name  description`); the name is drawn as code.
    Item(String, String),
    /// Secondary information.
    Muted(String),
    /// Something that went wrong.
    Error(String),
    /// A warning that tools run without a kernel scope.
    Unconfined(String),
}

/// `/skills`: each skill found, by name and description, and the notes of the search.
pub(crate) fn skills(skills: &SkillSet) -> Vec<Shown> {
    let mut out = Vec::new();
    if skills.is_empty() {
        out.push(Shown::Muted(
            "no skills were found (.bee/skills, ~/.config/bee/skills; see docs/skills.md)".into(),
        ));
    }
    for skill in skills {
        out.push(Shown::Item(
            skill.name.clone(),
            one_line(&skill.description),
        ));
    }
    out.extend(skills.notes().iter().map(|n| Shown::Muted(n.clone())));
    out
}

/// `/skill NAME`: the skill's instructions, to load into the conversation.
///
/// # Errors
/// The line to show when there is no skill of that name (naming those there are).
pub(crate) fn skill(skills: &SkillSet, name: &str) -> Result<String, Shown> {
    match skills.get(name) {
        Some(skill) => Ok(skill.instructions()),
        None => {
            let known: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            Err(Shown::Error(if known.is_empty() {
                format!("no skill `{name}`: no skills were found (/skills)")
            } else {
                format!("no skill `{name}`; the skills are {}", known.join(", "))
            }))
        }
    }
}

/// `/agents`: the roles subagents can play (with their policy files), the problems of the
/// role files that were skipped, and the tools that run in scopes of their own.
pub(crate) fn agents(
    roles: &Roles,
    delegation_on: bool,
    tool_policies: &[(String, PathBuf)],
) -> Vec<Shown> {
    let mut out = Vec::new();
    if !delegation_on {
        out.push(Shown::Muted(
            "the agent cannot delegate: no roles were found in .bee/agents or \
             ~/.config/bee/agents (or agents.max_depth is 0); see docs/agents.md"
                .into(),
        ));
    }
    for role in roles.iter() {
        out.push(Shown::Item(
            role.name.clone(),
            format!(
                "{}  ({})",
                one_line(&role.description),
                lexical(&role.policy).display()
            ),
        ));
    }
    out.extend(roles.problems().map(|p| Shown::Error(p.to_owned())));
    for (tool, file) in tool_policies {
        out.push(Shown::Item(
            format!("tool {tool}"),
            format!("runs in a scope of its own under {}", file.display()),
        ));
    }
    out
}

/// `/policy`: the effective policy's rules and whether the kernel enforces them (and with
/// which engine, when it is not the BPF LSM), or that there is none (`--host`).
pub(crate) fn policy(
    enforcement: Enforcement,
    engine: Option<bee_userspace::scope::EngineKind>,
    policy: Option<&CompiledPolicy>,
    file: Option<&Path>,
) -> Vec<Shown> {
    let (Enforcement::Kernel, Some(p), Some(file)) = (enforcement, policy, file) else {
        return vec![Shown::Unconfined(
            "no policy: --host runs tools as hardened host processes with NO kernel scope".into(),
        )];
    };
    let list = |key: &str, rules: Vec<String>| {
        Shown::Item(
            key.to_owned(),
            if rules.is_empty() {
                "(none)".to_owned()
            } else {
                rules.join(", ")
            },
        )
    };
    let net = p
        .net
        .allow
        .iter()
        .map(|r| {
            let protos: Vec<String> = r.protocols.iter().map(ToString::to_string).collect();
            format!("{} port {} {}", r.net, r.ports, protos.join("+"))
        })
        .chain(p.net.hosts.iter().map(|r| {
            let protos: Vec<String> = r.protocols.iter().map(ToString::to_string).collect();
            format!("{} port {} {}", r.host, r.ports, protos.join("+"))
        }))
        .collect();
    vec![
        Shown::Heading(format!(
            "policy {} — enforced by the kernel{}: every tool call runs in a scope",
            file.display(),
            match engine {
                Some(e @ bee_userspace::scope::EngineKind::Landlock) => format!(" ({e} engine)"),
                _ => String::new(),
            }
        )),
        list(
            "fs.read",
            p.fs.read.iter().map(|r| r.pattern.to_string()).collect(),
        ),
        list(
            "fs.write",
            p.fs.write.iter().map(|r| r.pattern.to_string()).collect(),
        ),
        list(
            "exec.allow",
            p.exec.iter().map(|r| r.pattern.to_string()).collect(),
        ),
        list("net.allow", net),
        list(
            "net.unix",
            p.net.unix.iter().map(|r| r.pattern.to_string()).collect(),
        ),
        Shown::Muted(
            "(the tool runner is granted its own executable and libraries on top; `bee \
             validate --emit compiled` shows every rule)"
                .into(),
        ),
    ]
}

/// `path` with `.` and `name/..` taken out, without touching the file system (role files name
/// their policy relative to `.bee/agents/`, so `.bee/agents/../../policies/x.toml` reads as
/// `policies/x.toml`).
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            // The root's parent is the root.
            Component::ParentDir if out.has_root() && out.parent().is_none() => {}
            other => out.push(other),
        }
    }
    out
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn role_policy_paths_read_without_dot_dot() {
        assert_eq!(
            super::lexical(Path::new("/w/.bee/agents/../../policies/keeper.toml")),
            Path::new("/w/policies/keeper.toml")
        );
        assert_eq!(super::lexical(Path::new("/a/./b/../../..")), Path::new("/"));
        assert_eq!(super::lexical(Path::new("../x/./y")), Path::new("../x/y"));
    }
}
