//! `cargo xtask vm`: run a command, or a Rust test binary, inside QEMU
//! guests booting Debian's kernels, and report per kernel.
//!
//! Why one file of this length: one command that builds a guest, boots it and reads its report;
//! the tests are the last 80 lines.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::apt;
use crate::error::{Error, Result, io_err};
use crate::initramfs::{Initramfs, init_script};
use crate::kernels::{self, Apt, Entry, Kernel, MATRIX, Preempt, Tests};
use crate::qemu::{self, Accel, Boot};
use crate::sh;

/// Debian packages the VM runner needs on the host.
const HOST_PACKAGES: &[&str] = &[
    "qemu-system-x86",
    "busybox-static",
    "debian-archive-keyring",
];

/// How long a guest may take to print its ready marker (boot and mounts) before the run fails.
const BOOT_TIMEOUT: Duration = Duration::from_secs(180);

/// Where Debian's `busybox-static` installs the static binary.
const HOST_BUSYBOX: &str = "/bin/busybox";

/// A `--kernel` value: one entry of [`MATRIX`] by name, or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelChoice {
    /// Every kernel of the matrix, oldest first.
    All,
    /// One entry.
    One(&'static Entry),
}

impl KernelChoice {
    /// The choice named `name`.
    pub fn named(name: &str) -> Option<Self> {
        if name == "all" {
            Some(KernelChoice::All)
        } else {
            kernels::entry(name).map(KernelChoice::One)
        }
    }

    /// The `--kernel` parser: one possible value per entry, and `all`.
    pub fn parser() -> impl clap::builder::TypedValueParser<Value = KernelChoice> {
        use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
        let values = MATRIX
            .iter()
            .map(|e| PossibleValue::new(e.name).help(e.about))
            .chain([PossibleValue::new("all").help("every kernel of the matrix")]);
        PossibleValuesParser::new(values)
            .map(|name: String| KernelChoice::named(&name).unwrap_or(KernelChoice::All))
    }
}

/// The `--kernel` parser ([`KernelChoice::parser`]).
pub fn kernel_parser() -> impl clap::builder::TypedValueParser<Value = KernelChoice> {
    KernelChoice::parser()
}

/// The entries `choices` select, in matrix order, each once.
pub fn selected(choices: &[KernelChoice]) -> Vec<&'static Entry> {
    MATRIX
        .iter()
        .filter(|e| {
            choices
                .iter()
                .any(|c| matches!(c, KernelChoice::All) || *c == KernelChoice::One(e))
        })
        .collect()
}

/// How to pick the accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelChoice {
    /// KVM when a short test boot with it succeeds, else TCG.
    Auto,
    /// Always KVM.
    Kvm,
    /// Always TCG (software emulation).
    Tcg,
}

/// Options shared by both VM modes.
#[derive(Debug, Clone, clap::Args)]
pub struct VmOpts {
    /// Kernel(s) of the matrix to boot: a name, several separated by commas, or `all`.
    #[arg(long, default_value = "all", value_delimiter = ',', value_parser = kernel_parser())]
    pub kernel: Vec<KernelChoice>,
    /// Host directory copied into the guest at the same absolute path
    /// (repeatable); a symbolic link is copied as one (its directory's path
    /// resolved, not the link itself).
    #[arg(long = "with", value_name = "DIR")]
    pub with: Vec<PathBuf>,
    /// Host executable copied into the guest at the same absolute path,
    /// with the shared libraries `ldd` lists for it (repeatable). Host paths
    /// named in the command are added this way without asking.
    #[arg(long = "bin", value_name = "PATH")]
    pub bin: Vec<PathBuf>,
    /// Host directory copied, as `--with` does, into the boot of one kernel only
    /// (`KERNEL=DIR`, repeatable): what only a target placed there (`--place`) runs.
    #[arg(long = "with-on", value_name = "KERNEL=DIR", value_parser = parse_on)]
    pub with_on: Vec<(String, PathBuf)>,
    /// Host executable copied, as `--bin` does, into the boot of one kernel only
    /// (`KERNEL=PATH`, repeatable).
    #[arg(long = "bin-on", value_name = "KERNEL=PATH", value_parser = parse_on)]
    pub bin_on: Vec<(String, PathBuf)>,
    /// Limit for one VM, boot included, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Accelerator.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelChoice,
    /// Guest memory in MiB (the initramfs is unpacked into the guest's root tmpfs, which
    /// holds at most half of it).
    #[arg(long, default_value_t = 2048)]
    pub memory: u32,
    /// Extra kernel arguments for every boot, after the entry's own (e.g. to try
    /// `preempt=full` on another kernel).
    #[arg(long, value_name = "ARGS", default_value = "")]
    pub append: String,
    /// Guests booted at once, each running one kernel's command. A kernel whose command
    /// waits more than it computes (the PREEMPT_RT guest's program teardown waits on RCU
    /// grace periods) leaves the host's cores to another guest; the PREEMPT_RT kernels go
    /// first, their runs being the longest.
    #[arg(long, default_value_t = 1)]
    pub lanes: usize,
}

/// `cargo xtask vm test`: build an integration-test binary and run it in
/// every selected kernel.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// VM options.
    #[command(flatten)]
    pub opts: VmOpts,
    /// Package holding the test target.
    #[arg(short = 'p', long, default_value = "bee-userspace")]
    pub package: String,
    /// Integration-test targets to build and run: a name (`--test NAME`), or
    /// a prefix ending in `*` for every test target starting with it.
    #[arg(long, default_value = "kernel_*")]
    pub test: String,
    /// Cargo features to enable for the build.
    #[arg(long, default_value = "kernel-tests")]
    pub features: String,
    /// Run this already-built test binary instead of building one.
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Run the selected targets on the fail-closed kernels too (5.10), instead of their
    /// fail-closed smoke test (`-p bee --test unsupported_kernel`): to see what fails there.
    #[arg(long)]
    pub same_everywhere: bool,
    /// Start one `bee serve` in each boot and name it (`$BEE_SOCKET`) to every binary but
    /// those that test enforcement in bee's own process (`kernel_caps`, `kernel_learn`,
    /// `kernel_serve`): the engine is loaded once per boot instead of once per command.
    #[arg(long)]
    pub served: bool,
    /// Run test target TEST in the boot of KERNEL only (`TEST=KERNEL`, repeatable); every
    /// other target runs in every boot. KERNEL must be one of the kernels that run the
    /// targets, and TEST one of the targets.
    #[arg(long = "place", value_name = "TEST=KERNEL", value_parser = parse_place)]
    pub place: Vec<(String, String)>,
    /// Extra libtest arguments (a filter, `--exact`, …).
    #[arg(last = true)]
    pub args: Vec<String>,
}

/// Parses `--with-on KERNEL=DIR` and `--bin-on KERNEL=PATH`.
fn parse_on(s: &str) -> std::result::Result<(String, PathBuf), String> {
    let (kernel, path) = pair(s, "KERNEL=PATH")?;
    Ok((kernel, PathBuf::from(path)))
}

/// Parses `--place TEST=KERNEL`.
fn parse_place(s: &str) -> std::result::Result<(String, String), String> {
    pair(s, "TEST=KERNEL")
}

/// `s` split at its first `=`, both sides non-empty, or an error naming the `shape` expected.
fn pair(s: &str, shape: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_owned(), b.to_owned())),
        _ => Err(format!("`{s}` is not {shape}")),
    }
}

/// Fails unless every kernel `--with-on` and `--bin-on` name is one `opts` boots: a file meant
/// for a kernel not booted would be copied nowhere, and the test needing it would fail for a
/// reason the command line hid.
fn check_on(opts: &VmOpts) -> Result<()> {
    let booted = selected(&opts.kernel);
    for (kernel, path) in opts.with_on.iter().chain(&opts.bin_on) {
        if !booted.iter().any(|e| e.name == kernel) {
            return Err(Error::Usage(format!(
                "{kernel}={}: {kernel} is not a kernel this run boots",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Repository root (the workspace holding xtask/).
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_owned()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` or `<repo>/target`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

fn vm_dir() -> PathBuf {
    target_dir().join("vm")
}

/// A marker suffix unlikely to appear in guest output by accident.
fn nonce() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{:x}{:08x}", std::process::id(), nanos)
}

/// Everything prepared once for a set of boots.
#[derive(Debug)]
struct Prepared {
    kernels: Vec<Kernel>,
    accel: Accel,
}

fn prepare(opts: &VmOpts) -> Result<Prepared> {
    apt::ensure(HOST_PACKAGES)?;
    let cache = vm_dir().join("kernels");
    fs::create_dir_all(&cache).map_err(io_err("create directory", &cache))?;
    let mut apt = Apt::new(vm_dir().join("apt"));
    let kernels = selected(&opts.kernel)
        .into_iter()
        .map(|e| kernels::fetch(e, &mut apt, &cache))
        .collect::<Result<Vec<_>>>()?;
    let accel = match opts.accel {
        AccelChoice::Kvm => Accel::Kvm,
        AccelChoice::Tcg => Accel::Tcg,
        AccelChoice::Auto => match kernels.first() {
            Some(k) => probe_kvm(k)?,
            None => Accel::Tcg,
        },
    };
    Ok(Prepared { kernels, accel })
}

/// Decides KVM vs TCG: KVM only if `/dev/kvm` opens and a guest boots with
/// it to `/init`. The verdict is cached per host kernel release.
fn probe_kvm(kernel: &Kernel) -> Result<Accel> {
    if fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        return Ok(Accel::Tcg);
    }
    let host = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cache = vm_dir().join("kvm-probe");
    if let Ok(saved) = fs::read_to_string(&cache)
        && let Some((release, verdict)) = saved.trim().rsplit_once(' ')
        && release == host.trim()
    {
        return Ok(if verdict == "kvm" {
            Accel::Kvm
        } else {
            Accel::Tcg
        });
    }
    eprintln!("xtask: probing KVM with a test boot");
    let dir = vm_dir().join("kvm-probe.d");
    fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
    let ready = format!("BEE-VM-READY-{}", nonce());
    let exit = format!("BEE-VM-EXIT-{}:", nonce());
    let mut fs_ = Initramfs::new();
    fs_.add_busybox(Path::new(HOST_BUSYBOX))?;
    let script = init_script(&ready, &exit, &[], &["true".to_owned()]);
    fs_.add_data(Path::new("/init"), script.into_bytes(), 0o755);
    let initrd = dir.join("initrd.cpio");
    fs_.write(&initrd)?;
    let works = qemu::boot(&Boot {
        label: "kvm-probe",
        kernel: &kernel.vmlinuz,
        initrd: &initrd,
        accel: Accel::Kvm,
        append: kernel.entry.append,
        timeout: Duration::from_secs(60),
        boot_timeout: Duration::from_secs(60),
        ready_marker: &ready,
        exit_marker: &exit,
        echo: false,
        quiet: None,
        memory_mib: 1024,
        single_thread: false,
    })
    .is_ok_and(|o| o.exit_code == 0);
    let verdict = if works { "kvm" } else { "tcg" };
    eprintln!(
        "xtask: KVM {}",
        if works {
            "works"
        } else {
            "does not work here; using TCG"
        }
    );
    fs::write(&cache, format!("{} {verdict}\n", host.trim())).map_err(io_err("write", &cache))?;
    Ok(if works { Accel::Kvm } else { Accel::Tcg })
}

/// Adds files of a caller's own to an initramfs (after the runner's).
pub type Extra<'a> = &'a (dyn Fn(&mut Initramfs) -> Result<()> + Sync);

/// Builds the initramfs for `command` in `kernel` (whose overlayfs module it holds), as
/// `initrd-ENTRY.cpio`, and returns its path.
fn build_initramfs(
    opts: &VmOpts,
    kernel: &Kernel,
    extra: Option<Extra<'_>>,
    command: &[String],
    env: &[(String, String)],
    ready: &str,
    exit: &str,
) -> Result<PathBuf> {
    let mut fs_ = Initramfs::new();
    fs_.add_busybox(Path::new(HOST_BUSYBOX))?;
    fs_.add_module("overlay", &kernel.overlay);
    if let Some(module) = &kernel.binfmt_misc {
        fs_.add_module("binfmt_misc", module);
    }
    if let Some(extra) = extra {
        extra(&mut fs_)?;
    }
    let only_here = |on: &[(String, PathBuf)]| -> Vec<PathBuf> {
        on.iter()
            .filter(|(k, _)| k == kernel.entry.name)
            .map(|(_, p)| p.clone())
            .collect()
    };
    for dir in opts.with.iter().chain(&only_here(&opts.with_on)) {
        fs_.add_tree(&resolved_parent(dir)?)?;
    }
    for bin in opts.bin.iter().chain(&only_here(&opts.bin_on)) {
        let abs = fs::canonicalize(bin).map_err(io_err("resolve", bin))?;
        fs_.add_executable(&abs)?;
    }
    for arg in command {
        let p = Path::new(arg);
        if p.is_absolute() && p.is_file() {
            fs_.add_executable(p)?;
        }
    }
    fs_.add_data(
        Path::new("/init"),
        init_script(ready, exit, env, command).into_bytes(),
        0o755,
    );
    let dir = vm_dir();
    fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
    let out = dir.join(format!("initrd-{}.cpio", kernel.entry.name));
    fs_.write(&out)?;
    Ok(out)
}

/// `path` absolute, with its directory's symbolic links resolved but not its own last
/// component, so that a link named by `--with` is copied as a link.
fn resolved_parent(path: &Path) -> Result<PathBuf> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        // `/`, or a path ending in `..`: nothing to keep unresolved.
        return fs::canonicalize(path).map_err(io_err("resolve", path));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    Ok(fs::canonicalize(parent)
        .map_err(io_err("resolve", parent))?
        .join(name))
}

/// Rewrites host paths among `command` to absolute ones, so the guest finds
/// the same file where the initramfs puts it.
fn absolutize(command: &[String]) -> Vec<String> {
    command
        .iter()
        .map(|a| {
            let p = Path::new(a);
            if a.contains('/') && !p.is_absolute() && p.exists() {
                fs::canonicalize(p)
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| a.clone())
            } else {
                a.clone()
            }
        })
        .collect()
}

/// The result of running one command in one kernel.
#[derive(Debug)]
pub struct KernelRun {
    /// The kernel booted.
    pub kernel: Kernel,
    /// The boot's outcome, or why the VM did not run the command to the end.
    pub outcome: Result<qemu::Outcome>,
}

fn run_in_kernels(
    opts: &VmOpts,
    command: &[String],
    extra_env: &[(String, String)],
) -> Result<Vec<KernelRun>> {
    run_in_kernels_with(opts, None, None, command, extra_env)
}

/// Runs `command` in each selected kernel, the initramfs completed by
/// `extra`; console lines containing `quiet` are not echoed.
pub fn run_in_kernels_with(
    opts: &VmOpts,
    extra: Option<Extra<'_>>,
    quiet: Option<&str>,
    command: &[String],
    extra_env: &[(String, String)],
) -> Result<Vec<KernelRun>> {
    if command.is_empty() {
        return Err(Error::Usage(
            "no command given: `cargo xtask vm [--kernel K] -- CMD ARGS…`".into(),
        ));
    }
    check_on(opts)?;
    let prepared = prepare(opts)?;
    let command = absolutize(command);
    let one = |kernel: &Kernel| -> Result<KernelRun> {
        run_one(&prepared, kernel, opts, extra, quiet, &command, extra_env)
    };
    let lanes = opts.lanes.clamp(1, prepared.kernels.len().max(1));
    if lanes == 1 {
        return prepared.kernels.iter().map(one).collect();
    }
    let entries: Vec<&Entry> = prepared.kernels.iter().map(|k| k.entry).collect();
    let order = lane_order(&entries);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: std::sync::Mutex<Vec<Option<Result<KernelRun>>>> =
        std::sync::Mutex::new((0..order.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..lanes {
            scope.spawn(|| {
                loop {
                    let at = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(&i) = order.get(at) else { break };
                    let run = one(&prepared.kernels[i]);
                    if let Ok(mut done) = done.lock() {
                        done[i] = Some(run);
                    }
                }
            });
        }
    });
    done.into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|run| run.unwrap_or_else(|| Err(Error::Usage("a lane ended early".into()))))
        .collect()
}

/// The order in which side-by-side lanes take `kernels` (indices into it): the longest runs
/// first, so that the lanes end close together. The PREEMPT_RT kernels lead, then the rest
/// newest first: the matrix lists them oldest first, and under TCG each newer kernel's run
/// has been the longer (docs/kernel-testing.md, "What CI runs").
fn lane_order(kernels: &[&Entry]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..kernels.len()).rev().collect();
    order.sort_by_key(|&i| kernels[i].preempt != Some(Preempt::Rt));
    order
}

/// Boots `kernel` once (twice after the text-patching race) to run `command`.
fn run_one(
    prepared: &Prepared,
    kernel: &Kernel,
    opts: &VmOpts,
    extra: Option<Extra<'_>>,
    quiet: Option<&str>,
    command: &[String],
    extra_env: &[(String, String)],
) -> Result<KernelRun> {
    let ready = format!("BEE-VM-READY-{}", nonce());
    let exit = format!("BEE-VM-EXIT-{}:", nonce());
    let name = kernel.entry.name;
    let mut env = vec![
        ("BEE_VM_KERNEL".to_owned(), kernel.line()),
        ("BEE_VM_ENTRY".to_owned(), name.to_owned()),
    ];
    env.extend(extra_env.iter().cloned());
    let initrd = build_initramfs(opts, kernel, extra, command, &env, &ready, &exit)?;
    let append = [kernel.entry.append, opts.append.as_str()]
        .iter()
        .filter(|a| !a.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!(
        "xtask: booting {name}: {} {} ({:?}{}) with {}",
        kernel.package,
        kernel.version,
        prepared.accel,
        if append.is_empty() {
            String::new()
        } else {
            format!(", `{append}`")
        },
        initrd.display()
    );
    // A VM failure is recorded, not returned at once: the other kernels
    // still run, and the caller reports every one.
    let boot = Boot {
        label: name,
        kernel: &kernel.vmlinuz,
        initrd: &initrd,
        accel: prepared.accel,
        append: &append,
        timeout: Duration::from_secs(opts.timeout),
        boot_timeout: BOOT_TIMEOUT,
        ready_marker: &ready,
        exit_marker: &exit,
        echo: true,
        quiet,
        memory_mib: opts.memory,
        // Guests side by side each take one host thread.
        single_thread: opts.lanes > 1,
    };
    let mut outcome = qemu::boot(&boot);
    if let Err(e) = &outcome
        && e.is_text_patching_race()
    {
        // An emulator fault, not a verdict on bee: the kernel's command is repeated once,
        // and only the repeat's results count — once per run: a second such panic
        // anywhere in the run fails it, and every retry is listed ([`retries`]).
        let earlier = retries()?;
        if earlier.is_empty() {
            note_retry(&format!("kernel {name}: {}", oops_line(&e.to_string())))?;
            eprintln!(
                "xtask: {e}\nxtask: kernel {name}: that panic is the text-patching race of \
                 docs/kernel-testing.md (\"Emulator faults\"); running this kernel's \
                 command once more (the run's one retry)"
            );
            outcome = qemu::boot(&boot);
        } else {
            eprintln!(
                "xtask: kernel {name}: a second text-patching race in this run (the first: \
                 {}); it fails the run",
                earlier.join("; ")
            );
        }
    }
    let outcome = outcome.and_then(|o| check_preempt(kernel, o));
    match &outcome {
        Ok(o) => eprintln!(
            "xtask: kernel {name} ({}, preempt {}): exit {}; boot {:.1} s, command {:.1} s",
            o.release,
            preempt_of(o),
            o.exit_code,
            o.boot_time.as_secs_f64(),
            o.run_time.as_secs_f64()
        ),
        Err(e) => eprintln!("xtask: {e}"),
    }
    Ok(KernelRun {
        kernel: kernel.clone(),
        outcome,
    })
}

/// The variable naming the file where a run's retries after the text-patching race are
/// listed, one line each, shared by every `cargo xtask` a run starts (`.ci/run` sets it and
/// prints the file in its summary). Unset, a process keeps its own list.
pub const RETRIES_VAR: &str = "BEE_VM_RETRIES";

/// This process's retries when [`RETRIES_VAR`] is unset.
static OWN_RETRIES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The retries after the text-patching race so far in this run, one line each.
pub fn retries() -> Result<Vec<String>> {
    retries_in(std::env::var_os(RETRIES_VAR).map(PathBuf::from).as_deref())
}

/// Records one retry ([`retries`]).
fn note_retry(line: &str) -> Result<()> {
    note_retry_in(
        std::env::var_os(RETRIES_VAR).map(PathBuf::from).as_deref(),
        line,
    )
}

/// The retries listed in `file`, or this process's own without one.
fn retries_in(file: Option<&Path>) -> Result<Vec<String>> {
    match file {
        Some(path) => match fs::read_to_string(path) {
            Ok(text) => Ok(text.lines().map(str::to_owned).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(io_err("read", path)(e)),
        },
        None => Ok(OWN_RETRIES.lock().map(|r| r.clone()).unwrap_or_default()),
    }
}

/// Appends `line` to `file`, or to this process's own list without one.
fn note_retry_in(file: Option<&Path>, line: &str) -> Result<()> {
    match file {
        Some(path) => {
            use std::io::Write as _;
            let mut f = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(io_err("open", path))?;
            writeln!(f, "{line}").map_err(io_err("write", path))
        }
        None => {
            if let Ok(mut own) = OWN_RETRIES.lock() {
                own.push(line.to_owned());
            }
            Ok(())
        }
    }
}

/// The console's `Oops:` line in a panic's text (from `Oops:` on), else its first line.
fn oops_line(text: &str) -> &str {
    text.lines()
        .find_map(|l| l.find("Oops:").map(|i| l[i..].trim_end()))
        .or_else(|| text.lines().next())
        .unwrap_or(text)
}

/// The preemption model the guest reported ([`kernels::preempt_model`]).
pub fn preempt_of(o: &qemu::Outcome) -> String {
    kernels::preempt_model(&o.uname_v, &o.dynamic_preempt)
}

/// Fails a boot whose guest does not run the preemption model its entry asks for: a
/// `preempt=full` that the kernel ignored would test nothing new.
fn check_preempt(kernel: &Kernel, o: qemu::Outcome) -> Result<qemu::Outcome> {
    let Some(want) = kernel.entry.preempt else {
        return Ok(o);
    };
    let got = preempt_of(&o);
    if got == want.word() {
        return Ok(o);
    }
    Err(Error::Vm {
        kernel: kernel.entry.name.to_owned(),
        reason: format!(
            "{} {} should run preemption model `{}`{} but reports `{got}` (uname -v `{}`, \
             Dynamic Preempt `{}`)",
            kernel.package,
            kernel.version,
            want.word(),
            if kernel.entry.append.is_empty() {
                String::new()
            } else {
                format!(" with `{}`", kernel.entry.append)
            },
            o.uname_v,
            o.dynamic_preempt
        ),
    })
}

/// `cargo xtask vm -- CMD`: returns the first non-zero guest exit code, or 0.
pub fn run_command(opts: &VmOpts, command: &[String]) -> Result<i32> {
    let runs = run_in_kernels(opts, command, &[])?;
    let mut first_failure = None;
    for run in runs {
        let failure = match run.outcome {
            Ok(o) if o.exit_code == 0 => continue,
            Ok(o) => Error::GuestFailed {
                kernel: run.kernel.entry.name.to_owned(),
                code: o.exit_code,
            },
            Err(e) => e,
        };
        // A VM that could not run the command outranks a guest exit code.
        let replace = matches!(
            (&first_failure, &failure),
            (None, _)
                | (
                    Some(Error::GuestFailed { .. }),
                    Error::Vm { .. } | Error::KernelPanic { .. }
                )
        );
        if replace {
            first_failure = Some(failure);
        }
    }
    match first_failure {
        None => Ok(0),
        Some(e) => Err(e),
    }
}

/// Per-kernel libtest counts.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TestCounts {
    /// Tests reported `ok`.
    pub passed: usize,
    /// Tests reported `FAILED`, by name.
    pub failed: Vec<String>,
    /// Tests reported `ignored`.
    pub ignored: usize,
}

/// Reads libtest's `test NAME ... ok|FAILED|ignored` lines, cross-checked
/// with its `test result:` summary lines: when test output interleaves
/// with the verdicts (`--nocapture`), the per-test lines are incomplete and
/// the summary counts win. Failed names then come from the `failures:` list.
pub fn parse_libtest(lines: &[String]) -> TestCounts {
    let per_test = parse_test_lines(lines);
    let Some((passed, failed, ignored)) = parse_summaries(lines) else {
        return per_test;
    };
    if per_test.passed + per_test.failed.len() + per_test.ignored >= passed + failed + ignored {
        return per_test;
    }
    let mut names = parse_failure_list(lines);
    names.truncate(failed);
    while names.len() < failed {
        names.push("(unnamed: see the console output)".to_owned());
    }
    TestCounts {
        passed,
        failed: names,
        ignored,
    }
}

/// Sums `test result: … N passed; M failed; K ignored; …` lines.
fn parse_summaries(lines: &[String]) -> Option<(usize, usize, usize)> {
    let mut total: Option<(usize, usize, usize)> = None;
    for line in lines {
        let Some(at) = line.find("test result: ") else {
            continue;
        };
        let mut counts = (0, 0, 0);
        for part in line[at..].split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(kind), Some(n)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<usize>() else {
                continue;
            };
            match kind {
                "passed" => counts.0 = n,
                "failed" => counts.1 = n,
                "ignored" => counts.2 = n,
                _ => {}
            }
        }
        let t = total.get_or_insert((0, 0, 0));
        t.0 += counts.0;
        t.1 += counts.1;
        t.2 += counts.2;
    }
    total
}

/// Names listed under libtest's last `failures:` heading (the first such
/// heading, if any, introduces captured output; the last one lists names).
fn parse_failure_list(lines: &[String]) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_list = false;
    for line in lines {
        let t = line.trim();
        if t == "failures:" {
            in_list = true;
            names.clear();
        } else if t.starts_with("test result:") {
            in_list = false;
        } else if in_list && line.starts_with("    ") && !t.is_empty() {
            names.push(t.to_owned());
        }
    }
    names
}

fn parse_test_lines(lines: &[String]) -> TestCounts {
    let mut counts = TestCounts::default();
    for line in lines {
        let Some(rest) = line.trim().strip_prefix("test ") else {
            continue;
        };
        let Some((name, verdict)) = rest.rsplit_once(" ... ") else {
            continue;
        };
        match verdict.trim() {
            "ok" => counts.passed += 1,
            "FAILED" => counts.failed.push(name.to_owned()),
            v if v.starts_with("ignored") => counts.ignored += 1,
            _ => {}
        }
    }
    counts
}

/// Whether test target `name` is selected by `pattern` (a name, or a prefix
/// ending in `*`).
fn selects(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// The names of `package`'s integration-test targets that `pattern` selects ([`selects`]),
/// from `cargo metadata`; an error when it selects none.
fn test_targets(package: &str, pattern: &str) -> Result<Vec<String>> {
    let mut cmd = Command::new(crate::demo::cargo());
    cmd.current_dir(repo_root()).args([
        "metadata",
        "--no-deps",
        "--format-version",
        "1",
        "--locked",
    ]);
    let out = sh::stdout(&mut cmd)?;
    let metadata: serde_json::Value = serde_json::from_str(&out).map_err(|e| Error::Parse {
        program: "cargo metadata".into(),
        detail: e.to_string(),
    })?;
    let names = targets_selected(&metadata, package, pattern);
    if names.is_empty() {
        return Err(Error::Parse {
            program: "cargo metadata".into(),
            detail: format!("package `{package}` has no test target `{pattern}`"),
        });
    }
    Ok(names)
}

/// The test targets of `package` in `cargo metadata`'s output that `pattern` selects, sorted.
fn targets_selected(metadata: &serde_json::Value, package: &str, pattern: &str) -> Vec<String> {
    let mut names: Vec<String> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["name"] == package)
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "test"))
        })
        .filter_map(|t| t["name"].as_str())
        .filter(|name| selects(pattern, name))
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Builds the selected test binaries with cargo and returns `(target, path)`
/// pairs, sorted by target name.
fn build_test_binaries(
    package: &str,
    test: &str,
    features: &str,
) -> Result<Vec<(String, PathBuf)>> {
    let mut cmd = Command::new(crate::demo::cargo());
    cmd.current_dir(repo_root()).args([
        "test",
        "--no-run",
        "--message-format=json-render-diagnostics",
        "--package",
        package,
    ]);
    // Only the selected targets: `--tests` would also build and link every other test
    // binary of the package (bee has about seventy) with these features, for nothing.
    for name in test_targets(package, test)? {
        cmd.args(["--test", &name]);
    }
    if !features.is_empty() {
        cmd.args(["--features", features]);
    }
    eprintln!("xtask: {}", sh::describe(&cmd));
    let out = sh::stdout(&mut cmd)?;
    let mut found = Vec::new();
    for line in out.lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact"
            && msg["profile"]["test"] == true
            && msg["target"]["kind"][0] == "test"
            && let Some(name) = msg["target"]["name"].as_str()
            && selects(test, name)
            && let Some(exe) = msg["executable"].as_str()
        {
            found.push((name.to_owned(), PathBuf::from(exe)));
        }
    }
    found.sort();
    found.dedup();
    if found.is_empty() {
        return Err(Error::Parse {
            program: "cargo test --no-run".into(),
            detail: format!("no test executable for target `{test}`"),
        });
    }
    Ok(found)
}

/// Marker printed in the guest before each test binary runs.
const BINARY_MARKER: &str = "bee-vm-test-binary: ";

/// Splits guest output into the lines of each test binary, by marker.
fn split_by_binary(lines: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in lines {
        if let Some(at) = line.find(BINARY_MARKER) {
            out.push((
                line[at + BINARY_MARKER.len()..].trim().to_owned(),
                Vec::new(),
            ));
        } else if let Some((_, current)) = out.last_mut() {
            current.push(line.clone());
        }
    }
    out
}

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Totals of one or more groups of test runs.
#[derive(Debug, Default)]
struct Tally {
    passed: usize,
    failed: usize,
    problems: Vec<String>,
}

/// Builds `tests/conformance/probe.c` into `<target>/conformance/bee-probe`, static, so that
/// a case's policy needs to grant nothing but the probe to run it.
fn build_conformance_probe() -> Result<PathBuf> {
    let source = repo_root().join("tests/conformance/probe.c");
    let dir = target_dir().join("conformance");
    fs::create_dir_all(&dir).map_err(io_err("create", &dir))?;
    let out = dir.join("bee-probe");
    let output = Command::new("cc")
        .args(["-static", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(&source)
        .output()
        .map_err(|e| Error::Spawn {
            program: "cc".to_owned(),
            source: e,
        })?;
    if !output.status.success() {
        return Err(Error::Command {
            command: format!("cc -static -o {} {}", out.display(), source.display()),
            status: output.status.to_string(),
            detail: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(out)
}

/// `cargo xtask vm test`: runs the test binaries in each selected kernel; fails when a VM
/// could not run them, a test failed, or no test ran. Kernels of the matrix whose
/// [`Tests`] is not `Full` run their smoke test ([`Tests::smoke`], with the `bee`
/// executable) instead, unless `--same-everywhere` is given.
pub fn run_tests(args: &TestArgs) -> Result<()> {
    let entries = selected(&args.opts.kernel);
    let (full, smoke): (Vec<&Entry>, Vec<&Entry>) = entries
        .iter()
        .partition(|e| args.same_everywhere || e.tests == Tests::Full);
    let mut tally = Tally::default();
    if !full.is_empty() {
        let binaries = match &args.binary {
            Some(b) => {
                let path = fs::canonicalize(b).map_err(io_err("resolve", b))?;
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                vec![(name, path)]
            }
            None => build_test_binaries(&args.package, &args.test, &args.features)?,
        };
        let mut opts = args.opts.clone();
        opts.kernel = full.iter().map(|e| KernelChoice::One(e)).collect();
        if args.package == "bee" {
            // The conformance suite's static probe (tests/kernel_conformance.rs).
            let probe = build_conformance_probe()?;
            if !opts.bin.contains(&probe) {
                opts.bin.push(probe);
            }
        }
        check_places(&args.place, &binaries, &full)?;
        let served = args.served.then(|| target_dir().join("debug").join("bee"));
        let group = Group {
            binaries: &binaries,
            libtest_args: &args.args,
            served: served.as_deref(),
            place: &args.place,
        };
        run_group(&opts, &group, &mut tally)?;
    }
    // Kernels that share a smoke test run it together, one boot each.
    let mut groups: Vec<((&str, &str), Vec<&Entry>)> = Vec::new();
    for e in smoke {
        let Some(test) = e.tests.smoke() else {
            continue;
        };
        match groups.iter_mut().find(|(t, _)| *t == test) {
            Some((_, kernels)) => kernels.push(e),
            None => groups.push((test, vec![e])),
        }
    }
    for ((package, test), kernels) in groups {
        let binaries = build_test_binaries(package, test, "kernel-tests")?;
        let mut opts = args.opts.clone();
        opts.kernel = kernels.iter().map(|e| KernelChoice::One(e)).collect();
        let bee = target_dir().join("debug").join("bee");
        if !opts.bin.contains(&bee) {
            opts.bin.push(bee);
        }
        eprintln!(
            "xtask: kernels {}: running {package}'s {test} instead of the kernel tests",
            kernels
                .iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let group = Group {
            binaries: &binaries,
            libtest_args: &[],
            served: None,
            place: &[],
        };
        run_group(&opts, &group, &mut tally)?;
    }
    println!("vm-tests: {} passed, {} failed", tally.passed, tally.failed);
    for retry in retries()? {
        println!("vm-tests: retried after the text-patching race: {retry}");
    }
    if tally.problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Tests {
            summary: tally.problems.join("; "),
        })
    }
}

/// Fails unless every target `place` names is among `binaries` and every kernel it names
/// among `kernels`: a placement that matched nothing would leave its target run nowhere.
fn check_places(
    place: &[(String, String)],
    binaries: &[(String, PathBuf)],
    kernels: &[&Entry],
) -> Result<()> {
    for (test, kernel) in place {
        if !binaries.iter().any(|(name, _)| name == test) {
            return Err(Error::Usage(format!(
                "--place {test}={kernel}: no test target {test} is built"
            )));
        }
        if !kernels.iter().any(|e| e.name == kernel) {
            return Err(Error::Usage(format!(
                "--place {test}={kernel}: {kernel} is not a kernel that runs the targets"
            )));
        }
    }
    Ok(())
}

/// What one boot per kernel runs: `binaries` (test target name, path) one after the other,
/// each with `libtest_args`; with `served` (the `bee` executable), the boot first starts it
/// as a service ([`crate::served`]) and names it to the binaries that ask it; a binary that
/// `place` names (target, kernel) runs in that kernel's boot only.
struct Group<'a> {
    binaries: &'a [(String, PathBuf)],
    libtest_args: &'a [String],
    served: Option<&'a Path>,
    place: &'a [(String, String)],
}

impl Group<'_> {
    /// The guest's shell script. Each binary is announced by a marker so its results can be
    /// told apart, and the exit code is the first failure; the binaries are its arguments.
    fn script(&self) -> String {
        let extra: Vec<String> = self.libtest_args.iter().map(|a| shell_quote(a)).collect();
        let mut script = String::from("rc=0; ");
        if let Some(bee) = self.served {
            script.push_str(&crate::served::start(bee));
        }
        for (i, (name, _)) in self.binaries.iter().enumerate() {
            let env = match self.served {
                Some(_) if crate::served::names_service(name) => "BEE_SOCKET=$served ",
                _ => "",
            };
            let arg = i + 1;
            let run = format!(
                "echo \"{BINARY_MARKER}${{{arg}}}\"; {env}\"${{{arg}}}\" --test-threads=1 {}; \
                 r=$?; echo \"{BINARY_MARKER}end\"; [ $rc -eq 0 ] && rc=$r; ",
                extra.join(" ")
            );
            match self.place.iter().find(|(test, _)| test == name) {
                // `BEE_VM_ENTRY` is the matrix entry's name in every guest ([`run_one`]).
                Some((_, kernel)) => script.push_str(&format!(
                    "if [ \"$BEE_VM_ENTRY\" = {} ]; then {run}fi; ",
                    shell_quote(kernel)
                )),
                None => script.push_str(&run),
            }
        }
        if self.served.is_some() {
            script.push_str(&crate::served::stop());
        }
        script.push_str("exit $rc");
        script
    }
}

/// Runs `group` in one boot per kernel of `opts`, prints one line per binary and per kernel,
/// and adds to `tally`; a binary that ran in no boot is a problem.
fn run_group(opts: &VmOpts, group: &Group<'_>, tally: &mut Tally) -> Result<()> {
    let binaries = group.binaries;
    let script = group.script();
    let mut command = vec![
        "/bin/busybox".to_owned(),
        "sh".to_owned(),
        "-c".to_owned(),
        script,
        "sh".to_owned(),
    ];
    command.extend(
        binaries
            .iter()
            .map(|(_, p)| p.to_string_lossy().into_owned()),
    );
    let names: std::collections::BTreeMap<String, String> = binaries
        .iter()
        .map(|(n, p)| (p.to_string_lossy().into_owned(), n.clone()))
        .collect();
    let env = [("RUST_BACKTRACE".to_owned(), "1".to_owned())];
    let runs = run_in_kernels(opts, &command, &env)?;
    eprintln!();
    let mut ran = std::collections::BTreeSet::new();
    for run in &runs {
        let name = run.kernel.entry.name;
        let package = format!("{} {}", run.kernel.package, run.kernel.version);
        let outcome = match &run.outcome {
            Ok(o) => o,
            Err(e) => {
                println!("kernel {name} ({package}): VM failed: {e}");
                tally
                    .problems
                    .push(format!("the VM for {name} could not run the tests"));
                continue;
            }
        };
        let mut counts = TestCounts::default();
        for (path, lines) in split_by_binary(&outcome.lines) {
            if path == "end" {
                continue;
            }
            let target = names.get(&path).cloned().unwrap_or(path);
            ran.insert(target.clone());
            let c = parse_libtest(&lines);
            println!(
                "kernel {name}: {target}: {} passed, {} failed, {} ignored",
                c.passed,
                c.failed.len(),
                c.ignored
            );
            if c.passed + c.failed.len() == 0 {
                tally
                    .problems
                    .push(format!("no test of {target} ran on {name}"));
            }
            counts.passed += c.passed;
            counts.ignored += c.ignored;
            counts
                .failed
                .extend(c.failed.into_iter().map(|f| format!("{target}: {f}")));
        }
        println!(
            "kernel {name} ({package}; {}, preempt {}): {} passed, {} failed, {} ignored; \
             exit {}; boot {:.1} s, tests {:.1} s",
            outcome.release,
            preempt_of(outcome),
            counts.passed,
            counts.failed.len(),
            counts.ignored,
            outcome.exit_code,
            outcome.boot_time.as_secs_f64(),
            outcome.run_time.as_secs_f64(),
        );
        for failed in &counts.failed {
            println!("  FAILED on {name}: {failed}");
        }
        tally.passed += counts.passed;
        tally.failed += counts.failed.len();
        if !counts.failed.is_empty() {
            tally
                .problems
                .push(format!("{} failed on {name}", counts.failed.len()));
        }
        if counts.passed + counts.failed.len() == 0 {
            tally.problems.push(format!("no test ran on {name}"));
        }
        if outcome.exit_code != 0 && counts.failed.is_empty() {
            tally.problems.push(format!(
                "test binary exited {} on {name}",
                outcome.exit_code
            ));
        }
    }
    for (target, _) in binaries {
        if !ran.contains(target) {
            tally.problems.push(format!("{target} ran in no boot"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_placed_binary_runs_in_its_kernels_boot_only() {
        let binaries = [
            ("kernel_cli".to_owned(), PathBuf::from("/t/kernel_cli-1")),
            (
                "kernel_codex".to_owned(),
                PathBuf::from("/t/kernel_codex-2"),
            ),
        ];
        let place = [("kernel_codex".to_owned(), "6.12".to_owned())];
        let group = Group {
            binaries: &binaries,
            libtest_args: &[],
            served: None,
            place: &place,
        };
        let script = group.script();
        let run = |kernel: &str| {
            let out = Command::new("sh")
                .args(["-c", &script, "sh", "echo", "echo"])
                .env("BEE_VM_ENTRY", kernel)
                .output()
                .expect("sh runs");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let announced = |out: &str| {
            out.lines()
                .filter(|l| l.starts_with(BINARY_MARKER) && !l.ends_with("end"))
                .count()
        };
        assert_eq!(announced(&run("6.12")), 2, "{}", run("6.12"));
        assert_eq!(announced(&run("6.12-rt")), 1, "{}", run("6.12-rt"));
        assert_eq!(announced(&run("7.x")), 1);
    }

    #[test]
    fn a_file_for_one_kernel_must_name_a_booted_kernel() {
        let seven = KernelChoice::named("7.x").expect("7.x is in the matrix");
        let mut opts = VmOpts {
            kernel: vec![seven],
            with: Vec::new(),
            bin: Vec::new(),
            with_on: vec![("7.x".to_owned(), PathBuf::from("/t/a"))],
            bin_on: Vec::new(),
            timeout: 1,
            accel: AccelChoice::Auto,
            memory: 1,
            append: String::new(),
            lanes: 1,
        };
        assert!(check_on(&opts).is_ok());
        opts.bin_on.push(("6.1".to_owned(), PathBuf::from("/t/b")));
        assert!(check_on(&opts).is_err());
    }

    #[test]
    fn a_placement_must_name_a_built_target_and_a_running_kernel() {
        let binaries = [("kernel_cli".to_owned(), PathBuf::from("/t/kernel_cli-1"))];
        let kernels: Vec<&Entry> =
            selected(&[KernelChoice::named("7.x").expect("7.x is in the matrix")]);
        let place = |t: &str, k: &str| [(t.to_owned(), k.to_owned())];
        assert!(check_places(&place("kernel_cli", "7.x"), &binaries, &kernels).is_ok());
        assert!(check_places(&place("kernel_codex", "7.x"), &binaries, &kernels).is_err());
        assert!(check_places(&place("kernel_cli", "6.1"), &binaries, &kernels).is_err());
    }

    #[test]
    fn a_retry_is_named_by_its_oops_line() {
        let text = "VM with kernel 7.x: kernel panic:\n[7.x] c[2J[    1.301434] Oops: int3: 0000 [#1] SMP NOPTI\n[7.x] RIP: x";
        assert_eq!(oops_line(text), "Oops: int3: 0000 [#1] SMP NOPTI");
        assert_eq!(oops_line("timed out\nmore"), "timed out");
    }

    #[test]
    fn a_runs_retries_are_listed_in_its_file_and_kept_apart_without_one() {
        let dir = std::env::temp_dir().join(format!("bee-retries-{}", std::process::id()));
        let _ = fs::create_dir_all(&dir);
        let file = dir.join("retries");
        let _ = fs::remove_file(&file);
        assert_eq!(retries_in(Some(&file)).unwrap(), Vec::<String>::new());
        note_retry_in(Some(&file), "kernel 7.x: Oops: int3").unwrap();
        note_retry_in(Some(&file), "kernel 6.12: Oops: int3").unwrap();
        assert_eq!(
            retries_in(Some(&file)).unwrap(),
            ["kernel 7.x: Oops: int3", "kernel 6.12: Oops: int3"]
        );
        let _ = fs::remove_dir_all(&dir);
    }

    use super::*;

    #[test]
    fn a_prefix_selects_only_its_packages_test_targets() {
        let metadata = serde_json::json!({ "packages": [
            { "name": "bee", "targets": [
                { "name": "bee", "kind": ["lib"] },
                { "name": "kernel_caps", "kind": ["test"] },
                { "name": "cli", "kind": ["test"] },
                { "name": "kernel_cli", "kind": ["test"] },
                { "name": "kernel_bench", "kind": ["bench"] },
            ]},
            { "name": "bee-userspace", "targets": [
                { "name": "kernel_programs", "kind": ["test"] },
            ]},
        ]});
        assert_eq!(
            targets_selected(&metadata, "bee", "kernel_*"),
            ["kernel_caps", "kernel_cli"]
        );
        assert_eq!(targets_selected(&metadata, "bee", "cli"), ["cli"]);
        assert!(targets_selected(&metadata, "bee", "landlock_*").is_empty());
        assert!(targets_selected(&metadata, "nothing", "kernel_*").is_empty());
    }

    #[test]
    fn libtest_lines() {
        let lines: Vec<String> = [
            "running 3 tests",
            "test probe_loads ... ok",
            "test skeleton_denies ... FAILED",
            "test slow ... ignored, needs more",
            "[    3.1] random kernel line",
            "test result: FAILED. 1 passed; 1 failed; 1 ignored",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let c = parse_libtest(&lines);
        assert_eq!(c.passed, 1);
        assert_eq!(c.failed, vec!["skeleton_denies".to_owned()]);
        assert_eq!(c.ignored, 1);
    }

    #[test]
    fn libtest_interleaved_output_uses_summary() {
        let lines: Vec<String> = [
            "running 2 tests",
            "test a ... some printed output",
            "ok",
            "test b ... more output",
            "FAILED",
            "",
            "failures:",
            "",
            "---- b stdout ----",
            "boom",
            "",
            "failures:",
            "    b",
            "",
            "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let c = parse_libtest(&lines);
        assert_eq!(c.passed, 1);
        assert_eq!(c.failed, vec!["b".to_owned()]);
        assert_eq!(c.ignored, 0);
    }

    #[test]
    fn lanes_start_with_the_rt_kernels_then_the_newest() {
        let entries: Vec<&Entry> = ["6.1", "6.12", "6.12-rt", "7.x"]
            .iter()
            .map(|name| kernels::entry(name).expect("a matrix kernel"))
            .collect();
        let names: Vec<&str> = lane_order(&entries)
            .iter()
            .map(|&i| entries[i].name)
            .collect();
        assert_eq!(names, ["6.12-rt", "7.x", "6.12", "6.1"]);
    }

    #[test]
    fn test_targets_are_selected_by_name_or_prefix() {
        assert!(selects("kernel_*", "kernel_fs"));
        assert!(selects("kernel_fs", "kernel_fs"));
        assert!(!selects("kernel_fs", "kernel_fsx"));
        assert!(!selects("kernel_*", "plan_paths"));
    }

    #[test]
    fn output_is_split_per_binary() {
        let lines: Vec<String> = [
            "boot noise",
            "bee-vm-test-binary: /t/kernel_a-1",
            "test x ... ok",
            "bee-vm-test-binary: end",
            "\u{1b}[0mbee-vm-test-binary: /t/kernel_b-2",
            "test y ... FAILED",
            "bee-vm-test-binary: end",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let parts = split_by_binary(&lines);
        let names: Vec<&str> = parts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["/t/kernel_a-1", "end", "/t/kernel_b-2", "end"]);
        assert_eq!(parse_libtest(&parts[0].1).passed, 1);
        assert_eq!(parse_libtest(&parts[2].1).failed, vec!["y".to_owned()]);
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
