//! `cargo xtask ebpf`: compile the C BPF programs in `crates/ebpf/bpf/` into
//! the objects committed under `crates/ebpf/`, or check that the committed
//! ones match a fresh build byte for byte.
//!
//! Reproducibility: the compiler is pinned by major (`clang-19`), it runs in
//! the source directory on relative paths, `-fdebug-prefix-map` and
//! `-fdebug-compilation-dir` keep the host's paths out, and DWARF is
//! stripped afterwards (`llvm-strip-19 -g`), leaving `.BTF`/`.BTF.ext`,
//! which is all CO-RE relocation and the loader need. Every build is done
//! twice and compared, so a non-deterministic toolchain is caught at once.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::apt;
use crate::error::{Error, Result, io_err};
use crate::sh;
use crate::vm::{repo_root, target_dir};

/// The pinned compiler, by major version.
const CLANG: &str = "clang-19";
/// The matching strip tool.
const STRIP: &str = "llvm-strip-19";
/// Debian packages providing the compiler, strip, libbpf headers, bpftool.
const PACKAGES: &[&str] = &["clang-19", "llvm-19", "libbpf-dev", "bpftool"];

/// Arguments of `cargo xtask ebpf`.
#[derive(Debug, clap::Args)]
pub struct EbpfArgs {
    /// Rebuild into a temporary directory and fail if any committed object
    /// differs from it.
    #[arg(long)]
    pub check: bool,
    /// Regenerate `bpf/vmlinux.h` from this host's BTF
    /// (`/sys/kernel/btf/vmlinux`) before building.
    #[arg(long, conflicts_with = "check")]
    pub vmlinux: bool,
}

/// The crate holding the C sources (`bpf/`) and the objects.
fn crate_dir() -> PathBuf {
    repo_root().join("crates").join("ebpf")
}

/// `*.bpf.c` file names in `bpf/`, sorted.
fn sources(bpf_dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = fs::read_dir(bpf_dir)
        .map_err(io_err("read directory", bpf_dir))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".bpf.c"))
        .collect();
    names.sort();
    Ok(names)
}

/// Compiles `source` (a file name in `bpf_dir`) into `out`.
fn compile(bpf_dir: &Path, source: &str, out: &Path) -> Result<()> {
    let prefix_map = format!("-fdebug-prefix-map={}=.", bpf_dir.display());
    sh::stdout(
        Command::new(CLANG)
            .current_dir(bpf_dir)
            .args([
                "-g",
                "-O2",
                "-target",
                "bpf",
                "-D__TARGET_ARCH_x86",
                "-Wall",
                "-Werror",
                &prefix_map,
                "-fdebug-compilation-dir=.",
                "-I.",
                // bee_common.h: the map layouts shared with user space.
                "-I../../common/include",
                "-c",
                source,
                "-o",
            ])
            .arg(out),
    )?;
    sh::stdout(Command::new(STRIP).arg("-g").arg(out)).map(drop)
}

/// Builds every source into `dir`; returns (object name, path) pairs.
fn build_into(bpf_dir: &Path, dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(io_err("remove", dir))?;
    }
    fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
    let mut built = Vec::new();
    for source in sources(bpf_dir)? {
        let object = source.trim_end_matches(".c").to_owned() + ".o";
        let out = dir.join(&object);
        compile(bpf_dir, &source, &out)?;
        built.push((object, out));
    }
    Ok(built)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(io_err("read", path))
}

/// Describes the first difference between two byte strings.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(at) => format!("first difference at byte {at}"),
        None => format!("sizes {} vs {} bytes", a.len(), b.len()),
    }
}

/// Checks that the pinned compiler answers and is the expected major.
fn check_compiler() -> Result<String> {
    let version = sh::stdout(Command::new(CLANG).arg("--version"))?;
    let first = version.lines().next().unwrap_or_default().to_owned();
    if !first.contains("clang version 19.") {
        return Err(Error::Parse {
            program: CLANG.into(),
            detail: format!("expected clang 19, got `{first}`"),
        });
    }
    Ok(first)
}

/// Runs the task.
pub fn run(args: &EbpfArgs) -> Result<()> {
    apt::ensure(PACKAGES)?;
    let compiler = check_compiler()?;
    let crate_dir = crate_dir();
    let bpf_dir = crate_dir.join("bpf");
    if args.vmlinux {
        let header = sh::stdout(Command::new("bpftool").args([
            "btf",
            "dump",
            "file",
            "/sys/kernel/btf/vmlinux",
            "format",
            "c",
        ]))?;
        let path = bpf_dir.join("vmlinux.h");
        fs::write(&path, header).map_err(io_err("write", &path))?;
        eprintln!("xtask: regenerated {}", path.display());
    }
    let scratch = target_dir().join("xtask-ebpf");
    let first = build_into(&bpf_dir, &scratch.join("a"))?;
    let second = build_into(&bpf_dir, &scratch.join("b"))?;
    for ((name, a), (_, b)) in first.iter().zip(&second) {
        if read(a)? != read(b)? {
            return Err(Error::NotDeterministic {
                source_file: name.replace(".o", ".c"),
            });
        }
    }
    let mut stale = Vec::new();
    for (name, fresh) in &first {
        let committed = crate_dir.join(name);
        let fresh_bytes = read(fresh)?;
        if args.check {
            let old = fs::read(&committed).unwrap_or_default();
            if old != fresh_bytes {
                stale.push(Error::StaleObject {
                    committed: committed.clone(),
                    detail: first_difference(&old, &fresh_bytes),
                });
            } else {
                eprintln!("xtask: {} is current", committed.display());
            }
        } else {
            fs::write(&committed, &fresh_bytes).map_err(io_err("write", &committed))?;
            eprintln!(
                "xtask: built {} ({} bytes, {compiler})",
                committed.display(),
                fresh_bytes.len()
            );
        }
    }
    match stale.into_iter().next() {
        Some(err) => Err(err),
        None => Ok(()),
    }
}
