// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Support probe: the smallest LSM program. If this loads and attaches, the
 * running kernel runs BPF LSM programs; `bee check` loads it for that proof
 * instead of trusting the LSM list.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("lsm/file_open")
int BPF_PROG(bee_probe, struct file *file)
{
	return 0;
}
