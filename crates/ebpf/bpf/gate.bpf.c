// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The Landlock engine's network gate: cgroup sock_addr programs, which need no BPF LSM.
 *
 * Landlock matches TCP ports only; these programs decide every TCP and UDP peer a gated
 * scope addresses, as the BPF LSM engine's socket_connect and socket_sendmsg do: by the
 * scope's address rules (LPM tries keyed by the scope's gate id), and, for a scope with name
 * grants, by the unexpired answers of its resolver, to which its DNS traffic (port 53, TCP
 * and UDP, any address) is steered. They are attached to each gated scope's cgroup
 * (BPF_PROG_ATTACH with BPF_F_ALLOW_MULTI: the attachment lasts as long as the cgroup, not
 * as long as bee), and decide by the calling task's cgroup id: a task whose cgroup is not a
 * key of bee_gate is denied (it can only be a task that moved in after the gate's entry went,
 * or that holds a scope's socket without being in the scope).
 *
 * A bind to a port of the scope's choosing is refused too (port 0 passes).
 *
 * A refusal returns 0, which the kernel turns into EPERM for connect(2) and sendmsg(2), and
 * is reported on bee_gate_events as a bee_event (hook socket_connect or socket_sendmsg), the
 * record the LSM engine writes for the same denial. The seccomp filter of the scope leaves
 * only TCP and UDP sockets of these families to decide (no raw, ICMP, SCTP or MPTCP socket;
 * no TCP Fast Open), and no unix socket reaches a socket outside the scope.
 */
#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "bee_common.h"
#include "bee.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* A gated scope: cgroup id -> struct bee_gate_scope. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct bee_gate_scope);
} bee_gate SEC(".maps");

/* Address rules, keyed by gate id and address, as the LSM engine's bee_net_v4/v6. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct bee_lpm_v4);
	__type(value, struct bee_net_value);
} bee_gate_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct bee_lpm_v6);
	__type(value, struct bee_net_value);
} bee_gate_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} bee_gate_events SEC(".maps");

/* Refusals the ring buffer had no room for (one counter, since load): bee tells every scope
 * live while it grew that its report may be incomplete. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} bee_gate_lost SEC(".maps");

/* Name grants: the maps and the steering of bee.bpf.c, the same source. */
#include "sockaddr.h"

static __always_inline __u8 gate_proto(struct bpf_sock_addr *ctx)
{
	if (ctx->protocol == BEE_IPPROTO_TCP)
		return BEE_PROTO_TCP;
	if (ctx->protocol == BEE_IPPROTO_UDP)
		return BEE_PROTO_UDP;
	return 0;
}

/* Whether the scope `g` of cgroup `cgid` may address `a` (16 bytes, IPv4 v4-mapped) on
 * `port` over `proto`; `v4` says the peer is IPv4. The order is the LSM engine's
 * (check_sockaddr, dns_verdict): a resolver's port on loopback only for its own scope, port
 * 53 steered where names are granted (and 853 never), then the rules, then the answers. */
static __always_inline int gate_allows(__u64 cgid, const struct bee_gate_scope *g,
				       const __u8 *a, int v4, __u8 proto, __u16 port)
{
	struct bee_answer_key akey = {.cgroup_id = cgid};
	struct bee_answer *ans;
	struct bee_dns *own;

	if (!proto)
		return 0;
	if (is_loopback(a, 0) && bpf_map_lookup_elem(&bee_dns_ports, &port)) {
		own = (g->flags & BEE_SCOPE_DNS) ? bpf_map_lookup_elem(&bee_dns, &cgid) : NULL;
		return own && own->port == port;
	}
	if (g->flags & BEE_SCOPE_DNS) {
		if (port == BEE_DNS_PORT)
			return 1;
		if (port == BEE_DOT_PORT)
			return 0;
	}
	if (v4) {
		struct bee_lpm_v4 k4 = {.prefixlen = 64, .policy_id = g->gate_id};

		__builtin_memcpy(k4.addr, &a[12], 4);
		if (net_value_allows(bpf_map_lookup_elem(&bee_gate_v4, &k4), proto, port))
			return 1;
	} else {
		struct bee_lpm_v6 k6 = {.prefixlen = 160, .policy_id = g->gate_id};

		__builtin_memcpy(k6.addr, a, 16);
		if (net_value_allows(bpf_map_lookup_elem(&bee_gate_v6, &k6), proto, port))
			return 1;
	}
	if (!(g->flags & BEE_SCOPE_DNS))
		return 0;
	__builtin_memcpy(akey.addr, a, 16);
	ans = bpf_map_lookup_elem(&bee_answers, &akey);
	if (!ans || bpf_ktime_get_boot_ns() >= ans->expires_ns)
		return 0;
	return net_value_allows(&ans->ports, proto, port);
}

/* Reports a refusal, as the LSM engine's record of the same denial: the address as the
 * task gave it, 4 bytes for an IPv4 hook, 16 (a v4-mapped one included) for an IPv6 one. */
static __always_inline void gate_report(__u32 hook, __u64 cgid, const struct bee_gate_scope *g,
					int v6, const __u8 *a, __u8 proto, __u16 port)
{
	struct bee_event *ev = bpf_ringbuf_reserve(&bee_gate_events, sizeof(*ev), 0);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 zero = 0;
	__u64 *lost;

	if (!ev) {
		lost = bpf_map_lookup_elem(&bee_gate_lost, &zero);
		if (lost)
			__sync_fetch_and_add(lost, 1);
		return;
	}
	ev->cgroup_id = cgid;
	ev->pid = (__u32)id;
	ev->tgid = id >> 32;
	ev->hook = hook;
	ev->error = -BEE_EPERM;
	ev->policy_id = g ? g->gate_id : 0;
	ev->access = BEE_ACCESS_NET;
	__builtin_memset(ev->comm, 0, sizeof(ev->comm));
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	ev->family = v6 ? BEE_AF_INET6 : BEE_AF_INET;
	ev->port = port;
	ev->protocol = proto;
	ev->flags = 0;
	ev->_pad0 = 0;
	__builtin_memset(ev->addr, 0, sizeof(ev->addr));
	if (v6)
		__builtin_memcpy(ev->addr, a, 16);
	else
		__builtin_memcpy(ev->addr, &a[12], 4);
	ev->path_len = 0;
	ev->_pad1 = 0;
	bpf_ringbuf_submit(ev, 0);
}

/* The address in `ctx` as 16 bytes in `a` (an IPv4 one v4-mapped); returns whether it is an
 * IPv4 address (`v6` says the hook is an IPv6 one; ::ffff:a.b.c.d is an IPv4 peer). */
static __always_inline int gate_addr(struct bpf_sock_addr *ctx, int v6, __u8 *a)
{
	__u32 w0, w1, w2, w3;

	if (!v6) {
		w3 = ctx->user_ip4;
		a[10] = 0xff;
		a[11] = 0xff;
		__builtin_memcpy(&a[12], &w3, 4);
		return 1;
	}
	w0 = ctx->user_ip6[0];
	w1 = ctx->user_ip6[1];
	w2 = ctx->user_ip6[2];
	w3 = ctx->user_ip6[3];
	__builtin_memcpy(&a[0], &w0, 4);
	__builtin_memcpy(&a[4], &w1, 4);
	__builtin_memcpy(&a[8], &w2, 4);
	__builtin_memcpy(&a[12], &w3, 4);
	/* The v4-mapped prefix (80 zero bits, then 0xffff) tested by word, as the words are in
	 * network order: tested byte by byte, its twelve branches made the verifier walk 29,151
	 * instructions of each IPv6 program, against 6,194 so (docs/benchmarks.md, 2026-12-07). */
	return (w0 | w1) == 0 && w2 == bpf_htonl(0x0000ffff);
}

/* The verdict on the peer in `ctx` (1 allows, 0 refuses with EPERM), and the steering of an
 * allowed DNS peer. `v6` says the hook is an IPv6 one; the family is the hook's whatever
 * the address's sa_family says (udp_sendmsg reads an AF_UNSPEC name as its own family). */
static __always_inline int gate(struct bpf_sock_addr *ctx, __u32 hook, int v6)
{
	__u64 cgid = bpf_get_current_cgroup_id();
	struct bee_gate_scope *g = bpf_map_lookup_elem(&bee_gate, &cgid);
	__u8 a[16] = {}, proto = gate_proto(ctx);
	__u16 port = bpf_ntohs(ctx->user_port);
	int v4 = gate_addr(ctx, v6, a);

	if (!g || !gate_allows(cgid, g, a, v4, proto, port)) {
		gate_report(hook, cgid, g, v6, a, proto, port);
		return 0;
	}
	return v6 ? steer6(ctx) : steer4(ctx);
}

SEC("cgroup/connect4")
int bee_gate_connect4(struct bpf_sock_addr *ctx)
{
	return gate(ctx, BEE_HOOK_SOCKET_CONNECT, 0);
}

SEC("cgroup/sendmsg4")
int bee_gate_sendmsg4(struct bpf_sock_addr *ctx)
{
	return gate(ctx, BEE_HOOK_SOCKET_SENDMSG, 0);
}

SEC("cgroup/connect6")
int bee_gate_connect6(struct bpf_sock_addr *ctx)
{
	return gate(ctx, BEE_HOOK_SOCKET_CONNECT, 1);
}

SEC("cgroup/sendmsg6")
int bee_gate_sendmsg6(struct bpf_sock_addr *ctx)
{
	return gate(ctx, BEE_HOOK_SOCKET_SENDMSG, 1);
}

/* A bind of a scope's TCP or UDP socket to a port of its choosing (socket_bind in the LSM
 * engine): a UDP socket so bound receives what any host process sends to that port (with
 * SO_REUSEPORT, a share of a host service's traffic), which no rule names. Port 0, one the
 * kernel picks, is allowed. Refused (0, EPERM) and reported as socket_bind; a task of no
 * gated scope is refused, as in gate(). */
static __always_inline int gate_bind(struct bpf_sock_addr *ctx, int v6)
{
	__u64 cgid = bpf_get_current_cgroup_id();
	struct bee_gate_scope *g = bpf_map_lookup_elem(&bee_gate, &cgid);
	__u16 port = bpf_ntohs(ctx->user_port);
	__u8 a[16] = {};

	if (g && port == 0)
		return 1;
	gate_addr(ctx, v6, a);
	gate_report(BEE_HOOK_SOCKET_BIND, cgid, g, v6, a, gate_proto(ctx), port);
	return 0;
}

SEC("cgroup/bind4")
int bee_gate_bind4(struct bpf_sock_addr *ctx)
{
	return gate_bind(ctx, 0);
}

SEC("cgroup/bind6")
int bee_gate_bind6(struct bpf_sock_addr *ctx)
{
	return gate_bind(ctx, 1);
}

SEC("cgroup/recvmsg4")
int bee_gate_recvmsg4(struct bpf_sock_addr *ctx)
{
	return unsteer4(ctx);
}

SEC("cgroup/recvmsg6")
int bee_gate_recvmsg6(struct bpf_sock_addr *ctx)
{
	return unsteer6(ctx);
}
