#!/bin/sh
# Which LSM hooks may call bpf_d_path, on each kernel of the VM matrix.
#
# For every hook below, builds a one-program object that calls bpf_d_path on
# the hook's file or path argument, boots the kernels with `cargo xtask vm`
# and loads each object with bpftool. Prints `DPATH <hook>: loads` or
# `DPATH <hook>: REFUSED …` per kernel.
#
# Usage: vm/dpath-matrix.sh [cargo xtask vm options, e.g. --kernel 6.1]
# Needs clang-19 and bpftool (`cargo xtask ebpf --check` installs them).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/bee-dpath.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$repo/crates/ebpf/bpf/vmlinux.h" "$work/"

# hook | BPF_PROG parameters | expression of type `struct path *`
while IFS='|' read -r hook params path; do
	[ -n "$hook" ] || continue
	cat > "$work/$hook.bpf.c" <<EOF
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
char LICENSE[] SEC("license") = "Dual MIT/GPL";
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, char[256]);
} buf SEC(".maps");
SEC("lsm/$hook")
int BPF_PROG(dpath_probe, $params)
{
	__u32 zero = 0;
	char *out = bpf_map_lookup_elem(&buf, &zero);
	if (out)
		bpf_d_path((struct path *)($path), out, 256);
	return 0;
}
EOF
	(cd "$work" && clang-19 -g -O2 -target bpf -D__TARGET_ARCH_x86 -I. \
		-c "$hook.bpf.c" -o "$hook.o")
done <<'EOF'
file_open|struct file *file|&file->f_path
file_permission|struct file *file, int mask|&file->f_path
file_ioctl|struct file *file|&file->f_path
file_lock|struct file *file|&file->f_path
file_receive|struct file *file|&file->f_path
file_alloc_security|struct file *file|&file->f_path
mmap_file|struct file *file|&file->f_path
file_mprotect|struct vm_area_struct *vma|&vma->vm_file->f_path
bprm_check_security|struct linux_binprm *bprm|&bprm->file->f_path
bprm_creds_for_exec|struct linux_binprm *bprm|&bprm->file->f_path
bprm_committed_creds|struct linux_binprm *bprm|&bprm->file->f_path
inode_getattr|const struct path *path|path
path_truncate|const struct path *path|path
path_unlink|const struct path *dir|dir
path_mkdir|const struct path *dir|dir
path_chmod|const struct path *path|path
sb_mount|const char *dev, const struct path *path|path
EOF

cat > "$work/load-all.sh" <<EOF
#!/bin/sh
cd $work
for obj in *.o; do
	hook=\${obj%.o}
	if /usr/sbin/bpftool prog load "\$obj" "/sys/fs/bpf/\$hook" > "/tmp/\$hook.log" 2>&1; then
		echo "DPATH \$hook: loads"
		rm -f "/sys/fs/bpf/\$hook"
	else
		reason=\$(grep -m1 -E 'not allowed|unknown func|invalid' "/tmp/\$hook.log" | grep -v '^libbpf')
		echo "DPATH \$hook: REFUSED: \$reason"
	fi
done
EOF

cd "$repo"
cargo xtask vm "$@" --with "$work" --bin /usr/sbin/bpftool -- sh "$work/load-all.sh"
