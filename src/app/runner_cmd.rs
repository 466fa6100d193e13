//! `bee __tool NAME`: the command of the in-scope runner, which the harness starts inside the
//! sandbox. It reads one JSON request on standard input and prints one JSON answer on
//! standard output; see [`crate::tools::runner`]. Hidden from the help: people have no use
//! for it.

use std::io::{Read as _, Write as _};

use super::Exit;
use crate::tools::runner::{self, RunnerResponse};

/// Arguments of `bee __tool`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The tool to run.
    name: String,
}

/// Runs the tool and prints its answer; 0 whenever an answer was printed.
pub fn run(args: &Args) -> Exit {
    let mut input = Vec::new();
    let answer = match std::io::stdin().read_to_end(&mut input) {
        Ok(_) => runner::run(&args.name, &input),
        Err(e) => RunnerResponse::could_not_run(format!("reading the request: {e}")),
    };
    let mut out = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut out, &answer)
        .map_err(std::io::Error::other)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Ok(()) => Exit::Ok,
        Err(e) => {
            eprintln!("bee __tool: writing the answer: {e}");
            Exit::Software
        }
    }
}
