//! `bee config show`: every effective configuration value and where it came from, after the
//! checks a session makes of them before its first model call (the provider file and its
//! recording, the policy, the theme), refused with the statuses a session would exit with.

use serde_json::json;

use super::Exit;
use super::harness::preflight::{Refused, compile_policy};
use crate::config::{Config, Confinement, FileError, Flags};
use crate::provider::ProviderSpec;

/// Arguments of `bee config`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Print every effective value with its origin (flag, file:line, or default).
    Show {
        #[command(flatten)]
        flags: Flags,
        /// Print one JSON object on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `bee config`.
pub fn run(args: &Args) -> Exit {
    let Action::Show { flags, json } = &args.action;
    let config = match Config::resolve(flags) {
        Ok(c) => c,
        Err(e) => return report_error(&e, *json),
    };
    if let Err(exit) = session_checks(&config, *json) {
        return exit;
    }
    let enforcement = match config.require_policy_or_host() {
        Ok(Confinement::Policy(p)) => format!(
            "each tool call runs in a kernel scope under {}, where the kernel can enforce it \
             (`bee check`; a session refuses to start where it cannot)",
            p.value.display()
        ),
        Ok(Confinement::Host(origin)) => format!(
            "tools run as hardened host processes with NO kernel scope (host from {origin})"
        ),
        Err(refusal) => format!("a session would refuse to start: {refusal}"),
    };
    if *json {
        let entries: Vec<_> = config
            .entries()
            .into_iter()
            .map(|(key, value, origin)| json!({"key": key, "value": value, "origin": origin}))
            .collect();
        println!(
            "{}",
            json!({
                "ok": true,
                "entries": entries,
                "files": config.files,
                "enforcement": enforcement,
            })
        );
        return Exit::Ok;
    }
    let entries = config.entries();
    let key_width = entries.iter().map(|(k, _, _)| k.len()).max().unwrap_or(0);
    let value_width = entries
        .iter()
        .map(|(_, v, _)| v.chars().count())
        .max()
        .unwrap_or(0)
        .min(60);
    for (key, value, origin) in entries {
        println!("{key:key_width$}  {value:value_width$}  # {origin}");
    }
    println!();
    if !config.files.is_empty() {
        println!("{RELATIVE_PATHS}");
    }
    println!("{enforcement}");
    Exit::Ok
}

/// How a relative path in a configuration file resolves, said under the values.
const RELATIVE_PATHS: &str = "relative paths in a configuration file resolve against that \
     file's directory (`.bee/` for .bee/config.toml), a flag's against the current directory";

/// What a session checks of the configuration before its first model call, beyond reading
/// the files: the theme `repl.theme` names (65), the provider file with its recording and
/// the policy compiled against the workspace, when they are configured (65 invalid, 66
/// missing, 77 unreadable), reported as [`report_error`] reports a configuration file. An
/// unset provider or policy is no refusal here: it shows as `(unset)`.
fn session_checks(config: &Config, json: bool) -> Result<(), Exit> {
    if let Err(why) = config.theme() {
        if json {
            println!("{}", json!({"ok": false, "errors": [why]}));
        } else {
            eprintln!("bee: {why}");
        }
        return Err(Exit::DataErr);
    }
    if let Some(provider) = &config.provider
        && let Err(e) = ProviderSpec::load(&provider.value)
    {
        if !json {
            eprintln!(
                "bee: the provider file (provider from {}):",
                provider.origin
            );
        }
        let exit = report_error(&e, json);
        if !json
            && let (FileError::Read { .. }, Ok(cwd)) = (&e, std::env::current_dir())
            && let Some(hint) = crate::config::relative_path_hint("provider", provider, &cwd)
        {
            eprintln!("  help: {hint}");
        }
        return Err(exit);
    }
    if let Some(policy) = &config.policy
        && let Err(Refused(exit, why)) = compile_policy(&policy.value, &config.workspace.value)
    {
        if json {
            println!("{}", json!({"ok": false, "errors": [why]}));
        } else {
            eprintln!("bee: the policy (policy from {}):", policy.origin);
            eprintln!("{}", why.trim_end());
        }
        return Err(exit);
    }
    Ok(())
}

fn report_error(e: &FileError, json: bool) -> Exit {
    let exit = Exit::of_file(e);
    if json {
        let errors = match e.diagnostics() {
            Some(d) => json!(d.problems),
            None => json!([e.to_string()]),
        };
        println!("{}", json!({"ok": false, "errors": errors}));
    } else if let Some(d) = e.diagnostics() {
        for problem in &d.problems {
            eprintln!("{:?}", miette::Report::new(problem.clone()));
        }
    } else {
        eprintln!("bee: {e}");
    }
    exit
}
