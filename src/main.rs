//! The `bee` executable: a thin wrapper over [`bee::app`].

fn main() -> std::process::ExitCode {
    bee::app::main()
}
