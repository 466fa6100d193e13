//! `cargo xtask bench-kernel`: the kernel enforcement benchmark in the VM matrix.
//!
//! 1. builds the `kernel` bench target of `bee-userspace` (feature `kernel-bench`, bench
//!    profile) and finds its executable in cargo's JSON messages;
//! 2. makes sure bubblewrap is installed on the host (it is shipped into the guest as the
//!    start-up reference);
//! 3. per kernel, 6.12 first, boots one VM through `cargo xtask vm` (this same executable),
//!    where a small script gives bwrap a root it can `pivot_root` from (tmpfs with bind
//!    mounts; an initramfs root cannot be pivoted) and runs the benchmark;
//! 4. collects the benchmark's `kbench|` lines from the console and prints them per kernel, as
//!    the Markdown tables `docs/benchmarks.md` records.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::apt;
use crate::error::{Error, Result};
use crate::sh;
use crate::vm;

/// Arguments of `cargo xtask bench-kernel`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel(s) to measure: one VM boot each, 6.12 first.
    #[arg(long, value_enum, default_value = "6.12")]
    pub kernel: BenchKernel,
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
}

/// Which kernels to boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchKernel {
    /// Linux 6.1.
    #[value(name = "6.1")]
    V6_1,
    /// Linux 6.12.
    #[value(name = "6.12")]
    V6_12,
    /// 6.12, then 6.1.
    All,
}

const BWRAP: &str = "/usr/bin/bwrap";
const MARKER: &str = "kbench|";

/// Gives bwrap a root with a parent mount (a tmpfs with the system directories bound in),
/// then runs the benchmark binary `$1` with the remaining arguments.
const GUEST_SCRIPT: &str = "set -e; mkdir -p /nr; mount -t tmpfs tmpfs /nr; \
    for d in bin lib lib64 usr etc dev proc sys; do if [ -d /$d ]; then mkdir -p /nr/$d; \
    mount -o rbind /$d /nr/$d; fi; done; mkdir -p /nr/tmp; \
    b=$1; shift; exec \"$b\" --bench --bwrap-root /nr \"$@\"";

/// Runs the benchmark in each selected kernel and prints the tables.
pub fn run(args: &Args) -> Result<()> {
    let bench = build()?;
    apt::ensure(&["bubblewrap"])?;
    let kernels: &[&str] = match args.kernel {
        BenchKernel::V6_12 => &["6.12"],
        BenchKernel::V6_1 => &["6.1"],
        BenchKernel::All => &["6.12", "6.1"],
    };
    let xtask = std::env::current_exe().map_err(|source| Error::Spawn {
        program: "xtask (current_exe)".to_owned(),
        source,
    })?;
    let mut reports = Vec::new();
    for kernel in kernels {
        let mut cmd = Command::new(&xtask);
        cmd.args(["vm", "--kernel", kernel, "--accel", &args.accel])
            .args(["--timeout", &args.timeout.to_string()])
            .arg("--bin")
            .arg(&bench)
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
            .arg(&bench)
            .args(["--rounds", &args.rounds.to_string()])
            .args(["--setup-iters", &args.setup_iters.to_string()])
            .args(["--work-rounds", &args.work_rounds.to_string()])
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped());
        eprintln!("xtask: {}", sh::describe(&cmd));
        let mut child = cmd.spawn().map_err(|source| Error::Spawn {
            program: sh::describe(&cmd),
            source,
        })?;
        let mut accel = String::from("?");
        let mut table = Vec::new();
        if let Some(stderr) = child.stderr.take() {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("{line}");
                if let Some(at) = line.find(MARKER) {
                    table.push(line[at + MARKER.len()..].to_owned());
                } else if line.contains("xtask: booting ") {
                    accel = if line.contains("(Kvm)") { "KVM" } else { "TCG" }.to_owned();
                }
            }
        }
        let status = child.wait().map_err(|source| Error::Spawn {
            program: "xtask vm".to_owned(),
            source,
        })?;
        if !status.success() {
            return Err(Error::Command {
                command: format!("cargo xtask vm --kernel {kernel} (kernel benchmark)"),
                status: status.to_string(),
                detail: String::new(),
            });
        }
        reports.push((kernel, accel, table));
    }
    println!();
    for (kernel, accel, table) in reports {
        println!("## Kernel {kernel} ({accel}, 2 vCPUs)");
        for line in table {
            println!("{line}");
        }
        println!();
    }
    Ok(())
}

/// Builds the bench target and returns its executable.
fn build() -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
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
