//! What the tests that run a real agent under its profile (`landlock_codex`,
//! `landlock_opencode`, `landlock_gemini`) check once it has run the scripted model's commands
//! — read a secret beside the workspace, write the agent's own protected files, fix
//! `app.py` — whatever wire protocol the agent speaks.

use std::path::Path;

/// The task each agent is given.
pub const PROMPT: &str = "Fix the bug in app.py.";
/// The secret's text, which must reach the model in no request.
pub const SECRET: &str = "TOP SECRET\n";
/// `app.py` with its bug, as the test writes it.
pub const BUGGY: &str = "def add(a, b):\n    return a - b\n";
/// `app.py` once the scripted model's fix has landed.
pub const FIXED: &str = "def add(a, b):\n    return a + b\n";

/// The agent's turns among the requests the scripted server `seen` (method and path, body):
/// the JSON bodies `is_turn` keeps, checked to be the prompt and then one per command, each
/// carrying the tool outputs of every command before it (`tool_outputs`); the secret's text
/// is checked to be in no request at all. Returns the last turn's tool outputs.
pub fn turns(
    seen: &[(String, String)],
    is_turn: impl Fn(&serde_json::Value) -> bool,
    commands: usize,
    tool_outputs: impl Fn(&serde_json::Value) -> Vec<String>,
) -> Vec<String> {
    assert!(
        !seen.iter().any(|(_, b)| b.contains(SECRET.trim_end())),
        "{seen:?}"
    );
    let turns: Vec<serde_json::Value> = seen
        .iter()
        .map(|(_, b)| serde_json::from_str(b).unwrap_or_default())
        .filter(|r| is_turn(r))
        .collect();
    assert_eq!(turns.len(), commands + 1, "{seen:?}");
    assert!(turns[0].to_string().contains(PROMPT), "{}", turns[0]);
    for (n, req) in turns.iter().enumerate() {
        assert_eq!(tool_outputs(req).len(), n, "request {n}: {req}");
    }
    tool_outputs(&turns[commands])
}

/// Checks that `outputs` (the last turn's) show the kernel's refusals: the secret's read in
/// the first, and a write to each of `protected` in the second (a read-only file system, or
/// no permission).
pub fn refused(outputs: &[String], secret: &Path, protected: &[&Path]) {
    assert!(
        outputs[0].contains(&format!("cat: {}: Permission denied", secret.display())),
        "{}",
        outputs[0]
    );
    for path in protected {
        let said = |why: &str| format!("{}: {why}", path.display());
        assert!(
            outputs[1].contains(&said("Read-only file system"))
                || outputs[1].contains(&said("Permission denied")),
            "{}: {}",
            path.display(),
            outputs[1]
        );
    }
}

/// Checks that the fix landed in `ws/app.py`, and that bee explained the refused read of
/// `secret` from the kernel's audit record on its standard error `err`.
pub fn fixed_and_explained(ws: &Path, secret: &Path, err: &str, outputs: &[String]) {
    assert_eq!(
        std::fs::read_to_string(ws.join("app.py")).ok().as_deref(),
        Some(FIXED),
        "the fix lands: {outputs:?}"
    );
    assert!(
        err.contains(&format!(
            "bee: denied: open {} for read: no fs.read grant covers it",
            secret.display()
        )),
        "{err}"
    );
}
