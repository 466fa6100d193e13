//! Running host programs with errors that say what ran.

use std::process::{Command, Output, Stdio};

use crate::error::{Error, Result};

/// Renders a command line for messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// Runs `cmd` with inherited stdio and fails unless it exits 0.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().map_err(|source| Error::Spawn {
        program: cmd.get_program().to_string_lossy().into_owned(),
        source,
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command: describe(cmd),
            status: status.to_string(),
            detail: String::new(),
        })
    }
}

/// Runs `cmd`, capturing stdout and stderr, and returns the output whatever
/// the exit status.
pub fn output_any(cmd: &mut Command) -> Result<Output> {
    cmd.stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            program: cmd.get_program().to_string_lossy().into_owned(),
            source,
        })
}

/// Runs `cmd`, capturing output, and returns stdout as text; fails with the
/// tail of stderr unless it exits 0.
pub fn stdout(cmd: &mut Command) -> Result<String> {
    let out = output_any(cmd)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(Error::Command {
            command: describe(cmd),
            status: out.status.to_string(),
            detail: format!(": {}", tail.join(" | ")),
        })
    }
}
