//! The application layer: command-line parsing, command dispatch and exit statuses.
//!
//! Every command returns an [`Exit`]; `main` maps it to the process status in one place.

mod check;
mod completions;
mod config_cmd;
pub mod enforcement;
mod exec;
mod exec_remote;
mod exit;
#[cfg(feature = "findings")]
mod findings_cmd;
mod harness;
mod learn;
mod man;
mod mcp_cmd;
mod metrics;
mod policy_cmd;
mod records_cmd;
mod repl;
pub mod run;
mod runner_cmd;
mod serve_cmd;
#[cfg(feature = "tui")]
mod tui;
#[cfg(feature = "tui")]
#[doc(hidden)]
pub use tui::bench as tui_bench;
mod user;
mod validate;

use std::io::{ErrorKind, Write};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

pub use exit::Exit;

/// bee runs AI coding agents whose every tool call is confined by eBPF LSM programs.
///
/// Generic over its commands so that one definition serves two command lines: the one bee
/// parses ([`Invocation`]) and the public one that completions and the man page describe
/// ([`Command`]).
#[derive(Debug, Parser)]
#[command(name = "bee", version, about, long_about = None, arg_required_else_help = false)]
struct Cli<C: Subcommand> {
    #[command(subcommand)]
    command: Option<C>,
}

/// Every command bee parses: the public ones and the hidden ones bee starts itself.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
#[expect(
    clippy::large_enum_variant,
    reason = "one value, parsed once at start; boxing would only add an indirection"
)]
enum Invocation {
    // The public commands, at the top level of the command line.
    #[command(flatten)]
    Public(Command),
    /// Run one file tool inside a sandbox (started by bee itself).
    #[command(name = "__tool", hide = true)]
    Tool(runner_cmd::Args),
}

/// The public commands.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Command {
    /// Compile a policy, plan its enforcement, and optionally prove it attenuates a parent.
    Validate(validate::Args),
    /// Compare policies: `bee policy diff OLD NEW` shows what each grants that the other does not.
    Policy(policy_cmd::Args),
    /// Check whether this kernel can enforce policies, gate by gate (0: yes, 65: no).
    Check(check::Args),
    /// Run one command in a fresh scope confined by a policy; exits with its status.
    Exec(exec::Args),
    /// Show the effective configuration and where each value came from.
    Config(config_cmd::Args),
    /// Report tokens, cost, latency and denials from recorded episodes.
    Metrics(metrics::Args),
    /// Run a scenario's agent episodes, each tool call confined by the policy.
    Run(run::Args),
    /// Work with records directories: merge the records of a scenario's shards.
    Records(records_cmd::Args),
    /// The findings ledger: list findings, rule on one, export SARIF.
    #[cfg(feature = "findings")]
    Findings(findings_cmd::Args),
    /// Chat with a sandboxed agent in the terminal; every tool call confined by the policy.
    Repl(repl::Args),
    /// The privileged service: confine ordinary users' commands, each scope proven within a ceiling.
    Serve(serve_cmd::Args),
    /// Serve bee's tools to another agent over MCP on stdin/stdout, each call in its own scope.
    Mcp(mcp_cmd::Args),
    /// Print a shell completion script for bash, zsh or fish.
    #[command(after_help = completions::AFTER_HELP)]
    Completions(completions::Args),
    /// Print the bee(1) man page, or write it and one page per command into a directory.
    #[command(after_help = man::AFTER_HELP)]
    Man(man::Args),
}

/// The public command line, without the hidden commands: what `bee completions` and `bee man`
/// describe.
fn public_command() -> clap::Command {
    Cli::<Command>::command()
}

/// Writes `bytes` to stdout. A closed pipe (`bee completions bash | head`) is not an error;
/// any other failure is reported, with [`Exit::IoErr`].
fn write_stdout(bytes: &[u8]) -> Exit {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => {
            eprintln!("bee: writing to stdout: {e}");
            Exit::IoErr
        }
    }
}

/// Parses the command line, runs the command and returns its exit status.
pub fn main() -> ExitCode {
    let cli = match Cli::<Invocation>::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Ok
            };
            // Help and version go to stdout; a broken pipe there is not an error.
            let _ = e.print();
            return code.into();
        }
    };
    let exit = match cli.command {
        None => {
            let mut out = std::io::stdout();
            let _ = Cli::<Invocation>::command().write_help(&mut out);
            let _ = writeln!(out);
            Exit::Ok
        }
        Some(Invocation::Public(command)) => match command {
            Command::Validate(args) => validate::run(&args),
            Command::Policy(args) => policy_cmd::run(&args),
            Command::Check(args) => check::run(&args),
            Command::Exec(args) => exec::run(&args),
            Command::Config(args) => config_cmd::run(&args),
            Command::Metrics(args) => metrics::run(&args),
            Command::Run(args) => run::run(&args),
            Command::Records(args) => records_cmd::run(&args),
            #[cfg(feature = "findings")]
            Command::Findings(args) => findings_cmd::run(&args),
            Command::Repl(args) => repl::run(&args),
            Command::Mcp(args) => mcp_cmd::run(&args),
            Command::Serve(args) => serve_cmd::run(&args),
            Command::Completions(args) => completions::run(&args),
            Command::Man(args) => man::run(&args),
        },
        Some(Invocation::Tool(args)) => runner_cmd::run(&args),
    };
    exit.into()
}
