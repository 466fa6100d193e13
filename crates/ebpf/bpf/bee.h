/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Kernel-side constants and per-CPU scratch layouts of bee.bpf.c. The map
 * layouts shared with user space are in bee_common.h (crates/common/include).
 */
#ifndef BEE_H
#define BEE_H

/* Returned (negated) by a hook to deny the operation. */
#define BEE_EPERM 1

/* uapi values vmlinux.h does not carry (they are #defines in the kernel). */
#define BEE_FMODE_READ 0x1
#define BEE_FMODE_WRITE 0x2
#define BEE___FMODE_EXEC 0x20 /* include/linux/fs.h, in f_flags of an exec open */
#define BEE_O_TRUNC 01000 /* include/uapi/asm-generic/fcntl.h */
#define BEE_PROT_EXEC 0x4
#define BEE_F_SETOWN 8 /* include/uapi/asm-generic/fcntl.h */
#define BEE_F_SETOWN_EX 15
#define BEE_F_OWNER_TID 0
#define BEE_F_OWNER_PID 1
#define BEE_F_OWNER_PGRP 2
#define BEE_FIOSETOWN 0x8901 /* include/uapi/asm-generic/sockios.h */
#define BEE_SIOCSPGRP 0x8902
/* include/uapi/linux/fs.h: inode flags (immutable, append-only…) and the
 * fsxattr flags and project id of the file an ioctl is issued on. */
#define BEE_FS_IOC_SETFLAGS 0x40086602 /* _IOW('f', 2, long) */
#define BEE_FS_IOC32_SETFLAGS 0x40046602 /* _IOW('f', 2, int) */
#define BEE_FS_IOC_FSSETXATTR 0x401c5820 /* _IOW('X', 32, struct fsxattr) */
#define BEE_FS_IOC_SETVERSION 0x40087602 /* _IOW('v', 2, long) */
#define BEE_FS_IOC32_SETVERSION 0x40047602 /* _IOW('v', 2, int) */
/* include/uapi/linux/fsverity.h, fscrypt.h: a file made read-only for good,
 * an (empty) directory's encryption policy. */
#define BEE_FS_IOC_ENABLE_VERITY 0x40806685 /* _IOW('f', 133, struct fsverity_enable_arg) */
#define BEE_FS_IOC_SET_ENCRYPTION_POLICY 0x800c6613 /* _IOR('f', 19, fscrypt_policy_v1) */
/* Freezing a filesystem (include/uapi/linux/fs.h) and terminal input
 * injection or console redirection (include/uapi/asm-generic/ioctls.h). */
#define BEE_FIFREEZE 0xc0045877
#define BEE_FITHAW 0xc0045878
#define BEE_TIOCSTI 0x5412
#define BEE_TIOCCONS 0x541d
#define BEE_AF_UNSPEC 0
#define BEE_AF_UNIX 1
#define BEE_AF_INET 2
#define BEE_AF_INET6 10
#define BEE_AF_NETLINK 16
#define BEE_SOCK_STREAM 1
#define BEE_SOCK_DGRAM 2
#define BEE_SOCK_TYPE_MASK 0xf
#define BEE_NETLINK_ROUTE 0
#define BEE_IPPROTO_TCP 6
#define BEE_IPPROTO_UDP 17
#define BEE_IPPROTO_MPTCP 262
#define BEE_CLONE_INTO_CGROUP 0x200000000ULL /* include/uapi/linux/sched.h */
#define BEE_S_IFMT 00170000 /* include/uapi/linux/stat.h */
#define BEE_S_IFCHR 0020000
#define BEE_S_IFBLK 0060000
#define BEE_S_IFDIR 0040000
#define BEE_S_ISUID 0004000
#define BEE_S_ISGID 0002000
/* include/uapi/linux/netlink.h, rtnetlink.h */
#define BEE_NLMSG_HDRLEN 16
#define BEE_NLMSG_MIN_TYPE 0x10
#define BEE_NLM_F_REQUEST 0x1
/*
 * Capabilities that act on the host as a whole rather than on anything a
 * policy names (numbers: include/uapi/linux/capability.h): interface and
 * firewall configuration, raw packets and IP options, other users' IPC
 * objects, modules, raw I/O, process accounting, CAP_SYS_ADMIN's grab bag
 * (mounts, namespaces, hostname, fanotify permission events…), reboot and
 * kexec, other processes' priorities and limits, the clock, terminals, audit,
 * MAC policy, the kernel log, alarms, suspend, checkpoint/restore, immutable
 * files. Capabilities whose use reaches a hook that decides by path or target
 * (DAC, ownership, mknod, chroot, ptrace, kill, perfmon, bpf, setuid…) are
 * left to those hooks.
 */
#define BEE_CAP_BIT(c) (1ULL << (c))
#define BEE_CAPS_DENIED                                                                  \
	(BEE_CAP_BIT(9) /* LINUX_IMMUTABLE */ | BEE_CAP_BIT(12) /* NET_ADMIN */ |        \
	 BEE_CAP_BIT(13) /* NET_RAW */ | BEE_CAP_BIT(15) /* IPC_OWNER */ |               \
	 BEE_CAP_BIT(16) /* SYS_MODULE */ | BEE_CAP_BIT(17) /* SYS_RAWIO */ |            \
	 BEE_CAP_BIT(20) /* SYS_PACCT */ | BEE_CAP_BIT(21) /* SYS_ADMIN */ |             \
	 BEE_CAP_BIT(22) /* SYS_BOOT */ | BEE_CAP_BIT(23) /* SYS_NICE */ |               \
	 BEE_CAP_BIT(24) /* SYS_RESOURCE */ | BEE_CAP_BIT(25) /* SYS_TIME */ |           \
	 BEE_CAP_BIT(26) /* SYS_TTY_CONFIG */ | BEE_CAP_BIT(29) /* AUDIT_WRITE */ |      \
	 BEE_CAP_BIT(30) /* AUDIT_CONTROL */ | BEE_CAP_BIT(32) /* MAC_OVERRIDE */ |      \
	 BEE_CAP_BIT(33) /* MAC_ADMIN */ | BEE_CAP_BIT(34) /* SYSLOG */ |                \
	 BEE_CAP_BIT(35) /* WAKE_ALARM */ | BEE_CAP_BIT(36) /* BLOCK_SUSPEND */ |        \
	 BEE_CAP_BIT(37) /* AUDIT_READ */ | BEE_CAP_BIT(40) /* CHECKPOINT_RESTORE */)
/* include/linux/security.h: a capability probe that must not be audited. */
#define BEE_CAP_OPT_NOAUDIT (1 << 1)

/* include/linux/fs.h: ia_valid bits of struct iattr. */
#define BEE_ATTR_SIZE (1 << 3)
#define BEE_ATTR_ATIME (1 << 4)
#define BEE_ATTR_MTIME (1 << 5)
#define BEE_ATTR_ATIME_SET (1 << 7)
#define BEE_ATTR_MTIME_SET (1 << 8)
/* Mounts of one superblock the inode hooks look at, and how many names of a
 * dentry (mounts of the caller's namespace whose root is above it) they check. */
#define BEE_SB_MOUNTS_SCAN 64
#define BEE_INODE_NAMES 4
/* Messages of one netlink send the hook reads; a send with more is denied. */
#define BEE_NLMSGS_MAX 64

/* Superblock magics of pseudo filesystems whose files have no path a policy
 * could name (include/uapi/linux/magic.h). */
#define BEE_PIPEFS_MAGIC 0x50495045
#define BEE_SOCKFS_MAGIC 0x534F434B
#define BEE_ANON_INODE_FS_MAGIC 0x09041934
/* procfs (whose caller-own entries are named self), and the filesystems learn mode never
 * lets a scope write (include/uapi/linux/magic.h). */
#define BEE_PROC_SUPER_MAGIC 0x9fa0
#define BEE_CGROUP_SUPER_MAGIC 0x27e0eb
#define BEE_CGROUP2_SUPER_MAGIC 0x63677270
#define BEE_BPF_FS_MAGIC 0xcafe4a11
#define BEE_SYSFS_MAGIC 0x62656572
#define BEE_SECURITYFS_MAGIC 0x73636673
#define BEE_DEBUGFS_MAGIC 0x64626720
#define BEE_TRACEFS_MAGIC 0x74726163
#define BEE_BINFMTFS_MAGIC 0x42494e4d

/*
 * The path buffer. A path is assembled backwards from the dentry chain: the
 * leaf's name ends at BEE_PATH_END and each parent is written in front of it,
 * so the finished path is buf[pos .. BEE_PATH_END). At most BEE_PATH_MAX - 1
 * bytes fit (the same limit as bee_common::walk_state); a longer path is
 * denied as truncated. The slack after BEE_PATH_END keeps every bounded write
 * provably inside the buffer.
 */
#define BEE_PATH_END 4096
#define BEE_PATH_MASK 4095 /* indices are masked with this for the verifier */
#define BEE_PATH_BUF (BEE_PATH_MASK + 1 + 256)
/* 4095 bytes hold at most 2047 one-byte segments. */
#define BEE_SEGS_MAX 2048
/* Dentries and mount crossings visited per resolution. */
#define BEE_RESOLVE_STEPS 4096
/* Steps of one glob match: (name + 1) * (pattern + name + 1) bounds the
 * greedy matcher with one backtrack point. */
#define BEE_GLOB_STEPS (256 * 320)

/* Loop state of the bpf_loop callbacks. It lives in the task's map value,
 * not on the stack: the verifier tracks no values in map memory, so every
 * iteration of a callback looks the same to it and verification converges at
 * once (on the stack, precise counters make each iteration a new state). */
/* bee_dns_peers value: the name server a steered socket addressed (network byte order;
 * IPv4 in addr[0]). */
struct bee_dns_peer {
	__u32 addr[4];
	__u16 family; /* BEE_AF_INET or BEE_AF_INET6 */
	__u16 _pad;
};

struct resolve_ctx {
	__u64 dentry; /* struct dentry * */
	__u64 mnt;    /* struct mount * */
	__u64 ns_root; /* struct mount *: the root of the caller's mount namespace */
	__u32 pos;    /* the path so far is buf[pos .. BEE_PATH_END) */
	__u32 nsegs;
	__u32 flags; /* BEE_EVENT_PATH_* */
	__u32 done;
};

struct glob_ctx {
	__u32 glob;  /* glob array index */
	__u32 off;   /* segment offset in buf */
	__u32 nlen;  /* segment length */
	__u32 plen;  /* pattern length */
	__u32 p, n;  /* cursors */
	__u32 sp, sn; /* backtrack point: the last '*' and the name offset it took */
	__u32 resume;
	__u32 result; /* 0 running, 1 match, 2 mismatch, 3 error */
};

struct globs_ctx {
	__u32 first; /* the state's glob_first */
	__u32 count;
	__u32 off, len; /* the segment */
	__u32 mask;
	__u32 error;
};

struct walk_ctx {
	__u32 state;
	__u32 nsegs; /* segments to walk: first, first - 1, ... */
	__u32 first; /* the segment walked first (the one nearest the root) */
	__u32 error;
};

/* Segment i (0 = the leaf) is buf[seg_off[i] .. seg_off[i] + seg_len[i]). */
struct bee_segs {
	__u16 seg_off[BEE_SEGS_MAX];
	__u8 seg_len[BEE_SEGS_MAX];
};

_Static_assert(sizeof(struct bee_segs) <= 8000, "task storage values stay below 8 KiB");

/* The names of an inode hook's dentry (inode_denied): the walk over the
 * mounts of its superblock, checking each name in the caller's namespace. */
struct inode_ctx {
	__u64 node;      /* the next list node (s_mounts list) or mount (mnt_next_for_sb) */
	__u64 head;      /* &sb->s_mounts, where the list ends (list layout) */
	__u64 ns;        /* the caller's struct mnt_namespace * */
	__u64 dentry;    /* struct dentry *: the inode hook's dentry */
	__u64 first_mnt; /* struct mount * of the first name that resolved, or 0 */
	__u64 last_mnt;  /* struct mount * of the last resolve */
	__u32 names;     /* names that resolved, none writable */
	__u32 start;     /* the scope's start state */
	__u32 allowed;   /* a name carries WRITE */
	__u32 last_pos, last_flags; /* the last resolve (for the event) */
};

/* The task's path buffer and loop state (task storage). Task storage is
 * allocated with kmalloc_nolock() from Linux 6.19, which serves at most 8 KiB:
 * the segment table lives in a storage of its own (struct bee_segs). */
struct bee_path {
	__u8 buf[BEE_PATH_BUF];
	struct bee_edge_short ks;
	struct bee_edge_long kl;
	/* walk_step's combo key, here rather than on its stack: on 6.1 the
	 * chain file_open -> walk_path -> walk_step -> glob_one -> glob_step
	 * must fit the 512 bytes of stack all frames share. */
	struct bee_combo combo;
	struct resolve_ctx rc;
	struct walk_ctx wc;
	struct globs_ctx gsc;
	struct glob_ctx gc;
	struct inode_ctx ic;
};

_Static_assert(sizeof(struct bee_path) <= 8000, "task storage values stay below 8 KiB");

/*
 * The directory cache (see docs/enforcement.md, "The directory cache"): keyed
 * by a directory inode's address, the automaton state after the directory's
 * path, for up to BEE_DIRCACHE_SLOTS policies (slot = policy_id % SLOTS).
 * An entry is used only when every field still matches.
 */
#define BEE_DIRCACHE_SLOTS 4
/* Mounts between a directory and its namespace root that a cached path may
 * cross (a deeper chain is never cached). */
#define BEE_DIRCACHE_MOUNTS 32
/* An entry is used for at most this long (ns) after its path was read. The
 * rename sequence it is keyed by is 32 bits, so it comes back to the same
 * value after 2^31 moves; each is a write section of a global spinlock, and
 * 2^31 of them cannot fit in one second (that would be under 0.5 ns each). */
#define BEE_DIRCACHE_TTL_NS 1000000000ULL

/* Leaf memos (docs/enforcement.md, "The directory cache"): per slot, the
 * state after the last few leaf names walked from the slot's state. A memo is
 * a pure function of (from, name), so it is used only when `from` is the
 * slot's state and the name matches byte for byte; names longer than
 * BEE_LEAF_NAME bytes are never memoised. Memo j holds names whose dcache
 * hash has (hash & (BEE_LEAF_MEMOS - 1)) == j. */
#define BEE_LEAF_MEMOS 2
#define BEE_LEAF_NAME 32
#define BEE_LEAF_WORDS (BEE_LEAF_NAME / 8)

struct bee_leafmemo {
	__u64 name[BEE_LEAF_WORDS]; /* the name, zero-padded */
	__u32 len;                  /* its length; 0: empty */
	__u32 from;                 /* the directory state it was walked from */
	__u32 state;                /* the state after it */
	__u32 _pad;
};

/* What a slot is checked against, and the state it holds. */
struct bee_dirkey {
	__u64 gen;      /* rename_lock's sequence when the path was resolved */
	__u64 born;     /* bpf_ktime_get_boot_ns() then */
	__u64 mnt;      /* struct mount * the path was resolved through */
	__u64 ns_seq;   /* its namespace's seq (never reused) */
	__u64 ns_event; /* its namespace's event counter then */
	__u32 policy_id;
	__u32 install;  /* bee_scope.install */
	__u32 start;    /* bee_scope.start_state */
	__u32 state;    /* the state after the directory's path */
	__u32 len;      /* the directory path's length in bytes ("/" is 0) */
	__u32 nsegs;    /* and in segments */
};

struct bee_dirslot {
	struct bee_dirkey key;
	struct bee_leafmemo memo[BEE_LEAF_MEMOS];
};

struct bee_dircache {
	struct bpf_spin_lock lock;
	__u32 _pad;
	__u64 dir; /* the inode address the slots are of (0: none yet) */
	struct bee_dirslot slot[BEE_DIRCACHE_SLOTS];
};

/* A zeroed bee_dircache to insert, as plain bytes (a value holding a
 * bpf_spin_lock cannot be passed to a helper). */
struct bee_dircache_zero {
	__u8 bytes[sizeof(struct bee_dircache)];
};

/* What a hook knows before the path walk, for the cache: a valid key when
 * dircache_probe returned a parent. */
struct dircache_probe {
	__u64 gen;      /* rename_lock's sequence, even */
	__u64 now;      /* bpf_ktime_get_boot_ns() */
	__u64 mnt;
	__u64 ns_seq;
	__u64 ns_event;
	__u32 len;    /* the leaf's name */
	const unsigned char *name;
	__u32 memo;   /* the leaf memo its name goes to */
	__u32 memoable; /* `word` holds the name (len <= BEE_LEAF_NAME) */
	__u64 word[BEE_LEAF_WORDS]; /* the name, zero-padded */
};

/* What a directory cache hit gives besides the state: the entry's mount
 * (struct mount *) and the directory path's length in bytes and segments. */
struct dircache_hit {
	__u64 mnt;
	__u32 len;
	__u32 nsegs;
};

/* Masks v with m in a way the compiler cannot drop as redundant, so the
 * verifier sees the bound even where an earlier comparison implied it. */
#define BEE_BOUND(v, m)                          \
	do {                                     \
		asm volatile("" : "+r"(v));      \
		(v) &= (m);                      \
	} while (0)

#endif /* BEE_H */
