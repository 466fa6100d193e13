//! The kernel's `rename_lock`, whose sequence the directory cache reads to learn of moves
//! (`docs/enforcement.md`, "The directory cache"): [`address`] finds it, [`check`] proves the
//! programs read the right thing there.
//!
//! The kernel's BTF describes no global variable but the per-CPU ones, so the address comes
//! from `/proc/kallsyms`, which shows real addresses only to a reader with `CAP_SYSLOG` (and
//! none when `kernel.kptr_restrict` is 2).

use std::fs;
use std::path::PathBuf;

use aya::Ebpf;
use aya::programs::{RawTracePoint, RawTracePointRunOptions, TestRun as _};

/// Where the kernel lists its symbols, one `address type name [module]` per line.
const KALLSYMS: &str = "/proc/kallsyms";

/// The symbol the programs read.
const RENAME_LOCK: &str = "rename_lock";

/// The program of `bee.bpf.o` that returns the sequence at the address it was loaded with (or
/// 1 when it cannot read it). Never attached.
pub(super) const PROBE: &str = "bee_rename_seq";

/// Attempts of [`check`] before it gives up on a busy host.
const ATTEMPTS: usize = 8;

/// `rename_lock`'s address on the running kernel.
///
/// # Errors
/// Why there is none, as a sentence: the file cannot be read, has no such symbol or more than
/// one, or shows it as 0 (hidden from this process).
pub(super) fn address() -> Result<u64, String> {
    let text = fs::read_to_string(KALLSYMS).map_err(|e| format!("{KALLSYMS}: {e}"))?;
    find_symbol(&text, RENAME_LOCK).map_err(|why| format!("{KALLSYMS}: {why}"))
}

/// Checks that `ebpf`, loaded with [`address`], reads a move sequence there: with no rename in
/// between, two reads agree and are even; two renames of a scratch file (in the first of
/// [`scratch_dirs`] this process can create one in) then move it on by at least 4 (each rename
/// is one write section of `rename_lock`, which adds 2).
/// Renames elsewhere on the host may spoil an attempt; after [`ATTEMPTS`] the check fails.
/// The probe program is unloaded again.
///
/// # Errors
/// Why the address does not hold the sequence, as a sentence.
pub(super) fn check(ebpf: &mut Ebpf) -> Result<(), String> {
    let prog: &mut RawTracePoint = ebpf
        .program_mut(PROBE)
        .ok_or_else(|| format!("no program `{PROBE}`"))?
        .try_into()
        .map_err(|e| format!("`{PROBE}`: {e}"))?;
    prog.load().map_err(|e| format!("loading `{PROBE}`: {e}"))?;
    let outcome = observe(prog);
    let _ = prog.unload();
    outcome
}

/// The reads and renames of [`check`].
fn observe(prog: &RawTracePoint) -> Result<(), String> {
    let read = || {
        prog.test_run(RawTracePointRunOptions::new())
            .map(|r| r.return_value)
            .map_err(|e| format!("running `{PROBE}`: {e}"))
    };
    let a = scratch_file()?;
    let b = a.with_extension("moved");
    let renames = || -> Result<(), String> {
        fs::rename(&a, &b).map_err(|e| format!("rename {}: {e}", a.display()))?;
        fs::rename(&b, &a).map_err(|e| format!("rename {}: {e}", b.display()))
    };
    let outcome = attempts(read, renames);
    let _ = fs::remove_file(&a);
    let _ = fs::remove_file(&b);
    outcome
}

/// Up to [`ATTEMPTS`] rounds of two reads, the renames and a third read, until one is judged a
/// sequence; else the last round's reason.
fn attempts(
    read: impl Fn() -> Result<u32, String>,
    renames: impl Fn() -> Result<(), String>,
) -> Result<(), String> {
    let mut outcome = Err("no attempt made".to_owned());
    for _ in 0..ATTEMPTS {
        let (first, second) = (read()?, read()?);
        renames()?;
        outcome = judge(first, second, read()?);
        if outcome.is_ok() {
            break;
        }
    }
    outcome
}

/// Where [`check`] may rename a scratch file: the temporary directory (`TMPDIR`, else `/tmp`),
/// else the working directory (a non-root bee may find `/tmp` closed to it).
fn scratch_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![std::env::temp_dir()];
    dirs.extend(std::env::current_dir().ok());
    dirs
}

/// Creates an empty scratch file in the first of [`scratch_dirs`] that allows it.
fn scratch_file() -> Result<PathBuf, String> {
    let name = format!(".bee-rename-check-{}", std::process::id());
    let mut refused = Vec::new();
    for dir in scratch_dirs() {
        let path = dir.join(&name);
        match fs::write(&path, b"") {
            Ok(()) => return Ok(path),
            Err(e) => refused.push(format!("{}: {e}", path.display())),
        }
    }
    Err(format!(
        "no scratch file to rename ({})",
        refused.join("; ")
    ))
}

/// Whether three reads — two with nothing renamed between them, then one after two renames —
/// look like `rename_lock`'s sequence.
fn judge(first: u32, second: u32, after: u32) -> Result<(), String> {
    if first != second || first % 2 == 1 || after % 2 == 1 {
        return Err(format!(
            "the value there was not a settled sequence ({first}, {second}, then {after})"
        ));
    }
    if after.wrapping_sub(second) < 4 {
        return Err(format!(
            "the value there did not move with two renames ({second}, then {after})"
        ));
    }
    Ok(())
}

/// The address of symbol `name` of the kernel itself (not of a module) in kallsyms `text`. The
/// type letter is not looked at: it comes from the section the symbol is in, and Linux 7.3
/// lists `rename_lock` (exported, in a data section on 6.x, `D`) as `T`.
fn find_symbol(text: &str, name: &str) -> Result<u64, String> {
    let mut found = text.lines().filter_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        let (address, _kind, symbol) = (fields.next()?, fields.next()?, fields.next()?);
        (symbol == name && fields.next().is_none()).then_some(address)
    });
    let Some(address) = found.next() else {
        return Err(format!("no symbol `{name}` of the kernel itself"));
    };
    if found.next().is_some() {
        return Err(format!(
            "more than one symbol `{name}` of the kernel itself"
        ));
    }
    match u64::from_str_radix(address, 16) {
        Ok(0) => Err(format!(
            "`{name}` is shown as 0 (kernel.kptr_restrict hides addresses from a process without \
             CAP_SYSLOG)"
        )),
        Ok(a) => Ok(a),
        Err(_) => Err(format!("`{name}` has no address: `{address}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::{find_symbol, judge};

    const TEXT: &str = "\
ffffffff81000000 T _stext
ffffffff8fdcfc28 r __ksymtab_rename_lock
ffffffff82a0b0c0 t rename_lock_helper
ffffffffc0000000 d rename_lock\t[some_module]
ffffffff90409800 T rename_lock
";

    #[test]
    fn the_kernel_symbol_is_found_and_module_ones_passed_over() {
        assert_eq!(find_symbol(TEXT, "rename_lock"), Ok(0xffff_ffff_9040_9800));
    }

    #[test]
    fn a_module_symbol_alone_is_not_the_kernel_s() {
        let text = "ffffffffc0000000 D rename_lock\t[some_module]\n";
        let err = find_symbol(text, "rename_lock").unwrap_err();
        assert!(err.contains("no symbol `rename_lock`"), "{err}");
    }

    #[test]
    fn a_hidden_address_is_refused_with_the_reason() {
        let text = "0000000000000000 D rename_lock\n";
        let err = find_symbol(text, "rename_lock").unwrap_err();
        assert!(err.contains("kptr_restrict"), "{err}");
    }

    #[test]
    fn a_malformed_address_is_refused() {
        let err = find_symbol("zz D rename_lock\n", "rename_lock").unwrap_err();
        assert!(err.contains("no address"), "{err}");
    }

    #[test]
    fn two_kernel_symbols_of_the_name_are_refused() {
        let text = "ffffffff90409800 T rename_lock\nffffffff90409900 d rename_lock\n";
        let err = find_symbol(text, "rename_lock").unwrap_err();
        assert!(err.contains("more than one"), "{err}");
    }

    #[test]
    fn a_sequence_is_settled_even_and_moved_by_the_renames() {
        assert_eq!(judge(10, 10, 14), Ok(()));
        assert_eq!(judge(10, 10, 40), Ok(()), "renames elsewhere only add");
        assert_eq!(judge(u32::MAX - 1, u32::MAX - 1, 2), Ok(()), "it wraps");
    }

    #[test]
    fn anything_else_is_refused() {
        assert!(judge(10, 12, 16).is_err(), "moved with nothing renamed");
        assert!(judge(11, 11, 15).is_err(), "odd: a move in flight");
        assert!(judge(10, 10, 12).is_err(), "one rename's worth for two");
        assert!(judge(10, 10, 10).is_err(), "a constant");
        assert!(judge(1, 1, 1).is_err(), "the probe's unreadable value");
    }
}
