//! Parsers for the kernel files support detection reads. Pure functions on
//! text, so they are tested on fixtures.
//!
//! Its length is its tests: the parsers are about 430 lines.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

/// Capability bit numbers (`include/uapi/linux/capability.h`).
pub mod cap {
    /// CAP_SETGID: `setgroups(2)` and `setresgid(2)` to another group.
    pub const SETGID: u32 = 6;
    /// CAP_SETUID: `setresuid(2)` to another user.
    pub const SETUID: u32 = 7;
    /// CAP_SETPCAP: `PR_CAPBSET_DROP` and `PR_SET_SECUREBITS`.
    pub const SETPCAP: u32 = 8;
    /// CAP_NET_ADMIN: loading networking program types, cgroup socket programs among them.
    pub const NET_ADMIN: u32 = 12;
    /// CAP_SYS_ADMIN: the catch-all; the kernel accepts it in place of CAP_BPF and CAP_PERFMON
    /// (`bpf_capable()`, `perfmon_capable()` in `include/linux/capability.h`).
    pub const SYS_ADMIN: u32 = 21;
    /// CAP_PERFMON: loading tracing-class programs, LSM programs included (Linux 5.8+).
    pub const PERFMON: u32 = 38;
    /// CAP_BPF: `bpf(2)` map creation, BTF and program loading (Linux 5.8+).
    pub const BPF: u32 = 39;
}

/// One capability bee needs: which, and why (the kernel function that checks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirement {
    /// The capability's number (see [`cap`]).
    pub cap: u32,
    /// Its name, e.g. `CAP_BPF`.
    pub name: &'static str,
    /// The name `setpriv(1)` and `capsh(1)` use, e.g. `bpf`.
    pub short: &'static str,
    /// True when the kernel accepts CAP_SYS_ADMIN in its place.
    pub sys_admin_suffices: bool,
    /// What bee uses it for, and where the kernel checks it.
    pub why: &'static str,
}

const REQ_BPF: Requirement = Requirement {
    cap: cap::BPF,
    name: "CAP_BPF",
    short: "bpf",
    sys_admin_suffices: true,
    why: "creating the maps, loading BTF and the LSM programs: bpf_capable() in \
          kernel/bpf/syscall.c (__sys_bpf with kernel.unprivileged_bpf_disabled set, \
          bpf_prog_load, map_create, bpf_btf_load)",
};
const REQ_PERFMON: Requirement = Requirement {
    cap: cap::PERFMON,
    name: "CAP_PERFMON",
    short: "perfmon",
    sys_admin_suffices: true,
    why: "loading LSM programs: bpf_prog_load in kernel/bpf/syscall.c refuses a \
          BPF_PROG_TYPE_LSM program (is_perfmon_prog_type) without perfmon_capable()",
};
const REQ_SETPCAP: Requirement = Requirement {
    cap: cap::SETPCAP,
    name: "CAP_SETPCAP",
    short: "setpcap",
    sys_admin_suffices: false,
    why: "a command that runs as uid 0 must lose its bounding set and have the securebits \
          locked (cap_prctl_drop and cap_task_prctl in security/commoncap.c), or it could \
          regain capabilities; the launcher refuses to start it otherwise",
};
const REQ_SETGID: Requirement = Requirement {
    cap: cap::SETGID,
    name: "CAP_SETGID",
    short: "setgid",
    sys_admin_suffices: false,
    why: "dropping the command to the sudo caller's group: setgroups (may_setgroups in \
          kernel/groups.c) and setresgid (__sys_setresgid in kernel/sys.c)",
};
const REQ_SETUID: Requirement = Requirement {
    cap: cap::SETUID,
    name: "CAP_SETUID",
    short: "setuid",
    sys_admin_suffices: false,
    why: "dropping the command to the sudo caller: setresuid (__sys_setresuid in kernel/sys.c)",
};

/// What a policy with name grants needs besides [`required_capabilities`]: the DNS steering
/// programs are cgroup `sock_addr` programs, which `bpf_prog_load` loads only with
/// `bpf_net_capable()` (CAP_NET_ADMIN, or CAP_SYS_ADMIN; `is_net_admin_prog_type` in
/// kernel/bpf/syscall.c).
pub const NAME_GRANTS: Requirement = Requirement {
    cap: cap::NET_ADMIN,
    name: "CAP_NET_ADMIN",
    short: "net_admin",
    sys_admin_suffices: true,
    why: "loading the cgroup socket programs that steer a scope's DNS to its resolver: \
          bpf_net_capable() in bpf_prog_load (kernel/bpf/syscall.c)",
};

/// Who the commands bee launches run as, which decides what the launcher needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    /// bee runs as a non-root uid; commands run as that uid (no credential change).
    Caller,
    /// bee runs as uid 0 without `SUDO_UID`; commands would run as uid 0 too.
    Root,
    /// bee runs as uid 0 through `sudo`; commands are dropped to `SUDO_UID`/`SUDO_GID`.
    SudoCaller,
}

impl RunAs {
    /// Decides from the effective uid and whether `SUDO_UID` is set (as
    /// `launch::Credentials::from_sudo_env` does).
    pub fn new(euid: u32, sudo_uid_set: bool) -> Self {
        match (euid, sudo_uid_set) {
            (0, true) => RunAs::SudoCaller,
            (0, false) => RunAs::Root,
            _ => RunAs::Caller,
        }
    }
}

/// The capabilities `bee exec` and `bee run` need in the effective set, given who their
/// commands run as: CAP_BPF and CAP_PERFMON always (CAP_SYS_ADMIN may stand in for either);
/// CAP_SETPCAP when commands would run as uid 0; CAP_SETGID and CAP_SETUID when they are
/// dropped to the sudo caller. Nothing else: measured on Linux 6.1 and 6.12
/// (`tests/kernel_caps.rs`, `docs/enforcement.md`).
pub fn required_capabilities(run_as: RunAs) -> Vec<Requirement> {
    let mut reqs = vec![REQ_BPF, REQ_PERFMON];
    match run_as {
        RunAs::Caller => {}
        RunAs::Root => reqs.push(REQ_SETPCAP),
        RunAs::SudoCaller => reqs.extend([REQ_SETGID, REQ_SETUID]),
    }
    reqs
}

/// The effective capability set, from `/proc/self/status` `CapEff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The raw 64-bit mask; bit *n* is capability number *n*.
    pub effective: u64,
}

impl Capabilities {
    /// True when capability number `cap` (see [`cap`]) is effective.
    pub fn has(&self, cap: u32) -> bool {
        cap < 64 && self.effective & (1u64 << cap) != 0
    }

    /// True when `req` is met: its capability is effective, or CAP_SYS_ADMIN where the kernel
    /// accepts that instead.
    pub fn meets(&self, req: &Requirement) -> bool {
        self.has(req.cap) || (req.sys_admin_suffices && self.has(cap::SYS_ADMIN))
    }

    /// The requirements of `reqs` this set does not meet, in order.
    pub fn missing(&self, reqs: &[Requirement]) -> Vec<Requirement> {
        reqs.iter().filter(|r| !self.meets(r)).copied().collect()
    }
}

/// Reads `CapEff` from the text of `/proc/<pid>/status`; `None` when the
/// line is missing or not hexadecimal.
pub fn parse_cap_eff(status: &str) -> Option<Capabilities> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    let hex = line.trim_start_matches("CapEff:").trim();
    u64::from_str_radix(hex, 16)
        .ok()
        .map(|effective| Capabilities { effective })
}

/// Decodes mountinfo's octal escapes (`\040` for a space, …).
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(u8::try_from(v).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Finds the cgroup v2 mount point in the text of `/proc/self/mountinfo`.
///
/// When several cgroup2 mounts exist, `/sys/fs/cgroup` wins, then
/// `/sys/fs/cgroup/unified` (systemd's hybrid layout), then the first one.
pub fn parse_cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    let mounts: Vec<String> = mountinfo
        .lines()
        .filter_map(|line| {
            // `id parent maj:min root mountpoint opts [optional…] - fstype source superopts`
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            if fstype != "cgroup2" {
                return None;
            }
            left.split_whitespace().nth(4).map(unescape_mountinfo)
        })
        .collect();
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .find_map(|p| mounts.iter().find(|m| m == p))
        .or_else(|| mounts.first())
        .map(PathBuf::from)
}

/// Splits the text of `/sys/kernel/security/lsm` ("lockdown,capability,bpf").
pub fn parse_lsm_list(text: &str) -> Vec<String> {
    text.trim()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Kernel lockdown mode (`/sys/kernel/security/lockdown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lockdown {
    /// No lockdown.
    None,
    /// Integrity: the kernel image can't be modified; BPF reads still work.
    Integrity,
    /// Confidentiality: also forbids reading kernel memory, which BPF
    /// programs need (`bpf_probe_read_kernel`, used by CO-RE reads).
    Confidentiality,
}

/// Reads the bracketed (active) mode from "none [integrity] confidentiality".
pub fn parse_lockdown(text: &str) -> Option<Lockdown> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    match &text[start + 1..end] {
        "none" => Some(Lockdown::None),
        "integrity" => Some(Lockdown::Integrity),
        "confidentiality" => Some(Lockdown::Confidentiality),
        _ => None,
    }
}

/// The names in the string section of a BTF blob (`/sys/kernel/btf/vmlinux`): every type,
/// member, enumerator and function name the kernel describes. `None` when `btf` is not BTF.
pub fn btf_names(btf: &[u8]) -> Option<BTreeSet<&str>> {
    let u32_at = |at: usize, little: bool| -> Option<usize> {
        let b: [u8; 4] = btf.get(at..at + 4)?.try_into().ok()?;
        let v = if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        };
        usize::try_from(v).ok()
    };
    // struct btf_header { u16 magic (0xeB9F); u8 version; u8 flags; u32 hdr_len;
    //                     u32 type_off, type_len, str_off, str_len; }
    let little = match btf.get(..2)? {
        [0x9f, 0xeb] => true,
        [0xeb, 0x9f] => false,
        _ => return None,
    };
    let hdr_len = u32_at(4, little)?;
    let str_off = u32_at(16, little)?;
    let str_len = u32_at(20, little)?;
    let start = hdr_len.checked_add(str_off)?;
    let strings = btf.get(start..start.checked_add(str_len)?)?;
    Some(
        strings
            .split(|&b| b == 0)
            .filter_map(|s| std::str::from_utf8(s).ok())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

/// A Linux version, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelVersion(pub u32, pub u32);

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// What kind of kernel piece a [`KernelPiece`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceKind {
    /// A BPF helper function (`enum bpf_func_id`).
    Helper,
    /// A BPF map type (`enum bpf_map_type`).
    MapType,
    /// A BPF program type (`enum bpf_prog_type`).
    ProgramType,
    /// An LSM hook a BPF LSM program attaches to (its `bpf_lsm_*` function).
    LsmHook,
}

/// One piece of the kernel that bee's BPF programs need, found by a name in the kernel's BTF,
/// with the first Linux release that has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPiece {
    /// What kind of piece.
    pub kind: PieceKind,
    /// Its name as people know it (`bpf_loop`, `userns_create`, `BPF_MAP_TYPE_RINGBUF`).
    pub name: String,
    /// The name the kernel's BTF has when the kernel has the piece (`BPF_FUNC_loop`,
    /// `bpf_lsm_userns_create`).
    pub btf_name: String,
    /// The first Linux release that has it.
    pub since: KernelVersion,
}

impl fmt::Display for KernelPiece {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            PieceKind::Helper => write!(f, "the {} helper", self.name),
            PieceKind::MapType => write!(f, "{} maps", self.name),
            PieceKind::ProgramType => write!(f, "{} programs", self.name),
            PieceKind::LsmHook => write!(f, "the {} LSM hook", self.name),
        }?;
        write!(f, " (Linux {})", self.since)
    }
}

/// BPF LSM itself: `BPF_PROG_TYPE_LSM` and the `bpf_lsm_*` attach points came in Linux 5.7.
pub const BPF_LSM_SINCE: KernelVersion = KernelVersion(5, 7);

/// The BPF helpers bee's programs call (`crates/ebpf/bpf/bee.bpf.c`), by their
/// `enum bpf_func_id` number and name, with the Linux release that added each.
pub const HELPERS: &[(u32, &str, KernelVersion)] = &[
    (1, "map_lookup_elem", KernelVersion(3, 19)),
    (2, "map_update_elem", KernelVersion(3, 19)),
    (3, "map_delete_elem", KernelVersion(3, 19)),
    (14, "get_current_pid_tgid", KernelVersion(4, 2)),
    (16, "get_current_comm", KernelVersion(4, 2)),
    (35, "get_current_task", KernelVersion(4, 8)),
    (46, "get_socket_cookie", KernelVersion(4, 12)),
    (80, "get_current_cgroup_id", KernelVersion(4, 18)),
    (93, "spin_lock", KernelVersion(5, 1)),
    (94, "spin_unlock", KernelVersion(5, 1)),
    (112, "probe_read_user", KernelVersion(5, 5)),
    (113, "probe_read_kernel", KernelVersion(5, 5)),
    (125, "ktime_get_boot_ns", KernelVersion(5, 8)),
    (130, "ringbuf_output", KernelVersion(5, 8)),
    (156, "task_storage_get", KernelVersion(5, 11)),
    (158, "get_current_task_btf", KernelVersion(5, 11)),
    (181, "loop", KernelVersion(5, 17)),
];

/// The map types bee's programs use, with the Linux release that added each.
pub const MAP_TYPES: &[(&str, KernelVersion)] = &[
    ("BPF_MAP_TYPE_HASH", KernelVersion(3, 19)),
    ("BPF_MAP_TYPE_ARRAY", KernelVersion(3, 19)),
    ("BPF_MAP_TYPE_LRU_HASH", KernelVersion(4, 10)),
    ("BPF_MAP_TYPE_LPM_TRIE", KernelVersion(4, 11)),
    ("BPF_MAP_TYPE_RINGBUF", KernelVersion(5, 8)),
    ("BPF_MAP_TYPE_TASK_STORAGE", KernelVersion(5, 11)),
];

/// LSM hooks that came after BPF LSM itself ([`BPF_LSM_SINCE`]): the Linux release that
/// added each. Every other hook bee attaches to is older than BPF LSM.
pub const LATE_HOOKS: &[(&str, KernelVersion)] = &[
    ("uring_override_creds", KernelVersion(5, 12)),
    ("userns_create", KernelVersion(6, 1)),
    ("inode_set_acl", KernelVersion(6, 2)),
    ("inode_remove_acl", KernelVersion(6, 2)),
    ("file_ioctl_compat", KernelVersion(6, 8)),
];

/// Every kernel piece bee's programs need, given the LSM hooks they attach to unconditionally:
/// the LSM program type, the helpers of [`HELPERS`], the map types of [`MAP_TYPES`] and one
/// `bpf_lsm_*` function per hook.
pub fn required_kernel_pieces<'a>(hooks: impl IntoIterator<Item = &'a str>) -> Vec<KernelPiece> {
    let mut pieces = vec![KernelPiece {
        kind: PieceKind::ProgramType,
        name: "BPF_PROG_TYPE_LSM".to_owned(),
        btf_name: "BPF_PROG_TYPE_LSM".to_owned(),
        since: BPF_LSM_SINCE,
    }];
    pieces.extend(HELPERS.iter().map(|&(_, name, since)| KernelPiece {
        kind: PieceKind::Helper,
        name: format!("bpf_{name}"),
        btf_name: format!("BPF_FUNC_{name}"),
        since,
    }));
    pieces.extend(MAP_TYPES.iter().map(|&(name, since)| KernelPiece {
        kind: PieceKind::MapType,
        name: name.to_owned(),
        btf_name: name.to_owned(),
        since,
    }));
    pieces.extend(hooks.into_iter().map(|hook| {
        KernelPiece {
            kind: PieceKind::LsmHook,
            name: hook.to_owned(),
            btf_name: format!("bpf_lsm_{hook}"),
            since: LATE_HOOKS
                .iter()
                .find(|(h, _)| *h == hook)
                .map_or(BPF_LSM_SINCE, |&(_, v)| v),
        }
    }));
    pieces
}

/// The pieces of `required` whose BTF name is not among `names` ([`btf_names`]).
pub fn missing_kernel_pieces(required: &[KernelPiece], names: &BTreeSet<&str>) -> Vec<KernelPiece> {
    required
        .iter()
        .filter(|p| !names.contains(p.btf_name.as_str()))
        .cloned()
        .collect()
}

/// The lowest Linux release that has every piece of `missing`: the newest of their releases.
pub fn lowest_kernel_with(missing: &[KernelPiece]) -> Option<KernelVersion> {
    missing.iter().map(|p| p.since).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_full_root() {
        let status = "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
                      CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";
        let caps = parse_cap_eff(status);
        for run_as in [RunAs::Caller, RunAs::Root, RunAs::SudoCaller] {
            let reqs = required_capabilities(run_as);
            assert!(caps.is_some_and(|c| c.missing(&reqs).is_empty()));
        }
    }

    fn names(reqs: &[Requirement]) -> Vec<&'static str> {
        reqs.iter().map(|r| r.name).collect()
    }

    #[test]
    fn required_set_depends_on_who_commands_run_as() {
        assert_eq!(
            names(&required_capabilities(RunAs::Caller)),
            ["CAP_BPF", "CAP_PERFMON"]
        );
        assert_eq!(
            names(&required_capabilities(RunAs::Root)),
            ["CAP_BPF", "CAP_PERFMON", "CAP_SETPCAP"]
        );
        assert_eq!(
            names(&required_capabilities(RunAs::SudoCaller)),
            ["CAP_BPF", "CAP_PERFMON", "CAP_SETGID", "CAP_SETUID"]
        );
        assert_eq!(RunAs::new(1000, true), RunAs::Caller);
        assert_eq!(RunAs::new(0, false), RunAs::Root);
        assert_eq!(RunAs::new(0, true), RunAs::SudoCaller);
    }

    #[test]
    fn cap_eff_bpf_and_perfmon_only() {
        // bits 38 and 39
        let caps = parse_cap_eff("CapEff:\t000000c000000000\n");
        assert_eq!(
            caps.map(|c| names(&c.missing(&required_capabilities(RunAs::Caller)))),
            Some(vec![])
        );
        assert_eq!(
            caps.map(|c| names(&c.missing(&required_capabilities(RunAs::SudoCaller)))),
            Some(vec!["CAP_SETGID", "CAP_SETUID"])
        );
    }

    #[test]
    fn sys_admin_stands_in_for_bpf_and_perfmon_only() {
        // bit 21
        let caps = parse_cap_eff("CapEff:\t0000000000200000\n");
        assert_eq!(
            caps.map(|c| names(&c.missing(&required_capabilities(RunAs::Root)))),
            Some(vec!["CAP_SETPCAP"])
        );
    }

    #[test]
    fn cap_eff_unprivileged_and_garbage() {
        let caps = parse_cap_eff("CapEff:\t0000000000000000\n");
        assert_eq!(
            caps.map(|c| names(&c.missing(&required_capabilities(RunAs::Caller)))),
            Some(vec!["CAP_BPF", "CAP_PERFMON"])
        );
        // CAP_BPF alone (bit 39)
        let caps = parse_cap_eff("CapEff:\t0000008000000000\n");
        assert_eq!(
            caps.map(|c| names(&c.missing(&required_capabilities(RunAs::Caller)))),
            Some(vec!["CAP_PERFMON"])
        );
        assert_eq!(parse_cap_eff("CapEff:\tzz\n"), None);
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }

    const HYBRID: &str = "\
22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
25 22 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
";

    #[test]
    fn cgroup2_hybrid_layout() {
        assert_eq!(
            parse_cgroup2_mount(HYBRID),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn cgroup2_unified_layout_and_optional_fields() {
        let info = "35 25 0:30 / /sys/fs/cgroup rw,nosuid shared:9 master:3 - cgroup2 cgroup2 rw\n\
                    40 22 0:40 / /mnt/my\\040cg rw - cgroup2 none rw\n";
        assert_eq!(
            parse_cgroup2_mount(info),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        let only_escaped = "40 22 0:40 / /mnt/my\\040cg rw - cgroup2 none rw\n";
        assert_eq!(
            parse_cgroup2_mount(only_escaped),
            Some(PathBuf::from("/mnt/my cg"))
        );
        assert_eq!(
            parse_cgroup2_mount("22 1 253:0 / / rw - ext4 /dev/vda rw\n"),
            None
        );
    }

    #[test]
    fn lsm_list() {
        assert_eq!(
            parse_lsm_list("lockdown,capability,landlock,bpf,ima,evm\n"),
            vec!["lockdown", "capability", "landlock", "bpf", "ima", "evm"]
        );
        assert!(parse_lsm_list("\n").is_empty());
    }

    #[test]
    fn lockdown_modes() {
        assert_eq!(
            parse_lockdown("[none] integrity confidentiality\n"),
            Some(Lockdown::None)
        );
        assert_eq!(
            parse_lockdown("none integrity [confidentiality]\n"),
            Some(Lockdown::Confidentiality)
        );
        assert_eq!(parse_lockdown("none"), None);
    }

    /// A BTF blob with no types and the given strings (little-endian header).
    fn btf_with(strings: &[&str]) -> Vec<u8> {
        let mut strs = vec![0u8];
        for s in strings {
            strs.extend_from_slice(s.as_bytes());
            strs.push(0);
        }
        let mut b = vec![0x9f, 0xeb, 1, 0];
        for v in [24u32, 0, 0, 0, u32::try_from(strs.len()).unwrap_or(0)] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&strs);
        b
    }

    #[test]
    fn btf_names_reads_the_string_section() {
        let blob = btf_with(&["BPF_FUNC_loop", "bpf_lsm_file_open"]);
        let names = btf_names(&blob);
        assert_eq!(
            names.map(|n| n.into_iter().collect::<Vec<_>>()),
            Some(vec!["BPF_FUNC_loop", "bpf_lsm_file_open"])
        );
        assert_eq!(btf_names(b"\x7fELF"), None);
        assert_eq!(btf_names(&blob[..30]), None, "a cut blob is no BTF");
    }

    #[test]
    fn missing_pieces_name_the_lowest_kernel_that_has_them() {
        let required = required_kernel_pieces(["file_open", "userns_create"]);
        let all: Vec<&str> = required.iter().map(|p| p.btf_name.as_str()).collect();
        let blob = btf_with(&all);
        let names = btf_names(&blob).unwrap_or_default();
        assert!(missing_kernel_pieces(&required, &names).is_empty());
        assert_eq!(lowest_kernel_with(&[]), None);

        // Linux 5.10: no bpf_loop, no userns_create hook.
        let old: Vec<&str> = all
            .iter()
            .copied()
            .filter(|n| *n != "BPF_FUNC_loop" && *n != "bpf_lsm_userns_create")
            .collect();
        let blob = btf_with(&old);
        let names = btf_names(&blob).unwrap_or_default();
        let missing = missing_kernel_pieces(&required, &names);
        let shown: Vec<String> = missing.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "the bpf_loop helper (Linux 5.17)",
                "the userns_create LSM hook (Linux 6.1)"
            ]
        );
        assert_eq!(lowest_kernel_with(&missing), Some(KernelVersion(6, 1)));
        assert_eq!(KernelVersion(6, 1).to_string(), "6.1");
        assert!(KernelVersion(5, 17) < KernelVersion(6, 1));
        assert!(KernelVersion(6, 1) < KernelVersion(6, 12));
    }
}
