/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lb_sock_ops (a sock_ops program, on the socket programs' cgroup): how
 * each connect() that socket load balancing sent to a backend ends, for
 * passive failure accrual (conn.h). connect4/6 ask for the state changes
 * of the sockets they balance (Linux 6.10+; before, lb_sock_ops asks at
 * the SYN, TCP_CONNECT_CB, if lb_sock_ct holds the reply entry connect()
 * wrote for the socket); then SYN_SENT -> ESTABLISHED is a success, and
 * SYN_SENT -> CLOSE a failure by the socket's error: ECONNREFUSED (a RST),
 * ETIMEDOUT (the kernel gave up retrying the SYN), or none: the
 * application gave up first, which counts as a timeout if the SYN was
 * sent again (no answer within the retransmission timeout) and is not
 * judged otherwise. After the first change the socket's state changes
 * are not asked for any more: a connection costs one run that does more
 * than return (two before Linux 6.10: the lookup at the SYN), and one
 * more that returns (CLOSE -> SYN_SENT, with the flag set at connect()).
 */
#ifndef __LBSTATE_SOCKOPS_H
#define __LBSTATE_SOCKOPS_H

#ifndef ETIMEDOUT
#define ETIMEDOUT 110
#endif

#define LB_TCP_SYN_SENT 2
#define LB_TCP_CLOSE    7


/* lb_sockops_peer fills e with the socket's peer (its backend). */
static __always_inline void lb_sockops_peer(struct bpf_sock_ops *ctx, struct lb_conn_event *e)
{
	__u32 *w = (__u32 *)e->addr, last;

	/* barrier_var: the loads stay in their branches, else clang merges
	 * them into one load through a computed context pointer, which the
	 * verifier refuses. */
	if (ctx->family == AF_INET6) {
		w[0] = ctx->remote_ip6[0];
		w[1] = ctx->remote_ip6[1];
		w[2] = ctx->remote_ip6[2];
		last = ctx->remote_ip6[3];
		barrier_var(last);
	} else {
		w[0] = 0;
		w[1] = 0;
		w[2] = bpf_htonl(0x0000ffff);
		last = ctx->remote_ip4;
		barrier_var(last);
	}
	w[3] = last;
	/* The kernel puts the port (network order) in the upper 16 bits on a
	 * little-endian machine, the only one this object is built for. */
	e->port = (__be16)(ctx->remote_port >> 16);
}

/* lb_sockops_connect asks for the state changes of a balanced socket. */
static __always_inline int lb_sockops_connect(struct bpf_sock_ops *ctx)
{
	struct lb_conn_event e = {};
	struct lb_ct_key k = { .proto = IPPROTO_TCP, .kind = LB_CT_SOCKET };
	struct lb_ct_value *ct;
	__u64 cookie;

	if (ctx->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_STATE_CB_FLAG)
		return 1; /* asked for at connect() (conn.h) */
	cookie = bpf_get_socket_cookie(ctx);
	lb_sockops_peer(ctx, &e);
	__builtin_memcpy(k.src, &cookie, sizeof(cookie));
	__builtin_memcpy(k.dst, e.addr, 16);
	k.dport = e.port;
	ct = bpf_map_lookup_elem(&lb_sock_ct, &k);
	if (ct && ct->dir == LB_CT_REPLY)
		bpf_sock_ops_cb_flags_set(ctx, ctx->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
	return 1;
}

/* lb_sockops_state reports how a balanced socket's connect() ended. */
static __always_inline int lb_sockops_state(struct bpf_sock_ops *ctx)
{
	struct lb_conn_event e = { .source = LB_CONN_SOCKET };
	struct bpf_sock *sk;
	struct sock *s;
	int err = 0;

	if (ctx->args[0] != LB_TCP_SYN_SENT)
		return 1;
	bpf_sock_ops_cb_flags_set(ctx, ctx->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_STATE_CB_FLAG);
	if (ctx->args[1] == LB_TCP_CLOSE) {
		sk = ctx->sk;
		s = sk ? (struct sock *)bpf_skc_to_tcp_sock(sk) : NULL;
		if (s)
			err = s->sk_err;
		if (err == ECONNREFUSED)
			e.result = LB_CONN_REFUSED;
		else if (err == ETIMEDOUT || (err == 0 && ctx->total_retrans > 0))
			e.result = LB_CONN_TIMEOUT;
		else if (err)
			e.result = LB_CONN_ERROR;
		else
			return 1; /* given up before any retransmission: not judged */
	}
	lb_sockops_peer(ctx, &e);
	lb_report_conn(&e);
	return 1;
}

SEC("sockops")
int lb_sock_ops(struct bpf_sock_ops *ctx)
{
	if (!lb_conn_reports)
		return 1;
	switch (ctx->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		return lb_sockops_connect(ctx);
	case BPF_SOCK_OPS_STATE_CB:
		return lb_sockops_state(ctx);
	}
	return 1;
}

#endif /* __LBSTATE_SOCKOPS_H */
