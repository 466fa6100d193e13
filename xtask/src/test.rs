//! `cargo xtask test`: every test bee has, on this host and in the kernel matrix.
//!
//! 1. `cargo test --workspace --locked --features bee/landlock-tests,bee/mcp`: everything that
//!    needs no special kernel, with the Landlock engine's tests (`landlock_engine`,
//!    `landlock_cli`), which confine real commands on this host (root and Landlock, no VM),
//!    Claude Code from npm under its profile and that engine, and with `bee mcp` as its tools
//!    (`landlock_agents`, which needs `npm` and the registry), the Codex CLI, opencode and
//!    Gemini CLI from npm and Aider from PyPI under their profiles (`landlock_codex`,
//!    `landlock_opencode`, `landlock_gemini`, `landlock_aider`), `bee mcp` against the official
//!    MCP Python SDK and the MCP Inspector's CLI under that engine (`mcp_sdk`, `mcp_inspector`), and bee's MCP client with the filesystem
//!    server from npm and misbehaving servers (`landlock_mcp_client`);
//! 2. the kernel tests of `bee-userspace` (`kernel_*`: the programs, hook by hook) in a VM per
//!    kernel of the matrix;
//! 3. the command-line tests of `bee` (`kernel_*`: `kernel_cli` — `bee check`, `bee exec`, an
//!    enforced `bee run` episode — `kernel_agents` — subagents each in its own scope, a
//!    per-tool scope, Ctrl-C teardown — `kernel_caps` — bee with exactly its minimal
//!    capability set, and with each capability missing — `kernel_learn` — learn mode, a build
//!    learned then enforced — `kernel_review` — the review example's episode — and
//!    `kernel_mcp` — the real filesystem and memory MCP servers under bee's client — and
//!    `kernel_codex` — the Codex CLI under its profile as written, and with `bee mcp` as its
//!    tools — and `kernel_claude`, `kernel_opencode`, `kernel_gemini` and `kernel_aider` —
//!    Claude Code, opencode, Gemini CLI and Aider in learn mode, held to their profiles — and
//!    `kernel_scan` — the `scan` tool running the real Semgrep CLI, and forgeries of the
//!    findings ledger) on the kernels of `--cli-kernel` (every full-suite kernel by default;
//!    the eight of [`ONE_KERNEL`] on one of them each), one more boot each. Every guest has
//!    the `bee` executable, `node` and `bash`; the one where a placed test runs also has what
//!    it runs: the MCP servers, the native builds of Codex, Claude Code and opencode, Gemini
//!    CLI's package (installed from npm here first), Semgrep and Aider (from PyPI, each in a
//!    virtual environment of Debian's CPython, copied in with it). Each
//!    boot starts one `bee serve` that the binaries not testing bee's own process ask
//!    (`crate::served`), and two guests run side by side (`--lanes`). They are built with
//!    [`BEE_FEATURES`], so the review tools and the MCP client are in that `bee`.
//!
//! A step that cannot run fails the task: a kernel test that did not run is never a pass.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::demo::cargo;
use crate::error::{Error, Result};
use crate::kernels::Tests;
use crate::sh;
use crate::vm::{self, AccelChoice, KernelChoice, TestArgs, VmOpts};

/// The features of the command-line kernel tests: `kernel-tests`, the MCP client
/// (`kernel_mcp`), the review tools with the grammars `.ci/run` tests them with (one set,
/// so cargo builds their crates once), and `semgrep-tests` (`kernel_scan`).
pub const BEE_FEATURES: &str = "kernel-tests,mcp,sec,astgrep-rust,astgrep-python,semgrep-tests";

/// The features of step 1: the Landlock engine's native tests, and `bee mcp` (whose test
/// runs under that engine), in one build.
pub const WORKSPACE_FEATURES: &str = "--features bee/landlock-tests,bee/mcp";

/// Debian packages step 1 needs on this host: the conformance suite's static probe is built
/// with `cc -static` and its outside processes are `/bin/busybox` applets
/// (`landlock_conformance`); Aider is installed into a virtual environment of Debian's
/// `python3` (`landlock_aider`), which needs its venv module. A fresh machine may have none.
const NATIVE_PACKAGES: &[&str] = &["busybox-static", "gcc", "libc6-dev", "python3-venv"];

/// Arguments of `cargo xtask test`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kernel(s) of the matrix to run the kernel tests on: a name, several separated by
    /// commas, or `all`. The default is CI's set (`docs/kernel-testing.md`, "What CI runs"):
    /// every kernel but `6.12-full`, which shares 6.12's code and runs the stress test alone
    /// in CI.
    #[arg(
        long,
        default_values = ["5.10", "6.1", "6.12", "6.12-rt", "7.x", "7.x-landlock"],
        value_delimiter = ',',
        value_parser = vm::kernel_parser()
    )]
    pub kernel: Vec<KernelChoice>,
    /// Accelerator for the VMs.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelChoice,
    /// Skip `cargo test --workspace` (run only the kernel matrix).
    #[arg(long)]
    pub kernel_only: bool,
    /// Kernel(s) to run the command-line tests of `bee` on (step 3), among those of
    /// `--kernel` that run the full suite, or `all` (the default, and CI's).
    #[arg(
        long,
        default_value = "all",
        value_delimiter = ',',
        value_parser = vm::kernel_parser()
    )]
    pub cli_kernel: Vec<KernelChoice>,
    /// Guests booted at once in steps 2 and 3, each on one host thread: a guest that waits
    /// leaves its core to the other (`docs/kernel-testing.md`, "What CI runs").
    #[arg(long, default_value_t = 2)]
    pub lanes: usize,
}

/// Runs the three steps in order, stopping at the first failure.
pub fn run(args: &Args) -> Result<()> {
    if !args.kernel_only {
        crate::apt::ensure(NATIVE_PACKAGES)?;
        eprintln!("xtask: cargo test --workspace --locked {WORKSPACE_FEATURES}");
        let status = Command::new(cargo())
            .args(["test", "--workspace", "--locked"])
            .args(WORKSPACE_FEATURES.split(' '))
            .current_dir(vm::repo_root())
            .status()
            .map_err(|e| Error::Spawn {
                program: "cargo test".to_owned(),
                source: e,
            })?;
        if !status.success() {
            return Err(Error::Command {
                command: format!("cargo test --workspace --locked {WORKSPACE_FEATURES}"),
                status: status.to_string(),
                detail: String::new(),
            });
        }
    }
    let opts = |kernel: Vec<KernelChoice>, bin: Vec<PathBuf>, lanes: usize| VmOpts {
        kernel,
        with: Vec::new(),
        with_on: Vec::new(),
        bin_on: Vec::new(),
        bin,
        // One VM runs a whole step's binaries for its kernel: under TCG on two cores shared
        // with other builds the bee step on 7.x took over 600 s (kernel_caps alone 554 s).
        timeout: 1800,
        accel: args.accel,
        // The initramfs (every kernel test binary, about 310 MB) is unpacked into the guest's
        // root tmpfs, which holds at most half the memory, and tests copy binaries into it:
        // with 1 GiB a 6.12 guest ran out of space ("No space left on device").
        memory: 2048,
        append: String::new(),
        lanes,
    };
    let started = Instant::now();
    eprintln!("xtask: kernel tests of bee-userspace in the VM matrix");
    // Fail-closed kernels run their smoke test once, in this step.
    vm::run_tests(&TestArgs {
        opts: opts(args.kernel.clone(), Vec::new(), args.lanes),
        package: "bee-userspace".to_owned(),
        test: "kernel_*".to_owned(),
        features: "kernel-tests".to_owned(),
        binary: None,
        same_everywhere: false,
        served: false,
        place: Vec::new(),
        args: Vec::new(),
    })?;
    let cli = vm::selected(&args.cli_kernel);
    let full: Vec<KernelChoice> = vm::selected(&args.kernel)
        .into_iter()
        .filter(|e| e.tests == Tests::Full)
        .filter(|e| cli.contains(e))
        .map(KernelChoice::One)
        .collect();
    if !full.is_empty() {
        eprintln!("xtask: command-line tests of bee in the VM matrix");
        let place = places(&vm::selected(&full));
        let mut bee_opts = opts(
            full,
            vec![
                vm::target_dir().join("debug").join("bee"),
                NODE.into(),
                BASH.into(),
            ],
            args.lanes,
        );
        // The system's trust anchors, in every guest (a guest has no `/etc/ssl` of its own):
        // `semgrep-core` fails without them, and the agents read them as they start; nothing
        // in the tests reaches the network.
        bee_opts.with.push(CA_CERTIFICATES.into());
        // What a test placed on one kernel runs goes into that kernel's guest only: trees
        // copied whole, and executables with their libraries.
        let semgrep = semgrep()?;
        let aider = aider()?;
        for (test, trees, executables) in [
            ("kernel_mcp", mcp_servers()?, Vec::new()),
            ("kernel_gemini", vec![gemini()?], Vec::new()),
            ("kernel_codex", Vec::new(), vec![codex()?]),
            ("kernel_claude", Vec::new(), vec![claude_code()?]),
            ("kernel_opencode", Vec::new(), vec![opencode()?]),
            ("kernel_scan", semgrep.trees, semgrep.executables),
            ("kernel_aider", aider.trees, aider.executables),
        ] {
            let Some((_, kernel)) = place.iter().find(|(t, _)| t == test) else {
                return Err(Error::Usage(format!("{test} is placed on no kernel")));
            };
            let on = |path: PathBuf| (kernel.clone(), path);
            bee_opts.with_on.extend(trees.into_iter().map(on));
            bee_opts.bin_on.extend(executables.into_iter().map(on));
        }
        // Every guest has the tests, `bee`, `node` and `bash` (about 410 MB); each has what its
        // placed tests run besides: the MCP servers about 70 MB, Codex about 315 MB, Claude
        // Code about 400 MB, opencode about 185 MB, Gemini CLI about 100 MB, Semgrep with its
        // Python about 440 MB, Aider with the same Python about 720 MB. The guest's root
        // tmpfs, half its memory, holds them beside the tests' files, and the initramfs itself
        // is in memory until it is unpacked: with all of them in every guest (2.16 GB, before
        // Gemini CLI and Aider) the 7.x guest's unpacking failed with 6 GiB ("No space left on
        // device"). QEMU also loads the initramfs below 4 GiB (3 GiB of the guest's memory
        // there), which caps it.
        bee_opts.memory = 8192;
        vm::run_tests(&TestArgs {
            opts: bee_opts,
            package: "bee".to_owned(),
            test: "kernel_*".to_owned(),
            features: BEE_FEATURES.to_owned(),
            binary: None,
            same_everywhere: false,
            served: true,
            place,
            args: Vec::new(),
        })?;
    }
    eprintln!(
        "xtask: kernel matrix ({}) done in {:.0} s",
        vm::selected(&args.kernel)
            .iter()
            .map(|e| e.name)
            .collect::<Vec<_>>()
            .join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Command-line test targets that run on one kernel of the matrix, not on each: their
/// subject is software bee confines (agent CLIs, MCP servers, Semgrep) or bee's harness, not
/// the kernel. What the engine does on each kernel, they reach through the paths the
/// targets run on every kernel test already (`kernel_programs` hook by hook, `kernel_cli`,
/// `kernel_caps`, `kernel_learn`, `kernel_allow`, `kernel_serve`, `kernel_agents`,
/// `kernel_conformance`), and each also runs natively under the Landlock engine. Spread so
/// that the two lanes end close together (`docs/kernel-testing.md`, "What CI runs"); a
/// kernel not selected gives its targets to the first selected one.
const ONE_KERNEL: &[(&str, &str)] = &[
    ("kernel_opencode", "6.1"),
    ("kernel_gemini", "6.1"),
    ("kernel_codex", "6.12"),
    ("kernel_aider", "6.12"),
    ("kernel_claude", "6.12-rt"),
    ("kernel_scan", "6.12-rt"),
    ("kernel_mcp", "7.x"),
    ("kernel_review", "7.x"),
];

/// [`ONE_KERNEL`]'s placements among `kernels` (the command-line step's, in matrix order),
/// as `--place` takes them.
fn places(kernels: &[&crate::kernels::Entry]) -> Vec<(String, String)> {
    let Some(first) = kernels.first() else {
        return Vec::new();
    };
    ONE_KERNEL
        .iter()
        .map(|&(test, kernel)| {
            let kernel = match kernels.iter().find(|e| e.name == kernel) {
                Some(e) => e.name,
                None => first.name,
            };
            (test.to_owned(), kernel.to_owned())
        })
        .collect()
}

/// The JavaScript runtime `kernel_mcp`'s server runs on, copied into the guests.
const NODE: &str = "/usr/bin/node";

/// The shell `kernel_codex` has Codex run its commands with, copied into the guests.
const BASH: &str = "/usr/bin/bash";

/// The release a pin file of the repository names (`tests/…/NAME.version`, one line), which
/// the tests read too.
fn pinned(rel: &str) -> Result<String> {
    let pin = vm::repo_root().join(rel);
    let version = std::fs::read_to_string(&pin).map_err(crate::error::io_err("read", &pin))?;
    Ok(version.trim().to_owned())
}

/// Installs `package@VERSION` from npm under `dir` (`npm install --prefix DIR`, with `args`
/// before it) unless `file`, which the install makes, is there already.
fn npm_install(dir: &Path, args: &[&str], spec: &str, file: &Path) -> Result<()> {
    if file.is_file() {
        return Ok(());
    }
    eprintln!("xtask: npm install {spec}");
    let mut npm = Command::new("npm");
    npm.args(["install", "--no-audit", "--no-fund"])
        .args(args)
        .arg("--prefix")
        .arg(dir)
        .arg(spec);
    sh::run(&mut npm)?;
    installed(&npm, file)
}

/// Fails unless `file` is there after `install`, which exited 0 and should have made it.
fn installed(install: &Command, file: &Path) -> Result<()> {
    if file.is_file() {
        return Ok(());
    }
    Err(Error::Command {
        command: sh::describe(install),
        status: "exit status: 0".to_owned(),
        detail: format!(": {} is not there after it", file.display()),
    })
}

/// Installs the Codex CLI `kernel_codex` runs (`@openai/codex` at the version of
/// `tests/agents/codex.version`) where the test looks for it, `target/tmp/agents/codex-VERSION`
/// (as `npm install --global` lays it out), unless it is there; returns its native executable,
/// which is all of it the test runs (about 315 MB).
fn codex() -> Result<PathBuf> {
    let version = pinned("tests/agents/codex.version")?;
    let dir = vm::target_dir().join(format!("tmp/agents/codex-{version}"));
    let native = dir.join(
        "lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/\
         x86_64-unknown-linux-musl/bin/codex",
    );
    npm_install(
        &dir,
        &["--global"],
        &format!("@openai/codex@{version}"),
        &native,
    )?;
    Ok(native)
}

/// Installs Claude Code for `kernel_claude` (`@anthropic-ai/claude-code` at the version of
/// `tests/agents/claude-code.version`) where the test looks for it,
/// `target/tmp/agents/claude-code-VERSION` (as `landlock_agents`, in step 1, installs it),
/// unless it is there; returns its native executable, which is all of it the test runs
/// (about 400 MB).
fn claude_code() -> Result<PathBuf> {
    let version = pinned("tests/agents/claude-code.version")?;
    let dir = vm::target_dir().join(format!("tmp/agents/claude-code-{version}"));
    let exe = dir.join("node_modules/@anthropic-ai/claude-code/bin/claude.exe");
    npm_install(
        &dir,
        &[],
        &format!("@anthropic-ai/claude-code@{version}"),
        &exe,
    )?;
    Ok(exe)
}

/// Installs Gemini CLI for `kernel_gemini` (`@google/gemini-cli` at the version of
/// `tests/agents/gemini.version`) where the test looks for it, `target/tmp/agents/gemini-VERSION`
/// (as `npm install --global` lays it out, as `landlock_gemini`, in step 1, installs it),
/// unless it is there; returns the package's directory, which the guests get a copy of (about
/// 100 MB: a bundle of scripts the guest's `node` runs).
fn gemini() -> Result<PathBuf> {
    let version = pinned("tests/agents/gemini.version")?;
    let dir = vm::target_dir().join(format!("tmp/agents/gemini-{version}"));
    let package = dir.join("lib/node_modules/@google/gemini-cli");
    npm_install(
        &dir,
        &["--global"],
        &format!("@google/gemini-cli@{version}"),
        &package.join("bundle/gemini.js"),
    )?;
    Ok(package)
}

/// Installs opencode for `kernel_opencode` (`opencode-ai` at the version of
/// `tests/agents/opencode.version`) where the test looks for it,
/// `target/tmp/agents/opencode-VERSION` (as `npm install --global` lays it out, as
/// `landlock_opencode`, in step 1, installs it), unless it is there; returns its executable,
/// the platform's native build that the package's install script links to `bin/opencode.exe`
/// (about 185 MB), which is all of it the test runs. Where npm ran no install scripts, the
/// script is run here (it links the build, offline), as the tests do.
fn opencode() -> Result<PathBuf> {
    let version = pinned("tests/agents/opencode.version")?;
    let dir = vm::target_dir().join(format!("tmp/agents/opencode-{version}"));
    let package = dir.join("lib/node_modules/opencode-ai");
    let exe = package.join("bin/opencode.exe");
    let native = package.join("node_modules/opencode-linux-x64/bin/opencode");
    npm_install(
        &dir,
        &["--global"],
        &format!("opencode-ai@{version}"),
        &native,
    )?;
    let size = |f: &Path| std::fs::metadata(f).map(|m| m.len()).unwrap_or_default();
    if size(&exe) != size(&native) {
        let mut link = Command::new("node");
        link.arg("postinstall.mjs").current_dir(&package);
        sh::run(&mut link)?;
        if size(&exe) != size(&native) {
            return Err(Error::Command {
                command: sh::describe(&link),
                status: "exit status: 0".to_owned(),
                detail: format!(": {} is not {} after it", exe.display(), native.display()),
            });
        }
    }
    Ok(exe)
}

/// What the guests need of a virtual environment made with Debian's CPython
/// ([`guest_python`]).
struct GuestPython {
    /// Trees copied whole: the environment, and with it the interpreter's standard library
    /// and the links to the interpreter.
    trees: Vec<PathBuf>,
    /// The interpreter and every ELF file of the trees (extension modules and the libraries
    /// packages ship), each copied with the libraries `ldd` lists for it.
    executables: Vec<PathBuf>,
}

/// Makes the virtual environment `venv` with Debian's CPython (`/usr/bin/python3`) and
/// installs `spec` (`package==version`) from PyPI into it, unless `file`, which the install
/// makes, is there (the tests' `support::pip` makes the same).
fn pip_install(venv: &Path, spec: &str, file: &Path) -> Result<()> {
    if file.is_file() {
        return Ok(());
    }
    eprintln!("xtask: pip install {spec}");
    sh::run(
        Command::new("/usr/bin/python3")
            .args(["-m", "venv", "--clear"])
            .arg(venv),
    )?;
    let mut pip = Command::new(venv.join("bin/python"));
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-input",
        "--disable-pip-version-check",
        spec,
    ]);
    sh::run(&mut pip)?;
    installed(&pip, file)
}

/// What the guests need to run `venv`: the environment, the interpreter it was made with and
/// that interpreter's standard library. The venv's interpreter is a link to the one it was
/// made with (`/usr/bin/python3`), itself a link to Debian's `python3.X`: each link outside
/// the venv is copied as a link.
fn guest_python(venv: PathBuf) -> Result<GuestPython> {
    let mut trees = Vec::new();
    let mut link = venv.join("bin/python3");
    while let Ok(target) = std::fs::read_link(&link) {
        link = link.parent().unwrap_or(Path::new("/")).join(target);
        if link.is_symlink() {
            trees.push(link.clone());
        }
    }
    let python = std::fs::canonicalize(&link).map_err(crate::error::io_err("resolve", &link))?;
    let name = python.file_name().unwrap_or_default();
    let stdlib = Path::new("/usr/lib").join(name);
    let mut executables = vec![python.clone()];
    for tree in [&venv, &stdlib] {
        elf_files(tree, &mut executables)?;
    }
    trees.extend([venv, stdlib]);
    Ok(GuestPython { trees, executables })
}

/// Installs Semgrep (`semgrep` from PyPI at the release `tests/scanners/semgrep.version`
/// pins) where `kernel_scan` looks for it, a virtual environment at
/// `target/tmp/semgrep-VERSION`, unless it is there; returns what the guests need of it.
fn semgrep() -> Result<GuestPython> {
    let version = pinned("tests/scanners/semgrep.version")?;
    let venv = vm::target_dir().join(format!("tmp/semgrep-{version}"));
    pip_install(
        &venv,
        &format!("semgrep=={version}"),
        &venv.join("bin/semgrep"),
    )?;
    guest_python(venv)
}

/// Installs Aider (`aider-chat` from PyPI at the release `tests/agents/aider.version` pins)
/// where `kernel_aider` looks for it, a virtual environment at
/// `target/tmp/agents/aider-VERSION` (as `landlock_aider`, in step 1, makes it), unless it is
/// there; returns what the guest that runs it needs of it (about 720 MB with the interpreter
/// and its standard library).
fn aider() -> Result<GuestPython> {
    let version = pinned("tests/agents/aider.version")?;
    let venv = vm::target_dir().join(format!("tmp/agents/aider-{version}"));
    pip_install(
        &venv,
        &format!("aider-chat=={version}"),
        &venv.join("bin/aider"),
    )?;
    guest_python(venv)
}

/// Debian's bundle of trust anchors (`ca-certificates`).
const CA_CERTIFICATES: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Appends every regular file below `dir` that starts with the ELF magic to `out`.
fn elf_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(crate::error::io_err("read directory", dir))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            elf_files(&path, out)?;
        } else if kind.is_file() {
            let mut magic = [0u8; 4];
            let elf = std::fs::File::open(&path)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
                .is_ok_and(|()| magic == *b"\x7fELF");
            if elf {
                out.push(path);
            }
        }
    }
    Ok(())
}

/// The real MCP servers `kernel_mcp` runs, `@modelcontextprotocol/server-NAME` at the
/// release `tests/mcp/server-NAME.version` pins.
const MCP_SERVERS: [&str; 2] = ["filesystem", "memory"];

/// Installs the MCP servers `kernel_mcp` runs ([`MCP_SERVERS`]) where the tests look for
/// them, the tests' cache under the target directory, unless they are there
/// (`landlock_mcp_client`, in step 1, installs the same); returns their directories, which
/// the guests get a copy of.
fn mcp_servers() -> Result<Vec<PathBuf>> {
    MCP_SERVERS
        .iter()
        .map(|name| {
            let version = pinned(&format!("tests/mcp/server-{name}.version"))?;
            let dir = vm::target_dir().join(format!("tmp/mcp-servers/server-{name}-{version}"));
            let entry = dir.join(format!(
                "node_modules/@modelcontextprotocol/server-{name}/dist/index.js"
            ));
            npm_install(
                &dir,
                &[],
                &format!("@modelcontextprotocol/server-{name}@{version}"),
                &entry,
            )?;
            Ok(dir)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{self, Entry};

    fn entries(names: &[&str]) -> Vec<&'static Entry> {
        names
            .iter()
            .map(|n| kernels::entry(n).expect("a kernel of the matrix"))
            .collect()
    }

    #[test]
    fn each_one_kernel_target_goes_to_its_kernel_or_the_first_selected() {
        let all = places(&entries(&["6.1", "6.12", "6.12-rt", "7.x"]));
        assert_eq!(all.len(), ONE_KERNEL.len());
        for ((test, kernel), (want_test, want_kernel)) in all.iter().zip(ONE_KERNEL) {
            assert_eq!((test.as_str(), kernel.as_str()), (*want_test, *want_kernel));
        }
        let one = places(&entries(&["7.x"]));
        assert!(one.iter().all(|(_, k)| k == "7.x"), "{one:?}");
        assert!(places(&[]).is_empty());
    }
}
