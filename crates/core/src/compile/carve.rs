//! Warnings about carve-outs that do nothing, and grants that carve-outs empty.
//!
//! Neither changes what a policy means, so both are warnings: a carve-out that meets no
//! grant (a typo, or a grant that moved), an `fs.unprotect` rule that lifts no protection,
//! a grant whose every path is carved out (it grants nothing), and an `exec.deny` of a
//! readable program in a policy that lets the scope write where it may execute (a copy runs).

use crate::attenuate::carve::{
    Carve, Carves, Grants, Searcher, carves_nothing, grants_nothing, meets_any,
};
use crate::compiled::{CompiledPolicy, Origin, PathRule};
use crate::error::PolicyWarning;
use crate::glob::PathPattern;

fn patterns(rules: &[PathRule]) -> Vec<&PathPattern> {
    rules.iter().map(|r| &r.pattern).collect()
}

fn warning(file: &str, origin: &Origin, message: String) -> PolicyWarning {
    PolicyWarning {
        file: file.to_owned(),
        line: origin.line,
        column: origin.column,
        key: origin.key.clone(),
        message,
    }
}

/// The carve-out warnings of `policy`, read from `file`.
pub(super) fn lint(policy: &CompiledPolicy, file: &str) -> Vec<PolicyWarning> {
    lint_with(policy, file, false)
}

/// [`lint`]; with `reference`, the way it was first written (every grant list scanned whole
/// for every carve-out rule, every question put to the automata), which the tests hold the
/// fast way to.
fn lint_with(policy: &CompiledPolicy, file: &str, reference: bool) -> Vec<PolicyWarning> {
    let grants = |patterns| {
        if reference {
            Grants::scanned(patterns)
        } else {
            Grants::indexed(patterns)
        }
    };
    let fs = &policy.fs;
    let mut out = Vec::new();
    let mut searcher = Searcher::default();
    let readable: Vec<&PathPattern> = fs.readable().map(|r| &r.pattern).collect();
    let exec: Vec<&PathPattern> = policy.exec.iter().map(|r| &r.pattern).collect();
    let write = patterns(&fs.write);
    let unix = patterns(&policy.net.unix);
    let all: Vec<&PathPattern> = readable.iter().chain(&exec).chain(&unix).copied().collect();
    let (all, write_grants, exec_grants) = (grants(all), grants(write), grants(exec.clone()));
    let mut nothing = |rules: &[PathRule], grants: &Grants<'_>, what: &str| {
        for r in rules {
            if carves_nothing(&mut searcher, &r.pattern, grants) {
                out.push(warning(
                    file,
                    &r.origin,
                    format!(
                        "`{}` carves nothing out: no {what} grant covers any path it matches",
                        r.pattern
                    ),
                ));
            }
        }
    };
    nothing(&fs.deny, &all, "read, write, exec or unix-socket");
    let user_protect: Vec<PathRule> = fs
        .protect
        .iter()
        .filter(|r| {
            !crate::protected::is_builtin(&r.origin.key)
                && !super::include::from_shipped(&r.origin.key)
        })
        .cloned()
        .collect();
    nothing(&user_protect, &write_grants, "write");
    nothing(&policy.exec_deny, &exec_grants, "exec");
    // Exec rules decide by name: where the scope may both write and execute (unpinned), a
    // copy of any program it can read runs under a new name, as does a hard link or rename
    // of one it can write. There, `exec.deny` of a readable program is a name, not a wall.
    let unpinned: Vec<&PathPattern> = policy
        .exec
        .iter()
        .filter(|r| r.pin.is_none())
        .map(|r| &r.pattern)
        .collect();
    // (Only an `exec.deny` rule can be warned about: without one, nothing to look for.)
    let copy_target = unpinned
        .iter()
        .filter(|_| !policy.exec_deny.is_empty())
        .find(|e| meets_any(&mut searcher, e, &write_grants) == Some(true))
        .copied();
    if let Some(target) = copy_target {
        let readable = grants(readable);
        for r in &policy.exec_deny {
            if meets_any(&mut searcher, &r.pattern, &readable) == Some(true) {
                out.push(warning(
                    file,
                    &r.origin,
                    format!(
                        "`{}` holds by name only: the scope may read the program and may write \
                         where `{target}` lets it execute, so a copy (or a link or rename of a \
                         writable one) runs there",
                        r.pattern
                    ),
                ));
            }
        }
    }
    let protect = grants(patterns(&fs.protect));
    for r in &fs.unprotect {
        if carves_nothing(&mut searcher, &r.pattern, &protect) {
            out.push(warning(
                file,
                &r.origin,
                format!(
                    "`{}` lifts no protection: no protected path matches it",
                    r.pattern
                ),
            ));
        }
    }
    let carves = Carves::of(policy);
    let mut empty = |pattern: &PathPattern, origin: &Origin, carve: &Carve<'_>| {
        if !carve.is_empty() && grants_nothing(&mut searcher, pattern, carve, !reference) {
            out.push(warning(
                file,
                origin,
                format!("`{pattern}` grants nothing: every path it matches is carved out"),
            ));
        }
    };
    for r in &fs.read {
        empty(&r.pattern, &r.origin, &carves.read);
    }
    for r in &fs.write {
        empty(&r.pattern, &r.origin, &carves.write);
    }
    for r in &policy.exec {
        empty(&r.pattern, &r.origin, &carves.exec);
    }
    out
}

#[cfg(test)]
mod tests;
