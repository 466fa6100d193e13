//! A denial the Landlock engine enforces but the kernel does not log: a program no exec grant
//! covers meets the scope's `noexec` mounts, which refuse its `execve` (`EACCES`) before
//! Landlock is asked. For the one program whose refusal the launcher sees — the command it
//! starts — the record is made from the policy, as the kernel's would have been, so that
//! `bee exec` and `bee serve` explain it; a program that command runs is refused unexplained.

use std::path::Component;
use std::time::SystemTime;

use bee_core::CompiledPolicy;

use super::record::{Access, event};
use crate::audit::AuditRecord;
use crate::launch::{LaunchError, LaunchSpec};

/// The denial of `spec`'s own `execve`, refused with `error`, in the Landlock scope whose
/// cgroup is `cgroup_id` and whose policy is `policy`: only for a launch refused with `EACCES`
/// whose program (an absolute path without `.` or `..`, as given: a link in it is not
/// followed) no `exec.allow` rule covers or an `exec.deny` rule carves out. `None` otherwise
/// (a relative path, a bare name looked up on `PATH`, or one the policy grants that something
/// else refused, such as its mode). For a service answering another user: it looks at no
/// file.
#[must_use]
pub fn exec_refusal(
    policy: &CompiledPolicy,
    spec: &LaunchSpec,
    error: &LaunchError,
    cgroup_id: u64,
) -> Option<AuditRecord> {
    refused_with_eacces(error)?;
    // The path as the launch named it, never resolved here: through `bee serve` this runs as
    // root for a caller, and resolving links or probing files would tell the caller what it
    // may not see for itself.
    exec_denial(policy, std::path::Path::new(spec.program()), cgroup_id)
}

/// [`exec_refusal`], a bare name (`id`) explained as the file it names on the command's
/// `PATH` ([`LaunchSpec::resolved_program`]): for bee running as the user whose command it
/// launched, which may look on that `PATH` itself.
#[must_use]
pub fn exec_refusal_on_path(
    policy: &CompiledPolicy,
    spec: &LaunchSpec,
    error: &LaunchError,
    cgroup_id: u64,
) -> Option<AuditRecord> {
    refused_with_eacces(error)?;
    exec_denial(policy, &spec.resolved_program()?, cgroup_id)
}

fn refused_with_eacces(error: &LaunchError) -> Option<()> {
    match error {
        LaunchError::Spawn { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            Some(())
        }
        _ => None,
    }
}

/// The denial of executing `program` (an absolute path without `.` or `..`, taken as
/// written) in the Landlock scope whose cgroup is `cgroup_id`, explained from `policy`; `None`
/// when the path is not such a path or the policy lets the scope execute it.
#[must_use]
pub fn exec_denial(
    policy: &CompiledPolicy,
    program: &std::path::Path,
    cgroup_id: u64,
) -> Option<AuditRecord> {
    if !program.is_absolute()
        || program
            .components()
            .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
    {
        return None;
    }
    let path = program.to_str()?.to_owned();
    let granted = policy.exec.iter().any(|r| r.pattern.matches(&path))
        && !policy.exec_deny.iter().any(|r| r.pattern.matches(&path));
    if granted {
        return None;
    }
    let access = Access {
        serial: 0,
        domain: 0,
        blockers: vec!["fs.execute".to_owned()],
        path: Some(path),
        addr: None,
        port: None,
    };
    let event = event(&access, cgroup_id, 0, "")?;
    Some(AuditRecord::from_event(&event, policy, SystemTime::now()))
}
