/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * bee's map layouts shared between user space and the kernel programs.
 *
 * This header mirrors crates/common/src (the Rust definitions are the source of truth);
 * crates/common/tests/c_layout.rs compiles it with the host C compiler and compares every
 * size and field offset with Rust's, so the two cannot drift. No struct has implicit padding:
 * explicit _pad fields take its place and must be zero.
 */
#ifndef BEE_COMMON_H
#define BEE_COMMON_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Access bits: automaton accept sets and audit events. */
#define BEE_ACCESS_READ 1u
#define BEE_ACCESS_WRITE 2u /* states accepting WRITE accept READ too */
#define BEE_ACCESS_EXEC 4u
#define BEE_ACCESS_UNIX 8u
#define BEE_ACCESS_EXEC_PINNED 16u /* exec allowed only if (state, dev, ino) is pinned */
#define BEE_ACCESS_NET 32u         /* audit events only */

#define BEE_DEAD_STATE 0u
#define BEE_PATH_MAX 4096
#define BEE_NAME_MAX 255
#define BEE_SHORT_SEGMENT_MAX 48
#define BEE_GLOB_MAX 60
#define BEE_GLOBS_PER_STATE_MAX 8
#define BEE_NET_RULES_MAX 16

#define BEE_PROTO_TCP 1
#define BEE_PROTO_UDP 2

#define BEE_SCOPE_AUDIT_ALLOWS 1u
#define BEE_SCOPE_LEARN 2u /* learn mode: a denial a policy could grant is reported and allowed */
#define BEE_SCOPE_DNS 4u   /* names granted: port 53 steered to bee's resolver, answers map read */
/* Slots of bee_scope_slots: the number of scopes whose cgroup id is congruent to the slot
 * modulo this power of two. A zero slot proves a task is in no scope. */
#define BEE_SCOPE_SLOTS 4096u

#define BEE_DNS_PORT 53
#define BEE_DOT_PORT 853

#define BEE_EVENT_ALLOWED 1
#define BEE_EVENT_PATH_TRUNCATED 2
#define BEE_EVENT_PATH_UNRESOLVED 4
#define BEE_EVENT_REPARENT 8 /* a directory move between places granted differently below */
#define BEE_EVENT_LEARNED 16 /* denied by the policy, allowed by learn mode */
#define BEE_EVENT_NESTED 32 /* user space only: logged by the scope's own nested Landlock domain */

/* Hook ids (bee_common::Hook); ABI, never reused. */
enum bee_hook {
	BEE_HOOK_FILE_OPEN = 1,
	BEE_HOOK_BPRM_CHECK_SECURITY = 2,
	BEE_HOOK_MMAP_FILE = 3,
	BEE_HOOK_FILE_MPROTECT = 4,
	BEE_HOOK_PATH_UNLINK = 5,
	BEE_HOOK_PATH_RMDIR = 6,
	BEE_HOOK_PATH_MKDIR = 7,
	BEE_HOOK_PATH_MKNOD = 8,
	BEE_HOOK_PATH_RENAME = 9,
	BEE_HOOK_PATH_LINK = 10,
	BEE_HOOK_PATH_SYMLINK = 11,
	BEE_HOOK_PATH_TRUNCATE = 12,
	BEE_HOOK_PATH_CHMOD = 13,
	BEE_HOOK_PATH_CHOWN = 14,
	BEE_HOOK_SOCKET_CONNECT = 15,
	BEE_HOOK_SOCKET_SENDMSG = 16,
	BEE_HOOK_UNIX_STREAM_CONNECT = 17,
	BEE_HOOK_UNIX_MAY_SEND = 18,
	BEE_HOOK_BPF = 19,
	BEE_HOOK_PTRACE_ACCESS_CHECK = 20,
	BEE_HOOK_TASK_KILL = 21,
	BEE_HOOK_SB_MOUNT = 22,
	BEE_HOOK_FILE_TRUNCATE = 23,
	BEE_HOOK_PATH_NOTIFY = 24,
	BEE_HOOK_TASK_ALLOC = 25,
	BEE_HOOK_NETLINK_SEND = 26,
	BEE_HOOK_SOCKET_LISTEN = 27,
	BEE_HOOK_SOCKET_ACCEPT = 28,
	BEE_HOOK_PERF_EVENT_OPEN = 29,
	BEE_HOOK_INODE_SETATTR = 30,
	BEE_HOOK_INODE_SETXATTR = 31,
	BEE_HOOK_INODE_REMOVEXATTR = 32,
	BEE_HOOK_SOCKET_CREATE = 33,
	BEE_HOOK_USERNS_CREATE = 34,
	BEE_HOOK_FILE_IOCTL = 35,
	BEE_HOOK_CAPABLE = 36,
	BEE_HOOK_SYSLOG = 37,
	BEE_HOOK_KEY_PERMISSION = 38,
	BEE_HOOK_IPC_PERMISSION = 39,
	BEE_HOOK_TASK_SETSCHEDULER = 40,
	BEE_HOOK_TASK_SETRLIMIT = 41,
	BEE_HOOK_DNS_QUERY = 42, /* bee's resolver (user space), never a kernel program */
	BEE_HOOK_SECCOMP = 43, /* the Landlock engine's seccomp filter (user space), never a kernel program */
	BEE_HOOK_URING_OVERRIDE_CREDS = 44,
	BEE_HOOK_SOCKET_BIND = 45,
};

/*
 * The path walk (bee_common::walk_state is the reference; the kernel must do exactly this):
 *
 *   state = scope->start_state;
 *   for each '/'-separated segment s of the path, skipping empty ones:
 *       if (state == BEE_DEAD_STATE) break;                 (deny: accept is 0)
 *       if (len(s) > BEE_NAME_MAX) deny;
 *       st = states[state];                                  (missing: deny)
 *       next = edge_short/edge_long[{state, len(s), s}];     (by len(s) <= 48)
 *       if found: state = next; continue;
 *       if (st->glob_count == 0) { state = st->default_next; continue; }
 *       mask = 0;
 *       for i in 0 .. st->glob_count (at most 8):
 *           if glob_matches(globs[st->glob_first + i], s) mask |= 1 << i;
 *       next = mask ? combos[{st->glob_first, mask}] : missing;
 *       state = found ? next : st->default_next;
 *   accept = state == BEE_DEAD_STATE ? 0 : states[state].accept;
 *
 * glob_matches: '*' matches any run of bytes; greedy with one backtrack point (the last '*'):
 * on a mismatch resume one byte further after that '*'; at the end only '*'s may remain.
 * A pinned exec is allowed iff accept has BEE_ACCESS_EXEC, or accept has
 * BEE_ACCESS_EXEC_PINNED and exec_pins[{state, inode->i_sb->s_dev, inode->i_ino}] exists.
 */

/* Scope map: hash, key __u64 cgroup id. */
struct bee_scope {
	__u32 policy_id;
	__u32 flags; /* BEE_SCOPE_* */
	__u32 start_state;
	__u32 install; /* never 0; unique per install in one engine: keys the directory cache */
};

/* State array value. */
struct bee_state {
	__u32 accept; /* BEE_ACCESS_* */
	__u32 default_next;
	__u32 glob_first; /* also the state's glob group: the combo key */
	__u32 glob_count; /* 0..=8 */
	__u32 move_class; /* a directory moves only between paths of one move class */
};

/* Literal edge keys (hash) -> __u32 next state. Segments of 1..=48 bytes use the short map,
 * 49..=255 the long one; name is zero-filled past len. */
struct bee_edge_short {
	__u32 state;
	__u32 len;
	__u8 name[BEE_SHORT_SEGMENT_MAX];
};

struct bee_edge_long {
	__u32 state;
	__u32 len;
	__u8 name[BEE_NAME_MAX + 1];
};

/* Glob array value: a star segment, '*' matches any run of bytes. */
struct bee_glob {
	__u32 len;
	__u8 pattern[BEE_GLOB_MAX];
};

/* Combo map (hash) -> __u32 next state; a missing entry means default_next.
 * group is the state's glob_first: states with equal glob groups share their combos. */
struct bee_combo {
	__u32 group;
	__u32 mask;
};

/* Exec pin map (hash) -> __u32 policy id. dev is MKDEV(major, minor) = major << 20 | minor. */
struct bee_exec_pin {
	__u32 state;
	__u32 dev;
	__u64 ino;
};

/* LPM trie keys: data = policy id (host order) then address (network order);
 * prefixlen = 32 + address prefix length. */
struct bee_lpm_v4 {
	__u32 prefixlen;
	__u32 policy_id;
	__u8 addr[4];
};

struct bee_lpm_v6 {
	__u32 prefixlen;
	__u32 policy_id;
	__u8 addr[16];
};

struct bee_port_rule {
	__u16 first; /* host byte order */
	__u16 last;  /* inclusive */
	__u8 protocols; /* BEE_PROTO_* */
	__u8 _pad[3];
};

struct bee_net_value {
	__u32 count;
	__u32 _pad;
	struct bee_port_rule rules[BEE_NET_RULES_MAX];
};

/* DNS map: hash, key __u64 scope cgroup id. */
struct bee_dns {
	__u16 port; /* host byte order, on 127.0.0.1 (and [::1] when v6) */
	__u8 v6;
	__u8 _pad[5];
};

/* Gate map (gate.bpf.c, the Landlock engine's network gate): hash, key __u64 scope cgroup id. */
struct bee_gate_scope {
	__u32 gate_id; /* the policy_id of the scope's keys in bee_gate_v4/v6 */
	__u32 flags;   /* BEE_SCOPE_DNS */
};

/* Answers map: hash. IPv4 addresses in their IPv4-mapped form (::ffff:a.b.c.d). */
struct bee_answer_key {
	__u64 cgroup_id;
	__u8 addr[16];
};

struct bee_answer {
	__u64 expires_ns; /* CLOCK_BOOTTIME (bpf_ktime_get_boot_ns) */
	struct bee_net_value ports;
};

/* Ring buffer record. */
struct bee_event {
	__u64 cgroup_id;
	__u32 pid;  /* thread id */
	__u32 tgid; /* process id */
	__u32 hook; /* enum bee_hook */
	__s32 error;
	__u32 policy_id;
	__u32 access; /* BEE_ACCESS_* */
	__u8 comm[16];
	__u16 family;
	__u16 port; /* host byte order; capable: the capability number */
	__u8 protocol;
	__u8 flags; /* BEE_EVENT_* */
	__u16 _pad0;
	__u8 addr[16];
	__u32 path_len;
	__u32 _pad1;
	__u8 path[BEE_PATH_MAX];
};

_Static_assert(sizeof(struct bee_scope) == 16, "bee_scope");
_Static_assert(sizeof(struct bee_state) == 20, "bee_state");
_Static_assert(sizeof(struct bee_edge_short) == 56, "bee_edge_short");
_Static_assert(sizeof(struct bee_edge_long) == 264, "bee_edge_long");
_Static_assert(sizeof(struct bee_glob) == 64, "bee_glob");
_Static_assert(sizeof(struct bee_combo) == 8, "bee_combo");
_Static_assert(sizeof(struct bee_exec_pin) == 16, "bee_exec_pin");
_Static_assert(sizeof(struct bee_lpm_v4) == 12, "bee_lpm_v4");
_Static_assert(sizeof(struct bee_lpm_v6) == 24, "bee_lpm_v6");
_Static_assert(sizeof(struct bee_port_rule) == 8, "bee_port_rule");
_Static_assert(sizeof(struct bee_net_value) == 136, "bee_net_value");
_Static_assert(sizeof(struct bee_dns) == 8, "bee_dns");
_Static_assert(sizeof(struct bee_gate_scope) == 8, "bee_gate_scope");
_Static_assert(sizeof(struct bee_answer_key) == 24, "bee_answer_key");
_Static_assert(sizeof(struct bee_answer) == 144, "bee_answer");
_Static_assert(sizeof(struct bee_event) == 4176, "bee_event");

#endif /* BEE_COMMON_H */
