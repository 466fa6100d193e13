//! `bee exec` through `bee serve`: the same command, confined by the service instead of by
//! this process, which needs no privilege at all.
//!
//! The policy is compiled here, with the caller's own access to its files; the service
//! proves it within the caller's ceiling and refuses otherwise (65, with the
//! counterexamples; 77 when no ceiling applies). The command runs as the caller's user with
//! this process's standard streams; `SIGTERM`, `SIGHUP`, `SIGINT` and `SIGQUIT` ask the
//! service to kill the scope, and bee ends by that signal once the command's end and its last
//! denials are in ([`super::exec::ending`], as in-process); if this process dies, the service
//! kills the scope because the connection ends.
//! Statuses are those of in-process `bee exec`; a service that cannot be reached is 69 (77
//! when its socket may not be used).
//!
//! A pseudo-terminal (`--pty`) is opened here, by the caller, as in-process: its slave is
//! passed as the command's three streams and the service makes it the command's controlling
//! terminal (a terminal the caller owns, open for reading and writing, or it refuses), while
//! this process relays it ([`super::exec::pty`]).

use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::path::Path;
use std::time::Duration;

use bee_core::CompiledPolicy;
use bee_userspace::audit::write_jsonl;
use bee_userspace::landlock::audit::unlogged::exec_denial;
use bee_userspace::launch::LaunchSpec;

use crate::config::EngineChoice;
use crate::serve::client::{Client, ClientError, CommandLine, Report};

use super::Exit;
use super::exec::ending::{self, Ending};
use super::exec::pty::Pty;
use super::exec::{Args, fail, open_audit, prepare_learn};
use super::harness::preflight::with_consequence;
use super::learn::command_line;
use super::user::invoking_home;

/// Runs `args`' command in a scope the service at `socket` makes for `policy` (`base`, the
/// policy as written, with bee's own state protected); an ending signal stops it
/// ([`Ending`], which the caller ends bee with). With `--learn` the scope learns: the service
/// grants that only within a ceiling that grants everything, and the learned policy is
/// written from `base` as in-process.
pub(super) fn exec(
    args: &Args,
    base: &CompiledPolicy,
    policy: &CompiledPolicy,
    socket: &Path,
    ending: &Ending,
) -> Result<i32, Exit> {
    let program = args
        .command
        .first()
        .map_or_else(String::new, |p| p.to_string_lossy().into_owned());
    let refused = |e: ClientError| {
        let status = e.status();
        // A refusal's details (the counterexamples) follow its first line.
        let not_run = format!("`{program}` was not run");
        eprintln!("bee: {}", with_consequence(&e.to_string(), &not_run));
        if matches!(e, ClientError::Unreachable { .. }) {
            eprintln!(
                "  fix: ask the operator to start the service (`systemctl enable --now bee.socket`, docs/serve.md), or run bee as root with `--service never`"
            );
        }
        Exit::of_service(status)
    };
    let mut learn = prepare_learn(args, base)?;
    let mut client = Client::connect(socket).map_err(refused)?;
    if args.engine != EngineChoice::Auto && client.welcome.engine != args.engine.as_str() {
        return Err(fail(
            Exit::Unavailable,
            &format!(
                "the service at {} enforces with {}, not {}; `{program}` was not run",
                socket.display(),
                client.welcome.engine,
                args.engine.as_str()
            ),
        ));
    }
    // As in-process: the working directory must have a name the service can reach.
    let cwd = std::env::current_dir()
        .ok()
        .filter(|d| d.to_str().is_some())
        .ok_or_else(|| fail(Exit::NoInput, "the working directory cannot be named"))?;
    let Some((first, rest)) = args.command.split_first() else {
        return Err(fail(Exit::Usage, "no command given after `--`"));
    };
    let terminal = Pty::open(args.pty).map_err(|e| {
        fail(
            Exit::Unavailable,
            &format!("cannot open a pseudo-terminal: {e}; `{program}` was not run"),
        )
    })?;
    let spec = LaunchSpec::new(first)
        .args(rest)
        .current_dir(cwd)
        .controlling_terminal(terminal.is_some());
    let slave = terminal.as_ref().map(Pty::slave);
    let stdio = slave.as_ref().map_or([0, 1, 2], |s| [s.as_raw_fd(); 3]);
    let command = CommandLine::of(&spec).map_err(|why| {
        fail(
            Exit::Usage,
            &format!("through the service, the command must be UTF-8: {why}"),
        )
    })?;
    let mut audit = match &args.audit {
        Some(path) => Some(open_audit(path)?),
        None => None,
    };
    ending.catch();
    let origin = args.policy.display().to_string();
    let scope = client
        .create(
            policy,
            &origin,
            args.timeout.map(Duration::from_secs),
            learn.is_some(),
        )
        .map_err(refused)?;
    if let Some(l) = &learn {
        l.banner_start();
    }
    let relay = terminal.map(Pty::relay).transpose().map_err(|e| {
        fail(
            Exit::Unavailable,
            &format!("cannot relay the pseudo-terminal: {e}; `{program}` was not run"),
        )
    })?;
    // A terminal in raw mode does not return the carriage at a line's end.
    let eol = if relay.is_some() { "\r\n" } else { "\n" };
    let mut audit_error = None;
    let mut repeats = super::exec::stderr::Repeats::default();
    let mut on_report = |report: Report<'_>| {
        // `exited` carries the total lost, said after the command.
        let Report::Record(record) = report else {
            return;
        };
        // The service sends denials only: learned ones, and those learn mode kept.
        if let Some(l) = learn.as_mut() {
            l.record(record);
        }
        if !record.learn
            && let Some(line) = repeats.line(&record.explanation(), eol)
        {
            super::exec::stderr::say(&line);
        }
        if let Some(out) = audit.as_mut()
            && let Err(e) = write_jsonl(out, record)
        {
            audit_error.get_or_insert(e);
        }
    };
    let ran = client.run(scope, command, stdio, &mut on_report, &|| ending.came());
    for line in repeats.summary(eol) {
        super::exec::stderr::say(&line);
    }
    // The service killed the scope for an ending signal (the command's status is SIGKILL's).
    let stopped = ending.came() && ran.as_ref().is_ok_and(|e| e.code == 128 + libc::SIGKILL);
    // Closed here, the slave's end reaches the relay once the service's copies are closed.
    drop(slave);
    if let Some(r) = relay {
        r.finish();
    }
    // Hanging up closes the connection's scopes: the service tears this one down while the
    // command's status is already on its way out, instead of before.
    drop(client);
    if let Some(out) = audit.as_mut()
        && let Err(e) = out.flush()
    {
        audit_error.get_or_insert(e);
    }
    let ended = match ran {
        Ok(ended) => ended,
        // As env(1): 127 not found, 126 not executable; the service says which.
        Err(ClientError::Refused(body)) if matches!(body.status, 126 | 127) => {
            // The service explains a refused program named by its path; a bare name is
            // looked up here, on the command's `PATH`, with the caller's own access.
            let bare = !first.to_string_lossy().contains('/');
            if body.status == 126
                && bare
                && let Some(program) = spec.resolved_program()
                && let Some(record) = exec_denial(policy, &program, scope)
                && let Some(line) = repeats.line(&record.explanation(), eol)
            {
                super::exec::stderr::say(&line);
            }
            eprintln!("bee: {}", body.message);
            return Ok(i32::from(body.status));
        }
        // The command started: it did not go unrun, the service went away under it.
        Err(e @ ClientError::Protocol(_)) => {
            eprintln!("bee: {e}; `{program}` was stopped with its scope");
            return Err(Exit::Software);
        }
        Err(e) => return Err(refused(e)),
    };
    if let Some(e) = audit_error {
        return Err(fail(Exit::Software, &format!("writing the audit log: {e}")));
    }
    if ended.lost_records > 0 {
        eprintln!(
            "bee: {}",
            bee_userspace::audit::lost_records_explanation(ended.lost_records)
        );
    }
    if ended.timed_out {
        eprintln!("bee: `{program}` timed out; its scope was killed");
    } else if let (true, Some(signal)) = (stopped, ending.signal()) {
        eprintln!(
            "bee: {}: `{program}`'s scope was killed",
            ending::name(signal)
        );
    }
    if let Some(l) = learn {
        l.finish(
            base,
            invoking_home().as_deref(),
            &command_line(&args.command),
        )?;
    }
    Ok(ended.code)
}
