//! Parsers for the kernel files support detection reads. Pure functions on
//! text, so they are tested on fixtures.

use std::path::PathBuf;

/// Capability bit numbers (`include/uapi/linux/capability.h`).
pub mod cap {
    /// CAP_SYS_ADMIN: the catch-all; enough for any BPF program.
    pub const SYS_ADMIN: u32 = 21;
    /// CAP_MAC_ADMIN: MAC configuration; some distributions gate LSM hooks on it.
    pub const MAC_ADMIN: u32 = 33;
    /// CAP_PERFMON: tracing-class programs (LSM included) since 5.8.
    pub const PERFMON: u32 = 38;
    /// CAP_BPF: `bpf(2)` itself since 5.8.
    pub const BPF: u32 = 39;
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

    /// True when the set allows loading and attaching LSM programs:
    /// CAP_BPF with CAP_PERFMON, or CAP_SYS_ADMIN.
    pub fn can_load_lsm(&self) -> bool {
        (self.has(cap::BPF) && self.has(cap::PERFMON)) || self.has(cap::SYS_ADMIN)
    }

    /// Names of the capabilities bee cares about that are missing.
    pub fn missing(&self) -> Vec<&'static str> {
        [
            (cap::BPF, "CAP_BPF"),
            (cap::PERFMON, "CAP_PERFMON"),
            (cap::SYS_ADMIN, "CAP_SYS_ADMIN"),
            (cap::MAC_ADMIN, "CAP_MAC_ADMIN"),
        ]
        .into_iter()
        .filter(|(c, _)| !self.has(*c))
        .map(|(_, n)| n)
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_full_root() {
        let status = "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
                      CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";
        let caps = parse_cap_eff(status);
        assert!(caps.is_some_and(|c| c.can_load_lsm()));
        assert!(caps.is_some_and(|c| c.missing().is_empty()));
    }

    #[test]
    fn cap_eff_bpf_and_perfmon_only() {
        // bits 38 and 39
        let caps = parse_cap_eff("CapEff:\t000000c000000000\n");
        assert_eq!(
            caps.map(|c| (c.can_load_lsm(), c.missing())),
            Some((true, vec!["CAP_SYS_ADMIN", "CAP_MAC_ADMIN"]))
        );
    }

    #[test]
    fn cap_eff_unprivileged_and_garbage() {
        let caps = parse_cap_eff("CapEff:\t0000000000000000\n");
        assert!(caps.is_some_and(|c| !c.can_load_lsm()));
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
}
