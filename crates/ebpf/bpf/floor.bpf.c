// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The floor of a BPF LSM: one program per hook bee.bpf.o attaches, each
 * returning 0 at once. Benchmarks attach it in place of bee's programs to
 * measure what the kernel charges for running any BPF program on those hooks
 * (the trampoline's entry and exit, and the call), apart from what bee's
 * programs do. It enforces nothing and bee never attaches it.
 *
 * Program names are `floor_<hook>`; the list must follow the engine's
 * PROGRAMS, OPTIONAL_PROGRAMS and CACHE_PROGRAMS (the benchmark refuses to
 * run when a hook has no program here).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define FLOOR(hook)                                      \
	SEC("lsm/" #hook)                                \
	int floor_##hook(unsigned long long *ctx)        \
	{                                                \
		return 0;                                \
	}

FLOOR(file_open)
FLOOR(file_receive)
FLOOR(bprm_check_security)
FLOOR(mmap_file)
FLOOR(file_mprotect)
FLOOR(path_unlink)
FLOOR(path_rmdir)
FLOOR(path_mkdir)
FLOOR(path_mknod)
FLOOR(path_symlink)
FLOOR(path_rename)
FLOOR(path_link)
FLOOR(path_notify)
FLOOR(path_truncate)
FLOOR(path_chmod)
FLOOR(path_chown)
FLOOR(socket_connect)
FLOOR(socket_sendmsg)
FLOOR(socket_create)
FLOOR(unix_stream_connect)
FLOOR(unix_may_send)
FLOOR(bpf)
FLOOR(sb_mount)
FLOOR(sb_umount)
FLOOR(sb_pivotroot)
FLOOR(move_mount)
FLOOR(userns_create)
FLOOR(ptrace_access_check)
FLOOR(task_kill)
FLOOR(file_fcntl)
FLOOR(file_ioctl)
FLOOR(socket_bind)
FLOOR(socket_listen)
FLOOR(socket_accept)
FLOOR(netlink_send)
FLOOR(task_alloc)
FLOOR(perf_event_open)
FLOOR(inode_setattr)
FLOOR(inode_setxattr)
FLOOR(inode_removexattr)
FLOOR(capable)
FLOOR(syslog)
FLOOR(key_permission)
FLOOR(ipc_permission)
FLOOR(shm_shmctl)
FLOOR(msg_queue_msgctl)
FLOOR(sem_semctl)
FLOOR(shm_alloc_security)
FLOOR(msg_queue_alloc_security)
FLOOR(sem_alloc_security)
FLOOR(shm_free_security)
FLOOR(msg_queue_free_security)
FLOOR(sem_free_security)
FLOOR(task_setnice)
FLOOR(task_setioprio)
FLOOR(task_setscheduler)
FLOOR(task_setrlimit)
FLOOR(inode_set_acl)
FLOOR(inode_remove_acl)
FLOOR(file_ioctl_compat)
FLOOR(uring_override_creds)
FLOOR(inode_free_security)
