/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket programs (cgroup sock_addr hooks): a connect() or a UDP
 * sendmsg() to a frontend is sent to a backend before any packet exists,
 * and recvmsg() and getpeername() show the frontend instead of the
 * backend. The client's address and port are not known at connect(), so
 * a new socket takes a random slot (for a Maglev frontend, a random
 * element of its table, which carries the weights and any rejected
 * share), and frontends restricted by source ranges are left to the tc
 * programs.
 * Session affinity pins the client's network namespace (see lb.h). A
 * proxy-redirected frontend's sockets go to the L7 proxy on the loopback
 * address; for a redirect with skip-from-backend, only a socket bound to
 * its address can be told from the redirect's backends, and the others
 * are left to the tc programs too.
 */
#ifndef __LBSTATE_SOCK_H
#define __LBSTATE_SOCK_H

#ifndef ECONNREFUSED
#define ECONNREFUSED 111
#endif

/* lb_sock_addr reads the address a sock_addr hook is about. */
static __always_inline void lb_sock_addr(struct bpf_sock_addr *ctx, bool v6, __u8 addr[16])
{
	__u32 *w = (__u32 *)addr;

	if (v6) {
		w[0] = ctx->user_ip6[0];
		w[1] = ctx->user_ip6[1];
		w[2] = ctx->user_ip6[2];
		w[3] = ctx->user_ip6[3];
	} else {
		w[0] = 0;
		w[1] = 0;
		w[2] = bpf_htonl(0x0000ffff);
		w[3] = ctx->user_ip4;
	}
}

/* lb_sock_set_addr writes addr and port into ctx; false if they do not fit its family. */
static __always_inline bool lb_sock_set_addr(struct bpf_sock_addr *ctx, bool v6, const __u8 addr[16], __be16 port)
{
	const __u32 *w = (const __u32 *)addr;

	if (v6) {
		ctx->user_ip6[0] = w[0];
		ctx->user_ip6[1] = w[1];
		ctx->user_ip6[2] = w[2];
		ctx->user_ip6[3] = w[3];
	} else {
		if (!lb_addr_is_v4(addr))
			return false;
		ctx->user_ip4 = w[3];
	}
	ctx->user_port = port;
	return true;
}

/* lb_sock_key is the lb_sock_ct key of ctx's socket talking to addr:port. */
static __always_inline void lb_sock_key(struct bpf_sock_addr *ctx, struct lb_ct_key *k, const __u8 addr[16], __be16 port)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);

	__builtin_memcpy(k->src, &cookie, sizeof(cookie));
	__builtin_memcpy(k->dst, addr, 16);
	k->dport = port;
	k->proto = ctx->protocol;
	k->kind = LB_CT_SOCKET;
}

/* lb_sock_client is the affinity client of a socket: its network namespace. */
static __always_inline void lb_sock_client(struct bpf_sock_addr *ctx, __u8 client[16])
{
	__u64 netns = bpf_get_netns_cookie(ctx);

	__builtin_memset(client, 0, 8);
	__builtin_memcpy(&client[8], &netns, sizeof(netns));
}

/*
 * lb_sock_source reads the address a socket is bound to, mapped as in
 * lb.h; false when it is not bound to one (its address is chosen after
 * connect(), or per datagram).
 */
static __always_inline bool lb_sock_source(struct bpf_sock_addr *ctx, bool v6, __u8 addr[16])
{
	struct bpf_sock *sk = ctx->sk;
	__u32 *w = (__u32 *)addr;

	if (!sk)
		return false;
	if (v6) {
		w[0] = sk->src_ip6[0];
		w[1] = sk->src_ip6[1];
		w[2] = sk->src_ip6[2];
		w[3] = sk->src_ip6[3];
		return w[0] | w[1] | w[2] | w[3];
	}
	w[0] = 0;
	w[1] = 0;
	w[2] = bpf_htonl(0x0000ffff);
	w[3] = sk->src_ip4;
	return w[3] != 0;
}

/*
 * lb_sock_forward sends a connect() (or, with sendmsg, a datagram) to a
 * frontend to a backend. An unconnected UDP socket keeps its backend
 * while the backend exists, as a flow does in conntrack (lb_sock_ct).
 */
static __always_inline int lb_sock_forward(struct bpf_sock_addr *ctx, bool v6, bool sendmsg)
{
	struct lb_service_key key = {};
	struct lb_ct_key fwd = {}, reply = {};
	struct lb_ct_value v = {}, *ct;
	struct lb_service_value master, *m = &master; /* a copy (lb_read_master) */
	struct lb_backend to;
	__u8 client[16] = {}, source[16] = {};
	__u32 rev_nat_id, backend_id = 0, reason, now, rnd;
	__u16 slot;
	bool new_flow = true, have = false;
	int r;

	if (ctx->protocol != IPPROTO_TCP && ctx->protocol != IPPROTO_UDP)
		return 1;
	lb_sock_addr(ctx, v6, key.addr);
	key.port = (__be16)ctx->user_port;
	key.proto = ctx->protocol;
	r = lb_lookup_frontend(&key, true, m);
	if (r == LB_MASTER_TORN) {
		lb_count_drop(0, LB_DROP_TORN_MASTER);
		bpf_set_retval(-ECONNREFUSED);
		return 0;
	}
	if (r != LB_MASTER_FOUND || (m->flags & LB_F_SOURCE_RANGES))
		return 1;
	rev_nat_id = m->rev_nat_id;
	now = lb_now();
	if (sendmsg)
		lb_sock_key(ctx, &fwd, key.addr, key.port);
	if (m->flags & LB_F_PROXY) {
		lb_proxy_backend(m, !v6 || lb_addr_is_v4(key.addr), &to);
		have = true;
		if (sendmsg) { /* a datagram of a flow already at the proxy is not a new flow */
			ct = bpf_map_lookup_elem(&lb_sock_ct, &fwd);
			new_flow = !(ct && ct->dir == LB_CT_FORWARD && ct->rev_nat_id == rev_nat_id && ct->backend_id == 0 &&
				     lb_ct_live(ct, now));
		}
	} else if (m->flags & LB_F_SKIP_FROM_BACKEND) {
		/* Only a socket bound to its address can be told from a
		 * backend here; the others are left to the tc programs,
		 * which see the packets' source. */
		if (!lb_sock_source(ctx, v6, source))
			return 1;
		if (lb_client_is_backend(&key, m, source)) {
			backend_id = lb_select_fallback(&key, m, &reason);
			if (!lb_backend_lookup(backend_id, &to)) {
				lb_count_drop(rev_nat_id, backend_id ? LB_DROP_MISSING_ENTRY : reason);
				bpf_set_retval(-ECONNREFUSED);
				return 0;
			}
			have = true;
		}
	}
	if (!have && sendmsg) {
		ct = bpf_map_lookup_elem(&lb_sock_ct, &fwd);
		if (ct && ct->dir == LB_CT_FORWARD && ct->rev_nat_id == rev_nat_id &&
		    lb_ct_live(ct, now)) {
			backend_id = ct->backend_id;
			have = lb_backend_lookup(backend_id, &to);
			new_flow = !have;
		}
	}
	if (!have && (m->flags & LB_F_AFFINITY)) {
		lb_sock_client(ctx, client);
		backend_id = lb_affinity_backend(&key, m, client, now);
		have = lb_backend_lookup(backend_id, &to);
	}
	if (!have) {
		rnd = bpf_get_prandom_u32(); /* the "hash" of a Maglev frontend's socket */
		backend_id = lb_select_backend(&key, m, &rnd, &reason, &slot);
		if (!lb_backend_lookup(backend_id, &to)) {
			lb_count_drop(rev_nat_id, backend_id ? LB_DROP_MISSING_ENTRY : reason);
			bpf_set_retval(-ECONNREFUSED);
			return 0;
		}
		if (m->flags & LB_F_AFFINITY)
			lb_affinity_pin(m, client, backend_id, slot, now);
	}
	if (!lb_sock_set_addr(ctx, v6, to.addr, to.port)) {
		lb_count_drop(rev_nat_id, LB_DROP_UNSUPPORTED);
		bpf_set_retval(-ECONNREFUSED);
		return 0;
	}
	v.backend_id = backend_id;
	v.rev_nat_id = rev_nat_id;
	v.flags = LB_CT_F_REPLIED; /* a socket's entries live the established timeout */
	v.expires = now + lb_ct_timeout(key.proto, v.flags);
	if (sendmsg) {
		v.dir = LB_CT_FORWARD;
		bpf_map_update_elem(&lb_sock_ct, &fwd, &v, BPF_ANY);
	}
	lb_sock_key(ctx, &reply, to.addr, to.port);
	v.dir = LB_CT_REPLY;
	bpf_map_update_elem(&lb_sock_ct, &reply, &v, BPF_ANY);
	if (lb_conn_reports && !sendmsg && key.proto == IPPROTO_TCP)
		lb_conn_watch_connect(ctx);
	lb_count(rev_nat_id, backend_id, new_flow ? 1 : 0, sendmsg ? 1 : 0, 0);
	return 1;
}

/* lb_sock_reverse shows the frontend where the socket sees its backend. */
static __always_inline int lb_sock_reverse(struct bpf_sock_addr *ctx, bool v6)
{
	struct lb_ct_key k = {};
	struct lb_ct_value *ct;
	struct lb_rev_nat_value fe;
	__u8 addr[16];
	__u32 id;

	lb_sock_addr(ctx, v6, addr);
	lb_sock_key(ctx, &k, addr, (__be16)ctx->user_port);
	ct = bpf_map_lookup_elem(&lb_sock_ct, &k);
	if (!ct || ct->dir != LB_CT_REPLY)
		return 1;
	id = ct->rev_nat_id;
	if (lb_rev_nat_lookup(id, &fe))
		lb_sock_set_addr(ctx, v6, fe.addr, fe.port);
	return 1;
}

/*
 * lb_sock_release deletes, when a socket is closed, the reply entry its
 * connect() wrote (by its cookie and peer, which the socket still has).
 * Closed sockets then leave nothing in lb_sock_ct for the LRU to evict:
 * a connect()'s insert takes the element a closed socket freed, still in
 * the cache, instead of evicting a cold one (the work moves to close(),
 * docs/performance.md), and a long-lived socket's entry, which
 * getpeername() needs, is never pushed out by the sockets that came and
 * went since. An unconnected UDP socket's entries (one pair
 * per frontend it sent to) are not found from the socket: the LRU takes
 * them as before.
 */
SEC("cgroup/sock_release")
int lb_sock_release(struct bpf_sock *sk)
{
	struct lb_ct_key k = { .kind = LB_CT_SOCKET };
	__u64 cookie;
	__u32 *w = (__u32 *)k.dst;

	if (sk->protocol != IPPROTO_TCP && sk->protocol != IPPROTO_UDP)
		return 1;
	if (sk->family == AF_INET6) {
		w[0] = sk->dst_ip6[0];
		w[1] = sk->dst_ip6[1];
		w[2] = sk->dst_ip6[2];
		w[3] = sk->dst_ip6[3];
		if (!(w[0] | w[1] | w[2] | w[3]))
			return 1; /* never connected */
	} else if (sk->family == AF_INET) {
		w[2] = bpf_htonl(0x0000ffff);
		w[3] = sk->dst_ip4;
		if (!w[3])
			return 1;
	} else {
		return 1;
	}
	cookie = bpf_get_socket_cookie(sk);
	__builtin_memcpy(k.src, &cookie, sizeof(cookie));
	k.dport = (__be16)sk->dst_port;
	k.proto = sk->protocol;
	bpf_map_delete_elem(&lb_sock_ct, &k);
	return 1;
}

SEC("cgroup/connect4")
int lb_connect4(struct bpf_sock_addr *ctx) { return lb_sock_forward(ctx, false, false); }

SEC("cgroup/connect6")
int lb_connect6(struct bpf_sock_addr *ctx) { return lb_sock_forward(ctx, true, false); }

SEC("cgroup/sendmsg4")
int lb_sendmsg4(struct bpf_sock_addr *ctx) { return lb_sock_forward(ctx, false, true); }

SEC("cgroup/sendmsg6")
int lb_sendmsg6(struct bpf_sock_addr *ctx) { return lb_sock_forward(ctx, true, true); }

SEC("cgroup/recvmsg4")
int lb_recvmsg4(struct bpf_sock_addr *ctx) { return lb_sock_reverse(ctx, false); }

SEC("cgroup/recvmsg6")
int lb_recvmsg6(struct bpf_sock_addr *ctx) { return lb_sock_reverse(ctx, true); }

SEC("cgroup/getpeername4")
int lb_getpeername4(struct bpf_sock_addr *ctx) { return lb_sock_reverse(ctx, false); }

SEC("cgroup/getpeername6")
int lb_getpeername6(struct bpf_sock_addr *ctx) { return lb_sock_reverse(ctx, true); }

#endif /* __LBSTATE_SOCK_H */
