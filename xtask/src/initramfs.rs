//! Building the guest's initramfs: a `newc` cpio archive written directly,
//! so device nodes need no root and the archive is the same for the same
//! inputs (uid/gid 0, sorted entries, a host file's own mtime and 0 for the
//! rest). Host files keep their mtimes because Python checks a compiled
//! module (`__pycache__/*.pyc`) against its source's: at 0 every import in a
//! guest compiled its module again and tried to write it back.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::error::{Result, io_err};
use crate::sh;

/// Where the guest's `/init` finds the kernel's modules ([`Initramfs::add_module`]): `NAME.ko`.
const MODULES_GUEST: &str = "/lib/modules/bee";

/// The modules `/init` loads, in order, where the initramfs has them.
const MODULES: [&str; 2] = ["overlay", "binfmt_misc"];

/// Where the static busybox sits inside the guest.
const BUSYBOX_GUEST: &str = "/bin/busybox";

/// One archive member.
#[derive(Debug, Clone)]
enum Entry {
    /// A directory (mode 0755).
    Dir,
    /// A regular file copied from the host; mode bits taken from the host.
    HostFile(PathBuf),
    /// A regular file with the given bytes and permission bits.
    Data(Vec<u8>, u32),
    /// A symbolic link to the given target.
    Symlink(String),
    /// A character device (major, minor).
    CharDev(u32, u32),
}

/// An initramfs under construction: guest path → member.
#[derive(Debug, Default)]
pub struct Initramfs {
    entries: BTreeMap<PathBuf, Entry>,
}

/// Normalises a guest path to a relative archive name ("bin/sh").
/// `..` is resolved lexically, as `ldd` prints `$ORIGIN/../lib` paths.
fn archive_name(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

impl Initramfs {
    /// An archive with the base layout: directories the init script mounts
    /// on, and `/dev/console` so the kernel can give `/init` its stdio.
    pub fn new() -> Self {
        let mut fs = Self::default();
        for dir in [
            "/proc",
            "/sys",
            "/dev",
            "/tmp",
            "/run",
            "/root",
            "/etc",
            "/bin",
            "/sbin",
            "/usr/bin",
            "/usr/sbin",
        ] {
            fs.insert(Path::new(dir), Entry::Dir);
        }
        fs.insert(Path::new("/dev/console"), Entry::CharDev(5, 1));
        fs.insert(Path::new("/dev/null"), Entry::CharDev(1, 3));
        fs
    }

    fn insert(&mut self, guest: &Path, entry: Entry) {
        let name = archive_name(guest);
        let mut parent = name.parent();
        while let Some(p) = parent {
            if p.as_os_str().is_empty() {
                break;
            }
            self.entries.entry(p.to_owned()).or_insert(Entry::Dir);
            parent = p.parent();
        }
        self.entries.insert(name, entry);
    }

    /// Adds a host file at `guest`.
    pub fn add_file(&mut self, host: &Path, guest: &Path) {
        self.insert(guest, Entry::HostFile(host.to_owned()));
    }

    /// Adds the kernel's module `name` (one of [`MODULES`]: `NAME.ko`, or `NAME.ko.xz` as the
    /// package has it) where `/init` loads it from: Debian builds overlayfs and binfmt_misc
    /// as modules, and the guest loads no module by itself. `/init` decompresses an `.xz` one
    /// with busybox's `xzcat` first (busybox's `insmod` takes no compressed module).
    pub fn add_module(&mut self, name: &str, module: &Path) {
        let xz = if module.extension().is_some_and(|e| e == "xz") {
            ".xz"
        } else {
            ""
        };
        self.add_file(module, Path::new(&format!("{MODULES_GUEST}/{name}.ko{xz}")));
    }

    /// Adds a symbolic link at `guest` pointing to `target` (replacing any
    /// entry there, such as a busybox applet).
    pub fn add_symlink(&mut self, guest: &Path, target: &str) {
        self.insert(guest, Entry::Symlink(target.to_owned()));
    }

    /// Adds a file with literal contents.
    pub fn add_data(&mut self, guest: &Path, data: Vec<u8>, mode: u32) {
        self.insert(guest, Entry::Data(data, mode));
    }

    /// Adds the static busybox and a symlink for every applet it lists.
    pub fn add_busybox(&mut self, host_busybox: &Path) -> Result<()> {
        self.add_file(host_busybox, Path::new(BUSYBOX_GUEST));
        let list = sh::stdout(Command::new(host_busybox).arg("--list-full"))?;
        for applet in list.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let guest = Path::new("/").join(applet);
            if guest == Path::new(BUSYBOX_GUEST) {
                continue;
            }
            self.insert(&guest, Entry::Symlink(BUSYBOX_GUEST.to_owned()));
        }
        Ok(())
    }

    /// Adds an executable at its own absolute path plus every shared
    /// library `ldd` lists for it, the dynamic loader included.
    pub fn add_executable(&mut self, host: &Path) -> Result<()> {
        self.add_file(host, host);
        // `ldd` exits 1 for static binaries ("not a dynamic executable").
        let out = sh::output_any(Command::new("ldd").arg(host))?;
        for lib in parse_ldd(&String::from_utf8_lossy(&out.stdout)) {
            self.add_file(&lib, &lib);
        }
        Ok(())
    }

    /// Copies a host directory tree to the same absolute path in the guest,
    /// keeping symlinks as symlinks.
    pub fn add_tree(&mut self, host: &Path) -> Result<()> {
        let meta = fs::symlink_metadata(host).map_err(io_err("stat", host))?;
        if meta.file_type().is_symlink() {
            let target = fs::read_link(host).map_err(io_err("read link", host))?;
            self.insert(host, Entry::Symlink(target.to_string_lossy().into_owned()));
        } else if meta.is_dir() {
            self.insert(host, Entry::Dir);
            let mut children: Vec<PathBuf> = fs::read_dir(host)
                .map_err(io_err("read directory", host))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            children.sort();
            for child in children {
                self.add_tree(&child)?;
            }
        } else if meta.is_file() {
            self.add_file(host, host);
        }
        Ok(())
    }

    /// Writes the archive (uncompressed `newc`) to `out`.
    pub fn write(&self, out: &Path) -> Result<()> {
        let file = fs::File::create(out).map_err(io_err("create", out))?;
        let mut w = BufWriter::new(file);
        for (ino, (name, entry)) in (1u32..).zip(self.entries.iter()) {
            let (mode, data, mtime) = match entry {
                Entry::Dir => (0o040_755, Vec::new(), 0),
                Entry::HostFile(src) => {
                    let data = fs::read(src).map_err(io_err("read", src))?;
                    let meta = fs::metadata(src).map_err(io_err("stat", src))?;
                    let perm = meta.permissions().mode() & 0o7777;
                    // The header's field is 32 bits: a time past 2106 is written as 0.
                    let mtime =
                        u32::try_from(std::os::unix::fs::MetadataExt::mtime(&meta)).unwrap_or(0);
                    (0o100_000 | perm, data, mtime)
                }
                Entry::Data(bytes, perm) => (0o100_000 | perm, bytes.clone(), 0),
                Entry::Symlink(target) => (0o120_777, target.as_bytes().to_vec(), 0),
                Entry::CharDev(_, _) => (0o020_600, Vec::new(), 0),
            };
            let (rmaj, rmin) = match entry {
                Entry::CharDev(a, b) => (*a, *b),
                _ => (0, 0),
            };
            let member = Member {
                ino,
                mode,
                mtime,
                rdev: (rmaj, rmin),
            };
            write_member(&mut w, &member, &name.to_string_lossy(), &data)
                .map_err(io_err("write", out))?;
        }
        let trailer = Member {
            ino: 0,
            mode: 0,
            mtime: 0,
            rdev: (0, 0),
        };
        write_member(&mut w, &trailer, "TRAILER!!!", &[]).map_err(io_err("write", out))?;
        w.flush().map_err(io_err("write", out))
    }
}

/// One member's header fields that vary (the rest are 0, and `nlink` follows from `mode`).
struct Member {
    ino: u32,
    mode: u32,
    /// Seconds since the epoch.
    mtime: u32,
    /// A device's (major, minor).
    rdev: (u32, u32),
}

/// Writes one `newc` header, name and data, each padded to 4 bytes.
fn write_member(
    w: &mut impl Write,
    member: &Member,
    name: &str,
    data: &[u8],
) -> std::io::Result<()> {
    let Member {
        ino,
        mode,
        mtime,
        rdev: (rdev_major, rdev_minor),
    } = *member;
    let namesize = name.len() + 1;
    let nlink = if mode & 0o170_000 == 0o040_000 { 2 } else { 1 };
    let header = format!(
        "070701{ino:08x}{mode:08x}{uid:08x}{gid:08x}{nlink:08x}{mtime:08x}{size:08x}\
         {dmaj:08x}{dmin:08x}{rmaj:08x}{rmin:08x}{namesize:08x}{check:08x}",
        uid = 0,
        gid = 0,
        size = data.len(),
        dmaj = 0,
        dmin = 0,
        rmaj = rdev_major,
        rmin = rdev_minor,
        check = 0,
    );
    w.write_all(header.as_bytes())?;
    w.write_all(name.as_bytes())?;
    w.write_all(&[0])?;
    pad(w, header.len() + namesize)?;
    w.write_all(data)?;
    pad(w, data.len())
}

fn pad(w: &mut impl Write, len: usize) -> std::io::Result<()> {
    let n = (4 - len % 4) % 4;
    w.write_all(&[0u8; 3][..n])
}

/// Extracts library paths from `ldd` output: `name => /path (0x…)` lines and
/// the loader's own `/path (0x…)` line; the vDSO has no path and is skipped.
pub fn parse_ldd(output: &str) -> Vec<PathBuf> {
    output
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = match line.split_once("=>") {
                Some((_, rest)) => rest.trim(),
                None => line,
            };
            let path = rest.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The guest's `/init`: mount the kernel file systems, announce readiness,
/// run `command`, print the exit code after `exit_marker`, power off.
/// `env` entries are exported first.
pub fn init_script(
    ready_marker: &str,
    exit_marker: &str,
    env: &[(String, String)],
    command: &[String],
) -> String {
    let mut s = String::from(
        "#!/bin/sh\n\
         export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n\
         export HOME=/root TMPDIR=/tmp\n\
         m() { mount -t \"$1\" \"$1\" \"$2\" || echo \"bee-vm: mounting $1 on $2 failed\"; }\n\
         m proc /proc\n\
         m sysfs /sys\n\
         m devtmpfs /dev\n\
         mkdir -p /dev/pts && m devpts /dev/pts\n\
         m securityfs /sys/kernel/security\n\
         m bpf /sys/fs/bpf\n\
         m cgroup2 /sys/fs/cgroup\n\
         m tracefs /sys/kernel/tracing\n\
         m tmpfs /run\n\
         ip link set lo up 2>/dev/null\n",
    );
    // overlayfs, for the conformance suite's overlay cases, and binfmt_misc, mounted where
    // systemd mounts it, for kernel_learn's; a failure is said, and those tests then fail.
    for name in MODULES {
        s.push_str(&format!(
            "o={MODULES_GUEST}/{name}.ko\n\
             [ -f $o.xz ] && xzcat $o.xz > $o\n\
             [ -f $o ] && {{ insmod $o || echo \"bee-vm: insmod $o failed\"; }}\n"
        ));
    }
    s.push_str("[ -d /proc/sys/fs/binfmt_misc ] && m binfmt_misc /proc/sys/fs/binfmt_misc\n");
    for (k, v) in env {
        s.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    // The ready line: release | version | the kernel log's dynamic preemption mode.
    s.push_str(&format!(
        "pm=$(dmesg | sed -n 's/.*Dynamic Preempt: \\([a-z]*\\).*/\\1/p' | tail -n 1)\n\
         echo \"{ready_marker} $(uname -r)|$(uname -v)|$pm\"\ncd /\n"
    ));
    let cmd: Vec<String> = command.iter().map(|a| shell_quote(a)).collect();
    s.push_str(&cmd.join(" "));
    s.push_str(&format!(
        "\nrc=$?\nsync\necho \"{exit_marker} $rc\"\npoweroff -f\n"
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(out),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn newc_member_is_padded() {
        let mut buf = Vec::new();
        let member = Member {
            ino: 1,
            mode: 0o100_644,
            mtime: 0x6000_0001,
            rdev: (0, 0),
        };
        write_member(&mut buf, &member, "ab", b"xyz").ok();
        // 110-byte header + "ab\0" = 113 → padded to 116, then 3 data bytes → 120.
        assert_eq!(buf.len(), 120);
        assert!(buf.starts_with(b"070701"));
        // The sixth field (after the magic): the mtime, as the kernel sets it on the file.
        assert_eq!(&buf[6 + 5 * 8..6 + 6 * 8], b"60000001");
    }

    #[test]
    fn archive_names_resolve_dot_dot() {
        assert_eq!(
            archive_name(Path::new("/t/bin/../lib/librustc_driver.so")),
            PathBuf::from("t/lib/librustc_driver.so")
        );
        assert_eq!(archive_name(Path::new("/bin/sh")), PathBuf::from("bin/sh"));
    }
}
