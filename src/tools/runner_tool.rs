//! The file tools: each call is `bee __tool NAME` in the sandbox, given its request on
//! standard input and answering with JSON on standard output ([`super::runner`]).

use bee_userspace::audit::AuditRecord;

use super::{
    Answer, Context, Placement, RunEnd, RunnerRequest, RunnerResponse, Tool, ToolLimits, ToolState,
    seconds,
};
use super::{defs, is_permission_errno};
use crate::provider::ToolDef;
use crate::sandbox::Sandbox;

/// One of the file tools ([`super::RUNNER_TOOLS`]).
#[derive(Debug, Clone)]
pub struct RunnerTool {
    def: ToolDef,
}

impl RunnerTool {
    /// The file tool `name`; `None` when bee has no such file tool.
    #[must_use]
    pub fn new(name: &str) -> Option<Self> {
        defs::definition(name).map(|def| Self { def })
    }

    /// A tool the runner serves under `def`'s name (the review tools).
    #[must_use]
    pub fn from_definition(def: ToolDef) -> Self {
        Self { def }
    }
}

impl Tool for RunnerTool {
    fn definition(&self) -> ToolDef {
        self.def.clone()
    }

    fn placement(&self) -> Placement {
        Placement::Runner
    }

    fn call(&self, args: &serde_json::Value, ctx: &Context<'_>) -> Answer {
        let Some(sandbox) = ctx.sandbox else {
            return Answer::could_not_run("the file tools need a sandbox".to_owned());
        };
        run_runner(sandbox, &self.def.name, args, ctx.limits, ctx.stop)
    }
}

/// Runs `bee __tool NAME` in `sandbox` with `args`, and turns its answer (or its silence),
/// with the denials of the call, into an [`Answer`].
pub(crate) fn run_runner(
    sandbox: &Sandbox,
    name: &str,
    args: &serde_json::Value,
    limits: &ToolLimits,
    stop: &(dyn Fn() -> bool + Sync),
) -> Answer {
    let request = RunnerRequest {
        workspace: sandbox.workspace().to_owned(),
        output_cap: limits.output_cap,
        args: args.clone(),
        // Three quarters of the timeout, so a long walk answers before it is killed.
        time_budget_ms: u64::try_from(limits.file_timeout.as_millis() / 4 * 3).ok(),
        unconfined: sandbox.enforcement() == crate::records::Enforcement::Host,
    };
    let input = match serde_json::to_vec(&request) {
        Ok(i) => i,
        Err(e) => return Answer::could_not_run(format!("encoding the request: {e}")),
    };
    let spec = sandbox
        .command(sandbox.runner().as_os_str())
        .args(["__tool", name])
        .env_pass(Vec::<String>::new())
        // The runner passes on no variable, but gix looks the home directory up as it opens a
        // repository (then ignores it, opened isolated): without `HOME` that is
        // `getpwuid_r`, reading `/etc/nsswitch.conf` and `/etc/passwd` and asking nscd over a
        // unix socket, each a denial in the transcript. The conventional home of a user
        // without one ends it there.
        .env("HOME", "/nonexistent");
    // JSON escaping can grow the content up to sixfold; the rest is the envelope.
    let stdout_cap = limits.output_cap.saturating_mul(6).saturating_add(4096);
    let mut run =
        match sandbox.run_until(&spec, Some(&input), limits.file_timeout, stdout_cap, stop) {
            Ok(run) => run,
            Err(e) => return Answer::from_sandbox_error("the tool runner", e),
        };
    let (runner_denials, denials): (Vec<_>, Vec<_>) = std::mem::take(&mut run.denials)
        .into_iter()
        .partition(is_runner_startup);
    let end = RunEnd::of(&run);
    match end {
        RunEnd::Interrupted => Answer {
            denials,
            runner_denials,
            ..super::interrupted(&format!("`{name}`"))
        },
        RunEnd::TimedOut => Answer {
            state: end.state(None),
            body: format!(
                "`{name}` timed out after {} and was killed",
                seconds(limits.file_timeout)
            ),
            denials,
            permission_error: false,
            runner_denials,
        },
        RunEnd::Exited(code) => match serde_json::from_slice::<RunnerResponse>(&run.stdout.bytes) {
            Ok(resp) => Answer {
                state: end.state(Some(resp.state)),
                body: resp.content,
                permission_error: resp.errno.is_some_and(is_permission_errno),
                denials,
                runner_denials,
            },
            Err(_) => {
                let stderr = run.stderr.text();
                Answer {
                    // A runner that gave no answer could not run the tool.
                    state: end.state(Some(ToolState::CouldNotRun)),
                    body: format!(
                        "the tool runner gave no answer (exit status {code}){}",
                        if stderr.trim().is_empty() {
                            String::new()
                        } else {
                            format!(": {}", stderr.trim())
                        }
                    ),
                    // A runner that died without answering may well have been stopped by a
                    // denial: lead with any.
                    permission_error: true,
                    denials,
                    runner_denials,
                }
            }
        },
    }
}

/// True for the runner's read of its own `/proc/PID/maps` at start-up (the C library reads
/// it to find the main thread's stack). Under the BPF LSM the path names the runner's PID as
/// the host sees it; under the Landlock engine every launch runs as PID 2 of a PID namespace
/// of its own (below its init), which its private `/proc` names, while the record carries the
/// host's PID. No other program runs in a file tool's call, so `/proc/2/maps` there is the
/// runner's.
fn is_runner_startup(record: &AuditRecord) -> bool {
    let own = format!("/proc/{}/maps", record.pid);
    record.hook == bee_common::Hook::FileOpen
        && record.access == [bee_userspace::audit::Access::Read]
        && record
            .path
            .as_deref()
            .is_some_and(|p| p == own || p == "/proc/2/maps" || p == "/proc/self/maps")
}
