//! `bee check`: can this kernel, and this process, enforce bee policies — and with which
//! engine?
//!
//! Runs every gate of [`SupportReport::detect`] for the BPF LSM — the last one loads and
//! attaches a real LSM program — and the Landlock engine's gates ([`LandlockGates`]), and
//! prints each with its verdict, what was found and, for a failure, the fix. `--engine` says
//! which engine counts ([`EngineChoice`]; `auto` takes the BPF LSM where its gates pass, and
//! the Landlock engine where the kernel cannot run the BPF LSM — never where only a privilege
//! for the BPF LSM is missing, which is the operator's to grant).

use bee_userspace::cgroup::{CgroupParent, SweepReport};
use bee_userspace::landlock::{abi_version, seccomp};
use bee_userspace::scope::EngineKind;
use bee_userspace::support::SupportReport;
use serde_json::json;

use super::Exit;
use super::enforcement::{EngineChoice, holds_sys_admin};

/// Arguments of `bee check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// The engine that must be able to enforce for `bee check` to pass.
    #[arg(long, value_name = "ENGINE", default_value = "auto")]
    engine: EngineChoice,
}

/// One gate of the Landlock engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockGate {
    /// `landlock`, `namespaces`, `seccomp`.
    pub name: &'static str,
    /// Whether it passed.
    pub passed: bool,
    /// What was found.
    pub reason: String,
    /// What to do, for a failure.
    pub fix: Option<String>,
}

/// The Landlock engine's gates: the kernel's Landlock ABI, the privilege its namespaces need,
/// and seccomp filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockGates {
    /// The ABI, when Landlock runs.
    pub abi: Option<u32>,
    /// The gates, in order.
    pub gates: Vec<LandlockGate>,
    /// Whether the engine reports its denials (how, in one sentence), or why not: not a gate,
    /// since it enforces either way.
    pub reports: Result<String, String>,
    /// Whether the seccomp filter's refusals are reported (how, in one sentence), or why not
    /// ([`seccomp::notify::probe`]): not a gate either, since they are refused either way.
    pub seccomp_reports: Result<String, String>,
    /// Whether the network gate loads here (cgroup `sock_addr` programs), or why not: not a
    /// gate either, since without it the policies that need it are refused, naming why.
    pub network_gate: Result<(), String>,
}

impl LandlockGates {
    /// Asks the running kernel and this process.
    pub fn detect() -> Self {
        let abi = abi_version();
        let mut gates = vec![match &abi {
            Ok(v) => LandlockGate {
                name: "landlock",
                passed: true,
                reason: format!(
                    "Landlock ABI {v}{}",
                    if *v >= 4 {
                        " (TCP port rules)"
                    } else {
                        " (no network rules: TCP only through the network gate)"
                    }
                ),
                fix: None,
            },
            Err(e) => LandlockGate {
                name: "landlock",
                passed: false,
                reason: match e.raw_os_error() {
                    Some(libc::EOPNOTSUPP) => {
                        "Landlock is built in but not enabled at boot".to_owned()
                    }
                    _ => format!("this kernel has no Landlock ({e})"),
                },
                fix: Some(
                    "boot Linux 5.13 or newer with `landlock` in `lsm=` (CONFIG_SECURITY_LANDLOCK)"
                        .to_owned(),
                ),
            },
        }];
        let admin = holds_sys_admin();
        gates.push(LandlockGate {
            name: "namespaces",
            passed: admin,
            reason: if admin {
                "CAP_SYS_ADMIN held: each scope gets mount, PID and IPC namespaces".to_owned()
            } else {
                "lacks CAP_SYS_ADMIN, which each scope's mount and PID namespaces need".to_owned()
            },
            fix: (!admin).then(|| "run bee as root".to_owned()),
        });
        let seccomp = std::path::Path::new("/proc/sys/kernel/seccomp/actions_avail").exists();
        gates.push(LandlockGate {
            name: "seccomp",
            passed: seccomp,
            reason: if seccomp {
                "seccomp filters are available".to_owned()
            } else {
                "this kernel has no seccomp filters (CONFIG_SECCOMP_FILTER)".to_owned()
            },
            fix: (!seccomp).then(|| "boot a kernel built with CONFIG_SECCOMP_FILTER".to_owned()),
        });
        let reports = match abi {
            Ok(v) if v >= 7 => bee_userspace::landlock::audit::probe(),
            Ok(v) => Err(format!(
                "Landlock ABI {v} logs no denials (audit records need ABI 7, Linux 6.15)"
            )),
            Err(_) => Err("no Landlock".to_owned()),
        };
        let seccomp_reports = if seccomp {
            seccomp::notify::probe()
        } else {
            Err("no seccomp filters".to_owned())
        };
        let network_gate = match abi {
            Ok(_) => bee_userspace::landlock::gate::NetGate::load().map(drop),
            Err(_) => Err("no Landlock".to_owned()),
        };
        Self {
            abi: abi.ok(),
            gates,
            reports,
            seccomp_reports,
            network_gate,
        }
    }

    /// Whether every gate passed.
    pub fn is_supported(&self) -> bool {
        self.gates.iter().all(|g| g.passed)
    }
}

/// The engine `choice` would use given both reports, `None` when none can enforce.
pub fn chosen(
    choice: EngineChoice,
    bpf: &SupportReport,
    landlock: &LandlockGates,
) -> Option<EngineKind> {
    match choice {
        EngineChoice::BpfLsm => bpf.is_supported().then_some(EngineKind::BpfLsm),
        EngineChoice::Landlock => landlock.is_supported().then_some(EngineKind::Landlock),
        EngineChoice::Auto if bpf.is_supported() => Some(EngineKind::BpfLsm),
        EngineChoice::Auto if bpf.lacks_only_capabilities() => None,
        EngineChoice::Auto => landlock.is_supported().then_some(EngineKind::Landlock),
    }
}

/// Runs `bee check`: 0 when the engine `--engine` names (or `auto` picks) can enforce here,
/// 65 when none can.
pub fn run(args: &Args) -> Exit {
    let report = SupportReport::detect();
    let landlock = LandlockGates::detect();
    let mut engine = chosen(args.engine, &report, &landlock);
    let service = ServiceReport::detect();
    // A command of this user would go through the service: whether it can enforce is the
    // service's answer, not this process's privileges.
    if crate::config::ServiceChoice::Auto.use_service(&service.socket) {
        engine = service.engine(args.engine);
    }
    let scopes = ScopesReport::sweep();
    if args.json {
        let mut v = to_json(&report, &landlock, args.engine, engine);
        v["service"] = service.to_json();
        v["scopes"] = scopes.to_json();
        println!("{v}");
    } else {
        // The service's and the scopes' lines follow the verdict's, before either engine's
        // gates.
        let lines = format!("{}\n{}", service.render(), scopes.render());
        if args.engine != EngineChoice::BpfLsm {
            let text = render_landlock(&landlock, args.engine, engine);
            let (verdict, gates) = text.split_once('\n').unwrap_or((&text, ""));
            print!("{verdict}\n{lines}\n{gates}");
        } else {
            println!("{lines}");
        }
        if args.engine != EngineChoice::Landlock {
            println!("{report}");
        }
    }
    if engine.is_some() {
        Exit::Ok
    } else {
        Exit::DataErr
    }
}

/// Whether a `bee serve` service answers this caller ([`crate::serve::socket_path`]), and
/// what it says of itself and of the caller's ceiling.
#[derive(Debug)]
pub struct ServiceReport {
    /// The socket asked.
    pub socket: std::path::PathBuf,
    /// The service's welcome, or why there was none.
    pub answer: Result<crate::serve::protocol::Welcome, String>,
}

impl ServiceReport {
    /// Asks the service at the clients' socket.
    pub fn detect() -> Self {
        let socket = crate::serve::socket_path();
        let answer = crate::serve::client::Client::connect(&socket)
            .map(|c| c.welcome)
            .map_err(|e| e.to_string());
        Self { socket, answer }
    }

    /// The engine the service would enforce this caller's scopes with: `None` when no service
    /// answers, no ceiling applies to the caller, or its engine is not `choice`.
    pub fn engine(&self, choice: EngineChoice) -> Option<EngineKind> {
        let w = self
            .answer
            .as_ref()
            .ok()
            .filter(|w| !w.ceiling.is_empty())?;
        let kind = EngineKind::parse(&w.engine)?;
        (choice == EngineChoice::Auto || choice.as_str() == w.engine).then_some(kind)
    }

    /// One line: `service: …`.
    pub fn render(&self) -> String {
        let socket = self.socket.display();
        match &self.answer {
            Ok(w) if w.ceiling.is_empty() => format!(
                "service: answers at {socket} (bee {}, protocol {}, engine {}); no ceiling applies to uid {}: it grants nothing",
                w.bee, w.version, w.engine, w.uid
            ),
            Ok(w) => format!(
                "service: answers at {socket} (bee {}, protocol {}, engine {}); uid {} is bounded by {}",
                w.bee,
                w.version,
                w.engine,
                w.uid,
                w.ceiling.join(", ")
            ),
            Err(why) => format!("service: none ({why})"),
        }
    }

    /// `{socket, answers, bee, protocol, engine, uid, ceiling, error}`.
    pub fn to_json(&self) -> serde_json::Value {
        match &self.answer {
            Ok(w) => json!({
                "socket": self.socket, "answers": true, "bee": w.bee, "protocol": w.version,
                "engine": w.engine, "uid": w.uid, "ceiling": w.ceiling,
            }),
            Err(why) => json!({"socket": self.socket, "answers": false, "error": why}),
        }
    }
}

/// The sweep of the scope cgroups ended bee processes left behind
/// ([`CgroupParent::sweep_stale`]), run by `bee check` as by any command that makes scopes.
#[derive(Debug)]
pub struct ScopesReport {
    /// The parent swept and what the sweep did, or why the parent could not be opened.
    pub swept: Result<(std::path::PathBuf, SweepReport), String>,
}

impl ScopesReport {
    /// Opens the default parent ([`CgroupParent::open_default`]) and sweeps it.
    pub fn sweep() -> Self {
        let swept = CgroupParent::open_default()
            .map(|p| (p.path().to_owned(), p.sweep_stale()))
            .map_err(|e| e.to_string());
        Self { swept }
    }

    /// One line: `scopes: …`.
    pub fn render(&self) -> String {
        match &self.swept {
            Ok((parent, report)) => format!("scopes: {}", report.summary(parent)),
            Err(why) => format!("scopes: not swept ({why})"),
        }
    }

    /// `{parent, removed, populated, errors}` (counts, and the errors' texts), or
    /// `{error}`.
    pub fn to_json(&self) -> serde_json::Value {
        match &self.swept {
            Ok((parent, r)) => json!({
                "parent": parent,
                "removed": r.removed.len(),
                "populated": r.populated.len(),
                "errors": r.errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            }),
            Err(why) => json!({"error": why}),
        }
    }
}

/// The Landlock engine's gates and the choice, as text: first, so that the BPF LSM's report
/// (whose last line is its verdict) follows.
fn render_landlock(
    landlock: &LandlockGates,
    choice: EngineChoice,
    engine: Option<EngineKind>,
) -> String {
    let mut out = String::new();
    out.push_str(&match engine {
        Some(e) => format!("engine: {e} ({})\n", choice.as_str()),
        None => format!("engine: none can enforce here ({})\n", choice.as_str()),
    });
    out.push_str("Landlock engine:\n");
    for g in &landlock.gates {
        out.push_str(&format!(
            "  {} {} {}\n",
            if g.passed { "pass" } else { "FAIL" },
            g.name,
            g.reason
        ));
        if let Some(fix) = &g.fix {
            out.push_str(&format!("       fix: {fix}\n"));
        }
    }
    out.push_str(&match &landlock.reports {
        Ok(how) => format!("  pass reports {how}\n"),
        Err(why) => format!("  note reports denials are enforced but not reported: {why}\n"),
    });
    out.push_str(&match &landlock.seccomp_reports {
        Ok(how) => format!("  pass seccomp-reports {how}\n"),
        Err(why) => format!(
            "  note seccomp-reports the seccomp filter's refusals are enforced but not reported: {why}\n"
        ),
    });
    out.push_str(&match &landlock.network_gate {
        Ok(()) => "  pass network-gate cgroup sock_addr programs load: address, UDP and name grants are enforced\n".to_owned(),
        Err(why) => format!(
            "  note network-gate policies with address, UDP or name grants are refused: {why}\n"
        ),
    });
    out.push_str(if landlock.is_supported() {
        "Landlock engine supported: policies it can express exactly are enforced (`bee validate --engine landlock` says which)\n"
    } else {
        "Landlock engine NOT supported\n"
    });
    out.push_str("BPF LSM engine:\n");
    out
}

/// The report as JSON: `supported` (the engine `--engine` asks for can enforce), `engine`
/// (the one that would, or `null`), `kernel`, the `capabilities` bee needs here (`required`)
/// and those it lacks (`missing`), the `kernel_features` bee's programs need that this kernel
/// lacks (`missing`, each with the release that added it) and the `lowest_kernel` that has
/// them all (`null` when none is missing), one object per BPF LSM gate, and `landlock`: its
/// `supported`, `abi`, gates, `reports` (`denials`: whether they are reported, `reason`),
/// `seccomp_reports` (`refusals`: whether the seccomp filter's are reported, `reason`) and
/// `network_gate` (`available`, else the `reason`).
pub fn to_json(
    report: &SupportReport,
    landlock: &LandlockGates,
    choice: EngineChoice,
    engine: Option<EngineKind>,
) -> serde_json::Value {
    json!({
        "supported": engine.is_some(),
        "engine": engine.map(EngineKind::as_str),
        "choice": choice.as_str(),
        "kernel": report.kernel_release,
        "bpf_lsm": { "supported": report.is_supported() },
        "capabilities": {
            "required": report.required.iter().map(|r| r.name).collect::<Vec<_>>(),
            "missing": report.missing.iter().map(|r| r.name).collect::<Vec<_>>(),
        },
        "kernel_features": {
            "missing": report.missing_pieces.iter().map(|p| json!({
                "piece": p.name,
                "btf_name": p.btf_name,
                "since": p.since.to_string(),
            })).collect::<Vec<_>>(),
            "lowest_kernel": report.lowest_kernel.map(|v| v.to_string()),
        },
        "gates": report.gates.iter().map(|g| json!({
            "gate": g.id.name(),
            "passed": g.passed,
            "reason": g.reason,
            "fix": g.fix,
        })).collect::<Vec<_>>(),
        "landlock": {
            "supported": landlock.is_supported(),
            "abi": landlock.abi,
            "gates": landlock.gates.iter().map(|g| json!({
                "gate": g.name,
                "passed": g.passed,
                "reason": g.reason,
                "fix": g.fix,
            })).collect::<Vec<_>>(),
            "reports": match &landlock.reports {
                Ok(how) => json!({"denials": true, "reason": how}),
                Err(why) => json!({"denials": false, "reason": why}),
            },
            "seccomp_reports": match &landlock.seccomp_reports {
                Ok(how) => json!({"refusals": true, "reason": how}),
                Err(why) => json!({"refusals": false, "reason": why}),
            },
            "network_gate": match &landlock.network_gate {
                Ok(()) => json!({"available": true}),
                Err(why) => json!({"available": false, "reason": why}),
            },
        },
    })
}
