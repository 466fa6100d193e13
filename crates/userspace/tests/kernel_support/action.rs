//! The helper's actions as one type. A test builds an [`Action`]; its words
//! ([`Action::words`]) cross into the re-executed child through the environment, where
//! [`Action::parse`] turns them back into the same [`Action`] once and [`Action::run`]
//! dispatches on it. Each variant's meaning is documented at the function it runs.
//!
//! Arguments stay text: the child parses numbers and addresses where it uses them, as a
//! command line would. A missing or extra argument is an error.

use super::{dns, fs_attr, fs_open, mount, net, process, repeat, system, uring};

/// One argument slot of an action: how it is read from the words (`None`: missing) and
/// written back to them.
trait Arg: Sized {
    fn take(rest: &mut std::slice::Iter<'_, String>) -> Option<Self>;
    fn put(&self, out: &mut Vec<String>);
}

/// A required argument.
impl Arg for String {
    fn take(rest: &mut std::slice::Iter<'_, String>) -> Option<Self> {
        rest.next().cloned()
    }
    fn put(&self, out: &mut Vec<String>) {
        out.push(self.clone());
    }
}

/// An optional last argument.
impl Arg for Option<String> {
    fn take(rest: &mut std::slice::Iter<'_, String>) -> Option<Self> {
        Some(rest.next().cloned())
    }
    fn put(&self, out: &mut Vec<String>) {
        out.extend(self.iter().cloned());
    }
}

/// Every remaining argument.
impl Arg for Vec<String> {
    fn take(rest: &mut std::slice::Iter<'_, String>) -> Option<Self> {
        Some(rest.cloned().collect())
    }
    fn put(&self, out: &mut Vec<String>) {
        out.extend(self.iter().cloned());
    }
}

/// Declares [`Action`] from a table of `Variant = "wire-name" { field: Type, … }`, with its
/// parser and its words.
macro_rules! actions {
    ($($variant:ident = $name:literal { $($field:ident: $ty:ty),* $(,)? })*) => {
        /// A helper action; its wire name and arguments are those of the table below.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Action {
            $($variant { $($field: $ty),* },)*
        }

        impl Action {
            /// Parses an action from its words: the wire name, then the arguments.
            pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<Self, String> {
                let words: Vec<String> = words.iter().map(|w| w.as_ref().to_owned()).collect();
                let (name, rest) = words.split_first().ok_or("no helper action")?;
                let mut rest = rest.iter();
                let action = match name.as_str() {
                    $($name => Self::$variant {
                        $($field: Arg::take(&mut rest).ok_or_else(|| {
                            format!("helper action {name}: no {}", stringify!($field))
                        })?),*
                    },)*
                    other => return Err(format!("unknown helper action {other:?}")),
                };
                if rest.len() > 0 {
                    return Err(format!("helper action {name}: {} extra arguments", rest.len()));
                }
                Ok(action)
            }

            /// The action's wire name.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$variant { .. } => $name,)*
                }
            }

            /// The words [`Action::parse`] reads back into this action.
            pub fn words(&self) -> Vec<String> {
                let mut out = vec![self.name().to_owned()];
                match self {
                    $(Self::$variant { $($field),* } => {
                        $(Arg::put($field, &mut out);)*
                    })*
                }
                out
            }
        }
    };
}

actions! {
    StressOpen = "stress-open" { args: Vec<String> }
    ReplaceWatch = "replace-watch" { args: Vec<String> }
    ReadLines = "read-lines" {}
    UringOpenat = "uring-openat" { path: String }
    UringConnect = "uring-connect" { addr: String, port: String }
    RecvFd = "recv-fd" {}
    Connect = "connect" { addr: String, port: String }
    Sendto = "sendto" { addr: String, port: String }
    Dns = "dns" { mode: String, addr: String, port: String }
    Resolve = "resolve" { mode: String, name: String, server: String }
    ResolveMany = "resolve-many" { prefix: String, suffix: String, count: String, rounds: String, threads: String, start: String }
    DnsRaw = "dns-raw" { mode: String, addrs: String, port: String, hex: String }
    SocketTry = "socket-try" { kind: String }
    OpenRead = "open-read" { path: String }
    OpenWrite = "open-write" { path: String }
    MmapExec = "mmap-exec" { path: String }
    MprotectExec = "mprotect-exec" { path: String }
    AnonExec = "anon-exec" {}
    MemfdExec = "memfd-exec" { path: String }
    ExecveatEmpty = "execveat-empty" { path: String }
    OpenChain = "open-chain" { dir: String, seg: String, count: String }
    Loader = "loader" { target: String, policy: String }
    OpenMany = "open-many" { paths: Vec<String> }
    OpenRepeat = "open-repeat" { path: String, count: String }
    UnixSendto = "unix-sendto" { addr: String }
    SocketpairDgram = "socketpair-dgram" {}
    ConnectMptcp = "connect-mptcp" { addr: String, port: String }
    Bpf = "bpf" {}
    Kill = "kill" { pid: String }
    Ptrace = "ptrace" { pid: String }
    SocketPacket = "socket-packet" {}
    SocketRaw = "socket-raw" {}
    UnshareUser = "unshare-user" {}
    MountTmpfs = "mount-tmpfs" { target: String }
    UnixConnect = "unix-connect" { addr: String }
    UnixListen = "unix-listen" { addr: String }
    SigioKill = "sigio-kill" { pid: String }
    PidfdKill = "pidfd-kill" { pid: String }
    PidfdGetfd = "pidfd-getfd" { pid: String, fd: String }
    VmRead = "vm-read" { pid: String }
    UdpUnspec = "udp-unspec" { addr: String, port: String }
    Sendmmsg = "sendmmsg" { addr: String, port: String }
    OpenTruncRo = "open-trunc-ro" { path: String }
    MknodOpen = "mknod-open" { path: String, major: String, minor: String }
    OpenTreeRead = "open-tree-read" { dir: String, rel: String }
    OpenTreeExec = "open-tree-exec" { dir: String, rel: String }
    UnshareNsRead = "unshare-ns-read" { path: String }
    RenameExchange = "rename-exchange" { from: String, to: String }
    RenameWhiteout = "rename-whiteout" { from: String, to: String }
    OpathReopen = "opath-reopen" { path: String }
    OpathLink = "opath-link" { src: String, dst: String }
    OpathLinkEmpty = "opath-link-empty" { src: String, dst: String }
    OpathExec = "opath-exec" { path: String }
    HandleOpen = "handle-open" { path: String, dir: String }
    Setxattr = "setxattr" { path: String, name: Option<String> }
    SetflagsRaw = "setflags-raw" { path: String, flags: String }
    Ioctl = "ioctl" { path: String, cmd: String }
    Removexattr = "removexattr" { path: String, name: String }
    SetAcl = "set-acl" { path: String }
    Utimes = "utimes" { path: String }
    UringUnlinkat = "uring-unlinkat" { path: String }
    UringRenameat = "uring-renameat" { from: String, to: String }
    UringLinkat = "uring-linkat" { from: String, to: String }
    UringSendmsg = "uring-sendmsg" { addr: String, port: String }
    ProcCwdRead = "proc-cwd-read" { pid: String, rel: String }
    ProcMem = "proc-mem" { pid: String }
    CgroupCloneInto = "cgroup-clone-into" { cgroup: String, path: String }
    ChrootRead = "chroot-read" { root: String, path: String }
    InotifyWatch = "inotify-watch" { path: String }
    ListenSend = "listen-send" { port: String }
    Bind = "bind" { proto: String, addr: String, port: String }
    RtnlAddaddr = "rtnl-addaddr" { ip: String }
    PerfPid = "perf-pid" { pid: String }
    Tiocsti = "tiocsti" { args: Vec<String> }
    SrrSendto = "srr-sendto" { hop: String, addr: String, port: String, text: String }
    PrlimitCpu = "prlimit-cpu" { pid: String }
    Setpriority = "setpriority" { pid: String }
    IoprioIdle = "ioprio-idle" { pid: String }
    Setaffinity = "setaffinity" { pid: String }
    FanotifyDeny = "fanotify-deny" { path: String, secs: String }
    MountSetattrRo = "mount-setattr-ro" { path: String }
    FspickRo = "fspick-ro" { path: String }
    Fd3Open = "fd3-open" { rel: String }
    Fd3Create = "fd3-create" { rel: String }
    Fd3Exec = "fd3-exec" { rel: String }
    FsmountCreate = "fsmount-create" {}
    ShmOwn = "shm-own" {}
    Sethostname = "sethostname" { name: String }
    RebootCadOff = "reboot-cad-off" {}
    SyslogRead = "syslog-read" { marker: String }
    Setflags = "setflags" { path: String, sign: String }
    Getxattr = "getxattr" { path: String, name: String }
    Readlink = "readlink" { path: String }
    ShmRead = "shm-read" { key: String }
    AddKey = "add-key" { desc: String, data: String }
    KeyRead = "key-read" { desc: String }
    KexecUnload = "kexec-unload" {}
    FinitModule = "finit-module" { path: String }
    InitModuleGarbage = "init-module-garbage" {}
    Kcmp = "kcmp" { pid: String }
    ProcessMadvise = "process-madvise" { pid: String }
    SetnsPidfd = "setns-pidfd" { pid: String }
    FutimensRo = "futimens-ro" { path: String }
    FsetxattrRo = "fsetxattr-ro" { path: String, name: String }
    UringFsetxattrRo = "uring-fsetxattr-ro" { path: String, name: String }
    UringPersonalityOpenat = "uring-personality-openat" { path: String }
    UringAsyncAfterCapset = "uring-async-after-capset" { allowed: String, path: String }
    RtnlBatch = "rtnl-batch" { ip: String }
}

impl Action {
    /// Does the action in this process; returns its errno (0 on success).
    pub fn run(&self) -> i32 {
        match self {
            Self::StressOpen { args } => repeat::stress_open(args),
            Self::ReplaceWatch { args } => repeat::replace_watch(args),
            Self::ReadLines {} => repeat::read_lines(),
            Self::UringOpenat { path } => uring::uring_openat(path),
            Self::UringConnect { addr, port } => uring::uring_connect(addr, port.parse().unwrap()),
            Self::RecvFd {} => net::recv_fd(),
            Self::Connect { addr, port } => net::net(false, addr, port.parse().unwrap()),
            Self::Sendto { addr, port } => net::net(true, addr, port.parse().unwrap()),
            Self::Dns { mode, addr, port } => dns::dns_exchange(mode, addr, port),
            Self::Resolve { mode, name, server } => dns::resolve(mode, name, server),
            Self::ResolveMany {
                prefix,
                suffix,
                count,
                rounds,
                threads,
                start,
            } => dns::resolve_many(prefix, suffix, count, rounds, threads, start),
            Self::DnsRaw {
                mode,
                addrs,
                port,
                hex,
            } => dns::dns_raw(mode, addrs, port, hex),
            Self::SocketTry { kind } => net::socket_try(kind),
            Self::OpenRead { path } => fs_open::open_read(path),
            Self::OpenWrite { path } => fs_open::open_write(path),
            Self::MmapExec { path } => fs_open::mmap_exec(path, false),
            Self::MprotectExec { path } => fs_open::mmap_exec(path, true),
            Self::AnonExec {} => fs_open::anon_exec(),
            Self::MemfdExec { path } => fs_open::memfd_exec(path),
            Self::ExecveatEmpty { path } => fs_open::execveat_empty(path),
            Self::OpenChain { dir, seg, count } => fs_open::open_chain(dir, seg, count),
            Self::Loader { target, policy } => fs_open::loader(target, policy),
            Self::OpenMany { paths } => fs_open::open_many(paths),
            Self::OpenRepeat { path, count } => fs_open::open_repeat(path, count),
            Self::UnixSendto { addr } => net::unix_sendto(addr),
            Self::SocketpairDgram {} => net::socketpair_dgram(),
            Self::ConnectMptcp { addr, port } => net::connect_mptcp(addr, port),
            Self::Bpf {} => system::bpf(),
            Self::Kill { pid } => process::kill(pid),
            Self::Ptrace { pid } => process::ptrace(pid),
            Self::SocketPacket {} => net::socket_packet(),
            Self::SocketRaw {} => net::socket_raw(),
            Self::UnshareUser {} => process::unshare_user(),
            Self::MountTmpfs { target } => mount::mount_tmpfs(target),
            Self::UnixConnect { addr } => net::unix_connect(addr),
            Self::UnixListen { addr } => net::unix_listen(addr),
            Self::SigioKill { pid } => process::sigio_kill(pid),
            Self::PidfdKill { pid } => process::pidfd_kill(pid),
            Self::PidfdGetfd { pid, fd } => process::pidfd_getfd(pid, fd),
            Self::VmRead { pid } => process::vm_read(pid),
            Self::UdpUnspec { addr, port } => net::udp_unspec(addr, port),
            Self::Sendmmsg { addr, port } => net::sendmmsg(addr, port),
            Self::OpenTruncRo { path } => fs_open::open_trunc_ro(path),
            Self::MknodOpen { path, major, minor } => fs_open::mknod_open(path, major, minor),
            Self::OpenTreeRead { dir, rel } => mount::open_tree(dir, rel, false),
            Self::OpenTreeExec { dir, rel } => mount::open_tree(dir, rel, true),
            Self::UnshareNsRead { path } => mount::unshare_ns_read(path),
            Self::RenameExchange { from, to } => fs_open::rename_exchange(from, to),
            Self::RenameWhiteout { from, to } => fs_open::rename_whiteout(from, to),
            Self::OpathReopen { path } => fs_open::opath_reopen(path),
            Self::OpathLink { src, dst } => fs_open::opath_link(src, dst, false),
            Self::OpathLinkEmpty { src, dst } => fs_open::opath_link(src, dst, true),
            Self::OpathExec { path } => fs_open::opath_exec(path),
            Self::HandleOpen { path, dir } => fs_open::handle_open(path, dir),
            Self::Setxattr { path, name } => fs_attr::setxattr(path, name.as_deref()),
            Self::SetflagsRaw { path, flags } => fs_attr::setflags_raw(path, flags),
            Self::Ioctl { path, cmd } => fs_attr::ioctl(path, cmd),
            Self::Removexattr { path, name } => fs_attr::removexattr(path, name),
            Self::SetAcl { path } => fs_attr::set_acl(path),
            Self::Utimes { path } => fs_attr::utimes(path),
            Self::UringUnlinkat { path } => uring::uring_unlinkat(path),
            Self::UringRenameat { from, to } => uring::uring_renameat(from, to),
            Self::UringLinkat { from, to } => uring::uring_linkat(from, to),
            Self::UringSendmsg { addr, port } => uring::uring_sendmsg(addr, port),
            Self::ProcCwdRead { pid, rel } => mount::proc_cwd_read(pid, rel),
            Self::ProcMem { pid } => process::proc_mem(pid),
            Self::CgroupCloneInto { cgroup, path } => process::cgroup_clone_into(cgroup, path),
            Self::ChrootRead { root, path } => mount::chroot_read(root, path),
            Self::InotifyWatch { path } => fs_attr::inotify_watch(path),
            Self::ListenSend { port } => net::listen_send(port),
            Self::Bind { proto, addr, port } => net::bind(proto, addr, port),
            Self::RtnlAddaddr { ip } => net::rtnl_addaddr(ip),
            Self::PerfPid { pid } => process::perf_pid(pid),
            Self::Tiocsti { args } => process::tiocsti(args),
            Self::SrrSendto {
                hop,
                addr,
                port,
                text,
            } => net::srr_sendto(hop, addr, port, text),
            Self::PrlimitCpu { pid } => process::prlimit_cpu(pid),
            Self::Setpriority { pid } => process::setpriority(pid),
            Self::IoprioIdle { pid } => process::ioprio_idle(pid),
            Self::Setaffinity { pid } => process::setaffinity(pid),
            Self::FanotifyDeny { path, secs } => fs_attr::fanotify_deny(path, secs),
            Self::MountSetattrRo { path } => mount::mount_setattr_ro(path),
            Self::FspickRo { path } => mount::fspick_ro(path),
            Self::Fd3Open { rel } => fs_open::fd3(rel, fs_open::Fd3::Open),
            Self::Fd3Create { rel } => fs_open::fd3(rel, fs_open::Fd3::Create),
            Self::Fd3Exec { rel } => fs_open::fd3(rel, fs_open::Fd3::Exec),
            Self::FsmountCreate {} => mount::fsmount_create(),
            Self::ShmOwn {} => system::shm_own(),
            Self::Sethostname { name } => system::sethostname(name),
            Self::RebootCadOff {} => system::reboot_cad_off(),
            Self::SyslogRead { marker } => system::syslog_read(marker),
            Self::Setflags { path, sign } => fs_attr::setflags(path, sign),
            Self::Getxattr { path, name } => fs_attr::getxattr(path, name),
            Self::Readlink { path } => fs_open::readlink(path),
            Self::ShmRead { key } => system::shm_read(key),
            Self::AddKey { desc, data } => system::add_key(desc, data),
            Self::KeyRead { desc } => system::key_read(desc),
            Self::KexecUnload {} => system::kexec_unload(),
            Self::FinitModule { path } => system::finit_module(path),
            Self::InitModuleGarbage {} => system::init_module_garbage(),
            Self::Kcmp { pid } => process::kcmp(pid),
            Self::ProcessMadvise { pid } => process::process_madvise(pid),
            Self::SetnsPidfd { pid } => process::setns_pidfd(pid),
            Self::FutimensRo { path } => fs_attr::futimens_ro(path),
            Self::FsetxattrRo { path, name } => fs_attr::fsetxattr_ro(path, name),
            Self::UringFsetxattrRo { path, name } => uring::uring_fsetxattr_ro(path, name),
            Self::UringPersonalityOpenat { path } => uring::uring_personality_openat(path),
            Self::UringAsyncAfterCapset { allowed, path } => {
                uring::uring_async_after_capset(allowed, path)
            }
            Self::RtnlBatch { ip } => net::rtnl_batch(ip),
        }
    }
}
