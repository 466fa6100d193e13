//! `bee config show`: every effective configuration value and where it came from.

use serde_json::json;

use super::Exit;
use crate::config::{Config, Enforcement, FileError, Flags};

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
    let enforcement = match config.require_policy_or_host() {
        Ok(Enforcement::Policy(p)) => format!(
            "each tool call runs in a kernel scope under {}, where the kernel can enforce it \
             (`bee check`; a session refuses to start where it cannot)",
            p.value.display()
        ),
        Ok(Enforcement::Host(origin)) => format!(
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
    println!("{enforcement}");
    Exit::Ok
}

fn report_error(e: &FileError, json: bool) -> Exit {
    let exit = match e {
        FileError::Read { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
            Exit::NoPerm
        }
        FileError::Read { .. } => Exit::NoInput,
        FileError::Invalid(_) => Exit::DataErr,
    };
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
