//! `bee man`: the man pages, rendered by `clap_mangen` from bee's own command-line
//! definitions. Without `--out`, bee(1) in roff on stdout; with `--out DIR`, bee.1 and one
//! bee-COMMAND.1 per command (bee-config-show.1 for `bee config show`) written into DIR.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use clap_mangen::Man;

use super::Exit;

/// How to read or install the pages, shown after `bee man --help`.
pub(super) const AFTER_HELP: &str = "\
Read the page with `bee man | man -l -`; install every page with
`bee man --out ~/.local/share/man/man1`.";

/// Arguments of `bee man`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write bee.1 and one bee-COMMAND.1 per command into DIR (created if missing), listing
    /// each file written, instead of printing bee(1).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Runs `bee man`.
pub fn run(args: &Args) -> Exit {
    // `bee help` is documented by bee(1) itself, not by a page of its own.
    let mut command = super::public_command().disable_help_subcommand(true);
    command.build();
    match &args.out {
        None => {
            let mut page = Vec::new();
            match page_of(command).render(&mut page) {
                Ok(()) => super::write_stdout(&page),
                Err(e) => fail(Exit::Software, &format!("rendering the man page: {e}")),
            }
        }
        Some(dir) => write_pages(&command, dir),
    }
}

/// The page of `command` (bee or one of its commands, built).
fn page_of(command: clap::Command) -> Man {
    Man::new(command)
        // clap_mangen writes an empty date as nothing at all, which shifts the source into
        // the date's place in `.TH`; a quoted empty argument keeps each field in its place.
        .date("\"\"")
        // By default a command's page names the command and its own (absent) version.
        .source(concat!("bee ", env!("CARGO_PKG_VERSION")))
}

/// Writes the page of `command` and of each of its visible commands, recursively, into `dir`.
fn write_pages(command: &clap::Command, dir: &Path) -> Exit {
    if let Err(e) = std::fs::create_dir_all(dir) {
        return io_fail(&e, &format!("cannot create {}", dir.display()));
    }
    let mut pending = vec![command.clone()];
    let mut written = Vec::new();
    while let Some(command) = pending.pop() {
        pending.extend(
            command
                .get_subcommands()
                .filter(|c| !c.is_hide_set())
                .cloned(),
        );
        let page = page_of(command);
        match page.generate_to(dir) {
            Ok(path) => written.push(path),
            Err(e) => {
                let path = dir.join(page.get_filename());
                return io_fail(&e, &format!("cannot write {}", path.display()));
            }
        }
    }
    written.sort();
    let list: String = written
        .iter()
        .map(|p| format!("{}\n", p.display()))
        .collect();
    super::write_stdout(list.as_bytes())
}

/// Reports a failure to write a page: 77 when permission is denied, otherwise 74.
fn io_fail(e: &std::io::Error, what: &str) -> Exit {
    let exit = match e.kind() {
        ErrorKind::PermissionDenied => Exit::NoPerm,
        _ => Exit::IoErr,
    };
    fail(exit, &format!("{what}: {e}"))
}

fn fail(exit: Exit, message: &str) -> Exit {
    eprintln!("bee: {message}");
    exit
}
