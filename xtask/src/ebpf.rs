//! `cargo xtask ebpf`: compile the C BPF programs (placeholder).

/// Arguments of `cargo xtask ebpf`.
#[derive(Debug, clap::Args)]
pub struct EbpfArgs {
    /// Rebuild into a temporary directory and fail if the committed objects
    /// differ.
    #[arg(long)]
    pub check: bool,
}

/// Runs the task.
pub fn run(_args: &EbpfArgs) -> crate::error::Result<()> {
    Ok(())
}
