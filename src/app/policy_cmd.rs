//! `bee policy diff OLD NEW`: what each of two policies grants that the other does not, rule
//! by rule with a counterexample, from the attenuation prover run in both directions
//! ([`bee_core::diff`]).

use std::path::{Path, PathBuf};

use bee_core::attenuate::{Excess, PolicyDiff, Witness};
use serde_json::json;

use super::Exit;
use super::validate::{fail, load, options};

/// Arguments of `bee policy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// What NEW grants that OLD does not (`+`) and what OLD grants that NEW does not (`-`),
    /// each a rule with a path, program or peer only one of them grants.
    Diff(DiffArgs),
}

/// Arguments of `bee policy diff`.
#[derive(Debug, clap::Args)]
struct DiffArgs {
    /// The policy before the change.
    #[arg(value_name = "OLD")]
    old: PathBuf,
    /// The policy after the change.
    #[arg(value_name = "NEW")]
    new: PathBuf,
    /// Directory relative policy paths resolve against [default: the current directory].
    #[arg(long, value_name = "DIR")]
    base: Option<PathBuf>,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `bee policy`. 0 when both policies compile (whether or not they differ); 65 when one
/// is invalid, 66 when one does not exist, 77 when one may not be read.
pub fn run(args: &Args) -> Exit {
    match &args.command {
        Sub::Diff(d) => diff(d),
    }
}

fn diff(args: &DiffArgs) -> Exit {
    let options = match options(args.base.as_deref()) {
        Ok(o) => o,
        Err((exit, message)) => return fail(args.json, exit, &message),
    };
    let old = match load(&args.old, &options, args.json) {
        Ok(c) => c.policy,
        Err(exit) => return exit,
    };
    let new = match load(&args.new, &options, args.json) {
        Ok(c) => c.policy,
        Err(exit) => return exit,
    };
    let d = bee_core::diff(&old, &new);
    if args.json {
        println!(
            "{}",
            json!({
                "old": args.old.display().to_string(),
                "new": args.new.display().to_string(),
                "identical": d.is_empty(),
                "added": d.added,
                "removed": d.removed,
            })
        );
    } else {
        print!("{}", text(&d, &args.old, &args.new));
    }
    Exit::Ok
}

/// The diff for people: a summary line, then one line per differing rule.
fn text(d: &PolicyDiff, old: &Path, new: &Path) -> String {
    let (old, new) = (old.display().to_string(), new.display().to_string());
    if d.is_empty() {
        return format!("{old} and {new} grant exactly the same\n");
    }
    let mut out = format!(
        "{new} grants {} rule(s) beyond {old}; {old} grants {} rule(s) beyond {new}\n",
        d.added.len(),
        d.removed.len()
    );
    for e in &d.added {
        out.push_str(&line('+', e, &old));
    }
    for e in &d.removed {
        out.push_str(&line('-', e, &new));
    }
    out
}

/// `+ fs.read[2] (line 7) `/home/**` grants read of `/home/a/.ssh/x`; OLD's nearest rule …`.
fn line(sign: char, e: &Excess, other: &str) -> String {
    format!("{sign} {}\n", line_body(e, other))
}

/// One difference without its sign: the rule, what it grants that `other` does not, and
/// `other`'s nearest rule (also `/allow`'s diff in `bee repl`).
pub(crate) fn line_body(e: &Excess, other: &str) -> String {
    let body = match &e.witness {
        Witness::Unproven { reason } => {
            format!("{} cannot be compared with {other} ({reason})", e.child)
        }
        w => format!(
            "{} grants {}{w}, which {other} does not",
            e.child,
            e.capability.granting()
        ),
    };
    let near = match &e.nearest_parent {
        Some(r) => format!("nearest rule in {other}: {r}"),
        None => format!("{other} has no rule near it"),
    };
    format!("{body}; {near}")
}
