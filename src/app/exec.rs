//! `bee exec`: run one host command inside a fresh scope, confined by a policy.
//!
//! The order is fixed and fails closed: compile the policy and plan its enforcement (65 on an
//! invalid or unenforceable policy), prove the kernel can enforce (69 otherwise, 77 when only
//! this process's capabilities are missing — the command is never started), obtain the
//! enforcement engine (69 if it cannot be loaded, 77 if the pin directory is not writable),
//! check that the command can be moved into a scope below the bee cgroup (77 if not), and only
//! then create the scope and run the command in it. These checks and their statuses are
//! [`super::enforcement`]'s, shared with `bee run`; `--engine` chooses the engine
//! ([`enforcement::open_enforcer`]; the Landlock engine has no learn mode). Each denial is printed on stderr as it is
//! collected; with `--audit FILE` every record is also appended to FILE as JSON lines. The exit
//! status is the command's own (128 + the signal number when a signal ended it; 127 when it was
//! not found and 126 when it could not be executed, as with env(1)). `SIGTERM`, `SIGHUP`,
//! `SIGINT` or `SIGQUIT` sent to bee while the command runs kills the whole scope, as
//! `--timeout` does, and bee ends by that signal once the scope is torn down ([`ending`]).
//!
//! With `--learn OUT` the scope runs in learn mode ([`super::learn`]): OUT's directory must be
//! writable before anything runs (73 otherwise), the policy's denials are allowed and recorded,
//! and the learned policy is written to OUT when the command ends; the status is still the
//! command's (74 if OUT could not be written at the end).
//!
//! With `--pty auto` (the default) and bee's standard input and output both terminals, the
//! command runs on a pseudo-terminal of its own ([`pty`]): its controlling terminal, sized as
//! bee's and relayed both ways, so interactive programs work in the scope; 69 if none can be
//! opened (the command is not run). Otherwise it gets bee's standard streams as they are.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bee_common::scope::SCOPE_LEARN;
use bee_core::{CompileOptions, PolicyError, compile_file};
use bee_userspace::audit::{AuditRecord, Verdict, lost_records_explanation, write_jsonl};
use bee_userspace::launch::{Credentials, LaunchError, LaunchSpec, StdioMode};
use bee_userspace::plan::EnforcementPlan;
use bee_userspace::scope::{EngineKind, Scope, ScopeError, ScopeOptions};

use super::Exit;
use super::enforcement::{self, Refusal};
use super::learn::Learn;
use super::user::invoking_home;
use crate::sandbox::own_state::StatePath;

pub(super) mod ending;
pub(super) mod pty;
pub(super) mod stderr;

/// Arguments of `bee exec`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The policy that confines the command (with `--learn`: the base policy).
    #[arg(long, value_name = "FILE")]
    pub(super) policy: PathBuf,
    /// Learn mode: do NOT enforce the policy's denials but allow and record them, then write
    /// the smallest policy that would have allowed the run (the base's grants and the learned
    /// ones) to OUT. What no policy can grant stays refused. Command line only.
    #[arg(long, value_name = "OUT.toml")]
    pub(super) learn: Option<PathBuf>,
    /// Also append every audit record to FILE, one JSON object per line.
    #[arg(long, value_name = "FILE")]
    pub(super) audit: Option<PathBuf>,
    /// Directory relative policy paths resolve against [default: the current directory].
    #[arg(long, value_name = "DIR")]
    base: Option<PathBuf>,
    /// Kill the whole scope after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub(super) timeout: Option<u64>,
    /// The enforcement engine: `auto` takes the BPF LSM where `bee check` passes and the
    /// Landlock engine otherwise.
    #[arg(long, value_name = "ENGINE", default_value = "auto")]
    pub(super) engine: enforcement::EngineChoice,
    /// Who enforces: `auto` asks the `bee serve` service when bee is not root and the service's
    /// socket exists (`$BEE_SOCKET`, else /run/bee/bee.sock), and enforces in this process
    /// otherwise; `always` only through the service; `never` only in this process.
    #[arg(long, value_name = "WHO", default_value = "auto")]
    pub(super) service: crate::config::ServiceChoice,
    /// A pseudo-terminal for the command (its controlling terminal, sized as bee's, relayed
    /// both ways): `auto` when bee's standard input and output are terminals; `always`;
    /// `never` (bee's standard streams as they are).
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    pub(super) pty: pty::PtyChoice,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub(super) command: Vec<OsString>,
}

/// Runs `bee exec` and returns the command's exit status, or bee's own on refusal.
pub fn run(args: &Args) -> Exit {
    let ending = ending::Ending::default();
    let exit = match exec(args, &ending) {
        Ok(code) => Exit::Child(u8::try_from(code).unwrap_or(u8::MAX)),
        Err(exit) => exit,
    };
    // After the teardown, whichever path it took: an ending signal ends bee as it would have.
    ending.end(exit)
}

fn exec(args: &Args, ending: &ending::Ending) -> Result<i32, Exit> {
    let base = match &args.base {
        Some(b) => std::path::absolute(b),
        None => std::env::current_dir(),
    }
    .map_err(|e| {
        fail(
            Exit::NoInput,
            &format!("cannot resolve the base directory: {e}"),
        )
    })?;
    let options = CompileOptions {
        base,
        home: invoking_home(),
    };
    let compiled = compile_file(&args.policy, &options).map_err(|e| {
        let status = Exit::of_policy(&e);
        match e {
            PolicyError::Read { .. } => fail(status, &e.to_string()),
            PolicyError::Invalid(diagnostics) => {
                for problem in diagnostics.problems {
                    eprintln!("{:?}", miette::Report::new(problem));
                }
                status
            }
        }
    })?;
    for w in &compiled.warnings {
        eprintln!("warning: {w}");
    }
    let policy = compiled.policy;
    // bee's own state in the base directory stays out of the scope's write reach, whatever
    // the policy says (`crate::sandbox::own_state`); learn mode learns on the policy as given.
    let mut installed = policy.clone();
    // So do the audit file this run appends to (`--audit FILE`) and, where `--base` names
    // another directory, the current directory's `.bee`, whose configuration the next bee
    // started here reads, and the user's configuration directory.
    let mut elsewhere: Vec<StatePath> = args
        .audit
        .iter()
        .filter_map(|a| std::path::absolute(a).ok())
        .map(StatePath::File)
        .collect();
    elsewhere.extend(crate::sandbox::own_state::of_this_process());
    crate::sandbox::own_state::protect(&mut installed, Path::new(&policy.base), &elsewhere)
        .map_err(|e| {
            fail(
                Exit::CantCreat,
                &format!("bee's own state (`.bee`, the audit file) cannot be protected: {e}"),
            )
        })?;
    let socket = crate::serve::socket_path();
    let via_service = if args.learn.is_some() {
        args.service.use_service_to_learn(&socket)
    } else {
        args.service.use_service(&socket)
    };
    if via_service {
        return super::exec_remote::exec(args, &policy, &installed, &socket, ending);
    }
    let bpf_plan = || {
        EnforcementPlan::new(&installed).map_err(|e| {
            fail(
                Exit::DataErr,
                &format!("{}: cannot be enforced: {e}", args.policy.display()),
            )
        })
    };
    // With the BPF LSM named, an unenforceable policy is 65 before any kernel check.
    let mut plan = match args.engine {
        enforcement::EngineChoice::BpfLsm => Some(bpf_plan()?),
        _ => None,
    };

    let mut learn = prepare_learn(args, &policy)?;
    let program = args
        .command
        .first()
        .map_or_else(String::new, |p| p.to_string_lossy().into_owned());
    let not_run = format!("`{program}` was not run");
    let refused = |r: Refusal| {
        eprint!("{}", r.render("bee", &not_run));
        r.exit()
    };
    let opened = enforcement::open_enforcer(args.engine, &[&installed]).map_err(refused)?;
    if opened.engine == EngineKind::Landlock && learn.is_some() {
        return Err(refused(Refusal::unavailable(
            "learn mode needs the BPF LSM: the Landlock engine reports no denials to learn from",
        )));
    }
    opened.check_name_grants(&[&installed]).map_err(refused)?;
    if let Some(banner) = opened.banner() {
        eprintln!("{banner}");
    }
    let enforcer = &*opened.enforcer;

    let mut audit = match &args.audit {
        Some(path) => Some(open_audit(path)?),
        None => None,
    };
    let parent = enforcement::cgroup_parent().map_err(refused)?;
    // Housekeeping, never a reason to refuse: `bee check` reports what it found.
    let _swept = parent.sweep_stale_once();
    let credentials =
        Credentials::from_sudo_env().map_err(|e| fail(Exit::Usage, &e.to_string()))?;
    let Some((command, command_args)) = args.command.split_first() else {
        return Err(fail(Exit::Usage, "no command given after `--`"));
    };
    let mut spec = LaunchSpec::new(command).args(command_args);
    if let (Some(_), Some(home)) = (&credentials, invoking_home()) {
        spec = spec.env("HOME", home);
    }
    let mut spec = spec.credentials(credentials);
    let terminal = pty::Pty::open(args.pty).map_err(|e| {
        fail(
            Exit::Unavailable,
            &format!("cannot open a pseudo-terminal: {e}; {not_run}"),
        )
    })?;
    if let Some(t) = &terminal {
        spec = spec
            .stdin(StdioMode::Fd(t.slave()))
            .stdout(StdioMode::Fd(t.slave()))
            .stderr(StdioMode::Fd(t.slave()))
            .controlling_terminal(true);
    }
    let scope_options = ScopeOptions {
        flags: if learn.is_some() { SCOPE_LEARN } else { 0 },
        timeout: args.timeout.map(Duration::from_secs),
        ..ScopeOptions::default()
    };
    // From here on an ending signal is bee's to handle: the scope must not outlive bee.
    ending.catch();
    let created = match opened.engine {
        EngineKind::BpfLsm => {
            let plan = match plan.take() {
                Some(p) => p,
                None => bpf_plan()?,
            };
            Scope::create(enforcer, &parent, &installed, &plan, scope_options)
        }
        EngineKind::Landlock => {
            Scope::create_for_policy(enforcer, &parent, &installed, scope_options)
        }
    };
    let scope =
        created.map_err(|e| fail(Exit::Unavailable, &format!("{e}; `{program}` was not run")))?;
    if let Some(l) = &learn {
        l.banner_start();
    }
    let relay = terminal.map(pty::Pty::relay).transpose().map_err(|e| {
        fail(
            Exit::Unavailable,
            &format!("cannot relay the pseudo-terminal: {e}; {not_run}"),
        )
    })?;
    // A terminal in raw mode does not return the carriage at a line's end.
    let eol = if relay.is_some() { "\r\n" } else { "\n" };
    let mut audit_error = None;
    let mut printer = stderr::Printer::start();
    let mut repeats = stderr::Repeats::default();
    let mut on_record = |record: &AuditRecord| {
        let deny = match learn.as_mut() {
            Some(l) if record.learn => {
                l.record(record);
                false
            }
            Some(l) if record.verdict == Verdict::Deny => {
                l.record(record);
                true
            }
            _ => record.verdict == Verdict::Deny,
        };
        if deny && let Some(line) = repeats.line(&record.explanation(), eol) {
            printer.say(line);
        }
        if let Some(out) = audit.as_mut()
            && let Err(e) = write_jsonl(out, record)
        {
            audit_error.get_or_insert(e);
        }
    };
    let result = scope.run_until(&spec, &mut on_record, &|| ending.came());
    // The audit file first: the lines below wait for their readers, and a second ending
    // signal may end bee while they do.
    if let Some(out) = audit.as_mut()
        && let Err(e) = out.flush()
    {
        audit_error.get_or_insert(e);
    }
    for line in repeats.summary(eol) {
        printer.say(line);
    }
    let unprinted = printer.finish();
    // The spec holds the pseudo-terminal's slave: closed, the relay reads to its end.
    drop(spec);
    if let Some(r) = relay {
        r.finish();
    }
    let report = match result {
        Ok(report) => report,
        // As env(1) and the shells: 127 for a command not found, 126 for one not executable.
        Err(ScopeError::Launch(e @ LaunchError::Spawn { .. })) => {
            stderr::say(&format!("bee: {e}\n"));
            return Ok(i32::from(e.exit_status()));
        }
        // The policy refuses the launch as asked: a data error, 65.
        Err(ScopeError::Launch(e @ LaunchError::Refused { .. })) => {
            return Err(fail(Exit::DataErr, &e.to_string()));
        }
        Err(e) => return Err(fail(Exit::Software, &e.to_string())),
    };
    if let Some(e) = audit_error {
        return Err(fail(Exit::Software, &format!("writing the audit log: {e}")));
    }
    if unprinted > 0 {
        stderr::say(&format!(
            "bee: {unprinted} denial lines were not printed: standard error was not read as fast \
             as the command was refused (`--audit FILE` keeps every denial){eol}"
        ));
    }
    if report.lost_records > 0 {
        stderr::say(&format!(
            "bee: {}\n",
            lost_records_explanation(report.lost_records)
        ));
    }
    if report.outcome.timed_out {
        stderr::say(&format!(
            "bee: `{program}` timed out; its scope was killed\n"
        ));
    }
    if let (true, Some(signal)) = (report.outcome.interrupted, ending.signal()) {
        stderr::say(&format!(
            "bee: {}: `{program}`'s scope was killed\n",
            ending::name(signal)
        ));
    }
    if let Some(l) = learn {
        l.finish(
            &policy,
            invoking_home().as_deref(),
            &super::learn::command_line(&args.command),
        )?;
    }
    Ok(report.outcome.exit_code())
}

/// With `--learn OUT`: the learn run, its output checked writable, learned against `base`
/// (the policy as written) and its base directory.
pub(super) fn prepare_learn(
    args: &Args,
    base: &bee_core::CompiledPolicy,
) -> Result<Option<Learn>, Exit> {
    args.learn
        .as_ref()
        .map(|out| Learn::prepare(out, &args.policy, Some(Path::new(&base.base))))
        .transpose()
}

pub(super) fn open_audit(path: &Path) -> Result<BufWriter<File>, Exit> {
    // Appended to, never truncated: an audit trail keeps what earlier runs wrote.
    File::options()
        .create(true)
        .append(true)
        .open(path)
        .map(BufWriter::new)
        // An output that cannot be created, as `--learn`'s: 73, not an input's 66 or 77.
        .map_err(|e| {
            fail(
                Exit::CantCreat,
                &format!(
                    "cannot open the audit file {}: {e}; nothing was run",
                    path.display()
                ),
            )
        })
}

pub(super) fn fail(exit: Exit, message: &str) -> Exit {
    eprintln!("bee: {message}");
    exit
}
