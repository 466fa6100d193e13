//! `bee mcp`: bee's tools as a Model Context Protocol server on standard input and output
//! (feature `mcp`; the server itself is [`crate::mcp`]).
//!
//! Set-up refuses as `bee repl` does, before the first message is read: 64 without a policy or
//! `--host` (or with both), 65/66 for a bad or missing file, 69 when the kernel cannot enforce
//! the policy (one scope is made and torn down to prove it can), 77 when bee lacks a
//! privilege. A build without the feature exits 69 and says so.

use std::path::PathBuf;

use crate::config::EngineChoice;

/// Arguments of `bee mcp`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// A configuration file, above .bee/config.toml and ~/.config/bee/config.toml.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The policy file that confines every tool call.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The directory the tools work in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Run tools as hardened host processes with NO kernel scope (needed when there is no
    /// policy).
    #[arg(long)]
    host: bool,
    /// The enforcement engine: `auto` (the BPF LSM where `bee check` passes, the Landlock
    /// engine otherwise), `bpf-lsm` or `landlock`.
    #[arg(long, value_name = "ENGINE")]
    engine: Option<EngineChoice>,
    /// Where the calls are recorded (the session is `<run id>/mcp.jsonl`).
    #[arg(long, value_name = "DIR")]
    records_dir: Option<PathBuf>,
}

/// What a build without the `mcp` feature says.
#[cfg(not(feature = "mcp"))]
const NOT_BUILT: &str =
    "this build of bee has no MCP server: it lacks the `mcp` feature (cargo build --features mcp)";

/// Runs `bee mcp` for this process.
pub fn run(args: &Args) -> super::Exit {
    #[cfg(feature = "mcp")]
    {
        match serving::serve(args) {
            Ok(()) => super::Exit::Ok,
            Err(super::harness::preflight::Refused(status, why)) => {
                eprintln!("bee mcp: {}", why.trim_end());
                status
            }
        }
    }
    #[cfg(not(feature = "mcp"))]
    {
        let _ = args;
        eprintln!("bee mcp: {NOT_BUILT}");
        super::Exit::Unavailable
    }
}

#[cfg(feature = "mcp")]
mod serving {
    use std::sync::Arc;

    use super::Args;
    use crate::app::Exit;
    use crate::app::harness::preflight::{
        Confined, Policies, Refused, RunSlot, confine, file_refusal, process_env, run_id,
        session_executor, session_policy, tool_registry, workspace_dir,
    };
    use crate::config::{Config, Flags};
    use crate::mcp::record::{SCENARIO, SESSION_ID};
    use crate::mcp::{CallLog, ScopeFn, Server};
    use crate::records::{EpisodeStarted, Limits, STORE_FILE, Store, Timestamp};
    use crate::skills::SkillSet;

    /// Checks everything, then serves until the client closes standard input.
    pub(super) fn serve(args: &Args) -> Result<(), Refused> {
        let env = process_env()?;
        let flags = Flags {
            config: args.config.clone(),
            policy: args.policy.clone(),
            workspace: args.workspace.clone(),
            host: args.host,
            engine: args.engine,
            records_dir: args.records_dir.clone(),
            ..Flags::default()
        };
        let config = Config::resolve_in(&flags, &env).map_err(|e| file_refusal(&e))?;
        let policy_file = session_policy(&config)?;
        let workspace = workspace_dir(&config)?;
        let compiler = Policies::default();
        let policy = match &policy_file {
            Some(p) => Some(compiler.compile(p, &workspace)?),
            None => None,
        };
        let run_id = run_id();
        let run_slot = RunSlot::default();
        let _ = run_slot.set(run_id.clone());
        // Skills, panels and subagents are for bee's own model: an MCP client has its own.
        let tools = Arc::new(tool_registry(
            &config,
            &Arc::new(SkillSet::default()),
            None,
            &run_slot,
            None,
        )?);
        let Confined {
            scoped, factory, ..
        } = confine(
            &config,
            &tools,
            policy.as_ref().zip(policy_file.as_deref()),
            &compiler,
            "bee mcp",
            "no call was served",
        )?;
        // Standard error is the client's log of the server.
        for warning in compiler.warnings() {
            eprintln!("warning: {warning}");
        }
        if !config.mcp_servers.is_empty() {
            // Said, not silently dropped: the client that runs `bee mcp` has its own servers.
            eprintln!(
                "bee mcp: serves bee's own tools; the configured [mcp.servers] ({}) are for \
                 `bee run` and `bee repl`",
                config
                    .mcp_servers
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let factory: Arc<dyn crate::episode::SandboxFactory> = Arc::from(factory);
        let scope: Arc<ScopeFn> = {
            let (factory, workspace, policy, tools) = (
                Arc::clone(&factory),
                workspace.clone(),
                policy.clone(),
                Arc::clone(&tools),
            );
            Arc::new(move || {
                session_executor(
                    factory.as_ref(),
                    &workspace,
                    policy.clone(),
                    &tools,
                    &scoped,
                    &std::collections::BTreeMap::new(),
                )
            })
        };
        // One scope made and torn down before the first message: a kernel that cannot
        // enforce (69), or a service that refuses the policy (its status), is refused now,
        // not at every call.
        let probe = scope().map_err(|why| Refused::no_executor(&why, "no call was served"))?;
        let records_dir = config.records_dir.value.clone();
        let store = Store::open(&records_dir.join(STORE_FILE))
            .map_err(|e| Refused(Exit::Software, format!("metrics store: {e}")))?;
        std::fs::create_dir_all(records_dir.join(&run_id))
            .map_err(|e| Refused(Exit::Software, format!("{}: {e}", records_dir.display())))?;
        let started = EpisodeStarted {
            run_id,
            episode_id: SESSION_ID.to_owned(),
            scenario: SCENARIO.to_owned(),
            model: String::new(),
            provider: "mcp".to_owned(),
            policy: probe.policy_record(policy_file.as_ref().map(|p| p.display().to_string())),
            workspace: workspace.display().to_string(),
            limits: Limits::default(),
            run_started_at: Timestamp::now(),
            parent: None,
            content_hash: None,
        };
        drop(probe);
        let log = CallLog::start(&records_dir, started, Some(Arc::new(store)))
            .map_err(|e| Refused(Exit::Software, format!("records: {e}")))?;
        let server = Server::new(tools.definitions(), scope, Arc::new(log));
        crate::mcp::serve(server).map_err(|why| Refused(Exit::Software, why))
    }
}
