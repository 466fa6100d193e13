// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * bee's LSM programs.
 *
 * A task is scoped when its cgroup v2 id is a key of bee_scopes; every other
 * task is left alone. For scoped tasks everything these hooks cover is denied
 * (-EPERM) unless the scope's policy grants it:
 *
 *   files    file_open, file_receive (READ/WRITE by f_mode; exec opens need
 *            EXEC, a pinned EXEC or READ), bprm_check_security (EXEC or a
 *            pinned EXEC), mmap_file and file_mprotect with PROT_EXEC on a
 *            file (EXEC), the path_* hooks (WRITE on every path they change;
 *            path_notify, a watch, needs READ; path_mknod of a device node is
 *            always denied)
 *   network  socket_create (only unix, netlink-route and TCP/UDP/MPTCP over
 *            IPv4/IPv6), socket_connect and socket_sendmsg with an address
 *            (LPM tries + port rules), unix_stream_connect and unix_may_send
 *            (the peer's bound path needs UNIX), socket_listen and
 *            socket_accept (unix sockets bound to a path only), netlink_send
 *            (NETLINK_ROUTE reads); with name grants (BEE_SCOPE_DNS) port 53
 *            goes to bee's resolver (cgroup programs, "DNS steering" below),
 *            port 853 is denied, and the resolver's live answers are peers
 *   escapes  bpf, sb_mount, sb_umount, sb_pivotroot, move_mount,
 *            userns_create, perf_event_open (always denied), task_alloc
 *            (CLONE_INTO_CGROUP), ptrace_access_check and task_kill (denied
 *            when the target is outside the caller's cgroup), file_fcntl and
 *            file_ioctl (an fd owner other than the caller)
 *
 * Paths are built by walking the dentry chain (d_parent, d_name) and crossing
 * mounts (struct mount: mnt_parent, mnt_mountpoint) with CO-RE reads up to the
 * root of the caller's mount namespace (a walk ending anywhere else is
 * unresolved and denied), so every hook resolves paths the same way on every
 * kernel; bpf_d_path is not used
 * (6.1 refuses it in the path_* hooks and both kernels in file_mprotect).
 * Paths are walked through the segment automaton exactly as
 * bee_common::walk_state does. Every denial (and, with
 * BEE_SCOPE_AUDIT_ALLOWS, every decision) is reported on bee_events. In
 * learn mode (BEE_SCOPE_LEARN) a denial a policy could lift is reported as
 * learned and allowed (see "Learn mode" below).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bee_common.h"
#include "bee.h"

/* LSM programs must be GPL-compatible. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* ---- Maps (layouts: bee_common.h). max_entries are defaults; the loader
 * overrides them before load. Hash maps and tries allocate on insert. */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct bee_scope);
} bee_scopes SEC(".maps");

/* The scope filter in front of bee_scopes: slot cgid % BEE_SCOPE_SLOTS counts the
 * scopes whose cgroup id falls there. User space raises a count before it inserts a scope
 * and lowers it after the scope is deleted, so a zero count proves the task is in no scope:
 * the early return every process on the host pays is an array read the verifier inlines,
 * not a hash lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BEE_SCOPE_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} bee_scope_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 18);
	__type(key, __u32);
	__type(value, struct bee_state);
} bee_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 20);
	__type(key, struct bee_edge_short);
	__type(value, __u32);
} bee_edges_s SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct bee_edge_long);
	__type(value, __u32);
} bee_edges_l SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 14);
	__type(key, __u32);
	__type(value, struct bee_glob);
} bee_globs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 18);
	__type(key, struct bee_combo);
	__type(value, __u32);
} bee_combos SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct bee_exec_pin);
	__type(value, __u32);
} bee_exec_pins SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct bee_lpm_v4);
	__type(value, struct bee_net_value);
} bee_net_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct bee_lpm_v6);
	__type(value, struct bee_net_value);
} bee_net_v6 SEC(".maps");

/* The name grants' maps (bee_dns, bee_answers, bee_dns_ports, bee_dns_peers) and what
 * reads them. */
#include "sockaddr.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} bee_events SEC(".maps");

/* Events the ring buffer had no room for, since load (one counter; event_send). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} bee_events_lost SEC(".maps");

/* The directory cache (bee.h, docs/enforcement.md): keyed by a directory
 * inode's address, the automaton state after its path. An entry is deleted
 * when its inode is freed (bee_inode_free), before the memory can be reused. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 15);
	__type(key, __u64);
	__type(value, struct bee_dircache);
} bee_dircache SEC(".maps");

/* What a new directory cache entry is inserted as: zeroes. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_RDONLY_PROG);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bee_dircache_zero);
} bee_dirzero SEC(".maps");

/* Set by the loader before verification (.rodata, frozen): 0 takes the
 * directory cache out of every program, and the verifier never sees its
 * calls. A kernel whose verifier refuses the cache loads bee with it off and
 * resolves every path in full. */
const volatile __u32 bee_cfg_dircache = 1;

/* Set by the loader (.rodata, frozen): the address of the kernel's
 * rename_lock (from /proc/kallsyms; it has no BTF variable). Its sequence
 * is bumped at the start and at the end of every move of a dentry (d_move,
 * d_exchange, d_splice_alias): odd while one is in flight. 0 leaves the
 * cache unused. */
const volatile __u64 bee_cfg_rename_lock = 0;

/* Written by user space: 1 once the inode_free_security program is attached
 * (an entry must go before its inode's memory is reused); anything else
 * disables the cache. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} bee_cache_on SEC(".maps");

/* SysV IPC objects (struct kern_ipc_perm *) created by scoped tasks, with the
 * scope's cgroup id: a scope may use only its own (ipc_permission). Entries
 * are removed when the object is freed, before its memory is. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, __u64);
	__type(value, __u64);
} bee_ipc SEC(".maps");

/* Per-task scratch (task storage): the path being resolved and the event
 * being built. A program preempted mid-walk (preempt=full, PREEMPT_RT) resumes
 * on its own buffers: another task's check on the same CPU cannot rewrite
 * them, so every decision, and everything the caches remember, is made on the
 * path its own task resolved. Allocated on a scoped task's first check, freed
 * with the task. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct bee_path);
} bee_pathbuf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct bee_segs);
} bee_segbuf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct bee_event);
} bee_evbuf SEC(".maps");

/* The current task's path buffer, created on first use; NULL when it cannot
 * be allocated (every caller then denies). */
static __always_inline struct bee_path *path_buf(void)
{
	return bpf_task_storage_get(&bee_pathbuf, bpf_get_current_task_btf(), 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
}

/* The current task's segment table, created on first use, or NULL. */
static __always_inline struct bee_segs *seg_buf(void)
{
	return bpf_task_storage_get(&bee_segbuf, bpf_get_current_task_btf(), 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
}

/* The current task's event buffer, created on first use, or NULL. */
static __always_inline struct bee_event *event_buf(void)
{
	return bpf_task_storage_get(&bee_evbuf, bpf_get_current_task_btf(), 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
}

/* All zero, never written: the template every event starts from (an event is
 * too large for an inline memset). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_RDONLY_PROG);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bee_event);
} bee_evzero SEC(".maps");

/* ---- Verdicts --------------------------------------------------------- */

/* Returns -EPERM if deny is set, else 0, in a form every verifier can bound
 * to [-4095, 0]: the empty asm keeps clang from folding the branch into
 * arithmetic. */
static __always_inline int verdict(int deny)
{
	asm volatile("" : "+r"(deny));
	if (deny)
		return -BEE_EPERM;
	return 0;
}

/* The scope of cgroup cgid, or NULL: the filter first, then the scope map. */
static __always_inline struct bee_scope *scope_of(__u64 cgid)
{
	__u32 slot = (__u32)cgid & (BEE_SCOPE_SLOTS - 1);
	__u32 *scopes = bpf_map_lookup_elem(&bee_scope_slots, &slot);

	if (scopes && *scopes == 0)
		return NULL;
	return bpf_map_lookup_elem(&bee_scopes, &cgid);
}

/* Whether the current task runs the kernel's own act: under credentials the
 * kernel put in place of the task's own (override_creds, so `cred` is not
 * `real_cred`) that hold a capability of BEE_CAPS_DENIED, which no task of a
 * scope holds (the launch empties the bounding set and sets no_new_privs).
 * overlayfs so opens its layers' files, copies a file up and keeps its
 * trusted.overlay attributes, with its mounter's credentials, inside an act of
 * the task that the hooks decided by the path the task named (Landlock, which
 * decides by the credentials a check runs under, lets the same acts pass).
 * Only the hooks those acts reach ask (own_act_scope): file_open, the inode
 * attribute hooks and capable. Every other hook decides whatever the
 * credentials: the kernel also acts under its own for a task in ways the task
 * steers (a DNS upcall for a name it looked up, dns_query, reaches
 * key_permission), and those stay the task's. Credentials a task of a scope
 * puts in place itself (io_uring runs a request under the submitter's;
 * faccessat(2) under its real ids) are its own, without such a capability,
 * and are decided; an io_uring personality, the one way to run a request under
 * another task's, is refused (uring_override_creds). */
static __always_inline int kernel_acting(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	const struct cred *cur = BPF_CORE_READ(task, cred);
	__u64 eff = 0;

	if (!cur || cur == BPF_CORE_READ(task, real_cred))
		return 0;
	/* kernel_cap_t is one u64 from 6.3 and two u32 (low word first) before:
	 * the same eight bytes. */
	bpf_probe_read_kernel(&eff, sizeof(eff),
			      (void *)cur + bpf_core_field_offset(struct cred, cap_effective));
	return (eff & BEE_CAPS_DENIED) != 0;
}

/* The scope of the current task, or NULL. */
static __always_inline struct bee_scope *current_scope(__u64 *cgid)
{
	*cgid = bpf_get_current_cgroup_id();
	return scope_of(*cgid);
}

/* current_scope for the hooks overlayfs's own acts reach: NULL also while the
 * task runs the kernel's own act (kernel_acting, asked only of a task in a
 * scope: a task outside every scope reads no credentials). */
static __always_inline struct bee_scope *own_act_scope(__u64 *cgid)
{
	struct bee_scope *scope = current_scope(cgid);

	if (scope && kernel_acting())
		return NULL;
	return scope;
}

/* A zeroed event with the task fields filled in, or NULL. */
static __always_inline struct bee_event *event_start(__u32 hook, __u64 cgid,
						     const struct bee_scope *scope,
						     __u32 access, int deny)
{
	__u32 zero = 0;
	struct bee_event *ev = event_buf();
	struct bee_event *blank = bpf_map_lookup_elem(&bee_evzero, &zero);
	__u64 id;

	if (!ev || !blank)
		return NULL;
	/* No bytes of an earlier event may leak into this one. */
	bpf_probe_read_kernel(ev, sizeof(*ev), blank);
	id = bpf_get_current_pid_tgid();
	ev->cgroup_id = cgid;
	ev->pid = (__u32)id;
	ev->tgid = id >> 32;
	ev->hook = hook;
	ev->error = deny ? -BEE_EPERM : 0;
	ev->policy_id = scope->policy_id;
	ev->access = access;
	if (!deny)
		ev->flags |= BEE_EVENT_ALLOWED;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	return ev;
}

/* Sends `ev` on bee_events; an event the ring has no room for is counted in
 * bee_events_lost, so that every scope live while it grew is told its report may miss
 * denials. */
static __always_inline void event_send(struct bee_event *ev)
{
	__u32 zero = 0;
	__u64 *lost;

	if (bpf_ringbuf_output(&bee_events, ev, sizeof(*ev), 0) == 0)
		return;
	lost = bpf_map_lookup_elem(&bee_events_lost, &zero);
	if (lost)
		__sync_fetch_and_add(lost, 1);
}

static __always_inline int should_report(const struct bee_scope *scope, int deny)
{
	return deny || (scope->flags & BEE_SCOPE_AUDIT_ALLOWS);
}

/* What a path check asks for. */
enum need {
	NEED_ACCESS,       /* every bit of `access` */
	NEED_EXEC,         /* EXEC, or EXEC_PINNED with a pin for the inode */
	NEED_EXEC_OR_READ, /* as NEED_EXEC, or READ (opening a binary to run it) */
	NEED_NEVER,        /* denied whatever the policy grants (reported with access 0) */
};

/* ---- Learn mode (BEE_SCOPE_LEARN, docs/enforcement.md "Learn mode") ----
 * A denial that a policy could lift is reported marked BEE_EVENT_LEARNED and
 * then allowed; only a denial whose event was built is ever lifted, so learn
 * mode never allows anything silently. Everything else stays denied: what no
 * policy can grant (decide_family, decide_plain, capable, device nodes),
 * unresolved or truncated paths, non-TCP/UDP peers, and writes to the
 * filesystems through which a scope could leave its cgroup, touch
 * enforcement or change how the host runs programs (cgroup.procs, pins, LSM
 * and tracing knobs, /proc and /sys, binfmt_misc's interpreters). */

/* Whether a write under dentry stays denied in learn mode. */
static __always_inline int learn_fs_refused(struct dentry *dentry)
{
	unsigned long magic = BPF_CORE_READ(dentry, d_sb, s_magic);

	return !dentry || magic == BEE_CGROUP_SUPER_MAGIC || magic == BEE_CGROUP2_SUPER_MAGIC ||
	       magic == BEE_BPF_FS_MAGIC || magic == BEE_SYSFS_MAGIC ||
	       magic == BEE_PROC_SUPER_MAGIC || magic == BEE_SECURITYFS_MAGIC ||
	       magic == BEE_DEBUGFS_MAGIC || magic == BEE_TRACEFS_MAGIC ||
	       magic == BEE_BINFMTFS_MAGIC;
}

/* The deny to enforce for a denial being reported in ev: 0 (and the event
 * marked learned) when the scope learns and the access is learnable. */
static __always_inline int learn_lift(const struct bee_scope *scope, struct bee_event *ev,
				      int learnable)
{
	if (!(scope->flags & BEE_SCOPE_LEARN) || !learnable)
		return 1;
	ev->flags |= BEE_EVENT_LEARNED;
	return 0;
}

/* A path denial is learnable when a policy could name the path and grant the
 * access: resolved, not truncated, not a device node, and not a write to the
 * kernel's own filesystems. */
static __always_inline int path_learnable(const struct bee_event *ev, struct dentry *dentry,
					  __u32 access, enum need need)
{
	if (need == NEED_NEVER)
		return 0;
	if (ev->flags & (BEE_EVENT_PATH_TRUNCATED | BEE_EVENT_PATH_UNRESOLVED))
		return 0;
	if (!ev->path_len)
		return 0;
	if ((access & BEE_ACCESS_WRITE) && learn_fs_refused(dentry))
		return 0;
	return 1;
}

/* A decision reported with no path or peer address, only the access asked
 * for and the socket's address family (0 outside the socket hooks). */
static __always_inline int decide_family(__u32 hook, __u64 cgid, const struct bee_scope *scope,
					 __u32 access, __u16 family, int deny)
{
	if (should_report(scope, deny)) {
		struct bee_event *ev = event_start(hook, cgid, scope, access, deny);

		if (ev) {
			ev->family = family;
			event_send(ev);
		}
	}
	return verdict(deny);
}

/* A decision without a path or address (bpf, mount, ptrace, kill…). */
static __always_inline int decide_plain(__u32 hook, __u64 cgid,
					const struct bee_scope *scope, int deny)
{
	return decide_family(hook, cgid, scope, 0, 0, deny);
}

/* ---- Path resolution: dentry chain → segments ------------------------- */


/* Whether a dentry name (len bytes at name) is the decimal form of id, with no
 * leading zero. */
static __always_inline int name_is_id(const unsigned char *name, __u32 len, __u32 id)
{
	unsigned char buf[16] = {};
	__u32 v = id;
	__u32 n = len;

	if (len == 0 || len > 10)
		return 0;
	/* A bound the verifier keeps (6.1 loses `len & 15` once clang folds it). */
	BEE_BOUND(n, 15);
	if (bpf_probe_read_kernel(buf, n, name))
		return 0;
	for (int i = 0; i < 10; i++) {
		if (i >= len)
			break;
		if (buf[(len - 1 - i) & 15] != '0' + v % 10)
			return 0;
		v /= 10;
	}
	return v == 0 && (len == 1 || buf[0] != '0');
}

/* The caller's own /proc entries are named as a policy names them:
 * /proc/<tgid> as /proc/self, and /proc/<tgid>/task/<tid> of the calling
 * thread as /proc/self/task/self (what a policy's /proc/thread-self means).
 * The kernel resolved the symbolic links /proc/self and /proc/thread-self
 * before any hook, so without this a rule under them would match nothing.
 * Only procfs dentries directly below its root (and task/<tid> below them)
 * are considered; other tasks' entries keep their numbers. */
static __always_inline int proc_self_name(struct dentry *d, struct dentry *parent,
					  const unsigned char *name, __u32 len)
{
	struct proc_fs_info *info;
	struct dentry *root, *gp;
	const unsigned char *pname, *gname;
	unsigned char task[4] = {};
	__u64 id;

	if (BPF_CORE_READ(d, d_sb, s_magic) != BEE_PROC_SUPER_MAGIC)
		return 0;
	/* The ids compared are the initial pid namespace's: a procfs mounted for
	 * another pid namespace (a container's /proc) numbers its entries in that
	 * namespace, so nothing there is named self (a rule under /proc/self then
	 * matches nothing: a deny, never another task's entries). */
	info = BPF_CORE_READ(d, d_sb, s_fs_info);
	if (!info || BPF_CORE_READ(info, pid_ns, level) != 0)
		return 0;
	root = BPF_CORE_READ(d, d_sb, s_root);
	id = bpf_get_current_pid_tgid();
	if (parent == root)
		return name_is_id(name, len, id >> 32);
	/* <tid> in task/ of <tgid> directly below the root. */
	if (BPF_CORE_READ(parent, d_name.len) != 4)
		return 0;
	pname = BPF_CORE_READ(parent, d_name.name);
	if (bpf_probe_read_kernel(task, 4, pname) || task[0] != 't' || task[1] != 'a' ||
	    task[2] != 's' || task[3] != 'k')
		return 0;
	gp = BPF_CORE_READ(parent, d_parent);
	if (!gp || BPF_CORE_READ(gp, d_parent) != root)
		return 0;
	gname = BPF_CORE_READ(gp, d_name.name);
	return name_is_id(name, len, (__u32)id) &&
	       name_is_id(gname, BPF_CORE_READ(gp, d_name.len), id >> 32);
}

static long resolve_step(__u32 i, void *data)
{
	struct bee_path *p = path_buf();
	struct bee_segs *sg = seg_buf();
	struct resolve_ctx *c;
	struct dentry *d, *parent;
	struct mount *m;
	const unsigned char *name;
	__u32 len, w, k;
	int self;

	if (!p || !sg)
		return 1;
	c = &p->rc;
	d = (struct dentry *)c->dentry;
	m = (struct mount *)c->mnt;
	if (d == BPF_CORE_READ(m, mnt.mnt_root)) {
		struct mount *up = BPF_CORE_READ(m, mnt_parent);

		if (up == m || !up) {
			/* Only the root of the caller's mount namespace ends a path. A
			 * detached tree (open_tree(OPEN_TREE_CLONE), fsmount) or a mount of
			 * another namespace has a root of its own, below which any name
			 * could be spelled: such a path is unresolved. */
			if ((__u64)m != c->ns_root)
				c->flags |= BEE_EVENT_PATH_UNRESOLVED;
			c->done = 1;
			return 1;
		}
		c->dentry = (__u64)BPF_CORE_READ(m, mnt_mountpoint);
		c->mnt = (__u64)up;
		return 0;
	}
	parent = BPF_CORE_READ(d, d_parent);
	len = BPF_CORE_READ(d, d_name.len);
	name = BPF_CORE_READ(d, d_name.name);
	if (len == 0 || len > BEE_NAME_MAX) {
		c->flags |= BEE_EVENT_PATH_UNRESOLVED;
		return 1;
	}
	self = parent && parent != d && proc_self_name(d, parent, name, len);
	if (self)
		len = 4;
	k = c->nsegs;
	w = c->pos;
	/* The path would reach BEE_PATH_MAX bytes: the walk refuses such paths. */
	if (k >= BEE_SEGS_MAX || w > BEE_PATH_END || w < len + 1 ||
	    BEE_PATH_END - (w - len - 1) > BEE_PATH_MAX - 1) {
		c->flags |= BEE_EVENT_PATH_TRUNCATED;
		return 1;
	}
	w -= len + 1;
	BEE_BOUND(w, BEE_PATH_MASK);
	BEE_BOUND(len, BEE_NAME_MAX);
	p->buf[w] = '/';
	if (self) {
		p->buf[(w + 1) & BEE_PATH_MASK] = 's';
		p->buf[(w + 2) & BEE_PATH_MASK] = 'e';
		p->buf[(w + 3) & BEE_PATH_MASK] = 'l';
		p->buf[(w + 4) & BEE_PATH_MASK] = 'f';
	} else {
		bpf_probe_read_kernel(&p->buf[(w + 1) & BEE_PATH_MASK], len, name);
	}
	BEE_BOUND(k, BEE_SEGS_MAX - 1);
	sg->seg_off[k] = w + 1;
	sg->seg_len[k] = len;
	c->nsegs = k + 1;
	c->pos = w;
	c->dentry = (__u64)parent;
	if (!parent || parent == d) {
		/* A root that is not its mount's root: a disconnected or pseudo dentry
		 * (a memfd, a deleted-and-detached file). Its name is kept for the
		 * event; the access is denied. */
		c->flags |= BEE_EVENT_PATH_UNRESOLVED;
		return 1;
	}
	return 0;
}

/* resolve_at's loop: resolve_step over the path buffer's rc, which the caller
 * has filled. A global function (not static, not inlined), so the verifier
 * checks it once per program, on its own, instead of once for every state a
 * call site is reached in: each of the check's up to four resolutions used to
 * verify the whole loop again, and path_rename took 428k instructions of
 * verification (docs/enforcement.md, "Verification cost"). Its arguments and
 * result are scalars: a kernel pointer cannot be passed to a global function
 * before Linux 6.8's __arg_trusted, so the pointers travel in rc. */
__noinline int resolve_loop(void)
{
	return bpf_loop(BEE_RESOLVE_STEPS, resolve_step, NULL, 0);
}

/* Resolves (vfsmount, dentry) into the task's path buffer, after `nsegs` segments
 * already in buf[pos .. BEE_PATH_END) (0 and BEE_PATH_END: none). Returns 0
 * and fills c, or a non-zero flag set (BEE_EVENT_PATH_*) when the path must be
 * denied. */
static __always_inline __u32 resolve_at(struct vfsmount *vfsmnt, struct dentry *dentry,
					struct resolve_ctx *c, __u32 pos, __u32 nsegs)
{
	struct bee_path *p = path_buf();

	c->pos = BEE_PATH_END;
	c->nsegs = 0;
	c->flags = BEE_EVENT_PATH_UNRESOLVED;
	c->done = 0;
	if (!p || !dentry || !vfsmnt)
		return c->flags;
	p->rc.dentry = (__u64)dentry;
	p->rc.mnt = (__u64)container_of(vfsmnt, struct mount, mnt);
	p->rc.ns_root = (__u64)BPF_CORE_READ((struct task_struct *)bpf_get_current_task(),
					     nsproxy, mnt_ns, root);
	p->rc.pos = pos;
	p->rc.nsegs = nsegs;
	p->rc.flags = 0;
	p->rc.done = 0;
	resolve_loop();
	c->pos = p->rc.pos;
	c->nsegs = p->rc.nsegs;
	c->flags = p->rc.flags;
	c->done = p->rc.done;
	if (!c->done && !c->flags)
		c->flags |= BEE_EVENT_PATH_TRUNCATED;
	if (c->nsegs == 0 && c->done) {
		/* The root itself. */
		p->buf[BEE_PATH_END - 1] = '/';
		c->pos = BEE_PATH_END - 1;
	}
	return c->flags;
}

static __always_inline __u32 resolve(struct vfsmount *vfsmnt, struct dentry *dentry,
				     struct resolve_ctx *c)
{
	return resolve_at(vfsmnt, dentry, c, BEE_PATH_END, 0);
}

/* Writes a leaf name as segment 0 of the path buffer, where resolve_step
 * would have put it: buf[BEE_PATH_END - len - 1] = '/', the name after it.
 * Returns the new start of the path, or 0 when the name is not a segment. */
static __always_inline __u32 put_leaf(const unsigned char *name, __u32 len)
{
	__u32 w;
	struct bee_path *p = path_buf();
	struct bee_segs *sg = seg_buf();

	if (!p || !sg || len == 0 || len > BEE_NAME_MAX)
		return 0;
	w = BEE_PATH_END - len - 1;
	BEE_BOUND(w, BEE_PATH_MASK);
	BEE_BOUND(len, BEE_NAME_MAX);
	p->buf[w] = '/';
	bpf_probe_read_kernel(&p->buf[(w + 1) & BEE_PATH_MASK], len, name);
	sg->seg_off[0] = w + 1;
	sg->seg_len[0] = len;
	return w;
}

/* Copies the resolved path (or what was resolved of it) into an event. */
static __always_inline void event_path(struct bee_event *ev, const struct resolve_ctx *c)
{
	struct bee_path *p = path_buf();
	__u32 len;

	ev->flags |= c->flags;
	if (!p || c->pos >= BEE_PATH_END)
		return;
	len = BEE_PATH_END - c->pos;
	if (len > BEE_PATH_MAX - 1)
		return;
	BEE_BOUND(len, BEE_PATH_MAX - 1);
	bpf_probe_read_kernel(ev->path, len, &p->buf[(BEE_PATH_END - len) & BEE_PATH_MASK]);
	ev->path_len = len;
}

/* ---- The segment automaton (mirrors bee_common::walk_state) ----------- */


/* One step of bee_common::glob_segment_matches. */
static long glob_step(__u32 i, void *data)
{
	struct bee_path *bp = path_buf();
	struct glob_ctx *c;
	struct bee_glob *g;
	__u32 at, p;
	int pc = -1;
	__u8 ch;

	if (!bp)
		return 1;
	c = &bp->gc;
	g = bpf_map_lookup_elem(&bee_globs, &c->glob);
	if (!g) {
		c->result = 3;
		return 1;
	}
	p = c->p;
	if (p < c->plen && p < BEE_GLOB_MAX) {
		BEE_BOUND(p, 63);
		if (p < BEE_GLOB_MAX)
			pc = g->pattern[p];
		p = c->p;
	}
	if (c->n >= c->nlen) {
		/* The name is consumed: only '*'s may remain. */
		if (pc == '*') {
			c->p = p + 1;
			return 0;
		}
		c->result = p >= c->plen ? 1 : 2;
		return 1;
	}
	at = c->off + c->n;
	BEE_BOUND(at, BEE_PATH_MASK);
	ch = bp->buf[at];
	if (pc == '*') {
		c->resume = 1;
		c->sp = p;
		c->sn = c->n;
		c->p = p + 1;
	} else if (pc == ch) {
		c->p = p + 1;
		c->n += 1;
	} else if (c->resume) {
		c->sn += 1;
		c->p = c->sp + 1;
		c->n = c->sn;
	} else {
		c->result = 2;
		return 1;
	}
	return 0;
}


/* Tries glob first + i on the segment and sets bit i of the mask. */
static long glob_one(__u32 i, void *data)
{
	__u32 idx;
	struct bee_path *bp = path_buf();
	struct globs_ctx *gc;
	struct bee_glob *g;

	if (!bp)
		return 1;
	gc = &bp->gsc;
	if (i >= gc->count || i >= BEE_GLOBS_PER_STATE_MAX)
		return 1;
	idx = gc->first + i;
	g = bpf_map_lookup_elem(&bee_globs, &idx);
	if (!g || g->len == 0 || g->len > BEE_GLOB_MAX) {
		gc->error = 1;
		return 1;
	}
	bp->gc.glob = idx;
	bp->gc.off = gc->off;
	bp->gc.nlen = gc->len;
	bp->gc.plen = g->len;
	bp->gc.p = 0;
	bp->gc.n = 0;
	bp->gc.sp = 0;
	bp->gc.sn = 0;
	bp->gc.resume = 0;
	bp->gc.result = 0;
	bpf_loop(BEE_GLOB_STEPS, glob_step, NULL, 0);
	if (bp->gc.result == 1)
		gc->mask |= 1u << (i & 7);
	else if (bp->gc.result != 2)
		gc->error = 1;
	if (gc->error)
		return 1;
	return 0;
}


static long walk_step(__u32 i, void *data)
{
	struct bee_path *p = path_buf();
	struct bee_segs *sg = seg_buf();
	struct walk_ctx *c;
	struct bee_state *st;
	__u32 k, off, len, *next;
	__u32 default_next, glob_first, glob_count, mask;

	if (!p || !sg)
		return 1;
	c = &p->wc;
	if (c->state == BEE_DEAD_STATE || i >= c->nsegs)
		return 1;
	/* Segments were collected leaf first; walk them root first. */
	k = c->first - i;
	if (k >= BEE_SEGS_MAX) {
		c->error = 1;
		return 1;
	}
	BEE_BOUND(k, BEE_SEGS_MAX - 1);
	off = sg->seg_off[k];
	len = sg->seg_len[k];
	if (len == 0 || len > BEE_NAME_MAX || off >= BEE_PATH_END) {
		c->error = 1;
		return 1;
	}
	BEE_BOUND(off, BEE_PATH_MASK);
	st = bpf_map_lookup_elem(&bee_states, &c->state);
	if (!st) {
		c->error = 1;
		return 1;
	}
	default_next = st->default_next;
	glob_first = st->glob_first;
	glob_count = st->glob_count;
	if (len <= BEE_SHORT_SEGMENT_MAX) {
		__builtin_memset(p->ks.name, 0, sizeof(p->ks.name));
		p->ks.state = c->state;
		p->ks.len = len;
		BEE_BOUND(len, 63);
		if (len > BEE_SHORT_SEGMENT_MAX) {
			c->error = 1;
			return 1;
		}
		bpf_probe_read_kernel(p->ks.name, len, &p->buf[off]);
		next = bpf_map_lookup_elem(&bee_edges_s, &p->ks);
	} else {
		__builtin_memset(p->kl.name, 0, sizeof(p->kl.name));
		p->kl.state = c->state;
		p->kl.len = len;
		BEE_BOUND(len, BEE_NAME_MAX);
		bpf_probe_read_kernel(p->kl.name, len, &p->buf[off]);
		next = bpf_map_lookup_elem(&bee_edges_l, &p->kl);
	}
	if (next) {
		c->state = *next;
		return 0;
	}
	if (glob_count == 0) {
		c->state = default_next;
		return 0;
	}
	if (glob_count > BEE_GLOBS_PER_STATE_MAX) {
		c->error = 1;
		return 1;
	}
	p->gsc.first = glob_first;
	p->gsc.count = glob_count;
	p->gsc.off = off;
	p->gsc.len = len;
	p->gsc.mask = 0;
	p->gsc.error = 0;
	bpf_loop(BEE_GLOBS_PER_STATE_MAX, glob_one, NULL, 0);
	if (p->gsc.error) {
		c->error = 1;
		return 1;
	}
	mask = p->gsc.mask;
	if (mask == 0) {
		c->state = default_next;
		return 0;
	}
	p->combo.group = glob_first;
	p->combo.mask = mask;
	next = bpf_map_lookup_elem(&bee_combos, &p->combo);
	c->state = next ? *next : default_next;
	return 0;
}

/* Walks `nsegs` segments of the resolved path from start, segment `first`
 * (nearest the root) first; returns the final state, or -1 when the automaton
 * is inconsistent (deny). A global function, verified once per program for any
 * arguments, like resolve_loop. */
__noinline long walk_path(__u32 start, __u32 first, __u32 nsegs)
{
	struct bee_path *p = path_buf();

	if (!p || nsegs > first + 1)
		return -1;
	p->wc.state = start;
	p->wc.first = first;
	p->wc.nsegs = nsegs;
	p->wc.error = 0;
	bpf_loop(BEE_SEGS_MAX, walk_step, NULL, 0);
	if (p->wc.error)
		return -1;
	return p->wc.state;
}

static __always_inline __u32 state_accept(__u32 state)
{
	struct bee_state *st;

	if (state == BEE_DEAD_STATE)
		return 0;
	st = bpf_map_lookup_elem(&bee_states, &state);
	return st ? st->accept : 0;
}

static __always_inline int pinned(__u32 state, struct inode *inode)
{
	struct bee_exec_pin key = {};

	if (!inode)
		return 0;
	key.state = state;
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	key.ino = BPF_CORE_READ(inode, i_ino);
	return bpf_map_lookup_elem(&bee_exec_pins, &key) != NULL;
}

/* Whether a final state grants what the hook needs. Returns 1 to deny. */
static __always_inline int decide(long state, struct inode *inode, __u32 access, enum need need)
{
	__u32 accept;

	if (state < 0 || need == NEED_NEVER)
		return 1;
	accept = state_accept(state);
	if (need == NEED_ACCESS)
		return (accept & access) != access;
	{
		int exec = (accept & BEE_ACCESS_EXEC) ||
			   ((accept & BEE_ACCESS_EXEC_PINNED) && pinned(state, inode));

		return !(exec || (need == NEED_EXEC_OR_READ && (accept & BEE_ACCESS_READ)));
	}
}

/* ---- The directory cache (docs/enforcement.md) ------------------------- */

/* 6.1 and 6.12 name a mount namespace's never-reused serial `seq`. */
struct mnt_namespace___seq {
	u64 seq;
} __attribute__((preserve_access_index));

/* 7.x has `seq_origin` there instead, and the never-reused id of every
 * namespace is `ns.ns_id` (in an anonymous member of ns_common, which CO-RE
 * finds by name). */
struct ns_common___id {
	u64 ns_id;
} __attribute__((preserve_access_index));

struct mnt_namespace___id {
	struct ns_common___id ns;
} __attribute__((preserve_access_index));

/* Filesystems whose directory dentries move only through d_move and
 * d_exchange (a local rename), and whose inodes are freed after an RCU grace
 * period. Network and synthetic filesystems (NFS, FUSE, 9p, CIFS, kernfs,
 * proc…) also move or rename directories in lookups, with no rename the
 * programs see; xfs recycles a reclaimable inode's memory in place for
 * another inode with no grace period (xfs_iget_recycle): paths through them
 * are never cached. */
static __always_inline int dircache_fs(struct mount *m)
{
	unsigned long magic = BPF_CORE_READ(m, mnt.mnt_sb, s_magic);

	return magic == 0xEF53 /* ext2/3/4 */ || magic == 0x9123683E /* btrfs */ ||
	       magic == 0x01021994 /* tmpfs */ || magic == 0x858458f6 /* ramfs */ ||
	       /* nullfs, the empty, immutable root that 7.x mounts rootfs on:
		* nothing in it can be made or moved */
	       magic == 0x4E554C4C;
}

struct mounts_ctx {
	__u64 m;
	__u32 ok;
};

static long mounts_step(__u32 i, void *data)
{
	struct mounts_ctx *c = data;
	struct mount *m = (struct mount *)c->m;
	struct mount *up;

	if (!m || !dircache_fs(m))
		return 1;
	up = BPF_CORE_READ(m, mnt_parent);
	if (up == m) {
		c->ok = 1;
		return 1;
	}
	c->m = (__u64)up;
	return 0;
}

/* Every mount from m to its namespace root is of a cacheable filesystem. */
static __always_inline int dircache_mounts(__u64 m)
{
	struct mounts_ctx c = {.m = m, .ok = 0};

	bpf_loop(BEE_DIRCACHE_MOUNTS, mounts_step, &c, 0);
	return c.ok;
}

/* Reads the sequence of the kernel's rename_lock into *seq: 0, or an error
 * (no address given, or unreadable). Read with a helper call, which the
 * compiler does not move loads across; x86-64 does not reorder loads with
 * loads, so a read of it after a path was read is ordered after that read. */
static __always_inline long rename_seq(__u32 *seq)
{
	if (!bee_cfg_rename_lock)
		return -1;
	return bpf_core_read(seq, sizeof(*seq),
			     &((seqlock_t *)bee_cfg_rename_lock)->seqcount.seqcount.sequence);
}

/* Takes what every cache entry is checked against, before any path is read:
 * the rename sequence (only while no move is in flight) and the time, the
 * caller's mount namespace (its identity and event counter), and the leaf's
 * name. Returns the leaf's parent dentry, read after the sequence, or NULL
 * where the cache must not be used (the leaf a root of its own: disconnected,
 * pseudo, or a superblock's root). *ns is the caller's namespace. */
static __always_inline struct dentry *dircache_leaf(struct dircache_probe *cp,
						    struct dentry *dentry,
						    struct mnt_namespace **ns)
{
	__u32 zero = 0, *on = bpf_map_lookup_elem(&bee_cache_on, &zero);
	struct task_struct *task = bpf_get_current_task_btf();
	struct mnt_namespace *cur;
	struct dentry *parent;
	__u32 seq;

	if (!on || *on != 1 || !dentry)
		return NULL;
	/* Odd: a dentry is being moved. The sequence first, then the clock (an
	 * entry's age counts from no earlier than its sequence read), then
	 * everything of the path, the parent included. */
	if (rename_seq(&seq) != 0 || (seq & 1))
		return NULL;
	cp->gen = seq;
	cp->now = bpf_ktime_get_boot_ns();
	parent = dentry->d_parent;
	if (!parent || parent == dentry)
		return NULL;
	cp->len = dentry->d_name.len;
	cp->name = dentry->d_name.name;
	if (cp->len == 0 || cp->len > BEE_NAME_MAX)
		return NULL;
	cp->memo = dentry->d_name.hash & (BEE_LEAF_MEMOS - 1);
	cp->memoable = 0;
	if (cp->len <= BEE_LEAF_NAME) {
		__u32 n = cp->len;

		BEE_BOUND(n, BEE_LEAF_NAME * 2 - 1);
		if (n >= 1 && n <= BEE_LEAF_NAME &&
		    bpf_probe_read_kernel(cp->word, n, cp->name) == 0)
			cp->memoable = 1;
	}
	/* The namespace is identified by a serial that is never reused. */
	cur = task->nsproxy->mnt_ns;
	if (!cur)
		return NULL;
	/* Read through cur, the pointer the verifier has a type for. */
	if (bpf_core_field_exists(struct mnt_namespace___seq, seq))
		cp->ns_seq = ((struct mnt_namespace___seq *)cur)->seq;
	else if (bpf_core_field_exists(((struct mnt_namespace___id *)0)->ns.ns_id))
		cp->ns_seq = ((struct mnt_namespace___id *)cur)->ns.ns_id;
	else
		return NULL;
	cp->ns_event = cur->event;
	if (cp->ns_seq == 0)
		return NULL;
	*ns = cur;
	return parent;
}

/* dircache_leaf for a leaf reached through vfsmnt, which must be a mount of
 * the caller's namespace: cp's key is (vfsmnt, the leaf's parent). */
static __always_inline struct dentry *dircache_probe(struct dircache_probe *cp,
						     struct vfsmount *vfsmnt,
						     struct dentry *dentry)
{
	struct mnt_namespace *cur = NULL;
	struct dentry *root, *parent;
	struct mount *m;

	if (!vfsmnt)
		return NULL;
	parent = dircache_leaf(cp, dentry, &cur);
	if (!parent)
		return NULL;
	/* The leaf must be a plain child of a connected directory of this mount:
	 * not the mount's root (its path continues at the mount point), and the
	 * directory not a disconnected root. */
	root = BPF_CORE_READ(vfsmnt, mnt_root); /* vfsmnt is a plain address */
	if (dentry == root)
		return NULL;
	if (parent != root && parent->d_parent == parent)
		return NULL;
	m = container_of(vfsmnt, struct mount, mnt);
	if ((struct mnt_namespace *)BPF_CORE_READ(m, mnt_ns) != cur)
		return NULL;
	cp->mnt = (__u64)m;
	return parent;
}

/* Whether a leaf memo holds cp's leaf name walked from state `from`. */
static __always_inline int leafmemo_match(const struct bee_leafmemo *m,
					  const struct dircache_probe *cp, __u32 from)
{
	if (!cp->memoable || m->len != cp->len || m->from != from)
		return 0;
	for (int k = 0; k < BEE_LEAF_WORDS; k++)
		if (m->name[k] != cp->word[k])
			return 0;
	return 1;
}

/* The cache entry of directory inode dir, or NULL. Only the address is used:
 * dir is never dereferenced here (on 7.x the verifier does not trust a pointer
 * reached through d_parent). Its slots are dir's only while dc->dir is dir. */
static __always_inline struct bee_dircache *dircache_of(struct inode *dir)
{
	__u64 key = (__u64)dir;

	return bpf_map_lookup_elem(&bee_dircache, &key);
}

/* The cached state after dir's path through cp's mount, or -1; with no mount
 * in cp (an inode hook's, dircache_leaf), through the mount the entry was
 * filled through. On a hit, *hit is the entry's mount and directory path's
 * length and segments. When the leaf's memo matches, *leaf is the state after
 * the leaf too (else -1). */
static __always_inline long dircache_get(const struct dircache_probe *cp, struct inode *dir,
					 const struct bee_scope *sc, long *leaf,
					 struct dircache_hit *hit)
{
	struct bee_dircache *dc = dircache_of(dir);
	struct bee_dirkey e;
	struct bee_leafmemo m;
	__u32 i = sc->policy_id & (BEE_DIRCACHE_SLOTS - 1);
	__u32 j = cp->memo & (BEE_LEAF_MEMOS - 1), seq;
	__u64 owner;

	*leaf = -1;
	if (!dc)
		return -1;
	bpf_spin_lock(&dc->lock);
	owner = dc->dir;
	e = dc->slot[i].key;
	m = dc->slot[i].memo[j];
	bpf_spin_unlock(&dc->lock);
	if (owner != (__u64)dir || e.gen != cp->gen || cp->now - e.born >= BEE_DIRCACHE_TTL_NS ||
	    e.mnt == 0 || (cp->mnt && e.mnt != cp->mnt) || e.ns_seq != cp->ns_seq ||
	    e.ns_event != cp->ns_event || e.policy_id != sc->policy_id ||
	    e.install != sc->install || e.install == 0 || e.start != sc->start_state)
		return -1;
	/* The whole path must fit as the resolver would have it. */
	if (e.nsegs + 1 > BEE_SEGS_MAX || e.len + 1 + cp->len > BEE_PATH_MAX - 1)
		return -1;
	/* A fill stores its entry before it checks that no move overlapped its
	 * walk (dircache_put) and takes it back otherwise. Such a move began
	 * after cp's sequence read (or it would not match) and so before this
	 * read, which the entry was stored before: it shows here. */
	if (rename_seq(&seq) != 0 || seq != cp->gen)
		return -1;
	if (leafmemo_match(&m, cp, e.state))
		*leaf = m.state;
	/* Field by field: a struct copy through a pointer becomes a memcpy call
	 * the verifier does not know. */
	hit->mnt = e.mnt;
	hit->len = e.len;
	hit->nsegs = e.nsegs;
	return e.state;
}

/* Remembers that cp's leaf name walked from `from` ends in `state`, in the
 * slot of dir that is still sc's and still has state `from`. */
static __always_inline void leafmemo_put(const struct dircache_probe *cp, struct inode *dir,
					 const struct bee_scope *sc, __u32 from, long state)
{
	struct bee_dircache *dc;
	struct bee_dirkey *k;
	struct bee_leafmemo *m;
	__u32 i = sc->policy_id & (BEE_DIRCACHE_SLOTS - 1);
	__u32 j = cp->memo & (BEE_LEAF_MEMOS - 1);

	if (!cp->memoable || state < 0)
		return;
	dc = dircache_of(dir);
	if (!dc)
		return;
	bpf_spin_lock(&dc->lock);
	k = &dc->slot[i].key;
	if (dc->dir == (__u64)dir && k->policy_id == sc->policy_id && k->install == sc->install &&
	    k->start == sc->start_state && k->state == from) {
		m = &dc->slot[i].memo[j];
		for (int w = 0; w < BEE_LEAF_WORDS; w++)
			m->name[w] = cp->word[w];
		m->len = cp->len;
		m->from = from;
		m->state = state;
	}
	bpf_spin_unlock(&dc->lock);
}

/* Stores the state after dir's path (len bytes, nsegs segments), resolved
 * and walked after cp was probed, unless the scope changed meanwhile. dir is
 * the inode of parent, read as the parent of dentry before cp was probed. */
static __always_inline void dircache_put(const struct dircache_probe *cp, struct dentry *dentry,
					 struct dentry *parent, struct inode *dir,
					 const struct bee_scope *sc, __u64 cgid, __u32 state,
					 __u32 len, __u32 nsegs)
{
	struct bee_scope *now = bpf_map_lookup_elem(&bee_scopes, &cgid);
	struct bee_dircache_zero *zero;
	struct bee_dircache *dc;
	__u32 i = sc->policy_id & (BEE_DIRCACHE_SLOTS - 1), z = 0, seq;
	__u64 key = (__u64)dir;

	if (!now || sc->install == 0 || now->policy_id != sc->policy_id ||
	    now->install != sc->install || now->start_state != sc->start_state)
		return;
	if (!dircache_mounts(cp->mnt))
		return;
	dc = dircache_of(dir);
	if (!dc) {
		zero = bpf_map_lookup_elem(&bee_dirzero, &z);
		if (!zero)
			return;
		/* -EEXIST: stored meanwhile; -E2BIG: the cache is full, and this
		 * path is not remembered. */
		bpf_map_update_elem(&bee_dircache, &key, zero, BPF_NOEXIST);
		dc = dircache_of(dir);
		if (!dc)
			return;
	}
	bpf_spin_lock(&dc->lock);
	if (dc->dir != key) {
		for (int k = 0; k < BEE_DIRCACHE_SLOTS; k++)
			dc->slot[k].key.install = 0;
		dc->dir = key;
	}
	dc->slot[i].key.gen = cp->gen;
	dc->slot[i].key.born = cp->now;
	dc->slot[i].key.mnt = cp->mnt;
	dc->slot[i].key.ns_seq = cp->ns_seq;
	dc->slot[i].key.ns_event = cp->ns_event;
	dc->slot[i].key.policy_id = sc->policy_id;
	dc->slot[i].key.install = sc->install;
	dc->slot[i].key.start = sc->start_state;
	dc->slot[i].key.state = state;
	dc->slot[i].key.len = len;
	dc->slot[i].key.nsegs = nsegs;
	for (int j = 0; j < BEE_LEAF_MEMOS; j++)
		dc->slot[i].memo[j].len = 0;
	bpf_spin_unlock(&dc->lock);
	/* dir stays allocated while parent is the leaf's parent (the leaf,
	 * pinned by the hook's caller, holds its parent dentry, which holds its
	 * inode), and the leaf changes parent only by a move. With no move since
	 * the probe and parent still the leaf's parent, dir was never left
	 * unpinned, so it was not freed before this entry was stored, and
	 * bee_inode_free deletes the entry when it is. (Neither memory can be
	 * reused before this program returns: dentries and inodes are freed
	 * after an RCU grace period.) Otherwise dir may have been freed already:
	 * the slot is taken back. */
	if (rename_seq(&seq) == 0 && seq == cp->gen && BPF_CORE_READ(dentry, d_parent) == parent &&
	    BPF_CORE_READ(parent, d_inode) == dir)
		return;
	bpf_spin_lock(&dc->lock);
	if (dc->dir == key && dc->slot[i].key.install == sc->install)
		dc->slot[i].key.install = 0;
	bpf_spin_unlock(&dc->lock);
}

/* The fields of a scope the cache is checked against, read once, so that
 * every use in one check sees the same values. */
static __always_inline void scope_snapshot(struct bee_scope *sc, const struct bee_scope *scope)
{
	sc->policy_id = scope->policy_id;
	sc->flags = scope->flags;
	sc->start_state = scope->start_state;
	sc->install = scope->install;
}

/* The leaf name to walk: the copy its memo is keyed by, never a second read
 * of d_name. A rename (d_move, d_exchange) rewrites an inline name in place,
 * and a name read twice could be remembered with the state after another. */
static __always_inline const unsigned char *dircache_leafname(const struct dircache_probe *cp)
{
	return cp->memoable ? (const unsigned char *)cp->word : cp->name;
}

/* On a miss for the leaf's directory: the state after the directory's path,
 * from the entry of the directory's own parent (through cp's mount, valid as
 * any hit) and one segment, the directory's name; *len and *nsegs are then
 * the directory path's, for its own entry. -1 when that entry misses too, the
 * directory is its mount's root or a root of its own, or the path with the
 * leaf would not fit. The name is read after cp's sequence, like every read
 * of a path, and the fill that stores the result checks that no dentry moved
 * since (dircache_put). */
static __always_inline long dircache_up(const struct dircache_probe *cp,
					struct vfsmount *vfsmnt, struct dentry *parent,
					const struct bee_scope *sc, __u32 *len, __u32 *nsegs)
{
	struct dircache_hit hit;
	struct dentry *up;
	struct inode *updir;
	long state, unused;
	__u32 n;

	if (parent == BPF_CORE_READ(vfsmnt, mnt_root))
		return -1;
	up = parent->d_parent;
	if (!up || up == parent)
		return -1;
	updir = up->d_inode;
	if (!updir)
		return -1;
	state = dircache_get(cp, updir, sc, &unused, &hit);
	if (state < 0)
		return -1;
	n = parent->d_name.len;
	if (n == 0 || n > BEE_NAME_MAX || hit.nsegs + 2 > BEE_SEGS_MAX ||
	    hit.len + 1 + n + 1 + cp->len > BEE_PATH_MAX - 1)
		return -1;
	if (!put_leaf(parent->d_name.name, n))
		return -1;
	state = walk_path(state, 0, 1);
	if (state < 0)
		return -1;
	*len = hit.len + 1 + n;
	*nsegs = hit.nsegs + 1;
	return state;
}

/* Resolves and walks one path; returns 1 to deny, 0 to allow, and reports.
 * With `cacheable` (dentry is a BTF pointer the verifier can follow), the
 * directory cache is used: a hit walks the leaf alone from the cached state
 * of its directory; a deny, or an allow the scope reports, is then resolved
 * in full, so that every event carries the whole path. */
static __always_inline int check_path_state(__u32 hook, __u64 cgid,
					    const struct bee_scope *scope,
					    struct vfsmount *vfsmnt, struct dentry *dentry,
					    struct inode *inode, __u32 access, enum need need,
					    int cacheable, long *final)
{
	struct dircache_probe cp = {};
	const unsigned char *leafname = NULL;
	struct resolve_ctx rc;
	struct bee_scope sc;
	struct dentry *parent = NULL;
	struct inode *dir = NULL;
	long state, pstate;
	__u32 w;
	int deny;

	scope_snapshot(&sc, scope);
	if (cacheable && dentry && bee_cfg_dircache) {
		parent = dircache_probe(&cp, vfsmnt, dentry);
		leafname = dircache_leafname(&cp);
		if (parent)
			dir = parent->d_inode;
		if (dir) {
			struct dircache_hit hit;
			__u32 len, nsegs;
			long leaf;

			state = dircache_get(&cp, dir, &sc, &leaf, &hit);
			if (state < 0) {
				/* A miss: the directory's own parent may be cached. */
				state = dircache_up(&cp, vfsmnt, parent, &sc, &len, &nsegs);
				if (state >= 0)
					dircache_put(&cp, dentry, parent, dir, &sc, cgid, state,
						     len, nsegs);
			}
			if (state >= 0 && leaf < 0 && put_leaf(leafname, cp.len)) {
				leaf = walk_path(state, 0, 1);
				leafmemo_put(&cp, dir, &sc, state, leaf);
			}
			if (leaf >= 0 && !decide(leaf, inode, access, need) &&
			    !(sc.flags & BEE_SCOPE_AUDIT_ALLOWS)) {
				if (final)
					*final = leaf;
				return 0;
			}
		}
	}
	deny = 1;
	if (dir) {
		/* The leaf, then its directory (the entry's key) up to the root. */
		w = put_leaf(leafname, cp.len);
		if (!w) {
			rc.pos = BEE_PATH_END;
			rc.flags = BEE_EVENT_PATH_UNRESOLVED;
		} else if (resolve_at(vfsmnt, parent, &rc, w, 1) == 0 && rc.nsegs >= 1 &&
			   rc.pos <= w) {
			pstate = walk_path(sc.start_state, rc.nsegs - 1, rc.nsegs - 1);
			if (pstate >= 0) {
				dircache_put(&cp, dentry, parent, dir, &sc, cgid, pstate, w - rc.pos,
					     rc.nsegs - 1);
				state = walk_path(pstate, 0, 1);
				leafmemo_put(&cp, dir, &sc, pstate, state);
				deny = decide(state, inode, access, need);
				if (final)
					*final = state;
			}
		}
	} else if (resolve(vfsmnt, dentry, &rc) == 0) {
		state = walk_path(sc.start_state, rc.nsegs - 1, rc.nsegs);
		deny = decide(state, inode, access, need);
		if (final)
			*final = state;
	}
	if (should_report(scope, deny)) {
		struct bee_event *ev = event_start(hook, cgid, scope, access, deny);

		if (ev) {
			event_path(ev, &rc);
			if (deny)
				deny = learn_lift(scope, ev,
						  path_learnable(ev, dentry, access, need));
			event_send(ev);
		}
	}
	return deny;
}

/* check_path_state without the final state. */
static __always_inline int check_path(__u32 hook, __u64 cgid, const struct bee_scope *scope,
				      struct vfsmount *vfsmnt, struct dentry *dentry,
				      struct inode *inode, __u32 access, enum need need,
				      int cacheable)
{
	return check_path_state(hook, cgid, scope, vfsmnt, dentry, inode, access, need, cacheable,
				NULL);
}

/* Files of pipefs, sockfs and anon_inodefs have no path to name in a policy;
 * they are reached only through descriptors the task already holds. */
static __always_inline int pseudo_file(struct file *file)
{
	unsigned long magic = file->f_inode->i_sb->s_magic;

	return magic == BEE_PIPEFS_MAGIC || magic == BEE_SOCKFS_MAGIC ||
	       magic == BEE_ANON_INODE_FS_MAGIC;
}

static __always_inline __u32 mode_access(struct file *file)
{
	__u32 mode = file->f_mode;
	__u32 access = 0;

	if (mode & BEE_FMODE_READ)
		access |= BEE_ACCESS_READ;
	if (mode & BEE_FMODE_WRITE)
		access |= BEE_ACCESS_WRITE;
	/* Neither (open flags 3, ioctl-only): treat as a read. */
	if (!access)
		access = BEE_ACCESS_READ;
	return access;
}

/* check_file for a hook that has looked up the caller's scope already. */
static __always_inline int check_scoped_file(__u32 hook, __u64 cgid,
					     const struct bee_scope *scope, struct file *file,
					     __u32 access, enum need need)
{
	if (!file)
		return verdict(0);
	return verdict(check_path(hook, cgid, scope, BPF_CORE_READ(file, f_path.mnt),
				  file->f_path.dentry, file->f_inode, access, need, 1));
}

static __always_inline int check_file(__u32 hook, struct file *file, __u32 access,
				      enum need need)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);

	if (!scope)
		return 0;
	return check_scoped_file(hook, cgid, scope, file, access, need);
}

/* ---- File hooks -------------------------------------------------------- */

SEC("lsm/file_open")
int BPF_PROG(bee_file_open, struct file *file)
{
	__u64 cgid;
	struct bee_scope *scope = own_act_scope(&cgid);
	__u32 flags;

	if (!scope || pseudo_file(file))
		return 0;
	flags = file->f_flags;
	if (flags & BEE___FMODE_EXEC)
		return check_scoped_file(BEE_HOOK_FILE_OPEN, cgid, scope, file, BEE_ACCESS_EXEC,
					 NEED_EXEC_OR_READ);
	/* O_TRUNC truncates even a read-only open (through file_truncate on
	 * 6.2+, which is not attached): it needs WRITE whatever the mode. */
	if (flags & BEE_O_TRUNC)
		return check_scoped_file(BEE_HOOK_FILE_OPEN, cgid, scope, file,
					 mode_access(file) | BEE_ACCESS_WRITE, NEED_ACCESS);
	return check_scoped_file(BEE_HOOK_FILE_OPEN, cgid, scope, file, mode_access(file),
				 NEED_ACCESS);
}

SEC("lsm/file_receive")
int BPF_PROG(bee_file_receive, struct file *file)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);

	if (!scope || pseudo_file(file))
		return 0;
	return check_scoped_file(BEE_HOOK_FILE_OPEN, cgid, scope, file, mode_access(file),
				 NEED_ACCESS);
}

SEC("lsm/bprm_check_security")
int BPF_PROG(bee_bprm_check, struct linux_binprm *bprm)
{
	return check_file(BEE_HOOK_BPRM_CHECK_SECURITY, bprm->file,
			  BEE_ACCESS_EXEC, NEED_EXEC);
}

SEC("lsm/mmap_file")
int BPF_PROG(bee_mmap_file, struct file *file, unsigned long reqprot, unsigned long prot,
	     unsigned long flags)
{
	/* Anonymous executable memory (JITs) stays allowed. */
	if (!file || !(prot & BEE_PROT_EXEC))
		return 0;
	return check_file(BEE_HOOK_MMAP_FILE, file, BEE_ACCESS_EXEC, NEED_EXEC);
}

SEC("lsm/file_mprotect")
int BPF_PROG(bee_file_mprotect, struct vm_area_struct *vma, unsigned long reqprot,
	     unsigned long prot)
{
	struct file *file;

	if (!(prot & BEE_PROT_EXEC))
		return 0;
	file = vma->vm_file;
	if (!file)
		return 0;
	return check_file(BEE_HOOK_FILE_MPROTECT, file, BEE_ACCESS_EXEC, NEED_EXEC);
}

/* ---- Path hooks: WRITE on every path changed -------------------------- */

/* WRITE on dentry's path through dir's mount, for the caller's scope. */
static __always_inline int check_scoped_write(__u32 hook, __u64 cgid,
					      const struct bee_scope *scope,
					      const struct path *dir, struct dentry *dentry)
{
	return verdict(check_path(hook, cgid, scope, BPF_CORE_READ(dir, mnt), dentry, NULL,
				  BEE_ACCESS_WRITE, NEED_ACCESS, 1));
}

static __always_inline int check_write(__u32 hook, const struct path *dir,
				       struct dentry *dentry)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);

	if (!scope)
		return 0;
	return check_scoped_write(hook, cgid, scope, dir, dentry);
}

static __always_inline int check_write_path(__u32 hook, const struct path *path)
{
	return check_write(hook, path, path->dentry);
}

/* Whether a dentry is a character or block device node. */
static __always_inline int is_device(struct dentry *dentry)
{
	__u32 type = BPF_CORE_READ(dentry, d_inode, i_mode) & BEE_S_IFMT;

	return type == BEE_S_IFCHR || type == BEE_S_IFBLK;
}

/* A device node is never removed or replaced in a scope, as it is never
 * created: a write grant on /dev/null lets a scope write to it, not delete it
 * for the whole host and put a file of its own in its place. */
static __always_inline int check_unlink(__u32 hook, const struct path *dir,
					struct dentry *dentry)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);

	/* The scope first: a task outside every scope reads nothing. */
	if (!scope)
		return 0;
	if (!is_device(dentry))
		return check_scoped_write(hook, cgid, scope, dir, dentry);
	return verdict(check_path(hook, cgid, scope, BPF_CORE_READ(dir, mnt), dentry, NULL, 0,
				  NEED_NEVER, 1));
}

SEC("lsm/path_unlink")
int BPF_PROG(bee_path_unlink, const struct path *dir, struct dentry *dentry)
{
	return check_unlink(BEE_HOOK_PATH_UNLINK, dir, dentry);
}

SEC("lsm/path_rmdir")
int BPF_PROG(bee_path_rmdir, const struct path *dir, struct dentry *dentry)
{
	return check_write(BEE_HOOK_PATH_RMDIR, dir, dentry);
}

SEC("lsm/path_mkdir")
int BPF_PROG(bee_path_mkdir, const struct path *dir, struct dentry *dentry)
{
	return check_write(BEE_HOOK_PATH_MKDIR, dir, dentry);
}

/* A device node opens its device under whatever name it is given, so a write
 * grant would turn into a grant on the device: character and block devices are
 * never created in a scope (FIFOs, sockets and files need WRITE). */
SEC("lsm/path_mknod")
int BPF_PROG(bee_path_mknod, const struct path *dir, struct dentry *dentry, umode_t mode,
	     unsigned int dev)
{
	__u32 type = mode & BEE_S_IFMT;
	__u64 cgid;
	struct bee_scope *scope;

	/* Device nodes, and set-user-ID or set-group-ID files (open with O_CREAT comes here
	 * too): such a file would run as its owner for whoever runs it outside the scope. */
	if (type == BEE_S_IFCHR || type == BEE_S_IFBLK || (mode & (BEE_S_ISUID | BEE_S_ISGID))) {
		scope = current_scope(&cgid);
		if (!scope)
			return 0;
		return verdict(check_path(BEE_HOOK_PATH_MKNOD, cgid, scope, BPF_CORE_READ(dir, mnt),
					  dentry, NULL, 0, NEED_NEVER, 1));
	}
	return check_write(BEE_HOOK_PATH_MKNOD, dir, dentry);
}

SEC("lsm/path_symlink")
int BPF_PROG(bee_path_symlink, const struct path *dir, struct dentry *dentry)
{
	return check_write(BEE_HOOK_PATH_SYMLINK, dir, dentry);
}

/* The move class of a final state (0 for the dead state or a failed walk). */
static __always_inline __u32 move_class(long state)
{
	struct bee_state *st;
	__u32 key;

	if (state <= 0)
		return 0;
	key = (__u32)state;
	st = bpf_map_lookup_elem(&bee_states, &key);
	return st ? st->move_class : 0;
}

static __always_inline int is_dir(struct dentry *dentry)
{
	return (BPF_CORE_READ(dentry, d_inode, i_mode) & BEE_S_IFMT) == BEE_S_IFDIR;
}

/* A directory moved between two places whose grants below differ (or over a
 * directory): reported at the destination with BEE_EVENT_REPARENT. Returns the
 * deny to enforce: 1, or 0 when learn mode lifts it (a policy that grants both
 * places alike would allow the move). */
static __always_inline int report_reparent(__u64 cgid, const struct bee_scope *scope,
					   struct vfsmount *mnt, struct dentry *dentry)
{
	struct resolve_ctx rc;
	struct bee_event *ev;
	int deny = 1;

	resolve(mnt, dentry, &rc);
	ev = event_start(BEE_HOOK_PATH_RENAME, cgid, scope, BEE_ACCESS_WRITE, 1);
	if (ev) {
		ev->flags |= BEE_EVENT_REPARENT;
		event_path(ev, &rc);
		deny = learn_lift(scope, ev,
				  path_learnable(ev, dentry, BEE_ACCESS_WRITE, NEED_ACCESS));
		event_send(ev);
	}
	return deny;
}

/* Both ends need WRITE. A move of a directory (either way, for
 * RENAME_EXCHANGE) moves every path below it, which neither end's check
 * sees: it is allowed only when both ends walk to states of one move class
 * (the same grants at every path below, whatever the names, but for EXEC on
 * readable paths: crates/userspace/src/plan/minimize.rs), so that no file
 * leaves a carve-out or enters a grant it lacked. */
SEC("lsm/path_rename")
int BPF_PROG(bee_path_rename, const struct path *old_dir, struct dentry *old_dentry,
	     const struct path *new_dir, struct dentry *new_dentry)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);
	long from = -1, to = -1;
	int deny;

	if (!scope)
		return 0;
	if (is_device(old_dentry) || is_device(new_dentry))
		return verdict(check_path(BEE_HOOK_PATH_RENAME, cgid, scope,
					  BPF_CORE_READ(new_dir, mnt), new_dentry, NULL, 0,
					  NEED_NEVER, 1));
	deny = check_path_state(BEE_HOOK_PATH_RENAME, cgid, scope, BPF_CORE_READ(old_dir, mnt),
				old_dentry, NULL, BEE_ACCESS_WRITE, NEED_ACCESS, 1, &from);
	if (!deny)
		deny = check_path_state(BEE_HOOK_PATH_RENAME, cgid, scope,
					BPF_CORE_READ(new_dir, mnt), new_dentry, NULL,
					BEE_ACCESS_WRITE, NEED_ACCESS, 1, &to);
	if (!deny && (is_dir(old_dentry) || is_dir(new_dentry)) &&
	    (move_class(from) == 0 || move_class(from) != move_class(to))) {
		deny = report_reparent(cgid, scope, BPF_CORE_READ(new_dir, mnt), new_dentry);
	}
	return verdict(deny);
}

SEC("lsm/path_link")
int BPF_PROG(bee_path_link, struct dentry *old_dentry, const struct path *new_dir,
	     struct dentry *new_dentry)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);
	struct vfsmount *mnt;
	int deny;

	if (!scope)
		return 0;
	/* link(2) refuses to cross mounts, so the old dentry is on new_dir's mount. */
	mnt = BPF_CORE_READ(new_dir, mnt);
	deny = check_path(BEE_HOOK_PATH_LINK, cgid, scope, mnt, old_dentry, NULL,
			  BEE_ACCESS_WRITE, NEED_ACCESS, 1);
	if (!deny)
		deny = check_path(BEE_HOOK_PATH_LINK, cgid, scope, mnt, new_dentry, NULL,
				  BEE_ACCESS_WRITE, NEED_ACCESS, 1);
	return verdict(deny);
}

/* inotify, fanotify and dnotify watches report what happens under a path:
 * watching needs READ on it (fanotify mount and filesystem marks: on the
 * path given). */
SEC("lsm/path_notify")
int BPF_PROG(bee_path_notify, const struct path *path, u64 mask, unsigned int obj_type)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);

	if (!scope)
		return 0;
	return verdict(check_path(BEE_HOOK_PATH_NOTIFY, cgid, scope, BPF_CORE_READ(path, mnt),
				  path->dentry, NULL, BEE_ACCESS_READ, NEED_ACCESS, 1));
}

SEC("lsm/path_truncate")
int BPF_PROG(bee_path_truncate, const struct path *path)
{
	return check_write_path(BEE_HOOK_PATH_TRUNCATE, path);
}

/* A mode with the set-user-ID or set-group-ID bit is never granted: the file would run
 * as its owner (root, for bee as root) for whoever runs it outside the scope. */
SEC("lsm/path_chmod")
int BPF_PROG(bee_path_chmod, const struct path *path, umode_t mode)
{
	struct bee_scope *scope;
	__u64 cgid;

	if (mode & (BEE_S_ISUID | BEE_S_ISGID)) {
		scope = current_scope(&cgid);
		if (!scope)
			return 0;
		return verdict(check_path(BEE_HOOK_PATH_CHMOD, cgid, scope, BPF_CORE_READ(path, mnt),
					  path->dentry, NULL, 0, NEED_NEVER, 1));
	}
	return check_write_path(BEE_HOOK_PATH_CHMOD, path);
}

SEC("lsm/path_chown")
int BPF_PROG(bee_path_chown, const struct path *path)
{
	return check_write_path(BEE_HOOK_PATH_CHOWN, path);
}

/* ---- Inode hooks: a dentry without its mount --------------------------- */

/* Until the mounts of a superblock were chained through mnt_next_for_sb, they
 * were on the list_head s_mounts, linked by mnt_instance (6.1, 6.12). */
struct super_block___lh {
	struct list_head s_mounts;
} __attribute__((preserve_access_index));

struct mount___lh {
	struct list_head mnt_instance;
} __attribute__((preserve_access_index));

/* One mount of the dentry's superblock (inode_ctx). A mount of the caller's
 * namespace whose root is an ancestor of the dentry gives it a name; a mount of
 * another part of the filesystem (a bind mount of a sibling directory) gives
 * none: its resolve reaches the superblock's root without meeting the mount's
 * and is unresolved. Stops once a name carries WRITE, after BEE_INODE_NAMES
 * names, or at the end of the list; mounts past BEE_SB_MOUNTS_SCAN are not seen
 * (fewer names: a deny, never an allow). The loop state lives in the task's
 * buffer, so the verifier checks one iteration, not every count of names
 * found (Linux 7.3's verifier gave up on the open-coded loops). */
static long inode_mount_step(__u32 i, void *data)
{
	struct bee_path *p = path_buf();
	struct resolve_ctx rc;
	struct inode_ctx *c;
	struct mount *m;
	long state;

	if (!p)
		return 1;
	c = &p->ic;
	if (bpf_core_field_exists(struct super_block___lh, s_mounts)) {
		struct list_head *node = (struct list_head *)c->node;

		if (!node || c->node == c->head)
			return 1;
		m = (void *)node - bpf_core_field_offset(struct mount___lh, mnt_instance);
		c->node = (__u64)BPF_CORE_READ(node, next);
	} else if (bpf_core_field_exists(struct mount, mnt_next_for_sb)) {
		m = (struct mount *)c->node;
		if (!m)
			return 1;
		c->node = (__u64)BPF_CORE_READ(m, mnt_next_for_sb);
	} else {
		return 1;
	}
	if ((__u64)BPF_CORE_READ(m, mnt_ns) != c->ns)
		return 0;
	resolve(&m->mnt, (struct dentry *)c->dentry, &rc);
	c->last_mnt = (__u64)m;
	c->last_pos = rc.pos;
	c->last_flags = rc.flags;
	if (rc.flags)
		return 0;
	if (!c->first_mnt)
		c->first_mnt = (__u64)m;
	state = walk_path(c->start, rc.nsegs - 1, rc.nsegs);
	if (state >= 0 && (state_accept(state) & BEE_ACCESS_WRITE)) {
		c->allowed = 1;
		return 1;
	}
	c->names += 1;
	return c->names >= BEE_INODE_NAMES;
}

/* Whether a name of dentry that the directory cache knows carries WRITE: 1 if
 * so, 0 if not or unknown. The cache entry of the dentry's directory, valid
 * under the current rename sequence, namespace and scope, was filled through a
 * mount of the caller's namespace in which the directory had the entry's path;
 * with no move since and no mount change in the namespace, the directory still
 * has that path there, and the dentry, its child, the path and its own name
 * (inode_denied's names, with no scan of the superblock's mounts). A directory
 * that is a root is its name only as that mount's root. */
static __always_inline int inode_cached_write(const struct bee_scope *scope,
					      struct dentry *dentry)
{
	struct dircache_probe cp = {};
	struct mnt_namespace *cur = NULL;
	struct dentry *parent;
	struct inode *dir;
	struct bee_scope sc;
	struct dircache_hit hit;
	struct mount *m;
	long state, leaf;

	if (!bee_cfg_dircache)
		return 0;
	scope_snapshot(&sc, scope);
	parent = dircache_leaf(&cp, dentry, &cur);
	if (!parent)
		return 0;
	dir = parent->d_inode;
	if (!dir)
		return 0;
	state = dircache_get(&cp, dir, &sc, &leaf, &hit);
	if (state < 0)
		return 0;
	/* The mount taken out of hit first: inside BPF_CORE_READ, hit.mnt would
	 * become a relocation against dircache_hit, a type the kernel lacks. */
	m = (struct mount *)hit.mnt;
	if (parent->d_parent == parent && (struct dentry *)BPF_CORE_READ(m, mnt.mnt_root) != parent)
		return 0;
	/* Written out as in check_path_state: there, a helper for these lines
	 * pushed path_rename's combined stack past 512 bytes on 6.1. */
	if (leaf < 0 && put_leaf(dircache_leafname(&cp), cp.len)) {
		leaf = walk_path(state, 0, 1);
		leafmemo_put(&cp, dir, &sc, state, leaf);
	}
	return leaf >= 0 && (state_accept(leaf) & BEE_ACCESS_WRITE);
}

/* The inode hooks get a dentry and no mount, so the path is not known. The
 * dentry's names are its paths through the mounts of its superblock in the
 * caller's mount namespace (inode_mount_step); the change needs WRITE on one
 * of them, as it would through a descriptor opened for writing by that name
 * (file_open). The name the directory cache knows is tried first
 * (inode_cached_write); a dentry with no name there, or none of its first
 * BEE_INODE_NAMES names writable, is denied. The event carries the first name
 * that resolved (or, when none did, the last attempt, flagged unresolved). */
static __always_inline int inode_scoped_denied(__u32 hook, __u64 cgid,
					       const struct bee_scope *scope,
					       struct dentry *dentry)
{
	struct resolve_ctx rc = {};
	struct super_block *sb;
	struct bee_path *p;
	__u64 first;
	int deny;

	if (!(scope->flags & BEE_SCOPE_AUDIT_ALLOWS) && inode_cached_write(scope, dentry))
		return 0;
	p = path_buf();
	if (!dentry || !p)
		return decide_plain(hook, cgid, scope, 1) != 0;
	sb = BPF_CORE_READ(dentry, d_sb);
	p->ic.ns = (__u64)BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), nsproxy,
					mnt_ns);
	p->ic.head = 0;
	p->ic.node = 0;
	if (bpf_core_field_exists(struct super_block___lh, s_mounts)) {
		struct super_block___lh *s = (void *)sb;

		p->ic.head = (__u64)((void *)sb +
				     bpf_core_field_offset(struct super_block___lh, s_mounts));
		p->ic.node = (__u64)BPF_CORE_READ(s, s_mounts.next);
	} else if (bpf_core_field_exists(struct mount, mnt_next_for_sb)) {
		p->ic.node = (__u64)BPF_CORE_READ(sb, s_mounts);
	}
	p->ic.dentry = (__u64)dentry;
	p->ic.start = scope->start_state;
	p->ic.first_mnt = 0;
	p->ic.last_mnt = 0;
	p->ic.names = 0;
	p->ic.allowed = 0;
	p->ic.last_pos = BEE_PATH_END;
	p->ic.last_flags = BEE_EVENT_PATH_UNRESOLVED;
	bpf_loop(BEE_SB_MOUNTS_SCAN, inode_mount_step, NULL, 0);
	deny = p->ic.allowed ? 0 : 1;
	first = p->ic.first_mnt;
	rc.pos = p->ic.last_pos;
	rc.flags = p->ic.last_flags;
	if (should_report(scope, deny)) {
		struct bee_event *ev = event_start(hook, cgid, scope, BEE_ACCESS_WRITE, deny);

		if (ev) {
			if (deny && first && first != p->ic.last_mnt) {
				struct mount *m = (struct mount *)first;

				resolve(&m->mnt, dentry, &rc);
			}
			event_path(ev, &rc);
			if (deny)
				deny = learn_lift(scope, ev,
						  path_learnable(ev, dentry, BEE_ACCESS_WRITE,
								 NEED_ACCESS));
			event_send(ev);
		}
	}
	return deny;
}

/* inode_scoped_denied for the caller's scope; 0 outside every scope. */
static __always_inline int inode_denied(__u32 hook, struct dentry *dentry)
{
	__u64 cgid;
	struct bee_scope *scope = own_act_scope(&cgid);

	if (!scope)
		return 0;
	return inode_scoped_denied(hook, cgid, scope, dentry);
}

static __always_inline int check_inode(__u32 hook, struct dentry *dentry)
{
	return verdict(inode_denied(hook, dentry));
}

/* Before 6.10, security_inode_setxattr and security_inode_removexattr ran the
 * capability checks (cap_inode_setxattr: security.* needs CAP_SYS_ADMIN) only
 * when every LSM returned 1, their default: an LSM returning 0 switched them
 * off for every task. From 6.10 (the inode_xattr_skipcap hook) the framework
 * runs them itself, and 0 is the only allowing value the verifier accepts. */
static __always_inline int xattr_verdict(int deny)
{
	if (deny)
		return -BEE_EPERM;
	if (bpf_core_field_exists(union security_list_options, inode_xattr_skipcap))
		return 0;
	return 1;
}

/* Timestamps (utimensat, utimes). Mode, owner and size changes reach
 * inode_setattr too, but were decided by path_chmod, path_chown,
 * path_truncate or at open. The arguments are (idmap, dentry, attr) from 6.3
 * (struct mnt_idmap) and (dentry, attr) before. */
SEC("lsm/inode_setattr")
int bee_inode_setattr(unsigned long long *ctx)
{
	struct dentry *dentry;
	struct iattr *attr;
	struct bee_scope *scope;
	__u64 cgid;
	__u32 valid;

	/* The scope first: a task outside every scope reads nothing. */
	scope = own_act_scope(&cgid);
	if (!scope)
		return 0;
	/* Each variant loads its arguments at constant offsets in its own asm, so
	 * clang cannot merge them into a computed context offset (which the
	 * verifier refuses), and the branch the kernel lacks is dead code. The
	 * first output is early-clobber: written before ctx is read again. */
	if (bpf_core_type_exists(struct mnt_idmap)) {
		asm volatile("%0 = *(u64 *)(%2 + 8)\n\t"
			     "%1 = *(u64 *)(%2 + 16)"
			     : "=&r"(dentry), "=r"(attr)
			     : "r"(ctx));
	} else {
		asm volatile("%0 = *(u64 *)(%2 + 0)\n\t"
			     "%1 = *(u64 *)(%2 + 8)"
			     : "=&r"(dentry), "=r"(attr)
			     : "r"(ctx));
	}
	valid = BPF_CORE_READ(attr, ia_valid);
	if (!(valid & (BEE_ATTR_ATIME | BEE_ATTR_MTIME | BEE_ATTR_ATIME_SET |
		       BEE_ATTR_MTIME_SET)) ||
	    (valid & BEE_ATTR_SIZE))
		return 0;
	return verdict(inode_scoped_denied(BEE_HOOK_INODE_SETATTR, cgid, scope, dentry));
}

/* Extended attributes; POSIX ACLs too on 6.1 (from 6.2 they have the
 * inode_set_acl and inode_remove_acl hooks below). The dentry is the second
 * argument on every kernel. */
SEC("lsm/inode_setxattr")
int BPF_PROG(bee_inode_setxattr, void *idmap, struct dentry *dentry)
{
	return xattr_verdict(inode_denied(BEE_HOOK_INODE_SETXATTR, dentry));
}

SEC("lsm/inode_removexattr")
int BPF_PROG(bee_inode_removexattr, void *idmap, struct dentry *dentry)
{
	return xattr_verdict(inode_denied(BEE_HOOK_INODE_REMOVEXATTR, dentry));
}

SEC("lsm/inode_set_acl")
int BPF_PROG(bee_inode_set_acl, void *idmap, struct dentry *dentry)
{
	return check_inode(BEE_HOOK_INODE_SETXATTR, dentry);
}

SEC("lsm/inode_remove_acl")
int BPF_PROG(bee_inode_remove_acl, void *idmap, struct dentry *dentry)
{
	return check_inode(BEE_HOOK_INODE_REMOVEXATTR, dentry);
}

/* ---- Network ----------------------------------------------------------- */

static __always_inline __u8 sock_proto(struct sock *sk)
{
	__u16 proto = BPF_CORE_READ(sk, sk_protocol);

	if (proto == BEE_IPPROTO_TCP || proto == BEE_IPPROTO_MPTCP)
		return BEE_PROTO_TCP;
	if (proto == BEE_IPPROTO_UDP)
		return BEE_PROTO_UDP;
	return 0;
}

/* Name grants, for a TCP/UDP peer `a` (v4: its first 4 bytes) on `port` that the tries
 * decided `deny` for. A resolver's loopback port is reachable from its own scope only, in
 * every scope. With BEE_SCOPE_DNS: port 53 is allowed over TCP and UDP, since the cgroup
 * programs below steer it to the scope's resolver (the flag is set only once they are
 * attached and bee_dns holds the target); port 853 (DNS over TLS or QUIC) is denied whatever
 * the tries say; any other peer the tries deny is allowed while an unexpired answer of the
 * scope's resolver names it for this protocol and port. */
static __always_inline int dns_verdict(__u64 cgid, const struct bee_scope *scope,
				       struct socket *sock, const __u8 *a, int v4, __u8 proto,
				       __u16 port, int deny)
{
	struct bee_answer_key key = {.cgroup_id = cgid};
	struct bee_answer *ans;
	struct bee_dns *own;

	if (!proto)
		return deny;
	/* A resolver of bee, addressed directly: only the scope's own (io_uring retries a
	 * steered connect with the rewritten address), whatever the address grants say. */
	if (is_loopback(a, v4) && bpf_map_lookup_elem(&bee_dns_ports, &port)) {
		own = (scope->flags & BEE_SCOPE_DNS) ? bpf_map_lookup_elem(&bee_dns, &cgid) : NULL;
		return !(own && own->port == port);
	}
	if (!(scope->flags & BEE_SCOPE_DNS))
		return deny;
	/* Only plain TCP and UDP sockets are steered for certain: an MPTCP socket connects
	 * through subflows, so port 53 over it is denied rather than trusted to them. */
	if (port == BEE_DNS_PORT)
		return BPF_CORE_READ(sock, sk, sk_protocol) == BEE_IPPROTO_MPTCP;
	if (port == BEE_DOT_PORT)
		return 1;
	if (!deny)
		return 0;
	if (v4) {
		key.addr[10] = 0xff;
		key.addr[11] = 0xff;
		__builtin_memcpy(&key.addr[12], a, 4);
	} else {
		__builtin_memcpy(key.addr, a, 16);
	}
	ans = bpf_map_lookup_elem(&bee_answers, &key);
	if (!ans || bpf_ktime_get_boot_ns() >= ans->expires_ns)
		return 1;
	return !net_value_allows(&ans->ports, proto, port);
}

/* Checks an IP peer address (kernel memory) against the scope's tries.
 * Returns 1 to deny. Non-IP families other than AF_UNSPEC, AF_UNIX (checked
 * by the unix hooks) and AF_NETLINK addressed to the kernel are denied. AF_UNSPEC passes only where it
 * means "no peer" (`unspec_ok`: connect, which disconnects); elsewhere an
 * IP socket reads it as its own family (udp_sendmsg sends an AF_UNSPEC
 * sockaddr_in to its address), so it is checked as that family. */
static __always_inline int check_sockaddr(__u32 hook, __u64 cgid, const struct bee_scope *scope,
					  struct socket *sock, struct sockaddr *addr, int unspec_ok)
{
	__u16 family = 0, port = 0;
	__u8 proto = 0, a[16] = {};
	int deny = 1, v4 = 0;

	if (!addr)
		return 0;
	bpf_probe_read_kernel(&family, sizeof(family), &addr->sa_family);
	if (family == BEE_AF_UNSPEC && !unspec_ok) {
		__u16 sock_family = BPF_CORE_READ(sock, sk, __sk_common.skc_family);

		if (sock_family == BEE_AF_INET || sock_family == BEE_AF_INET6)
			family = sock_family;
	}
	if (family == BEE_AF_UNSPEC || family == BEE_AF_UNIX)
		return 0;
	if (family == BEE_AF_NETLINK) {
		/* The kernel (port 0, no multicast groups) is the only netlink peer;
		 * netlink_send decides what may be asked of it. */
		struct sockaddr_nl *nl = (struct sockaddr_nl *)addr;

		deny = BPF_CORE_READ(nl, nl_pid) != 0 || BPF_CORE_READ(nl, nl_groups) != 0;
		return decide_family(hook, cgid, scope, BEE_ACCESS_NET, family, deny) != 0;
	}
	proto = sock_proto(BPF_CORE_READ(sock, sk));
	if (family == BEE_AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)addr;
		struct bee_lpm_v4 key = {.prefixlen = 64, .policy_id = scope->policy_id};

		port = bpf_ntohs(BPF_CORE_READ(in, sin_port));
		bpf_probe_read_kernel(key.addr, 4, &in->sin_addr);
		__builtin_memcpy(a, key.addr, 4);
		v4 = 1;
		deny = !(proto && net_value_allows(bpf_map_lookup_elem(&bee_net_v4, &key), proto,
						   port));
	} else if (family == BEE_AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;
		struct bee_lpm_v6 key = {.prefixlen = 160, .policy_id = scope->policy_id};

		port = bpf_ntohs(BPF_CORE_READ(in6, sin6_port));
		bpf_probe_read_kernel(key.addr, 16, &in6->sin6_addr);
		__builtin_memcpy(a, key.addr, 16);
		if (!proto) {
			deny = 1;
		} else if (key.addr[0] == 0 && key.addr[1] == 0 && key.addr[2] == 0 &&
			   key.addr[3] == 0 && key.addr[4] == 0 && key.addr[5] == 0 &&
			   key.addr[6] == 0 && key.addr[7] == 0 && key.addr[8] == 0 &&
			   key.addr[9] == 0 && key.addr[10] == 0xff && key.addr[11] == 0xff) {
			/* ::ffff:a.b.c.d is an IPv4 peer. */
			struct bee_lpm_v4 k4 = {.prefixlen = 64, .policy_id = scope->policy_id};

			__builtin_memcpy(k4.addr, &key.addr[12], 4);
			deny = !net_value_allows(bpf_map_lookup_elem(&bee_net_v4, &k4), proto, port);
		} else {
			deny = !net_value_allows(bpf_map_lookup_elem(&bee_net_v6, &key), proto,
						 port);
		}
	}
	if (family == BEE_AF_INET || family == BEE_AF_INET6)
		deny = dns_verdict(cgid, scope, sock, a, v4, proto, port, deny);
	if (should_report(scope, deny)) {
		struct bee_event *ev = event_start(hook, cgid, scope, BEE_ACCESS_NET, deny);

		if (ev) {
			ev->family = family;
			ev->port = port;
			ev->protocol = proto;
			__builtin_memcpy(ev->addr, a, 16);
			if (v4)
				__builtin_memset(&ev->addr[4], 0, 12);
			/* A TCP or UDP peer is what net.allow names. */
			if (deny)
				deny = learn_lift(scope, ev, proto != 0);
			event_send(ev);
		}
	}
	return deny;
}

SEC("lsm/socket_connect")
int BPF_PROG(bee_socket_connect, struct socket *sock, struct sockaddr *address, int addrlen)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);

	if (!scope)
		return 0;
	return verdict(check_sockaddr(BEE_HOOK_SOCKET_CONNECT, cgid, scope, sock, address, 1));
}

SEC("lsm/socket_sendmsg")
int BPF_PROG(bee_socket_sendmsg, struct socket *sock, struct msghdr *msg, int size)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);
	struct sockaddr *name;

	if (!scope)
		return 0;
	/* Without an explicit address the socket is connected (connect checked it). */
	name = BPF_CORE_READ(msg, msg_name);
	if (!name || BPF_CORE_READ(msg, msg_namelen) == 0)
		return 0;
	return verdict(check_sockaddr(BEE_HOOK_SOCKET_SENDMSG, cgid, scope, sock, name, 0));
}

SEC("lsm/socket_create")
int BPF_PROG(bee_socket_create, int family, int type, int protocol, int kern)
{
	__u64 cgid;
	struct bee_scope *scope;
	int t = type & BEE_SOCK_TYPE_MASK, deny = 1;

	if (kern)
		return 0;
	scope = current_scope(&cgid);
	if (!scope)
		return 0;
	if (family == BEE_AF_UNIX)
		deny = 0;
	else if (family == BEE_AF_NETLINK)
		deny = protocol != BEE_NETLINK_ROUTE;
	else if (family == BEE_AF_INET || family == BEE_AF_INET6)
		deny = !(t == BEE_SOCK_STREAM || t == BEE_SOCK_DGRAM) ||
		       !(protocol == 0 || protocol == BEE_IPPROTO_TCP ||
			 protocol == BEE_IPPROTO_UDP || protocol == BEE_IPPROTO_MPTCP);
	return decide_family(BEE_HOOK_SOCKET_CREATE, cgid, scope, BEE_ACCESS_NET, family, deny);
}

/* The peer of a unix socket must be bound to a path the policy grants UNIX.
 * Abstract peers are denied; unnamed ones (socketpair) only in `connect`. */
static __always_inline int check_unix_peer(__u32 hook, struct sock *other, int unnamed_ok)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);
	struct unix_sock *u = (struct unix_sock *)other;
	struct dentry *dentry;
	struct unix_address *addr;
	int deny;

	if (!scope)
		return 0;
	if (!other)
		return decide_plain(hook, cgid, scope, 1);
	addr = BPF_CORE_READ(u, addr);
	dentry = BPF_CORE_READ(u, path.dentry);
	if (!dentry) {
		deny = !(unnamed_ok && !addr);
		return decide_family(hook, cgid, scope, BEE_ACCESS_UNIX, BEE_AF_UNIX, deny);
	}
	deny = check_path(hook, cgid, scope, BPF_CORE_READ(u, path.mnt), dentry, NULL,
			  BEE_ACCESS_UNIX, NEED_ACCESS, 0);
	return verdict(deny);
}

SEC("lsm/unix_stream_connect")
int BPF_PROG(bee_unix_stream_connect, struct sock *sock, struct sock *other, struct sock *newsk)
{
	return check_unix_peer(BEE_HOOK_UNIX_STREAM_CONNECT, other, 0);
}

SEC("lsm/unix_may_send")
int BPF_PROG(bee_unix_may_send, struct socket *sock, struct socket *other)
{
	return check_unix_peer(BEE_HOOK_UNIX_MAY_SEND, BPF_CORE_READ(other, sk), 1);
}

/* Policies grant outbound traffic only: a socket listening or accepting in a
 * scope would carry data to peers no rule names. A unix socket bound to a path
 * may: its socket file was created under a WRITE grant, and peers reach it by
 * that name. IP sockets and abstract or unbound unix sockets (any process can
 * connect to an abstract name) may not. */
static __always_inline int check_inbound(__u32 hook, struct socket *sock)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);
	struct sock *sk;
	__u16 family;
	int deny;

	if (!scope)
		return 0;
	sk = BPF_CORE_READ(sock, sk);
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	deny = family != BEE_AF_UNIX ||
	       !BPF_CORE_READ((struct unix_sock *)sk, path.dentry);
	return decide_family(hook, cgid, scope, BEE_ACCESS_NET, family, deny);
}

/* Binding an IP socket to a port of its choosing. A UDP socket so bound receives what any
 * host process sends to that port (with SO_REUSEPORT, a share of a host service's traffic),
 * which no rule names; a TCP one could only listen, which socket_listen refuses. Port 0, an
 * unused port the kernel picks (what connect and sendto do unasked), is allowed. The port is
 * read by the socket's family: sin_port and sin6_port share an offset, and an AF_INET
 * socket takes an AF_UNSPEC address as its own (inet_bind). Other families are not decided
 * here (a unix socket's path by path_mknod; netlink by socket_create and netlink_send). */
SEC("lsm/socket_bind")
int BPF_PROG(bee_socket_bind, struct socket *sock, struct sockaddr *address, int addrlen)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);
	struct sock *sk;
	__u16 family, port = 0;
	int deny;

	if (!scope)
		return 0;
	sk = BPF_CORE_READ(sock, sk);
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != BEE_AF_INET && family != BEE_AF_INET6)
		return 0;
	bpf_probe_read_kernel(&port, sizeof(port), &((struct sockaddr_in *)address)->sin_port);
	port = bpf_ntohs(port);
	deny = port != 0;
	if (should_report(scope, deny)) {
		struct bee_event *ev = event_start(BEE_HOOK_SOCKET_BIND, cgid, scope,
						   BEE_ACCESS_NET, deny);

		if (ev) {
			ev->family = family;
			ev->port = port;
			ev->protocol = sock_proto(sk);
			if (family == BEE_AF_INET)
				bpf_probe_read_kernel(ev->addr, 4,
						      &((struct sockaddr_in *)address)->sin_addr);
			else
				bpf_probe_read_kernel(ev->addr, 16,
						      &((struct sockaddr_in6 *)address)->sin6_addr);
			event_send(ev);
		}
	}
	return verdict(deny);
}

SEC("lsm/socket_listen")
int BPF_PROG(bee_socket_listen, struct socket *sock, int backlog)
{
	return check_inbound(BEE_HOOK_SOCKET_LISTEN, sock);
}

SEC("lsm/socket_accept")
int BPF_PROG(bee_socket_accept, struct socket *sock, struct socket *newsock)
{
	return check_inbound(BEE_HOOK_SOCKET_ACCEPT, sock);
}

/* Netlink messages sent to the kernel. NETLINK_ROUTE (the only netlink family
 * socket_create lets a scope open; others may arrive as descriptors) may only
 * read: every message of the send must be one rtnetlink_rcv_msg treats as a
 * GET (type & 3 == 2) or one netlink_rcv_skb acknowledges without acting (not
 * a request, or a control type). The messages are walked as netlink_rcv_skb
 * walks them (net/netlink/af_netlink.c); a send with more than
 * BEE_NLMSGS_MAX messages is denied. */
SEC("lsm/netlink_send")
int BPF_PROG(bee_netlink_send, struct sock *sk, struct sk_buff *skb)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);
	unsigned char *data;
	__u32 len, off = 0, i;
	int deny = 1;

	if (!scope)
		return 0;
	if (BPF_CORE_READ(sk, sk_protocol) != BEE_NETLINK_ROUTE)
		return decide_plain(BEE_HOOK_NETLINK_SEND, cgid, scope, 1);
	data = BPF_CORE_READ(skb, data);
	len = BPF_CORE_READ(skb, len);
	for (i = 0; i < BEE_NLMSGS_MAX; i++) {
		struct nlmsghdr h = {};
		__u32 msglen;

		if (len - off < BEE_NLMSG_HDRLEN) {
			deny = 0;
			break;
		}
		if (bpf_probe_read_kernel(&h, sizeof(h), data + off))
			break;
		if (h.nlmsg_len < BEE_NLMSG_HDRLEN || h.nlmsg_len > len - off) {
			deny = 0; /* the kernel stops here */
			break;
		}
		if ((h.nlmsg_flags & BEE_NLM_F_REQUEST) && h.nlmsg_type >= BEE_NLMSG_MIN_TYPE &&
		    (h.nlmsg_type & 3) != 2)
			break;
		msglen = (h.nlmsg_len + 3) & ~3u;
		if (msglen > len - off)
			msglen = len - off;
		off += msglen;
	}
	return decide_plain(BEE_HOOK_NETLINK_SEND, cgid, scope, deny);
}

/* ---- Scope escapes ----------------------------------------------------- */

static __always_inline int deny_in_scope(__u32 hook)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);

	if (!scope)
		return 0;
	return decide_plain(hook, cgid, scope, 1);
}

SEC("lsm/bpf")
int BPF_PROG(bee_bpf, int cmd)
{
	return deny_in_scope(BEE_HOOK_BPF);
}

SEC("lsm/sb_mount")
int BPF_PROG(bee_sb_mount)
{
	return deny_in_scope(BEE_HOOK_SB_MOUNT);
}

SEC("lsm/sb_umount")
int BPF_PROG(bee_sb_umount)
{
	return deny_in_scope(BEE_HOOK_SB_MOUNT);
}

SEC("lsm/sb_pivotroot")
int BPF_PROG(bee_sb_pivotroot)
{
	return deny_in_scope(BEE_HOOK_SB_MOUNT);
}

SEC("lsm/move_mount")
int BPF_PROG(bee_move_mount)
{
	return deny_in_scope(BEE_HOOK_SB_MOUNT);
}

SEC("lsm/userns_create")
int BPF_PROG(bee_userns_create)
{
	return deny_in_scope(BEE_HOOK_USERNS_CREATE);
}

/* clone3(CLONE_INTO_CGROUP) starts the child in the cgroup it names, which
 * for uid 0 can be any cgroup: the child would leave the scope. */
SEC("lsm/task_alloc")
int BPF_PROG(bee_task_alloc, struct task_struct *task, unsigned long clone_flags)
{
	__u64 cgid;
	struct bee_scope *scope;

	if (!(clone_flags & BEE_CLONE_INTO_CGROUP))
		return 0;
	scope = current_scope(&cgid);
	if (!scope)
		return 0;
	return decide_plain(BEE_HOOK_TASK_ALLOC, cgid, scope, 1);
}

/* perf_event_open(2) on another process is checked by ptrace_may_access,
 * which CAP_PERFMON skips before any LSM sees it, and the hook does not name
 * the target: perf events are not opened in a scope. */
SEC("lsm/perf_event_open")
int BPF_PROG(bee_perf_event_open)
{
	return deny_in_scope(BEE_HOOK_PERF_EVENT_OPEN);
}

static __always_inline __u64 task_cgroup_id(struct task_struct *t)
{
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

/* Denies acting on a task outside the caller's cgroup. */
static __always_inline int check_target(__u32 hook, struct task_struct *target)
{
	__u64 cgid;
	struct bee_scope *scope = current_scope(&cgid);

	if (!scope)
		return 0;
	return decide_plain(hook, cgid, scope, !target || task_cgroup_id(target) != cgid);
}

/* An fd's owner (F_SETOWN, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP) receives
 * SIGIO/SIGURG, or the F_SETSIG signal, through send_sigio, which never calls
 * task_kill. A scoped task may own its descriptors only itself: an owner other
 * than 0 (none), its own process (tgid) or, with F_OWNER_TID, its own thread is
 * denied, process groups included. The ids are compared in the initial pid
 * namespace, so in a nested pid namespace only 0 passes. */
static __always_inline int check_owner(int type, int pid)
{
	__u64 cgid, id = bpf_get_current_pid_tgid();
	struct bee_scope *scope = current_scope(&cgid);
	int deny;

	if (!scope)
		return 0;
	if (type == BEE_F_OWNER_TID)
		deny = pid != 0 && pid != (int)(__u32)id;
	else if (type == BEE_F_OWNER_PID)
		deny = pid != 0 && pid != (int)(id >> 32);
	else
		deny = pid != 0;
	return decide_plain(BEE_HOOK_TASK_KILL, cgid, scope, deny);
}

SEC("lsm/file_fcntl")
int BPF_PROG(bee_file_fcntl, struct file *file, unsigned int cmd, unsigned long arg)
{
	struct {
		int type;
		int pid;
	} ex = {.type = -1, .pid = -1};

	if (cmd == BEE_F_SETOWN) {
		int pid = (int)arg;

		/* A negative owner is a process group. */
		return check_owner(pid < 0 ? BEE_F_OWNER_PGRP : BEE_F_OWNER_PID, pid);
	}
	if (cmd != BEE_F_SETOWN_EX)
		return 0;
	/* Unreadable: checked as an owner of no known type (denied unless 0). */
	bpf_probe_read_user(&ex, sizeof(ex), (void *)arg);
	return check_owner(ex.type, ex.pid);
}

/* ioctls that reach past the descriptor they are issued on: an fd owner
 * (above); inode flags and fsxattr (immutable, append-only, project id), the
 * inode generation, fs-verity (a file read-only for good) and an encryption
 * policy, which need WRITE on the file's path like any change to it, although
 * a read-only descriptor can issue them; and, always denied, freezing the
 * filesystem, injecting terminal input (TIOCSTI: into the shell that started
 * bee, through an inherited terminal) and redirecting the console. */
static __always_inline int check_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	int pid = -1;

	switch (cmd) {
	case BEE_FIOSETOWN:
	case BEE_SIOCSPGRP:
		bpf_probe_read_user(&pid, sizeof(pid), (void *)arg);
		return check_owner(pid < 0 ? BEE_F_OWNER_PGRP : BEE_F_OWNER_PID, pid);
	case BEE_FS_IOC_SETFLAGS:
	case BEE_FS_IOC32_SETFLAGS:
	case BEE_FS_IOC_FSSETXATTR:
	case BEE_FS_IOC_SETVERSION:
	case BEE_FS_IOC32_SETVERSION:
	case BEE_FS_IOC_ENABLE_VERITY:
	case BEE_FS_IOC_SET_ENCRYPTION_POLICY:
		return check_file(BEE_HOOK_FILE_IOCTL, file, BEE_ACCESS_WRITE, NEED_ACCESS);
	case BEE_FIFREEZE:
	case BEE_FITHAW:
	case BEE_TIOCSTI:
	case BEE_TIOCCONS:
		return deny_in_scope(BEE_HOOK_FILE_IOCTL);
	}
	return 0;
}

SEC("lsm/file_ioctl")
int BPF_PROG(bee_file_ioctl, struct file *file, unsigned int cmd, unsigned long arg)
{
	return check_ioctl(file, cmd, arg);
}

/* 32-bit ioctls on a 64-bit kernel (6.8+; before, file_ioctl saw them). */
SEC("lsm/file_ioctl_compat")
int BPF_PROG(bee_file_ioctl_compat, struct file *file, unsigned int cmd, unsigned long arg)
{
	return check_ioctl(file, cmd, arg);
}

/* ---- Privileges, other processes, IPC, keys ---------------------------- */

/* A scope never uses the capabilities of BEE_CAPS_DENIED, whoever it runs as:
 * bee's launcher drops every capability, and this keeps them off for a scoped
 * process that holds some anyway. Probes the kernel makes without auditing
 * (cap_vm_enough_memory's, on every accounted mapping) are denied without an
 * event. The event carries the capability number in `port`. */
SEC("lsm/capable")
int BPF_PROG(bee_capable, const struct cred *cred, struct user_namespace *ns, int cap,
	     unsigned int opts)
{
	__u64 cgid;
	struct bee_scope *scope;
	struct bee_event *ev;

	if (cap < 0 || cap > 63 || !(BEE_CAPS_DENIED & BEE_CAP_BIT(cap)))
		return 0;
	scope = own_act_scope(&cgid);
	if (!scope)
		return 0;
	if (!(opts & BEE_CAP_OPT_NOAUDIT)) {
		ev = event_start(BEE_HOOK_CAPABLE, cgid, scope, 0, 1);
		if (ev) {
			ev->port = cap;
			event_send(ev);
		}
	}
	return verdict(1);
}

/* An io_uring request under a registered personality runs with credentials a
 * task registered, maybe another task's that handed the ring over, which
 * own_act_scope would take for the kernel's (kernel_acting): refused in a
 * scope. */
SEC("lsm/uring_override_creds")
int BPF_PROG(bee_uring_override_creds, const struct cred *new)
{
	return deny_in_scope(BEE_HOOK_URING_OVERRIDE_CREDS);
}

/* The kernel log (syslog(2), dmesg): /dev/kmsg is decided by its path. */
SEC("lsm/syslog")
int BPF_PROG(bee_syslog, int type)
{
	return deny_in_scope(BEE_HOOK_SYSLOG);
}

/* Keys and keyrings (keyctl, add_key, request_key): a keyring reached from a
 * scope (the user keyring above all) holds what other processes of the same
 * user stored. */
SEC("lsm/key_permission")
int BPF_PROG(bee_key_permission)
{
	return deny_in_scope(BEE_HOOK_KEY_PERMISSION);
}

static __always_inline int ipc_created(struct kern_ipc_perm *perm)
{
	__u64 key = (__u64)perm, cgid = bpf_get_current_cgroup_id();

	if (scope_of(cgid))
		bpf_map_update_elem(&bee_ipc, &key, &cgid, BPF_ANY);
	return 0;
}

static __always_inline void ipc_freed(struct kern_ipc_perm *perm)
{
	__u64 key = (__u64)perm;

	bpf_map_delete_elem(&bee_ipc, &key);
}

/* A scoped task may use (ipcperms: attach, send, receive, operate, stat) and
 * control (IPC_SET, IPC_RMID…) only SysV IPC objects its own scope created. */
static __always_inline int check_ipc(__u32 hook, struct kern_ipc_perm *perm)
{
	__u64 cgid, key = (__u64)perm, *owner;
	struct bee_scope *scope = current_scope(&cgid);

	if (!scope || !perm)
		return 0;
	owner = bpf_map_lookup_elem(&bee_ipc, &key);
	return decide_plain(hook, cgid, scope, !owner || *owner != cgid);
}

SEC("lsm/ipc_permission")
int BPF_PROG(bee_ipc_permission, struct kern_ipc_perm *ipcp, short flag)
{
	return check_ipc(BEE_HOOK_IPC_PERMISSION, ipcp);
}

SEC("lsm/shm_shmctl")
int BPF_PROG(bee_shm_shmctl, struct kern_ipc_perm *perm, int cmd)
{
	return check_ipc(BEE_HOOK_IPC_PERMISSION, perm);
}

SEC("lsm/msg_queue_msgctl")
int BPF_PROG(bee_msg_queue_msgctl, struct kern_ipc_perm *perm, int cmd)
{
	return check_ipc(BEE_HOOK_IPC_PERMISSION, perm);
}

SEC("lsm/sem_semctl")
int BPF_PROG(bee_sem_semctl, struct kern_ipc_perm *perm, int cmd)
{
	return check_ipc(BEE_HOOK_IPC_PERMISSION, perm);
}

SEC("lsm/shm_alloc_security")
int BPF_PROG(bee_shm_alloc, struct kern_ipc_perm *perm)
{
	return ipc_created(perm);
}

SEC("lsm/msg_queue_alloc_security")
int BPF_PROG(bee_msg_queue_alloc, struct kern_ipc_perm *perm)
{
	return ipc_created(perm);
}

SEC("lsm/sem_alloc_security")
int BPF_PROG(bee_sem_alloc, struct kern_ipc_perm *perm)
{
	return ipc_created(perm);
}

SEC("lsm/shm_free_security")
int BPF_PROG(bee_shm_free, struct kern_ipc_perm *perm)
{
	ipc_freed(perm);
	return 0;
}

SEC("lsm/msg_queue_free_security")
int BPF_PROG(bee_msg_queue_free, struct kern_ipc_perm *perm)
{
	ipc_freed(perm);
	return 0;
}

SEC("lsm/sem_free_security")
int BPF_PROG(bee_sem_free, struct kern_ipc_perm *perm)
{
	ipc_freed(perm);
	return 0;
}

/* Priorities, I/O priorities, scheduling (affinity included) and resource
 * limits of a process outside the caller's cgroup: same user or not, a scope
 * does not change them (prlimit(RLIMIT_CPU) kills). */
SEC("lsm/task_setnice")
int BPF_PROG(bee_task_setnice, struct task_struct *p, int nice)
{
	return check_target(BEE_HOOK_TASK_SETSCHEDULER, p);
}

SEC("lsm/task_setioprio")
int BPF_PROG(bee_task_setioprio, struct task_struct *p, int ioprio)
{
	return check_target(BEE_HOOK_TASK_SETSCHEDULER, p);
}

SEC("lsm/task_setscheduler")
int BPF_PROG(bee_task_setscheduler, struct task_struct *p)
{
	return check_target(BEE_HOOK_TASK_SETSCHEDULER, p);
}

SEC("lsm/task_setrlimit")
int BPF_PROG(bee_task_setrlimit, struct task_struct *p, unsigned int resource,
	     struct rlimit *new_rlim)
{
	return check_target(BEE_HOOK_TASK_SETRLIMIT, p);
}

SEC("lsm/ptrace_access_check")
int BPF_PROG(bee_ptrace_access_check, struct task_struct *child, unsigned int mode)
{
	return check_target(BEE_HOOK_PTRACE_ACCESS_CHECK, child);
}

SEC("lsm/task_kill")
int BPF_PROG(bee_task_kill, struct task_struct *p)
{
	return check_target(BEE_HOOK_TASK_KILL, p);
}

/* ---- The directory cache's upkeep ------------------------------------- */

/* Never attached: the loader runs it (BPF_PROG_TEST_RUN) to check that the
 * address it was given is rename_lock's: it returns the sequence there, or 1
 * (odd, as while a move is in flight) when it cannot read it. */
SEC("raw_tp/bee_rename_seq")
int bee_rename_seq(void *ctx)
{
	__u32 seq;

	if (rename_seq(&seq) != 0)
		return 1;
	return seq;
}

/* An inode is being freed: its cache entry, if any, goes before its memory
 * can be reused for another inode, whose address would then find it. Runs
 * for every inode freed on the host. An LSM program, not fentry: the kernel
 * skips a tracing program on a CPU where another task was preempted inside
 * it (its recursion guard), and one skipped deletion would leave an entry
 * behind for good. The mode is not looked at (a bad inode's is rewritten):
 * every inode pays one hash lookup. Only an inode with an entry pays the
 * deletion (which takes the bucket's lock): a lookup that finds none proves
 * as much as a deletion that finds none, at the same instant, and an entry
 * stored after it is taken back by its own fill (dircache_put). */
SEC("lsm/inode_free_security")
int BPF_PROG(bee_inode_free, struct inode *inode)
{
	__u64 key = (__u64)inode;

	if (bee_cfg_dircache && bpf_map_lookup_elem(&bee_dircache, &key))
		bpf_map_delete_elem(&bee_dircache, &key);
	return 0;
}

/* ---- DNS steering ------------------------------------------------------ *
 *
 * cgroup sock_addr programs, attached by BPF links (which run beside any other program) to
 * the cgroup v2 root once a policy with name grants is installed. For a task whose cgroup
 * is a key of bee_dns, every
 * connect or sendmsg to port 53 (TCP or UDP, any address, IPv4 or IPv6) is rewritten to the
 * scope's resolver on loopback; the LSM lets port 53 through only for such scopes. Replies
 * read back (recvmsg) as coming from the name server the socket addressed. These programs
 * run after the LSM's socket_connect/socket_sendmsg, on the address the task gave. They
 * never refuse anything (return 1): refusing is the LSM's job. */

SEC("cgroup/connect4")
int bee_dns_connect4(struct bpf_sock_addr *ctx)
{
	return steer4(ctx);
}

SEC("cgroup/sendmsg4")
int bee_dns_sendmsg4(struct bpf_sock_addr *ctx)
{
	return steer4(ctx);
}

SEC("cgroup/connect6")
int bee_dns_connect6(struct bpf_sock_addr *ctx)
{
	return steer6(ctx);
}

SEC("cgroup/sendmsg6")
int bee_dns_sendmsg6(struct bpf_sock_addr *ctx)
{
	return steer6(ctx);
}

SEC("cgroup/recvmsg4")
int bee_dns_recvmsg4(struct bpf_sock_addr *ctx)
{
	return unsteer4(ctx);
}

SEC("cgroup/recvmsg6")
int bee_dns_recvmsg6(struct bpf_sock_addr *ctx)
{
	return unsteer6(ctx);
}
