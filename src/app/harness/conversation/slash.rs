//! Slash commands: typed at the prompt, handled by bee, never sent to the model.

/// A command the user typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slash {
    /// `/help`: the commands and keys.
    Help,
    /// `/skills`: the skills found, by name and description.
    Skills,
    /// `/skill NAME`: load a skill into the conversation.
    Skill(String),
    /// `/agents`: the roles subagents can play, and the per-tool scopes.
    Agents,
    /// `/policy`: the effective policy and whether the kernel enforces it.
    Policy,
    /// `/cost`: tokens, cost with its price source, latency so far.
    Cost,
    /// `/allow [N]`: the narrowest rule that would have allowed the N-th most recent denial
    /// (1, the default, is the latest), its proof, and on yes the live change.
    Allow(usize),
    /// `/show [N]`: the whole output of the session's N-th tool call (`None`: the last).
    Show(Option<usize>),
    /// `/clear`: forget the conversation (the records go on).
    Clear,
    /// `/quit` (or `/exit`): end the session.
    Quit,
    /// Anything else that starts with `/`: a hint, never the model.
    Unknown(String),
}

/// The commands, for `/help` and for hints.
pub(crate) const COMMANDS: [(&str, &str); 10] = [
    ("/help", "this list, and the keys"),
    (
        "/skills",
        "the skills found in .bee/skills and ~/.config/bee/skills",
    ),
    (
        "/skill NAME",
        "load a skill's instructions into the conversation",
    ),
    (
        "/agents",
        "the roles the agent can delegate to (.bee/agents, ~/.config/bee/agents)",
    ),
    (
        "/policy",
        "the effective policy, and whether the kernel enforces it",
    ),
    (
        "/allow [N]",
        "after a denial: the narrowest rule that allows it, proven, applied live on yes",
    ),
    (
        "/show [N]",
        "the whole output of tool call N (numbered on its result line; the last by default)",
    ),
    (
        "/cost",
        "tokens, cost (with the price's source) and model latency so far",
    ),
    (
        "/clear",
        "forget the conversation; the transcript and the limits go on",
    ),
    (
        "/quit",
        "end the session (also Ctrl-D, or Ctrl-C on an empty line)",
    ),
];

/// The keys, for `/help`.
pub(crate) const KEYS: [(&str, &str); 5] = [
    (
        "↑ ↓, Ctrl-P Ctrl-N",
        "walk the history (kept across sessions)",
    ),
    ("\\ at the end of a line", "go on typing on the next line"),
    (
        "Ctrl-C while the agent works",
        "stop the model call or tool call; the session goes on",
    ),
    ("Ctrl-C on a line with text", "clear the line"),
    ("Ctrl-C on an empty line, Ctrl-D", "end the session"),
];

impl Slash {
    /// The command `line` holds, or `None` when it is a message for the model (a line that
    /// does not start with `/`, or starts with `//`, which sends the rest with one `/`).
    pub(crate) fn parse(line: &str) -> Option<Self> {
        let line = line.trim();
        let rest = line.strip_prefix('/')?;
        if rest.starts_with('/') {
            return None;
        }
        let (word, arg) = match rest.split_once(char::is_whitespace) {
            Some((w, a)) => (w, a.trim()),
            None => (rest, ""),
        };
        Some(match (word, arg) {
            ("help" | "?", _) => Self::Help,
            ("skills", _) => Self::Skills,
            ("skill", "") => Self::Unknown("/skill needs a name: /skill NAME (see /skills)".into()),
            ("skill", name) => Self::Skill(name.to_owned()),
            ("agents", _) => Self::Agents,
            ("policy", _) => Self::Policy,
            ("cost", _) => Self::Cost,
            ("allow", "") => Self::Allow(1),
            ("allow", n) => match n.parse::<usize>() {
                Ok(n) if n >= 1 => Self::Allow(n),
                _ => Self::Unknown(format!(
                    "/allow takes the number of a recent denial, 1 (the latest) or more: not `{n}`"
                )),
            },
            ("show", "") => Self::Show(None),
            ("show", n) => match n.parse::<usize>() {
                Ok(n) if n >= 1 => Self::Show(Some(n)),
                _ => Self::Unknown(format!(
                    "/show takes the number of a tool call, 1 (the first) or more: not `{n}`"
                )),
            },
            ("clear", _) => Self::Clear,
            ("quit" | "exit" | "q", _) => Self::Quit,
            (other, _) => Self::Unknown(hint(other)),
        })
    }
}

/// The hint for an unknown command: the closest one, and `/help`.
fn hint(word: &str) -> String {
    let close = COMMANDS
        .iter()
        .map(|(c, _)| c.split_whitespace().next().unwrap_or(c))
        .find(|c| {
            let c = &c[1..];
            c.starts_with(word) || word.starts_with(c) || edit_distance(c, word) <= 2
        });
    match close {
        Some(c) => format!("unknown command /{word}: did you mean {c}? (/help lists them)"),
        None => format!(
            "unknown command /{word} (/help lists them; // sends a line that starts with /)"
        ),
    }
}

/// Levenshtein distance, for a small "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_others_reach_the_model() {
        assert_eq!(Slash::parse("/help"), Some(Slash::Help));
        assert_eq!(Slash::parse("  /cost  "), Some(Slash::Cost));
        assert_eq!(
            Slash::parse("/skill review"),
            Some(Slash::Skill("review".into()))
        );
        assert_eq!(Slash::parse("/exit"), Some(Slash::Quit));
        assert_eq!(Slash::parse("/allow"), Some(Slash::Allow(1)));
        assert_eq!(Slash::parse("/allow 3"), Some(Slash::Allow(3)));
        assert!(matches!(Slash::parse("/allow 0"), Some(Slash::Unknown(_))));
        assert!(matches!(Slash::parse("/allow x"), Some(Slash::Unknown(_))));
        assert_eq!(Slash::parse("/show"), Some(Slash::Show(None)));
        assert_eq!(Slash::parse("/show 2"), Some(Slash::Show(Some(2))));
        assert!(matches!(Slash::parse("/show 0"), Some(Slash::Unknown(_))));
        assert_eq!(Slash::parse("fix the bug"), None);
        assert_eq!(Slash::parse("//etc/passwd is a path"), None);
    }

    #[test]
    fn unknown_commands_get_a_hint() {
        let Some(Slash::Unknown(h)) = Slash::parse("/cots") else {
            panic!()
        };
        assert!(h.contains("did you mean /cost?"), "{h}");
        let Some(Slash::Unknown(h)) = Slash::parse("/frobnicate") else {
            panic!()
        };
        assert!(h.contains("/help lists them"), "{h}");
        assert!(matches!(Slash::parse("/skill"), Some(Slash::Unknown(_))));
    }
}
