//! `cargo xtask bench-kernel`: the kernel enforcement benchmark in the VM matrix.
//!
//! 1. builds the `kernel` bench target of `bee-userspace` (feature `kernel-bench`, bench
//!    profile) and finds its executable in cargo's JSON messages;
//! 2. makes sure bubblewrap is installed on the host (it is shipped into the guest as the
//!    start-up reference);
//! 3. per selected kernel of the matrix ([`crate::kernels::MATRIX`], in its order), boots one
//!    VM through `cargo xtask vm` (this same executable) and runs the benchmark there (which
//!    mounts a root bwrap can `pivot_root` from, tmpfs with bind mounts, before its setup
//!    phase: an initramfs root cannot be pivoted); kernels where bee fails closed (5.10) have nothing to
//!    measure: `all` leaves them out, naming one is an error;
//! 4. collects the benchmark's `kbench|` lines (Markdown tables) and `kbench-target|` lines
//!    (issue 10's targets) from the console and prints them per kernel, the package version
//!    booted in each heading, then the targets of every kernel side by side.
//!
//! A kernel whose VM fails is reported and the others still run; the task then fails.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::apt;
use crate::error::{Error, Result};
use crate::kernels::{Entry, MATRIX, Tests};
use crate::sh;
use crate::vm::{self, KernelChoice};

/// Arguments of `cargo xtask bench-kernel`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel(s) of the matrix to measure, one VM boot each: a name, several separated by
    /// commas, or `all` (every kernel where bee enforces; 5.10 fails closed and is left out).
    #[arg(long, default_value = "6.12", value_delimiter = ',', value_parser = vm::kernel_parser())]
    pub kernel: Vec<KernelChoice>,
    /// Accelerator for the VMs (as `cargo xtask vm`).
    #[arg(long, default_value = "auto")]
    pub accel: String,
    /// Limit for one VM, boot included, in seconds.
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// Rounds of the per-operation loops (each round runs every variant once).
    #[arg(long, default_value_t = 30)]
    pub rounds: usize,
    /// Scope start-ups measured per variant.
    #[arg(long, default_value_t = 200)]
    pub setup_iters: usize,
    /// Rounds of the shell workload.
    #[arg(long, default_value_t = 15)]
    pub work_rounds: usize,
    /// Rounds of the host-tax phase: each measures a process outside every scope with bee's
    /// programs attached, with none loaded, and with a no-op program on each of bee's hooks
    /// (the floor), loading or dropping twice (25–35 s under TCG). A multiple of 3 puts each
    /// state in each place of a round equally often. 0 skips the phase.
    #[arg(long, default_value_t = 9)]
    pub tax_rounds: usize,
    /// Rounds of the name-grants phase, last in the boot: UDP connects in a scope with 0, 1
    /// and 4,096 answers (one scope's quota) in the kernel's answers map. 0 skips the phase.
    #[arg(long, default_value_t = 10)]
    pub dns_rounds: usize,
    /// Run this already-built bench executable (`cargo bench --no-run -p bee-userspace
    /// --bench kernel --features kernel-bench`, from another checkout) instead of building
    /// this one's: to measure two builds of bee's programs on the same host, one after the
    /// other.
    #[arg(long)]
    pub bench_binary: Option<PathBuf>,
}

const BWRAP: &str = "/usr/bin/bwrap";
/// Prefix of the benchmark's Markdown lines.
const MARKER: &str = "kbench|";
/// Prefix of the benchmark's target lines: `kbench-target|label|value|limit`.
const TARGET_MARKER: &str = "kbench-target|";

/// Runs the benchmark binary `$1` with the remaining arguments; its setup phase mounts a root
/// bwrap can `pivot_root` from at `/nr` (an initramfs root cannot be pivoted).
const GUEST_SCRIPT: &str = "b=$1; shift; exec \"$b\" --bench --bwrap-root /nr \"$@\"";

/// The kernels `choices` select for the benchmark, in matrix order, and the fail-closed ones
/// that `all` brought in and that are left out.
///
/// # Errors
/// [`Error::Usage`] when a fail-closed kernel is named on its own: bee refuses to run there, so
/// there is nothing to measure; or when nothing is left to measure.
fn bench_entries(choices: &[KernelChoice]) -> Result<(Vec<&'static Entry>, Vec<&'static Entry>)> {
    let named_closed: Vec<&str> = choices
        .iter()
        .filter_map(|c| match c {
            KernelChoice::One(e) if e.tests == Tests::FailClosed => Some(e.name),
            _ => None,
        })
        .collect();
    if !named_closed.is_empty() {
        let enforcing: Vec<&str> = MATRIX
            .iter()
            .filter(|e| e.tests == Tests::Full)
            .map(|e| e.name)
            .collect();
        return Err(Error::Usage(format!(
            "cannot benchmark kernel {}: bee fails closed there (the programs do not load; \
             `bee exec` refuses to start anything), so there is no enforcement to measure. \
             Kernels that enforce: {}",
            named_closed.join(", "),
            enforcing.join(", ")
        )));
    }
    let (run, skipped): (Vec<&'static Entry>, Vec<&'static Entry>) = vm::selected(choices)
        .into_iter()
        .partition(|e| e.tests == Tests::Full);
    if run.is_empty() {
        return Err(Error::Usage("no kernel to measure".into()));
    }
    Ok((run, skipped))
}

/// One of issue 10's targets as the benchmark printed it.
#[derive(Debug, Clone, PartialEq)]
struct Target {
    label: String,
    value: f64,
    limit: Option<f64>,
}

impl Target {
    /// Parses `label|value|limit` (the text after [`TARGET_MARKER`]); the limit may be empty.
    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim_end().split('|');
        let label = parts.next()?.trim().to_owned();
        let value = parts.next()?.trim().parse().ok()?;
        let limit = match parts.next()?.trim() {
            "" => None,
            l => Some(l.parse().ok()?),
        };
        (!label.is_empty()).then_some(Self {
            label,
            value,
            limit,
        })
    }

    /// `1.234 met`, `**1.234** missed`, or `1.234` for a reference figure.
    fn cell(&self) -> String {
        match self.limit {
            Some(l) if self.value <= l => format!("{:.3} met", self.value),
            Some(_) => format!("**{:.3}** missed", self.value),
            None => format!("{:.3}", self.value),
        }
    }
}

/// What one kernel's boot reported.
#[derive(Debug)]
struct Report {
    entry: &'static Entry,
    /// `linux-image-… VERSION`, from the runner's `booting` line.
    package: String,
    accel: String,
    /// The guest's release and preemption model, from the runner's `kernel … exit` line.
    release: String,
    table: Vec<String>,
    targets: Vec<Target>,
    /// Why the VM did not complete the benchmark.
    failure: Option<String>,
}

impl Report {
    fn new(entry: &'static Entry) -> Self {
        Self {
            entry,
            package: "?".to_owned(),
            accel: "?".to_owned(),
            release: String::new(),
            table: Vec::new(),
            targets: Vec::new(),
            failure: None,
        }
    }

    /// Takes what it needs from one line of the runner's standard error.
    fn read_line(&mut self, line: &str) {
        if let Some(at) = line.find(MARKER) {
            self.table.push(line[at + MARKER.len()..].to_owned());
        } else if let Some(at) = line.find(TARGET_MARKER) {
            if let Some(t) = Target::parse(&line[at + TARGET_MARKER.len()..]) {
                self.targets.push(t);
            }
        } else if let Some(rest) = line.strip_prefix("xtask: booting ") {
            // `NAME: PACKAGE VERSION (Accel[, `append`]) with INITRD`
            let words: Vec<&str> = rest.split_whitespace().collect();
            if let [_, package, version, accel, ..] = words.as_slice() {
                self.package = format!("{package} {version}");
                self.accel = if accel.starts_with("(Kvm") {
                    "KVM"
                } else {
                    "TCG"
                }
                .to_owned();
            }
        } else if let Some(rest) = line.strip_prefix("xtask: kernel ")
            && let (Some(open), Some(close)) = (rest.find('('), rest.find("):"))
            && open < close
        {
            // `NAME (RELEASE, preempt MODEL): exit …`
            self.release = rest[open + 1..close].to_owned();
        }
    }

    /// The Markdown heading of this kernel's tables.
    fn heading(&self) -> String {
        let release = if self.release.is_empty() {
            String::new()
        } else {
            format!("; {}", self.release)
        };
        format!(
            "## Kernel {}: {} ({}, 2 vCPUs{release})",
            self.entry.name, self.package, self.accel
        )
    }
}

/// Runs the benchmark in each selected kernel and prints the tables.
pub fn run(args: &Args) -> Result<()> {
    let (entries, skipped) = bench_entries(&args.kernel)?;
    for e in &skipped {
        let why = match e.tests {
            Tests::LandlockOnly => "the BPF LSM is not in its lsm=, nothing of it to measure",
            _ => "bee fails closed there, nothing to measure",
        };
        eprintln!("xtask: leaving out kernel {}: {why}", e.name);
    }
    let bench = match &args.bench_binary {
        Some(path) => path.canonicalize().map_err(|source| Error::Io {
            action: "find the bench executable",
            path: path.clone(),
            source,
        })?,
        None => build()?,
    };
    apt::ensure(&["bubblewrap"])?;
    let xtask = std::env::current_exe().map_err(|source| Error::Spawn {
        program: "xtask (current_exe)".to_owned(),
        source,
    })?;
    let mut reports = Vec::new();
    for entry in entries {
        reports.push(run_one(args, &xtask, &bench, entry)?);
    }
    print_reports(&reports);
    let failed: Vec<String> = reports
        .iter()
        .filter_map(|r| Some(format!("{}: {}", r.entry.name, r.failure.as_ref()?)))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::Command {
            command: "cargo xtask bench-kernel".to_owned(),
            status: format!("{} of {} kernels failed", failed.len(), reports.len()),
            detail: format!(": {}", failed.join("; ")),
        })
    }
}

/// Boots `entry` with the benchmark and returns what it reported; a VM or benchmark failure
/// is recorded in the report, not returned.
fn run_one(
    args: &Args,
    xtask: &std::path::Path,
    bench: &std::path::Path,
    entry: &'static Entry,
) -> Result<Report> {
    let mut cmd = Command::new(xtask);
    cmd.args(["vm", "--kernel", entry.name, "--accel", &args.accel])
        .args(["--timeout", &args.timeout.to_string()])
        .arg("--bin")
        .arg(bench)
        .args([
            "--bin",
            BWRAP,
            "--",
            "/bin/busybox",
            "sh",
            "-c",
            GUEST_SCRIPT,
        ])
        .arg("sh")
        .arg(bench)
        .args(["--rounds", &args.rounds.to_string()])
        .args(["--setup-iters", &args.setup_iters.to_string()])
        .args(["--work-rounds", &args.work_rounds.to_string()])
        .args(["--tax-rounds", &args.tax_rounds.to_string()])
        .args(["--dns-rounds", &args.dns_rounds.to_string()])
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped());
    eprintln!("xtask: {}", sh::describe(&cmd));
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        program: sh::describe(&cmd),
        source,
    })?;
    let mut report = Report::new(entry);
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            eprintln!("{line}");
            report.read_line(&line);
        }
    }
    let status = child.wait().map_err(|source| Error::Spawn {
        program: "xtask vm".to_owned(),
        source,
    })?;
    if !status.success() {
        report.failure = Some(format!("`cargo xtask vm --kernel {}` {status}", entry.name));
    } else if report.targets.is_empty() {
        report.failure = Some("the benchmark printed no targets".to_owned());
    }
    Ok(report)
}

/// Prints every kernel's tables, then the targets side by side.
fn print_reports(reports: &[Report]) {
    println!();
    for r in reports {
        println!("{}", r.heading());
        if let Some(f) = &r.failure {
            println!();
            println!("**Failed:** {f}");
        }
        for line in &r.table {
            println!("{line}");
        }
        println!();
    }
    for line in targets_table(reports) {
        println!("{line}");
    }
}

/// The targets of every kernel side by side: one row per label (in the order first
/// reported), one column per kernel.
fn targets_table(reports: &[Report]) -> Vec<String> {
    let mut labels: Vec<(&str, Option<f64>)> = Vec::new();
    for t in reports.iter().flat_map(|r| &r.targets) {
        if !labels.iter().any(|(l, _)| *l == t.label) {
            labels.push((&t.label, t.limit));
        }
    }
    let mut lines = vec![
        "## Issue 10's targets, per kernel (ratios within each boot)".to_owned(),
        String::new(),
    ];
    let mut head = "| Measured | target |".to_owned();
    let mut sep = "| --- | ---: |".to_owned();
    for r in reports {
        head.push_str(&format!(" {} |", r.entry.name));
        sep.push_str(" ---: |");
    }
    lines.push(head);
    lines.push(sep);
    for (label, limit) in labels {
        let limit = limit.map_or_else(|| "—".to_owned(), |l| format!("≤ {l:.2}"));
        let mut row = format!("| {label} | {limit} |");
        for r in reports {
            let cell = r
                .targets
                .iter()
                .find(|t| t.label == label)
                .map_or_else(|| "—".to_owned(), Target::cell);
            row.push_str(&format!(" {cell} |"));
        }
        lines.push(row);
    }
    lines
}

/// Builds the bench target and returns its executable.
fn build() -> Result<PathBuf> {
    let mut cmd = Command::new(crate::demo::cargo());
    cmd.current_dir(vm::repo_root()).args([
        "bench",
        "--no-run",
        "--message-format=json-render-diagnostics",
        "--package",
        "bee-userspace",
        "--bench",
        "kernel",
        "--features",
        "kernel-bench",
    ]);
    eprintln!("xtask: {}", sh::describe(&cmd));
    let out = sh::stdout(&mut cmd)?;
    for line in out.lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact"
            && msg["target"]["name"] == "kernel"
            && msg["target"]["kind"][0] == "bench"
            && let Some(exe) = msg["executable"].as_str()
        {
            return Ok(PathBuf::from(exe));
        }
    }
    Err(Error::Parse {
        program: "cargo bench --no-run".into(),
        detail: "no executable for the `kernel` bench target".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choose(names: &[&str]) -> Vec<KernelChoice> {
        names
            .iter()
            .filter_map(|n| KernelChoice::named(n))
            .collect()
    }

    fn names(entries: &[&Entry]) -> Vec<&'static str> {
        entries.iter().map(|e| e.name).collect()
    }

    #[test]
    fn all_is_every_enforcing_kernel() {
        let (run, skipped) = bench_entries(&choose(&["all"])).unwrap_or_default();
        assert_eq!(
            names(&run),
            ["6.1", "6.12", "6.12-full", "6.12-rt", "7.x"],
            "every kernel that runs the BPF LSM, in matrix order"
        );
        assert_eq!(names(&skipped), ["5.10", "7.x-landlock"]);
        let (run, _) =
            bench_entries(&choose(&["7.x", "6.1", "6.12-rt", "6.12", "6.1"])).unwrap_or_default();
        assert_eq!(names(&run), ["6.1", "6.12", "6.12-rt", "7.x"]);
    }

    #[test]
    fn a_fail_closed_kernel_named_alone_is_refused() {
        for choice in [&["5.10"][..], &["6.1", "5.10"]] {
            let err = bench_entries(&choose(choice)).map(|_| ()).unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("5.10") && msg.contains("fails closed"),
                "{msg}"
            );
            assert!(
                msg.contains("6.12-rt"),
                "names the kernels that enforce: {msg}"
            );
        }
    }

    #[test]
    fn target_lines_parse() {
        assert_eq!(
            Target::parse("open+close in a scope, bee ×|1.2170|1.05\n"),
            Some(Target {
                label: "open+close in a scope, bee ×".to_owned(),
                value: 1.217,
                limit: Some(1.05),
            })
        );
        let r = Target::parse("open+close under Landlock ×|1.3|");
        assert_eq!(r.as_ref().map(|t| t.limit), Some(None));
        assert_eq!(r.map(|t| t.cell()), Some("1.300".to_owned()));
        assert_eq!(Target::parse("x|nan?|1"), None);
        assert_eq!(Target::parse("|1|1"), None);
        let met = Target::parse("a|0.3|0.3333").map(|t| t.cell());
        assert_eq!(met.as_deref(), Some("0.300 met"));
        let missed = Target::parse("a|1.2|1.05").map(|t| t.cell());
        assert_eq!(missed.as_deref(), Some("**1.200** missed"));
    }

    #[test]
    fn console_lines_fill_a_report() {
        let mut r = Report::new(&MATRIX[4]);
        for line in [
            "xtask: booting 6.12-rt: linux-image-6.12.57+deb13-rt-amd64-unsigned 6.12.57-1 \
             (Tcg) with /t/vm/initrd-6.12-rt.cpio",
            "[6.12-rt] kbench|| Operation | outside ns/op |",
            "[6.12-rt] kbench-target|workload in a scope, bee ×|1.1000|1.02",
            "xtask: kernel 6.12-rt (6.12.57+deb13-rt-amd64, preempt rt): exit 0; boot 3.0 s, \
             command 500.0 s",
        ] {
            r.read_line(line);
        }
        assert_eq!(
            r.heading(),
            "## Kernel 6.12-rt: linux-image-6.12.57+deb13-rt-amd64-unsigned 6.12.57-1 \
             (TCG, 2 vCPUs; 6.12.57+deb13-rt-amd64, preempt rt)"
        );
        assert_eq!(r.table, ["| Operation | outside ns/op |"]);
        assert_eq!(r.targets.len(), 1);
        let table = targets_table(&[r]);
        assert_eq!(table[2], "| Measured | target | 6.12-rt |");
        assert_eq!(
            table[4],
            "| workload in a scope, bee × | ≤ 1.02 | **1.100** missed |"
        );
    }
}
