// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * bee's LSM programs (proving skeleton).
 *
 * A task is "scoped" when its cgroup v2 id is a key of `bee_scopes`. For
 * scoped tasks only, opening or executing a file is denied with -EPERM unless
 * the file's inode is in `bee_placeholder_allow`. That inode set is a
 * placeholder matcher: the compiled path matcher replaces it. Denials (and,
 * with BEE_SCOPE_AUDIT_ALLOWED, allowed operations) are reported on the
 * `bee_events` ring buffer with the file's path.
 *
 * CO-RE: field offsets come from vmlinux.h and are relocated by the loader
 * against the running kernel's BTF, so one object serves 6.1 and 6.12.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bee.h"

/* LSM programs must be GPL-compatible to use bpf_d_path. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* cgroup v2 id → scope. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct bee_scope);
} bee_scopes SEC(".maps");

/* Placeholder matcher: inodes every scope may open and execute. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct bee_inode_key);
	__type(value, __u32);
} bee_placeholder_allow SEC(".maps");

/* Per-CPU scratch for building one event (too big for the 512-byte stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bee_event);
} bee_event_buf SEC(".maps");

/* Audit events for user space. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} bee_events SEC(".maps");

/* Placeholder matcher: is the inode behind `file` in the allow set? */
static __always_inline int placeholder_inode_allowed(struct file *file)
{
	struct bee_inode_key key = {};

	key.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	key.ino = BPF_CORE_READ(file, f_inode, i_ino);
	return bpf_map_lookup_elem(&bee_placeholder_allow, &key) != NULL;
}

/* Reports one decision on `bee_events`; drops it if the buffer is full. */
static __always_inline void emit_event(enum bee_hook hook, __u64 cgroup_id,
				       const struct bee_scope *scope,
				       struct file *file, __s32 err)
{
	__u32 zero = 0;
	struct bee_event *ev = bpf_map_lookup_elem(&bee_event_buf, &zero);

	if (!ev)
		return;
	/* Zeroed on every use: no bytes of an earlier path can leak out, and
	 * the 6.1 verifier wants bpf_d_path's buffer initialised. */
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->cgroup_id = cgroup_id;
	ev->pid = bpf_get_current_pid_tgid() >> 32;
	ev->hook = hook;
	ev->err = err;
	ev->policy_id = scope->policy_id;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	/* f_path is const in newer kernels; bpf_d_path does not write it. */
	if (bpf_d_path((struct path *)&file->f_path, ev->path, sizeof(ev->path)) < 0)
		ev->flags |= BEE_EVENT_PATH_ERROR;
	bpf_ringbuf_output(&bee_events, ev, sizeof(*ev), 0);
}

/* The decision shared by every file hook: 0 to allow, -EPERM to deny. */
static __always_inline int check_file(enum bee_hook hook, struct file *file)
{
	__u64 cgroup_id = bpf_get_current_cgroup_id();
	struct bee_scope *scope = bpf_map_lookup_elem(&bee_scopes, &cgroup_id);
	int deny;

	if (!scope)
		return 0;
	deny = !placeholder_inode_allowed(file);
	if (deny || (scope->flags & BEE_SCOPE_AUDIT_ALLOWED))
		emit_event(hook, cgroup_id, scope, file, deny ? BEE_EPERM : 0);
	/* Keep `deny` an opaque register: without the barrier clang may fold the
	 * branch below into arithmetic whose range the verifier cannot bound to
	 * the [-4095, 0] an LSM program must return. */
	asm volatile("" : "+r"(deny));
	if (deny)
		return -BEE_EPERM;
	return 0;
}

SEC("lsm/file_open")
int BPF_PROG(bee_file_open, struct file *file)
{
	return check_file(BEE_HOOK_FILE_OPEN, file);
}

SEC("lsm/bprm_check_security")
int BPF_PROG(bee_bprm_check, struct linux_binprm *bprm)
{
	return check_file(BEE_HOOK_BPRM_CHECK, bprm->file);
}
