/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * What bee.bpf.c (the BPF LSM engine's DNS steering) and gate.bpf.c (the Landlock
 * engine's network gate) decide alike about a TCP or UDP peer: whether a port rule
 * matches, whether an address is loopback, and how a scope's DNS traffic is steered to its
 * resolver and its replies read back, and the maps that holds (each object gets its own;
 * the loader sizes them and may share one by pinning it).
 */
#ifndef BEE_SOCKADDR_H
#define BEE_SOCKADDR_H

/* Name grants (BEE_SCOPE_DNS): where a scope's DNS traffic is steered, and the addresses
 * its resolver answered with, until their TTL runs out. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct bee_dns);
} bee_dns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct bee_answer_key);
	__type(value, struct bee_answer);
} bee_answers SEC(".maps");

/* The loopback ports of every scope's resolver (UDP and TCP alike), valued by how many scopes
 * are steered there: no scope may address another scope's resolver directly (its queries
 * would be answered by the other scope's grants). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u32);
} bee_dns_ports SEC(".maps");

/* Socket cookie -> the name server a steered socket last addressed, so that replies read as
 * coming from it (resolvers drop answers from another address). Losing an entry to LRU
 * eviction only makes that one lookup fail. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 14);
	__type(key, __u64);
	__type(value, struct bee_dns_peer);
} bee_dns_peers SEC(".maps");


/* Whether a rule of `v` (NULL: none) covers `proto` (BEE_PROTO_*) on `port`. */
static __always_inline int net_value_allows(const struct bee_net_value *v, __u8 proto,
					    __u16 port)
{
	__u32 i, count;

	if (!v)
		return 0;
	count = v->count;
	for (i = 0; i < BEE_NET_RULES_MAX; i++) {
		if (i >= count)
			break;
		if ((v->rules[i].protocols & proto) && v->rules[i].first <= port &&
		    port <= v->rules[i].last)
			return 1;
	}
	return 0;
}

/* Whether `a` (v4: its first 4 bytes; else 16 bytes, v4-mapped included) is a loopback
 * address: 127.0.0.0/8 or ::1. */
static __always_inline int is_loopback(const __u8 *a, int v4)
{
	int i;

	if (v4)
		return a[0] == 127;
	for (i = 0; i < 10; i++)
		if (a[i])
			return 0;
	if (a[10] == 0xff && a[11] == 0xff)
		return a[12] == 127;
	if (a[10] || a[11] || a[12] || a[13] || a[14])
		return 0;
	return a[15] == 1;
}

#define BEE_LOOPBACK4 0x7f000001

static __always_inline struct bee_dns *dns_target(void)
{
	__u64 cgid = bpf_get_current_cgroup_id();

	return bpf_map_lookup_elem(&bee_dns, &cgid);
}

static __always_inline void dns_remember(struct bpf_sock_addr *ctx, __u16 family)
{
	struct bee_dns_peer peer = {.family = family};
	__u64 cookie = bpf_get_socket_cookie(ctx);

	if (family == BEE_AF_INET) {
		peer.addr[0] = ctx->user_ip4;
	} else {
		peer.addr[0] = ctx->user_ip6[0];
		peer.addr[1] = ctx->user_ip6[1];
		peer.addr[2] = ctx->user_ip6[2];
		peer.addr[3] = ctx->user_ip6[3];
	}
	bpf_map_update_elem(&bee_dns_peers, &cookie, &peer, BPF_ANY);
}

static __always_inline int steer4(struct bpf_sock_addr *ctx)
{
	struct bee_dns *d;

	if (ctx->user_port != bpf_htons(BEE_DNS_PORT))
		return 1;
	d = dns_target();
	if (!d)
		return 1;
	dns_remember(ctx, BEE_AF_INET);
	ctx->user_ip4 = bpf_htonl(BEE_LOOPBACK4);
	ctx->user_port = bpf_htons(d->port);
	return 1;
}

static __always_inline int steer6(struct bpf_sock_addr *ctx)
{
	struct bee_dns *d;

	if (ctx->user_port != bpf_htons(BEE_DNS_PORT))
		return 1;
	d = dns_target();
	if (!d)
		return 1;
	dns_remember(ctx, BEE_AF_INET6);
	ctx->user_ip6[0] = 0;
	ctx->user_ip6[1] = 0;
	if (d->v6) {
		ctx->user_ip6[2] = 0;
		ctx->user_ip6[3] = bpf_htonl(1);
	} else {
		ctx->user_ip6[2] = bpf_htonl(0xffff);
		ctx->user_ip6[3] = bpf_htonl(BEE_LOOPBACK4);
	}
	ctx->user_port = bpf_htons(d->port);
	return 1;
}

/* A reply read from the resolver (recvmsg) reads as coming from the IPv4 name server the
 * socket addressed. */
static __always_inline int unsteer4(struct bpf_sock_addr *ctx)
{
	struct bee_dns_peer *peer;
	struct bee_dns *d;
	__u64 cookie;

	d = dns_target();
	if (!d || ctx->user_ip4 != bpf_htonl(BEE_LOOPBACK4) ||
	    ctx->user_port != bpf_htons(d->port))
		return 1;
	cookie = bpf_get_socket_cookie(ctx);
	peer = bpf_map_lookup_elem(&bee_dns_peers, &cookie);
	if (!peer || peer->family != BEE_AF_INET)
		return 1;
	ctx->user_ip4 = peer->addr[0];
	ctx->user_port = bpf_htons(BEE_DNS_PORT);
	return 1;
}

/* The same for an IPv6 socket. */
static __always_inline int unsteer6(struct bpf_sock_addr *ctx)
{
	struct bee_dns_peer *peer;
	struct bee_dns *d;
	__u64 cookie;
	__u32 w2, w3;

	d = dns_target();
	if (!d || ctx->user_port != bpf_htons(d->port) || ctx->user_ip6[0] != 0 ||
	    ctx->user_ip6[1] != 0)
		return 1;
	w2 = ctx->user_ip6[2];
	w3 = ctx->user_ip6[3];
	if (!((w2 == 0 && w3 == bpf_htonl(1)) ||
	      (w2 == bpf_htonl(0xffff) && w3 == bpf_htonl(BEE_LOOPBACK4))))
		return 1;
	cookie = bpf_get_socket_cookie(ctx);
	peer = bpf_map_lookup_elem(&bee_dns_peers, &cookie);
	if (!peer)
		return 1;
	if (peer->family == BEE_AF_INET) {
		/* An IPv4 name server addressed through an IPv6 socket reads as ::ffff:a.b.c.d. */
		ctx->user_ip6[2] = bpf_htonl(0xffff);
		ctx->user_ip6[3] = peer->addr[0];
	} else {
		ctx->user_ip6[0] = peer->addr[0];
		ctx->user_ip6[1] = peer->addr[1];
		ctx->user_ip6[2] = peer->addr[2];
		ctx->user_ip6[3] = peer->addr[3];
	}
	ctx->user_port = bpf_htons(BEE_DNS_PORT);
	return 1;
}

#endif /* BEE_SOCKADDR_H */
