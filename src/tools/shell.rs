//! The `shell` tool: `/bin/sh -c COMMAND`, launched directly as the call's child.

use std::time::Duration;

use serde::Deserialize;

use super::{Answer, Context, Placement, RunEnd, SHELL_TOOL, Tool, defs};
use crate::provider::ToolDef;
use crate::sandbox::Captured;

/// The shell every command runs in.
pub(crate) const SHELL: &str = "/bin/sh";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    command: String,
    #[serde(default)]
    timeout_secs: Option<u64>,
}

/// The shell tool: a command the policy must grant (`/bin/sh` and what it runs).
#[derive(Debug, Clone, Copy, Default)]
pub struct ShellTool;

impl Tool for ShellTool {
    fn definition(&self) -> ToolDef {
        // The shell's definition is among the built-in ones.
        defs::definition(SHELL_TOOL).unwrap_or_else(|| ToolDef {
            name: SHELL_TOOL.to_owned(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        })
    }

    fn placement(&self) -> Placement {
        Placement::Command
    }

    fn call(&self, args: &serde_json::Value, ctx: &Context<'_>) -> Answer {
        call(ctx, args)
    }
}

fn call(ctx: &Context<'_>, args: &serde_json::Value) -> Answer {
    let Some(sandbox) = ctx.sandbox else {
        return Answer::could_not_run("the shell needs a sandbox".to_owned());
    };
    let limits = ctx.limits;
    let args: Args = match serde_json::from_value(args.clone()) {
        Ok(a) => a,
        Err(e) => return Answer::could_not_run(format!("bad arguments for `shell`: {e}")),
    };
    if args.command.trim().is_empty() {
        return Answer::could_not_run("bad arguments for `shell`: `command` is empty".to_owned());
    }
    let timeout = match args.timeout_secs {
        Some(0) => {
            return Answer::could_not_run(
                "bad arguments for `shell`: `timeout_secs` must be at least 1".to_owned(),
            );
        }
        Some(s) if Duration::from_secs(s) > limits.shell_timeout_max => {
            return Answer::could_not_run(format!(
                "bad arguments for `shell`: `timeout_secs` may be at most {}",
                limits.shell_timeout_max.as_secs()
            ));
        }
        Some(s) => Duration::from_secs(s),
        None => limits.shell_timeout,
    };
    let spec = sandbox.command(SHELL).arg("-c").arg(&args.command);
    let run = match sandbox.run_until(&spec, None, timeout, limits.output_cap, ctx.stop) {
        Ok(r) => r,
        Err(e) => return Answer::from_sandbox_error("`/bin/sh`", e),
    };
    let end = RunEnd::of(&run);
    let head = match end {
        RunEnd::Interrupted => {
            return Answer {
                denials: run.denials,
                ..super::interrupted("the command")
            };
        }
        RunEnd::TimedOut => format!(
            "timed out after {} s; its process group was killed",
            timeout.as_secs()
        ),
        RunEnd::Exited(code) => format!("exit status {code}"),
    };
    let state = end.state(None);
    let output = render_output(&run.stdout, &run.stderr);
    let body = if output.is_empty() {
        format!("{head}\n(no output)")
    } else {
        format!("{head}\n{output}")
    };
    let permission_error = !run.denials.is_empty();
    Answer {
        state,
        body,
        denials: run.denials,
        permission_error,
        runner_denials: Vec::new(),
    }
}

fn render_output(stdout: &Captured, stderr: &Captured) -> String {
    let mut parts = Vec::new();
    for (name, c) in [("stdout", stdout), ("stderr", stderr)] {
        if c.total == 0 {
            continue;
        }
        let mut text = c.text();
        if c.truncated {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[{name} truncated: showing the first {} of {} bytes]",
                c.bytes.len(),
                c.total
            ));
        }
        parts.push(format!("[{name}]\n{}", text.trim_end_matches('\n')));
    }
    parts.join("\n")
}
