//! `bee validate`: compile a policy (stage one), plan its enforcement (stage two), and with
//! `--parent` prove that it grants nothing its parent does not.

use std::path::{Path, PathBuf};

use bee_core::{CompileOptions, Compiled, PolicyError, attenuate, compile_file};
use bee_userspace::landlock::{
    GateSupport, LandlockAbi, LandlockEngine, LandlockPlan, LandlockRefusal,
};
use bee_userspace::plan::{EnforcementPlan, PlanStats};
use serde_json::{Value, json};

use super::Exit;
use super::enforcement::EngineChoice;
use super::user::invoking_home;

/// Arguments of `bee validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The policy file to validate.
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,
    /// A parent policy: prove POLICY ⊆ PARENT for every capability.
    #[arg(long, value_name = "FILE")]
    parent: Option<PathBuf>,
    /// Print a compiled form on stdout (`compiled`: the backend-neutral JSON).
    #[arg(long, value_name = "FORM")]
    emit: Option<Emit>,
    /// Directory relative policy paths resolve against [default: the current directory].
    #[arg(long, value_name = "DIR")]
    base: Option<PathBuf>,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// The engine whose plan must succeed: `bpf-lsm` (the kernel maps; the default, and
    /// `auto`) or `landlock` (refused, rule by rule, when Landlock cannot enforce the policy
    /// exactly). Either way the other engine's verdict is shown.
    #[arg(long, value_name = "ENGINE", default_value = "auto")]
    engine: EngineChoice,
}

/// What `--emit` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Emit {
    /// The CompiledPolicy as canonical, deterministic JSON.
    Compiled,
}

/// Runs `bee validate`.
pub fn run(args: &Args) -> Exit {
    let options = match options(args.base.as_deref()) {
        Ok(o) => o,
        Err((exit, message)) => return fail(args.json, exit, &message),
    };
    let child = match load(&args.policy, &options, args.json) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let landlock = landlock_plan(&child);
    if args.engine == EngineChoice::Landlock
        && let Err(e) = &landlock
    {
        let message = format!("{}: {e}", args.policy.display());
        return fail(args.json, Exit::DataErr, &message);
    }
    let stats = match plan(&args.policy, &child, args.json) {
        Ok(stats) => Some(stats),
        Err(_) if args.engine == EngineChoice::Landlock => None,
        Err(exit) => return exit,
    };
    let mut report = json!({
        "ok": true,
        "policy": args.policy.display().to_string(),
        "warnings": child.warnings,
        "rules": rule_counts(&child),
        "protected": protected(&child),
        "unprotected": child.policy.fs.unprotect.iter().map(|r| r.pattern.to_string()).collect::<Vec<_>>(),
        "plan": stats,
        "hosts": hosts(&child),
        "landlock": landlock_json(&landlock),
    });
    if let Some(parent_path) = &args.parent {
        let parent = match load(parent_path, &options, args.json) {
            Ok(p) => p,
            Err(exit) => return exit,
        };
        let proof = attenuate(&child.policy, &parent.policy);
        report["attenuation"] = json!({
            "parent": parent_path.display().to_string(),
            "subset": proof.is_subset(),
            "excess": proof.excess,
        });
        if !proof.is_subset() {
            report["ok"] = json!(false);
            if args.json {
                println!("{report}");
            } else {
                eprintln!(
                    "{}",
                    proof.refusal(
                        &args.policy.display().to_string(),
                        &parent_path.display().to_string()
                    )
                );
            }
            return Exit::DataErr;
        }
    }
    if let Some(Emit::Compiled) = args.emit {
        match child.policy.to_json() {
            Ok(text) if !args.json => print!("{text}"),
            Ok(_) => report["compiled"] = json!(child.policy),
            Err(e) => return fail(args.json, Exit::Software, &format!("cannot serialise: {e}")),
        }
    }
    if args.json {
        println!("{report}");
    } else {
        for w in &child.warnings {
            eprintln!("warning: {w}");
        }
        let r = &report["rules"];
        eprintln!(
            "ok: {} (policy language v{}): fs.read {} · fs.write {} · exec {} ({} pinned) · net.allow {} · host {} · net.unix {}",
            args.policy.display(),
            child.policy.version,
            r["fs.read"],
            r["fs.write"],
            r["exec"],
            r["exec.pinned"],
            r["net.allow"],
            r["net.hosts"],
            r["net.unix"],
        );
        let carved: u64 = ["fs.deny", "exec.deny"]
            .iter()
            .filter_map(|k| r[*k].as_u64())
            .sum();
        if carved > 0 {
            eprintln!(
                "   carve-outs: fs.deny {} · exec.deny {} (a carve-out always wins over a grant)",
                r["fs.deny"], r["exec.deny"]
            );
        }
        if !child.policy.net.hosts.is_empty() {
            eprint!("{}", hosts_text(&child));
        }
        if let Some(list) = report["protected"].as_array().filter(|l| !l.is_empty()) {
            eprintln!("   protected from writing (fs.unprotect lifts one):");
            for p in list {
                let why = p["reason"]
                    .as_str()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                eprintln!(
                    "     {} ({}){why}",
                    p["pattern"].as_str().unwrap_or_default(),
                    p["from"].as_str().unwrap_or_default()
                );
            }
        } else if child.policy.version == 1 {
            eprintln!(
                "   protected from writing: nothing (version 1; version 3, the newest, protects .git/hooks, .git/config, .bee, .envrc, hook managers' configuration and editor task files)"
            );
        }
        for u in report["unprotected"].as_array().into_iter().flatten() {
            eprintln!("   unprotected: {}", u.as_str().unwrap_or_default());
        }
        if let Some(stats) = &stats {
            // Each count against the kernel map's limit (`PlanLimits::default`).
            let limits = bee_userspace::plan::PlanLimits::default();
            eprintln!(
                "   enforcement plan: {} of {} states, {} of {} edges, {} of {} globs, {} exec pins, {} of {} network prefixes",
                stats.states,
                limits.max_states,
                stats.edges_short + stats.edges_long,
                limits.max_edges,
                stats.globs,
                limits.max_globs,
                stats.exec_pins,
                stats.net_v4_prefixes + stats.net_v6_prefixes,
                limits.max_net_prefixes,
            );
        }
        eprint!("{}", landlock_text(&landlock));
        if let Some(parent) = &args.parent {
            eprintln!(
                "   attenuation: every grant is also granted by {}",
                parent.display()
            );
        }
    }
    Exit::Ok
}

pub(super) fn options(base: Option<&Path>) -> Result<CompileOptions, (Exit, String)> {
    let base = match base {
        Some(b) => std::path::absolute(b),
        None => std::env::current_dir(),
    }
    .map_err(|e| {
        (
            Exit::NoInput,
            format!("cannot resolve the base directory: {e}"),
        )
    })?;
    Ok(CompileOptions {
        base,
        home: invoking_home(),
    })
}

fn rule_counts(c: &Compiled) -> Value {
    let p = &c.policy;
    json!({
        "fs.read": p.fs.read.len(),
        "fs.write": p.fs.write.len(),
        "exec": p.exec.len(),
        "exec.pinned": p.exec.iter().filter(|r| r.pin.is_some()).count(),
        "net.allow": p.net.allow.len(),
        "net.hosts": p.net.hosts.len(),
        "net.unix": p.net.unix.len(),
        "fs.deny": p.fs.deny.len(),
        "exec.deny": p.exec_deny.len(),
        "fs.protect": p.fs.protect.len(),
        "fs.unprotect": p.fs.unprotect.len(),
    })
}

/// The name grants (`[[net.allow]]` with `host`), as `bee validate --json` lists them: the
/// pattern in ASCII form, the port range, the protocols and the rule's key and line.
fn hosts(c: &Compiled) -> Vec<Value> {
    c.policy
        .net
        .hosts
        .iter()
        .map(|r| {
            json!({
                "host": r.host.to_string(),
                "ports": r.ports.to_string(),
                "proto": r.protocols,
                "from": format!("{} (line {})", r.origin.key, r.origin.line),
            })
        })
        .collect()
}

/// What a name grant means at run time, for the text report.
const HOSTS_EXPLAINED: [&str; 8] = [
    "how names are granted: a scope resolves names only through bee's resolver, one per",
    "scope. A granted name's A and AAAA answers open its ports to the addresses they hold",
    "until the record's TTL runs out (kept between 5 s and 1 h). Any other name is answered",
    "NXDOMAIN, and its query never leaves the machine. An answer holding a loopback,",
    "private, link-local or cloud metadata address is refused unless an `addr` grant covers",
    "that address, which it then reaches on that grant's ports only. The kernel sees",
    "addresses, not names: names that share an address share what is opened for it. Port 53",
    "always goes to bee's resolver, and port 853 (DNS over TLS) is refused.",
];

/// The name grants of `c` and what they mean, as `bee validate` prints them: one line per
/// name and table, its port ranges together.
fn hosts_text(c: &Compiled) -> String {
    let mut lines: Vec<(String, &str, u32, Vec<String>)> = Vec::new();
    for r in &c.policy.net.hosts {
        let protocols: Vec<String> = r.protocols.iter().map(ToString::to_string).collect();
        let head = format!("{} {}", protocols.join(","), r.host);
        match lines.last_mut() {
            Some((h, key, _, ports)) if *h == head && *key == r.origin.key => {
                ports.push(r.ports.to_string());
            }
            _ => lines.push((
                head,
                &r.origin.key,
                r.origin.line,
                vec![r.ports.to_string()],
            )),
        }
    }
    let mut out = String::from("   names (net.allow host):\n");
    for (head, key, line, ports) in lines {
        let word = if ports.len() == 1 { "port" } else { "ports" };
        out.push_str(&format!(
            "     {head} {word} {} ({key}, line {line})\n",
            ports.join(", ")
        ));
    }
    for line in HOSTS_EXPLAINED {
        out.push_str("     ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The protected paths in force, as `bee validate` lists them: each pattern, where it comes
/// from (`version 2` for the built-in set, or its `fs.protect` key) and why it is protected.
fn protected(c: &Compiled) -> Vec<Value> {
    let p = &c.policy;
    let builtin = bee_core::protected::protected(p.version);
    p.fs.protect
        .iter()
        .map(|r| {
            let reason = builtin
                .iter()
                .find(|b| {
                    b.pattern == r.origin.text && bee_core::protected::is_builtin(&r.origin.key)
                })
                .map(|b| b.reason);
            let from = if reason.is_some() {
                format!("version {}", p.version)
            } else {
                format!("{} (line {})", r.origin.key, r.origin.line)
            };
            json!({ "pattern": r.pattern.to_string(), "from": from, "reason": reason })
        })
        .collect()
}

/// Compiles one policy, reporting errors itself; returns the exit status on failure.
pub(super) fn load(path: &Path, options: &CompileOptions, json: bool) -> Result<Compiled, Exit> {
    compile_file(path, options).map_err(|e| {
        let status = Exit::of_policy(&e);
        match e {
            PolicyError::Read { .. } => fail(json, status, &e.to_string()),
            PolicyError::Invalid(diagnostics) => {
                if json {
                    println!(
                        "{}",
                        json!({ "ok": false, "policy": path.display().to_string(), "errors": diagnostics.problems })
                    );
                } else {
                    for problem in diagnostics.problems {
                        eprintln!("{:?}", miette::Report::new(problem));
                    }
                }
                status
            }
        }
    })
}

/// Stage two: the policy must be enforceable exactly by the kernel backend.
/// The Landlock engine's plan for the running kernel's ABI (the newest this build knows, 7,
/// where the kernel has no Landlock), with the network gate where this process can load it.
fn landlock_plan(c: &Compiled) -> Result<LandlockPlan, LandlockRefusal> {
    match bee_userspace::landlock::abi_version() {
        Ok(abi) => LandlockEngine::with_abi(LandlockAbi(abi)).plan(&c.policy),
        Err(_) => LandlockPlan::new(
            &c.policy,
            LandlockAbi(7),
            &GateSupport::Unavailable("this kernel has no Landlock".to_owned()),
        ),
    }
}

fn landlock_json(plan: &Result<LandlockPlan, LandlockRefusal>) -> Value {
    match plan {
        Ok(p) => json!({
            "enforceable": true,
            "abi": p.abi().0,
            "gated": p.gated(),
            "narrowings": p.narrowings().iter().map(|n| json!({
                "key": n.origin.key,
                "line": n.origin.line,
                "rule": n.origin.text,
                "why": n.kind.to_string(),
            })).collect::<Vec<_>>(),
        }),
        Err(e) => json!({
            "enforceable": false,
            "gate_unavailable": e.gate,
            "refused": e.rules.iter().map(|r| json!({
                "key": r.origin.key,
                "line": r.origin.line,
                "rule": r.origin.text,
                "why": r.why.to_string(),
            })).collect::<Vec<_>>(),
        }),
    }
}

fn landlock_text(plan: &Result<LandlockPlan, LandlockRefusal>) -> String {
    let how = |p: &LandlockPlan| {
        format!(
            "ABI {}{}",
            p.abi().0,
            if p.gated() {
                ", the network by the network gate"
            } else {
                ""
            }
        )
    };
    // Carve-outs are mounts laid over what exists when a call starts: said, where there are.
    let laid = |p: &LandlockPlan| match p.masks().len() {
        0 => String::new(),
        n => format!(
            "     carve-outs and protected paths are mounts laid over what exists as each call \
             starts ({n} here): a path among them that another process creates, or moves away \
             and makes again, during a call is not covered until the next call\n"
        ),
    };
    match plan {
        Ok(p) if p.narrowings().is_empty() => {
            format!(
                "   landlock engine: enforces it exactly ({})\n{}",
                how(p),
                laid(p)
            )
        }
        Ok(p) => {
            let mut s = format!(
                "   landlock engine: enforces it ({}), more strictly for {} rule{}:\n",
                how(p),
                p.narrowings().len(),
                if p.narrowings().len() == 1 { "" } else { "s" }
            );
            for n in p.narrowings() {
                s.push_str(&format!(
                    "     {} `{}` (line {}): {}\n",
                    n.origin.key, n.origin.text, n.origin.line, n.kind
                ));
            }
            s.push_str(&laid(p));
            s
        }
        Err(e) => format!(
            "   landlock engine: cannot enforce it ({} rule{}; `--engine landlock` lists them)\n",
            e.rules.len(),
            if e.rules.len() == 1 { "" } else { "s" }
        ),
    }
}

fn plan(path: &Path, compiled: &Compiled, json: bool) -> Result<PlanStats, Exit> {
    EnforcementPlan::new(&compiled.policy)
        .map(|plan| plan.stats())
        .map_err(|e| {
            let message = format!("{}: cannot be enforced: {e}", path.display());
            fail(json, Exit::DataErr, &message)
        })
}

pub(super) fn fail(json: bool, exit: Exit, message: &str) -> Exit {
    if json {
        println!("{}", json!({ "ok": false, "error": message }));
    } else {
        eprintln!("bee: {message}");
    }
    exit
}
