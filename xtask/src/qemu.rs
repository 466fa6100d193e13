//! Booting a kernel + initramfs in QEMU and reading the serial console.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The kernel command line: serial console, the bpf LSM enabled, and a
/// panic powers the VM off at once (with `-no-reboot`).
/// `no_timer_check`: under TCG on a loaded host the IO-APIC timer check can miss its ticks
/// and panic the boot ("IO-APIC + timer doesn't work!", seen on 6.12-rt); a virtual machine's
/// timer is known to work.
pub const APPEND: &str =
    "console=ttyS0 quiet lsm=lockdown,capability,landlock,bpf panic=-1 no_timer_check";

/// How the guest is accelerated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualization (`-accel kvm -cpu host`).
    Kvm,
    /// Software emulation (`-accel tcg -cpu max`); slower, works everywhere.
    Tcg,
}

/// What one boot produced.
#[derive(Debug)]
pub struct Outcome {
    /// The guest command's exit code, from the exit marker.
    pub exit_code: i32,
    /// Console lines printed by the guest command (between the markers).
    pub lines: Vec<String>,
    /// `uname -r` inside the guest, from the ready marker.
    pub release: String,
    /// `uname -v` inside the guest, from the ready marker.
    pub uname_v: String,
    /// The mode of the kernel log's `Dynamic Preempt: MODE` line, from the ready marker
    /// (empty when the kernel printed none).
    pub dynamic_preempt: String,
    /// From QEMU start to the ready marker (kernel boot + mounts).
    pub boot_time: Duration,
    /// From the ready marker to the exit marker (the guest command).
    pub run_time: Duration,
}

/// One boot request.
#[derive(Debug)]
pub struct Boot<'a> {
    /// Label for messages and the console prefix ("6.1").
    pub label: &'a str,
    /// The bzImage.
    pub kernel: &'a Path,
    /// The initramfs.
    pub initrd: &'a Path,
    /// Acceleration to use.
    pub accel: Accel,
    /// Extra kernel arguments, appended to [`APPEND`].
    pub append: &'a str,
    /// Whole-run limit; the VM is killed after it.
    pub timeout: Duration,
    /// Limit for reaching the ready marker (boot and mounts); the VM is killed after it.
    pub boot_timeout: Duration,
    /// Marker the guest prints once its file systems are mounted.
    pub ready_marker: &'a str,
    /// Marker the guest prints before the exit code.
    pub exit_marker: &'a str,
    /// Echo guest output to our stderr as it arrives.
    pub echo: bool,
    /// Lines containing this text are kept in the outcome but not echoed.
    pub quiet: Option<&'a str>,
    /// Guest memory, MiB.
    pub memory_mib: u32,
    /// Under TCG, emulate every vCPU on one host thread (`-accel tcg,thread=single`) instead
    /// of one thread each: for guests booted side by side, which then take one core each,
    /// and in which the text-patching race of multi-threaded TCG cannot happen
    /// (`docs/kernel-testing.md`, "Emulator faults").
    pub single_thread: bool,
}

/// The text after `marker` in `line`; the console may prefix a marker with
/// terminal escape sequences, so it is searched for, not prefix-matched.
fn after<'l>(line: &'l str, marker: &str) -> Option<&'l str> {
    line.find(marker).map(|at| &line[at + marker.len()..])
}

enum Msg {
    Line(String),
    Eof,
}

fn qemu_command(b: &Boot<'_>) -> Command {
    let mut cmd = Command::new("qemu-system-x86_64");
    match b.accel {
        Accel::Kvm => cmd.args(["-accel", "kvm", "-cpu", "host"]),
        Accel::Tcg if b.single_thread => cmd.args(["-accel", "tcg,thread=single", "-cpu", "max"]),
        Accel::Tcg => cmd.args(["-accel", "tcg", "-cpu", "max"]),
    };
    cmd.arg("-m")
        .arg(b.memory_mib.to_string())
        .args(["-smp", "2", "-kernel"])
        .arg(b.kernel)
        .arg("-initrd")
        .arg(b.initrd)
        .arg("-append")
        .arg(if b.append.is_empty() {
            APPEND.to_owned()
        } else {
            format!("{APPEND} {}", b.append)
        })
        .args(["-nographic", "-no-reboot"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn kill(child: &mut Child) {
    // The VM may already be gone; either way nothing more to do.
    let _ = child.kill();
    let _ = child.wait();
}

/// The console from the first oops line (`Oops:`, `BUG:`) of a panic on, or its last 15 lines
/// when none is found: what tells one panic from another.
fn panic_lines(console: &[String]) -> String {
    let from = console
        .iter()
        .rposition(|l| l.contains("Oops:") || l.contains("BUG:"))
        .unwrap_or(console.len().saturating_sub(15));
    console[from..].join("\n")
}

/// Boots the VM and returns once the guest printed its exit marker (or
/// fails: no boot, kernel panic, QEMU exit, timeout).
pub fn boot(b: &Boot<'_>) -> Result<Outcome> {
    let vm_err = |reason: String| Error::Vm {
        kernel: b.label.to_owned(),
        reason,
    };
    let start = Instant::now();
    let mut cmd = qemu_command(b);
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        program: "qemu-system-x86_64".into(),
        source,
    })?;
    let (tx, rx) = mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf)
                            .trim_end_matches(['\r', '\n'])
                            .to_owned();
                        if tx.send(Msg::Line(line)).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = tx.send(Msg::Eof);
        });
    }
    let stderr_handle = child.stderr.take().map(|mut stderr| {
        thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        })
    });
    let deadline = start + b.timeout;
    let mut console: Vec<String> = Vec::new();
    let mut ready: Option<(Instant, String)> = None;
    let boot_deadline = start + b.boot_timeout;
    let mut lines = Vec::new();
    let tail = |console: &[String]| -> String {
        let from = console.len().saturating_sub(15);
        console[from..].join("\n")
    };
    loop {
        let now = Instant::now();
        if ready.is_none() && now >= boot_deadline && boot_deadline < deadline {
            kill(&mut child);
            return Err(vm_err(format!(
                "never printed the ready marker within {} s (no boot to /init); last console \
                 lines:\n{}",
                b.boot_timeout.as_secs(),
                tail(&console)
            )));
        }
        if now >= deadline {
            kill(&mut child);
            return Err(vm_err(format!(
                "timed out after {} s ({}); last console lines:\n{}",
                b.timeout.as_secs(),
                if ready.is_some() {
                    "guest command still running"
                } else {
                    "never reached /init"
                },
                tail(&console)
            )));
        }
        let wait = if ready.is_none() {
            boot_deadline.min(deadline).saturating_duration_since(now)
        } else {
            deadline - now
        };
        match rx.recv_timeout(wait.max(Duration::from_millis(1))) {
            Ok(Msg::Line(line)) => {
                if let Some(rest) = after(&line, b.exit_marker) {
                    let Some((ready_at, ready_line)) = ready.take() else {
                        kill(&mut child);
                        return Err(vm_err("exit marker before ready marker".into()));
                    };
                    let code = rest
                        .trim()
                        .parse::<i32>()
                        .map_err(|_| vm_err(format!("unreadable exit marker line `{line}`")))?;
                    let end = Instant::now();
                    // `poweroff -f` follows; give QEMU a moment, then make sure.
                    let grace = Instant::now() + Duration::from_secs(10);
                    while Instant::now() < grace {
                        if let Ok(Some(_)) = child.try_wait() {
                            break;
                        }
                        thread::sleep(Duration::from_millis(50));
                    }
                    kill(&mut child);
                    let mut fields = ready_line.splitn(3, '|').map(|f| f.trim().to_owned());
                    let release = fields.next().unwrap_or_default();
                    let uname_v = fields.next().unwrap_or_default();
                    let dynamic_preempt = fields.next().unwrap_or_default();
                    return Ok(Outcome {
                        exit_code: code,
                        lines,
                        release,
                        uname_v,
                        dynamic_preempt,
                        boot_time: ready_at - start,
                        run_time: end - ready_at,
                    });
                }
                if let Some(rest) = after(&line, b.ready_marker) {
                    ready = Some((Instant::now(), rest.trim().to_owned()));
                    continue;
                }
                if b.echo && !b.quiet.is_some_and(|q| line.contains(q)) {
                    eprintln!("[{}] {line}", b.label);
                }
                if ready.is_some() {
                    lines.push(line.clone());
                }
                let panicked = line.contains("Kernel panic");
                console.push(line);
                if panicked {
                    // Collect a few more lines of the panic, then stop.
                    thread::sleep(Duration::from_millis(500));
                    while let Ok(Msg::Line(l)) = rx.try_recv() {
                        console.push(l);
                    }
                    kill(&mut child);
                    return Err(Error::KernelPanic {
                        kernel: b.label.to_owned(),
                        console: panic_lines(&console),
                    });
                }
            }
            Ok(Msg::Eof) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                let stderr = stderr_handle
                    .and_then(|h| h.join().ok())
                    .unwrap_or_default();
                return Err(vm_err(format!(
                    "QEMU exited ({status}) before the guest command finished ({}); \
                     QEMU stderr: {}; last console lines:\n{}",
                    if ready.is_some() {
                        "the command was running"
                    } else {
                        "never reached /init"
                    },
                    stderr.trim(),
                    tail(&console)
                )));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn console(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| (*l).to_owned()).collect()
    }

    #[test]
    fn a_panic_is_shown_from_its_oops_line_and_an_int3_oops_is_the_patching_race() {
        let c = console(&[
            "[7.x] test one ... ok",
            "[7.x] test two ... [  484.02] Oops: int3: 0000 [#1] SMP NOPTI",
            "[7.x] [  484.03] RIP: 0010:bpf_lsm_file_fcntl+0x5/0x10",
            "[  484.04] Kernel panic - not syncing: Fatal exception in interrupt",
        ]);
        let shown = panic_lines(&c);
        assert!(shown.starts_with("[7.x] test two"), "{shown}");
        assert!(!shown.contains("test one"), "{shown}");
        let e = Error::KernelPanic {
            kernel: "7.x".into(),
            console: shown,
        };
        assert!(e.is_text_patching_race());
        assert!(
            e.to_string()
                .starts_with("VM with kernel 7.x: kernel panic:\n")
        );
    }

    #[test]
    fn other_panics_and_failures_are_not_retried() {
        let c = console(&[
            "[  9.1] BUG: kernel NULL pointer dereference, address: 0000000000000008",
            "[  9.2] Kernel panic - not syncing: Fatal exception",
        ]);
        let e = Error::KernelPanic {
            kernel: "6.1".into(),
            console: panic_lines(&c),
        };
        assert!(!e.is_text_patching_race());
        let timeout = Error::Vm {
            kernel: "6.1".into(),
            reason: "timed out; Oops: int3 was printed by a test".into(),
        };
        assert!(!timeout.is_text_patching_race());
        // No oops line at all: the last 15 lines.
        let many: Vec<String> = (0..20).map(|i| format!("line {i}")).collect();
        assert!(panic_lines(&many).starts_with("line 5\n"));
    }
}
