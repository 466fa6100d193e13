//! bee's task runner: `cargo xtask vm …` boots Debian kernels in QEMU to
//! test the BPF LSM programs; `cargo xtask ebpf` builds (or checks) the
//! committed eBPF objects; `cargo xtask test` runs every test, kernel matrix
//! included; `cargo xtask demo` runs the demo episode under kernel
//! enforcement (in a VM when this host cannot enforce).

mod abench;
mod apt;
mod demo;
mod ebpf;
mod error;
mod hbench;
mod initramfs;
mod kbench;
mod kernels;
mod qemu;
mod served;
mod sh;
mod test;
mod vm;
mod vmbench;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// bee's development tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Run a command inside QEMU guests booting the Debian kernels of the matrix
    /// (`--kernel 5.10,6.1,6.12,6.12-full,6.12-rt,7.x` or `all`).
    ///
    /// `cargo xtask vm --kernel all -- CMD ARGS…` exits with the guest
    /// command's exit code; `cargo xtask vm test` runs a Rust test binary.
    #[command(args_conflicts_with_subcommands = true)]
    Vm {
        #[command(subcommand)]
        mode: Option<Box<VmMode>>,
        #[command(flatten)]
        opts: vm::VmOpts,
        /// Command to run in the guest; host paths are copied in.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Build the eBPF objects from `crates/ebpf/bpf/*.bpf.c` (or check that
    /// the committed ones are current).
    Ebpf(ebpf::EbpfArgs),
    /// Build bee and run the demo episode (`examples/demo/`) under kernel
    /// enforcement: here when this host can enforce, else in a QEMU guest.
    ///
    /// Exits 0 only when the episode passed under `kernel` enforcement and
    /// the kernel refused the secret's read and the connect.
    Demo(demo::DemoArgs),
    /// Run every test: `cargo test --workspace`, then the kernel tests and the
    /// command-line tests in the VM matrix.
    Test(test::Args),
    /// Measure the harness: per-tool-call cost (kernel vs --host) and
    /// throughput at 1/4/16 concurrent episodes, in a 6.12 guest.
    BenchHarness(hbench::Args),
    /// Measure enforcement cost in the VM, one boot per kernel of the matrix
    /// (`--kernel 6.1,6.12,6.12-rt,7.x` or `all`): per-operation, a workload, scope start-up
    /// with both launchers and bwrap, and the tax on processes outside every scope.
    BenchKernel(kbench::Args),
    /// Measure subagent start-up: an `agent` call to the subagent's first
    /// model request, 1 and 8 at once, kernel vs --host, in a 6.12 guest.
    BenchAgents(abench::Args),
}

#[derive(Debug, Subcommand)]
enum VmMode {
    /// Build an integration-test binary and run it in each kernel,
    /// reporting per-test results.
    Test(vm::TestArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Vm {
            mode: Some(mode), ..
        } => match *mode {
            VmMode::Test(args) => vm::run_tests(&args).map(|()| 0),
        },
        Task::Vm {
            mode: None,
            opts,
            command,
        } => vm::run_command(&opts, &command),
        Task::Ebpf(args) => ebpf::run(&args).map(|()| 0),
        Task::Demo(args) => demo::run(&args),
        Task::Test(args) => test::run(&args).map(|()| 0),
        Task::BenchHarness(args) => hbench::run(&args),
        Task::BenchKernel(args) => kbench::run(&args).map(|()| 0),
        Task::BenchAgents(args) => abench::run(&args),
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(err) => {
            eprintln!("xtask: error: {err}");
            let mut source = std::error::Error::source(&err);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            match err {
                error::Error::GuestFailed { code, .. } => {
                    ExitCode::from(u8::try_from(code).unwrap_or(1))
                }
                _ => ExitCode::from(2),
            }
        }
    }
}
