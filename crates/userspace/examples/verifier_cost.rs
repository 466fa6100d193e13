//! How much work the kernel's verifier does for bee's programs: loads a `bee.bpf.o` (the one
//! built in, or each file named on the command line, such as an older commit's object) and
//! prints, for each LSM program of [`PROGRAMS`] and [`OPTIONAL_PROGRAMS`], the instructions
//! the verifier processed (`bpf_prog_info`'s `verified_insns`, Linux 5.16+) and the load's
//! wall time, with the directory cache compiled in (`cache=on`, given `rename_lock`'s address
//! from `/proc/kallsyms`) and out (`cache=off`). Programs load one after another, so the times
//! add up to a single-threaded load. Nothing is attached.
//!
//! Needs root and a kernel that runs BPF LSM programs, so it runs in the VM matrix
//! (`docs/benchmarks.md`, "Verification cost"):
//!
//! ```sh
//! cargo build -p bee-userspace --example verifier_cost
//! git show 8db3bc3:crates/ebpf/bee.bpf.o > /tmp/before.o
//! cargo xtask vm --kernel 6.1,7.x -- target/debug/examples/verifier_cost /tmp/before.o
//! ```
//!
//! Output: one line per program (`program hook cache=on insns=N ms=T`, or `refused: …` with
//! the verifier's last line), then `total OBJECT cache=on insns=N ms=T loaded=N refused=N`.

use std::time::Instant;

use aya::programs::Lsm;
use aya::{Btf, EbpfLoader};
use bee_userspace::engine::{Engine, OPTIONAL_PROGRAMS, PROGRAMS};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let btf = Btf::from_sys_fs()?;
    let rename_lock = Engine::rename_lock_address()?;
    let named: Vec<String> = std::env::args().skip(1).collect();
    let objects: Vec<(String, Vec<u8>)> = if named.is_empty() {
        vec![("built-in".to_owned(), bee_ebpf::BEE_OBJECT.to_vec())]
    } else {
        named
            .into_iter()
            .map(|path| std::fs::read(&path).map(|bytes| (path, bytes)))
            .collect::<Result<_, _>>()?
    };
    for (name, bytes) in &objects {
        for (cache, address) in [("on", rename_lock), ("off", 0)] {
            load(&btf, name, bytes, cache, address)?;
        }
    }
    Ok(())
}

/// Loads every LSM program of `bytes` with the cache `cache` (`address` as `rename_lock`'s)
/// and prints what each cost.
fn load(
    btf: &Btf,
    name: &str,
    bytes: &[u8],
    cache: &str,
    address: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let on = u32::from(address != 0);
    let mut loader = EbpfLoader::new();
    loader.btf(Some(btf));
    loader.override_global("bee_cfg_dircache", &on, true);
    loader.override_global("bee_cfg_rename_lock", &address, true);
    loader.allow_unsupported_maps();
    let mut ebpf = loader.load(bytes)?;
    let (mut total, mut millis, mut loaded, mut refused) = (0u64, 0u128, 0, 0);
    for &(program, hook) in PROGRAMS.iter().chain(OPTIONAL_PROGRAMS) {
        let Some(found) = ebpf.program_mut(program) else {
            println!("{program} {hook} cache={cache} absent from the object");
            continue;
        };
        let lsm: &mut Lsm = found.try_into()?;
        let started = Instant::now();
        match lsm.load(hook, btf) {
            Ok(()) => {
                let ms = started.elapsed().as_millis();
                let insns = lsm.info()?.verified_instruction_count().unwrap_or(0);
                println!("{program} {hook} cache={cache} insns={insns} ms={ms}");
                total += u64::from(insns);
                millis += ms;
                loaded += 1;
            }
            Err(e) => {
                let text = format!("{e:#}");
                let last = text.lines().last().unwrap_or_default().to_owned();
                println!("{program} {hook} cache={cache} refused: {last}");
                refused += 1;
            }
        }
    }
    println!(
        "total {name} cache={cache} insns={total} ms={millis} loaded={loaded} refused={refused}"
    );
    Ok(())
}
