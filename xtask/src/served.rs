//! One `bee serve` per guest boot for the command-line kernel tests (`cargo xtask vm test
//! --served`, and the `bee` step of `cargo xtask test`).
//!
//! Every `bee` command that enforces in its own process loads and verifies the engine's
//! programs: seconds of the guest's time under emulation, about forty times a step. With a
//! service started once at the beginning of the boot and named in `$BEE_SOCKET`, root's
//! commands ask it instead (`--service auto`, `docs/serve.md`), and the programs are loaded
//! and verified once per boot. The binaries that test enforcement in bee's own process
//! ([`IN_PROCESS`]) run without the name, as before.

use std::path::Path;

/// Test targets that run without `$BEE_SOCKET`: each tests what bee does in its own process
/// (privileges and capabilities, learn mode, which the service does not offer) or starts
/// services of its own.
pub const IN_PROCESS: &[&str] = &["kernel_caps", "kernel_learn", "kernel_serve"];

/// Where the guest's service keeps its socket, ceilings, state and log.
const DIR: &str = "/run/bee-vm-tests";

/// The ceiling of every request: everything, so that a test's policy is proven within it and
/// what the test sees is its own policy's effect. Root is bounded by a ceiling like any
/// caller of the service. The same file is bee's `serve::ceiling::EVERYTHING`.
const CEILING: &str = include_str!("../../src/serve/everything.toml");

/// Seconds the guest waits for the service to listen: its load verifies every program.
const LISTEN_WITHIN: u32 = 600;

/// Guest shell lines that start `bee` as a service and wait until it listens; `$served` is
/// then its socket. A service that exits or does not listen in time ends the script with 70,
/// its log printed.
pub fn start(bee: &Path) -> String {
    let ceiling: Vec<String> = CEILING.lines().map(super::vm::shell_quote).collect();
    let bee = super::vm::shell_quote(&bee.to_string_lossy());
    format!(
        "mkdir -p {DIR}/ceilings; printf '%s\\n' {ceiling} > {DIR}/ceilings/default.toml; \
         {bee} serve --socket {DIR}/bee.sock --ceilings {DIR}/ceilings --state-dir {DIR}/state \
         2>{DIR}/serve.log & sp=$!; served={DIR}/bee.sock; i=0; \
         while [ ! -S $served ]; do \
           if ! kill -0 $sp 2>/dev/null || [ $i -ge {LISTEN_WITHIN} ]; then \
             echo \"bee-vm-tests: bee serve did not listen:\"; cat {DIR}/serve.log; exit 70; fi; \
           i=$((i+1)); sleep 1; done; \
         echo \"bee-vm-tests: bee serve listening after $i s\"; ",
        ceiling = ceiling.join(" "),
    )
}

/// Guest shell lines that stop the service started by [`start`] and print its log.
pub fn stop() -> String {
    format!(
        "kill $sp; wait $sp; echo \"bee-vm-tests: bee serve stopped; its log:\"; \
         cat {DIR}/serve.log; "
    )
}

/// Whether the test binary named `name` (a target name, such as `kernel_cli`, or a built
/// executable's, `kernel_cli-0123abcd`) is told of the service.
pub fn names_service(name: &str) -> bool {
    let target = name
        .rsplit_once('-')
        .filter(|(_, hash)| !hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit()))
        .map_or(name, |(target, _)| target);
    !IN_PROCESS.contains(&target)
}

#[cfg(test)]
mod tests {
    use super::names_service;

    #[test]
    fn the_binaries_that_test_bee_in_its_own_process_are_not_told() {
        assert!(names_service("kernel_cli"));
        assert!(names_service("kernel_cli-0123abcd"));
        assert!(!names_service("kernel_caps"));
        assert!(!names_service("kernel_learn-89ef"));
        assert!(!names_service("kernel_serve"));
    }
}
