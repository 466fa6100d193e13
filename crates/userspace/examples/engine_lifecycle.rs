//! What one in-process engine costs a command on this kernel, phase by phase: reading and
//! parsing the kernel's BTF, finding `rename_lock` in `/proc/kallsyms`, verifying every
//! program (`Engine::verify`, as `bee check` does), and, `ROUNDS` times (default 2), loading
//! and attaching the engine (`Engine::load`) and dropping it again (detaching and unloading
//! every program, as a `bee exec` that enforces in its own process does before it exits).
//!
//! Needs root and a kernel that runs BPF LSM programs, so it runs in the VM matrix
//! (`docs/benchmarks.md`, "An engine's load and teardown"):
//!
//! ```sh
//! cargo build --release -p bee-userspace --example engine_lifecycle
//! cargo xtask vm --kernel 6.12,6.12-rt,7.x -- target/release/examples/engine_lifecycle
//! ```
//!
//! Output: one line per phase, `PHASE SECONDS` (and what it found).

use std::time::Instant;

use bee_userspace::engine::{Engine, EngineOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 2,
    };
    let t = Instant::now();
    let btf = std::fs::read("/sys/kernel/btf/vmlinux")?;
    println!(
        "read-btf {:.3} bytes={}",
        t.elapsed().as_secs_f64(),
        btf.len()
    );
    let t = Instant::now();
    aya::Btf::parse(&btf, aya::Endianness::default())?;
    println!("parse-btf {:.3}", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let found = Engine::rename_lock_address().is_ok();
    println!("kallsyms {:.3} found={found}", t.elapsed().as_secs_f64());
    let options = EngineOptions::default();
    let t = Instant::now();
    let verified = Engine::verify(&options)?;
    println!(
        "verify {:.3} programs={} insns={}",
        t.elapsed().as_secs_f64(),
        verified.programs,
        verified.total_insns()
    );
    for round in 1..=rounds {
        let t = Instant::now();
        let engine = Engine::load(&options)?;
        println!("load#{round} {:.3}", t.elapsed().as_secs_f64());
        let t = Instant::now();
        drop(engine);
        println!("teardown#{round} {:.3}", t.elapsed().as_secs_f64());
    }
    Ok(())
}
