/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Map layouts shared by bee's BPF programs and user space. Every struct is
 * laid out without implicit padding (explicit `reserved` fields instead), so
 * the Rust `#[repr(C)]` mirrors have the same size on both sides.
 */
#ifndef BEE_H
#define BEE_H

/* Returned by a hook to deny the operation (`-EPERM`). */
#define BEE_EPERM 1

/* Size of `bee_event.path`, including the terminating NUL. */
#define BEE_PATH_MAX 256
/* Size of `bee_event.comm` (the kernel's TASK_COMM_LEN). */
#define BEE_COMM_LEN 16

/* Value of `bee_scopes`, keyed by a cgroup v2 id (u64). */
struct bee_scope {
	__u32 policy_id; /* opaque id user space gave the scope's policy */
	__u32 flags;     /* BEE_SCOPE_* */
};

/* Also report allowed operations of this scope, not only denials. */
#define BEE_SCOPE_AUDIT_ALLOWED (1U << 0)

/*
 * Key of `bee_placeholder_allow`: an inode named by device and inode number.
 * `dev` is the kernel's encoding, (major << 20) | minor, which differs from
 * the st_dev that stat(2) returns.
 */
struct bee_inode_key {
	__u64 dev;
	__u64 ino;
};

/* Which hook produced an event. */
enum bee_hook {
	BEE_HOOK_FILE_OPEN = 1,
	BEE_HOOK_BPRM_CHECK = 2,
};

/* bee_event.flags: bpf_d_path failed; `path` holds no (or a partial) path. */
#define BEE_EVENT_PATH_ERROR (1U << 0)

/* One audit record on the `bee_events` ring buffer (304 bytes). */
struct bee_event {
	__u64 cgroup_id;            /* cgroup v2 id of the acting task */
	__u32 pid;                  /* thread-group id (user-space pid) */
	__u32 hook;                 /* enum bee_hook */
	__s32 err;                  /* errno returned: BEE_EPERM, or 0 if allowed */
	__u32 policy_id;            /* bee_scope.policy_id of the scope */
	__u32 flags;                /* BEE_EVENT_* */
	__u32 reserved;             /* zero; keeps comm at offset 32 */
	char comm[BEE_COMM_LEN];    /* task comm, NUL-terminated */
	char path[BEE_PATH_MAX];    /* bpf_d_path of the file, NUL-terminated */
};

#endif /* BEE_H */
