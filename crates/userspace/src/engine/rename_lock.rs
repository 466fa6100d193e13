//! The address of the kernel's `rename_lock`, which the directory cache reads its move sequence
//! from (`docs/enforcement.md`, "The directory cache"). The kernel's BTF describes no global
//! variable but the per-CPU ones, so the address comes from `/proc/kallsyms`, which shows real
//! addresses only to a reader with `CAP_SYSLOG` (and none when `kernel.kptr_restrict` is 2).

use std::fs;

/// Where the kernel lists its symbols, one `address type name [module]` per line.
const KALLSYMS: &str = "/proc/kallsyms";

/// The symbol the programs read.
const RENAME_LOCK: &str = "rename_lock";

/// `rename_lock`'s address on the running kernel.
///
/// # Errors
/// Why there is none, as a sentence: the file cannot be read, has no such symbol, or
/// shows it as 0 (hidden from this process).
pub(super) fn rename_lock() -> Result<u64, String> {
    let text = fs::read_to_string(KALLSYMS).map_err(|e| format!("{KALLSYMS}: {e}"))?;
    find_symbol(&text, RENAME_LOCK).map_err(|why| format!("{KALLSYMS}: {why}"))
}

/// The address of symbol `name` of the kernel itself (not of a module) in kallsyms `text`. The
/// type letter is not looked at: it comes from the section the symbol is in, and Linux 7.3
/// lists `rename_lock` (exported, in a data section on 6.x, `D`) as `T`.
fn find_symbol(text: &str, name: &str) -> Result<u64, String> {
    let found = text.lines().find_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        let (address, _kind, symbol) = (fields.next()?, fields.next()?, fields.next()?);
        (symbol == name && fields.next().is_none()).then_some(address)
    });
    let Some(address) = found else {
        return Err(format!("no symbol `{name}` of the kernel itself"));
    };
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
    use super::find_symbol;

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
}
