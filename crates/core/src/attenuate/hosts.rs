//! Domain name grants as boxes name × protocol × port, and their coverage.
//!
//! A child name rule is covered when, for every name its pattern matches, the parent's name
//! rules matching that name together grant each of the child's protocols on each of its ports.
//! Only name rules count: **an address grant of the parent never covers a name grant of the
//! child.** A name grant is more than the addresses it ends up at: it lets the scope resolve
//! the name through bee's per-scope resolver (a query the parent may not allow to leave the
//! machine at all), and the addresses it opens come from answers at run time, which no
//! address block in a policy can be proven to contain. Keeping the two apart keeps the proof
//! exact and decided on the policies alone.
//!
//! Which parent rules can cover a child pattern:
//!
//! * a child `Exact(n)`: parent `Exact(n)`, and parent `Wildcard(s)` with `n` one label below
//!   `s`;
//! * a child `Wildcard(s)`: parent `Wildcard(s)` only. The child matches infinitely many
//!   names and the parent's exact names are finitely many, so a name the child matches and
//!   no parent exact rule names always exists; and a parent wildcard over another suffix
//!   matches none of the child's names (both add one label, so the suffixes would have to be
//!   equal).
//!
//! For the names of one child rule the covering set is then the same (for a wildcard, at its
//! fresh names), and coverage is the port-interval check of [`super::ports`] per protocol. The
//! check is sound and complete over names × protocols × ports; the counterexample is the
//! child's name (an exact child) or a synthesised name one label below the suffix that no
//! parent rule names exactly (a wildcard child), checked with [`HostPattern::matches`].

use super::ports::{Ports, subtract};
use super::{Capability, Excess, RuleRef, Witness};
use crate::compiled::HostRule;
use crate::host::{HostPattern, MAX_NAME_LEN};
use crate::net::Protocol;

fn rule_ref(r: &HostRule) -> RuleRef {
    let protocols: Vec<String> = r.protocols.iter().map(ToString::to_string).collect();
    RuleRef {
        origin: r.origin.clone(),
        rule: format!("{} {} port {}", protocols.join(","), r.host, r.ports),
    }
}

/// Whether `p` is what [`HostPattern::parse`] makes of its own text: a pattern built by hand
/// with an upper-case letter, a trailing dot or a bad label is not.
fn well_formed_pattern(p: &HostPattern) -> bool {
    HostPattern::parse(&p.to_string()).is_ok_and(|q| q == *p)
}

/// A rule a backend can give one meaning: a well-formed pattern, ascending ports, and at
/// least one protocol. A malformed parent rule grants nothing; a malformed child rule is
/// refused as unproven.
fn well_formed(r: &HostRule) -> bool {
    r.ports.first <= r.ports.last && !r.protocols.is_empty() && well_formed_pattern(&r.host)
}

/// Whether parent pattern `parent` matches every name child pattern `child` matches.
fn covers(parent: &HostPattern, child: &HostPattern) -> bool {
    match (parent, child) {
        (HostPattern::Exact(p), HostPattern::Exact(c)) => p == c,
        (HostPattern::Wildcard(_), HostPattern::Exact(c)) => parent.matches(c),
        (HostPattern::Wildcard(p), HostPattern::Wildcard(c)) => p == c,
        (HostPattern::Exact(_), HostPattern::Wildcard(_)) => false,
    }
}

/// A name `*.suffix` matches that no exact parent rule names and that fits in
/// [`MAX_NAME_LEN`] bytes: `x.suffix`, else another one-character label, else `x0.suffix`,
/// `x1.suffix`, … (more candidates than parent rules are tried). `None` only for a suffix so
/// long that every one-character label is named by a parent rule.
fn fresh_name(suffix: &str, parents: &[&HostRule]) -> Option<String> {
    let wildcard = HostPattern::Wildcard(suffix.to_owned());
    let taken = |n: &str| {
        parents
            .iter()
            .any(|r| matches!(&r.host, HostPattern::Exact(e) if e == n))
    };
    let short = ('a'..='z').chain('0'..='9').map(String::from);
    std::iter::once("x".to_owned())
        .chain(short)
        .chain((0..=parents.len()).map(|i| format!("x{i}")))
        .map(|label| format!("{label}.{suffix}"))
        .find(|n| n.len() <= MAX_NAME_LEN && wildcard.matches(n) && !taken(n))
}

/// The parent rule closest to `name`: one matching it (over `protocol` first), else the one
/// whose name shares the most trailing labels with it (at least two).
fn nearest<'a>(parents: &[&'a HostRule], name: &str, protocol: Protocol) -> Option<&'a HostRule> {
    let matching = parents.iter().filter(|r| r.host.matches(name));
    if let Some(r) = matching
        .clone()
        .find(|r| r.protocols.contains(&protocol))
        .or_else(|| matching.clone().next())
    {
        return Some(r);
    }
    let shared = |r: &HostRule| {
        r.host
            .name()
            .rsplit('.')
            .zip(name.rsplit('.'))
            .take_while(|(a, b)| a == b)
            .count()
    };
    parents
        .iter()
        .map(|r| (shared(r), *r))
        .filter(|(n, _)| *n >= 2)
        .max_by_key(|(n, r)| (*n, std::cmp::Reverse(r.origin.line)))
        .map(|(_, r)| r)
}

/// Checks every child name rule against the union of the parent's name rules.
pub(crate) fn check(child: &[HostRule], parent: &[HostRule]) -> Vec<Excess> {
    let parents: Vec<&HostRule> = parent.iter().filter(|r| well_formed(r)).collect();
    let mut out = Vec::new();
    for c in child {
        if !well_formed(c) {
            out.push(Excess {
                capability: Capability::NetHost,
                child: rule_ref(c),
                witness: Witness::Unproven {
                    reason: format!(
                        "`{}` port `{}` over {} protocol(s) is not a well-formed rule",
                        c.host,
                        c.ports,
                        c.protocols.len()
                    ),
                },
                nearest_parent: None,
            });
            continue;
        }
        let covering: Vec<&HostRule> = parents
            .iter()
            .copied()
            .filter(|p| covers(&p.host, &c.host))
            .collect();
        let need = (u32::from(c.ports.first), u32::from(c.ports.last));
        let mut protocols = c.protocols.clone();
        protocols.sort_unstable();
        protocols.dedup();
        let found = protocols.into_iter().find_map(|p| {
            let mut have: Vec<Ports> = covering
                .iter()
                .filter(|r| r.protocols.contains(&p))
                .map(|r| (u32::from(r.ports.first), u32::from(r.ports.last)))
                .collect();
            subtract(&[need], &mut have)
                .first()
                .map(|&(port, _)| (p, port))
        });
        let Some((protocol, port)) = found else {
            continue;
        };
        let name = match &c.host {
            HostPattern::Exact(n) => Some(n.clone()),
            HostPattern::Wildcard(s) => fresh_name(s, &parents),
        };
        let Some(name) = name else {
            out.push(Excess {
                capability: Capability::NetHost,
                child: rule_ref(c),
                witness: Witness::Unproven {
                    reason: format!("no name under `{}` could be made for an example", c.host),
                },
                nearest_parent: None,
            });
            continue;
        };
        out.push(Excess {
            capability: Capability::NetHost,
            child: rule_ref(c),
            nearest_parent: nearest(&parents, &name, protocol).map(rule_ref),
            witness: Witness::Host {
                protocol,
                name,
                port: u16::try_from(port).unwrap_or(u16::MAX),
            },
        });
    }
    out
}
