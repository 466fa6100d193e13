//! `cargo xtask test`: every test bee has, on this host and in the kernel matrix.
//!
//! 1. `cargo test --workspace --locked`: everything that needs no special kernel;
//! 2. the kernel tests of `bee-userspace` (`kernel_*`: the programs, hook by hook) in a VM per
//!    kernel of the matrix;
//! 3. the command-line tests of `bee` (`kernel_*`: `kernel_cli` — `bee check`, `bee exec`, an
//!    enforced `bee run` episode — `kernel_agents` — subagents each in its own scope, a
//!    per-tool scope, Ctrl-C teardown — `kernel_caps` — bee with exactly its minimal
//!    capability set, and with each capability missing — and `kernel_review` — the review
//!    example's episode) in the same VMs, with the `bee` executable copied in. They are built
//!    with [`BEE_FEATURES`], so the review tools are in that `bee`.
//!
//! A step that cannot run fails the task: a kernel test that did not run is never a pass.

use std::path::PathBuf;
use std::process::Command;

use crate::demo::cargo;
use crate::error::{Error, Result};
use crate::vm::{self, AccelChoice, KernelChoice, TestArgs, VmOpts};

/// The features of the command-line kernel tests: `kernel-tests`, and the review tools with
/// the grammars `.ci/run` tests them with (one set, so cargo builds their crates once).
pub const BEE_FEATURES: &str = "kernel-tests,sec,astgrep-rust,astgrep-python";

/// Arguments of `cargo xtask test`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel(s) of the matrix to run the kernel tests on.
    #[arg(long, value_enum, default_value = "all")]
    pub kernel: KernelChoice,
    /// Accelerator for the VMs.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelChoice,
    /// Skip `cargo test --workspace` (run only the kernel matrix).
    #[arg(long)]
    pub kernel_only: bool,
}

/// Runs the three steps in order, stopping at the first failure.
pub fn run(args: &Args) -> Result<()> {
    if !args.kernel_only {
        eprintln!("xtask: cargo test --workspace --locked");
        let status = Command::new(cargo())
            .args(["test", "--workspace", "--locked"])
            .current_dir(vm::repo_root())
            .status()
            .map_err(|e| Error::Spawn {
                program: "cargo test".to_owned(),
                source: e,
            })?;
        if !status.success() {
            return Err(Error::Command {
                command: "cargo test --workspace --locked".to_owned(),
                status: status.to_string(),
                detail: String::new(),
            });
        }
    }
    let opts = |bin: Vec<PathBuf>| VmOpts {
        kernel: args.kernel,
        with: Vec::new(),
        bin,
        timeout: 900,
        accel: args.accel,
        memory: 1024,
    };
    eprintln!("xtask: kernel tests of bee-userspace in the VM matrix");
    vm::run_tests(&TestArgs {
        opts: opts(Vec::new()),
        package: "bee-userspace".to_owned(),
        test: "kernel_*".to_owned(),
        features: "kernel-tests".to_owned(),
        binary: None,
        args: Vec::new(),
    })?;
    eprintln!("xtask: command-line tests of bee in the VM matrix");
    vm::run_tests(&TestArgs {
        opts: opts(vec![vm::target_dir().join("debug").join("bee")]),
        package: "bee".to_owned(),
        test: "kernel_*".to_owned(),
        features: BEE_FEATURES.to_owned(),
        binary: None,
        args: Vec::new(),
    })
}
