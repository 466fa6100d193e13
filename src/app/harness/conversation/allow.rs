//! `/allow [N]`: after a denial, the narrowest rule that would have allowed it, the prover's
//! diff, a y/N question, and on yes the live change — shared by the inline REPL and the TUI,
//! each drawing the [`Shown`] lines its own way and asking the question its own way.
//!
//! The rule comes from [`crate::allow::propose`], the proof from [`crate::allow::Change`]
//! (against the policy in force, and against the parent's when the scope has one), the switch
//! from [`ToolExecutor::replace_policy`] (atomic in the kernel). An applied change is
//! recorded twice: as a system message in the transcript (the model learns of it too) and as a
//! JSON line in `<run dir>/policy-changes.jsonl`.

use std::io::Write as _;
use std::path::Path;
use std::time::SystemTime;

use bee_userspace::audit::{AuditRecord, rfc3339};

use super::commands::Shown;
use crate::allow::{Change, file_id, propose};
use crate::session::{Session, SessionError, ToolExecutor};

/// The question asked before a change is applied.
pub(crate) const QUESTION: &str = "apply this change to the running scope? [y/N] ";

/// The file, in the run directory, that lists every change applied.
pub(crate) const CHANGES_FILE: &str = "policy-changes.jsonl";

/// How many other recent denials the proposal lists.
const OTHERS: usize = 5;

/// A proven change waiting for the user's yes.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    change: Change,
    denial: AuditRecord,
}

/// Whether `answer` is a yes (`y` or `yes`, any case); anything else is a no.
pub(crate) fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// `/allow N` (1, the default, is the most recent denial): the proposal and its proof to
/// show, and the change to apply on yes; or, with no change, why not.
pub(crate) fn proposal(executor: &dyn ToolExecutor, n: usize) -> (Vec<Shown>, Option<Pending>) {
    let Some((requested, _)) = executor.policies() else {
        return (
            vec![Shown::Unconfined(
                "no policy: --host runs tools with no kernel scope, so there is nothing to allow"
                    .into(),
            )],
            None,
        );
    };
    let mut denials = executor.recent_denials();
    denials.reverse();
    if denials.is_empty() {
        return (
            vec![Shown::Muted(
                "no denial yet in this session's scope: /allow answers one after it happens".into(),
            )],
            None,
        );
    }
    let Some(denial) = n.checked_sub(1).and_then(|i| denials.get(i)).cloned() else {
        return (
            vec![Shown::Error(format!(
                "no denial {n}: there are {} recent one(s); /allow 1 is the most recent",
                denials.len()
            ))],
            None,
        );
    };
    let mut out = vec![Shown::Heading(format!(
        "denial {n} ({}): {}",
        denial.time,
        denial.explanation()
    ))];
    let others: Vec<String> = denials
        .iter()
        .enumerate()
        .filter(|(i, _)| i + 1 != n)
        .take(OTHERS)
        .map(|(i, d)| format!("/allow {} — {}", i + 1, d.explanation()))
        .collect();
    let rule = match propose(&denial, &file_id) {
        Ok(rule) => rule,
        Err(why) => {
            out.push(Shown::Error(format!("{why}; nothing changes")));
            out.extend(others.into_iter().map(Shown::Muted));
            return (out, None);
        }
    };
    let bound = executor.bound();
    let change = match Change::new(
        &requested,
        bound.as_ref().map(|(p, n)| (p, n.as_str())),
        rule,
    ) {
        Ok(c) => c,
        Err(why) => {
            out.push(Shown::Error(format!("{why}; nothing changes")));
            out.extend(others.into_iter().map(Shown::Muted));
            return (out, None);
        }
    };
    out.push(Shown::Item(
        "rule".into(),
        format!("{} (the narrowest that allows it)", change.rule),
    ));
    out.push(Shown::Muted(
        "the prover: what the new policy grants that the policy in force does not".into(),
    ));
    for e in &change.diff.added {
        out.push(Shown::Item(
            "+".into(),
            crate::app::policy_cmd::line_body(e, "the policy in force"),
        ));
    }
    for e in &change.diff.removed {
        out.push(Shown::Item(
            "-".into(),
            crate::app::policy_cmd::line_body(e, "the new policy"),
        ));
    }
    if let Some((_, name)) = &bound {
        out.push(Shown::Muted(format!(
            "proven within the parent's policy ({name})"
        )));
    }
    out.extend(others.into_iter().map(Shown::Muted));
    (out, Some(Pending { change, denial }))
}

/// Applies a confirmed change to the running scope and records it; what to show.
///
/// # Errors
/// When the transcript refuses the record (the session cannot go on). A refused switch is
/// shown, not an error: the old policy stays in force.
pub(crate) fn apply(
    executor: &dyn ToolExecutor,
    session: &mut Session<'_>,
    pending: Pending,
    run_dir: &Path,
) -> Result<Vec<Shown>, SessionError> {
    let Pending { change, denial } = pending;
    let started = std::time::Instant::now();
    if let Err(why) = executor.replace_policy(&change.policy) {
        return Ok(vec![Shown::Error(format!(
            "the change was not applied: {why}"
        ))]);
    }
    let took = started.elapsed();
    let now = rfc3339(SystemTime::now());
    session.add_system(&format!(
        "[bee: at {now} the user allowed `{}` live, answering the denial at {} `{}`. The \
         policy in force now grants it; retry the operation if it is still needed.]",
        change.rule,
        denial.time,
        denial.explanation()
    ))?;
    let mut shown = vec![Shown::Item(
        "applied".into(),
        format!(
            "{} — in force in the running scope ({} ms); recorded in the transcript and {}",
            change.rule,
            took.as_millis(),
            CHANGES_FILE
        ),
    )];
    let line = serde_json::json!({
        "time": now,
        "rule": change.rule.to_string(),
        "key": change.rule.key(),
        "denial": {
            "time": denial.time,
            "hook": denial.hook,
            "explanation": denial.explanation(),
            "path": denial.path,
            "addr": denial.addr,
            "port": denial.port,
        },
        "apply_ms": took.as_secs_f64() * 1000.0,
    });
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(run_dir.join(CHANGES_FILE))
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        shown.push(Shown::Error(format!(
            "{} could not be written ({e}); the transcript has the change",
            run_dir.join(CHANGES_FILE).display()
        )));
    }
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use bee_core::{CompileOptions, CompiledPolicy, compile_str};
    use bee_userspace::audit::{AuditRecord, Reason, Verdict};

    use super::{Shown, is_yes, proposal};
    use crate::provider::{ToolCall, ToolDef};
    use crate::records::Enforcement;
    use crate::session::{Bounds, ToolExecution, ToolExecutor};

    /// A kernel-mode executor with a policy, recent denials and maybe a parent.
    struct Fake {
        policy: Option<CompiledPolicy>,
        denials: Vec<AuditRecord>,
        parent: Option<CompiledPolicy>,
    }

    impl ToolExecutor for Fake {
        fn definitions(&self) -> Vec<ToolDef> {
            Vec::new()
        }
        fn call(&self, _: &ToolCall, _: &Bounds) -> ToolExecution {
            ToolExecution::could_not_run("fake")
        }
        fn check(&self, _: &str, _: &Bounds) -> ToolExecution {
            ToolExecution::could_not_run("fake")
        }
        fn enforcement(&self) -> Enforcement {
            Enforcement::Kernel
        }
        fn policies(&self) -> Option<(CompiledPolicy, CompiledPolicy)> {
            self.policy.clone().map(|p| (p.clone(), p))
        }
        fn recent_denials(&self) -> Vec<AuditRecord> {
            self.denials.clone()
        }
        fn bound(&self) -> Option<(CompiledPolicy, String)> {
            self.parent
                .clone()
                .map(|p| (p, "the caller's policy".to_owned()))
        }
    }

    fn policy(text: &str) -> CompiledPolicy {
        let options = CompileOptions {
            base: "/w".into(),
            home: None,
        };
        compile_str("p.toml", text, &options).unwrap().policy
    }

    fn read_denial(path: &str) -> AuditRecord {
        AuditRecord {
            time: "2026-12-01T17:00:00.000Z".into(),
            scope: 7,
            pid: 10,
            tid: 10,
            comm: "cat".into(),
            hook: bee_common::Hook::FileOpen.into(),
            verdict: Verdict::Deny,
            errno: Some(1),
            access: vec![bee_userspace::audit::Access::Read],
            path: Some(path.into()),
            path_truncated: false,
            proto: None,
            addr: None,
            port: None,
            capability: None,
            syscall: None,
            grant: Some(crate::records::GrantKind::FsRead),
            reason: Some(Reason::NoGrant),
            policy: "p.toml".into(),
            learn: false,
            nested: false,
        }
    }

    fn text(shown: &[Shown]) -> String {
        format!("{shown:?}")
    }

    #[test]
    fn a_denial_gets_its_rule_and_the_provers_lines_and_a_question() {
        let fake = Fake {
            policy: Some(policy("version = 1\n[fs]\nread = [\"/w/**\"]\n")),
            // Oldest first, as executors keep them.
            denials: vec![read_denial("/etc/a"), read_denial("/etc/b")],
            parent: None,
        };
        let (shown, pending) = proposal(&fake, 1);
        let t = text(&shown);
        assert!(pending.is_some(), "{t}");
        assert!(
            t.contains(r#"fs.read += \"/etc/b\""#),
            "the latest first: {t}"
        );
        assert!(t.contains("grants read of `/etc/b`"), "{t}");
        assert!(t.contains("/allow 2"), "the others are listed: {t}");
        let (shown, pending) = proposal(&fake, 2);
        assert!(pending.is_some());
        assert!(text(&shown).contains(r#"fs.read += \"/etc/a\""#));
        let (shown, pending) = proposal(&fake, 3);
        assert!(pending.is_none());
        assert!(text(&shown).contains("no denial 3"));
    }

    #[test]
    fn no_policy_no_denial_no_rule_and_a_parent_each_change_nothing() {
        let host = Fake {
            policy: None,
            denials: vec![read_denial("/etc/a")],
            parent: None,
        };
        let (shown, pending) = proposal(&host, 1);
        assert!(pending.is_none() && text(&shown).contains("nothing to allow"));
        let quiet = Fake {
            policy: Some(policy("version = 1\n")),
            denials: Vec::new(),
            parent: None,
        };
        let (shown, pending) = proposal(&quiet, 1);
        assert!(pending.is_none() && text(&shown).contains("no denial yet"));
        let mut never = read_denial("/dev/sda");
        never.reason = Some(Reason::NeverGranted);
        never.grant = None;
        let refused = Fake {
            policy: Some(policy("version = 1\n")),
            denials: vec![never],
            parent: None,
        };
        let (shown, pending) = proposal(&refused, 1);
        assert!(pending.is_none());
        assert!(
            text(&shown).contains("whatever the policy says"),
            "{shown:?}"
        );
        let child = Fake {
            policy: Some(policy("version = 1\n[fs]\nread = [\"/w/src/**\"]\n")),
            denials: vec![read_denial("/etc/shadow")],
            parent: Some(policy("version = 1\n[fs]\nread = [\"/w/**\"]\n")),
        };
        let (shown, pending) = proposal(&child, 1);
        let t = text(&shown);
        assert!(pending.is_none(), "{t}");
        assert!(
            t.contains("beyond its parent") && t.contains("/etc/shadow"),
            "{t}"
        );
    }

    #[test]
    fn only_y_or_yes_is_a_yes() {
        for yes in ["y", "Y", " yes ", "YES"] {
            assert!(is_yes(yes), "{yes}");
        }
        for no in ["", "n", "no", "yep", "sure", "y es"] {
            assert!(!is_yes(no), "{no}");
        }
    }
}
